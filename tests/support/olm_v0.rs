//! OLM v0 for the `olmv1 migrate` tests: OLM v0's real CRDs (built and cached with
//! olm-operator, catalog-operator and opm by `hack/build-olm-v0.sh`) applied to the
//! test control plane, and v0 installations laid down as OLM v0 leaves them once a
//! Subscription is installed (Subscription, CSV with the bundle's properties
//! annotation, InstallPlan, OperatorGroup, CatalogSource, OperatorCondition, each
//! with the status OLM v0 writes). Running olm-operator and catalog-operator themselves
//! is not wired yet (docs/how-to/switch-from-olm-v0.md, "Tests with real OLM v0").
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
            None,
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
