//! The operator's own say over its upgrades, as OLM v0 renders it
//! (docs/how-to/upgrade-control.md, "The operator's own say"): when the cluster serves
//! `operators.coreos.com/v2` `OperatorCondition` ([`super::RenderOptions::operator_condition`]),
//! one OperatorCondition named like the CSV in the install namespace, a Role and
//! RoleBinding of the same name that let the operator's ServiceAccounts get, update and
//! patch it, and the env var `OPERATOR_CONDITION_NAME=<csv name>` in
//! every container of the CSV's Deployments. The name equals OLM v0's, so an
//! installation taken over from OLM v0 keeps the same env var value (no rollout).

use super::{Ctx, object};
use serde_json::{Value, json};

/// The OperatorCondition API.
pub const API_VERSION: &str = "operators.coreos.com/v2";
pub const GROUP: &str = "operators.coreos.com";
pub const KIND: &str = "OperatorCondition";
/// The env var naming the OperatorCondition in the operator's containers.
pub const ENV: &str = "OPERATOR_CONDITION_NAME";

/// The OperatorCondition, its Role and RoleBinding, each exactly as OLM v0 writes it
/// (its `operator-condition-generator` and `operatorcondition` controllers, v0.38):
/// OLM v0's controller, when it runs beside olmv1, compares the Role's rules and the
/// RoleBinding's subjects and roleRef with what it would write and overwrites any
/// difference, so any other content would make the two fight.
pub(super) fn objects(ctx: &Ctx<'_>, out: &mut Vec<Value>) {
    let name = ctx.csv.metadata.name.as_str();
    let deployments: Vec<&str> = ctx
        .strategy()
        .deployments
        .iter()
        .map(|d| d.name.as_str())
        .filter(|d| !d.is_empty())
        .collect();
    let accounts = service_accounts(ctx);
    let mut condition = object(API_VERSION, KIND, name, Some(ctx.ns));
    condition.insert(
        "spec".into(),
        json!({"deployments": deployments, "serviceAccounts": accounts}),
    );
    out.push(Value::Object(condition));
    let mut role = object("rbac.authorization.k8s.io/v1", "Role", name, Some(ctx.ns));
    role.insert("rules".into(), role_rules(name));
    out.push(Value::Object(role));
    let mut binding = object(
        "rbac.authorization.k8s.io/v1",
        "RoleBinding",
        name,
        Some(ctx.ns),
    );
    binding.insert(
        "roleRef".into(),
        json!({"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": name}),
    );
    // No namespace: OLM v0 leaves it out (a RoleBinding's own namespace).
    let subjects: Vec<Value> = accounts
        .iter()
        .map(|sa| json!({"kind": "ServiceAccount", "name": sa}))
        .collect();
    binding.insert("subjects".into(), Value::Array(subjects));
    out.push(Value::Object(binding));
}

/// The Role's rules: get, update and patch on this one OperatorCondition (operators
/// write their conditions to `spec.conditions`, operator-lib's way; no status).
fn role_rules(name: &str) -> Value {
    json!([{
        "verbs": ["get", "update", "patch"],
        "apiGroups": [GROUP],
        "resources": ["operatorconditions"],
        "resourceNames": [name],
    }])
}

/// `spec.serviceAccounts` as OLM v0 lists them: the accounts of `clusterPermissions`,
/// then of `permissions`, in order, repeats kept; `default` when there is none.
fn service_accounts<'a>(ctx: &Ctx<'a>) -> Vec<&'a str> {
    let strategy = ctx.strategy();
    let mut accounts: Vec<&str> = strategy
        .cluster_permissions
        .iter()
        .chain(&strategy.permissions)
        .map(|p| p.service_account_name.as_str())
        .filter(|sa| !sa.is_empty())
        .collect();
    if accounts.is_empty() {
        accounts.push("default");
    }
    accounts
}

/// Whether `obj` is the OperatorCondition, or its Role or RoleBinding as [`objects`]
/// renders them (named like the OperatorCondition). OLM v0 holds the controller
/// ownerReference on these while it runs: its operator-condition-generator on the
/// OperatorCondition (to the CSV, until the CSV is gone) and its OperatorCondition
/// controller on the Role and RoleBinding (to the OperatorCondition). olmv1's
/// reference on them therefore does not claim control ([`crate::apply::with_ownership`]);
/// it also keeps garbage collection from deleting a taken-over OperatorCondition whose
/// CSV is gone (e2e/migrate_v0.rs).
pub fn shares_control(obj: &Value) -> bool {
    if obj.get("apiVersion").and_then(Value::as_str) == Some(API_VERSION)
        && obj.get("kind").and_then(Value::as_str) == Some(KIND)
    {
        return true;
    }
    let name = obj.pointer("/metadata/name").and_then(Value::as_str);
    let Some(name) = name else {
        return false;
    };
    if obj.get("apiVersion").and_then(Value::as_str) != Some("rbac.authorization.k8s.io/v1") {
        return false;
    }
    match obj.get("kind").and_then(Value::as_str) {
        Some("Role") => obj.get("rules") == Some(&role_rules(name)),
        Some("RoleBinding") => {
            let role =
                json!({"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": name});
            let accounts_only =
                obj.get("subjects")
                    .and_then(Value::as_array)
                    .is_some_and(|subjects| {
                        subjects.iter().all(|s| {
                            s.get("kind").and_then(Value::as_str) == Some("ServiceAccount")
                                && s.as_object().is_some_and(|o| o.len() == 2)
                        })
                    });
            obj.get("roleRef") == Some(&role) && accounts_only
        }
        _ => false,
    }
}

