//! `olmv1 migrate` against OLM v0's real programs on a real node
//! (docs/how-to/switch-from-olm-v0.md, "Tests with real OLM v0"): olm-operator and
//! catalog-operator (`support::olm_v0_run`) install an operator through a real
//! Subscription from a catalog `opm serve` serves; its pod really runs on the node.
//! Then the real `olmv1 migrate check` and `convert --apply`, and the controller takes
//! the installation over in place: the same pod (no rollout, no restart), the same CRD
//! and custom resource, the v0 objects gone, and OLM v0 — still running — leaves
//! everything alone over two of its resyncs (`olm_v0_run::QUIET`). `olmv1 migrate
//! rollback` hands it back to OLM v0: the Subscription AtLatestKnown, the CSV
//! Succeeded, still the same pod.

use crate::support;

use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet};
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding, Role};
use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind, ListParams, PostParams};
use olmv1::api::{ClusterCatalog, ClusterExtension};
use olmv1::testenv::demo::BundleSpec;
use serde_json::{Value, json};
use std::path::Path;
use std::time::{Duration, Instant};
use support::bundles::{publish_files_on_node, publish_on_node};
use support::extensions::{condition, create_catalog, wait_installed};
use support::olm_v0_flow::{
    Upgrade, V0Install, install_through_subscription, olmv1, operator_pod, start_v0,
    wait_at_latest_known, wait_csv_succeeded, wait_install_plan_complete, wait_serving,
    wait_succeeded,
};
use support::olm_v0_run::{self, Programs};
use support::webhook_bundle::{self, assert_testimage_serves_webhooks, webhook_bundle};
use support::{eventually, node_cluster_with_cert_manager, olm_v0};

/// What is watched of an object: its resourceVersion and the latest time OLM v0's
/// programs (field managers `olm`, `catalog`) wrote it.
#[derive(Debug)]
struct Seen {
    what: String,
    resource_version: String,
    v0_wrote: Option<jiff::Timestamp>,
    /// OLM v0's managedFields entries and the labels (for the failure message).
    v0_fields: Value,
}

impl PartialEq for Seen {
    fn eq(&self, other: &Seen) -> bool {
        (&self.what, &self.resource_version, self.v0_wrote)
            == (&other.what, &other.resource_version, other.v0_wrote)
    }
}

fn seen(what: String, object: &impl serde::Serialize) -> Seen {
    let v = serde_json::to_value(object).expect("json");
    let v0: Vec<&Value> = v["metadata"]["managedFields"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|m| m["manager"] == "olm" || m["manager"] == "catalog")
        .collect();
    let v0_wrote = v0
        .iter()
        .filter_map(|m| m["time"].as_str()?.parse::<jiff::Timestamp>().ok())
        .max();
    let v0_fields = json!({"managedFields": v0, "labels": v["metadata"]["labels"]});
    Seen {
        what,
        resource_version: v["metadata"]["resourceVersion"]
            .as_str()
            .unwrap_or_default()
            .to_string(),
        v0_wrote,
        v0_fields,
    }
}

/// The Deployment and every ClusterRole, ClusterRoleBinding and CRD whose name or
/// labels mention the package (OLM v0's and olmv1's).
async fn watched(admin: &kube::Client, ns: &str, deployment: &str, package: &str) -> Vec<Seen> {
    let d: Api<Deployment> = Api::namespaced(admin.clone(), ns);
    let d = d.get(deployment).await.expect("Deployment");
    let mut out = vec![seen(format!("Deployment {deployment}"), &d)];
    let mentions = |m: &kube::api::ObjectMeta| {
        m.name.as_deref().is_some_and(|n| n.contains(package))
            || m.labels
                .as_ref()
                .is_some_and(|l| l.values().any(|v| v.contains(package)))
    };
    let roles: Api<ClusterRole> = Api::all(admin.clone());
    for r in roles.list(&Default::default()).await.expect("list").items {
        if mentions(&r.metadata) {
            let name = r.metadata.name.clone().unwrap_or_default();
            out.push(seen(format!("ClusterRole {name}"), &r));
        }
    }
    let bindings: Api<ClusterRoleBinding> = Api::all(admin.clone());
    for b in bindings
        .list(&Default::default())
        .await
        .expect("list")
        .items
    {
        if mentions(&b.metadata) {
            let name = b.metadata.name.clone().unwrap_or_default();
            out.push(seen(format!("ClusterRoleBinding {name}"), &b));
        }
    }
    use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
    let crds: Api<CustomResourceDefinition> = Api::all(admin.clone());
    for c in crds.list(&Default::default()).await.expect("list").items {
        if mentions(&c.metadata) {
            let name = c.metadata.name.clone().unwrap_or_default();
            out.push(seen(format!("CustomResourceDefinition {name}"), &c));
        }
    }
    out.sort_by(|a, b| a.what.cmp(&b.what));
    out
}

/// CSVs of the package in any namespace (OLM v0 copies an AllNamespaces CSV into every
/// namespace).
async fn csvs_anywhere(admin: &kube::Client, package: &str) -> Vec<String> {
    let r = ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("operators.coreos.com", "v1alpha1", "ClusterServiceVersion"),
        "clusterserviceversions",
    );
    let api: Api<DynamicObject> = Api::all_with(admin.clone(), &r);
    api.list(&Default::default())
        .await
        .expect("list CSVs")
        .items
        .into_iter()
        .filter_map(|c| {
            let name = c.metadata.name?;
            name.starts_with(package)
                .then(|| format!("{}/{name}", c.metadata.namespace.unwrap_or_default()))
        })
        .collect()
}

/// The Widget CRD and a Widget: (CRD uid, Widget as created).
async fn create_widget(admin: &kube::Client, spec: &BundleSpec, ns: &str) -> (String, Value) {
    use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
    let crds: Api<CustomResourceDefinition> = Api::all(admin.clone());
    let crd = crds
        .get(&spec.crd_name())
        .await
        .expect("CRD installed by v0");
    let widgets = ApiResource::from_gvk(&GroupVersionKind::gvk(&spec.group(), "v1", "Widget"));
    let api: Api<DynamicObject> = Api::namespaced_with(admin.clone(), ns, &widgets);
    let w: DynamicObject =
        serde_json::from_value(json!({"apiVersion": format!("{}/v1", spec.group()),
        "kind": "Widget", "metadata": {"name": "w1", "namespace": ns}, "spec": {"size": 3}}))
        .expect("widget");
    let created = api
        .create(&PostParams::default(), &w)
        .await
        .expect("Widget");
    (
        crd.metadata.uid.unwrap_or_default(),
        serde_json::to_value(created).expect("json"),
    )
}

fn gone<'a>(
    admin: &'a kube::Client,
    kind: &'a str,
    ns: &'a str,
    name: &'a str,
) -> impl std::future::Future<Output = ()> + 'a {
    let api = olm_v0::api(admin, "v1alpha1", kind, ns);
    async move {
        eventually(90, &format!("{kind} {ns}/{name} gone"), || {
            let api = api.clone();
            async move { api.get_opt(name).await.ok()?.is_none().then_some(()) }
        })
        .await;
    }
}

/// What every test here starts from: the node cluster with cert-manager, olmv1's
/// controller waiting for rollouts and pulling from the node registry, OLM v0 running;
/// one test at a time (`olm_v0_run::serial`).
struct World {
    _serial: tokio::sync::MutexGuard<'static, ()>,
    node: &'static olmv1::testenv::node::RunningNode,
    admin: kube::Client,
    kubeconfig: std::path::PathBuf,
    v0: Programs,
}

