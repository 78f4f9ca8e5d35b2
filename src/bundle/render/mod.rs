//! Rendering a validated registry+v1 bundle into Kubernetes objects (docs/concepts/rendering.md §5.4–5.7):
//! ServiceAccounts, RBAC, CRDs, other manifests, Deployments, webhook configurations,
//! webhook and APIService Services, cert-manager objects and owned APIServices. Pure and deterministic: the output is
//! sorted by (kind, namespace, name) and the same input gives byte-identical output.

mod api_services;
pub mod operator_condition;
mod rbac;
mod typed;
mod webhooks;

use super::Bundle;
use super::config::{
    BundleConfig, ConfigError, DeploymentConfig, InstallModeSet, target_namespaces,
};
use super::csv::{
    ApiServiceDescription, Csv, CsvError, StrategySpec, WebhookDescription, WebhookType,
};
use super::deployment_config;
use super::names::name_for_base_and_suffix;
use super::validate::{CertProvider, ValidationErrors, validate_with};
use crate::kinds::{self, BundleOther};
use serde_json::{Map, Value, json};
use std::collections::{BTreeSet, HashMap};

/// Options of [`render`] that do not come from the ClusterExtension.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct RenderOptions {
    pub cert_provider: CertProvider,
    /// The cluster serves `operators.coreos.com/v2` `OperatorCondition`: render one for
    /// the bundle, with its Role, RoleBinding and env var ([`operator_condition`]).
    pub operator_condition: bool,
    /// The bundle's dependencies were checked by resolution and hold on the cluster
    /// (docs/concepts/dependencies.md §2): validation does not refuse them.
    pub dependencies_checked: bool,
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
/// OpenShift service-ca: injects its CA bundle into the annotated webhook configuration
/// or CRD.
const SERVICE_CA_INJECT: &str = "service.beta.openshift.io/inject-cabundle";
/// OpenShift service-ca: the Secret it issues the Service's serving certificate into.
const SERVICE_CA_SERVING_SECRET: &str = "service.beta.openshift.io/serving-cert-secret-name";

/// The CA injection annotation of the certificate provider on a webhook configuration
/// or conversion CRD served by Service `svc` (§5.5 item 9).
fn inject_ca(ctx: &Ctx<'_>, obj: &mut Value, svc: &str) {
    match ctx.certs {
        CertProvider::CertManager => {
            let from = format!("{}/{}", ctx.ns, cert_name(svc));
            set_annotation(obj, CERT_MANAGER_INJECT, &from);
        }
        CertProvider::OpenShiftServiceCa => set_annotation(obj, SERVICE_CA_INJECT, "true"),
        CertProvider::None => {}
    }
}

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

/// Renders `bundle` for `install_namespace` with the ClusterExtension configuration
/// `config` (`spec.config.inline`; `None` = `{}`). Runs [`validate`] first.
pub fn render(
    bundle: &Bundle,
    install_namespace: &str,
    config: Option<&Value>,
    options: &RenderOptions,
) -> Result<Vec<Value>, RenderError> {
    validate_with(bundle, options).map_err(RenderError::Invalid)?;
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
    validate_with(&bundle, options).map_err(RenderError::Invalid)?;
    let crds = std::mem::take(&mut bundle.crds);
    let others = std::mem::take(&mut bundle.others);
    render_validated(&bundle, crds, others, install_namespace, config, options)
}

/// What every section of [`render_validated`] reads: the parsed CSV and where it installs.
struct Ctx<'a> {
    csv: &'a Csv,
    /// The install namespace.
    ns: &'a str,
    /// Target namespaces; `[""]` in AllNamespaces mode.
    targets: &'a [String],
    all_namespaces: bool,
    /// Who issues the webhook serving certificates.
    certs: CertProvider,
}

impl<'a> Ctx<'a> {
    fn strategy(&self) -> &'a StrategySpec {
        &self.csv.spec.install.spec
    }

    fn webhooks(&self) -> &'a [WebhookDescription] {
        &self.csv.spec.webhookdefinitions
    }

    fn api_services(&self) -> &'a [ApiServiceDescription] {
        &self.csv.spec.apiservicedefinitions.owned
    }

    /// Names of the deployments that serve at least one webhook or owned APIService:
    /// each gets one Service and one serving certificate (OLM v0 shares them too).
    fn cert_deployments(&self) -> BTreeSet<&'a str> {
        self.webhooks()
            .iter()
            .map(|w| w.deployment_name.as_str())
            .chain(
                self.api_services()
                    .iter()
                    .map(|a| a.deployment_name.as_str()),
            )
            .collect()
    }
}

