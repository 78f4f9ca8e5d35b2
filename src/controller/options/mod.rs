//! Command-line options of `olmv1 controller`; those of its servers (the catalog
//! server's limits, TLS, the protection of `/metrics`) are in the `servers` module.

use std::path::{Path, PathBuf};

mod servers;

pub use servers::{CatalogServerArgs, MetricsServingArgs};

#[derive(clap::Args, Debug, Clone)]
pub struct ControllerArgs {
    /// Kubeconfig to use; default: $KUBECONFIG, ~/.kube/config, then in-cluster config.
    #[arg(long, env = "KUBECONFIG")]
    pub kubeconfig: Option<PathBuf>,

    /// Address of the /healthz and /readyz endpoints.
    #[arg(long, default_value = "0.0.0.0:8081")]
    pub health_probe_bind_address: String,

    /// Address of the catalog content HTTP server (catalogd API).
    #[arg(long, default_value = "0.0.0.0:8443")]
    pub catalog_server_bind_address: String,

    /// Host[:port] clients use to reach the catalog server; `status.urls.base` of every
    /// ClusterCatalog is `<scheme>://<this>/catalogs/<name>`.
    #[arg(long, default_value = "olmv1-catalogd-service.olmv1-system.svc")]
    pub external_address: String,

    /// TLS certificate (PEM) of the catalog server; with --catalog-server-tls-key the
    /// server speaks HTTPS and URLs use https.
    #[arg(long, requires = "catalog_server_tls_key")]
    pub catalog_server_tls_cert: Option<PathBuf>,

    /// TLS private key (PEM) of the catalog server.
    #[arg(long, requires = "catalog_server_tls_cert")]
    pub catalog_server_tls_key: Option<PathBuf>,

    /// Catalog server limits and TLS versions/ciphers.
    #[command(flatten)]
    pub catalog_server: CatalogServerArgs,

    /// Cache directory: unpacked images and stored catalogs.
    #[arg(long, default_value = "/var/cache/olmv1")]
    pub cache_dir: PathBuf,

    /// Registries reached over plain HTTP (host[:port]); repeatable. All others use TLS.
    #[arg(long = "insecure-registry")]
    pub insecure_registries: Vec<String>,

    /// PEM bundle of extra CAs trusted for registries.
    #[arg(long)]
    pub ca_bundle: Option<PathBuf>,

    /// containers-registries.conf v2 file: registry mirrors (tried in order before the
    /// registry itself) and blocked registries, for bundle and catalog images. A file
    /// that does not parse stops the controller at start.
    #[arg(long)]
    pub registries_conf: Option<PathBuf>,

    /// containers-policy.json file: the signature policy applied to every bundle and
    /// catalog image pull (sigstore signatures with public keys, GPG signedBy, reject,
    /// accept; see docs/concepts/signature-policy.md). Default
    /// /etc/containers/policy.json when that file exists, else every image is accepted
    /// (as upstream). A file that does not parse, or uses what is not supported
    /// (signedBy other than GPGKeys, Fulcio/Rekor), stops the controller at start.
    #[arg(long, value_name = "PATH")]
    pub signature_policy: Option<PathBuf>,

    /// containers-registries.d directory: every `*.yaml` in it says where `signedBy`
    /// (GPG) signatures are read from (lookaside storage; see
    /// docs/concepts/signature-policy.md). Default /etc/containers/registries.d when
    /// that directory exists. A file that does not parse stops the controller at start.
    #[arg(long, value_name = "DIR")]
    pub registries_d: Option<PathBuf>,

    /// Directory of PEM files with the CAs trusted (besides the system roots) for the
    /// catalog content HTTPS API (upstream's --catalogd-cas-dir; alias --ca-certs-dir).
    /// Watched: re-read within seconds when a file in it changes.
    #[arg(long, alias = "ca-certs-dir")]
    pub catalogd_cas_dir: Option<PathBuf>,

    /// A kubernetes.io/dockerconfigjson Secret used for every pull: `<namespace>/<name>`
    /// (upstream's syntax) or a bare `<name>` in --namespace.
    #[arg(long, value_name = "NAMESPACE/NAME")]
    pub global_pull_secret: Option<String>,

    /// Directory of PEM CA certificates (every file in it) trusted for image registries,
    /// besides the system roots and --ca-bundle. Watched: re-read within seconds when a
    /// file in it changes.
    #[arg(long)]
    pub pull_cas_dir: Option<PathBuf>,

    /// Which part runs: `all` (`olmv1 controller`), `operator-controller` (the
    /// ClusterExtension reconciler) or `catalogd` (the ClusterCatalog reconciler and
    /// the catalog server). Set by the program name (docs/how-to/switch-from-upstream.md).
    #[arg(long, value_enum, default_value = "all", hide = true)]
    pub role: Role,