async fn world() -> World {
    let serial = olm_v0_run::serial().await;
    let cluster = node_cluster_with_cert_manager();
    let node = cluster.node.as_ref().expect("node");
    support::controller_with(|args| {
        args.skip_rollout_wait = false;
        args.insecure_registries.push(node.registry.clone());
    });
    let admin = cluster.admin().await;
    let kubeconfig = cluster.admin_kubeconfig.clone();
    let v0 = start_v0(&admin, &kubeconfig).await;
    World {
        _serial: serial,
        node,
        admin,
        kubeconfig,
        v0,
    }
}

/// The whole path for one operator: install by OLM v0, check, convert, takeover, two
/// resyncs of OLM v0 running beside it, rollback. `own_namespace`: an OwnNamespace
/// OperatorGroup (else AllNamespaces); `approval`: the Subscription's.
async fn take_over_and_roll_back(label: &str, own_namespace: bool, approval: &str) {
    let World {
        _serial,
        node,
        admin,
        kubeconfig,
        mut v0,
    } = world().await;

    // The same bundle in both worlds: by image in a ClusterCatalog for olmv1, with its
    // manifests inline in the catalog opm serves to OLM v0.
    let mut spec = BundleSpec::new(&support::unique(label), "1.0.0");
    spec.operator_image = Some(node.workload_image.clone());
    let catalog = support::unique("v0cat");
    let image = publish_on_node(&catalog, &spec.package, std::slice::from_ref(&spec)).await;
    create_catalog(&catalog, &image).await;
    let (_opm, address) = olm_v0_run::serve_v0_catalog(&spec.package, std::slice::from_ref(&spec));
    wait_serving(&admin, &catalog).await;

    let started = Instant::now();
    let inst = install_through_subscription(&admin, &spec, &address, own_namespace, approval).await;
    eprintln!(
        "[{label}] OLM v0 installed {} in {:?}",
        inst.csv,
        started.elapsed()
    );
    let ns = inst.ns.as_str();
    let deployment = spec.deployment_name();
    let (pod, pod_uid, restarts) = operator_pod(&admin, ns, &deployment).await;
    let (crd_uid, widget) = create_widget(&admin, &spec, ns).await;
    let replica_sets: Api<ReplicaSet> = Api::namespaced(admin.clone(), ns);
    let rs_before = replica_sets
        .list(&Default::default())
        .await
        .expect("list")
        .items
        .len();

    // An administrator's override in the OperatorCondition: it must survive the switch
    // (OLM v0's garbage collection may delete the object during the convert; convert
    // then restores it from the backup).
    let conditions = olm_v0::api(&admin, "v2", "OperatorCondition", ns);
    let override_ = json!([{"type": "Upgradeable", "status": "True", "reason": "Migration",
        "message": "kept across the switch", "lastTransitionTime": "2026-01-01T00:00:00Z"}]);
    conditions
        .patch(
            &inst.csv,
            &kube::api::PatchParams::default(),
            &kube::api::Patch::Merge(json!({"spec": {"overrides": override_}})),
        )
        .await
        .expect("set an override in the OperatorCondition");

    // check, then convert.
    let target = format!("{ns}/{}", inst.sub);
    let (code, out, err) = olmv1(
        &[
            "migrate",
            "check",
            &target,
            "--insecure-registry",
            &node.registry,
        ],
        &kubeconfig,
    );
    println!("[{label}] olmv1 migrate check {target}:\n{out}{err}");
    assert_eq!(code, 0, "eligible: {err}\n{out}");
    let convert_started = Instant::now();
    let (code, out, err) = olmv1(
        &[
            "migrate",
            "convert",
            &target,
            "--apply",
            "--insecure-registry",
            &node.registry,
        ],
        &kubeconfig,
    );
    let convert_took = convert_started.elapsed();
    // OLM v0 may finish work it had started while convert runs (convert unties again
    // what it ties again); after convert returned it must write nothing (one second of
    // slack: managedFields' times are in whole seconds).
    let convert_at = jiff::Timestamp::now() + jiff::SignedDuration::from_secs(1);
    println!("[{label}] olmv1 migrate convert --apply ({convert_took:?}):\n{out}{err}");
    assert_eq!(code, 0, "{err}\n{out}");

    // The controller takes it over.
    let exts: Api<ClusterExtension> = Api::all(admin.clone());
    let e = wait_installed(&exts, &inst.sub, "1.0.0").await;
    let takeover_took = convert_started.elapsed();
    assert_eq!(
        condition(&e, "Installed").map(|c| c.status).as_deref(),
        Some("True")
    );
    // And rolls it out: nothing refused (OLM v0's OperatorCondition controller, still
    // running, keeps the Role and RoleBinding named like the CSV; olmv1 renders the
    // same ones and adopts them).
    wait_succeeded(&exts, &inst.sub).await;
    let condition = conditions
        .get(&inst.csv)
        .await
        .expect("the OperatorCondition");
    assert_eq!(
        condition.data.pointer("/spec/overrides"),
        Some(&override_),
        "the override survived the switch: {:#}",
        condition.data
    );
    // The OperatorCondition's Role is adopted (olmv1's owner labels) and olmv1 claims
    // no control over it: OLM v0's controller holds the controller reference (and may
    // reset the list, or re-create the Role: then olmv1 adopts it again).
    let roles: Api<Role> = Api::namespaced(admin.clone(), ns);
    eventually(60, "the OperatorCondition's Role adopted", || async {
        let role = roles.get(&inst.csv).await.ok()?;
        let labels = role.metadata.labels.clone().unwrap_or_default();
        let ours = labels.get("olm.operatorframework.io/owner-name") == Some(&inst.sub);
        let refs = role.metadata.owner_references.clone().unwrap_or_default();
        let controlling = refs
            .iter()
            .any(|r| r.kind == "ClusterExtension" && r.controller == Some(true));
        assert!(!controlling, "{role:#?}");
        ours.then_some(())
    })
    .await;
    gone(&admin, "Subscription", ns, &inst.sub).await;
    gone(&admin, "ClusterServiceVersion", ns, &inst.csv).await;
    let plans = olm_v0::api(&admin, "v1alpha1", "InstallPlan", ns);
    assert!(
        plans
            .list(&Default::default())
            .await
            .expect("list")
            .items
            .is_empty()
    );
    let after = operator_pod(&admin, ns, &deployment).await;
    assert_eq!(
        after,
        (pod.clone(), pod_uid.clone(), restarts),
        "the pod changed"
    );
    let rs_after = replica_sets
        .list(&Default::default())
        .await
        .expect("list")
        .items
        .len();
    assert_eq!(rs_after, rs_before, "a rollout");
    let (crd_uid_after, widget_after) = create_widget_read(&admin, &spec, ns, &widget).await;
    assert_eq!(crd_uid_after, crd_uid);
    assert_eq!(widget_after["metadata"]["uid"], widget["metadata"]["uid"]);
    assert_eq!(
        widget_after["metadata"]["resourceVersion"],
        widget["metadata"]["resourceVersion"]
    );

    // OLM v0 keeps running beside it over two of its resyncs and changes nothing.
    tokio::time::sleep(Duration::from_secs(5)).await;
    let before = watched(&admin, ns, &deployment, &spec.package).await;
    tokio::time::sleep(olm_v0_run::QUIET).await;
    assert!(v0.exited().is_empty(), "OLM v0 stopped: {:?}", v0.exited());
    let later = watched(&admin, ns, &deployment, &spec.package).await;
    assert_eq!(later, before, "something changed after the takeover");
    // Nor did OLM v0 write any of them since the convert returned.
    for s in &later {
        if let Some(t) = s.v0_wrote {
            assert!(
                t <= convert_at,
                "OLM v0 wrote {} at {t}, after the convert: {:#}",
                s.what,
                s.v0_fields
            );
        }
    }
    // No object of the operator still carries OLM v0's owner labels (which would keep
    // OLM v0 interested in it).
    for s in &later {
        assert!(
            s.v0_fields["labels"].get("olm.owner").is_none(),
            "{} still owned by OLM v0 after the convert: {:#}",
            s.what,
            s.v0_fields
        );
    }
    assert!(csvs_anywhere(&admin, &spec.package).await.is_empty());
    let subs = olm_v0::api(&admin, "v1alpha1", "Subscription", ns);
    assert!(subs.get_opt(&inst.sub).await.expect("read").is_none());
    assert_eq!(operator_pod(&admin, ns, &deployment).await.2, restarts);
    // The Subscription synced back as a GitOps tool would: refused by the guard, no
    // second installation (docs/how-to/switch-from-olm-v0.md, "After the switch").
    let refusal = resubscribe_refused(&admin, ns, &inst.sub, &spec.package).await;
    assert!(
        refusal.contains(&format!("olmv1 migrate rollback {target}")),
        "{refusal}"
    );
    assert!(csvs_anywhere(&admin, &spec.package).await.is_empty());

    if !own_namespace {
        clean_up(
            &admin,
            &kubeconfig,
            &mut v0,
            (ns, &inst.sub),
            &spec.package,
            &deployment,
        )
        .await;
        assert_eq!(
            operator_pod(&admin, ns, &deployment).await,
            (pod.clone(), pod_uid.clone(), restarts),
            "the pod changed on cleanup"
        );
    }

    // Rollback: OLM v0 again, the same pod (after a cleanup too: the backup stays).
    let rollback_started = Instant::now();
    let (code, out, err) = olmv1(&["migrate", "rollback", &target], &kubeconfig);
    println!("[{label}] olmv1 migrate rollback:\n{out}{err}");
    assert_eq!(code, 0, "{err}\n{out}");
    assert_eq!(
        announced_steps(&out),
        Some(out.lines().filter(|l| l.starts_with("done ")).count()),
        "the steps announced are the steps done: {out}"
    );
    wait_csv_succeeded(&admin, ns, &inst.csv, 240).await;
    wait_at_latest_known(&admin, ns, &inst.sub, &inst.csv).await;
    let rollback_took = rollback_started.elapsed();
    let back = operator_pod(&admin, ns, &deployment).await;
    assert_eq!(
        back,
        (pod, pod_uid, restarts),
        "the pod changed on rollback"
    );
    assert!(exts.get_opt(&inst.sub).await.expect("read").is_none());
    assert!(v0.exited().is_empty(), "OLM v0 stopped: {:?}", v0.exited());
    println!(
        "[{label}] figures: convert {convert_took:?}, convert to Installed {takeover_took:?}, \
         rollback to CSV Succeeded {rollback_took:?}, pod restarts {} (before {restarts}), \
         ReplicaSets {rs_before} -> {rs_after}",
        back.2
    );
    drop(v0);
}

