//! End to end with real cert-manager on the real node (`support::node_cluster_with_cert_manager`):
//! a bundle whose CSV declares a validating, a mutating and a conversion webhook
//! (served by `hack/testimage webhook`) is installed by olmv1 with cert-manager as the
//! certificate provider. cert-manager issues the certificate, its cainjector puts the
//! CA into the webhook configurations and the CRD's conversion webhook, the operator
//! pod starts with the certificate mounted, and the API server really calls the three
//! webhooks. Then the uninstall removes what olmv1 installed.

#[path = "../tests/support/mod.rs"]
mod support;

use k8s_openapi::api::admissionregistration::v1::{
    MutatingWebhookConfiguration, ValidatingWebhookConfiguration,
};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{Pod, Secret, Service};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, ApiResource, DeleteParams, DynamicObject, GroupVersionKind, PostParams};
use olmv1::api::ClusterExtension;
use olmv1::testenv::demo::{BundleSpec, catalog_fbc};
use olmv1::testenv::registry::{
    TestRegistry, bundle_labels, push_bundle_image, push_catalog_image,
};
use serde_json::{Value, json};
use std::collections::BTreeMap;
use support::extensions::{create_catalog, extension, grant_installer, wait_installed};
use support::{eventually, namespace, node_cluster_with_cert_manager};

/// What `hack/testimage webhook` answers for an object labelled `deny=true`
/// (`DenyMessage` in hack/testimage/webhook.go).
const DENY_MESSAGE: &str = "denied by the testimage webhook: the object has the label deny=true";

fn group(package: &str) -> String {
    format!("{package}.example.com")
}

/// The bundle's files: a CSV (AllNamespaces only, as conversion webhooks require) whose
/// one Deployment runs the node's test program in webhook mode, three webhook
/// definitions, and the `widgets` CRD with versions v1 (`spec.size`, stored) and v2
/// (`spec.replicas`).
fn webhook_bundle(spec: &BundleSpec, image: &str) -> BTreeMap<String, Vec<u8>> {
    let group = group(&spec.package);
    let crd_name = spec.crd_name();
    let deployment = spec.deployment_name();
    let sa = format!("{}-sa", spec.package);
    let hook = |type_: &str, prefix: &str, path: &str| {
        json!({
            "type": type_, "generateName": format!("{prefix}.{group}"),
            "deploymentName": deployment, "containerPort": 443, "targetPort": 9443,
            "webhookPath": path, "sideEffects": "None", "failurePolicy": "Fail",
            "admissionReviewVersions": ["v1"],
        })
    };
    let rules = json!([{"apiGroups": [group], "apiVersions": ["*"], "operations": ["CREATE", "UPDATE"], "resources": ["widgets"]}]);
    let mut validating = hook("ValidatingAdmissionWebhook", "vwidget", "/validate");
    validating["rules"] = rules.clone();
    let mut mutating = hook("MutatingAdmissionWebhook", "mwidget", "/mutate");
    mutating["rules"] = rules;
    let mut conversion = hook("ConversionWebhook", "cwidget", "/convert");
    conversion["conversionCRDs"] = json!([crd_name]);
    let csv = json!({
        "apiVersion": "operators.coreos.com/v1alpha1",
        "kind": "ClusterServiceVersion",
        "metadata": {"name": spec.bundle_name()},
        "spec": {
            "displayName": spec.package,
            "version": spec.version,
            "installModes": [
                {"type": "OwnNamespace", "supported": false},
                {"type": "SingleNamespace", "supported": false},
                {"type": "MultiNamespace", "supported": false},
                {"type": "AllNamespaces", "supported": true}
            ],
            "customresourcedefinitions": {"owned": [
                {"name": crd_name, "version": "v1", "kind": "Widget", "displayName": "Widget"},
            ]},
            "install": {"strategy": "deployment", "spec": {
                "clusterPermissions": [{"serviceAccountName": sa, "rules": [
                    {"apiGroups": [group], "resources": ["widgets"], "verbs": ["get", "list", "watch"]}
                ]}],
                "deployments": [{"name": deployment, "spec": {
                    "replicas": 1,
                    "selector": {"matchLabels": {"app": deployment}},
                    "template": {
                        "metadata": {"labels": {"app": deployment}},
                        "spec": {"serviceAccountName": sa, "containers": [{
                            "name": "manager", "image": image, "args": ["webhook"],
                            "ports": [{"name": "http", "containerPort": 8080}, {"name": "webhooks", "containerPort": 9443}],
                            "readinessProbe": {"httpGet": {"path": "/readyz", "port": 8080}, "periodSeconds": 2},
                            "securityContext": {"runAsNonRoot": true, "allowPrivilegeEscalation": false, "capabilities": {"drop": ["ALL"]}},
                        }]}
                    }
                }}]
            }},
            "webhookdefinitions": [validating, mutating, conversion],
        }
    });
    let schema = |field: &str| {
        json!({"openAPIV3Schema": {"type": "object", "properties": {
            "spec": {"type": "object", "properties": {field: {"type": "integer"}}}
        }}})
    };
    let crd = json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": crd_name},
        "spec": {
            "group": group,
            "names": {"kind": "Widget", "listKind": "WidgetList", "plural": "widgets", "singular": "widget"},
            "scope": "Namespaced",
            "versions": [
                {"name": "v1", "served": true, "storage": true, "schema": schema("size")},
                {"name": "v2", "served": true, "storage": false, "schema": schema("replicas")},
            ]
        }
    });
    let json = |v: &Value| serde_json::to_vec_pretty(v).expect("json");
    BTreeMap::from([
        (
            format!("manifests/{}.clusterserviceversion.json", spec.package),
            json(&csv),
        ),
        ("manifests/widgets.crd.json".to_string(), json(&crd)),
    ])
}

