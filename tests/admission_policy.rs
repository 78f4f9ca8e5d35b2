//! The confused-deputy guard of `config/admission/installer_impersonation.yaml` on a
//! real kube-apiserver with RBAC: a ClusterExtension may name `spec.serviceAccount` only
//! if the requesting user may `impersonate` (or `use`) that ServiceAccount; on update
//! only a change of the account is checked; without an account nothing is checked;
//! cluster-admin passes. Users are the admin's impersonated identities, so each test
//! works with its own user names, namespaces and roles.

use crate::support;

use k8s_openapi::api::rbac::v1::{
    ClusterRole, ClusterRoleBinding, PolicyRule, Role, RoleBinding, RoleRef, Subject,
};
use kube::api::{Api, ApiResource, DynamicObject, ObjectMeta, Patch, PatchParams, PostParams};
use olmv1::api::ClusterExtension;
use olmv1::testenv::manifests;
use serde_json::{Value, json};
use std::path::Path;
use support::user_client;

const POLICY_FILE: &str = "config/admission/installer_impersonation.yaml";

fn ext_api(client: &kube::Client) -> Api<DynamicObject> {
    Api::all_with(client.clone(), &ApiResource::erase::<ClusterExtension>(&()))
}

/// Applies the shipped policy and its binding (idempotent: every test calls it).
async fn install_policy(admin: &kube::Client) {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join(POLICY_FILE);
    let text = std::fs::read_to_string(&path).expect("policy file");
    let objects = manifests::parse_objects(POLICY_FILE, &text).expect("policy parses");
    assert_eq!(objects.len(), 2, "a policy and its binding");
    manifests::apply_objects(admin, &objects)
        .await
        .expect("the API server accepts the policy and binding");
}

fn rule(verbs: &[&str], group: &str, resource: &str, names: &[&str]) -> PolicyRule {
    PolicyRule {
        verbs: verbs.iter().map(|v| v.to_string()).collect(),
        api_groups: Some(vec![group.to_string()]),
        resources: Some(vec![resource.to_string()]),
        resource_names: (!names.is_empty()).then(|| names.iter().map(|n| n.to_string()).collect()),
        ..Default::default()
    }
}

fn user(name: &str) -> Subject {
    Subject {
        kind: "User".into(),
        name: name.into(),
        api_group: Some("rbac.authorization.k8s.io".into()),
        ..Default::default()
    }
}

/// Lets `name` create, get, update and patch ClusterExtensions (nothing else).
async fn grant_extension_author(admin: &kube::Client, name: &str) {
    let role_name = support::unique("ext-author");
    let role = ClusterRole {
        metadata: ObjectMeta {
            name: Some(role_name.clone()),
            ..Default::default()
        },
        rules: Some(vec![rule(
            &["create", "get", "update", "patch"],
            "olm.operatorframework.io",
            "clusterextensions",
            &[],
        )]),
        ..Default::default()
    };
    let binding = ClusterRoleBinding {
        metadata: ObjectMeta {
            name: Some(role_name.clone()),
            ..Default::default()
        },
        role_ref: RoleRef {
            api_group: "rbac.authorization.k8s.io".into(),
            kind: "ClusterRole".into(),
            name: role_name,
        },
        subjects: Some(vec![user(name)]),
    };
    let pp = PostParams::default();
    Api::<ClusterRole>::all(admin.clone())
        .create(&pp, &role)
        .await
        .expect("cluster role");
    Api::<ClusterRoleBinding>::all(admin.clone())
        .create(&pp, &binding)
        .await
        .expect("cluster role binding");
}

