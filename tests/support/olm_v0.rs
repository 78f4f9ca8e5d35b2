//! OLM v0 for the `olmv1 migrate` tests: OLM v0's real CRDs (built and cached with
//! olm-operator, catalog-operator and opm by `hack/build-olm-v0.sh`) applied to the
//! test control plane, and v0 installations laid down as OLM v0 leaves them once a
//! Subscription is installed (Subscription, CSV with the bundle's properties
//! annotation, InstallPlan, OperatorGroup, CatalogSource, OperatorCondition, each
//! with the status OLM v0 writes). olm-operator and catalog-operator themselves run in
//! `super::olm_v0_run` (docs/how-to/switch-from-olm-v0.md, "Tests with real OLM v0").
#![allow(dead_code)]

use kube::api::{
    Api, ApiResource, DynamicObject, GroupVersionKind, Patch, PatchParams, PostParams,
};
use serde_json::{Value, json};
use std::path::PathBuf;

/// The OLM v0 release `hack/build-olm-v0.sh` builds.
pub const OLM_VERSION: &str = "v0.38.0";

/// `$OLMV1_OLM_V0_DIR`, else `~/.cache/olmv1/olm-v0/<version>` as the script writes it.
pub fn dir() -> PathBuf {
    if let Some(d) = std::env::var_os("OLMV1_OLM_V0_DIR") {
        return PathBuf::from(d);
    }
    let cache = std::env::var_os("XDG_CACHE_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")))
        .unwrap_or_else(|| PathBuf::from("/tmp"));
    cache.join("olmv1").join("olm-v0").join(OLM_VERSION)
}

static CRDS: tokio::sync::OnceCell<()> = tokio::sync::OnceCell::const_new();

/// Applies OLM v0's CRDs once per test binary and waits until they are Established.
pub async fn install_crds(admin: &kube::Client) {
    CRDS.get_or_init(|| async {
        let crds = dir().join("crds");
        assert!(
            crds.join("0000_50_olm_00-subscriptions.crd.yaml").is_file(),
            "{} has no OLM v0 CRDs: run hack/build-olm-v0.sh once",
            crds.display()
        );
        olmv1::testenv::manifests::apply_dir(admin, &crds)
            .await
            .expect("apply OLM v0 CRDs");
        use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
        let api: Api<CustomResourceDefinition> = Api::all(admin.clone());
        super::eventually(60, "OLM v0 CRDs Established", || {
            let api = api.clone();
            async move {
                let list = api.list(&Default::default()).await.ok()?;
                let pending = list
                    .items
                    .iter()
                    .filter(|c| c.spec.group == "operators.coreos.com")
                    .filter(|c| {
                        !c.status
                            .as_ref()
                            .and_then(|s| s.conditions.as_ref())
                            .is_some_and(|cs| {
                                cs.iter()
                                    .any(|c| c.type_ == "Established" && c.status == "True")
                            })
                    })
                    .count();
                (pending == 0).then_some(())
            }
        })
        .await;
    })
    .await;
}

/// The API of an OLM v0 kind in `namespace`.
pub fn api(
    client: &kube::Client,
    version: &str,
    kind: &str,
    namespace: &str,
) -> Api<DynamicObject> {
    let plural = format!("{}s", kind.to_ascii_lowercase());
    let r = ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("operators.coreos.com", version, kind),
        &plural,
    );
    Api::namespaced_with(client.clone(), namespace, &r)
}

/// Creates `object` (apiVersion operators.coreos.com/<version>) and, when `status`
/// is given, writes it through the status subresource as OLM v0 would.
pub async fn create(client: &kube::Client, object: Value, status: Option<Value>) -> Value {
    let kind = object["kind"].as_str().expect("kind").to_string();
    let version = object["apiVersion"]
        .as_str()
        .and_then(|a| a.split('/').nth(1))
        .expect("apiVersion")
        .to_string();
    let ns = object["metadata"]["namespace"]
        .as_str()
        .expect("namespace")
        .to_string();
    let name = object["metadata"]["name"]
        .as_str()
        .expect("name")
        .to_string();
    let api = api(client, &version, &kind, &ns);
    let obj: DynamicObject = serde_json::from_value(object).expect("object");
    api.create(&PostParams::default(), &obj)
        .await
        .unwrap_or_else(|e| panic!("create {kind} {ns}/{name}: {e}"));
    if let Some(status) = status {
        api.patch_status(
            &name,
            &PatchParams::default(),
            &Patch::Merge(&json!({"status": status})),
        )
        .await
        .unwrap_or_else(|e| panic!("status of {kind} {ns}/{name}: {e}"));
    }
    let live = api.get(&name).await.expect("read back");
    serde_json::to_value(live).expect("json")
}

