//! Ownership of applied objects (docs/concepts/rendering.md §5.6): the owner labels and the ownerReference
//! added before applying, and the decision whether an existing object may be managed.
//! Pure.

use super::types::ObjectRef;
use serde_json::{Map, Value, json};

pub const OWNER_KIND_LABEL: &str = "olm.operatorframework.io/owner-kind";
pub const OWNER_NAME_LABEL: &str = "olm.operatorframework.io/owner-name";
pub const OWNER_KIND: &str = "ClusterExtension";
pub const OWNER_API_VERSION: &str = "olm.operatorframework.io/v1";
/// Helm's annotation on every object of a release (upstream OLM v1 installs through Helm).
pub const HELM_RELEASE_NAME_ANNOTATION: &str = "meta.helm.sh/release-name";
/// The consent to a takeover (docs/how-to/switch-from-olm-v0.md, "The takeover"): an
/// object OLM v0 made carries it once `olmv1 migrate convert`, run by a party allowed to
/// write that object, handed it over ([`adoption_mark`]). The controller adopts an
/// existing object no ClusterExtension owns only when its value is exactly the mark of
/// the extension and its backup ([`unmanaged_adopted`]).
pub const ADOPTABLE_BY_ANNOTATION: &str = "olm.operatorframework.io/adoptable-by";

/// The value of [`ADOPTABLE_BY_ANNOTATION`] that hands an object over to
/// ClusterExtension `extension` for the migration whose backup ConfigMap has UID
/// `backup_uid`: `<extension>/<backup-uid>`. The UID is the API server's, so no other
/// ConfigMap (one a tenant wrote) can carry it, and a mark left after a rollback (whose
/// backup is deleted) matches no backup again.
pub fn adoption_mark(extension: &str, backup_uid: &str) -> String {
    format!("{extension}/{backup_uid}")
}

/// The ClusterExtension that owns what is applied.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Owner {
    pub name: String,
    pub uid: String,
}

impl Owner {
    pub fn new(name: impl Into<String>, uid: impl Into<String>) -> Self {
        Owner {
            name: name.into(),
            uid: uid.into(),
        }
    }

    /// The ownerReference to the ClusterExtension (controller, blockOwnerDeletion).
    pub fn owner_reference(&self) -> Value {
        self.reference(true)
    }

    /// The ownerReference, claiming control or not.
    fn reference(&self, controller: bool) -> Value {
        json!({
            "apiVersion": OWNER_API_VERSION,
            "kind": OWNER_KIND,
            "name": self.name,
            "uid": self.uid,
            "controller": controller,
            "blockOwnerDeletion": true,
        })
    }

    /// The label selector matching the objects of this extension.
    pub fn label_selector(&self) -> String {
        format!(
            "{OWNER_KIND_LABEL}={OWNER_KIND},{OWNER_NAME_LABEL}={}",
            self.name
        )
    }
}

/// A copy of `obj` with the owner labels and the ownerReference added. Other owner
/// references of the rendered object are kept; a ClusterExtension reference is replaced.
/// The reference claims control except on an OperatorCondition and its Role and
/// RoleBinding, where OLM v0, when it runs, holds it (the API server admits one
/// controller reference; garbage collection is the same either way).
pub fn with_ownership(obj: &Value, owner: &Owner) -> Value {
    let mut out = obj.clone();
    let Some(root) = out.as_object_mut() else {
        return out;
    };
    let meta = root
        .entry("metadata")
        .or_insert_with(|| Value::Object(Map::new()));
    if !meta.is_object() {
        *meta = Value::Object(Map::new());
    }
    let Some(meta) = meta.as_object_mut() else {
        return out;
    };
    let labels = meta
        .entry("labels")
        .or_insert_with(|| Value::Object(Map::new()));
    if !labels.is_object() {
        *labels = Value::Object(Map::new());
    }
    if let Some(labels) = labels.as_object_mut() {
        labels.insert(OWNER_KIND_LABEL.into(), OWNER_KIND.into());
        labels.insert(OWNER_NAME_LABEL.into(), owner.name.clone().into());
    }
    let mut refs: Vec<Value> = meta
        .get("ownerReferences")
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter(|r| {
                    !(r["kind"] == OWNER_KIND
                        && r["apiVersion"]
                            .as_str()
                            .is_some_and(|v| v.starts_with("olm.operatorframework.io/")))
                })
                .cloned()
                .collect()
        })
        .unwrap_or_default();
    let controller = !crate::bundle::operator_condition::shares_control(obj);
    refs.push(owner.reference(controller));
    meta.insert("ownerReferences".into(), Value::Array(refs));
    out
}

