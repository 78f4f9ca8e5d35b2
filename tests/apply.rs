//! Applying bundle objects as an impersonated installer ServiceAccount on a real
//! kube-apiserver with RBAC: the generated least-privilege role suffices, the permission
//! preflight names exactly what is missing, escalation is refused by the API server,
//! takeover is refused, pruning, uninstall (with and without keeping CRDs, with the
//! installer account gone), the revision record, and idempotent re-apply.

use crate::support;

use k8s_openapi::api::authentication::v1::SelfSubjectReview;
use k8s_openapi::api::authorization::v1::SubjectAccessReview;
use k8s_openapi::api::core::v1::{ConfigMap, ServiceAccount};
use kube::api::{
    Api, ApiResource, DynamicObject, GroupVersionKind, Patch, PatchParams, PostParams,
};
use olmv1::apply::{
    self, ApplyError, ApplyOptions, ObjectRef, Owner, RevisionHistory, RevisionStore,
    UninstallOptions,
};
use olmv1::preflight::permissions::rbac::{BundledRbac, installer_rbac, requirement_rules};
use olmv1::preflight::permissions::{self, EvaluateError, ResourceMap, describe, requirements};
use serde_json::{Value, json};
use std::time::Duration;

const CONTROLLER_NAMESPACE: &str = "olmv1-system";

struct Env {
    admin: kube::Client,
    controller: kube::Client,
    controller_config: kube::Config,
    ns: String,
    ext: String,
    owner: Owner,
    group: String,
}

impl Env {
    fn sa(&self) -> String {
        format!("{}-installer", self.ext)
    }

    fn installer(&self) -> kube::Client {
        apply::installer_client(&self.controller_config, &self.ns, &self.sa())
            .expect("installer client")
    }

    /// A CRD, a Widget of it, a ServiceAccount, a ClusterRole granting `secrets` get/list
    /// plus its binding, a Deployment and a ConfigMap.
    fn objects(&self) -> Vec<Value> {
        let (ns, g, ext) = (&self.ns, &self.group, &self.ext);
        vec![
            json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
                "metadata": {"name": format!("widgets.{g}")},
                "spec": {"group": g, "scope": "Namespaced",
                    "names": {"kind": "Widget", "plural": "widgets", "singular": "widget", "listKind": "WidgetList"},
                    "versions": [{"name": "v1", "served": true, "storage": true,
                        "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}]}}),
            json!({"apiVersion": format!("{g}/v1"), "kind": "Widget",
                "metadata": {"name": "sample", "namespace": ns}, "spec": {"size": 1}}),
            json!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "op", "namespace": ns}}),
            json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
                "metadata": {"name": format!("{ext}-op")},
                "rules": [{"apiGroups": [""], "resources": ["secrets"], "verbs": ["get", "list"]},
                          {"apiGroups": [g], "resources": ["widgets"], "verbs": ["get", "list", "watch"]}]}),
            json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
                "metadata": {"name": format!("{ext}-op")},
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": format!("{ext}-op")},
                "subjects": [{"kind": "ServiceAccount", "name": "op", "namespace": ns}]}),
            json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "op", "namespace": ns},
                "spec": {"replicas": 0, "selector": {"matchLabels": {"app": "op"}},
                    "template": {"metadata": {"labels": {"app": "op"}},
                        "spec": {"serviceAccountName": "op", "containers": [{"name": "c", "image": "registry.invalid/op:1"}]}}}}),
            json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cfg", "namespace": ns}, "data": {"a": "1"}}),
        ]
    }

    /// Creates the installer account with the generated role (rules filtered by `keep`).
    async fn grant(&self, objects: &[Value], mode: BundledRbac, keep: impl Fn(&Value) -> bool) {
        self.grant_edited(objects, mode, |rules| rules.retain(|r| keep(r)))
            .await;
    }

    /// Creates the installer account with the generated role, its rules changed by `edit`.
    async fn grant_edited(
        &self,
        objects: &[Value],
        mode: BundledRbac,
        edit: impl FnOnce(&mut Vec<Value>),
    ) {
        let mut rbac = installer_rbac(objects, &self.ns, &self.ext, mode).expect("rbac");
        let mut rules: Vec<Value> = rbac.cluster_role["rules"]
            .as_array()
            .expect("rules")
            .clone();
        edit(&mut rules);
        rbac.cluster_role["rules"] = Value::Array(rules.clone());
        for obj in [&rbac.service_account, &rbac.cluster_role, &rbac.binding] {
            admin_apply(&self.admin, obj).await;
        }
        self.granted(&rules).await;
    }

    /// Waits until the API server's RBAC authorizer (fed by informers, so a moment
    /// behind the writes) allows the account every kept rule: a review racing the new
    /// binding would otherwise report a rule missing that was granted.
    async fn granted(&self, rules: &[Value]) {
        let user = format!("system:serviceaccount:{}:{}", self.ns, self.sa());
        let reviews: Vec<Value> = rules
            .iter()
            .filter_map(|r| {
                let first = |k: &str| r[k].as_array()?.first()?.as_str().map(str::to_owned);
                let name = first("resourceNames");
                Some(json!({"apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview",
                    "spec": {"user": user, "groups": ["system:serviceaccounts", "system:authenticated"],
                        "resourceAttributes": {"group": first("apiGroups")?, "resource": first("resources")?,
                            "verb": first("verbs")?, "name": name}}}))
            })
            .collect();
        let api: Api<SubjectAccessReview> = Api::all(self.admin.clone());
        support::eventually(30, "the granted rules in effect", || async {
            for body in &reviews {
                let body: SubjectAccessReview = serde_json::from_value(body.clone()).ok()?;
                let out = api.create(&PostParams::default(), &body).await.ok()?;
                out.status.filter(|s| s.allowed)?;
            }
            Some(())
        })
        .await;
    }

    async fn preflight(&self, objects: &[Value]) -> Result<(), EvaluateError> {
        let infos = describe(objects, &ResourceMap::offline(objects)).expect("describe");
        let req = requirements(objects, &infos, &self.ext);
        permissions::preflight(
            &self.controller,
            &self.installer(),
            &self.ns,
            &self.sa(),
            &req,
        )
        .await
        .map(drop)
    }

    /// The evaluation of `objects` for the account, its rules read through `rules_of`
    /// (the account's own installer client, or one impersonating another account: then
    /// its rules decide nothing and every check is a SubjectAccessReview).
    async fn evaluate(
        &self,
        objects: &[Value],
        rules_of: &kube::Client,
    ) -> permissions::Evaluation {
        let infos = describe(objects, &ResourceMap::offline(objects)).expect("describe");
        let req = requirements(objects, &infos, &self.ext);
        permissions::evaluate(
            &self.controller,
            rules_of,
            &self.ns,
            &self.sa(),
            &req,
            permissions::DEFAULT_CONCURRENCY,
        )
        .await
        .expect("evaluate")
    }

    /// A client impersonating an account that holds nothing: rules read through it
    /// cover none of this account's checks.
    fn blind(&self) -> kube::Client {
        apply::installer_client(&self.controller_config, &self.ns, "nobody").expect("client")
    }

    async fn get(&self, obj: &Value) -> Option<DynamicObject> {
        let r = ObjectRef::from_object(obj).expect("ref");
        match dynamic_api(&self.admin, &r).get_opt(&r.name).await {
            Err(kube::Error::Api(s)) if s.code == 404 => None, // kind no longer served
            other => other.expect("get"),
        }
    }
}

