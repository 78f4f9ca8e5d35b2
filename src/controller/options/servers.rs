//! Options of the controller's servers: the catalog server's connection limits and
//! the TLS versions, cipher suites and key exchange groups of every TLS server
//! ([`CatalogServerArgs`]), and how `/metrics` and the profiling endpoints are
//! protected ([`MetricsServingArgs`]).

use super::parse_positive_seconds;
use std::path::PathBuf;

/// The protection of `/metrics` (as controller-runtime's secure metrics serving with
/// `filters.WithAuthenticationAndAuthorization`) and the opt-in profiling endpoints.
#[derive(clap::Args, Debug, Clone, PartialEq, Eq)]
pub struct MetricsServingArgs {
    /// Serve /metrics over HTTPS and answer only requests whose bearer token passes a
    /// TokenReview and a SubjectAccessReview (`get` on the request path, e.g. the
    /// ClusterRole `olmv1-metrics-reader`); `--metrics-secure=false`: plain HTTP,
    /// without authentication.
    #[arg(
        long,
        default_value_t = true,
        action = clap::ArgAction::Set,
        num_args = 0..=1,
        require_equals = true,
        default_missing_value = "true"
    )]
    pub metrics_secure: bool,

    /// Directory holding the metrics server's certificate and key (--metrics-cert-name,
    /// --metrics-cert-key), e.g. a mounted cert-manager Secret; re-read when the files
    /// change. Without it: a self-signed certificate made at start.
    #[arg(long, alias = "metrics-cert-dir")]
    pub metrics_cert_path: Option<PathBuf>,

    /// File name of the certificate (PEM chain) in --metrics-cert-path.
    #[arg(long, default_value = "tls.crt")]
    pub metrics_cert_name: String,

    /// File name of the private key (PEM) in --metrics-cert-path.
    #[arg(long, default_value = "tls.key")]
    pub metrics_cert_key: String,

    /// Address of the profiling endpoints `/debug/pprof/profile?seconds=N` (CPU) and
    /// `/debug/pprof/heap` (needs `_RJEM_MALLOC_CONF=prof:true`), protected as
    /// /metrics is (with --metrics-secure=false only a loopback address is accepted).
    /// `0` or empty: off (the default).
    #[arg(long, default_value = "0")]
    pub pprof_bind_address: String,
}

impl Default for MetricsServingArgs {
    /// The command-line defaults.
    fn default() -> Self {
        MetricsServingArgs {
            metrics_secure: true,
            metrics_cert_path: None,
            metrics_cert_name: "tls.crt".into(),
            metrics_cert_key: "tls.key".into(),
            pprof_bind_address: "0".into(),
        }
    }
}

/// A `--tls-curves` value: the name, when [`crate::server::tls::kx_group`] knows it.
fn parse_curve(name: &str) -> Result<String, String> {
    crate::server::tls::kx_group(name).map(|_| name.trim().to_string())
}

/// Flags of the catalog server's connections, and TLS of every server (src/server/conn/, tls.rs).
#[derive(clap::Args, Debug, Clone)]
pub struct CatalogServerArgs {
    /// Lowest TLS version the TLS servers (catalog server, metrics and profiling,
    /// webhook) accept: VersionTLS12 or VersionTLS13.
    #[arg(long, default_value = "VersionTLS12")]
    pub tls_min_version: crate::server::tls::MinVersion,

    /// Cipher suites of the TLS servers, IANA names, comma-separated (default: the
    /// secure defaults: ECDHE with AES-GCM or ChaCha20-Poly1305). Naming only TLS 1.2
    /// suites leaves the TLS 1.3 ones enabled, as Go does; unknown names stop the start.
    #[arg(long, value_delimiter = ',', value_parser = crate::server::tls::parse_cipher_suite)]
    pub tls_cipher_suites: Vec<String>,

    /// Key exchange groups of the TLS servers in order of preference, comma-separated:
    /// X25519MLKEM768, X25519, prime256v1 (or secp256r1), secp384r1, SecP256r1MLKEM768
    /// (default: rustls' defaults); unknown names stop the start.
    #[arg(long, value_delimiter = ',', value_parser = parse_curve)]
    pub tls_curves: Vec<String>,

