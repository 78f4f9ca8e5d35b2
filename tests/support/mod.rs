//! Test harness shared by the integration tests (`tests/`) and the end-to-end tests
//! (`e2e/`): one real control plane per test binary (etcd, kube-apiserver with RBAC,
//! kube-controller-manager), started on first use and stopped when the test process
//! exits for any reason, including a panic or a kill (see `olmv1::testenv::process`).
//!
//! Set `OLMV1_TEST_KUBECONFIG` (admin) and `OLMV1_TEST_CONTROLLER_KUBECONFIG` to attach
//! to a running control plane instead (e.g. one from `hack/control-plane.sh up`).
//! Logs of each run stay in `target/tmp/testenv-logs/<run>/`; runs with a failed test
//! are kept (the ten newest), the others are pruned at the next start.
#![allow(dead_code)]

pub mod apiservice_bundle;
pub mod bundles;
pub mod extensions;
pub mod metrics;
pub mod olm_v0;
pub mod olm_v0_flow;
pub mod olm_v0_run;
pub mod pods;
pub mod process;
pub mod upstream;
pub mod webhook_bundle;

use olmv1::testenv::{self, Binaries, ControlPlane, Lifetime, Options, manifests};
use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use std::sync::atomic::{AtomicU64, Ordering};

pub struct Cluster {
    pub server: String,
    pub admin_kubeconfig: PathBuf,
    pub controller_kubeconfig: PathBuf,
    pub log_dir: Option<PathBuf>,
    /// With [`node_cluster`]: the node's registry and images.
    pub node: Option<testenv::node::RunningNode>,
    /// With [`node_cluster_with_cert_manager`]: cert-manager runs against it.
    pub cert_manager: bool,
}

static CLUSTER: OnceLock<Cluster> = OnceLock::new();
/// With [`restartable_cluster`]: the control plane itself, kept (not leaked) so that
/// tests can stop and start etcd and kube-apiserver.
static PLANE: OnceLock<tokio::sync::Mutex<ControlPlane>> = OnceLock::new();
static WANT_PLANE: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// The control plane of this test binary, with a handle to stop and start its etcd and
/// kube-apiserver (fault tests: `e2e/faults.rs`). Every test of the binary must call
/// this one first (it cannot attach to `OLMV1_TEST_KUBECONFIG`).
pub fn restartable_cluster() -> (&'static Cluster, &'static tokio::sync::Mutex<ControlPlane>) {
    WANT_PLANE.store(true, Ordering::SeqCst);
    (cluster(), plane())
}

/// The kept control plane of [`restartable_cluster`] (started by then).
fn plane() -> &'static tokio::sync::Mutex<ControlPlane> {
    PLANE
        .get()
        .expect("a restartable control plane: OLMV1_TEST_KUBECONFIG cannot be used with it")
}
static WANT_NODE: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// The control plane of this test binary with a real node (containerd, kubelet,
/// scheduler, kube-proxy, CoreDNS; see `olmv1::testenv::node`). Every test of the
/// binary must call this one rather than [`cluster`].
pub fn node_cluster() -> &'static Cluster {
    WANT_NODE.store(true, Ordering::SeqCst);
    let c = cluster();
    assert!(
        c.node.is_some(),
        "this test needs a node: OLMV1_TEST_KUBECONFIG cannot be used with it"
    );
    c
}
static COUNTER: AtomicU64 = AtomicU64::new(0);
static WANT_CERT_MANAGER: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// [`cluster`] with real cert-manager (controller and cainjector built by
/// `hack/build-cert-manager.sh`, its CRDs applied; `olmv1::testenv::cert_manager`).
/// Every test of the binary must call this one (or [`node_cluster_with_cert_manager`]).
pub fn cluster_with_cert_manager() -> &'static Cluster {
    WANT_CERT_MANAGER.store(true, Ordering::SeqCst);
    let c = cluster();
    assert!(
        c.cert_manager,
        "this test needs cert-manager: OLMV1_TEST_KUBECONFIG cannot be used with it"
    );
    c
}

/// [`node_cluster`] with real cert-manager, as [`cluster_with_cert_manager`].
pub fn node_cluster_with_cert_manager() -> &'static Cluster {
    WANT_CERT_MANAGER.store(true, Ordering::SeqCst);
    let c = node_cluster();
    assert!(
        c.cert_manager,
        "this test needs cert-manager: OLMV1_TEST_KUBECONFIG cannot be used with it"
    );
    c
}

