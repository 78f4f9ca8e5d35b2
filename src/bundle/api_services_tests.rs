//! Owned APIServices (docs/concepts/rendering.md §5.5 item 10): the APIService, the
//! Service and certificate shared with webhooks, the cert volumes, the auth-delegator
//! and auth-reader bindings, validation, and the installer RBAC that covers them.

use super::*;
use crate::preflight::permissions::rbac::{BundledRbac, installer_rbac};
use pretty_assertions::assert_eq;

/// The all-namespaces bundle whose deployment also serves `v1alpha1.metrics.example.com`
/// (plus `extra` entries).
fn with_api_service(bundle: &str, extra: &[Value]) -> tempfile::TempDir {
    let dir = temp_copy(bundle);
    edit_csv(dir.path(), |csv| {
        let mut owned = vec![json!({
            "name": "v1alpha1.metrics.example.com", "group": "metrics.example.com",
            "version": "v1alpha1", "kind": "Metric", "displayName": "Metric",
            "deploymentName": "widget-operator-controller", "containerPort": 6443,
        })];
        owned.extend(extra.iter().cloned());
        csv["spec"]["apiservicedefinitions"] = json!({"owned": owned});
    });
    dir
}

fn render_dir(dir: &Path, config: Option<&Value>, options: &RenderOptions) -> Vec<Value> {
    let b = load_dir(dir, &LoadOptions::default()).unwrap();
    render(&b, "widget-system", config, options).unwrap()
}

fn one<'a>(objects: &'a [Value], kind: &str, name: &str) -> &'a Value {
    let found: Vec<&Value> = find(objects, kind)
        .into_iter()
        .filter(|o| o["metadata"]["name"] == json!(name))
        .collect();
    assert_eq!(found.len(), 1, "{kind} {name}");
    found[0]
}