/// Who an existing object belongs to, from its labels.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Ownership {
    /// Labelled as owned by this extension.
    Ours,
    /// Labelled as owned by another ClusterExtension.
    OtherExtension(String),
    /// Not labelled as managed by any ClusterExtension.
    Unmanaged,
    /// Labelled as this extension's, but installed by upstream OLM v1's Helm release of
    /// that name, and not being adopted ([`helm_managed`]).
    HelmRelease(String),
    /// Not managed by any ClusterExtension, and not handed over to this one by the
    /// migration it is taking over ([`unmanaged_adopted`]): the mark it should carry.
    NotHandedOver(String),
}

/// Upstream OLM v1 labels its objects as olmv1 does; an object that also carries Helm's
/// release annotation was installed by upstream. Such an object is this extension's only
/// when its release is being adopted (docs/how-to/switch-from-upstream.md) or once it
/// is in olmv1's revision record; otherwise it is reported, not taken over.
pub fn helm_managed(
    ownership: Ownership,
    annotations: Option<&std::collections::BTreeMap<String, String>>,
) -> Ownership {
    match (
        ownership,
        annotations.and_then(|a| a.get(HELM_RELEASE_NAME_ANNOTATION)),
    ) {
        (Ownership::Ours, Some(release)) => Ownership::HelmRelease(release.clone()),
        (ownership, _) => ownership,
    }
}

/// Taking over an OLM v0 installation (docs/how-to/switch-from-olm-v0.md, "The
/// takeover"): an existing object no ClusterExtension owns, that Helm did not install,
/// and that carries exactly `mark` ([`ADOPTABLE_BY_ANNOTATION`], [`adoption_mark`])
/// becomes this extension's. Without that mark it is refused: its owner did not hand
/// it over, whatever the extension's annotations or backup claim. Every other
/// ownership stays as it is.
pub fn unmanaged_adopted(
    ownership: Ownership,
    annotations: Option<&std::collections::BTreeMap<String, String>>,
    mark: &str,
) -> Ownership {
    let helm = annotations.is_some_and(|a| a.contains_key(HELM_RELEASE_NAME_ANNOTATION));
    let marked = annotations
        .and_then(|a| a.get(ADOPTABLE_BY_ANNOTATION))
        .is_some_and(|m| m == mark);
    match ownership {
        Ownership::Unmanaged if !helm && marked => Ownership::Ours,
        Ownership::Unmanaged if !helm => Ownership::NotHandedOver(mark.to_string()),
        ownership => ownership,
    }
}

/// OLM v0's OperatorCondition controller, wherever it runs beside olmv1, gives every
/// OperatorCondition a Role and RoleBinding of the same name, owned by it (olm-v0
/// reference §1.3) — the very objects olmv1 renders for the OperatorCondition of the
/// CSV it installs (`bundle::operator_condition`, written exactly as OLM v0 writes
/// them). When that controller wins the race after olmv1 created the OperatorCondition
/// (seen on an upgrade after a takeover, e2e/migrate_v0.rs), the Role or RoleBinding
/// `r` exists unmanaged with an ownerReference to the OperatorCondition named like it:
/// it is this extension's.
pub fn operator_condition_rbac_adopted(
    ownership: Ownership,
    r: &ObjectRef,
    owner_references: &[k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference],
) -> Ownership {
    let rbac =
        r.group == "rbac.authorization.k8s.io" && matches!(r.kind.as_str(), "Role" | "RoleBinding");
    let of_condition = owner_references.iter().any(|o| {
        o.api_version.starts_with("operators.coreos.com/")
            && o.kind == "OperatorCondition"
            && o.name == r.name
    });
    match ownership {
        Ownership::Unmanaged if rbac && of_condition => Ownership::Ours,
        ownership => ownership,
    }
}