/// Sets `OPERATOR_CONDITION_NAME=<name>` in every container of `deployment` (replacing
/// a value the bundle or the configuration set, as OLM v0 does).
pub(super) fn inject_env(deployment: &mut Value, name: &str) {
    let Some(containers) = deployment
        .pointer_mut("/spec/template/spec/containers")
        .and_then(Value::as_array_mut)
    else {
        return;
    };
    for container in containers.iter_mut().filter_map(Value::as_object_mut) {
        let env = container
            .entry("env")
            .or_insert_with(|| Value::Array(Vec::new()));
        if !env.is_array() {
            *env = Value::Array(Vec::new());
        }
        let Some(env) = env.as_array_mut() else {
            continue;
        };
        env.retain(|e| e.get("name").and_then(Value::as_str) != Some(ENV));
        env.push(json!({"name": ENV, "value": name}));
    }
}

/// Whether an OperatorCondition lets the operator be upgraded, as OLM v0 decides it:
/// an `Upgradeable` override in `spec.overrides` wins; else the `Upgradeable`
/// condition in `status.conditions` (or in `spec.conditions`, where operators built on
/// operator-lib write it); absent = upgradeable. `Err`: the operator's (or the
/// override's) message when `Upgradeable` is `False`.
pub fn upgradeable(condition: &Value) -> Result<(), String> {
    let find = |pointer: &str| {
        condition
            .pointer(pointer)
            .and_then(Value::as_array)
            .and_then(|list| {
                list.iter()
                    .find(|c| c.get("type").and_then(Value::as_str) == Some("Upgradeable"))
            })
    };
    let found = find("/spec/overrides")
        .map(|c| (c, "override"))
        .or_else(|| find("/status/conditions").map(|c| (c, "operator")))
        .or_else(|| find("/spec/conditions").map(|c| (c, "operator")));
    let Some((c, by)) = found else {
        return Ok(());
    };
    if c.get("status").and_then(Value::as_str) != Some("False") {
        return Ok(());
    }
    let text = |key: &str| c.get(key).and_then(Value::as_str).unwrap_or_default();
    let who = if by == "override" {
        "spec.overrides (set by an administrator)"
    } else {
        "the operator"
    };
    Err(format!(
        "Upgradeable=False (reason {:?}, by {who}): {}",
        text("reason"),
        text("message")
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_override_wins_and_absent_is_upgradeable() {
        assert_eq!(upgradeable(&json!({})), Ok(()));
        let held = json!({"status": {"conditions": [
            {"type": "Other", "status": "False"},
            {"type": "Upgradeable", "status": "False", "reason": "Migrating", "message": "data migration running"}]}});
        let why = upgradeable(&held).expect_err("held");
        assert!(why.contains("data migration running"), "{why}");
        assert!(why.contains("by the operator"), "{why}");
        let mut overridden = held.clone();
        overridden["spec"] = json!({"overrides": [{"type": "Upgradeable", "status": "True", "reason": "Admin", "message": "go"}]});
        assert_eq!(upgradeable(&overridden), Ok(()), "an override wins");
        let forced = json!({"spec": {"overrides": [{"type": "Upgradeable", "status": "False", "reason": "Admin", "message": "not now"}]}});
        assert!(upgradeable(&forced).expect_err("held").contains("not now"));
        let spec_only = json!({"spec": {"conditions": [{"type": "Upgradeable", "status": "False", "reason": "R", "message": "m"}]}});
        assert!(upgradeable(&spec_only).is_err(), "operator-lib writes spec");
        let true_ = json!({"status": {"conditions": [{"type": "Upgradeable", "status": "True"}]}});
        assert_eq!(upgradeable(&true_), Ok(()));
    }

    #[test]
    fn the_env_var_is_set_once_in_every_container() {
        let mut d = json!({"spec": {"template": {"spec": {"containers": [
            {"name": "a"},
            {"name": "b", "env": [{"name": ENV, "value": "old"}, {"name": "X", "value": "1"}]}]}}}});
        inject_env(&mut d, "p.v1.0.0");
        let containers = d
            .pointer("/spec/template/spec/containers")
            .expect("containers");
        assert_eq!(
            containers[0]["env"],
            json!([{"name": ENV, "value": "p.v1.0.0"}])
        );
        assert_eq!(
            containers[1]["env"],
            json!([{"name": "X", "value": "1"}, {"name": ENV, "value": "p.v1.0.0"}])
        );
    }
}
