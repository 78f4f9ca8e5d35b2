//! The install namespace from the bundle (docs/how-to/install-namespace.md), opt-in: with
//! the ClusterExtension annotation [`ANNOTATION_CREATE_NAMESPACE`]`: "true"` (or the
//! controller flag `--create-install-namespaces`, which `"false"` on an extension turns
//! off again), a `spec.namespace` that does not exist is created before the bundle is
//! applied — named `spec.namespace`, with the labels and annotations of the CSV's
//! `operatorframework.io/suggested-namespace-template` (Pod Security labels included),
//! and marked ([`LABEL_CREATED_BY`], [`ANNOTATION_CREATED_FOR`]) as olmv1's, for that
//! extension. On uninstall it is deleted only when it carries that mark for the same
//! extension and nothing else lives there ([`lingering`]); otherwise it stays and an
//! Event says why. Without the opt-in nothing changes: a missing namespace fails
//! validation with upstream's `namespace "<ns>" not found`.
//!
//! Pure decisions; [`cluster`] does the reads and writes.

pub mod cluster;

use crate::apply::ObjectRef;
use serde_json::{Value, json};
use std::collections::{BTreeMap, BTreeSet};

/// ClusterExtension annotation: create `spec.namespace` when it does not exist
/// (`"true"`), or do not even when the controller flag says so (`"false"`).
pub const ANNOTATION_CREATE_NAMESPACE: &str = "olm.operatorframework.io/create-namespace";
/// Label on a namespace olmv1 created: the name of the ClusterExtension it was created for.
pub const LABEL_CREATED_BY: &str = "olm.operatorframework.io/namespace-created-by";
/// Annotation on a namespace olmv1 created: the uid of that ClusterExtension (a later
/// extension of the same name does not remove it).
pub const ANNOTATION_CREATED_FOR: &str = "olm.operatorframework.io/namespace-created-for";
/// CSV annotation (OLM v0, OpenShift console): the namespace the operator suggests.
pub const CSV_SUGGESTED_NAMESPACE: &str = "operatorframework.io/suggested-namespace";
/// CSV annotation (OLM v0, OpenShift console): a JSON Namespace object to create; wins
/// over [`CSV_SUGGESTED_NAMESPACE`].
pub const CSV_SUGGESTED_NAMESPACE_TEMPLATE: &str =
    "operatorframework.io/suggested-namespace-template";

/// Whether `spec.namespace` may be created: the extension's annotation, else the
/// controller flag.
pub fn opted_in(annotations: &BTreeMap<String, String>, flag: bool) -> bool {
    match annotations
        .get(ANNOTATION_CREATE_NAMESPACE)
        .map(String::as_str)
    {
        Some("true") => true,
        Some("false") => false,
        _ => flag,
    }
}

/// The validation errors of a `spec.namespace` that does not exist: upstream's message,
/// unless it is to be created — which needs an installer account that does not live in
/// it.
pub fn missing(namespace: &str, opted_in: bool, installer_namespace: &str) -> Vec<String> {
    let not_found = format!("namespace {namespace:?} not found");
    if !opted_in {
        return vec![not_found];
    }
    if installer_namespace == namespace {
        return vec![
            not_found,
            format!(
                "{ANNOTATION_CREATE_NAMESPACE}: namespace {namespace:?} cannot be created for the extension because its installer ServiceAccount would live in it; create the namespace and the account, or leave spec.serviceAccount unset so that the controller's default installer (--default-installer-service-account) creates it"
            ),
        ];
    }
    Vec::new()
}

/// What the bundle suggests for its namespace (CSV annotations).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Suggestion {
    /// The template's `metadata.name`, else `suggested-namespace`.
    pub name: Option<String>,
    /// Whether the suggestion comes from the template.
    pub template: bool,
    pub labels: BTreeMap<String, String>,
    pub annotations: BTreeMap<String, String>,
    /// Why the template cannot be used (not a JSON Namespace object).
    pub invalid: Option<String>,
}

/// The suggestion of the CSV `csv`.
pub fn suggestion(csv: &Value) -> Suggestion {
    let annotations = &csv["metadata"]["annotations"];
    let plain = annotations[CSV_SUGGESTED_NAMESPACE]
        .as_str()
        .filter(|s| !s.is_empty())
        .map(str::to_string);
    let Some(text) = annotations[CSV_SUGGESTED_NAMESPACE_TEMPLATE].as_str() else {
        return Suggestion {
            name: plain,
            ..Suggestion::default()
        };
    };
    match template(text) {
        Ok(mut s) => {
            s.name = s.name.or(plain);
            s
        }
        Err(why) => Suggestion {
            name: plain,
            invalid: Some(format!(
                "the bundle's {CSV_SUGGESTED_NAMESPACE_TEMPLATE} annotation is not a Namespace object: {why}"
            )),
            ..Suggestion::default()
        },
    }
}

