//! Installer ServiceAccount permissions (reference §7, A3): the pure computation of every
//! (verb, apiGroup, resource, resourceName, namespace) the account needs to manage a set
//! of rendered objects, the missing-permissions message in upstream's format, the
//! least-privilege RBAC generator behind `olmv1 rbac` ([`rbac`]), and the evaluation of
//! the requirements for an account with concurrent SubjectAccessReviews ([`evaluate`]).
//!
//! Model: for every object `get, update, patch, delete` scoped to its name and
//! `create, list, watch` on its resource in its namespace (`""` for cluster-scoped
//! objects). `list, watch` are required because drift watches on the managed kinds run
//! as the installer account (the controller's own ClusterRole has no read access to
//! arbitrary kinds), one watch per (kind, namespace) with the owner-label selector.
//! `update` on `clusterextensions/finalizers` for the extension's name (ownerReferences
//! with blockOwnerDeletion). For every bundled ClusterRole/Role the account must either
//! hold every permission it grants, or have both `bind` and `escalate` on it by name.

pub mod rbac;
mod sar;

pub use sar::{DEFAULT_CONCURRENCY, EvaluateError, evaluate, preflight};

use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;

/// The API group of the ClusterExtension API.
pub const OLM_GROUP: &str = "olm.operatorframework.io";
const RBAC_GROUP: &str = "rbac.authorization.k8s.io";

/// Verbs needed on each object, narrowed to its name.
pub const NAMED_VERBS: [&str; 4] = ["get", "update", "patch", "delete"];
/// Verbs needed on each resource (cannot be narrowed by name).
pub const RESOURCE_VERBS: [&str; 3] = ["create", "list", "watch"];

/// Errors of describing rendered objects.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum PermissionError {
    #[error("object #{index} has no {field}")]
    MissingField { index: usize, field: &'static str },
    #[error("object #{index} ({kind} {name}) has an invalid apiVersion {api_version:?}")]
    BadApiVersion {
        index: usize,
        kind: String,
        name: String,
        api_version: String,
    },
}

/// One atomic permission (a SubjectAccessReview's attributes).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Permission {
    Resource {
        namespace: String,
        group: String,
        /// Resource, with `/<subresource>` when it targets a subresource.
        resource: String,
        /// `""` = any name.
        name: String,
        verb: String,
    },
    NonResource {
        path: String,
        verb: String,
    },
}

impl Permission {
    pub fn resource(namespace: &str, group: &str, resource: &str, name: &str, verb: &str) -> Self {
        Permission::Resource {
            namespace: namespace.to_owned(),
            group: group.to_owned(),
            resource: resource.to_owned(),
            name: name.to_owned(),
            verb: verb.to_owned(),
        }
    }
}

/// The REST resource behind a kind.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResourceInfo {
    pub resource: String,
    pub namespaced: bool,
}

/// Maps (group, kind) to its resource: built-in kinds, kinds defined by CRDs among the
/// objects, and whatever the caller adds from discovery.
#[derive(Debug, Clone, Default)]
pub struct ResourceMap {
    map: BTreeMap<(String, String), ResourceInfo>,
}

