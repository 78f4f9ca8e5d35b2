//! [`super::assess`] over live objects as the API server reports them.

use super::*;
use serde_json::json;

fn deployment(generation: i64, status: Value) -> Value {
    json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "foo", "namespace": "ns", "generation": generation},
        "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "foo"}}},
        "status": status,
    })
}

fn available() -> Value {
    deployment(
        2,
        json!({"observedGeneration": 2, "replicas": 1, "updatedReplicas": 1,
               "readyReplicas": 1, "availableReplicas": 1,
               "conditions": [{"type": "Available", "status": "True"}]}),
    )
}

fn unavailable() -> Value {
    deployment(
        1,
        json!({"observedGeneration": 1, "replicas": 1, "updatedReplicas": 1,
               "unavailableReplicas": 1,
               "conditions": [
                   {"type": "Available", "status": "False", "reason": "MinimumReplicasUnavailable",
                    "message": "Deployment does not have minimum availability."},
                   {"type": "Progressing", "status": "True", "reason": "ReplicaSetUpdated",
                    "message": "ReplicaSet \"foo-1\" is progressing."}]}),
    )
}

fn pod(waiting: &str) -> Value {
    json!({"metadata": {"name": "foo-1-abc", "namespace": "ns"},
           "status": {"phase": "Pending", "containerStatuses": [
               {"name": "c", "ready": false, "state": {"waiting": {"reason": waiting}}}]}})
}

fn one(object: Value, pods: Vec<Value>) -> Readiness {
    assess(&[Observed { object, pods }])
}

fn not_ready(messages: &[&str]) -> Readiness {
    Readiness::NotReady(messages.iter().map(|m| m.to_string()).collect())
}

#[test]
fn an_available_deployment_is_ready() {
    assert_eq!(one(available(), Vec::new()), Readiness::Ready);
    assert_eq!(state_of(&available()), None);
}

#[test]
fn observed_generation_lagging_is_not_ready() {
    let mut d = available();
    d["metadata"]["generation"] = json!(3);
    assert_eq!(
        one(d, Vec::new()),
        not_ready(&["deployment/foo waiting for the controller to observe generation 3"])
    );
    let fresh = deployment(1, json!({}));
    assert_eq!(
        state_of(&fresh).as_deref(),
        Some("deployment/foo waiting for the controller to observe generation 1")
    );
}

#[test]
fn unavailable_replicas_name_the_condition_message() {
    assert_eq!(
        one(unavailable(), Vec::new()),
        not_ready(&[
            "deployment/foo 0/1 available: Deployment does not have minimum availability."
        ])
    );
}

#[test]
fn pod_waiting_reasons_win_over_the_condition_message() {
    let pods = vec![pod("ImagePullBackOff"), pod("ImagePullBackOff")];
    assert_eq!(
        one(unavailable(), pods),
        not_ready(&["deployment/foo 0/1 available: ImagePullBackOff"])
    );
    let mixed = vec![pod("ImagePullBackOff"), pod("CrashLoopBackOff")];
    assert_eq!(
        one(unavailable(), mixed).message(),
        "deployment/foo 0/1 available: CrashLoopBackOff, ImagePullBackOff",
        "distinct reasons, sorted"
    );
    let mut terminating = pod("ErrImagePull");
    terminating["metadata"]["deletionTimestamp"] = json!("2026-01-01T00:00:00Z");
    assert_eq!(
        one(unavailable(), vec![terminating]).message(),
        "deployment/foo 0/1 available: Deployment does not have minimum availability.",
        "terminating pods are ignored"
    );
}

