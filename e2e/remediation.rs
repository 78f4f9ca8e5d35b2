//! Deadline-based upgrade remediation on a real node (docs/how-to/upgrade-control.md,
//! "Automatic remediation of a failed upgrade"): an extension annotated
//! `upgrade-remediation: Rollback` with `progressDeadlineMinutes: 10` (the API minimum;
//! one "minute" is a second in the test controller) is upgraded to a bundle whose
//! Deployment image cannot be pulled; once the rollout outlasts the deadline the
//! controller goes back to the previous revision from its record, whose pods really run
//! again, and the version gone back to is not reported as ProgressDeadlineExceeded.

use crate::support;

use k8s_openapi::api::apps::v1::Deployment;
use kube::api::{Api, Patch, PatchParams, PostParams};
use olmv1::api::ClusterExtension;
use olmv1::testenv::demo::{self, BundleSpec};
use serde_json::json;
use support::bundles::publish_on_node;
use support::extensions::{condition, create_catalog, extension, grant_installer};
use support::{eventually, namespace, node_cluster};

/// The image of the Deployment's first container, once it is available with every
/// replica updated.
async fn available_image(deployments: &Api<Deployment>, name: &str, what: &str) -> String {
    eventually(180, what, || async {
        let d = deployments.get(name).await.ok()?;
        let s = d.status.as_ref()?;
        let ready = s.available_replicas? >= 1
            && s.updated_replicas? >= 1
            && s.unavailable_replicas.unwrap_or_default() == 0;
        let spec = d.spec.as_ref()?.template.spec.as_ref()?;
        ready.then(|| spec.containers[0].image.clone().unwrap_or_default())
    })
    .await
}

#[tokio::test]
async fn an_upgrade_whose_image_cannot_be_pulled_is_rolled_back_after_the_deadline() {
    let started = std::time::Instant::now();
    let cluster = node_cluster();
    let node = cluster.node.as_ref().expect("node");
    support::controller_with(|args| {
        args.skip_rollout_wait = false;
        args.insecure_registries.push(node.registry.clone());
    });
    let admin = cluster.admin().await;
    let package = support::unique("remedy");
    let mut v1 = BundleSpec::new(&package, "1.0.0");
    v1.operator_image = Some(node.workload_image.clone());
    let mut v2 = BundleSpec::new(&package, "1.1.0");
    v2.replaces = Some(v1.bundle_name());
    v2.operator_image = Some(format!("{}/no-such/image:missing", node.registry));
    let ns = namespace(&admin, "remedy").await;
    let name = support::unique("ext");
    let rendered = [demo::render(&v1, &ns), demo::render(&v2, &ns)]
        .map(|r| r.unwrap_or_else(|e| panic!("{e:#}")));
    grant_installer(&ns, &name, &rendered).await;
    let catalog = support::unique("cat");
    let image = publish_on_node(&catalog, &package, &[v1.clone(), v2.clone()]).await;
    create_catalog(&catalog, &image).await;

    let api: Api<ClusterExtension> = Api::all(admin.clone());
    let mut ext = extension(&name, &ns, &package, json!({"version": "1.0.0"}));
    ext.spec.progress_deadline_minutes = Some(10);
    ext.metadata.annotations = Some(
        [(
            "olm.operatorframework.io/upgrade-remediation".to_string(),
            "Rollback".to_string(),
        )]
        .into(),
    );
    api.create(&PostParams::default(), &ext)
        .await
        .expect("create");
    let deployments: Api<Deployment> = Api::namespaced(admin.clone(), &ns);
    let deployment = v1.deployment_name();
    let running = available_image(&deployments, &deployment, "1.0.0 running").await;
    assert_eq!(running, node.workload_image);
    eventually(120, "1.0.0 Succeeded", || async {
        let e = api.get(&name).await.ok()?;
        (condition(&e, "Progressing")?.reason == "Succeeded").then_some(())
    })
    .await;

    // The upgrade: its image cannot be pulled; after 10 s the controller goes back.
    api.patch(
        &name,
        &PatchParams::default(),
        &Patch::Merge(json!({"spec": {"source": {"catalog": {"version": "1.1.0"}}}})),
    )
    .await
    .expect("pin 1.1.0");
    let e = eventually(180, "rolled back to 1.0.0", || async {
        let e = api.get(&name).await.ok()?;
        let rolled = condition(&e, "RolledBack")?;
        let progressing = condition(&e, "Progressing")?;
        let version = e.status.as_ref()?.install.as_ref()?.bundle.version.clone();
        (rolled.reason == "UpgradeFailed"
            && version == "1.0.0"
            && progressing.reason == "RolledBack")
            .then_some(e)
    })
    .await;
    let rolled = condition(&e, "RolledBack").expect("RolledBack");
    assert!(
        rolled
            .message
            .contains("not ready within progressDeadlineMinutes"),
        "{}",
        rolled.message
    );
    let running = available_image(&deployments, &deployment, "1.0.0 running again").await;
    assert_eq!(running, node.workload_image);
    // Stays on 1.0.0, held, and not ProgressDeadlineExceeded (the clock started over).
    tokio::time::sleep(std::time::Duration::from_secs(12)).await;
    let e = api.get(&name).await.expect("get");
    let progressing = condition(&e, "Progressing").expect("progressing");
    assert_eq!(progressing.reason, "RolledBack", "{}", progressing.message);
    assert_eq!(
        e.status
            .as_ref()
            .and_then(|s| s.install.as_ref())
            .map(|i| i.bundle.version.as_str()),
        Some("1.0.0")
    );
    eprintln!("remediation on a real node took {:?}", started.elapsed());
}
