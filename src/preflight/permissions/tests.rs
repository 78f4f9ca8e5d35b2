use super::rbac::{BundledRbac, added_rules, installer_rbac, rules_from_permissions};
use super::*;
use pretty_assertions::assert_eq;
use serde_json::json;

fn bundle() -> Vec<Value> {
    vec![
        json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": "widgets.example.com"},
            "spec": {"group": "example.com", "scope": "Namespaced",
                "names": {"kind": "Widget", "plural": "widgets"}}}),
        json!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "op", "namespace": "ns"}}),
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
            "metadata": {"name": "op-role"},
            "rules": [{"apiGroups": ["example.com"], "resources": ["widgets", "widgets/status"], "verbs": ["get", "list"]},
                      {"nonResourceURLs": ["/metrics"], "verbs": ["get"]}]}),
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
            "metadata": {"name": "op-binding"},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "op-role"},
            "subjects": [{"kind": "ServiceAccount", "name": "op", "namespace": "ns"}]}),
        json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "op", "namespace": "ns"}}),
        json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cfg", "namespace": "ns"}}),
        json!({"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w", "namespace": "ns"}}),
    ]
}

fn reqs(objects: &[Value]) -> Requirements {
    let infos = describe(objects, &ResourceMap::offline(objects)).unwrap();
    requirements(objects, &infos, "ext")
}

#[test]
fn plural_guesses() {
    assert_eq!(guess_plural("Widget"), "widgets");
    assert_eq!(guess_plural("NetworkPolicy"), "networkpolicies");
    assert_eq!(guess_plural("Gateway"), "gateways");
    assert_eq!(guess_plural("Ingress"), "ingresses");
    assert_eq!(guess_plural("Mesh"), "meshes");
}

#[test]
fn objects_are_described_with_scope_from_builtins_and_crds() {
    let objects = bundle();
    let infos = describe(&objects, &ResourceMap::offline(&objects)).unwrap();
    let short: Vec<(&str, &str, &str, &str)> = infos
        .iter()
        .map(|i| {
            (
                i.group.as_str(),
                i.resource.as_str(),
                i.namespace.as_str(),
                i.name.as_str(),
            )
        })
        .collect();
    assert_eq!(
        short,
        vec![
            (
                "apiextensions.k8s.io",
                "customresourcedefinitions",
                "",
                "widgets.example.com"
            ),
            ("", "serviceaccounts", "ns", "op"),
            ("rbac.authorization.k8s.io", "clusterroles", "", "op-role"),
            (
                "rbac.authorization.k8s.io",
                "clusterrolebindings",
                "",
                "op-binding"
            ),
            ("apps", "deployments", "ns", "op"),
            ("", "configmaps", "ns", "cfg"),
            ("example.com", "widgets", "ns", "w"),
        ]
    );
    // a cluster-scoped kind ignores a stray namespace
    let ns = vec![
        json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "x", "namespace": "y"}}),
    ];
    assert_eq!(
        describe(&ns, &ResourceMap::offline(&ns)).unwrap()[0].namespace,
        ""
    );
}

#[test]
fn describing_rejects_objects_without_identity() {
    let bad = vec![json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {}})];
    assert_eq!(
        describe(&bad, &ResourceMap::default()).unwrap_err(),
        PermissionError::MissingField {
            index: 0,
            field: "metadata.name"
        }
    );
    let bad = vec![json!({"apiVersion": "a/b/c", "kind": "X", "metadata": {"name": "n"}})];
    assert!(matches!(
        describe(&bad, &ResourceMap::default()).unwrap_err(),
        PermissionError::BadApiVersion { .. }
    ));
}

