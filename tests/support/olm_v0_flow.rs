//! The steps the tests with real OLM v0 share (`e2e/migrate_v0.rs`,
//! `e2e/migrate_v0_cluster.rs`; docs/how-to/switch-from-olm-v0.md, "Tests with real
//! OLM v0"): the `olmv1` command line, OLM v0 started, an operator installed through a
//! real Subscription and waited for, its pod, a ClusterExtension's `Succeeded`.

use super::extensions::condition;
use super::olm_v0_run::{self, Programs};
use super::{eventually, olm_v0};
use k8s_openapi::api::core::v1::{Namespace, Pod};
use k8s_openapi::api::rbac::v1::{ClusterRole, PolicyRule};
use kube::api::{Api, ListParams, PostParams};
use olmv1::api::{ClusterCatalog, ClusterExtension};
use olmv1::testenv::demo::BundleSpec;
use serde_json::{Value, json};
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

/// Runs the built `olmv1` with `args`; (exit code, stdout, stderr).
pub fn olmv1(args: &[&str], kubeconfig: &Path) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_olmv1"))
        .args(args)
        .env("KUBECONFIG", kubeconfig)
        .output()
        .expect("run olmv1");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

pub async fn wait_serving(admin: &kube::Client, name: &str) {
    let api: Api<ClusterCatalog> = Api::all(admin.clone());
    eventually(180, "ClusterCatalog Serving", || {
        let api = api.clone();
        async move {
            let c = serde_json::to_value(api.get(name).await.ok()?).ok()?;
            let serving = c["status"]["conditions"]
                .as_array()?
                .iter()
                .any(|x| x["type"] == "Serving" && x["status"] == "True");
            serving.then_some(())
        }
    })
    .await;
}

/// OLM v0 running: its CRDs, its global namespace, olm-operator and catalog-operator.
pub async fn start_v0(admin: &kube::Client, kubeconfig: &Path) -> Programs {
    olm_v0::install_crds(admin).await;
    let namespaces: Api<Namespace> = Api::all(admin.clone());
    if namespaces
        .get_opt(olm_v0_run::GLOBAL_NAMESPACE)
        .await
        .expect("read")
        .is_none()
    {
        let ns: Namespace =
            serde_json::from_value(json!({"metadata": {"name": olm_v0_run::GLOBAL_NAMESPACE}}))
                .expect("ns");
        namespaces
            .create(&PostParams::default(), &ns)
            .await
            .expect("create olm namespace");
    }
    olm_v0_run::start(kubeconfig)
}

/// One v0 installation made by the real programs: the namespace and Subscription.
pub struct V0Install {
    pub ns: String,
    pub sub: String,
    pub csv: String,
}

/// CatalogSource (address), OperatorGroup (`targets`; `[]`: AllNamespaces) and
/// Subscription (`approval`), then — approving the InstallPlan when Manual — waits
/// until the CSV is `Succeeded`.
pub async fn install_through_subscription(
    admin: &kube::Client,
    spec: &BundleSpec,
    address: &str,
    own_namespace: bool,
    approval: &str,
) -> V0Install {
    let ns = super::namespace(admin, "v0").await;
    let sub = format!("{}-sub", spec.package);
    olm_v0::create(
        admin,
        json!({"apiVersion": "operators.coreos.com/v1alpha1", "kind": "CatalogSource",
            "metadata": {"name": "v0-catalog", "namespace": ns},
            "spec": {"sourceType": "grpc", "address": address, "displayName": "v0 test catalog"}}),
        None,
    )
    .await;
    let og_spec = if own_namespace {
        json!({"targetNamespaces": [ns]})
    } else {
        json!({})
    };
    olm_v0::create(
        admin,
        json!({"apiVersion": "operators.coreos.com/v1", "kind": "OperatorGroup",
            "metadata": {"name": "og", "namespace": ns}, "spec": og_spec}),
        None,
    )
    .await;
    olm_v0::create(
        admin,
        json!({"apiVersion": "operators.coreos.com/v1alpha1", "kind": "Subscription",
            "metadata": {"name": sub, "namespace": ns},
            "spec": {"name": spec.package, "source": "v0-catalog", "sourceNamespace": ns,
                "channel": "stable", "installPlanApproval": approval}}),
        None,
    )
    .await;
    if approval == "Manual" {
        approve_install_plan(admin, &ns, &sub).await;
    }
    let csv = spec.bundle_name();
    wait_csv_succeeded(admin, &ns, &csv, 240).await;
    // catalog-operator records the installed CSV on the Subscription a moment after
    // the CSV succeeds; `check` needs it (as the how-to says: AtLatestKnown first).
    wait_at_latest_known(admin, &ns, &sub, &csv).await;
    wait_install_plan_complete(admin, &ns, &sub).await;
    V0Install { ns, sub, csv }
}

