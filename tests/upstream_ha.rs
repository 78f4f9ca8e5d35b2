//! Upstream's two programs run as upstream runs several replicas
//! (docs/how-to/switch-from-upstream.md, "Replicas"): two `catalogd` and two
//! `operator-controller` processes with upstream's arguments and `--leader-elect` on
//! the real API server elect one leader per role on upstream's Leases
//! (`catalogd-operator-lock`, `9c4404e7.operatorframework.io`); every replica is ready
//! and every catalogd replica serves the ClusterCatalog webhook; the standby does not
//! reconcile; after SIGKILL of both leaders the standbys take over within the lease
//! timings (short ones through our own `OLMV1_LEADER_ELECT_*` environment: upstream's
//! flags have none) and an extension created then is installed. And the watched
//! `--catalogd-cas-dir`: catalogd's CA written into it after operator-controller
//! started is trusted without a restart, a broken file in between is logged and
//! changes nothing; likewise the registry's CA written into catalogd's `--pull-cas-dir`
//! after it started makes the waiting catalog Serving.

use crate::support;

use kube::api::{Api, PostParams};
use olmv1::api::{ClusterCatalog, ClusterExtension};
use serde_json::json;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};
use support::extensions;
use support::process::NAMESPACE;
use support::upstream::{
    Upstream, lease_holder, prepare, registry_pull_secret, spawn_with_env,
    upstream_controller_identity, wait_ready,
};

const CATALOGD_LEASE: &str = "catalogd-operator-lock";
const CONTROLLER_LEASE: &str = "9c4404e7.operatorframework.io";
const LEASE_SECONDS: u64 = 6;
const SHORT_LEASE: [(&str, &str); 3] = [
    ("OLMV1_LEADER_ELECT_LEASE_DURATION", "6s"),
    ("OLMV1_LEADER_ELECT_RENEW_DEADLINE", "4s"),
    ("OLMV1_LEADER_ELECT_RETRY_PERIOD", "2s"),
];

/// One reconciling set of processes at a time (they reconcile every object).
async fn serial() -> tokio::sync::MutexGuard<'static, ()> {
    static SERIAL: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());
    SERIAL.lock().await
}

fn free_port() -> u16 {
    olmv1::testenv::control_plane::free_port().unwrap_or_else(|e| panic!("{e}"))
}

/// A started replica and its ports.
struct Replica {
    process: Upstream,
    health: u16,
    webhook: u16,
    catalogs: u16,
}

/// A catalogd replica with upstream's arguments (its own ports and cache, the
/// certificate pair of `certs`), `--pull-cas-dir`/`--global-pull-secret` from `pull`.
fn catalogd(certs: &Path, pull: &[String], elect: bool, service: u16, catalogs: u16) -> Replica {
    let dir = prepare("catalogd", "tls.crt");
    for f in ["tls.crt", "tls.key", "ca.crt"] {
        std::fs::copy(certs.join(f), dir.join("certs").join(f)).expect("certificate");
    }
    let d = |p: &str| dir.join(p).display().to_string();
    let (health, webhook) = (free_port(), free_port());
    let mut args: Vec<String> = vec![
        format!("--metrics-bind-address=:{}", free_port()),
        format!("--external-address=localhost:{service}"),
        format!("--tls-cert={}", d("certs/tls.crt")),
        format!("--tls-key={}", d("certs/tls.key")),
        format!("--health-probe-bind-address=:{health}"),
        format!("--catalogs-server-addr=:{catalogs}"),
        format!("--webhook-server-port={webhook}"),
        format!("--system-namespace={NAMESPACE}"),
        format!("--cache-dir={}", d("cache")),
    ];
    if elect {
        args.push("--leader-elect".into());
    }
    args.extend(pull.iter().cloned());
    let process = spawn_with_env(dir, "catalogd", &args, &SHORT_LEASE);
    Replica {
        process,
        health,
        webhook,
        catalogs,
    }
}

/// What a Service in front of the replicas does: a TCP port forwarding each connection
/// to the first of `backends` that accepts it (TLS passes through).
fn service(backends: Vec<u16>) -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let port = listener.local_addr().expect("addr").port();
    listener.set_nonblocking(true).expect("nonblocking");
    tokio::spawn(async move {
        let listener = tokio::net::TcpListener::from_std(listener).expect("listener");
        while let Ok((mut inbound, _)) = listener.accept().await {
            let backends = backends.clone();
            tokio::spawn(async move {
                for b in backends {
                    if let Ok(mut out) = tokio::net::TcpStream::connect(("127.0.0.1", b)).await {
                        let _ = tokio::io::copy_bidirectional(&mut inbound, &mut out).await;
                        return;
                    }
                }
            });
        }
    });
    port
}

