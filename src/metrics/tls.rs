//! The certificate of the metrics server (and of catalogd's webhook): from `--metrics-cert-path` (`tls.crt` and
//! `tls.key`, e.g. a mounted cert-manager Secret), re-read when the files change as
//! controller-runtime's certwatcher does, or — without that flag — a self-signed
//! certificate made at start (scrapers then skip verification, as with
//! controller-runtime's generated certificate).
//!
//! The files are checked at most every [`RECHECK`], during a handshake; a renewed pair
//! that cannot be read keeps the previous certificate in service (logged).

use rustls::crypto::CryptoProvider;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::server::{ClientHello, ResolvesServerCert};
use rustls::sign::CertifiedKey;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

/// How often the certificate files are looked at again.
pub const RECHECK: Duration = Duration::from_secs(10);

#[derive(Debug, thiserror::Error)]
pub enum CertError {
    #[error("reading the metrics certificate {path}: {message}")]
    Read { path: PathBuf, message: String },
    #[error("metrics certificate: {0}")]
    Config(String),
}

/// A TLS configuration serving the pair in `files` (certificate, key) when given,
/// else a fresh self-signed certificate, with the versions, suites and groups of
/// `options` ([`crate::server::tls::build`]) and ALPN `alpn`.
pub fn server_config(
    files: Option<(PathBuf, PathBuf)>,
    options: &crate::server::tls::TlsOptions,
    alpn: &[&[u8]],
) -> Result<Arc<rustls::ServerConfig>, CertError> {
    let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
    let resolver: Arc<dyn ResolvesServerCert> = match files {
        Some((cert, key)) => Arc::new(WatchedCert::load(provider.clone(), cert, key)?),
        None => Arc::new(rustls::sign::SingleCertAndKey::from(self_signed(
            &provider,
        )?)),
    };
    crate::server::tls::build(options, resolver, alpn).map_err(|e| CertError::Config(e.to_string()))
}

/// A self-signed certificate for `localhost`, `olmv1-metrics` and the loopback
/// addresses.
fn self_signed(provider: &CryptoProvider) -> Result<CertifiedKey, CertError> {
    let names = ["olmv1-metrics", "localhost", "127.0.0.1", "::1"].map(String::from);
    let generated = rcgen::generate_simple_self_signed(names)
        .map_err(|e| CertError::Config(format!("generating a self-signed certificate: {e}")))?;
    let key = PrivateKeyDer::Pkcs8(generated.signing_key.serialize_der().into());
    certified(provider, vec![generated.cert.der().clone()], key)
}

fn certified(
    provider: &CryptoProvider,
    certs: Vec<CertificateDer<'static>>,
    key: PrivateKeyDer<'static>,
) -> Result<CertifiedKey, CertError> {
    CertifiedKey::from_der(certs, key, provider).map_err(|e| CertError::Config(e.to_string()))
}

/// Reads a PEM certificate chain and private key.
fn read_pair(
    provider: &CryptoProvider,
    cert: &Path,
    key: &Path,
) -> Result<CertifiedKey, CertError> {
    let read_err = |path: &Path, message: String| CertError::Read {
        path: path.to_path_buf(),
        message,
    };
    let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(cert)
        .map_err(|e| read_err(cert, e.to_string()))?
        .collect::<Result<_, _>>()
        .map_err(|e| read_err(cert, e.to_string()))?;
    if certs.is_empty() {
        return Err(read_err(cert, "no CERTIFICATE block found".into()));
    }
    let private = PrivateKeyDer::from_pem_file(key).map_err(|e| read_err(key, e.to_string()))?;
    certified(provider, certs, private)
}

fn modified(path: &Path) -> Option<SystemTime> {
    std::fs::metadata(path).and_then(|m| m.modified()).ok()
}

/// The pair of files, reloaded when their modification times change.
#[derive(Debug)]
struct WatchedCert {
    provider: Arc<CryptoProvider>,
    cert: PathBuf,
    key: PathBuf,
    state: Mutex<Watched>,
}