#[test]
fn unschedulable_pods_and_replica_failures_are_named() {
    let pending = json!({"metadata": {"name": "p"}, "status": {"conditions": [
        {"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}]}});
    assert_eq!(
        one(unavailable(), vec![pending]).message(),
        "deployment/foo 0/1 available: Unschedulable"
    );
    let mut failing = unavailable();
    failing["status"]["replicas"] = json!(0);
    failing["status"]["updatedReplicas"] = json!(0);
    failing["status"]["conditions"] = json!([
        {"type": "Available", "status": "False", "message": "Deployment does not have minimum availability."},
        {"type": "ReplicaFailure", "status": "True", "message": "pods \"foo-1\" is forbidden: exceeded quota"}]);
    assert_eq!(
        one(failing, Vec::new()).message(),
        "deployment/foo 0/1 updated: pods \"foo-1\" is forbidden: exceeded quota"
    );
}

#[test]
fn a_rolling_update_waits_for_old_replicas_and_a_stuck_one_says_why() {
    let mut rolling = available();
    rolling["status"]["replicas"] = json!(2);
    assert_eq!(
        one(rolling, Vec::new()).message(),
        "deployment/foo 1 old replica(s) pending termination"
    );
    let mut stuck = unavailable();
    stuck["status"]["conditions"] = json!([
        {"type": "Progressing", "status": "False", "reason": "ProgressDeadlineExceeded",
         "message": "ReplicaSet \"foo-1\" has timed out progressing."}]);
    assert_eq!(
        one(stuck, Vec::new()).message(),
        "deployment/foo 0/1 available: ReplicaSet \"foo-1\" has timed out progressing."
    );
}

#[test]
fn crd_not_established() {
    let crd = |conditions: Value| {
        json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
               "metadata": {"name": "widgets.example.com", "generation": 1},
               "status": {"conditions": conditions}})
    };
    assert_eq!(
        one(crd(json!([])), Vec::new()),
        not_ready(&["customresourcedefinition/widgets.example.com not Established"])
    );
    assert_eq!(
        one(
            crd(json!([{"type": "Established", "status": "False", "message": "not all names are accepted"}])),
            Vec::new()
        )
        .message(),
        "customresourcedefinition/widgets.example.com not Established: not all names are accepted"
    );
    assert_eq!(
        one(
            crd(json!([{"type": "Established", "status": "True"}])),
            Vec::new()
        ),
        Readiness::Ready
    );
}

#[test]
fn certificate_not_ready() {
    let cert = |generation: i64, observed: i64, ready: &str| {
        json!({"apiVersion": "cert-manager.io/v1", "kind": "Certificate",
               "metadata": {"name": "webhook-cert", "namespace": "ns", "generation": generation},
               "status": {"conditions": [{"type": "Ready", "status": ready,
                   "observedGeneration": observed, "message": "Issuing certificate as Secret does not exist"}]}})
    };
    assert_eq!(
        one(cert(1, 1, "False"), Vec::new()).message(),
        "certificate/webhook-cert not Ready: Issuing certificate as Secret does not exist"
    );
    assert_eq!(one(cert(1, 1, "True"), Vec::new()), Readiness::Ready);
    assert_eq!(
        one(cert(2, 1, "True"), Vec::new()).message(),
        "certificate/webhook-cert waiting for the controller to observe generation 2"
    );
}

#[test]
fn stateful_sets_daemon_sets_and_api_services() {
    let sts = json!({"apiVersion": "apps/v1", "kind": "StatefulSet",
        "metadata": {"name": "db", "generation": 1}, "spec": {"replicas": 3},
        "status": {"observedGeneration": 1, "readyReplicas": 2, "updatedReplicas": 3}});
    let ds = json!({"apiVersion": "apps/v1", "kind": "DaemonSet",
        "metadata": {"name": "agent", "generation": 1},
        "status": {"observedGeneration": 1, "desiredNumberScheduled": 2,
                   "updatedNumberScheduled": 2, "numberAvailable": 1}});
    let api = json!({"apiVersion": "apiregistration.k8s.io/v1", "kind": "APIService",
        "metadata": {"name": "v1.metrics.example.com"},
        "status": {"conditions": [{"type": "Available", "status": "False",
                                   "message": "service/metrics has no endpoints"}]}});
    let config_map = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}});
    let all: Vec<Observed> = [sts, ds, api, config_map, available()]
        .into_iter()
        .map(|object| Observed {
            object,
            pods: Vec::new(),
        })
        .collect();
    assert_eq!(
        assess(&all),
        not_ready(&[
            "apiservice/v1.metrics.example.com not Available: service/metrics has no endpoints",
            "daemonset/agent 1/2 available",
            "statefulset/db 2/3 ready",
        ]),
        "sorted, ready and unchecked objects left out"
    );
}

#[test]
fn checked_kinds() {
    assert!(is_checked("apps", "Deployment"));
    assert!(is_checked(
        "apiextensions.k8s.io",
        "CustomResourceDefinition"
    ));
    assert!(!is_checked("", "ConfigMap"));
    assert!(!is_checked("", "Deployment"));
}

#[test]
fn pods_are_listed_only_when_their_reasons_can_show() {
    // Observed and not available: the message names the pods' reasons.
    assert!(reads_pods(&unavailable()));
    assert_eq!(
        one(unavailable(), vec![pod("ImagePullBackOff")]),
        not_ready(&["deployment/foo 0/1 available: ImagePullBackOff"])
    );
    // Just applied (a generation its controller has not observed, or no status at all):
    // the message is the lag's whatever the pods say, so they are not listed.
    let mut changed = unavailable();
    changed["metadata"]["generation"] = json!(2);
    assert!(!reads_pods(&changed));
    assert_eq!(
        one(changed.clone(), vec![pod("ImagePullBackOff")]),
        one(changed, Vec::new())
    );
    assert!(!reads_pods(&deployment(1, json!({}))));
    // Ready, or not a Deployment: nothing to list.
    assert!(!reads_pods(&available()));
    let mut set = unavailable();
    set["kind"] = json!("StatefulSet");
    assert!(!reads_pods(&set));
}
