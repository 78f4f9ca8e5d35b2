//! The operator's own say over its upgrades, as OLM v0 renders it
//! (docs/how-to/upgrade-control.md, "The operator's own say"): when the cluster serves
//! `operators.coreos.com/v2` `OperatorCondition` ([`super::RenderOptions::operator_condition`]),
//! one OperatorCondition named like the CSV in the install namespace, a Role and
//! RoleBinding of the same name that let the operator's ServiceAccounts get, update and
//! patch it (and its status), and the env var `OPERATOR_CONDITION_NAME=<csv name>` in
//! every container of the CSV's Deployments. The name equals OLM v0's, so an
//! installation taken over from OLM v0 keeps the same env var value (no rollout).

use super::{Ctx, object, sa_name_or_default};
use serde_json::{Value, json};
use std::collections::BTreeSet;

/// The OperatorCondition API.
pub const API_VERSION: &str = "operators.coreos.com/v2";
pub const GROUP: &str = "operators.coreos.com";
pub const KIND: &str = "OperatorCondition";
/// The env var naming the OperatorCondition in the operator's containers.
pub const ENV: &str = "OPERATOR_CONDITION_NAME";

/// The OperatorCondition, its Role and RoleBinding.
pub(super) fn objects(ctx: &Ctx<'_>, out: &mut Vec<Value>) {
    let name = ctx.csv.metadata.name.as_str();
    let deployments: Vec<&str> = ctx
        .strategy()
        .deployments
        .iter()
        .map(|d| d.name.as_str())
        .collect();
    let accounts: BTreeSet<&str> = ctx
        .strategy()
        .deployments
        .iter()
        .map(|d| {
            sa_name_or_default(
                d.spec
                    .pointer("/template/spec/serviceAccountName")
                    .and_then(Value::as_str)
                    .unwrap_or_default(),
            )
        })
        .collect();
    let mut condition = object(API_VERSION, KIND, name, Some(ctx.ns));
    condition.insert(
        "spec".into(),
        json!({"deployments": deployments, "serviceAccounts": accounts}),
    );
    out.push(Value::Object(condition));
    let mut role = object("rbac.authorization.k8s.io/v1", "Role", name, Some(ctx.ns));
    role.insert(
        "rules".into(),
        json!([{
            "apiGroups": [GROUP],
            "resources": ["operatorconditions", "operatorconditions/status"],
            "resourceNames": [name],
            "verbs": ["get", "update", "patch"],
        }]),
    );
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
    let subjects: Vec<Value> = accounts
        .iter()
        .map(|sa| json!({"kind": "ServiceAccount", "name": sa, "namespace": ctx.ns}))
        .collect();
    binding.insert("subjects".into(), Value::Array(subjects));
    out.push(Value::Object(binding));
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