#[derive(Debug)]
struct Watched {
    current: Arc<CertifiedKey>,
    checked: Instant,
    stamps: (Option<SystemTime>, Option<SystemTime>),
}

impl WatchedCert {
    fn load(provider: Arc<CryptoProvider>, cert: PathBuf, key: PathBuf) -> Result<Self, CertError> {
        let stamps = (modified(&cert), modified(&key));
        let current = Arc::new(read_pair(&provider, &cert, &key)?);
        Ok(WatchedCert {
            provider,
            cert,
            key,
            state: Mutex::new(Watched {
                current,
                checked: Instant::now(),
                stamps,
            }),
        })
    }

    fn current(&self) -> Arc<CertifiedKey> {
        let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        if state.checked.elapsed() < RECHECK {
            return state.current.clone();
        }
        state.checked = Instant::now();
        let stamps = (modified(&self.cert), modified(&self.key));
        if stamps != state.stamps {
            match read_pair(&self.provider, &self.cert, &self.key) {
                Ok(pair) => {
                    tracing::info!(cert = %self.cert.display(), "reloaded the metrics certificate");
                    state.current = Arc::new(pair);
                    state.stamps = stamps;
                }
                Err(e) => tracing::warn!(error = %e, "keeping the previous metrics certificate"),
            }
        }
        state.current.clone()
    }
}

impl ResolvesServerCert for WatchedCert {
    fn resolve(&self, _hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        Some(self.current())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write_pair(dir: &Path, name: &str) -> Vec<u8> {
        let generated =
            rcgen::generate_simple_self_signed(vec![name.to_string()]).expect("certificate");
        std::fs::write(dir.join("tls.crt"), generated.cert.pem()).expect("cert");
        std::fs::write(dir.join("tls.key"), generated.signing_key.serialize_pem()).expect("key");
        generated.cert.der().to_vec()
    }

    #[test]
    fn self_signed_and_files() {
        let options = crate::server::tls::TlsOptions::default();
        let alpn: &[&[u8]] = &[b"h2"];
        assert!(server_config(None, &options, alpn).is_ok());
        let dir = tempfile::tempdir().expect("dir");
        let files = (dir.path().join("tls.crt"), dir.path().join("tls.key"));
        assert!(matches!(
            server_config(Some(files.clone()), &options, alpn),
            Err(CertError::Read { .. })
        ));
        write_pair(dir.path(), "one");
        assert!(server_config(Some(files.clone()), &options, alpn).is_ok());
        let refused = crate::server::tls::TlsOptions {
            groups: vec!["secp521r1".into()],
            ..Default::default()
        };
        let err = server_config(Some(files), &refused, alpn).unwrap_err();
        assert!(err.to_string().contains("secp521r1"), "{err}");
    }

    #[test]
    fn renewed_files_replace_the_certificate() {
        let dir = tempfile::tempdir().expect("dir");
        let first = write_pair(dir.path(), "first");
        let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
        let watched = WatchedCert::load(
            provider,
            dir.path().join("tls.crt"),
            dir.path().join("tls.key"),
        )
        .expect("load");
        assert_eq!(watched.current().cert[0].as_ref(), &first[..]);
        let recheck_now = |w: &WatchedCert| {
            let mut state = w.state.lock().expect("state");
            state.checked = Instant::now() - RECHECK - Duration::from_millis(1);
            // a different stamp, as a renewal within the same second would not show
            state.stamps = (None, None);
        };
        // A broken renewal keeps the previous certificate.
        std::fs::write(dir.path().join("tls.crt"), "garbage").expect("write");
        recheck_now(&watched);
        assert_eq!(watched.current().cert[0].as_ref(), &first[..]);
        let second = write_pair(dir.path(), "second");
        recheck_now(&watched);
        assert_eq!(watched.current().cert[0].as_ref(), &second[..]);
    }
}