/// Objects of the kinds OLM v0's cleanup concerns that carry `selector`: ClusterRoles,
/// ClusterRoleBindings, CRDs, and the Deployments, ServiceAccounts, Roles and
/// RoleBindings of `ns`, as `<kind> <name>`.
async fn labelled(admin: &kube::Client, ns: &str, selector: &str) -> Vec<String> {
    let lp = ListParams::default().labels(selector);
    let kinds = [
        ("rbac.authorization.k8s.io", "v1", "ClusterRole", ""),
        ("rbac.authorization.k8s.io", "v1", "ClusterRoleBinding", ""),
        ("apiextensions.k8s.io", "v1", "CustomResourceDefinition", ""),
        ("apps", "v1", "Deployment", ns),
        ("", "v1", "ServiceAccount", ns),
        ("rbac.authorization.k8s.io", "v1", "Role", ns),
        ("rbac.authorization.k8s.io", "v1", "RoleBinding", ns),
    ];
    let mut out = Vec::new();
    for (group, version, kind, namespace) in kinds {
        let r = ApiResource::from_gvk(&GroupVersionKind::gvk(group, version, kind));
        let api: Api<DynamicObject> = if namespace.is_empty() {
            Api::all_with(admin.clone(), &r)
        } else {
            Api::namespaced_with(admin.clone(), namespace, &r)
        };
        for o in api.list(&lp).await.expect("list").items {
            let owned = o
                .metadata
                .labels
                .as_ref()
                .is_some_and(|l| l.contains_key("olm.operatorframework.io/owner-name"));
            let name = o.metadata.name.unwrap_or_default();
            out.push(format!(
                "{kind} {name}{}",
                if owned { " (olmv1's)" } else { "" }
            ));
        }
    }
    out.sort();
    out
}

/// After the takeover: `migrate cleanup` (dry run, then for real, then again: nothing
/// to do). The v0-only ClusterRoles and ClusterRoleBindings, the `Operator` object and
/// OLM v0's component label go, and none comes back over two resyncs of OLM v0; the
/// extension stays Installed.
async fn clean_up(
    admin: &kube::Client,
    kubeconfig: &Path,
    v0: &mut Programs,
    (ns, sub): (&str, &str),
    package: &str,
    deployment: &str,
) {
    let target = format!("{ns}/{sub}");
    let label = format!("operators.coreos.com/{package}.{ns}");
    let operators: Api<DynamicObject> = Api::all_with(
        admin.clone(),
        &ApiResource::from_gvk(&GroupVersionKind::gvk(
            "operators.coreos.com",
            "v1",
            "Operator",
        )),
    );
    let operator = format!("{package}.{ns}");
    let before = labelled(admin, ns, &label).await;
    let v0_only: Vec<&String> = before
        .iter()
        .filter(|w| {
            w.starts_with("Cluster") && !w.ends_with("(olmv1's)") && !w.contains("CustomResource")
        })
        .collect();
    let had_operator = operators.get_opt(&operator).await.expect("read").is_some();
    println!(
        "[cleanup] before: Operator {operator} present: {had_operator}; labelled {label}: {before:#?}"
    );
    let (code, out, err) = olmv1(&["migrate", "cleanup", &target, "--dry-run"], kubeconfig);
    println!("[cleanup] olmv1 migrate cleanup --dry-run:\n{out}{err}");
    assert_eq!(code, 0, "{err}\n{out}");
    let started = Instant::now();
    let (code, out, err) = olmv1(&["migrate", "cleanup", &target], kubeconfig);
    let took = started.elapsed();
    println!("[cleanup] olmv1 migrate cleanup ({took:?}):\n{out}{err}");
    assert_eq!(code, 0, "{err}\n{out}");
    for check in ["right after", "two resyncs later"] {
        assert!(
            operators.get_opt(&operator).await.expect("read").is_none(),
            "{check}: Operator {operator} is there"
        );
        let still = labelled(admin, ns, &label).await;
        assert!(
            still.is_empty(),
            "{check}: still labelled {label}: {still:?}"
        );
        let now = labelled(admin, ns, "").await;
        for gone in &v0_only {
            let name = gone.trim_end_matches(" (olmv1's)");
            assert!(!now.iter().any(|w| w == name), "{check}: {name} is back");
        }
        if check == "right after" {
            tokio::time::sleep(olm_v0_run::QUIET).await;
        }
    }
    assert!(v0.exited().is_empty(), "OLM v0 stopped: {:?}", v0.exited());
    let _ = deployment;
    let exts: Api<ClusterExtension> = Api::all(admin.clone());
    let e = exts.get(sub).await.expect("extension");
    assert_eq!(
        condition(&e, "Installed").map(|c| c.status).as_deref(),
        Some("True")
    );
    // Two resyncs beside OLM v0's running OperatorCondition controller: still rolled out.
    let progressing = condition(&e, "Progressing").map(|c| (c.status, c.reason, c.message));
    assert_eq!(
        progressing.as_ref().map(|p| (p.0.as_str(), p.1.as_str())),
        Some(("True", "Succeeded")),
        "{progressing:?}"
    );
    let (code, out, err) = olmv1(&["migrate", "cleanup", &target], kubeconfig);
    println!("[cleanup] again:\n{out}{err}");
    assert_eq!(code, 0, "{err}\n{out}");
    assert!(out.contains("nothing to clean up"), "{out}");
    println!(
        "[cleanup] figures: cleanup {took:?}, deleted v0-only cluster RBAC {}, Operator object deleted {had_operator}",
        v0_only.len()
    );
}