const BUILTIN: &[(&str, &str, &str, bool)] = &[
    ("", "Namespace", "namespaces", false),
    ("", "ServiceAccount", "serviceaccounts", true),
    ("", "Secret", "secrets", true),
    ("", "ConfigMap", "configmaps", true),
    ("", "Service", "services", true),
    ("", "PersistentVolume", "persistentvolumes", false),
    ("", "PersistentVolumeClaim", "persistentvolumeclaims", true),
    ("", "ResourceQuota", "resourcequotas", true),
    ("", "LimitRange", "limitranges", true),
    ("", "Pod", "pods", true),
    ("", "Endpoints", "endpoints", true),
    ("apps", "Deployment", "deployments", true),
    ("apps", "StatefulSet", "statefulsets", true),
    ("apps", "DaemonSet", "daemonsets", true),
    ("apps", "ReplicaSet", "replicasets", true),
    ("batch", "Job", "jobs", true),
    ("batch", "CronJob", "cronjobs", true),
    (RBAC_GROUP, "ClusterRole", "clusterroles", false),
    (
        RBAC_GROUP,
        "ClusterRoleBinding",
        "clusterrolebindings",
        false,
    ),
    (RBAC_GROUP, "Role", "roles", true),
    (RBAC_GROUP, "RoleBinding", "rolebindings", true),
    (
        "apiextensions.k8s.io",
        "CustomResourceDefinition",
        "customresourcedefinitions",
        false,
    ),
    (
        "admissionregistration.k8s.io",
        "ValidatingWebhookConfiguration",
        "validatingwebhookconfigurations",
        false,
    ),
    (
        "admissionregistration.k8s.io",
        "MutatingWebhookConfiguration",
        "mutatingwebhookconfigurations",
        false,
    ),
    (
        "admissionregistration.k8s.io",
        "ValidatingAdmissionPolicy",
        "validatingadmissionpolicies",
        false,
    ),
    (
        "admissionregistration.k8s.io",
        "ValidatingAdmissionPolicyBinding",
        "validatingadmissionpolicybindings",
        false,
    ),
    ("apiregistration.k8s.io", "APIService", "apiservices", false),
    (
        "scheduling.k8s.io",
        "PriorityClass",
        "priorityclasses",
        false,
    ),
    ("storage.k8s.io", "StorageClass", "storageclasses", false),
    (
        "networking.k8s.io",
        "NetworkPolicy",
        "networkpolicies",
        true,
    ),
    ("networking.k8s.io", "Ingress", "ingresses", true),
    (
        "policy",
        "PodDisruptionBudget",
        "poddisruptionbudgets",
        true,
    ),
    (
        "autoscaling",
        "HorizontalPodAutoscaler",
        "horizontalpodautoscalers",
        true,
    ),
    (
        "autoscaling.k8s.io",
        "VerticalPodAutoscaler",
        "verticalpodautoscalers",
        true,
    ),
    (
        "monitoring.coreos.com",
        "ServiceMonitor",
        "servicemonitors",
        true,
    ),
    ("monitoring.coreos.com", "PodMonitor", "podmonitors", true),
    (
        "monitoring.coreos.com",
        "PrometheusRule",
        "prometheusrules",
        true,
    ),
    ("cert-manager.io", "Certificate", "certificates", true),
    ("cert-manager.io", "Issuer", "issuers", true),
    ("cert-manager.io", "ClusterIssuer", "clusterissuers", false),
    (
        "console.openshift.io",
        "ConsoleYAMLSample",
        "consoleyamlsamples",
        false,
    ),
    (
        "console.openshift.io",
        "ConsoleQuickStart",
        "consolequickstarts",
        false,
    ),
    (
        "console.openshift.io",
        "ConsoleCLIDownload",
        "consoleclidownloads",
        false,
    ),
    ("console.openshift.io", "ConsoleLink", "consolelinks", false),
    (
        "console.openshift.io",
        "ConsolePlugin",
        "consoleplugins",
        false,
    ),
];

impl ResourceMap {
    /// Built-in kinds plus the kinds defined by the CRDs among `objects`.
    pub fn offline(objects: &[Value]) -> Self {
        let mut map = ResourceMap::default();
        for (group, kind, resource, namespaced) in BUILTIN {
            map.insert(group, kind, resource, *namespaced);
        }
        for obj in objects {
            if kind_of(obj) != Some("CustomResourceDefinition") {
                continue;
            }
            let spec = &obj["spec"];
            let (Some(group), Some(kind), Some(plural)) = (
                spec["group"].as_str(),
                spec["names"]["kind"].as_str(),
                spec["names"]["plural"].as_str(),
            ) else {
                continue;
            };
            let namespaced = spec["scope"].as_str() != Some("Cluster");
            map.insert(group, kind, plural, namespaced);
        }
        map
    }

