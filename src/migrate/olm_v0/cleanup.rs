//! `olmv1 migrate cleanup` as a plan (docs/how-to/switch-from-olm-v0.md, "cleanup";
//! olm-v0 reference §1.3, §1.4, §3.3 step 6, §3.4): once the ClusterExtension a
//! convert created is Installed and rolled out, what OLM v0 left behind goes.
//!
//! - Objects still carrying OLM v0's component label `operators.coreos.com/<pkg>.<ns>`
//!   that the v1 revision does not own (no olmv1 owner labels naming the extension):
//!   v0-named RBAC (Roles, RoleBindings, ClusterRoles, ClusterRoleBindings: permissions,
//!   cert readers, auth-delegator), suffixed webhook configurations and the
//!   OperatorCondition are deleted — and webhook configurations OLM v0 generated from
//!   the CSV's webhook definitions (which it does not give the component label, found by
//!   [`WEBHOOK_DESCRIPTION_LABEL`]) — but only when the revision owns a replacement of
//!   that sort (a binding for RBAC, a configuration of the same kind for webhooks), so
//!   nothing is missing for a moment. Any other object (CRDs, the provided-API aggregate
//!   ClusterRoles owned by a CRD, Secrets, Services…) is kept and only loses v0's labels.
//! - Copied CSVs still present are deleted.
//! - Objects the revision owns keep everything of olmv1 and lose v0's labels
//!   ([`V0_LABELS`]): a CRD loses labels only, its spec and every custom resource are
//!   never touched.
//! - The cluster-scoped `Operator` object goes last of these: OLM v0 re-creates it while
//!   any object carries the component label.
//! - `OPERATOR_CONDITION_NAME` is removed from the revision's Deployments only when the
//!   cluster does not serve OperatorCondition (then olmv1 does not inject it; one
//!   rollout). When it is served, olmv1's revision owns the OperatorCondition and the
//!   variable: both stay.
//!
//! Refused unless the ClusterExtension is this Subscription's migration, Installed=True
//! and Progressing Succeeded for its current generation, and OLM v0 manages the operator
//! no more (no Subscription, no CSV). The backup stays: `migrate rollback` still works
//! after a cleanup (OLM v0 re-creates its objects by their deterministic names). Pure
//! and state-driven: a second run plans nothing.

use super::backup::{Backup, configmap_name};
use super::convert::{OWNER_LABELS, Target};
use super::read::text;
use super::target::MIGRATED_FROM_ANNOTATION;
use crate::api;
use serde::Serialize;
use serde_json::Value;

/// The labels of OLM v0 cleanup removes besides the component label: those that keep
/// OLM v0 interested (olm-v0 reference §3.3 step 6). `olm.managed` and the hash labels
/// stay: no v0 controller acts on them alone, and a rollback finds its objects as it
/// left them.
pub const V0_LABELS: [&str; 3] = OWNER_LABELS;

/// The env var OLM v0 injects naming the OperatorCondition.
pub const CONDITION_ENV: &str = "OPERATOR_CONDITION_NAME";

/// OLM v0's component label of `package` installed in `namespace`.
pub fn component_label(package: &str, namespace: &str) -> String {
    format!("operators.coreos.com/{}", operator_name(package, namespace))
}

/// The `Operator` object's name, `<package>.<namespace>` cut to 63 characters.
pub fn operator_name(package: &str, namespace: &str) -> String {
    let mut name = format!("{package}.{namespace}");
    name.truncate(63);
    name
}

/// What is on the cluster for one cleanup, read by the command line.
#[derive(Clone, Debug, Default)]
pub struct Observed {
    pub namespace: String,
    pub name: String,
    pub backup: Option<Result<Backup, String>>,
    pub subscription: Option<Value>,
    /// The backed-up installed CSV, when it still exists in the namespace.
    pub csv: Option<Value>,
    pub extension: Option<Value>,
    /// The `Operator` object `<package>.<namespace>`, when it exists.
    pub operator_object: Option<Value>,
    /// Every object carrying the component label (each with apiVersion and kind).
    pub labelled: Vec<Value>,
    /// The revision's RBAC and webhook configurations (olmv1 owner labels naming the
    /// extension): the replacements of OLM v0's.
    pub owned: Vec<Value>,
    /// Webhook configurations OLM v0 made from a webhook definition (label
    /// [`WEBHOOK_DESCRIPTION_LABEL`]; OLM v0 does not give them the component label).
    pub v0_webhook_configurations: Vec<Value>,
    /// Copies of the CSV (label `olm.copiedFrom=<namespace>`).
    pub copied_csvs: Vec<Value>,
    /// The revision's Deployments (olmv1 owner labels naming the extension).
    pub owned_deployments: Vec<Value>,
    /// The cluster serves `operators.coreos.com/v2` OperatorCondition.
    pub operator_condition_served: bool,
}