    /// catalogd's mutating admission webhook: set by the `catalogd` program's
    /// --webhook-server-port with --tls-cert/--tls-key (docs/how-to/switch-from-upstream.md);
    /// not a flag of `olmv1 controller`.
    #[arg(skip)]
    pub webhook: Option<crate::server::webhook::WebhookServing>,

    /// The controller's namespace.
    #[arg(long, env = "POD_NAMESPACE", default_value = "olmv1-system")]
    pub namespace: String,

    /// The controller's ServiceAccount (its imagePullSecrets are used for pulls).
    #[arg(long, default_value = "olmv1-controller")]
    pub service_account: String,

    /// The installer of ClusterExtensions that set no `spec.serviceAccount`
    /// (`<namespace>/<name>`); without it (and without --allow-controller-identity) such
    /// extensions are refused with a condition saying what to set.
    #[arg(long, value_name = "NAMESPACE/NAME", value_parser = parse_installer)]
    pub default_installer_service_account:
        Option<crate::controller::extension::installer::InstallerAccount>,

    /// Install ClusterExtensions that set no `spec.serviceAccount` as the controller's
    /// own ServiceAccount (--namespace/--service-account), as upstream OLM v1 does; that
    /// account then needs the rights to install anything (upstream binds cluster-admin).
    #[arg(long, conflicts_with = "default_installer_service_account")]
    pub allow_controller_identity: bool,

    /// Report Progressing=True/Succeeded as soon as a revision is applied, without
    /// waiting for its workloads to become ready (Progressing=True/RollingOut until
    /// then). For clusters that cannot run the workloads, e.g. test control planes
    /// without nodes.
    #[arg(long)]
    pub skip_rollout_wait: bool,

    /// Create a ClusterExtension's `spec.namespace` when it does not exist, from the
    /// bundle's `operatorframework.io/suggested-namespace-template` (its labels and
    /// annotations), as the installer account; removed on uninstall when nothing else
    /// lives there. An extension opts out with the annotation
    /// `olm.operatorframework.io/create-namespace: "false"` (or in, without this flag,
    /// with `"true"`).
    #[arg(long)]
    pub create_install_namespaces: bool,

    /// Refuse catalogs that violate FBC invariants (for catalog authors' CI). By
    /// default catalogs are stored and served as catalogd does, and the violations are
    /// reported in a Warning Event on the ClusterCatalog.
    #[arg(long)]
    pub strict_catalogs: bool,

    /// Deprecated no-op: catalogs are now stored as catalogd does by default (see
    /// --strict-catalogs). Accepted so that existing deployments still start.
    #[arg(long, hide = true)]
    pub lenient_catalogs: bool,

    /// Largest catalog (bytes of FBC files) the catalog controller ingests.
    #[arg(long, default_value_t = 1 << 30)]
    pub max_catalog_bytes: u64,

    /// Seconds in one `pollIntervalMinutes` unit (tests use 1).
    #[arg(long, default_value_t = 60, hide = true)]
    pub poll_unit_seconds: u64,

    /// Seconds a rollout in progress is checked every 15 s even while watches follow
    /// it, for the pods' waiting reasons (docs/concepts/rollout-status.md; tests that
    /// measure the idle cost after it use less).
    #[arg(long, default_value_t = 60, hide = true)]
    pub young_rollout_seconds: u64,

    /// Address of the Prometheus `/metrics` endpoint (HTTPS and authorized, see
    /// --metrics-secure).
    #[arg(long, default_value = "0.0.0.0:8080")]
    pub metrics_bind_address: String,

    /// Reconcile workers and the cache GC.
    #[command(flatten)]
    pub workers: WorkerArgs,

    /// How `/metrics` and the profiling endpoints are protected; --pprof-bind-address.
    #[command(flatten)]
    pub metrics_serving: MetricsServingArgs,

    /// Run the reconcilers only while holding the Lease `olmv1-controller` in
    /// --namespace (for several replicas); the catalog server and probes run on every
    /// replica. Losing the lease ends the process with a non-zero exit code.
    #[arg(long)]
    pub leader_elect: bool,

    /// How long a standby waits, after the last change of the Lease it saw, before it
    /// takes the lease (seconds, `27` or `27s`): the takeover time after a crash of the
    /// leader. Shorter = faster failover, but the retry period must shrink with it.
    #[arg(long, env = "OLMV1_LEADER_ELECT_LEASE_DURATION", default_value = "27s", value_parser = parse_seconds)]
    pub leader_elect_lease_duration: std::time::Duration,

