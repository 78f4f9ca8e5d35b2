//! Sections 7–9 of rendering and the webhook side of section 6: admission webhook
//! configurations, one Service per webhook (or APIService) deployment, cert-manager Issuer and
//! Certificate (or OpenShift service-ca's Service annotation), and the certificate
//! Secret volumes mounted into webhook deployments.

use super::super::csv::{DeploymentEntry, WebhookDescription, WebhookType};
use super::super::names::name_for_base_and_suffix;
use super::super::validate::CertProvider;
use super::{
    Ctx, SERVICE_CA_SERVING_SECRET, cert_name, inject_ca, object, set_annotation,
    webhook_service_name,
};
use serde_json::{Map, Value, json};
use std::collections::BTreeSet;

/// 7. One Validating/MutatingWebhookConfiguration per admission webhook.
pub(super) fn configurations(ctx: &Ctx<'_>, out: &mut Vec<Value>) {
    let ns = ctx.ns;
    for w in ctx.webhooks() {
        let (kind, list_key) = match w.type_ {
            WebhookType::ValidatingAdmissionWebhook => {
                ("ValidatingWebhookConfiguration", "webhooks")
            }
            WebhookType::MutatingAdmissionWebhook => ("MutatingWebhookConfiguration", "webhooks"),
            WebhookType::ConversionWebhook => continue,
        };
        let name = w
            .generate_name
            .strip_suffix('-')
            .unwrap_or(&w.generate_name);
        let svc = webhook_service_name(&w.deployment_name);
        let entry = webhook_entry(ctx, w, name, &svc);
        let mut cfg_obj = Value::Object(object(
            "admissionregistration.k8s.io/v1",
            kind,
            name,
            Some(ns),
        ));
        if let Some(o) = cfg_obj.as_object_mut() {
            o.insert(list_key.into(), json!([entry]));
        }
        inject_ca(ctx, &mut cfg_obj, &svc);
        out.push(cfg_obj);
    }
}

/// The one `webhooks[]` entry of a webhook configuration, fields in upstream's order.
fn webhook_entry(
    ctx: &Ctx<'_>,
    w: &WebhookDescription,
    name: &str,
    svc: &str,
) -> Map<String, Value> {
    let mut entry = Map::new();
    entry.insert("name".into(), Value::String(name.to_string()));
    let mut service = Map::new();
    service.insert("namespace".into(), Value::String(ctx.ns.to_string()));
    service.insert("name".into(), Value::String(svc.to_string()));
    if let Some(p) = &w.webhook_path {
        service.insert("path".into(), Value::String(p.clone()));
    }
    service.insert("port".into(), json!(w.port()));
    entry.insert("clientConfig".into(), json!({"service": service}));
    fn put(entry: &mut Map<String, Value>, k: &str, v: &Option<Value>) {
        if let Some(v) = v {
            entry.insert(k.into(), v.clone());
        }
    }
    put(&mut entry, "rules", &w.rules);
    put(&mut entry, "failurePolicy", &w.failure_policy);
    put(&mut entry, "matchPolicy", &w.match_policy);
    if !ctx.all_namespaces {
        entry.insert(
            "namespaceSelector".into(),
            json!({"matchExpressions": [{"key": "kubernetes.io/metadata.name", "operator": "In", "values": ctx.targets}]}),
        );
    }
    put(&mut entry, "objectSelector", &w.object_selector);
    put(&mut entry, "sideEffects", &w.side_effects);
    put(&mut entry, "timeoutSeconds", &w.timeout_seconds);
    put(
        &mut entry,
        "admissionReviewVersions",
        &w.admission_review_versions,
    );
    if w.type_ == WebhookType::MutatingAdmissionWebhook {
        put(&mut entry, "reinvocationPolicy", &w.reinvocation_policy);
    }
    entry
}

/// 8. Services and 9. certificates, per deployment serving webhooks or APIServices.
pub(super) fn services_and_certificates(ctx: &Ctx<'_>, out: &mut Vec<Value>) {
    let cert_deployments = ctx.cert_deployments();
    for d in ctx
        .strategy()
        .deployments
        .iter()
        .filter(|d| cert_deployments.contains(d.name.as_str()))
    {
        let svc = webhook_service_name(&d.name);
        let mut service = service(ctx, d, &svc);
        match ctx.certs {
            CertProvider::CertManager => {
                out.push(service);
                certificate(ctx.ns, &svc, out);
            }
            CertProvider::OpenShiftServiceCa => {
                set_annotation(&mut service, SERVICE_CA_SERVING_SECRET, &cert_name(&svc));
                out.push(service);
            }
            CertProvider::None => out.push(service),
        }
    }
}