/// The Subscription's InstallPlan `Complete` (catalog-operator done with its steps).
pub async fn wait_install_plan_complete(admin: &kube::Client, ns: &str, sub: &str) {
    let subs = olm_v0::api(admin, "v1alpha1", "Subscription", ns);
    let plans = olm_v0::api(admin, "v1alpha1", "InstallPlan", ns);
    eventually(120, "the InstallPlan Complete", || {
        let (subs, plans) = (subs.clone(), plans.clone());
        async move {
            let s = serde_json::to_value(subs.get(sub).await.ok()?).ok()?;
            let name = s["status"]["installPlanRef"]["name"].as_str()?.to_string();
            let p = serde_json::to_value(plans.get(&name).await.ok()?).ok()?;
            (p["status"]["phase"] == "Complete").then_some(())
        }
    })
    .await;
}

pub async fn wait_at_latest_known(admin: &kube::Client, ns: &str, sub: &str, csv: &str) {
    let subs = olm_v0::api(admin, "v1alpha1", "Subscription", ns);
    eventually(
        240,
        &format!("Subscription {ns}/{sub} AtLatestKnown at {csv}"),
        || {
            let subs = subs.clone();
            async move {
                let s = serde_json::to_value(subs.get_opt(sub).await.ok()??).ok()?;
                (s["status"]["state"] == "AtLatestKnown" && s["status"]["installedCSV"] == csv)
                    .then_some(())
            }
        },
    )
    .await;
}

/// Approves the InstallPlan the Subscription names (OLM v0 may make stray ones).
pub async fn approve_install_plan(admin: &kube::Client, ns: &str, sub: &str) {
    let subs = olm_v0::api(admin, "v1alpha1", "Subscription", ns);
    let name = eventually(120, "the Subscription's InstallPlan", || {
        let subs = subs.clone();
        async move {
            let s = serde_json::to_value(subs.get(sub).await.ok()?).ok()?;
            s["status"]["installPlanRef"]["name"]
                .as_str()
                .map(str::to_string)
        }
    })
    .await;
    olm_v0::api(admin, "v1alpha1", "InstallPlan", ns)
        .patch(
            &name,
            &Default::default(),
            &kube::api::Patch::Merge(&json!({"spec": {"approved": true}})),
        )
        .await
        .expect("approve");
}

