//! Upstream OLM v1's two programs, `operator-controller` and `catalogd`, as this binary
//! runs when invoked by those names (a link or copy named so, as in the image): every
//! flag upstream's binary of that name accepts (same names, Go `pflag` syntax,
//! defaults; klog's flags; `--feature-gates`), mapped onto [`ControllerArgs`] with the
//! matching [`Role`]. What each flag does here is listed in
//! docs/how-to/switch-from-upstream.md. Flags upstream does not know are logged and
//! skipped ([`split_unknown`]) so that a newer upstream manifest still starts.

pub mod gates;
mod klog;
pub mod tls_profile;

use crate::controller::ControllerArgs;
use crate::controller::options::Role;
use clap::Parser;
use std::path::{Path, PathBuf};

pub use klog::KlogFlags;

/// A Go `strconv.ParseBool` value.
pub fn parse_go_bool(value: &str) -> Result<bool, String> {
    match value {
        "1" | "t" | "T" | "true" | "TRUE" | "True" => Ok(true),
        "0" | "f" | "F" | "false" | "FALSE" | "False" => Ok(false),
        _ => Err(format!("{value:?}: strconv.ParseBool: invalid syntax")),
    }
}

/// Flags of upstream's `operator-controller` (cmd/operator-controller/main.go).
#[derive(Parser, Debug)]
#[command(
    name = "operator-controller",
    version,
    about = "operator-controller is the central component of Operator Lifecycle Manager (OLM) v1 (olmv1: the ClusterExtension reconciler)"
)]
pub struct OperatorControllerFlags {
    /// The address for the metrics endpoint. Requires tls-cert and tls-key. (Default: ':8443')
    #[arg(long, default_value = "")]
    pub metrics_bind_address: String,
    /// The address the probe endpoint binds to.
    #[arg(long, default_value = ":8081")]
    pub health_probe_bind_address: String,
    /// The address the pprof endpoint binds to. an empty string or 0 disables pprof
    #[arg(long, default_value = "0")]
    pub pprof_bind_address: String,
    /// The directory of TLS certificate authorities to use for verifying HTTPS connections to the Catalogd web service.
    #[arg(long, default_value = "")]
    pub catalogd_cas_dir: String,
    /// The directory of TLS certificate authorities to use for verifying HTTPS connections to image registries.
    #[arg(long, default_value = "")]
    pub pull_cas_dir: String,
    /// The certificate file used for the metrics server. Required to enable the metrics server. Requires tls-key.
    #[arg(long, default_value = "")]
    pub tls_cert: String,
    /// The key file used for the metrics server. Required to enable the metrics server. Requires tls-cert
    #[arg(long, default_value = "")]
    pub tls_key: String,
    #[command(flatten)]
    pub tls: TlsProfileFlags,
    /// Enable leader election for controller manager. Enabling this will ensure there is only one active controller manager.
    #[arg(long, num_args = 0..=1, require_equals = true, default_missing_value = "true", default_value = "false", value_parser = parse_go_bool)]
    pub leader_elect: bool,
    /// The local directory path used for filesystem based caching
    #[arg(long, default_value = "/var/cache")]
    pub cache_path: String,
    /// Configures the namespace that gets used to deploy system resources.
    #[arg(long, default_value = "")]
    pub system_namespace: String,
    /// The <namespace>/<name> of the global pull secret that is going to be used to pull bundle images.
    #[arg(long, default_value = "")]
    pub global_pull_secret: String,
    /// A set of key=value pairs that describe feature gates for alpha/experimental features. Options are: BoxcutterRuntime, BundleReleaseSupport, DeploymentConfig, HelmChartSupport, PreflightPermissions, SingleOwnNamespaceInstallSupport, SyntheticPermissions, WebhookProviderCertManager, WebhookProviderOpenshiftServiceCA
    #[arg(long, default_value = "")]
    pub feature_gates: Vec<String>,
    #[command(flatten)]
    pub klog: KlogFlags,
    #[command(subcommand)]
    pub command: Option<UpstreamCommand>,
}