/// Renders the bundle locally as the controller will (cert-manager provider), for the
/// installer's RBAC.
fn render(files: &BTreeMap<String, Vec<u8>>, package: &str, ns: &str) -> Vec<Value> {
    let dir = tempfile::tempdir().expect("tempdir");
    for (path, data) in files {
        let p = dir.path().join(path);
        std::fs::create_dir_all(p.parent().expect("parent")).expect("mkdir");
        std::fs::write(&p, data).expect("write");
    }
    let mut annotations = String::from("annotations:\n");
    for (k, v) in bundle_labels(package, &["stable"]) {
        annotations.push_str(&format!("  {k}: {}\n", Value::String(v)));
    }
    std::fs::create_dir_all(dir.path().join("metadata")).expect("mkdir");
    std::fs::write(dir.path().join("metadata/annotations.yaml"), annotations).expect("write");
    let bundle = olmv1::bundle::load_dir(dir.path(), &Default::default()).expect("load bundle");
    olmv1::bundle::render(&bundle, ns, None, &Default::default()).expect("render bundle")
}

fn cert_manager_api(client: &kube::Client, ns: &str, kind: &str) -> Api<DynamicObject> {
    let ar = ApiResource::from_gvk(&GroupVersionKind::gvk("cert-manager.io", "v1", kind));
    Api::namespaced_with(client.clone(), ns, &ar)
}

fn widgets(client: &kube::Client, ns: &str, package: &str, version: &str) -> Api<DynamicObject> {
    let ar = ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk(&group(package), version, "Widget"),
        "widgets",
    );
    Api::namespaced_with(client.clone(), ns, &ar)
}

fn widget(package: &str, name: &str, labels: Value, size: i64) -> DynamicObject {
    serde_json::from_value(json!({
        "apiVersion": format!("{}/v1", group(package)), "kind": "Widget",
        "metadata": {"name": name, "labels": labels},
        "spec": {"size": size},
    }))
    .expect("widget")
}

/// The node's test program must have the webhook mode (hack/build-node.sh rebuilds it
/// from hack/testimage; an older build answers `usage: …` and the pod crash-loops).
fn assert_testimage_serves_webhooks() {
    let bin = olmv1::testenv::node::NodeBinaries::locate()
        .expect("node binaries")
        .testimage;
    let out = std::process::Command::new(&bin)
        .arg("webhook")
        .env("CERT_DIR", "/nonexistent")
        .output()
        .expect("run testimage");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("loading the serving certificate"),
        "{} has no webhook mode (run hack/build-node.sh, which rebuilds it from hack/testimage): {stderr}",
        bin.display()
    );
}