    /// How long the leader keeps leading without a successful renewal (shorter than
    /// the lease duration).
    #[arg(long, env = "OLMV1_LEADER_ELECT_RENEW_DEADLINE", default_value = "22s", value_parser = parse_seconds)]
    pub leader_elect_renew_deadline: std::time::Duration,

    /// How often the leader renews the Lease (shorter than the renew deadline): one
    /// request per period is all the idle API traffic of the election.
    #[arg(long, env = "OLMV1_LEADER_ELECT_RETRY_PERIOD", default_value = "18s", value_parser = parse_seconds)]
    pub leader_elect_retry_period: std::time::Duration,

    /// Deprecated: sets --leader-elect-lease-duration to this, the renew deadline to
    /// two thirds and the retry period to a third of it.
    #[arg(long, hide = true)]
    pub lease_duration_seconds: Option<u64>,

    /// This replica's identity in the lease; default: $POD_NAME, else host name and pid.
    #[arg(long, env = "POD_NAME")]
    pub leader_election_identity: Option<String>,
}

/// The part of the controller a process runs (upstream runs two binaries).
#[derive(clap::ValueEnum, Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Role {
    /// Both reconcilers and the catalog server (`olmv1 controller`).
    #[default]
    All,
    /// The ClusterExtension reconciler, as upstream's `operator-controller`.
    OperatorController,
    /// The ClusterCatalog reconciler and the catalog server, as upstream's `catalogd`.
    Catalogd,
}

impl Role {
    /// Whether this role runs the ClusterCatalog reconciler and the catalog server.
    pub fn runs_catalogs(self) -> bool {
        self != Role::OperatorController
    }

    /// Whether this role runs the ClusterExtension reconciler.
    pub fn runs_extensions(self) -> bool {
        self != Role::Catalogd
    }

    /// The leader-election Lease of this role: upstream's names for its two binaries
    /// (each elects its own leader), ours for `all`.
    pub fn lease_name(self) -> &'static str {
        match self {
            Role::All => crate::controller::LEASE_NAME,
            Role::OperatorController => "9c4404e7.operatorframework.io",
            Role::Catalogd => "catalogd-operator-lock",
        }
    }
}

/// Where upstream (containers/image) reads registries.conf without a flag.
pub const DEFAULT_REGISTRIES_CONF: &str = "/etc/containers/registries.conf";

/// Where upstream (containers/image) reads the signature policy without a flag.
pub const DEFAULT_SIGNATURE_POLICY: &str = "/etc/containers/policy.json";

/// The registries.d directory read when no --registries-d is given (if it exists).
pub const DEFAULT_REGISTRIES_D: &str = "/etc/containers/registries.d";

/// The registries.d directory to read: `explicit` (--registries-d) when given, else
/// `default` when that directory exists, else none.
pub fn registries_d_or(explicit: Option<&Path>, default: &Path) -> Option<PathBuf> {
    match explicit {
        Some(path) => Some(path.to_path_buf()),
        None => default.is_dir().then(|| default.to_path_buf()),
    }
}

/// The registries.conf to load: `explicit` (--registries-conf) when given, else
/// `default` when that file exists, else none.
pub fn registries_conf_or(explicit: Option<&Path>, default: &Path) -> Option<PathBuf> {
    match explicit {
        Some(path) => Some(path.to_path_buf()),
        None => default.is_file().then(|| default.to_path_buf()),
    }
}

/// Whole seconds, with an optional `s` suffix (`137s`, `137`).
pub fn parse_seconds(value: &str) -> Result<std::time::Duration, String> {
    let digits = value.strip_suffix('s').unwrap_or(value);
    digits
        .parse::<u64>()
        .map(std::time::Duration::from_secs)
        .map_err(|_| format!("{value:?} is not a number of seconds (e.g. 27 or 27s)"))
}

/// `--install-timeout`'s default: above `--pull-timeout`'s (an install pulls first),
/// far above a real install, far below "forever".
pub const DEFAULT_INSTALL_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(900);

