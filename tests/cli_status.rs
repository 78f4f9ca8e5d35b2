//! `olmv1 status` against the real control plane and the real controller: an
//! extension installed at 1.0.0 from a catalog that also has 1.1.0 (replaces 1.0.0) and
//! 2.0.0 (replaces nothing). Pinned at 1.0.0, 1.1.0 is excluded by the range and the
//! next step is to widen it; once the range is widened, 1.1.0 is the available upgrade
//! the controller is blocked from by the permission preflight (the installer was granted
//! 1.0.0's RBAC only), 2.0.0 is blocked as not a successor, and the next step is the
//! grant. The built `olmv1` binary is run as users run it, also as the kubectl plugin
//! through the real kubectl.

use crate::support;

use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use olmv1::api::ClusterExtension;
use serde_json::{Value, json};
use std::path::Path;
use std::process::Command;
use support::bundles::{self, BundleSpec};
use support::extensions::{
    create_catalog, extension, grant_installer, publish, wait_installed, wait_progressing_message,
};

/// Runs `program args` with KUBECONFIG set; (exit success, stdout, stderr).
fn run(
    program: &Path,
    args: &[&str],
    kubeconfig: &Path,
    path: Option<&str>,
) -> (bool, String, String) {
    let mut cmd = Command::new(program);
    cmd.args(args).env("KUBECONFIG", kubeconfig);
    if let Some(p) = path {
        cmd.env("PATH", p);
    }
    let out = cmd
        .output()
        .unwrap_or_else(|e| panic!("running {}: {e}", program.display()));
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn olmv1(args: &[&str], kubeconfig: &Path) -> String {
    let (ok, stdout, stderr) = run(
        Path::new(env!("CARGO_BIN_EXE_olmv1")),
        args,
        kubeconfig,
        None,
    );
    assert!(ok, "olmv1 {args:?} failed: {stderr}\n{stdout}");
    stdout
}

#[tokio::test]
async fn status_shows_the_available_upgrade_the_blocked_one_and_what_to_do() {
    support::controller();
    let cluster = support::cluster();
    let kubeconfig = cluster.admin_kubeconfig.clone();
    let admin = cluster.admin().await;
    let package = support::unique("stat");
    let ns = support::namespace(&admin, "stat").await;
    let name = support::unique("stat");
    let v1 = BundleSpec::new(&package, "1.0.0");
    let mut v11 = BundleSpec::new(&package, "1.1.0");
    v11.replaces = Some(v1.bundle_name());
    let v2 = BundleSpec::new(&package, "2.0.0"); // replaces nothing: not a successor
    grant_installer(&ns, &name, &[bundles::render(&v1, &ns)]).await;
    let catalog = support::unique("statcat");
    let image = publish(&catalog, &package, &[v1.clone(), v11.clone(), v2.clone()]).await;
    create_catalog(&catalog, &image).await;

    let api: Api<ClusterExtension> = Api::all(admin.clone());
    api.create(
        &PostParams::default(),
        &extension(&name, &ns, &package, json!({"version": "1.0.0"})),
    )
    .await
    .expect("create");
    wait_installed(&api, &name, "1.0.0").await;

    // Pinned: 1.1.0 is excluded by the range, 2.0.0 blocked; widen the range.
    let pinned = olmv1(&["status", &name, "--explain"], &kubeconfig);
    println!("{pinned}");
    assert!(
        pinned.contains(&format!(
            "Installer:   serviceaccount {ns}/{name}-installer"
        )),
        "{pinned}"
    );
    assert!(
        pinned.contains(&format!(
            "Installed:   {package}.v1.0.0 (1.0.0), True/Succeeded"
        )),
        "{pinned}"
    );
    assert!(
        pinned.contains("Upgrades:    0 available, 2 not taken"),
        "{pinned}"
    );
    assert!(
        pinned.contains("excluded: outside version range \"1.0.0\""),
        "{pinned}"
    );
    assert!(
        pinned.contains(&format!("not a successor of {package}.v1.0.0 (1.0.0)")),
        "{pinned}"
    );
    assert!(
        pinned.contains(
            "Next:        widen spec.source.catalog.version (now \"1.0.0\") to take 1.1.0"
        ),
        "{pinned}"
    );
    assert!(
        pinned.lines().any(|l| {
            let cells: Vec<&str> = l.split_whitespace().collect();
            cells.get(1) == Some(&"Normal") && cells.get(2) == Some(&"Installed")
        }),
        "Events: {pinned}"
    );
    assert!(
        pinned.contains(&format!("installed bundle {package}.v1.0.0 version 1.0.0")),
        "{pinned}"
    );

    // Widened: the controller wants 1.1.0 and the preflight stops it.
    api.patch(
        &name,
        &PatchParams::default(),
        &Patch::Merge(json!({"spec": {"source": {"catalog": {"version": ">=1.0.0"}}}})),
    )
    .await
    .expect("patch");
    wait_progressing_message(&api, &name, "pre-authorization failed").await;

    let explained = olmv1(&["status", &name, "--explain"], &kubeconfig);
    println!("{explained}");
    assert!(
        explained.contains(&format!(
            "Target:      {package}.v1.1.0 (1.1.0) from catalog {catalog}"
        )),
        "{explained}"
    );
    assert!(
        explained.contains("Upgrades:    1 available, 1 not taken"),
        "{explained}"
    );
    let row = |version: &str| {
        explained
            .lines()
            .find(|l| l.trim_start().starts_with(version))
            .unwrap_or_else(|| panic!("no row for {version}: {explained}"))
            .to_string()
    };
    let available = row("1.1.0");
    assert!(available.contains("available: chosen"), "{available}");
    assert!(
        available.contains("pre-authorization failed"),
        "the target names what holds it back: {available}"
    );
    let blocked = row("2.0.0");
    assert!(
        blocked.contains(&format!(
            "blocked: not a successor of {package}.v1.0.0 (1.0.0)"
        )),
        "{blocked}"
    );
    assert!(
        explained.contains(&format!(
            "Next:        grant the installer (serviceaccount {ns}/{name}-installer) the missing rules"
        )),
        "{explained}"
    );
    assert!(
        explained.contains(&format!(
            "olmv1 rbac {package}@1.1.0 --catalog {catalog} --diff 1.0.0 --namespace {ns} --extension {name}"
        )),
        "{explained}"
    );
    // Without --explain: verdicts only.
    let short = olmv1(&["status", &name], &kubeconfig);
    assert!(!short.contains("not a successor"), "{short}");
    assert!(short.contains("blocked"), "{short}");

    // -o json: the documented structure.
    let doc: Value =
        serde_json::from_str(&olmv1(&["status", &name, "-o", "json"], &kubeconfig)).expect("json");
    assert_eq!(doc["name"], json!(name));
    assert_eq!(doc["package"], json!(package));
    assert_eq!(doc["installed"]["version"], json!("1.0.0"));
    assert_eq!(doc["target"]["version"], json!("1.1.0"));
    assert_eq!(doc["target"]["catalog"], json!(catalog));
    assert_eq!(doc["availableUpgrades"], json!(1));
    assert_eq!(doc["progressing"]["reason"], json!("Retrying"));
    let upgrades: Vec<(String, String)> = doc["upgrades"]
        .as_array()
        .expect("upgrades")
        .iter()
        .map(|u| {
            (
                u["version"].as_str().unwrap_or_default().to_string(),
                u["verdict"].as_str().unwrap_or_default().to_string(),
            )
        })
        .collect();
    assert_eq!(
        upgrades,
        [
            ("1.1.0".to_string(), "available".to_string()),
            ("2.0.0".to_string(), "blocked".to_string())
        ]
    );
    assert!(
        doc["events"]
            .as_array()
            .is_some_and(|e| e.iter().any(|e| e["reason"] == json!("Installed"))),
        "{doc}"
    );
    assert!(
        doc["next"]
            .as_str()
            .unwrap_or_default()
            .starts_with("grant the installer")
    );
    // -o yaml reads back as the same document.
    let yaml = olmv1(&["status", &name, "-o", "yaml"], &kubeconfig);
    let from_yaml: Value = serde_saphyr::from_str(&yaml).expect("yaml");
    assert_eq!(from_yaml["target"], doc["target"]);

    // The table of all extensions.
    let table = olmv1(&["status"], &kubeconfig);
    println!("{table}");
    let header = table.lines().next().unwrap_or_default();
    assert!(
        header.split_whitespace().collect::<Vec<_>>()
            == [
                "NAME",
                "PACKAGE",
                "INSTALLED",
                "TARGET",
                "PROGRESSING",
                "UPGRADES",
                "INSTALLER"
            ],
        "{table}"
    );
    let line = table
        .lines()
        .find(|l| l.starts_with(&format!("{name} ")))
        .unwrap_or_else(|| panic!("no row for {name}: {table}"));
    let cells: Vec<&str> = line
        .split("   ")
        .map(str::trim)
        .filter(|c| !c.is_empty())
        .collect();
    assert_eq!(
        cells,
        [
            name.as_str(),
            package.as_str(),
            "1.0.0",
            "1.1.0",
            "True/Retrying",
            "1 (1.1.0) (+1 not taken)",
            &format!("serviceaccount {ns}/{name}-installer"),
        ],
        "{table}"
    );

    // As a kubectl plugin, through the real kubectl and the current context.
    let bin_dir = tempfile::tempdir().expect("tempdir");
    std::os::unix::fs::symlink(
        env!("CARGO_BIN_EXE_olmv1"),
        bin_dir.path().join("kubectl-olmv1"),
    )
    .expect("symlink");
    let path = format!(
        "{}:{}",
        bin_dir.path().display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let kubectl = olmv1::testenv::deploy::kubectl();
    let (ok, plugin, stderr) = run(
        &kubectl,
        &["olmv1", "status", &name],
        &kubeconfig,
        Some(&path),
    );
    assert!(ok, "kubectl olmv1 status failed: {stderr}");
    assert!(plugin.contains(&format!("Name:        {name}")), "{plugin}");
    assert!(
        plugin.contains("Upgrades:    1 available, 1 not taken"),
        "{plugin}"
    );
    let (ok, _, stderr) = run(
        &kubectl,
        &["olmv1", "status", "--bogus"],
        &kubeconfig,
        Some(&path),
    );
    assert!(!ok);
    assert!(stderr.contains("Usage: kubectl olmv1 status"), "{stderr}");
    let (ok, _, stderr) = run(
        &kubectl,
        &["olmv1", "status", "--context", "no-such-context"],
        &kubeconfig,
        Some(&path),
    );
    assert!(!ok);
    assert!(stderr.contains("no-such-context"), "{stderr}");
    let (ok, _, stderr) = run(
        &kubectl,
        &["olmv1", "status", "absent"],
        &kubeconfig,
        Some(&path),
    );
    assert!(!ok);
    assert!(
        stderr.contains("clusterextension \"absent\" not found"),
        "{stderr}"
    );

    api.delete(&name, &DeleteParams::default())
        .await
        .expect("delete");
}