pub async fn wait_csv_succeeded(admin: &kube::Client, ns: &str, csv: &str, seconds: u64) {
    let csvs = olm_v0::api(admin, "v1alpha1", "ClusterServiceVersion", ns);
    let deadline = Instant::now() + Duration::from_secs(seconds);
    let mut last = Value::Null;
    while Instant::now() < deadline {
        if let Ok(Some(c)) = csvs.get_opt(csv).await {
            let c = serde_json::to_value(c).unwrap_or_default();
            if c["status"]["phase"] == "Succeeded" {
                return;
            }
            last = c["status"].clone();
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    let status =
        json!({"phase": last["phase"], "reason": last["reason"], "message": last["message"]});
    panic!("timed out after {seconds}s waiting for CSV {ns}/{csv} Succeeded; last status {status}");
}

/// The operator's one pod: (name, uid, restart count), once it is running and ready.
pub async fn operator_pod(
    admin: &kube::Client,
    ns: &str,
    deployment: &str,
) -> (String, String, i32) {
    let pods: Api<Pod> = Api::namespaced(admin.clone(), ns);
    let selector = format!("app={deployment}");
    eventually(180, "the operator pod ready", || {
        let (pods, selector) = (pods.clone(), selector.clone());
        async move {
            let list = pods
                .list(&ListParams::default().labels(&selector))
                .await
                .ok()?;
            let [pod] = &list.items[..] else { return None };
            let status = pod.status.as_ref()?;
            let ready = status
                .conditions
                .as_ref()?
                .iter()
                .any(|c| c.type_ == "Ready" && c.status == "True");
            let restarts = status.container_statuses.as_ref()?.first()?.restart_count;
            ready.then(|| {
                (
                    pod.metadata.name.clone().unwrap_or_default(),
                    pod.metadata.uid.clone().unwrap_or_default(),
                    restarts,
                )
            })
        }
    })
    .await
}

/// Waits until the extension `name` is Progressing `Succeeded` (rolled out).
pub async fn wait_succeeded(exts: &Api<ClusterExtension>, name: &str) {
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        let c = exts
            .get(name)
            .await
            .ok()
            .and_then(|e| condition(&e, "Progressing"));
        if c.as_ref()
            .is_some_and(|c| c.status == "True" && c.reason == "Succeeded")
        {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "{name} not Progressing Succeeded after 120 s: {c:?}"
        );
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

/// An upgrade of a converted operator whose installer account `convert` made for the
/// installed bundle: least privilege names that bundle's objects, so what the next one
/// adds is granted the documented way (docs/how-to/upgrades.md: `olmv1 rbac --diff`).
pub struct Upgrade<'a> {
    pub package: &'a str,
    /// The version upgraded to, and from.
    pub version: &'a str,
    pub from: &'a str,
    /// The ClusterCatalog serving it (read once it serves the bundle).
    pub catalog: &'a str,
    pub namespace: &'a str,
    /// The ClusterExtension (its installer is `<extension>-installer`).
    pub extension: &'a str,
    /// The plain-HTTP registry of the bundles.
    pub registry: &'a str,
}

impl Upgrade<'_> {
    /// Adds the rules `olmv1 rbac <package>@<version> --diff <from>` prints to the
    /// installer's ClusterRole, as an administrator would.
    pub async fn grant(&self, admin: &kube::Client, kubeconfig: &Path) {
        let package_at = format!("{}@{}", self.package, self.version);
        let args = [
            "rbac",
            &package_at,
            "--catalog",
            self.catalog,
            "--diff",
            self.from,
            "--namespace",
            self.namespace,
            "--extension",
            self.extension,
            "--operator-condition",
            "--insecure-registry",
            self.registry,
        ];
        let what = format!("olmv1 rbac for {package_at} from the catalog");
        let rbac = eventually(120, &what, || async {
            let (code, rbac, err) = olmv1(&args, kubeconfig);
            if code != 0 {
                eprintln!("[upgrade] olmv1 rbac: {err}");
            }
            (code == 0).then_some(rbac)
        })
        .await;
        println!("[upgrade] olmv1 rbac --diff {}:\n{rbac}", self.from);
        let added: Value =
            olmv1::yaml::from_multiple::<Value>(&rbac, serde_saphyr::Options::default())
                .expect("rbac YAML")
                .into_iter()
                .next()
                .expect("the added rules");
        let roles: Api<ClusterRole> = Api::all(admin.clone());
        let role_name = format!("{}-installer-clusterrole", self.extension);
        let mut role = roles
            .get(&role_name)
            .await
            .expect("the installer's ClusterRole");
        let more: Vec<PolicyRule> = serde_json::from_value(added["rules"].clone()).expect("rules");
        role.rules.get_or_insert_default().extend(more);
        roles
            .replace(&role_name, &PostParams::default(), &role)
            .await
            .unwrap_or_else(|e| panic!("grant what {package_at} adds: {e}"));
    }
}
