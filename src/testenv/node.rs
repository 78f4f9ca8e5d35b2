//! A real node beside the test control plane: containerd + runc with the CNI bridge
//! plugin (Debian's packages), a kubelet, kube-scheduler and kube-proxy (built from the
//! same `k8s.io/kubernetes` module as the API server, `hack/build-node.sh`) and CoreDNS
//! (built from its Go module) answering for `cluster.local` on the node's host address.
//!
//! The node is reached from pods at [`HOST_ADDRESS`], the gateway of the pod bridge,
//! which this module creates before anything starts: the API server advertises it (so
//! the `kubernetes` Service has an endpoint), CoreDNS binds it, and the node registry
//! listens on it. Only one node runs on a machine at a time (it owns host iptables
//! rules, the bridge and `/run/olmv1-node`); starting one first clears what a previous
//! run left behind (containers, mounts, rules).

use super::TestEnvError;
use super::control_plane::wait_for;
use super::process::{Lifetime, Process};
use std::net::Ipv4Addr;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

/// The node's address as pods see it: the gateway of the pod bridge.
pub const HOST_ADDRESS: Ipv4Addr = Ipv4Addr::new(10, 88, 0, 1);
/// The pod network (one bridge, host-local IPAM).
pub const POD_SUBNET: &str = "10.88.0.0/16";
/// The ClusterIP of the `kubernetes` Service (first address of the Service range).
pub const KUBERNETES_SERVICE_IP: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 1);
/// The Service range the API server is started with.
pub const SERVICE_RANGE: &str = "10.0.0.0/24";
/// The node's name.
pub const NODE_NAME: &str = "olmv1-node";
/// The bridge the CNI plugin attaches pods to (created here with [`HOST_ADDRESS`]).
pub const BRIDGE: &str = "olmv1-cni0";
/// Sockets and runtime state (short paths: unix socket paths are limited to 108 bytes).
pub const RUN_DIR: &str = "/run/olmv1-node";
/// containerd's images and snapshots, the kubelet's root (pod volumes), pod logs, IP
/// allocations: outside any test's data directory, so that removing that directory
/// never descends into a pod's mounts; cleared by [`reset`].
pub const STATE_DIR: &str = "/var/lib/olmv1-node";

/// Where the node's programs are.
#[derive(Clone, Debug)]
pub struct NodeBinaries {
    pub kubelet: PathBuf,
    pub kube_scheduler: PathBuf,
    pub kube_proxy: PathBuf,
    pub coredns: PathBuf,
    pub containerd: PathBuf,
    /// The test image program (`hack/testimage`): the pod sandbox and a tiny workload.
    pub testimage: PathBuf,
}

impl NodeBinaries {
    /// Finds the binaries `hack/build-node.sh` builds (next to the control plane's) and
    /// containerd/runc from the system, with a message saying how to get what is missing.
    pub fn locate() -> Result<NodeBinaries, TestEnvError> {
        let dir = super::control_plane::default_kube_bin_dir();
        let bins = NodeBinaries {
            kubelet: dir.join("kubelet"),
            kube_scheduler: dir.join("kube-scheduler"),
            kube_proxy: dir.join("kube-proxy"),
            coredns: dir.join("coredns"),
            containerd: PathBuf::from("/usr/bin/containerd"),
            testimage: dir.join("testimage"),
        };
        for bin in [
            &bins.kubelet,
            &bins.kube_scheduler,
            &bins.kube_proxy,
            &bins.coredns,
            &bins.testimage,
        ] {
            if !bin.is_file() {
                return Err(TestEnvError::Missing(format!(
                    "{} not found: run hack/build-node.sh once (it builds the node's programs with Go into {})",
                    bin.display(),
                    dir.display()
                )));
            }
        }
        for (what, path) in [
            ("containerd", "/usr/bin/containerd"),
            ("runc", "/usr/sbin/runc"),
            ("the CNI bridge plugin", "/usr/lib/cni/bridge"),
            ("iptables", "/usr/sbin/iptables"),
        ] {
            if !Path::new(path).exists() {
                return Err(TestEnvError::Missing(format!(
                    "{what} ({path}): run `hack/prereqs.sh demo` as root, which installs Debian's containerd, runc, containernetworking-plugins and iptables"
                )));
            }
        }
        Ok(bins)
    }
}