    pub fn insert(&mut self, group: &str, kind: &str, resource: &str, namespaced: bool) {
        self.map.insert(
            (group.to_owned(), kind.to_owned()),
            ResourceInfo {
                resource: resource.to_owned(),
                namespaced,
            },
        );
    }

    /// Kinds of `objects` this map does not know (for the caller to look up in discovery).
    pub fn unknown_kinds(&self, objects: &[Value]) -> Vec<(String, String, String)> {
        let mut out: Vec<(String, String, String)> = objects
            .iter()
            .filter_map(|o| {
                let (group, version) = split_api_version(o.get("apiVersion")?.as_str()?)?;
                let kind = kind_of(o)?;
                self.get(group, kind)
                    .is_none()
                    .then(|| (group.to_owned(), version.to_owned(), kind.to_owned()))
            })
            .collect();
        out.sort();
        out.dedup();
        out
    }

    pub fn get(&self, group: &str, kind: &str) -> Option<&ResourceInfo> {
        self.map.get(&(group.to_owned(), kind.to_owned()))
    }

    /// The known resource, or a guess from the kind (lower-case English plural; namespaced
    /// iff the object names a namespace).
    pub fn resolve_or_guess(&self, group: &str, kind: &str, has_namespace: bool) -> ResourceInfo {
        self.get(group, kind)
            .cloned()
            .unwrap_or_else(|| ResourceInfo {
                resource: guess_plural(kind),
                namespaced: has_namespace,
            })
    }
}

/// The English plural Kubernetes uses for most kinds (`Policy` → `policies`).
pub fn guess_plural(kind: &str) -> String {
    let lower = kind.to_ascii_lowercase();
    if lower.ends_with('s')
        || lower.ends_with("sh")
        || lower.ends_with("ch")
        || lower.ends_with('x')
    {
        format!("{lower}es")
    } else if let Some(stem) = lower.strip_suffix('y')
        && !stem.ends_with(['a', 'e', 'i', 'o', 'u'])
    {
        format!("{stem}ies")
    } else {
        format!("{lower}s")
    }
}

/// What the permission model needs to know about one rendered object.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ObjectInfo {
    pub group: String,
    pub version: String,
    pub kind: String,
    pub resource: String,
    pub namespaced: bool,
    /// `""` for cluster-scoped objects.
    pub namespace: String,
    pub name: String,
}

fn kind_of(obj: &Value) -> Option<&str> {
    obj.get("kind").and_then(Value::as_str)
}

/// Splits an apiVersion into (group, version); the core group is `""`.
pub fn split_api_version(api_version: &str) -> Option<(&str, &str)> {
    match api_version.split_once('/') {
        Some((g, v)) if !g.is_empty() && !v.is_empty() && !v.contains('/') => Some((g, v)),
        Some(_) => None,
        None if !api_version.is_empty() => Some(("", api_version)),
        None => None,
    }
}

/// Describes every object (group, kind, resource, scope, namespace, name).
pub fn describe(objects: &[Value], map: &ResourceMap) -> Result<Vec<ObjectInfo>, PermissionError> {
    objects
        .iter()
        .enumerate()
        .map(|(index, obj)| describe_one(index, obj, map))
        .collect()
}