fn dynamic_api(client: &kube::Client, r: &ObjectRef) -> Api<DynamicObject> {
    let ar = ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk(&r.group, &r.version, &r.kind),
        &permissions::guess_plural(&r.kind),
    );
    if r.namespace.is_empty() {
        Api::all_with(client.clone(), &ar)
    } else {
        Api::namespaced_with(client.clone(), &r.namespace, &ar)
    }
}

async fn admin_apply(admin: &kube::Client, obj: &Value) {
    let r = ObjectRef::from_object(obj).expect("ref");
    dynamic_api(admin, &r)
        .patch(
            &r.name,
            &PatchParams::apply("test-admin").force(),
            &Patch::Apply(obj),
        )
        .await
        .unwrap_or_else(|e| panic!("admin apply {r}: {e}"));
}

async fn controller_config() -> kube::Config {
    let path = &support::cluster().controller_kubeconfig;
    let kc = kube::config::Kubeconfig::read_from(path).expect("kubeconfig");
    kube::Config::from_custom_kubeconfig(kc, &kube::config::KubeConfigOptions::default())
        .await
        .expect("config")
}

async fn setup(prefix: &str) -> Env {
    let cluster = support::cluster();
    let admin = cluster.admin().await;
    let controller = cluster.controller().await;
    let controller_config = controller_config().await;
    let ns = support::namespace(&admin, prefix).await;
    let ext = support::unique(prefix);
    let ce = json!({"apiVersion": "olm.operatorframework.io/v1", "kind": "ClusterExtension",
        "metadata": {"name": ext},
        "spec": {"namespace": ns, "serviceAccount": {"name": format!("{ext}-installer")},
            "source": {"sourceType": "Catalog", "catalog": {"packageName": "widgets"}}}});
    let ce: DynamicObject = serde_json::from_value(ce).expect("ce");
    let api: Api<DynamicObject> = Api::all_with(
        admin.clone(),
        &ApiResource::erase::<olmv1::api::ClusterExtension>(&()),
    );
    let created = api
        .create(&PostParams::default(), &ce)
        .await
        .expect("create ClusterExtension");
    let uid = created.metadata.uid.expect("uid");
    let group = format!("{}.example.com", support::unique(prefix));
    Env {
        admin,
        controller,
        controller_config,
        ns,
        owner: Owner::new(ext.clone(), uid),
        ext,
        group,
    }
}

fn opts() -> ApplyOptions {
    ApplyOptions {
        crd_timeout: Duration::from_secs(30),
        delete_timeout: Duration::from_secs(60),
        ..Default::default()
    }
}

