//! Bundle validation (docs/concepts/rendering.md §5.2 gatekeeping, §5.3 validators, unsupported
//! dependencies and CRD versions): pure, runs every check and reports every problem.

use super::Bundle;
use super::config::InstallModeSet;
use super::csv::{Csv, WebhookType};
use crate::kinds::{self, BundleOther};
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::fmt;

/// Who issues webhook serving certificates.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum CertProvider {
    /// cert-manager: Issuer + Certificate, `cert-manager.io/inject-ca-from`.
    #[default]
    CertManager,
    /// OpenShift's service-ca operator: the Service annotation
    /// `service.beta.openshift.io/serving-cert-secret-name` and
    /// `service.beta.openshift.io/inject-cabundle: "true"` on webhook configurations and
    /// conversion CRDs; no objects of its own.
    OpenShiftServiceCa,
    /// No provider: bundles with webhooks are rejected.
    None,
}

/// Every problem found in a bundle, in check order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ValidationErrors(pub Vec<String>);

impl fmt::Display for ValidationErrors {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0.join("\n"))
    }
}

impl std::error::Error for ValidationErrors {}

const DNS1123_SUBDOMAIN_MSG: &str = "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')";

/// Kubernetes `IsDNS1123Subdomain` error list (empty when valid).
pub(crate) fn dns1123_subdomain_errors(s: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if s.len() > 253 {
        errs.push("must be no more than 253 characters".to_string());
    }
    let label_ok = |l: &str| {
        let b = l.as_bytes();
        !b.is_empty()
            && b[0].is_ascii_alphanumeric()
            && !b[0].is_ascii_uppercase()
            && b[b.len() - 1].is_ascii_alphanumeric()
            && !b[b.len() - 1].is_ascii_uppercase()
            && b.iter()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == b'-')
    };
    if !s.split('.').all(label_ok) {
        errs.push(DNS1123_SUBDOMAIN_MSG.to_string());
    }
    errs
}

fn kind_of(v: &Value) -> &str {
    v.get("kind").and_then(Value::as_str).unwrap_or_default()
}

fn name_of(v: &Value) -> &str {
    v.pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or_default()
}

/// Dependency property types the resolver cannot honour.
const DEPENDENCY_TYPES: &[&str] = &["olm.package.required", "olm.gvk.required", "olm.constraint"];

/// Runs every check of docs/concepts/rendering.md §5.2–5.3 and reports all problems together.
pub fn validate(bundle: &Bundle, cert_provider: CertProvider) -> Result<(), ValidationErrors> {
    validate_checks(bundle, cert_provider, true)
}

/// [`validate`] for rendering with `options`: dependencies are not refused when
/// resolution checked them (`dependencies_checked`).
pub fn validate_with(
    bundle: &Bundle,
    options: &super::render::RenderOptions,
) -> Result<(), ValidationErrors> {
    validate_checks(bundle, options.cert_provider, !options.dependencies_checked)
}

fn validate_checks(
    bundle: &Bundle,
    cert_provider: CertProvider,
    refuse_dependencies: bool,
) -> Result<(), ValidationErrors> {
    let mut errs = Vec::new();
    let csv = match Csv::parse(&bundle.csv) {
        Ok(c) => c,
        Err(e) => return Err(ValidationErrors(vec![e.to_string()])),
    };
    let modes = InstallModeSet::from_entries(
        csv.spec
            .install_modes
            .iter()
            .map(|m| (m.type_.as_str(), m.supported)),
    );
    check_gatekeeping(&csv, modes, cert_provider, &mut errs);
    if refuse_dependencies {
        check_dependencies(bundle, &csv, &mut errs);
    }
    check_deployments(&csv, &mut errs);
    check_crds(bundle, &csv, &mut errs);
    check_webhooks(&csv, modes, &mut errs);
    check_api_services(&csv, &mut errs);
    check_other_manifests(bundle, &mut errs);
    if errs.is_empty() {
        Ok(())
    } else {
        Err(ValidationErrors(errs))
    }
}

/// docs/concepts/rendering.md §5.2 gatekeeping: API services without a certificate provider, webhooks without a certificate provider, install modes.
fn check_gatekeeping(
    csv: &Csv,
    modes: InstallModeSet,
    cert_provider: CertProvider,
    errs: &mut Vec<String>,
) {
    // Owned APIServices need a serving certificate, as webhooks do (docs/concepts/rendering.md §5.5).
    if !csv.spec.apiservicedefinitions.owned.is_empty() && cert_provider == CertProvider::None {
        errs.push("unsupported bundle: apiServiceDefintions are not supported".to_string());
    }
    if !csv.spec.webhookdefinitions.is_empty() && cert_provider == CertProvider::None {
        errs.push("unsupported bundle: webhookDefinitions are not supported".to_string());
    }
    if !(modes.all || modes.own || modes.single) {
        errs.push("unsupported bundle: bundle must support at least one of [AllNamespaces SingleNamespace OwnNamespace] install modes".to_string());
    }
}