/// Flags of upstream's `catalogd` (cmd/catalogd/main.go).
#[derive(Parser, Debug)]
#[command(
    name = "catalogd",
    version,
    about = "catalogd: the ClusterCatalog reconciler and catalog content server of OLM v1 (olmv1)"
)]
pub struct CatalogdFlags {
    /// The address for the metrics endpoint. Requires tls-cert and tls-key. (Default: ':7443')
    #[arg(long, default_value = "")]
    pub metrics_bind_address: String,
    /// The address the probe endpoint binds to.
    #[arg(long, default_value = ":8081")]
    pub health_probe_bind_address: String,
    /// The address the pprof endpoint binds to. an empty string or 0 disables pprof
    #[arg(long, default_value = "0")]
    pub pprof_bind_address: String,
    /// Enable leader election for controller manager
    #[arg(long, num_args = 0..=1, require_equals = true, default_missing_value = "true", default_value = "false", value_parser = parse_go_bool)]
    pub leader_elect: bool,
    /// The namespace catalogd uses for internal state
    #[arg(long, default_value = "")]
    pub system_namespace: String,
    /// The address where catalogs' content will be accessible
    #[arg(long, default_value = ":8443")]
    pub catalogs_server_addr: String,
    /// External address for http(s) server
    #[arg(long, default_value = "catalogd-service.olmv1-system.svc")]
    pub external_address: String,
    /// Directory for file based caching
    #[arg(long, default_value = "/var/cache/")]
    pub cache_dir: String,
    /// Garbage collection interval
    #[arg(long, default_value = "12h", value_parser = crate::controller::options::parse_interval)]
    pub gc_interval: std::time::Duration,
    /// Certificate file for TLS
    #[arg(long, default_value = "")]
    pub tls_cert: String,
    /// Key file for TLS
    #[arg(long, default_value = "")]
    pub tls_key: String,
    #[command(flatten)]
    pub tls: TlsProfileFlags,
    /// Webhook server port (the ClusterCatalog mutating webhook, over TLS with --tls-cert/--tls-key)
    #[arg(long, default_value_t = 9443)]
    pub webhook_server_port: u16,
    /// The directory of TLS certificate authorities to use for verifying HTTPS connections to image registries.
    #[arg(long, default_value = "")]
    pub pull_cas_dir: String,
    /// Global pull secret (<namespace>/<name>)
    #[arg(long, default_value = "")]
    pub global_pull_secret: String,
    /// A set of key=value pairs that describe feature gates for alpha/experimental features. Options are: APIV1MetasHandler, GraphQLCatalogQueries
    #[arg(long, default_value = "")]
    pub feature_gates: Vec<String>,
    #[command(flatten)]
    pub klog: KlogFlags,
    #[command(subcommand)]
    pub command: Option<UpstreamCommand>,
}

/// Upstream's TLS profile flags of both programs (operator-controller v1.11.0's
/// `tlsprofiles.AddFlags`), applied to every TLS server ([`apply_tls_profile`]).
#[derive(clap::Args, Debug)]
pub struct TlsProfileFlags {
    /// The TLS profile to use. One of [custom intermediate modern old]
    #[arg(long, default_value = "intermediate")]
    pub tls_profile: String,
    /// List of ciphers to be used with the custom TLS profile. Use Go-language cipher names
    #[arg(long, value_delimiter = ',')]
    pub tls_custom_ciphers: Vec<String>,
    /// List of curves to be used with the custom TLS profile. Values may consist of [SecP256r1MLKEM768 SecP384r1MLKEM1024 X25519 X25519MLKEM768 prime256v1 secp256r1 secp384r1 secp521r1]
    #[arg(long, value_delimiter = ',')]
    pub tls_custom_curves: Vec<String>,
    /// The TLS version to be used with the custom TLS profile. One of [TLSv1.0 TLSv1.1 TLSv1.2 TLSv1.3] (default TLSv1.2)
    #[arg(long)]
    pub tls_custom_version: Option<String>,
}

/// Upstream's subcommands of both programs.
#[derive(clap::Subcommand, Debug)]
pub enum UpstreamCommand {
    /// Prints version information
    Version,
}

/// What a role's flags become: the controller's arguments, the log level (from `--v`)
/// and the lines to log once logging is set up.
#[derive(Debug)]
pub struct Mapped {
    pub args: ControllerArgs,
    pub log_filter: &'static str,
    pub notes: Vec<String>,
}

