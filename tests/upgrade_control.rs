//! The opt-in upgrade controls (docs/how-to/upgrade-control.md) against the real control
//! plane, registry and controller: a newer version added to the catalog shows up as the
//! UpgradeAvailable condition, an Event, the metric and in `olmv1 status`; under manual
//! approval the upgrade waits, an approval of a version that is no longer the target
//! lets nothing through, and `olmv1 approve` (the built binary) lets exactly the waiting
//! version through; a paused extension reports drift of a managed object (an edited
//! Deployment) without correcting it, and unpausing corrects it.

use crate::support;

use k8s_openapi::api::apps::v1::Deployment;
use kube::api::{Api, Patch, PatchParams, PostParams};
use olmv1::api::ClusterExtension;
use serde_json::json;
use std::path::Path;
use std::process::Command;
use std::sync::OnceLock;
use std::time::Duration;
use support::bundles::{self, BundleSpec};
use support::extensions::{
    condition, create_catalog, extension, grant_installer, publish, wait_installed,
};

/// The metrics port of this binary's controller (plain HTTP).
static METRICS_PORT: OnceLock<u16> = OnceLock::new();

fn controller() {
    let port = *METRICS_PORT.get_or_init(|| {
        olmv1::testenv::control_plane::free_port().unwrap_or_else(|e| panic!("{e}"))
    });
    support::controller_with(|args| {
        args.metrics_bind_address = format!("127.0.0.1:{port}");
        args.metrics_serving.metrics_secure = false;
    });
}

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

async fn metrics() -> String {
    let port = METRICS_PORT.get().copied().unwrap_or_default();
    match reqwest::get(format!("http://127.0.0.1:{port}/metrics")).await {
        Ok(r) => r.text().await.unwrap_or_default(),
        Err(_) => String::new(),
    }
}

