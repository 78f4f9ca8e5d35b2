//! Sections 2 and 3 of rendering: the Roles/RoleBindings of the CSV's namespaced
//! permissions (per target namespace) and the ClusterRoles/ClusterRoleBindings of its
//! cluster permissions (plus, in AllNamespaces mode, the namespaced permissions with a
//! namespace-read rule). Names follow upstream's hashed permission-object names.

use super::super::csv::Permission;
use super::super::names::{GoPolicyRule, permission_object_name};
use super::{Ctx, object, sa_name_or_default};
use serde_json::{Value, json};

const RBAC_API: &str = "rbac.authorization.k8s.io/v1";

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

/// A role (`Role`/`ClusterRole`) with `rules` and its binding to `sa` in `ns`.
fn role_and_binding(
    kind: &str,
    name: &str,
    namespace: Option<&str>,
    rules: Vec<Value>,
    sa: &str,
    ns: &str,
    out: &mut Vec<Value>,
) {
    let mut role = object(RBAC_API, kind, name, namespace);
    role.insert("rules".into(), Value::Array(rules));
    out.push(Value::Object(role));
    let mut binding = object(RBAC_API, &format!("{kind}Binding"), name, namespace);
    binding.insert(
        "roleRef".into(),
        json!({"apiGroup": "rbac.authorization.k8s.io", "kind": kind, "name": name}),
    );
    binding.insert(
        "subjects".into(),
        json!([{"kind": "ServiceAccount", "name": sa, "namespace": ns}]),
    );
    out.push(Value::Object(binding));
}

/// 2. Roles/RoleBindings per target namespace (not in AllNamespaces mode).
pub(super) fn namespaced(ctx: &Ctx<'_>, out: &mut Vec<Value>) {
    let csv_name = ctx.csv.metadata.name.as_str();
    for target in ctx.targets {
        for p in &ctx.strategy().permissions {
            let sa = sa_name_or_default(&p.service_account_name);
            let name = permission_object_name(
                &format!("{csv_name}-{sa}"),
                &p.service_account_name,
                rules_of(p).as_deref(),
            );
            let rules = p.rules.clone().unwrap_or_default();
            role_and_binding("Role", &name, Some(target), rules, sa, ctx.ns, out);
        }
    }
}

/// 3. ClusterRoles/ClusterRoleBindings.
pub(super) fn cluster_wide(ctx: &Ctx<'_>, out: &mut Vec<Value>) {
    let strategy = ctx.strategy();
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
    if ctx.all_namespaces {
        let (go_rule, rule) = namespaces_read_rule();
        for p in &strategy.permissions {
            let mut go_rules = rules_of(p).unwrap_or_default();
            go_rules.push(go_rule.clone());
            let mut rules = p.rules.clone().unwrap_or_default();
            rules.push(rule.clone());
            cluster_entries.push((p.service_account_name.clone(), Some(go_rules), rules));
        }
    }
    let csv_name = ctx.csv.metadata.name.as_str();
    for (sa_raw, go_rules, rules) in cluster_entries {
        let sa = sa_name_or_default(&sa_raw);
        let name =
            permission_object_name(&format!("{csv_name}-{sa}"), &sa_raw, go_rules.as_deref());
        role_and_binding("ClusterRole", &name, None, rules, sa, ctx.ns, out);
    }
}