/// [`node_cluster_with_cert_manager`] with a handle to stop and start its etcd and
/// kube-apiserver (`e2e/migrate_v0_cluster.rs`). Every test of the binary must call
/// this one first.
pub fn restartable_node_cluster_with_cert_manager()
-> (&'static Cluster, &'static tokio::sync::Mutex<ControlPlane>) {
    WANT_PLANE.store(true, Ordering::SeqCst);
    (node_cluster_with_cert_manager(), plane())
}

/// Where the tests keep what outlives a run (logs, fuzz failures): `OLMV1_TEST_TMPDIR`
/// (hack/test.sh: the checkout's `target/tmp`, wherever the build goes), else cargo's
/// `CARGO_TARGET_TMPDIR`.
pub fn tmp_dir() -> PathBuf {
    std::env::var_os("OLMV1_TEST_TMPDIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_TARGET_TMPDIR")))
}

/// The area (module: `tests/<area>.rs`, `e2e/<area>.rs`) of the test running on this
/// thread, from the name libtest gives a test's thread.
fn current_area() -> Option<String> {
    let name = std::thread::current().name()?.to_owned();
    name.split_once("::").map(|(area, _)| area.to_owned())
}

/// The area whose tests use this process's control plane.
static AREA: OnceLock<Option<String>> = OnceLock::new();

/// `<binary>-<area>`: what names this process's logs.
pub fn run_label() -> String {
    let binary = std::env::current_exe()
        .ok()
        .and_then(|p| p.file_stem().map(|s| s.to_string_lossy().into_owned()))
        .unwrap_or_else(|| "test".into());
    let binary = binary.split('-').next().unwrap_or("test").to_owned();
    match AREA.get().cloned().flatten().or_else(current_area) {
        Some(area) => format!("{binary}-{area}"),
        None => binary,
    }
}

/// The control plane of this test process (started on first call). One area's tests
/// share it (their controller arguments, serial locks and cluster-wide objects assume
/// each other): a test of another area in the same process is refused.
pub fn cluster() -> &'static Cluster {
    let first = AREA.get_or_init(current_area);
    if let (Some(first), Some(now)) = (first, current_area())
        && *first != now
    {
        panic!(
            "the tests of area `{now}` run in a process whose control plane belongs to `{first}`: \
             run one area per process (hack/test.sh does; by hand: cargo test --test <integration|e2e> {now}::)"
        );
    }
    CLUSTER.get_or_init(|| {
        let _ = rustls::crypto::aws_lc_rs::default_provider().install_default();
        if let (Some(admin), Some(controller)) = (
            std::env::var_os("OLMV1_TEST_KUBECONFIG"),
            std::env::var_os("OLMV1_TEST_CONTROLLER_KUBECONFIG"),
        ) {
            return Cluster {
                server: String::new(),
                admin_kubeconfig: admin.into(),
                controller_kubeconfig: controller.into(),
                log_dir: None,
                node: None,
                cert_manager: false,
            };
        }
        // A runtime of its own on its own thread: the test runtimes come and go.
        std::thread::spawn(start)
            .join()
            .unwrap_or_else(|_| panic!("starting the test control plane panicked"))
    })
}