async fn create_widget_read(
    admin: &kube::Client,
    spec: &BundleSpec,
    ns: &str,
    widget: &Value,
) -> (String, Value) {
    use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
    let crds: Api<CustomResourceDefinition> = Api::all(admin.clone());
    let crd = crds.get(&spec.crd_name()).await.expect("CRD still there");
    let live = olm_v0::read_again(admin, widget)
        .await
        .expect("Widget still there");
    let _ = ns;
    (crd.metadata.uid.unwrap_or_default(), live)
}

#[tokio::test]
async fn an_all_namespaces_operator_installed_by_olm_v0_is_taken_over_in_place_and_rolled_back() {
    take_over_and_roll_back("v0all", false, "Automatic").await;
}

#[tokio::test]
async fn an_own_namespace_operator_on_manual_approval_is_taken_over_in_place_and_rolled_back() {
    take_over_and_roll_back("v0own", true, "Manual").await;
}

/// An operator serving a validating, a mutating and a conversion webhook
/// (`support::webhook_bundle`), installed by OLM v0 — which issues its own CA and
/// serving certificate and injects it — is converted and taken over by olmv1 with
/// cert-manager as the certificate provider. OLM v0's CSV-deletion handler sets the
/// CRD's conversion to `None`; after the takeover the conversion is `Webhook` again with
/// cert-manager's CA, the API server calls all three webhooks, the Widgets written under
/// OLM v0 read at both versions, and `migrate cleanup` removes OLM v0's suffixed
/// webhook configurations.
#[tokio::test]
async fn a_webhook_operator_installed_by_olm_v0_is_taken_over_with_its_webhooks_working() {
    use k8s_openapi::api::core::v1::Secret;
    use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
    assert_testimage_serves_webhooks();
    let World {
        _serial,
        node,
        admin,
        kubeconfig,
        mut v0,
    } = world().await;

    let spec = BundleSpec::new(&support::unique("v0hooks"), "1.0.0");
    let package = spec.package.clone();
    let files = webhook_bundle(&spec, &node.workload_image);
    let (_opm, address) = catalogs_of_files(&admin, &spec, files).await;
    let started = Instant::now();
    let inst = install_through_subscription(&admin, &spec, &address, false, "Automatic").await;
    eprintln!(
        "[v0hooks] OLM v0 installed {} in {:?}",
        inst.csv,
        started.elapsed()
    );
    let ns = inst.ns.as_str();
    let deployment = spec.deployment_name();
    // Under OLM v0 the webhooks answer (its certificate, its CA in the CRD).
    let crds: Api<CustomResourceDefinition> = Api::all(admin.clone());
    let conversion = || async {
        let c = crds.get(&spec.crd_name()).await.ok()?.spec.conversion?;
        let ca = c
            .webhook
            .as_ref()?
            .client_config
            .as_ref()?
            .ca_bundle
            .clone()?;
        (c.strategy == "Webhook").then_some(ca.0)
    };
    if tokio::time::timeout(Duration::from_secs(60), async {
        while conversion().await.is_none() {
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
    })
    .await
    .is_err()
    {
        let crd = crds.get(&spec.crd_name()).await.expect("CRD");
        let csv = olm_v0::api(&admin, "v1alpha1", "ClusterServiceVersion", ns)
            .get(&inst.csv)
            .await
            .expect("CSV");
        panic!(
            "OLM v0 set no conversion webhook: {:?}\nCSV status: {:#}\nolm-operator: {}",
            crd.spec.conversion,
            serde_json::to_value(&csv).expect("json")["status"],
            v0.log("olm-operator")
        );
    }
    webhook_bundle::exercise(&admin, ns, &package, "-v0").await;
    let (pod, _, restarts) = operator_pod(&admin, ns, &deployment).await;

    let target = format!("{ns}/{}", inst.sub);
    let registry_flag = ["--insecure-registry", node.registry.as_str()];
    check_eligible(&target, &registry_flag, &kubeconfig, "v0hooks").await;
    let convert_started = Instant::now();
    let (code, out, err) = olmv1(
        &[
            &["migrate", "convert", &target, "--apply"][..],
            &registry_flag,
        ]
        .concat(),
        &kubeconfig,
    );
    let convert_took = convert_started.elapsed();
    println!("[v0hooks] olmv1 migrate convert --apply ({convert_took:?}):\n{out}{err}");
    assert_eq!(code, 0, "{err}\n{out}");
    // The pod read OLM v0's certificate at start: convert rolls it once onto the one
    // cert-manager re-issued at the takeover, as OLM v0 does on a CA change.
    if !out.contains("onto the certificate cert-manager re-issued") {
        // What convert saw: the Deployments' OLM v0 marks and mounts, the Secret's issuer.
        let listed = Api::<Deployment>::namespaced(admin.clone(), ns)
            .list(&Default::default())
            .await
            .map(|l| {
                l.items
                    .into_iter()
                    .map(|d| {
                        let t = d.spec.map(|s| s.template);
                        format!(
                            "{:?} labels {:?} template annotations {:?} volumes {:?}",
                            d.metadata.name,
                            d.metadata.labels,
                            t.as_ref()
                                .and_then(|t| t.metadata.as_ref()?.annotations.clone()),
                            t.and_then(|t| t.spec?.volumes).map(|v| v
                                .into_iter()
                                .map(|v| (v.name, v.secret.and_then(|s| s.secret_name)))
                                .collect::<Vec<_>>())
                        )
                    })
                    .collect::<Vec<_>>()
            });
        let secrets = Api::<Secret>::namespaced(admin.clone(), ns)
            .list(&Default::default())
            .await
            .map(|l| {
                l.items
                    .into_iter()
                    .map(|s| (s.metadata.name, s.metadata.annotations))
                    .collect::<Vec<_>>()
            });
        panic!(
            "convert rolled no Deployment onto the new certificate:\n{out}\nDeployments: {listed:#?}\nSecrets: {secrets:#?}"
        );
    }
    let exts: Api<ClusterExtension> = Api::all(admin.clone());
    wait_installed(&exts, &inst.sub, "1.0.0").await;
    wait_rolled_out(&admin, ns, &deployment).await;
    wait_succeeded(&exts, &inst.sub).await;
    let takeover_took = convert_started.elapsed();

    // cert-manager's CA everywhere, the conversion a webhook again.
    let cert = format!("{deployment}-service-cert");
    let secrets: Api<Secret> = Api::namespaced(admin.clone(), ns);
    eventually(
        180,
        "the CRD's conversion a webhook with cert-manager's CA",
        || async {
            let s = secrets.get(&cert).await.ok()?;
            let managed = s
                .metadata
                .annotations
                .as_ref()?
                .contains_key("cert-manager.io/certificate-name");
            let ca = s.data?.get("ca.crt")?.0.clone();
            let c = crds.get(&spec.crd_name()).await.ok()?.spec.conversion?;
            (managed
                && c.strategy == "Webhook"
                && c.webhook?.client_config?.ca_bundle.map(|b| b.0) == Some(ca))
            .then_some(())
        },
    )
    .await;
    // The API server calls the three webhooks served with cert-manager's certificate
    // (OLM v0's configurations, with its CA, went before the pods rolled); what was
    // written under OLM v0 converts both ways.
    webhook_bundle::exercise(&admin, ns, &package, "-v1").await;
    let v2 = webhook_bundle::widgets(&admin, ns, &package, "v2");
    let read = v2.get("plain-v0").await.expect("Widget plain-v0 at v2");
    assert_eq!(read.data["spec"], json!({"replicas": 3}), "{:?}", read.data);
    let (code, out, err) = olmv1(&["migrate", "cleanup", &target], &kubeconfig);
    println!("[v0hooks] olmv1 migrate cleanup:\n{out}{err}");
    assert_eq!(code, 0, "{err}\n{out}");
    let group = webhook_bundle::group(&package);
    let validating: Api<
        k8s_openapi::api::admissionregistration::v1::ValidatingWebhookConfiguration,
    > = Api::all(admin.clone());
    let left: Vec<String> = validating
        .list(&Default::default())
        .await
        .expect("list")
        .items
        .into_iter()
        .filter_map(|v| v.metadata.name)
        .filter(|n| n.contains(&group))
        .collect();
    assert_eq!(
        left,
        vec![format!("vwidget.{group}")],
        "only olmv1's configuration"
    );
    webhook_bundle::exercise(&admin, ns, &package, "-cleaned").await;
    let after = operator_pod(&admin, ns, &deployment).await;
    println!(
        "[v0hooks] figures: convert {convert_took:?}, convert to Succeeded {takeover_took:?}, \
         pod {} -> {} (restarts {restarts} -> {})",
        pod, after.0, after.2
    );
    roll_back_webhooks(&admin, &kubeconfig, &inst, &spec).await;
    assert!(v0.exited().is_empty(), "OLM v0 stopped: {:?}", v0.exited());
    drop(v0);
}

/// The way back for a webhook operator: `migrate rollback` removes what ties it to
/// cert-manager (the Certificate that would re-issue OLM v0's Secret, olmv1's webhook
/// configurations, the CRD's CA injection), OLM v0 installs the CSV again with its own
/// CA and configurations, rolls the pods onto its certificate, and the three webhooks
/// answer through OLM v0's configurations.
async fn roll_back_webhooks(
    admin: &kube::Client,
    kubeconfig: &Path,
    inst: &V0Install,
    spec: &BundleSpec,
) {
    use k8s_openapi::api::admissionregistration::v1::ValidatingWebhookConfiguration;
    let (ns, deployment) = (inst.ns.as_str(), spec.deployment_name());
    let before = ca_hash(admin, ns, &deployment).await;
    let target = format!("{ns}/{}", inst.sub);
    let started = Instant::now();
    let (code, out, err) = olmv1(&["migrate", "rollback", &target], kubeconfig);
    println!("[v0hooks] olmv1 migrate rollback:\n{out}{err}");
    assert_eq!(code, 0, "{err}\n{out}");
    for step in [
        "delete Certificate",
        "delete ValidatingWebhookConfiguration vwidget.",
    ] {
        assert!(out.contains(step), "no step {step:?}:\n{out}");
    }
    wait_csv_succeeded(admin, ns, &inst.csv, 180).await;
    wait_rolled_onto_another_ca(admin, ns, &deployment, before).await;
    let group = webhook_bundle::group(&spec.package);
    let configurations: Api<ValidatingWebhookConfiguration> = Api::all(admin.clone());
    let ours = format!("vwidget.{group}");
    assert!(
        configurations.get_opt(&ours).await.expect("get").is_none(),
        "olmv1's {ours} is left"
    );
    let v0_made = configurations
        .list(&ListParams::default().labels(&format!("olm.owner={}", inst.csv)))
        .await
        .expect("list");
    assert_eq!(v0_made.items.len(), 1, "OLM v0's own configuration");
    let certificates = Api::<DynamicObject>::namespaced_with(
        admin.clone(),
        ns,
        &ApiResource::from_gvk(&GroupVersionKind::gvk(
            "cert-manager.io",
            "v1",
            "Certificate",
        )),
    );
    let left = certificates.list(&Default::default()).await.expect("list");
    assert!(left.items.is_empty(), "Certificates left: {:?}", left.items);
    // catalog-operator's InstallPlan updates the existing CRD with the bundle's manifest,
    // which has no conversion webhook (`None`); olm-operator puts its own back when it
    // installs the CSV, or at its next sync of a CSV that had already succeeded
    // (`areWebhooksAvailable`). Seen: the CRD at `None` after the CSV succeeded, and
    // the webhook put back, then `None` again while the InstallPlan still ran its steps
    // (a Widget written then read back at v2 unconverted). So: the InstallPlan done
    // first, then the webhook on the CRD.
    wait_install_plan_complete(admin, ns, &inst.sub).await;
    use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
    let crds: Api<CustomResourceDefinition> = Api::all(admin.clone());
    let crd = format!("widgets.{group}");
    let waited = Instant::now();
    eventually(120, "OLM v0's conversion webhook on the CRD", || {
        let (crds, crd) = (crds.clone(), crd.clone());
        async move {
            let c = crds.get(&crd).await.ok()?.spec.conversion?;
            let ca = c.webhook?.client_config?.ca_bundle?;
            (c.strategy == "Webhook" && !ca.0.is_empty()).then_some(())
        }
    })
    .await;
    println!(
        "[v0hooks] conversion webhook back on the CRD {:?} after the CSV succeeded",
        waited.elapsed()
    );
    webhook_bundle::exercise(admin, ns, &spec.package, "-back").await;
    println!(
        "[v0hooks] rollback to webhooks answering through OLM v0: {:?}",
        started.elapsed()
    );
}

/// The same bundle (`files`) in a ClusterCatalog (an image on the node, Serving) and in
/// a v0 catalog `opm serve` serves: the programs and the address for a CatalogSource.
async fn catalogs_of_files(
    admin: &kube::Client,
    spec: &BundleSpec,
    files: std::collections::BTreeMap<String, Vec<u8>>,
) -> (Programs, String) {
    let catalog = support::unique("v0cat");
    let image = publish_files_on_node(&catalog, spec, &files).await;
    create_catalog(&catalog, &image).await;
    let served = olm_v0_run::serve_v0_catalog_of(&spec.package, &[(spec.clone(), files)]);
    wait_serving(admin, &catalog).await;
    served
}

/// `olmv1 migrate check <target>` until it says eligible: olm-operator may take the CSV
/// back to Installing for a moment after it Succeeded (seen: "waiting for install
/// components to report healthy"); check refuses that until it is healthy again, as it
/// tells a user to.
/// Creates Subscription `ns/name` for `package` again: the guard `migrate convert` left
/// (enforced before convert went on) must refuse it at once; returns the refusal.
async fn resubscribe_refused(admin: &kube::Client, ns: &str, name: &str, package: &str) -> String {
    let subs = olm_v0::api(admin, "v1alpha1", "Subscription", ns);
    let sub: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "operators.coreos.com/v1alpha1", "kind": "Subscription",
        "metadata": {"name": name, "namespace": ns},
        "spec": {"name": package, "source": "v0-catalog", "sourceNamespace": ns,
            "channel": "stable"}}))
    .expect("Subscription");
    let guard = olmv1::migrate::olm_v0::guard::name(package);
    match subs.create(&PostParams::default(), &sub).await {
        Err(kube::Error::Api(e)) if e.message.contains(&guard) => e.message,
        other => panic!("the Subscription was not refused by {guard}: {other:?}"),
    }
}