#[test]
fn owned_api_service_renders_as_olm_v0_installs_it() {
    let dir = with_api_service("all-namespaces", &[]);
    let objects = render_dir(dir.path(), None, &cm());
    let api = one(&objects, "APIService", "v1alpha1.metrics.example.com");
    assert_eq!(
        api,
        &json!({
            "apiVersion": "apiregistration.k8s.io/v1", "kind": "APIService",
            "metadata": {"name": "v1alpha1.metrics.example.com", "annotations": {
                "cert-manager.io/inject-ca-from": "widget-system/widget-operator-controller-service-cert"}},
            "spec": {"group": "metrics.example.com", "version": "v1alpha1",
                "groupPriorityMinimum": 2000, "versionPriority": 15,
                "service": {"namespace": "widget-system", "name": "widget-operator-controller-service", "port": 6443}},
        })
    );
    let svc = one(&objects, "Service", "widget-operator-controller-service");
    assert_eq!(
        svc["spec"],
        json!({"ports": [{"name": "6443", "port": 6443, "targetPort": 6443}],
            "selector": {"control-plane": "controller-manager"}})
    );
    let cert = one(
        &objects,
        "Certificate",
        "widget-operator-controller-service-cert",
    );
    assert_eq!(
        cert["spec"]["dnsNames"][1],
        json!("widget-operator-controller-service.widget-system.svc")
    );
    assert_eq!(find(&objects, "Issuer").len(), 1);
    let subjects = json!([{"kind": "ServiceAccount", "name": "widget-operator", "namespace": "widget-system"}]);
    let crb = one(
        &objects,
        "ClusterRoleBinding",
        "widget-operator-controller-service-system:auth-delegator",
    );
    assert_eq!(
        crb["roleRef"],
        json!({"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "system:auth-delegator"})
    );
    assert_eq!(crb["subjects"], subjects);
    let rb = one(
        &objects,
        "RoleBinding",
        "widget-operator-controller-service-auth-reader",
    );
    assert_eq!(rb["metadata"]["namespace"], json!("kube-system"));
    assert_eq!(
        rb["roleRef"],
        json!({"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "extension-apiserver-authentication-reader"})
    );
    assert_eq!(rb["subjects"], subjects);
    // The serving Secret is mounted at OLM v0's two certificate paths.
    let dep = one(&objects, "Deployment", "widget-operator-controller");
    let pod = &dep["spec"]["template"]["spec"];
    let volumes: Vec<(&str, &str)> = pod["volumes"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|v| Some((v["name"].as_str()?, v["secret"]["secretName"].as_str()?)))
        .collect();
    let secret = "widget-operator-controller-service-cert";
    assert_eq!(
        volumes,
        vec![("apiservice-cert", secret), ("webhook-cert", secret)]
    );
    assert_eq!(
        pod["volumes"][1]["secret"]["items"],
        json!([{"key": "tls.crt", "path": "apiserver.crt"}, {"key": "tls.key", "path": "apiserver.key"}])
    );
    let mounts = &pod["containers"][0]["volumeMounts"];
    let paths: Vec<&str> = mounts
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|m| m["mountPath"].as_str())
        .collect();
    assert!(
        paths.contains(&"/apiserver.local.config/certificates"),
        "{paths:?}"
    );
    assert!(
        paths.contains(&"/tmp/k8s-webhook-server/serving-certs"),
        "{paths:?}"
    );
    // Deterministic.
    assert_eq!(objects, render_dir(dir.path(), None, &cm()));
}

#[test]
fn api_service_and_webhooks_of_one_deployment_share_service_and_certificate() {
    let extra = json!({"name": "v1.metrics.example.com", "group": "metrics.example.com",
        "version": "v1", "kind": "Metric", "deploymentName": "widget-operator-controller"});
    let dir = with_api_service("webhook-validating", &[extra]);
    let objects = render_dir(
        dir.path(),
        Some(&json!({"watchNamespace": "team-a"})),
        &cm(),
    );
    assert_eq!(find(&objects, "Certificate").len(), 1);
    let svc = one(&objects, "Service", "widget-operator-controller-service");
    assert_eq!(
        svc["spec"]["ports"],
        json!([
            {"name": "443", "port": 443, "targetPort": 443},
            {"name": "443", "port": 443, "targetPort": 9443},
            {"name": "6443", "port": 6443, "targetPort": 6443},
        ])
    );
    let v1 = one(&objects, "APIService", "v1.metrics.example.com");
    assert_eq!(v1["spec"]["service"]["port"], json!(443));
    assert_eq!(find(&objects, "APIService").len(), 2);
    // One pair of bindings per serving deployment.
    assert_eq!(
        find(&objects, "RoleBinding")
            .iter()
            .filter(|r| r["metadata"]["namespace"] == json!("kube-system"))
            .count(),
        1
    );
}

#[test]
fn openshift_service_ca_annotates_the_api_service() {
    let dir = with_api_service("all-namespaces", &[]);
    let options = RenderOptions {
        cert_provider: CertProvider::OpenShiftServiceCa,
        ..Default::default()
    };
    let objects = render_dir(dir.path(), None, &options);
    let api = one(&objects, "APIService", "v1alpha1.metrics.example.com");
    assert_eq!(
        api["metadata"]["annotations"],
        json!({"service.beta.openshift.io/inject-cabundle": "true"})
    );
    assert!(find(&objects, "Certificate").is_empty());
}

#[test]
fn api_services_are_validated() {
    let dup = json!({"name": "again", "group": "metrics.example.com", "version": "v1alpha1",
        "deploymentName": "widget-operator-controller"});
    let missing = json!({"name": "v2.metrics.example.com", "group": "metrics.example.com",
        "version": "v2", "deploymentName": "nope"});
    let empty = json!({"name": "bad", "deploymentName": "widget-operator-controller"});
    let dir = with_api_service("all-namespaces", &[dup, missing, empty]);
    let errs = validation_errors(dir.path(), CertProvider::CertManager);
    assert_eq!(
        errs,
        vec![
            "cluster service version contains duplicate owned apiservice definition 'v1alpha1.metrics.example.com'",
            "owned apiservice definition 'v2.metrics.example.com' references non-existent deployment 'nope'",
            "owned apiservice definition 'bad' must set group and version",
        ]
    );
    // Without a certificate provider: upstream's refusal.
    let dir = with_api_service("all-namespaces", &[]);
    assert_eq!(
        validation_errors(dir.path(), CertProvider::None),
        vec!["unsupported bundle: apiServiceDefintions are not supported"]
    );
    assert!(validation_errors(dir.path(), CertProvider::CertManager).is_empty());
}

#[test]
fn installer_rbac_covers_api_services_and_their_bindings() {
    let dir = with_api_service("all-namespaces", &[]);
    let objects = render_dir(dir.path(), None, &cm());
    let rbac = installer_rbac(&objects, "widget-system", "ext", BundledRbac::Include).unwrap();
    let rules = rbac.cluster_role["rules"].as_array().unwrap();
    let grants = |group: &str, resource: &str, verb: &str, name: Option<&str>| {
        rules.iter().any(|r| {
            r["apiGroups"] == json!([group])
                && r["resources"] == json!([resource])
                && r["verbs"].as_array().unwrap().contains(&json!(verb))
                && name.is_none_or(|n| {
                    r["resourceNames"]
                        .as_array()
                        .is_some_and(|ns| ns.contains(&json!(n)))
                })
        })
    };
    assert!(
        grants("apiregistration.k8s.io", "apiservices", "create", None),
        "{rules:#?}"
    );
    assert!(
        grants(
            "apiregistration.k8s.io",
            "apiservices",
            "update",
            Some("v1alpha1.metrics.example.com")
        ),
        "{rules:#?}"
    );
    let rbac_group = "rbac.authorization.k8s.io";
    assert!(
        grants(
            rbac_group,
            "clusterroles",
            "bind",
            Some("system:auth-delegator")
        ),
        "{rules:#?}"
    );
    assert!(
        grants(
            rbac_group,
            "roles",
            "bind",
            Some("extension-apiserver-authentication-reader")
        ),
        "{rules:#?}"
    );
    assert!(
        grants(rbac_group, "rolebindings", "create", None),
        "{rules:#?}"
    );
    assert!(
        grants(rbac_group, "clusterrolebindings", "create", None),
        "{rules:#?}"
    );
}