fn describe_one(
    index: usize,
    obj: &Value,
    map: &ResourceMap,
) -> Result<ObjectInfo, PermissionError> {
    let kind = kind_of(obj).ok_or(PermissionError::MissingField {
        index,
        field: "kind",
    })?;
    let name = obj["metadata"]["name"]
        .as_str()
        .filter(|n| !n.is_empty())
        .ok_or(PermissionError::MissingField {
            index,
            field: "metadata.name",
        })?;
    let api_version = obj["apiVersion"]
        .as_str()
        .ok_or(PermissionError::MissingField {
            index,
            field: "apiVersion",
        })?;
    let (group, version) =
        split_api_version(api_version).ok_or_else(|| PermissionError::BadApiVersion {
            index,
            kind: kind.to_owned(),
            name: name.to_owned(),
            api_version: api_version.to_owned(),
        })?;
    let namespace = obj["metadata"]["namespace"].as_str().unwrap_or_default();
    let info = map.resolve_or_guess(group, kind, !namespace.is_empty());
    Ok(ObjectInfo {
        group: group.to_owned(),
        version: version.to_owned(),
        kind: kind.to_owned(),
        resource: info.resource,
        namespaced: info.namespaced,
        namespace: if info.namespaced {
            namespace.to_owned()
        } else {
            String::new()
        },
        name: name.to_owned(),
    })
}

/// A ClusterRole or Role of the bundle: the account must hold `grants`, or have both
/// `bind` and `escalate` on it (`bind_escalate`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BundledRole {
    pub kind: String,
    pub namespace: String,
    pub name: String,
    pub grants: BTreeSet<Permission>,
    pub bind_escalate: [Permission; 2],
}

/// Everything the installer account needs.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Requirements {
    /// Needed unconditionally.
    pub required: BTreeSet<Permission>,
    /// Needed per bundled role (one of two alternatives).
    pub roles: Vec<BundledRole>,
}

impl Requirements {
    /// Every distinct permission that an evaluation has to check.
    pub fn all_checks(&self) -> BTreeSet<Permission> {
        let mut all = self.required.clone();
        for role in &self.roles {
            all.extend(role.grants.iter().cloned());
            all.extend(role.bind_escalate.iter().cloned());
        }
        all
    }

    /// The permissions missing, given what is allowed. A bundled role whose grants are not
    /// all held and that lacks bind+escalate contributes its missing grants.
    pub fn missing(&self, allowed: impl Fn(&Permission) -> bool) -> BTreeSet<Permission> {
        let mut missing: BTreeSet<Permission> = self
            .required
            .iter()
            .filter(|p| !allowed(p))
            .cloned()
            .collect();
        for role in &self.roles {
            if role.bind_escalate.iter().all(&allowed) {
                continue;
            }
            missing.extend(role.grants.iter().filter(|p| !allowed(p)).cloned());
        }
        missing
    }
}

/// The requirements for managing `objects` (described by `infos`, same order) on behalf of
/// the ClusterExtension `extension`.
pub fn requirements(objects: &[Value], infos: &[ObjectInfo], extension: &str) -> Requirements {
    let mut req = Requirements::default();
    req.required.insert(Permission::resource(
        "",
        OLM_GROUP,
        "clusterextensions/finalizers",
        extension,
        "update",
    ));
    for info in infos {
        for verb in NAMED_VERBS {
            req.required.insert(Permission::resource(
                &info.namespace,
                &info.group,
                &info.resource,
                &info.name,
                verb,
            ));
        }
        for verb in RESOURCE_VERBS {
            req.required.insert(Permission::resource(
                &info.namespace,
                &info.group,
                &info.resource,
                "",
                verb,
            ));
        }
    }
    for (obj, info) in objects.iter().zip(infos) {
        if info.group != RBAC_GROUP || !(info.kind == "ClusterRole" || info.kind == "Role") {
            continue;
        }
        let grants = rule_permissions(obj.get("rules"), &info.namespace);
        let on = |verb: &str| {
            Permission::resource(
                &info.namespace,
                RBAC_GROUP,
                &info.resource,
                &info.name,
                verb,
            )
        };
        req.roles.push(BundledRole {
            kind: info.kind.clone(),
            namespace: info.namespace.clone(),
            name: info.name.clone(),
            grants,
            bind_escalate: [on("bind"), on("escalate")],
        });
    }
    req
}