/// The `operatorframework.io/properties` annotation OLM v0 writes on a CSV from the
/// catalog bundle's properties at resolution.
pub fn properties_annotation(package: &str, version: &str, extra: &[Value]) -> String {
    let mut props =
        vec![json!({"type": "olm.package", "value": {"packageName": package, "version": version}})];
    props.extend(extra.iter().cloned());
    json!({ "properties": props }).to_string()
}

/// A v0 installation of `package` at `version` (CSV `csv`) laid down in `ns`, as OLM v0
/// leaves it with `Succeeded`: OperatorGroup (targeting `targets`), Subscription
/// (`approval`, `spec_extra` merged into its spec), InstallPlan, CSV,
/// OperatorCondition. The CatalogSource is the caller's.
pub struct Installation<'a> {
    pub ns: &'a str,
    pub name: &'a str,
    pub package: &'a str,
    pub version: &'a str,
    pub csv: &'a str,
    pub catalog_source: (&'a str, &'a str),
    pub targets: Value,
    pub spec_extra: Value,
}

impl Installation<'_> {
    pub async fn lay_down(&self, client: &kube::Client) {
        let ns = self.ns;
        create(
            client,
            json!({"apiVersion": "operators.coreos.com/v1", "kind": "OperatorGroup",
                "metadata": {"name": format!("{ns}-og"), "namespace": ns},
                "spec": {"targetNamespaces": self.targets}}),
            Some(json!({"namespaces": self.targets, "lastUpdated": "2026-11-25T00:00:00Z"})),
        )
        .await;
        let mut spec = json!({"name": self.package, "source": self.catalog_source.1,
            "sourceNamespace": self.catalog_source.0});
        if let (Some(s), Some(extra)) = (spec.as_object_mut(), self.spec_extra.as_object()) {
            s.extend(extra.clone());
        }
        create(
            client,
            json!({"apiVersion": "operators.coreos.com/v1alpha1", "kind": "Subscription",
                "metadata": {"name": self.name, "namespace": ns,
                    "labels": {format!("operators.coreos.com/{}.{ns}", self.package): ""}},
                "spec": spec}),
            Some(json!({"installedCSV": self.csv, "currentCSV": self.csv, "state": "AtLatestKnown",
                "lastUpdated": "2026-11-25T00:00:00Z",
                "installPlanRef": {"apiVersion": "operators.coreos.com/v1alpha1", "kind": "InstallPlan",
                    "name": "install-abcde", "namespace": ns}})),
        )
        .await;
        create(
            client,
            json!({"apiVersion": "operators.coreos.com/v1alpha1", "kind": "InstallPlan",
                "metadata": {"name": "install-abcde", "namespace": ns},
                "spec": {"approval": "Automatic", "approved": true,
                    "clusterServiceVersionNames": [self.csv]}}),
            Some(json!({"phase": "Complete", "catalogSources": []})),
        )
        .await;
        create(
            client,
            json!({"apiVersion": "operators.coreos.com/v1alpha1", "kind": "ClusterServiceVersion",
                "metadata": {"name": self.csv, "namespace": ns,
                    "labels": {"olm.managed": "true"},
                    "annotations": {"olm.operatorGroup": format!("{ns}-og"), "olm.operatorNamespace": ns,
                        "olm.targetNamespaces": self.targets.as_array().map(|a| a.iter().filter_map(Value::as_str).collect::<Vec<_>>().join(",")).unwrap_or_default(),
                        "operatorframework.io/properties": properties_annotation(self.package, self.version, &[])}},
                "spec": {"displayName": self.package, "version": self.version,
                    "installModes": [{"type": "OwnNamespace", "supported": true},
                        {"type": "SingleNamespace", "supported": true},
                        {"type": "MultiNamespace", "supported": false},
                        {"type": "AllNamespaces", "supported": true}],
                    "install": {"strategy": "deployment", "spec": {"deployments": []}}}}),
            Some(json!({"phase": "Succeeded", "reason": "InstallSucceeded", "message": "install strategy completed with no errors"})),
        )
        .await;
        create(
            client,
            json!({"apiVersion": "operators.coreos.com/v2", "kind": "OperatorCondition",
                "metadata": {"name": self.csv, "namespace": ns},
                "spec": {"deployments": [], "serviceAccounts": []}}),
            None,
        )
        .await;
    }
}

