//! Child processes of a test control plane. A *supervised* process is started through
//! a tiny `sh` wrapper that holds the read end of a pipe whose write end only this
//! process owns: when this process exits for any reason (normal exit, panic, SIGKILL),
//! the pipe closes and the wrapper stops its child and removes the given directory.
//! A *detached* process outlives its parent and is stopped through its pid file.

use super::TestEnvError;
use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::time::Duration;

/// `sh -c` program: run "$@" in the background; on EOF of stdin stop it; exit with its
/// code. The cleanup directory is removed only when the stop came from here (EOF): a
/// child that ends by itself (a crash, a full disk) leaves its data for the diagnosis,
/// and the tests still running get its log rather than a vanished kubeconfig.
const SUPERVISOR: &str = r#"exec 3<&0 </dev/null
stopped=$(mktemp)
"$@" &
child=$!
{ while read -r _ <&3; do :; done; echo >"$stopped"; kill -TERM "$child" 2>/dev/null; sleep 5; kill -KILL "$child" 2>/dev/null; } &
watcher=$!
wait "$child"; code=$?
kill "$watcher" 2>/dev/null
if [ -n "$OLMV1_ON_EXIT" ]; then sh -c "$OLMV1_ON_EXIT"; fi
if [ -n "$OLMV1_CLEANUP" ] && [ ! -e "$OLMV1_CLEANUP/.olmv1-keep" ]; then
  if [ -s "$stopped" ]; then rm -rf --one-file-system "$OLMV1_CLEANUP"
  else echo "olmv1-supervise: $1 exited by itself (status $code); its data stays in $OLMV1_CLEANUP" >&2; fi
fi
rm -f "$stopped"
exit $code"#;

/// A file that, while it exists in a supervised process's cleanup directory, keeps the
/// directory when the process ends (a component restarted on the same data).
pub const KEEP_MARKER: &str = ".olmv1-keep";

/// How long the processes live.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Lifetime {
    /// Stopped when this process exits (test harness).
    Supervised,
    /// Keeps running; stopped by [`stop_detached`] (`hack/control-plane.sh down`).
    Detached,
}

pub struct Process {
    pub name: String,
    pub log: PathBuf,
    child: Child,
    /// Closing this stops a supervised process.
    keepalive: Option<ChildStdin>,
}

impl Process {
    /// A supervised process that does nothing until this process exits, then runs the
    /// shell `script` (e.g. to clear what a node left behind).
    pub fn reaper(name: &str, script: &str, log: &Path) -> Result<Process, TestEnvError> {
        let out = File::create(log).map_err(|e| TestEnvError::io(log, e))?;
        let err = out.try_clone().map_err(|e| TestEnvError::io(log, e))?;
        let mut c = Command::new("sh");
        c.arg("-c")
            .arg(SUPERVISOR)
            .arg("olmv1-supervise")
            .arg("sleep")
            .arg("infinity")
            .env("OLMV1_ON_EXIT", script)
            .env("OLMV1_CLEANUP", "")
            .stdin(Stdio::piped())
            .stdout(out)
            .stderr(err);
        let mut child = c.spawn().map_err(|e| TestEnvError::Spawn {
            program: "sh".into(),
            source: e,
        })?;
        let keepalive = child.stdin.take();
        Ok(Process {
            name: name.to_string(),
            log: log.to_path_buf(),
            child,
            keepalive,
        })
    }

