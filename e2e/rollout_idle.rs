//! Readiness from events (docs/concepts/rollout-status.md, "Readiness from events"): a
//! controller that waits for rollouts, with extensions whose Deployments never become
//! ready (the control plane has no nodes), sends next to no API requests while nothing
//! changes — the watches it already has follow the Deployments, and a rollout in progress
//! is only checked again as a safety net every 10 minutes — and reports the rollout done
//! as soon as a Deployment becomes available (the test plays the kubelet, as
//! e2e/rollout.rs does; kube-controller-manager turns the pods' status into the
//! Deployment's).

use crate::support;

use k8s_openapi::api::apps::v1::Deployment;
use kube::api::{Api, PostParams};
use olmv1::api::{ClusterCatalog, ClusterExtension};
use serde_json::json;
use std::time::{Duration, Instant};
use support::bundles::{self, BundleSpec};
use support::extensions::{
    condition, extension, grant_installer, publish, wait_progressing_message,
};
use support::pods::{pods, set_pod_status};

/// Extensions stuck rolling out.
const STUCK: usize = 6;
/// How long a rollout is checked every 15 s even while watched (60 s in production:
/// `--young-rollout-seconds`); the idle window begins after it and one more recheck.
const YOUNG: Duration = Duration::from_secs(5);
/// The idle window over which requests are counted.
const WINDOW: Duration = Duration::from_secs(20);

/// A catalog that is not polled (tag polls are traffic of their own, not the rollouts').
async fn create_unpolled_catalog(admin: &kube::Client, name: &str, image: &str) {
    let catalog: ClusterCatalog = serde_json::from_value(json!({
        "apiVersion": "olm.operatorframework.io/v1", "kind": "ClusterCatalog",
        "metadata": {"name": name},
        "spec": {"source": {"type": "Image", "image": {"ref": image}}},
    }))
    .expect("catalog");
    Api::<ClusterCatalog>::all(admin.clone())
        .create(&PostParams::default(), &catalog)
        .await
        .expect("create catalog");
}

#[tokio::test]
async fn stuck_rollouts_send_no_requests_and_readiness_comes_from_events() {
    let controller = support::controller_with(|args| {
        args.skip_rollout_wait = false;
        args.young_rollout_seconds = YOUNG.as_secs();
    });
    let admin = support::cluster().admin().await;
    let api: Api<ClusterExtension> = Api::all(admin.clone());
    // One package each (bundles hold cluster-scoped objects: CRDs, ClusterRoles).
    let mut stuck = Vec::new();
    for _ in 0..STUCK {
        let package = support::unique("idle");
        let bundle = BundleSpec::new(&package, "1.0.0");
        let catalog = support::unique("cat");
        let image = publish(&catalog, &package, std::slice::from_ref(&bundle)).await;
        create_unpolled_catalog(&admin, &catalog, &image).await;
        let ns = support::namespace(&admin, "idle").await;
        let name = support::unique("ext");
        grant_installer(&ns, &name, &[bundles::render(&bundle, &ns)]).await;
        api.create(
            &PostParams::default(),
            &extension(&name, &ns, &package, json!({})),
        )
        .await
        .expect("create");
        stuck.push((ns, name, bundle));
    }
    for (_, name, _) in &stuck {
        wait_progressing_message(&api, name, "Revision 1.0.0 is rolling out").await;
    }
    // While a rollout is young it is checked every 15 s (pod waiting reasons are not
    // watched): the recheck at 15 s finds it past YOUNG, and after that only events or
    // the 10-minute safety re-check come.
    tokio::time::sleep(Duration::from_secs(15) + YOUNG + Duration::from_secs(5)).await;
    let metrics = controller
        .observers
        .metrics
        .get()
        .expect("controller metrics");
    let before = metrics.api_requests_total();
    tokio::time::sleep(WINDOW).await;
    let sent = metrics.api_requests_total() - before;
    let rate = sent as f64 / WINDOW.as_secs_f64();
    eprintln!("{STUCK} stuck rollouts: {sent} API requests in {WINDOW:?} ({rate:.3}/s)");
    assert!(rate <= 0.1, "{sent} requests in {WINDOW:?}");
    for (_, name, _) in &stuck {
        let e = api.get(name).await.expect("get");
        assert_eq!(
            condition(&e, "Progressing").map(|c| c.reason).as_deref(),
            Some("RollingOut"),
            "still rolling out"
        );
    }

    // The Deployment of one becomes available: that extension is Succeeded at once.
    let (ns, name, bundle) = &stuck[0];
    let deployment = bundle.deployment_name();
    for pod in pods(&admin, ns, &deployment).await {
        set_pod_status(&admin, ns, &pod, None).await;
    }
    let deployments: Api<Deployment> = Api::namespaced(admin.clone(), ns);
    let available = || async {
        let d = deployments.get(&deployment).await.ok()?;
        let status = d.status?;
        (status.available_replicas.unwrap_or(0) >= 1).then_some(())
    };
    let started = Instant::now();
    while available().await.is_none() {
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "never available"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let became = Instant::now();
    let done = support::eventually(30, "rolled out", || async {
        let e = api.get(name).await.ok()?;
        (condition(&e, "Progressing")?.reason == "Succeeded").then_some(())
    });
    done.await;
    let latency = became.elapsed();
    eprintln!("readiness reported {latency:?} after the Deployment became available");
    assert!(latency <= Duration::from_secs(2), "{latency:?}");
    let others = api.get(&stuck[1].1).await.expect("get");
    assert_eq!(
        condition(&others, "Progressing")
            .map(|c| c.reason)
            .as_deref(),
        Some("RollingOut"),
        "only the extension whose Deployment changed"
    );
}
