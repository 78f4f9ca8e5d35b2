//! The RBAC rules of bundled ClusterRoles/Roles as atomic permissions, bounded: a rule
//! stands for `verbs × (apiGroups × resources × resourceNames + nonResourceURLs)`
//! permissions, so one rule of a few KB can stand for a million. Each rule's size is
//! computed from its (deduplicated) dimensions first, in time linear in the rule; only
//! rules within [`MAX_RULE_PERMISSIONS`], and roles within the shared budget of
//! [`MAX_BUNDLED_PERMISSIONS`], are expanded. A role beyond the limits can still be
//! covered by `bind` + `escalate` on it (docs/concepts/installer-permissions.md §7), which needs
//! no expansion; everything that needs its grants (the preflight without bind+escalate,
//! `olmv1 rbac --bundled-rbac include`) refuses it with an [`ExpansionError`].

use super::Permission;
use serde_json::Value;
use std::collections::BTreeSet;

/// Most atomic permissions one rule of a bundled role may stand for. The preflight
/// checks each with a SubjectAccessReview and `olmv1 rbac` lists each verb per resource.
/// The largest rule among the real bundles of the test fixtures stands for 175; a 2 KB
/// hostile rule (100 apiGroups × 100 resources × 100 verbs) for a million
/// (`tests::hostile_rule_is_refused_without_expanding_it`).
pub const MAX_RULE_PERMISSIONS: u64 = 10_000;

/// Most atomic permissions the rules of all bundled roles of one set of objects may stand
/// for together (the largest real bundle of the fixtures: 563), so that many rules each
/// below [`MAX_RULE_PERMISSIONS`] cannot add up to millions either.
pub const MAX_BUNDLED_PERMISSIONS: u64 = 50_000;

/// What to do about a role beyond the limits (part of every [`ExpansionError`]).
const ADVICE: &str = "give the installer ServiceAccount bind and escalate on the role instead \
    (olmv1 rbac --bundled-rbac bind-escalate), or write the rule with wildcards (\"*\" counts as one)";

/// A bundled role whose rules stand for more permissions than are checked one by one.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ExpansionError {
    #[error(
        "rule expands to more than {MAX_RULE_PERMISSIONS} permissions: {role} rules[{index}] has {shape}; {ADVICE}"
    )]
    Rule {
        /// `ClusterRole "name"` or `Role "namespace/name"`.
        role: String,
        index: usize,
        /// The dimensions and their product, e.g. `100 apiGroups × 100 resources × 100
        /// verbs = 1000000 permissions`.
        shape: String,
    },
    #[error(
        "the bundled roles expand to more than {MAX_BUNDLED_PERMISSIONS} permissions together (limit reached at {role}); {ADVICE}"
    )]
    Total { role: String },
}

/// The deduplicated dimensions of one PolicyRule.
struct RuleShape<'a> {
    verbs: BTreeSet<&'a str>,
    groups: BTreeSet<&'a str>,
    resources: BTreeSet<&'a str>,
    /// Empty = any name.
    names: BTreeSet<&'a str>,
    urls: BTreeSet<&'a str>,
}

fn strs(v: Option<&Value>) -> BTreeSet<&str> {
    v.and_then(Value::as_array)
        .map(|a| a.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default()
}

impl<'a> RuleShape<'a> {
    fn of(rule: &'a Value) -> Self {
        RuleShape {
            verbs: strs(rule.get("verbs")),
            groups: strs(rule.get("apiGroups")),
            resources: strs(rule.get("resources")),
            names: strs(rule.get("resourceNames")),
            urls: strs(rule.get("nonResourceURLs")),
        }
    }

    /// The number of permissions the rule stands for (saturating).
    fn size(&self) -> u64 {
        let n = |s: &BTreeSet<&str>| s.len() as u64;
        let named = n(&self.groups)
            .saturating_mul(n(&self.resources))
            .saturating_mul(n(&self.names).max(1));
        n(&self.verbs).saturating_mul(named.saturating_add(n(&self.urls)))
    }

    /// `G apiGroups × R resources × V verbs [× N resourceNames] [+ U nonResourceURLs] = S permissions`.
    fn describe(&self) -> String {
        let mut s = format!(
            "{} apiGroups × {} resources × {} verbs",
            self.groups.len(),
            self.resources.len(),
            self.verbs.len()
        );
        if !self.names.is_empty() {
            s.push_str(&format!(" × {} resourceNames", self.names.len()));
        }
        if !self.urls.is_empty() {
            s.push_str(&format!(" + {} nonResourceURLs × verbs", self.urls.len()));
        }
        s.push_str(&format!(" = {} permissions", self.size()));
        s
    }

    /// Every permission of the rule in `namespace`.
    fn expand_into(&self, namespace: &str, out: &mut BTreeSet<Permission>) {
        let names: Vec<&str> = if self.names.is_empty() {
            vec![""]
        } else {
            self.names.iter().copied().collect()
        };
        for verb in &self.verbs {
            for group in &self.groups {
                for resource in &self.resources {
                    for name in &names {
                        out.insert(Permission::resource(namespace, group, resource, name, verb));
                    }
                }
            }
            for path in &self.urls {
                out.insert(Permission::NonResource {
                    path: (*path).to_owned(),
                    verb: (*verb).to_owned(),
                });
            }
        }
    }
}

fn rule_list(rules: Option<&Value>) -> &[Value] {
    rules
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or_default()
}

/// The permissions a role's `rules` grant in `namespace`; `role` names it in errors.
/// Every rule is sized before anything is expanded: a rule beyond
/// [`MAX_RULE_PERMISSIONS`], or rules that would take `budget` (the permissions still
/// allowed for all bundled roles, reduced here) below zero, are refused.
pub fn bounded_rule_permissions(
    rules: Option<&Value>,
    namespace: &str,
    role: &str,
    budget: &mut u64,
) -> Result<BTreeSet<Permission>, ExpansionError> {
    let shapes: Vec<RuleShape> = rule_list(rules).iter().map(RuleShape::of).collect();
    let mut left = *budget;
    for (index, shape) in shapes.iter().enumerate() {
        let size = shape.size();
        if size > MAX_RULE_PERMISSIONS {
            return Err(ExpansionError::Rule {
                role: role.to_owned(),
                index,
                shape: shape.describe(),
            });
        }
        left = left
            .checked_sub(size)
            .ok_or_else(|| ExpansionError::Total {
                role: role.to_owned(),
            })?;
    }
    *budget = left;
    let mut out = BTreeSet::new();
    for shape in &shapes {
        shape.expand_into(namespace, &mut out);
    }
    Ok(out)
}

/// Expands RBAC `rules` (PolicyRule JSON) into atomic permissions in `namespace`, without
/// a bound: only for rules this crate generated (tests check generated roles with it).
#[cfg(test)]
pub fn rule_permissions(rules: Option<&Value>, namespace: &str) -> BTreeSet<Permission> {
    let mut out = BTreeSet::new();
    for rule in rule_list(rules) {
        RuleShape::of(rule).expand_into(namespace, &mut out);
    }
    out
}