fn labels_and_owner_ok(obj: &DynamicObject, env: &Env) -> bool {
    let labels = obj.metadata.labels.clone().unwrap_or_default();
    let refs = obj.metadata.owner_references.clone().unwrap_or_default();
    labels
        .get("olm.operatorframework.io/owner-kind")
        .map(String::as_str)
        == Some("ClusterExtension")
        && labels.get("olm.operatorframework.io/owner-name") == Some(&env.ext)
        && refs.iter().any(|r| {
            r.uid == env.owner.uid
                && r.kind == "ClusterExtension"
                && r.controller == Some(true)
                && r.block_owner_deletion == Some(true)
        })
}

#[tokio::test]
async fn installs_with_the_generated_role_and_reapply_changes_nothing() {
    let env = setup("inst").await;
    let objects = env.objects();
    env.grant(&objects, BundledRbac::Include, |_| true).await;

    // The impersonated identity is the ServiceAccount with its three groups.
    let review = Api::<SelfSubjectReview>::all(env.installer())
        .create(&PostParams::default(), &SelfSubjectReview::default())
        .await
        .expect("SelfSubjectReview");
    let user = review.status.and_then(|s| s.user_info).expect("user info");
    assert_eq!(
        user.username.as_deref(),
        Some(format!("system:serviceaccount:{}:{}", env.ns, env.sa()).as_str())
    );
    let mut groups = user.groups.unwrap_or_default();
    groups.sort();
    assert_eq!(
        groups,
        vec![
            "system:authenticated".to_owned(),
            "system:serviceaccounts".to_owned(),
            format!("system:serviceaccounts:{}", env.ns)
        ]
    );

    env.preflight(&objects)
        .await
        .expect("generated role passes the preflight");
    // Keeping the CRDs and Deployments as the API server answered (what the readiness
    // verdict right after an install is judged from).
    let observe = ApplyOptions {
        observe: Some(|group, kind| {
            matches!(
                (group, kind),
                ("apiextensions.k8s.io", "CustomResourceDefinition") | ("apps", "Deployment")
            )
        }),
        ..opts()
    };
    let report = apply::apply(&env.installer(), &env.owner, &objects, &observe)
        .await
        .expect("apply");
    assert_eq!(report.applied, objects.len());
    assert_eq!(report.changed.len(), objects.len());
    let kinds: Vec<&str> = report
        .observed
        .iter()
        .filter_map(|o| o["kind"].as_str())
        .collect();
    assert_eq!(kinds, ["CustomResourceDefinition", "Deployment"]);
    // The CRD as read once Established, the Deployment as created (with its uid).
    let conditions = report.observed[0]["status"]["conditions"].as_array();
    assert!(
        conditions
            .into_iter()
            .flatten()
            .any(|c| c["type"] == "Established" && c["status"] == "True"),
        "{}",
        report.observed[0]["status"]
    );
    assert!(report.observed[1]["metadata"]["uid"].is_string());
    for obj in &objects {
        let live = env
            .get(obj)
            .await
            .unwrap_or_else(|| panic!("{} missing", obj["metadata"]["name"]));
        assert!(
            labels_and_owner_ok(&live, &env),
            "ownership metadata on {:?}",
            live.metadata
        );
    }

    // Others' fields: an extra label and a rollout-restart annotation.
    let cms: Api<ConfigMap> = Api::namespaced(env.admin.clone(), &env.ns);
    cms.patch(
        "cfg",
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"labels": {"team": "blue"}}})),
    )
    .await
    .expect("label");
    let deployments: Api<k8s_openapi::api::apps::v1::Deployment> =
        Api::namespaced(env.admin.clone(), &env.ns);
    deployments
        .patch(
            "op",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"template": {"metadata": {"annotations": {
                "kubectl.kubernetes.io/restartedAt": "2026-01-01T00:00:00Z"}}}}})),
        )
        .await
        .expect("restart");
    // let the deployment controller settle its status
    support::eventually(30, "deployment status settled", || async {
        let d = deployments.get("op").await.ok()?;
        let gen_ = d.metadata.generation;
        (d.status.and_then(|s| s.observed_generation) == gen_).then_some(())
    })
    .await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    let generation = deployments
        .get("op")
        .await
        .expect("get")
        .metadata
        .generation;

    let again = apply::apply(&env.installer(), &env.owner, &objects, &opts())
        .await
        .expect("re-apply");
    assert_eq!(again.applied, objects.len());
    assert!(
        again.observed.is_empty(),
        "kept without ApplyOptions::observe"
    );
    assert!(
        again.changed.is_empty(),
        "re-apply changed {:?}",
        again.changed
    );
    let cm = cms.get("cfg").await.expect("cm");
    assert_eq!(
        cm.metadata
            .labels
            .unwrap_or_default()
            .get("team")
            .map(String::as_str),
        Some("blue")
    );
    let d = deployments.get("op").await.expect("deployment");
    assert_eq!(d.metadata.generation, generation);
    let ann = d
        .spec
        .and_then(|s| s.template.metadata)
        .and_then(|m| m.annotations)
        .unwrap_or_default();
    assert_eq!(
        ann.get("kubectl.kubernetes.io/restartedAt")
            .map(String::as_str),
        Some("2026-01-01T00:00:00Z")
    );
}

