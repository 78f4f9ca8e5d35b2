//! Installer ServiceAccount permissions (docs/concepts/installer-permissions.md §7, A3): the pure computation of every
//! (verb, apiGroup, resource, resourceName, namespace) the account needs to manage a set
//! of rendered objects, the missing-permissions message in upstream's format, the
//! least-privilege RBAC generator behind `olmv1 rbac` ([`rbac`]), and the evaluation of
//! the requirements for an account ([`evaluate`]): its own rules, read with
//! SelfSubjectRulesReviews ([`rules_review`]), then concurrent SubjectAccessReviews for
//! what they do not cover.
//!
//! Model: for every object `get, update, patch, delete` scoped to its name and
//! `create, list, watch` on its resource in its namespace (`""` for cluster-scoped
//! objects). `list, watch` are required because drift watches on the managed kinds run
//! as the installer account (the controller's own ClusterRole has no read access to
//! arbitrary kinds), one watch per (kind, namespace) with the owner-label selector.
//! `update` on `clusterextensions/finalizers` for the extension's name (ownerReferences
//! with blockOwnerDeletion). For every bundled ClusterRole/Role the account must either
//! hold every permission it grants, or have both `bind` and `escalate` on it by name.
//! A bundled role's rules are expanded into permissions only within the limits of
//! [`rules`] ([`MAX_RULE_PERMISSIONS`], [`MAX_BUNDLED_PERMISSIONS`]); a larger role can
//! only be covered by `bind` and `escalate`.

pub mod rbac;
mod rules;
pub mod rules_review;
mod sar;

pub use crate::kinds::{ResourceInfo, ResourceMap, guess_plural, split_api_version};
pub use rules::{ExpansionError, MAX_BUNDLED_PERMISSIONS, MAX_RULE_PERMISSIONS};
pub use sar::{DEFAULT_CONCURRENCY, EvaluateError, Evaluation, evaluate, preflight};

use crate::kinds::kind_of;
use rules::bounded_rule_permissions;
#[cfg(test)]
use rules::rule_permissions;

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
    /// A bundled role too large to list its grants (`olmv1 rbac --bundled-rbac include`).
    #[error(transparent)]
    TooLarge(#[from] ExpansionError),
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

/// The parts of a [`Permission::Resource`], borrowed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ResourceParts<'a> {
    pub namespace: &'a str,
    pub group: &'a str,
    pub resource: &'a str,
    /// `""` = any name.
    pub name: &'a str,
    pub verb: &'a str,
}

impl Permission {
    /// The parts of a resource permission; `None` for a non-resource URL.
    pub fn resource_parts(&self) -> Option<ResourceParts<'_>> {
        match self {
            Permission::Resource {
                namespace,
                group,
                resource,
                name,
                verb,
            } => Some(ResourceParts {
                namespace,
                group,
                resource,
                name,
                verb,
            }),
            Permission::NonResource { .. } => None,
        }
    }

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

impl ObjectInfo {
    /// `verb` on this object's resource in its namespace, for `name` (`""` = any name).
    fn permission(&self, name: &str, verb: &str) -> Permission {
        Permission::resource(&self.namespace, &self.group, &self.resource, name, verb)
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
    /// Set when the role's rules stand for more permissions than the limits of
    /// [`rules`] allow: `grants` is then empty (not expanded) and only `bind_escalate`
    /// can cover the role.
    pub unexpanded: Option<ExpansionError>,
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
            if role.unexpanded.is_some() {
                // Fail closed: the grants were not expanded, so bind+escalate is missing.
                missing.extend(role.bind_escalate.iter().filter(|p| !allowed(p)).cloned());
            }
            missing.extend(role.grants.iter().filter(|p| !allowed(p)).cloned());
        }
        missing
    }

    /// The first bundled role too large to check grant by grant whose bind+escalate is
    /// not allowed either: why the preflight refuses instead of listing permissions.
    pub fn too_large(&self, allowed: impl Fn(&Permission) -> bool) -> Option<&ExpansionError> {
        self.roles
            .iter()
            .filter(|r| !r.bind_escalate.iter().all(&allowed))
            .find_map(|r| r.unexpanded.as_ref())
    }
}

/// `ClusterRole "name"` or `Role "namespace/name"`, as errors name a bundled role.
fn role_label(kind: &str, namespace: &str, name: &str) -> String {
    if namespace.is_empty() {
        format!("{kind} {name:?}")
    } else {
        format!("{kind} \"{namespace}/{name}\"")
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
            req.required.insert(info.permission(&info.name, verb));
        }
        for verb in RESOURCE_VERBS {
            req.required.insert(info.permission("", verb));
        }
    }
    let mut budget = MAX_BUNDLED_PERMISSIONS;
    for (obj, info) in objects.iter().zip(infos) {
        if info.group != RBAC_GROUP || !(info.kind == "ClusterRole" || info.kind == "Role") {
            continue;
        }
        let label = role_label(&info.kind, &info.namespace, &info.name);
        let (grants, unexpanded) = match bounded_rule_permissions(
            obj.get("rules"),
            &info.namespace,
            &label,
            &mut budget,
        ) {
            Ok(grants) => (grants, None),
            Err(e) => (BTreeSet::new(), Some(e)),
        };
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
            unexpanded,
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
            req.required.insert(info.permission(&info.name, verb));
        }
    }
}

/// First line of the missing-permissions message (docs/concepts/installer-permissions.md §7).
pub const MISSING_HEADER: &str = "pre-authorization failed: service account requires the following permissions to manage cluster extension:";

/// One line per (namespace, group, resource, name) with the verbs joined, sorted; upstream's
/// format: `Namespace:"" APIGroups:[g] Resources:[r] ResourceNames:[n] Verbs:[a,b]`.
pub fn missing_lines(missing: &BTreeSet<Permission>) -> Vec<String> {
    let mut resources: BTreeMap<(&str, &str, &str, &str), BTreeSet<&str>> = BTreeMap::new();
    let mut urls: BTreeMap<&str, BTreeSet<&str>> = BTreeMap::new();
    for p in missing {
        if let Some(r) = p.resource_parts() {
            resources
                .entry((r.namespace, r.group, r.resource, r.name))
                .or_default()
                .insert(r.verb);
        } else if let Permission::NonResource { path, verb } = p {
            urls.entry(path).or_default().insert(verb);
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

/// Most lines of the missing-permissions message; the rest are counted in a last line
/// `… and N more`. The condition message is cut at 32 KiB (`crate::api::conditions`) and
/// a line takes at least 45 bytes, so more than ~730 lines are never shown anyway; the
/// cap keeps a hostile bundle from building a message of many MB for logs and Events.
pub const MAX_MISSING_LINES: usize = 1000;

/// The whole message, or `None` when nothing is missing.
pub fn missing_message(missing: &BTreeSet<Permission>) -> Option<String> {
    if missing.is_empty() {
        return None;
    }
    let mut msg = MISSING_HEADER.to_owned();
    let lines = missing_lines(missing);
    for line in lines.iter().take(MAX_MISSING_LINES) {
        let _ = write!(msg, "\n  {line}");
    }
    if lines.len() > MAX_MISSING_LINES {
        let _ = write!(msg, "\n  … and {} more", lines.len() - MAX_MISSING_LINES);
    }
    Some(msg)
}

#[cfg(test)]
mod hostile_tests;
#[cfg(test)]
mod tests;
