//! Rollout status end to end (docs/reference/api-and-status.md §2.1, §2.5): a controller
//! that waits for rollouts (the other test binaries start theirs with
//! `--skip-rollout-wait`). The control plane has no nodes and no kubelet, so the test
//! plays the kubelet: it writes the pods' status through the `pods/status` subresource,
//! and kube-controller-manager turns that into the ReplicaSet's and Deployment's status
//! as it would on a real cluster. Checked: `RollingOut` with the Deployment's state while
//! nothing is ready, the pods' waiting reason (`ImagePullBackOff`) in the message,
//! `Succeeded` once available, back to `RollingOut` with a Warning Event when the
//! workload loses availability, and `ProgressDeadlineExceeded` when that lasts longer
//! than `progressDeadlineMinutes` (one "minute" is a second in the tests).

use crate::support;

use k8s_openapi::api::core::v1::Event;
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams};
use olmv1::api::ClusterExtension;
use serde_json::json;
use support::bundles::{self, BundleSpec};
use support::extensions::{
    condition, create_catalog, extension, grant_installer, publish, wait_progressing_message,
};
use support::pods::{pods, set_pod_status};

async fn wait_reason(api: &Api<ClusterExtension>, name: &str, reason: &str) -> ClusterExtension {
    support::eventually(90, &format!("{name} Progressing {reason}"), || async {
        let e = api.get(name).await.ok()?;
        (condition(&e, "Progressing")?.reason == reason).then_some(e)
    })
    .await
}

async fn event_notes(admin: &kube::Client, name: &str, reason: &str) -> Vec<String> {
    let events: Api<Event> = Api::all(admin.clone());
    let selector = format!("involvedObject.name={name}");
    events
        .list(&ListParams::default().fields(&selector))
        .await
        .map(|l| l.items)
        .unwrap_or_default()
        .into_iter()
        .filter(|e| e.reason.as_deref() == Some(reason))
        .filter_map(|e| e.message)
        .collect()
}

#[tokio::test]
async fn rolling_out_until_available_then_deadline_when_it_is_lost() {
    support::controller_with(|args| args.skip_rollout_wait = false);
    let admin = support::cluster().admin().await;
    let package = support::unique("roll");
    let ns = support::namespace(&admin, "roll").await;
    let name = support::unique("ext");
    let v1 = BundleSpec::new(&package, "1.0.0");
    grant_installer(&ns, &name, &[bundles::render(&v1, &ns)]).await;
    let catalog = support::unique("cat");
    let image = publish(&catalog, &package, std::slice::from_ref(&v1)).await;
    create_catalog(&catalog, &image).await;

    let api: Api<ClusterExtension> = Api::all(admin.clone());
    api.create(
        &PostParams::default(),
        &extension(&name, &ns, &package, json!({})),
    )
    .await
    .expect("create");

    // Applied, nothing ready: Installed True, Progressing RollingOut naming the Deployment.
    let deployment = v1.deployment_name();
    let waiting = format!("Revision 1.0.0 is rolling out: deployment/{deployment} 0/1 available");
    let e = wait_progressing_message(&api, &name, &waiting).await;
    let progressing = condition(&e, "Progressing").expect("progressing");
    eprintln!("while rolling out: {progressing:?}");
    assert_eq!(
        (progressing.status.as_str(), progressing.reason.as_str()),
        ("True", "RollingOut")
    );
    assert_eq!(
        condition(&e, "Installed").map(|c| c.status).as_deref(),
        Some("True"),
        "Installed keeps meaning applied"
    );

    // The kubelet cannot pull the image: the pods' waiting reason is named.
    let pod_names = pods(&admin, &ns, &deployment).await;
    for pod in &pod_names {
        set_pod_status(&admin, &ns, pod, Some("ImagePullBackOff")).await;
    }
    let e = wait_progressing_message(&api, &name, &format!("{waiting}: ImagePullBackOff")).await;
    assert_eq!(
        condition(&e, "Progressing").map(|c| c.reason).as_deref(),
        Some("RollingOut")
    );

    // Pods ready: the Deployment becomes available and the rollout is done.
    for pod in &pod_names {
        set_pod_status(&admin, &ns, pod, None).await;
    }
    let e = wait_reason(&api, &name, "Succeeded").await;
    assert_eq!(
        condition(&e, "Progressing").map(|c| c.message).as_deref(),
        Some("Desired state reached")
    );
    assert!(!event_notes(&admin, &name, "RolledOut").await.is_empty());

    // A deadline, then the workload loses availability: RollingOut again with a Warning
    // Event, and ProgressDeadlineExceeded once that lasted 10 "minutes".
    let patch = json!({"spec": {"progressDeadlineMinutes": 10}});
    api.patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .expect("set progressDeadlineMinutes");
    tokio::time::sleep(std::time::Duration::from_secs(1)).await;
    let lost = std::time::Instant::now();
    for pod in &pod_names {
        set_pod_status(&admin, &ns, pod, Some("CrashLoopBackOff")).await;
    }
    let unavailable = format!("{waiting}: CrashLoopBackOff");
    wait_progressing_message(&api, &name, &unavailable).await;
    let notes = event_notes(&admin, &name, "NotReady").await;
    assert!(
        notes.iter().any(|n| n.contains("is no longer ready")),
        "{notes:?}"
    );
    let e = wait_reason(&api, &name, "ProgressDeadlineExceeded").await;
    eprintln!("deadline exceeded after {:?}", lost.elapsed());
    let progressing = condition(&e, "Progressing").expect("progressing");
    assert_eq!(progressing.status, "False");
    assert_eq!(
        progressing.message,
        format!("Revision has not rolled out for 10 minute(s). Last status: {unavailable}")
    );
    assert!(lost.elapsed() >= std::time::Duration::from_secs(10));
    assert!(
        !event_notes(&admin, &name, "ProgressDeadlineExceeded")
            .await
            .is_empty()
    );
    assert_eq!(
        condition(&e, "Installed").map(|c| c.status).as_deref(),
        Some("True")
    );

    // Recovers when the pods are ready again.
    for pod in &pod_names {
        set_pod_status(&admin, &ns, pod, None).await;
    }
    wait_reason(&api, &name, "Succeeded").await;
}
