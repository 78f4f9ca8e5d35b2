//! The ClusterExtension controller under crashes and unsupported bundles, end to end:
//! the controller runs as a child process (`olmv1 controller`, the crate's binary) so
//! that it can be SIGKILLed in the middle of an install and of an upgrade; after the
//! restart the managed objects must be exactly what the bundle renders. A bundle with
//! webhooks, on a cluster without cert-manager, must end in the documented message with
//! nothing applied.
//!
//! Only the spawned controller reconciles in this test binary (the in-process one of
//! `support::controller()` is never started here), and the tests take turns
//! ([`SERIAL`]) because each runs its own controller without leader election.

use crate::support;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{ConfigMap, ServiceAccount};
use kube::ResourceExt;
use kube::api::{Api, DynamicObject, GroupVersionKind, ListParams, PostParams};
use olmv1::api::ClusterExtension;
use olmv1::apply::record::{RevisionHistory, RevisionState, RevisionStore, record_name};
use olmv1::apply::{ObjectRef, Owner};
use serde_json::{Value, json};
use std::collections::BTreeSet;
use std::time::{Duration, Instant};
use support::bundles::{self, BundleSpec};
use support::extensions::{
    condition, create_catalog, extension, grant_installer, publish, wait_installed,
};
use support::process::{ControllerProcess, NAMESPACE};

/// One test at a time: each runs its own controller without leader election.
static SERIAL: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

const OWNER_NAME_LABEL: &str = "olm.operatorframework.io/owner-name";
/// ConfigMaps per group (dropped by v2, kept, added by v2): enough objects that the
/// apply takes a while and a kill lands in the middle of it.
const CONFIGMAPS: usize = 40;

/// An object's identity as the tests compare them: (group, kind, namespace, name).
type Key = (String, String, String, String);

fn key_of(r: &ObjectRef) -> Key {
    (
        r.group.clone(),
        r.kind.clone(),
        r.namespace.clone(),
        r.name.clone(),
    )
}

fn configmap(name: String, generation: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name},
           "data": {"generation": generation}})
}

