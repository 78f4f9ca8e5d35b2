//! Tests of the bundle module: golden renders of the synthetic bundles in `testdata/`
//! (`UPDATE_GOLDEN=1` rewrites the expected files), validation messages, bad input, and
//! conformance over the shared real-world fixtures.

use super::*;
use pretty_assertions::assert_eq;
use serde_json::{Value, json};
use std::path::{Path, PathBuf};

#[path = "api_services_tests.rs"]
mod api_services;

fn testdata() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src/bundle/testdata")
}

fn load(name: &str) -> Bundle {
    load_dir(
        &testdata().join("bundles").join(name),
        &LoadOptions::default(),
    )
    .unwrap()
}

fn cm() -> RenderOptions {
    RenderOptions {
        cert_provider: CertProvider::CertManager,
        ..Default::default()
    }
}

fn render_yaml(bundle: &str, ns: &str, config: Option<&Value>) -> String {
    let objects = render(&load(bundle), ns, config, &cm()).unwrap();
    to_yaml_documents(&objects).unwrap()
}

/// Copies a synthetic bundle into a temp dir for mutation.
fn temp_copy(name: &str) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let src = testdata().join("bundles").join(name);
    for sub in ["manifests", "metadata"] {
        std::fs::create_dir_all(dir.path().join(sub)).unwrap();
        for e in std::fs::read_dir(src.join(sub)).unwrap() {
            let e = e.unwrap();
            std::fs::copy(e.path(), dir.path().join(sub).join(e.file_name())).unwrap();
        }
    }
    dir
}

const CSV_FILE: &str = "manifests/widget-operator.clusterserviceversion.yaml";

fn edit_csv(dir: &Path, f: impl FnOnce(&mut Value)) {
    let path = dir.join(CSV_FILE);
    let mut csv: Value = serde_saphyr::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    f(&mut csv);
    std::fs::write(&path, serde_json::to_string(&csv).unwrap()).unwrap();
}

fn validation_errors(dir: &Path, provider: CertProvider) -> Vec<String> {
    let b = load_dir(dir, &LoadOptions::default()).unwrap();
    validate(&b, provider)
        .err()
        .map(|e| e.0)
        .unwrap_or_default()
}

// ---------------------------------------------------------------- golden tests

struct Case {
    name: &'static str,
    bundle: &'static str,
    config: Option<Value>,
}

fn config_file(name: &str) -> Value {
    serde_json::from_str(&std::fs::read_to_string(testdata().join("configs").join(name)).unwrap())
        .unwrap()
}

fn golden_cases() -> Vec<Case> {
    let mut cases = vec![
        Case {
            name: "all-namespaces",
            bundle: "all-namespaces",
            config: None,
        },
        Case {
            name: "own-namespace",
            bundle: "own-namespace",
            config: Some(json!({"watchNamespace": "widget-system"})),
        },
        Case {
            name: "single-namespace",
            bundle: "single-namespace",
            config: Some(json!({"watchNamespace": "team-a"})),
        },
        Case {
            name: "all-modes-default",
            bundle: "all-modes",
            config: None,
        },
        Case {
            name: "all-modes-own",
            bundle: "all-modes",
            config: Some(json!({"watchNamespace": "widget-system"})),
        },
        Case {
            name: "all-modes-single",
            bundle: "all-modes",
            config: Some(json!({"watchNamespace": "team-a"})),
        },
        Case {
            name: "webhook-validating",
            bundle: "webhook-validating",
            config: Some(json!({"watchNamespace": "team-a"})),
        },
        Case {
            name: "webhook-mutating",
            bundle: "webhook-mutating",
            config: None,
        },
        Case {
            name: "webhook-conversion",
            bundle: "webhook-conversion",
            config: None,
        },
        // Volumes mounted on the certificate paths are replaced in the pod, not only in
        // the containers (docs/concepts/rendering.md §5.5, item 6).
        Case {
            name: "webhook-cert-paths",
            bundle: "webhook-cert-paths",
            config: Some(json!({"watchNamespace": "team-a"})),
        },
    ];
    for field in [
        "env",
        "envFrom",
        "volumes",
        "volumeMounts",
        "tolerations",
        "resources",
        "nodeSelector",
        "affinity",
        "affinity-erase",
        "annotations",
    ] {
        let name: &'static str = Box::leak(format!("deploymentconfig-{field}").into_boxed_str());
        cases.push(Case {
            name,
            bundle: "all-namespaces",
            config: Some(config_file(&format!("{name}.json"))),
        });
    }
    cases
}

#[test]
fn golden_renders() {
    let update = std::env::var_os("UPDATE_GOLDEN").is_some();
    let dir = testdata().join("golden");
    let mut failures = Vec::new();
    for case in golden_cases() {
        let got = render_yaml(case.bundle, "widget-system", case.config.as_ref());
        let path = dir.join(format!("{}.yaml", case.name));
        if update {
            std::fs::create_dir_all(&dir).unwrap();
            std::fs::write(&path, &got).unwrap();
            continue;
        }
        let want = std::fs::read_to_string(&path).unwrap_or_else(|_| {
            panic!(
                "missing golden file {} (run with UPDATE_GOLDEN=1)",
                path.display()
            )
        });
        if got != want {
            failures.push((case.name, want, got));
        }
    }
    if let Some((name, want, got)) = failures.first() {
        let names: Vec<&str> = failures.iter().map(|f| f.0).collect();
        eprintln!("golden mismatches: {names:?} (UPDATE_GOLDEN=1 regenerates)");
        assert_eq!(want, got, "golden {name}");
    }
}

