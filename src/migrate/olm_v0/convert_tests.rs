//! The convert and rollback plans: every step in its order, and every partly-done state
//! (each step done in turn, as by an interrupted run) planning exactly the steps that
//! remain, down to nothing (docs/how-to/switch-from-olm-v0.md, "convert", "rollback").

use super::backup::{self, Backup, configmap_name};
use super::convert::{self, CSV_FINALIZER, Observed, Step, Target};
use super::rollback;
use super::*;
use serde_json::json;

const CSV: &str = "demo-operator.v1.2.0";

fn eligible_check() -> Check {
    Check {
        subscription: "ops/demo".into(),
        package: "demo-operator".into(),
        installed_csv: Some(CSV.into()),
        version: Some("1.2.0".into()),
        eligible: true,
        blockers: vec![],
        cluster_extension: json!({
            "apiVersion": "olm.operatorframework.io/v1", "kind": "ClusterExtension",
            "metadata": {"name": "demo", "annotations": {MIGRATED_FROM_ANNOTATION: "ops/demo"}},
            "spec": {"namespace": "ops", "serviceAccount": {"name": "demo-installer"},
                     "source": {"sourceType": "Catalog", "catalog": {"packageName": "demo-operator"}}}}),
        cluster_catalog: Some(CatalogPlan {
            name: "demo-catalog".into(),
            reused: true,
            manifest: None,
        }),
        installer: Installer {
            service_account: "demo-installer".into(),
            namespace: "ops".into(),
            bundle_image: None,
            rbac_command: None,
            rbac: None,
        },
        v0_objects: vec![],
    }
}

fn subscription() -> Value {
    json!({"apiVersion": "operators.coreos.com/v1alpha1", "kind": "Subscription",
        "metadata": {"name": "demo", "namespace": "ops", "uid": "u1", "resourceVersion": "7",
            "labels": {"operators.coreos.com/demo-operator.ops": ""}},
        "spec": {"name": "demo-operator", "source": "cat", "sourceNamespace": "olm", "channel": "stable"},
        "status": {"installedCSV": CSV}})
}

fn installer() -> Vec<Value> {
    vec![
        json!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "demo-installer", "namespace": "ops"}}),
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "metadata": {"name": "demo-installer"}}),
    ]
}

fn csv_owner_labels() -> Value {
    json!({"olm.owner": CSV, "olm.owner.kind": "ClusterServiceVersion", "olm.owner.namespace": "ops", "olm.managed": "true"})
}

fn csv_ref() -> Value {
    json!({"apiVersion": "operators.coreos.com/v1alpha1", "kind": "ClusterServiceVersion",
        "name": CSV, "uid": "csv-uid", "controller": false, "blockOwnerDeletion": false})
}

/// A v0 installation as OLM v0 leaves it, nothing of the convert done.
fn fresh() -> Observed {
    let check = eligible_check();
    let sub = subscription();
    Observed {
        namespace: "ops".into(),
        name: "demo".into(),
        proposed: Some(backup::propose(&check, &sub, Ok(installer()), None)),
        subscription: Some(sub),
        check: Some(check),
        backup: None,
        installer_missing: installer(),
        catalog_exists: true,
        csv: Some(json!({"metadata": {"name": CSV, "namespace": "ops",
            "finalizers": [CSV_FINALIZER]},
            "spec": {"customresourcedefinitions": {"owned": [{"name": "widgets.example.com"}],
                "required": [{"name": "gadgets.example.com"}]}}})),
        copied_csvs: vec![json!({"metadata": {"name": CSV, "namespace": "team-a"}})],
        install_plans: vec![
            json!({"metadata": {"name": "install-abcde", "namespace": "ops"},
            "status": {"phase": "Complete"}}),
        ],
        tied: vec![
            json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
                "metadata": {"name": "demo-operator.v1.2.0-abc", "resourceVersion": "11", "labels": csv_owner_labels()}}),
            json!({"apiVersion": "apps/v1", "kind": "Deployment",
                "metadata": {"name": "demo-controller", "namespace": "ops", "resourceVersion": "12",
                    "labels": csv_owner_labels(), "ownerReferences": [csv_ref()]}}),
            json!({"apiVersion": "v1", "kind": "Service",
                "metadata": {"name": "demo-controller-service", "namespace": "ops", "resourceVersion": "13",
                    "labels": {"olm.managed": "true"}, "ownerReferences": [csv_ref()]}}),
        ],
        untied_handed_over: vec![json!({"apiVersion": "apiextensions.k8s.io/v1",
            "kind": "CustomResourceDefinition",
            "metadata": {"name": "widgets.example.com", "labels": {"olm.managed": "true"}}})],
        backup_uid: None,
        extension: None,
        operator_condition: None,
        guard: convert::GuardState::Unsupported,
    }
}

