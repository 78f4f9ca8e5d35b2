//! The controller as a child process: `olmv1 controller` (the crate's binary) against
//! [`super::cluster`] as the controller's ServiceAccount, pulling from
//! [`super::registry`]. Used where a test needs to kill the process (SIGKILL) or run
//! several replicas; [`super::controller`] runs it in-process instead.
#![allow(dead_code)]

use std::path::PathBuf;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

/// The controller namespace (where revision records and the Lease live).
pub const NAMESPACE: &str = "olmv1-system";

/// One `olmv1 controller` process; killed (SIGKILL) when dropped.
pub struct ControllerProcess {
    pub label: String,
    args: Vec<String>,
    env: Vec<(String, String)>,
    child: Option<Child>,
    pub health_port: u16,
    pub catalog_port: u16,
    pub metrics_port: u16,
    pub cache_dir: PathBuf,
    /// stderr of every start of this process, appended.
    pub log: PathBuf,
    /// `RUST_LOG` of the process (`info` unless [`Self::start_with_log`] says otherwise).
    log_filter: String,
}

/// The `olmv1` binary: `OLMV1_TEST_CONTROLLER_BIN` if set (e.g. a private copy when
/// several worktrees share one target directory), else the crate's.
pub fn binary() -> PathBuf {
    std::env::var_os("OLMV1_TEST_CONTROLLER_BIN")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_BIN_EXE_olmv1")))
}

/// [`binary`] stripped into `dir/olmv1`, for the images the node suites build.
pub fn stripped_binary(dir: &std::path::Path) -> PathBuf {
    let stripped = dir.join("olmv1");
    let status = Command::new("strip")
        .arg("-o")
        .arg(&stripped)
        .arg(binary())
        .status()
        .expect("strip");
    assert!(status.success(), "strip olmv1");
    stripped
}

impl Drop for ControllerProcess {
    fn drop(&mut self) {
        self.kill();
    }
}

impl ControllerProcess {
    /// Starts `olmv1 controller` with fresh ports and cache directory, `--namespace`
    /// [`NAMESPACE`], `--poll-unit-seconds 1`, the test registry as insecure,
    /// `--skip-rollout-wait` (the control plane has no nodes) and `extra`
    /// arguments appended (e.g. `--leader-elect`). Logs go to
    /// `target/tmp/<binary>-<label>-<pid>.log`.
    pub fn start(label: &str, extra: &[&str]) -> ControllerProcess {
        Self::start_full(label, extra, &[], "info")
    }

    /// [`Self::start`] with another `--kubeconfig` than the cluster's controller one
    /// (e.g. the same identity through a proxy).
    pub fn start_with_kubeconfig(
        label: &str,
        kubeconfig: &std::path::Path,
        extra: &[&str],
    ) -> ControllerProcess {
        let mut p = Self::prepare(label, extra, &[], "info");
        if let Some(i) = p.args.iter().position(|a| a == "--kubeconfig") {
            p.args[i + 1] = kubeconfig.to_string_lossy().into_owned();
        }
        p.spawn();
        p
    }

    /// [`Self::start`] without `--skip-rollout-wait`, for a cluster with a node (the
    /// controller waits for rollouts, as deployed).
    pub fn start_waiting_for_rollouts(label: &str, extra: &[&str]) -> ControllerProcess {
        let mut p = Self::prepare(label, extra, &[], "info");
        p.args.retain(|a| a != "--skip-rollout-wait");
        p.spawn();
        p
    }

    /// [`Self::start`] with extra environment variables.
    pub fn start_with_env(label: &str, extra: &[&str], env: &[(&str, &str)]) -> ControllerProcess {
        Self::start_full(label, extra, env, "info")
    }

    /// [`Self::start`] with `RUST_LOG=<log_filter>` (e.g. `debug` to check what the
    /// most verbose logs reveal).
    pub fn start_with_log(label: &str, extra: &[&str], log_filter: &str) -> ControllerProcess {
        Self::start_full(label, extra, &[], log_filter)
    }

    fn start_full(
        label: &str,
        extra: &[&str],
        env: &[(&str, &str)],
        log_filter: &str,
    ) -> ControllerProcess {
        let mut process = Self::prepare(label, extra, env, log_filter);
        process.spawn();
        process
    }

