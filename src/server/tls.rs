//! Serving an axum router over TLS (the catalog server when a certificate is
//! configured), or over plain HTTP otherwise.

use anyhow::{Context, Result};
use axum::Router;
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::service::TowerToHyperService;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use std::path::Path;
use std::sync::Arc;

/// Loads a PEM certificate chain and private key into a server configuration.
pub fn load(cert: &Path, key: &Path) -> Result<Arc<rustls::ServerConfig>> {
    let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(cert)
        .with_context(|| format!("reading TLS certificate {}", cert.display()))?
        .collect::<Result<_, _>>()
        .with_context(|| format!("parsing TLS certificate {}", cert.display()))?;
    anyhow::ensure!(
        !certs.is_empty(),
        "no certificate found in {}",
        cert.display()
    );
    let key = PrivateKeyDer::from_pem_file(key)
        .with_context(|| format!("reading TLS private key {}", key.display()))?;
    let mut config = rustls::ServerConfig::builder()
        .with_no_client_auth()
        .with_single_cert(certs, key)
        .context("TLS certificate and key do not match")?;
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Ok(Arc::new(config))
}

/// Serves `router` on `listener`, with TLS when `tls` is given.
pub async fn serve(
    listener: tokio::net::TcpListener,
    router: Router,
    tls: Option<Arc<rustls::ServerConfig>>,
) -> std::io::Result<()> {
    let Some(tls) = tls else {
        return axum::serve(listener, router).await;
    };
    let acceptor = tokio_rustls::TlsAcceptor::from(tls);
    loop {
        let (stream, peer) = listener.accept().await?;
        let acceptor = acceptor.clone();
        let service = TowerToHyperService::new(router.clone());
        tokio::spawn(async move {
            let stream = match acceptor.accept(stream).await {
                Ok(s) => s,
                Err(e) => {
                    tracing::debug!(%peer, error = %e, "TLS handshake failed");
                    return;
                }
            };
            let builder = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new());
            if let Err(e) = builder
                .serve_connection(TokioIo::new(stream), service)
                .await
            {
                tracing::debug!(%peer, error = %e, "connection ended with an error");
            }
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::routing::get;

    #[tokio::test]
    async fn serves_https_with_the_configured_certificate() {
        let _ = rustls::crypto::aws_lc_rs::default_provider().install_default();
        let dir = tempfile::tempdir().expect("tempdir");
        let pki = crate::testenv::pki::generate(dir.path()).expect("pki");
        let config = load(&pki.serving_cert, &pki.serving_key).expect("load");
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let port = listener.local_addr().expect("addr").port();
        let router = Router::new().route("/ping", get(|| async { "pong" }));
        let server = tokio::spawn(serve(listener, router, Some(config)));

        let client = reqwest::Client::builder()
            .add_root_certificate(
                reqwest::Certificate::from_pem(pki.ca_pem.as_bytes()).expect("ca"),
            )
            .build()
            .expect("client");
        let body = client
            .get(format!("https://127.0.0.1:{port}/ping"))
            .send()
            .await
            .expect("https request")
            .text()
            .await
            .expect("body");
        assert_eq!(body, "pong");
        // A client that does not trust the CA is refused.
        let untrusted = reqwest::get(format!("https://127.0.0.1:{port}/ping")).await;
        assert!(untrusted.is_err());
        server.abort();
    }

    #[test]
    fn mismatched_or_missing_files_are_clear_errors() {
        let dir = tempfile::tempdir().expect("tempdir");
        let err =
            load(&dir.path().join("nope.crt"), &dir.path().join("nope.key")).expect_err("missing");
        assert!(format!("{err:#}").contains("nope.crt"), "{err:#}");
        let a = crate::testenv::pki::generate(&dir.path().join("a")).expect("pki");
        let b = crate::testenv::pki::generate(&dir.path().join("b")).expect("pki");
        let err = load(&a.serving_cert, &b.serving_key).expect_err("mismatch");
        assert!(format!("{err:#}").contains("do not match"), "{err:#}");
    }
}