#[tokio::test]
async fn a_bundle_with_three_webhooks_runs_with_certificates_from_cert_manager() {
    assert_testimage_serves_webhooks();
    let cluster = node_cluster_with_cert_manager();
    let node = cluster.node.as_ref().expect("node");
    // olmv1's controller as its own ServiceAccount (config/ RBAC), waiting for rollouts,
    // pulling from the node registry.
    support::controller_with(|args| {
        args.skip_rollout_wait = false;
        args.insecure_registries.push(node.registry.clone());
    });
    let admin = cluster.admin().await;

    let package = support::unique("hooks");
    let spec = BundleSpec::new(&package, "1.0.0");
    let files = webhook_bundle(&spec, &node.workload_image);
    let ns = namespace(&admin, "webhooks").await;
    let name = support::unique("ext");
    grant_installer(&ns, &name, &[render(&files, &package, &ns)]).await;

    let registry = TestRegistry::existing(&node.registry).expect("registry");
    let bundle = push_bundle_image(
        &registry,
        &format!("bundles/{package}:v1.0.0"),
        &files,
        &package,
        &["stable"],
    )
    .await
    .expect("push bundle")
    .reference;
    let catalog = support::unique("cat");
    let repo_tag = format!("catalogs/{catalog}:latest");
    let fbc = BTreeMap::from([(
        format!("{package}/catalog.json"),
        catalog_fbc(&package, &[(spec.clone(), bundle)]),
    )]);
    push_catalog_image(&registry, &repo_tag, &fbc)
        .await
        .expect("push catalog");
    create_catalog(&catalog, &format!("{}/{repo_tag}", node.registry)).await;

    let api: Api<ClusterExtension> = Api::all(admin.clone());
    api.create(
        &PostParams::default(),
        &extension(&name, &ns, &package, json!({})),
    )
    .await
    .expect("create extension");
    wait_installed(&api, &name, "1.0.0").await;

    // cert-manager issued the Certificate olmv1 rendered; its Secret holds the pair.
    let svc = format!("{}-service", spec.deployment_name());
    let cert_name = format!("{svc}-cert");
    let certificates = cert_manager_api(&admin, &ns, "Certificate");
    eventually(120, "the Certificate Ready", || async {
        let c = certificates.get(&cert_name).await.ok()?;
        let v = serde_json::to_value(&c).ok()?;
        olmv1::testenv::cert_manager::ready_condition(&v)
            .is_some_and(|r| r.0)
            .then_some(())
    })
    .await;
    let secrets: Api<Secret> = Api::namespaced(admin.clone(), &ns);
    let secret = secrets.get(&cert_name).await.expect("certificate Secret");
    let data = secret.data.expect("Secret data");
    for key in ["tls.crt", "tls.key", "ca.crt"] {
        assert!(
            data.get(key).is_some_and(|v| !v.0.is_empty()),
            "{key} in Secret {cert_name}"
        );
    }
    let issued_ca = data.get("ca.crt").map(|v| v.0.clone()).unwrap_or_default();

    // cainjector put that CA into both webhook configurations and the CRD conversion.
    let group = group(&package);
    let validating: Api<ValidatingWebhookConfiguration> = Api::all(admin.clone());
    let mutating: Api<MutatingWebhookConfiguration> = Api::all(admin.clone());
    let crds: Api<CustomResourceDefinition> = Api::all(admin.clone());
    let (vname, mname) = (format!("vwidget.{group}"), format!("mwidget.{group}"));
    eventually(120, "caBundle injected everywhere", || async {
        let v = validating.get(&vname).await.ok()?;
        let m = mutating.get(&mname).await.ok()?;
        let c = crds.get(&spec.crd_name()).await.ok()?;
        let v_ok = v
            .webhooks?
            .iter()
            .all(|w| w.client_config.ca_bundle.as_ref().map(|b| &b.0) == Some(&issued_ca));
        let m_ok = m
            .webhooks?
            .iter()
            .all(|w| w.client_config.ca_bundle.as_ref().map(|b| &b.0) == Some(&issued_ca));
        let conversion = c.spec.conversion?;
        let c_ok =
            conversion.webhook?.client_config?.ca_bundle.map(|b| b.0) == Some(issued_ca.clone());
        (v_ok && m_ok && c_ok).then_some(())
    })
    .await;

    // olmv1 waited for the rollout: the Certificate and the Deployment are ready.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(180);
    loop {
        let e = api.get(&name).await.expect("extension");
        let p = support::extensions::condition(&e, "Progressing").expect("Progressing");
        if p.status == "True" && p.reason == "Succeeded" {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "Progressing not Succeeded after 180 s: {}/{}: {}",
            p.status,
            p.reason,
            p.message
        );
        tokio::time::sleep(std::time::Duration::from_millis(500)).await;
    }

    // The operator pod runs with the certificate mounted and is Ready.
    let deployments: Api<Deployment> = Api::namespaced(admin.clone(), &ns);
    eventually(180, "the webhook operator available", || async {
        let d = deployments.get(&spec.deployment_name()).await.ok()?;
        (d.status?.available_replicas? >= 1).then_some(())
    })
    .await;
    let pods: Api<Pod> = Api::namespaced(admin.clone(), &ns);
    let listed = pods
        .list(&kube::api::ListParams::default().labels(&format!("app={}", spec.deployment_name())))
        .await
        .expect("pods");
    assert!(
        listed.items.iter().any(|p| {
            let s = p.status.as_ref();
            s.and_then(|s| s.phase.as_deref()) == Some("Running")
                && s.and_then(|s| s.conditions.as_ref())
                    .is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
        }),
        "a Running, Ready operator pod: {:?}",
        listed.items.iter().map(|p| &p.status).collect::<Vec<_>>()
    );
    let pod_spec = listed.items[0].spec.as_ref().expect("pod spec");
    let secret_volumes: Vec<String> = pod_spec
        .volumes
        .iter()
        .flatten()
        .filter_map(|v| v.secret.as_ref()?.secret_name.clone())
        .collect();
    assert_eq!(
        secret_volumes,
        vec![cert_name.clone(), cert_name.clone()],
        "the apiservice-cert and webhook-cert volumes, both from cert-manager's Secret"
    );

    // The API server calls the webhooks. kube-proxy may follow the Service's endpoints
    // a moment after the pod is Ready: retry the first call until it reaches the pod.
    let v1 = widgets(&admin, &ns, &package, "v1");
    let created = eventually(60, "a Widget admitted through the webhooks", || async {
        match v1
            .create(
                &PostParams::default(),
                &widget(&package, "plain", json!({}), 3),
            )
            .await
        {
            Ok(w) => Some(w),
            Err(kube::Error::Api(e)) if e.code == 409 => v1.get("plain").await.ok(),
            Err(e) => {
                let e = e.to_string();
                eprintln!("creating Widget plain: {}", &e[..e.len().min(240)]);
                None
            }
        }
    })
    .await;
    // Mutating: the label was added on the way in.
    assert_eq!(
        created
            .metadata
            .labels
            .as_ref()
            .and_then(|l| l.get("mutated-by"))
            .map(String::as_str),
        Some("testimage"),
        "{:?}",
        created.metadata
    );
    // Validating: an object labelled deny=true is refused with the webhook's message.
    let denied = v1
        .create(
            &PostParams::default(),
            &widget(&package, "denied", json!({"deny": "true"}), 1),
        )
        .await
        .expect_err("the validating webhook denies deny=true");
    let message = denied.to_string();
    assert!(
        message.contains(DENY_MESSAGE) && message.contains(&vname),
        "{message}"
    );
    assert!(v1.get_opt("denied").await.expect("get").is_none());
    // Conversion: stored at v1 with spec.size, read at v2 as spec.replicas.
    let v2 = widgets(&admin, &ns, &package, "v2");
    let read = v2.get("plain").await.expect("Widget plain at v2");
    assert_eq!(
        read.types.as_ref().map(|t| t.api_version.clone()),
        Some(format!("{group}/v2"))
    );
    assert_eq!(read.data["spec"], json!({"replicas": 3}), "{:?}", read.data);
    // …and a v2 object written as replicas reads back at v1 as size.
    let at_v2: DynamicObject = serde_json::from_value(json!({
        "apiVersion": format!("{group}/v2"), "kind": "Widget",
        "metadata": {"name": "from-v2"}, "spec": {"replicas": 7},
    }))
    .expect("widget v2");
    v2.create(&PostParams::default(), &at_v2)
        .await
        .expect("create Widget at v2");
    let back = v1.get("from-v2").await.expect("Widget from-v2 at v1");
    assert_eq!(back.data["spec"], json!({"size": 7}), "{:?}", back.data);

    // olmv1's drift correction and the cainjector do not fight over the webhook
    // configurations: the injected caBundle is a field olmv1 does not apply.
    let versions = || async {
        (
            validating
                .get(&vname)
                .await
                .expect("vwc")
                .metadata
                .resource_version,
            mutating
                .get(&mname)
                .await
                .expect("mwc")
                .metadata
                .resource_version,
        )
    };
    let before = versions().await;
    tokio::time::sleep(std::time::Duration::from_secs(5)).await;
    assert_eq!(versions().await, before, "webhook configurations rewritten");

    // Uninstall: the Widgets go with their CRD, and everything olmv1 installed goes.
    api.delete(&name, &DeleteParams::default())
        .await
        .expect("delete extension");
    eventually(180, "the extension gone", || async {
        api.get_opt(&name).await.ok()?.is_none().then_some(())
    })
    .await;
    let services: Api<Service> = Api::namespaced(admin.clone(), &ns);
    let issuers = cert_manager_api(&admin, &ns, "Issuer");
    eventually(120, "every installed object removed", || async {
        let gone = [
            deployments
                .get_opt(&spec.deployment_name())
                .await
                .ok()?
                .is_none(),
            services.get_opt(&svc).await.ok()?.is_none(),
            certificates.get_opt(&cert_name).await.ok()?.is_none(),
            issuers
                .list(&Default::default())
                .await
                .ok()?
                .items
                .is_empty(),
            validating.get_opt(&vname).await.ok()?.is_none(),
            mutating.get_opt(&mname).await.ok()?.is_none(),
            crds.get_opt(&spec.crd_name()).await.ok()?.is_none(),
        ];
        gone.iter().all(|g| *g).then_some(())
    })
    .await;
}
