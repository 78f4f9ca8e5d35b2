//! The Argo CD health checks in `contrib/argocd/` (health.lua for ClusterExtension and
//! ClusterCatalog) on statuses the REAL controller writes: each scenario drives the
//! controller on the real control plane and registry, captures the live object as the
//! API server returns it, and runs the shipped health.lua on it with gopher-lua, the
//! interpreter Argo CD uses (hack/argo-health, built by hack/build-argo-health.sh), the
//! way Argo CD does. The committed `testdata/` are such captures: the test checks every
//! scenario still has one, that it gets the same health status as the live capture, and
//! that Argo's `health_test.yaml` passes. `OLMV1_ARGO_TESTDATA=1` rewrites `testdata/`
//! and `health_test.yaml` from the live captures.

use crate::support;

use kube::api::{Api, DynamicObject, Patch, PatchParams, PostParams};
use kube::core::ApiResource;
use olmv1::api::{ClusterCatalog, ClusterExtension};
use serde_json::{Value, json};
use std::path::{Path, PathBuf};
use support::bundles::{self, BundleSpec};
use support::extensions::{grant_installer, publish};
use support::pods::{pods, set_pod_status};

const GROUP_DIR: &str = "contrib/argocd/resource_customizations/olm.operatorframework.io";

/// One live capture and the health Argo CD must give it.
struct Capture {
    /// The testdata file name (without `.yaml`).
    name: &'static str,
    object: Value,
    status: &'static str,
    message: String,
}

/// The test controller, waiting for rollouts (workloads ready) as in production: this
/// binary writes the pods' status itself, as a kubelet would.
fn start_controller() {
    support::controller_with(|args| args.skip_rollout_wait = false);
}

fn project() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn driver() -> &'static PathBuf {
    static DRIVER: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    DRIVER.get_or_init(|| {
        let out = std::process::Command::new(project().join("hack/build-argo-health.sh"))
            .stderr(std::process::Stdio::inherit())
            .output()
            .expect("run hack/build-argo-health.sh");
        assert!(out.status.success(), "hack/build-argo-health.sh failed");
        let path = String::from_utf8_lossy(&out.stdout).trim().to_string();
        PathBuf::from(path)
    })
}