/// Lets `name` perform `verb` on the ServiceAccount `account` in `namespace`.
async fn grant_on_account(admin: &kube::Client, name: &str, verb: &str, ns: &str, account: &str) {
    let role_name = support::unique(verb);
    let role = Role {
        metadata: ObjectMeta {
            name: Some(role_name.clone()),
            namespace: Some(ns.into()),
            ..Default::default()
        },
        rules: Some(vec![rule(&[verb], "", "serviceaccounts", &[account])]),
    };
    let binding = RoleBinding {
        metadata: ObjectMeta {
            name: Some(role_name.clone()),
            namespace: Some(ns.into()),
            ..Default::default()
        },
        role_ref: RoleRef {
            api_group: "rbac.authorization.k8s.io".into(),
            kind: "Role".into(),
            name: role_name,
        },
        subjects: Some(vec![user(name)]),
    };
    let pp = PostParams::default();
    Api::<Role>::namespaced(admin.clone(), ns)
        .create(&pp, &role)
        .await
        .expect("role");
    Api::<RoleBinding>::namespaced(admin.clone(), ns)
        .create(&pp, &binding)
        .await
        .expect("role binding");
}

fn extension(name: &str, namespace: &str, account: Option<&str>) -> DynamicObject {
    let mut spec = json!({
        "namespace": namespace,
        "source": {"sourceType": "Catalog", "catalog": {"packageName": "argocd-operator"}},
    });
    if let Some(account) = account {
        spec["serviceAccount"] = json!({"name": account});
    }
    serde_json::from_value(json!({
        "apiVersion": "olm.operatorframework.io/v1",
        "kind": "ClusterExtension",
        "metadata": {"name": name},
        "spec": spec,
    }))
    .expect("object")
}

async fn create(
    client: &kube::Client,
    obj: &DynamicObject,
    dry_run: bool,
) -> Result<DynamicObject, String> {
    let pp = PostParams {
        dry_run,
        ..Default::default()
    };
    ext_api(client)
        .create(&pp, obj)
        .await
        .map_err(|e| e.to_string())
}

async fn patch(client: &kube::Client, name: &str, patch: Value) -> Result<DynamicObject, String> {
    ext_api(client)
        .patch(name, &PatchParams::default(), &Patch::Merge(patch))
        .await
        .map_err(|e| e.to_string())
}

fn denial(user: &str, ns: &str, account: &str) -> String {
    format!(
        "user {user} may not impersonate serviceaccount {ns}/{account}; grant impersonate (or use) on serviceaccounts/{account} in namespace {ns}"
    )
}

/// Installs the policy, then waits until the API server enforces it (policies are
/// picked up asynchronously): `name`, allowed to author extensions but nothing else,
/// is refused an extension naming `ns/account`.
async fn policy_in_force(admin: &kube::Client, name: &str, ns: &str, account: &str) {
    install_policy(admin).await;
    let client = user_client(name).await;
    let obj = extension(&support::unique("probe"), ns, Some(account));
    let expected = denial(name, ns, account);
    support::eventually(60, "the admission policy to deny", || {
        let (client, obj, expected) = (&client, &obj, &expected);
        async move {
            match create(client, obj, true).await {
                Err(e) if e.contains(expected.as_str()) => Some(()),
                _ => None,
            }
        }
    })
    .await;
}