/// Reconcile concurrency, how long an image pull and an install may hold a worker, and
/// cache garbage collection.
#[derive(clap::Args, Debug, Clone, PartialEq, Eq)]
pub struct WorkerArgs {
    /// Most ClusterExtension reconciles running at once (first come, first served;
    /// bundle pulls and renders happen inside them). At least 1.
    #[arg(long, default_value_t = crate::controller::workers::DEFAULT_MAX_CONCURRENT_RECONCILES,
          value_parser = parse_workers)]
    pub max_concurrent_reconciles: usize,

    /// How often unpacked images and stored catalogs that no ClusterCatalog and no
    /// installed revision references are removed from --cache-dir (`12h`, `30m`,
    /// `90s`, or seconds); `0` disables it. Entries in use are never removed.
    #[arg(long, default_value = "12h", value_parser = parse_interval)]
    pub cache_gc_interval: std::time::Duration,

    /// Longest one ClusterExtension install (bundle pull, render, preflights, apply)
    /// may take (`15m`, `90s`, or seconds); past it the install is abandoned, reported
    /// as `Progressing=True/Retrying` naming the deadline, and retried with backoff, so
    /// that a slow registry or a costly bundle cannot hold a worker. `0` disables it.
    #[arg(long, default_value = "15m", value_parser = parse_interval)]
    pub install_timeout: std::time::Duration,

    /// Wall-clock limit of one catalog or bundle image pull: its manifests, config and
    /// every layer, mirrors and retries included (`10m`, `90s`, `1h`, or seconds; more
    /// than 0). A registry that stalls or sends a byte now and then cannot hold a
    /// worker longer; the pull then fails with a retryable error naming the image and
    /// what was being fetched, and is tried again later. Unpacking is bounded by its
    /// own size limits, not by this.
    #[arg(long, default_value = "10m", value_parser = parse_positive_interval)]
    pub pull_timeout: std::time::Duration,

    /// Wall-clock limit of one registry request within a pull (one manifest, the
    /// config or one layer, its whole body included); a request that passes it fails
    /// the pull from that registry (the next mirror, if any, is tried). Same format as
    /// --pull-timeout.
    #[arg(long, default_value = "5m", value_parser = parse_positive_interval)]
    pub registry_request_timeout: std::time::Duration,
}

impl Default for WorkerArgs {
    fn default() -> Self {
        WorkerArgs {
            max_concurrent_reconciles:
                crate::controller::workers::DEFAULT_MAX_CONCURRENT_RECONCILES,
            cache_gc_interval: crate::controller::cache_gc::DEFAULT_INTERVAL,
            install_timeout: DEFAULT_INSTALL_TIMEOUT,
            pull_timeout: crate::image::PULL_TIMEOUT,
            registry_request_timeout: crate::image::REQUEST_TIMEOUT,
        }
    }
}

fn parse_workers(value: &str) -> Result<usize, String> {
    match value.trim().parse::<usize>() {
        Ok(n) if (1..=10_000).contains(&n) => Ok(n),
        _ => Err(format!("{value:?}: a number from 1 to 10000 expected")),
    }
}

/// `12h`, `30m`, `90s`, `1h30m` or plain seconds; `0` is allowed (off).
pub fn parse_interval(value: &str) -> Result<std::time::Duration, String> {
    let v = value.trim();
    if let Ok(secs) = v.parse::<u64>() {
        return Ok(std::time::Duration::from_secs(secs));
    }
    let mut total = 0u64;
    let mut number = String::new();
    for c in v.chars() {
        match c {
            '0'..='9' => number.push(c),
            'h' | 'm' | 's' => {
                let n: u64 = number.parse().map_err(|_| {
                    format!("invalid duration {value:?}: a number must precede {c:?}")
                })?;
                number.clear();
                let unit = match c {
                    'h' => 3600,
                    'm' => 60,
                    _ => 1,
                };
                total = n
                    .checked_mul(unit)
                    .and_then(|s| total.checked_add(s))
                    .ok_or_else(|| format!("duration {value:?} too large"))?;
            }
            _ => {
                return Err(format!(
                    "invalid duration {value:?}: use e.g. 12h, 30m, 90s, 1h30m or seconds"
                ));
            }
        }
    }
    if !number.is_empty() || v.is_empty() {
        return Err(format!(
            "invalid duration {value:?}: use e.g. 12h, 30m, 90s, 1h30m or seconds"
        ));
    }
    Ok(std::time::Duration::from_secs(total))
}

/// [`parse_interval`], more than zero.
pub fn parse_positive_interval(value: &str) -> Result<std::time::Duration, String> {
    parse_interval(value).and_then(|d| {
        (!d.is_zero())
            .then_some(d)
            .ok_or_else(|| format!("{value:?}: must be more than 0"))
    })
}

/// [`parse_seconds`], more than zero.
pub fn parse_positive_seconds(value: &str) -> Result<std::time::Duration, String> {
    parse_seconds(value).and_then(|d| {
        (!d.is_zero())
            .then_some(d)
            .ok_or_else(|| "must be more than 0".to_string())
    })
}

fn parse_installer(
    value: &str,
) -> Result<crate::controller::extension::installer::InstallerAccount, String> {
    crate::controller::extension::installer::InstallerAccount::parse(value)
}