fn start() -> Cluster {
    let logs_root = tmp_dir().join("testenv-logs");
    prune_logs(&logs_root);
    let binary = run_label();
    let stamp = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or_default();
    let log_dir = logs_root.join(format!("{stamp}-{binary}-{}", std::process::id()));
    let data_dir = std::env::temp_dir().join(format!("olmv1-test-{}-{stamp}", std::process::id()));
    install_failure_marker(log_dir.clone());

    let etcd = etcd_bin_vendored::etcd_bin_path()
        .unwrap_or_else(|e| panic!("no vendored etcd binary: {e}"))
        .to_path_buf();
    let binaries = Binaries::locate(Some(etcd)).unwrap_or_else(|e| panic!("{e}"));
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap_or_else(|e| panic!("runtime: {e}"));
    runtime.block_on(async {
        let opts = Options {
            binaries,
            data_dir: data_dir.clone(),
            log_dir: log_dir.clone(),
            controller_manager: true,
            lifetime: Lifetime::Supervised,
            node: WANT_NODE
                .load(Ordering::SeqCst)
                .then(|| testenv::node::NodeBinaries::locate().unwrap_or_else(|e| panic!("{e}"))),
        };
        let cp = ControlPlane::start(opts)
            .await
            .unwrap_or_else(|e| panic!("starting the test control plane: {e}"));
        let admin = cp.admin_client().await.unwrap_or_else(|e| panic!("{e}"));
        let controller_kubeconfig = data_dir.join("controller.kubeconfig");
        manifests::install_controller_identity(
            &admin,
            &testenv::project_dir(),
            &cp.server,
            &cp.pki.ca_pem,
            &controller_kubeconfig,
        )
        .await
        .unwrap_or_else(|e| panic!("installing the controller identity from config/: {e}"));
        let cert_manager = WANT_CERT_MANAGER.load(Ordering::SeqCst);
        if cert_manager {
            let binaries = testenv::cert_manager::CertManagerBinaries::locate()
                .unwrap_or_else(|e| panic!("{e}"));
            testenv::cert_manager::CertManager::start(
                &binaries,
                &admin,
                &cp.admin_kubeconfig,
                &log_dir,
                Lifetime::Supervised,
                &data_dir,
                std::time::Duration::from_secs(120),
            )
            .await
            .unwrap_or_else(|e| panic!("starting cert-manager: {e}"))
            .leak();
        }
        let node = cp.node.clone();
        let (server, admin_kubeconfig) = if WANT_PLANE.load(Ordering::SeqCst) {
            let kept = (cp.server.clone(), cp.admin_kubeconfig.clone());
            if PLANE.set(tokio::sync::Mutex::new(cp)).is_err() {
                panic!("the restartable control plane was started twice");
            }
            kept
        } else {
            cp.leak()
        };
        Cluster {
            server,
            admin_kubeconfig,
            controller_kubeconfig,
            log_dir: Some(log_dir),
            node,
            cert_manager,
        }
    })
}

/// Marks the run's log directory when any test panics, so that its logs are kept.
fn install_failure_marker(log_dir: PathBuf) {
    let previous = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        let _ = std::fs::create_dir_all(&log_dir);
        let _ = std::fs::write(log_dir.join("FAILED"), info.to_string());
        previous(info);
    }));
}

fn prune_logs(root: &Path) {
    let Ok(entries) = std::fs::read_dir(root) else {
        return;
    };
    let mut failed: Vec<PathBuf> = Vec::new();
    for dir in entries.flatten().map(|e| e.path()) {
        // `<stamp>-<binary>-<pid>`: a run whose process still lives is left alone.
        let pid = dir
            .file_name()
            .and_then(|n| n.to_str())
            .and_then(|n| n.rsplit('-').next())
            .unwrap_or("");
        if !pid.is_empty() && Path::new("/proc").join(pid).exists() {
            continue;
        }
        if dir.join("FAILED").exists() {
            failed.push(dir);
        } else {
            let _ = std::fs::remove_dir_all(&dir);
        }
    }
    failed.sort();
    let excess = failed.len().saturating_sub(10);
    for dir in failed.into_iter().take(excess) {
        let _ = std::fs::remove_dir_all(dir);
    }
}

impl Cluster {
    /// A client with cluster-admin rights (`system:masters`).
    pub async fn admin(&self) -> kube::Client {
        testenv::client_from_kubeconfig(&self.admin_kubeconfig)
            .await
            .unwrap_or_else(|e| panic!("admin client: {e}"))
    }

    /// A client acting as the controller's ServiceAccount (RBAC from `config/`).
    pub async fn controller(&self) -> kube::Client {
        testenv::client_from_kubeconfig(&self.controller_kubeconfig)
            .await
            .unwrap_or_else(|e| panic!("controller client: {e}"))
    }
}

/// A name unique in this test process (and practically across runs): `<prefix>-<n>-<rand>`.
pub fn unique(prefix: &str) -> String {
    let n = COUNTER.fetch_add(1, Ordering::SeqCst);
    let r: u32 = rand::random::<u32>() % 0xffff;
    format!("{prefix}-{n}-{r:04x}")
}

