//! Rendering a validated registry+v1 bundle into Kubernetes objects (reference §5.4–5.7):
//! ServiceAccounts, RBAC, CRDs, other manifests, Deployments, webhook configurations,
//! webhook Services and cert-manager objects. Pure and deterministic: the output is
//! sorted by (kind, namespace, name) and the same input gives byte-identical output.

use super::config::{BundleConfig, ConfigError, InstallModeSet, target_namespaces};
use super::csv::{Csv, CsvError, Permission, WebhookDescription, WebhookType};
use super::names::{GoPolicyRule, name_for_base_and_suffix, permission_object_name};
use super::validate::{NAMESPACED_KINDS, ValidationErrors, validate};
use super::{Bundle, deployment_config};
use serde_json::{Map, Value, json};
use std::collections::{BTreeSet, HashMap};

/// Who issues webhook serving certificates.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum CertProvider {
    /// cert-manager: Issuer + Certificate, `cert-manager.io/inject-ca-from`.
    #[default]
    CertManager,
    /// No provider: bundles with webhooks are rejected.
    None,
}

/// Options of [`render`] that do not come from the ClusterExtension.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct RenderOptions {
    pub cert_provider: CertProvider,
}

/// Why a bundle could not be rendered.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RenderError {
    /// The bundle failed validation (every problem, one per line).
    #[error("{0}")]
    Invalid(ValidationErrors),
    #[error(transparent)]
    Csv(#[from] CsvError),
    /// Invalid `spec.config.inline` or target namespaces (terminal).
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// A CRD cannot carry the conversion webhook the CSV declares.
    #[error("{0}")]
    Conversion(String),
}

const CERT_MANAGER_INJECT: &str = "cert-manager.io/inject-ca-from";

fn object(
    api_version: &str,
    kind: &str,
    name: &str,
    namespace: Option<&str>,
) -> Map<String, Value> {
    let mut meta = Map::new();
    meta.insert("name".into(), Value::String(name.to_string()));
    if let Some(ns) = namespace {
        meta.insert("namespace".into(), Value::String(ns.to_string()));
    }
    let mut o = Map::new();
    o.insert("apiVersion".into(), Value::String(api_version.to_string()));
    o.insert("kind".into(), Value::String(kind.to_string()));
    o.insert("metadata".into(), Value::Object(meta));
    o
}

fn sa_name_or_default(n: &str) -> &str {
    if n.is_empty() { "default" } else { n }
}

/// `<deployment with '.'→'-'>-service` (63-character rule).
pub fn webhook_service_name(deployment: &str) -> String {
    name_for_base_and_suffix(&deployment.replace('.', "-"), "service")
}

/// `<service>-cert`.
pub fn cert_name(service: &str) -> String {
    name_for_base_and_suffix(service, "cert")
}

fn rules_of(p: &Permission) -> Option<Vec<GoPolicyRule>> {
    p.rules
        .as_ref()
        .map(|r| r.iter().map(GoPolicyRule::from_value).collect())
}

fn namespaces_read_rule() -> (GoPolicyRule, Value) {
    let rule = GoPolicyRule {
        verbs: Some(vec!["get".into(), "list".into(), "watch".into()]),
        api_groups: vec![String::new()],
        resources: vec!["namespaces".into()],
        ..Default::default()
    };
    (
        rule,
        json!({"verbs": ["get", "list", "watch"], "apiGroups": [""], "resources": ["namespaces"]}),
    )
}

fn rbac_subject(sa: &str, ns: &str) -> Value {
    json!([{"kind": "ServiceAccount", "name": sa, "namespace": ns}])
}

fn role_ref(kind: &str, name: &str) -> Value {
    json!({"apiGroup": "rbac.authorization.k8s.io", "kind": kind, "name": name})
}

/// Renders `bundle` for `install_namespace` with the ClusterExtension configuration
/// `config` (`spec.config.inline`; `None` = `{}`). Runs [`validate`] first.
pub fn render(
    bundle: &Bundle,
    install_namespace: &str,
    config: Option<&Value>,
    options: &RenderOptions,
) -> Result<Vec<Value>, RenderError> {
    validate(bundle, options.cert_provider).map_err(RenderError::Invalid)?;
    render_validated(
        bundle,
        bundle.crds.clone(),
        bundle.others.clone(),
        install_namespace,
        config,
        options,
    )
}