/// OLM v0 installs one package in two namespaces (OwnNamespace each), both CSVs owning
/// the same CRD; OLM v1 installs a package once per cluster. `check` names the other
/// installation for each (exit 1), `convert --apply` refuses and touches nothing — the
/// operator keeps its Subscription, CSV and pod — and once the other installation is
/// removed from OLM v0 (the CRD stays, as OLM v0 leaves it) the first is eligible
/// (docs/how-to/switch-from-olm-v0.md, "Blockers").
#[tokio::test]
async fn one_package_installed_by_olm_v0_in_two_namespaces_is_refused_until_one_is_left() {
    let World {
        _serial,
        node,
        admin,
        kubeconfig,
        mut v0,
    } = world().await;
    let mut spec = BundleSpec::new(&support::unique("v0two"), "1.0.0");
    spec.operator_image = Some(node.workload_image.clone());
    let catalog = support::unique("v0twocat");
    let image = publish_on_node(&catalog, &spec.package, std::slice::from_ref(&spec)).await;
    create_catalog(&catalog, &image).await;
    let (_opm, address) = olm_v0_run::serve_v0_catalog(&spec.package, std::slice::from_ref(&spec));
    wait_serving(&admin, &catalog).await;
    let a = install_through_subscription(&admin, &spec, &address, true, "Automatic").await;
    let b = install_through_subscription(&admin, &spec, &address, true, "Automatic").await;
    let deployment = spec.deployment_name();
    let pod = operator_pod(&admin, &a.ns, &deployment).await;
    let registry = ["--insecure-registry", node.registry.as_str()];
    let (target_a, target_b) = (format!("{}/{}", a.ns, a.sub), format!("{}/{}", b.ns, b.sub));
    let crd = spec.crd_name();
    for (target, other) in [(&target_a, &b), (&target_b, &a)] {
        let (code, out, err) = olmv1(
            &[&["migrate", "check", target][..], &registry].concat(),
            &kubeconfig,
        );
        println!("[v0two] olmv1 migrate check {target}:\n{out}{err}");
        assert_eq!(code, 1, "{err}\n{out}");
        let named = format!(
            "CRD {crd} is also owned by CSV {}/{} (OLM v0)",
            other.ns, other.csv
        );
        assert!(out.contains(&named), "{named:?} missing from:\n{out}");
    }
    let (code, out, err) = olmv1(
        &[&["migrate", "convert", &target_a, "--apply"][..], &registry].concat(),
        &kubeconfig,
    );
    println!("[v0two] olmv1 migrate convert {target_a} --apply:\n{out}{err}");
    assert_eq!(code, 1, "{err}\n{out}");
    assert!(
        out.contains(&format!("Subscription {target_a}: refused")),
        "{out}"
    );
    let subs = olm_v0::api(&admin, "v1alpha1", "Subscription", &a.ns);
    let csvs = olm_v0::api(&admin, "v1alpha1", "ClusterServiceVersion", &a.ns);
    assert!(subs.get_opt(&a.sub).await.expect("read").is_some());
    assert!(csvs.get_opt(&a.csv).await.expect("read").is_some());
    let exts: Api<ClusterExtension> = Api::all(admin.clone());
    assert!(
        exts.get_opt(&a.sub).await.expect("read").is_none(),
        "an extension was created"
    );
    assert_eq!(operator_pod(&admin, &a.ns, &deployment).await, pod);

    // The other installation removed from OLM v0 (Subscription, then CSV): eligible.
    let delete = kube::api::DeleteParams::default();
    olm_v0::api(&admin, "v1alpha1", "Subscription", &b.ns)
        .delete(&b.sub, &delete)
        .await
        .expect("delete the other Subscription");
    let csvs_b = olm_v0::api(&admin, "v1alpha1", "ClusterServiceVersion", &b.ns);
    csvs_b
        .delete(&b.csv, &delete)
        .await
        .expect("delete the other CSV");
    eventually(120, "the other CSV gone", || {
        let csvs_b = csvs_b.clone();
        let csv = b.csv.clone();
        async move { csvs_b.get_opt(&csv).await.ok()?.is_none().then_some(()) }
    })
    .await;
    check_eligible(&target_a, &registry, &kubeconfig, "v0two").await;
    assert_eq!(operator_pod(&admin, &a.ns, &deployment).await, pod);
    assert!(v0.exited().is_empty(), "OLM v0 stopped: {:?}", v0.exited());
    subs.delete(&a.sub, &delete)
        .await
        .expect("delete the Subscription");
    csvs.delete(&a.csv, &delete).await.expect("delete the CSV");
}