/// The adoption mark of the backup `done` writes ([`done`]: UID `backup-uid`).
const MARK: &str = "demo/backup-uid";

/// `obj` as `migrate convert` hands it over.
fn marked(obj: &Value) -> Value {
    let mut obj = obj.clone();
    obj["metadata"]["annotations"] = json!({ADOPTABLE_BY: MARK});
    obj
}

const ADOPTABLE_BY: &str = crate::apply::ownership::ADOPTABLE_BY_ANNOTATION;

fn kinds(steps: &[Step]) -> Vec<String> {
    steps
        .iter()
        .map(|s| {
            serde_json::to_value(s).unwrap()["step"]
                .as_str()
                .unwrap()
                .to_string()
        })
        .collect()
}

/// The state once `step` is done (what the executor's call leaves on the cluster).
fn done(o: &mut Observed, step: &Step) {
    let same = |v: &Value, t: &Target| {
        v["metadata"]["name"] == t.name.as_str()
            && v["metadata"]["namespace"].as_str().unwrap_or("") == t.namespace
    };
    match step {
        Step::CreateClusterCatalog { .. } => o.catalog_exists = true,
        Step::WriteBackup { manifest } => {
            o.backup = Some(Backup::from_configmap(manifest));
            o.backup_uid = Some("backup-uid".into());
        }
        Step::MarkForAdoption { target, .. } => {
            for obj in o.untied_handed_over.iter_mut() {
                if Target::of(obj) == *target {
                    *obj = marked(obj);
                }
            }
        }
        Step::CreateInstaller { .. } => o.installer_missing.clear(),
        Step::DeleteSubscription { .. } => o.subscription = None,
        Step::DeleteInstallPlan { target } => o.install_plans.retain(|p| !same(p, target)),
        Step::Untie { target, .. } => o.tied.retain(|t| Target::of(t) != *target),
        Step::RemoveCsvFinalizer { .. } => {
            if let Some(csv) = &mut o.csv {
                csv["metadata"]["finalizers"] = json!([]);
            }
        }
        Step::DeleteCsv { .. } => o.csv = None,
        Step::DeleteCopiedCsv { target } => o.copied_csvs.retain(|c| !same(c, target)),
        Step::CreateClusterExtension { manifest } => o.extension = Some(manifest.clone()),
        Step::GuardPackage { .. } => {
            o.guard = if o.extension.is_some() {
                convert::GuardState::Owned
            } else {
                convert::GuardState::Unowned
            }
        }
    }
}

#[test]
fn convert_orders_backup_installer_subscription_untie_finalizer_csv_extension() {
    let p = convert::plan(&fresh());
    assert_eq!(p.refused, None);
    assert_eq!(
        kinds(&p.steps),
        [
            "writeBackup",
            "createInstaller",
            "deleteSubscription",
            "deleteInstallPlan",
            "markForAdoption",
            "untie",
            "untie",
            "untie",
            "removeCsvFinalizer",
            "deleteCsv",
            "deleteCopiedCsv",
            "createClusterExtension",
        ]
    );
    let text: Vec<String> = p.steps.iter().map(Step::describe).collect();
    // The CRD the CSV owns (not the one it requires) is handed over on its own, every
    // object tied to the CSV by its untie, naming the extension and the backup.
    assert_eq!(
        text[4],
        "hand CustomResourceDefinition widgets.example.com over to ClusterExtension demo (annotation olm.operatorframework.io/adoptable-by)"
    );
    let Step::MarkForAdoption { backup, .. } = &p.steps[4] else {
        panic!("mark")
    };
    assert_eq!(backup.to_string(), "ConfigMap ops/olmv1-migration-demo");
    let handed: Vec<Option<String>> = p
        .steps
        .iter()
        .filter_map(|s| match s {
            Step::Untie { hand_over, .. } => Some(
                hand_over
                    .as_ref()
                    .map(|(extension, backup)| format!("{extension} {backup}")),
            ),
            _ => None,
        })
        .collect();
    assert_eq!(
        handed,
        vec![Some("demo ConfigMap ops/olmv1-migration-demo".to_string()); 3]
    );
    assert_eq!(
        convert::owned_crd_names(fresh().csv.as_ref().unwrap()),
        ["widgets.example.com"]
    );
    assert_eq!(
        text[5],
        "untie ClusterRole demo-operator.v1.2.0-abc from the CSV: remove labels olm.owner, olm.owner.kind, olm.owner.namespace, and hand it over to ClusterExtension demo (annotation olm.operatorframework.io/adoptable-by)"
    );
    assert_eq!(
        text[6],
        "untie Deployment ops/demo-controller from the CSV: remove labels olm.owner, olm.owner.kind, olm.owner.namespace and ownerReference ClusterServiceVersion/demo-operator.v1.2.0, and hand it over to ClusterExtension demo (annotation olm.operatorframework.io/adoptable-by)"
    );
    assert_eq!(
        text[9],
        "delete ClusterServiceVersion ops/demo-operator.v1.2.0 (propagationPolicy Orphan: its objects stay)"
    );
    let Step::CreateClusterExtension { manifest } = &p.steps[11] else {
        panic!("last step")
    };
    let annotations = &manifest["metadata"]["annotations"];
    assert_eq!(annotations[MIGRATED_FROM_ANNOTATION], "ops/demo");
    assert_eq!(
        annotations[backup::BACKUP_ANNOTATION],
        "ops/olmv1-migration-demo"
    );
    // Untie writes back the ownerReferences that are not the CSV's.
    let Step::Untie {
        keep_owner_references,
        resource_version,
        ..
    } = &p.steps[6]
    else {
        panic!("untie")
    };
    assert_eq!(keep_owner_references.as_deref(), Some(&[][..]));
    assert_eq!(resource_version.as_deref(), Some("12"));
}

