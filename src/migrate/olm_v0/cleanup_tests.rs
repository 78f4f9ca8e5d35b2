//! Tests of the cleanup plan ([`super::cleanup::plan`]): refusals, every partly-done
//! state, objects the v1 revision owns never deleted.

use super::backup::Backup;
use super::cleanup::{Observed, Step, component_label, plan};
use super::target::MIGRATED_FROM_ANNOTATION;
use serde_json::{Value, json};

const LABEL: &str = "operators.coreos.com/demo.ops";

fn backup() -> Backup {
    Backup {
        subscription: json!({"apiVersion": "operators.coreos.com/v1alpha1", "kind": "Subscription",
            "metadata": {"name": "demo", "namespace": "ops"}, "spec": {"name": "demo"}}),
        installed_csv: "demo.v1.0.0".into(),
        version: "1.0.0".into(),
        extension: json!({}),
        installer: vec![json!({})],
        operator_condition: None,
    }
}

fn extension(installed: &str, progressing: &str) -> Value {
    json!({"apiVersion": "olm.operatorframework.io/v1", "kind": "ClusterExtension",
    "metadata": {"name": "demo", "generation": 2,
        "annotations": {MIGRATED_FROM_ANNOTATION: "ops/demo"}},
    "status": {"conditions": [
        {"type": "Installed", "status": installed, "reason": "Succeeded", "message": "", "observedGeneration": 2},
        {"type": "Progressing", "status": "True", "reason": progressing, "message": "", "observedGeneration": 2},
    ]}})
}

fn object(kind: &str, ns: &str, name: &str, owned: bool, v0: bool) -> Value {
    let mut labels = serde_json::Map::new();
    if owned {
        labels.insert(
            "olm.operatorframework.io/owner-kind".into(),
            "ClusterExtension".into(),
        );
        labels.insert("olm.operatorframework.io/owner-name".into(), "demo".into());
    }
    if v0 {
        labels.insert(LABEL.into(), "".into());
        labels.insert("olm.managed".into(), "true".into());
    }
    let api = match kind {
        "ClusterRole" | "ClusterRoleBinding" | "Role" | "RoleBinding" => {
            "rbac.authorization.k8s.io/v1"
        }
        "ValidatingWebhookConfiguration" => "admissionregistration.k8s.io/v1",
        "CustomResourceDefinition" => "apiextensions.k8s.io/v1",
        "Deployment" => "apps/v1",
        "OperatorCondition" => "operators.coreos.com/v2",
        _ => "v1",
    };
    json!({"apiVersion": api, "kind": kind, "metadata": {"name": name, "namespace": ns, "labels": labels}})
}

/// A takeover done: the revision's objects (carrying v0's labels too where they were
/// v0's), v0-named RBAC and a suffixed webhook configuration, the Operator object.
fn taken_over() -> Observed {
    Observed {
        namespace: "ops".into(),
        name: "demo".into(),
        backup: Some(Ok(backup())),
        extension: Some(extension("True", "Succeeded")),
        operator_object: Some(json!({"metadata": {"name": "demo.ops"}})),
        labelled: vec![
            object("Deployment", "ops", "demo-controller", true, true),
            object(
                "CustomResourceDefinition",
                "",
                "widgets.example.com",
                true,
                true,
            ),
            object("ClusterRole", "", "demo.v1.0.0-XyZ", false, true),
            object("ClusterRoleBinding", "", "demo.v1.0.0-XyZ", false, true),
            object("Role", "ops", "demo-service-cert", false, true),
            object(
                "ValidatingWebhookConfiguration",
                "",
                "vdemo-abcde",
                false,
                true,
            ),
            object("OperatorCondition", "ops", "demo.v1.0.0", true, true),
        ],
        owned: vec![
            object("ClusterRole", "", "demo.v1.0.0-demo-abc", true, false),
            object(
                "ClusterRoleBinding",
                "",
                "demo.v1.0.0-demo-abc",
                true,
                false,
            ),
            object("ValidatingWebhookConfiguration", "", "vdemo", true, false),
        ],
        operator_condition_served: true,
        ..Observed::default()
    }
}

fn deleted(p: &super::cleanup::Plan) -> Vec<String> {
    p.steps
        .iter()
        .filter_map(|s| match s {
            Step::Delete { target, .. } => Some(target.to_string()),
            _ => None,
        })
        .collect()
}