/// The `olmv1 controller` arguments with their defaults (and environment).
fn defaults() -> Result<ControllerArgs, String> {
    #[derive(Parser)]
    struct Wrap {
        #[command(flatten)]
        args: ControllerArgs,
    }
    Wrap::try_parse_from(["olmv1"])
        .map(|w| w.args)
        .map_err(|e| e.to_string())
}

/// Go's `:8081` (every interface) as a `host:port` this controller binds.
pub fn bind_address(go: &str) -> String {
    match go.strip_prefix(':') {
        Some(port) => format!("0.0.0.0:{port}"),
        None => go.to_string(),
    }
}

fn non_empty(value: &str) -> Option<PathBuf> {
    (!value.is_empty()).then(|| PathBuf::from(value))
}

/// The system namespace: the flag, else the Pod's namespace file, else the default.
fn system_namespace(flag: &str, fallback: String) -> String {
    if !flag.is_empty() {
        return flag.to_string();
    }
    std::fs::read_to_string("/var/run/secrets/kubernetes.io/serviceaccount/namespace")
        .map(|ns| ns.trim().to_string())
        .ok()
        .filter(|ns| !ns.is_empty())
        .unwrap_or(fallback)
}

/// `--tls-cert`/`--tls-key` as the metrics server's certificate directory and names
/// (both or neither, as upstream checks). The files are re-read when they change.
fn metrics_certs(args: &mut ControllerArgs, cert: &str, key: &str) -> Result<bool, String> {
    match (cert.is_empty(), key.is_empty()) {
        (true, true) => Ok(false),
        (false, false) => {
            let (cert, key) = (Path::new(cert), Path::new(key));
            let dir = cert.parent().unwrap_or(Path::new("."));
            if key.parent().unwrap_or(Path::new(".")) != dir {
                return Err("--tls-cert and --tls-key must be in one directory here".into());
            }
            let name = |p: &Path| p.file_name().map(|n| n.to_string_lossy().into_owned());
            args.metrics_serving.metrics_cert_path = Some(dir.to_path_buf());
            args.metrics_serving.metrics_cert_name = name(cert).unwrap_or_default();
            args.metrics_serving.metrics_cert_key = name(key).unwrap_or_default();
            args.metrics_serving.metrics_secure = true;
            Ok(true)
        }
        _ => Err("unable to configure TLS certificates: tls-cert and tls-key flags must be used together".into()),
    }
}

/// `--metrics-bind-address` with upstream's rules: it needs the certificates; with
/// them and no address, `default`; without either, upstream serves no metrics (here:
/// a loopback port nobody is told of).
fn metrics_address(addr: &str, certs: bool, default: &str) -> Result<String, String> {
    match (addr.is_empty(), certs) {
        (false, false) => {
            Err("metrics-bind-address requires tls-cert and tls-key flags to be set".into())
        }
        (false, true) => Ok(bind_address(addr)),
        (true, true) => Ok(bind_address(default)),
        (true, false) => Ok("127.0.0.1:0".into()),
    }
}

/// `--tls-profile` and the custom profile's flags as the TLS options of every server
/// (catalog, metrics, webhook), with the lines to log ([`tls_profile::options`]).
fn apply_tls_profile(
    args: &mut ControllerArgs,
    flags: &TlsProfileFlags,
) -> Result<Vec<String>, String> {
    let (options, notes) = tls_profile::options(&tls_profile::TlsFlags {
        profile: flags.tls_profile.clone(),
        custom_ciphers: flags.tls_custom_ciphers.clone(),
        custom_curves: flags.tls_custom_curves.clone(),
        custom_version: flags.tls_custom_version.clone().unwrap_or_default(),
    })?;
    args.catalog_server.tls_min_version = options.min_version;
    args.catalog_server.tls_cipher_suites = options.cipher_suites;
    args.catalog_server.tls_curves = options.groups;
    Ok(notes)
}