#[test]
fn render_is_deterministic_and_sorted() {
    let a = render_yaml("webhook-mutating", "ns", None);
    let b = render_yaml("webhook-mutating", "ns", None);
    assert_eq!(a, b);
    let objects = render(&load("webhook-mutating"), "ns", None, &cm()).unwrap();
    let keys: Vec<(String, String, String)> = objects
        .iter()
        .map(|o| {
            let s = |p: &str| {
                o.pointer(p)
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_string()
            };
            (s("/kind"), s("/metadata/namespace"), s("/metadata/name"))
        })
        .collect();
    let mut sorted = keys.clone();
    sorted.sort();
    assert_eq!(keys, sorted);
    for o in &objects {
        assert!(
            o.get("apiVersion")
                .and_then(Value::as_str)
                .is_some_and(|s| !s.is_empty())
        );
        assert!(
            o.get("kind")
                .and_then(Value::as_str)
                .is_some_and(|s| !s.is_empty())
        );
    }
}

fn find<'a>(objects: &'a [Value], kind: &str) -> Vec<&'a Value> {
    objects
        .iter()
        .filter(|o| o.get("kind").and_then(Value::as_str) == Some(kind))
        .collect()
}

#[test]
fn all_namespaces_promotes_permissions_with_namespace_rule() {
    let objects = render(&load("all-namespaces"), "widget-system", None, &cm()).unwrap();
    assert!(find(&objects, "Role").is_empty());
    assert!(find(&objects, "RoleBinding").is_empty());
    let crs = find(&objects, "ClusterRole");
    // 2 clusterPermissions + 1 promoted permission + 1 manifest ClusterRole
    assert_eq!(crs.len(), 4);
    let promoted = crs
        .iter()
        .find(|c| c.to_string().contains("\"namespaces\""))
        .expect("promoted role");
    let rules = promoted["rules"].as_array().unwrap();
    assert_eq!(
        rules.last().unwrap(),
        &json!({"verbs": ["get", "list", "watch"], "apiGroups": [""], "resources": ["namespaces"]})
    );
    // The names hash the permission entry with the extra rule: different from Own mode.
    let own = render(
        &load("all-modes"),
        "widget-system",
        Some(&json!({"watchNamespace": "widget-system"})),
        &cm(),
    )
    .unwrap();
    let role_name = find(&own, "Role")[0]["metadata"]["name"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(role_name.starts_with("widget-operator.v1-"), "{role_name}");
    assert_eq!(role_name.len(), 63);
    assert_ne!(promoted["metadata"]["name"].as_str().unwrap(), role_name);
    let expected = names::permission_object_name(
        "widget-operator.v1.0.0-widget-operator",
        "widget-operator",
        Some(&[
            names::GoPolicyRule {
                verbs: Some(
                    [
                        "get", "list", "watch", "create", "update", "patch", "delete",
                    ]
                    .map(String::from)
                    .to_vec(),
                ),
                api_groups: vec![String::new()],
                resources: vec!["configmaps".into()],
                ..Default::default()
            },
            names::GoPolicyRule {
                verbs: Some(["get", "create", "update"].map(String::from).to_vec()),
                api_groups: vec!["coordination.k8s.io".into()],
                resources: vec!["leases".into()],
                ..Default::default()
            },
        ]),
    );
    assert_eq!(role_name, expected);
    // Deployment annotations
    let dep = find(&objects, "Deployment")[0];
    let ann = &dep["spec"]["template"]["metadata"]["annotations"];
    assert_eq!(ann["olm.targetNamespaces"], json!(""));
    assert_eq!(ann["olm.operatorNamespace"], json!("widget-system"));
    assert_eq!(ann["capabilities"], json!("Basic Install"));
    assert_eq!(
        ann["kubectl.kubernetes.io/default-container"],
        json!("manager")
    );
    assert_eq!(dep["spec"]["revisionHistoryLimit"], json!(1));
    // properties.yaml appended to olm.properties, existing entries first
    let props: Vec<Value> = serde_json::from_str(ann["olm.properties"].as_str().unwrap()).unwrap();
    assert_eq!(props.len(), 3);
    assert_eq!(props[0]["value"], json!("4.18"));
    assert_eq!(props[2]["type"], json!("example.com/label"));
    // namespaced others forced into the install namespace, cluster-scoped untouched
    let svc = find(&objects, "Service")[0];
    assert_eq!(svc["metadata"]["namespace"], json!("widget-system"));
    let sas: Vec<&str> = find(&objects, "ServiceAccount")
        .iter()
        .map(|s| s["metadata"]["name"].as_str().unwrap())
        .collect();
    assert_eq!(sas, vec!["widget-operator", "widget-reader"]);
}

#[test]
fn single_namespace_roles_live_in_target_namespace() {
    let objects = render(
        &load("single-namespace"),
        "widget-system",
        Some(&json!({"watchNamespace": "team-a"})),
        &cm(),
    )
    .unwrap();
    let role = find(&objects, "Role")[0];
    assert_eq!(role["metadata"]["namespace"], json!("team-a"));
    let rb = find(&objects, "RoleBinding")[0];
    assert_eq!(rb["subjects"][0]["namespace"], json!("widget-system"));
    assert_eq!(rb["roleRef"]["name"], role["metadata"]["name"]);
    let dep = find(&objects, "Deployment")[0];
    assert_eq!(
        dep["spec"]["template"]["metadata"]["annotations"]["olm.targetNamespaces"],
        json!("team-a")
    );
    // no namespace-read rule outside AllNamespaces mode
    assert!(
        !find(&objects, "ClusterRole")
            .iter()
            .any(|c| c.to_string().contains("\"namespaces\""))
    );
}

#[test]
fn webhooks_render_services_certificates_and_volumes() {
    let objects = render(
        &load("webhook-validating"),
        "widget-system",
        Some(&json!({"watchNamespace": "team-a"})),
        &cm(),
    )
    .unwrap();
    let vwc = find(&objects, "ValidatingWebhookConfiguration")[0];
    assert_eq!(vwc["metadata"]["name"], json!("vwidget.example.com"));
    assert_eq!(
        vwc["metadata"]["annotations"]["cert-manager.io/inject-ca-from"],
        json!("widget-system/widget-operator-controller-service-cert")
    );
    let hook = &vwc["webhooks"][0];
    assert_eq!(
        hook["clientConfig"]["service"],
        json!({"namespace": "widget-system", "name": "widget-operator-controller-service", "path": "/validate-example-com-v1-widget", "port": 443})
    );
    assert_eq!(
        hook["namespaceSelector"]["matchExpressions"][0]["values"],
        json!(["team-a"])
    );
    let svc = find(&objects, "Service")
        .into_iter()
        .find(|s| s["metadata"]["name"] == "widget-operator-controller-service")
        .unwrap();
    assert_eq!(
        svc["spec"]["ports"],
        json!([{"name": "443", "port": 443, "targetPort": 9443}])
    );
    assert_eq!(
        svc["spec"]["selector"],
        json!({"control-plane": "controller-manager"})
    );
    let cert = find(&objects, "Certificate")[0];
    assert_eq!(
        cert["spec"]["secretName"],
        json!("widget-operator-controller-service-cert")
    );
    assert_eq!(find(&objects, "Issuer").len(), 1);
    let dep = find(&objects, "Deployment")[0];
    let mounts = &dep["spec"]["template"]["spec"]["containers"][0]["volumeMounts"];
    assert_eq!(mounts.as_array().unwrap().len(), 3);
    assert_eq!(
        mounts[2],
        json!({"name": "webhook-cert", "mountPath": "/tmp/k8s-webhook-server/serving-certs"})
    );

    // mutating: ports deduplicated and sorted, reinvocationPolicy kept
    let objects = render(&load("webhook-mutating"), "widget-system", None, &cm()).unwrap();
    let mwcs = find(&objects, "MutatingWebhookConfiguration");
    assert_eq!(mwcs.len(), 2);
    assert_eq!(mwcs[1]["metadata"]["name"], json!("mwidget.example.com"));
    assert_eq!(
        mwcs[1]["webhooks"][0]["reinvocationPolicy"],
        json!("IfNeeded")
    );
    assert!(mwcs[0]["webhooks"][0].get("namespaceSelector").is_none());
    let svc = find(&objects, "Service")
        .into_iter()
        .find(|s| s["metadata"]["name"] == "widget-operator-controller-service")
        .unwrap();
    assert_eq!(
        svc["spec"]["ports"],
        json!([{"name": "443", "port": 443, "targetPort": "webhook-server"}, {"name": "8443", "port": 8443, "targetPort": 8443}])
    );

    // conversion: CRD gets the webhook conversion and CA injection
    let objects = render(&load("webhook-conversion"), "widget-system", None, &cm()).unwrap();
    let crd = find(&objects, "CustomResourceDefinition")[0];
    assert_eq!(crd["spec"]["conversion"]["strategy"], json!("Webhook"));
    assert_eq!(
        crd["spec"]["conversion"]["webhook"]["clientConfig"]["service"]["path"],
        json!("/convert")
    );
    assert_eq!(
        crd["spec"]["conversion"]["webhook"]["conversionReviewVersions"],
        json!(["v1", "v1beta1"])
    );
    assert_eq!(
        crd["metadata"]["annotations"]["cert-manager.io/inject-ca-from"],
        json!("widget-system/widget-operator-controller-service-cert")
    );
    assert!(crd.get("status").is_none());
}

/// Upstream's `OpenshiftServiceCaCertificateProvider` (operator-controller
/// `render/certproviders/openshiftserviceca.go`): the serving-cert annotation on the
/// webhook Service, `inject-cabundle: "true"` on webhook configurations and conversion
/// CRDs, no objects of its own, the Secret `<svc>-cert` (keys tls.crt/tls.key) mounted
/// as with cert-manager.
#[test]
fn openshift_service_ca_annotates_instead_of_certificates() {
    let service_ca = RenderOptions {
        cert_provider: CertProvider::OpenShiftServiceCa,
        ..Default::default()
    };
    let config = json!({"watchNamespace": "team-a"});
    let bundle = "webhook-validating";
    let objects = render(&load(bundle), "widget-system", Some(&config), &service_ca).unwrap();
    let with_cm = render(&load(bundle), "widget-system", Some(&config), &cm()).unwrap();
    assert!(find(&objects, "Certificate").is_empty());
    assert!(find(&objects, "Issuer").is_empty());
    assert_eq!(
        objects.len() + 2,
        with_cm.len(),
        "no Issuer, no Certificate"
    );
    let vwc = find(&objects, "ValidatingWebhookConfiguration")[0];
    assert_eq!(
        vwc["metadata"]["annotations"],
        json!({"service.beta.openshift.io/inject-cabundle": "true"})
    );
    let cm_vwc = find(&with_cm, "ValidatingWebhookConfiguration")[0];
    assert_eq!(vwc["webhooks"], cm_vwc["webhooks"]);
    let svc = find(&objects, "Service")
        .into_iter()
        .find(|s| s["metadata"]["name"] == "widget-operator-controller-service")
        .unwrap();
    assert_eq!(
        svc["metadata"]["annotations"],
        json!({"service.beta.openshift.io/serving-cert-secret-name": "widget-operator-controller-service-cert"})
    );
    // The Deployment mounts the same Secret as with cert-manager.
    let dep = find(&objects, "Deployment")[0];
    assert_eq!(dep, find(&with_cm, "Deployment")[0]);
    let volumes = &dep["spec"]["template"]["spec"]["volumes"];
    assert!(
        volumes
            .as_array()
            .unwrap()
            .iter()
            .any(|v| v["secret"]["secretName"] == "widget-operator-controller-service-cert"),
        "{volumes}"
    );

    let objects = render(
        &load("webhook-conversion"),
        "widget-system",
        None,
        &service_ca,
    )
    .unwrap();
    let crd = find(&objects, "CustomResourceDefinition")[0];
    assert_eq!(crd["spec"]["conversion"]["strategy"], json!("Webhook"));
    assert_eq!(
        crd["metadata"]["annotations"]["service.beta.openshift.io/inject-cabundle"],
        json!("true")
    );
    assert!(
        crd["metadata"]["annotations"]
            .get("cert-manager.io/inject-ca-from")
            .is_none()
    );
    // Bundles with webhooks are supported with it.
    let dir = temp_copy("webhook-mutating");
    assert!(validation_errors(dir.path(), CertProvider::OpenShiftServiceCa).is_empty());
}

#[test]
fn webhooks_without_cert_provider_are_rejected() {
    let err = render(
        &load("webhook-mutating"),
        "ns",
        None,
        &RenderOptions {
            cert_provider: CertProvider::None,
            ..Default::default()
        },
    )
    .unwrap_err();
    assert_eq!(
        err.to_string(),
        "unsupported bundle: webhookDefinitions are not supported"
    );
    // bundles without webhooks render without a provider
    assert!(
        render(
            &load("all-namespaces"),
            "ns",
            None,
            &RenderOptions {
                cert_provider: CertProvider::None,
                ..Default::default()
            }
        )
        .is_ok()
    );
}

#[test]
fn config_errors_are_reported() {
    let b = load("own-namespace");
    let e = render(&b, "widget-system", None, &cm()).unwrap_err();
    assert_eq!(
        e.to_string(),
        "invalid configuration: required field \"watchNamespace\" is missing"
    );
    let e = render(
        &load("all-namespaces"),
        "ns",
        Some(&json!({"watchNamespace": "x"})),
        &cm(),
    )
    .unwrap_err();
    assert_eq!(
        e.to_string(),
        "invalid configuration: unknown field \"watchNamespace\""
    );
}

// ---------------------------------------------------------------- validation

#[test]
fn validation_reports_every_problem_together() {
    let dir = temp_copy("webhook-validating");
    edit_csv(dir.path(), |csv| {
        let spec = &mut csv["spec"];
        let dep = spec["install"]["spec"]["deployments"][0].clone();
        spec["install"]["spec"]["deployments"]
            .as_array_mut()
            .unwrap()
            .push(dep);
        let mut bad = spec["install"]["spec"]["deployments"][0].clone();
        bad["name"] = json!("Bad_Name");
        spec["install"]["spec"]["deployments"]
            .as_array_mut()
            .unwrap()
            .push(bad);
        spec["customresourcedefinitions"]["owned"]
            .as_array_mut()
            .unwrap()
            .push(json!({"name": "gadgets.example.com", "version": "v1", "kind": "Gadget"}));
        spec["apiservicedefinitions"] = json!({"owned": [{"name": "v1.metrics.example.com", "group": "metrics.example.com", "version": "v1", "kind": "Metric"}]});
        let wh = spec["webhookdefinitions"].as_array_mut().unwrap();
        let mut dup = wh[0].clone();
        dup["rules"] = json!([{"apiGroups": ["*"], "resources": ["pods"]}, {"apiGroups": ["admissionregistration.k8s.io"], "resources": ["validatingwebhookconfigurations", "*"]}, {"apiGroups": ["olm.operatorframework.io"]}]);
        wh.push(dup);
        wh.push(json!({"type": "MutatingAdmissionWebhook", "generateName": "Bad_Hook", "deploymentName": "missing-deployment"}));
        wh.push(json!({"type": "ConversionWebhook", "generateName": "c1.example.com", "deploymentName": "widget-operator-controller", "conversionCRDs": ["widgets.example.com", "other.example.com"]}));
        wh.push(json!({"type": "ConversionWebhook", "generateName": "c2.example.com", "deploymentName": "widget-operator-controller", "conversionCRDs": ["widgets.example.com"]}));
    });
    std::fs::write(
        dir.path().join("manifests/dup-crd.yaml"),
        std::fs::read(dir.path().join("manifests/example.com_widgets.yaml")).unwrap(),
    )
    .unwrap();
    std::fs::write(
        dir.path().join("manifests/deploy.yaml"),
        "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: extra\n",
    )
    .unwrap();
    std::fs::write(
        dir.path().join("metadata/annotations.yaml"),
        "annotations:\n  operators.operatorframework.io.bundle.mediatype.v1: registry+v1\n",
    )
    .unwrap();
    let errs = validation_errors(dir.path(), CertProvider::None);
    let expect = [
        "unsupported bundle: apiServiceDefintions are not supported",
        "unsupported bundle: webhookDefinitions are not supported",
        "cluster service version contains duplicate strategy deployment spec 'widget-operator-controller'",
        "invalid cluster service version strategy deployment name 'Bad_Name': a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')",
        "bundle contains duplicate custom resource definition 'widgets.example.com'",
        "cluster service definition references owned custom resource definition 'gadgets.example.com' not found in bundle",
        "package name is empty",
        "bundle contains conversion webhook \"c1.example.com\" and supports install modes [OwnNamespace SingleNamespace] - conversion webhooks are only supported for bundles that only support AllNamespaces install mode",
        "webhook of type 'MutatingAdmissionWebhook' with name 'Bad_Hook' references non-existent deployment 'missing-deployment'",
        "duplicate webhook 'vwidget.example.com' of type 'ValidatingAdmissionWebhook'",
        "webhook of type 'MutatingAdmissionWebhook' has invalid name 'Bad_Hook': a lowercase RFC 1123 subdomain",
        "conversion webhooks [c1.example.com,c2.example.com] reference same custom resource definition 'widgets.example.com'",
        "conversion webhook 'c1.example.com' references custom resource definition 'other.example.com' not owned bundle",
        "webhook \"vwidget.example.com\" contains forbidden rule: admission webhook rules cannot reference API group \"*\"",
        "webhook \"vwidget.example.com\" contains forbidden rule: admission webhook rules cannot reference API group \"olm.operatorframework.io\"",
        "webhook \"vwidget.example.com\" contains forbidden rule: admission webhook rules cannot reference resource \"validatingwebhookconfigurations\" for API group \"admissionregistration.k8s.io\"",
        "webhook \"vwidget.example.com\" contains forbidden rule: admission webhook rules cannot reference resource \"*\" for API group \"admissionregistration.k8s.io\"",
        "unsupported resource \"extra\" with kind \"Deployment\"",
    ];
    for e in expect {
        assert!(
            errs.iter().any(|x| x.starts_with(e)),
            "missing {e:?} in {errs:#?}"
        );
    }
}

#[test]
fn no_supported_install_mode_is_rejected() {
    let dir = temp_copy("all-namespaces");
    edit_csv(dir.path(), |csv| {
        csv["spec"]["installModes"] = json!([{"type": "MultiNamespace", "supported": true}])
    });
    assert_eq!(
        validation_errors(dir.path(), CertProvider::CertManager),
        vec![
            "unsupported bundle: bundle must support at least one of [AllNamespaces SingleNamespace OwnNamespace] install modes"
        ]
    );
}

#[test]
fn dependencies_are_rejected() {
    let dir = temp_copy("all-namespaces");
    std::fs::write(
        dir.path().join("metadata/dependencies.yaml"),
        "dependencies:\n- type: olm.gvk\n  value: {group: etcd.database.coreos.com, kind: EtcdCluster, version: v1beta2}\n",
    )
    .unwrap();
    assert_eq!(
        validation_errors(dir.path(), CertProvider::CertManager),
        vec![
            "bundle \"widget-operator.v1.0.0\" has a dependency declared via property \"olm.gvk.required\" which is currently not supported"
        ]
    );
    // Checked by resolution (docs/concepts/dependencies.md §2): rendered.
    let b = load_dir(dir.path(), &LoadOptions::default()).unwrap();
    let checked = RenderOptions {
        dependencies_checked: true,
        ..cm()
    };
    assert!(super::validate::validate_with(&b, &checked).is_ok());
    assert!(render(&b, "ns", None, &checked).is_ok());
    assert!(render(&b, "ns", None, &cm()).is_err());
}

#[test]
fn invalid_csv_deployment_is_rejected() {
    let dir = temp_copy("all-namespaces");
    edit_csv(dir.path(), |csv| {
        let spec = &mut csv["spec"]["install"]["spec"]["deployments"][0]["spec"];
        spec.as_object_mut().unwrap().remove("selector");
        spec["replicas"] = json!("three");
    });
    let errs = validation_errors(dir.path(), CertProvider::CertManager);
    assert_eq!(errs.len(), 1, "{errs:?}");
    assert!(errs[0].starts_with("invalid cluster service version strategy deployment spec 'widget-operator-controller': "), "{}", errs[0]);
    let b = load_dir(dir.path(), &LoadOptions::default()).unwrap();
    assert!(matches!(
        render(&b, "ns", None, &cm()),
        Err(RenderError::Invalid(_))
    ));
}

#[test]
fn conversion_crd_with_preserve_unknown_fields_fails() {
    let dir = temp_copy("webhook-conversion");
    let path = dir.path().join("manifests/example.com_widgets.yaml");
    let text = std::fs::read_to_string(&path).unwrap().replace(
        "  scope: Namespaced\n",
        "  scope: Namespaced\n  preserveUnknownFields: true\n",
    );
    std::fs::write(&path, text).unwrap();
    let b = load_dir(dir.path(), &LoadOptions::default()).unwrap();
    let e = render(&b, "ns", None, &cm()).unwrap_err();
    assert!(
        e.to_string()
            .contains("'widgets.example.com' must have spec.preserveUnknownFields set to false"),
        "{e}"
    );
}

// ---------------------------------------------------------------- bad input

fn load_err(dir: &Path) -> String {
    load_dir(dir, &LoadOptions::default())
        .unwrap_err()
        .to_string()
}

#[test]
fn bad_manifests_subdirectory() {
    let dir = temp_copy("all-namespaces");
    std::fs::create_dir(dir.path().join("manifests/nested")).unwrap();
    assert_eq!(
        load_err(dir.path()),
        "subdirectories are not allowed within the \"manifests\" directory of the bundle image filesystem: found \"manifests/nested\""
    );
}

#[test]
fn bad_no_csv() {
    let dir = temp_copy("all-namespaces");
    std::fs::remove_file(dir.path().join(CSV_FILE)).unwrap();
    assert_eq!(
        load_err(dir.path()),
        "no ClusterServiceVersion found in \"manifests\""
    );
}

#[test]
fn bad_two_csvs() {
    let dir = temp_copy("all-namespaces");
    let text = std::fs::read_to_string(dir.path().join(CSV_FILE))
        .unwrap()
        .replace("widget-operator.v1.0.0", "widget-operator.v2.0.0");
    std::fs::write(
        dir.path()
            .join("manifests/second.clusterserviceversion.yaml"),
        text,
    )
    .unwrap();
    assert_eq!(
        load_err(dir.path()),
        "more than one ClusterServiceVersion found in \"manifests\": \"widget-operator.v2.0.0\" and \"widget-operator.v1.0.0\""
    );
}

#[test]
fn bad_not_a_kubernetes_object() {
    let dir = temp_copy("all-namespaces");
    std::fs::write(
        dir.path().join("manifests/zz.yaml"),
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: ok}\n---\nfoo: bar\nlist: [1, 2]\n",
    )
    .unwrap();
    assert_eq!(
        load_err(dir.path()),
        "file \"manifests/zz.yaml\" document 2: not a Kubernetes object: missing string field \"apiVersion\""
    );
    std::fs::write(dir.path().join("manifests/zz.yaml"), "- just\n- a list\n").unwrap();
    assert_eq!(
        load_err(dir.path()),
        "file \"manifests/zz.yaml\" document 1: not a Kubernetes object: the document is not a mapping"
    );
    std::fs::write(dir.path().join("manifests/zz.yaml"), "key: [unclosed\n").unwrap();
    assert!(load_err(dir.path()).starts_with("file \"manifests/zz.yaml\": invalid YAML/JSON: "));
    std::fs::write(dir.path().join("manifests/zz.yaml"), [0xff, 0xfe, 0x00]).unwrap();
    assert_eq!(
        load_err(dir.path()),
        "file \"manifests/zz.yaml\" is not valid UTF-8"
    );
}

