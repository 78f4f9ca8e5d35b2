//! Rollout status (docs/concepts/rollout-status.md): whether what an extension installed is ready, as a
//! pure function of the live objects.
//!
//! The executor reads the live state of the installed objects whose readiness Kubernetes
//! reports in their status ([`is_checked`]: Deployments, StatefulSets, DaemonSets,
//! CustomResourceDefinitions, cert-manager Certificates, APIServices) and, for a
//! Deployment that is not available, the waiting reasons of its pods; [`assess`] turns
//! them into [`Readiness::Ready`] or [`Readiness::NotReady`] with one human message per
//! object that is not ready, sorted, so the same state always gives the same bytes
//! (`deployment/foo 0/1 available: ImagePullBackOff`,
//! `customresourcedefinition/widgets.example.com not Established`). The reason of a
//! Deployment comes from its pods' waiting reasons when known, else from its
//! `ReplicaFailure`, `Progressing` or `Available` condition. [`state_of`] is the same
//! verdict for one object, used by the drift watches to reconcile when readiness changes
//! rather than on every status update. Nothing here does I/O.

use serde_json::Value;
use std::collections::BTreeSet;

/// What the installed objects say about the rollout.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum Readiness {
    #[default]
    Ready,
    /// One message per object that is not ready, sorted.
    NotReady(Vec<String>),
}

impl Readiness {
    /// The messages joined with `; ` (empty when ready).
    pub fn message(&self) -> String {
        match self {
            Readiness::Ready => String::new(),
            Readiness::NotReady(m) => m.join("; "),
        }
    }
}

/// One live object and, for a Deployment, the pods its selector matches.
#[derive(Clone, Debug, Default)]
pub struct Observed {
    pub object: Value,
    pub pods: Vec<Value>,
}

/// Whether objects of this group and kind report readiness that [`assess`] checks.
pub fn is_checked(group: &str, kind: &str) -> bool {
    matches!(
        (group, kind),
        ("apps", "Deployment" | "StatefulSet" | "DaemonSet")
            | ("apiextensions.k8s.io", "CustomResourceDefinition")
            | ("cert-manager.io", "Certificate")
            | ("apiregistration.k8s.io", "APIService")
    )
}

/// The readiness of all `observed` objects.
pub fn assess(observed: &[Observed]) -> Readiness {
    Readiness::of(
        observed
            .iter()
            .filter_map(|o| not_ready(&o.object, &o.pods)),
    )
}

impl Readiness {
    /// Ready without `messages`, else not ready with them sorted and deduplicated.
    pub fn of(messages: impl IntoIterator<Item = String>) -> Readiness {
        let messages: BTreeSet<String> = messages.into_iter().collect();
        if messages.is_empty() {
            Readiness::Ready
        } else {
            Readiness::NotReady(messages.into_iter().collect())
        }
    }

    /// The messages of both.
    pub fn and(self, other: Readiness) -> Readiness {
        let messages = |r: Readiness| match r {
            Readiness::Ready => Vec::new(),
            Readiness::NotReady(m) => m,
        };
        Readiness::of(messages(self).into_iter().chain(messages(other)))
    }
}

/// `<kind>/<name> <why>`, for an object whose state could not be read.
pub fn unreadable(kind: &str, name: &str, why: impl std::fmt::Display) -> String {
    format!("{}/{name} {why}", kind.to_ascii_lowercase())
}

/// The label selector (`k=v,…`) of a Deployment's pods, from `spec.selector.matchLabels`;
/// `None` when it has none (pods are then not looked at).
pub fn pod_selector(deployment: &Value) -> Option<String> {
    let labels = deployment["spec"]["selector"]["matchLabels"].as_object()?;
    let pairs: Vec<String> = labels
        .iter()
        .filter_map(|(k, v)| v.as_str().map(|v| format!("{k}={v}")))
        .collect();
    (!pairs.is_empty()).then(|| pairs.join(","))
}

/// Whether the readiness message of `deployment` can name its pods' waiting reasons, so
/// that they are worth listing: it is not ready, and its controller has observed its
/// generation (before that — a Deployment just created or changed, as an apply returns
/// it — the message is the generation lag's, whatever the pods say).
pub fn reads_pods(deployment: &Value) -> bool {
    deployment["kind"] == "Deployment"
        && generation_lag(deployment).is_none()
        && state_of(deployment).is_some()
}

/// The verdict for one object without its pods: `None` when ready (or not a checked
/// kind), else the message.
pub fn state_of(object: &Value) -> Option<String> {
    not_ready(object, &[])
}

/// Why `object` is not ready, or `None` when it is.
pub fn not_ready(object: &Value, pods: &[Value]) -> Option<String> {
    let kind = object["kind"].as_str().unwrap_or_default();
    let group = object["apiVersion"]
        .as_str()
        .and_then(|v| v.split_once('/'))
        .map_or("", |(g, _)| g);
    if !is_checked(group, kind) {
        return None;
    }
    let name = object["metadata"]["name"].as_str().unwrap_or_default();
    let what = format!("{}/{name}", kind.to_ascii_lowercase());
    let detail = match kind {
        "Deployment" => deployment(object, pods),
        "StatefulSet" => stateful_set(object),
        "DaemonSet" => daemon_set(object),
        "CustomResourceDefinition" => condition_not_true(object, "Established"),
        "Certificate" => certificate(object),
        "APIService" => condition_not_true(object, "Available"),
        _ => None,
    }?;
    Some(format!("{what} {detail}"))
}