/// Waits until condition `type_` of `name` has `status`/`reason` and mentions `needle`.
async fn wait_condition(
    api: &Api<ClusterExtension>,
    name: &str,
    type_: &str,
    reason: &str,
    needle: &str,
) -> ClusterExtension {
    let what = format!("{name}: {type_} {reason} mentioning {needle:?}");
    let last = std::sync::Mutex::new(String::new());
    support::eventually(90, &what, || async {
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

async fn annotate(api: &Api<ClusterExtension>, name: &str, key: &str, value: Option<&str>) {
    let patch = json!({"metadata": {"annotations": {key: value}}});
    api.patch(name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .expect("annotate");
}

#[tokio::test]
async fn notices_and_manual_approval_of_exactly_the_waiting_version() {
    controller();
    let admin = support::cluster().admin().await;
    let package = support::unique("appr");
    let ns = support::namespace(&admin, "appr").await;
    let name = support::unique("appr");
    let v1 = BundleSpec::new(&package, "1.0.0");
    let v11 = BundleSpec::new(&package, "1.1.0");
    let v12 = BundleSpec::new(&package, "1.2.0");
    let rendered: Vec<_> = [&v1, &v11, &v12]
        .iter()
        .map(|b| bundles::render(b, &ns))
        .collect();
    grant_installer(&ns, &name, &rendered).await;
    let catalog = support::unique("apprcat");
    let image = publish(&catalog, &package, std::slice::from_ref(&v1)).await;
    create_catalog(&catalog, &image).await;

    let api: Api<ClusterExtension> = Api::all(admin.clone());
    let mut ext = extension(
        &name,
        &ns,
        &package,
        json!({"upgradeConstraintPolicy": "SelfCertified"}),
    );
    ext.metadata.annotations = Some(
        [(
            "olm.operatorframework.io/upgrade-approval".to_string(),
            "Manual".to_string(),
        )]
        .into(),
    );
    api.create(&PostParams::default(), &ext)
        .await
        .expect("create");
    // The first install needs no approval.
    wait_installed(&api, &name, "1.0.0").await;
    wait_condition(&api, &name, "UpgradeAvailable", "UpToDate", "1.0.0").await;

    // 1.1.0 appears: announced, and waiting for approval.
    publish(&catalog, &package, &[v1.clone(), v11.clone()]).await;
    let e = wait_condition(
        &api,
        &name,
        "UpgradeAvailable",
        "ApprovalRequired",
        "1.1.0 is available",
    )
    .await;
    let progressing = condition(&e, "Progressing").expect("progressing");
    assert_eq!(progressing.reason, "ApprovalRequired");
    assert!(
        progressing.message.contains("the upgrade to 1.1.0"),
        "{}",
        progressing.message
    );
    assert_eq!(
        condition(&e, "Installed").expect("installed").status,
        "True"
    );
    let series = format!(
        "olmv1_clusterextension_upgrade_available{{name=\"{name}\",package=\"{package}\",installed_version=\"1.0.0\",available_version=\"1.1.0\",reason=\"ApprovalRequired\"}} 1"
    );
    support::eventually(30, "the upgrade_available series", || async {
        metrics().await.contains(&series).then_some(())
    })
    .await;
    let (ok, status) = olmv1(&["status", &name]);
    assert!(ok, "{status}");
    assert!(
        status.contains("Notice:      UpgradeAvailable True/ApprovalRequired"),
        "{status}"
    );
    assert!(
        status
            .lines()
            .any(|l| l.contains("Normal") && l.contains("UpgradeAvailable")),
        "one Event for 1.1.0: {status}"
    );
    assert!(
        status.contains(&format!("olmv1 approve {name} 1.1.0")),
        "{status}"
    );

    // 1.2.0 appears before anyone approved 1.1.0: approving 1.1.0 now lets nothing
    // through (1.2.0 is the target and waits).
    publish(&catalog, &package, &[v1.clone(), v11.clone(), v12.clone()]).await;
    wait_condition(
        &api,
        &name,
        "Progressing",
        "ApprovalRequired",
        "the upgrade to 1.2.0",
    )
    .await;
    let (ok, out) = olmv1(&["approve", &name, "1.1.0"]);
    assert!(ok, "{out}");
    wait_condition(
        &api,
        &name,
        "Progressing",
        "ApprovalRequired",
        "the approved version 1.1.0 is not the one resolved",
    )
    .await;
    tokio::time::sleep(Duration::from_secs(3)).await;
    let e = api.get(&name).await.expect("get");
    let installed = e.status.as_ref().and_then(|s| s.install.as_ref());
    assert_eq!(
        installed.map(|i| i.bundle.version.as_str()),
        Some("1.0.0"),
        "a stale approval lets nothing through"
    );

    // `olmv1 approve NAME` approves the version waiting: 1.2.0.
    let (ok, out) = olmv1(&["approve", &name]);
    assert!(ok, "{out}");
    assert!(out.contains("approved for version 1.2.0"), "{out}");
    let e = wait_installed(&api, &name, "1.2.0").await;
    let annotations = e.metadata.annotations.clone().unwrap_or_default();
    assert_eq!(
        annotations
            .get("olm.operatorframework.io/approved-version")
            .map(String::as_str),
        Some("1.2.0")
    );
    wait_condition(&api, &name, "UpgradeAvailable", "UpToDate", "1.2.0").await;
    wait_condition(
        &api,
        &name,
        "Progressing",
        "Succeeded",
        "Desired state reached",
    )
    .await;
}

#[tokio::test]
async fn pause_reports_drift_without_correcting_it_and_resuming_corrects_it() {
    controller();
    let admin = support::cluster().admin().await;
    let package = support::unique("paus");
    let ns = support::namespace(&admin, "paus").await;
    let name = support::unique("paus");
    let v1 = BundleSpec::new(&package, "1.0.0");
    grant_installer(&ns, &name, &[bundles::render(&v1, &ns)]).await;
    let catalog = support::unique("pauscat");
    let image = publish(&catalog, &package, std::slice::from_ref(&v1)).await;
    create_catalog(&catalog, &image).await;
    let api: Api<ClusterExtension> = Api::all(admin.clone());
    api.create(
        &PostParams::default(),
        &extension(&name, &ns, &package, json!({})),
    )
    .await
    .expect("create");
    let e = wait_installed(&api, &name, "1.0.0").await;
    assert!(
        condition(&e, "Paused").is_none(),
        "no Paused condition unless paused"
    );

    annotate(&api, &name, "olm.operatorframework.io/paused", Some("true")).await;
    wait_condition(&api, &name, "Paused", "Paused", "nothing is applied").await;
    let e = wait_condition(&api, &name, "Progressing", "Paused", "paused").await;
    assert_eq!(
        condition(&e, "Installed").expect("installed").status,
        "True"
    );

    // Drift the watches see (a changed generation): the Deployment's image.
    let deployments: Api<Deployment> = Api::namespaced(admin.clone(), &ns);
    let deployment = v1.deployment_name();
    let image_of = |d: &Deployment| {
        d.spec
            .as_ref()?
            .template
            .spec
            .as_ref()?
            .containers
            .first()?
            .image
            .clone()
    };
    let ours = image_of(&deployments.get(&deployment).await.expect("deployment"));
    let tampered = "example.com/tampered:6.6.6";
    let patch = json!({"spec": {"template": {"spec": {"containers": [
        {"name": "manager", "image": tampered}
    ]}}}});
    deployments
        .patch(
            &deployment,
            &PatchParams::default(),
            &Patch::Strategic(&patch),
        )
        .await
        .expect("tamper");
    let e = wait_condition(&api, &name, "Paused", "Paused", "drift not corrected").await;
    let message = condition(&e, "Paused").expect("paused").message;
    assert!(
        message.contains(&format!("Deployment/{ns}/{deployment}")),
        "{message}"
    );
    tokio::time::sleep(Duration::from_secs(3)).await;
    let live = deployments.get(&deployment).await.expect("deployment");
    assert_eq!(
        image_of(&live).as_deref(),
        Some(tampered),
        "paused: not corrected"
    );
    let (ok, status) = olmv1(&["status", &name]);
    assert!(ok, "{status}");
    assert!(status.contains("Paused:      since "), "{status}");
    assert!(
        status
            .lines()
            .any(|l| l.contains("Warning") && l.contains("DriftDetected")),
        "{status}"
    );

    // Resume: the drift is corrected.
    annotate(&api, &name, "olm.operatorframework.io/paused", None).await;
    support::eventually(60, "the Deployment's image restored", || async {
        let live = deployments.get(&deployment).await.ok()?;
        (image_of(&live) == ours).then_some(())
    })
    .await;
    wait_condition(&api, &name, "Paused", "Resumed", "removed").await;
    wait_condition(
        &api,
        &name,
        "Progressing",
        "Succeeded",
        "Desired state reached",
    )
    .await;
}