#[test]
fn every_interrupted_convert_plans_exactly_the_remaining_steps_then_nothing() {
    let all = convert::plan(&fresh()).steps;
    for k in 0..=all.len() {
        let mut o = fresh();
        for step in &all[..k] {
            done(&mut o, step);
        }
        let p = convert::plan(&o);
        assert_eq!(p.refused, None, "after {k} steps");
        assert_eq!(p.steps, all[k..].to_vec(), "after {k} steps");
    }
}

/// On a cluster serving ValidatingAdmissionPolicies the package is guarded before OLM
/// v0 is stopped, and the guard made the ClusterExtension's once that exists; an
/// interrupted convert still plans exactly what remains, down to nothing.
#[test]
fn the_package_is_guarded_before_the_subscription_goes_and_owned_by_the_extension_last() {
    let guarded = || Observed {
        guard: convert::GuardState::Missing,
        ..fresh()
    };
    let all = convert::plan(&guarded()).steps;
    let k = kinds(&all);
    assert_eq!(k[..3], ["writeBackup", "guardPackage", "createInstaller"]);
    assert_eq!(k[k.len() - 2..], ["createClusterExtension", "guardPackage"]);
    assert_eq!(
        all[1].describe(),
        "guard package demo-operator: refuse a Subscription for it while ClusterExtension demo installs it (ValidatingAdmissionPolicy olmv1-migrated-package.demo-operator, owned by the ClusterExtension once it exists)"
    );
    let Step::GuardPackage { subscription, .. } = &all[1] else {
        panic!("guard")
    };
    assert_eq!(subscription, "ops/demo");
    for n in 0..=all.len() {
        let mut o = guarded();
        for step in &all[..n] {
            done(&mut o, step);
        }
        assert_eq!(
            convert::plan(&o).steps,
            all[n..].to_vec(),
            "after {n} steps"
        );
    }
    // Where the cluster cannot enforce one, no guard step at all.
    assert!(!kinds(&convert::plan(&fresh()).steps).contains(&"guardPackage".to_string()));
}

#[test]
fn a_csv_already_being_deleted_only_loses_its_finalizer_after_the_untie() {
    let mut o = fresh();
    o.csv = Some(json!({"metadata": {"name": CSV, "namespace": "ops",
        "deletionTimestamp": "2026-11-26T00:00:00Z", "finalizers": [CSV_FINALIZER]}}));
    let k = kinds(&convert::plan(&o).steps);
    let untie = k.iter().rposition(|s| s == "untie").unwrap();
    let fin = k.iter().position(|s| s == "removeCsvFinalizer").unwrap();
    assert!(untie < fin, "{k:?}");
    assert!(!k.contains(&"deleteCsv".to_string()), "{k:?}");
}

#[test]
fn a_blocked_subscription_is_refused_with_each_blocker_and_nothing_done() {
    let mut o = fresh();
    let check = o.check.as_mut().unwrap();
    check.eligible = false;
    check.blockers.push(Blocker {
        code: BlockerCode::ApiServices,
        message: "CSV x owns APIServices (a)".into(),
        action: "keep this operator on OLM v0".into(),
    });
    let p = convert::plan(&o);
    assert!(p.steps.is_empty());
    assert_eq!(
        p.refused.as_deref(),
        Some(
            "Subscription ops/demo is not eligible: CSV x owns APIServices (a) (what to do: keep this operator on OLM v0)"
        )
    );
}