/// One step of a cleanup; each is safe to run again.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(tag = "step", rename_all = "camelCase")]
pub enum Step {
    Delete {
        target: Target,
        why: String,
    },
    /// Finalizers removed first, orphan propagation.
    DeleteCopiedCsv {
        target: Target,
    },
    RemoveLabels {
        target: Target,
        labels: Vec<String>,
    },
    DeleteOperator {
        name: String,
    },
    /// Strategic-merge-patch removal of the env var from these containers.
    RemoveEnv {
        target: Target,
        containers: Vec<String>,
    },
}

impl Step {
    /// The step in words.
    pub fn describe(&self) -> String {
        match self {
            Step::Delete { target, why } => format!("delete {target} ({why})"),
            Step::DeleteCopiedCsv { target } => {
                format!("delete copied {target} (OLM v0 no longer manages the operator)")
            }
            Step::RemoveLabels { target, labels } => {
                format!("remove OLM v0's labels {} from {target}", labels.join(", "))
            }
            Step::DeleteOperator { name } => format!(
                "delete Operator {name} (no object carries its component label any more: OLM v0 does not re-create it)"
            ),
            Step::RemoveEnv { target, .. } => format!(
                "remove {CONDITION_ENV} from {target} (OperatorCondition is not served: olmv1 does not manage it; one rollout)"
            ),
        }
    }
}

/// The plan of a cleanup.
#[derive(Clone, Debug, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Plan {
    pub subscription: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub refused: Option<String>,
    pub steps: Vec<Step>,
    /// Objects of OLM v0 left in place, and why.
    pub kept: Vec<String>,
}

/// The steps that remain (see the module documentation).
pub fn plan(o: &Observed) -> Plan {
    let subscription = format!("{}/{}", o.namespace, o.name);
    let refuse = |why: String| Plan {
        subscription: subscription.clone(),
        refused: Some(why),
        ..Plan::default()
    };
    let backup = match &o.backup {
        Some(Ok(b)) => b,
        Some(Err(e)) => return refuse(format!("the backup ConfigMap is unreadable: {e}")),
        None => {
            return refuse(format!(
                "no backup ConfigMap {}/{}: {subscription} was not converted by olmv1 migrate convert (or was rolled back)",
                o.namespace,
                configmap_name(&o.name)
            ));
        }
    };
    if let Some(why) = refusal(o, &subscription) {
        return refuse(why);
    }
    let package = text(&backup.subscription, "/spec/name").unwrap_or_default();
    let label = component_label(&package, &o.namespace);
    let mut plan = Plan {
        subscription,
        ..Plan::default()
    };
    let owned: Vec<&Value> = o
        .owned
        .iter()
        .chain(&o.labelled)
        .filter(|v| owned_by(v, &o.name))
        .collect();
    let mut deletes = Vec::new();
    let mut relabels = Vec::new();
    for v in &o.labelled {
        let t = Target::of(v);
        if owned_by(v, &o.name) {
            relabels.extend(remove_labels(v, &label));
            continue;
        }
        match deletable(v, &owned) {
            Ok(why) => deletes.push(Step::Delete { target: t, why }),
            Err(why) => {
                plan.kept.push(format!("{t}: {why}"));
                relabels.extend(remove_labels(v, &label));
            }
        }
    }
    for v in &o.v0_webhook_configurations {
        let t = Target::of(v);
        if o.labelled.iter().any(|l| Target::of(l) == t) {
            continue;
        }
        if let Some(why) = replaced_webhook_configuration(v, &owned, &o.name) {
            deletes.push(Step::Delete { target: t, why });
        }
    }
    plan.steps.extend(deletes);
    plan.steps
        .extend(o.copied_csvs.iter().map(|c| Step::DeleteCopiedCsv {
            target: Target::of(c),
        }));
    plan.steps.extend(relabels);
    if o.operator_object.is_some() {
        plan.steps.push(Step::DeleteOperator {
            name: operator_name(&package, &o.namespace),
        });
    }
    if !o.operator_condition_served {
        plan.steps
            .extend(o.owned_deployments.iter().filter_map(env_removal));
    }
    plan
}

