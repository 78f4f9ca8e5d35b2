//! Tests of the apply order.

use super::*;
use serde_json::json;

fn obj(api_version: &str, kind: &str, name: &str) -> Value {
    json!({"apiVersion": api_version, "kind": kind, "metadata": {"name": name}})
}

#[test]
fn phases_follow_the_dependency_order() {
    let objects = vec![
        obj(
            "admissionregistration.k8s.io/v1",
            "ValidatingWebhookConfiguration",
            "w",
        ),
        obj("example.com/v1", "Widget", "cr"),
        obj("apps/v1", "Deployment", "d"),
        obj("monitoring.coreos.com/v1", "ServiceMonitor", "m"),
        obj("rbac.authorization.k8s.io/v1", "ClusterRoleBinding", "crb"),
        obj("apiextensions.k8s.io/v1", "CustomResourceDefinition", "crd"),
        obj("v1", "ConfigMap", "cm"),
        obj("v1", "ServiceAccount", "sa"),
        obj("v1", "Namespace", "ns"),
        obj("rbac.authorization.k8s.io/v1", "ClusterRole", "cr"),
        obj("v1", "Service", "svc"),
        obj("autoscaling/v2", "HorizontalPodAutoscaler", "hpa"),
        obj("networking.k8s.io/v1", "NetworkPolicy", "np"),
        obj("v1", "PersistentVolumeClaim", "pvc"),
        obj("cert-manager.io/v1", "Certificate", "cert"),
        obj("v1", "Secret", "s"),
    ];
    let phases = apply_order(&objects);
    let kinds: Vec<PhaseKind> = phases.iter().map(|p| p.kind).collect();
    use PhaseKind::*;
    assert_eq!(
        kinds,
        vec![
            Namespaces,
            Policies,
            ServiceAccounts,
            Config,
            Storage,
            Crds,
            Roles,
            Bindings,
            Services,
            Workloads,
            Autoscalers,
            Monitoring,
            Other,
            Webhooks
        ]
    );
    let names = |p: &Phase| -> Vec<&str> {
        p.objects
            .iter()
            .map(|i| objects[*i]["metadata"]["name"].as_str().unwrap())
            .collect()
    };
    // input order inside a phase
    assert_eq!(names(&phases[3]), vec!["cm", "s"]);
    assert_eq!(names(&phases[8]), vec!["svc", "cert"]);
    // every object exactly once
    let mut all: Vec<usize> = phases.iter().flat_map(|p| p.objects.clone()).collect();
    all.sort();
    assert_eq!(all, (0..objects.len()).collect::<Vec<_>>());
}

#[test]
fn kind_alone_does_not_decide_the_phase() {
    // A custom kind named like a built-in one is not a built-in.
    assert_eq!(phase_of("example.com", "Deployment"), PhaseKind::Other);
    assert_eq!(phase_of("apps", "Deployment"), PhaseKind::Workloads);
    assert_eq!(phase_of("", "Secret"), PhaseKind::Config);
}

#[test]
fn empty_input_has_no_phases() {
    assert!(apply_order(&[]).is_empty());
}

#[test]
fn uninstall_reverses_and_puts_crds_last() {
    use PhaseKind::*;
    let order = uninstall_order(&[Crds, Namespaces, Workloads, Webhooks, Other, Roles, Crds]);
    assert_eq!(
        order,
        vec![Webhooks, Other, Workloads, Roles, Namespaces, Crds]
    );
}

#[test]
fn stages_join_the_phases_that_need_nothing_of_each_other() {
    let objects = vec![
        obj("apps/v1", "Deployment", "d"),
        obj("rbac.authorization.k8s.io/v1", "ClusterRoleBinding", "crb"),
        obj("rbac.authorization.k8s.io/v1", "ClusterRole", "cr"),
        obj("apiextensions.k8s.io/v1", "CustomResourceDefinition", "crd"),
        obj("v1", "ServiceAccount", "sa"),
        obj("v1", "Namespace", "ns"),
        obj("example.com/v1", "Widget", "w"),
    ];
    use PhaseKind::*;
    let stages: Vec<Vec<PhaseKind>> = apply_stages(&objects)
        .iter()
        .map(|s| s.iter().map(|p| p.kind).collect())
        .collect();
    assert_eq!(
        stages,
        vec![
            vec![Namespaces],
            vec![ServiceAccounts, Crds, Roles],
            vec![Bindings, Workloads],
            vec![Other],
        ]
    );
    // Every object once, in the phases of apply_order.
    let flat: Vec<Phase> = apply_stages(&objects).into_iter().flatten().collect();
    assert_eq!(flat, apply_order(&objects));
    // Without Roles, bindings still come after the CRDs' stage; the Deployment comes
    // with them.
    let stages = apply_stages(&objects[..2]);
    assert_eq!(stages.len(), 1);
    let stages = apply_stages(&objects[..4]);
    assert_eq!(stages.len(), 2);
    // Webhook configurations wait for the workloads that serve them.
    let mut with_webhook = objects.clone();
    with_webhook.push(obj(
        "admissionregistration.k8s.io/v1",
        "ValidatingWebhookConfiguration",
        "v",
    ));
    let last = apply_stages(&with_webhook).pop().map(|s| s[0].kind);
    assert_eq!(last, Some(Webhooks));
}