/// The start-up line saying who installs in the operator-controller role, and how to
/// move to least privilege.
pub fn installer_note(namespace: &str, account: &str) -> String {
    format!(
        "every ClusterExtension is installed as this controller's own ServiceAccount system:serviceaccount:{namespace}:{account}, as upstream OLM v1 does (its manifests bind that account to cluster-admin), and spec.serviceAccount is ignored; for least privilege run olmv1's own manifests (config/, `olmv1 controller`): each extension is then installed as the ServiceAccount it names, `olmv1 rbac` prints the rules that account needs (docs/how-to/installer-identity.md)"
    )
}

/// Maps `operator-controller` flags onto the ClusterExtension role.
pub fn operator_controller(flags: &OperatorControllerFlags) -> Result<Mapped, String> {
    let mut args = defaults()?;
    args.role = Role::OperatorController;
    let enabled = gates::check(&flags.feature_gates, gates::OPERATOR_CONTROLLER)?;
    let mut notes = gates::describe(&enabled, gates::OPERATOR_CONTROLLER);
    let certs = metrics_certs(&mut args, &flags.tls_cert, &flags.tls_key)?;
    args.metrics_bind_address = metrics_address(&flags.metrics_bind_address, certs, ":8443")?;
    args.health_probe_bind_address = bind_address(&flags.health_probe_bind_address);
    args.metrics_serving.pprof_bind_address = bind_address(&flags.pprof_bind_address);
    args.catalogd_cas_dir = non_empty(&flags.catalogd_cas_dir);
    args.pull_cas_dir = non_empty(&flags.pull_cas_dir);
    args.leader_elect = flags.leader_elect;
    args.cache_dir = PathBuf::from(&flags.cache_path);
    args.namespace = system_namespace(&flags.system_namespace, args.namespace);
    args.service_account = "operator-controller-controller-manager".into();
    // upstream's model: the controller installs as itself (docs/how-to/installer-identity.md)
    args.allow_controller_identity = true;
    args.global_pull_secret = non_empty(&flags.global_pull_secret).map(|p| p.display().to_string());
    notes.extend(apply_tls_profile(&mut args, &flags.tls)?);
    if !certs {
        notes.push("no --tls-cert/--tls-key: metrics are not served (as upstream)".into());
    }
    notes.push(installer_note(&args.namespace, &args.service_account));
    Ok(Mapped {
        args,
        log_filter: flags.klog.filter(),
        notes,
    })
}

/// catalogd's mutating webhook on `--webhook-server-port` (every interface, as
/// controller-runtime's webhook server) with the `--tls-cert`/`--tls-key` pair; none
/// without certificates.
fn webhook(certs: bool, flags: &CatalogdFlags) -> Option<crate::server::webhook::WebhookServing> {
    certs.then(|| crate::server::webhook::WebhookServing {
        bind_address: format!("0.0.0.0:{}", flags.webhook_server_port),
        cert: PathBuf::from(&flags.tls_cert),
        key: PathBuf::from(&flags.tls_key),
    })
}

/// Maps `catalogd` flags onto the ClusterCatalog role.
pub fn catalogd(flags: &CatalogdFlags) -> Result<Mapped, String> {
    let mut args = defaults()?;
    args.role = Role::Catalogd;
    let enabled = gates::check(&flags.feature_gates, gates::CATALOGD)?;
    let mut notes = gates::describe(&enabled, gates::CATALOGD);
    let certs = metrics_certs(&mut args, &flags.tls_cert, &flags.tls_key)?;
    if certs {
        args.catalog_server_tls_cert = non_empty(&flags.tls_cert);
        args.catalog_server_tls_key = non_empty(&flags.tls_key);
    }
    args.metrics_bind_address = metrics_address(&flags.metrics_bind_address, certs, ":7443")?;
    args.health_probe_bind_address = bind_address(&flags.health_probe_bind_address);
    args.metrics_serving.pprof_bind_address = bind_address(&flags.pprof_bind_address);
    args.leader_elect = flags.leader_elect;
    args.namespace = system_namespace(&flags.system_namespace, args.namespace);
    args.catalog_server_bind_address = bind_address(&flags.catalogs_server_addr);
    args.external_address = flags.external_address.clone();
    args.cache_dir = PathBuf::from(&flags.cache_dir);
    args.workers.cache_gc_interval = flags.gc_interval;
    args.pull_cas_dir = non_empty(&flags.pull_cas_dir);
    args.service_account = "catalogd-controller-manager".into();
    args.global_pull_secret = non_empty(&flags.global_pull_secret).map(|p| p.display().to_string());
    notes.extend(apply_tls_profile(&mut args, &flags.tls)?);
    args.webhook = webhook(certs, flags);
    if args.webhook.is_none() {
        notes.push(format!(
            "no --tls-cert/--tls-key: the ClusterCatalog mutating webhook is not served on port {} (the catalog reconciler still stamps the {} label)",
            flags.webhook_server_port,
            crate::api::LABEL_METADATA_NAME
        ));
    }
    Ok(Mapped {
        args,
        log_filter: flags.klog.filter(),
        notes,
    })
}