/// What the node needs from the control plane it joins.
pub struct NodeContext<'a> {
    pub binaries: &'a NodeBinaries,
    /// A kubeconfig the node's components use (an identity in `system:masters`).
    pub kubeconfig: &'a Path,
    /// The `host:port` of the registry serving the node's images over plain HTTP.
    pub registry_host: &'a str,
    /// The pod sandbox image (`<registry_host>/…@sha256:…`).
    pub pause_image: &'a str,
    pub data_dir: &'a Path,
    pub log_dir: &'a Path,
    pub lifetime: Lifetime,
}

fn run(program: &str, args: &[&str]) -> Result<String, TestEnvError> {
    let out = Command::new(program)
        .args(args)
        .stdin(Stdio::null())
        .output()
        .map_err(|e| TestEnvError::Spawn {
            program: program.to_string(),
            source: e,
        })?;
    if !out.status.success() {
        return Err(TestEnvError::Kube(format!(
            "{program} {}: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        )));
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

fn write(path: &Path, content: &str) -> Result<(), TestEnvError> {
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent).map_err(|e| TestEnvError::io(parent, e))?;
    }
    std::fs::write(path, content).map_err(|e| TestEnvError::io(path, e))
}

/// Host settings and the pod bridge: forwarding, bridged traffic through iptables (for
/// Services between pods), and [`BRIDGE`] holding [`HOST_ADDRESS`]. Needs root.
pub fn prepare_host() -> Result<(), TestEnvError> {
    for (key, value) in [
        ("/proc/sys/net/ipv4/ip_forward", "1"),
        ("/proc/sys/net/bridge/bridge-nf-call-iptables", "1"),
    ] {
        std::fs::write(key, value).map_err(|e| TestEnvError::io(Path::new(key), e))?;
    }
    let exists = Command::new("ip")
        .args(["link", "show", BRIDGE])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .map(|s| s.success())
        .unwrap_or(false);
    if !exists {
        run("ip", &["link", "add", BRIDGE, "type", "bridge"])?;
    }
    let addrs = run("ip", &["-4", "addr", "show", "dev", BRIDGE])?;
    let cidr = format!("{HOST_ADDRESS}/16");
    if !addrs.contains(&cidr) {
        run("ip", &["addr", "add", &cidr, "dev", BRIDGE])?;
    }
    run("ip", &["link", "set", BRIDGE, "up"])?;
    Ok(())
}

/// Stops what a node left behind: the pods' processes (kubelet's cgroups), the
/// containerd shims serving our socket, mounts under the node's directories, and
/// kube-proxy's rules. Safe to run when nothing is left.
pub fn reset(kube_proxy: Option<&Path>) {
    // One implementation, in the shell: the reaper runs the same script after the
    // test process is gone.
    let _ = Command::new("sh")
        .arg("-c")
        .arg(reset_script(kube_proxy))
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status();
}

/// What [`reset`] runs, also run by the reaper after the test process exited (see
/// [`Process::reaper`]): kill containerd and its shims (`… -address
/// /run/olmv1-node/containerd.sock`) and the pods' processes (kubelet's cgroups),
/// unmount what is under the node's directories deepest first, remove kube-proxy's
/// rules, remove the directories.
pub fn reset_script(kube_proxy: Option<&Path>) -> String {
    let proxy = kube_proxy
        .map(|p| format!("'{}' --cleanup >/dev/null 2>&1\n", p.display()))
        .unwrap_or_default();
    format!(
        r#"for p in /proc/[0-9]*; do
  cmd=$(tr '\0' ' ' < "$p/cmdline" 2>/dev/null) || continue
  case "$cmd" in /usr/bin/containerd*{RUN_DIR}*) kill -9 "${{p#/proc/}}" 2>/dev/null;; esac
done
for i in 1 2 3; do
  for c in pids memory cpu; do
    find /sys/fs/cgroup/$c/kubepods -name cgroup.procs -exec cat {{}} + 2>/dev/null | xargs -r kill -9 2>/dev/null
  done
done
awk '{{print $5}}' /proc/self/mountinfo | grep -E '^({RUN_DIR}|{STATE_DIR})(/|$)' | sort -r | xargs -r -n1 umount -l 2>/dev/null
{proxy}rm -rf --one-file-system {RUN_DIR} {STATE_DIR}
"#
    )
}

/// containerd's configuration: CRI with runc (cgroupfs), the CNI bridge from
/// `/usr/lib/cni`, plain HTTP to the node registry, state under [`RUN_DIR`].
fn containerd_config(root: &Path, cni_conf: &Path, certs: &Path, pause: &str) -> String {
    format!(
        r#"version = 2
root = "{root}"
state = "{RUN_DIR}/containerd"
[grpc]
  address = "{RUN_DIR}/containerd.sock"
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "{pause}"
  enable_selinux = false
  # This machine's root lacks CAP_SYS_RESOURCE: the kubelet's -998 for the sandbox
  # cannot be set ("failed to update /proc/self/oom_score_adj: Permission denied");
  # clamp scores to containerd's own, as for rootless containerd.
  restrict_oom_score_adj = true
  # Pod network namespaces under the state directory, so that `reset` finds (and
  # releases) them: a leftover namespace keeps its veth, and its IP, on the bridge.
  netns_mounts_under_state_dir = true
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = "{cni_conf}"
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
  [plugins."io.containerd.grpc.v1.cri".registry]
    config_path = "{certs}"
"#,
        root = root.display(),
        cni_conf = cni_conf.display(),
        certs = certs.display(),
    )
}

fn cni_config(ipam_dir: &Path) -> String {
    serde_json::json!({
        "cniVersion": "1.0.0",
        "name": "olmv1",
        "plugins": [
            {
                "type": "bridge", "bridge": BRIDGE, "isGateway": true, "ipMasq": true,
                "hairpinMode": true,
                "ipam": {
                    "type": "host-local",
                    "ranges": [[{"subnet": POD_SUBNET, "gateway": HOST_ADDRESS.to_string()}]],
                    "routes": [{"dst": "0.0.0.0/0"}],
                    "dataDir": ipam_dir.display().to_string(),
                },
            },
            {"type": "portmap", "capabilities": {"portMappings": true}},
        ],
    })
    .to_string()
}

fn kubelet_config(port: u16, healthz_port: u16) -> String {
    serde_json::json!({
        "apiVersion": "kubelet.config.k8s.io/v1beta1",
        "kind": "KubeletConfiguration",
        "cgroupDriver": "cgroupfs",
        "failCgroupV1": false,
        "failSwapOn": false,
        "containerRuntimeEndpoint": format!("unix://{RUN_DIR}/containerd.sock"),
        "address": HOST_ADDRESS.to_string(),
        "port": port,
        "readOnlyPort": 0,
        "healthzBindAddress": "127.0.0.1",
        "healthzPort": healthz_port,
        "authentication": {"anonymous": {"enabled": true}, "webhook": {"enabled": false}},
        "authorization": {"mode": "AlwaysAllow"},
        "clusterDNS": [HOST_ADDRESS.to_string()],
        "clusterDomain": "cluster.local",
        "podLogsDir": format!("{STATE_DIR}/pod-logs"),
        "evictionHard": {
            "memory.available": "100Mi", "nodefs.available": "1%",
            "imagefs.available": "1%", "nodefs.inodesFree": "1%",
        },
        "imageGCHighThresholdPercent": 100,
        "imageGCLowThresholdPercent": 99,
        "serializeImagePulls": false,
        "registerNode": true,
        "nodeStatusUpdateFrequency": "5s",
        "syncFrequency": "10s",
        "fileCheckFrequency": "10s",
    })
    .to_string()
}

fn corefile(kubeconfig: &Path) -> String {
    format!(
        r#".:53 {{
    bind {HOST_ADDRESS}
    errors
    kubernetes cluster.local in-addr.arpa ip6.arpa {{
        kubeconfig {kubeconfig}
        pods insecure
        fallthrough in-addr.arpa ip6.arpa
    }}
    forward . /etc/resolv.conf
    cache 5
}}
"#,
        kubeconfig = kubeconfig.display()
    )
}

