//! The aggregated API server test bundle (tests/api_services.rs, e2e/api_services.rs):
//! a CSV whose one Deployment runs `hack/testimage apiserver` and owns the APIService
//! `v1alpha1.<package>.example.com` (namespaced `widgets`, get/list), served on
//! container port 6443.
#![allow(dead_code)]

use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind};
use olmv1::testenv::demo::BundleSpec;
use serde_json::{Value, json};
use std::collections::BTreeMap;

pub const VERSION: &str = "v1alpha1";
pub const PORT: i32 = 6443;
/// The one Widget every list of `hack/testimage apiserver` holds (`ServedWidget`).
pub const SERVED_WIDGET: &str = "served-by-testimage";

pub fn group(package: &str) -> String {
    format!("{package}.example.com")
}

/// `<version>.<group>`.
pub fn api_service_name(package: &str) -> String {
    format!("{VERSION}.{}", group(package))
}

/// The bundle's files: a CSV (AllNamespaces) whose Deployment (ServiceAccount
/// `<package>-sa`) serves the owned APIService.
pub fn apiservice_bundle(spec: &BundleSpec, image: &str) -> BTreeMap<String, Vec<u8>> {
    let group = group(&spec.package);
    let deployment = spec.deployment_name();
    let sa = format!("{}-sa", spec.package);
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
            "apiservicedefinitions": {"owned": [{
                "name": api_service_name(&spec.package), "group": group, "version": VERSION,
                "kind": "Widget", "displayName": "Widget",
                "deploymentName": deployment, "containerPort": PORT,
            }]},
            "install": {"strategy": "deployment", "spec": {
                "clusterPermissions": [{"serviceAccountName": sa, "rules": [
                    {"apiGroups": [""], "resources": ["namespaces"], "verbs": ["get", "list", "watch"]}
                ]}],
                "deployments": [{"name": deployment, "spec": {
                    "replicas": 1,
                    "selector": {"matchLabels": {"app": deployment}},
                    "template": {
                        "metadata": {"labels": {"app": deployment}},
                        "spec": {"serviceAccountName": sa, "containers": [{
                            "name": "apiserver", "image": image, "args": ["apiserver"],
                            "env": [{"name": "API_GROUP", "value": group}, {"name": "API_VERSION", "value": VERSION}],
                            "ports": [{"name": "http", "containerPort": 8080}, {"name": "https", "containerPort": PORT}],
                            "readinessProbe": {"httpGet": {"path": "/readyz", "port": 8080}, "periodSeconds": 2},
                            "securityContext": {"runAsNonRoot": true, "allowPrivilegeEscalation": false, "capabilities": {"drop": ["ALL"]}},
                        }]}
                    }
                }}]
            }},
        }
    });
    let json = |v: &Value| serde_json::to_vec_pretty(v).expect("json");
    BTreeMap::from([(
        format!("manifests/{}.clusterserviceversion.json", spec.package),
        json(&csv),
    )])
}

pub fn api_services(client: &kube::Client) -> Api<DynamicObject> {
    let ar = ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("apiregistration.k8s.io", "v1", "APIService"),
        "apiservices",
    );
    Api::all_with(client.clone(), &ar)
}

/// The aggregated `widgets` of `ns`, read through the API server.
pub fn served_widgets(client: &kube::Client, ns: &str, package: &str) -> Api<DynamicObject> {
    let ar = ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk(&group(package), VERSION, "Widget"),
        "widgets",
    );
    Api::namespaced_with(client.clone(), ns, &ar)
}

/// The APIService's `Available` condition: (status, reason, message).
pub fn available(api_service: &DynamicObject) -> Option<(String, String, String)> {
    let conditions = api_service.data.pointer("/status/conditions")?.as_array()?;
    let c = conditions
        .iter()
        .find(|c| c["type"] == json!("Available"))?;
    let s = |k: &str| c[k].as_str().unwrap_or_default().to_string();
    Some((s("status"), s("reason"), s("message")))
}