async fn check_eligible(target: &str, registry_flag: &[&str], kubeconfig: &Path, tag: &str) {
    let check = [&["migrate", "check", target][..], registry_flag].concat();
    eventually(120, "migrate check: eligible", || async {
        let (code, out, err) = olmv1(&check, kubeconfig);
        println!("[{tag}] olmv1 migrate check {target}:\n{out}{err}");
        (code == 0).then_some(())
    })
    .await;
}

/// Waits until Deployment `ns/name` has rolled out (all replicas updated and available).
async fn wait_rolled_out(admin: &kube::Client, ns: &str, name: &str) {
    let deployments: Api<Deployment> = Api::namespaced(admin.clone(), ns);
    eventually(
        180,
        "the operator rolled onto the new certificate",
        || async {
            let d = deployments.get(name).await.ok()?;
            let want = d.spec.as_ref()?.replicas.unwrap_or(1);
            let s = d.status?;
            (s.observed_generation == d.metadata.generation
                && s.updated_replicas == Some(want)
                && s.available_replicas == Some(want)
                && s.replicas == Some(want))
            .then_some(())
        },
    )
    .await;
}

/// The pod template's `olmcahash` (OLM v0's CA hash; `convert` sets it too).
async fn ca_hash(admin: &kube::Client, ns: &str, deployment: &str) -> Option<String> {
    let d = Api::<Deployment>::namespaced(admin.clone(), ns)
        .get(deployment)
        .await
        .ok()?;
    let annotations = d.spec?.template.metadata?.annotations?;
    annotations.get("olmcahash").cloned()
}

/// Waits until OLM v0 put another CA hash than `before` on the pod template (a CA of
/// its own, installing the CSV again) and the Deployment rolled onto it.
async fn wait_rolled_onto_another_ca(
    admin: &kube::Client,
    ns: &str,
    deployment: &str,
    before: Option<String>,
) {
    eventually(180, "OLM v0's CA hash on the pod template", || async {
        let hash = ca_hash(admin, ns, deployment).await?;
        (Some(&hash) != before.as_ref()).then_some(())
    })
    .await;
    wait_rolled_out(admin, ns, deployment).await;
}