#[test]
fn a_missing_cluster_catalog_is_created_then_awaited() {
    let mut o = fresh();
    let check = o.check.as_mut().unwrap();
    check.eligible = false;
    check.blockers.push(Blocker {
        code: BlockerCode::NotInCatalog,
        message: "no Serving ClusterCatalog".into(),
        action: "create it".into(),
    });
    check.cluster_catalog = Some(CatalogPlan {
        name: "cat-olm".into(),
        reused: false,
        manifest: Some(
            json!({"apiVersion": "olm.operatorframework.io/v1", "kind": "ClusterCatalog",
            "metadata": {"name": "cat-olm"}}),
        ),
    });
    o.catalog_exists = false;
    let p = convert::plan(&o);
    assert_eq!(kinds(&p.steps), ["createClusterCatalog"]);
    assert_eq!(
        p.then,
        "run convert again once ClusterCatalog cat-olm is Serving the package"
    );
    o.catalog_exists = true;
    let p = convert::plan(&o);
    assert!(p.steps.is_empty() && p.refused.is_none(), "{p:?}");
}

#[test]
fn refusals_name_what_to_do() {
    let mut o = fresh();
    o.extension = Some(json!({"metadata": {"name": "demo"}}));
    let p = convert::plan(&o);
    assert!(p.steps.is_empty());
    assert!(p.refused.unwrap().starts_with(
        "ClusterExtension demo already exists and is not the migration of Subscription ops/demo"
    ));
    let mut o = fresh();
    o.subscription = None;
    assert_eq!(
        convert::plan(&o).refused.as_deref(),
        Some(
            "Subscription ops/demo not found, and no backup of a convert in progress (ops/olmv1-migration-demo)"
        )
    );
    let mut o = fresh();
    o.backup = Some(Err("data.version is missing".into()));
    assert!(
        convert::plan(&o)
            .refused
            .unwrap()
            .contains("is unreadable (data.version is missing)")
    );
    let mut o = fresh();
    o.proposed = Some(backup::propose(
        o.check.as_ref().unwrap(),
        &subscription(),
        Err("pulling: denied".into()),
        None,
    ));
    assert_eq!(
        convert::plan(&o).refused.as_deref(),
        Some("the installer RBAC could not be computed: pulling: denied")
    );
}

#[test]
fn untie_takes_only_the_csvs_marks() {
    let other_owner = json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
        "metadata": {"name": "olm.og.og.admin-x", "labels": {"olm.owner": "og",
            "olm.owner.kind": "OperatorGroup", "olm.owner.namespace": "ops"}}});
    assert_eq!(convert::untie(&other_owner, CSV, "ops"), None);
    let other_namespace = json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
        "metadata": {"name": "x", "labels": {"olm.owner": CSV,
            "olm.owner.kind": "ClusterServiceVersion", "olm.owner.namespace": "elsewhere"}}});
    assert_eq!(convert::untie(&other_namespace, CSV, "ops"), None);
    let crd_ref = json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "name": "widgets.example.com", "uid": "c"});
    let secret = json!({"apiVersion": "v1", "kind": "Secret",
        "metadata": {"name": "s", "namespace": "ops", "ownerReferences": [crd_ref, csv_ref()]}});
    let Some(Step::Untie {
        labels,
        owner_references,
        keep_owner_references,
        ..
    }) = convert::untie(&secret, CSV, "ops")
    else {
        panic!("untie")
    };
    assert!(labels.is_empty());
    assert_eq!(
        owner_references,
        ["ClusterServiceVersion/demo-operator.v1.2.0"]
    );
    assert_eq!(keep_owner_references, Some(vec![crd_ref]));
}

#[test]
fn the_backup_reads_back_and_restores_the_subscription_at_the_installed_csv() {
    let b = backup::propose(&eligible_check(), &subscription(), Ok(installer()), None).unwrap();
    let cm = b.configmap();
    assert_eq!(cm["metadata"]["name"], "olmv1-migration-demo");
    assert_eq!(cm["metadata"]["labels"][backup::BACKUP_LABEL], "true");
    assert_eq!(Backup::from_configmap(&cm), Ok(b.clone()));
    let sub = b.restored_subscription();
    assert_eq!(sub["spec"]["startingCSV"], CSV);
    assert_eq!(sub["spec"]["channel"], "stable");
    assert_eq!(sub["metadata"].get("uid"), None);
    assert_eq!(sub.get("status"), None);
    let long = "a".repeat(300);
    assert!(configmap_name(&long).len() <= 253);
    assert_ne!(configmap_name(&long), configmap_name(&"a".repeat(301)));
}

fn converted_extension() -> Value {
    json!({"apiVersion": "olm.operatorframework.io/v1", "kind": "ClusterExtension",
        "metadata": {"name": "demo", "annotations": {MIGRATED_FROM_ANNOTATION: "ops/demo"},
            "finalizers": [crate::api::FINALIZER_EXTENSION]},
        "status": {"install": {"bundle": {"name": CSV, "version": "1.2.0"}}}})
}

