//! Rollback (docs/how-to/upgrade-control.md, "Rollback") against the real control plane,
//! registry and controller: `olmv1 rollback NAME` (the built binary) returns an upgraded
//! extension to 1.0.0 with 1.0.0's objects and keeps it there while 1.1.0 is still in
//! the catalog, until `--clear`; a rollback CRD upgrade safety refuses (1.1.0 added a
//! stored CRD version 1.0.0 lacks) is terminal with its findings; with
//! `upgrade-remediation: Rollback` an upgrade whose apply fails goes back to 1.0.0; a
//! revision record an administrator edited to put 1.1.0's digest under 1.0.0 is refused
//! (by the revision's seal, and for a record without one by what the image holds) and
//! nothing is applied.

use crate::support;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, Patch, PatchParams, PostParams};
use olmv1::api::ClusterExtension;
use serde_json::{Value, json};
use std::path::Path;
use std::process::Command;
use std::time::Duration;
use support::bundles::{self, BundleSpec};
use support::extensions::{
    condition, create_catalog, extension, grant_installer, publish, wait_installed,
};

fn olmv1(args: &[&str]) -> (bool, String) {
    let kubeconfig = &support::cluster().admin_kubeconfig;
    let out = Command::new(Path::new(env!("CARGO_BIN_EXE_olmv1")))
        .args(args)
        .env("KUBECONFIG", kubeconfig)
        .output()
        .expect("running olmv1");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.success(), text)
}

/// Waits until condition `type_` of `name` has `reason` and mentions `needle`.
async fn wait_condition(
    api: &Api<ClusterExtension>,
    name: &str,
    type_: &str,
    reason: &str,
    needle: &str,
) -> ClusterExtension {
    let what = format!("{name}: {type_} {reason} mentioning {needle:?}");
    let last = std::sync::Mutex::new(String::new());
    support::eventually(120, &what, || async {
        let e = api.get(name).await.ok()?;
        let c = condition(&e, type_)?;
        let seen = format!("{}/{}: {}", c.status, c.reason, c.message);
        if let Ok(mut last) = last.lock()
            && *last != seen
        {
            eprintln!("{name} {type_}: {seen}");
            *last = seen;
        }
        (c.reason == reason && c.message.contains(needle)).then_some(e)
    })
    .await
}

fn installed_version(e: &ClusterExtension) -> Option<String> {
    Some(e.status.as_ref()?.install.as_ref()?.bundle.version.clone())
}

/// Installs 1.0.0 of `versions` (all published), then waits for the upgrade to the
/// last one (or its failure). Returns (extension name, namespace).
async fn installed_and_upgraded(
    prefix: &str,
    versions: &[BundleSpec],
    annotations: &[(&str, &str)],
) -> (String, String, Api<ClusterExtension>) {
    let admin = support::cluster().admin().await;
    let ns = support::namespace(&admin, prefix).await;
    let name = support::unique(prefix);
    let package = versions[0].package.clone();
    let rendered: Vec<_> = versions.iter().map(|b| bundles::render(b, &ns)).collect();
    grant_installer(&ns, &name, &rendered).await;
    let catalog = support::unique(&format!("{prefix}cat"));
    let image = publish(&catalog, &package, &versions[..1]).await;
    create_catalog(&catalog, &image).await;
    let api: Api<ClusterExtension> = Api::all(admin.clone());
    let mut ext = extension(
        &name,
        &ns,
        &package,
        json!({"upgradeConstraintPolicy": "SelfCertified"}),
    );
    ext.metadata.annotations = Some(
        annotations
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
    );
    api.create(&PostParams::default(), &ext)
        .await
        .expect("create");
    wait_installed(&api, &name, "1.0.0").await;
    publish(&catalog, &package, versions).await;
    (name, ns, api)
}

