//! `olmv1 migrate check` (docs/how-to/switch-from-olm-v0.md) run as users run it, the
//! built binary against the real control plane with OLM v0's real CRDs
//! (`hack/build-olm-v0.sh`) and the real controller serving a real ClusterCatalog from
//! the test registry. Two v0 installations are laid down as OLM v0 leaves them
//! (`support::olm_v0`): one from an image-based CatalogSource whose image the
//! ClusterCatalog serves (eligible: the ClusterExtension pins the version for Manual
//! approval, names the default channel, keeps the OwnNamespace watch, carries the
//! Subscription's config, selects the catalog; the installer RBAC is `olmv1 rbac`'s),
//! one from a gRPC address CatalogSource (eligible when the ClusterCatalog holds the
//! bundle, else blocked, with what to do). `convert` and
//! `rollback` run on such installations too, and the controller's takeover of a
//! converted one: refused while another bundle resolves, then in place (no rollout).

use crate::support;

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{
    Api, ApiResource, DynamicObject, GroupVersionKind, Patch, PatchParams, PostParams,
};
use serde_json::{Value, json};
use std::path::Path;
use support::bundles::BundleSpec;
use support::extensions::{create_catalog, publish};
use support::olm_v0::{self, Installation};
use support::olm_v0_flow::{olmv1, wait_serving};

/// The mark `migrate convert` writes on what it hands over.
const ADOPTABLE_BY: &str = "olm.operatorframework.io/adoptable-by";

#[tokio::test]
async fn check_says_eligible_with_the_extension_or_names_each_blocker() {
    support::controller();
    let cluster = support::cluster();
    let kubeconfig = cluster.admin_kubeconfig.clone();
    let admin = cluster.admin().await;
    olm_v0::install_crds(&admin).await;

    let package = support::unique("mig");
    let spec = BundleSpec::new(&package, "1.0.0");
    let catalog = support::unique("migcat");
    let image = publish(&catalog, &package, std::slice::from_ref(&spec)).await;
    create_catalog(&catalog, &image).await;
    wait_serving(&admin, &catalog).await;

    // Image-based CatalogSource, Manual approval, no channel, OwnNamespace.
    let ns = support::namespace(&admin, "mig").await;
    olm_v0::create(
        &admin,
        json!({"apiVersion": "operators.coreos.com/v1alpha1", "kind": "CatalogSource",
            "metadata": {"name": "demo-catalog", "namespace": ns},
            "spec": {"sourceType": "grpc", "image": image, "priority": -5,
                "updateStrategy": {"registryPoll": {"interval": "10m"}}}}),
        None,
    )
    .await;
    let csv = spec.bundle_name();
    Installation {
        ns: &ns,
        name: "demo",
        package: &package,
        version: "1.0.0",
        csv: &csv,
        catalog_source: (&ns, "demo-catalog"),
        targets: json!([ns]),
        spec_extra: json!({"installPlanApproval": "Manual",
            "config": {"env": [{"name": "LOG_LEVEL", "value": "debug"}]}}),
    }
    .lay_down(&admin)
    .await;

    let target = format!("{ns}/demo");
    let registry = support::registry().host();
    let (code, out, err) = olmv1(
        &[
            "migrate",
            "check",
            &target,
            "-o",
            "json",
            "--insecure-registry",
            registry,
        ],
        &kubeconfig,
    );
    assert_eq!(code, 0, "eligible exits 0: {err}\n{out}");
    let checks: Vec<Value> = serde_json::from_str(&out).expect("json");
    let c = &checks[0];
    assert_eq!(c["eligible"], true, "{c:#}");
    assert_eq!(c["version"], "1.0.0");
    let cat = &c["clusterExtension"]["spec"]["source"]["catalog"];
    assert_eq!(cat["packageName"], package.as_str());
    assert_eq!(cat["channels"], json!(["stable"]));
    assert_eq!(cat["version"], "1.0.0");
    assert_eq!(
        cat["selector"]["matchLabels"]["olm.operatorframework.io/metadata.name"],
        catalog.as_str()
    );
    let inline = &c["clusterExtension"]["spec"]["config"]["inline"];
    assert_eq!(inline["watchNamespace"], ns.as_str());
    assert_eq!(inline["deploymentConfig"]["env"][0]["name"], "LOG_LEVEL");
    assert_eq!(c["clusterCatalog"]["name"], catalog.as_str());
    assert_eq!(c["clusterCatalog"]["reused"], true);
    let rbac = c["installer"]["rbac"].as_str().expect("rbac");
    assert!(
        rbac.contains("kind: ClusterRole") && rbac.contains("demo-installer"),
        "{rbac}"
    );
    let kinds: Vec<&str> = c["v0Objects"]
        .as_array()
        .expect("objects")
        .iter()
        .filter_map(|o| o["kind"].as_str())
        .collect();
    for k in [
        "Subscription",
        "ClusterServiceVersion",
        "OperatorCondition",
        "InstallPlan",
        "OperatorGroup",
        "CatalogSource",
    ] {
        assert!(kinds.contains(&k), "{k} missing from {kinds:?}");
    }
    let (code, table, _) = olmv1(&["migrate", "check", &target, "--no-rbac"], &kubeconfig);
    assert_eq!(code, 0);
    println!("{table}");
    assert!(
        table.contains(&format!("{target}  {package}  {csv}  eligible")),
        "{table}"
    );

    // A gRPC address CatalogSource in another namespace, for the same package: eligible,
    // since the ClusterCatalog holds the installed bundle (nothing to make from it).
    let ns2 = support::namespace(&admin, "mig").await;
    olm_v0::create(
        &admin,
        json!({"apiVersion": "operators.coreos.com/v1alpha1", "kind": "CatalogSource",
            "metadata": {"name": "local", "namespace": ns2},
            "spec": {"sourceType": "grpc", "address": "127.0.0.1:50051"}}),
        None,
    )
    .await;
    Installation {
        ns: &ns2,
        name: "addr",
        package: &package,
        version: "1.0.0",
        csv: &csv,
        catalog_source: (&ns2, "local"),
        targets: json!([]),
        spec_extra: json!({"channel": "stable"}),
    }
    .lay_down(&admin)
    .await;
    let target2 = format!("{ns2}/addr");
    let (code, table, _) = olmv1(&["migrate", "check", &target2, "--no-rbac"], &kubeconfig);
    println!("{table}");
    assert_eq!(code, 0, "{table}");
    assert!(
        table.contains(&format!(
            "ClusterCatalog: {catalog} (holds the installed bundle; none made from the CatalogSource, which is not image-based)"
        )),
        "{table}"
    );

    // The same for a package no ClusterCatalog holds: blocked, with what to do.
    let ns3 = support::namespace(&admin, "mig").await;
    olm_v0::create(
        &admin,
        json!({"apiVersion": "operators.coreos.com/v1alpha1", "kind": "CatalogSource",
            "metadata": {"name": "local", "namespace": ns3},
            "spec": {"sourceType": "grpc", "address": "127.0.0.1:50051"}}),
        None,
    )
    .await;
    let nowhere = support::unique("nowhere");
    let nowhere_csv = format!("{nowhere}.v1.0.0");
    Installation {
        ns: &ns3,
        name: "addr",
        package: &nowhere,
        version: "1.0.0",
        csv: &nowhere_csv,
        catalog_source: (&ns3, "local"),
        targets: json!([]),
        spec_extra: json!({"channel": "stable"}),
    }
    .lay_down(&admin)
    .await;
    let target3 = format!("{ns3}/addr");
    let (code, table, _) = olmv1(&["migrate", "check", &target3, "--no-rbac"], &kubeconfig);
    println!("{table}");
    assert_eq!(code, 1, "a blocked Subscription exits 1: {table}");
    assert!(
        table.contains("is not image-based: it has a gRPC address (127.0.0.1:50051)"),
        "{table}"
    );
    assert!(
        table.contains("what to do: publish the catalog as a file-based catalog image"),
        "{table}"
    );
    assert!(table.contains("no Serving ClusterCatalog holds"), "{table}");
    // convert refuses it, naming the blocker, and changes nothing.
    let (code, out, _) = olmv1(&["migrate", "convert", &target3, "--apply"], &kubeconfig);
    assert_eq!(code, 1, "{out}");
    assert!(
        out.contains(&format!(
            "Subscription {target3}: refused: Subscription {target3} is not eligible: CatalogSource"
        )),
        "{out}"
    );
    let subs3 = olm_v0::api(&admin, "v1alpha1", "Subscription", &ns3);
    assert!(subs3.get_opt("addr").await.expect("read").is_some());

    // The same package in two more namespaces, both CSVs owning one CRD, the first also
    // one that a ClusterExtension manages, and a webhook: blocked, each with what to do.
    let (ns4, ns5) = blocked_by_owners_and_webhooks(&admin, &package, &csv, &ns).await;
    let (target4, target5) = (format!("{ns4}/hooks"), format!("{ns5}/other"));
    let crd = format!("widgets.{package}.example.com");
    let (code, out, _) = olmv1(&["migrate", "check", &target4, "--no-rbac"], &kubeconfig);
    println!("{out}");
    assert_eq!(code, 1, "{out}");
    for expected in [
        format!("CRD {crd} is also owned by CSV {ns5}/{csv} (OLM v0)"),
        format!("CRD gadgets.{package}.example.com is already managed by ClusterExtension team-g"),
        "OLM v1 installs a package, and owns its CRDs, once per cluster".to_string(),
        "the operator has webhooks and the cluster serves no certificate provider".to_string(),
        "what to do: install cert-manager".to_string(),
    ] {
        assert!(out.contains(&expected), "{expected:?} missing from:\n{out}");
    }
    let (code, out, _) = olmv1(&["migrate", "check", &target5, "--no-rbac"], &kubeconfig);
    assert_eq!(code, 1, "{out}");
    let other = format!("CRD {crd} is also owned by CSV {ns4}/{csv} (OLM v0)");
    assert!(out.contains(&other), "{out}");
    assert!(!out.contains("certificate provider"), "{out}");
    // convert refuses, naming the blockers, and changes nothing.
    let (code, out, _) = olmv1(&["migrate", "convert", &target4, "--apply"], &kubeconfig);
    assert_eq!(code, 1, "{out}");
    assert!(
        out.contains(&format!("Subscription {target4}: refused")),
        "{out}"
    );
    let subs4 = olm_v0::api(&admin, "v1alpha1", "Subscription", &ns4);
    assert!(subs4.get_opt("hooks").await.expect("read").is_some());
    let csvs4 = olm_v0::api(&admin, "v1alpha1", "ClusterServiceVersion", &ns4);
    assert!(csvs4.get_opt(&csv).await.expect("read").is_some());

    let (code, out, _) = olmv1(
        &["migrate", "check", "--all", "-o", "yaml", "--no-rbac"],
        &kubeconfig,
    );
    assert_eq!(code, 1, "--all with blocked Subscriptions exits 1");
    assert!(
        out.contains(&target) && out.contains(&target2) && out.contains(&target3),
        "{out}"
    );
}

