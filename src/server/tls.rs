//! TLS for the catalog server: a certificate chain and private key from PEM files (as
//! catalogd's `--tls-cert`/`--tls-key`), the minimum protocol version and the cipher
//! suites named as in the Kubernetes ecosystem's flags (`--tls-min-version
//! VersionTLS12|VersionTLS13`, `--tls-cipher-suites` with IANA names). Among the suites
//! both sides enable, the server's preference decides, as in Go's `crypto/tls` on CPUs
//! with AES instructions: AES-128-GCM, then AES-256-GCM, then ChaCha20-Poly1305 (rustls
//! clients list AES-256-GCM first, which costs a third more CPU per byte on large
//! bodies; the order of `--tls-cipher-suites` does not matter, as in Go). The handshake
//! itself runs in each connection's task ([`super::conn`]), bounded by the server's
//! header timeout, so a slow or hostile client cannot hold up accepting others.

use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::sync::Arc;
use tokio_rustls::rustls;
use tokio_rustls::rustls::SupportedCipherSuite;

#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    #[error("reading TLS certificate {path}: {message}")]
    Cert { path: PathBuf, message: String },
    #[error("reading TLS private key {path}: {message}")]
    Key { path: PathBuf, message: String },
    #[error("TLS configuration: {0}")]
    Config(String),
}

/// The lowest TLS version the server accepts (`VersionTLS12`, `VersionTLS13`, as Go's
/// `crypto/tls` constants are named in Kubernetes flags).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum MinVersion {
    #[default]
    Tls12,
    Tls13,
}

impl FromStr for MinVersion {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "VersionTLS12" => Ok(MinVersion::Tls12),
            "VersionTLS13" => Ok(MinVersion::Tls13),
            "VersionTLS10" | "VersionTLS11" => Err(format!(
                "{s} is not supported: TLS 1.0 and 1.1 are insecure; use VersionTLS12 or VersionTLS13"
            )),
            _ => Err(format!(
                "unknown TLS version {s:?}: use VersionTLS12 or VersionTLS13"
            )),
        }
    }
}

/// TLS settings beyond the key pair.
#[derive(Clone, Debug, Default)]
pub struct TlsOptions {
    pub min_version: MinVersion,
    /// IANA cipher suite names (checked with [`cipher_suite`]); empty = the defaults.
    /// TLS 1.3 suites not named stay enabled unless some TLS 1.3 suite is named (Go
    /// does not let TLS 1.3 suites be configured at all).
    pub cipher_suites: Vec<String>,
}

/// Every suite this server can speak, by IANA name (TLS 1.3 names as IANA writes
/// them: `TLS_AES_128_GCM_SHA256`).
fn known_suites() -> impl Iterator<Item = (String, SupportedCipherSuite)> {
    rustls::crypto::aws_lc_rs::ALL_CIPHER_SUITES
        .iter()
        .map(|s| {
            let name = s.suite().as_str().unwrap_or_default();
            (name.replacen("TLS13_", "TLS_", 1), *s)
        })
}

/// The suite named `name` (IANA name; Go's short aliases without `_SHA256` for the
/// ChaCha20 suites are accepted too), or an error listing the supported names.
pub fn cipher_suite(name: &str) -> Result<SupportedCipherSuite, String> {
    let wanted = name.trim();
    known_suites()
        .find(|(n, _)| {
            n == wanted
                || (n.ends_with("CHACHA20_POLY1305_SHA256") && format!("{wanted}_SHA256") == *n)
        })
        .map(|(_, s)| s)
        .ok_or_else(|| {
            let names: Vec<String> = known_suites().map(|(n, _)| n).collect();
            format!(
                "unknown or unsupported cipher suite {wanted:?}; supported: {}",
                names.join(", ")
            )
        })
}

/// A cipher suite flag value: the name, when [`cipher_suite`] knows it.
pub fn parse_cipher_suite(name: &str) -> Result<String, String> {
    cipher_suite(name).map(|_| name.trim().to_string())
}

/// Rank of a suite in the server's preference (lower first), Go's order: AES-128-GCM,
/// then AES-256-GCM, then ChaCha20-Poly1305 (AES-GCM runs on the CPU's AES and
/// carry-less multiply instructions; rustls' default order puts AES-256 first and the
/// client's order decides).
fn preference(s: &SupportedCipherSuite) -> u8 {
    let name = s.suite().as_str().unwrap_or_default();
    if name.contains("AES_128_GCM") {
        0
    } else if name.contains("AES_256_GCM") {
        1
    } else {
        2
    }
}

/// The enabled suites for `names` (see [`TlsOptions::cipher_suites`]), TLS 1.3 ones
/// first, each in the server's order of preference ([`preference`]; the order of
/// `names` does not matter, as in Go).
fn suites(names: &[String]) -> Result<Vec<SupportedCipherSuite>, TlsError> {
    let mut out = named_suites(names)?;
    out.sort_by_key(|s| (matches!(s, SupportedCipherSuite::Tls12(_)), preference(s)));
    Ok(out)
}

