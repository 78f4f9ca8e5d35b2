//! End-to-end on a real node (containerd + runc, kubelet, kube-scheduler, kube-proxy,
//! CoreDNS; `olmv1::testenv::node`): pods really start, Services really route, names
//! really resolve. The node's own smoke test is here; the in-cluster controller's
//! suite is in `e2e/in_cluster.rs`.

#[path = "../tests/support/mod.rs"]
mod support;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{Node, Pod, Service};
use kube::api::{Api, DeleteParams, PostParams};
use serde_json::json;
use support::{eventually, namespace, node_cluster};

#[tokio::test]
async fn a_pod_reaches_a_service_by_its_dns_name() {
    let cluster = node_cluster();
    let node = cluster.node.as_ref().expect("node");
    let admin = cluster.admin().await;
    let nodes: Api<Node> = Api::all(admin.clone());
    let listed = nodes.list(&Default::default()).await.expect("nodes");
    assert_eq!(listed.items.len(), 1, "one node");

    let ns = namespace(&admin, "node").await;
    let deployments: Api<Deployment> = Api::namespaced(admin.clone(), &ns);
    let deployment: Deployment = serde_json::from_value(json!({
        "metadata": {"name": "echo"},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": {"app": "echo"}},
            "template": {
                "metadata": {"labels": {"app": "echo"}},
                "spec": {"containers": [{
                    "name": "echo", "image": node.workload_image, "args": ["serve"],
                    "readinessProbe": {"httpGet": {"path": "/readyz", "port": 8080}, "periodSeconds": 1},
                }]},
            },
        },
    }))
    .expect("deployment");
    deployments
        .create(&PostParams::default(), &deployment)
        .await
        .expect("create deployment");
    let services: Api<Service> = Api::namespaced(admin.clone(), &ns);
    let service: Service = serde_json::from_value(json!({
        "metadata": {"name": "echo"},
        "spec": {"selector": {"app": "echo"}, "ports": [{"port": 80, "targetPort": 8080}]},
    }))
    .expect("service");
    services
        .create(&PostParams::default(), &service)
        .await
        .expect("create service");
    eventually(120, "deployment echo available", || async {
        let d = deployments.get("echo").await.ok()?;
        (d.status?.available_replicas? == 1).then_some(())
    })
    .await;

    let pods: Api<Pod> = Api::namespaced(admin.clone(), &ns);
    let url = format!("http://echo.{ns}.svc.cluster.local/readyz");
    let client: Pod = serde_json::from_value(json!({
        "metadata": {"name": "client"},
        "spec": {"restartPolicy": "Never", "containers": [{
            "name": "get", "image": node.workload_image, "args": ["get", url],
        }]},
    }))
    .expect("pod");
    pods.create(&PostParams::default(), &client)
        .await
        .expect("create pod");
    let phase = eventually(120, "client pod finished", || async {
        let p = pods.get("client").await.ok()?;
        let phase = p.status?.phase?;
        matches!(phase.as_str(), "Succeeded" | "Failed").then_some(phase)
    })
    .await;
    assert_eq!(
        phase, "Succeeded",
        "the client pod could not GET {url} through the Service"
    );
    pods.delete("client", &DeleteParams::default())
        .await
        .expect("delete pod");
    eventually(60, "client pod gone", || async {
        pods.get_opt("client").await.ok()?.is_none().then_some(())
    })
    .await;
}