/// An operator-controller replica with upstream's arguments, trusting `cas`.
fn operator_controller(cas: &Path, pull: &[String], elect: bool) -> Replica {
    let dir = prepare("operator-controller", "tls.crt");
    let health = free_port();
    let mut args: Vec<String> = vec![
        format!("--health-probe-bind-address=:{health}"),
        format!("--catalogd-cas-dir={}", cas.display()),
        format!("--system-namespace={NAMESPACE}"),
        format!("--cache-path={}", dir.join("cache").display()),
    ];
    if elect {
        args.push("--leader-elect".into());
    }
    args.extend(pull.iter().cloned());
    let process = spawn_with_env(dir, "operator-controller", &args, &SHORT_LEASE);
    Replica {
        process,
        health,
        webhook: 0,
        catalogs: 0,
    }
}

/// The index in `replicas` of the one holding `lease` (identities end in the pid).
async fn leader_of(lease: &str, replicas: &[&Replica]) -> usize {
    support::eventually(60, &format!("a replica holding {lease}"), || async {
        let holder = lease_holder(lease).await;
        replicas
            .iter()
            .position(|r| holder.ends_with(&format!("-{}", r.process.child.id())))
    })
    .await
}

/// Whether catalogd's webhook on `port` labels a ClusterCatalog at admission.
async fn webhook_labels(certs: &Path, port: u16) -> bool {
    let review = json!({
        "apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
        "request": {
            "uid": "1", "operation": "CREATE",
            "kind": {"group": "olm.operatorframework.io", "version": "v1", "kind": "ClusterCatalog"},
            "resource": {"group": "olm.operatorframework.io", "version": "v1", "resource": "clustercatalogs"},
            "name": "ha", "userInfo": {},
            "object": {"apiVersion": "olm.operatorframework.io/v1", "kind": "ClusterCatalog",
                       "metadata": {"name": "ha"},
                       "spec": {"source": {"type": "Image", "image": {"ref": "r/c:1"}}}},
        },
    });
    let Ok(answer) = support::metrics::https_client(&certs.join("ca.crt"))
        .post(format!(
            "https://localhost:{port}{}",
            olmv1::server::webhook::PATH
        ))
        .json(&review)
        .send()
        .await
    else {
        return false;
    };
    let body: serde_json::Value = answer.json().await.unwrap_or_default();
    let patch = body["response"]["patch"].as_str().unwrap_or_default();
    let patch = data_encoding::BASE64
        .decode(patch.as_bytes())
        .unwrap_or_default();
    body["response"]["allowed"] == true && String::from_utf8_lossy(&patch).contains("metadata.name")
}

/// A catalog of `package` 1.0.0 in the authenticating registry.
async fn publish(package: &str) -> String {
    olmv1::testenv::demo::publish_catalog(
        support::auth_registry(),
        &format!("catalogs/{package}:latest"),
        package,
        &["1.0.0".to_string()],
        None,
    )
    .await
    .expect("publish")
}

/// The flags pulling from the authenticating registry (its CA, the pull secret).
async fn pull_flags(admin: &kube::Client, dir: &Path) -> Vec<String> {
    std::fs::create_dir_all(dir).expect("dir");
    let ca = support::auth_registry().ca_pem().unwrap_or_default();
    std::fs::write(dir.join("registry.crt"), ca).expect("ca");
    vec![
        format!("--pull-cas-dir={}", dir.display()),
        format!("--global-pull-secret={}", registry_pull_secret(admin).await),
    ]
}

/// A fresh certificate pair and CA named as catalogd's Secret mounts them.
fn certificates() -> PathBuf {
    prepare("ha-certs", "tls.crt").join("certs")
}