fn template(text: &str) -> Result<Suggestion, String> {
    let value: Value = serde_json::from_str(text).map_err(|e| e.to_string())?;
    let object = value.as_object().ok_or("not a JSON object")?;
    if let Some(kind) = object.get("kind")
        && kind != "Namespace"
    {
        return Err(format!("kind is {kind}, not \"Namespace\""));
    }
    let metadata = &value["metadata"];
    Ok(Suggestion {
        name: metadata["name"].as_str().map(str::to_string),
        template: true,
        labels: strings(&metadata["labels"], "metadata.labels")?,
        annotations: strings(&metadata["annotations"], "metadata.annotations")?,
        invalid: None,
    })
}

fn strings(value: &Value, field: &str) -> Result<BTreeMap<String, String>, String> {
    let Some(map) = value.as_object() else {
        return match value {
            Value::Null => Ok(BTreeMap::new()),
            _ => Err(format!("{field} is not a map")),
        };
    };
    map.iter()
        .map(|(k, v)| match v.as_str() {
            Some(s) => Ok((k.clone(), s.to_string())),
            None => Err(format!("{field}.{k} is not a string")),
        })
        .collect()
}

/// The extension a namespace is created for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct For<'a> {
    pub namespace: &'a str,
    pub extension: &'a str,
    pub uid: &'a str,
}

/// What to do about the install namespace before applying.
#[derive(Clone, Debug, PartialEq)]
pub enum Step {
    /// It exists (it is never changed), or creating it was not asked.
    Nothing,
    /// Create this Namespace; the Event says so.
    Create { object: Value, note: String },
    /// It cannot be created: the install fails with this message.
    Refuse(String),
}

/// What to do about `target.namespace`, which exists or not, given the opt-in and the
/// bundle's suggestion. The name is always `spec.namespace`; a suggested name that
/// differs is only mentioned (the template's labels and annotations still apply, as
/// OLM v0's console applies them to the namespace the user picked).
pub fn decide(target: &For, exists: bool, opted_in: bool, suggestion: &Suggestion) -> Step {
    if exists || !opted_in {
        return Step::Nothing;
    }
    if let Some(why) = &suggestion.invalid {
        return Step::Refuse(format!(
            "namespace {:?} not created: {why}",
            target.namespace
        ));
    }
    let mut labels = suggestion.labels.clone();
    labels.insert(LABEL_CREATED_BY.into(), target.extension.into());
    let mut annotations = suggestion.annotations.clone();
    annotations.insert(ANNOTATION_CREATED_FOR.into(), target.uid.into());
    let object = json!({
        "apiVersion": "v1",
        "kind": "Namespace",
        "metadata": {"name": target.namespace, "labels": labels, "annotations": annotations},
    });
    Step::Create {
        object,
        note: created_note(target, suggestion),
    }
}

fn created_note(target: &For, suggestion: &Suggestion) -> String {
    let from = match (suggestion.template, suggestion.labels.is_empty()) {
        (true, true) => format!(" from the bundle's {CSV_SUGGESTED_NAMESPACE_TEMPLATE}"),
        (true, false) => {
            let labels: Vec<String> = suggestion
                .labels
                .iter()
                .map(|(k, v)| format!("{k}={v}"))
                .collect();
            format!(
                " from the bundle's {CSV_SUGGESTED_NAMESPACE_TEMPLATE} (labels {})",
                labels.join(", ")
            )
        }
        (false, _) => String::new(),
    };
    let differs = match &suggestion.name {
        Some(name) if name != target.namespace => format!(
            "; the bundle suggests namespace {name:?}, spec.namespace {:?} is used",
            target.namespace
        ),
        _ => String::new(),
    };
    format!(
        "created namespace {:?} for ClusterExtension {:?}{from}{differs}",
        target.namespace, target.extension
    )
}