/// Writes the configuration of every node component under `<data_dir>/node`.
struct Layout {
    containerd_config: PathBuf,
    kubelet_config: PathBuf,
    kubelet_root: PathBuf,
    corefile: PathBuf,
}

fn layout(ctx: &NodeContext<'_>) -> Result<(Layout, u16), TestEnvError> {
    let dir = ctx.data_dir.join("node");
    let certs = dir.join("certs.d");
    let hosts = format!(
        "server = \"http://{h}\"\n\n[host.\"http://{h}\"]\n  capabilities = [\"pull\", \"resolve\"]\n  skip_verify = true\n",
        h = ctx.registry_host
    );
    write(&certs.join(ctx.registry_host).join("hosts.toml"), &hosts)?;
    let cni_conf = dir.join("cni");
    write(
        &cni_conf.join("10-olmv1.conflist"),
        &cni_config(&Path::new(STATE_DIR).join("ipam")),
    )?;
    let l = Layout {
        containerd_config: dir.join("containerd.toml"),
        kubelet_config: dir.join("kubelet.json"),
        kubelet_root: Path::new(STATE_DIR).join("kubelet"),
        corefile: dir.join("Corefile"),
    };
    write(
        &l.containerd_config,
        &containerd_config(
            &Path::new(STATE_DIR).join("containerd"),
            &cni_conf,
            &certs,
            ctx.pause_image,
        ),
    )?;
    let kubelet_port = super::control_plane::free_port()?;
    let healthz = super::control_plane::free_port()?;
    write(&l.kubelet_config, &kubelet_config(kubelet_port, healthz))?;
    write(&l.corefile, &corefile(ctx.kubeconfig))?;
    Ok((l, healthz))
}