#[test]
fn bad_huge_manifest_rejected_by_size() {
    let dir = temp_copy("all-namespaces");
    let path = dir.path().join("manifests/huge.yaml");
    // 100 MB sparse file: its size is checked before any byte is read.
    let f = std::fs::File::create(&path).unwrap();
    f.set_len(100 * 1000 * 1000).unwrap();
    assert_eq!(
        load_err(dir.path()),
        format!(
            "file \"manifests/huge.yaml\" is 100000000 bytes, more than the limit of {} bytes",
            64 * 1024 * 1024
        )
    );
    // a configurable limit
    let small = LoadOptions {
        max_file_bytes: 1000,
        ..LoadOptions::default()
    };
    std::fs::remove_file(&path).unwrap();
    let err = load_dir(dir.path(), &small).unwrap_err();
    assert!(
        matches!(err, LoadError::FileTooLarge { limit: 1000, .. }),
        "{err}"
    );
}

#[test]
fn bad_deeply_nested_yaml() {
    let dir = temp_copy("all-namespaces");
    let depth = 100_000;
    let mut text = String::from("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: deep}\ndata: ");
    text.push_str(&"[".repeat(depth));
    text.push_str(&"]".repeat(depth));
    text.push('\n');
    std::fs::write(dir.path().join("manifests/deep.yaml"), &text).unwrap();
    let err = load_err(dir.path());
    assert!(
        err.starts_with("file \"manifests/deep.yaml\": invalid YAML/JSON: "),
        "{err}"
    );
    // block-style nesting too
    let mut block = String::from("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: deep\n");
    for i in 0..300 {
        block.push_str(&" ".repeat(i + 1));
        block.push_str("a:\n");
    }
    std::fs::write(dir.path().join("manifests/deep.yaml"), &block).unwrap();
    let err = load_err(dir.path());
    assert!(
        err.starts_with("file \"manifests/deep.yaml\": invalid YAML/JSON: "),
        "{err}"
    );
}

