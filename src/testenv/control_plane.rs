//! Starting a loopback control plane: etcd, kube-apiserver with token authentication
//! and RBAC enforced, optionally kube-controller-manager (garbage collection, namespace
//! deletion, Deployment → ReplicaSet). Writes an admin kubeconfig (`system:masters`).

use super::TestEnvError;
use super::pki::{self, Pki};
use super::process::{Lifetime, Process};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// The Kubernetes release the test control plane is built from (`hack/build-kube.sh`).
pub const KUBE_VERSION: &str = "v1.37.1";

/// Where the three binaries are.
#[derive(Clone, Debug)]
pub struct Binaries {
    pub etcd: PathBuf,
    pub kube_apiserver: PathBuf,
    pub kube_controller_manager: PathBuf,
}

/// `$OLMV1_KUBE_BIN_DIR`, else `$XDG_CACHE_HOME/olmv1/kube/<version>` (or `~/.cache/…`).
pub fn default_kube_bin_dir() -> PathBuf {
    if let Some(dir) = std::env::var_os("OLMV1_KUBE_BIN_DIR") {
        return PathBuf::from(dir);
    }
    let cache = std::env::var_os("XDG_CACHE_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")))
        .unwrap_or_else(|| PathBuf::from("/tmp"));
    cache.join("olmv1").join("kube").join(KUBE_VERSION)
}

impl Binaries {
    /// Finds the Kubernetes binaries in [`default_kube_bin_dir`] and etcd at `etcd`
    /// (or `$OLMV1_ETCD`), with a message saying how to get what is missing.
    pub fn locate(etcd: Option<PathBuf>) -> Result<Binaries, TestEnvError> {
        let dir = default_kube_bin_dir();
        let bins = Binaries {
            etcd: etcd
                .or_else(|| std::env::var_os("OLMV1_ETCD").map(PathBuf::from))
                .ok_or_else(|| TestEnvError::Missing("etcd binary: set OLMV1_ETCD (hack/control-plane.sh does it from the etcd-bin-vendored crate)".into()))?,
            kube_apiserver: dir.join("kube-apiserver"),
            kube_controller_manager: dir.join("kube-controller-manager"),
        };
        for bin in [&bins.kube_apiserver, &bins.kube_controller_manager] {
            if !bin.is_file() {
                return Err(TestEnvError::Missing(format!(
                    "{} not found: run hack/build-kube.sh once (it builds Kubernetes {KUBE_VERSION} with Go and caches it in {})",
                    bin.display(),
                    dir.display()
                )));
            }
        }
        if !bins.etcd.is_file() {
            return Err(TestEnvError::Missing(format!(
                "etcd not found at {}",
                bins.etcd.display()
            )));
        }
        Ok(bins)
    }
}

/// How to start a control plane.
#[derive(Clone, Debug)]
pub struct Options {
    pub binaries: Binaries,
    /// Data (etcd, certificates, kubeconfigs). Removed when supervised processes end.
    pub data_dir: PathBuf,
    /// Process logs; kept.
    pub log_dir: PathBuf,
    pub controller_manager: bool,
    pub lifetime: Lifetime,
    /// Also start a real node (see [`super::node`]): containerd, kubelet, scheduler,
    /// kube-proxy, CoreDNS, and a registry pods can reach.
    pub node: Option<super::node::NodeBinaries>,
}

/// A running control plane.
pub struct ControlPlane {
    pub server: String,
    pub admin_token: String,
    pub admin_kubeconfig: PathBuf,
    pub pki: Pki,
    pub data_dir: PathBuf,
    pub log_dir: PathBuf,
    /// With a node: its registry and images.
    pub node: Option<super::node::RunningNode>,
    node_binaries: Option<super::node::NodeBinaries>,
    processes: Vec<Process>,
    /// How etcd and kube-apiserver were started, to start them again (restarts).
    specs: Vec<ComponentSpec>,
}

/// How one restartable component was started (see [`ControlPlane::stop_component`]).
#[derive(Clone, Debug)]
struct ComponentSpec {
    name: String,
    program: PathBuf,
    args: Vec<String>,
    lifetime: Lifetime,
    cleanup: Option<PathBuf>,
    /// Starts so far (the log of start n > 1 is `<name>-<n>.log`).
    starts: u32,
}