/// Dependencies (not supported by the resolver): properties, `dependencies.yaml`,
/// required CRDs.
fn check_dependencies(bundle: &Bundle, csv: &Csv, errs: &mut Vec<String>) {
    let bundle_name = csv.metadata.name.as_str();
    // Dependencies (not supported by the resolver).
    let mut dep_types: BTreeSet<String> = BTreeSet::new();
    for p in &bundle.properties {
        if let Some(t) = p.get("type").and_then(Value::as_str)
            && DEPENDENCY_TYPES.contains(&t)
        {
            dep_types.insert(t.to_string());
        }
    }
    for d in &bundle.dependencies {
        let mapped = match d.get("type").and_then(Value::as_str) {
            Some("olm.package") | Some("olm.package.required") => Some("olm.package.required"),
            Some("olm.gvk") | Some("olm.gvk.required") => Some("olm.gvk.required"),
            Some("olm.constraint") => Some("olm.constraint"),
            _ => None,
        };
        if let Some(t) = mapped {
            dep_types.insert(t.to_string());
        }
    }
    if !csv.spec.customresourcedefinitions.required.is_empty() {
        dep_types.insert("olm.gvk.required".to_string());
    }
    for t in &dep_types {
        errs.push(format!(
            "bundle \"{bundle_name}\" has a dependency declared via property \"{t}\" which is currently not supported"
        ));
    }
}

/// Deployments: unique, DNS-1123 names, specs that parse.
fn check_deployments(csv: &Csv, errs: &mut Vec<String>) {
    let mut seen = HashSet::new();
    for d in &csv.spec.install.spec.deployments {
        if !seen.insert(d.name.as_str()) {
            errs.push(format!(
                "cluster service version contains duplicate strategy deployment spec '{}'",
                d.name
            ));
        }
        let dns = dns1123_subdomain_errors(&d.name);
        if !dns.is_empty() {
            errs.push(format!(
                "invalid cluster service version strategy deployment name '{}': {}",
                d.name,
                dns.join(", ")
            ));
        }
        if let Err(e) =
            serde_json::from_value::<k8s_openapi::api::apps::v1::DeploymentSpec>(d.spec.clone())
        {
            errs.push(format!(
                "invalid cluster service version strategy deployment spec '{}': {e}",
                d.name
            ));
        }
    }
}

/// The names of the CSV's install-strategy deployments.
fn deployment_names(csv: &Csv) -> HashSet<&str> {
    csv.spec
        .install
        .spec
        .deployments
        .iter()
        .map(|d| d.name.as_str())
        .collect()
}

/// Owned APIServices (OLM v0 `install/apiservice.go`): group and version set, one
/// definition per `<version>.<group>`, served by a deployment of the CSV.
fn check_api_services(csv: &Csv, errs: &mut Vec<String>) {
    let deployments = deployment_names(csv);
    let mut seen = HashSet::new();
    for a in &csv.spec.apiservicedefinitions.owned {
        let name = a.api_service_name();
        if a.group.is_empty() || a.version.is_empty() {
            errs.push(format!(
                "owned apiservice definition '{}' must set group and version",
                a.name
            ));
            continue;
        }
        if !seen.insert(name.clone()) {
            errs.push(format!(
                "cluster service version contains duplicate owned apiservice definition '{name}'"
            ));
        }
        if !deployments.contains(a.deployment_name.as_str()) {
            errs.push(format!(
                "owned apiservice definition '{name}' references non-existent deployment '{}'",
                a.deployment_name
            ));
        }
    }
}

/// CRDs: unique, every owned CRD present; the package name.
fn check_crds(bundle: &Bundle, csv: &Csv, errs: &mut Vec<String>) {
    let mut crd_names = HashSet::new();
    for crd in &bundle.crds {
        if !crd_names.insert(name_of(crd)) {
            errs.push(format!(
                "bundle contains duplicate custom resource definition '{}'",
                name_of(crd)
            ));
        }
    }
    // CRDs of other API versions are reported on their own below.
    let other_crds: HashSet<&str> = bundle
        .others
        .iter()
        .filter(|o| kind_of(o) == "CustomResourceDefinition")
        .map(name_of)
        .collect();
    for owned in &csv.spec.customresourcedefinitions.owned {
        if !crd_names.contains(owned.name.as_str()) && !other_crds.contains(owned.name.as_str()) {
            errs.push(format!(
                "cluster service definition references owned custom resource definition '{}' not found in bundle",
                owned.name
            ));
        }
    }
    if bundle.package_name.is_empty() {
        errs.push("package name is empty".to_string());
    }
}