/// Renders an already validated bundle, section by section (reference docs/concepts/rendering.md §5.4 order).
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
    let ctx = Ctx {
        csv: &csv,
        ns: install_namespace,
        targets: &targets,
        all_namespaces: targets.len() == 1 && targets[0].is_empty(),
        certs: options.cert_provider,
    };
    let mut out: Vec<Value> = Vec::new();
    service_accounts(&ctx, &mut out);
    if !ctx.all_namespaces {
        rbac::namespaced(&ctx, &mut out);
    }
    rbac::cluster_wide(&ctx, &mut out);
    crds_with_conversion(&ctx, crds, &mut out)?;
    other_manifests(&ctx, others, &mut out);
    deployments(&ctx, cfg.deployment_config.as_ref(), &mut out);
    webhooks::configurations(&ctx, &mut out);
    webhooks::services_and_certificates(&ctx, &mut out);
    api_services::objects(&ctx, &mut out);
    if options.operator_condition {
        operator_condition::objects(&ctx, &mut out);
        let names: BTreeSet<&str> = ctx
            .strategy()
            .deployments
            .iter()
            .map(|d| d.name.as_str())
            .collect();
        let ours = |o: &Value| {
            str_at(o, "/kind") == "Deployment" && names.contains(str_at(o, "/metadata/name"))
        };
        for d in out.iter_mut().filter(|o| ours(o)) {
            operator_condition::inject_env(d, &csv.metadata.name);
        }
    }
    sort_objects(&mut out);
    Ok(out)
}

/// 1. One ServiceAccount per named account of the permissions (not `default`).
fn service_accounts(ctx: &Ctx<'_>, out: &mut Vec<Value>) {
    let strategy = ctx.strategy();
    let sas: BTreeSet<&str> = strategy
        .permissions
        .iter()
        .chain(&strategy.cluster_permissions)
        .map(|p| sa_name_or_default(&p.service_account_name))
        .filter(|n| *n != "default")
        .collect();
    for sa in sas {
        out.push(Value::Object(object(
            "v1",
            "ServiceAccount",
            sa,
            Some(ctx.ns),
        )));
    }
}

/// 4. The CRDs, without `status`, with the conversion webhook the CSV declares for them.
fn crds_with_conversion(
    ctx: &Ctx<'_>,
    crds: Vec<Value>,
    out: &mut Vec<Value>,
) -> Result<(), RenderError> {
    let ns = ctx.ns;
    let mut conversion_for: HashMap<&str, &WebhookDescription> = HashMap::new();
    for w in ctx
        .webhooks()
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
        typed::prune_crd(&mut crd);
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
            inject_ca(ctx, &mut crd, &svc);
        }
        out.push(crd);
    }
    Ok(())
}

/// 5. Other manifests, namespaced kinds moved into the install namespace.
fn other_manifests(ctx: &Ctx<'_>, others: Vec<Value>, out: &mut Vec<Value>) {
    for mut o in others {
        let kind = o.get("kind").and_then(Value::as_str).unwrap_or_default();
        if kinds::bundle_other(kind) == BundleOther::InstallNamespace
            && let Some(meta) = o.get_mut("metadata").and_then(Value::as_object_mut)
        {
            meta.insert("namespace".into(), Value::String(ctx.ns.to_string()));
        }
        out.push(o);
    }
}

/// 6. One Deployment per CSV deployment: annotations, cert volumes, deploymentConfig.
fn deployments(ctx: &Ctx<'_>, config: Option<&DeploymentConfig>, out: &mut Vec<Value>) {
    let ns = ctx.ns;
    let cert_deployments = ctx.cert_deployments();
    let target_annotation = ctx.targets.join(",");
    for d in &ctx.strategy().deployments {
        let mut dep = object("apps/v1", "Deployment", &d.name, Some(ns));
        if !d.label.is_empty()
            && let Some(meta) = dep.get_mut("metadata").and_then(Value::as_object_mut)
        {
            meta.insert("labels".into(), Value::Object(d.label.clone()));
        }
        let mut spec = d.spec.clone();
        typed::prune_deployment_spec(&mut spec);
        if let Some(spec_map) = spec.as_object_mut() {
            spec_map.insert("revisionHistoryLimit".into(), json!(1));
        }
        let mut annotations = ctx.csv.metadata.annotations.clone();
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
        if ctx.certs != CertProvider::None && cert_deployments.contains(d.name.as_str()) {
            webhooks::add_cert_volumes(&mut dep, &cert_name(&webhook_service_name(&d.name)));
        }
        if let Some(dc) = config {
            deployment_config::apply(&mut dep, dc);
        }
        out.push(dep);
    }
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