/// The Service of deployment `d`: one port per distinct (port, target port) of its
/// webhooks and owned APIServices (an APIService's port is its container port on both
/// sides, OLM v0 `install/certresources.go`).
fn service(ctx: &Ctx<'_>, d: &DeploymentEntry, svc: &str) -> Value {
    let mut ports: Vec<(i32, String, Value)> = Vec::new();
    let webhook_ports = ctx
        .webhooks()
        .iter()
        .filter(|w| w.deployment_name == d.name)
        .map(|w| (w.port(), w.target_port.clone()));
    let api_ports = ctx
        .api_services()
        .iter()
        .filter(|a| a.deployment_name == d.name)
        .map(|a| (a.port(), None));
    for (port, target) in webhook_ports.chain(api_ports) {
        let target = target
            .filter(|v| !v.is_null())
            .unwrap_or_else(|| json!(port));
        let target_str = target
            .as_str()
            .map(str::to_string)
            .unwrap_or_else(|| target.to_string());
        if !ports.iter().any(|(p, t, _)| *p == port && *t == target_str) {
            ports.push((port, target_str, target));
        }
    }
    ports.sort_by(|a, b| a.0.cmp(&b.0).then_with(|| a.1.cmp(&b.1)));
    let ports: Vec<Value> = ports
        .into_iter()
        .map(|(p, _, t)| json!({"name": p.to_string(), "port": p, "targetPort": t}))
        .collect();
    let mut service = object("v1", "Service", svc, Some(ctx.ns));
    let mut spec = Map::new();
    spec.insert("ports".into(), Value::Array(ports));
    if let Some(sel) = d.spec.pointer("/selector/matchLabels") {
        spec.insert("selector".into(), sel.clone());
    }
    service.insert("spec".into(), Value::Object(spec));
    Value::Object(service)
}

/// The self-signed cert-manager Issuer and the Certificate of Service `svc`.
fn certificate(ns: &str, svc: &str, out: &mut Vec<Value>) {
    let cert = cert_name(svc);
    let issuer = name_for_base_and_suffix(&cert, "selfsigned-issuer");
    let mut iss = object("cert-manager.io/v1", "Issuer", &issuer, Some(ns));
    iss.insert("spec".into(), json!({"selfSigned": {}}));
    out.push(Value::Object(iss));
    let mut c = object("cert-manager.io/v1", "Certificate", &cert, Some(ns));
    c.insert(
        "spec".into(),
        json!({
            "commonName": format!("{svc}.{ns}"),
            "dnsNames": [format!("{svc}.{ns}"), format!("{svc}.{ns}.svc"), format!("{svc}.{ns}.svc.cluster.local")],
            "duration": "17520h0m0s",
            "isCA": false,
            "issuerRef": {"name": issuer},
            "privateKey": {"rotationPolicy": "Always"},
            "renewBefore": "24h0m0s",
            "secretName": cert,
            "usages": ["server auth"],
        }),
    );
    out.push(Value::Object(c));
}

const WEBHOOK_CERT_PATH: &str = "/tmp/k8s-webhook-server/serving-certs";
const APISERVICE_CERT_PATH: &str = "/apiserver.local.config/certificates";

fn name_of(v: &Value) -> &str {
    v.get("name").and_then(Value::as_str).unwrap_or_default()
}

/// Adds the cert Secret volumes and mounts to a webhook deployment. As upstream: the
/// volumes to replace are the two cert volumes by name plus every volume some container
/// mounts on one of the two cert paths; those volumes leave the pod and their mounts leave
/// every container, then the cert volumes and mounts are added.
pub(super) fn add_cert_volumes(dep: &mut Value, secret: &str) {
    let volumes = vec![
        json!({"name": "apiservice-cert", "secret": {"secretName": secret, "items": [{"key": "tls.crt", "path": "apiserver.crt"}, {"key": "tls.key", "path": "apiserver.key"}]}}),
        json!({"name": "webhook-cert", "secret": {"secretName": secret, "items": [{"key": "tls.crt", "path": "tls.crt"}, {"key": "tls.key", "path": "tls.key"}]}}),
    ];
    let mounts = [
        json!({"name": "apiservice-cert", "mountPath": APISERVICE_CERT_PATH}),
        json!({"name": "webhook-cert", "mountPath": WEBHOOK_CERT_PATH}),
    ];
    let paths = [APISERVICE_CERT_PATH, WEBHOOK_CERT_PATH];
    let Some(pod) = dep
        .pointer_mut("/spec/template/spec")
        .and_then(Value::as_object_mut)
    else {
        return;
    };
    let mut replaced: BTreeSet<String> = ["apiservice-cert", "webhook-cert"]
        .into_iter()
        .map(str::to_owned)
        .collect();
    for m in pod
        .get("containers")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|c| c.get("volumeMounts").and_then(Value::as_array))
        .flatten()
    {
        let path = m
            .get("mountPath")
            .and_then(Value::as_str)
            .unwrap_or_default();
        if paths.contains(&path) {
            replaced.insert(name_of(m).to_owned());
        }
    }
    let mut vols: Vec<Value> = pod
        .get("volumes")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    vols.retain(|v| !replaced.contains(name_of(v)));
    vols.extend(volumes);
    pod.insert("volumes".into(), Value::Array(vols));
    if let Some(containers) = pod.get_mut("containers").and_then(Value::as_array_mut) {
        for c in containers.iter_mut().filter_map(Value::as_object_mut) {
            let mut ms: Vec<Value> = c
                .get("volumeMounts")
                .and_then(Value::as_array)
                .cloned()
                .unwrap_or_default();
            ms.retain(|m| !replaced.contains(name_of(m)));
            ms.extend(mounts.iter().cloned());
            c.insert("volumeMounts".into(), Value::Array(ms));
        }
    }
}