fn converted() -> rollback::Observed {
    let b = backup::propose(&eligible_check(), &subscription(), Ok(installer()), None).unwrap();
    rollback::Observed {
        namespace: "ops".into(),
        name: "demo".into(),
        backup: Some(Ok(b)),
        subscription: None,
        extension: Some(converted_extension()),
        records: vec![Target {
            api_version: "v1".into(),
            kind: "ConfigMap".into(),
            namespace: "olmv1-system".into(),
            name: "olmv1-revision-demo".into(),
        }],
        install_plans: vec![],
        ..Default::default()
    }
}

fn rollback_done(o: &mut rollback::Observed, step: &rollback::Step) {
    use rollback::Step as S;
    match step {
        S::PauseExtension { .. } => {
            o.extension.as_mut().unwrap()["metadata"]["annotations"][rollback::PAUSED_ANNOTATION] =
                json!("true");
        }
        S::DeleteExtension { .. } => {
            o.extension.as_mut().unwrap()["metadata"]["deletionTimestamp"] = json!("now");
        }
        S::RemoveExtensionFinalizers { .. } => o.extension = None,
        S::RemoveProviderAnnotations { target, .. } => o.injected.retain(|(t, _)| t != target),
        S::DeleteProviderObject { target } => o.provider_objects.retain(|t| t != target),
        S::DeleteRevisionRecord { target } => {
            o.records.retain(|r| r != target);
            // The record named the revision's objects: without it, none are found.
            o.provider_objects.clear();
            o.injected.clear();
            o.api_services.clear();
        }
        S::AwaitCsv { .. } => o.csv_exists = true,
        S::LabelApiService {
            target,
            csv,
            namespace,
        } => {
            for a in &mut o.api_services {
                if &Target::of(a) == target {
                    a["metadata"]["labels"] = json!({"olm.owner": csv,
                        "olm.owner.kind": "ClusterServiceVersion", "olm.owner.namespace": namespace});
                }
            }
        }
        S::RestoreSubscription { manifest } => o.subscription = Some(manifest.clone()),
        S::AwaitInstallPlan { .. } if o.subscription.is_some() => {
            o.subscription.as_mut().unwrap()["status"] =
                json!({"installPlanRef": {"name": "install-xyz"}});
            // A stray one beside it (OLM v0 makes those on conflicts).
            o.install_plans.push(json!({
                "apiVersion": "operators.coreos.com/v1alpha1", "kind": "InstallPlan",
                "metadata": {"name": "install-stray", "namespace": "ops"},
                "spec": {"approved": false, "clusterServiceVersionNames": []}}));
            o.install_plans.push(json!({
                "apiVersion": "operators.coreos.com/v1alpha1", "kind": "InstallPlan",
                "metadata": {"name": "install-xyz", "namespace": "ops"},
                "spec": {"approved": false, "approval": "Manual",
                    "clusterServiceVersionNames": ["demo-operator.v1.2.0"]}}));
        }
        S::DeleteBackup { .. } => o.backup = None,
        S::AwaitInstallPlan { .. } => {}
        S::ApproveInstallPlan { .. } => o.install_plans[1]["spec"]["approved"] = json!(true),
    }
}

/// After any number of `all`'s steps from `start()`, the plan is exactly the rest.
fn assert_resumable(start: fn() -> rollback::Observed, all: &[rollback::Step]) {
    for k in 0..all.len() {
        let mut o = start();
        for step in &all[..k] {
            rollback_done(&mut o, step);
        }
        assert_eq!(rollback::plan(&o).steps, all[k..], "after {k} steps");
    }
}

#[test]
fn rollback_pauses_deletes_orphaning_then_restores_the_subscription_and_resumes() {
    let all = rollback::plan(&converted()).steps;
    let text: Vec<String> = all.iter().map(rollback::Step::describe).collect();
    assert_eq!(
        text,
        [
            "pause ClusterExtension demo (olm.operatorframework.io/paused: \"true\": it uninstalls nothing)",
            "delete ClusterExtension demo (propagationPolicy Orphan: its objects stay)",
            "remove finalizers olm.operatorframework.io/cleanup-unpack-cache from ClusterExtension demo",
            "create Subscription ops/demo with startingCSV demo-operator.v1.2.0",
            "delete the revision record ConfigMap olmv1-system/olmv1-revision-demo",
            "delete the backup ConfigMap ops/olmv1-migration-demo",
        ]
    );
    assert_resumable(converted, &all);
    let mut o = converted();
    for step in &all {
        rollback_done(&mut o, step);
    }
    assert!(
        rollback::plan(&o)
            .refused
            .unwrap()
            .starts_with("no backup ConfigMap ops/olmv1-migration-demo")
    );
}

fn target(api_version: &str, kind: &str, namespace: &str, name: &str) -> Target {
    Target {
        api_version: api_version.into(),
        kind: kind.into(),
        namespace: namespace.into(),
        name: name.into(),
    }
}

