//! What ties an object to the CSV and how a convert hands it over (docs/how-to/switch-from-olm-v0.md,
//! "convert"; olm-v0 reference §1.2, §1.4): the `olm.owner*` labels and ownerReferences
//! an [`untie`] removes, and the adoption mark
//! ([`crate::apply::ownership::adoption_mark`]) naming the ClusterExtension and the
//! backup's UID, written with the untie ([`with_hand_over`]) or, on what OLM v0 ties to
//! nothing (the CRDs the CSV owns, an aggregated API server's auth-reader RoleBinding),
//! on its own ([`Step::MarkForAdoption`]).

use super::{OWNER_LABELS, Observed, Step, Target};
use crate::apply::ownership::{ADOPTABLE_BY_ANNOTATION, adoption_mark};
use crate::migrate::olm_v0::backup::{Backup, configmap_name};
use crate::migrate::olm_v0::read::text;
use serde_json::Value;

/// The ClusterExtension convert creates (named like the Subscription).
pub(super) fn extension_name(o: &Observed, backup: &Backup) -> String {
    text(&backup.extension, "/metadata/name").unwrap_or_else(|| o.name.clone())
}

/// The backup ConfigMap of `backup`.
pub(super) fn backup_target(backup: &Backup) -> Target {
    Target {
        api_version: "v1".into(),
        kind: "ConfigMap".into(),
        namespace: backup.namespace(),
        name: configmap_name(&backup.name()),
    }
}

/// `step` (an untie) handing its object over as well.
pub fn with_hand_over(mut step: Step, to: &(String, Target)) -> Step {
    if let Step::Untie { hand_over, .. } = &mut step {
        *hand_over = Some(to.clone());
    }
    step
}

/// The CRDs the CSV owns that do not carry the mark yet (module documentation);
/// before the backup exists (a first run) every one of them is marked. What is tied to
/// the CSV is marked by its untie.
pub(super) fn marks(o: &Observed, backup: &Backup) -> Vec<Step> {
    let extension = extension_name(o, backup);
    let wanted = o
        .backup_uid
        .as_deref()
        .map(|uid| adoption_mark(&extension, uid));
    o.untied_handed_over
        .iter()
        .filter(|obj| {
            let mark = obj
                .pointer("/metadata/annotations")
                .and_then(|a| a.get(ADOPTABLE_BY_ANNOTATION))
                .and_then(Value::as_str);
            wanted.is_none() || mark != wanted.as_deref()
        })
        .map(|obj| Step::MarkForAdoption {
            target: Target::of(obj),
            extension: extension.clone(),
            backup: backup_target(backup),
        })
        .collect()
}

/// The names of the CRDs the CSV `csv` owns.
pub fn owned_crd_names(csv: &Value) -> Vec<String> {
    csv.pointer("/spec/customresourcedefinitions/owned")
        .and_then(Value::as_array)
        .map(|owned| {
            owned
                .iter()
                .filter_map(|c| c.get("name").and_then(Value::as_str))
                .map(str::to_string)
                .collect()
        })
        .unwrap_or_default()
}

/// Whether an ownerReference points at the CSV `csv` (any UID: a CSV re-created under
/// the same name is the same owner to OLM v0).
fn is_csv_reference(r: &Value, csv: &str) -> bool {
    r["kind"] == "ClusterServiceVersion"
        && r["apiVersion"]
            .as_str()
            .is_some_and(|a| a.starts_with("operators.coreos.com/"))
        && r["name"] == csv
}

/// OLM v0's labels tying an object to the CSV `csv` of namespace `namespace`
/// ([`OWNER_LABELS`]).
pub fn owner_labels(csv: &str, namespace: &str) -> Value {
    serde_json::json!({OWNER_LABELS[0]: csv, OWNER_LABELS[1]: "ClusterServiceVersion",
        OWNER_LABELS[2]: namespace})
}

/// Whether `obj` carries OLM v0's labels for the CSV `csv` of namespace `namespace`.
pub fn labelled_for(obj: &Value, csv: &str, namespace: &str) -> bool {
    let wanted = owner_labels(csv, namespace);
    OWNER_LABELS
        .iter()
        .all(|k| obj.pointer(&format!("/metadata/labels/{k}")) == wanted.get(*k))
}

/// What ties `obj` to the CSV `csv` of namespace `namespace`: the `olm.owner*` labels
/// naming it, ownerReferences to it. `None` when nothing does.
pub fn untie(obj: &Value, csv: &str, namespace: &str) -> Option<Step> {
    let label = |k: &str| text(obj, &format!("/metadata/labels/{k}"));
    let labelled = labelled_for(obj, csv, namespace);
    let labels: Vec<String> = if labelled {
        OWNER_LABELS
            .iter()
            .filter(|k| label(k).is_some())
            .map(|k| k.to_string())
            .collect()
    } else {
        Vec::new()
    };
    let refs = obj
        .pointer("/metadata/ownerReferences")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let in_namespace = text(obj, "/metadata/namespace").as_deref() == Some(namespace);
    let (removed, kept): (Vec<Value>, Vec<Value>) = refs
        .into_iter()
        .partition(|r| in_namespace && is_csv_reference(r, csv));
    if labels.is_empty() && removed.is_empty() {
        return None;
    }
    Some(Step::Untie {
        target: Target::of(obj),
        labels,
        owner_references: removed
            .iter()
            .map(|r| format!("{}/{}", r["kind"].as_str().unwrap_or(""), csv))
            .collect(),
        keep_owner_references: (!removed.is_empty()).then_some(kept),
        resource_version: text(obj, "/metadata/resourceVersion"),
        csv: (csv.to_string(), namespace.to_string()),
        hand_over: None,
    })
}