/// Whose the existing object `r` (its `meta`) is for extension `extension`: its owner
/// labels ([`classify`]); with `refuse_helm`, upstream's Helm objects reported
/// ([`helm_managed`]); OLM v0's OperatorCondition RBAC of the same name adopted
/// ([`operator_condition_rbac_adopted`]) — before the migration rule, since OLM v0 may
/// re-create it after a convert handed everything over; and with `adopt_mark`, what a
/// migration handed over adopted and nothing else ([`unmanaged_adopted`]).
pub fn existing_ownership(
    meta: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta,
    r: &ObjectRef,
    extension: &str,
    refuse_helm: bool,
    adopt_mark: Option<&str>,
) -> Ownership {
    let annotations = meta.annotations.as_ref();
    let mut ownership = classify(meta.labels.as_ref(), extension);
    if refuse_helm {
        ownership = helm_managed(ownership, annotations);
    }
    let owners = meta.owner_references.as_deref().unwrap_or_default();
    ownership = operator_condition_rbac_adopted(ownership, r, owners);
    if let Some(mark) = adopt_mark {
        ownership = unmanaged_adopted(ownership, annotations, mark);
    }
    ownership
}

/// Classifies an existing object's `metadata.labels` for extension `extension`.
pub fn classify(
    labels: Option<&std::collections::BTreeMap<String, String>>,
    extension: &str,
) -> Ownership {
    let get = |k: &str| labels.and_then(|l| l.get(k)).map(String::as_str);
    match (get(OWNER_KIND_LABEL), get(OWNER_NAME_LABEL)) {
        (Some(OWNER_KIND), Some(name)) if name == extension => Ownership::Ours,
        (Some(OWNER_KIND), Some(name)) => Ownership::OtherExtension(name.to_owned()),
        _ => Ownership::Unmanaged,
    }
}

/// An existing object the extension may not take over.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Conflict {
    pub object: ObjectRef,
    pub ownership: Ownership,
}

