//! The prerequisite step of the README's two commands (`hack/prereqs.sh`, run first by
//! `hack/demo.sh` and `hack/test.sh`): on a machine that lacks what they install, they
//! either install it (as root, with apt-get) or stop within seconds with the exact
//! command that fixes it — never after a long build.
//!
//! Each test runs the scripts with a PATH of its own: a folder of links to every program
//! on the real PATH except the ones it hides, plus fakes (`apt-get` that records what it
//! is asked and "installs" by creating the program, `id` that says root or not, `rustc`
//! of another version). Nothing on the machine is installed or changed.

use std::collections::HashSet;
use std::os::unix::fs::{PermissionsExt, symlink};
use std::path::Path;
use std::process::{Command, Output};
use std::time::{Duration, Instant};

fn project() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// A PATH of links to every program on the real PATH but `hidden`, with `fakes`
/// (name, shell script body) in a folder before it.
struct Sandbox {
    dir: tempfile::TempDir,
}

impl Sandbox {
    fn new(hidden: &[&str], fakes: &[(&str, &str)]) -> Sandbox {
        let dir = tempfile::tempdir().expect("tempdir");
        let bin = dir.path().join("bin");
        let fake = dir.path().join("fake");
        std::fs::create_dir_all(&bin).expect("bin");
        std::fs::create_dir_all(&fake).expect("fake");
        let hidden: HashSet<&str> = hidden.iter().copied().collect();
        let path = std::env::var_os("PATH").expect("PATH");
        for d in std::env::split_paths(&path) {
            let Ok(entries) = std::fs::read_dir(&d) else {
                continue;
            };
            for e in entries.flatten() {
                let name = e.file_name();
                let Some(n) = name.to_str() else { continue };
                if hidden.contains(n) || bin.join(n).symlink_metadata().is_ok() {
                    continue;
                }
                let _ = symlink(e.path(), bin.join(n));
            }
        }
        for (name, body) in fakes {
            let p = fake.join(name);
            std::fs::write(&p, format!("#!/bin/sh\n{body}\n")).expect("fake");
            std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).expect("chmod");
        }
        Sandbox { dir }
    }

    fn path(&self) -> String {
        format!(
            "{}:{}:{}",
            self.dir.path().join("fake").display(),
            self.dir.path().join("installed").display(),
            self.dir.path().join("bin").display()
        )
    }

    /// Runs `args` (a script of the project and its arguments) with this PATH; returns
    /// the output and how long it took.
    fn run(&self, args: &[&str]) -> (Output, Duration) {
        let started = Instant::now();
        let out = Command::new("bash")
            .args(args)
            .current_dir(project())
            .env("PATH", self.path())
            .env("OLMV1_POLICY_RC_D", self.dir.path().join("policy-rc.d"))
            .env("SANDBOX", self.dir.path())
            .env_remove("CARGO_TARGET_DIR")
            .output()
            .expect("run");
        (out, started.elapsed())
    }
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// `id -u` says `uid`; anything else is asked of the real `id`.
fn fake_id(uid: u32) -> String {
    format!(r#"if [ "$1" = -u ]; then echo {uid}; else exec /usr/bin/id "$@"; fi"#)
}

/// Records its arguments in $SANDBOX/apt.log (with whether the deny-all policy exists
/// at install time) and "installs" a package by creating its program in
/// $SANDBOX/installed.
const FAKE_APT_GET: &str = r#"echo "$*" >> "$SANDBOX/apt.log"
case "$*" in *install*)
  [ -x "$SANDBOX/policy-rc.d" ] && "$SANDBOX/policy-rc.d"; echo "policy-exit=$?" >> "$SANDBOX/apt.log"
  mkdir -p "$SANDBOX/installed"
  for p in "$@"; do case "$p" in -*|install) ;; *)
    printf '#!/bin/sh\n' > "$SANDBOX/installed/$p"; chmod +x "$SANDBOX/installed/$p";;
  esac; done;;
esac"#;

/// The exact fix for the two packages the tests hide.
const FIX: &str = "apt-get install -y --no-install-recommends docker-registry openssl";

fn assert_fast(took: Duration, what: &str) {
    assert!(
        took < Duration::from_secs(20),
        "{what} took {took:?}: the prerequisite check must answer in seconds"
    );
}

#[test]
fn check_names_each_missing_package_and_the_exact_fix() {
    let sb = Sandbox::new(&["docker-registry", "openssl"], &[("id", &fake_id(0))]);
    let (out, took) = sb.run(&["hack/prereqs.sh", "test", "--check"]);
    assert_fast(took, "hack/prereqs.sh test --check");
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains(FIX), "{err}");
    assert!(
        err.contains("docker-registry — the OCI registry")
            && err.contains("openssl — the certificates"),
        "each package says why it is needed: {err}"
    );
    assert!(
        err.contains("policy-rc.d"),
        "the fix says how to keep the service from starting: {err}"
    );
    assert!(
        !sb.dir.path().join("apt.log").exists(),
        "--check installs nothing"
    );
}