/// Webhooks: conversion only in AllNamespaces-only bundles, existing deployments, unique
/// valid names, conversion CRDs owned and not shared, no forbidden rules.
fn check_webhooks(csv: &Csv, modes: InstallModeSet, errs: &mut Vec<String>) {
    let webhooks = &csv.spec.webhookdefinitions;
    if webhooks
        .iter()
        .any(|w| w.type_ == WebhookType::ConversionWebhook)
        && !modes.all_namespaces_only()
    {
        let conversion: Vec<&str> = webhooks
            .iter()
            .filter(|w| w.type_ == WebhookType::ConversionWebhook)
            .map(|w| w.generate_name.as_str())
            .collect();
        for n in conversion {
            errs.push(format!(
                "bundle contains conversion webhook \"{n}\" and supports install modes {modes} - conversion webhooks are only supported for bundles that only support AllNamespaces install mode"
            ));
        }
    }
    let deployments = deployment_names(csv);
    let mut seen_webhooks = HashSet::new();
    for w in webhooks {
        let t = w.type_.as_str();
        if !deployments.contains(w.deployment_name.as_str()) {
            errs.push(format!(
                "webhook of type '{t}' with name '{}' references non-existent deployment '{}'",
                w.generate_name, w.deployment_name
            ));
        }
        if !seen_webhooks.insert((w.type_, w.generate_name.as_str())) {
            errs.push(format!(
                "duplicate webhook '{}' of type '{t}'",
                w.generate_name
            ));
        }
        let dns = dns1123_subdomain_errors(&w.generate_name);
        if !dns.is_empty() {
            errs.push(format!(
                "webhook of type '{t}' has invalid name '{}': {}",
                w.generate_name,
                dns.join(", ")
            ));
        }
    }
    let mut conversion_by_crd: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
    let owned: HashSet<&str> = csv
        .spec
        .customresourcedefinitions
        .owned
        .iter()
        .map(|o| o.name.as_str())
        .collect();
    for w in webhooks
        .iter()
        .filter(|w| w.type_ == WebhookType::ConversionWebhook)
    {
        for crd in &w.conversion_crds {
            conversion_by_crd
                .entry(crd.as_str())
                .or_default()
                .push(w.generate_name.as_str());
            if !owned.contains(crd.as_str()) {
                errs.push(format!(
                    "conversion webhook '{}' references custom resource definition '{crd}' not owned bundle",
                    w.generate_name
                ));
            }
        }
    }
    for (crd, names) in &conversion_by_crd {
        if names.len() > 1 {
            errs.push(format!(
                "conversion webhooks [{}] reference same custom resource definition '{crd}'",
                names.join(",")
            ));
        }
    }
    for w in webhooks
        .iter()
        .filter(|w| w.type_ != WebhookType::ConversionWebhook)
    {
        check_forbidden_rules(&w.generate_name, w.rules.as_ref(), errs);
    }
}

/// Other manifests: only supported kinds, no CRDs of other API versions.
fn check_other_manifests(bundle: &Bundle, errs: &mut Vec<String>) {
    for o in &bundle.others {
        let kind = kind_of(o);
        if kind == "CustomResourceDefinition" {
            errs.push(format!(
                "unsupported custom resource definition \"{}\": apiVersion \"{}\" is not supported, only apiextensions.k8s.io/v1 (apiextensions.k8s.io/v1beta1 was removed in Kubernetes 1.22)",
                name_of(o),
                o.get("apiVersion").and_then(Value::as_str).unwrap_or_default()
            ));
        } else if kinds::bundle_other(kind) == BundleOther::Unsupported {
            errs.push(format!(
                "unsupported resource \"{}\" with kind \"{kind}\"",
                name_of(o)
            ));
        }
    }
}

fn check_forbidden_rules(name: &str, rules: Option<&Value>, errs: &mut Vec<String>) {
    let Some(rules) = rules.and_then(Value::as_array) else {
        return;
    };
    let strings = |r: &Value, key: &str| -> Vec<String> {
        r.get(key)
            .and_then(Value::as_array)
            .map(|a| {
                a.iter()
                    .filter_map(Value::as_str)
                    .map(str::to_string)
                    .collect()
            })
            .unwrap_or_default()
    };
    for rule in rules {
        let groups = strings(rule, "apiGroups");
        for g in &groups {
            if g == "*" || g == "olm.operatorframework.io" {
                errs.push(format!(
                    "webhook \"{name}\" contains forbidden rule: admission webhook rules cannot reference API group \"{g}\""
                ));
            }
        }
        if groups.iter().any(|g| g == "admissionregistration.k8s.io") {
            for r in strings(rule, "resources") {
                if matches!(
                    r.as_str(),
                    "*" | "mutatingwebhookconfiguration"
                        | "mutatingwebhookconfigurations"
                        | "validatingwebhookconfiguration"
                        | "validatingwebhookconfigurations"
                ) {
                    errs.push(format!(
                        "webhook \"{name}\" contains forbidden rule: admission webhook rules cannot reference resource \"{r}\" for API group \"admissionregistration.k8s.io\""
                    ));
                }
            }
        }
    }
}