/// A convert stopped halfway against running OLM v0 (the Subscription and InstallPlan
/// deleted, a few objects untied, the CSV still there and reconciled by olm-operator for
/// 15 s) is finished by the next `convert --apply`; the takeover keeps the same pod;
/// then a newer bundle in the catalog is an upgrade by olmv1, and OLM v0 re-creates
/// nothing.
#[tokio::test]
async fn an_interrupted_convert_finishes_against_olm_v0_and_the_next_upgrade_goes_through_olmv1() {
    let World {
        _serial,
        node,
        admin,
        kubeconfig,
        mut v0,
    } = world().await;
    let mut spec = BundleSpec::new(&support::unique("v0stop"), "1.0.0");
    spec.operator_image = Some(node.workload_image.clone());
    let catalog = support::unique("v0cat");
    let image = publish_on_node(&catalog, &spec.package, std::slice::from_ref(&spec)).await;
    create_catalog(&catalog, &image).await;
    let (_opm, address) = olm_v0_run::serve_v0_catalog(&spec.package, std::slice::from_ref(&spec));
    wait_serving(&admin, &catalog).await;
    let inst = install_through_subscription(&admin, &spec, &address, false, "Automatic").await;
    let ns = inst.ns.as_str();
    let deployment = spec.deployment_name();
    let (pod, pod_uid, restarts) = operator_pod(&admin, ns, &deployment).await;
    let target = format!("{ns}/{}", inst.sub);
    let convert = |extra: &[&str]| {
        let mut args = vec!["migrate", "convert", target.as_str(), "--apply"];
        args.extend_from_slice(&["--insecure-registry", node.registry.as_str()]);
        args.extend_from_slice(extra);
        olmv1(&args, &kubeconfig)
    };

    // Stopped after 8 steps: backup, guard, installer, Subscription and InstallPlan deleted,
    // the CRD handed over, the first objects untied (and handed over); the CSV and its
    // finalizer still there.
    let (code, out, err) = convert(&["--stop-after", "8"]);
    println!("[v0stop] convert --stop-after 8:\n{out}{err}");
    assert_eq!(code, 0, "{err}\n{out}");
    assert!(out.contains("stopped after 8 step(s)"), "{out}");
    let csvs = olm_v0::api(&admin, "v1alpha1", "ClusterServiceVersion", ns);
    assert!(csvs.get_opt(&inst.csv).await.expect("read").is_some());
    // olm-operator keeps reconciling the CSV meanwhile (it may tie objects again).
    tokio::time::sleep(Duration::from_secs(15)).await;
    let started = Instant::now();
    let (code, out, err) = convert(&[]);
    let took = started.elapsed();
    println!("[v0stop] convert --apply again ({took:?}):\n{out}{err}");
    assert_eq!(code, 0, "{err}\n{out}");
    assert!(
        !out.contains("write the backup"),
        "the backup was written once: {out}"
    );
    let exts: Api<ClusterExtension> = Api::all(admin.clone());
    wait_installed(&exts, &inst.sub, "1.0.0").await;
    wait_succeeded(&exts, &inst.sub).await;
    assert!(csvs.get_opt(&inst.csv).await.expect("read").is_none());
    assert_eq!(
        operator_pod(&admin, ns, &deployment).await,
        (pod, pod_uid.clone(), restarts),
        "the pod changed on the takeover"
    );

    // A newer bundle in the catalog: olmv1 upgrades (the same Deployment, rolled out).
    let mut next = BundleSpec::new(&spec.package, "1.1.0");
    next.operator_image = spec.operator_image.clone();
    next.replaces = Some(spec.bundle_name());
    let image = publish_on_node(
        &format!("{catalog}-next"),
        &spec.package,
        &[spec.clone(), next.clone()],
    )
    .await;
    let catalogs: Api<ClusterCatalog> = Api::all(admin.clone());
    catalogs
        .patch(
            &catalog,
            &Default::default(),
            &kube::api::Patch::Merge(json!({"spec": {"source": {"image": {"ref": image}}}})),
        )
        .await
        .expect("point the catalog at the newer image");
    // The least-privilege installer account convert made covers 1.0.0: what 1.1.0
    // adds is granted the documented way (docs/how-to/upgrades.md).
    let upgrade = Upgrade {
        package: &spec.package,
        version: "1.1.0",
        from: "1.0.0",
        catalog: &catalog,
        namespace: ns,
        extension: &inst.sub,
        registry: &node.registry,
    };
    upgrade.grant(&admin, &kubeconfig).await;
    let deployments: Api<Deployment> = Api::namespaced(admin.clone(), ns);
    let uid_before = deployments
        .get(&deployment)
        .await
        .expect("deployment")
        .metadata
        .uid;
    let started = Instant::now();
    wait_installed(&exts, &inst.sub, "1.1.0").await;
    wait_succeeded(&exts, &inst.sub).await;
    println!(
        "[v0stop] upgraded to 1.1.0 by olmv1 in {:?}",
        started.elapsed()
    );
    assert_eq!(
        deployments
            .get(&deployment)
            .await
            .expect("deployment")
            .metadata
            .uid,
        uid_before
    );
    // OLM v0, still running, re-created no Subscription, CSV or InstallPlan.
    tokio::time::sleep(Duration::from_secs(10)).await;
    assert!(csvs_anywhere(&admin, &spec.package).await.is_empty());
    let subs = olm_v0::api(&admin, "v1alpha1", "Subscription", ns);
    assert!(subs.get_opt(&inst.sub).await.expect("read").is_none());
    assert!(v0.exited().is_empty(), "OLM v0 stopped: {:?}", v0.exited());
    // The backup names 1.0.0: rollback refuses, saying why.
    let (code, out, err) = olmv1(&["migrate", "rollback", &target], &kubeconfig);
    println!("[v0stop] rollback after the upgrade:\n{out}{err}");
    assert_eq!(code, 1, "{err}\n{out}");
    assert!(out.contains("rollback refused"), "{out}");
    drop(v0);
}

/// The number of steps `migrate rollback --apply` announces ("rolling back (N step(s)",
/// one more when it says so for Manual approval).
fn announced_steps(out: &str) -> Option<usize> {
    let rest = out.split("rolling back (").nth(1)?;
    let n: usize = rest.split(' ').next()?.parse().ok()?;
    let more = rest.lines().next()?.contains("then one more");
    Some(n + usize::from(more))
}