fn spawn(
    ctx: &NodeContext<'_>,
    name: &str,
    program: &Path,
    args: Vec<String>,
) -> Result<Process, TestEnvError> {
    Process::spawn(
        name,
        program,
        &args,
        &ctx.log_dir.join(format!("{name}.log")),
        ctx.lifetime,
        None,
        ctx.data_dir,
    )
}

/// The file whose lock says "a node runs on this machine" (outside [`RUN_DIR`], which
/// a reset removes).
pub const MACHINE_LOCK: &str = "/var/lock/olmv1-node.lock";

/// There is one node per machine (fixed bridge, addresses and state directories): two
/// test processes starting one at once would tear down each other's pods. The first
/// holds an exclusive lock on [`MACHINE_LOCK`] until it exits; the next one waits.
fn hold_machine_lock() -> Result<(), TestEnvError> {
    static HELD: std::sync::OnceLock<std::fs::File> = std::sync::OnceLock::new();
    if HELD.get().is_some() {
        return Ok(());
    }
    let path = Path::new(MACHINE_LOCK);
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).map_err(|e| TestEnvError::io(dir, e))?;
    }
    let file = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(path)
        .map_err(|e| TestEnvError::io(path, e))?;
    if file.try_lock().is_err() {
        eprintln!(
            "another process runs the node on this machine (it holds {MACHINE_LOCK}): waiting for it to finish"
        );
        file.lock().map_err(|e| TestEnvError::io(path, e))?;
    }
    let _ = HELD.set(file);
    Ok(())
}

/// Where a node started detached (`olmv1-testenv up --node`, the demo) records its
/// kubelet's pid; removed with the rest of [`RUN_DIR`] by `down`.
const DETACHED_MARKER: &str = "/run/olmv1-node/detached-kubelet.pid";

/// A node started detached outlives its launcher and so its machine lock: a test
/// starting a node must not reset it under the user's feet.
fn refuse_if_detached_node_runs() -> Result<(), TestEnvError> {
    let Ok(pid) = std::fs::read_to_string(DETACHED_MARKER) else {
        return Ok(());
    };
    let cmdline = std::fs::read(format!("/proc/{}/cmdline", pid.trim())).unwrap_or_default();
    if String::from_utf8_lossy(&cmdline).contains("kubelet") {
        return Err(TestEnvError::Missing(format!(
            "a free node: one started by `olmv1-testenv up --node` (kubelet pid {}) still runs on this machine; stop it with `hack/control-plane.sh down` (or `olmv1-testenv down`) first",
            pid.trim()
        )));
    }
    Ok(())
}