/// The takeover-refusal message: every conflicting object, sorted, with its owner.
pub fn conflict_message(conflicts: &[Conflict]) -> String {
    let mut lines: Vec<String> = conflicts
        .iter()
        .map(|c| match &c.ownership {
            Ownership::OtherExtension(other) => {
                format!("{} (owned by ClusterExtension {other:?})", c.object)
            }
            Ownership::HelmRelease(release) => format!(
                "{} (installed by upstream OLM v1, Helm release {release:?}, without a release olmv1 can adopt)",
                c.object
            ),
            Ownership::NotHandedOver(mark) => format!(
                "{} (not managed by a ClusterExtension, and not handed over to this one: it lacks the annotation {ADOPTABLE_BY_ANNOTATION}={mark} that `olmv1 migrate convert` writes on the objects it hands over)",
                c.object
            ),
            _ => format!("{} (not managed by a ClusterExtension)", c.object),
        })
        .collect();
    lines.sort();
    lines.dedup();
    format!(
        "refusing to take over {} existing object(s) not owned by this ClusterExtension: {}",
        lines.len(),
        lines.join(", ")
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    #[test]
    fn olm_v0s_operator_condition_rbac_of_the_same_name_is_adopted() {
        use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
        let role = |kind: &str, name: &str| ObjectRef {
            group: "rbac.authorization.k8s.io".into(),
            version: "v1".into(),
            kind: kind.into(),
            namespace: "ops".into(),
            name: name.into(),
        };
        let of = |kind: &str, name: &str| OwnerReference {
            api_version: "operators.coreos.com/v2".into(),
            kind: kind.into(),
            name: name.into(),
            uid: "u".into(),
            ..Default::default()
        };
        let refs = [of("OperatorCondition", "demo.v1.1.0")];
        for kind in ["Role", "RoleBinding"] {
            let r = role(kind, "demo.v1.1.0");
            assert_eq!(
                operator_condition_rbac_adopted(Ownership::Unmanaged, &r, &refs),
                Ownership::Ours
            );
            // another extension's stays another's
            let other = Ownership::OtherExtension("x".into());
            assert_eq!(
                operator_condition_rbac_adopted(other.clone(), &r, &refs),
                other
            );
        }
        // another name, another owner kind, another kind of object: not adopted
        let cases = [
            (
                role("Role", "demo.v1.0.0"),
                of("OperatorCondition", "demo.v1.1.0"),
            ),
            (
                role("Role", "demo.v1.1.0"),
                of("ClusterServiceVersion", "demo.v1.1.0"),
            ),
            (
                ObjectRef {
                    kind: "ConfigMap".into(),
                    group: String::new(),
                    ..role("Role", "demo.v1.1.0")
                },
                of("OperatorCondition", "demo.v1.1.0"),
            ),
        ];
        for (r, o) in cases {
            assert_eq!(
                operator_condition_rbac_adopted(Ownership::Unmanaged, &r, &[o]),
                Ownership::Unmanaged,
                "{r}"
            );
        }
        assert_eq!(
            operator_condition_rbac_adopted(
                Ownership::Unmanaged,
                &role("Role", "demo.v1.1.0"),
                &[]
            ),
            Ownership::Unmanaged
        );
    }

    #[test]
    fn only_unmanaged_objects_marked_for_this_extension_and_backup_are_adopted() {
        let mark = adoption_mark("ext", "uid-1");
        let annotated = |pairs: &[(&str, &str)]| -> BTreeMap<String, String> {
            pairs
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect()
        };
        let marked = annotated(&[(ADOPTABLE_BY_ANNOTATION, "ext/uid-1")]);
        assert_eq!(
            unmanaged_adopted(Ownership::Unmanaged, Some(&marked), &mark),
            Ownership::Ours
        );
        // No mark, another extension's, another backup's (a forged one, or one deleted
        // by a rollback): refused, naming the mark it lacks.
        let refused = Ownership::NotHandedOver(mark.clone());
        for other in [
            annotated(&[]),
            annotated(&[(ADOPTABLE_BY_ANNOTATION, "other/uid-1")]),
            annotated(&[(ADOPTABLE_BY_ANNOTATION, "ext/uid-2")]),
            annotated(&[(ADOPTABLE_BY_ANNOTATION, "ext")]),
        ] {
            assert_eq!(
                unmanaged_adopted(Ownership::Unmanaged, Some(&other), &mark),
                refused,
                "{other:?}"
            );
        }
        assert_eq!(
            unmanaged_adopted(Ownership::Unmanaged, None, &mark),
            refused
        );
        // Helm's objects and other owners' stay as they are, marked or not.
        let mut helm = marked.clone();
        helm.insert(HELM_RELEASE_NAME_ANNOTATION.to_string(), "r".to_string());
        assert_eq!(
            unmanaged_adopted(Ownership::Unmanaged, Some(&helm), &mark),
            Ownership::Unmanaged
        );
        assert_eq!(
            unmanaged_adopted(Ownership::OtherExtension("x".into()), Some(&marked), &mark),
            Ownership::OtherExtension("x".into())
        );
        assert_eq!(
            unmanaged_adopted(Ownership::HelmRelease("r".into()), Some(&helm), &mark),
            Ownership::HelmRelease("r".into())
        );
        let message = conflict_message(&[Conflict {
            object: ObjectRef {
                group: "apiextensions.k8s.io".into(),
                version: "v1".into(),
                kind: "CustomResourceDefinition".into(),
                namespace: String::new(),
                name: "widgets.example.com".into(),
            },
            ownership: refused,
        }]);
        assert!(
            message.contains(
                "(not managed by a ClusterExtension, and not handed over to this one: it lacks the annotation olm.operatorframework.io/adoptable-by=ext/uid-1"
            ),
            "{message}"
        );
    }

    #[test]
    fn a_migration_adopts_olm_v0s_operator_condition_rbac_without_a_mark() {
        use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
        let role = ObjectRef {
            group: "rbac.authorization.k8s.io".into(),
            version: "v1".into(),
            kind: "Role".into(),
            namespace: "ops".into(),
            name: "demo.v1.0.0".into(),
        };
        let of_condition = ObjectMeta {
            owner_references: Some(vec![OwnerReference {
                api_version: "operators.coreos.com/v2".into(),
                kind: "OperatorCondition".into(),
                name: "demo.v1.0.0".into(),
                uid: "u".into(),
                ..Default::default()
            }]),
            ..Default::default()
        };
        // Re-created by OLM v0 after the convert: no mark, still this extension's.
        assert_eq!(
            existing_ownership(&of_condition, &role, "ext", false, Some("ext/uid")),
            Ownership::Ours
        );
        // Anything else without the mark is refused during a migration, and left
        // unmanaged (refused as such) otherwise.
        let plain = ObjectMeta::default();
        assert_eq!(
            existing_ownership(&plain, &role, "ext", false, Some("ext/uid")),
            Ownership::NotHandedOver("ext/uid".into())
        );
        assert_eq!(
            existing_ownership(&plain, &role, "ext", false, None),
            Ownership::Unmanaged
        );
    }

    #[test]
    fn ownership_is_added_and_other_metadata_kept() {
        let obj = json!({
            "apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "c", "namespace": "n", "labels": {"app": "x"},
                "ownerReferences": [
                    {"apiVersion": "v1", "kind": "Foo", "name": "f", "uid": "1"},
                    {"apiVersion": "olm.operatorframework.io/v1", "kind": "ClusterExtension", "name": "old", "uid": "0"}
                ]},
            "data": {"a": "b"}
        });
        let owner = Owner::new("ext", "uid-1");
        let out = with_ownership(&obj, &owner);
        assert_eq!(out["metadata"]["labels"]["app"], "x");
        assert_eq!(
            out["metadata"]["labels"][OWNER_KIND_LABEL],
            "ClusterExtension"
        );
        assert_eq!(out["metadata"]["labels"][OWNER_NAME_LABEL], "ext");
        let refs = out["metadata"]["ownerReferences"].as_array().unwrap();
        assert_eq!(refs.len(), 2);
        assert_eq!(refs[0]["kind"], "Foo");
        assert_eq!(refs[1]["uid"], "uid-1");
        assert_eq!(refs[1]["controller"], true);
        assert_eq!(refs[1]["blockOwnerDeletion"], true);
        assert_eq!(out["data"], obj["data"]);
        // idempotent
        assert_eq!(with_ownership(&out, &owner), out);
    }

    #[test]
    fn metadata_is_created_when_missing() {
        let out = with_ownership(
            &json!({"kind": "X", "metadata": null}),
            &Owner::new("e", "u"),
        );
        assert_eq!(out["metadata"]["labels"][OWNER_NAME_LABEL], "e");
    }

    #[test]
    fn classification_by_labels() {
        let mut l = BTreeMap::new();
        assert_eq!(classify(None, "e"), Ownership::Unmanaged);
        assert_eq!(classify(Some(&l), "e"), Ownership::Unmanaged);
        l.insert(OWNER_NAME_LABEL.to_owned(), "e".to_owned());
        // name without kind is not ownership
        assert_eq!(classify(Some(&l), "e"), Ownership::Unmanaged);
        l.insert(OWNER_KIND_LABEL.to_owned(), "ClusterExtension".to_owned());
        assert_eq!(classify(Some(&l), "e"), Ownership::Ours);
        assert_eq!(
            classify(Some(&l), "f"),
            Ownership::OtherExtension("e".into())
        );
    }

    #[test]
    fn helm_objects_are_ours_only_when_adopted() {
        let mut a = BTreeMap::new();
        assert_eq!(helm_managed(Ownership::Ours, None), Ownership::Ours);
        assert_eq!(helm_managed(Ownership::Ours, Some(&a)), Ownership::Ours);
        a.insert(HELM_RELEASE_NAME_ANNOTATION.to_owned(), "e".to_owned());
        assert_eq!(
            helm_managed(Ownership::Ours, Some(&a)),
            Ownership::HelmRelease("e".into())
        );
        assert_eq!(
            helm_managed(Ownership::Unmanaged, Some(&a)),
            Ownership::Unmanaged
        );
    }

    #[test]
    fn conflict_message_lists_every_object_sorted() {
        let r = |kind: &str, ns: &str, name: &str| ObjectRef {
            group: String::new(),
            version: "v1".into(),
            kind: kind.into(),
            namespace: ns.into(),
            name: name.into(),
        };
        let msg = conflict_message(&[
            Conflict {
                object: r("Service", "ns", "b"),
                ownership: Ownership::Unmanaged,
            },
            Conflict {
                object: r("ConfigMap", "ns", "a"),
                ownership: Ownership::OtherExtension("other".into()),
            },
            Conflict {
                object: r("Namespace", "", "x"),
                ownership: Ownership::Unmanaged,
            },
        ]);
        assert_eq!(
            msg,
            "refusing to take over 3 existing object(s) not owned by this ClusterExtension: \
             ConfigMap/ns/a (owned by ClusterExtension \"other\"), Namespace/x (not managed by a ClusterExtension), \
             Service/ns/b (not managed by a ClusterExtension)"
        );
    }
}