/// Lowest port handed out by [`free_port`]; the ports below the kernel's ephemeral
/// range (`net.ipv4.ip_local_port_range`, 32768 by default) down to this one.
const FIRST_PORT: u16 = 10_000;

/// How often [`ControlPlane::start`] starts again on other ports when one was taken.
const PORT_ATTEMPTS: u32 = 3;

/// Reserves a free loopback port for a server a test starts (released at once; the
/// server binds it later).
///
/// A port the kernel hands out for `bind(:0)` lies in its ephemeral range, which is
/// also where the local end of every outgoing connection comes from: between the
/// release and the server's own bind, any client on the machine could take it (CI saw
/// kube-apiserver fail with "address already in use" that way). So the port is drawn
/// at random *below* the ephemeral range, never twice in one process, and checked free
/// on loopback and on all addresses (the node suite binds 0.0.0.0). Test processes
/// that run side by side (`hack/test.sh`'s lanes) each draw from a slice of their own
/// ([`port_slice`]): "never twice" then holds across them too.
pub fn free_port() -> Result<u16, TestEnvError> {
    use rand::Rng;
    use std::collections::BTreeSet;
    use std::sync::Mutex;
    static HANDED_OUT: Mutex<BTreeSet<u16>> = Mutex::new(BTreeSet::new());
    let below = ephemeral_low().unwrap_or(32_768);
    if below <= FIRST_PORT + 1_000 {
        return kernel_port();
    }
    let lane = |name: &str| std::env::var(name).ok().and_then(|v| v.parse().ok());
    let (low, high) = port_slice(
        FIRST_PORT,
        below,
        lane("OLMV1_TEST_PORT_SLOT"),
        lane("OLMV1_TEST_PORT_SLOTS"),
    );
    let mut rng = rand::rng();
    for _ in 0..200 {
        let port = rng.random_range(low..high);
        let mut handed = HANDED_OUT.lock().unwrap_or_else(|e| e.into_inner());
        if handed.contains(&port) {
            continue;
        }
        // One after the other: a listener on 127.0.0.1 would hold the port from 0.0.0.0.
        let loopback_free = TcpListener::bind(("127.0.0.1", port)).is_ok();
        let all_free = loopback_free && TcpListener::bind(("0.0.0.0", port)).is_ok();
        if all_free {
            handed.insert(port);
            return Ok(port);
        }
    }
    kernel_port()
}

/// The ports `[low, high)` of lane `slot` of `slots` in `[first, below)`: the whole
/// range unless both are set, `slots` > 1 and `slot` < `slots`.
fn port_slice(first: u16, below: u16, slot: Option<u16>, slots: Option<u16>) -> (u16, u16) {
    match (slot, slots) {
        (Some(slot), Some(slots)) if slots > 1 && slot < slots => {
            let width = (below - first) / slots;
            (first + slot * width, first + (slot + 1) * width)
        }
        _ => (first, below),
    }
}

/// The first port of the kernel's ephemeral range, when readable.
fn ephemeral_low() -> Option<u16> {
    let range = std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range").ok()?;
    range.split_whitespace().next()?.parse().ok()
}

/// A port the kernel picks (the fallback when no range lies below its ephemeral one).
fn kernel_port() -> Result<u16, TestEnvError> {
    let listener =
        TcpListener::bind("127.0.0.1:0").map_err(|e| TestEnvError::Port(e.to_string()))?;
    let port = listener
        .local_addr()
        .map_err(|e| TestEnvError::Port(e.to_string()))?
        .port();
    Ok(port)
}

fn random_token() -> String {
    use rand::Rng;
    let mut rng = rand::rng();
    (0..32)
        .map(|_| format!("{:x}", rng.random_range(0..16u8)))
        .collect()
}