/// Starts containerd, kube-scheduler, kube-proxy, CoreDNS and the kubelet (in that
/// order), appending them to `processes`, and waits until the node is `Ready`.
pub async fn start(
    ctx: &NodeContext<'_>,
    client: &kube::Client,
    processes: &mut Vec<Process>,
) -> Result<(), TestEnvError> {
    let b = ctx.binaries;
    hold_machine_lock()?;
    refuse_if_detached_node_runs()?;
    reset(Some(&b.kube_proxy));
    prepare_host()?;
    std::fs::create_dir_all(RUN_DIR).map_err(|e| TestEnvError::io(Path::new(RUN_DIR), e))?;
    let (l, kubelet_healthz) = layout(ctx)?;
    if ctx.lifetime == Lifetime::Supervised {
        // Pods outlive the kubelet and containerd: clear them when the test process ends.
        processes.push(Process::reaper(
            "node-reaper",
            &reset_script(Some(&b.kube_proxy)),
            &ctx.log_dir.join("node-reaper.log"),
        )?);
    }
    let kc = ctx.kubeconfig.display().to_string();
    processes.push(spawn(
        ctx,
        "containerd",
        &b.containerd,
        vec![format!("--config={}", l.containerd_config.display())],
    )?);
    let sock = PathBuf::from(format!("{RUN_DIR}/containerd.sock"));
    wait_for(Duration::from_secs(30), "containerd", processes, || {
        let ready = sock.exists();
        async move { ready }
    })
    .await?;
    let scheduler_port = super::control_plane::free_port()?;
    processes.push(spawn(
        ctx,
        "kube-scheduler",
        &b.kube_scheduler,
        vec![
            format!("--kubeconfig={kc}"),
            format!("--authentication-kubeconfig={kc}"),
            format!("--authorization-kubeconfig={kc}"),
            "--bind-address=127.0.0.1".into(),
            format!("--secure-port={scheduler_port}"),
            "--leader-elect=false".into(),
        ],
    )?);
    let (proxy_healthz, proxy_metrics) = (
        super::control_plane::free_port()?,
        super::control_plane::free_port()?,
    );
    processes.push(spawn(
        ctx,
        "kube-proxy",
        &b.kube_proxy,
        vec![
            format!("--kubeconfig={kc}"),
            format!("--hostname-override={NODE_NAME}"),
            format!("--cluster-cidr={POD_SUBNET}"),
            "--proxy-mode=iptables".into(),
            "--conntrack-max-per-core=0".into(),
            format!("--healthz-bind-address=127.0.0.1:{proxy_healthz}"),
            format!("--metrics-bind-address=127.0.0.1:{proxy_metrics}"),
        ],
    )?);
    processes.push(spawn(
        ctx,
        "coredns",
        &b.coredns,
        vec!["-conf".into(), l.corefile.display().to_string()],
    )?);
    processes.push(spawn(
        ctx,
        "kubelet",
        &b.kubelet,
        vec![
            format!("--config={}", l.kubelet_config.display()),
            format!("--kubeconfig={kc}"),
            format!("--root-dir={}", l.kubelet_root.display()),
            format!("--hostname-override={NODE_NAME}"),
            format!("--node-ip={HOST_ADDRESS}"),
        ],
    )?);
    if ctx.lifetime == Lifetime::Detached {
        // The launcher exits (and with it the machine lock): the kubelet's pid says the
        // node is still in use (`refuse_if_detached_node_runs`).
        if let Some(kubelet) = processes.last() {
            let marker = Path::new(DETACHED_MARKER);
            std::fs::write(marker, kubelet.id().to_string())
                .map_err(|e| TestEnvError::io(marker, e))?;
        }
    }
    let healthz = format!("http://127.0.0.1:{kubelet_healthz}/healthz");
    wait_for(Duration::from_secs(90), "kubelet", processes, || {
        let url = healthz.clone();
        async move {
            reqwest::get(url)
                .await
                .map(|r| r.status().is_success())
                .unwrap_or(false)
        }
    })
    .await?;
    wait_for(Duration::from_secs(90), "kubelet", processes, || {
        let client = client.clone();
        async move { node_ready(&client).await }
    })
    .await
}