/// [`render`] that consumes the bundle, moving its CRDs and other manifests into the
/// output instead of copying them (half the peak memory for large bundles).
pub fn render_owned(
    mut bundle: Bundle,
    install_namespace: &str,
    config: Option<&Value>,
    options: &RenderOptions,
) -> Result<Vec<Value>, RenderError> {
    validate(&bundle, options.cert_provider).map_err(RenderError::Invalid)?;
    let crds = std::mem::take(&mut bundle.crds);
    let others = std::mem::take(&mut bundle.others);
    render_validated(&bundle, crds, others, install_namespace, config, options)
}

fn render_validated(
    bundle: &Bundle,
    crds: Vec<Value>,
    others: Vec<Value>,
    install_namespace: &str,
    config: Option<&Value>,
    options: &RenderOptions,
) -> Result<Vec<Value>, RenderError> {
    let csv = Csv::parse(&bundle.csv)?;
    let modes = InstallModeSet::from_entries(
        csv.spec
            .install_modes
            .iter()
            .map(|m| (m.type_.as_str(), m.supported)),
    );
    let cfg = BundleConfig::parse(config, modes, install_namespace)?;
    let targets = target_namespaces(modes, cfg.watch_namespace.as_deref(), install_namespace)?;
    let all_namespaces = targets.len() == 1 && targets[0].is_empty();
    let ns = install_namespace;
    let csv_name = csv.metadata.name.as_str();
    let strategy = &csv.spec.install.spec;
    let cert_manager = options.cert_provider == CertProvider::CertManager;
    let mut out: Vec<Value> = Vec::new();

    // 1. ServiceAccounts
    let sas: BTreeSet<&str> = strategy
        .permissions
        .iter()
        .chain(&strategy.cluster_permissions)
        .map(|p| sa_name_or_default(&p.service_account_name))
        .filter(|n| *n != "default")
        .collect();
    for sa in sas {
        out.push(Value::Object(object("v1", "ServiceAccount", sa, Some(ns))));
    }

    // 2. Roles/RoleBindings per target namespace
    if !all_namespaces {
        for target in &targets {
            for p in &strategy.permissions {
                let sa = sa_name_or_default(&p.service_account_name);
                let name = permission_object_name(
                    &format!("{csv_name}-{sa}"),
                    &p.service_account_name,
                    rules_of(p).as_deref(),
                );
                let mut role = object("rbac.authorization.k8s.io/v1", "Role", &name, Some(target));
                role.insert(
                    "rules".into(),
                    Value::Array(p.rules.clone().unwrap_or_default()),
                );
                out.push(Value::Object(role));
                let mut rb = object(
                    "rbac.authorization.k8s.io/v1",
                    "RoleBinding",
                    &name,
                    Some(target),
                );
                rb.insert("roleRef".into(), role_ref("Role", &name));
                rb.insert("subjects".into(), rbac_subject(sa, ns));
                out.push(Value::Object(rb));
            }
        }
    }

    // 3. ClusterRoles/ClusterRoleBindings
    let mut cluster_entries: Vec<(String, Option<Vec<GoPolicyRule>>, Vec<Value>)> = strategy
        .cluster_permissions
        .iter()
        .map(|p| {
            (
                p.service_account_name.clone(),
                rules_of(p),
                p.rules.clone().unwrap_or_default(),
            )
        })
        .collect();
    if all_namespaces {
        let (go_rule, rule) = namespaces_read_rule();
        for p in &strategy.permissions {
            let mut go_rules = rules_of(p).unwrap_or_default();
            go_rules.push(go_rule.clone());
            let mut rules = p.rules.clone().unwrap_or_default();
            rules.push(rule.clone());
            cluster_entries.push((p.service_account_name.clone(), Some(go_rules), rules));
        }
    }
    for (sa_raw, go_rules, rules) in &cluster_entries {
        let sa = sa_name_or_default(sa_raw);
        let name = permission_object_name(&format!("{csv_name}-{sa}"), sa_raw, go_rules.as_deref());
        let mut cr = object("rbac.authorization.k8s.io/v1", "ClusterRole", &name, None);
        cr.insert("rules".into(), Value::Array(rules.clone()));
        out.push(Value::Object(cr));
        let mut crb = object(
            "rbac.authorization.k8s.io/v1",
            "ClusterRoleBinding",
            &name,
            None,
        );
        crb.insert("roleRef".into(), role_ref("ClusterRole", &name));
        crb.insert("subjects".into(), rbac_subject(sa, ns));
        out.push(Value::Object(crb));
    }

    // 4. CRDs (with conversion webhooks)
    let webhooks = &csv.spec.webhookdefinitions;
    let mut conversion_for: HashMap<&str, &WebhookDescription> = HashMap::new();
    for w in webhooks
        .iter()
        .filter(|w| w.type_ == WebhookType::ConversionWebhook)
    {
        for crd in &w.conversion_crds {
            if conversion_for.insert(crd.as_str(), w).is_some() {
                return Err(RenderError::Conversion(format!(
                    "custom resource definition '{crd}' is referenced by multiple conversion webhook definitions"
                )));
            }
        }
    }
    for mut crd in crds {
        if let Some(o) = crd.as_object_mut() {
            o.remove("status");
        }
        let crd_name = crd
            .pointer("/metadata/name")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string();
        if let Some(w) = conversion_for.get(crd_name.as_str()) {
            if crd
                .pointer("/spec/preserveUnknownFields")
                .and_then(Value::as_bool)
                == Some(true)
            {
                return Err(RenderError::Conversion(format!(
                    "custom resource definition '{crd_name}' must have spec.preserveUnknownFields set to false to let API Server call webhook to do the conversion"
                )));
            }
            let svc = webhook_service_name(&w.deployment_name);
            let mut webhook = Map::new();
            webhook.insert(
                "clientConfig".into(),
                json!({"service": {"namespace": ns, "name": svc, "path": w.webhook_path.clone().unwrap_or_else(|| "/".into()), "port": w.port()}}),
            );
            if let Some(v) = &w.admission_review_versions {
                webhook.insert("conversionReviewVersions".into(), v.clone());
            }
            if let Some(spec) = crd.get_mut("spec").and_then(Value::as_object_mut) {
                spec.insert(
                    "conversion".into(),
                    json!({"strategy": "Webhook", "webhook": webhook}),
                );
            }
            if cert_manager {
                set_annotation(
                    &mut crd,
                    CERT_MANAGER_INJECT,
                    &format!("{ns}/{}", cert_name(&svc)),
                );
            }
        }
        out.push(crd);
    }

    // 5. Other manifests
    for mut o in others {
        let kind = o.get("kind").and_then(Value::as_str).unwrap_or_default();
        if NAMESPACED_KINDS.contains(&kind)
            && let Some(meta) = o.get_mut("metadata").and_then(Value::as_object_mut)
        {
            meta.insert("namespace".into(), Value::String(ns.to_string()));
        }
        out.push(o);
    }

    // 6. Deployments
    let webhook_deployments: BTreeSet<&str> = webhooks
        .iter()
        .map(|w| w.deployment_name.as_str())
        .collect();
    let target_annotation = targets.join(",");
    for d in &strategy.deployments {
        let mut dep = object("apps/v1", "Deployment", &d.name, Some(ns));
        if !d.label.is_empty()
            && let Some(meta) = dep.get_mut("metadata").and_then(Value::as_object_mut)
        {
            meta.insert("labels".into(), Value::Object(d.label.clone()));
        }
        let mut spec = d.spec.clone();
        if let Some(spec_map) = spec.as_object_mut() {
            spec_map.insert("revisionHistoryLimit".into(), json!(1));
        }
        let mut annotations = csv.metadata.annotations.clone();
        if let Some(tpl) = spec
            .pointer("/template/metadata/annotations")
            .and_then(Value::as_object)
        {
            for (k, v) in tpl {
                annotations.insert(k.clone(), v.clone());
            }
        }
        annotations.insert(
            "olm.targetNamespaces".into(),
            Value::String(target_annotation.clone()),
        );
        annotations.insert(
            "olm.operatorNamespace".into(),
            Value::String(ns.to_string()),
        );
        set_path(
            &mut spec,
            &["template", "metadata"],
            "annotations",
            Value::Object(annotations),
        );
        let mut dep = {
            dep.insert("spec".into(), spec);
            Value::Object(dep)
        };
        if cert_manager && webhook_deployments.contains(d.name.as_str()) {
            add_cert_volumes(&mut dep, &cert_name(&webhook_service_name(&d.name)));
        }
        if let Some(dc) = &cfg.deployment_config {
            deployment_config::apply(&mut dep, dc);
        }
        out.push(dep);
    }

    // 7. Webhook configurations
    for w in webhooks {
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
        let mut entry = Map::new();
        entry.insert("name".into(), Value::String(name.to_string()));
        let mut service = Map::new();
        service.insert("namespace".into(), Value::String(ns.to_string()));
        service.insert("name".into(), Value::String(svc.clone()));
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
        if !all_namespaces {
            entry.insert(
                "namespaceSelector".into(),
                json!({"matchExpressions": [{"key": "kubernetes.io/metadata.name", "operator": "In", "values": targets}]}),
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
        let mut cfg_obj = Value::Object(object(
            "admissionregistration.k8s.io/v1",
            kind,
            name,
            Some(ns),
        ));
        if let Some(o) = cfg_obj.as_object_mut() {
            o.insert(list_key.into(), json!([entry]));
        }
        if cert_manager {
            set_annotation(
                &mut cfg_obj,
                CERT_MANAGER_INJECT,
                &format!("{ns}/{}", cert_name(&svc)),
            );
        }
        out.push(cfg_obj);
    }

    // 8. Services and 9. certificates, per webhook deployment
    for d in strategy
        .deployments
        .iter()
        .filter(|d| webhook_deployments.contains(d.name.as_str()))
    {
        let svc = webhook_service_name(&d.name);
        let mut ports: Vec<(i32, String, Value)> = Vec::new();
        for w in webhooks.iter().filter(|w| w.deployment_name == d.name) {
            let target = w
                .target_port
                .clone()
                .filter(|v| !v.is_null())
                .unwrap_or_else(|| json!(w.port()));
            let target_str = target
                .as_str()
                .map(str::to_string)
                .unwrap_or_else(|| target.to_string());
            if !ports
                .iter()
                .any(|(p, t, _)| *p == w.port() && *t == target_str)
            {
                ports.push((w.port(), target_str, target));
            }
        }
        ports.sort_by(|a, b| a.0.cmp(&b.0).then_with(|| a.1.cmp(&b.1)));
        let ports: Vec<Value> = ports
            .into_iter()
            .map(|(p, _, t)| json!({"name": p.to_string(), "port": p, "targetPort": t}))
            .collect();
        let mut service = object("v1", "Service", &svc, Some(ns));
        let mut spec = Map::new();
        spec.insert("ports".into(), Value::Array(ports));
        if let Some(sel) = d.spec.pointer("/selector/matchLabels") {
            spec.insert("selector".into(), sel.clone());
        }
        service.insert("spec".into(), Value::Object(spec));
        out.push(Value::Object(service));
        if cert_manager {
            let cert = cert_name(&svc);
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
    }

    sort_objects(&mut out);
    Ok(out)
}

fn str_at<'a>(v: &'a Value, pointer: &str) -> &'a str {
    v.pointer(pointer)
        .and_then(Value::as_str)
        .unwrap_or_default()
}

/// Sorts objects by (kind, namespace, name); stable for equal keys.
pub fn sort_objects(objects: &mut [Value]) {
    objects.sort_by(|a, b| {
        (
            str_at(a, "/kind"),
            str_at(a, "/metadata/namespace"),
            str_at(a, "/metadata/name"),
        )
            .cmp(&(
                str_at(b, "/kind"),
                str_at(b, "/metadata/namespace"),
                str_at(b, "/metadata/name"),
            ))
    });
}

fn set_path(v: &mut Value, path: &[&str], key: &str, value: Value) {
    let mut cur = v;
    for p in path {
        let Some(map) = cur.as_object_mut() else {
            return;
        };
        let child = map
            .entry(p.to_string())
            .or_insert_with(|| Value::Object(Map::new()));
        if !child.is_object() {
            *child = Value::Object(Map::new());
        }
        cur = child;
    }
    if let Some(map) = cur.as_object_mut() {
        map.insert(key.to_string(), value);
    }
}

fn set_annotation(obj: &mut Value, key: &str, value: &str) {
    let mut cur = obj;
    for p in ["metadata", "annotations"] {
        let Some(map) = cur.as_object_mut() else {
            return;
        };
        let child = map.entry(p).or_insert_with(|| Value::Object(Map::new()));
        if !child.is_object() {
            *child = Value::Object(Map::new());
        }
        cur = child;
    }
    if let Some(map) = cur.as_object_mut() {
        map.insert(key.into(), Value::String(value.into()));
    }
}

const WEBHOOK_CERT_PATH: &str = "/tmp/k8s-webhook-server/serving-certs";
const APISERVICE_CERT_PATH: &str = "/apiserver.local.config/certificates";

/// Adds the cert Secret volumes/mounts, replacing same-named volumes and same-named or
/// same-path mounts.
fn add_cert_volumes(dep: &mut Value, secret: &str) {
    let volumes = vec![
        json!({"name": "apiservice-cert", "secret": {"secretName": secret, "items": [{"key": "tls.crt", "path": "apiserver.crt"}, {"key": "tls.key", "path": "apiserver.key"}]}}),
        json!({"name": "webhook-cert", "secret": {"secretName": secret, "items": [{"key": "tls.crt", "path": "tls.crt"}, {"key": "tls.key", "path": "tls.key"}]}}),
    ];
    let mounts = [
        json!({"name": "apiservice-cert", "mountPath": APISERVICE_CERT_PATH}),
        json!({"name": "webhook-cert", "mountPath": WEBHOOK_CERT_PATH}),
    ];
    let names = ["apiservice-cert", "webhook-cert"];
    let paths = [APISERVICE_CERT_PATH, WEBHOOK_CERT_PATH];
    let Some(pod) = dep
        .pointer_mut("/spec/template/spec")
        .and_then(Value::as_object_mut)
    else {
        return;
    };
    let mut vols: Vec<Value> = pod
        .get("volumes")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    vols.retain(|v| !names.contains(&v.get("name").and_then(Value::as_str).unwrap_or_default()));
    vols.extend(volumes);
    pod.insert("volumes".into(), Value::Array(vols));
    if let Some(containers) = pod.get_mut("containers").and_then(Value::as_array_mut) {
        for c in containers.iter_mut().filter_map(Value::as_object_mut) {
            let mut ms: Vec<Value> = c
                .get("volumeMounts")
                .and_then(Value::as_array)
                .cloned()
                .unwrap_or_default();
            ms.retain(|m| {
                !names.contains(&m.get("name").and_then(Value::as_str).unwrap_or_default())
                    && !paths.contains(
                        &m.get("mountPath")
                            .and_then(Value::as_str)
                            .unwrap_or_default(),
                    )
            });
            ms.extend(mounts.iter().cloned());
            c.insert("volumeMounts".into(), Value::Array(ms));
        }
    }
}

/// Serialises objects as YAML documents separated by `---`.
pub fn to_yaml_documents(objects: &[Value]) -> Result<String, String> {
    let mut out = String::new();
    for o in objects {
        out.push_str("---\n");
        let doc = serde_saphyr::to_string(o).map_err(|e| e.to_string())?;
        out.push_str(&doc);
        if !doc.ends_with('\n') {
            out.push('\n');
        }
    }
    Ok(out)
}