#[test]
fn requirements_cover_every_object_and_the_finalizer() {
    let r = reqs(&bundle());
    // 7 objects × 4 named verbs + 6 distinct (ns, resource) × 3 resource verbs + finalizer
    assert_eq!(r.required.len(), 7 * 4 + 7 * 3 + 1);
    assert!(r.required.contains(&Permission::resource(
        "",
        OLM_GROUP,
        "clusterextensions/finalizers",
        "ext",
        "update"
    )));
    assert!(r.required.contains(&Permission::resource(
        "ns",
        "apps",
        "deployments",
        "op",
        "patch"
    )));
    assert!(r.required.contains(&Permission::resource(
        "ns",
        "apps",
        "deployments",
        "",
        "create"
    )));
    assert!(!r.required.contains(&Permission::resource(
        "ns",
        "apps",
        "deployments",
        "",
        "get"
    )));
    assert_eq!(r.roles.len(), 1);
    let role = &r.roles[0];
    assert_eq!(role.grants.len(), 5); // widgets, widgets/status × get, list + /metrics get
    assert!(role.grants.contains(&Permission::NonResource {
        path: "/metrics".into(),
        verb: "get".into()
    }));
    assert_eq!(
        role.bind_escalate[1],
        Permission::resource(
            "",
            "rbac.authorization.k8s.io",
            "clusterroles",
            "op-role",
            "escalate"
        )
    );
}

#[test]
fn missing_uses_either_grants_or_bind_escalate() {
    let r = reqs(&bundle());
    let role = r.roles[0].clone();
    let holds_everything = r.missing(|_| true);
    assert!(holds_everything.is_empty());
    // holds every required permission and bind+escalate, but none of the grants
    let m = r.missing(|p| !role.grants.contains(p));
    assert!(m.is_empty(), "{m:?}");
    // no escalate: the grants it does not hold are missing
    let m = r.missing(|p| !role.grants.contains(p) && p != &role.bind_escalate[1]);
    assert_eq!(m, role.grants);
    // only one required permission missing
    let one = Permission::resource("ns", "", "configmaps", "", "create");
    let m = r.missing(|p| p != &one);
    assert_eq!(m.into_iter().collect::<Vec<_>>(), vec![one]);
}

#[test]
fn message_in_upstream_format_grouped_and_sorted() {
    let missing: BTreeSet<Permission> = [
        Permission::resource(
            "argocd",
            "apps",
            "deployments",
            "argocd-operator-controller-manager",
            "update",
        ),
        Permission::resource(
            "",
            "apiextensions.k8s.io",
            "customresourcedefinitions",
            "",
            "create",
        ),
        Permission::resource(
            "argocd",
            "apps",
            "deployments",
            "argocd-operator-controller-manager",
            "get",
        ),
        Permission::resource(
            "argocd",
            "apps",
            "deployments",
            "argocd-operator-controller-manager",
            "patch",
        ),
        Permission::NonResource {
            path: "/metrics".into(),
            verb: "get".into(),
        },
    ]
    .into_iter()
    .collect();
    assert_eq!(
        missing_message(&missing).unwrap(),
        "pre-authorization failed: service account requires the following permissions to manage cluster extension:\n  \
         Namespace:\"\" APIGroups:[apiextensions.k8s.io] Resources:[customresourcedefinitions] ResourceNames:[] Verbs:[create]\n  \
         Namespace:\"\" NonResourceURLs:[/metrics] Verbs:[get]\n  \
         Namespace:\"argocd\" APIGroups:[apps] Resources:[deployments] ResourceNames:[argocd-operator-controller-manager] Verbs:[get,patch,update]"
    );
    assert_eq!(missing_message(&BTreeSet::new()), None);
}