/// An extension's CRDs are watched until Established (one watch by its owner labels); an
/// account that may not watch them (granted by hand, without the preflight's `watch`)
/// gets its CRDs read until they are, and the custom resource of the bundle still
/// applies after them.
#[tokio::test]
async fn crds_are_read_until_established_where_the_installer_cannot_watch_them() {
    let env = setup("nowatch").await;
    let objects = env.objects();
    let mut dropped = 0;
    env.grant_edited(&objects, BundledRbac::Include, |rules| {
        for rule in rules.iter_mut() {
            if rule["resources"] == json!(["customresourcedefinitions"])
                && let Some(verbs) = rule["verbs"].as_array_mut()
            {
                let before = verbs.len();
                verbs.retain(|v| v != "watch");
                dropped += before - verbs.len();
            }
        }
    })
    .await;
    assert_eq!(dropped, 1, "the generated role grants watch on CRDs once");
    let crd = ObjectRef::from_object(&objects[0]).expect("ref");
    let refused = dynamic_api(&env.installer(), &crd)
        .watch(
            &kube::api::WatchParams::default().labels(&env.owner.label_selector()),
            "0",
        )
        .await
        .err();
    assert!(
        matches!(&refused, Some(kube::Error::Api(s)) if s.code == 403),
        "{refused:?}"
    );
    let report = apply::apply(&env.installer(), &env.owner, &objects, &opts())
        .await
        .expect("apply without watch on CRDs");
    assert_eq!(report.applied, objects.len());
    assert!(
        env.get(&objects[1]).await.is_some(),
        "the Widget is applied"
    );
}

#[tokio::test]
async fn preflight_names_exactly_the_missing_rule_and_nothing_is_written() {
    let env = setup("pre").await;
    let objects = env.objects();
    // drop the unscoped configmaps rule (create, list, watch)
    env.grant(&objects, BundledRbac::Include, |r| {
        !(r["resources"] == json!(["configmaps"]) && r.get("resourceNames").is_none())
    })
    .await;
    let err = env.preflight(&objects).await.expect_err("must fail");
    assert_eq!(
        err.to_string(),
        format!(
            "pre-authorization failed: service account requires the following permissions to manage cluster extension:\n  \
             Namespace:\"{}\" APIGroups:[] Resources:[configmaps] ResourceNames:[] Verbs:[create,list,watch]",
            env.ns
        )
    );
    for obj in &objects[2..] {
        assert!(
            env.get(obj).await.is_none(),
            "{} was written",
            obj["metadata"]["name"]
        );
    }
    let crds: Api<k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition> =
        Api::all(env.admin.clone());
    assert!(
        crds.get_opt(&format!("widgets.{}", env.group))
            .await
            .expect("get")
            .is_none()
    );
}

#[tokio::test]
async fn bundled_rbac_beyond_the_account_is_refused() {
    let env = setup("esc").await;
    let objects = env.objects();
    // everything except what the bundled ClusterRole grants
    let infos = describe(&objects, &ResourceMap::offline(&objects)).expect("describe");
    let req = requirements(&objects, &infos, &env.ext);
    let rules = requirement_rules(&req);
    let mut rbac = installer_rbac(&objects, &env.ns, &env.ext, BundledRbac::Include).expect("rbac");
    rbac.cluster_role["rules"] = Value::Array(rules);
    for obj in [&rbac.service_account, &rbac.cluster_role, &rbac.binding] {
        admin_apply(&env.admin, obj).await;
    }
    let err = env
        .preflight(&objects)
        .await
        .expect_err("preflight must fail");
    let msg = err.to_string();
    assert!(
        msg.contains(
            "Namespace:\"\" APIGroups:[] Resources:[secrets] ResourceNames:[] Verbs:[get,list]"
        ),
        "{msg}"
    );
    // Without the preflight the API server refuses the escalation itself.
    let err = apply::apply(&env.installer(), &env.owner, &objects, &opts())
        .await
        .expect_err("escalation");
    let text = err.to_string();
    assert!(
        text.contains(&format!("ClusterRole/{}-op", env.ext)),
        "{text}"
    );
    assert!(
        text.contains("attempting to grant RBAC permissions not currently held"),
        "{text}"
    );

    // bind+escalate on the bundled role instead of its rules is enough.
    env.grant(&objects, BundledRbac::BindEscalate, |_| true)
        .await;
    env.preflight(&objects).await.expect("bind+escalate passes");
    apply::apply(&env.installer(), &env.owner, &objects, &opts())
        .await
        .expect("apply with bind+escalate");
}