    /// Connections the catalog server serves at once; above it a new connection
    /// evicts the longest idle one (or one stalled on its request past a second), and
    /// waits only while every connection is busy.
    #[arg(default_value_t = 512, value_parser = clap::value_parser!(u32).range(1..), long = "catalog-server-max-connections")]
    pub max_connections: u32,

    /// Connections to the catalog server from one source address at once; above it
    /// that address's own idle connections are evicted first, and a new connection is
    /// closed only when all of them are busy.
    #[arg(default_value_t = 128, value_parser = clap::value_parser!(u32).range(1..), long = "catalog-server-max-connections-per-peer")]
    pub max_connections_per_peer: u32,

    /// Largest request head (request line and headers) of the catalog server, bytes;
    /// larger requests get 431.
    #[arg(default_value_t = 32 << 10, value_parser = clap::value_parser!(u32).range(1024..), long = "catalog-server-max-header-bytes")]
    pub max_header_bytes: u32,

    /// Time a catalog server client gets to send a whole request head (and to
    /// complete the TLS handshake), seconds.
    #[arg(default_value = "10s", value_parser = parse_positive_seconds, long = "catalog-server-read-header-timeout")]
    pub read_header_timeout: std::time::Duration,

    /// Time a catalog server client gets to send a whole request body once its head
    /// is in; later requests are answered 408 and their connection closed.
    #[arg(default_value = "10s", value_parser = parse_positive_seconds, long = "catalog-server-body-timeout")]
    pub body_timeout: std::time::Duration,

    /// Time a keep-alive connection to the catalog server may stay without requests.
    #[arg(default_value = "30s", value_parser = parse_positive_seconds, long = "catalog-server-idle-timeout")]
    pub idle_timeout: std::time::Duration,

    /// Time the catalog server gets to write one response.
    #[arg(default_value = "300s", value_parser = parse_positive_seconds, long = "catalog-server-write-timeout")]
    pub write_timeout: std::time::Duration,
}

impl Default for CatalogServerArgs {
    /// The flags' defaults.
    fn default() -> Self {
        #[derive(clap::Parser)]
        struct Defaults {
            #[command(flatten)]
            args: CatalogServerArgs,
        }
        <Defaults as clap::Parser>::try_parse_from(["olmv1"])
            .map(|d| d.args)
            .unwrap_or_else(|e| panic!("catalog server flag defaults: {e}"))
    }
}

impl CatalogServerArgs {
    /// The catalog server's connection limits.
    pub fn limits(&self) -> crate::server::conn::Limits {
        crate::server::conn::Limits {
            max_connections: self.max_connections as usize,
            max_connections_per_peer: self.max_connections_per_peer as usize,
            max_header_bytes: self.max_header_bytes as usize,
            header_timeout: self.read_header_timeout,
            body_timeout: self.body_timeout,
            idle_timeout: self.idle_timeout,
            write_timeout: self.write_timeout,
            ..crate::server::conn::Limits::default()
        }
    }

    /// The TLS options of every server (catalog, metrics and profiling, webhook).
    pub fn tls_options(&self) -> crate::server::tls::TlsOptions {
        crate::server::tls::TlsOptions {
            min_version: self.tls_min_version,
            cipher_suites: self.tls_cipher_suites.clone(),
            groups: self.tls_curves.clone(),
        }
    }
}

impl MetricsServingArgs {
    /// The profiling address, `None` when profiling is off (`0` or empty, as upstream).
    pub fn pprof_address(&self) -> Option<&str> {
        let address = self.pprof_bind_address.trim();
        (!address.is_empty() && address != "0").then_some(address)
    }

    /// The certificate and key files of --metrics-cert-path, if given.
    pub fn cert_files(&self) -> Option<(PathBuf, PathBuf)> {
        let dir = self.metrics_cert_path.as_ref()?;
        Some((
            dir.join(&self.metrics_cert_name),
            dir.join(&self.metrics_cert_key),
        ))
    }
}