/// `create` retried for a while: RBAC grants reach the authorizer's cache asynchronously.
async fn eventually_created(client: &kube::Client, obj: &DynamicObject, dry_run: bool) {
    let mut last = String::new();
    for _ in 0..100 {
        match create(client, obj, dry_run).await {
            Ok(_) => return,
            Err(e) => last = e,
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    panic!("not admitted: {last}");
}

#[tokio::test]
async fn author_without_impersonate_is_denied_with_what_to_grant() {
    let admin = support::cluster().admin().await;
    let alice = support::unique("alice");
    grant_extension_author(&admin, &alice).await;
    policy_in_force(&admin, &alice, "team-a", "installer").await;
    let client = user_client(&alice).await;
    let err = create(
        &client,
        &extension(&support::unique("ext"), "team-a", Some("installer")),
        false,
    )
    .await
    .expect_err("denied");
    assert!(
        err.contains(&denial(&alice, "team-a", "installer")),
        "{err}"
    );
    assert!(err.contains("olmv1-installer-service-account"), "{err}");
    // Without spec.serviceAccount the controller's own policy decides: not checked here.
    create(
        &client,
        &extension(&support::unique("ext"), "team-a", None),
        true,
    )
    .await
    .expect("no account named: admitted");
}

#[tokio::test]
async fn author_with_impersonate_or_use_is_admitted() {
    let admin = support::cluster().admin().await;
    let ns = support::namespace(&admin, "vap").await;
    let (bob, carol) = (support::unique("bob"), support::unique("carol"));
    for u in [&bob, &carol] {
        grant_extension_author(&admin, u).await;
    }
    policy_in_force(&admin, &bob, &ns, "installer").await;
    grant_on_account(&admin, &bob, "impersonate", &ns, "installer").await;
    grant_on_account(&admin, &carol, "use", &ns, "installer").await;
    for u in [&bob, &carol] {
        let client = user_client(u).await;
        eventually_created(
            &client,
            &extension(&support::unique("ext"), &ns, Some("installer")),
            true,
        )
        .await;
        // The right is per account: another account in the namespace stays refused.
        let err = create(
            &client,
            &extension(&support::unique("ext"), &ns, Some("other")),
            true,
        )
        .await
        .expect_err("other account denied");
        assert!(err.contains(&denial(u, &ns, "other")), "{err}");
    }
}

#[tokio::test]
async fn changing_the_account_on_update_is_checked() {
    let admin = support::cluster().admin().await;
    let ns = support::namespace(&admin, "vap").await;
    let dave = support::unique("dave");
    let erin = support::unique("erin");
    grant_extension_author(&admin, &dave).await;
    grant_extension_author(&admin, &erin).await;
    policy_in_force(&admin, &dave, &ns, "second").await;
    grant_on_account(&admin, &dave, "impersonate", &ns, "first").await;
    let client = user_client(&dave).await;
    let name = support::unique("ext");
    eventually_created(&client, &extension(&name, &ns, Some("first")), false).await;

    // Moving the extension to an account dave may not impersonate: denied.
    let err = patch(
        &client,
        &name,
        json!({"spec": {"serviceAccount": {"name": "second"}}}),
    )
    .await
    .expect_err("change to a foreign account denied");
    assert!(err.contains(&denial(&dave, &ns, "second")), "{err}");

    // Edits that keep the account are not checked, even by someone without the right.
    let erin_client = user_client(&erin).await;
    patch(
        &erin_client,
        &name,
        json!({"metadata": {"labels": {"team": "a"}}}),
    )
    .await
    .expect("label edit admitted");
    patch(
        &erin_client,
        &name,
        json!({"spec": {"source": {"catalog": {"version": ">=1.0.0"}}}}),
    )
    .await
    .expect("spec edit keeping the account admitted");
    // But erin may not move it to the account either.
    let err = patch(
        &erin_client,
        &name,
        json!({"spec": {"serviceAccount": {"name": "first2"}}}),
    )
    .await
    .expect_err("erin may not change the account");
    assert!(err.contains(&denial(&erin, &ns, "first2")), "{err}");

    // Once dave may impersonate the second account, the move is admitted.
    grant_on_account(&admin, &dave, "impersonate", &ns, "second").await;
    let mut last = String::new();
    for _ in 0..100 {
        match patch(
            &client,
            &name,
            json!({"spec": {"serviceAccount": {"name": "second"}}}),
        )
        .await
        {
            Ok(_) => return,
            Err(e) => last = e,
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    panic!("move to an impersonable account not admitted: {last}");
}

#[tokio::test]
async fn cluster_admin_is_admitted() {
    let admin = support::cluster().admin().await;
    let probe_user = support::unique("frank");
    grant_extension_author(&admin, &probe_user).await;
    policy_in_force(&admin, &probe_user, "anywhere", "any-account").await;
    create(
        &admin,
        &extension(&support::unique("ext"), "anywhere", Some("any-account")),
        true,
    )
    .await
    .expect("cluster-admin admitted");
}