    /// Starts `program args…`, logging to `log`. `cleanup` is removed after a
    /// supervised process ends.
    pub fn spawn(
        name: &str,
        program: &Path,
        args: &[String],
        log: &Path,
        lifetime: Lifetime,
        cleanup: Option<&Path>,
        pid_dir: &Path,
    ) -> Result<Process, TestEnvError> {
        let out = File::create(log).map_err(|e| TestEnvError::io(log, e))?;
        let err = out.try_clone().map_err(|e| TestEnvError::io(log, e))?;
        let mut cmd = match lifetime {
            Lifetime::Supervised => {
                let mut c = Command::new("sh");
                c.arg("-c")
                    .arg(SUPERVISOR)
                    .arg("olmv1-supervise")
                    .arg(program)
                    .args(args);
                c.env(
                    "OLMV1_CLEANUP",
                    cleanup
                        .map(|p| p.as_os_str().to_owned())
                        .unwrap_or_default(),
                );
                c.stdin(Stdio::piped());
                c
            }
            Lifetime::Detached => {
                let mut c = Command::new(program);
                c.args(args).stdin(Stdio::null());
                std::os::unix::process::CommandExt::process_group(&mut c, 0);
                c
            }
        };
        cmd.stdout(out).stderr(err);
        let mut child = cmd.spawn().map_err(|e| TestEnvError::Spawn {
            program: program.display().to_string(),
            source: e,
        })?;
        if lifetime == Lifetime::Detached {
            let pid_file = pid_dir.join(format!("{name}.pid"));
            std::fs::write(&pid_file, child.id().to_string())
                .map_err(|e| TestEnvError::io(&pid_file, e))?;
        }
        let keepalive = child.stdin.take();
        Ok(Process {
            name: name.to_string(),
            log: log.to_path_buf(),
            child,
            keepalive,
        })
    }

    /// The operating-system process id (of the supervisor shell when supervised).
    pub fn id(&self) -> u32 {
        self.child.id()
    }

    /// An error if the process already ended, with the end of its log.
    pub fn check_running(&mut self) -> Result<(), TestEnvError> {
        match self.child.try_wait() {
            Ok(Some(status)) => Err(TestEnvError::Exited {
                name: self.name.clone(),
                status: status.to_string(),
                log: self.log.clone(),
                tail: log_tail(&self.log, 20),
            }),
            _ => Ok(()),
        }
    }

    /// Stops the process and waits for it (bounded).
    pub fn stop(&mut self) {
        if self.keepalive.take().is_none() {
            let _ = self.child.kill();
        }
        for _ in 0..100 {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The last `n` lines of a log file (for error messages).
pub fn log_tail(path: &Path, n: usize) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(n)..].join("\n")
}

/// Stops the detached processes whose pid files are in `dir` (TERM, then KILL).
pub fn stop_detached(dir: &Path) -> Result<Vec<String>, TestEnvError> {
    let mut stopped = Vec::new();
    let entries = match std::fs::read_dir(dir) {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(stopped),
        Err(e) => return Err(TestEnvError::io(dir, e)),
    };
    let mut pids = Vec::new();
    for entry in entries.flatten() {
        let path = entry.path();
        if path.extension().and_then(|e| e.to_str()) != Some("pid") {
            continue;
        }
        if let Ok(pid) = std::fs::read_to_string(&path).map(|s| s.trim().to_string())
            && !pid.is_empty()
            && pid.chars().all(|c| c.is_ascii_digit())
        {
            // Stale pid files name processes that are gone: no "No such process" noise.
            let _ = Command::new("kill")
                .arg("-TERM")
                .arg(&pid)
                .stderr(Stdio::null())
                .status();
            pids.push((pid, path));
        }
    }
    for (pid, path) in pids {
        for _ in 0..50 {
            let alive = Command::new("kill")
                .arg("-0")
                .arg(&pid)
                .stderr(Stdio::null())
                .status()
                .map(|s| s.success())
                .unwrap_or(false);
            if !alive {
                break;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        let _ = Command::new("kill")
            .arg("-KILL")
            .arg(&pid)
            .stderr(Stdio::null())
            .status();
        let _ = std::fs::remove_file(&path);
        stopped.push(
            path.file_stem()
                .map(|s| s.to_string_lossy().into_owned())
                .unwrap_or(pid),
        );
    }
    Ok(stopped)
}