#[tokio::test]
async fn existing_objects_of_others_are_not_taken_over() {
    let env = setup("take").await;
    let objects = env.objects();
    env.grant(&objects, BundledRbac::Include, |_| true).await;
    admin_apply(
        &env.admin,
        &json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "cfg", "namespace": env.ns}, "data": {"mine": "yes"}}),
    )
    .await;
    admin_apply(
        &env.admin,
        &json!({"apiVersion": "v1", "kind": "ServiceAccount",
        "metadata": {"name": "op", "namespace": env.ns, "labels": {
            "olm.operatorframework.io/owner-kind": "ClusterExtension",
            "olm.operatorframework.io/owner-name": "someone-else"}}}),
    )
    .await;
    let err = apply::apply(&env.installer(), &env.owner, &objects, &opts())
        .await
        .expect_err("conflict");
    match &err {
        ApplyError::Conflict { conflicts, .. } => assert_eq!(conflicts.len(), 2),
        other => panic!("expected a conflict, got {other}"),
    }
    assert_eq!(
        err.to_string(),
        format!(
            "refusing to take over 2 existing object(s) not owned by this ClusterExtension: \
             ConfigMap/{ns}/cfg (not managed by a ClusterExtension), \
             ServiceAccount/{ns}/op (owned by ClusterExtension \"someone-else\")",
            ns = env.ns
        )
    );
    // nothing written
    assert!(env.get(&objects[0]).await.is_none(), "CRD was written");
    assert!(
        env.get(&objects[5]).await.is_none(),
        "Deployment was written"
    );
    let cm = Api::<ConfigMap>::namespaced(env.admin.clone(), &env.ns)
        .get("cfg")
        .await
        .expect("cm");
    assert_eq!(
        cm.data.unwrap_or_default().get("mine").map(String::as_str),
        Some("yes")
    );
}

fn bundle(v: &str) -> olmv1::api::BundleIdentity {
    olmv1::api::BundleIdentity {
        package: "widgets".into(),
        name: format!("widgets.v{v}"),
        version: v.into(),
        release: None,
        image: format!("registry.example/widgets@sha256:{}", "0".repeat(64)),
    }
}