/// An operator owning an APIService (an aggregated API server, `hack/testimage
/// apiserver`, `support::apiservice_bundle`), installed by OLM v0 — which issues its
/// serving certificate, injects its CA into the APIService and binds the account to
/// `system:auth-delegator` and, in kube-system, to the authentication reader — is
/// converted and taken over by olmv1 with cert-manager: the APIService, same name, is
/// adopted (OLM v0 would delete it with its CSV while it carries the CSV's labels),
/// carries cert-manager's CA once the pods rolled onto the re-issued certificate, stays
/// `Available`, and `widgets` are served through the API server before, after, and
/// after `migrate cleanup`.
#[tokio::test]
async fn an_aggregated_api_server_installed_by_olm_v0_is_taken_over_with_its_apiservice_available()
{
    use k8s_openapi::api::core::v1::Secret;
    use support::apiservice_bundle::{self as apis, apiservice_bundle};
    let World {
        _serial,
        node,
        admin,
        kubeconfig,
        mut v0,
    } = world().await;
    let spec = BundleSpec::new(&support::unique("v0apis"), "1.0.0");
    let package = spec.package.clone();
    let files = apiservice_bundle(&spec, &node.workload_image);
    let (_opm, address) = catalogs_of_files(&admin, &spec, files).await;
    let inst = install_through_subscription(&admin, &spec, &address, false, "Automatic").await;
    let ns = inst.ns.as_str();
    let deployment = spec.deployment_name();
    let api_services = apis::api_services(&admin);
    let name = apis::api_service_name(&package);
    let served = |when: &'static str| {
        let (admin, api_services, name, package) = (
            admin.clone(),
            api_services.clone(),
            name.clone(),
            package.clone(),
        );
        let ns = ns.to_string();
        async move {
            eventually(
                180,
                &format!("the APIService Available and widgets served ({when})"),
                || {
                    let (admin, api_services, name, package, ns) = (
                        admin.clone(),
                        api_services.clone(),
                        name.clone(),
                        package.clone(),
                        ns.clone(),
                    );
                    async move {
                        let a = api_services.get(&name).await.ok()?;
                        let (status, _, _) = apis::available(&a)?;
                        if status != "True" {
                            return None;
                        }
                        let list = apis::served_widgets(&admin, &ns, &package)
                            .list(&Default::default())
                            .await
                            .ok()?;
                        list.items
                            .iter()
                            .any(|w| w.metadata.name.as_deref() == Some(apis::SERVED_WIDGET))
                            .then_some(a)
                    }
                },
            )
            .await
        }
    };
    let under_v0 = served("under OLM v0").await;
    println!(
        "[v0apis] OLM v0's APIService labels: {:?}",
        under_v0.metadata.labels
    );

    let target = format!("{ns}/{}", inst.sub);
    let registry_flag = ["--insecure-registry", node.registry.as_str()];
    check_eligible(&target, &registry_flag, &kubeconfig, "v0apis").await;
    let convert_started = Instant::now();
    let convert = [
        &["migrate", "convert", &target, "--apply"][..],
        &registry_flag,
    ]
    .concat();
    let (code, out, err) = olmv1(&convert, &kubeconfig);
    println!(
        "[v0apis] olmv1 migrate convert --apply ({:?}):\n{out}{err}",
        convert_started.elapsed()
    );
    assert_eq!(code, 0, "{err}\n{out}");
    assert!(
        out.contains(&format!("untie APIService {name} from the CSV")),
        "{out}"
    );
    assert!(
        out.contains("onto the certificate cert-manager re-issued"),
        "{out}"
    );
    let exts: Api<ClusterExtension> = Api::all(admin.clone());
    wait_installed(&exts, &inst.sub, "1.0.0").await;
    wait_rolled_out(&admin, ns, &deployment).await;
    wait_succeeded(&exts, &inst.sub).await;

    // olmv1's APIService now (same object), with cert-manager's CA; served throughout.
    let taken = served("after the takeover").await;
    assert_eq!(
        taken.metadata.uid, under_v0.metadata.uid,
        "the same APIService, adopted"
    );
    let labels = taken.metadata.labels.clone().unwrap_or_default();
    assert_eq!(
        labels.get(olmv1::apply::ownership::OWNER_NAME_LABEL),
        Some(&inst.sub)
    );
    assert!(!labels.contains_key("olm.owner"), "{labels:?}");
    // The APIService trusts the CA cert-manager keeps in the serving Secret. cainjector
    // adds it beside OLM v0's (cert-manager's CAInjectorMerging): the old pod, still
    // serving OLM v0's certificate until the rollout, stays verifiable meanwhile.
    let secrets = Api::<Secret>::namespaced(admin.clone(), ns);
    let secret_name = format!("{deployment}-service-cert");
    let digest = |b: &[u8]| olmv1::migrate::olm_v0::certificates::ca_hash(b);
    let deadline = Instant::now() + Duration::from_secs(120);
    let mut last = None;
    loop {
        let secret = secrets.get(&secret_name).await.expect("serving Secret");
        let ca = secret
            .data
            .as_ref()
            .and_then(|d| d.get("ca.crt"))
            .map(|b| b.0.clone())
            .unwrap_or_default();
        let a = api_services.get(&name).await.expect("APIService");
        let bundle = a
            .data
            .pointer("/spec/caBundle")
            .and_then(Value::as_str)
            .unwrap_or_default();
        let bundle = data_encoding::BASE64
            .decode(bundle.as_bytes())
            .unwrap_or_default();
        let pem = |b: &[u8]| String::from_utf8_lossy(b).trim().to_string();
        if !ca.is_empty() && pem(&bundle).contains(&pem(&ca)) {
            break;
        }
        let seen = (digest(&bundle), digest(&ca));
        if last.as_ref() != Some(&seen) {
            let times = |m: Option<
                Vec<k8s_openapi::apimachinery::pkg::apis::meta::v1::ManagedFieldsEntry>,
            >| {
                m.unwrap_or_default()
                    .into_iter()
                    .map(|f| (f.manager, f.time.map(|t| t.0.to_string())))
                    .collect::<Vec<_>>()
            };
            println!(
                "[v0apis] caBundle {} Secret CA {} (Secret fields {:?}; APIService fields {:?})",
                seen.0,
                seen.1,
                times(secret.metadata.managed_fields.clone()),
                times(a.metadata.managed_fields.clone())
            );
            last = Some(seen);
        }
        assert!(
            Instant::now() < deadline,
            "the APIService's caBundle (sha256 {}) is not the CA in Secret {secret_name} (sha256 {}, annotations {:?}); APIService annotations {:?}, managedFields {:?}",
            digest(&bundle),
            digest(&ca),
            secret.metadata.annotations,
            a.metadata.annotations,
            a.metadata.managed_fields.map(|m| m
                .into_iter()
                .map(|f| (f.manager, f.operation, f.time, f.fields_v1))
                .collect::<Vec<_>>())
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    let (code, out, err) = olmv1(&["migrate", "cleanup", &target], &kubeconfig);
    println!("[v0apis] olmv1 migrate cleanup:\n{out}{err}");
    assert_eq!(code, 0, "{err}\n{out}");
    let kept = served("after cleanup").await;
    assert_eq!(kept.metadata.uid, under_v0.metadata.uid);
    // The way back: cainjector no longer writes into the APIService, cert-manager no
    // longer re-issues the Secret; OLM v0 installs the CSV again with its own CA.
    let before = ca_hash(&admin, ns, &deployment).await;
    let (code, out, err) = olmv1(&["migrate", "rollback", &target], &kubeconfig);
    println!("[v0apis] olmv1 migrate rollback:\n{out}{err}");
    assert_eq!(code, 0, "{err}\n{out}");
    for step in [
        "remove cert-manager.io/inject-ca-from from APIService",
        "delete Certificate",
        "label APIService",
    ] {
        assert!(out.contains(step), "no step {step:?}:\n{out}");
    }
    wait_csv_succeeded(&admin, ns, &inst.csv, 180).await;
    wait_rolled_onto_another_ca(&admin, ns, &deployment, before).await;
    let back = served("after the rollback").await;
    assert_eq!(back.metadata.uid, under_v0.metadata.uid);
    let annotations = back.metadata.annotations.clone().unwrap_or_default();
    assert!(
        !annotations.contains_key("cert-manager.io/inject-ca-from"),
        "{annotations:?}"
    );
    assert!(v0.exited().is_empty(), "OLM v0 stopped: {:?}", v0.exited());
    drop(v0);
}