/// A CRD `things.<group>` of `spec`'s package: `versions` (name, storage).
fn things_crd(spec: &BundleSpec, versions: &[(&str, bool)]) -> Value {
    let versions: Vec<Value> = versions
        .iter()
        .map(|(v, storage)| {
            json!({"name": v, "served": true, "storage": storage,
                "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}})
        })
        .collect();
    json!({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": format!("things.{}", spec.group())},
        "spec": {"group": spec.group(), "scope": "Namespaced",
            "names": {"kind": "Thing", "listKind": "ThingList", "plural": "things", "singular": "thing"},
            "versions": versions}
    })
}

#[tokio::test]
async fn rollback_returns_to_the_recorded_revision_and_stays_there_until_cleared() {
    support::controller();
    let package = support::unique("rb");
    let mut v1 = BundleSpec::new(&package, "1.0.0");
    v1.extra_configmap = true;
    let v11 = BundleSpec::new(&package, "1.1.0");
    let (name, ns, api) = installed_and_upgraded("rb", &[v1.clone(), v11.clone()], &[]).await;
    wait_installed(&api, &name, "1.1.0").await;
    let configmaps: Api<ConfigMap> = Api::namespaced(support::cluster().admin().await, &ns);
    let extra = format!("{package}-extra");
    support::eventually(60, "1.1.0 pruned 1.0.0's ConfigMap", || async {
        configmaps
            .get_opt(&extra)
            .await
            .ok()?
            .is_none()
            .then_some(())
    })
    .await;

    // `--to` a version not in the record: refused before anything is written.
    let (ok, out) = olmv1(&["rollback", &name, "--to", "0.9.0"]);
    assert!(!ok, "{out}");
    assert!(
        out.contains("version 0.9.0 is not in the revision record"),
        "{out}"
    );

    let (ok, out) = olmv1(&["rollback", &name]);
    assert!(ok, "{out}");
    assert!(out.contains("rolling back from 1.1.0 to 1.0.0"), "{out}");
    let e = wait_installed(&api, &name, "1.0.0").await;
    let annotations = e.metadata.annotations.clone().unwrap_or_default();
    assert_eq!(
        annotations
            .get("olm.operatorframework.io/rollback-to")
            .map(String::as_str),
        Some("1.0.0")
    );
    // 1.0.0's objects: its ConfigMap is back, its Deployment runs 1.0.0's image.
    support::eventually(60, "1.0.0's ConfigMap restored", || async {
        configmaps.get_opt(&extra).await.ok()?.map(|_| ())
    })
    .await;
    let deployments: Api<Deployment> = Api::namespaced(support::cluster().admin().await, &ns);
    let d = deployments
        .get(&v1.deployment_name())
        .await
        .expect("deployment");
    let image = d
        .spec
        .and_then(|s| s.template.spec)
        .and_then(|s| s.containers.first().and_then(|c| c.image.clone()));
    assert!(
        image.as_deref().is_some_and(|i| i.ends_with(":1.0.0")),
        "{image:?}"
    );
    let e = wait_condition(
        &api,
        &name,
        "Progressing",
        "RolledBack",
        "the upgrade to 1.1.0",
    )
    .await;
    let rolled = condition(&e, "RolledBack").expect("RolledBack");
    assert_eq!(
        (rolled.status.as_str(), rolled.reason.as_str()),
        ("True", "RollbackRequested")
    );
    wait_condition(
        &api,
        &name,
        "UpgradeAvailable",
        "RolledBack",
        "1.1.0 is available",
    )
    .await;
    // 1.1.0 is still in the catalog: the extension stays on 1.0.0.
    tokio::time::sleep(Duration::from_secs(5)).await;
    let e = api.get(&name).await.expect("get");
    assert_eq!(installed_version(&e).as_deref(), Some("1.0.0"));
    let (ok, status) = olmv1(&["status", &name]);
    assert!(ok, "{status}");
    assert!(
        status.contains("RolledBack:  True/RollbackRequested"),
        "{status}"
    );
    assert!(
        status
            .lines()
            .any(|l| l.contains("Normal") && l.contains("RolledBack")),
        "{status}"
    );

    // Cleared: the upgrade to 1.1.0 runs again.
    let (ok, out) = olmv1(&["rollback", &name, "--clear"]);
    assert!(ok, "{out}");
    wait_installed(&api, &name, "1.1.0").await;
    wait_condition(
        &api,
        &name,
        "RolledBack",
        "UpgradesResumed",
        "upgrades resume",
    )
    .await;
}

#[tokio::test]
async fn a_rollback_that_would_drop_a_stored_crd_version_is_refused() {
    support::controller();
    let package = support::unique("rbcrd");
    let mut v1 = BundleSpec::new(&package, "1.0.0");
    v1.extra_manifests = vec![things_crd(&v1, &[("v1", true)])];
    let mut v11 = BundleSpec::new(&package, "1.1.0");
    v11.extra_manifests = vec![things_crd(&v11, &[("v1", false), ("v2", true)])];
    let (name, _ns, api) = installed_and_upgraded("rbcrd", &[v1, v11], &[]).await;
    wait_installed(&api, &name, "1.1.0").await;

    let (ok, out) = olmv1(&["rollback", &name, "--to", "1.0.0"]);
    assert!(ok, "{out}");
    let e = wait_condition(
        &api,
        &name,
        "Progressing",
        "Blocked",
        "refused by CRD upgrade safety",
    )
    .await;
    let progressing = condition(&e, "Progressing").expect("progressing");
    assert_eq!(progressing.status, "False", "terminal");
    assert!(
        progressing
            .message
            .contains("stored versions removed : [v2]"),
        "{}",
        progressing.message
    );
    let rolled = condition(&e, "RolledBack").expect("RolledBack");
    assert_eq!(
        (rolled.status.as_str(), rolled.reason.as_str()),
        ("False", "RollbackRefused")
    );
    assert_eq!(
        installed_version(&e).as_deref(),
        Some("1.1.0"),
        "nothing went back"
    );
}

#[tokio::test]
async fn remediation_rolls_a_failed_upgrade_back() {
    support::controller();
    let package = support::unique("rbfix");
    let v1 = BundleSpec::new(&package, "1.0.0");
    let mut v11 = BundleSpec::new(&package, "1.1.0");
    // The API server rejects this ConfigMap (an invalid data key): the apply fails
    // after the preflights passed.
    v11.extra_manifests = vec![json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": format!("{package}-broken")}, "data": {"not a valid key!": "x"}})];
    let (name, _ns, api) = installed_and_upgraded(
        "rbfix",
        &[v1, v11],
        &[("olm.operatorframework.io/upgrade-remediation", "Rollback")],
    )
    .await;
    let e = wait_condition(
        &api,
        &name,
        "RolledBack",
        "UpgradeFailed",
        "upgrade to 1.1.0",
    )
    .await;
    let rolled = condition(&e, "RolledBack").expect("RolledBack");
    assert_eq!(rolled.status, "True");
    let e = wait_condition(
        &api,
        &name,
        "Progressing",
        "RolledBack",
        "the upgrade to 1.1.0",
    )
    .await;
    assert_eq!(installed_version(&e).as_deref(), Some("1.0.0"));
    // Not retried while the catalog still resolves 1.1.0.
    tokio::time::sleep(Duration::from_secs(5)).await;
    let e = api.get(&name).await.expect("get");
    assert_eq!(installed_version(&e).as_deref(), Some("1.0.0"));
    let (ok, status) = olmv1(&["status", &name]);
    assert!(ok, "{status}");
    assert!(
        status
            .lines()
            .any(|l| l.contains("Warning") && l.contains("RolledBack")),
        "{status}"
    );
}

/// The revision record of extension `name` in the controller's namespace.
async fn record_of(name: &str) -> (Api<ConfigMap>, String, olmv1::apply::RevisionHistory) {
    use olmv1::apply::record::{DATA_KEY, decode, record_name};
    let api: Api<ConfigMap> = Api::namespaced(support::cluster().admin().await, "olmv1-system");
    let cm_name = record_name(name);
    let cm = api.get(&cm_name).await.expect("revision record");
    let data = cm
        .binary_data
        .as_ref()
        .and_then(|d| d.get(DATA_KEY))
        .expect("record data");
    let history = decode(&data.0).expect("decode record");
    (api, cm_name, history)
}

/// Writes `history` into record `cm_name` as an administrator would (a merge patch).
async fn write_record(
    api: &Api<ConfigMap>,
    cm_name: &str,
    history: &olmv1::apply::RevisionHistory,
) {
    use olmv1::apply::record::{DATA_KEY, encode};
    let gz = encode(history).expect("encode record");
    let b64 = data_encoding::BASE64.encode(&gz);
    let patch = json!({"binaryData": {DATA_KEY: b64}});
    api.patch(cm_name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .expect("edit record");
}

/// What the rollback must leave untouched: the installed version and bundle, the
/// Deployment's image, whether 1.0.0's extra ConfigMap exists.
async fn installed_state(
    api: &Api<ClusterExtension>,
    name: &str,
    ns: &str,
    v1: &BundleSpec,
) -> (Option<String>, Option<String>, Option<String>, bool) {
    let admin = support::cluster().admin().await;
    let e = api.get(name).await.expect("get");
    let bundle = e
        .status
        .as_ref()
        .and_then(|s| s.install.as_ref())
        .map(|i| i.bundle.name.clone());
    let deployments: Api<Deployment> = Api::namespaced(admin.clone(), ns);
    let image = deployments
        .get(&v1.deployment_name())
        .await
        .ok()
        .and_then(|d| d.spec)
        .and_then(|s| s.template.spec)
        .and_then(|s| s.containers.first().and_then(|c| c.image.clone()));
    let configmaps: Api<ConfigMap> = Api::namespaced(admin, ns);
    let extra = configmaps
        .get_opt(&format!("{}-extra", v1.package))
        .await
        .expect("get extra ConfigMap")
        .is_some();
    (installed_version(&e), bundle, image, extra)
}

#[tokio::test]
async fn a_rollback_to_a_revision_edited_to_hold_another_version_is_refused() {
    support::controller();
    let package = support::unique("rbedit");
    let mut v1 = BundleSpec::new(&package, "1.0.0");
    v1.extra_configmap = true;
    let v11 = BundleSpec::new(&package, "1.1.0");
    let (name, ns, api) = installed_and_upgraded("rbedit", &[v1.clone(), v11.clone()], &[]).await;
    wait_installed(&api, &name, "1.1.0").await;
    support::eventually(60, "1.1.0 pruned 1.0.0's ConfigMap", || async {
        let state = installed_state(&api, &name, &ns, &v1).await;
        (!state.3).then_some(())
    })
    .await;
    let before = installed_state(&api, &name, &ns, &v1).await;
    assert!(
        before.2.as_deref().is_some_and(|i| i.ends_with(":1.1.0")),
        "{before:?}"
    );

    // An administrator edits the record: 1.1.0's digest under revision 1 (1.0.0).
    let (records, cm_name, mut history) = record_of(&name).await;
    let digest_of = |h: &olmv1::apply::RevisionHistory, v: &str| {
        h.revisions
            .iter()
            .find(|r| r.bundle.version == v)
            .map(|r| (r.number, r.bundle.image.clone()))
            .expect("recorded")
    };
    let (one, _) = digest_of(&history, "1.0.0");
    let (_, newer) = digest_of(&history, "1.1.0");
    assert!(
        history.revisions.iter().all(|r| r.integrity.is_some()),
        "sealed when recorded"
    );
    for r in &mut history.revisions {
        if r.number == one {
            r.bundle.image = newer.clone();
        }
    }
    write_record(&records, &cm_name, &history).await;
    let record_label =
        format!("revision {one} of record {cm_name} names bundle {package}.v1.0.0 version 1.0.0");

    // The CLI reads the record and refuses before writing anything.
    let (ok, out) = olmv1(&["rollback", &name, "--to", "1.0.0"]);
    assert!(!ok, "{out}");
    assert!(
        out.contains(&format!(
            "rollback to 1.0.0 refused: {record_label} but fails its integrity check"
        )),
        "{out}"
    );
    let e = api.get(&name).await.expect("get");
    assert!(
        !e.metadata
            .annotations
            .unwrap_or_default()
            .contains_key("olm.operatorframework.io/rollback-to"),
        "the CLI wrote nothing"
    );

    // The annotation committed directly (GitOps): the controller refuses, terminal.
    let annotate = |value: Option<&str>| json!({"metadata": {"annotations": {"olm.operatorframework.io/rollback-to": value}}});
    api.patch(
        &name,
        &PatchParams::default(),
        &Patch::Merge(&annotate(Some("1.0.0"))),
    )
    .await
    .expect("annotate");
    let e = wait_condition(
        &api,
        &name,
        "Progressing",
        "Blocked",
        "fails its integrity check",
    )
    .await;
    let progressing = condition(&e, "Progressing").expect("Progressing");
    assert_eq!(progressing.status, "False", "terminal");
    assert!(
        progressing
            .message
            .starts_with(&format!("rollback to 1.0.0 refused: {record_label}")),
        "{}",
        progressing.message
    );
    assert!(
        progressing
            .message
            .ends_with("the record was edited; roll back to another revision or re-install"),
        "{}",
        progressing.message
    );
    let rolled = condition(&e, "RolledBack").expect("RolledBack");
    assert_eq!(
        (rolled.status.as_str(), rolled.reason.as_str()),
        ("False", "RollbackRefused")
    );
    assert_eq!(
        installed_state(&api, &name, &ns, &v1).await,
        before,
        "nothing applied"
    );

    // A record without seals (as written before olmv1 sealed revisions): the image
    // pulled for revision 1 holds 1.1.0, refused before anything is applied.
    api.patch(
        &name,
        &PatchParams::default(),
        &Patch::Merge(&annotate(None)),
    )
    .await
    .expect("remove the annotation");
    wait_condition(
        &api,
        &name,
        "RolledBack",
        "UpgradesResumed",
        "upgrades resume",
    )
    .await;
    let (_, _, mut history) = record_of(&name).await;
    for r in &mut history.revisions {
        r.integrity = None;
    }
    assert_eq!(digest_of(&history, "1.0.0").1, newer, "still edited");
    write_record(&records, &cm_name, &history).await;
    api.patch(
        &name,
        &PatchParams::default(),
        &Patch::Merge(&annotate(Some("1.0.0"))),
    )
    .await
    .expect("annotate");
    let digest = newer.rsplit_once('@').map(|(_, d)| d).expect("digest");
    let holds = format!(
        "rollback to 1.0.0 refused: {record_label} but its image {digest} holds {package}.v1.1.0 version 1.1.0 (the bundle name and version disagree): the record was edited; roll back to another revision or re-install"
    );
    let e = wait_condition(&api, &name, "Progressing", "Blocked", &holds).await;
    assert_eq!(
        condition(&e, "Progressing").map(|c| c.status),
        Some("False".into())
    );
    assert_eq!(
        condition(&e, "RolledBack").map(|c| c.reason),
        Some("RollbackRefused".into())
    );
    assert_eq!(
        installed_state(&api, &name, &ns, &v1).await,
        before,
        "nothing applied"
    );
    // The record is not rewritten as if 1.0.0 had been installed.
    let (_, _, after) = record_of(&name).await;
    assert_eq!(
        after.installed().map(|r| r.bundle.version.as_str()),
        Some("1.1.0")
    );
}