fn gadget_crd(group: &str, n: usize) -> Value {
    json!({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": format!("gadgets{n}.{group}")},
        "spec": {
            "group": group,
            "names": {"kind": format!("Gadget{n}"), "listKind": format!("Gadget{n}List"),
                      "plural": format!("gadgets{n}"), "singular": format!("gadget{n}")},
            "scope": "Namespaced",
            "versions": [{"name": "v1", "served": true, "storage": true,
                "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}]
        }
    })
}

/// v1: ConfigMaps `old-*` and `keep-*`, CRDs gadgets0..2. v2 (replaces v1): drops
/// `old-*` and gadgets0, changes `keep-*`, adds `new-*` and gadgets3.
fn crash_bundles(package: &str) -> (BundleSpec, BundleSpec) {
    let mut v1 = BundleSpec::new(package, "1.0.0");
    let group = v1.group();
    for i in 0..CONFIGMAPS {
        v1.extra_manifests
            .push(configmap(format!("{package}-old-{i}"), "1"));
        v1.extra_manifests
            .push(configmap(format!("{package}-keep-{i}"), "1"));
    }
    for n in 0..3 {
        v1.extra_manifests.push(gadget_crd(&group, n));
    }
    let mut v2 = BundleSpec::new(package, "1.1.0");
    v2.replaces = Some(v1.bundle_name());
    for i in 0..CONFIGMAPS {
        v2.extra_manifests
            .push(configmap(format!("{package}-keep-{i}"), "2"));
        v2.extra_manifests
            .push(configmap(format!("{package}-new-{i}"), "2"));
    }
    for n in 1..4 {
        v2.extra_manifests.push(gadget_crd(&group, n));
    }
    (v1, v2)
}

/// The identities of the rendered objects. Webhook configurations are rendered with
/// the install namespace (a documented upstream quirk, docs/concepts/rendering.md §5.5 item 7) but are
/// cluster-scoped, so the live objects have none.
fn expected(rendered: &[Value]) -> BTreeSet<Key> {
    rendered
        .iter()
        .map(|o| {
            let mut key = key_of(&ObjectRef::from_object(o).expect("rendered object reference"));
            if key.1.ends_with("WebhookConfiguration") {
                key.2.clear();
            }
            key
        })
        .collect()
}

/// The (apiVersion, kind) pairs of the rendered objects.
fn kinds(rendered: &[&[Value]]) -> BTreeSet<(String, String)> {
    rendered
        .iter()
        .flat_map(|r| r.iter())
        .map(|o| {
            (
                o["apiVersion"].as_str().unwrap_or_default().to_string(),
                o["kind"].as_str().unwrap_or_default().to_string(),
            )
        })
        .collect()
}

/// Every live object of the given kinds labelled as owned by `ext` (the revision
/// record in the controller namespace left out).
async fn owned_objects(
    client: &kube::Client,
    kinds: &BTreeSet<(String, String)>,
    ext: &str,
) -> BTreeSet<Key> {
    let mut out = BTreeSet::new();
    let selector = ListParams::default().labels(&format!("{OWNER_NAME_LABEL}={ext}"));
    for (api_version, kind) in kinds {
        let (group, version) = api_version.split_once('/').unwrap_or(("", api_version));
        let gvk = GroupVersionKind::gvk(group, version, kind);
        let (resource, _) = kube::discovery::pinned_kind(client, &gvk)
            .await
            .unwrap_or_else(|e| panic!("discovering {api_version} {kind}: {e}"));
        let api: Api<DynamicObject> = Api::all_with(client.clone(), &resource);
        let list = api
            .list(&selector)
            .await
            .unwrap_or_else(|e| panic!("listing {kind}: {e}"));
        for o in list {
            let namespace = o.namespace().unwrap_or_default();
            if kind == "ConfigMap" && namespace == NAMESPACE && o.name_any() == record_name(ext) {
                continue;
            }
            out.insert((group.to_string(), kind.clone(), namespace, o.name_any()));
        }
    }
    out
}

fn describe(keys: &BTreeSet<Key>) -> Vec<String> {
    keys.iter()
        .map(|(g, k, ns, n)| format!("{k}.{g} {ns}/{n}"))
        .collect()
}

/// Waits until the owned objects are exactly `want`; panics naming the extra and
/// missing ones.
async fn assert_exactly(
    client: &kube::Client,
    kinds: &BTreeSet<(String, String)>,
    ext: &str,
    want: &BTreeSet<Key>,
    what: &str,
) {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let live = owned_objects(client, kinds, ext).await;
        if &live == want {
            return;
        }
        if Instant::now() > deadline {
            let extra: BTreeSet<Key> = live.difference(want).cloned().collect();
            let missing: BTreeSet<Key> = want.difference(&live).cloned().collect();
            panic!(
                "{what}: the objects owned by {ext} differ from the bundle's rendering\nextra (orphaned): {:#?}\nmissing: {:#?}",
                describe(&extra),
                describe(&missing)
            );
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

async fn history(admin: &kube::Client, ext: &ClusterExtension) -> Option<RevisionHistory> {
    RevisionStore::new(admin.clone(), NAMESPACE)
        .load(&Owner::new(ext.name_any(), ext.uid().unwrap_or_default()))
        .await
        .expect("read the revision record")
}

fn states(h: &RevisionHistory) -> Vec<(String, RevisionState)> {
    h.revisions
        .iter()
        .map(|r| (r.bundle.version.clone(), r.state))
        .collect()
}

/// The record after convergence: the last revision is installed at `version` with
/// exactly `want`, and no revision is left pending.
fn assert_record(h: &RevisionHistory, version: &str, want: &BTreeSet<Key>) {
    let last = h.revisions.last().expect("a revision");
    assert_eq!(
        (last.bundle.version.as_str(), last.state),
        (version, RevisionState::Installed),
        "{:?}",
        states(h)
    );
    assert!(
        h.revisions
            .iter()
            .all(|r| r.state != RevisionState::Pending),
        "a pending revision survived: {:?}",
        states(h)
    );
    let recorded: BTreeSet<Key> = last.objects.iter().map(key_of).collect();
    assert_eq!(
        &recorded, want,
        "recorded objects of the installed revision"
    );
}

/// Polls (every 5 ms) until `hit` returns true, then SIGKILLs the controller at once.
async fn kill_when<F, Fut>(ctl: &mut ControllerProcess, seconds: u64, what: &str, mut hit: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let deadline = Instant::now() + Duration::from_secs(seconds);
    loop {
        if hit().await {
            ctl.kill();
            return;
        }
        if let Some(status) = ctl.try_wait() {
            panic!(
                "the controller exited ({status}) before {what}: {}",
                ctl.log_text()
            );
        }
        assert!(
            Instant::now() < deadline,
            "timed out after {seconds}s waiting for {what}; controller log:\n{}",
            ctl.log_text()
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

async fn owned_configmaps(api: &Api<ConfigMap>, ext: &str) -> Vec<String> {
    api.list(&ListParams::default().labels(&format!("{OWNER_NAME_LABEL}={ext}")))
        .await
        .map(|l| l.items.iter().map(|c| c.name_any()).collect())
        .unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigkill_mid_install_and_mid_upgrade_converges_exactly() {
    let _serial = SERIAL.lock().await;
    let admin = support::cluster().admin().await;
    let package = support::unique("crash");
    let ns = support::namespace(&admin, "crash").await;
    let name = support::unique("crashext");
    let (v1, v2) = crash_bundles(&package);
    let (r1, r2) = (bundles::render(&v1, &ns), bundles::render(&v2, &ns));
    let (want1, want2) = (expected(&r1), expected(&r2));
    let kinds = kinds(&[&r1, &r2]);
    assert!(
        want1.len() > 2 * CONFIGMAPS && want2.len() > 2 * CONFIGMAPS,
        "{} / {} objects",
        want1.len(),
        want2.len()
    );
    grant_installer(&ns, &name, &[r1.clone(), r2.clone()]).await;

    let mut ctl = ControllerProcess::start("crash", &[]);
    ctl.wait_listening(30);
    let catalog_name = support::unique("crashcat");
    let image = publish(&catalog_name, &package, std::slice::from_ref(&v1)).await;
    create_catalog(&catalog_name, &image).await;

    // Install; SIGKILL as soon as the first object of the bundle exists (its
    // ServiceAccount is applied first).
    let api: Api<ClusterExtension> = Api::all(admin.clone());
    let ext = api
        .create(
            &PostParams::default(),
            &extension(&name, &ns, &package, json!({})),
        )
        .await
        .expect("create");
    let sas: Api<ServiceAccount> = Api::namespaced(admin.clone(), &ns);
    let cms: Api<ConfigMap> = Api::namespaced(admin.clone(), &ns);
    let selector = ListParams::default().labels(&format!("{OWNER_NAME_LABEL}={name}"));
    kill_when(&mut ctl, 120, "the first installed object", || async {
        sas.list(&selector).await.is_ok_and(|l| !l.items.is_empty())
    })
    .await;
    let at_kill = owned_objects(&admin, &kinds, &name).await;
    let h = history(&admin, &ext)
        .await
        .expect("a revision record at the kill");
    eprintln!(
        "install killed with {}/{} objects applied; record {:?}",
        at_kill.len(),
        want1.len(),
        states(&h)
    );
    assert_eq!(
        states(&h),
        vec![("1.0.0".to_string(), RevisionState::Pending)],
        "the kill did not land mid-install"
    );
    assert!(
        at_kill.is_subset(&want1),
        "objects outside the bundle at the kill: {:?}",
        describe(&at_kill.difference(&want1).cloned().collect())
    );
    let e = api.get(&name).await.expect("get");
    assert!(
        e.status.as_ref().and_then(|s| s.install.as_ref()).is_none(),
        "status reports an install before it finished: {:?}",
        e.status
    );

    // Restart: converges on exactly v1.
    let restarted = Instant::now();
    ctl.restart();
    let e = wait_installed(&api, &name, "1.0.0").await;
    eprintln!(
        "install converged {:?} after the restart",
        restarted.elapsed()
    );
    let installed = condition(&e, "Installed").expect("Installed");
    assert_eq!(installed.reason, "Succeeded");
    assert!(
        installed
            .message
            .contains(&format!("bundles/{package}@sha256:")),
        "{}",
        installed.message
    );
    assert_eq!(
        e.status
            .as_ref()
            .and_then(|s| s.install.as_ref())
            .map(|i| i.bundle.name.clone()),
        Some(v1.bundle_name())
    );
    assert_exactly(&admin, &kinds, &name, &want1, "after the install restart").await;
    let h = history(&admin, &ext).await.expect("record");
    assert_record(&h, "1.0.0", &want1);
    assert_eq!(h.revisions.len(), 1, "{:?}", states(&h));

    // Upgrade to v2 (a new catalog image under the same tag); SIGKILL as soon as the
    // first object that only v2 has exists.
    publish(&catalog_name, &package, &[v1.clone(), v2.clone()]).await;
    let new_prefix = format!("{package}-new-");
    kill_when(&mut ctl, 120, "the first object of v2", || async {
        owned_configmaps(&cms, &name)
            .await
            .iter()
            .any(|n| n.starts_with(&new_prefix))
    })
    .await;
    let at_kill = owned_objects(&admin, &kinds, &name).await;
    let h = history(&admin, &ext)
        .await
        .expect("a revision record at the kill");
    eprintln!(
        "upgrade killed with {} objects of v2 and {} of v1 only live; record {:?}",
        at_kill.intersection(&want2).count(),
        at_kill.difference(&want2).count(),
        states(&h)
    );
    assert_eq!(
        states(&h),
        vec![
            ("1.0.0".to_string(), RevisionState::Installed),
            ("1.1.0".to_string(), RevisionState::Pending)
        ],
        "the kill did not land mid-upgrade"
    );
    let union: BTreeSet<Key> = want1.union(&want2).cloned().collect();
    assert!(
        at_kill.is_subset(&union),
        "objects outside both bundles at the kill: {:?}",
        describe(&at_kill.difference(&union).cloned().collect())
    );

    // Restart: converges on exactly v2; what only v1 had is pruned.
    let restarted = Instant::now();
    ctl.restart();
    let e = wait_installed(&api, &name, "1.1.0").await;
    eprintln!(
        "upgrade converged {:?} after the restart",
        restarted.elapsed()
    );
    assert_eq!(
        e.status
            .as_ref()
            .and_then(|s| s.install.as_ref())
            .map(|i| i.bundle.name.clone()),
        Some(v2.bundle_name())
    );
    assert_exactly(&admin, &kinds, &name, &want2, "after the upgrade restart").await;
    let dropped: Vec<&Key> = want1.difference(&want2).collect();
    assert!(
        dropped
            .iter()
            .any(|(_, k, _, n)| k == "CustomResourceDefinition" && n.starts_with("gadgets0.")),
        "v2 should drop a CRD: {dropped:?}"
    );
    let h = history(&admin, &ext).await.expect("record");
    assert_record(&h, "1.1.0", &want2);
    // The kept ConfigMaps carry v2's content, the Deployment runs v2's image.
    let keep = cms
        .get(&format!("{package}-keep-0"))
        .await
        .expect("kept ConfigMap");
    assert_eq!(
        keep.data
            .as_ref()
            .and_then(|d| d.get("generation"))
            .map(String::as_str),
        Some("2")
    );
    let deployment = Api::<Deployment>::namespaced(admin.clone(), &ns)
        .get(&v2.deployment_name())
        .await
        .expect("deployment");
    let image = deployment
        .spec
        .and_then(|s| s.template.spec)
        .and_then(|s| s.containers.first().and_then(|c| c.image.clone()));
    assert_eq!(
        image.as_deref(),
        Some(format!("example.com/{package}:1.1.0").as_str())
    );
    // Nothing moves any more: a later look finds the same set.
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_eq!(owned_objects(&admin, &kinds, &name).await, want2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn webhook_bundle_without_cert_manager_is_unsupported_and_applies_nothing() {
    let _serial = SERIAL.lock().await;
    let admin = support::cluster().admin().await;
    // The premise: this control plane serves no cert-manager API.
    let cert_manager = admin.list_api_group_resources("cert-manager.io/v1").await;
    assert!(cert_manager.is_err(), "cert-manager.io/v1 is served");

    let package = support::unique("hooked");
    let ns = support::namespace(&admin, "hooked").await;
    let name = support::unique("hookext");
    let mut spec = BundleSpec::new(&package, "1.0.0");
    spec.webhook = true;
    // What the bundle renders with cert-manager: the installer may create all of it, so
    // only the missing certificate provider can stop the install.
    let rendered = bundles::render(&spec, &ns);
    assert!(
        rendered
            .iter()
            .any(|o| o["kind"] == "ValidatingWebhookConfiguration"),
        "{rendered:#?}"
    );
    grant_installer(&ns, &name, std::slice::from_ref(&rendered)).await;
    let served: Vec<Value> = rendered
        .iter()
        .filter(|o| {
            !o["apiVersion"]
                .as_str()
                .unwrap_or("")
                .starts_with("cert-manager.io/")
        })
        .cloned()
        .collect();
    let served_kinds = kinds(&[&served]);

    let ctl = ControllerProcess::start("webhook", &[]);
    let catalog_name = support::unique("hookcat");
    let image = publish(&catalog_name, &package, std::slice::from_ref(&spec)).await;
    create_catalog(&catalog_name, &image).await;
    let api: Api<ClusterExtension> = Api::all(admin.clone());
    let ext = api
        .create(
            &PostParams::default(),
            &extension(&name, &ns, &package, json!({})),
        )
        .await
        .expect("create");

    let want = format!(
        "error for resolved bundle \"{}\" with version \"1.0.0\": unsupported bundle: webhookDefinitions are not supported",
        spec.bundle_name()
    );
    let triple = |c: Option<k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition>| {
        c.map(|c| (c.status, c.reason, c.message))
    };
    let e = support::eventually(90, "the unsupported-bundle status", || async {
        let e = api.get(&name).await.ok()?;
        // Past resolution (transient resolution errors come first while the catalog is
        // being unpacked): an error for the resolved bundle, or success.
        let p = condition(&e, "Progressing")?;
        (p.message.starts_with("error for resolved bundle") || p.reason == "Succeeded").then_some(e)
    })
    .await;
    assert_eq!(
        triple(condition(&e, "Progressing")),
        Some(("True".to_string(), "Retrying".to_string(), want.clone())),
        "controller log:\n{}",
        ctl.log_text()
    );
    assert_eq!(
        triple(condition(&e, "Installed")),
        Some((
            "False".to_string(),
            "Failed".to_string(),
            "No bundle installed".to_string()
        ))
    );
    assert!(e.status.as_ref().and_then(|s| s.install.as_ref()).is_none());

    // Nothing applied, nothing recorded — also after further retries.
    for _ in 0..2 {
        assert_eq!(
            describe(&owned_objects(&admin, &served_kinds, &name).await),
            Vec::<String>::new(),
            "objects applied for an unsupported bundle"
        );
        assert!(
            history(&admin, &ext).await.is_none(),
            "a revision was recorded"
        );
        tokio::time::sleep(Duration::from_secs(3)).await;
    }
    let e = api.get(&name).await.expect("get");
    assert_eq!(
        triple(condition(&e, "Progressing")).map(|t| t.2),
        Some(want),
        "the message changed on retry"
    );

    // Control: once the cluster serves cert-manager's kinds (stand-in CRDs), the same
    // bundle installs with its Issuer, Certificate and CA-injected webhook configuration.
    let text = include_str!("../tests/data/cert-manager-crds.yaml");
    let crds: Vec<DynamicObject> =
        serde_saphyr::from_multiple(text).expect("cert-manager CRD YAML");
    olmv1::testenv::manifests::apply_objects(&admin, &crds)
        .await
        .expect("cert-manager CRDs");
    support::eventually(60, "cert-manager.io/v1 served", || async {
        let list = admin
            .list_api_group_resources("cert-manager.io/v1")
            .await
            .ok()?;
        let served: BTreeSet<&str> = list.resources.iter().map(|r| r.kind.as_str()).collect();
        (served.contains("Certificate") && served.contains("Issuer")).then_some(())
    })
    .await;
    // A change of the extension triggers a reconcile now rather than after the backoff.
    api.patch(
        &name,
        &kube::api::PatchParams::default(),
        &kube::api::Patch::Merge(json!({"metadata": {"annotations": {"test/nudge": "1"}}})),
    )
    .await
    .expect("annotate");
    let e = wait_installed(&api, &name, "1.0.0").await;
    assert_eq!(
        triple(condition(&e, "Progressing")).map(|t| t.1),
        Some("Succeeded".to_string())
    );
    assert_exactly(
        &admin,
        &kinds(&[&rendered]),
        &name,
        &expected(&rendered),
        "webhook bundle with cert-manager",
    )
    .await;
    let webhooks = kube::discovery::pinned_kind(
        &admin,
        &GroupVersionKind::gvk(
            "admissionregistration.k8s.io",
            "v1",
            "ValidatingWebhookConfiguration",
        ),
    )
    .await
    .expect("discovery");
    let config = Api::<DynamicObject>::all_with(admin.clone(), &webhooks.0)
        .get(&format!("vwidget.{}", spec.group()))
        .await
        .expect("webhook configuration");
    assert_eq!(
        config.annotations().get("cert-manager.io/inject-ca-from"),
        Some(&format!("{ns}/{}-controller-service-cert", package))
    );
    drop(ctl);
}
