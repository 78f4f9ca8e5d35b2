//! The dependency order in which rendered objects are applied (docs/concepts/rendering.md A5): pure.

use serde_json::Value;

pub use crate::kinds::PhaseKind;

/// A phase and the indices (into the input slice, input order kept) of its objects.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Phase {
    pub kind: PhaseKind,
    pub objects: Vec<usize>,
}

/// The phase of a (apiVersion group, kind) (see [`crate::kinds::KINDS`]).
pub fn phase_of(group: &str, kind: &str) -> PhaseKind {
    crate::kinds::phase_of(group, kind)
}

/// The group of an object's apiVersion (`""` for the core group).
pub fn group_of(obj: &Value) -> &str {
    obj.get("apiVersion")
        .and_then(Value::as_str)
        .and_then(|v| v.split_once('/').map(|(g, _)| g))
        .unwrap_or("")
}

/// The phases for `objects`, empty phases left out.
pub fn apply_order(objects: &[Value]) -> Vec<Phase> {
    let mut phases: Vec<Phase> = Vec::new();
    let mut keyed: Vec<(PhaseKind, usize)> = objects
        .iter()
        .enumerate()
        .map(|(i, obj)| {
            let kind = obj.get("kind").and_then(Value::as_str).unwrap_or("");
            (phase_of(group_of(obj), kind), i)
        })
        .collect();
    keyed.sort(); // stable by (phase, index): input order within a phase
    for (kind, i) in keyed {
        match phases.last_mut() {
            Some(p) if p.kind == kind => p.objects.push(i),
            _ => phases.push(Phase {
                kind,
                objects: vec![i],
            }),
        }
    }
    phases
}

/// The group of phases `kind` is applied together with, if any: consecutive phases of
/// one group need nothing of each other and are applied in one stage.
/// - Policies to CRDs, and Roles (a role names resources, it does not need them to
///   exist).
/// - Bindings, Services and workloads, once the roles exist (without `bind` on its
///   role, the API server reads the role to authorize a binding). A workload needs its
///   ServiceAccount (the first group), not its Service or its bindings: a pod that
///   starts before them retries, as after any apply in kind order, and no pod starts
///   within the milliseconds of one stage.
///
/// Every other phase is a stage of its own.
fn group(kind: PhaseKind) -> Option<u8> {
    match kind {
        PhaseKind::Policies
        | PhaseKind::ServiceAccounts
        | PhaseKind::Config
        | PhaseKind::Storage
        | PhaseKind::Crds
        | PhaseKind::Roles => Some(1),
        PhaseKind::Bindings | PhaseKind::Services | PhaseKind::Workloads => Some(2),
        _ => None,
    }
}

/// The stages of an apply: [`apply_order`]'s phases, the consecutive phases of one
/// [`group`] joined into one stage, every other phase a stage of its own. Stages run
/// one after the other; the objects of one stage are applied together.
pub fn apply_stages(objects: &[Value]) -> Vec<Vec<Phase>> {
    let mut stages: Vec<Vec<Phase>> = Vec::new();
    for phase in apply_order(objects) {
        let joins = group(phase.kind);
        match stages.last_mut() {
            Some(stage) if joins.is_some() && stage.iter().all(|p| group(p.kind) == joins) => {
                stage.push(phase)
            }
            _ => stages.push(vec![phase]),
        }
    }
    stages
}

/// The order of deletion for an uninstall: the apply order reversed, CRDs moved last (so
/// custom resources go first and the CRDs, which take the users' resources with them, go
/// only once everything else is gone).
pub fn uninstall_order(kinds: &[PhaseKind]) -> Vec<PhaseKind> {
    let mut out: Vec<PhaseKind> = kinds.to_vec();
    out.sort();
    out.dedup();
    out.reverse();
    if let Some(pos) = out.iter().position(|k| *k == PhaseKind::Crds) {
        let crds = out.remove(pos);
        out.push(crds);
    }
    out
}

#[cfg(test)]
#[path = "order_tests.rs"]
mod tests;
