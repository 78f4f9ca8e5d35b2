//! What a finished convert restores in the OperatorCondition (docs/how-to/switch-from-olm-v0.md,
//! "convert"): OLM v0's garbage collection may delete it while the convert runs and the
//! takeover re-create it empty; [`restore_operator_condition`] compares it with what the
//! backup kept of it and says whether to wait, patch or leave it.

use serde_json::{Value, json};

/// What a finished convert does about the OperatorCondition (after the CSV is gone).
#[derive(Clone, Debug, PartialEq)]
pub enum Restore {
    /// Nothing to restore: nothing was set in it, or it is still the same object.
    Nothing,
    /// It is gone and something was set in it: wait until the takeover re-creates it.
    Wait,
    /// It was re-created without what was set in it: this JSON merge patch puts back
    /// `spec.overrides` and `spec.conditions` as backed up (only the missing ones).
    Patch(Value),
}

/// Whether the OperatorCondition `live` lost what the backup kept of it (`backed_up`,
/// [`crate::migrate::olm_v0::backup::operator_condition_snapshot`]): OLM v0's garbage collection may
/// delete it during the convert and the takeover re-create it empty.
pub fn restore_operator_condition(backed_up: Option<&Value>, live: Option<&Value>) -> Restore {
    let Some(kept) = backed_up
        .and_then(|b| b.get("spec"))
        .and_then(Value::as_object)
    else {
        return Restore::Nothing;
    };
    if kept.is_empty() {
        return Restore::Nothing;
    }
    let Some(live) = live else {
        return Restore::Wait;
    };
    // Still pointing at the CSV (being deleted or gone): garbage collection may delete
    // it yet, or OLM v0 re-created it.
    let tied = live
        .pointer("/metadata/ownerReferences")
        .and_then(Value::as_array)
        .is_some_and(|refs| refs.iter().any(|r| r["kind"] == "ClusterServiceVersion"));
    if tied {
        return Restore::Wait;
    }
    let uid = |v: &Value| v.pointer("/metadata/uid").cloned();
    if backed_up.and_then(|b| b.get("uid")).cloned() == uid(live) {
        return Restore::Nothing;
    }
    let missing: serde_json::Map<String, Value> = kept
        .iter()
        .filter(|(key, _)| {
            live.pointer(&format!("/spec/{key}"))
                .and_then(Value::as_array)
                .is_none_or(Vec::is_empty)
        })
        .map(|(key, v)| (key.clone(), v.clone()))
        .collect();
    if missing.is_empty() {
        return Restore::Nothing;
    }
    Restore::Patch(json!({"spec": missing}))
}