/// A webhook operator taken over with cert-manager: its Certificate, Issuer, webhook
/// configurations and the CRD's CA injection.
fn converted_with_webhooks() -> rollback::Observed {
    let mut o = converted();
    o.provider_objects = vec![
        target(
            "admissionregistration.k8s.io/v1",
            "ValidatingWebhookConfiguration",
            "",
            "vwidget.demo.io",
        ),
        target("cert-manager.io/v1", "Issuer", "ops", "demo-selfsigned"),
        target(
            "cert-manager.io/v1",
            "Certificate",
            "ops",
            "demo-service-cert",
        ),
    ];
    o.injected = vec![(
        target(
            "apiextensions.k8s.io/v1",
            "CustomResourceDefinition",
            "",
            "widgets.demo.io",
        ),
        vec!["cert-manager.io/inject-ca-from".into()],
    )];
    o
}

#[test]
fn rollback_of_a_webhook_operator_unties_the_certificate_provider_before_olm_v0_returns() {
    let all = rollback::plan(&converted_with_webhooks()).steps;
    let text: Vec<String> = all.iter().map(rollback::Step::describe).collect();
    assert_eq!(
        text[3..8],
        [
            "remove cert-manager.io/inject-ca-from from CustomResourceDefinition widgets.demo.io (OLM v0 puts its own CA there)",
            "delete Certificate ops/demo-service-cert (cert-manager would re-issue the Secret OLM v0 writes its own certificate into)",
            "delete Issuer ops/demo-selfsigned (it issued olmv1's certificates only)",
            "delete ValidatingWebhookConfiguration vwidget.demo.io (olmv1's: OLM v0 makes its own with its CA, and this one would fail every call once the pods serve OLM v0's certificate)",
            "create Subscription ops/demo with startingCSV demo-operator.v1.2.0",
        ]
    );
    assert!(text[8].starts_with("delete the revision record"));
    // Interrupted anywhere, the next run does exactly what is left.
    assert_resumable(converted_with_webhooks, &all);
    let mut o = converted_with_webhooks();
    o.unreadable_record = Some("JSON: EOF".into());
    let refused = rollback::plan(&o).refused.expect("refused");
    assert!(
        refused.contains("revision record is unreadable (JSON: EOF)"),
        "{refused}"
    );
}

#[test]
fn rollback_of_an_apiservice_operator_labels_it_for_the_csv_once_olm_v0_made_that() {
    let mut o = converted();
    o.api_services = vec![
        json!({"apiVersion": "apiregistration.k8s.io/v1", "kind": "APIService",
        "metadata": {"name": "v1.demo.io", "labels": {"olm.operatorframework.io/owner-name": "demo"}}}),
    ];
    let text = |o: &rollback::Observed| -> Vec<String> {
        rollback::plan(o)
            .steps
            .iter()
            .map(rollback::Step::describe)
            .collect()
    };
    let first = text(&o);
    assert_eq!(
        first[3..5],
        [
            "create Subscription ops/demo with startingCSV demo-operator.v1.2.0",
            "wait for OLM v0 to create ClusterServiceVersion ops/demo-operator.v1.2.0 again",
        ]
    );
    // Run up to the wait, then planned again: the label, then the rest.
    for step in &rollback::plan(&o).steps[..5] {
        rollback_done(&mut o, step);
    }
    let then = rollback::plan(&o).steps;
    assert_eq!(
        then[0].describe(),
        "label APIService v1.demo.io for ClusterServiceVersion ops/demo-operator.v1.2.0 (olm.owner: OLM v0 adopts an existing APIService only when it is labelled for the installing CSV)"
    );
    rollback_done(&mut o, &then[0]);
    assert!(
        text(&o)[0].starts_with("delete the revision record"),
        "{:?}",
        text(&o)
    );
}

#[test]
fn provider_objects_and_annotations_are_told_apart_from_the_operators_own() {
    use rollback::{provider_annotations, provider_object};
    assert!(provider_object("cert-manager.io/v1", "Certificate"));
    assert!(provider_object("cert-manager.io/v1", "Issuer"));
    assert!(provider_object(
        "admissionregistration.k8s.io/v1",
        "MutatingWebhookConfiguration"
    ));
    assert!(!provider_object("cert-manager.io/v1", "ClusterIssuer"));
    assert!(!provider_object("apps/v1", "Deployment"));
    assert!(!provider_object("v1", "Service"));
    assert!(rollback::provider_annotated("Service"));
    assert!(!rollback::provider_annotated("Deployment"));
    let tied = json!({"metadata": {"labels": convert::owner_labels("op.v1", "ops")}});
    assert!(convert::labelled_for(&tied, "op.v1", "ops"));
    assert!(!convert::labelled_for(&tied, "op.v1", "other"));
    let svc = json!({"metadata": {"annotations": {
        "service.beta.openshift.io/serving-cert-secret-name": "x", "other": "y"}}});
    assert_eq!(
        provider_annotations(&svc),
        ["service.beta.openshift.io/serving-cert-secret-name"]
    );
    assert!(provider_annotations(&json!({"metadata": {}})).is_empty());
}