/// Runs `<kind>/health.lua` on `object` with the Go driver: (status, message).
fn argo_health(kind: &str, object: &Value) -> (String, String) {
    let dir = tempfile::tempdir().expect("tempdir");
    let file = dir.path().join("object.json");
    std::fs::write(&file, serde_json::to_vec(object).expect("json")).expect("write object");
    let script = project().join(GROUP_DIR).join(kind).join("health.lua");
    let out = std::process::Command::new(driver())
        .arg("run")
        .arg(&script)
        .arg(&file)
        .output()
        .expect("run argo-health");
    assert!(
        out.status.success(),
        "argo-health run failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let line: Value = serde_json::from_slice(&out.stdout).expect("argo-health prints JSON");
    (
        line["status"].as_str().unwrap_or_default().to_string(),
        line["message"].as_str().unwrap_or_default().to_string(),
    )
}

/// The object as stored, without the bookkeeping that only adds noise to testdata.
fn captured(object: DynamicObject) -> Value {
    let mut v = serde_json::to_value(object).expect("object");
    if let Some(meta) = v["metadata"].as_object_mut() {
        meta.remove("managedFields");
    }
    v
}

fn condition(object: &Value, type_: &str) -> Option<Value> {
    object["status"]["conditions"]
        .as_array()?
        .iter()
        .find(|c| c["type"] == type_)
        .cloned()
}

fn field(c: &Option<Value>, name: &str) -> String {
    c.as_ref()
        .and_then(|c| c[name].as_str())
        .unwrap_or_default()
        .to_string()
}

fn extensions_api(client: kube::Client) -> Api<DynamicObject> {
    Api::all_with(client, &ApiResource::erase::<ClusterExtension>(&()))
}

fn catalogs_api(client: kube::Client) -> Api<DynamicObject> {
    Api::all_with(client, &ApiResource::erase::<ClusterCatalog>(&()))
}

fn dynamic(v: Value) -> DynamicObject {
    serde_json::from_value(v).expect("dynamic object")
}

/// Waits until `check` holds on the live object, returns its capture.
async fn wait_for(
    api: &Api<DynamicObject>,
    name: &str,
    what: &str,
    check: impl Fn(&Value) -> bool,
) -> Value {
    support::eventually(120, &format!("{name}: {what}"), || async {
        let v = captured(api.get(name).await.ok()?);
        check(&v).then_some(v)
    })
    .await
}

fn is(object: &Value, type_: &str, status: &str, reason: &str) -> bool {
    let c = condition(object, type_);
    field(&c, "status") == status && field(&c, "reason") == reason
}

fn extension_object(name: &str, ns: &str, package: &str, catalog: &str) -> Value {
    json!({
        "apiVersion": "olm.operatorframework.io/v1", "kind": "ClusterExtension",
        "metadata": {"name": name},
        "spec": {
            "namespace": ns,
            "serviceAccount": {"name": format!("{name}-installer")},
            "source": {"sourceType": "Catalog", "catalog": {
                "packageName": package,
                "selector": {"matchLabels": {"olm.operatorframework.io/metadata.name": catalog}},
            }},
        },
    })
}

fn catalog_object(name: &str, image: &str) -> Value {
    json!({
        "apiVersion": "olm.operatorframework.io/v1", "kind": "ClusterCatalog",
        "metadata": {"name": name},
        "spec": {"source": {"type": "Image", "image": {"ref": image, "pollIntervalMinutes": 1}}},
    })
}

/// Checks every capture against the driver, the committed testdata and Argo's own
/// `health_test.yaml` runner; with `OLMV1_ARGO_TESTDATA=1` rewrites the testdata first.
fn check(kind: &str, captures: &[Capture]) {
    let dir = project().join(GROUP_DIR).join(kind);
    for c in captures {
        let (status, message) = argo_health(kind, &c.object);
        assert_eq!(
            (status.as_str(), message.as_str()),
            (c.status, c.message.as_str()),
            "{kind} {}: health.lua on the live object {}",
            c.name,
            c.object
        );
    }
    if std::env::var_os("OLMV1_ARGO_TESTDATA").is_some_and(|v| v == "1") {
        std::fs::create_dir_all(dir.join("testdata")).expect("testdata dir");
        let mut tests = Vec::new();
        for c in captures {
            let yaml = serde_saphyr::to_string(&c.object).expect("yaml");
            std::fs::write(dir.join(format!("testdata/{}.yaml", c.name)), yaml)
                .expect("write testdata");
            tests.push(json!({
                "healthStatus": {"status": c.status, "message": c.message},
                "inputPath": format!("testdata/{}.yaml", c.name),
            }));
        }
        let header = "# Generated by tests/argo_health.rs from statuses the controller wrote\n# (OLMV1_ARGO_TESTDATA=1 cargo test --test integration argo_health::); run with\n# hack/argo-health: argo-health test <this directory>.\n";
        let yaml = serde_saphyr::to_string(&json!({"tests": tests})).expect("yaml");
        std::fs::write(dir.join("health_test.yaml"), format!("{header}{yaml}"))
            .expect("write health_test.yaml");
    }
    // The committed captures: one per scenario, same health status as the live one.
    for c in captures {
        let path = dir.join(format!("testdata/{}.yaml", c.name));
        let text = std::fs::read_to_string(&path).unwrap_or_else(|e| {
            panic!(
                "{}: {e} (regenerate with OLMV1_ARGO_TESTDATA=1 cargo test --test integration argo_health::)",
                path.display()
            )
        });
        let committed: Value = serde_saphyr::from_str(&text).expect("testdata yaml");
        let (status, _) = argo_health(kind, &committed);
        assert_eq!(
            status,
            c.status,
            "{}: the committed capture no longer gets the live health status (regenerate with OLMV1_ARGO_TESTDATA=1)",
            path.display()
        );
        for type_ in ["Installed", "Progressing", "Serving"] {
            assert_eq!(
                (
                    field(&condition(&committed, type_), "status"),
                    field(&condition(&committed, type_), "reason")
                ),
                (
                    field(&condition(&c.object, type_), "status"),
                    field(&condition(&c.object, type_), "reason")
                ),
                "{}: condition {type_} changed shape since the capture (regenerate with OLMV1_ARGO_TESTDATA=1)",
                path.display()
            );
        }
    }
    let out = std::process::Command::new(driver())
        .arg("test")
        .arg(&dir)
        .output()
        .expect("run argo-health test");
    assert!(
        out.status.success(),
        "argo-health test {}:\n{}{}",
        dir.display(),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

#[tokio::test]
async fn cluster_extension_health_on_live_statuses() {
    start_controller();
    let admin = support::cluster().admin().await;
    let api = extensions_api(admin.clone());
    let package = support::unique("argo");
    let ns = support::namespace(&admin, "argo").await;

    // v2's CRD drops `spec.color`, which v1's had: an unsafe CRD upgrade.
    let mut v1 = BundleSpec::new(&package, "1.0.0");
    v1.crd_spec_properties = json!({"size": {"type": "integer"}, "color": {"type": "string"}});
    let mut v2 = BundleSpec::new(&package, "1.1.0");
    v2.replaces = Some(v1.bundle_name());
    let catalog = support::unique("argocat");
    let image = publish(&catalog, &package, &[v1.clone(), v2.clone()]).await;
    catalogs_api(admin.clone())
        .create(
            &PostParams::default(),
            &dynamic(catalog_object(&catalog, &image)),
        )
        .await
        .expect("create catalog");
    let rendered = [bundles::render(&v1, &ns), bundles::render(&v2, &ns)];
    let mut captures = Vec::new();

    // Installed and rolled out; before that, as created (no status); after a spec
    // change the controller has not acted on yet.
    let installed = support::unique("inst");
    grant_installer(&ns, &installed, &rendered).await;
    let mut obj = extension_object(&installed, &ns, &package, &catalog);
    obj["spec"]["source"]["catalog"]["version"] = json!("1.0.0");
    let created = api
        .create(&PostParams::default(), &dynamic(obj))
        .await
        .expect("create extension");
    captures.push(Capture {
        name: "no-status",
        object: captured(created),
        status: "Progressing",
        message: "Waiting for the controller".into(),
    });
    // Applied, the operator's pods not ready yet: RollingOut.
    let deployment = v1.deployment_name();
    let pod_names = pods(&admin, &ns, &deployment).await;
    for pod in &pod_names {
        set_pod_status(&admin, &ns, pod, Some("ImagePullBackOff")).await;
    }
    let live = wait_for(&api, &installed, "RollingOut", |v| {
        is(v, "Installed", "True", "Succeeded")
            && is(v, "Progressing", "True", "RollingOut")
            && field(&condition(v, "Progressing"), "message").ends_with("ImagePullBackOff")
    })
    .await;
    let message = field(&condition(&live, "Progressing"), "message");
    assert_eq!(
        message,
        format!(
            "Revision 1.0.0 is rolling out: deployment/{deployment} 0/1 available: ImagePullBackOff"
        )
    );
    captures.push(Capture {
        name: "rolling-out",
        object: live,
        status: "Progressing",
        message,
    });
    for pod in &pod_names {
        set_pod_status(&admin, &ns, pod, None).await;
    }
    let live = wait_for(&api, &installed, "Installed and Succeeded", |v| {
        is(v, "Installed", "True", "Succeeded") && is(v, "Progressing", "True", "Succeeded")
    })
    .await;
    let message = field(&condition(&live, "Installed"), "message");
    assert!(
        message.starts_with("Installed bundle ") && message.ends_with(" successfully"),
        "{message}"
    );
    captures.push(Capture {
        name: "installed",
        object: live,
        status: "Healthy",
        message,
    });

    let patched = api
        .patch(
            &installed,
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"source": {"catalog": {"version": "1.1.0"}}}})),
        )
        .await
        .expect("patch extension");
    let patched = captured(patched);
    let generation = patched["metadata"]["generation"]
        .as_i64()
        .unwrap_or_default();
    assert_eq!(generation, 2, "{patched}");
    captures.push(Capture {
        name: "new-generation",
        object: patched,
        status: "Progressing",
        message: "Waiting for the controller to act on generation 2".into(),
    });
    // The upgrade to 1.1.0 removes a CRD field: the controller retries (CRD upgrade
    // safety), Installed stays True at 1.0.0.
    let live = wait_for(&api, &installed, "CRD upgrade safety retrying", |v| {
        let p = condition(v, "Progressing");
        field(&p, "reason") == "Retrying"
            && field(&p, "message").contains("validating upgrade for CRD")
            && p.as_ref().and_then(|p| p["observedGeneration"].as_i64()) == Some(2)
    })
    .await;
    let message = field(&condition(&live, "Progressing"), "message");
    assert!(
        message.contains("existingFieldRemoval: removed field : v1.^.spec.color"),
        "{message}"
    );
    captures.push(Capture {
        name: "crd-upgrade-unsafe-retrying",
        object: live,
        status: "Progressing",
        message,
    });

    // A package no catalog has: resolution retries.
    let missing = support::unique("miss");
    grant_installer(&ns, &missing, &rendered).await;
    let missing_package = format!("{package}-missing");
    api.create(
        &PostParams::default(),
        &dynamic(extension_object(&missing, &ns, &missing_package, &catalog)),
    )
    .await
    .expect("create extension");
    let live = wait_for(&api, &missing, "resolution retrying", |v| {
        is(v, "Progressing", "True", "Retrying") && is(v, "Installed", "False", "Failed")
    })
    .await;
    let message = field(&condition(&live, "Progressing"), "message");
    assert!(message.contains(&missing_package), "{message}");
    captures.push(Capture {
        name: "package-not-found-retrying",
        object: live,
        status: "Progressing",
        message,
    });

    // No spec.serviceAccount and no default installer: Blocked.
    let blocked = support::unique("blk");
    let mut obj = extension_object(&blocked, &ns, &package, &catalog);
    if let Some(spec) = obj["spec"].as_object_mut() {
        spec.remove("serviceAccount");
    }
    api.create(&PostParams::default(), &dynamic(obj))
        .await
        .expect("create extension");
    let live = wait_for(&api, &blocked, "Blocked", |v| {
        is(v, "Progressing", "False", "Blocked")
    })
    .await;
    let message = field(&condition(&live, "Progressing"), "message");
    assert!(
        message.contains("spec.serviceAccount is not set"),
        "{message}"
    );
    captures.push(Capture {
        name: "no-installer-blocked",
        object: live,
        status: "Degraded",
        message,
    });

    // An installer account without any permission: the permission preflight retries,
    // then progressDeadlineMinutes (a minute lasts a second in the test controller).
    let deadline = support::unique("pdl");
    let sa: k8s_openapi::api::core::v1::ServiceAccount =
        serde_json::from_value(json!({"metadata": {"name": format!("{deadline}-installer")}}))
            .expect("sa");
    Api::<k8s_openapi::api::core::v1::ServiceAccount>::namespaced(admin.clone(), &ns)
        .create(&PostParams::default(), &sa)
        .await
        .expect("create installer account");
    let mut obj = extension_object(&deadline, &ns, &package, &catalog);
    obj["spec"]["progressDeadlineMinutes"] = json!(10);
    obj["spec"]["source"]["catalog"]["version"] = json!("1.0.0");
    api.create(&PostParams::default(), &dynamic(obj))
        .await
        .expect("create extension");
    let live = wait_for(&api, &deadline, "preflight retrying", |v| {
        is(v, "Progressing", "True", "Retrying")
            && field(&condition(v, "Progressing"), "message").contains("pre-authorization failed")
    })
    .await;
    let message = field(&condition(&live, "Progressing"), "message");
    captures.push(Capture {
        name: "permission-preflight-retrying",
        object: live,
        status: "Progressing",
        message,
    });
    let live = wait_for(&api, &deadline, "ProgressDeadlineExceeded", |v| {
        is(v, "Progressing", "False", "ProgressDeadlineExceeded")
    })
    .await;
    let message = field(&condition(&live, "Progressing"), "message");
    assert!(
        message.starts_with("Revision has not rolled out for 10 minute(s). Last status: ")
            && message.contains("pre-authorization failed"),
        "{message}"
    );
    captures.push(Capture {
        name: "progress-deadline-exceeded",
        object: live,
        status: "Degraded",
        message,
    });

    upgrade_controls(&admin, &api, &mut captures).await;
    check("ClusterExtension", &captures);
}

