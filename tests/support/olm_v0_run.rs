//! OLM v0's real programs against the test control plane (e2e/migrate_v0.rs): the
//! olm-operator and catalog-operator built by `hack/build-olm-v0.sh` run as child
//! processes with the admin kubeconfig, and `opm serve` serves a v0 catalog over gRPC
//! on a free loopback port for a CatalogSource with `spec.address` (no registry pod).
//! The catalog's bundles have no image and carry their manifests as
//! `olm.bundle.object` properties: catalog-operator then puts the bundle's content in
//! the InstallPlan itself instead of unpacking a bundle image with a Job's pod (olm-v0
//! reference §1; docs/how-to/switch-from-olm-v0.md, "Tests with real OLM v0").
//!
//! Both programs serve metrics on a fixed port (`:8080`, `:8443` with TLS; no flag to
//! change it): the second one to start only logs that the port is taken, and two pairs
//! on one machine — or two test binaries — would collide and, worse, two
//! olm-operators would reconcile each other's objects. So the real-v0 tests live in node
//! test binaries (e2e/migrate_v0.rs, e2e/migrate_v0_cluster.rs), which the node
//! suite's machine lock already keeps alone on the machine, and take [`serial`] inside
//! them.
#![allow(dead_code)]

use olmv1::testenv::Lifetime;
use olmv1::testenv::demo::{self, BundleSpec};
use olmv1::testenv::process::Process;
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// The opm release `hack/build-olm-v0.sh` builds.
pub const OPM_VERSION: &str = "v1.60.0";

/// `$OLMV1_OPM_DIR/opm`, else `~/.cache/olmv1/opm/<version>/opm` as the script writes it.
pub fn opm() -> PathBuf {
    if let Some(d) = std::env::var_os("OLMV1_OPM_DIR") {
        return PathBuf::from(d).join("opm");
    }
    let v0 = super::olm_v0::dir();
    let cache = v0
        .parent()
        .and_then(Path::parent)
        .map(Path::to_path_buf)
        .unwrap_or_else(|| PathBuf::from("/tmp"));
    cache.join("opm").join(OPM_VERSION).join("opm")
}

static SERIAL: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// Held by each real-v0 test for its whole run (see the module documentation).
pub async fn serial() -> tokio::sync::MutexGuard<'static, ()> {
    SERIAL.lock().await
}

/// Supervised child processes (`olmv1::testenv::process`: they stop when the test
/// binary exits, even when it is killed), stopped when dropped; logs in `log_dir`.
pub struct Programs {
    children: Vec<Process>,
    pub log_dir: PathBuf,
}

impl Drop for Programs {
    fn drop(&mut self) {
        for child in &mut self.children {
            child.stop();
        }
    }
}

impl Programs {
    fn new(label: &str) -> Programs {
        let log_dir = super::tmp_dir()
            .join("olm-v0-logs")
            .join(super::unique(label));
        std::fs::create_dir_all(&log_dir).unwrap_or_else(|e| panic!("{e}"));
        Programs {
            children: Vec::new(),
            log_dir,
        }
    }

    /// Starts `program args…` with `KUBECONFIG` set (through `env`, which execs it).
    fn spawn(&mut self, name: &str, program: &Path, args: &[String], kubeconfig: Option<&Path>) {
        let log = self.log_dir.join(format!("{name}.log"));
        let mut all = Vec::new();
        if let Some(k) = kubeconfig {
            all.push(format!("KUBECONFIG={}", k.display()));
        }
        all.push(program.display().to_string());
        all.extend(args.iter().cloned());
        let p = Process::spawn(
            name,
            Path::new("/usr/bin/env"),
            &all,
            &log,
            Lifetime::Supervised,
            None,
            &self.log_dir,
        )
        .unwrap_or_else(|e| panic!("starting {name}: {e}"));
        self.children.push(p);
    }

    /// Names of the programs that have exited.
    pub fn exited(&mut self) -> Vec<String> {
        self.children
            .iter_mut()
            .filter_map(|c| c.check_running().err().map(|_| c.name.clone()))
            .collect()
    }

    /// The log of program `name`.
    pub fn log(&self, name: &str) -> String {
        std::fs::read_to_string(self.log_dir.join(format!("{name}.log"))).unwrap_or_default()
    }
}

/// OLM v0's resync period in the tests (`--interval`; 5 minutes by default): every
/// object OLM v0 follows is reconciled again at least this often, so a window of
/// [`QUIET`] with OLM v0 running sees it revisit everything twice.
pub const RESYNC: Duration = Duration::from_secs(10);

/// How long a test watches OLM v0 running beside what it handed over: two resyncs and
/// a margin.
pub const QUIET: Duration = Duration::from_secs(2 * 10 + 5);

/// The namespace catalog-operator treats as its global catalog namespace (`--namespace`).
pub const GLOBAL_NAMESPACE: &str = "olm";