async fn node_ready(client: &kube::Client) -> bool {
    let nodes: kube::Api<k8s_openapi::api::core::v1::Node> = kube::Api::all(client.clone());
    let Ok(node) = nodes.get(NODE_NAME).await else {
        return false;
    };
    node.status
        .and_then(|s| s.conditions)
        .unwrap_or_default()
        .iter()
        .any(|c| c.type_ == "Ready" && c.status == "True")
}

/// A running node: the registry that both containerd and pods reach, and the images
/// the node itself needs.
#[derive(Clone, Debug)]
pub struct RunningNode {
    /// `10.88.0.1:<port>`: plain HTTP, reachable from the host and from pods.
    pub registry: String,
    /// The pod sandbox image.
    pub pause_image: String,
    /// A tiny real workload (`hack/testimage serve`): answers `/healthz` and `/readyz`
    /// on :8080 until SIGTERM; env `READY=false` keeps it unready.
    pub workload_image: String,
}

/// Starts the node registry (on every address, so pods reach it at
/// [`HOST_ADDRESS`]), pushes the node's images and starts the node.
pub async fn start_with_registry(
    binaries: &NodeBinaries,
    kubeconfig: &Path,
    client: &kube::Client,
    opts: &super::Options,
    processes: &mut Vec<Process>,
) -> Result<RunningNode, TestEnvError> {
    let registry = start_registry(opts, processes).await?;
    let image_err = |e: anyhow::Error| TestEnvError::Image(format!("{e:#}"));
    let files = super::image::program_files(&binaries.testimage, "testimage").map_err(image_err)?;
    let mut refs = Vec::new();
    for (repo, cmd) in [("pause", "pause"), ("testimage", "serve")] {
        let run = super::image::RunConfig {
            entrypoint: vec!["/testimage".into()],
            cmd: vec![cmd.into()],
            ..Default::default()
        };
        let built = super::image::build(&files, &run).map_err(image_err)?;
        let reference = format!("{registry}/olmv1-node/{repo}:v1");
        refs.push(
            super::image::push(&built, &reference, true)
                .await
                .map_err(image_err)?,
        );
    }
    let node = RunningNode {
        registry: registry.clone(),
        pause_image: refs[0].clone(),
        workload_image: refs[1].clone(),
    };
    let ctx = NodeContext {
        binaries,
        kubeconfig,
        registry_host: &registry,
        pause_image: &node.pause_image,
        data_dir: &opts.data_dir,
        log_dir: &opts.log_dir,
        lifetime: opts.lifetime,
    };
    start(&ctx, client, processes).await?;
    Ok(node)
}

async fn start_registry(
    opts: &super::Options,
    processes: &mut Vec<Process>,
) -> Result<String, TestEnvError> {
    let bin = super::registry::registry_binary()
        .map_err(|e| TestEnvError::Prerequisite(format!("{e:#}")))?;
    let dir = opts.data_dir.join("node-registry");
    let port = super::control_plane::free_port()?;
    let config = dir.join("config.yml");
    write(
        &config,
        &format!(
            "version: 0.1\nlog:\n  level: warn\n  accesslog:\n    disabled: true\nstorage:\n  filesystem:\n    rootdirectory: {}\n  delete:\n    enabled: true\nhttp:\n  addr: 0.0.0.0:{port}\n  secret: olmv1-node-registry\n",
            dir.join("storage").display()
        ),
    )?;
    processes.push(Process::spawn(
        "registry",
        &bin,
        &["serve".to_string(), config.display().to_string()],
        &opts.log_dir.join("registry.log"),
        opts.lifetime,
        None,
        &opts.data_dir,
    )?);
    let host = format!("{HOST_ADDRESS}:{port}");
    let probe = host.clone();
    wait_for(Duration::from_secs(20), "registry", processes, || {
        let ok = std::net::TcpStream::connect(&probe).is_ok();
        async move { ok }
    })
    .await?;
    Ok(host)
}