impl ControlPlane {
    /// Starts etcd, kube-apiserver (and kube-controller-manager) and waits until the
    /// API server is ready. On failure every started process is stopped again.
    pub async fn start(opts: Options) -> Result<ControlPlane, TestEnvError> {
        std::fs::create_dir_all(&opts.data_dir).map_err(|e| TestEnvError::io(&opts.data_dir, e))?;
        std::fs::create_dir_all(&opts.log_dir).map_err(|e| TestEnvError::io(&opts.log_dir, e))?;
        let pki = pki::generate(&opts.data_dir.join("pki"))?;
        let admin_token = random_token();
        let kcm_token = random_token();
        let tokens = opts.data_dir.join("tokens.csv");
        std::fs::write(
            &tokens,
            format!(
                "{admin_token},olmv1-admin,olmv1-admin,\"system:masters\"\n{kcm_token},system:kube-controller-manager,kcm,\"system:masters\"\n"
            ),
        )
        .map_err(|e| TestEnvError::io(&tokens, e))?;

        let mut cp = ControlPlane {
            server: String::new(),
            admin_token: admin_token.clone(),
            admin_kubeconfig: opts.data_dir.join("admin.kubeconfig"),
            pki,
            data_dir: opts.data_dir.clone(),
            log_dir: opts.log_dir.clone(),
            node: None,
            node_binaries: opts.node.clone(),
            processes: Vec::new(),
            specs: Vec::new(),
        };
        let mut attempt = 1;
        loop {
            match cp.start_processes(&opts, &tokens, &kcm_token).await {
                Ok(()) => return Ok(cp),
                Err(e) if attempt < PORT_ATTEMPTS && e.port_taken() => {
                    // Another program took a port between `free_port` and the bind:
                    // start everything again on other ports, with empty etcd data.
                    eprintln!("test control plane: {e}\nstarting it again on other ports");
                    cp.stop_processes();
                    let etcd_data = opts.data_dir.join("etcd");
                    let _ = std::fs::remove_dir_all(&etcd_data);
                    attempt += 1;
                }
                Err(e) => {
                    cp.stop();
                    return Err(e);
                }
            }
        }
    }

