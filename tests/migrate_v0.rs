//! `olmv1 migrate check` (docs/how-to/switch-from-olm-v0.md) run as users run it, the
//! built binary against the real control plane with OLM v0's real CRDs
//! (`hack/build-olm-v0.sh`) and the real controller serving a real ClusterCatalog from
//! the test registry. Two v0 installations are laid down as OLM v0 leaves them
//! (`support::olm_v0`): one from an image-based CatalogSource whose image the
//! ClusterCatalog serves (eligible: the ClusterExtension pins the version for Manual
//! approval, names the default channel, keeps the OwnNamespace watch, carries the
//! Subscription's config, selects the catalog; the installer RBAC is `olmv1 rbac`'s),
//! one from a gRPC address CatalogSource (blocked, with what to do).

mod support;

use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind};
use serde_json::{Value, json};
use std::path::Path;
use std::process::Command;
use support::bundles::BundleSpec;
use support::extensions::{create_catalog, publish};
use support::olm_v0::{self, Installation};

/// Runs the built `olmv1` with `args`; (exit code, stdout, stderr).
fn olmv1(args: &[&str], kubeconfig: &Path) -> (i32, String, String) {
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

async fn wait_serving(admin: &kube::Client, name: &str) {
    let r = ApiResource::from_gvk(&GroupVersionKind::gvk(
        "olm.operatorframework.io",
        "v1",
        "ClusterCatalog",
    ));
    let api: Api<DynamicObject> = Api::all_with(admin.clone(), &r);
    support::eventually(120, "ClusterCatalog Serving", || {
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

#[tokio::test]
async fn check_says_eligible_with_the_extension_or_names_each_blocker() {
    support::controller();
    let cluster = support::cluster();
    let kubeconfig = cluster.admin_kubeconfig.clone();
    let admin = cluster.admin().await;
    olm_v0::install_crds(&admin).await;

    let package = support::unique("mig");
    let spec = BundleSpec::new(&package, "1.0.0");
    let catalog = support::unique("migcat");
    let image = publish(&catalog, &package, std::slice::from_ref(&spec)).await;
    create_catalog(&catalog, &image).await;
    wait_serving(&admin, &catalog).await;

    // Image-based CatalogSource, Manual approval, no channel, OwnNamespace.
    let ns = support::namespace(&admin, "mig").await;
    olm_v0::create(
        &admin,
        json!({"apiVersion": "operators.coreos.com/v1alpha1", "kind": "CatalogSource",
            "metadata": {"name": "demo-catalog", "namespace": ns},
            "spec": {"sourceType": "grpc", "image": image, "priority": -5,
                "updateStrategy": {"registryPoll": {"interval": "10m"}}}}),
        None,
    )
    .await;
    let csv = spec.bundle_name();
    Installation {
        ns: &ns,
        name: "demo",
        package: &package,
        version: "1.0.0",
        csv: &csv,
        catalog_source: (&ns, "demo-catalog"),
        targets: json!([ns]),
        spec_extra: json!({"installPlanApproval": "Manual",
            "config": {"env": [{"name": "LOG_LEVEL", "value": "debug"}]}}),
    }
    .lay_down(&admin)
    .await;

    let target = format!("{ns}/demo");
    let registry = support::registry().host();
    let (code, out, err) = olmv1(
        &[
            "migrate",
            "check",
            &target,
            "-o",
            "json",
            "--insecure-registry",
            registry,
        ],
        &kubeconfig,
    );
    assert_eq!(code, 0, "eligible exits 0: {err}\n{out}");
    let checks: Vec<Value> = serde_json::from_str(&out).expect("json");
    let c = &checks[0];
    assert_eq!(c["eligible"], true, "{c:#}");
    assert_eq!(c["version"], "1.0.0");
    let cat = &c["clusterExtension"]["spec"]["source"]["catalog"];
    assert_eq!(cat["packageName"], package.as_str());
    assert_eq!(cat["channels"], json!(["stable"]));
    assert_eq!(cat["version"], "1.0.0");
    assert_eq!(
        cat["selector"]["matchLabels"]["olm.operatorframework.io/metadata.name"],
        catalog.as_str()
    );
    let inline = &c["clusterExtension"]["spec"]["config"]["inline"];
    assert_eq!(inline["watchNamespace"], ns.as_str());
    assert_eq!(inline["deploymentConfig"]["env"][0]["name"], "LOG_LEVEL");
    assert_eq!(c["clusterCatalog"]["name"], catalog.as_str());
    assert_eq!(c["clusterCatalog"]["reused"], true);
    let rbac = c["installer"]["rbac"].as_str().expect("rbac");
    assert!(
        rbac.contains("kind: ClusterRole") && rbac.contains("demo-installer"),
        "{rbac}"
    );
    let kinds: Vec<&str> = c["v0Objects"]
        .as_array()
        .expect("objects")
        .iter()
        .filter_map(|o| o["kind"].as_str())
        .collect();
    for k in [
        "Subscription",
        "ClusterServiceVersion",
        "OperatorCondition",
        "InstallPlan",
        "OperatorGroup",
        "CatalogSource",
    ] {
        assert!(kinds.contains(&k), "{k} missing from {kinds:?}");
    }
    let (code, table, _) = olmv1(&["migrate", "check", &target, "--no-rbac"], &kubeconfig);
    assert_eq!(code, 0);
    println!("{table}");
    assert!(
        table.contains(&format!("{target}  {package}  {csv}  eligible")),
        "{table}"
    );

    // A gRPC address CatalogSource in another namespace: blocked, with what to do.
    let ns2 = support::namespace(&admin, "mig").await;
    olm_v0::create(
        &admin,
        json!({"apiVersion": "operators.coreos.com/v1alpha1", "kind": "CatalogSource",
            "metadata": {"name": "local", "namespace": ns2},
            "spec": {"sourceType": "grpc", "address": "127.0.0.1:50051"}}),
        None,
    )
    .await;
    Installation {
        ns: &ns2,
        name: "addr",
        package: &package,
        version: "1.0.0",
        csv: &csv,
        catalog_source: (&ns2, "local"),
        targets: json!([]),
        spec_extra: json!({"channel": "stable"}),
    }
    .lay_down(&admin)
    .await;
    let target2 = format!("{ns2}/addr");
    let (code, table, _) = olmv1(&["migrate", "check", &target2, "--no-rbac"], &kubeconfig);
    println!("{table}");
    assert_eq!(code, 1, "a blocked Subscription exits 1: {table}");
    assert!(
        table.contains("is not image-based: it has a gRPC address (127.0.0.1:50051)"),
        "{table}"
    );
    assert!(
        table.contains("what to do: publish the catalog as a file-based catalog image"),
        "{table}"
    );
    // The address CatalogSource blocks, but the package is still found in the catalog.
    assert!(
        !table.contains("no Serving ClusterCatalog holds"),
        "{table}"
    );

    let (code, out, _) = olmv1(
        &["migrate", "check", "--all", "-o", "yaml", "--no-rbac"],
        &kubeconfig,
    );
    assert_eq!(code, 1, "--all with one blocked Subscription exits 1");
    assert!(out.contains(&target) && out.contains(&target2), "{out}");
}