#[test]
fn bad_symlink_is_not_followed() {
    let dir = temp_copy("all-namespaces");
    std::os::unix::fs::symlink("/etc/hostname", dir.path().join("manifests/link.yaml")).unwrap();
    assert_eq!(
        load_err(dir.path()),
        "file \"manifests/link.yaml\" is not a regular file"
    );
}

/// A linked `manifests/` used to be followed out of the bundle while a linked file in
/// it was refused; both are refused now.
#[test]
fn bad_symlinked_manifests_or_metadata_directory_is_not_followed() {
    for sub in ["manifests", "metadata"] {
        let outside = temp_copy("all-namespaces");
        let dir = temp_copy("all-namespaces");
        std::fs::remove_dir_all(dir.path().join(sub)).unwrap();
        std::os::unix::fs::symlink(outside.path().join(sub), dir.path().join(sub)).unwrap();
        assert_eq!(
            load_err(dir.path()),
            format!(
                "\"{sub}\" is a symbolic link: a bundle's manifests/ and metadata/ must be directories inside it (links are refused, as for the files in them)"
            )
        );
    }
}

#[test]
fn bad_not_registry_v1() {
    let dir = temp_copy("all-namespaces");
    std::fs::remove_file(dir.path().join("metadata/annotations.yaml")).unwrap();
    assert_eq!(
        load_err(dir.path()),
        "not a registry+v1 bundle: metadata/annotations.yaml not found"
    );
    std::fs::write(
        dir.path().join("metadata/annotations.yaml"),
        "annotations:\n  operators.operatorframework.io.bundle.mediatype.v1: helm\n",
    )
    .unwrap();
    assert!(load_err(dir.path()).starts_with("not a registry+v1 bundle: media type annotation"));
    std::fs::write(
        dir.path().join("metadata/annotations.yaml"),
        "annotations:\n  operators.operatorframework.io.bundle.package.v1: x\n",
    )
    .unwrap();
    std::fs::remove_dir_all(dir.path().join("manifests")).unwrap();
    assert_eq!(
        load_err(dir.path()),
        "not a registry+v1 bundle: directory \"manifests\" not found"
    );
}

