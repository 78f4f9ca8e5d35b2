//! TLS of every server the controller runs (catalog content, metrics and profiling,
//! catalogd's admission webhook): [`policy`] turns the options — minimum protocol
//! version, cipher suites and key exchange groups, named as in the Kubernetes
//! ecosystem's flags (`--tls-min-version VersionTLS12|VersionTLS13`,
//! `--tls-cipher-suites` with IANA names, curves as Go and OpenSSL name them) or as
//! upstream's `--tls-profile` maps them (`crate::cli::upstream`) — into what rustls
//! enables, and [`build`] is the one place a rustls `ServerConfig` is made from it,
//! whatever serves the certificate (a PEM pair read once here, or the metrics server's
//! watched pair). Names rustls cannot serve (CBC, RSA key exchange, RC4 and 3DES
//! suites, TLS 1.0/1.1, secp521r1) are refused, naming them. Among the suites
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
use tokio_rustls::rustls::crypto::SupportedKxGroup;
use tokio_rustls::rustls::server::ResolvesServerCert;

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
    /// Key exchange groups (checked with [`kx_group`]), in order of preference;
    /// empty = rustls' defaults.
    pub groups: Vec<String>,
}

/// What a [`TlsOptions`] enables, as rustls takes it.
#[derive(Debug)]
pub struct Policy {
    pub versions: Vec<&'static rustls::SupportedProtocolVersion>,
    /// In the server's order of preference.
    pub suites: Vec<SupportedCipherSuite>,
    /// In the server's order of preference.
    pub groups: Vec<&'static dyn SupportedKxGroup>,
}

/// Cipher suites Go's `crypto/tls` knows (`tls.CipherSuites()` and
/// `tls.InsecureCipherSuites()`, Go 1.24) that rustls does not implement: CBC, RSA key
/// exchange, RC4 and 3DES suites.
const GO_ONLY_SUITES: [&str; 16] = [
    "TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA",
    "TLS_ECDHE_ECDSA_WITH_AES_256_CBC_SHA",
    "TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA",
    "TLS_ECDHE_RSA_WITH_AES_256_CBC_SHA",
    "TLS_RSA_WITH_RC4_128_SHA",
    "TLS_RSA_WITH_3DES_EDE_CBC_SHA",
    "TLS_RSA_WITH_AES_128_CBC_SHA",
    "TLS_RSA_WITH_AES_256_CBC_SHA",
    "TLS_RSA_WITH_AES_128_CBC_SHA256",
    "TLS_RSA_WITH_AES_128_GCM_SHA256",
    "TLS_RSA_WITH_AES_256_GCM_SHA384",
    "TLS_ECDHE_ECDSA_WITH_RC4_128_SHA",
    "TLS_ECDHE_RSA_WITH_RC4_128_SHA",
    "TLS_ECDHE_RSA_WITH_3DES_EDE_CBC_SHA",
    "TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA256",
    "TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA256",
];

/// Key exchange groups by the names upstream's `--tls-custom-curves` takes (Go's
/// and OpenSSL's; `secp256r1` is IANA's name of `prime256v1`).
fn known_groups() -> [(&'static str, &'static dyn SupportedKxGroup); 6] {
    use rustls::crypto::aws_lc_rs::kx_group;
    [
        ("X25519MLKEM768", kx_group::X25519MLKEM768),
        ("X25519", kx_group::X25519),
        ("prime256v1", kx_group::SECP256R1),
        ("secp256r1", kx_group::SECP256R1),
        ("secp384r1", kx_group::SECP384R1),
        ("SecP256r1MLKEM768", kx_group::SECP256R1MLKEM768),
    ]
}

/// Groups Go knows that rustls does not implement.
const GO_ONLY_GROUPS: [&str; 2] = ["secp521r1", "SecP384r1MLKEM1024"];

/// The key exchange group named `name`, or an error naming it (and, for one rustls
/// does not implement, saying so).
pub fn kx_group(name: &str) -> Result<&'static dyn SupportedKxGroup, String> {
    let wanted = name.trim();
    if let Some((_, g)) = known_groups().into_iter().find(|(n, _)| *n == wanted) {
        return Ok(g);
    }
    let names: Vec<&str> = known_groups().iter().map(|(n, _)| *n).collect();
    if GO_ONLY_GROUPS.contains(&wanted) {
        return Err(format!(
            "curve {wanted} is not supported here (rustls does not implement it); supported: {}",
            names.join(", ")
        ));
    }
    Err(format!(
        "unknown curve {wanted:?}; supported: {}",
        names.join(", ")
    ))
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
            let what = if GO_ONLY_SUITES.contains(&wanted) {
                format!("cipher suite {wanted} is not supported here (rustls does not implement CBC, RSA key exchange, RC4 or 3DES suites)")
            } else {
                format!("unknown or unsupported cipher suite {wanted:?}")
            };
            format!("{what}; supported: {}", names.join(", "))
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