/// Creates a fresh namespace for one test and returns its name.
pub async fn namespace(client: &kube::Client, prefix: &str) -> String {
    use k8s_openapi::api::core::v1::Namespace;
    let name = unique(prefix);
    let api: kube::Api<Namespace> = kube::Api::all(client.clone());
    let ns = Namespace {
        metadata: kube::api::ObjectMeta {
            name: Some(name.clone()),
            ..Default::default()
        },
        ..Default::default()
    };
    api.create(&kube::api::PostParams::default(), &ns)
        .await
        .unwrap_or_else(|e| panic!("creating namespace {name}: {e}"));
    name
}

/// The OCI registry of this test binary (a real `docker-registry` on loopback).
pub fn registry() -> &'static olmv1::testenv::registry::TestRegistry {
    static REGISTRY: OnceLock<olmv1::testenv::registry::TestRegistry> = OnceLock::new();
    REGISTRY.get_or_init(|| {
        olmv1::testenv::registry::TestRegistry::start()
            .unwrap_or_else(|e| panic!("starting the test registry: {e:#}"))
    })
}

/// A second registry with htpasswd authentication and TLS (its CA is trusted by the
/// test controller; its credentials are not, unless a test adds a pull secret).
pub fn auth_registry() -> &'static olmv1::testenv::registry::TestRegistry {
    static REGISTRY: OnceLock<olmv1::testenv::registry::TestRegistry> = OnceLock::new();
    REGISTRY.get_or_init(|| {
        olmv1::testenv::registry::TestRegistry::start_with_auth_tls()
            .unwrap_or_else(|e| panic!("starting the auth+TLS test registry: {e:#}"))
    })
}

/// `host:port` of a plain-HTTP "registry" that answers every request with HTTP 500.
pub fn failing_registry() -> &'static str {
    static HOST: OnceLock<String> = OnceLock::new();
    HOST.get_or_init(|| {
        use std::io::{Read, Write};
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap_or_else(|e| panic!("{e}"));
        let host = listener
            .local_addr()
            .map(|a| a.to_string())
            .unwrap_or_else(|e| panic!("{e}"));
        std::thread::spawn(move || {
            for mut stream in listener.incoming().flatten() {
                std::thread::spawn(move || {
                    let mut buf = [0u8; 8192];
                    while let Ok(n) = stream.read(&mut buf) {
                        let reply =
                            b"HTTP/1.1 500 Internal Server Error\r\ncontent-length: 5\r\n\r\nerror";
                        if n == 0 || stream.write_all(reply).is_err() {
                            return;
                        }
                    }
                });
            }
        });
        host
    })
}

/// The controller (`olmv1 controller` in this process, as its own non-admin
/// ServiceAccount) running against [`cluster`] and pulling from [`registry`].
/// How long an uninstall may take, in seconds, before a test calls it stuck: the
/// extension's finalizer deletes its CRDs, and kube-apiserver removes a CRD only once
/// it has deleted every object of it, retrying for up to a minute while the CRD's
/// storage is (re)initializing (apiextensions-apiserver's crd_finalizer.go,
/// `PollUntilContextTimeout(5s, 1m)`). Seen: a CRD gone 62 s after its deletion began
/// on a loaded machine; twice that is a stuck uninstall.
pub const UNINSTALL_SECS: u64 = 120;

/// The catalog size limit of the test controller.
pub const MAX_CATALOG_BYTES: u64 = 8 << 20;

pub struct RunningController {
    /// `http://127.0.0.1:<port>`: the catalog server.
    pub catalog_server: String,
    pub cache_dir: PathBuf,
    /// What the test can read of the running controller (its drift counters).
    pub observers: olmv1::controller::Observers,
}

pub fn controller() -> &'static RunningController {
    controller_with(|_| {})
}