#[test]
fn json_manifests_and_multi_documents_load() {
    let dir = temp_copy("all-namespaces");
    std::fs::write(
        dir.path().join("manifests/extra.json"),
        r#"{"apiVersion":"v1","kind":"Secret","metadata":{"name":"s"},"stringData":{"a":"b"}}"#,
    )
    .unwrap();
    let b = load_dir(dir.path(), &LoadOptions::default()).unwrap();
    assert_eq!(b.others.len(), 4);
    assert_eq!(b.crds.len(), 1);
    assert_eq!(b.package_name, "widget-operator");
}

// ---------------------------------------------------------------- conformance (shared fixtures)

fn supported_modes(b: &Bundle) -> InstallModeSet {
    let csv = Csv::parse(&b.csv).unwrap();
    InstallModeSet::from_entries(
        csv.spec
            .install_modes
            .iter()
            .map(|m| (m.type_.as_str(), m.supported)),
    )
}

#[test]
fn conformance_over_shared_bundles() {
    let Some(root) = crate::testenv::shared_dir("fixtures/bundles") else {
        return;
    };
    let mut bundles = Vec::new();
    for pkg in std::fs::read_dir(&root).unwrap() {
        let pkg = pkg.unwrap().path();
        if !pkg.is_dir() {
            continue;
        }
        for ver in std::fs::read_dir(&pkg).unwrap() {
            bundles.push(ver.unwrap().path());
        }
    }
    bundles.sort();
    assert!(
        bundles.len() >= 20,
        "expected the shared bundles, found {}",
        bundles.len()
    );
    let ns = "operators";
    let mut rendered = 0;
    for dir in &bundles {
        let id = dir
            .strip_prefix(&root)
            .unwrap()
            .to_string_lossy()
            .into_owned();
        let bundle = load_dir(dir, &LoadOptions::default())
            .unwrap_or_else(|e| panic!("{id}: load failed: {e}"));
        let modes = supported_modes(&bundle);
        let mut attempts: Vec<(&str, Option<Value>)> = Vec::new();
        if modes.all {
            attempts.push(("AllNamespaces", None));
        }
        if modes.own {
            attempts.push(("OwnNamespace", Some(json!({"watchNamespace": ns}))));
        }
        if modes.single {
            attempts.push((
                "SingleNamespace",
                Some(json!({"watchNamespace": "watched"})),
            ));
        }
        assert!(!attempts.is_empty(), "{id}: no install mode");
        for (mode, config) in attempts {
            let result = render(&bundle, ns, config.as_ref(), &cm());
            match id.as_str() {
                "dbaas-operator/0.5.0" => {
                    let e = result.unwrap_err().to_string();
                    assert!(e.contains("bundle \"dbaas-operator.v0.5.0\" has a dependency declared via property \"olm.package.required\" which is currently not supported"), "{e}");
                    assert!(e.contains("via property \"olm.constraint\""), "{e}");
                }
                "cockroachdb/2.1.1" => {
                    let e = result.unwrap_err().to_string();
                    assert_eq!(
                        e,
                        "unsupported custom resource definition \"cockroachdbs.charts.helm.k8s.io\": apiVersion \"apiextensions.k8s.io/v1beta1\" is not supported, only apiextensions.k8s.io/v1 (apiextensions.k8s.io/v1beta1 was removed in Kubernetes 1.22)"
                    );
                }
                _ => {
                    let objects = result.unwrap_or_else(|e| panic!("{id} ({mode}): {e}"));
                    let deployments = find(&objects, "Deployment");
                    assert!(!deployments.is_empty(), "{id}: no Deployment");
                    for d in deployments {
                        let ann = &d["spec"]["template"]["metadata"]["annotations"];
                        let want = match mode {
                            "AllNamespaces" => "",
                            "OwnNamespace" => ns,
                            _ => "watched",
                        };
                        assert_eq!(ann["olm.targetNamespaces"], json!(want), "{id}");
                    }
                    assert_eq!(
                        find(&objects, "CustomResourceDefinition").len(),
                        bundle.crds.len(),
                        "{id}"
                    );
                    // byte-identical re-render
                    let again = render(&bundle, ns, config.as_ref(), &cm()).unwrap();
                    assert_eq!(
                        to_yaml_documents(&objects).unwrap(),
                        to_yaml_documents(&again).unwrap(),
                        "{id}"
                    );
                    rendered += 1;
                }
            }
        }
    }
    assert!(rendered >= 30, "rendered {rendered}");

    // file-integrity-console-plugin: OwnNamespace only
    let fic = load_dir(
        &root.join("file-integrity-console-plugin/0.3.1"),
        &LoadOptions::default(),
    )
    .unwrap();
    assert_eq!(
        render(&fic, ns, None, &cm()).unwrap_err().to_string(),
        "invalid configuration: required field \"watchNamespace\" is missing"
    );
    assert_eq!(
        render(
            &fic,
            ns,
            Some(&json!({"watchNamespace": "elsewhere"})),
            &cm()
        )
        .unwrap_err()
        .to_string(),
        "invalid configuration: invalid format for field \"watchNamespace\": invalid value \"elsewhere\": must be \"operators\" (the namespace where the operator is installed) because this operator only supports OwnNamespace install mode"
    );
    // sn-operator: the stress bundle with 12 webhooks
    let sn = load_dir(&root.join("sn-operator/0.19.7"), &LoadOptions::default()).unwrap();
    let objects = render(&sn, ns, None, &cm()).unwrap();
    assert_eq!(find(&objects, "CustomResourceDefinition").len(), 32);
    assert_eq!(find(&objects, "MutatingWebhookConfiguration").len(), 8);
    assert_eq!(find(&objects, "ValidatingWebhookConfiguration").len(), 3);
    assert!(
        find(&objects, "CustomResourceDefinition")
            .iter()
            .any(|c| c["spec"]["conversion"]["strategy"] == "Webhook")
    );
    // webhook bundles fail without a certificate provider
    let e = render(
        &sn,
        ns,
        None,
        &RenderOptions {
            cert_provider: CertProvider::None,
            ..Default::default()
        },
    )
    .unwrap_err();
    assert_eq!(
        e.to_string(),
        "unsupported bundle: webhookDefinitions are not supported"
    );
}