#[test]
fn rollback_refuses_after_an_upgrade_or_for_another_extension() {
    let mut o = converted();
    o.extension.as_mut().unwrap()["status"]["install"]["bundle"] =
        json!({"name": "demo-operator.v1.3.0", "version": "1.3.0"});
    let p = rollback::plan(&o);
    assert!(p.steps.is_empty());
    assert!(
        p.refused.unwrap().starts_with(
            "ClusterExtension demo has installed demo-operator.v1.3.0 (version 1.3.0) since the switch from demo-operator.v1.2.0 (version 1.2.0): OLM v0 cannot go back"
        )
    );
    let mut o = converted();
    o.extension.as_mut().unwrap()["metadata"]["annotations"] = json!({});
    assert!(
        rollback::plan(&o)
            .refused
            .unwrap()
            .contains("is not the migration of")
    );
    // Nothing installed yet: rolled back as well.
    let mut o = converted();
    o.extension.as_mut().unwrap()["status"] = json!({});
    assert!(rollback::plan(&o).refused.is_none());
}

#[test]
fn the_pause_annotation_is_the_controllers() {
    assert_eq!(
        rollback::PAUSED_ANNOTATION,
        crate::controller::extension::plan::control::ANNOTATION_PAUSED
    );
}

#[test]
fn rollback_on_manual_approval_awaits_then_approves_exactly_the_installed_csv() {
    let manual = || {
        let mut o = converted();
        if let Some(Ok(b)) = o.backup.as_mut() {
            b.subscription["spec"]["installPlanApproval"] = json!("Manual");
        }
        o
    };
    let all = rollback::plan(&manual()).steps;
    let text: Vec<String> = all.iter().map(rollback::Step::describe).collect();
    assert_eq!(
        text[3..],
        [
            "create Subscription ops/demo with startingCSV demo-operator.v1.2.0",
            "wait for OLM v0's InstallPlan of demo-operator.v1.2.0 in ops (Manual approval)",
            "delete the revision record ConfigMap olmv1-system/olmv1-revision-demo",
            "delete the backup ConfigMap ops/olmv1-migration-demo",
        ]
    );
    // The Subscription restored, its InstallPlan not named yet: still waiting.
    let mut o = manual();
    for step in &all[..4] {
        rollback_done(&mut o, step);
    }
    assert!(matches!(
        rollback::plan(&o).steps[0],
        rollback::Step::AwaitInstallPlan { .. }
    ));
    // Waited: the InstallPlan is there, to approve; then only the record and backup go.
    let mut o = manual();
    for step in &all[..5] {
        rollback_done(&mut o, step);
    }
    let next = rollback::plan(&o).steps;
    assert_eq!(
        next.iter()
            .map(rollback::Step::describe)
            .collect::<Vec<_>>(),
        [
            "approve InstallPlan ops/install-xyz (it installs demo-operator.v1.2.0 only, the CSV still running: no upgrade)",
            "delete the revision record ConfigMap olmv1-system/olmv1-revision-demo",
            "delete the backup ConfigMap ops/olmv1-migration-demo",
        ]
    );
    rollback_done(&mut o, &next[0]);
    assert_eq!(rollback::plan(&o).steps, next[1..].to_vec());
    // An InstallPlan that installs more than the CSV is not approved.
    let mut o = manual();
    for step in &all[..5] {
        rollback_done(&mut o, step);
    }
    o.install_plans[1]["spec"]["clusterServiceVersionNames"] =
        json!(["demo-operator.v1.2.0", "dep.v1.0.0"]);
    assert_eq!(rollback::plan(&o).steps, next[1..].to_vec());
    // Automatic approval: nothing to wait for.
    assert!(!rollback::plan(&converted()).steps.iter().any(|s| matches!(
        s,
        rollback::Step::AwaitInstallPlan { .. } | rollback::Step::ApproveInstallPlan { .. }
    )));
}

