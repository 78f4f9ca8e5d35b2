//! The least-privilege installer RBAC for a set of rendered objects: a ServiceAccount
//! `<ext>-installer`, a ClusterRole `<ext>-installer-clusterrole` and a ClusterRoleBinding
//! `<ext>-installer-binding`, in the shape of the documentation's hand-written example (docs/concepts/installer-permissions.md §7.2):
//! the finalizers rule scoped to the extension name, `create, list, watch` unscoped per
//! resource, `get, update, patch, delete` scoped by resourceNames, and for bundled RBAC
//! either the rules it grants (with `bind` on it by name) or `bind, escalate` on it by name. Pure; the rules come from
//! the same [`Requirements`] the preflight checks, so a generated role always passes it.

use super::{
    BundledRole, Permission, PermissionError, RBAC_GROUP, Requirements, ResourceMap, describe,
    requirements,
};
use serde_json::{Value, json};
use std::collections::{BTreeMap, BTreeSet};

/// How bundled ClusterRoles/Roles are covered.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum BundledRbac {
    /// Grant the installer every rule the bundled roles grant (the seed's approach), and
    /// `bind` on them by name (which spares the API server its escalation check).
    #[default]
    Include,
    /// Grant `bind` and `escalate` on the bundled roles by name instead.
    BindEscalate,
}

/// The generated objects.
#[derive(Debug, Clone, PartialEq)]
pub struct InstallerRbac {
    pub service_account: Value,
    pub cluster_role: Value,
    pub binding: Value,
}

impl InstallerRbac {
    /// The three objects as one multi-document YAML stream.
    pub fn to_yaml(&self) -> Result<String, serde_saphyr::SerializeError> {
        let mut out = String::new();
        for (i, obj) in [&self.service_account, &self.cluster_role, &self.binding]
            .into_iter()
            .enumerate()
        {
            if i > 0 {
                out.push_str("---\n");
            }
            out.push_str(&serde_saphyr::to_string(obj)?);
        }
        Ok(out)
    }
}

/// `<ext>-installer`, `<ext>-installer-clusterrole`, `<ext>-installer-binding`.
pub fn installer_names(extension: &str) -> (String, String, String) {
    (
        format!("{extension}-installer"),
        format!("{extension}-installer-clusterrole"),
        format!("{extension}-installer-binding"),
    )
}

/// Every permission the generated ClusterRole grants (namespaces dropped: a ClusterRole
/// bound cluster-wide).
pub fn generated_permissions(
    objects: &[Value],
    extension: &str,
    mode: BundledRbac,
) -> Result<BTreeSet<Permission>, PermissionError> {
    let map = ResourceMap::offline(objects);
    let infos = describe(objects, &map)?;
    let req = requirements(objects, &infos, extension);
    let mut perms = cluster_wide(&req.required);
    for role in &req.roles {
        perms.extend(role_cover(role, mode)?);
    }
    // A binding to a role that is not part of the bundle: `bind` on that role.
    let bundled: BTreeSet<(&str, &str)> = req
        .roles
        .iter()
        .map(|r| (r.kind.as_str(), r.name.as_str()))
        .collect();
    for (obj, info) in objects.iter().zip(&infos) {
        if info.group != RBAC_GROUP || !info.kind.ends_with("RoleBinding") {
            continue;
        }
        let (Some(kind), Some(name)) = (
            obj["roleRef"]["kind"].as_str(),
            obj["roleRef"]["name"].as_str(),
        ) else {
            continue;
        };
        if bundled.contains(&(kind, name)) {
            continue;
        }
        let resource = if kind == "ClusterRole" {
            "clusterroles"
        } else {
            "roles"
        };
        perms.insert(Permission::resource("", RBAC_GROUP, resource, name, "bind"));
    }
    Ok(drop_covered(perms))
}

/// What covers a bundled role in `mode`; including the grants of a role too large to
/// expand ([`BundledRole::unexpanded`]) is refused.
fn role_cover(
    role: &BundledRole,
    mode: BundledRbac,
) -> Result<BTreeSet<Permission>, PermissionError> {
    match (mode, &role.unexpanded) {
        (BundledRbac::Include, Some(e)) => Err(e.clone().into()),
        (BundledRbac::Include, None) => {
            // `bind` on the role by name as well: the account holds every permission the
            // role grants, so it could bind it anyway, and without `escalate` it cannot
            // widen the role; with `bind` the API server authorizes each binding with one
            // check instead of computing the account's effective rules from every
            // binding in the cluster (about 100 ms per binding on a busy control plane,
            // docs/design/benchmarks.md).
            let mut perms = role.grants.clone();
            perms.extend(
                role.bind_escalate
                    .iter()
                    .filter(|p| p.resource_parts().is_some_and(|r| r.verb == "bind"))
                    .cloned(),
            );
            Ok(cluster_wide(&perms))
        }
        (BundledRbac::BindEscalate, _) => {
            Ok(cluster_wide(&role.bind_escalate.iter().cloned().collect()))
        }
    }
}

fn cluster_wide(perms: &BTreeSet<Permission>) -> BTreeSet<Permission> {
    perms
        .iter()
        .map(|p| match p.resource_parts() {
            Some(r) => Permission::resource("", r.group, r.resource, r.name, r.verb),
            None => p.clone(),
        })
        .collect()
}

