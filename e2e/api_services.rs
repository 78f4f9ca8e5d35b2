//! End to end with real cert-manager on the real node (`support::node_cluster_with_cert_manager`):
//! a bundle owning an APIService, served by `hack/testimage apiserver` as an aggregated
//! API server, is installed by olmv1 with cert-manager as the certificate provider.
//! cert-manager issues the serving certificate, its cainjector puts the CA into the
//! APIService, the pod starts with the certificate mounted at OLM v0's paths, the API
//! server marks the APIService Available and proxies `widgets` requests to it, and the
//! ClusterExtension reports the rollout done. Then the uninstall removes the APIService.

use crate::support;

use k8s_openapi::api::rbac::v1::{ClusterRoleBinding, RoleBinding};
use kube::api::{Api, DeleteParams, ListParams, PostParams};
use olmv1::api::ClusterExtension;
use olmv1::testenv::demo::BundleSpec;
use serde_json::json;
use support::apiservice_bundle::{
    SERVED_WIDGET, api_service_name, api_services, apiservice_bundle, available, served_widgets,
};
use support::bundles::publish_files_on_node;
use support::extensions::{create_catalog, extension, grant_installer, wait_installed};
use support::webhook_bundle::render;
use support::{eventually, namespace, node_cluster_with_cert_manager};

/// The node's test program must have the aggregated API server mode (hack/build-node.sh
/// rebuilds it from hack/testimage; an older build answers `usage: …`).
fn assert_testimage_serves_apis() {
    let bin = olmv1::testenv::node::NodeBinaries::locate()
        .expect("node binaries")
        .testimage;
    let out = std::process::Command::new(&bin)
        .arg("apiserver")
        .env("CERT_DIR", "/nonexistent")
        .output()
        .expect("run testimage");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("apiserver: loading the serving certificate"),
        "{} has no apiserver mode (run hack/build-node.sh, which rebuilds it from hack/testimage): {stderr}",
        bin.display()
    );
}

#[tokio::test]
async fn an_aggregated_api_server_runs_with_its_apiservice_available() {
    assert_testimage_serves_apis();
    let cluster = node_cluster_with_cert_manager();
    let node = cluster.node.as_ref().expect("node");
    support::controller_with(|args| {
        args.skip_rollout_wait = false;
        args.insecure_registries.push(node.registry.clone());
    });
    let admin = cluster.admin().await;

    let package = support::unique("aggr");
    let spec = BundleSpec::new(&package, "1.0.0");
    let files = apiservice_bundle(&spec, &node.workload_image);
    let ns = namespace(&admin, "apis").await;
    let name = support::unique("ext");
    grant_installer(&ns, &name, &[render(&files, &package, &ns)]).await;
    let catalog = support::unique("cat");
    let image = publish_files_on_node(&catalog, &spec, &files).await;
    create_catalog(&catalog, &image).await;

    let started = std::time::Instant::now();
    let api: Api<ClusterExtension> = Api::all(admin.clone());
    api.create(
        &PostParams::default(),
        &extension(&name, &ns, &package, json!({})),
    )
    .await
    .expect("create extension");
    wait_installed(&api, &name, "1.0.0").await;

    // olmv1 waited for the rollout, which includes the APIService Available.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(180);
    loop {
        let e = api.get(&name).await.expect("extension");
        let p = support::extensions::condition(&e, "Progressing").expect("Progressing");
        if p.status == "True" && p.reason == "Succeeded" {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "Progressing not Succeeded after 180 s: {}/{}: {}",
            p.status,
            p.reason,
            p.message
        );
        tokio::time::sleep(std::time::Duration::from_millis(500)).await;
    }
    eprintln!(
        "installed and rolled out in {:.1} s",
        started.elapsed().as_secs_f64()
    );
    let apis = api_services(&admin);
    let apiservice = apis
        .get(&api_service_name(&package))
        .await
        .expect("APIService");
    let (status, reason, message) = available(&apiservice).expect("Available condition");
    assert_eq!(status, "True", "{reason}: {message}");
    assert!(
        apiservice.data["spec"]["caBundle"]
            .as_str()
            .is_some_and(|b| !b.is_empty()),
        "caBundle injected"
    );

    // The API server proxies the aggregated group to the operator's pod.
    let widgets = served_widgets(&admin, &ns, &package);
    let list = eventually(60, "widgets listed through the API server", || async {
        match widgets.list(&ListParams::default()).await {
            Ok(l) => Some(l),
            Err(e) => {
                eprintln!("listing widgets: {e}");
                None
            }
        }
    })
    .await;
    let names: Vec<(Option<String>, Option<String>)> = list
        .items
        .iter()
        .map(|w| (w.metadata.name.clone(), w.metadata.namespace.clone()))
        .collect();
    assert_eq!(
        names,
        vec![(Some(SERVED_WIDGET.to_string()), Some(ns.clone()))]
    );

    // olmv1's drift correction and the cainjector do not fight over the APIService:
    // the injected caBundle is a field olmv1 does not apply.
    let version = || async {
        apis.get(&api_service_name(&package))
            .await
            .expect("APIService")
            .metadata
            .resource_version
    };
    let before = version().await;
    tokio::time::sleep(std::time::Duration::from_secs(5)).await;
    assert_eq!(version().await, before, "APIService rewritten");

    // Uninstall: the APIService and the bindings go.
    let svc = format!("{}-service", spec.deployment_name());
    api.delete(&name, &DeleteParams::default())
        .await
        .expect("delete extension");
    eventually(180, "the extension gone", || async {
        api.get_opt(&name).await.ok()?.is_none().then_some(())
    })
    .await;
    let crbs: Api<ClusterRoleBinding> = Api::all(admin.clone());
    let rbs: Api<RoleBinding> = Api::namespaced(admin.clone(), "kube-system");
    eventually(120, "the APIService and bindings removed", || async {
        let gone = [
            apis.get_opt(&api_service_name(&package))
                .await
                .ok()?
                .is_none(),
            crbs.get_opt(&format!("{svc}-system:auth-delegator"))
                .await
                .ok()?
                .is_none(),
            rbs.get_opt(&format!("{svc}-auth-reader"))
                .await
                .ok()?
                .is_none(),
        ];
        gone.iter().all(|g| *g).then_some(())
    })
    .await;
}