    async fn start_processes(
        &mut self,
        opts: &Options,
        tokens: &Path,
        kcm_token: &str,
    ) -> Result<(), TestEnvError> {
        let data = &opts.data_dir;
        let (client_port, peer_port, api_port) = (free_port()?, free_port()?, free_port()?);
        let etcd_url = format!("http://127.0.0.1:{client_port}");
        let peer_url = format!("http://127.0.0.1:{peer_port}");
        let etcd_args: Vec<String> = vec![
            format!("--data-dir={}", data.join("etcd").display()),
            "--name=olmv1".into(),
            format!("--listen-client-urls={etcd_url}"),
            format!("--advertise-client-urls={etcd_url}"),
            format!("--listen-peer-urls={peer_url}"),
            format!("--initial-advertise-peer-urls={peer_url}"),
            format!("--initial-cluster=olmv1={peer_url}"),
            "--unsafe-no-fsync".into(),
            "--log-level=warn".into(),
        ];
        self.processes.push(Process::spawn(
            "etcd",
            &opts.binaries.etcd,
            &etcd_args,
            &opts.log_dir.join("etcd.log"),
            opts.lifetime,
            Some(data),
            data,
        )?);
        self.specs.push(ComponentSpec {
            name: "etcd".into(),
            program: opts.binaries.etcd.clone(),
            args: etcd_args.clone(),
            lifetime: opts.lifetime,
            cleanup: Some(data.clone()),
            starts: 1,
        });
        wait_for(Duration::from_secs(30), "etcd", &mut self.processes, || {
            let url = format!("{etcd_url}/health");
            async move {
                reqwest::get(url)
                    .await
                    .map(|r| r.status().is_success())
                    .unwrap_or(false)
            }
        })
        .await?;

        self.server = format!("https://127.0.0.1:{api_port}");
        if opts.node.is_some() {
            super::node::prepare_host()?;
        }
        let pki = &self.pki;
        let mut api_args: Vec<String> = vec![
            format!("--etcd-servers={etcd_url}"),
            format!("--secure-port={api_port}"),
            format!("--tls-cert-file={}", pki.serving_cert.display()),
            format!("--tls-private-key-file={}", pki.serving_key.display()),
            format!("--client-ca-file={}", pki.ca_cert.display()),
            format!("--token-auth-file={}", tokens.display()),
            "--authorization-mode=RBAC".into(),
            format!("--service-account-issuer={}", self.server),
            format!(
                "--service-account-signing-key-file={}",
                pki.sa_key.display()
            ),
            format!("--service-account-key-file={}", pki.sa_pub.display()),
            format!("--service-cluster-ip-range={}", super::node::SERVICE_RANGE),
            "--allow-privileged=true".into(),
            "--profiling=false".into(),
            format!("--cert-dir={}", data.join("apiserver-certs").display()),
        ];
        if opts.node.is_some() {
            // Pods reach the API server through the `kubernetes` Service, whose endpoint
            // is the advertised address; they get ServiceAccount tokens mounted.
            api_args.extend([
                "--bind-address=0.0.0.0".into(),
                format!("--advertise-address={}", super::node::HOST_ADDRESS),
                // Logs and exec reach the kubelet by the node's address, not its name.
                "--kubelet-preferred-address-types=InternalIP".into(),
            ]);
        } else {
            api_args.extend([
                "--bind-address=127.0.0.1".into(),
                "--advertise-address=127.0.0.1".into(),
                "--disable-admission-plugins=ServiceAccount".into(),
                "--endpoint-reconciler-type=none".into(),
            ]);
        }
        self.processes.push(Process::spawn(
            "kube-apiserver",
            &opts.binaries.kube_apiserver,
            &api_args,
            &opts.log_dir.join("kube-apiserver.log"),
            opts.lifetime,
            None,
            data,
        )?);
        self.specs.push(ComponentSpec {
            name: "kube-apiserver".into(),
            program: opts.binaries.kube_apiserver.clone(),
            args: api_args.clone(),
            lifetime: opts.lifetime,
            cleanup: None,
            starts: 1,
        });
        write_kubeconfig(
            &self.admin_kubeconfig,
            &self.server,
            &self.pki.ca_pem,
            &self.admin_token,
            "olmv1-admin",
        )?;
        let kubeconfig = self.admin_kubeconfig.clone();
        wait_for(
            Duration::from_secs(90),
            "kube-apiserver",
            &mut self.processes,
            || {
                let kubeconfig = kubeconfig.clone();
                async move { api_ready(&kubeconfig).await }
            },
        )
        .await?;

        if opts.controller_manager {
            let kcm_kubeconfig = data.join("kcm.kubeconfig");
            write_kubeconfig(
                &kcm_kubeconfig,
                &self.server,
                &self.pki.ca_pem,
                kcm_token,
                "kcm",
            )?;
            let kcm_args: Vec<String> = vec![
                format!("--kubeconfig={}", kcm_kubeconfig.display()),
                "--controllers=*".into(),
                format!(
                    "--service-account-private-key-file={}",
                    self.pki.sa_key.display()
                ),
                format!("--root-ca-file={}", self.pki.ca_cert.display()),
                "--use-service-account-credentials=false".into(),
                "--leader-elect=false".into(),
                "--secure-port=0".into(),
                "--concurrent-gc-syncs=10".into(),
            ];
            self.processes.push(Process::spawn(
                "kube-controller-manager",
                &opts.binaries.kube_controller_manager,
                &kcm_args,
                &opts.log_dir.join("kube-controller-manager.log"),
                opts.lifetime,
                None,
                data,
            )?);
        }
        if let Some(binaries) = &opts.node {
            let client = self.admin_client().await?;
            let node = super::node::start_with_registry(
                binaries,
                &self.admin_kubeconfig,
                &client,
                opts,
                &mut self.processes,
            )
            .await?;
            self.node = Some(node);
        }
        Ok(())
    }

    /// A client acting as the cluster administrator.
    pub async fn admin_client(&self) -> Result<kube::Client, TestEnvError> {
        client_from_kubeconfig(&self.admin_kubeconfig).await
    }

    /// Stops one component (`etcd` or `kube-apiserver`) for a fault test, keeping its
    /// data, certificates, port and arguments for [`Self::start_component`]. Processes
    /// that depend on it (kube-controller-manager, clients) keep running and see it gone.
    pub fn stop_component(&mut self, name: &str) -> Result<(), TestEnvError> {
        let spec = self.spec(name)?.clone();
        let Some(i) = self.processes.iter().position(|p| p.name == name) else {
            return Err(TestEnvError::Missing(format!("{name} is not running")));
        };
        let marker = spec
            .cleanup
            .as_ref()
            .map(|d| d.join(super::process::KEEP_MARKER));
        if let Some(m) = &marker {
            std::fs::write(m, b"").map_err(|e| TestEnvError::io(m, e))?;
        }
        let mut process = self.processes.remove(i);
        process.stop();
        if let Some(m) = &marker {
            std::fs::remove_file(m).map_err(|e| TestEnvError::io(m, e))?;
        }
        Ok(())
    }