/// Drops named permissions that an unnamed permission for the same verb already covers.
fn drop_covered(perms: BTreeSet<Permission>) -> BTreeSet<Permission> {
    let unnamed: BTreeSet<(&str, &str, &str)> = perms
        .iter()
        .filter_map(Permission::resource_parts)
        .filter(|r| r.name.is_empty())
        .map(|r| (r.group, r.resource, r.verb))
        .collect();
    perms
        .iter()
        .filter(|p| {
            p.resource_parts().is_none_or(|r| {
                r.name.is_empty() || !unnamed.contains(&(r.group, r.resource, r.verb))
            })
        })
        .cloned()
        .collect()
}

fn verb_rank(v: &str) -> (usize, &str) {
    const ORDER: [&str; 7] = [
        "create", "list", "watch", "get", "update", "patch", "delete",
    ];
    (ORDER.iter().position(|o| *o == v).unwrap_or(ORDER.len()), v)
}

fn sorted_verbs<'a>(verbs: impl IntoIterator<Item = &'a str>) -> Vec<&'a str> {
    let mut v: Vec<&str> = verbs.into_iter().collect();
    v.sort_by_key(|v| verb_rank(v));
    v.dedup();
    v
}

/// Groups atomic permissions into PolicyRules: the extension finalizers rule first, then per
/// (group, resource) one unscoped rule and one rule per distinct set of named verbs; then
/// non-resource URLs grouped by verb set.
pub fn rules_from_permissions(perms: &BTreeSet<Permission>) -> Vec<Value> {
    type Key<'a> = (bool, &'a str, &'a str);
    type Verbs<'a> = BTreeSet<&'a str>;
    let mut by_resource: BTreeMap<Key, (Verbs, BTreeMap<&str, Verbs>)> = BTreeMap::new();
    let mut urls: BTreeMap<&str, BTreeSet<&str>> = BTreeMap::new();
    for p in perms {
        match p {
            Permission::Resource {
                group,
                resource,
                name,
                verb,
                ..
            } => {
                let first =
                    !(group == super::OLM_GROUP && resource == "clusterextensions/finalizers");
                let entry = by_resource.entry((first, group, resource)).or_default();
                if name.is_empty() {
                    entry.0.insert(verb);
                } else {
                    entry.1.entry(name).or_default().insert(verb);
                }
            }
            Permission::NonResource { path, verb } => {
                urls.entry(path).or_default().insert(verb);
            }
        }
    }
    let mut rules = Vec::new();
    for ((_, group, resource), (unnamed, named)) in &by_resource {
        if !unnamed.is_empty() {
            rules.push(json!({
                "apiGroups": [group],
                "resources": [resource],
                "verbs": sorted_verbs(unnamed.iter().copied()),
            }));
        }
        let mut by_verbs: BTreeMap<Vec<&str>, Vec<&str>> = BTreeMap::new();
        for (name, verbs) in named {
            by_verbs
                .entry(sorted_verbs(verbs.iter().copied()))
                .or_default()
                .push(name);
        }
        let mut groups: Vec<(Vec<&str>, Vec<&str>)> = by_verbs.into_iter().collect();
        groups.sort_by(|a, b| {
            let ka: Vec<_> = a.0.iter().map(|v| verb_rank(v)).collect();
            let kb: Vec<_> = b.0.iter().map(|v| verb_rank(v)).collect();
            ka.cmp(&kb)
        });
        for (verbs, names) in groups {
            rules.push(json!({
                "apiGroups": [group],
                "resources": [resource],
                "verbs": verbs,
                "resourceNames": names,
            }));
        }
    }
    let mut by_verbs: BTreeMap<Vec<&str>, Vec<&str>> = BTreeMap::new();
    for (path, verbs) in &urls {
        by_verbs
            .entry(sorted_verbs(verbs.iter().copied()))
            .or_default()
            .push(path);
    }
    for (verbs, paths) in by_verbs {
        rules.push(json!({"nonResourceURLs": paths, "verbs": verbs}));
    }
    rules
}

/// The installer ServiceAccount, ClusterRole and ClusterRoleBinding for `objects`
/// installed as ClusterExtension `extension` with the account in `namespace`.
pub fn installer_rbac(
    objects: &[Value],
    namespace: &str,
    extension: &str,
    mode: BundledRbac,
) -> Result<InstallerRbac, PermissionError> {
    let perms = generated_permissions(objects, extension, mode)?;
    let (sa, role, binding) = installer_names(extension);
    Ok(InstallerRbac {
        service_account: json!({
            "apiVersion": "v1",
            "kind": "ServiceAccount",
            "metadata": {"name": sa, "namespace": namespace},
        }),
        cluster_role: json!({
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRole",
            "metadata": {"name": role},
            "rules": rules_from_permissions(&perms),
        }),
        binding: json!({
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRoleBinding",
            "metadata": {"name": binding},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": role},
            "subjects": [{"kind": "ServiceAccount", "name": sa, "namespace": namespace}],
        }),
    })
}

/// The rules an upgrade from `installed` to `new` adds to the installer's ClusterRole.
pub fn added_rules(
    installed: &[Value],
    new: &[Value],
    extension: &str,
    mode: BundledRbac,
) -> Result<Vec<Value>, PermissionError> {
    let old = generated_permissions(installed, extension, mode)?;
    let new = generated_permissions(new, extension, mode)?;
    let covered = |p: &Permission| {
        old.contains(p)
            || p.resource_parts().is_some_and(|r| {
                old.contains(&Permission::resource("", r.group, r.resource, "", r.verb))
            })
    };
    let added: BTreeSet<Permission> = new.into_iter().filter(|p| !covered(p)).collect();
    Ok(rules_from_permissions(&added))
}

/// Re-exported for callers that only hold requirements.
pub fn requirement_rules(req: &Requirements) -> Vec<Value> {
    rules_from_permissions(&cluster_wide(&req.required))
}