#[test]
fn a_finished_takeover_deletes_v0_only_objects_strips_labels_then_deletes_the_operator() {
    let p = plan(&taken_over());
    assert_eq!(p.refused, None);
    assert_eq!(
        deleted(&p),
        [
            "ClusterRole demo.v1.0.0-XyZ",
            "ClusterRoleBinding demo.v1.0.0-XyZ",
            "Role ops/demo-service-cert",
            "ValidatingWebhookConfiguration vdemo-abcde",
        ]
    );
    let relabelled: Vec<String> = p
        .steps
        .iter()
        .filter_map(|s| match s {
            Step::RemoveLabels { target, labels } => {
                assert_eq!(labels, &[LABEL]);
                Some(target.to_string())
            }
            _ => None,
        })
        .collect();
    assert_eq!(
        relabelled,
        [
            "Deployment ops/demo-controller",
            "CustomResourceDefinition widgets.example.com",
            "OperatorCondition ops/demo.v1.0.0",
        ]
    );
    // The Operator object after every label is gone; deletions before the labels.
    let last = p.steps.last().expect("steps");
    assert_eq!(
        last,
        &Step::DeleteOperator {
            name: "demo.ops".into()
        }
    );
    let first_relabel = p
        .steps
        .iter()
        .position(|s| matches!(s, Step::RemoveLabels { .. }));
    let last_delete = p
        .steps
        .iter()
        .rposition(|s| matches!(s, Step::Delete { .. }));
    assert!(last_delete < first_relabel);
    assert!(p.steps.iter().all(|s| !s.describe().is_empty()));
}

#[test]
fn objects_the_revision_owns_are_never_deleted() {
    let p = plan(&taken_over());
    let o = taken_over();
    let owned: Vec<String> = o
        .labelled
        .iter()
        .chain(&o.owned)
        .filter(|v| super::cleanup::owned_by(v, "demo"))
        .map(|v| super::convert::Target::of(v).to_string())
        .collect();
    for d in deleted(&p) {
        assert!(!owned.contains(&d), "{d} is the revision's");
    }
    assert!(
        !deleted(&p)
            .iter()
            .any(|d| d.contains("CustomResourceDefinition"))
    );
}

#[test]
fn refused_unless_installed_and_rolled_out() {
    for (installed, progressing) in [
        ("False", "Succeeded"),
        ("True", "Retrying"),
        ("Unknown", "Rollout"),
    ] {
        let mut o = taken_over();
        o.extension = Some(extension(installed, progressing));
        let p = plan(&o);
        let why = p.refused.expect("refused");
        assert!(why.contains("not Installed and rolled out"), "{why}");
        assert!(p.steps.is_empty());
    }
    // A condition of an older generation does not count.
    let mut o = taken_over();
    o.extension.as_mut().expect("ext")["metadata"]["generation"] = json!(3);
    assert!(plan(&o).refused.is_some());
}

#[test]
fn refused_without_backup_extension_or_while_v0_manages() {
    let mut o = taken_over();
    o.backup = None;
    assert!(plan(&o).refused.expect("refused").contains("no backup"));
    let mut o = taken_over();
    o.extension = None;
    assert!(plan(&o).refused.expect("refused").contains("convert"));
    let mut o = taken_over();
    o.subscription = Some(json!({}));
    assert!(
        plan(&o)
            .refused
            .expect("refused")
            .contains("OLM v0 manages")
    );
    let mut o = taken_over();
    o.extension.as_mut().expect("ext")["metadata"]["annotations"] = json!({});
    assert!(plan(&o).refused.expect("refused").contains("left alone"));
}

#[test]
fn without_a_replacement_v0_rbac_and_webhooks_stay() {
    let mut o = taken_over();
    o.owned.clear();
    let p = plan(&o);
    assert!(deleted(&p).is_empty(), "{:?}", deleted(&p));
    assert_eq!(p.kept.len(), 4, "{:?}", p.kept);
    // Kept objects lose v0's labels all the same (else the Operator comes back).
    assert!(p.steps.iter().any(
        |s| matches!(s, Step::RemoveLabels { target, .. } if target.name == "demo.v1.0.0-XyZ")
    ));
}

#[test]
fn aggregate_cluster_roles_are_kept() {
    let mut o = taken_over();
    let mut agg = object(
        "ClusterRole",
        "",
        "widgets.example.com-v1-admin",
        false,
        true,
    );
    agg["metadata"]["ownerReferences"] =
        json!([{"kind": "CustomResourceDefinition", "name": "widgets.example.com"}]);
    o.labelled.push(agg);
    let p = plan(&o);
    assert!(!deleted(&p).iter().any(|d| d.contains("-v1-admin")));
    assert!(p.kept.iter().any(|k| k.contains("aggregate")));
}