impl ControllerArgs {
    /// The leader-election timings (the deprecated --lease-duration-seconds wins when
    /// given), validated.
    pub fn lease_timing(&self) -> Result<crate::controller::lease::Timing, String> {
        let timing = match self.lease_duration_seconds {
            Some(seconds) => crate::controller::lease::Timing::from_lease_duration_seconds(seconds),
            None => crate::controller::lease::Timing {
                lease_duration: self.leader_elect_lease_duration,
                renew_deadline: self.leader_elect_renew_deadline,
                retry_period: self.leader_elect_retry_period,
            },
        };
        timing.validate()?;
        Ok(timing)
    }

    /// The installer of extensions without `spec.serviceAccount`, from
    /// --default-installer-service-account or --allow-controller-identity.
    pub fn default_installer(
        &self,
    ) -> Option<crate::controller::extension::installer::InstallerAccount> {
        if self.allow_controller_identity {
            return Some(crate::controller::extension::installer::InstallerAccount {
                namespace: self.namespace.clone(),
                name: self.service_account.clone(),
                source: crate::api::InstallerSource::ControllerIdentity,
            });
        }
        self.default_installer_service_account.clone()
    }
}

#[cfg(test)]
mod worker_args_tests {
    use super::WorkerArgs;
    use clap::Parser;
    use std::time::Duration;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        args: WorkerArgs,
    }

    fn parse(args: &[&str]) -> Result<WorkerArgs, clap::Error> {
        Cli::try_parse_from(std::iter::once("x").chain(args.iter().copied())).map(|c| c.args)
    }

    #[test]
    fn defaults_and_values() {
        assert_eq!(parse(&[]).unwrap(), WorkerArgs::default());
        assert_eq!(WorkerArgs::default().max_concurrent_reconciles, 10);
        assert_eq!(
            WorkerArgs::default().cache_gc_interval,
            Duration::from_secs(12 * 3600)
        );
        let a = parse(&["--max-concurrent-reconciles=3", "--cache-gc-interval=1h30m"]).unwrap();
        assert_eq!(a.max_concurrent_reconciles, 3);
        assert_eq!(a.cache_gc_interval, Duration::from_secs(5400));
        assert_eq!(a.pull_timeout, Duration::from_secs(600));
        assert_eq!(a.registry_request_timeout, Duration::from_secs(300));
        let a = parse(&["--pull-timeout=90s", "--registry-request-timeout=1m"]).unwrap();
        assert_eq!(a.pull_timeout, Duration::from_secs(90));
        assert_eq!(a.registry_request_timeout, Duration::from_secs(60));
        assert!(parse(&["--pull-timeout=0"]).is_err());
        assert_eq!(a.install_timeout, Duration::from_secs(900));
        let a = parse(&["--install-timeout=10s"]).unwrap();
        assert_eq!(a.install_timeout, Duration::from_secs(10));
        let a = parse(&["--install-timeout=0"]).unwrap();
        assert!(a.install_timeout.is_zero(), "0 turns the deadline off");
        assert!(parse(&["--registry-request-timeout=0s"]).is_err());
        for (v, secs) in [
            ("0", 0),
            ("90", 90),
            ("90s", 90),
            ("30m", 1800),
            ("2h", 7200),
        ] {
            let a = parse(&[&format!("--cache-gc-interval={v}")]).unwrap();
            assert_eq!(a.cache_gc_interval, Duration::from_secs(secs), "{v}");
        }
        for bad in [
            "--max-concurrent-reconciles=0",
            "--cache-gc-interval=",
            "--cache-gc-interval=5d",
            "--cache-gc-interval=h",
            "--cache-gc-interval=10m5",
        ] {
            assert!(parse(&[bad]).is_err(), "{bad}");
        }
    }
}

#[cfg(test)]
mod registries_conf_tests {
    use super::*;

    #[test]
    fn registries_conf_is_read_from_the_default_path_when_it_exists() {
        let dir = std::env::temp_dir().join(format!("olmv1-regconf-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("dir");
        let default = dir.join("registries.conf");
        let _ = std::fs::remove_file(&default);
        assert_eq!(registries_conf_or(None, &default), None);
        std::fs::write(&default, "[[registry]]\nlocation = \"a.example\"\n").expect("write");
        assert_eq!(registries_conf_or(None, &default), Some(default.clone()));
        let explicit = dir.join("other.conf");
        assert_eq!(
            registries_conf_or(Some(&explicit), &default),
            Some(explicit.clone())
        );
        let _ = std::fs::remove_dir_all(&dir);
    }
}