/// Why cleanup may not run now.
fn refusal(o: &Observed, subscription: &str) -> Option<String> {
    if o.subscription.is_some() || o.csv.is_some() {
        return Some(format!(
            "OLM v0 manages {subscription} (its Subscription or CSV exists): finish `olmv1 migrate convert {subscription} --apply` first"
        ));
    }
    let Some(ext) = &o.extension else {
        return Some(format!(
            "no ClusterExtension {}: run `olmv1 migrate convert {subscription} --apply` first",
            o.name
        ));
    };
    let from = ext
        .pointer("/metadata/annotations")
        .and_then(|a| a.get(MIGRATED_FROM_ANNOTATION))
        .and_then(Value::as_str);
    if from != Some(subscription) {
        return Some(format!(
            "ClusterExtension {} is not the migration of Subscription {subscription} (annotation {MIGRATED_FROM_ANNOTATION}): it is left alone",
            o.name
        ));
    }
    let generation = ext.pointer("/metadata/generation").and_then(Value::as_i64);
    let cond = |t: &str| {
        ext.pointer("/status/conditions")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .find(|c| text(c, "/type").as_deref() == Some(t))
    };
    let current = |c: &Value| {
        generation.is_none()
            || c.pointer("/observedGeneration").and_then(Value::as_i64) == generation
    };
    let installed = cond("Installed")
        .is_some_and(|c| text(c, "/status").as_deref() == Some("True") && current(c));
    let rolled_out = cond("Progressing").is_some_and(|c| {
        text(c, "/reason").as_deref() == Some(crate::api::conditions::REASON_SUCCEEDED)
            && current(c)
    });
    if installed && rolled_out {
        return None;
    }
    let said = |t: &str| {
        cond(t)
            .map(|c| {
                format!(
                    "{t}={} ({}: {})",
                    text(c, "/status").unwrap_or_default(),
                    text(c, "/reason").unwrap_or_default(),
                    text(c, "/message").unwrap_or_default()
                )
            })
            .unwrap_or_else(|| format!("{t} not reported"))
    };
    Some(format!(
        "ClusterExtension {} is not Installed and rolled out yet ({}; {}): OLM v0's objects still stand in for its own; wait (`olmv1 status {}`) and run cleanup again",
        o.name,
        said("Installed"),
        said("Progressing"),
        o.name
    ))
}

/// The object carries olmv1's owner labels naming ClusterExtension `extension`.
pub fn owned_by(v: &Value, extension: &str) -> bool {
    let label = |k: &str| {
        v.pointer("/metadata/labels")
            .and_then(|l| l.get(k))
            .and_then(Value::as_str)
    };
    label(api::LABEL_OWNER_KIND) == Some("ClusterExtension")
        && label(api::LABEL_OWNER_NAME) == Some(extension)
}

const RBAC: [&str; 4] = ["Role", "RoleBinding", "ClusterRole", "ClusterRoleBinding"];
const WEBHOOKS: [&str; 2] = [
    "MutatingWebhookConfiguration",
    "ValidatingWebhookConfiguration",
];

/// The label OLM v0 puts on the webhook configurations it generates from a CSV's
/// webhook definition: the definition's `generateName` (olm-v0 reference §1.1; OLM
/// v0's install/webhook.go `WebhookDescKey`).
pub const WEBHOOK_DESCRIPTION_LABEL: &str = "olm.webhook-description-generate-name";

