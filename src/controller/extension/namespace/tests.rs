use super::*;

const TARGET: For<'static> = For {
    namespace: "argocd",
    extension: "argocd-ext",
    uid: "uid-1",
};

fn annotations(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

fn csv(annotations: Value) -> Value {
    json!({"kind": "ClusterServiceVersion", "metadata": {"name": "x.v1", "annotations": annotations}})
}

const POD_SECURITY_TEMPLATE: &str = r#"{"apiVersion":"v1","kind":"Namespace","metadata":{"name":"openshift-gitops-operator","labels":{"pod-security.kubernetes.io/enforce":"privileged","openshift.io/cluster-monitoring":"true"},"annotations":{"openshift.io/node-selector":""}}}"#;

#[test]
fn the_annotation_opts_in_and_out_over_the_flag() {
    let on = annotations(&[(ANNOTATION_CREATE_NAMESPACE, "true")]);
    let off = annotations(&[(ANNOTATION_CREATE_NAMESPACE, "false")]);
    let other = annotations(&[(ANNOTATION_CREATE_NAMESPACE, "yes")]);
    assert!(opted_in(&on, false));
    assert!(!opted_in(&off, true));
    assert!(opted_in(&BTreeMap::new(), true));
    assert!(!opted_in(&BTreeMap::new(), false));
    assert!(!opted_in(&other, false));
}

#[test]
fn without_opt_in_a_missing_namespace_keeps_upstreams_message() {
    assert_eq!(
        missing("argocd", false, "olmv1-system"),
        vec!["namespace \"argocd\" not found".to_string()]
    );
    assert!(missing("argocd", true, "olmv1-system").is_empty());
    let inside = missing("argocd", true, "argocd");
    assert_eq!(inside[0], "namespace \"argocd\" not found");
    assert!(inside[1].contains("installer ServiceAccount would live in it"));
}

#[test]
fn the_template_wins_over_the_plain_suggestion() {
    let s = suggestion(&csv(json!({
        CSV_SUGGESTED_NAMESPACE: "plain",
        CSV_SUGGESTED_NAMESPACE_TEMPLATE: POD_SECURITY_TEMPLATE,
    })));
    assert!(s.template);
    assert_eq!(s.name.as_deref(), Some("openshift-gitops-operator"));
    assert_eq!(
        s.labels
            .get("pod-security.kubernetes.io/enforce")
            .map(String::as_str),
        Some("privileged")
    );
    assert_eq!(
        s.annotations
            .get("openshift.io/node-selector")
            .map(String::as_str),
        Some("")
    );
    let plain = suggestion(&csv(json!({CSV_SUGGESTED_NAMESPACE: "plain"})));
    assert_eq!(
        plain,
        Suggestion {
            name: Some("plain".into()),
            ..Suggestion::default()
        }
    );
    assert_eq!(suggestion(&csv(json!({}))), Suggestion::default());
    assert_eq!(suggestion(&json!({})), Suggestion::default());
}

#[test]
fn a_template_that_is_no_namespace_is_refused_with_the_reason() {
    for (text, why) in [
        ("not json", "expected"),
        ("[1]", "not a JSON object"),
        (r#"{"kind":"ConfigMap"}"#, "kind is \"ConfigMap\""),
        (
            r#"{"metadata":{"labels":{"a":1}}}"#,
            "metadata.labels.a is not a string",
        ),
        (
            r#"{"metadata":{"annotations":"x"}}"#,
            "metadata.annotations is not a map",
        ),
    ] {
        let s = suggestion(&csv(json!({CSV_SUGGESTED_NAMESPACE_TEMPLATE: text})));
        let invalid = s.invalid.clone().unwrap_or_default();
        assert!(invalid.contains(why), "{text}: {invalid}");
        let Step::Refuse(message) = decide(&TARGET, false, true, &s) else {
            panic!("{text}: not refused");
        };
        assert!(message.starts_with("namespace \"argocd\" not created: the bundle's operatorframework.io/suggested-namespace-template annotation is not a Namespace object: "), "{message}");
    }
    // A template without kind is taken as a Namespace (the console does not check).
    let s = suggestion(&csv(
        json!({CSV_SUGGESTED_NAMESPACE_TEMPLATE: r#"{"metadata":{"labels":{"a":"b"}}}"#}),
    ));
    assert_eq!(s.invalid, None);
}

#[test]
fn an_existing_namespace_or_no_opt_in_is_left_alone() {
    let s = suggestion(&csv(
        json!({CSV_SUGGESTED_NAMESPACE_TEMPLATE: POD_SECURITY_TEMPLATE}),
    ));
    assert_eq!(decide(&TARGET, true, true, &s), Step::Nothing);
    assert_eq!(decide(&TARGET, false, false, &s), Step::Nothing);
    let bad = Suggestion {
        invalid: Some("x".into()),
        ..Suggestion::default()
    };
    assert_eq!(decide(&TARGET, true, true, &bad), Step::Nothing);
}

#[test]
fn created_namespace_is_spec_namespace_with_template_labels_and_the_mark() {
    let s = suggestion(&csv(
        json!({CSV_SUGGESTED_NAMESPACE_TEMPLATE: POD_SECURITY_TEMPLATE}),
    ));
    let Step::Create { object, note } = decide(&TARGET, false, true, &s) else {
        panic!("not created");
    };
    assert_eq!(
        object,
        json!({
            "apiVersion": "v1", "kind": "Namespace",
            "metadata": {
                "name": "argocd",
                "labels": {
                    "pod-security.kubernetes.io/enforce": "privileged",
                    "openshift.io/cluster-monitoring": "true",
                    LABEL_CREATED_BY: "argocd-ext",
                },
                "annotations": {"openshift.io/node-selector": "", ANNOTATION_CREATED_FOR: "uid-1"},
            },
        })
    );
    assert_eq!(
        note,
        "created namespace \"argocd\" for ClusterExtension \"argocd-ext\" from the bundle's operatorframework.io/suggested-namespace-template (labels openshift.io/cluster-monitoring=true, pod-security.kubernetes.io/enforce=privileged); the bundle suggests namespace \"openshift-gitops-operator\", spec.namespace \"argocd\" is used"
    );
}

#[test]
fn the_template_cannot_forge_the_mark() {
    let template = json!({"metadata": {"labels": {LABEL_CREATED_BY: "someone"}, "annotations": {ANNOTATION_CREATED_FOR: "u"}}});
    let s = suggestion(&csv(
        json!({CSV_SUGGESTED_NAMESPACE_TEMPLATE: template.to_string()}),
    ));
    let Step::Create { object, .. } = decide(&TARGET, false, true, &s) else {
        panic!("not created");
    };
    assert_eq!(object["metadata"]["labels"][LABEL_CREATED_BY], "argocd-ext");
    assert_eq!(
        object["metadata"]["annotations"][ANNOTATION_CREATED_FOR],
        "uid-1"
    );
}

#[test]
fn without_suggestion_a_plain_marked_namespace_is_created() {
    let same = Suggestion {
        name: Some("argocd".into()),
        ..Suggestion::default()
    };
    for s in [Suggestion::default(), same] {
        let Step::Create { object, note } = decide(&TARGET, false, true, &s) else {
            panic!("not created");
        };
        assert_eq!(
            object["metadata"]["labels"],
            json!({LABEL_CREATED_BY: "argocd-ext"})
        );
        assert_eq!(
            note,
            "created namespace \"argocd\" for ClusterExtension \"argocd-ext\""
        );
    }
}

#[test]
fn only_the_namespace_created_for_this_extension_is_ours() {
    let labels = annotations(&[(LABEL_CREATED_BY, "argocd-ext")]);
    let uid = annotations(&[(ANNOTATION_CREATED_FOR, "uid-1")]);
    let other_uid = annotations(&[(ANNOTATION_CREATED_FOR, "uid-0")]);
    assert!(created_for(&TARGET, &labels, &uid));
    assert!(created_for(&TARGET, &labels, &BTreeMap::new()));
    assert!(!created_for(&TARGET, &labels, &other_uid));
    assert!(!created_for(&TARGET, &BTreeMap::new(), &uid));
    let other = annotations(&[(LABEL_CREATED_BY, "another")]);
    assert!(!created_for(&TARGET, &other, &uid));
}

fn resident(kind: &str, name: &str, owners: &[(&str, &str)]) -> Resident {
    Resident {
        group: match kind {
            "Deployment" | "ReplicaSet" => "apps".into(),
            "RoleBinding" => "rbac.authorization.k8s.io".into(),
            _ => String::new(),
        },
        kind: kind.into(),
        name: name.into(),
        owners: owners
            .iter()
            .map(|(k, n)| (k.to_string(), n.to_string()))
            .collect(),
        ..Resident::default()
    }
}

fn deleted(kind: &str, name: &str) -> ObjectRef {
    ObjectRef {
        group: String::new(),
        version: "v1".into(),
        kind: kind.into(),
        namespace: "argocd".into(),
        name: name.into(),
    }
}

#[test]
fn defaults_and_garbage_of_the_deleted_objects_do_not_count() {
    let residents = vec![
        resident("ConfigMap", "kube-root-ca.crt", &[]),
        resident("ServiceAccount", "default", &[]),
        resident("Event", "x.123", &[]),
        resident("RoleBinding", "system:image-pullers", &[]),
        // Garbage collection of the deleted Deployment is under way.
        resident("ReplicaSet", "op-7d9", &[("Deployment", "op")]),
        resident("Pod", "op-7d9-abc", &[("ReplicaSet", "op-7d9")]),
        Resident {
            deleting: true,
            ..resident("Secret", "going", &[])
        },
        Resident {
            owner_label: Some("argocd-ext".into()),
            ..resident("Secret", "ours", &[])
        },
    ];
    assert!(lingering(&residents, &[deleted("Deployment", "op")], "argocd-ext").is_empty());
}

#[test]
fn anything_else_lingers_sorted() {
    let residents = vec![
        resident("ConfigMap", "user-config", &[]),
        resident("Pod", "debug", &[]),
        // Owned by something that is not going away.
        resident("Pod", "job-x", &[("Job", "backup")]),
        // Another extension's object.
        Resident {
            owner_label: Some("other".into()),
            ..resident("Secret", "theirs", &[])
        },
        resident("ConfigMap", "kube-root-ca.crt", &[]),
        resident("ServiceAccount", "robot", &[]),
    ];
    assert_eq!(
        lingering(&residents, &[deleted("Deployment", "op")], "argocd-ext"),
        vec![
            "ConfigMap/user-config",
            "Pod/debug",
            "Pod/job-x",
            "Secret/theirs",
            "ServiceAccount/robot"
        ]
    );
}

#[test]
fn removal_deletes_only_our_empty_namespace_and_says_why_it_keeps_it() {
    assert_eq!(removal(&TARGET, true, &Ok(Vec::new())), Removal::Delete);
    assert_eq!(removal(&TARGET, false, &Ok(Vec::new())), Removal::NotOurs);
    assert_eq!(removal(&TARGET, false, &Err("x".into())), Removal::NotOurs);
    assert_eq!(
        removal(&TARGET, true, &Ok(vec!["Pod/debug".into()])),
        Removal::Keep("namespace \"argocd\" was created for ClusterExtension \"argocd-ext\" but is kept: other objects live there: Pod/debug".into())
    );
    let many: Vec<String> = (0..12).map(|i| format!("Pod/p{i:02}")).collect();
    let Removal::Keep(message) = removal(&TARGET, true, &Ok(many)) else {
        panic!("not kept");
    };
    assert!(message.ends_with("Pod/p09 and 2 more"), "{message}");
    assert_eq!(
        removal(&TARGET, true, &Err("listing secrets in namespace \"argocd\": forbidden".into())),
        Removal::Keep("namespace \"argocd\" was created for ClusterExtension \"argocd-ext\" but is kept: cannot tell whether anything else lives there: listing secrets in namespace \"argocd\": forbidden".into())
    );
}