#[tokio::test]
async fn upgrade_prunes_dropped_objects_and_uninstall_removes_everything() {
    let env = setup("prune").await;
    let v1 = env.objects();
    env.grant(&v1, BundledRbac::Include, |_| true).await;
    let store = RevisionStore::new(env.controller.clone(), CONTROLLER_NAMESPACE);
    assert!(store.load(&env.owner).await.expect("load").is_none());

    let mut history = RevisionHistory::new(&env.owner);
    let one = history.begin(bundle("1"), &v1);
    store.save(&history).await.expect("save pending");
    apply::apply(&env.installer(), &env.owner, &v1, &opts())
        .await
        .expect("apply v1");
    history.complete(one);
    store.save(&history).await.expect("save v1");

    // v2 drops the ConfigMap and the Deployment and adds another ConfigMap
    let mut v2: Vec<Value> = v1
        .iter()
        .filter(|o| o["kind"] != "ConfigMap" && o["kind"] != "Deployment")
        .cloned()
        .collect();
    v2.push(json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cfg2", "namespace": env.ns}}));
    // During the upgrade the account needs the union: v2's objects and deleting v1's.
    let mut both = v1.clone();
    both.push(v2[v2.len() - 1].clone());
    env.grant(&both, BundledRbac::Include, |_| true).await;
    let two = history.begin(bundle("2"), &v2);
    store.save(&history).await.expect("save pending v2");
    apply::apply(&env.installer(), &env.owner, &v2, &opts())
        .await
        .expect("apply v2");
    let dropped = history.prune_candidates(two);
    let names: Vec<&str> = dropped.iter().map(|o| o.name.as_str()).collect();
    assert_eq!(names, vec!["cfg", "op"]);
    let deleted = apply::prune(&env.installer(), &env.owner, &dropped, &opts())
        .await
        .expect("prune");
    assert_eq!(deleted.len(), 2);
    history.complete(two);
    store.save(&history).await.expect("save v2");
    assert!(env.get(&v1[6]).await.is_none(), "ConfigMap cfg pruned");
    assert!(env.get(&v1[5]).await.is_none(), "Deployment pruned");
    assert!(env.get(&v2[v2.len() - 1]).await.is_some(), "cfg2 applied");

    // The record survives a fresh client (a controller restart).
    let fresh = support::cluster().controller().await;
    let loaded = RevisionStore::new(fresh, CONTROLLER_NAMESPACE)
        .load(&env.owner)
        .await
        .expect("load")
        .expect("recorded");
    assert_eq!(loaded, history);
    let installed = loaded.installed().expect("installed");
    assert_eq!(installed.bundle.version, "2");
    assert_eq!(installed.objects.len(), v2.len());
    // A ClusterExtension of the same name but another uid does not see this record.
    assert!(
        store
            .load(&Owner::new(env.ext.clone(), "other-uid"))
            .await
            .expect("load")
            .is_none()
    );

    // Uninstall: everything goes, CRD included.
    let report = apply::uninstall(
        &env.controller,
        &env.installer(),
        &env.ns,
        &env.sa(),
        &env.owner,
        &loaded.all_objects(),
        &UninstallOptions {
            keep_crds: false,
            apply: opts(),
        },
    )
    .await
    .expect("uninstall");
    assert_eq!(report.deleted.len(), v2.len());
    assert!(report.kept.is_empty());
    for obj in &v2 {
        assert!(
            env.get(obj).await.is_none(),
            "{} left behind",
            obj["metadata"]["name"]
        );
    }
    store.delete(&env.ext).await.expect("delete record");
    assert!(store.load(&env.owner).await.expect("load").is_none());
}

#[tokio::test]
async fn uninstall_can_keep_crds() {
    let env = setup("keep").await;
    let objects = env.objects();
    env.grant(&objects, BundledRbac::Include, |_| true).await;
    apply::apply(&env.installer(), &env.owner, &objects, &opts())
        .await
        .expect("apply");
    let refs: Vec<ObjectRef> = objects.iter().filter_map(ObjectRef::from_object).collect();
    let report = apply::uninstall(
        &env.controller,
        &env.installer(),
        &env.ns,
        &env.sa(),
        &env.owner,
        &refs,
        &UninstallOptions {
            keep_crds: true,
            apply: opts(),
        },
    )
    .await
    .expect("uninstall");
    assert_eq!(report.kept.len(), 1);
    assert_eq!(report.deleted.len(), objects.len() - 1);
    let crd = env.get(&objects[0]).await.expect("CRD kept");
    let owners = crd.metadata.owner_references.unwrap_or_default();
    assert!(
        owners.iter().all(|o| o.uid != env.owner.uid),
        "ownerReference removed: {owners:?}"
    );
    for obj in &objects[1..] {
        assert!(
            env.get(obj).await.is_none(),
            "{} left behind",
            obj["metadata"]["name"]
        );
    }
}

#[tokio::test]
async fn uninstall_without_the_installer_account_fails_fast() {
    let env = setup("gone").await;
    let objects = env.objects();
    env.grant(&objects, BundledRbac::Include, |_| true).await;
    apply::apply(&env.installer(), &env.owner, &objects, &opts())
        .await
        .expect("apply");
    Api::<ServiceAccount>::namespaced(env.admin.clone(), &env.ns)
        .delete(&env.sa(), &Default::default())
        .await
        .expect("delete account");
    let refs: Vec<ObjectRef> = objects.iter().filter_map(ObjectRef::from_object).collect();
    let started = std::time::Instant::now();
    let err = apply::uninstall(
        &env.controller,
        &env.installer(),
        &env.ns,
        &env.sa(),
        &env.owner,
        &refs,
        &UninstallOptions::default(),
    )
    .await
    .expect_err("account missing");
    assert!(started.elapsed() < Duration::from_secs(5));
    assert!(
        matches!(&err, ApplyError::InstallerAccountMissing { namespace, name } if *namespace == env.ns && *name == env.sa()),
        "{err}"
    );
    // nothing was deleted; the objects carry the ownerReference garbage collection needs
    let cm = env.get(&objects[6]).await.expect("cm still there");
    assert!(labels_and_owner_ok(&cm, &env));
}

#[tokio::test]
async fn upgrade_step_checks_deletions_prunes_and_records_only_changes() {
    let env = setup("step").await;
    let store = RevisionStore::new(env.controller.clone(), CONTROLLER_NAMESPACE);
    let v1 = env.objects();
    env.grant(&v1, BundledRbac::Include, |_| true).await;
    olmv1::preflight::check_permissions(
        &env.controller,
        &env.installer(),
        &env.ns,
        &env.sa(),
        &env.owner,
        &v1,
        None,
    )
    .await
    .expect("v1 preflight");
    let out = apply::install_revision(
        &env.installer(),
        &store,
        &env.owner,
        bundle("1"),
        &v1,
        None,
        &opts(),
    )
    .await
    .expect("install v1");
    assert_eq!(out.revision, 1);
    assert!(out.record_written && out.pruned.is_empty());

    // v2 drops the ConfigMap and the Deployment; an account with v2's role only cannot prune.
    let v2: Vec<Value> = v1
        .iter()
        .filter(|o| o["kind"] != "ConfigMap" && o["kind"] != "Deployment")
        .cloned()
        .collect();
    env.grant(&v2, BundledRbac::Include, |_| true).await;
    let history = store.load(&env.owner).await.expect("load").expect("record");
    let err = olmv1::preflight::check_permissions(
        &env.controller,
        &env.installer(),
        &env.ns,
        &env.sa(),
        &env.owner,
        &v2,
        Some(&history),
    )
    .await
    .expect_err("deleting v1's objects is not allowed");
    let ns = &env.ns;
    assert_eq!(
        err.to_string(),
        format!(
            "pre-authorization failed: service account requires the following permissions to manage cluster extension:\n  \
             Namespace:\"{ns}\" APIGroups:[] Resources:[configmaps] ResourceNames:[cfg] Verbs:[delete,get]\n  \
             Namespace:\"{ns}\" APIGroups:[apps] Resources:[deployments] ResourceNames:[op] Verbs:[delete,get]"
        )
    );
    env.grant(&v1, BundledRbac::Include, |_| true).await; // v1 ⊇ v2
    olmv1::preflight::check_permissions(
        &env.controller,
        &env.installer(),
        ns,
        &env.sa(),
        &env.owner,
        &v2,
        Some(&history),
    )
    .await
    .expect("v2 preflight");
    let out = apply::install_revision(
        &env.installer(),
        &store,
        &env.owner,
        bundle("2"),
        &v2,
        None,
        &opts(),
    )
    .await
    .expect("install v2");
    assert_eq!(out.revision, 2);
    let pruned: Vec<String> = out.pruned.iter().map(ToString::to_string).collect();
    assert_eq!(
        pruned,
        vec![format!("ConfigMap/{ns}/cfg"), format!("Deployment/{ns}/op")]
    );
    assert!(env.get(&v1[6]).await.is_none() && env.get(&v1[5]).await.is_none());

    // The same revision again: nothing applied changes, nothing pruned, no record write.
    let records: Api<ConfigMap> = Api::namespaced(env.admin.clone(), CONTROLLER_NAMESPACE);
    let record_name = olmv1::apply::record::record_name(&env.ext);
    let rv = records
        .get(&record_name)
        .await
        .expect("record")
        .metadata
        .resource_version;
    let out = apply::install_revision(
        &env.installer(),
        &store,
        &env.owner,
        bundle("2"),
        &v2,
        None,
        &opts(),
    )
    .await
    .expect("re-install v2");
    assert_eq!(out.revision, 2);
    assert!(out.report.changed.is_empty(), "{:?}", out.report.changed);
    assert!(out.pruned.is_empty() && !out.record_written);
    assert_eq!(
        records
            .get(&record_name)
            .await
            .expect("record")
            .metadata
            .resource_version,
        rv
    );
}

#[tokio::test]
async fn preflight_of_hundreds_of_objects_runs_concurrently() {
    let env = setup("many").await;
    let objects: Vec<Value> = (0..300)
        .map(|i| json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": format!("cm-{i:03}"), "namespace": env.ns}}))
        .collect();
    // An account holding only the named rules: no unnamed shortcut, every name is checked.
    env.grant(&objects, BundledRbac::Include, |_| true).await;
    let infos = describe(&objects, &ResourceMap::offline(&objects)).expect("describe");
    assert!(requirements(&objects, &infos, &env.ext).all_checks().len() > 1200);
    // Its own rules cover every check: two rules reviews, no SubjectAccessReview.
    let by_rules = env.evaluate(&objects, &env.installer()).await;
    assert!(by_rules.missing.is_empty(), "{:?}", by_rules.missing);
    assert_eq!((by_rules.rules_reviews, by_rules.access_reviews), (2, 0));
    // Rules that cover nothing: every check is a SubjectAccessReview, many in flight.
    let started = std::time::Instant::now();
    let by_reviews = env.evaluate(&objects, &env.blind()).await;
    let elapsed = started.elapsed();
    assert!(by_reviews.missing.is_empty(), "{:?}", by_reviews.missing);
    assert!(by_reviews.access_reviews > 1200, "{by_reviews:?}");
    eprintln!(
        "preflight: {} SubjectAccessReviews for 300 objects in {elapsed:?}",
        by_reviews.access_reviews
    );
    assert!(elapsed < Duration::from_secs(20), "{elapsed:?}");
}

/// `objects` evaluated with the account's own rules and without them (every check a
/// SubjectAccessReview): both must decide the same, here that the CRD permissions are
/// missing.
async fn both_ways(
    env: &Env,
    objects: &[Value],
) -> (permissions::Evaluation, permissions::Evaluation) {
    let by_rules = env.evaluate(objects, &env.installer()).await;
    let by_reviews = env.evaluate(objects, &env.blind()).await;
    assert_eq!(by_rules.missing, by_reviews.missing);
    assert!(
        by_rules
            .missing
            .iter()
            .any(|p| format!("{p:?}").contains("customresourcedefinitions")),
        "{:?}",
        by_rules.missing
    );
    (by_rules, by_reviews)
}

#[tokio::test]
async fn rules_spare_the_reviews_they_cover_and_decide_as_the_reviews_do() {
    let env = setup("rules").await;
    let objects = env.objects();
    // The generated role without the unscoped configmaps rule and without the CRD rules.
    env.grant(&objects, BundledRbac::Include, |r| {
        !(r["resources"] == json!(["configmaps"]) && r.get("resourceNames").is_none())
            && r["resources"] != json!(["customresourcedefinitions"])
    })
    .await;
    let (by_rules, by_reviews) = both_ways(&env, &objects).await;
    // Only what the rules do not cover was reviewed.
    assert!(by_rules.access_reviews > 0);
    assert!(
        by_rules.access_reviews * 3 < by_reviews.access_reviews,
        "{by_rules:?} / {by_reviews:?}"
    );

    // Everything granted by a RoleBinding in the namespace, nothing cluster-wide: the
    // namespace's rules must not decide the cluster-scoped checks (CRDs, ClusterRoles,
    // the finalizers of the extension), which the reviews refuse.
    let everything = [
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
            "metadata": {"name": format!("{}-everything", env.ext)},
            "rules": [{"apiGroups": ["*"], "resources": ["*"], "verbs": ["*"]}]}),
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
            "metadata": {"name": "everything", "namespace": env.ns},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": format!("{}-everything", env.ext)},
            "subjects": [{"kind": "ServiceAccount", "name": env.sa(), "namespace": env.ns}]}),
    ];
    for obj in &everything {
        admin_apply(&env.admin, obj).await;
    }
    support::eventually(30, "the RoleBinding in effect", || async {
        let e = env.evaluate(&objects, &env.installer()).await;
        e.missing
            .iter()
            .all(|p| p.resource_parts().is_some_and(|r| r.namespace.is_empty()))
            .then_some(())
    })
    .await;
    both_ways(&env, &objects).await;
}

