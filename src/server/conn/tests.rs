//! The connection limits on a real socket: raw TCP and TLS clients against [`serve`].

use super::*;
use crate::fbc::store;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

const CAT: &str = "{\"schema\":\"olm.package\",\"name\":\"p\"}\n";
const REQUEST: &[u8] = b"GET /catalogs/cat/api/v1/all HTTP/1.1\r\nHost: x\r\n\r\n";

struct Server {
    addr: SocketAddr,
    _root: tempfile::TempDir,
    _stop: tokio::sync::oneshot::Sender<()>,
}

async fn start(limits: Limits, tls: Option<Arc<rustls::ServerConfig>>) -> Server {
    let root = tempfile::tempdir().unwrap();
    let src = tempfile::tempdir().unwrap();
    std::fs::write(src.path().join("c.json"), CAT).unwrap();
    store(root.path(), "cat", src.path()).unwrap();
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (tx, rx) = tokio::sync::oneshot::channel::<()>();
    let router = crate::server::catalog::router(root.path());
    tokio::spawn(serve(listener, tls, router, limits, async move {
        let _ = rx.await;
    }));
    Server {
        addr,
        _root: root,
        _stop: tx,
    }
}

fn limits() -> Limits {
    Limits {
        header_timeout: Duration::from_secs(5),
        ..Limits::default()
    }
}

/// Reads until the end of one response with a body of `CAT` (or EOF/timeout).
async fn read_response<T: AsyncRead + Unpin>(io: &mut T, within: Duration) -> Option<String> {
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    let deadline = Instant::now() + within;
    loop {
        let n = tokio::time::timeout_at(deadline, io.read(&mut buf))
            .await
            .ok()?
            .ok()?;
        if n == 0 {
            return (!got.is_empty()).then(|| String::from_utf8_lossy(&got).into_owned());
        }
        got.extend_from_slice(&buf[..n]);
        let text = String::from_utf8_lossy(&got).into_owned();
        if text.ends_with(CAT) || text.starts_with("HTTP/1.1 4") {
            return Some(text);
        }
    }
}

/// Whether the peer closed the connection within `within` (EOF or reset).
async fn closed_within<T: AsyncRead + Unpin>(io: &mut T, within: Duration) -> bool {
    let mut buf = [0u8; 1024];
    loop {
        match tokio::time::timeout(within, io.read(&mut buf)).await {
            Err(_) => return false,
            Ok(Ok(0)) | Ok(Err(_)) => return true,
            Ok(Ok(_)) => {}
        }
    }
}

#[tokio::test]
async fn slow_loris_is_disconnected_after_the_header_timeout() {
    let s = start(
        Limits {
            header_timeout: Duration::from_millis(300),
            ..limits()
        },
        None,
    )
    .await;
    let mut tcp = TcpStream::connect(s.addr).await.unwrap();
    let started = std::time::Instant::now();
    tcp.write_all(b"GET /catalogs/cat/api/v1/all HTTP/1.1\r\nHost: x\r\n")
        .await
        .unwrap();
    // One more header line now and then, never the end of the head.
    for _ in 0..2 {
        tokio::time::sleep(Duration::from_millis(100)).await;
        let _ = tcp.write_all(b"X-Slow: 1\r\n").await;
    }
    assert!(closed_within(&mut tcp, Duration::from_secs(3)).await);
    let took = started.elapsed();
    assert!(took >= Duration::from_millis(280), "{took:?}");
    // A client that says nothing at all is cut off too.
    let mut silent = TcpStream::connect(s.addr).await.unwrap();
    assert!(closed_within(&mut silent, Duration::from_secs(3)).await);
}

#[tokio::test]
async fn keep_alive_connections_close_when_idle_and_serve_until_then() {
    let s = start(
        Limits {
            idle_timeout: Duration::from_millis(400),
            ..limits()
        },
        None,
    )
    .await;
    let mut tcp = TcpStream::connect(s.addr).await.unwrap();
    for _ in 0..3 {
        tcp.write_all(REQUEST).await.unwrap();
        let r = read_response(&mut tcp, Duration::from_secs(5))
            .await
            .unwrap();
        assert!(r.starts_with("HTTP/1.1 200"), "{r}");
        tokio::time::sleep(Duration::from_millis(150)).await;
    }
    let started = std::time::Instant::now();
    assert!(closed_within(&mut tcp, Duration::from_secs(3)).await);
    assert!(started.elapsed() >= Duration::from_millis(150));
}

