//! Operations of the controller process, end to end against the test control plane:
//! two `olmv1 controller --leader-elect` processes (the real binary) share the Lease
//! `olmv1-system/olmv1-controller`; exactly one reconciles; `/metrics` reports a failing
//! ClusterCatalog (errors counter, condition gauge); JSON log lines carry the catalog
//! name from the `reconcile` span; the idle API request rate is measured; SIGKILL of
//! the leader hands the lease to the standby within the lease duration; a leader whose
//! lease is taken exits non-zero. The standby serves the same catalog content as the
//! leader (its catalog follower), drops the content of deleted catalogs, and after the
//! takeover serves on without a gap, re-ingesting nothing and leaving the status as it was.
use crate::support;

use k8s_openapi::api::coordination::v1::Lease;
use kube::Api;
use kube::api::{DeleteParams, Patch, PatchParams, PostParams};
use olmv1::api::{ClusterCatalog, ClusterExtension};
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::time::{Duration, Instant};
use support::bundles::{self, BundleSpec};
use support::process::{ControllerProcess, NAMESPACE};

/// The lease duration of the replicas: 5 s, or `OLMV1_OPS_LEASE_SECONDS` (e.g. 15, the
/// default of `--lease-duration-seconds`, to measure the idle request rate as deployed).
fn lease_seconds() -> u64 {
    std::env::var("OLMV1_OPS_LEASE_SECONDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(5)
}

struct Replica {
    identity: String,
    process: ControllerProcess,
}

impl Replica {
    fn start(identity: &str) -> Replica {
        let lease = lease_seconds().to_string();
        let process = ControllerProcess::start(
            identity,
            &[
                "--log-format",
                "json",
                "--leader-elect",
                "--leader-election-identity",
                identity,
                "--lease-duration-seconds",
                &lease,
            ],
        );
        Replica {
            identity: identity.to_string(),
            process,
        }
    }

    /// Status code and body of `GET /catalogs/<name>/api/v1/all` on this replica.
    async fn catalog_all(&self, name: &str) -> Option<(u16, String)> {
        let url = format!(
            "http://127.0.0.1:{}/catalogs/{name}/api/v1/all",
            self.process.catalog_port
        );
        let response = reqwest::get(&url).await.ok()?;
        let code = response.status().as_u16();
        Some((code, response.text().await.ok()?))
    }

    async fn metrics(&self) -> Option<String> {
        self.process.metrics().await
    }

    async fn is_leader(&self) -> Option<bool> {
        let text = self.metrics().await?;
        let value = sample(&text, "olmv1_leader")?;
        Some(value == 1.0)
    }

    /// The sum of `olmv1_kube_api_requests_total` over all verbs.
    async fn api_requests(&self) -> f64 {
        let text = self.metrics().await.expect("metrics");
        text.lines()
            .filter(|l| l.starts_with("olmv1_kube_api_requests_total{"))
            .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
            .sum()
    }

    fn log_lines(&self) -> Vec<Value> {
        let text = self.process.log_text();
        text.lines()
            .map(|l| {
                serde_json::from_str::<Value>(l).unwrap_or_else(|e| {
                    panic!("log line of {} is not JSON ({e}): {l}", self.identity)
                })
            })
            .collect()
    }
}

/// The value of the series whose line starts with `series ` (exact labels).
fn sample(text: &str, series: &str) -> Option<f64> {
    text.lines()
        .find_map(|l| l.strip_prefix(series)?.strip_prefix(' ')?.parse().ok())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_replicas_metrics_logs_and_takeover() {
    let admin = support::cluster().admin().await;
    let leases: Api<Lease> = Api::namespaced(admin.clone(), NAMESPACE);
    let mut a = Some(Replica::start("replica-a"));
    let mut b = Some(Replica::start("replica-b"));

    // Exactly one holds the lease, and it is the one whose leader gauge is 1.
    let (leader_is_a, holder_id) = support::eventually(60, "one leader", || async {
        let (ra, rb) = (a.as_ref()?, b.as_ref()?);
        let (la, lb) = (ra.is_leader().await?, rb.is_leader().await?);
        let h = support::lease_holder(&leases).await?;
        (la != lb).then_some((la, h))
    })
    .await;
    let (leader, standby) = if leader_is_a {
        (a.as_ref().unwrap(), b.as_ref().unwrap())
    } else {
        (b.as_ref().unwrap(), a.as_ref().unwrap())
    };
    assert_eq!(holder_id, leader.identity, "lease holder vs leader gauge");
    // Stays so (the standby does not steal it).
    tokio::time::sleep(Duration::from_secs(lease_seconds() + 2)).await;
    assert_eq!(
        support::lease_holder(&leases).await.as_deref(),
        Some(leader.identity.as_str())
    );
    assert_eq!(standby.is_leader().await, Some(false));

    // A ClusterCatalog whose image cannot be pulled: errors counter and condition gauge.
    let catalogs: Api<ClusterCatalog> = Api::all(admin.clone());
    let name = support::unique("ops-missing");
    let catalog: ClusterCatalog = serde_json::from_value(json!({
        "apiVersion": "olm.operatorframework.io/v1", "kind": "ClusterCatalog",
        "metadata": {"name": name},
        "spec": {"source": {"type": "Image", "image": {"ref": "127.0.0.1:1/none:v1"}}},
    }))
    .expect("catalog");
    catalogs
        .create(&PostParams::default(), &catalog)
        .await
        .expect("create catalog");
    let progressing = support::eventually(60, "a Progressing condition", || async {
        let c = catalogs.get(&name).await.ok()?;
        let cond = olmv1::api::conditions::find(&c.status?.conditions, "Progressing")?.clone();
        Some(cond)
    })
    .await;
    let condition_series = format!(
        r#"olmv1_clustercatalog_condition{{catalog="{name}",type="Progressing",status="{}"}}"#,
        progressing.status
    );
    let text = support::eventually(30, "catalog metrics on the leader", || async {
        let text = leader.metrics().await?;
        let errors = sample(
            &text,
            r#"olmv1_reconcile_errors_total{controller="clustercatalog",reason="ImagePullFailed"}"#,
        )?;
        (errors >= 1.0 && sample(&text, &condition_series) == Some(1.0)).then_some(text)
    })
    .await;
    // Families without series are not exposed (the extension ones have unit tests).
    for family in [
        "# TYPE olmv1_reconcile_duration_seconds histogram",
        "# TYPE olmv1_reconcile_errors counter",
        "# TYPE olmv1_clustercatalog_condition gauge",
        "# TYPE olmv1_clustercatalog_ingest_duration_seconds histogram",
        "# TYPE olmv1_clustercatalog_ingest_size_bytes histogram",
        "# TYPE olmv1_leader gauge",
        "# TYPE olmv1_kube_api_requests counter",
    ] {
        assert!(text.contains(family), "missing {family:?} in\n{text}");
    }
    assert!(
        text.contains(r#"olmv1_reconcile_duration_seconds_count{controller="clustercatalog"}"#),
        "{text}"
    );
    // The other statuses of the condition are 0.
    let other = if progressing.status == "True" {
        "False"
    } else {
        "True"
    };
    assert_eq!(
        sample(
            &text,
            &format!(
                r#"olmv1_clustercatalog_condition{{catalog="{name}",type="Progressing",status="{other}"}}"#
            )
        ),
        Some(0.0)
    );
    // The standby reconciled nothing.
    let standby_text = standby.metrics().await.expect("standby metrics");
    assert!(!standby_text.contains(&name), "{standby_text}");
    assert!(
        !standby_text.contains("olmv1_reconcile_errors_total{"),
        "{standby_text}"
    );

    // JSON logs: every line is JSON; lines inside the reconcile span carry the catalog.
    let lines = leader.log_lines();
    let in_span: Vec<&Value> = lines
        .iter()
        .filter(|l| l["span"]["name"] == "reconcile")
        .collect();
    assert!(
        in_span
            .iter()
            .all(|l| l["span"]["catalog"].is_string() || l["span"]["extension"].is_string()),
        "{in_span:#?}"
    );
    let failure_line = in_span.iter().find(|l| {
        l["span"]["catalog"] == name.as_str() && l["fields"]["message"] == "catalog not updated"
    });
    assert!(
        failure_line.is_some(),
        "no reconcile log line with the catalog span: {lines:#?}"
    );
    assert!(
        standby
            .log_lines()
            .iter()
            .all(|l| l["span"]["name"] != "reconcile"),
        "the standby reconciled"
    );

    // Delete it (the leader removes the finalizer; an unserved catalog would fail every
    // resolution): its series go.
    delete_catalog(&catalogs, &name).await;
    let text = leader.metrics().await.expect("metrics");
    assert!(!text.contains(&format!(r#"catalog="{name}""#)), "{text}");

    // An installed extension: info and condition series, phase durations, catalog
    // ingest and catalog server requests; all its series go with it.
    let catalog_name = install_extension_and_check_metrics(leader).await;
    // The standby serves the same content; when the catalog goes, so does its content.
    let served = same_content_on_both(leader, standby, &catalog_name).await;
    assert!(served.contains("\"olm.package\""), "{served}");
    delete_catalog(&catalogs, &catalog_name).await;
    support::eventually(30, "the standby drops a deleted catalog", || async {
        let (code, _) = standby.catalog_all(&catalog_name).await?;
        (code == 404).then_some(())
    })
    .await;
    assert_eq!(
        leader.catalog_all(&catalog_name).await.map(|r| r.0),
        Some(404)
    );

    // A catalog that stays through the takeover.
    let kept = create_served_catalog(&catalogs).await;
    let kept_body = same_content_on_both(leader, standby, &kept).await;
    let kept_status = catalogs.get(&kept).await.expect("catalog").status;

    // Nothing changes any more: the idle request rate.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let window = Duration::from_secs(30);
    let (l0, s0) = (leader.api_requests().await, standby.api_requests().await);
    tokio::time::sleep(window).await;
    let (l1, s1) = (leader.api_requests().await, standby.api_requests().await);
    let (leader_rate, standby_rate) = (
        (l1 - l0) / window.as_secs_f64(),
        (s1 - s0) / window.as_secs_f64(),
    );
    eprintln!(
        "idle API requests over {}s with a {}s lease: leader {} ({leader_rate:.2}/s), standby {} ({standby_rate:.2}/s)",
        window.as_secs(),
        lease_seconds(),
        l1 - l0,
        s1 - s0
    );
    assert!(leader_rate <= 1.0, "leader idle rate {leader_rate}/s");
    assert!(standby_rate <= 1.0, "standby idle rate {standby_rate}/s");
    assert!(l1 > l0, "the leader renews its lease");

    // SIGKILL the leader: the standby takes over within the lease duration (plus the
    // lease manager's release back-off of up to 1 s and polling slack).
    let standby_id = standby.identity.clone();
    let killed_at = Instant::now();
    if leader_is_a {
        drop(a.take());
    } else {
        drop(b.take());
    }
    let survivor = a.as_ref().or(b.as_ref()).expect("survivor");
    assert_eq!(survivor.identity, standby_id);
    // Every catalog request during the takeover is answered with the same content.
    let mut requests = 0;
    let mut takeover = None;
    let deadline = Instant::now() + Duration::from_secs(3 * lease_seconds());
    let settle = Duration::from_secs(3);
    loop {
        let answer = survivor.catalog_all(&kept).await;
        assert_eq!(
            answer
                .as_ref()
                .map(|(code, body)| (*code, body == &kept_body)),
            Some((200, true)),
            "request {requests} to the standby during the takeover"
        );
        requests += 1;
        match takeover {
            None => {
                if support::lease_holder(&leases).await.as_deref() == Some(standby_id.as_str())
                    && survivor.is_leader().await == Some(true)
                {
                    takeover = Some(killed_at.elapsed());
                }
                assert!(Instant::now() < deadline, "no takeover");
            }
            Some(at) if killed_at.elapsed() >= at + settle => break,
            Some(_) => {}
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let takeover = takeover.expect("takeover");
    eprintln!(
        "takeover after SIGKILL of the leader: {takeover:?} (lease {}s)",
        lease_seconds()
    );
    assert!(
        takeover <= Duration::from_secs(lease_seconds() + 3),
        "takeover took {takeover:?}"
    );
    eprintln!("{requests} catalog requests to the standby during the takeover, all 200");
    // The new leader found the content stored and its status current: the status stays
    // as the old leader wrote it, nothing is ingested again, the condition is reported.
    let serving = format!(
        r#"olmv1_clustercatalog_condition{{catalog="{kept}",type="Serving",status="True"}}"#
    );
    support::eventually(30, "the new leader reports the kept catalog", || async {
        (sample(&survivor.metrics().await?, &serving) == Some(1.0)).then_some(())
    })
    .await;
    assert_eq!(
        catalogs.get(&kept).await.expect("catalog").status,
        kept_status,
        "the new leader changed the status"
    );
    let reingested: Vec<Value> = survivor
        .log_lines()
        .into_iter()
        .filter(|l| {
            l["fields"]["message"] == "catalog content stored"
                && l["fields"]["catalog"] == kept.as_str()
        })
        .collect();
    assert_eq!(
        reingested.len(),
        1,
        "stored once, by the follower: {reingested:#?}"
    );
    assert_eq!(reingested[0]["span"]["name"], "follow", "{reingested:#?}");
    delete_catalog(&catalogs, &kept).await;
    assert_eq!(survivor.catalog_all(&kept).await.map(|r| r.0), Some(404));

    // Someone else takes the lease: the leader exits non-zero.
    let now = k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime(jiff::Timestamp::now());
    leases
        .patch(
            olmv1::controller::LEASE_NAME,
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"holderIdentity": "intruder", "renewTime": now, "leaseDurationSeconds": 60}})),
        )
        .await
        .expect("take the lease");
    let mut survivor = if leader_is_a { b.take() } else { a.take() }.expect("survivor");
    let deadline = Instant::now() + Duration::from_secs(3 * lease_seconds());
    let status = loop {
        if let Some(status) = survivor.process.try_wait() {
            break status;
        }
        assert!(
            Instant::now() < deadline,
            "the leader kept running without the lease"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert!(!status.success(), "exit status {status:?}");
    let log = survivor.process.log_text();
    assert!(log.contains("lost the leader lease"), "{log}");
}

/// Publishes a one-bundle catalog, installs it as a least-privilege installer account,
/// checks the extension's metrics on `leader`, uninstalls; returns the catalog's name.
async fn install_extension_and_check_metrics(leader: &Replica) -> String {
    let admin = support::cluster().admin().await;
    let package = support::unique("opspkg");
    let ns = support::namespace(&admin, "ops").await;
    let ext_name = support::unique("opsext");
    let spec = BundleSpec::new(&package, "1.0.0");
    let image = bundles::push_bundle(&spec).await;
    let files = BTreeMap::from([(
        format!("{package}/catalog.json"),
        bundles::catalog_fbc(&package, &[(spec.clone(), image)]),
    )]);
    let catalog_name = support::unique("opscat");
    let repo_tag = format!("catalogs/{catalog_name}:latest");
    olmv1::testenv::registry::push_catalog_image(support::registry(), &repo_tag, &files)
        .await
        .expect("push catalog");
    let catalogs: Api<ClusterCatalog> = Api::all(admin.clone());
    let catalog: ClusterCatalog = serde_json::from_value(json!({
        "apiVersion": "olm.operatorframework.io/v1", "kind": "ClusterCatalog",
        "metadata": {"name": catalog_name},
        "spec": {"source": {"type": "Image", "image": {"ref": format!("{}/{repo_tag}", support::registry().host())}}},
    }))
    .expect("catalog");
    catalogs
        .create(&PostParams::default(), &catalog)
        .await
        .expect("create catalog");

    let rendered = bundles::render(&spec, &ns);
    let rbac = olmv1::preflight::permissions::rbac::installer_rbac(
        &rendered,
        &ns,
        &ext_name,
        olmv1::preflight::permissions::rbac::BundledRbac::Include,
    )
    .expect("rbac");
    let objects: Vec<kube::api::DynamicObject> =
        [rbac.service_account, rbac.cluster_role, rbac.binding]
            .into_iter()
            .map(|v| serde_json::from_value(v).expect("object"))
            .collect();
    olmv1::testenv::manifests::apply_objects(&admin, &objects)
        .await
        .expect("apply installer RBAC");
    let extensions: Api<ClusterExtension> = Api::all(admin.clone());
    let ext: ClusterExtension = serde_json::from_value(json!({
        "apiVersion": "olm.operatorframework.io/v1", "kind": "ClusterExtension",
        "metadata": {"name": ext_name},
        "spec": {
            "namespace": ns,
            "serviceAccount": {"name": format!("{ext_name}-installer")},
            "source": {"sourceType": "Catalog", "catalog": {"packageName": package}},
        },
    }))
    .expect("extension");
    extensions
        .create(&PostParams::default(), &ext)
        .await
        .expect("create extension");

    let info = format!(
        r#"olmv1_clusterextension_info{{name="{ext_name}",package="{package}",version="1.0.0",bundle="{}",catalog="{catalog_name}"}}"#,
        spec.bundle_name()
    );
    let installed = format!(
        r#"olmv1_clusterextension_condition{{name="{ext_name}",type="Installed",status="True"}}"#
    );
    let deadline = Instant::now() + Duration::from_secs(120);
    let text = loop {
        let text = leader.metrics().await.unwrap_or_default();
        if sample(&text, &info) == Some(1.0) && sample(&text, &installed) == Some(1.0) {
            break text;
        }
        if Instant::now() > deadline {
            let status = extensions.get(&ext_name).await.map(|e| e.status);
            panic!("no {info} and {installed} after 120s; status {status:#?}; metrics:\n{text}");
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    for phase in ["resolve", "pull", "render", "preflight", "apply"] {
        let count = sample(
            &text,
            &format!(r#"olmv1_clusterextension_phase_duration_seconds_count{{phase="{phase}"}}"#),
        );
        assert!(count.is_some_and(|c| c >= 1.0), "phase {phase}: {text}");
    }
    for series in [
        r#"olmv1_reconcile_duration_seconds_count{controller="clusterextension"}"#,
        r#"olmv1_catalog_http_request_duration_seconds_count{code="200"}"#,
        &format!(r#"olmv1_clustercatalog_content_size_bytes{{catalog="{catalog_name}"}}"#),
        "olmv1_clustercatalog_ingest_duration_seconds_count",
    ] {
        assert!(
            sample(&text, series).is_some_and(|v| v > 0.0),
            "{series}: {text}"
        );
    }
    // The JSON log lines of the extension's reconciles carry its name.
    let lines = leader.log_lines();
    assert!(
        lines.iter().any(
            |l| l["span"]["name"] == "reconcile" && l["span"]["extension"] == ext_name.as_str()
        ),
        "no log line in the extension's reconcile span"
    );

    extensions
        .delete(&ext_name, &DeleteParams::default())
        .await
        .expect("delete extension");
    support::eventually(support::UNINSTALL_SECS, "extension uninstalled", || async {
        extensions
            .get_opt(&ext_name)
            .await
            .ok()?
            .is_none()
            .then_some(())
    })
    .await;
    let text = leader.metrics().await.expect("metrics");
    assert!(
        !text.contains(&ext_name),
        "series of a deleted extension: {text}"
    );
    catalog_name
}

/// Waits until `leader` serves `name` and `standby` serves the same bytes; returns them.
async fn same_content_on_both(leader: &Replica, standby: &Replica, name: &str) -> String {
    let body = support::eventually(60, "the leader serves the catalog", || async {
        let (code, body) = leader.catalog_all(name).await?;
        (code == 200).then_some(body)
    })
    .await;
    let started = Instant::now();
    let standby_body = support::eventually(30, "the standby serves the catalog", || async {
        let (code, body) = standby.catalog_all(name).await?;
        (code == 200).then_some(body)
    })
    .await;
    eprintln!(
        "the standby served {name} {:?} after the leader",
        started.elapsed()
    );
    assert_eq!(standby_body, body, "the replicas serve different content");
    body
}

/// Publishes a small catalog image, creates a ClusterCatalog for it and waits until it
/// is Serving; returns its name.
async fn create_served_catalog(catalogs: &Api<ClusterCatalog>) -> String {
    let package = support::unique("followpkg");
    // The bundle image is not pulled (nothing installs it).
    let image = format!(
        "{}/bundles/{package}@sha256:{}",
        support::registry().host(),
        "0".repeat(64)
    );
    let specs = [(BundleSpec::new(&package, "1.0.0"), image)];
    let files = BTreeMap::from([(
        format!("{package}/catalog.json"),
        bundles::catalog_fbc(&package, &specs),
    )]);
    let name = support::unique("followcat");
    let repo_tag = format!("catalogs/{name}:latest");
    olmv1::testenv::registry::push_catalog_image(support::registry(), &repo_tag, &files)
        .await
        .expect("push catalog");
    let catalog: ClusterCatalog = serde_json::from_value(json!({
        "apiVersion": "olm.operatorframework.io/v1", "kind": "ClusterCatalog",
        "metadata": {"name": name},
        "spec": {"source": {"type": "Image", "image": {"ref": format!("{}/{repo_tag}", support::registry().host())}}},
    }))
    .expect("catalog");
    catalogs
        .create(&PostParams::default(), &catalog)
        .await
        .expect("create catalog");
    support::eventually(60, "the catalog is Serving", || async {
        let status = catalogs.get(&name).await.ok()?.status?;
        let serving = olmv1::api::conditions::find(&status.conditions, "Serving")?;
        (serving.status == "True").then_some(())
    })
    .await;
    name
}

async fn delete_catalog(catalogs: &Api<ClusterCatalog>, name: &str) {
    catalogs
        .delete(name, &DeleteParams::default())
        .await
        .expect("delete catalog");
    support::eventually(30, "catalog deleted", || async {
        catalogs.get_opt(name).await.ok()?.is_none().then_some(())
    })
    .await;
}