#[test]
fn generated_role_has_the_seed_shape() {
    let rbac = installer_rbac(&bundle(), "inst", "ext", BundledRbac::Include).unwrap();
    assert_eq!(
        rbac.service_account["metadata"],
        json!({"name": "ext-installer", "namespace": "inst"})
    );
    assert_eq!(
        rbac.cluster_role["metadata"]["name"],
        "ext-installer-clusterrole"
    );
    assert_eq!(rbac.binding["roleRef"]["name"], "ext-installer-clusterrole");
    assert_eq!(
        rbac.binding["subjects"],
        json!([{"kind": "ServiceAccount", "name": "ext-installer", "namespace": "inst"}])
    );
    let rules = rbac.cluster_role["rules"].as_array().unwrap();
    assert_eq!(
        rules[0],
        json!({"apiGroups": ["olm.operatorframework.io"], "resources": ["clusterextensions/finalizers"],
               "verbs": ["update"], "resourceNames": ["ext"]})
    );
    let find = |group: &str, resource: &str| -> Vec<&Value> {
        rules
            .iter()
            .filter(|r| r["apiGroups"] == json!([group]) && r["resources"] == json!([resource]))
            .collect()
    };
    assert_eq!(
        find("apps", "deployments"),
        vec![
            &json!({"apiGroups": ["apps"], "resources": ["deployments"], "verbs": ["create", "list", "watch"]}),
            &json!({"apiGroups": ["apps"], "resources": ["deployments"], "verbs": ["get", "update", "patch", "delete"], "resourceNames": ["op"]}),
        ]
    );
    // bundled ClusterRole: its grants included; list/get on widgets unscoped covers the named get
    let widgets = find("example.com", "widgets");
    assert_eq!(
        widgets[0]["verbs"],
        json!(["create", "list", "watch", "get"])
    );
    assert_eq!(widgets[1]["verbs"], json!(["update", "patch", "delete"]));
    assert_eq!(widgets[1]["resourceNames"], json!(["w"]));
    assert_eq!(
        find("example.com", "widgets/status")[0]["verbs"],
        json!(["list", "get"])
    );
    assert!(
        rules
            .iter()
            .any(|r| r == &json!({"nonResourceURLs": ["/metrics"], "verbs": ["get"]}))
    );
    // `bind` on the bundled role by name (the API server's fast path for its binding),
    // never `escalate`
    let role_rules = find("rbac.authorization.k8s.io", "clusterroles");
    assert!(
        role_rules
            .iter()
            .any(|r| r["resourceNames"] == json!(["op-role"])
                && r["verbs"].as_array().unwrap().contains(&json!("bind"))),
        "{role_rules:?}"
    );
    assert!(
        !rules
            .iter()
            .any(|r| r["verbs"].as_array().unwrap().contains(&json!("escalate")))
    );
}

#[test]
fn generated_role_satisfies_the_preflight() {
    // Evaluate the preflight requirements against a local RBAC evaluator over the rules.
    let objects = bundle();
    let rbac = installer_rbac(&objects, "inst", "ext", BundledRbac::Include).unwrap();
    let granted = rule_permissions(rbac.cluster_role.get("rules"), "");
    let allowed = |p: &Permission| match p {
        Permission::Resource {
            group,
            resource,
            name,
            verb,
            ..
        } => {
            granted.contains(&Permission::resource("", group, resource, name, verb))
                || granted.contains(&Permission::resource("", group, resource, "", verb))
        }
        other => granted.contains(other),
    };
    assert!(reqs(&objects).missing(allowed).is_empty());
    // and bind+escalate mode too
    let rbac = installer_rbac(&objects, "inst", "ext", BundledRbac::BindEscalate).unwrap();
    let granted2 = rule_permissions(rbac.cluster_role.get("rules"), "");
    assert!(granted2.contains(&Permission::resource(
        "",
        RBAC_GROUP,
        "clusterroles",
        "op-role",
        "escalate"
    )));
    assert!(
        !granted2
            .iter()
            .any(|p| matches!(p, Permission::NonResource { .. }))
    );
}

#[test]
fn bindings_to_roles_outside_the_bundle_need_bind() {
    let objects = vec![
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
        "metadata": {"name": "b", "namespace": "ns"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "view"}}),
    ];
    let rbac = installer_rbac(&objects, "inst", "ext", BundledRbac::Include).unwrap();
    let rules = rbac.cluster_role["rules"].as_array().unwrap();
    assert!(
        rules.contains(
            &json!({"apiGroups": ["rbac.authorization.k8s.io"], "resources": ["clusterroles"],
        "verbs": ["bind"], "resourceNames": ["view"]})
        ),
        "{rules:#?}"
    );
}

#[test]
fn upgrade_diff_lists_only_added_rules() {
    let old = bundle();
    let mut new = bundle();
    new.push(json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "svc", "namespace": "ns"}}));
    new.push(json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cfg2", "namespace": "ns"}}));
    let added = added_rules(&old, &new, "ext", BundledRbac::Include).unwrap();
    assert_eq!(
        added,
        vec![
            json!({"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get", "update", "patch", "delete"], "resourceNames": ["cfg2"]}),
            json!({"apiGroups": [""], "resources": ["services"], "verbs": ["create", "list", "watch"]}),
            json!({"apiGroups": [""], "resources": ["services"], "verbs": ["get", "update", "patch", "delete"], "resourceNames": ["svc"]}),
        ]
    );
    assert!(
        added_rules(&old, &old, "ext", BundledRbac::Include)
            .unwrap()
            .is_empty()
    );
}