#[test]
fn once_the_steps_ran_only_what_v0_did_again_is_done_again() {
    let all = convert::plan(&fresh()).steps;
    let mut o = fresh();
    for step in &all {
        done(&mut o, step);
    }
    assert!(convert::again(&o).is_empty());
    // catalog-operator put the owner labels back on the ClusterRole.
    o.tied.push(fresh().tied[0].clone());
    let again = convert::again(&o);
    assert_eq!(kinds(&again), ["untie"]);
    assert_eq!(
        again,
        all.iter()
            .filter(|s| matches!(s, Step::Untie { target, .. } if target.kind == "ClusterRole"))
            .cloned()
            .collect::<Vec<_>>()
    );
    // catalog-operator made an InstallPlan after the first read: it goes too. One it
    // shares with a Subscription that stays on OLM v0 stays (module install_plans).
    o.install_plans = fresh().install_plans;
    o.install_plans.push(
        json!({"metadata": {"name": "install-shared", "namespace": "ops",
        "ownerReferences": [{"kind": "Subscription", "name": "demo"},
            {"kind": "Subscription", "name": "other"}]},
        "spec": {"clusterServiceVersionNames": [CSV, "other.v1.0.0"]},
        "status": {"phase": "Complete"}}),
    );
    assert_eq!(kinds(&convert::again(&o)), ["deleteInstallPlan", "untie"]);
    assert!(!convert::plan(&o).steps.iter().any(|s| matches!(
        s,
        Step::DeleteInstallPlan { target } if target.name == "install-shared"
    )));
    o.install_plans
        .retain(|ip| ip["metadata"]["name"] != "install-shared");
    // While the CSV is being deleted, only the InstallPlan: its own deletion goes on.
    let mut deleting = fresh().csv.unwrap();
    deleting["metadata"]["deletionTimestamp"] = json!("2026-11-27T11:58:10Z");
    o.csv = Some(deleting);
    assert_eq!(kinds(&convert::again(&o)), ["deleteInstallPlan"]);
    // That InstallPlan re-created the CSV: it is stopped again like the first one,
    // untied before it is deleted (its finalizer deletes by OLM v0's labels).
    o.csv = fresh().csv;
    assert_eq!(
        kinds(&convert::again(&o)),
        [
            "deleteInstallPlan",
            "untie",
            "removeCsvFinalizer",
            "deleteCsv"
        ]
    );
    for step in convert::again(&o) {
        done(&mut o, &step);
    }
    assert!(convert::again(&o).is_empty());
    assert!(o.csv.is_none() && o.install_plans.is_empty() && o.tied.is_empty());
}

/// What was set in the OperatorCondition survives the convert: kept in the backup, and
/// put back only when the object was re-created without it (olm-v0 reference §1.4: OLM
/// v0's generator re-ties it to the CSV; e2e/migrate_v0.rs).
#[test]
fn an_operator_condition_recreated_empty_gets_back_what_was_set_in_it() {
    use convert::Restore;
    let held = json!([{"type": "Upgradeable", "status": "False", "reason": "Admin", "message": "not now"}]);
    let v0 = json!({"metadata": {"name": CSV, "uid": "old", "ownerReferences": [csv_ref()]},
        "spec": {"deployments": ["d"], "overrides": held}});
    let b = backup::propose(
        &eligible_check(),
        &subscription(),
        Ok(installer()),
        Some(&v0),
    )
    .unwrap();
    assert_eq!(Backup::from_configmap(&b.configmap()), Ok(b.clone()));
    let kept = b.operator_condition.as_ref();
    assert_eq!(
        kept,
        Some(&json!({"uid": "old", "spec": {"overrides": held}}))
    );
    let restore = |live: Option<&Value>| convert::restore_operator_condition(kept, live);
    // The same object, untied: nothing; still tied to the gone CSV, or gone: wait.
    let untied = json!({"metadata": {"uid": "old"}, "spec": {"overrides": held}});
    assert_eq!(restore(Some(&untied)), Restore::Nothing);
    assert_eq!(restore(Some(&v0)), Restore::Wait);
    assert_eq!(restore(None), Restore::Wait);
    // Re-created by the takeover: only the missing keys are put back.
    let by_v0 = json!({"metadata": {"uid": "v0", "ownerReferences": [csv_ref()]}, "spec": {}});
    assert_eq!(restore(Some(&by_v0)), Restore::Wait, "OLM v0's, GC'd yet");
    let recreated = json!({"metadata": {"uid": "new"}, "spec": {"deployments": ["d"]}});
    assert_eq!(
        restore(Some(&recreated)),
        Restore::Patch(json!({"spec": {"overrides": held}}))
    );
    let set_again = json!({"metadata": {"uid": "new"}, "spec": {"overrides": [{"type": "Upgradeable", "status": "True"}]}});
    assert_eq!(restore(Some(&set_again)), Restore::Nothing);
    // Nothing set, or an older backup without it: nothing to restore.
    let empty = json!({"metadata": {"uid": "old"}, "spec": {"deployments": ["d"]}});
    let b = backup::propose(
        &eligible_check(),
        &subscription(),
        Ok(installer()),
        Some(&empty),
    )
    .unwrap();
    let none = convert::restore_operator_condition(b.operator_condition.as_ref(), None);
    assert_eq!(none, Restore::Nothing);
    assert_eq!(
        convert::restore_operator_condition(None, None),
        Restore::Nothing
    );
}