/// The objects OLM v0 makes for a CSV (olm-v0 reference §1.2), tied to it as OLM v0
/// ties them: the Deployment `deployment`, a ServiceAccount, Role and RoleBinding, a
/// Service (ownerReferences to the CSV, owner labels on the Deployment and RBAC), a
/// ClusterRole, ClusterRoleBinding and ValidatingWebhookConfiguration (owner labels
/// only: the ones the `csv-cleanup` finalizer deletes), and the OperatorGroup's
/// ClusterRole (owner labels naming the OperatorGroup). The CSV gets OLM v0's
/// `operators.coreos.com/csv-cleanup` finalizer. Returns every object created, as read
/// back.
pub async fn lay_down_workload(
    client: &kube::Client,
    ns: &str,
    csv: &str,
    deployment: &str,
) -> Vec<Value> {
    lay_down_workload_with(client, ns, csv, deployment, None).await
}

/// [`lay_down_workload`] with the Deployment's `spec` given (as OLM v0 makes it from
/// the CSV: the bundle's, with v0's pod template additions).
pub async fn lay_down_workload_with(
    client: &kube::Client,
    ns: &str,
    csv: &str,
    deployment: &str,
    deployment_spec: Option<Value>,
) -> Vec<Value> {
    let csvs = api(client, "v1alpha1", "ClusterServiceVersion", ns);
    let live = csvs
        .patch(
            csv,
            &PatchParams::default(),
            &Patch::Merge(
                &json!({"metadata": {"finalizers": ["operators.coreos.com/csv-cleanup"]}}),
            ),
        )
        .await
        .expect("CSV finalizer");
    let uid = live.metadata.uid.clone().expect("CSV uid");
    let owner = json!([{"apiVersion": "operators.coreos.com/v1alpha1", "kind": "ClusterServiceVersion",
        "name": csv, "uid": uid, "controller": false, "blockOwnerDeletion": false}]);
    let labels = json!({"olm.owner": csv, "olm.owner.kind": "ClusterServiceVersion",
        "olm.owner.namespace": ns, "olm.managed": "true"});
    let rbac = "rbac.authorization.k8s.io/v1";
    let mut objects = vec![
        json!({"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": deployment, "namespace": ns, "labels": labels, "ownerReferences": owner},
            "spec": {"replicas": 1, "selector": {"matchLabels": {"app": deployment}},
                "template": {"metadata": {"labels": {"app": deployment},
                        "annotations": {"olm.operatorGroup": format!("{ns}-og")}},
                    "spec": {"serviceAccountName": "operator", "containers": [{"name": "manager",
                        "image": "example.com/operator:1",
                        "env": [{"name": "OPERATOR_CONDITION_NAME", "value": csv}]}]}}}}),
        json!({"apiVersion": "v1", "kind": "ServiceAccount",
            "metadata": {"name": "operator", "namespace": ns, "ownerReferences": owner,
                "labels": {"olm.managed": "true"}}}),
        json!({"apiVersion": rbac, "kind": "Role",
            "metadata": {"name": format!("{csv}-operator-abc"), "namespace": ns, "labels": labels, "ownerReferences": owner},
            "rules": [{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get"]}]}),
        json!({"apiVersion": rbac, "kind": "RoleBinding",
            "metadata": {"name": format!("{csv}-operator-abc"), "namespace": ns, "labels": labels, "ownerReferences": owner},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": format!("{csv}-operator-abc")},
            "subjects": [{"kind": "ServiceAccount", "name": "operator", "namespace": ns}]}),
        json!({"apiVersion": "v1", "kind": "Service",
            "metadata": {"name": format!("{deployment}-service"), "namespace": ns, "ownerReferences": owner,
                "labels": {"olm.managed": "true"}},
            "spec": {"selector": {"app": deployment}, "ports": [{"port": 443, "targetPort": 9443}]}}),
        json!({"apiVersion": rbac, "kind": "ClusterRole",
            "metadata": {"name": format!("{csv}-{ns}-def"), "labels": labels},
            "rules": [{"apiGroups": [""], "resources": ["namespaces"], "verbs": ["get", "list", "watch"]}]}),
        json!({"apiVersion": rbac, "kind": "ClusterRoleBinding",
            "metadata": {"name": format!("{csv}-{ns}-def"), "labels": labels},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": format!("{csv}-{ns}-def")},
            "subjects": [{"kind": "ServiceAccount", "name": "operator", "namespace": ns}]}),
        json!({"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingWebhookConfiguration",
            "metadata": {"name": format!("vwidget-{ns}-x7k2p"), "labels": labels}, "webhooks": []}),
        json!({"apiVersion": rbac, "kind": "ClusterRole",
            "metadata": {"name": format!("olm.og.{ns}-og.admin-abc"), "labels": {"olm.owner": format!("{ns}-og"),
                "olm.owner.kind": "OperatorGroup", "olm.owner.namespace": ns, "olm.managed": "true"}},
            "rules": []}),
    ];
    if let Some(spec) = deployment_spec {
        objects[0]["spec"] = spec;
    }
    let mut out = Vec::new();
    for obj in objects {
        out.push(create_any(client, obj).await);
    }
    // The OperatorCondition OLM v0 owns through the CSV (controller reference).
    let mut cond_owner = owner.clone();
    cond_owner[0]["controller"] = json!(true);
    let cond = api(client, "v2", "OperatorCondition", ns)
        .patch(
            csv,
            &PatchParams::default(),
            &Patch::Merge(&json!({"metadata": {"ownerReferences": cond_owner}})),
        )
        .await
        .expect("OperatorCondition owner");
    out.push(serde_json::to_value(cond).expect("json"));
    out
}

/// Creates any object (apiVersion, kind, metadata) and reads it back.
pub async fn create_any(client: &kube::Client, obj: Value) -> Value {
    let r = resource_of(&obj);
    let ns = obj["metadata"]["namespace"]
        .as_str()
        .unwrap_or("")
        .to_string();
    let api: Api<DynamicObject> = if ns.is_empty() {
        Api::all_with(client.clone(), &r)
    } else {
        Api::namespaced_with(client.clone(), &ns, &r)
    };
    let o: DynamicObject = serde_json::from_value(obj).expect("object");
    let name = o.metadata.name.clone().unwrap_or_default();
    api.create(&PostParams::default(), &o)
        .await
        .unwrap_or_else(|e| panic!("create {} {ns}/{name}: {e}", r.kind));
    serde_json::to_value(api.get(&name).await.expect("read back")).expect("json")
}

/// Reads `obj` (apiVersion, kind, metadata) again; `None` once it is gone.
pub async fn read_again(client: &kube::Client, obj: &Value) -> Option<Value> {
    let r = resource_of(obj);
    let ns = obj["metadata"]["namespace"].as_str().unwrap_or("");
    let api: Api<DynamicObject> = if ns.is_empty() {
        Api::all_with(client.clone(), &r)
    } else {
        Api::namespaced_with(client.clone(), ns, &r)
    };
    let name = obj["metadata"]["name"].as_str().expect("name");
    let live = api.get_opt(name).await.expect("read");
    live.map(|o| serde_json::to_value(o).expect("json"))
}

fn resource_of(obj: &Value) -> ApiResource {
    let api_version = obj["apiVersion"].as_str().expect("apiVersion");
    let kind = obj["kind"].as_str().expect("kind");
    let (group, version) = api_version.split_once('/').unwrap_or(("", api_version));
    ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk(group, version, kind),
        &format!("{}s", kind.to_ascii_lowercase()),
    )
}