#[cfg(test)]
mod metrics_serving_tests {
    use super::MetricsServingArgs;
    use clap::Parser;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        args: MetricsServingArgs,
    }

    fn parse(args: &[&str]) -> Result<MetricsServingArgs, clap::Error> {
        Cli::try_parse_from(std::iter::once("x").chain(args.iter().copied())).map(|c| c.args)
    }

    #[test]
    fn defaults_are_secure_self_signed_and_no_profiling() {
        let defaults = parse(&[]).expect("defaults");
        assert_eq!(defaults, MetricsServingArgs::default());
        assert!(defaults.metrics_secure);
        assert_eq!(defaults.cert_files(), None);
        assert_eq!(defaults.pprof_address(), None);
    }

    #[test]
    fn flags_as_upstream() {
        assert!(
            !parse(&["--metrics-secure=false"])
                .expect("false")
                .metrics_secure
        );
        assert!(parse(&["--metrics-secure"]).expect("bare").metrics_secure);
        let dir = parse(&["--metrics-cert-dir", "/certs", "--metrics-cert-name=a.pem"])
            .expect("cert dir");
        assert_eq!(
            dir.cert_files(),
            Some(("/certs/a.pem".into(), "/certs/tls.key".into()))
        );
        for off in ["0", "", " "] {
            let args = parse(&[&format!("--pprof-bind-address={off}")]).expect("pprof");
            assert_eq!(args.pprof_address(), None, "{off:?}");
        }
        let on = parse(&["--pprof-bind-address", "127.0.0.1:6060"]).expect("pprof");
        assert_eq!(on.pprof_address(), Some("127.0.0.1:6060"));
    }
}

#[cfg(test)]
mod catalog_server_tests {
    use super::CatalogServerArgs;
    use clap::Parser;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        args: CatalogServerArgs,
    }

    #[test]
    fn catalog_server_flags_have_sane_defaults_and_refuse_unknown_ciphers() {
        let d = CatalogServerArgs::default().limits();
        assert_eq!(d.max_connections, 512);
        assert_eq!(d.header_timeout, std::time::Duration::from_secs(10));
        // The flags' defaults are the servers' own (src/server/conn/ `Limits::default`).
        let own = crate::server::conn::Limits::default();
        assert_eq!(d.max_connections_per_peer, own.max_connections_per_peer);
        assert_eq!(d.body_timeout, own.body_timeout);
        assert_eq!(d.idle_timeout, own.idle_timeout);
        assert_eq!(d.write_timeout, own.write_timeout);
        assert_eq!(d.max_header_bytes, own.max_header_bytes);
        let cli = Cli::try_parse_from([
            "x",
            "--catalog-server-max-connections-per-peer=4",
            "--catalog-server-body-timeout=3s",
        ])
        .unwrap();
        assert_eq!(cli.args.limits().max_connections_per_peer, 4);
        assert_eq!(cli.args.limits().body_timeout.as_secs(), 3);
        let cli = Cli::try_parse_from([
            "x",
            "--tls-min-version=VersionTLS13",
            "--tls-cipher-suites=TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256,TLS_AES_128_GCM_SHA256",
            "--catalog-server-idle-timeout=30s",
        ])
        .unwrap();
        assert_eq!(cli.args.tls_options().cipher_suites.len(), 2);
        assert_eq!(cli.args.limits().idle_timeout.as_secs(), 30);
        let err = Cli::try_parse_from(["x", "--tls-cipher-suites=TLS_RSA_WITH_RC4_128_SHA"])
            .err()
            .unwrap()
            .to_string();
        assert!(err.contains("rustls does not implement"), "{err}");
        let cli = Cli::try_parse_from(["x", "--tls-curves=X25519,secp384r1"]).unwrap();
        assert_eq!(cli.args.tls_options().groups, ["X25519", "secp384r1"]);
        assert!(Cli::try_parse_from(["x", "--tls-curves=secp521r1"]).is_err());
        for bad in [
            "--tls-min-version=VersionTLS10",
            "--catalog-server-max-connections=0",
            "--catalog-server-read-header-timeout=0",
            "--catalog-server-max-connections-per-peer=0",
            "--catalog-server-body-timeout=0",
        ] {
            assert!(Cli::try_parse_from(["x", bad]).is_err(), "{bad}");
        }
    }
}