/// Waits until `check` holds for extension `name`, marking the pods of `deployment` in
/// `ns` ready meanwhile (this control plane has no kubelet; rollouts make new pods).
async fn ready_until(
    admin: &kube::Client,
    api: &Api<DynamicObject>,
    (ns, deployment): (&str, &str),
    name: &str,
    check: impl Fn(&Value) -> bool,
) -> Value {
    let pods_api: Api<k8s_openapi::api::core::v1::Pod> = Api::namespaced(admin.clone(), ns);
    let selector = kube::api::ListParams::default().labels(&format!("app={deployment}"));
    support::eventually(120, &format!("{name}: ready"), || async {
        let list = pods_api.list(&selector).await.ok()?;
        for pod in list.items.iter().filter_map(|p| p.metadata.name.as_deref()) {
            set_pod_status(admin, ns, pod, None).await;
        }
        let v = captured(api.get(name).await.ok()?);
        check(&v).then_some(v)
    })
    .await
}

async fn annotate(api: &Api<DynamicObject>, name: &str, key: &str, value: Option<&str>) {
    let patch = json!({"metadata": {"annotations": {key: value}}});
    api.patch(name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .expect("annotate");
}

/// The upgrade controls (docs/how-to/upgrade-control.md): an upgrade waiting for
/// approval, a first install waiting for it, paused, rolled back by annotation.
async fn upgrade_controls(
    admin: &kube::Client,
    api: &Api<DynamicObject>,
    captures: &mut Vec<Capture>,
) {
    let package = support::unique("argu");
    let v1 = BundleSpec::new(&package, "1.0.0");
    let mut v2 = BundleSpec::new(&package, "1.1.0");
    v2.replaces = Some(v1.bundle_name());
    let catalog = support::unique("argucat");
    let image = publish(&catalog, &package, &[v1.clone(), v2.clone()]).await;
    catalogs_api(admin.clone())
        .create(
            &PostParams::default(),
            &dynamic(catalog_object(&catalog, &image)),
        )
        .await
        .expect("create catalog");
    let ns = support::namespace(admin, "argu").await;
    let rendered = [bundles::render(&v1, &ns), bundles::render(&v2, &ns)];
    let deployment = v1.deployment_name();
    let approval = "olm.operatorframework.io/upgrade-approval";

    // Installed at 1.0.0 (pinned) under manual approval; the pin removed: 1.1.0 waits.
    let name = support::unique("appr");
    grant_installer(&ns, &name, &rendered).await;
    let mut obj = extension_object(&name, &ns, &package, &catalog);
    obj["metadata"]["annotations"] = json!({approval: "Manual"});
    obj["spec"]["source"]["catalog"]["version"] = json!("1.0.0");
    api.create(&PostParams::default(), &dynamic(obj))
        .await
        .expect("create extension");
    ready_until(admin, api, (&ns, &deployment), &name, |v| {
        is(v, "Installed", "True", "Succeeded") && is(v, "Progressing", "True", "Succeeded")
    })
    .await;
    let unpin = json!({"spec": {"source": {"catalog": {"version": null}}}});
    api.patch(&name, &PatchParams::default(), &Patch::Merge(&unpin))
        .await
        .expect("unpin");
    let live = wait_for(api, &name, "ApprovalRequired", |v| {
        is(v, "Progressing", "True", "ApprovalRequired")
            && condition(v, "Progressing").is_some_and(|p| p["observedGeneration"] == json!(2))
    })
    .await;
    let message = field(&condition(&live, "Progressing"), "message");
    assert!(message.contains("the upgrade to 1.1.0"), "{message}");
    captures.push(Capture {
        name: "waiting-for-approval",
        object: live,
        status: "Healthy",
        message,
    });

    // Paused: Suspended.
    let paused = "olm.operatorframework.io/paused";
    annotate(api, &name, paused, Some("true")).await;
    let live = wait_for(api, &name, "Paused", |v| {
        is(v, "Progressing", "True", "Paused")
    })
    .await;
    let message = field(&condition(&live, "Progressing"), "message");
    captures.push(Capture {
        name: "paused",
        object: live,
        status: "Suspended",
        message,
    });
    annotate(api, &name, paused, None).await;

    // Approved: 1.1.0 installed; rolled back by annotation to 1.0.0: Healthy, saying so.
    annotate(
        api,
        &name,
        "olm.operatorframework.io/approved-version",
        Some("1.1.0"),
    )
    .await;
    ready_until(admin, api, (&ns, &deployment), &name, |v| {
        is(v, "Progressing", "True", "Succeeded")
            && v["status"]["install"]["bundle"]["version"] == "1.1.0"
    })
    .await;
    annotate(
        api,
        &name,
        "olm.operatorframework.io/rollback-to",
        Some("1.0.0"),
    )
    .await;
    let live = ready_until(admin, api, (&ns, &deployment), &name, |v| {
        is(v, "Progressing", "True", "RolledBack")
    })
    .await;
    let message = field(&condition(&live, "Progressing"), "message");
    assert!(message.contains("rolled back by annotation"), "{message}");
    // A failed upgrade rolled back (RolledBack=True/UpgradeFailed, the rest as above;
    // the flow tests cover the controller writing it): Degraded, with its message.
    let mut failed = live.clone();
    for c in failed["status"]["conditions"]
        .as_array_mut()
        .into_iter()
        .flatten()
    {
        if c["type"] == "RolledBack" {
            c["reason"] = json!("UpgradeFailed");
            c["message"] = json!("upgrade to 1.1.0 failed; rolled back to 1.0.0");
        }
    }
    assert_eq!(
        argo_health("ClusterExtension", &failed),
        (
            "Degraded".to_string(),
            "upgrade to 1.1.0 failed; rolled back to 1.0.0".to_string()
        )
    );
    captures.push(Capture {
        name: "rolled-back",
        object: live,
        status: "Healthy",
        message,
    });

    // The first install waits for approval (ManualIncludingInstall): Suspended.
    let ns2 = support::namespace(admin, "argu").await;
    let first = support::unique("apin");
    let rendered2 = [bundles::render(&v1, &ns2), bundles::render(&v2, &ns2)];
    grant_installer(&ns2, &first, &rendered2).await;
    let mut obj = extension_object(&first, &ns2, &package, &catalog);
    obj["metadata"]["annotations"] = json!({approval: "ManualIncludingInstall"});
    api.create(&PostParams::default(), &dynamic(obj))
        .await
        .expect("create extension");
    let live = wait_for(api, &first, "ApprovalRequired", |v| {
        is(v, "Progressing", "True", "ApprovalRequired")
    })
    .await;
    let message = field(&condition(&live, "Progressing"), "message");
    captures.push(Capture {
        name: "waiting-for-approval-to-install",
        object: live,
        status: "Suspended",
        message,
    });
}

#[tokio::test]
async fn cluster_catalog_health_on_live_statuses() {
    start_controller();
    let admin = support::cluster().admin().await;
    let api = catalogs_api(admin.clone());
    let mut captures = Vec::new();

    let package = support::unique("argoc");
    let name = support::unique("argoserve");
    let image = publish(&name, &package, &[BundleSpec::new(&package, "1.0.0")]).await;
    let created = api
        .create(
            &PostParams::default(),
            &dynamic(catalog_object(&name, &image)),
        )
        .await
        .expect("create catalog");
    captures.push(Capture {
        name: "no-status",
        object: captured(created),
        status: "Progressing",
        message: "Waiting for the controller".into(),
    });
    let live = wait_for(&api, &name, "Serving", |v| {
        is(v, "Serving", "True", "Available") && is(v, "Progressing", "True", "Succeeded")
    })
    .await;
    let message = field(&condition(&live, "Serving"), "message");
    assert_eq!(message, "Serving desired content from resolved source");
    captures.push(Capture {
        name: "serving",
        object: live,
        status: "Healthy",
        message,
    });

    // availabilityMode Unavailable: what was asked for.
    api.patch(
        &name,
        &PatchParams::default(),
        &Patch::Merge(json!({"spec": {"availabilityMode": "Unavailable"}})),
    )
    .await
    .expect("patch catalog");
    let live = wait_for(&api, &name, "Unavailable", |v| {
        is(v, "Serving", "False", "UserSpecifiedUnavailable")
            && condition(v, "Serving").and_then(|c| c["observedGeneration"].as_i64()) == Some(2)
    })
    .await;
    let message = field(&condition(&live, "Serving"), "message");
    captures.push(Capture {
        name: "unavailable-as-requested",
        object: live,
        status: "Healthy",
        message,
    });

    // An image whose registry answers 500: unpacking retries.
    let bad = support::unique("argobad");
    let bad_image = format!("{}/catalogs/{bad}:latest", support::failing_registry());
    api.create(
        &PostParams::default(),
        &dynamic(catalog_object(&bad, &bad_image)),
    )
    .await
    .expect("create catalog");
    let live = wait_for(&api, &bad, "Retrying", |v| {
        is(v, "Progressing", "True", "Retrying")
    })
    .await;
    let message = field(&condition(&live, "Progressing"), "message");
    assert!(message.contains(&bad), "{message}");
    captures.push(Capture {
        name: "bad-image-retrying",
        object: live,
        status: "Progressing",
        message,
    });

    check("ClusterCatalog", &captures);
}

#[test]
fn argocd_cm_snippet_carries_the_health_scripts_unchanged() {
    let path = project().join("contrib/argocd/argocd-cm.yaml");
    let text = std::fs::read_to_string(&path).expect("argocd-cm.yaml");
    let cm: Value = serde_saphyr::from_str(&text).expect("argocd-cm.yaml is YAML");
    assert_eq!(
        (cm["kind"].as_str(), cm["metadata"]["name"].as_str()),
        (Some("ConfigMap"), Some("argocd-cm"))
    );
    for kind in ["ClusterExtension", "ClusterCatalog"] {
        let script =
            std::fs::read_to_string(project().join(GROUP_DIR).join(kind).join("health.lua"))
                .expect("health.lua");
        let key = format!("resource.customizations.health.olm.operatorframework.io_{kind}");
        assert_eq!(
            cm["data"][&key].as_str(),
            Some(script.as_str()),
            "{key} in {} differs from {GROUP_DIR}/{kind}/health.lua: copy the script into the snippet",
            path.display()
        );
    }
}