async fn create_extension(admin: &kube::Client, package: &str) -> String {
    let ns = support::namespace(admin, "ha").await;
    let name = support::unique("haext");
    let extension = extensions::extension(&name, &ns, package, json!({}));
    Api::<ClusterExtension>::all(admin.clone())
        .create(&PostParams::default(), &extension)
        .await
        .expect("create extension");
    name
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_replicas_per_role_elect_one_leader_each_and_take_over_after_sigkill() {
    let _serial = serial().await;
    let admin = support::cluster().admin().await;
    upstream_controller_identity(&admin).await;
    let certs = certificates();
    let pull = pull_flags(&admin, &certs.join("../pull-cas")).await;
    // both catalogd replicas behind one address, as behind upstream's Service
    let (a, b) = (free_port(), free_port());
    let front = service(vec![a, b]);
    let mut cds = [
        catalogd(&certs, &pull, true, front, a),
        catalogd(&certs, &pull, true, front, b),
    ];
    let mut ocs = [
        operator_controller(&certs, &pull, true),
        operator_controller(&certs, &pull, true),
    ];
    // every replica is ready, leader or not (as upstream's non-leaders are)
    for r in cds.iter_mut().chain(ocs.iter_mut()) {
        wait_ready(&mut r.process, r.health).await;
    }
    let cd_leader = leader_of(CATALOGD_LEASE, &[&cds[0], &cds[1]]).await;
    let oc_leader = leader_of(CONTROLLER_LEASE, &[&ocs[0], &ocs[1]]).await;
    // every catalogd replica serves the webhook
    for r in &cds {
        let port = r.webhook;
        support::eventually(30, "the webhook on every replica", || async {
            webhook_labels(&certs, port).await.then_some(())
        })
        .await;
    }

    let package = support::unique("hapkg");
    let catalog = support::unique("hacat");
    extensions::create_catalog(&catalog, &publish(&package).await).await;
    let exts: Api<ClusterExtension> = Api::all(admin.clone());
    let first = create_extension(&admin, &package).await;
    extensions::wait_installed(&exts, &first, "1.0.0").await;
    // only the leaders reconcile: the standbys wait for the lease and never mention
    // the objects
    for (replicas, leader) in [(&cds, cd_leader), (&ocs, oc_leader)] {
        let (lead, standby) = (
            replicas[leader].process.log_text(),
            replicas[1 - leader].process.log_text(),
        );
        assert!(lead.contains("became the leader"), "{lead}");
        assert!(!standby.contains("became the leader"), "{standby}");
        assert!(
            standby.contains("waiting to become the leader"),
            "{standby}"
        );
    }
    // every catalogd replica serves the catalog's content, the standby too (upstream's
    // standby answers 404 until it leads: docs/how-to/switch-from-upstream.md)
    let http = support::metrics::https_client(&certs.join("ca.crt"));
    for r in &cds {
        let url = format!(
            "https://localhost:{}/catalogs/{catalog}/api/v1/all",
            r.catalogs
        );
        support::eventually(60, "the content on every replica", || async {
            let answer = http.get(&url).send().await.ok()?;
            answer.status().is_success().then_some(())
        })
        .await;
    }
    let oc_standby_log = ocs[1 - oc_leader].process.log_text();
    assert!(!oc_standby_log.contains(&first), "{oc_standby_log}");

    // the first extension removed (its cluster-scoped objects would collide with the
    // second's, of the same package)
    let _ = exts.delete(&first, &Default::default()).await;
    support::eventually(
        support::UNINSTALL_SECS,
        "the first extension uninstalled",
        || async { exts.get_opt(&first).await.ok()?.is_none().then_some(()) },
    )
    .await;

    // SIGKILL of both leaders: the standbys take over within the lease timings
    let killed_at = Instant::now();
    cds[cd_leader].process.child.kill().expect("kill catalogd");
    ocs[oc_leader]
        .process
        .child
        .kill()
        .expect("kill operator-controller");
    let cd_next = &cds[1 - cd_leader];
    let oc_next = &ocs[1 - oc_leader];
    let ids = [cd_next.process.child.id(), oc_next.process.child.id()];
    let takeover = support::eventually(6 * LEASE_SECONDS, "both standbys leading", || async {
        let cd = lease_holder(CATALOGD_LEASE).await;
        let oc = lease_holder(CONTROLLER_LEASE).await;
        (cd.ends_with(&format!("-{}", ids[0])) && oc.ends_with(&format!("-{}", ids[1])))
            .then(|| killed_at.elapsed())
    })
    .await;
    eprintln!(
        "takeover of both roles after SIGKILL of the leaders: {takeover:?} (lease {LEASE_SECONDS}s)"
    );
    assert!(
        takeover <= Duration::from_secs(2 * LEASE_SECONDS + 2),
        "{takeover:?}"
    );
    // the new catalogd leader publishes the catalog at its own address; an extension
    // created now is installed by the new operator-controller leader
    let second = create_extension(&admin, &package).await;
    let done = tokio::time::timeout(
        Duration::from_secs(90),
        extensions::wait_installed(&exts, &second, "1.0.0"),
    )
    .await;
    if done.is_err() {
        let e = exts.get(&second).await.ok();
        let c = Api::<ClusterCatalog>::all(admin.clone())
            .get(&catalog)
            .await
            .ok();
        panic!(
            "not installed after the takeover: {:?}\n{:?}\ncatalogd: {}\noperator-controller: {}",
            e.and_then(|e| e.status),
            c.and_then(|c| c.status),
            cd_next.process.log_text(),
            oc_next.process.log_text()
        );
    }
    eprintln!(
        "SIGKILL to the second extension installed: {:?}",
        killed_at.elapsed()
    );
    let _ = exts.delete(&second, &Default::default()).await;
    support::eventually(
        support::UNINSTALL_SECS,
        "the extension uninstalled",
        || async { exts.get_opt(&second).await.ok()?.is_none().then_some(()) },
    )
    .await;
    let catalogs: Api<ClusterCatalog> = Api::all(admin.clone());
    let _ = catalogs.delete(&catalog, &Default::default()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cas_written_into_the_ca_directories_later_are_trusted_without_a_restart() {
    let _serial = serial().await;
    let admin = support::cluster().admin().await;
    upstream_controller_identity(&admin).await;
    let certs = certificates();
    let pull_cas = certs.join("../pull-cas");
    let pull = pull_flags(&admin, &pull_cas).await;
    let registry_ca = std::fs::read(pull_cas.join("registry.crt")).expect("ca");
    // catalogd's pull CA directory holds another CA only (its own) at start
    std::fs::remove_file(pull_cas.join("registry.crt")).expect("remove");
    std::fs::copy(certs.join("ca.crt"), pull_cas.join("other.crt")).expect("ca");
    let port = free_port();
    let mut cd = catalogd(&certs, &pull, false, port, port);
    wait_ready(&mut cd.process, cd.health).await;
    // the controller's CA directory holds another CA only (the registry's)
    let cas = certs.join("../catalogd-cas");
    std::fs::create_dir_all(&cas).expect("dir");
    std::fs::write(cas.join("other.crt"), &registry_ca).expect("ca");
    let mut oc = operator_controller(&cas, &pull, false);
    wait_ready(&mut oc.process, oc.health).await;

    let package = support::unique("capkg");
    let catalog = support::unique("cacat");
    extensions::create_catalog(&catalog, &publish(&package).await).await;
    let catalogs: Api<ClusterCatalog> = Api::all(admin.clone());
    let conditions = |c: ClusterCatalog| c.status.map(|s| s.conditions).unwrap_or_default();
    support::eventually(60, "the pull refused: unknown CA", || async {
        let c = conditions(catalogs.get(&catalog).await.ok()?);
        c.iter()
            .any(|c| c.message.contains("UnknownIssuer"))
            .then_some(())
    })
    .await;
    // the registry's CA written into --pull-cas-dir now: the catalog becomes Serving
    let written_at = Instant::now();
    std::fs::write(pull_cas.join("registry.crt"), &registry_ca).expect("ca");
    support::eventually(90, "the catalog Serving", || async {
        let c = conditions(catalogs.get(&catalog).await.ok()?);
        c.iter()
            .any(|c| c.type_ == "Serving" && c.status == "True")
            .then_some(())
    })
    .await;
    eprintln!(
        "pull CA written to the catalog Serving: {:?}",
        written_at.elapsed()
    );
    let exts: Api<ClusterExtension> = Api::all(admin.clone());
    let name = create_extension(&admin, &package).await;
    extensions::wait_progressing_message(&exts, &name, "UnknownIssuer").await;
    // a broken file: logged, the CAs in use kept
    let broken = "-----BEGIN CERTIFICATE-----\nnot base64 at all!\n-----END CERTIFICATE-----\n";
    std::fs::write(cas.join("broken.crt"), broken).expect("broken");
    support::eventually(30, "the broken file logged", || async {
        oc.process
            .log_text()
            .contains("cannot read the CA directory")
            .then_some(())
    })
    .await;
    std::fs::remove_file(cas.join("broken.crt")).expect("remove");
    // catalogd's CA, written now: trusted within a poll, no restart
    let written_at = Instant::now();
    std::fs::copy(certs.join("ca.crt"), cas.join("catalogd.crt")).expect("ca");
    extensions::wait_installed(&exts, &name, "1.0.0").await;
    eprintln!(
        "CA written to the extension installed: {:?}",
        written_at.elapsed()
    );
    assert!(oc.process.child.try_wait().ok().flatten().is_none());
    let log = oc.process.log_text();
    assert!(log.contains("the CA directory changed"), "{log}");
    let _ = exts.delete(&name, &Default::default()).await;
    support::eventually(
        support::UNINSTALL_SECS,
        "the extension uninstalled",
        || async { exts.get_opt(&name).await.ok()?.is_none().then_some(()) },
    )
    .await;
    let _ = catalogs.delete(&catalog, &Default::default()).await;
}
