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

impl Drop for ControllerProcess {
    fn drop(&mut self) {
        self.kill();
    }
}

impl ControllerProcess {
    /// Starts `olmv1 controller` with fresh ports and cache directory, `--namespace`
    /// [`NAMESPACE`], `--poll-unit-seconds 1`, the test registry as insecure and `extra`
    /// arguments appended (e.g. `--leader-elect`). Logs go to
    /// `target/tmp/<binary>-<label>-<pid>.log`.
    pub fn start(label: &str, extra: &[&str]) -> ControllerProcess {
        Self::start_with_log(label, extra, "info")
    }

    /// [`Self::start`] with `RUST_LOG=<log_filter>` (e.g. `debug` to check what the
    /// most verbose logs reveal).
    pub fn start_with_log(label: &str, extra: &[&str], log_filter: &str) -> ControllerProcess {
        let cluster = super::cluster();
        let free = || olmv1::testenv::control_plane::free_port().unwrap_or_else(|e| panic!("{e}"));
        let (health_port, catalog_port, metrics_port) = (free(), free(), free());
        let cache_dir = std::env::temp_dir().join(format!(
            "olmv1-proc-{}-{}",
            std::process::id(),
            super::unique(label)
        ));
        std::fs::create_dir_all(&cache_dir).expect("cache dir");
        let binary = std::env::current_exe()
            .ok()
            .and_then(|p| p.file_stem().map(|s| s.to_string_lossy().into_owned()))
            .unwrap_or_else(|| "test".into());
        let log = PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
            .join(format!("{binary}-{label}-{}.log", std::process::id()));
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
        args.extend(extra.iter().map(|s| s.to_string()));
        let mut process = ControllerProcess {
            label: label.to_string(),
            args,
            child: None,
            health_port,
            catalog_port,
            metrics_port,
            cache_dir,
            log,
            log_filter: log_filter.to_string(),
        };
        process.spawn();
        process
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

    /// The text of `/metrics`, `None` while it cannot be read.
    pub async fn metrics(&self) -> Option<String> {
        let url = format!("http://127.0.0.1:{}/metrics", self.metrics_port);
        let response = reqwest::get(&url).await.ok()?;
        if !response.status().is_success() {
            return None;
        }
        response.text().await.ok()
    }

    pub fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }
}