/// On a cluster serving OperatorCondition: one named like the CSV, its Role and
/// RoleBinding for the operator's account, and the env var in every container; nothing
/// of it otherwise (docs/how-to/upgrade-control.md, "The operator's own say").
#[test]
fn the_operator_condition_is_rendered_only_when_asked() {
    let bundle = load("all-namespaces");
    let plain = render(&bundle, "ns", None, &cm()).unwrap();
    let with = render(
        &bundle,
        "ns",
        None,
        &RenderOptions {
            operator_condition: true,
            ..cm()
        },
    )
    .unwrap();
    let csv = crate::bundle::Csv::parse(&bundle.csv).unwrap();
    let name = csv.metadata.name.as_str();
    let of = |objects: &[Value], kind: &str| -> Vec<Value> {
        objects
            .iter()
            .filter(|o| o["kind"] == kind && o["metadata"]["name"] == name)
            .cloned()
            .collect()
    };
    assert!(of(&plain, "OperatorCondition").is_empty());
    assert!(
        !serde_json::to_string(&plain)
            .unwrap()
            .contains("OPERATOR_CONDITION_NAME")
    );
    let condition = of(&with, "OperatorCondition");
    assert_eq!(condition.len(), 1);
    assert_eq!(condition[0]["apiVersion"], "operators.coreos.com/v2");
    assert_eq!(condition[0]["metadata"]["namespace"], "ns");
    // Exactly what OLM v0's OperatorCondition controller writes (v0.38), so that the
    // two can run side by side without overwriting each other.
    let role = of(&with, "Role");
    assert_eq!(
        role[0]["rules"],
        json!([{"verbs": ["get", "update", "patch"], "apiGroups": ["operators.coreos.com"],
            "resources": ["operatorconditions"], "resourceNames": [name]}])
    );
    let binding = of(&with, "RoleBinding");
    let accounts = condition[0]["spec"]["serviceAccounts"].as_array().unwrap();
    let expected: Vec<Value> = csv
        .spec
        .install
        .spec
        .cluster_permissions
        .iter()
        .chain(&csv.spec.install.spec.permissions)
        .map(|p| json!(p.service_account_name))
        .collect();
    assert!(!expected.is_empty());
    assert_eq!(*accounts, expected, "clusterPermissions, then permissions");
    let subjects: Vec<Value> = accounts
        .iter()
        .map(|sa| json!({"kind": "ServiceAccount", "name": sa}))
        .collect();
    assert_eq!(binding[0]["subjects"], json!(subjects));
    // Only these three get a non-controlling ownerReference (OLM v0 holds control).
    let owner = crate::apply::Owner::new("ext", "u");
    for o in &with {
        let stamped = crate::apply::with_ownership(o, &owner);
        let controller = stamped["metadata"]["ownerReferences"][0]["controller"].clone();
        let shared = ["OperatorCondition", "Role", "RoleBinding"]
            .contains(&o["kind"].as_str().unwrap())
            && o["metadata"]["name"] == name;
        assert_eq!(controller, json!(!shared), "{o}");
    }
    for d in with.iter().filter(|o| o["kind"] == "Deployment") {
        for c in d["spec"]["template"]["spec"]["containers"]
            .as_array()
            .unwrap()
        {
            assert!(
                c["env"]
                    .as_array()
                    .unwrap()
                    .contains(&json!({"name": "OPERATOR_CONDITION_NAME", "value": name}))
            );
        }
    }
    assert_eq!(with.len(), plain.len() + 3);
}