#[tokio::test]
async fn oversized_request_head_gets_431() {
    let s = start(
        Limits {
            max_header_bytes: 2048,
            ..limits()
        },
        None,
    )
    .await;
    let mut tcp = TcpStream::connect(s.addr).await.unwrap();
    let big = format!(
        "GET /catalogs/cat/api/v1/all HTTP/1.1\r\nHost: x\r\nX-Big: {}\r\n\r\n",
        "a".repeat(4096)
    );
    tcp.write_all(big.as_bytes()).await.unwrap();
    let r = read_response(&mut tcp, Duration::from_secs(5))
        .await
        .unwrap();
    assert!(r.starts_with("HTTP/1.1 431"), "{r}");
    // Just below the limit is fine.
    let mut tcp = TcpStream::connect(s.addr).await.unwrap();
    let ok = format!(
        "GET /catalogs/cat/api/v1/all HTTP/1.1\r\nHost: x\r\nX-Big: {}\r\n\r\n",
        "a".repeat(1500)
    );
    tcp.write_all(ok.as_bytes()).await.unwrap();
    let r = read_response(&mut tcp, Duration::from_secs(5))
        .await
        .unwrap();
    assert!(r.starts_with("HTTP/1.1 200"), "{r}");
}

#[tokio::test]
async fn connections_above_the_limit_wait_for_a_free_slot() {
    let s = start(
        Limits {
            max_connections: 1,
            ..limits()
        },
        None,
    )
    .await;
    let mut first = TcpStream::connect(s.addr).await.unwrap();
    first.write_all(REQUEST).await.unwrap();
    assert!(
        read_response(&mut first, Duration::from_secs(5))
            .await
            .is_some()
    );
    // The second connection is not served while the first one stays open...
    let mut second = TcpStream::connect(s.addr).await.unwrap();
    second.write_all(REQUEST).await.unwrap();
    assert!(
        read_response(&mut second, Duration::from_millis(500))
            .await
            .is_none()
    );
    // ...and is as soon as it closes.
    drop(first);
    let r = read_response(&mut second, Duration::from_secs(5))
        .await
        .unwrap();
    assert!(r.starts_with("HTTP/1.1 200"), "{r}");
}

