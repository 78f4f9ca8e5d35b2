//! Pods of the node-less control plane: kube-controller-manager creates them, nothing
//! runs them, so tests write their status as a kubelet would.

use k8s_openapi::api::core::v1::Pod;
use kube::Api;
use kube::api::{ListParams, Patch, PatchParams};
use serde_json::{Value, json};

/// The pods of `deployment` (label `app=<deployment>`), once the controllers made them.
pub async fn pods(admin: &kube::Client, ns: &str, deployment: &str) -> Vec<String> {
    let api: Api<Pod> = Api::namespaced(admin.clone(), ns);
    super::eventually(60, &format!("pods of {deployment}"), || async {
        let list = api
            .list(&ListParams::default().labels(&format!("app={deployment}")))
            .await
            .ok()?;
        let names: Vec<String> = list
            .items
            .into_iter()
            .filter_map(|p| p.metadata.name)
            .collect();
        (!names.is_empty()).then_some(names)
    })
    .await
}

/// Writes a pod's status as a kubelet would: ready and running, or waiting for `reason`
/// (nothing for a pod deleted meanwhile).
pub async fn set_pod_status(admin: &kube::Client, ns: &str, pod: &str, waiting: Option<&str>) {
    let now = jiff::Timestamp::now().to_string();
    let ready = if waiting.is_none() { "True" } else { "False" };
    let state = match waiting {
        None => json!({"running": {"startedAt": now}}),
        Some(reason) => json!({"waiting": {"reason": reason, "message": "simulated"}}),
    };
    let status: Value = json!({"status": {
        "phase": if waiting.is_none() { "Running" } else { "Pending" },
        "conditions": [
            {"type": "Ready", "status": ready, "lastTransitionTime": now},
            {"type": "ContainersReady", "status": ready, "lastTransitionTime": now},
        ],
        "containerStatuses": [{
            "name": "manager", "image": "example.com/manager:1", "imageID": "",
            "ready": waiting.is_none(), "restartCount": 0, "started": waiting.is_none(),
            "state": state,
        }],
    }});
    let written = Api::<Pod>::namespaced(admin.clone(), ns)
        .patch_status(pod, &PatchParams::default(), &Patch::Merge(&status))
        .await;
    match written {
        Ok(_) => {}
        // Deleted since it was listed (a rollout's ReplicaSet scaled down): no kubelet
        // writes it either.
        Err(kube::Error::Api(e)) if e.code == 404 => {}
        Err(e) => panic!("writing the status of pod {pod}: {e}"),
    }
}