/// Starts olm-operator and catalog-operator against the cluster of `kubeconfig`
/// (OLM v0's CRDs applied and [`GLOBAL_NAMESPACE`] created by the caller).
pub fn start(kubeconfig: &Path) -> Programs {
    let dir = super::olm_v0::dir();
    for program in ["olm", "catalog"] {
        assert!(
            dir.join(program).is_file(),
            "{} has no {program}: run hack/build-olm-v0.sh once",
            dir.display()
        );
    }
    let mut programs = Programs::new("olm-v0");
    let common = |extra: &[&str]| {
        let interval = format!("{}s", RESYNC.as_secs());
        let mut a: Vec<String> = ["--namespace", GLOBAL_NAMESPACE, "--interval", &interval]
            .iter()
            .map(|s| s.to_string())
            .collect();
        a.extend(extra.iter().map(|s| s.to_string()));
        a
    };
    programs.spawn("olm", &dir.join("olm"), &common(&[]), Some(kubeconfig));
    let k = kubeconfig.display().to_string();
    let catalog_args = common(&["--kubeconfig", &k]);
    programs.spawn(
        "catalog",
        &dir.join("catalog"),
        &catalog_args,
        Some(kubeconfig),
    );
    programs
}

/// Serves the file-based catalog in `dir` with `opm serve` on a free loopback port;
/// returns the programs (opm) and `127.0.0.1:<port>` once it accepts connections.
pub fn serve_catalog(dir: &Path) -> (Programs, String) {
    let opm = opm();
    assert!(
        opm.is_file(),
        "{} missing: run hack/build-olm-v0.sh once",
        opm.display()
    );
    let port = olmv1::testenv::control_plane::free_port().unwrap_or_else(|e| panic!("{e}"));
    let mut programs = Programs::new("opm");
    let termination = programs.log_dir.join("termination.log");
    let args: Vec<String> = vec![
        "serve".into(),
        dir.display().to_string(),
        "-p".into(),
        port.to_string(),
        "--pprof-addr".into(),
        "127.0.0.1:0".into(),
        "-t".into(),
        termination.display().to_string(),
    ];
    programs.spawn("opm", &opm, &args, None);
    let deadline = Instant::now() + Duration::from_secs(60);
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(
            programs.exited().is_empty() && Instant::now() < deadline,
            "opm serve did not listen on {port}: {}",
            programs.log("opm")
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    (programs, format!("127.0.0.1:{port}"))
}

/// The v0 catalog (FBC, JSON lines) of `package`: channel `stable` with `bundles`,
/// each with no image and its manifests (`demo::bundle_files`, the same the bundle
/// image of the v1 catalog holds) as `olm.bundle.object` properties.
pub fn v0_catalog(package: &str, bundles: &[BundleSpec]) -> String {
    let with_files: Vec<_> = bundles
        .iter()
        .map(|b| (b.clone(), demo::bundle_files(b)))
        .collect();
    v0_catalog_of(package, &with_files)
}

/// [`v0_catalog`] of bundles with the given manifest files.
pub fn v0_catalog_of(package: &str, bundles: &[(BundleSpec, BTreeMap<String, Vec<u8>>)]) -> String {
    let mut docs =
        vec![json!({"schema": "olm.package", "name": package, "defaultChannel": "stable"})];
    let entries: Vec<Value> = bundles
        .iter()
        .map(|(b, _)| match &b.replaces {
            Some(r) => json!({"name": b.bundle_name(), "replaces": r}),
            None => json!({"name": b.bundle_name()}),
        })
        .collect();
    docs.push(
        json!({"schema": "olm.channel", "name": "stable", "package": package, "entries": entries}),
    );
    for (b, files) in bundles {
        let mut properties = vec![
            json!({"type": "olm.package", "value": {"packageName": package, "version": b.version}}),
            json!({"type": "olm.gvk", "value": {"group": b.group(), "kind": "Widget", "version": "v1"}}),
        ];
        for data in files.values() {
            let encoded = data_encoding::BASE64.encode(data);
            properties.push(json!({"type": "olm.bundle.object", "value": {"data": encoded}}));
        }
        docs.push(
            json!({"schema": "olm.bundle", "name": b.bundle_name(), "package": package,
            "image": "", "properties": properties}),
        );
    }
    docs.iter().map(|d| format!("{d}\n")).collect()
}

/// Writes [`v0_catalog`] into a fresh directory and serves it ([`serve_catalog`]).
pub fn serve_v0_catalog(package: &str, bundles: &[BundleSpec]) -> (Programs, String) {
    serve_v0_catalog_text(package, &v0_catalog(package, bundles))
}

/// [`serve_v0_catalog`] of bundles with the given manifest files ([`v0_catalog_of`]).
pub fn serve_v0_catalog_of(
    package: &str,
    bundles: &[(BundleSpec, BTreeMap<String, Vec<u8>>)],
) -> (Programs, String) {
    serve_v0_catalog_text(package, &v0_catalog_of(package, bundles))
}

fn serve_v0_catalog_text(package: &str, catalog: &str) -> (Programs, String) {
    let dir = super::tmp_dir()
        .join("olm-v0-catalogs")
        .join(super::unique(package));
    std::fs::create_dir_all(dir.join(package)).unwrap_or_else(|e| panic!("{e}"));
    std::fs::write(dir.join(package).join("catalog.json"), catalog)
        .unwrap_or_else(|e| panic!("{e}"));
    serve_catalog(&dir)
}