/// Whether the namespace with these labels and annotations was created by olmv1 for
/// the extension `target` describes.
pub fn created_for(
    target: &For,
    labels: &BTreeMap<String, String>,
    annotations: &BTreeMap<String, String>,
) -> bool {
    labels.get(LABEL_CREATED_BY).map(String::as_str) == Some(target.extension)
        && annotations
            .get(ANNOTATION_CREATED_FOR)
            .is_none_or(|uid| uid == target.uid)
}

/// One object found in the namespace at uninstall.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Resident {
    pub group: String,
    pub kind: String,
    pub name: String,
    /// Its ownerReferences: (kind, name).
    pub owners: Vec<(String, String)>,
    /// The value of the owner-name label (objects olmv1 applied for an extension).
    pub owner_label: Option<String>,
    /// Being deleted already.
    pub deleting: bool,
}

/// What every namespace holds without anyone putting it there: the root CA ConfigMaps
/// (Kubernetes, OpenShift), the `default` ServiceAccount (OpenShift also `builder`,
/// `deployer` and their RoleBindings), and Events.
fn is_default(r: &Resident) -> bool {
    match (r.group.as_str(), r.kind.as_str()) {
        (_, "Event") => true,
        ("", "ConfigMap") => matches!(
            r.name.as_str(),
            "kube-root-ca.crt" | "openshift-service-ca.crt"
        ),
        ("", "ServiceAccount") => matches!(r.name.as_str(), "default" | "builder" | "deployer"),
        ("rbac.authorization.k8s.io", "RoleBinding") => matches!(
            r.name.as_str(),
            "system:deployers" | "system:image-builders" | "system:image-pullers"
        ),
        _ => false,
    }
}

/// What still lives in the namespace after the uninstall deleted `deleted`, described
/// (`Kind/name`, sorted): not the defaults, not what is being deleted, not what olmv1
/// applied for `extension`, and not what garbage collection removes with those (the
/// ReplicaSets and Pods of a deleted Deployment: owners followed transitively).
pub fn lingering(residents: &[Resident], deleted: &[ObjectRef], extension: &str) -> Vec<String> {
    let mut gone: BTreeSet<(String, String)> = deleted
        .iter()
        .map(|r| (r.kind.clone(), r.name.clone()))
        .collect();
    let mut left: Vec<&Resident> = Vec::new();
    for r in residents {
        if is_default(r) || r.deleting || r.owner_label.as_deref() == Some(extension) {
            gone.insert((r.kind.clone(), r.name.clone()));
        } else {
            left.push(r);
        }
    }
    loop {
        let (going, staying): (Vec<&Resident>, Vec<&Resident>) = left
            .into_iter()
            .partition(|r| !r.owners.is_empty() && r.owners.iter().all(|o| gone.contains(o)));
        if going.is_empty() {
            left = staying;
            break;
        }
        gone.extend(going.iter().map(|r| (r.kind.clone(), r.name.clone())));
        left = staying;
    }
    let mut described: Vec<String> = left
        .iter()
        .map(|r| format!("{}/{}", r.kind, r.name))
        .collect();
    described.sort();
    described
}

/// What to do about the namespace at uninstall.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Removal {
    /// Not created by olmv1 for this extension (or gone): left alone, silently.
    NotOurs,
    /// Created for it and empty: delete it.
    Delete,
    /// Created for it but kept: the Event's message.
    Keep(String),
}

/// Whether `target.namespace` goes with the extension: `created` says whether olmv1
/// created it for the extension ([`created_for`]); `lingering` what still lives there
/// ([`lingering`]), or why that could not be found out.
pub fn removal(target: &For, created: bool, lingering: &Result<Vec<String>, String>) -> Removal {
    if !created {
        return Removal::NotOurs;
    }
    let ns = target.namespace;
    match lingering {
        Ok(left) if left.is_empty() => Removal::Delete,
        Ok(left) => {
            const SHOWN: usize = 10;
            let more = left.len().saturating_sub(SHOWN);
            let mut shown = left
                .iter()
                .take(SHOWN)
                .cloned()
                .collect::<Vec<_>>()
                .join(", ");
            if more > 0 {
                shown.push_str(&format!(" and {more} more"));
            }
            Removal::Keep(format!(
                "namespace {ns:?} was created for ClusterExtension {:?} but is kept: other objects live there: {shown}",
                target.extension
            ))
        }
        Err(why) => Removal::Keep(format!(
            "namespace {ns:?} was created for ClusterExtension {:?} but is kept: cannot tell whether anything else lives there: {why}",
            target.extension
        )),
    }
}

#[cfg(test)]
#[path = "tests.rs"]
mod tests;