#[test]
fn parsing_threads_follow_the_manifests_size() {
    use super::load::{BYTES_PER_THREAD, parsing_threads};
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    // A typical bundle (well under a megabyte) parses on the calling thread alone.
    assert_eq!(parsing_threads(0, 12, 200 * 1024), 1);
    assert_eq!(parsing_threads(0, 1, 0), 1);
    // A multi-megabyte one gets a thread per megabyte, up to the CPUs and at most 4.
    assert_eq!(
        parsing_threads(0, 40, 7 * BYTES_PER_THREAD),
        cpus.clamp(1, 4)
    );
    assert_eq!(
        parsing_threads(0, 40, BYTES_PER_THREAD + 1),
        cpus.clamp(1, 4).min(2)
    );
    // Never more threads than files; an explicit count is taken as given.
    assert_eq!(parsing_threads(0, 1, 50 * BYTES_PER_THREAD), 1);
    assert_eq!(parsing_threads(3, 40, 10), 3);
    assert_eq!(parsing_threads(8, 2, 10), 2);
}

#[test]
fn a_large_bundle_parsed_on_several_threads_loads_as_on_one() {
    let Some(dir) = crate::testenv::shared_dir("fixtures/bundles/sn-operator/0.19.7") else {
        return;
    };
    let one = load_dir(
        &dir,
        &LoadOptions {
            parallelism: 1,
            ..LoadOptions::default()
        },
    )
    .unwrap();
    for parallelism in [0, 2, 4] {
        let many = load_dir(
            &dir,
            &LoadOptions {
                parallelism,
                ..LoadOptions::default()
            },
        )
        .unwrap();
        assert_eq!(many, one, "parallelism {parallelism}");
    }
}