    /// Starts a component stopped by [`Self::stop_component`] again, with the same
    /// arguments (port, data directory, certificates), and waits until it is ready
    /// (etcd healthy, or the API server's `/readyz` ok).
    pub async fn start_component(&mut self, name: &str) -> Result<(), TestEnvError> {
        if self.processes.iter().any(|p| p.name == name) {
            return Err(TestEnvError::Missing(format!(
                "{name} is still running: stop it first"
            )));
        }
        let spec = {
            let spec = self.spec_mut(name)?;
            spec.starts += 1;
            spec.clone()
        };
        let log = self.log_dir.join(format!("{name}-{}.log", spec.starts));
        self.processes.push(Process::spawn(
            &spec.name,
            &spec.program,
            &spec.args,
            &log,
            spec.lifetime,
            spec.cleanup.as_deref(),
            &self.data_dir,
        )?);
        if name == "etcd" {
            let url = spec
                .args
                .iter()
                .find_map(|a| a.strip_prefix("--advertise-client-urls="))
                .map(|u| format!("{u}/health"))
                .unwrap_or_default();
            wait_for(Duration::from_secs(30), name, &mut self.processes, || {
                let url = url.clone();
                async move {
                    reqwest::get(url)
                        .await
                        .map(|r| r.status().is_success())
                        .unwrap_or(false)
                }
            })
            .await
        } else {
            let kubeconfig = self.admin_kubeconfig.clone();
            wait_for(Duration::from_secs(90), name, &mut self.processes, || {
                let kubeconfig = kubeconfig.clone();
                async move { api_ready(&kubeconfig).await }
            })
            .await
        }
    }

    /// [`Self::stop_component`], a pause of `down`, then [`Self::start_component`].
    pub async fn restart_component(
        &mut self,
        name: &str,
        down: Duration,
    ) -> Result<(), TestEnvError> {
        self.stop_component(name)?;
        tokio::time::sleep(down).await;
        self.start_component(name).await
    }

    fn spec(&self, name: &str) -> Result<&ComponentSpec, TestEnvError> {
        self.specs
            .iter()
            .find(|s| s.name == name)
            .ok_or_else(|| TestEnvError::Missing(format!("restartable component {name}")))
    }

    fn spec_mut(&mut self, name: &str) -> Result<&mut ComponentSpec, TestEnvError> {
        self.specs
            .iter_mut()
            .find(|s| s.name == name)
            .ok_or_else(|| TestEnvError::Missing(format!("restartable component {name}")))
    }

    /// Stops every process (supervised ones are also stopped when this process exits).
    pub fn stop(&mut self) {
        self.stop_processes();
        if let Some(b) = self.node_binaries.take() {
            super::node::reset(Some(&b.kube_proxy));
        }
    }

    /// Stops every process started so far, the last started first.
    fn stop_processes(&mut self) {
        for p in self.processes.iter_mut().rev() {
            p.stop();
        }
        self.processes.clear();
        self.specs.clear();
    }

    /// Hands the processes over: they keep running after this value is dropped (used
    /// for detached control planes and for the test harness's process-wide instance).
    pub fn leak(mut self) -> (String, PathBuf) {
        let processes = std::mem::take(&mut self.processes);
        std::mem::forget(processes);
        self.node_binaries = None;
        (self.server.clone(), self.admin_kubeconfig.clone())
    }
}

impl Drop for ControlPlane {
    fn drop(&mut self) {
        self.stop();
    }
}

