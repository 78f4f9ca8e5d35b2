//! A normal start prints no alarming lines: `olmv1-testenv up` (what
//! `hack/control-plane.sh up` runs) and then `olmv1 controller` on that control plane,
//! as the Quickstart of docs/getting-started.md does, print no ERROR or WARN line and nothing in red.
//! Errors that are expected while the API server comes up (readiness probes) are not
//! news; component logs go to files.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Lines a person would read as a problem: ERROR/WARN levels (plain or JSON) and red
/// ANSI colour.
fn alarming(output: &str) -> Vec<String> {
    output
        .lines()
        .filter(|l| {
            l.contains("ERROR")
                || l.contains("WARN")
                || l.contains("\u{1b}[31m")
                || l.contains("\u{1b}[1;31m")
        })
        .map(str::to_string)
        .collect()
}

/// Runs `olmv1-testenv down` when dropped.
struct Down(PathBuf);

impl Drop for Down {
    fn drop(&mut self) {
        let _ = Command::new(env!("CARGO_BIN_EXE_olmv1-testenv"))
            .arg("down")
            .arg("--dir")
            .arg(&self.0)
            .stdout(Stdio::null())
            .status();
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn etcd() -> PathBuf {
    std::env::var_os("OLMV1_ETCD")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            etcd_bin_vendored::etcd_bin_path()
                .unwrap_or_else(|e| panic!("no vendored etcd binary: {e}"))
                .to_path_buf()
        })
}

fn free_port() -> u16 {
    olmv1::testenv::control_plane::free_port().expect("port")
}

async fn ready(port: u16) -> bool {
    reqwest::get(format!("http://127.0.0.1:{port}/readyz"))
        .await
        .is_ok_and(|r| r.status().is_success())
}

fn controller_log(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_default()
}

#[tokio::test]
async fn control_plane_up_and_controller_start_print_nothing_alarming() {
    let _ = rustls::crypto::aws_lc_rs::default_provider().install_default();
    let stamp = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or_default();
    let dir = std::env::temp_dir().join(format!("olmv1-quiet-{}-{stamp}", std::process::id()));
    let _down = Down(dir.clone());

    let up = Command::new(env!("CARGO_BIN_EXE_olmv1-testenv"))
        .arg("up")
        .arg("--dir")
        .arg(&dir)
        .arg("--etcd")
        .arg(etcd())
        .env_remove("RUST_LOG")
        .output()
        .expect("run olmv1-testenv up");
    let printed = format!(
        "{}{}",
        String::from_utf8_lossy(&up.stdout),
        String::from_utf8_lossy(&up.stderr)
    );
    assert!(up.status.success(), "olmv1-testenv up failed:\n{printed}");
    assert!(
        printed.contains("control plane ready at https://127.0.0.1:"),
        "{printed}"
    );
    assert_eq!(
        alarming(&printed),
        Vec::<String>::new(),
        "olmv1-testenv up printed alarming lines:\n{printed}"
    );

    let health = free_port();
    let log = dir.join("controller.log");
    let mut child = Command::new(env!("CARGO_BIN_EXE_olmv1"))
        .arg("controller")
        .arg("--kubeconfig")
        .arg(dir.join("data/controller.kubeconfig"))
        .args([
            "--health-probe-bind-address",
            &format!("127.0.0.1:{health}"),
            "--metrics-bind-address",
            &format!("127.0.0.1:{}", free_port()),
            "--catalog-server-bind-address",
            &format!("127.0.0.1:{}", free_port()),
            "--cache-dir",
        ])
        .arg(dir.join("cache"))
        .env_remove("RUST_LOG")
        .stdout(std::fs::File::create(&log).expect("log file"))
        .stderr(std::fs::File::create(dir.join("controller.err")).expect("log file"))
        .spawn()
        .expect("start olmv1 controller");
    let deadline = Instant::now() + Duration::from_secs(60);
    while !ready(health).await {
        assert!(
            Instant::now() < deadline,
            "controller not ready within 60s:\n{}",
            controller_log(&log)
        );
        assert!(
            child.try_wait().expect("wait").is_none(),
            "controller exited early:\n{}{}",
            controller_log(&log),
            controller_log(&dir.join("controller.err"))
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // A few seconds of steady state (watches established, first reconciles).
    tokio::time::sleep(Duration::from_secs(3)).await;
    let _ = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status();
    let deadline = Instant::now() + Duration::from_secs(15);
    while child.try_wait().expect("wait").is_none() && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let _ = child.kill();
    let _ = child.wait();
    let printed = format!(
        "{}{}",
        controller_log(&log),
        controller_log(&dir.join("controller.err"))
    );
    assert!(printed.contains("connected to the API server"), "{printed}");
    assert_eq!(
        alarming(&printed),
        Vec::<String>::new(),
        "olmv1 controller printed alarming lines on a normal start:\n{printed}"
    );
}