/// The suites `names` enables, unordered (see [`TlsOptions::cipher_suites`]).
fn named_suites(names: &[String]) -> Result<Vec<SupportedCipherSuite>, TlsError> {
    let defaults = rustls::crypto::aws_lc_rs::DEFAULT_CIPHER_SUITES;
    if names.is_empty() {
        return Ok(defaults.to_vec());
    }
    let chosen = names
        .iter()
        .map(|n| cipher_suite(n))
        .collect::<Result<Vec<_>, _>>()
        .map_err(TlsError::Config)?;
    let is13 = |s: &SupportedCipherSuite| matches!(s, SupportedCipherSuite::Tls13(_));
    let mut out: Vec<SupportedCipherSuite> = Vec::new();
    if !chosen.iter().any(is13) {
        out.extend(defaults.iter().filter(|s| is13(s)).copied());
    }
    for s in chosen {
        if !out.iter().any(|o| o.suite() == s.suite()) {
            out.push(s);
        }
    }
    Ok(out)
}

/// A server configuration from a PEM certificate chain and a PEM private key, with the
/// default TLS options.
pub fn server_config(cert: &Path, key: &Path) -> Result<Arc<rustls::ServerConfig>, TlsError> {
    server_config_with(cert, key, &TlsOptions::default())
}

/// [`server_config`] with the given minimum version and cipher suites. ALPN offers
/// HTTP/2 and HTTP/1.1.
pub fn server_config_with(
    cert: &Path,
    key: &Path,
    options: &TlsOptions,
) -> Result<Arc<rustls::ServerConfig>, TlsError> {
    use rustls::pki_types::pem::PemObject;
    use rustls::pki_types::{CertificateDer, PrivateKeyDer};
    let cert_err = |message: String| TlsError::Cert {
        path: cert.to_path_buf(),
        message,
    };
    let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(cert)
        .map_err(|e| cert_err(e.to_string()))?
        .collect::<Result<_, _>>()
        .map_err(|e| cert_err(e.to_string()))?;
    if certs.is_empty() {
        return Err(cert_err("no CERTIFICATE block found".into()));
    }
    let key = PrivateKeyDer::from_pem_file(key).map_err(|e| TlsError::Key {
        path: key.to_path_buf(),
        message: e.to_string(),
    })?;
    let provider = rustls::crypto::CryptoProvider {
        cipher_suites: suites(&options.cipher_suites)?,
        ..rustls::crypto::aws_lc_rs::default_provider()
    };
    let versions: &[&rustls::SupportedProtocolVersion] = match options.min_version {
        MinVersion::Tls12 => &[&rustls::version::TLS13, &rustls::version::TLS12],
        MinVersion::Tls13 => &[&rustls::version::TLS13],
    };
    let mut config = rustls::ServerConfig::builder_with_provider(Arc::new(provider))
        .with_protocol_versions(versions)
        .map_err(|e| TlsError::Config(e.to_string()))?
        .with_no_client_auth()
        .with_single_cert(certs, key)
        .map_err(|e| TlsError::Config(e.to_string()))?;
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    // The server's preference among the suites both sides enable (as Go's server does
    // with AES hardware), not the client's: rustls clients list AES-256-GCM first.
    config.ignore_client_order = true;
    Ok(Arc::new(config))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_and_suites_parse_like_kubernetes_flags() {
        assert_eq!("VersionTLS13".parse::<MinVersion>(), Ok(MinVersion::Tls13));
        assert_eq!("VersionTLS12".parse::<MinVersion>(), Ok(MinVersion::Tls12));
        assert!(
            "VersionTLS11"
                .parse::<MinVersion>()
                .unwrap_err()
                .contains("insecure")
        );
        assert!(
            "tls13"
                .parse::<MinVersion>()
                .unwrap_err()
                .contains("VersionTLS13")
        );
        for name in [
            "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256",
            "TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305",
            "TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256",
            "TLS_AES_256_GCM_SHA384",
        ] {
            assert!(cipher_suite(name).is_ok(), "{name}");
        }
        let err = cipher_suite("TLS_RSA_WITH_AES_128_CBC_SHA").unwrap_err();
        assert!(
            err.contains("unsupported") && err.contains("TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256"),
            "{err}"
        );
        assert!(cipher_suite("nonsense").is_err());
    }

    #[test]
    fn named_tls12_suites_keep_the_tls13_defaults() {
        let s = suites(&["TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256".to_string()]).unwrap();
        let tls12: Vec<_> = s
            .iter()
            .filter(|s| matches!(s, SupportedCipherSuite::Tls12(_)))
            .collect();
        assert_eq!(tls12.len(), 1);
        assert_eq!(s.len(), 1 + 3);
        let only13 = suites(&["TLS_AES_128_GCM_SHA256".to_string()]).unwrap();
        assert_eq!(only13.len(), 1);
        assert!(suites(&["bogus".to_string()]).is_err());
    }

    #[test]
    fn suites_are_in_the_servers_order_of_preference() {
        let names = |s: Vec<SupportedCipherSuite>| -> Vec<String> {
            s.iter()
                .map(|s| s.suite().as_str().unwrap_or_default().to_string())
                .collect()
        };
        let all = names(suites(&[]).unwrap());
        assert_eq!(
            all[..3],
            [
                "TLS13_AES_128_GCM_SHA256",
                "TLS13_AES_256_GCM_SHA384",
                "TLS13_CHACHA20_POLY1305_SHA256"
            ]
        );
        let named = names(
            suites(&[
                "TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305".to_string(),
                "TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384".to_string(),
                "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256".to_string(),
            ])
            .unwrap(),
        );
        assert_eq!(
            named[3..],
            [
                "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256",
                "TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384",
                "TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256"
            ]
        );
    }
}