/// Two v0 installations of `package` (CSV `csv`, from the CatalogSource of `source_ns`)
/// in new namespaces, both owning CRD `widgets.<package>.example.com` (OLM v0 installs a
/// package in several namespaces); the first (`hooks`) also declares a webhook — this
/// area's cluster serves no cert-manager — and owns CRD `gadgets.<package>.example.com`,
/// which ClusterExtension `team-g` manages. Returns both namespaces (Subscriptions
/// `hooks` and `other`).
async fn blocked_by_owners_and_webhooks(
    admin: &kube::Client,
    package: &str,
    csv: &str,
    source_ns: &str,
) -> (String, String) {
    let widgets = format!("widgets.{package}.example.com");
    let gadgets = format!("gadgets.{package}.example.com");
    let mut namespaces = Vec::new();
    for (name, owned, webhooks) in [
        ("hooks", vec![widgets.clone(), gadgets.clone()], true),
        ("other", vec![widgets.clone()], false),
    ] {
        let ns = support::namespace(admin, "mig").await;
        Installation {
            ns: &ns,
            name,
            package,
            version: "1.0.0",
            csv,
            catalog_source: (source_ns, "demo-catalog"),
            targets: json!([]),
            spec_extra: json!({"channel": "stable"}),
        }
        .lay_down(admin)
        .await;
        let owned: Vec<Value> = owned
            .iter()
            .map(|c| json!({"name": c, "kind": "Widget", "version": "v1"}))
            .collect();
        let mut spec = json!({"customresourcedefinitions": {"owned": owned}});
        if webhooks {
            spec["webhookdefinitions"] = json!([{"type": "ValidatingAdmissionWebhook",
                "generateName": "vwidget.example.com", "deploymentName": "demo",
                "containerPort": 443, "admissionReviewVersions": ["v1"], "sideEffects": "None",
                "rules": [{"apiGroups": ["example.com"], "apiVersions": ["v1"],
                    "operations": ["CREATE"], "resources": ["widgets"]}]}]);
        }
        olm_v0::api(admin, "v1alpha1", "ClusterServiceVersion", &ns)
            .patch(
                csv,
                &PatchParams::default(),
                &Patch::Merge(&json!({"spec": spec})),
            )
            .await
            .expect("CSV owned CRDs");
        namespaces.push(ns);
    }
    let group = gadgets.split_once('.').map(|(_, g)| g).expect("group");
    let crds: Api<CustomResourceDefinition> = Api::all(admin.clone());
    let crd = serde_json::from_value(json!({"apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": gadgets, "labels": {"olm.operatorframework.io/owner-kind": "ClusterExtension",
            "olm.operatorframework.io/owner-name": "team-g"}},
        "spec": {"group": group, "scope": "Namespaced",
            "names": {"plural": "gadgets", "singular": "gadget", "kind": "Gadget", "listKind": "GadgetList"},
            "versions": [{"name": "v1", "served": true, "storage": true,
                "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}]}}))
    .expect("CRD");
    crds.create(&PostParams::default(), &crd)
        .await
        .expect("create the CRD team-g manages");
    (namespaces.remove(0), namespaces.remove(0))
}

/// Lays down an eligible v0 installation `name` of `spec` in a new namespace, with the
/// objects OLM v0 ties to its CSV and a copy of the CSV in `copy_ns`; returns the
/// namespace and the tied objects.
async fn installation(
    admin: &kube::Client,
    spec: &BundleSpec,
    image: &str,
    name: &str,
    copy_ns: &str,
) -> (String, Vec<Value>) {
    let ns = support::namespace(admin, "conv").await;
    olm_v0::create(
        admin,
        json!({"apiVersion": "operators.coreos.com/v1alpha1", "kind": "CatalogSource",
            "metadata": {"name": "demo-catalog", "namespace": ns},
            "spec": {"sourceType": "grpc", "image": image}}),
        None,
    )
    .await;
    let csv = spec.bundle_name();
    Installation {
        ns: &ns,
        name,
        package: &spec.package,
        version: &spec.version,
        csv: &csv,
        catalog_source: (&ns, "demo-catalog"),
        targets: json!([]),
        spec_extra: json!({"channel": "stable"}),
    }
    .lay_down(admin)
    .await;
    let tied = olm_v0::lay_down_workload(admin, &ns, &csv, &spec.deployment_name()).await;
    olm_v0::create(
        admin,
        json!({"apiVersion": "operators.coreos.com/v1alpha1", "kind": "ClusterServiceVersion",
            "metadata": {"name": csv, "namespace": copy_ns, "labels": {"olm.copiedFrom": ns},
                "finalizers": ["operators.coreos.com/csv-cleanup"]},
            "spec": {"displayName": spec.package, "version": spec.version,
                "install": {"strategy": "deployment", "spec": {"deployments": []}}}}),
        Some(json!({"phase": "Succeeded", "reason": "Copied"})),
    )
    .await;
    (ns, tied)
}

/// A Subscription `neighbour` of `ns` and an InstallPlan `install-shared` that installed
/// both its CSV and `csv`, owned by both Subscriptions, as catalog-operator leaves one it
/// resolved for the two together (olm-v0 reference §1.1).
async fn shared_install_plan(admin: &kube::Client, ns: &str, csv: &str) -> Value {
    let neighbour = olm_v0::create(
        admin,
        json!({"apiVersion": "operators.coreos.com/v1alpha1", "kind": "Subscription",
            "metadata": {"name": "neighbour", "namespace": ns},
            "spec": {"name": "neighbour", "source": "demo-catalog", "sourceNamespace": ns}}),
        None,
    )
    .await;
    let demo = olm_v0::read_again(admin, &v0_object("Subscription", "v1alpha1", ns, "demo"))
        .await
        .expect("Subscription demo");
    let owner = |sub: &Value| {
        json!({"apiVersion": "operators.coreos.com/v1alpha1", "kind": "Subscription",
            "name": sub["metadata"]["name"], "uid": sub["metadata"]["uid"],
            "blockOwnerDeletion": false, "controller": false})
    };
    olm_v0::create(
        admin,
        json!({"apiVersion": "operators.coreos.com/v1alpha1", "kind": "InstallPlan",
            "metadata": {"name": "install-shared", "namespace": ns,
                "ownerReferences": [owner(&demo), owner(&neighbour)]},
            "spec": {"approval": "Automatic", "approved": true,
                "clusterServiceVersionNames": [csv, "neighbour.v1.0.0"]}}),
        Some(json!({"phase": "Complete", "catalogSources": []})),
    )
    .await
}

fn uid(v: &Value) -> &str {
    v["metadata"]["uid"].as_str().expect("uid")
}

fn v0_object(kind: &str, version: &str, ns: &str, name: &str) -> Value {
    json!({"apiVersion": format!("operators.coreos.com/{version}"), "kind": kind,
        "metadata": {"name": name, "namespace": ns}})
}

/// Every tied object is still there (same UID), untied from the CSV; the
/// OperatorGroup's ClusterRole keeps its owner labels.
async fn assert_untied(admin: &kube::Client, tied: &[Value]) {
    for before in tied {
        let after = olm_v0::read_again(admin, before)
            .await
            .unwrap_or_else(|| panic!("{} is gone", before["metadata"]["name"]));
        assert_eq!(uid(&after), uid(before), "{after:#}");
        let name = before["metadata"]["name"].as_str().unwrap_or_default();
        let owner = after["metadata"]["labels"]["olm.owner"].as_str();
        if name.starts_with("olm.og.") {
            assert!(owner.is_some(), "the OperatorGroup's role keeps its labels");
            continue;
        }
        assert_eq!(owner, None, "{after:#}");
        assert_eq!(
            after["metadata"]["labels"]["olm.owner.namespace"],
            Value::Null
        );
        let refs = after["metadata"]["ownerReferences"].as_array();
        assert!(
            refs.is_none_or(|r| r.iter().all(|r| r["kind"] != "ClusterServiceVersion")),
            "{after:#}"
        );
    }
}

#[tokio::test]
async fn convert_stops_v0_without_losing_an_object_resumes_and_rolls_back() {
    support::controller();
    let cluster = support::cluster();
    let kubeconfig = cluster.admin_kubeconfig.clone();
    let admin = cluster.admin().await;
    olm_v0::install_crds(&admin).await;
    let spec = BundleSpec::new(&support::unique("conv"), "1.0.0");
    let catalog = support::unique("convcat");
    let image = publish(&catalog, &spec.package, std::slice::from_ref(&spec)).await;
    create_catalog(&catalog, &image).await;
    wait_serving(&admin, &catalog).await;
    let copy_ns = support::namespace(&admin, "copy").await;
    let (ns, tied) = installation(&admin, &spec, &image, "demo", &copy_ns).await;
    let csv = spec.bundle_name();
    let target = format!("{ns}/demo");
    // A neighbour on OLM v0 that catalog-operator resolved together with demo: their
    // InstallPlan is shared, and stays theirs (docs/how-to/switch-from-olm-v0.md,
    // "InstallPlans").
    let shared = shared_install_plan(&admin, &ns, &csv).await;
    let registry = support::registry().host();
    let convert = |extra: &[&str]| {
        let mut args = vec![
            "migrate",
            "convert",
            target.as_str(),
            "--insecure-registry",
            registry,
        ];
        args.extend_from_slice(extra);
        olmv1(&args, &kubeconfig)
    };

    // Dry run: the steps, nothing changed.
    let (code, dry, err) = convert(&[]);
    println!("{dry}");
    assert_eq!(code, 0, "{err}\n{dry}");
    assert!(
        dry.contains("(dry run, nothing changed; --apply runs them)"),
        "{dry}"
    );
    let subs = olm_v0::api(&admin, "v1alpha1", "Subscription", &ns);
    assert!(subs.get_opt("demo").await.expect("read").is_some());
    let (code, json_plan, err) = convert(&["-o", "json"]);
    assert_eq!(code, 0, "{err}");
    let plan: Value = serde_json::from_str(&json_plan).expect("json plan");
    assert_eq!(plan["subscription"], target.as_str());
    assert_eq!(plan["steps"][0]["step"], "writeBackup");
    assert_eq!(
        plan["steps"][0]["manifest"]["data"]["installedCSV"],
        csv.as_str()
    );

    let (code, out, err) = convert(&["--apply"]);
    println!("{out}");
    assert_eq!(code, 0, "{err}\n{out}");
    // The order: untie every object, then the finalizer, then the CSV.
    let line = |needle: &str| {
        out.lines()
            .position(|l| l.contains(needle))
            .unwrap_or_else(|| panic!("no {needle:?} in\n{out}"))
    };
    let lines: Vec<&str> = out.lines().collect();
    let last_untie = lines
        .iter()
        .rposition(|l| l.contains(": untie "))
        .expect("untie");
    let finalizer = line("remove finalizer operators.coreos.com/csv-cleanup");
    let delete_csv = line(&format!("delete ClusterServiceVersion {ns}/{csv}"));
    assert!(line("write the backup") < line("create the installer account"));
    // The package guarded before the Subscription goes, then owned by the extension.
    let guard = olmv1::migrate::olm_v0::guard::name(&spec.package);
    let guard_lines: Vec<usize> = lines
        .iter()
        .enumerate()
        .filter(|(_, l)| l.contains(&format!("guard package {}", spec.package)))
        .map(|(i, _)| i)
        .collect();
    assert_eq!(guard_lines.len(), 2, "{out}");
    assert!(
        line("write the backup") < guard_lines[0] && guard_lines[0] < line("delete Subscription")
    );
    assert!(line("create ClusterExtension") < guard_lines[1], "{out}");
    assert!(line("create the installer account") < line("delete Subscription"));
    assert!(line("delete Subscription") < last_untie);
    assert!(last_untie < finalizer && finalizer < delete_csv, "{out}");
    assert!(delete_csv < line("create ClusterExtension"));
    // OLM v0 fenced off before the first step, the fence lowered once the CSV is gone.
    let fence = olmv1::migrate::olm_v0::fence::name(&ns, &csv);
    assert!(
        line(&format!(
            "fence the CSV's objects off OLM v0 while they are untied (ValidatingAdmissionPolicy {fence}"
        )) < line("write the backup"),
        "{out}"
    );
    assert!(
        delete_csv
            < line(&format!(
                "lower the fence (ValidatingAdmissionPolicy {fence})"
            )),
        "{out}"
    );
    assert!(
        policy_api(&admin)
            .get_opt(&fence)
            .await
            .expect("read")
            .is_none()
    );
    assert_untied(&admin, &tied).await;

    // v0 is gone for this operator: Subscription, InstallPlan, CSV (garbage collection
    // orphans, then it goes) and its copy; the OperatorCondition stays, untied (above).
    for (kind, version, namespace, name) in [
        ("Subscription", "v1alpha1", ns.as_str(), "demo"),
        ("InstallPlan", "v1alpha1", ns.as_str(), "install-abcde"),
        (
            "ClusterServiceVersion",
            "v1alpha1",
            ns.as_str(),
            csv.as_str(),
        ),
        (
            "ClusterServiceVersion",
            "v1alpha1",
            copy_ns.as_str(),
            csv.as_str(),
        ),
    ] {
        let obj = v0_object(kind, version, namespace, name);
        let admin = admin.clone();
        support::eventually(60, &format!("{kind} {namespace}/{name} gone"), || {
            let (admin, obj) = (admin.clone(), obj.clone());
            async move {
                olm_v0::read_again(&admin, &obj)
                    .await
                    .is_none()
                    .then_some(())
            }
        })
        .await;
    }
    assert!(!dry.contains("install-shared"), "{dry}");
    let live = olm_v0::read_again(&admin, &shared)
        .await
        .expect("the shared InstallPlan stays");
    assert_eq!(uid(&live), uid(&shared));
    // The ClusterExtension, annotated, and the backup; the installer account.
    let exts: Api<DynamicObject> = Api::all_with(
        admin.clone(),
        &ApiResource::from_gvk(&GroupVersionKind::gvk(
            "olm.operatorframework.io",
            "v1",
            "ClusterExtension",
        )),
    );
    let ext = serde_json::to_value(exts.get("demo").await.expect("extension")).expect("json");
    let annotations = &ext["metadata"]["annotations"];
    assert_eq!(
        annotations["olm.operatorframework.io/migrated-from-subscription"],
        target.as_str()
    );
    assert_eq!(
        annotations["olm.operatorframework.io/migration-backup"],
        format!("{ns}/olmv1-migration-demo")
    );
    let cms: Api<k8s_openapi::api::core::v1::ConfigMap> = Api::namespaced(admin.clone(), &ns);
    let backup = cms.get("olmv1-migration-demo").await.expect("backup");
    assert_eq!(
        backup.data.as_ref().and_then(|d| d.get("installedCSV")),
        Some(&csv)
    );
    let sas: Api<k8s_openapi::api::core::v1::ServiceAccount> = Api::namespaced(admin.clone(), &ns);
    assert!(sas.get_opt("demo-installer").await.expect("read").is_some());

    // Run again: nothing to do.
    let (code, again, err) = convert(&["--apply"]);
    assert_eq!(code, 0, "{err}\n{again}");
    assert!(again.contains("nothing to do: converted"), "{again}");
    assert_untied(&admin, &tied).await;

    // The guard, owned by the extension, refuses a Subscription for the package in any
    // namespace (as a GitOps tool would sync the deleted one back), saying what to do.
    let policy = serde_json::to_value(policy_api(&admin).get(&guard).await.expect("the guard"))
        .expect("json");
    assert_eq!(
        policy["metadata"]["ownerReferences"][0]["uid"],
        ext["metadata"]["uid"]
    );
    let elsewhere = support::namespace(&admin, "again").await;
    let again_sub: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "operators.coreos.com/v1alpha1", "kind": "Subscription",
        "metadata": {"name": "demo-again", "namespace": elsewhere},
        "spec": {"name": spec.package, "source": "demo-catalog", "sourceNamespace": ns}}))
    .expect("Subscription");
    let subs_elsewhere = olm_v0::api(&admin, "v1alpha1", "Subscription", &elsewhere);
    // Enforced before convert went on (its probe): refused at once.
    let refusal = match subs_elsewhere
        .create(&PostParams::default(), &again_sub)
        .await
    {
        Err(kube::Error::Api(e)) if e.message.contains(&guard) => e.message,
        other => panic!("the Subscription was not refused by {guard}: {other:?}"),
    };
    for expected in [
        format!(
            "package {} is installed by ClusterExtension demo",
            spec.package
        ),
        format!("olmv1 migrate rollback {target}"),
    ] {
        assert!(
            refusal.contains(&expected),
            "{expected:?} missing from {refusal}"
        );
    }

    // Rollback: the Subscription again, starting at the installed CSV; the extension
    // gone; the workload untouched; a second rollback has nothing to roll back.
    let (code, out, err) = olmv1(&["migrate", "rollback", &target], &kubeconfig);
    println!("{out}");
    assert_eq!(code, 0, "{err}\n{out}");
    assert!(
        out.contains(&format!("lower the guard on package {}", spec.package)),
        "{out}"
    );
    assert!(
        policy_api(&admin)
            .get_opt(&guard)
            .await
            .expect("read")
            .is_none()
    );
    let sub = serde_json::to_value(subs.get("demo").await.expect("restored")).expect("json");
    assert_eq!(sub["spec"]["startingCSV"], csv.as_str());
    assert_eq!(sub["spec"]["name"], spec.package.as_str());
    assert_eq!(sub["spec"]["channel"], "stable");
    support::eventually(60, "ClusterExtension gone", || {
        let exts = exts.clone();
        async move { exts.get_opt("demo").await.ok()?.is_none().then_some(()) }
    })
    .await;
    assert_untied(&admin, &tied).await;
    assert!(
        cms.get_opt("olmv1-migration-demo")
            .await
            .expect("read")
            .is_none()
    );
    let (code, out, _) = olmv1(&["migrate", "rollback", &target], &kubeconfig);
    assert_eq!(code, 1, "{out}");
    assert!(
        out.contains("rollback refused: no backup ConfigMap"),
        "{out}"
    );
}

#[tokio::test]
async fn an_interrupted_convert_finishes_when_run_again() {
    support::controller();
    let cluster = support::cluster();
    let kubeconfig = cluster.admin_kubeconfig.clone();
    let admin = cluster.admin().await;
    olm_v0::install_crds(&admin).await;
    let spec = BundleSpec::new(&support::unique("intr"), "1.0.0");
    let catalog = support::unique("intrcat");
    let image = publish(&catalog, &spec.package, std::slice::from_ref(&spec)).await;
    create_catalog(&catalog, &image).await;
    wait_serving(&admin, &catalog).await;
    let copy_ns = support::namespace(&admin, "copy").await;
    let (ns, tied) = installation(&admin, &spec, &image, "intr", &copy_ns).await;
    let csv = spec.bundle_name();
    let target = format!("{ns}/intr");
    let registry = support::registry().host();
    let run = |extra: &[&str]| {
        let mut args = vec![
            "migrate",
            "convert",
            target.as_str(),
            "--insecure-registry",
            registry,
        ];
        args.extend_from_slice(extra);
        olmv1(&args, &kubeconfig)
    };
    // Killed after the guard, the Subscription and the first untie: the CSV, still there, keeps
    // its finalizer; some objects are still tied.
    let (code, out, err) = run(&["--apply", "--stop-after", "6"]);
    println!("{out}");
    assert_eq!(code, 0, "{err}\n{out}");
    assert!(out.contains("stopped after 6 step(s)"), "{out}");
    let csvs = olm_v0::api(&admin, "v1alpha1", "ClusterServiceVersion", &ns);
    let live = csvs.get(&csv).await.expect("CSV still there");
    assert_eq!(
        live.metadata.finalizers.as_deref(),
        Some(&["operators.coreos.com/csv-cleanup".to_string()][..])
    );
    let subs = olm_v0::api(&admin, "v1alpha1", "Subscription", &ns);
    assert!(subs.get_opt("intr").await.expect("read").is_none());
    // The dry run now names what remains, from the backup.
    let (code, dry, _) = run(&[]);
    println!("{dry}");
    assert_eq!(code, 0, "{dry}");
    assert!(!dry.contains("write the backup"), "{dry}");
    assert!(dry.contains("remove finalizer"), "{dry}");
    // Run again: it finishes.
    let (code, out, err) = run(&["--apply"]);
    println!("{out}");
    assert_eq!(code, 0, "{err}\n{out}");
    assert!(!out.contains("delete Subscription"), "{out}");
    assert_untied(&admin, &tied).await;
    let obj = v0_object("ClusterServiceVersion", "v1alpha1", &ns, &csv);
    support::eventually(60, "CSV gone", || {
        let (admin, obj) = (admin.clone(), obj.clone());
        async move {
            olm_v0::read_again(&admin, &obj)
                .await
                .is_none()
                .then_some(())
        }
    })
    .await;
    let (code, again, _) = run(&["--apply"]);
    assert_eq!(code, 0, "{again}");
    assert!(again.contains("nothing to do: converted"), "{again}");
}

/// The objects OLM v0 made from the bundle that olmv1 renders too (olm-v0 reference
/// §1.2), laid down as v0 leaves them in `ns` for CSV `csv`: the CRD (label
/// `olm.managed`, no owner), a Widget, the ServiceAccount (ownerReference to the CSV),
/// and the Deployment's spec — the bundle's, with what v0 adds to the pod template: the
/// CSV's annotations olmv1 does not render (`olm.operatorGroup`,
/// `operatorframework.io/properties`; `olm.operatorNamespace` and `olm.targetNamespaces`
/// are rendered with the values v0 writes for AllNamespaces) and the env var
/// `OPERATOR_CONDITION_NAME`.
async fn v0_made(admin: &kube::Client, spec: &BundleSpec, ns: &str) -> (Vec<Value>, Value) {
    let rendered = support::bundles::render(spec, ns);
    let find = |kind: &str| {
        rendered
            .iter()
            .find(|o| o["kind"] == kind)
            .cloned()
            .unwrap_or_else(|| panic!("no {kind} rendered"))
    };
    let csv = spec.bundle_name();
    let mut crd = find("CustomResourceDefinition");
    crd["metadata"]["labels"] = json!({"olm.managed": "true"});
    let crd_name = crd["metadata"]["name"].clone();
    let crd = olm_v0::create_any(admin, crd).await;
    let csvs = olm_v0::api(admin, "v1alpha1", "ClusterServiceVersion", ns);
    // The CSV owns its CRD, as every real CSV lists it (what convert hands over).
    csvs.patch(
        &csv,
        &kube::api::PatchParams::default(),
        &kube::api::Patch::Merge(&json!({"spec": {"customresourcedefinitions": {
            "owned": [{"name": crd_name, "version": "v1", "kind": "Widget"}]}}})),
    )
    .await
    .expect("the CSV owns its CRD");
    let csv_uid = csvs.get(&csv).await.expect("CSV").metadata.uid;
    let owner = json!([{"apiVersion": "operators.coreos.com/v1alpha1", "kind": "ClusterServiceVersion",
        "name": csv, "uid": csv_uid, "controller": false, "blockOwnerDeletion": false}]);
    let mut sa = find("ServiceAccount");
    sa["metadata"]["labels"] = json!({"olm.managed": "true"});
    sa["metadata"]["ownerReferences"] = owner;
    let sa = olm_v0::create_any(admin, sa).await;
    let widgets = ApiResource::from_gvk(&GroupVersionKind::gvk(&spec.group(), "v1", "Widget"));
    let api_version = format!("{}/v1", spec.group());
    let widget = support::eventually(30, "Widget served", || {
        let api: Api<DynamicObject> = Api::namespaced_with(admin.clone(), ns, &widgets);
        let api_version = api_version.clone();
        async move {
            let w: DynamicObject = serde_json::from_value(json!({"apiVersion": api_version,
                "kind": "Widget", "metadata": {"name": "w1", "namespace": ns}}))
            .ok()?;
            let created = api.create(&Default::default(), &w).await.ok()?;
            serde_json::to_value(created).ok()
        }
    })
    .await;
    let mut deployment = find("Deployment")["spec"].clone();
    let template = &mut deployment["template"];
    let annotations = template["metadata"]["annotations"]
        .as_object_mut()
        .expect("pod template annotations");
    annotations.insert("olm.operatorGroup".into(), json!(format!("{ns}-og")));
    annotations.insert(
        "operatorframework.io/properties".into(),
        json!(olm_v0::properties_annotation(
            &spec.package,
            &spec.version,
            &[]
        )),
    );
    let container = &mut template["spec"]["containers"][0];
    container["env"] = json!([{"name": "OPERATOR_CONDITION_NAME", "value": csv}]);
    (vec![crd, sa, widget], deployment)
}

fn deployments(admin: &kube::Client, ns: &str) -> Api<k8s_openapi::api::apps::v1::Deployment> {
    Api::namespaced(admin.clone(), ns)
}

#[tokio::test]
async fn the_controller_takes_the_v0_installation_over_only_for_the_installed_bundle() {
    use k8s_openapi::api::apps::v1::ReplicaSet;
    use olmv1::api::ClusterExtension;
    support::controller();
    let cluster = support::cluster();
    let kubeconfig = cluster.admin_kubeconfig.clone();
    let admin = cluster.admin().await;
    olm_v0::install_crds(&admin).await;
    let spec = BundleSpec::new(&support::unique("take"), "1.0.0");
    let newer = BundleSpec::new(&spec.package, "1.1.0");
    let catalog = support::unique("takecat");
    let image = publish(&catalog, &spec.package, &[spec.clone(), newer]).await;
    create_catalog(&catalog, &image).await;
    wait_serving(&admin, &catalog).await;
    let ns = support::namespace(&admin, "take").await;
    olm_v0::create(
        &admin,
        json!({"apiVersion": "operators.coreos.com/v1alpha1", "kind": "CatalogSource",
            "metadata": {"name": "demo-catalog", "namespace": ns},
            "spec": {"sourceType": "grpc", "image": image}}),
        None,
    )
    .await;
    let csv = spec.bundle_name();
    Installation {
        ns: &ns,
        name: "take",
        package: &spec.package,
        version: &spec.version,
        csv: &csv,
        catalog_source: (&ns, "demo-catalog"),
        targets: json!([]),
        spec_extra: json!({"channel": "stable"}),
    }
    .lay_down(&admin)
    .await;
    let (made, deployment_spec) = v0_made(&admin, &spec, &ns).await;
    let name = spec.deployment_name();
    olm_v0::lay_down_workload_with(&admin, &ns, &csv, &name, Some(deployment_spec)).await;
    let deployments = deployments(&admin, &ns);
    let replica_sets: Api<ReplicaSet> = Api::namespaced(admin.clone(), &ns);
    // The Deployment controller made its ReplicaSet (the pod template hash).
    support::eventually(60, "the v0 Deployment's ReplicaSet", || {
        let replica_sets = replica_sets.clone();
        async move {
            (replica_sets
                .list(&Default::default())
                .await
                .ok()?
                .items
                .len()
                == 1)
                .then_some(())
        }
    })
    .await;
    let before = deployments.get(&name).await.expect("Deployment");
    let target = format!("{ns}/take");
    let registry = support::registry().host();
    let args = [
        "migrate",
        "convert",
        &target,
        "--insecure-registry",
        registry,
        "--apply",
    ];
    let (code, out, err) = olmv1(&args, &kubeconfig);
    println!("{out}");
    assert_eq!(code, 0, "{err}\n{out}");
    // Convert handed the objects over: each carries the mark naming the extension and
    // the backup's UID (the controller adopts nothing else).
    let backups: Api<k8s_openapi::api::core::v1::ConfigMap> = Api::namespaced(admin.clone(), &ns);
    let backup_uid = backups
        .get("olmv1-migration-take")
        .await
        .expect("backup")
        .metadata
        .uid
        .expect("uid");
    let mark = format!("take/{backup_uid}");
    let marked = deployments.get(&name).await.expect("Deployment");
    assert_eq!(
        marked
            .metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get(ADOPTABLE_BY)),
        Some(&mark)
    );
    for object in &made[..2] {
        let live = olm_v0::read_again(&admin, object).await.expect("there");
        assert_eq!(
            live["metadata"]["annotations"][ADOPTABLE_BY], mark,
            "{live:#}"
        );
    }

    // The catalog's newest bundle is 1.1.0 and the extension convert made pins no
    // version (the Subscription was on Automatic approval): until the takeover the
    // controller resolves the installed CSV's version only, and takes it over in place
    // (docs/how-to/switch-from-olm-v0.md, "The takeover"). 1.1.0 does not replace 1.0.0
    // here, so the extension stays on it afterwards.
    let exts: Api<ClusterExtension> = Api::all(admin.clone());
    let owner_name = |d: &k8s_openapi::api::apps::v1::Deployment| {
        d.metadata
            .labels
            .as_ref()
            .and_then(|l| l.get("olm.operatorframework.io/owner-name").cloned())
    };
    let installed = support::extensions::wait_installed(&exts, "take", "1.0.0").await;
    assert_eq!(
        installed
            .status
            .and_then(|s| s.install)
            .map(|i| i.bundle.name),
        Some(csv.clone())
    );
    let spec_version = installed
        .spec
        .source
        .catalog
        .as_ref()
        .and_then(|c| c.version.clone());
    assert_eq!(
        spec_version, None,
        "the pin is the controller's, not the spec's"
    );
    let took = format!("took over OLM v0's installation of bundle {csv} version 1.0.0");
    let adopted = support::extensions::events(&admin, "take", "Adopted").await;
    assert!(adopted.iter().any(|m| m.contains(&took)), "{adopted:?}");
    let refused = support::extensions::events(&admin, "take", "AdoptionRefused").await;
    assert!(refused.is_empty(), "{refused:?}");
    let after = deployments.get(&name).await.expect("Deployment");
    assert_eq!(after.metadata.uid, before.metadata.uid);
    assert_eq!(owner_name(&after).as_deref(), Some("take"));
    // Server-side apply leaves what v0 set and the bundle does not (the pod template's
    // v0 annotations, OPERATOR_CONDITION_NAME): the pod template is unchanged, so no
    // rollout — the same generation, one ReplicaSet.
    assert_eq!(
        after.metadata.generation, marked.metadata.generation,
        "a rollout"
    );
    let template = |d: &k8s_openapi::api::apps::v1::Deployment| {
        serde_json::to_value(&d.spec.as_ref().expect("spec").template).expect("json")
    };
    assert_eq!(template(&after), template(&before));
    assert_eq!(
        replica_sets
            .list(&Default::default())
            .await
            .expect("list")
            .items
            .len(),
        1
    );
    // The CRD, the ServiceAccount and the Widget: the same objects.
    for object in &made {
        let live = olm_v0::read_again(&admin, object)
            .await
            .expect("still there");
        assert_eq!(uid(&live), uid(object), "{live:#}");
    }
    let widget = olm_v0::read_again(&admin, &made[2]).await.expect("Widget");
    assert_eq!(
        widget["metadata"]["resourceVersion"],
        made[2]["metadata"]["resourceVersion"]
    );
    cleanup_after_takeover(&admin, &kubeconfig, &ns, &spec.package, &name).await;
}

/// `migrate cleanup` once the takeover is Installed and rolled out: a v0-named
/// ClusterRole and ClusterRoleBinding with OLM v0's component label go, the Deployment
/// (the revision's) keeps everything but that label, the `Operator` object goes last;
/// a second run has nothing to do.
async fn cleanup_after_takeover(
    admin: &kube::Client,
    kubeconfig: &Path,
    ns: &str,
    package: &str,
    deployment: &str,
) {
    let label = format!("operators.coreos.com/{package}.{ns}");
    let dynamic = |group: &str, version: &str, kind: &str| -> Api<DynamicObject> {
        Api::all_with(
            admin.clone(),
            &ApiResource::from_gvk(&GroupVersionKind::gvk(group, version, kind)),
        )
    };
    let roles = dynamic("rbac.authorization.k8s.io", "v1", "ClusterRole");
    let bindings = dynamic("rbac.authorization.k8s.io", "v1", "ClusterRoleBinding");
    let operators = dynamic("operators.coreos.com", "v1", "Operator");
    let v0_name = format!("{package}.v1.0.0-v0named");
    let pp = PostParams::default();
    let object = |v: Value| serde_json::from_value::<DynamicObject>(v).expect("object");
    roles
        .create(
            &pp,
            &object(
                json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
            "metadata": {"name": v0_name, "labels": {label.clone(): "", "olm.managed": "true"}},
            "rules": [{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get"]}]}),
            ),
        )
        .await
        .expect("v0 ClusterRole");
    bindings
        .create(&pp, &object(json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
            "metadata": {"name": v0_name, "labels": {label.clone(): ""}},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": v0_name},
            "subjects": [{"kind": "ServiceAccount", "name": "default", "namespace": ns}]})))
        .await
        .expect("v0 ClusterRoleBinding");
    let operator = format!("{package}.{ns}");
    operators
        .create(
            &pp,
            &object(
                json!({"apiVersion": "operators.coreos.com/v1", "kind": "Operator",
            "metadata": {"name": operator}}),
            ),
        )
        .await
        .expect("Operator");
    let deployments = deployments(admin, ns);
    deployments
        .patch(
            deployment,
            &kube::api::PatchParams::default(),
            &kube::api::Patch::Merge(&json!({"metadata": {"labels": {label.clone(): ""}}})),
        )
        .await
        .expect("label the Deployment");
    let target = format!("{ns}/take");
    let out = support::eventually(90, "cleanup allowed (Installed, rolled out)", || async {
        let (code, out, _) = olmv1(&["migrate", "cleanup", &target, "--dry-run"], kubeconfig);
        (code == 0).then_some(out)
    })
    .await;
    println!("{out}");
    assert!(
        out.contains(&format!("delete ClusterRole {v0_name}")),
        "{out}"
    );
    let (code, out, err) = olmv1(&["migrate", "cleanup", &target], kubeconfig);
    println!("{out}");
    assert_eq!(code, 0, "{err}\n{out}");
    let lines: Vec<&str> = out.lines().collect();
    let at = |needle: &str| {
        lines
            .iter()
            .position(|l| l.contains(needle))
            .unwrap_or_else(|| panic!("no {needle:?} in\n{out}"))
    };
    assert!(at(&format!("delete ClusterRoleBinding {v0_name}")) < at("remove OLM v0's labels"));
    assert!(at("remove OLM v0's labels") < at(&format!("delete Operator {operator}")));
    assert!(roles.get_opt(&v0_name).await.expect("read").is_none());
    assert!(bindings.get_opt(&v0_name).await.expect("read").is_none());
    assert!(operators.get_opt(&operator).await.expect("read").is_none());
    let d = deployments.get(deployment).await.expect("Deployment");
    let labels = d.metadata.labels.unwrap_or_default();
    assert!(!labels.contains_key(&label), "{labels:?}");
    assert_eq!(
        labels
            .get("olm.operatorframework.io/owner-name")
            .map(String::as_str),
        Some("take")
    );
    let (code, out, err) = olmv1(&["migrate", "cleanup", &target], kubeconfig);
    assert_eq!(code, 0, "{err}\n{out}");
    assert!(out.contains("nothing to clean up"), "{out}");
}

/// `convert --all`, `cleanup --all` and `rollback --all` plan one Subscription after
/// the other with a summary line. Dry runs only: the test control plane is shared with the other tests
/// of this binary, whose Subscriptions `--all` sees too.
#[tokio::test]
async fn convert_all_and_cleanup_all_plan_each_subscription_with_a_summary() {
    support::controller();
    let cluster = support::cluster();
    let kubeconfig = cluster.admin_kubeconfig.clone();
    let admin = cluster.admin().await;
    olm_v0::install_crds(&admin).await;
    let spec = BundleSpec::new(&support::unique("convall"), "1.0.0");
    let catalog = support::unique("convallcat");
    let image = publish(&catalog, &spec.package, std::slice::from_ref(&spec)).await;
    create_catalog(&catalog, &image).await;
    wait_serving(&admin, &catalog).await;
    let copy_a = support::namespace(&admin, "copy").await;
    let copy_b = support::namespace(&admin, "copy").await;
    let (ns_a, _) = installation(&admin, &spec, &image, "all-a", &copy_a).await;
    let (ns_b, _) = installation(&admin, &spec, &image, "all-b", &copy_b).await;
    let registry = support::registry().host();
    let (code, out, err) = olmv1(
        &[
            "migrate",
            "convert",
            "--all",
            "--insecure-registry",
            registry,
        ],
        &kubeconfig,
    );
    println!("{out}{err}");
    assert!(code <= 1, "{err}\n{out}");
    for target in [format!("{ns_a}/all-a"), format!("{ns_b}/all-b")] {
        let head = format!("Subscription {target}: ");
        let line = out
            .lines()
            .find(|l| l.starts_with(&head))
            .unwrap_or_else(|| panic!("no plan for {target} in\n{out}"));
        assert!(line.contains("dry run, nothing changed"), "{line}");
    }
    let summary = out.lines().last().unwrap_or_default();
    assert!(summary.starts_with("convert --all: "), "{summary}");
    // Nothing changed: both Subscriptions are still there.
    for (ns, name) in [(&ns_a, "all-a"), (&ns_b, "all-b")] {
        let subs = olm_v0::api(&admin, "v1alpha1", "Subscription", ns);
        assert!(subs.get_opt(name).await.expect("read").is_some());
    }
    // Neither was converted: cleanup of one refuses, naming what to do.
    let (code, out, _) = olmv1(
        &["migrate", "cleanup", &format!("{ns_a}/all-a"), "--dry-run"],
        &kubeconfig,
    );
    assert_eq!(code, 1, "{out}");
    assert!(
        out.contains("cleanup refused: no backup ConfigMap"),
        "{out}"
    );
    let (code, out, err) = olmv1(&["migrate", "cleanup", "--all", "--dry-run"], &kubeconfig);
    println!("{out}{err}");
    assert!(code <= 2, "{err}");
    assert!(
        out.lines()
            .last()
            .unwrap_or_default()
            .starts_with("cleanup --all: "),
        "{out}"
    );
    // rollback --all concerns only Subscriptions a backup names: not these two.
    let (code, out, err) = olmv1(&["migrate", "rollback", "--all", "--dry-run"], &kubeconfig);
    println!("{out}{err}");
    assert!(code <= 2, "{err}");
    let summary = out.lines().last().unwrap_or_default();
    assert!(summary.starts_with("rollback --all: "), "{out}");
    for target in [format!("{ns_a}/all-a"), format!("{ns_b}/all-b")] {
        assert!(!out.contains(&format!("Subscription {target}:")), "{out}");
    }
    for (ns, name) in [(&ns_a, "all-a"), (&ns_b, "all-b")] {
        let subs = olm_v0::api(&admin, "v1alpha1", "Subscription", ns);
        assert!(subs.get_opt(name).await.expect("read").is_some());
    }
    // Once one is converted (its backup written), rollback --all plans it, and only it
    // of the two.
    let a = format!("{ns_a}/all-a");
    let (code, out, err) = olmv1(
        &[
            "migrate",
            "convert",
            &a,
            "--apply",
            "--insecure-registry",
            registry,
        ],
        &kubeconfig,
    );
    assert_eq!(code, 0, "{err}\n{out}");
    let (code, out, err) = olmv1(&["migrate", "rollback", "--all", "--dry-run"], &kubeconfig);
    println!("{out}{err}");
    assert!(code <= 2, "{err}");
    assert!(out.contains(&format!("Subscription {a}: ")), "{out}");
    assert!(
        !out.contains(&format!("Subscription {ns_b}/all-b:")),
        "{out}"
    );
    let extensions: Api<olmv1::api::ClusterExtension> = Api::all(admin.clone());
    assert!(
        extensions.get_opt("all-a").await.expect("read").is_some(),
        "a dry run changes nothing"
    );
}

fn policy_api(admin: &kube::Client) -> Api<DynamicObject> {
    Api::all_with(
        admin.clone(),
        &ApiResource::from_gvk(&GroupVersionKind::gvk(
            "admissionregistration.k8s.io",
            "v1",
            "ValidatingAdmissionPolicy",
        )),
    )
}

/// The fence `migrate convert` raises around a CSV (`migrate::olm_v0::fence`), enforced
/// by the real API server: creating an object tied to the CSV (OLM v0's owner labels or
/// an ownerReference) and tying an untied object again are refused with the fence's
/// message; writes to objects still tied, untying, and ties to another CSV pass; once
/// lowered, tying passes again.
#[tokio::test]
async fn the_fence_refuses_exactly_the_writes_that_tie_an_object_to_the_csv_again() {
    use k8s_openapi::api::core::v1::ConfigMap;
    use kube::api::DeleteParams;
    use olmv1::migrate::olm_v0::fence;
    let cluster = support::cluster();
    let admin = cluster.admin().await;
    let ns = support::namespace(&admin, "fence").await;
    let csv = "op.v1.0.0";
    let cms: Api<ConfigMap> = Api::namespaced(admin.clone(), &ns);
    let labels = |csv: &str| json!({"olm.owner": csv, "olm.owner.kind": "ClusterServiceVersion", "olm.owner.namespace": ns});
    let cm = |name: &str, meta: Value| -> ConfigMap {
        let mut m = json!({"name": name});
        if let (Some(m), Some(extra)) = (m.as_object_mut(), meta.as_object()) {
            m.extend(extra.clone());
        }
        serde_json::from_value(json!({"metadata": m, "data": {"k": "v"}})).expect("configmap")
    };
    let pp = PostParams::default();
    cms.create(&pp, &cm("tied-before", json!({"labels": labels(csv)})))
        .await
        .expect("tied before the fence");
    cms.create(&pp, &cm("untied", json!({})))
        .await
        .expect("untied");

    let (policy, binding) = fence::objects(&ns, csv);
    let apply = PatchParams::apply("fence-test").force();
    let name = fence::name(&ns, csv);
    let bindings: Api<DynamicObject> = Api::all_with(
        admin.clone(),
        &ApiResource::from_gvk(&GroupVersionKind::gvk(
            "admissionregistration.k8s.io",
            "v1",
            "ValidatingAdmissionPolicyBinding",
        )),
    );
    policy_api(&admin)
        .patch(&name, &apply, &Patch::Apply(&policy))
        .await
        .expect("policy");
    bindings
        .patch(&name, &apply, &Patch::Apply(&binding))
        .await
        .expect("binding");
    // Enforced once the probe's dry-run creation is refused by it (as convert waits).
    let probe: ConfigMap = serde_json::from_value(fence::probe(&ns, csv)).expect("probe");
    let dry = PostParams {
        dry_run: true,
        ..PostParams::default()
    };
    support::eventually(30, "the fence enforced", || {
        let (cms, probe, dry) = (cms.clone(), probe.clone(), dry.clone());
        let ns = ns.clone();
        async move {
            match cms.create(&dry, &probe).await {
                Err(kube::Error::Api(e)) if fence::refused_by_fence(&e.message, &ns, csv) => {
                    Some(())
                }
                _ => None,
            }
        }
    })
    .await;
    let refused = |r: Result<ConfigMap, kube::Error>, what: &str| match r {
        Err(kube::Error::Api(e)) => assert!(
            e.message.contains(&name)
                && e.message
                    .contains("nothing may tie an object to that CSV again"),
            "{what}: {e:?}"
        ),
        Ok(_) => panic!("{what}: accepted"),
        Err(e) => panic!("{what}: {e}"),
    };
    refused(
        cms.create(&pp, &cm("new-tied", json!({"labels": labels(csv)})))
            .await,
        "created with the labels",
    );
    let owner = json!([{"apiVersion": "operators.coreos.com/v1alpha1", "kind": "ClusterServiceVersion",
        "name": csv, "uid": "00000000-0000-0000-0000-000000000001"}]);
    refused(
        cms.create(&pp, &cm("new-owned", json!({"ownerReferences": owner})))
            .await,
        "created with the ownerReference",
    );
    let merge = |patch: Value| Patch::Merge(patch);
    let pp2 = PatchParams::default();
    refused(
        cms.patch(
            "untied",
            &pp2,
            &merge(json!({"metadata": {"labels": labels(csv)}})),
        )
        .await,
        "labels added",
    );
    refused(
        cms.patch(
            "untied",
            &pp2,
            &merge(json!({"metadata": {"ownerReferences": owner}})),
        )
        .await,
        "ownerReference added",
    );
    // Still tied: changed freely, then untied; another CSV's ties pass.
    cms.patch("tied-before", &pp2, &merge(json!({"data": {"k": "w"}})))
        .await
        .expect("a tied object changes");
    let nulls = json!({"olm.owner": null, "olm.owner.kind": null, "olm.owner.namespace": null});
    cms.patch(
        "tied-before",
        &pp2,
        &merge(json!({"metadata": {"labels": nulls}})),
    )
    .await
    .expect("untie");
    refused(
        cms.patch(
            "tied-before",
            &pp2,
            &merge(json!({"metadata": {"labels": labels(csv)}})),
        )
        .await,
        "tied again",
    );
    cms.create(
        &pp,
        &cm("other-csv", json!({"labels": labels("other.v2.0.0")})),
    )
    .await
    .expect("another CSV's tie");

    // Lowered: tying passes again (as OLM v0's adoption after a rollback needs).
    bindings
        .delete(&name, &DeleteParams::default())
        .await
        .expect("delete binding");
    policy_api(&admin)
        .delete(&name, &DeleteParams::default())
        .await
        .expect("delete policy");
    support::eventually(30, "the fence lowered", || {
        let cms = cms.clone();
        let patch = merge(json!({"metadata": {"labels": labels(csv)}}));
        async move {
            cms.patch("untied", &PatchParams::default(), &patch)
                .await
                .ok()
                .map(|_| ())
        }
    })
    .await;
}

/// What a tenant's forged takeover must leave exactly as it was: identity, version,
/// labels and owners.
fn fingerprint(v: &Value) -> Value {
    json!({
        "uid": v["metadata"]["uid"],
        "resourceVersion": v["metadata"]["resourceVersion"],
        "labels": v["metadata"]["labels"],
        "ownerReferences": v["metadata"]["ownerReferences"],
    })
}

/// The attacker of SECURITY.md ("Takeovers"): a tenant who may create and delete
/// ClusterExtensions, write ConfigMaps in its own namespace and `use` (not
/// impersonate) the least-privilege installer an administrator bound there for the
/// bundle, under the shipped admission policy. It forges a migration backup naming the
/// bundle it resolves, and an extension pointing at it; another team made the bundle's
/// CRD, ClusterRole and ClusterRoleBinding by hand and keeps a Widget. The takeover is
/// refused naming the rule (no object carries the mark convert writes), nothing of the
/// other team changes — UIDs, resourceVersions, labels and owners before and after —
/// and deleting the tenant's extension deletes none of it. A backup named outside the
/// extension's namespace is refused before anything is read: the status says the
/// same whether a ConfigMap of that name exists there or not.
#[tokio::test]
async fn a_forged_migration_backup_takes_over_nothing_of_another_team() {
    use k8s_openapi::api::core::v1::ConfigMap;
    use olmv1::api::ClusterExtension;
    support::controller();
    let admin = support::cluster().admin().await;
    let policy = "config/admission/installer_impersonation.yaml";
    let text = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join(policy))
        .expect("policy file");
    let objects = olmv1::testenv::manifests::parse_objects(policy, &text).expect("policy");
    olmv1::testenv::manifests::apply_objects(&admin, &objects)
        .await
        .expect("the admission policy");

    let spec = BundleSpec::new(&support::unique("forge"), "1.0.0");
    let catalog = support::unique("forgecat");
    let image = publish(&catalog, &spec.package, std::slice::from_ref(&spec)).await;
    create_catalog(&catalog, &image).await;
    wait_serving(&admin, &catalog).await;
    let tenant_ns = support::namespace(&admin, "tenant").await;
    let team_ns = support::namespace(&admin, "team-b").await;
    let ext = support::unique("forged");
    let rendered = support::bundles::render(&spec, &tenant_ns);

    // The other team's objects, made by hand with the names the bundle renders.
    let mut theirs = Vec::new();
    for kind in [
        "CustomResourceDefinition",
        "ClusterRole",
        "ClusterRoleBinding",
    ] {
        for object in rendered.iter().filter(|o| o["kind"] == kind) {
            let mut object = object.clone();
            object["metadata"]["labels"] = json!({"team": "b"});
            if kind == "ClusterRoleBinding" {
                object["subjects"] =
                    json!([{"kind": "ServiceAccount", "name": "default", "namespace": team_ns}]);
            }
            theirs.push(olm_v0::create_any(&admin, object).await);
        }
    }
    assert!(
        theirs.len() >= 3,
        "a CRD, a ClusterRole and a ClusterRoleBinding"
    );
    let widgets = ApiResource::from_gvk(&GroupVersionKind::gvk(&spec.group(), "v1", "Widget"));
    let api_version = format!("{}/v1", spec.group());
    let widget = support::eventually(30, "their Widget", || {
        let api: Api<DynamicObject> = Api::namespaced_with(admin.clone(), &team_ns, &widgets);
        let api_version = api_version.clone();
        async move {
            let w: DynamicObject = serde_json::from_value(json!({"apiVersion": api_version,
                "kind": "Widget", "metadata": {"name": "theirs"}}))
            .ok()?;
            api.create(&PostParams::default(), &w).await.ok()
        }
    })
    .await;
    theirs.push(serde_json::to_value(&widget).expect("json"));
    // As they are once the API server has settled the CRD's status (Established): the
    // resourceVersions to compare with.
    let mut settled = Vec::new();
    for object in &theirs {
        settled.push(olm_v0::read_again(&admin, object).await.expect("theirs"));
    }
    let theirs = settled;
    let before: Vec<Value> = theirs.iter().map(fingerprint).collect();
    println!(
        "the other team's objects before: {:#}",
        Value::Array(before.clone())
    );

    // The installer the administrator bound for the bundle (`olmv1 rbac`'s rules), and
    // in the worst case for the takeover rule the right to read the tenant's backup.
    support::extensions::grant_installer(&tenant_ns, &ext, std::slice::from_ref(&rendered)).await;
    let account = format!("{ext}-installer");
    let tenant = support::unique("tenant");
    let rbac = "rbac.authorization.k8s.io/v1";
    let role = support::unique("tenant-author");
    for object in [
        json!({"apiVersion": rbac, "kind": "ClusterRole", "metadata": {"name": role},
            "rules": [{"apiGroups": ["olm.operatorframework.io"], "resources": ["clusterextensions"],
                "verbs": ["create", "get", "list", "watch", "update", "patch", "delete"]}]}),
        json!({"apiVersion": rbac, "kind": "ClusterRoleBinding", "metadata": {"name": role},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": role},
            "subjects": [{"kind": "User", "name": tenant, "apiGroup": "rbac.authorization.k8s.io"}]}),
        json!({"apiVersion": rbac, "kind": "Role", "metadata": {"name": "tenant", "namespace": tenant_ns},
            "rules": [
                {"apiGroups": [""], "resources": ["configmaps"], "verbs": ["create", "get", "list"]},
                {"apiGroups": [""], "resources": ["serviceaccounts"], "resourceNames": [account], "verbs": ["use"]}]}),
        json!({"apiVersion": rbac, "kind": "RoleBinding", "metadata": {"name": "tenant", "namespace": tenant_ns},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "tenant"},
            "subjects": [{"kind": "User", "name": tenant, "apiGroup": "rbac.authorization.k8s.io"}]}),
        // What `olmv1 rbac` adds where OperatorCondition is served (it is here: OLM v0's
        // CRDs): the bundle's OperatorCondition, its Role and RoleBinding.
        json!({"apiVersion": rbac, "kind": "Role", "metadata": {"name": "installer-condition", "namespace": tenant_ns},
            "rules": [
                {"apiGroups": ["operators.coreos.com"], "resources": ["operatorconditions"],
                    "verbs": ["create", "list", "watch", "get", "patch", "update", "delete"]},
                {"apiGroups": ["rbac.authorization.k8s.io"], "resources": ["roles", "rolebindings"],
                    "verbs": ["create", "list", "watch", "get", "patch", "update", "delete"]}]}),
        json!({"apiVersion": rbac, "kind": "RoleBinding", "metadata": {"name": "installer-condition", "namespace": tenant_ns},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "installer-condition"},
            "subjects": [{"kind": "ServiceAccount", "name": account, "namespace": tenant_ns}]}),
        json!({"apiVersion": rbac, "kind": "Role", "metadata": {"name": "installer-reads", "namespace": tenant_ns},
            "rules": [{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get"]}]}),
        json!({"apiVersion": rbac, "kind": "RoleBinding", "metadata": {"name": "installer-reads", "namespace": tenant_ns},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "installer-reads"},
            "subjects": [{"kind": "ServiceAccount", "name": account, "namespace": tenant_ns}]}),
    ] {
        olm_v0::create_any(&admin, object).await;
    }
    let as_tenant = support::user_client(&tenant).await;

    // The forged backup, in the tenant's namespace, as convert would have written it.
    let subscription = format!("{tenant_ns}/{ext}");
    let backup_name = format!("olmv1-migration-{ext}");
    let forged: ConfigMap = serde_json::from_value(json!({
        "metadata": {"name": backup_name, "namespace": tenant_ns,
            "labels": {"olm.operatorframework.io/migration-backup": "true"}},
        "data": {
            "subscription.json": json!({"apiVersion": "operators.coreos.com/v1alpha1", "kind": "Subscription",
                "metadata": {"name": ext, "namespace": tenant_ns}, "spec": {"name": spec.package}}).to_string(),
            "installedCSV": spec.bundle_name(),
            "version": "1.0.0",
            "clusterExtension.json": "{}",
            "installer.json": "[]",
        }
    }))
    .expect("ConfigMap");
    let tenant_cms: Api<ConfigMap> = Api::namespaced(as_tenant.clone(), &tenant_ns);
    tenant_cms
        .create(&PostParams::default(), &forged)
        .await
        .expect("the tenant writes ConfigMaps in its namespace");
    let extension = |name: &str, backup: &str| -> ClusterExtension {
        let mut e = support::extensions::extension(
            name,
            &tenant_ns,
            &spec.package,
            json!({"version": "1.0.0"}),
        );
        e.spec.service_account = Some(olmv1::api::ServiceAccountReference {
            name: account.clone(),
        });
        e.metadata.annotations = Some(
            [
                (
                    "olm.operatorframework.io/migrated-from-subscription".to_string(),
                    subscription.clone(),
                ),
                (
                    "olm.operatorframework.io/migration-backup".to_string(),
                    backup.to_string(),
                ),
            ]
            .into(),
        );
        e
    };
    let tenant_exts: Api<ClusterExtension> = Api::all(as_tenant.clone());
    tenant_exts
        .create(
            &PostParams::default(),
            &extension(&ext, &format!("{tenant_ns}/{backup_name}")),
        )
        .await
        .expect("admitted: the tenant may use the installer");

    let exts: Api<ClusterExtension> = Api::all(admin.clone());
    let refused = support::extensions::wait_progressing_message(
        &exts,
        &ext,
        "not taking over OLM v0's installation",
    )
    .await;
    let message = support::extensions::condition(&refused, "Progressing")
        .expect("Progressing")
        .message;
    println!("refused: {message}");
    assert!(
        message.contains(&format!(
            "(Subscription {subscription}): refusing to take over"
        )),
        "{message}"
    );
    for object in &theirs[..theirs.len() - 1] {
        let named = format!(
            "{}/{} (not managed by a ClusterExtension, and not handed over to this one: it lacks the annotation {ADOPTABLE_BY}={ext}/",
            object["kind"].as_str().unwrap_or_default(),
            object["metadata"]["name"].as_str().unwrap_or_default()
        );
        assert!(message.contains(&named), "{named} in {message}");
    }
    assert!(message.ends_with("nothing was changed"), "{message}");
    let unchanged = |when: &'static str| {
        let admin = admin.clone();
        let theirs = theirs.clone();
        let before = before.clone();
        async move {
            let mut after = Vec::new();
            for object in &theirs {
                let live = olm_v0::read_again(&admin, object)
                    .await
                    .unwrap_or_else(|| panic!("{when}: {} deleted", object["metadata"]["name"]));
                after.push(fingerprint(&live));
            }
            assert_eq!(after, before, "{when}");
            after
        }
    };
    unchanged("refused").await;

    // A backup named outside the extension's namespace is refused unread: the same
    // words whether a ConfigMap of that name exists there (kube-system's
    // extension-apiserver-authentication does) or not.
    let mut seen = Vec::new();
    for (suffix, cm) in [
        ("x", "extension-apiserver-authentication"),
        ("y", "no-such-configmap"),
    ] {
        let name = format!("{ext}-{suffix}");
        tenant_exts
            .create(
                &PostParams::default(),
                &extension(&name, &format!("kube-system/{cm}")),
            )
            .await
            .expect("admitted");
        let e = support::extensions::wait_progressing_message(
            &exts,
            &name,
            "outside the extension's namespace",
        )
        .await;
        let message = support::extensions::condition(&e, "Progressing")
            .expect("Progressing")
            .message;
        assert!(
            !message.contains("not found") && !message.contains("data."),
            "{message}"
        );
        seen.push(message.replace(cm, "<name>"));
        tenant_exts
            .delete(&name, &Default::default())
            .await
            .expect("the tenant deletes its extension");
    }
    assert_eq!(seen[0], seen[1]);

    // The tenant deletes its extension: nothing of the other team goes with it.
    tenant_exts
        .delete(&ext, &Default::default())
        .await
        .expect("the tenant deletes its extension");
    support::eventually(60, "the tenant's extension gone", || {
        let exts = exts.clone();
        let ext = ext.clone();
        async move { exts.get_opt(&ext).await.ok()?.is_none().then_some(()) }
    })
    .await;
    let after = unchanged("after the tenant's extension was deleted").await;
    println!("the other team's objects after: {:#}", Value::Array(after));
}