#[test]
fn rules_group_names_with_the_same_verbs() {
    let perms: BTreeSet<Permission> = ["a", "b"]
        .iter()
        .flat_map(|n| ["get", "delete"].map(|v| Permission::resource("x", "", "secrets", n, v)))
        .chain([Permission::resource("", "", "secrets", "c", "get")])
        .collect();
    assert_eq!(
        rules_from_permissions(&perms),
        vec![
            json!({"apiGroups": [""], "resources": ["secrets"], "verbs": ["get"], "resourceNames": ["c"]}),
            json!({"apiGroups": [""], "resources": ["secrets"], "verbs": ["get", "delete"], "resourceNames": ["a", "b"]}),
        ]
    );
}

#[test]
fn rbac_yaml_parses_back() {
    let text = installer_rbac(&bundle(), "inst", "ext", BundledRbac::Include)
        .unwrap()
        .to_yaml()
        .unwrap();
    let docs: Vec<Value> = serde_saphyr::from_multiple(&text).unwrap();
    assert_eq!(docs.len(), 3);
    assert_eq!(docs[1]["kind"], "ClusterRole");
    assert_eq!(docs[1]["rules"][0]["resourceNames"], json!(["ext"]));
}

proptest::proptest! {
    /// The generated role always satisfies the preflight for arbitrary object sets.
    #[test]
    fn generated_role_always_suffices(names in proptest::collection::vec("[a-z]{1,5}", 1..12), kinds in proptest::collection::vec(0usize..5, 12)) {
        let table = [("v1", "ConfigMap", true), ("v1", "Namespace", false), ("apps/v1", "Deployment", true),
            ("rbac.authorization.k8s.io/v1", "ClusterRole", false), ("example.com/v1", "Gadget", true)];
        let objects: Vec<Value> = names.iter().zip(&kinds).map(|(n, k)| {
            let (api, kind, namespaced) = table[*k];
            let mut o = json!({"apiVersion": api, "kind": kind, "metadata": {"name": n}});
            if namespaced { o["metadata"]["namespace"] = json!("ns"); }
            if kind == "ClusterRole" { o["rules"] = json!([{"apiGroups": [""], "resources": ["pods"], "verbs": ["get"], "resourceNames": [n]}]); }
            o
        }).collect();
        let rbac = installer_rbac(&objects, "inst", "e", BundledRbac::Include).unwrap();
        let granted = rule_permissions(rbac.cluster_role.get("rules"), "");
        let allowed = |p: &Permission| match p {
            Permission::Resource { group, resource, name, verb, .. } =>
                granted.contains(&Permission::resource("", group, resource, name, verb))
                || granted.contains(&Permission::resource("", group, resource, "", verb)),
            other => granted.contains(other),
        };
        let infos = describe(&objects, &ResourceMap::offline(&objects)).unwrap();
        proptest::prop_assert!(requirements(&objects, &infos, "e").missing(allowed).is_empty());
    }
}

#[test]
fn deletions_and_unknown_kinds() {
    let objects = bundle();
    let mut map = ResourceMap::offline(&objects);
    let extra =
        vec![json!({"apiVersion": "other.io/v2", "kind": "Gizmo", "metadata": {"name": "g"}})];
    assert_eq!(map.unknown_kinds(&objects), vec![]);
    assert_eq!(
        map.unknown_kinds(&extra),
        vec![("other.io".to_owned(), "v2".to_owned(), "Gizmo".to_owned())]
    );
    map.insert("other.io", "Gizmo", "gizmoes", false);
    let infos = describe(&extra, &map).unwrap();
    assert_eq!(infos[0].resource, "gizmoes");
    let mut req = Requirements::default();
    add_deletions(&mut req, &infos);
    let lines = missing_lines(&req.required);
    assert_eq!(
        lines,
        vec![
            "Namespace:\"\" APIGroups:[other.io] Resources:[gizmoes] ResourceNames:[g] Verbs:[delete,get]"
        ]
    );
}