/// Splits `argv` (without the program name) into the flags `cmd` knows and the
/// unknown `--flag[=value]` ones (with the next word as the value when it does not
/// start with `-`), which are skipped with a warning.
pub fn split_unknown(cmd: &clap::Command, argv: Vec<String>) -> (Vec<String>, Vec<String>) {
    let known = |name: &str| {
        name == "help"
            || name == "version"
            || cmd.get_arguments().any(|a| a.get_long() == Some(name))
    };
    let (mut kept, mut skipped) = (Vec::new(), Vec::new());
    let mut words = argv.into_iter().peekable();
    while let Some(word) = words.next() {
        let Some(flag) = word.strip_prefix("--").filter(|f| !f.is_empty()) else {
            kept.push(word);
            continue;
        };
        let (name, has_value) = match flag.split_once('=') {
            Some((name, _)) => (name.to_string(), true),
            None => (flag.to_string(), false),
        };
        if known(&name) {
            kept.push(word);
            continue;
        }
        skipped.push(word);
        if !has_value && words.peek().is_some_and(|next| !next.starts_with('-')) {
            skipped.extend(words.next());
        }
    }
    (kept, skipped)
}

/// What the program should do after [`parse`].
#[derive(Debug)]
pub enum Outcome {
    /// Run the controller in the mapped role; `skipped` are the unknown flags.
    Run(Box<Mapped>, Vec<String>),
    /// Print the version (upstream's `version` subcommand).
    Version,
}

/// Why [`parse`] stopped: clap's own error (and `--help`), or a refused value.
#[derive(Debug)]
pub enum ParseError {
    Clap(clap::Error),
    Invalid(String),
}

/// The role of a program name (argv[0]'s file name): `operator-controller`, `catalogd`.
pub fn role_of(argv0: Option<&std::ffi::OsStr>) -> Option<Role> {
    let base = argv0.map(Path::new).and_then(Path::file_name)?.to_str()?;
    match base {
        "operator-controller" => Some(Role::OperatorController),
        "catalogd" => Some(Role::Catalogd),
        _ => None,
    }
}

/// Parses `argv` (without the program name) as upstream's program of `role`.
pub fn parse(role: Role, argv: Vec<String>) -> Result<Outcome, ParseError> {
    use clap::{CommandFactory, FromArgMatches};
    let cmd = match role {
        Role::Catalogd => CatalogdFlags::command(),
        _ => OperatorControllerFlags::command(),
    };
    let (kept, skipped) = split_unknown(&cmd, argv);
    let name = cmd.get_name().to_string();
    let matches = cmd
        .try_get_matches_from(std::iter::once(name).chain(kept))
        .map_err(ParseError::Clap)?;
    let mapped = match role {
        Role::Catalogd => {
            let flags = CatalogdFlags::from_arg_matches(&matches).map_err(ParseError::Clap)?;
            if flags.command.is_some() {
                return Ok(Outcome::Version);
            }
            catalogd(&flags)
        }
        _ => {
            let flags =
                OperatorControllerFlags::from_arg_matches(&matches).map_err(ParseError::Clap)?;
            if flags.command.is_some() {
                return Ok(Outcome::Version);
            }
            operator_controller(&flags)
        }
    };
    let mapped = mapped.map_err(ParseError::Invalid)?;
    if let Some(value) = &mapped.args.global_pull_secret {
        crate::controller::pull_secrets::validate(value).map_err(ParseError::Invalid)?;
    }
    Ok(Outcome::Run(Box::new(mapped), skipped))
}

#[cfg(test)]
mod tests;