fn tls_client(
    pki: &crate::testenv::pki::Pki,
    versions: &[&'static rustls::SupportedProtocolVersion],
) -> tokio_rustls::TlsConnector {
    let mut roots = rustls::RootCertStore::empty();
    use rustls::pki_types::CertificateDer;
    use rustls::pki_types::pem::PemObject;
    for cert in CertificateDer::pem_file_iter(&pki.ca_cert).unwrap() {
        roots.add(cert.unwrap()).unwrap();
    }
    let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
    let config = rustls::ClientConfig::builder_with_provider(provider)
        .with_protocol_versions(versions)
        .unwrap()
        .with_root_certificates(roots)
        .with_no_client_auth();
    tokio_rustls::TlsConnector::from(Arc::new(config))
}

#[tokio::test]
async fn tls12_clients_are_refused_when_the_minimum_is_tls13() {
    let dir = tempfile::tempdir().unwrap();
    let pki = crate::testenv::pki::generate(dir.path()).unwrap();
    let options = crate::server::tls::TlsOptions {
        min_version: crate::server::tls::MinVersion::Tls13,
        cipher_suites: Vec::new(),
        groups: Vec::new(),
    };
    let config =
        crate::server::tls::server_config_with(&pki.serving_cert, &pki.serving_key, &options)
            .unwrap();
    let s = start(limits(), Some(config)).await;
    let name = rustls::pki_types::ServerName::try_from("localhost").unwrap();
    let old = tls_client(&pki, &[&rustls::version::TLS12]);
    let tcp = TcpStream::connect(s.addr).await.unwrap();
    assert!(old.connect(name.clone(), tcp).await.is_err());
    let new = tls_client(&pki, &[&rustls::version::TLS13]);
    let tcp = TcpStream::connect(s.addr).await.unwrap();
    let mut tls = new.connect(name, tcp).await.unwrap();
    assert_eq!(
        tls.get_ref().1.protocol_version(),
        Some(rustls::ProtocolVersion::TLSv1_3)
    );
    tls.write_all(REQUEST).await.unwrap();
    let r = read_response(&mut tls, Duration::from_secs(5))
        .await
        .unwrap();
    assert!(r.starts_with("HTTP/1.1 200") && r.ends_with(CAT), "{r}");
}

#[tokio::test]
async fn tls12_suites_are_limited_to_the_named_ones() {
    let dir = tempfile::tempdir().unwrap();
    let pki = crate::testenv::pki::generate(dir.path()).unwrap();
    // The test certificate has an ECDSA key: only ECDSA suites can be negotiated.
    let options = crate::server::tls::TlsOptions {
        min_version: crate::server::tls::MinVersion::Tls12,
        cipher_suites: vec!["TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256".into()],
        groups: Vec::new(),
    };
    let config =
        crate::server::tls::server_config_with(&pki.serving_cert, &pki.serving_key, &options)
            .unwrap();
    let s = start(limits(), Some(config)).await;
    let name = rustls::pki_types::ServerName::try_from("localhost").unwrap();
    let tcp = TcpStream::connect(s.addr).await.unwrap();
    let tls = tls_client(&pki, &[&rustls::version::TLS12])
        .connect(name, tcp)
        .await
        .unwrap();
    let suite = tls.get_ref().1.negotiated_cipher_suite().unwrap();
    assert_eq!(
        suite.suite(),
        rustls::CipherSuite::TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256
    );
}

#[tokio::test]
async fn aes_128_gcm_is_preferred_over_the_clients_order() {
    let dir = tempfile::tempdir().unwrap();
    let pki = crate::testenv::pki::generate(dir.path()).unwrap();
    let name = rustls::pki_types::ServerName::try_from("localhost").unwrap();
    // rustls clients list TLS13_AES_256_GCM_SHA384 first.
    let config = crate::server::tls::server_config(&pki.serving_cert, &pki.serving_key).unwrap();
    let s = start(limits(), Some(config)).await;
    let tcp = TcpStream::connect(s.addr).await.unwrap();
    let mut tls = tls_client(&pki, &[&rustls::version::TLS13])
        .connect(name.clone(), tcp)
        .await
        .unwrap();
    let suite = tls.get_ref().1.negotiated_cipher_suite().unwrap();
    assert_eq!(suite.suite(), rustls::CipherSuite::TLS13_AES_128_GCM_SHA256);
    tls.write_all(REQUEST).await.unwrap();
    let r = read_response(&mut tls, Duration::from_secs(5))
        .await
        .unwrap();
    assert!(r.starts_with("HTTP/1.1 200") && r.ends_with(CAT), "{r}");
    // Suites left out by --tls-cipher-suites are not negotiated.
    let options = crate::server::tls::TlsOptions {
        min_version: crate::server::tls::MinVersion::Tls13,
        cipher_suites: vec!["TLS_AES_256_GCM_SHA384".into()],
        groups: Vec::new(),
    };
    let config =
        crate::server::tls::server_config_with(&pki.serving_cert, &pki.serving_key, &options)
            .unwrap();
    let s = start(limits(), Some(config)).await;
    let tcp = TcpStream::connect(s.addr).await.unwrap();
    let mut tls = tls_client(&pki, &[&rustls::version::TLS13])
        .connect(name, tcp)
        .await
        .unwrap();
    let suite = tls.get_ref().1.negotiated_cipher_suite().unwrap();
    assert_eq!(suite.suite(), rustls::CipherSuite::TLS13_AES_256_GCM_SHA384);
    // The server's AES-GCM records are ring's (server::gcm): an aws-lc client reads them.
    tls.write_all(REQUEST).await.unwrap();
    let r = read_response(&mut tls, Duration::from_secs(5))
        .await
        .unwrap();
    assert!(r.starts_with("HTTP/1.1 200") && r.ends_with(CAT), "{r}");
}