pub(super) async fn wait_for<F, Fut>(
    limit: Duration,
    what: &str,
    processes: &mut [Process],
    mut probe: F,
) -> Result<(), TestEnvError>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let start = Instant::now();
    loop {
        for p in processes.iter_mut() {
            p.check_running()?;
        }
        if probe().await {
            return Ok(());
        }
        if start.elapsed() > limit {
            let log = processes
                .iter()
                .find(|p| p.name == what)
                .map(|p| p.log.clone())
                .unwrap_or_default();
            return Err(TestEnvError::NotReady {
                name: what.to_string(),
                seconds: limit.as_secs(),
                tail: super::process::log_tail(&log, 20),
                log,
            });
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

async fn api_ready(kubeconfig: &Path) -> bool {
    let Ok(client) = client_from_kubeconfig(kubeconfig).await else {
        return false;
    };
    let Ok(req) = http::Request::get("/readyz").body(Vec::new()) else {
        return false;
    };
    matches!(client.request_text(req).await, Ok(body) if body.trim() == "ok")
}

/// Writes a kubeconfig with a bearer token.
pub fn write_kubeconfig(
    path: &Path,
    server: &str,
    ca_pem: &str,
    token: &str,
    user: &str,
) -> Result<(), TestEnvError> {
    let ca = data_encoding::BASE64.encode(ca_pem.as_bytes());
    let doc = serde_json::json!({
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "olmv1", "cluster": {"server": server, "certificate-authority-data": ca}}],
        "users": [{"name": user, "user": {"token": token}}],
        "contexts": [{"name": user, "context": {"cluster": "olmv1", "user": user}}],
        "current-context": user,
    });
    let yaml =
        serde_saphyr::to_string(&doc).map_err(|e| TestEnvError::Pki(format!("kubeconfig: {e}")))?;
    std::fs::write(path, yaml).map_err(|e| TestEnvError::io(path, e))
}

/// A client from a kubeconfig file.
pub async fn client_from_kubeconfig(path: &Path) -> Result<kube::Client, TestEnvError> {
    let _ = rustls::crypto::aws_lc_rs::default_provider().install_default();
    let kc = kube::config::Kubeconfig::read_from(path)
        .map_err(|e| TestEnvError::Kube(format!("{}: {e}", path.display())))?;
    let config =
        kube::Config::from_custom_kubeconfig(kc, &kube::config::KubeConfigOptions::default())
            .await
            .map_err(|e| TestEnvError::Kube(format!("{}: {e}", path.display())))?;
    kube::Client::try_from(config).map_err(|e| TestEnvError::Kube(e.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn free_ports_are_distinct_bindable_and_below_the_ephemeral_range() {
        let below = ephemeral_low().unwrap_or(32_768);
        let mut seen = std::collections::BTreeSet::new();
        for _ in 0..50 {
            let port = free_port().unwrap_or_else(|e| panic!("{e}"));
            assert!(seen.insert(port), "port {port} handed out twice");
            if below > FIRST_PORT + 1_000 {
                assert!(
                    (FIRST_PORT..below).contains(&port),
                    "port {port} outside {FIRST_PORT}..{below}"
                );
            }
            TcpListener::bind(("127.0.0.1", port))
                .unwrap_or_else(|e| panic!("port {port} not bindable: {e}"));
        }
    }

    #[test]
    fn lanes_draw_from_disjoint_slices_of_the_range() {
        assert_eq!(port_slice(10_000, 32_768, None, None), (10_000, 32_768));
        assert_eq!(
            port_slice(10_000, 32_768, Some(0), Some(1)),
            (10_000, 32_768)
        );
        assert_eq!(
            port_slice(10_000, 32_768, Some(2), Some(2)),
            (10_000, 32_768)
        );
        let (a, b) = (
            port_slice(10_000, 32_768, Some(0), Some(2)),
            port_slice(10_000, 32_768, Some(1), Some(2)),
        );
        assert_eq!(a, (10_000, 21_384));
        assert_eq!(b, (21_384, 32_768));
    }

    #[test]
    fn only_a_taken_port_counts_as_port_taken() {
        let exited = |tail: &str| TestEnvError::Exited {
            name: "kube-apiserver".into(),
            status: "exit status: 1".into(),
            log: PathBuf::from("/tmp/kube-apiserver.log"),
            tail: tail.into(),
        };
        assert!(exited("listen tcp 127.0.0.1:37541: bind: address already in use").port_taken());
        assert!(!exited("etcd cluster is unavailable").port_taken());
        assert!(!TestEnvError::Port("none".into()).port_taken());
    }
}