#[test]
fn as_root_missing_packages_are_installed_once_with_services_kept_from_starting() {
    let sb = Sandbox::new(
        &["docker-registry", "openssl"],
        &[
            ("id", &fake_id(0)),
            ("apt-get", FAKE_APT_GET),
            // Present, so that the test installs nothing with cargo either.
            ("cargo-deny", "exit 0"),
        ],
    );
    let (out, took) = sb.run(&["hack/prereqs.sh", "test"]);
    assert_fast(took, "hack/prereqs.sh test");
    let (stdout, err) = (text(&out.stdout), text(&out.stderr));
    assert!(out.status.success(), "{stdout}\n{err}");
    let log = std::fs::read_to_string(sb.dir.path().join("apt.log")).expect("apt-get ran");
    let lines: Vec<&str> = log.lines().collect();
    assert_eq!(lines.first(), Some(&"update -qq"), "{log}");
    assert!(
        lines
            .iter()
            .any(|l| l.ends_with("install -y -qq --no-install-recommends docker-registry openssl")),
        "{log}"
    );
    assert!(
        lines.contains(&"policy-exit=101"),
        "a deny-all policy-rc.d is in place while apt-get installs: {log}"
    );
    assert!(
        !sb.dir.path().join("policy-rc.d").exists(),
        "the policy it put in place is removed afterwards"
    );
    assert_eq!(
        stdout
            .lines()
            .filter(|l| l.starts_with("installing Debian packages"))
            .count(),
        1,
        "one line says what is installed and why: {stdout}"
    );
    // A second run finds everything and installs nothing.
    std::fs::remove_file(sb.dir.path().join("apt.log")).expect("rm");
    let (out, _) = sb.run(&["hack/prereqs.sh", "test"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(!sb.dir.path().join("apt.log").exists(), "installed once");
}

#[test]
fn without_root_it_stops_with_the_sudo_command() {
    let sb = Sandbox::new(
        &["docker-registry", "openssl"],
        &[("id", &fake_id(1000)), ("apt-get", FAKE_APT_GET)],
    );
    let (out, took) = sb.run(&["hack/prereqs.sh", "test"]);
    assert_fast(took, "hack/prereqs.sh test");
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains("sudo sh -c 'apt-get update") && err.contains(FIX),
        "{err}"
    );
    assert!(err.contains("root is needed"), "{err}");
    assert!(!sb.dir.path().join("apt.log").exists(), "{err}");
}

#[test]
fn missing_go_or_another_rust_is_reported_with_the_fix() {
    let sb = Sandbox::new(&["go"], &[("id", &fake_id(0))]);
    let (out, took) = sb.run(&["hack/prereqs.sh", "demo", "--check"]);
    assert_fast(took, "hack/prereqs.sh demo --check");
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains("Go is not installed") && err.contains("Go >= 1.26"),
        "{err}"
    );

    let sb = Sandbox::new(
        &["rustc"],
        &[
            ("id", &fake_id(0)),
            ("rustc", "echo 'rustc 1.80.0 (051478957 2024-07-21)'"),
        ],
    );
    let (out, _) = sb.run(&["hack/prereqs.sh", "demo", "--check"]);
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    let channel =
        std::fs::read_to_string(project().join("rust-toolchain.toml")).expect("toolchain");
    let channel = channel
        .lines()
        .find_map(|l| l.strip_prefix("channel = \""))
        .and_then(|l| l.strip_suffix('"'))
        .expect("channel");
    assert!(
        err.contains(&format!("Rust {channel} is needed"))
            && err.contains("rustc 1.80.0")
            && err.contains(&format!("rustup toolchain install {channel}")),
        "{err}"
    );
}

/// The README's commands themselves run the check first: on a machine without the
/// registry package and without root to install it, each stops within seconds, before
/// any build, with the exact fix.
#[test]
fn both_readme_commands_stop_in_seconds_before_any_build() {
    for (args, script) in [
        (&["hack/test.sh"][..], "hack/test.sh"),
        (
            &["hack/demo.sh", "--no-node", "--no-wait"][..],
            "hack/demo.sh",
        ),
    ] {
        let sb = Sandbox::new(
            &["docker-registry", "openssl", "curl"],
            &[("id", &fake_id(1000))],
        );
        let (out, took) = sb.run(args);
        assert_fast(took, script);
        let (stdout, err) = (text(&out.stdout), text(&out.stderr));
        assert!(!out.status.success(), "{script}: {stdout}\n{err}");
        assert!(
            err.contains("apt-get install -y --no-install-recommends docker-registry"),
            "{script}: {err}"
        );
        assert!(
            !stdout.contains("==") && !stdout.contains("building"),
            "{script} started work before the check: {stdout}"
        );
    }
}

#[test]
fn ci_only_calls_the_readme_test_command() {
    let ci = std::fs::read_to_string(project().join(".ci/run")).expect(".ci/run");
    let code: Vec<&str> = ci
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .collect();
    assert!(
        code.last() == Some(&"exec hack/test.sh"),
        ".ci/run ends by running the README's test command: {ci}"
    );
    for l in &code {
        assert!(
            !l.contains("apt-get") && !l.contains("install"),
            ".ci/run installs nothing a user's hack/test.sh would not: {l}"
        );
    }
    let readme = std::fs::read_to_string(project().join("README.md")).expect("README");
    assert!(
        readme.contains("hack/test.sh"),
        "the README names the test command"
    );
}