/// Established TCP connections (IPv4 and IPv6) to `port` on this machine.
fn connections_to(port: u16) -> usize {
    ["/proc/net/tcp", "/proc/net/tcp6"]
        .iter()
        .filter_map(|p| std::fs::read_to_string(p).ok())
        .flat_map(|table| {
            table
                .lines()
                .skip(1)
                .filter(|line| {
                    let fields: Vec<&str> = line.split_whitespace().collect();
                    let remote_port = fields
                        .get(2)
                        .and_then(|a| a.rsplit(':').next())
                        .and_then(|p| u16::from_str_radix(p, 16).ok());
                    remote_port == Some(port) && fields.get(3) == Some(&"01")
                })
                .map(|_| ())
                .collect::<Vec<_>>()
        })
        .count()
}

#[tokio::test]
async fn installer_clients_share_connections_and_impersonate() {
    use futures::StreamExt;
    use k8s_openapi::api::authorization::v1::SelfSubjectAccessReview;
    let env = setup("share").await;
    let rbac = [
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
            "metadata": {"name": "watch-cm", "namespace": env.ns},
            "rules": [{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["list", "watch"]}]}),
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
            "metadata": {"name": "watch-cm", "namespace": env.ns},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "watch-cm"},
            "subjects": [{"kind": "ServiceAccount", "name": env.sa(), "namespace": env.ns}]}),
    ];
    for obj in &rbac {
        admin_apply(&env.admin, obj).await;
    }
    let port = env.controller_config.cluster_url.port_u16().expect("port");
    let clients = apply::InstallerClients::new(env.controller_config.clone());
    assert!(clients.shares_connections());

    // Requests go out as the account, with the groups the API server gives it.
    let review = Api::<SelfSubjectReview>::all(clients.get(&env.ns, &env.sa()).expect("client"))
        .create(&PostParams::default(), &SelfSubjectReview::default())
        .await
        .expect("SelfSubjectReview");
    let user = review.status.and_then(|s| s.user_info).expect("user info");
    assert_eq!(
        user.username.as_deref(),
        Some(format!("system:serviceaccount:{}:{}", env.ns, env.sa()).as_str())
    );
    assert_eq!(
        user.groups.unwrap_or_default(),
        apply::client::service_account_groups(&env.ns)
    );
    // Another account on the same connections is still itself: not allowed what the
    // first may do.
    let other = clients.get(&env.ns, "someone-else").expect("client");
    let review: SelfSubjectAccessReview = serde_json::from_value(json!({
        "apiVersion": "authorization.k8s.io/v1", "kind": "SelfSubjectAccessReview",
        "spec": {"resourceAttributes": {"namespace": env.ns, "verb": "watch", "resource": "configmaps"}}}))
    .expect("review");
    let denied = Api::<SelfSubjectAccessReview>::all(other)
        .create(&PostParams::default(), &review)
        .await
        .expect("SelfSubjectAccessReview");
    assert!(!denied.status.expect("status").allowed);

    // 80 long-running watches: with HTTP/2 they fit on two connections (64 streams
    // each); over HTTP/1.1 they would need 80.
    let before = connections_to(port);
    let mut streams = Vec::new();
    let mut slots = Vec::new();
    for _ in 0..80 {
        let (client, slot) = clients
            .watch_client(&env.ns, &env.sa())
            .expect("watch client");
        let api: Api<ConfigMap> = Api::namespaced(client, &env.ns);
        let stream = api
            .watch(&kube::api::WatchParams::default().timeout(120), "0")
            .await
            .expect("watch as the installer account")
            .boxed();
        streams.push(stream);
        slots.push(slot);
    }
    assert_eq!(clients.watch_connections(), vec![64, 16]);
    // An event reaches a watch on the second connection.
    admin_apply(
        &env.admin,
        &json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "ping", "namespace": env.ns}}),
    )
    .await;
    let event = tokio::time::timeout(Duration::from_secs(10), streams[79].next())
        .await
        .expect("event within 10 s");
    assert!(matches!(event, Some(Ok(_))), "{event:?}");
    let opened = connections_to(port).saturating_sub(before);
    // Other tests of this binary open connections meanwhile; 80 would be per-watch.
    assert!(opened < 20, "{opened} new connections for 80 watches");
    drop(streams);
    drop(slots);
    assert_eq!(clients.watch_connections(), vec![0, 0]);
}