/// Adds what deleting `infos` (objects of an earlier revision being pruned) needs: `get`
/// and `delete` by name. Call with the prune candidates before an upgrade so the preflight
/// also covers the deletions.
pub fn add_deletions(req: &mut Requirements, infos: &[ObjectInfo]) {
    for info in infos {
        for verb in ["get", "delete"] {
            req.required.insert(Permission::resource(
                &info.namespace,
                &info.group,
                &info.resource,
                &info.name,
                verb,
            ));
        }
    }
}

fn strings(v: Option<&Value>) -> Vec<String> {
    v.and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(Value::as_str)
                .map(str::to_owned)
                .collect()
        })
        .unwrap_or_default()
}

/// Expands RBAC `rules` (PolicyRule JSON) into atomic permissions in `namespace`.
pub fn rule_permissions(rules: Option<&Value>, namespace: &str) -> BTreeSet<Permission> {
    let mut out = BTreeSet::new();
    let Some(rules) = rules.and_then(Value::as_array) else {
        return out;
    };
    for rule in rules {
        let verbs = strings(rule.get("verbs"));
        let groups = strings(rule.get("apiGroups"));
        let resources = strings(rule.get("resources"));
        let names = strings(rule.get("resourceNames"));
        let names = if names.is_empty() {
            vec![String::new()]
        } else {
            names
        };
        for verb in &verbs {
            for group in &groups {
                for resource in &resources {
                    for name in &names {
                        out.insert(Permission::resource(namespace, group, resource, name, verb));
                    }
                }
            }
            for path in strings(rule.get("nonResourceURLs")) {
                out.insert(Permission::NonResource {
                    path,
                    verb: verb.clone(),
                });
            }
        }
    }
    out
}

/// First line of the missing-permissions message (reference §7).
pub const MISSING_HEADER: &str = "pre-authorization failed: service account requires the following permissions to manage cluster extension:";

/// One line per (namespace, group, resource, name) with the verbs joined, sorted; upstream's
/// format: `Namespace:"" APIGroups:[g] Resources:[r] ResourceNames:[n] Verbs:[a,b]`.
pub fn missing_lines(missing: &BTreeSet<Permission>) -> Vec<String> {
    let mut resources: BTreeMap<(&str, &str, &str, &str), BTreeSet<&str>> = BTreeMap::new();
    let mut urls: BTreeMap<&str, BTreeSet<&str>> = BTreeMap::new();
    for p in missing {
        match p {
            Permission::Resource {
                namespace,
                group,
                resource,
                name,
                verb,
            } => {
                resources
                    .entry((namespace, group, resource, name))
                    .or_default()
                    .insert(verb);
            }
            Permission::NonResource { path, verb } => {
                urls.entry(path).or_default().insert(verb);
            }
        }
    }
    let join = |verbs: &BTreeSet<&str>| verbs.iter().copied().collect::<Vec<_>>().join(",");
    let mut lines: Vec<String> = resources
        .iter()
        .map(|((ns, group, resource, name), verbs)| {
            format!(
                "Namespace:{ns:?} APIGroups:[{group}] Resources:[{resource}] ResourceNames:[{name}] Verbs:[{}]",
                join(verbs)
            )
        })
        .collect();
    lines.extend(urls.iter().map(|(path, verbs)| {
        format!(
            "Namespace:\"\" NonResourceURLs:[{path}] Verbs:[{}]",
            join(verbs)
        )
    }));
    lines.sort();
    lines
}

/// The whole message, or `None` when nothing is missing.
pub fn missing_message(missing: &BTreeSet<Permission>) -> Option<String> {
    if missing.is_empty() {
        return None;
    }
    let mut msg = MISSING_HEADER.to_owned();
    for line in missing_lines(missing) {
        let _ = write!(msg, "\n  {line}");
    }
    Some(msg)
}

#[cfg(test)]
mod tests;
