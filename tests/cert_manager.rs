//! Real cert-manager on the test control plane (no node needed): the controller issues
//! a Certificate from a self-signed Issuer, and the cainjector copies its CA into a
//! ValidatingWebhookConfiguration and a CRD's conversion webhook annotated with
//! `cert-manager.io/inject-ca-from` — the objects olmv1 renders for webhook bundles.

use crate::support;

use k8s_openapi::api::admissionregistration::v1::ValidatingWebhookConfiguration;
use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, ApiResource, DeleteParams, DynamicObject, GroupVersionKind};
use serde_json::json;
use support::{cluster_with_cert_manager, eventually, namespace};

fn object(v: serde_json::Value) -> DynamicObject {
    serde_json::from_value(v).expect("object")
}

#[tokio::test]
async fn cert_manager_issues_a_certificate_and_injects_its_ca() {
    let cluster = cluster_with_cert_manager();
    let admin = cluster.admin().await;
    let ns = namespace(&admin, "certs").await;
    let group = format!("{}.example.com", support::unique("inj"));
    let inject = json!({"cert-manager.io/inject-ca-from": format!("{ns}/serving-cert")});
    let objects = vec![
        object(json!({
            "apiVersion": "cert-manager.io/v1", "kind": "Issuer",
            "metadata": {"name": "selfsigned", "namespace": ns}, "spec": {"selfSigned": {}},
        })),
        object(json!({
            "apiVersion": "cert-manager.io/v1", "kind": "Certificate",
            "metadata": {"name": "serving-cert", "namespace": ns},
            "spec": {
                "secretName": "serving-cert", "commonName": format!("svc.{ns}.svc"),
                "dnsNames": [format!("svc.{ns}.svc")], "usages": ["server auth"],
                "privateKey": {"rotationPolicy": "Always"}, "issuerRef": {"name": "selfsigned"},
            },
        })),
        object(json!({
            "apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingWebhookConfiguration",
            "metadata": {"name": format!("v.{group}"), "annotations": inject},
            "webhooks": [{
                "name": format!("v.{group}"), "sideEffects": "None", "admissionReviewVersions": ["v1"],
                "clientConfig": {"service": {"namespace": ns, "name": "svc", "path": "/validate", "port": 443}},
                "rules": [{"apiGroups": [group], "apiVersions": ["*"], "operations": ["CREATE"], "resources": ["things"]}],
            }],
        })),
        object(json!({
            "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": format!("things.{group}"), "annotations": inject},
            "spec": {
                "group": group, "scope": "Namespaced",
                "names": {"kind": "Thing", "listKind": "ThingList", "plural": "things", "singular": "thing"},
                "versions": [
                    {"name": "v1", "served": true, "storage": true, "schema": {"openAPIV3Schema": {"type": "object"}}},
                    {"name": "v2", "served": true, "storage": false, "schema": {"openAPIV3Schema": {"type": "object"}}},
                ],
                "conversion": {"strategy": "Webhook", "webhook": {
                    "conversionReviewVersions": ["v1"],
                    "clientConfig": {"service": {"namespace": ns, "name": "svc", "path": "/convert", "port": 443}},
                }},
            },
        })),
    ];
    olmv1::testenv::manifests::apply_objects(&admin, &objects)
        .await
        .expect("apply");

    let ar = ApiResource::from_gvk(&GroupVersionKind::gvk(
        "cert-manager.io",
        "v1",
        "Certificate",
    ));
    let certificates: Api<DynamicObject> = Api::namespaced_with(admin.clone(), &ns, &ar);
    eventually(60, "Certificate Ready", || async {
        let c = serde_json::to_value(certificates.get("serving-cert").await.ok()?).ok()?;
        olmv1::testenv::cert_manager::ready_condition(&c)
            .is_some_and(|r| r.0)
            .then_some(())
    })
    .await;
    let secrets: Api<Secret> = Api::namespaced(admin.clone(), &ns);
    let data = secrets
        .get("serving-cert")
        .await
        .expect("Secret")
        .data
        .expect("data");
    let ca = data.get("ca.crt").expect("ca.crt").0.clone();
    assert!(String::from_utf8_lossy(&ca).contains("BEGIN CERTIFICATE"));
    assert!(data.get("tls.key").is_some_and(|k| !k.0.is_empty()));

    let webhooks: Api<ValidatingWebhookConfiguration> = Api::all(admin.clone());
    let crds: Api<CustomResourceDefinition> = Api::all(admin.clone());
    eventually(60, "CA injected into the webhook and the CRD", || async {
        let w = webhooks.get(&format!("v.{group}")).await.ok()?;
        let injected_webhook = w.webhooks?.first()?.client_config.ca_bundle.clone()?.0;
        let c = crds.get(&format!("things.{group}")).await.ok()?;
        let injected_crd = c.spec.conversion?.webhook?.client_config?.ca_bundle?.0;
        (injected_webhook == ca && injected_crd == ca).then_some(())
    })
    .await;

    // A re-issued certificate (its Secret lost) is injected too.
    secrets
        .delete("serving-cert", &DeleteParams::default())
        .await
        .expect("delete Secret");
    // The cainjector keeps the previous CA beside the new one for a while (clients
    // with either certificate keep working): the bundle must contain the new one.
    eventually(60, "the re-issued CA injected", || async {
        let s = secrets.get_opt("serving-cert").await.ok()??;
        let current = s.data?.get("ca.crt")?.0.clone();
        let w = webhooks.get(&format!("v.{group}")).await.ok()?;
        let injected = w.webhooks?.first()?.client_config.ca_bundle.clone()?.0;
        let injected = String::from_utf8_lossy(&injected).into_owned();
        let current_pem = String::from_utf8_lossy(&current).into_owned();
        (current != ca && injected.contains(current_pem.trim())).then_some(())
    })
    .await;

    crds.delete(&format!("things.{group}"), &DeleteParams::default())
        .await
        .expect("delete CRD");
    webhooks
        .delete(&format!("v.{group}"), &DeleteParams::default())
        .await
        .expect("delete webhook");
}