/// Why OLM v0's webhook configuration `v` (found by [`WEBHOOK_DESCRIPTION_LABEL`]) may
/// be deleted: untied from any CSV (no `olm.owner` label), not the revision's, and the
/// revision owns the configuration of the same kind olmv1 names after the same
/// definition (`generateName` is its name). `None`: not this migration's, left alone.
pub fn replaced_webhook_configuration(
    v: &Value,
    owned: &[&Value],
    extension: &str,
) -> Option<String> {
    let labels = v.pointer("/metadata/labels")?.as_object()?;
    let generated_from = labels.get(WEBHOOK_DESCRIPTION_LABEL)?.as_str()?;
    if labels.contains_key("olm.owner") || owned_by(v, extension) {
        return None;
    }
    let kind = text(v, "/kind");
    owned
        .iter()
        .any(|o| text(o, "/kind") == kind && text(o, "/metadata/name").as_deref() == Some(generated_from))
        .then(|| {
            format!(
                "OLM v0's webhook configuration from definition {generated_from}: the v1 revision has its own, {generated_from}"
            )
        })
}

/// Why a v0-only object may be deleted (`Err`: why it is kept).
fn deletable(v: &Value, owned: &[&Value]) -> Result<String, String> {
    let kind = text(v, "/kind").unwrap_or_default();
    let owns = |kinds: &[&str]| {
        owned
            .iter()
            .any(|o| kinds.contains(&text(o, "/kind").unwrap_or_default().as_str()))
    };
    if RBAC.contains(&kind.as_str()) {
        if aggregate_role(v) {
            return Err("provided-API aggregate role (owned by its CRD, grants access to custom resources): kept".into());
        }
        return if owns(&["RoleBinding", "ClusterRoleBinding"]) {
            Ok("v0-named RBAC: the v1 revision grants the operator its own".into())
        } else {
            Err("the v1 revision has no RBAC of its own to replace it: kept".into())
        };
    }
    if WEBHOOKS.contains(&kind.as_str()) {
        return if owns(&[kind.as_str()]) {
            Ok("suffixed v0 webhook configuration: the v1 revision has its own".into())
        } else {
            Err(format!("the v1 revision has no {kind} to replace it: kept"))
        };
    }
    if kind == "OperatorCondition" {
        return Ok("v0's OperatorCondition: the v1 revision does not own it".into());
    }
    Err("not an object only OLM v0 needs: kept, labels removed".into())
}

/// A provided-API aggregate ClusterRole or an OperatorGroup's ClusterRole (olm-v0
/// reference §1.2): owned by a CRD or the OperatorGroup, or aggregating.
fn aggregate_role(v: &Value) -> bool {
    let crd_owned = v
        .pointer("/metadata/ownerReferences")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .any(|r| text(r, "/kind").as_deref() == Some("CustomResourceDefinition"));
    let aggregates = v
        .pointer("/metadata/labels")
        .and_then(Value::as_object)
        .is_some_and(|l| {
            l.keys().any(|k| {
                k.starts_with("rbac.authorization.k8s.io/aggregate-to-")
                    || k.starts_with("olm.opgroup.permissions/aggregate-to-")
            })
        });
    let og_owned = v
        .pointer("/metadata/labels/olm.owner.kind")
        .and_then(Value::as_str)
        == Some("OperatorGroup");
    crd_owned || aggregates || og_owned || v.get("aggregationRule").is_some()
}

/// The step removing the component label and [`V0_LABELS`] present on `v`.
fn remove_labels(v: &Value, component: &str) -> Option<Step> {
    let labels = v.pointer("/metadata/labels").and_then(Value::as_object)?;
    let present: Vec<String> = std::iter::once(component)
        .chain(V0_LABELS)
        .filter(|k| labels.contains_key(*k))
        .map(str::to_string)
        .collect();
    (!present.is_empty()).then(|| Step::RemoveLabels {
        target: Target::of(v),
        labels: present,
    })
}

/// The removal of [`CONDITION_ENV`] from every container of Deployment `d` naming it.
fn env_removal(d: &Value) -> Option<Step> {
    let containers: Vec<String> = d
        .pointer("/spec/template/spec/containers")
        .and_then(Value::as_array)?
        .iter()
        .filter(|c| {
            c.get("env")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .any(|e| text(e, "/name").as_deref() == Some(CONDITION_ENV))
        })
        .filter_map(|c| text(c, "/name"))
        .collect();
    (!containers.is_empty()).then(|| Step::RemoveEnv {
        target: Target::of(d),
        containers,
    })
}