/// [`controller`], started with `configure` applied to its arguments (only the first
/// call of a test binary starts it: one controller per control plane).
pub fn controller_with(
    configure: impl FnOnce(&mut olmv1::controller::ControllerArgs),
) -> &'static RunningController {
    static CONTROLLER: OnceLock<RunningController> = OnceLock::new();
    CONTROLLER.get_or_init(|| {
        let cluster = cluster();
        let registry = registry();
        let auth = auth_registry();
        let failing = failing_registry();
        let free = || olmv1::testenv::control_plane::free_port().unwrap_or_else(|e| panic!("{e}"));
        let (health, catalogs) = (free(), free());
        let cache_dir = std::env::temp_dir().join(format!(
            "olmv1-controller-{}-{}",
            std::process::id(),
            unique("c")
        ));
        std::fs::create_dir_all(&cache_dir).unwrap_or_else(|e| panic!("{e}"));
        let ca_file = cache_dir.join("registry-ca.pem");
        std::fs::write(&ca_file, auth.ca_pem().unwrap_or_default())
            .unwrap_or_else(|e| panic!("{e}"));
        let mut args = olmv1::controller::ControllerArgs {
            kubeconfig: Some(cluster.controller_kubeconfig.clone()),
            health_probe_bind_address: format!("127.0.0.1:{health}"),
            catalog_server_bind_address: format!("127.0.0.1:{catalogs}"),
            external_address: format!("127.0.0.1:{catalogs}"),
            catalog_server_tls_cert: None,
            catalog_server_tls_key: None,
            catalog_server: Default::default(),
            cache_dir: cache_dir.clone(),
            insecure_registries: vec![registry.host().to_string(), failing.to_string()],
            ca_bundle: Some(ca_file),
            registries_conf: None,
            signature_policy: None,
            registries_d: None,
            catalogd_cas_dir: None,
            global_pull_secret: None,
            pull_cas_dir: None,
            role: Default::default(),
            webhook: None,
            namespace: "olmv1-system".into(),
            service_account: "olmv1-controller".into(),
            strict_catalogs: false,
            lenient_catalogs: false,
            max_catalog_bytes: MAX_CATALOG_BYTES,
            poll_unit_seconds: 1,
            young_rollout_seconds: 60,
            metrics_bind_address: "127.0.0.1:0".into(),
            metrics_serving: Default::default(),
            workers: Default::default(),
            leader_elect: false,
            leader_elect_lease_duration: std::time::Duration::from_secs(27),
            leader_elect_renew_deadline: std::time::Duration::from_secs(22),
            leader_elect_retry_period: std::time::Duration::from_secs(18),
            lease_duration_seconds: None,
            leader_election_identity: None,
            default_installer_service_account: None,
            allow_controller_identity: false,
            // No nodes: Deployments never become available here; the rollout status
            // has its own test binary (e2e/rollout.rs) that turns this off.
            skip_rollout_wait: true,
            create_install_namespaces: false,
        };
        configure(&mut args);
        let observers = olmv1::controller::Observers::default();
        let observed = observers.clone();
        std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_multi_thread()
                .worker_threads(2)
                .enable_all()
                .build()
                .unwrap_or_else(|e| panic!("runtime: {e}"));
            if let Err(e) = runtime.block_on(olmv1::controller::run_observed(args, observed)) {
                panic!("the controller stopped: {e:#}");
            }
        });
        let ready = format!("http://127.0.0.1:{health}/readyz");
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
        while std::time::Instant::now() < deadline {
            let ok = std::net::TcpStream::connect(("127.0.0.1", health)).is_ok();
            if ok {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
        let _ = ready;
        RunningController {
            catalog_server: format!("http://127.0.0.1:{catalogs}"),
            cache_dir,
            observers,
        }
    })
}

/// A client acting as user `name` (the admin impersonating it; groups:
/// authenticated): a tenant or an extension author of SECURITY.md's threat model.
pub async fn user_client(name: &str) -> kube::Client {
    let path = &cluster().admin_kubeconfig;
    let kc = kube::config::Kubeconfig::read_from(path).expect("admin kubeconfig");
    let mut config =
        kube::Config::from_custom_kubeconfig(kc, &kube::config::KubeConfigOptions::default())
            .await
            .expect("config");
    config.auth_info.impersonate = Some(name.to_string());
    config.auth_info.impersonate_groups = Some(vec!["system:authenticated".into()]);
    kube::Client::try_from(config).expect("client")
}

/// Polls `check` every 100 ms until it returns `Some`, or panics after `seconds`.
pub async fn eventually<T, F, Fut>(seconds: u64, what: &str, mut check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(seconds);
    loop {
        if let Some(v) = check().await {
            return v;
        }
        if std::time::Instant::now() > deadline {
            panic!("timed out after {seconds}s waiting for {what}");
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
}

/// The identity holding the controller's leader Lease, if any.
#[allow(dead_code)]
pub async fn lease_holder(
    leases: &kube::Api<k8s_openapi::api::coordination::v1::Lease>,
) -> Option<String> {
    leases
        .get_opt(olmv1::controller::LEASE_NAME)
        .await
        .ok()
        .flatten()?
        .spec?
        .holder_identity
}