    /// The process with its arguments, not started.
    fn prepare(
        label: &str,
        extra: &[&str],
        env: &[(&str, &str)],
        log_filter: &str,
    ) -> ControllerProcess {
        let cluster = super::cluster();
        let free = || olmv1::testenv::control_plane::free_port().unwrap_or_else(|e| panic!("{e}"));
        let (health_port, catalog_port, metrics_port) = (free(), free(), free());
        let cache_dir = std::env::temp_dir().join(format!(
            "olmv1-proc-{}-{}",
            std::process::id(),
            super::unique(label)
        ));
        std::fs::create_dir_all(&cache_dir).expect("cache dir");
        let binary = super::run_label();
        let log = super::tmp_dir().join(format!("{binary}-{label}-{}.log", std::process::id()));
        let _ = std::fs::remove_file(&log);
        let mut args: Vec<String> = vec!["controller".into()];
        let path = |p: &std::path::Path| p.to_string_lossy().into_owned();
        for (flag, value) in [
            ("--kubeconfig", path(&cluster.controller_kubeconfig)),
            ("--namespace", NAMESPACE.to_string()),
            (
                "--health-probe-bind-address",
                format!("127.0.0.1:{health_port}"),
            ),
            (
                "--catalog-server-bind-address",
                format!("127.0.0.1:{catalog_port}"),
            ),
            ("--external-address", format!("127.0.0.1:{catalog_port}")),
            (
                "--metrics-bind-address",
                format!("127.0.0.1:{metrics_port}"),
            ),
            ("--cache-dir", path(&cache_dir)),
            ("--poll-unit-seconds", "1".to_string()),
            ("--insecure-registry", super::registry().host().to_string()),
        ] {
            args.push(flag.into());
            args.push(value);
        }
        // No nodes: Deployments never become available (e2e/rollout.rs tests the wait).
        args.push("--skip-rollout-wait".into());
        args.extend(extra.iter().map(|s| s.to_string()));
        ControllerProcess {
            label: label.to_string(),
            args,
            env: env
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            child: None,
            health_port,
            catalog_port,
            metrics_port,
            cache_dir,
            log,
            log_filter: log_filter.to_string(),
        }
    }

    fn spawn(&mut self) {
        assert!(self.child.is_none(), "{} is already running", self.label);
        let log_file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.log)
            .expect("log file");
        let child = Command::new(binary())
            .args(&self.args)
            .env("RUST_LOG", &self.log_filter)
            .env_remove("POD_NAME")
            .env_remove("POD_NAMESPACE")
            .env_remove("OLMV1_LOG_FORMAT")
            .env_remove("KUBECONFIG")
            .envs(self.env.iter().map(|(k, v)| (k, v)))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log_file)
            .spawn()
            .expect("start olmv1 controller");
        self.child = Some(child);
    }

    /// SIGKILL (no chance to clean up) and reap; a no-op when not running.
    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Starts the process again with the same arguments, ports and cache directory (as
    /// a restarted pod would), after [`Self::kill`].
    pub fn restart(&mut self) {
        self.kill();
        self.spawn();
    }

    /// The process id while running.
    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }

    /// The exit status once the process has exited.
    pub fn try_wait(&mut self) -> Option<ExitStatus> {
        self.child.as_mut()?.try_wait().expect("wait")
    }

    /// Waits until the health endpoint accepts connections (panics after `seconds`).
    pub fn wait_listening(&mut self, seconds: u64) {
        let deadline = Instant::now() + Duration::from_secs(seconds);
        while std::net::TcpStream::connect(("127.0.0.1", self.health_port)).is_err() {
            if let Some(status) = self.try_wait() {
                panic!("{} exited ({status}): {}", self.label, self.log_text());
            }
            assert!(
                Instant::now() < deadline,
                "{} not listening after {seconds}s: {}",
                self.label,
                self.log_text()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// The text of `/metrics` (HTTPS, with the token of a ServiceAccount bound to the
    /// metrics-reader ClusterRole), `None` while it cannot be read.
    pub async fn metrics(&self) -> Option<String> {
        let url = format!("https://127.0.0.1:{}/metrics", self.metrics_port);
        let token = super::metrics::reader_token().await;
        let (status, body) = super::metrics::get(&url, Some(&token)).await.ok()?;
        if status != 200 {
            return None;
        }
        String::from_utf8(body.to_vec()).ok()
    }

    /// The TCP ports this process listens on (from /proc: its socket inodes in LISTEN
    /// state), sorted.
    pub fn listening_ports(&self) -> Vec<u16> {
        let Some(pid) = self.pid() else {
            return Vec::new();
        };
        let proc = PathBuf::from("/proc").join(pid.to_string());
        let inodes: std::collections::HashSet<String> = std::fs::read_dir(proc.join("fd"))
            .map(|entries| {
                entries
                    .flatten()
                    .filter_map(|e| std::fs::read_link(e.path()).ok())
                    .filter_map(|l| {
                        let l = l.to_string_lossy().into_owned();
                        Some(l.strip_prefix("socket:[")?.strip_suffix(']')?.to_string())
                    })
                    .collect()
            })
            .unwrap_or_default();
        let mut ports = Vec::new();
        for table in ["tcp", "tcp6"] {
            let text = std::fs::read_to_string(proc.join("net").join(table)).unwrap_or_default();
            for line in text.lines().skip(1) {
                let fields: Vec<&str> = line.split_whitespace().collect();
                // sl local_address rem_address st ... inode (the 10th field)
                if fields.len() > 9 && fields[3] == "0A" && inodes.contains(fields[9]) {
                    let port = fields[1].rsplit(':').next().unwrap_or("");
                    if let Ok(port) = u16::from_str_radix(port, 16) {
                        ports.push(port);
                    }
                }
            }
        }
        ports.sort_unstable();
        ports.dedup();
        ports
    }

    pub fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }
}

/// A field of a running process's `/proc/<pid>/status` in KiB (`VmRSS:`, `VmHWM:` for
/// its peak resident set).
pub fn status_kib(pid: u32, field: &str) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status
        .lines()
        .find_map(|l| l.strip_prefix(field))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
}