/// `waiting for the controller to observe generation <n>` when the status describes an
/// older spec.
fn generation_lag(object: &Value) -> Option<String> {
    let generation = object["metadata"]["generation"].as_i64()?;
    let observed = object["status"]["observedGeneration"].as_i64().unwrap_or(0);
    (observed < generation)
        .then(|| format!("waiting for the controller to observe generation {generation}"))
}

fn count(object: &Value, field: &str) -> i64 {
    object["status"][field].as_i64().unwrap_or(0)
}

/// `spec.replicas`, 1 when absent (the API default).
fn desired_replicas(object: &Value) -> i64 {
    object["spec"]["replicas"].as_i64().unwrap_or(1)
}

/// As `kubectl rollout status`: the new spec observed, every replica updated, old
/// replicas gone, every updated replica available.
fn deployment(object: &Value, pods: &[Value]) -> Option<String> {
    if let Some(lag) = generation_lag(object) {
        return Some(lag);
    }
    let desired = desired_replicas(object);
    let updated = count(object, "updatedReplicas");
    let replicas = count(object, "replicas");
    let available = count(object, "availableReplicas");
    let what = if updated < desired {
        format!("{updated}/{desired} updated")
    } else if replicas > updated {
        format!("{} old replica(s) pending termination", replicas - updated)
    } else if available < desired.max(updated) {
        format!("{available}/{desired} available")
    } else {
        return None;
    };
    let reason = pod_reasons(pods).or_else(|| deployment_reason(object));
    Some(match reason {
        Some(r) => format!("{what}: {r}"),
        None => what,
    })
}

/// The first condition among ReplicaFailure=True, Progressing=False and
/// Available=False that carries a message.
fn deployment_reason(object: &Value) -> Option<String> {
    [
        ("ReplicaFailure", "True"),
        ("Progressing", "False"),
        ("Available", "False"),
    ]
    .into_iter()
    .filter_map(|(type_, status)| condition(object, type_).filter(|c| c["status"] == status))
    .find_map(message_of)
}

/// The distinct waiting reasons of the pods' containers (init containers included) and
/// `Unschedulable` for pods the scheduler could not place, sorted and joined with `, `.
fn pod_reasons(pods: &[Value]) -> Option<String> {
    let mut reasons = BTreeSet::new();
    for pod in pods {
        if !pod["metadata"]["deletionTimestamp"].is_null() {
            continue;
        }
        let status = &pod["status"];
        for list in ["initContainerStatuses", "containerStatuses"] {
            for c in status[list].as_array().into_iter().flatten() {
                if let Some(r) = c["state"]["waiting"]["reason"].as_str() {
                    reasons.insert(r.to_string());
                }
            }
        }
        let unscheduled = status["conditions"]
            .as_array()
            .into_iter()
            .flatten()
            .any(|c| {
                c["type"] == "PodScheduled"
                    && c["status"] == "False"
                    && c["reason"] == "Unschedulable"
            });
        if unscheduled {
            reasons.insert("Unschedulable".to_string());
        }
    }
    (!reasons.is_empty()).then(|| reasons.into_iter().collect::<Vec<_>>().join(", "))
}

/// cert-manager keeps `observedGeneration` on the Ready condition, not in the status.
fn certificate(object: &Value) -> Option<String> {
    let generation = object["metadata"]["generation"].as_i64();
    let observed = condition(object, "Ready").and_then(|c| c["observedGeneration"].as_i64());
    if let (Some(generation), Some(observed)) = (generation, observed)
        && observed < generation
    {
        return Some(format!(
            "waiting for the controller to observe generation {generation}"
        ));
    }
    condition_not_true(object, "Ready")
}

fn stateful_set(object: &Value) -> Option<String> {
    if let Some(lag) = generation_lag(object) {
        return Some(lag);
    }
    let desired = desired_replicas(object);
    let ready = count(object, "readyReplicas");
    let updated = count(object, "updatedReplicas");
    let rolling = object["spec"]["updateStrategy"]["type"].as_str() != Some("OnDelete");
    if ready < desired {
        Some(format!("{ready}/{desired} ready"))
    } else if rolling && updated < desired {
        Some(format!("{updated}/{desired} updated"))
    } else {
        None
    }
}

fn daemon_set(object: &Value) -> Option<String> {
    if let Some(lag) = generation_lag(object) {
        return Some(lag);
    }
    let desired = count(object, "desiredNumberScheduled");
    let updated = count(object, "updatedNumberScheduled");
    let available = count(object, "numberAvailable");
    let rolling = object["spec"]["updateStrategy"]["type"].as_str() != Some("OnDelete");
    if rolling && updated < desired {
        Some(format!("{updated}/{desired} updated"))
    } else if available < desired {
        Some(format!("{available}/{desired} available"))
    } else {
        None
    }
}

/// `not <type>` (with the condition's message) unless the condition is True.
fn condition_not_true(object: &Value, type_: &str) -> Option<String> {
    let c = condition(object, type_);
    if c.is_some_and(|c| c["status"] == "True") {
        return None;
    }
    Some(match c.and_then(message_of) {
        Some(m) => format!("not {type_}: {m}"),
        None => format!("not {type_}"),
    })
}

fn condition<'a>(object: &'a Value, type_: &str) -> Option<&'a Value> {
    object["status"]["conditions"]
        .as_array()?
        .iter()
        .find(|c| c["type"] == type_)
}

fn message_of(c: &Value) -> Option<String> {
    c["message"]
        .as_str()
        .filter(|m| !m.is_empty())
        .map(str::to_owned)
}

#[cfg(test)]
#[path = "rollout_tests.rs"]
mod tests;