#[test]
fn partly_done_states_plan_only_what_remains() {
    // Deletions done, labels not yet removed.
    let mut o = taken_over();
    o.labelled.retain(|v| super::cleanup::owned_by(v, "demo"));
    let p = plan(&o);
    assert!(deleted(&p).is_empty());
    assert_eq!(p.steps.len(), 4); // 3 relabels + the Operator
    // Labels gone, the Operator object still there (OLM v0 re-created it meanwhile).
    o.labelled.clear();
    let p = plan(&o);
    assert_eq!(
        p.steps,
        [Step::DeleteOperator {
            name: "demo.ops".into()
        }]
    );
    // Everything done: nothing to do.
    o.operator_object = None;
    let p = plan(&o);
    assert_eq!(p.refused, None);
    assert!(p.steps.is_empty());
}

#[test]
fn copied_csvs_go() {
    let mut o = taken_over();
    o.copied_csvs = vec![json!({"apiVersion": "operators.coreos.com/v1alpha1",
        "kind": "ClusterServiceVersion", "metadata": {"name": "demo.v1.0.0", "namespace": "other"}})];
    let p = plan(&o);
    assert!(
        p.steps
            .iter()
            .any(|s| matches!(s, Step::DeleteCopiedCsv { target } if target.namespace == "other"))
    );
}

#[test]
fn operator_condition_env_is_removed_only_when_olmv1_does_not_manage_it() {
    let mut o = taken_over();
    o.owned_deployments = vec![json!({"apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "demo-controller", "namespace": "ops"},
        "spec": {"template": {"spec": {"containers": [
            {"name": "a", "env": [{"name": "X"}, {"name": "OPERATOR_CONDITION_NAME", "value": "demo.v1.0.0"}]},
            {"name": "b"}]}}}})];
    assert!(
        !plan(&o)
            .steps
            .iter()
            .any(|s| matches!(s, Step::RemoveEnv { .. }))
    );
    o.operator_condition_served = false;
    let p = plan(&o);
    let env: Vec<&Step> = p
        .steps
        .iter()
        .filter(|s| matches!(s, Step::RemoveEnv { .. }))
        .collect();
    assert_eq!(env.len(), 1);
    assert!(matches!(env[0], Step::RemoveEnv { containers, .. } if containers == &["a"]));
    assert!(matches!(p.steps.last(), Some(Step::RemoveEnv { .. })));
}

#[test]
fn the_component_label_and_operator_name() {
    assert_eq!(component_label("demo", "ops"), LABEL);
    assert_eq!(
        super::cleanup::operator_name(&"p".repeat(70), "ns").len(),
        63
    );
}

#[test]
fn v0_webhook_configurations_of_the_same_definition_go_others_stay() {
    let generated = |name: &str, from: &str, tied: bool| {
        let mut v = object("ValidatingWebhookConfiguration", "", name, false, false);
        v["metadata"]["labels"][super::cleanup::WEBHOOK_DESCRIPTION_LABEL] = json!(from);
        if tied {
            v["metadata"]["labels"]["olm.owner"] = json!("other.v1.0.0");
        }
        v
    };
    let mut o = taken_over();
    o.v0_webhook_configurations = vec![
        // the revision owns `vdemo`: OLM v0's copy of that definition goes
        generated("vdemo-q7x2k", "vdemo", false),
        // another operator's definition, and one still tied to a CSV: left alone
        generated("vother-abcde", "vother", false),
        generated("vdemo-zzzzz", "vdemo", true),
        // also component-labelled (already in `labelled`): deleted once
        generated("vdemo-abcde", "vdemo", false),
    ];
    let d = deleted(&plan(&o));
    assert!(
        d.contains(&"ValidatingWebhookConfiguration vdemo-q7x2k".to_string()),
        "{d:?}"
    );
    for kept in ["vother-abcde", "vdemo-zzzzz"] {
        assert!(!d.iter().any(|x| x.ends_with(kept)), "{kept}: {d:?}");
    }
    assert_eq!(d.iter().filter(|x| x.ends_with("vdemo-abcde")).count(), 1);
    // without a configuration of its own for that definition nothing goes
    o.owned
        .retain(|v| v["kind"] != "ValidatingWebhookConfiguration");
    assert!(
        !deleted(&plan(&o))
            .iter()
            .any(|x| x.ends_with("vdemo-q7x2k"))
    );
}