/// What `options` enables: the protocol versions from the minimum, the suites
/// ([`suites`]) and the key exchange groups (named ones in the given order, else
/// rustls' defaults). Pure: the same for every server.
pub fn policy(options: &TlsOptions) -> Result<Policy, TlsError> {
    let versions: Vec<&'static rustls::SupportedProtocolVersion> = match options.min_version {
        MinVersion::Tls12 => vec![&rustls::version::TLS13, &rustls::version::TLS12],
        MinVersion::Tls13 => vec![&rustls::version::TLS13],
    };
    let groups = if options.groups.is_empty() {
        rustls::crypto::aws_lc_rs::DEFAULT_KX_GROUPS.to_vec()
    } else {
        let mut out: Vec<&'static dyn SupportedKxGroup> = Vec::new();
        for name in &options.groups {
            let g = kx_group(name).map_err(TlsError::Config)?;
            if !out.iter().any(|o| o.name() == g.name()) {
                out.push(g);
            }
        }
        out
    };
    Ok(Policy {
        versions,
        suites: suites(&options.cipher_suites)?,
        groups,
    })
}

/// rustls' builder for `options` up to the certificate: checks that the versions,
/// suites and groups go together (a suite usable with some version, a group for
/// every suite's key exchange).
fn builder(
    options: &TlsOptions,
) -> Result<rustls::ConfigBuilder<rustls::ServerConfig, rustls::WantsVerifier>, TlsError> {
    let policy = policy(options)?;
    let provider = rustls::crypto::CryptoProvider {
        // TLS 1.3 AES-GCM records by ring's VAES code (super::gcm).
        cipher_suites: policy
            .suites
            .into_iter()
            .map(super::gcm::records_by_ring)
            .collect(),
        kx_groups: policy.groups,
        ..rustls::crypto::aws_lc_rs::default_provider()
    };
    rustls::ServerConfig::builder_with_provider(Arc::new(provider))
        .with_protocol_versions(&policy.versions)
        .map_err(|e| TlsError::Config(e.to_string()))
}

/// Whether `options` make a server configuration (so flags are checked at start,
/// before any certificate is read).
pub fn validate(options: &TlsOptions) -> Result<(), TlsError> {
    builder(options).map(|_| ())
}

/// The one place a server configuration is made: `options` ([`policy`]), the
/// certificate from `resolver`, ALPN `alpn` (in order of preference), the server's
/// preference among the suites both sides enable.
pub fn build(
    options: &TlsOptions,
    resolver: Arc<dyn ResolvesServerCert>,
    alpn: &[&[u8]],
) -> Result<Arc<rustls::ServerConfig>, TlsError> {
    let mut config = builder(options)?
        .with_no_client_auth()
        .with_cert_resolver(resolver);
    config.alpn_protocols = alpn.iter().map(|p| p.to_vec()).collect();
    // The server's preference among the suites both sides enable (as Go's server does
    // with AES hardware), not the client's: rustls clients list AES-256-GCM first.
    config.ignore_client_order = true;
    Ok(Arc::new(config))
}

/// [`server_config`] with the given options ([`build`]). ALPN offers HTTP/2 and
/// HTTP/1.1.
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
    let provider = rustls::crypto::aws_lc_rs::default_provider();
    let certified = rustls::sign::CertifiedKey::from_der(certs, key, &provider)
        .map_err(|e| TlsError::Config(e.to_string()))?;
    let resolver = Arc::new(rustls::sign::SingleCertAndKey::from(certified));
    build(options, resolver, &[b"h2", b"http/1.1"])
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
            err.contains("TLS_RSA_WITH_AES_128_CBC_SHA is not supported here (rustls")
                && err.contains("TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256"),
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

    #[test]
    fn policy_maps_versions_suites_and_groups() {
        let default = policy(&TlsOptions::default()).unwrap();
        assert_eq!(default.versions.len(), 2);
        assert_eq!(
            default.groups.len(),
            rustls::crypto::aws_lc_rs::DEFAULT_KX_GROUPS.len()
        );
        let strict = policy(&TlsOptions {
            min_version: MinVersion::Tls13,
            cipher_suites: Vec::new(),
            groups: ["secp384r1", "X25519", "prime256v1", "secp256r1"]
                .map(String::from)
                .to_vec(),
        })
        .unwrap();
        assert_eq!(strict.versions, [&rustls::version::TLS13]);
        let groups: Vec<_> = strict.groups.iter().map(|g| g.name()).collect();
        use rustls::NamedGroup;
        // in the given order; secp256r1 is prime256v1's other name
        assert_eq!(
            groups,
            [
                NamedGroup::secp384r1,
                NamedGroup::X25519,
                NamedGroup::secp256r1
            ]
        );
        for (bad, says) in [
            ("secp521r1", "curve secp521r1 is not supported here (rustls"),
            ("SecP384r1MLKEM1024", "rustls does not implement"),
            ("P-999", "unknown curve \"P-999\""),
        ] {
            let err = policy(&TlsOptions {
                groups: vec![bad.into()],
                ..Default::default()
            })
            .unwrap_err()
            .to_string();
            assert!(err.contains(says), "{err}");
        }
        assert!(kx_group("X25519MLKEM768").is_ok() && kx_group("SecP256r1MLKEM768").is_ok());
    }

    #[test]
    fn go_only_cipher_suites_are_named_when_refused() {
        for name in GO_ONLY_SUITES {
            let err = cipher_suite(name).unwrap_err();
            assert!(
                err.starts_with(&format!("cipher suite {name} is not supported here")),
                "{err}"
            );
        }
    }
}
