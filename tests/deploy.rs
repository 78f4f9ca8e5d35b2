//! The deployment manifests in `config/` on a real API server, the controller's own
//! least-privilege identity, the `olmv1 controller` process (health probes, SIGTERM,
//! bad kubeconfigs), and the harness's process teardown.

use crate::support;

use k8s_openapi::api::authorization::v1::{
    ResourceAttributes, SelfSubjectAccessReview, SelfSubjectAccessReviewSpec,
};
use kube::api::{Api, PostParams};
use olmv1::testenv::manifests;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

fn project() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

#[tokio::test]
async fn every_config_manifest_is_accepted() {
    let client = support::cluster().admin().await;
    let kustomization = std::fs::read_to_string(project().join("config/kustomization.yaml"))
        .expect("kustomization");
    let doc: serde_json::Value =
        serde_saphyr::from_str(&kustomization).expect("kustomization yaml");
    let resources: Vec<String> = doc["resources"]
        .as_array()
        .expect("resources")
        .iter()
        .filter_map(|r| r.as_str().map(str::to_string))
        .collect();
    assert!(resources.len() >= 10, "{resources:?}");
    let mut objects = Vec::new();
    for file in &resources {
        let path = project().join("config").join(file);
        let text =
            std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        objects.extend(manifests::parse_objects(file, &text).expect("parse"));
    }
    manifests::apply_objects(&client, &objects)
        .await
        .expect("config/ applies");
    // The Deployment is there with two replicas (leader election) as the shipped account.
    let deployments: Api<k8s_openapi::api::apps::v1::Deployment> =
        Api::namespaced(client.clone(), "olmv1-system");
    let d = deployments
        .get("olmv1-controller")
        .await
        .expect("deployment");
    let spec = d.spec.expect("spec");
    assert_eq!(spec.replicas, Some(2));
    assert_eq!(
        spec.template
            .spec
            .and_then(|s| s.service_account_name)
            .as_deref(),
        Some("olmv1-controller")
    );
}

#[tokio::test]
async fn samples_are_accepted() {
    let client = support::cluster().admin().await;
    for file in ["clustercatalog.yaml", "clusterextension.yaml"] {
        let text =
            std::fs::read_to_string(project().join("config/samples").join(file)).expect("sample");
        let objects = manifests::parse_objects(file, &text).expect("parse");
        manifests::apply_objects(&client, &objects)
            .await
            .unwrap_or_else(|e| panic!("{file}: {e}"));
    }
    let ext: Api<olmv1::api::ClusterExtension> = Api::all(client.clone());
    let sample = ext.get("argocd").await.expect("sample ClusterExtension");
    assert_eq!(
        sample.spec.service_account.map(|a| a.name).as_deref(),
        Some("argocd-installer")
    );
    assert_eq!(
        sample
            .spec
            .source
            .catalog
            .expect("catalog")
            .upgrade_constraint_policy,
        olmv1::api::UpgradeConstraintPolicy::CatalogProvided
    );
}

async fn can_i(
    client: &kube::Client,
    verb: &str,
    group: &str,
    resource: &str,
    namespace: Option<&str>,
) -> bool {
    let api: Api<SelfSubjectAccessReview> = Api::all(client.clone());
    let review = SelfSubjectAccessReview {
        spec: SelfSubjectAccessReviewSpec {
            resource_attributes: Some(ResourceAttributes {
                verb: Some(verb.into()),
                group: Some(group.into()),
                resource: Some(resource.into()),
                namespace: namespace.map(str::to_string),
                ..Default::default()
            }),
            ..Default::default()
        },
        ..Default::default()
    };
    let result = api
        .create(&PostParams::default(), &review)
        .await
        .expect("access review");
    result.status.map(|s| s.allowed).unwrap_or(false)
}

#[tokio::test]
async fn controller_identity_is_least_privilege() {
    let client = support::cluster().controller().await;
    let allowed = [
        (
            "watch",
            "olm.operatorframework.io",
            "clusterextensions",
            None,
        ),
        (
            "update",
            "olm.operatorframework.io",
            "clusterextensions/status",
            None,
        ),
        (
            "update",
            "olm.operatorframework.io",
            "clusterextensions/finalizers",
            None,
        ),
        ("list", "olm.operatorframework.io", "clustercatalogs", None),
        // Dependencies an extension opts in to (docs/concepts/dependencies.md §4).
        (
            "create",
            "olm.operatorframework.io",
            "clusterextensions",
            None,
        ),
        ("impersonate", "", "serviceaccounts", None),
        ("create", "", "events", Some("default")),
        (
            "update",
            "coordination.k8s.io",
            "leases",
            Some("olmv1-system"),
        ),
        (
            "get",
            "apiextensions.k8s.io",
            "customresourcedefinitions",
            None,
        ),
        // Rollout status: waiting reasons of the pods of an installed Deployment.
        ("list", "", "pods", Some("default")),
        // Upstream OLM v1's Helm release Secrets: read to adopt, patched to mark.
        ("list", "", "secrets", Some("olmv1-system")),
        ("patch", "", "secrets", Some("olmv1-system")),
        // Shared drift watches (one per kind for every extension), read only.
        ("list", "apps", "deployments", None),
        ("watch", "apps", "deployments", None),
        ("watch", "", "services", None),
        // The checks of /metrics requests.
        ("create", "authentication.k8s.io", "tokenreviews", None),
        (
            "create",
            "authorization.k8s.io",
            "subjectaccessreviews",
            None,
        ),
    ];
    for (verb, group, resource, ns) in allowed {
        assert!(
            can_i(&client, verb, group, resource, ns).await,
            "controller must be allowed to {verb} {group}/{resource}"
        );
    }
    let denied = [
        ("create", "apps", "deployments", Some("default")),
        (
            "create",
            "apiextensions.k8s.io",
            "customresourcedefinitions",
            None,
        ),
        ("create", "rbac.authorization.k8s.io", "clusterroles", None),
        ("delete", "", "namespaces", None),
        // Created dependencies are never uninstalled by the controller.
        (
            "delete",
            "olm.operatorframework.io",
            "clusterextensions",
            None,
        ),
        ("get", "", "secrets", Some("default")),
        // Drift watches on Secrets and ConfigMaps run as the installer accounts.
        ("list", "", "secrets", None),
        ("watch", "", "configmaps", None),
        ("get", "apps", "deployments", Some("default")),
        ("patch", "", "secrets", Some("default")),
        ("delete", "", "secrets", Some("olmv1-system")),
        ("delete", "", "pods", Some("default")),
        ("get", "", "pods/log", Some("default")),
        ("impersonate", "", "users", None),
        ("*", "*", "*", None),
    ];
    for (verb, group, resource, ns) in denied {
        assert!(
            !can_i(&client, verb, group, resource, ns).await,
            "controller must NOT be allowed to {verb} {group}/{resource}"
        );
    }
}

fn free_port() -> u16 {
    olmv1::testenv::control_plane::free_port().expect("port")
}

async fn http_status(url: &str) -> Option<u16> {
    reqwest::get(url).await.ok().map(|r| r.status().as_u16())
}

#[tokio::test]
async fn controller_serves_probes_and_stops_on_sigterm() {
    let cluster = support::cluster();
    let port = free_port();
    // Every listener on a free port: the defaults (:8443 for catalogs) may be taken by
    // another test's process.
    let catalogs = free_port();
    let mut child = Command::new(env!("CARGO_BIN_EXE_olmv1"))
        .args([
            "controller",
            "--health-probe-bind-address",
            &format!("127.0.0.1:{port}"),
            "--catalog-server-bind-address",
            &format!("127.0.0.1:{catalogs}"),
        ])
        .arg("--kubeconfig")
        .arg(&cluster.controller_kubeconfig)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start controller");
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        if http_status(&format!("http://127.0.0.1:{port}/readyz")).await == Some(200) {
            break;
        }
        assert!(Instant::now() < deadline, "controller not ready within 30s");
        if let Some(status) = child.try_wait().expect("wait") {
            let mut stderr = String::new();
            if let Some(mut e) = child.stderr.take() {
                let _ = std::io::Read::read_to_string(&mut e, &mut stderr);
            }
            panic!("controller exited early ({status}): {stderr}");
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(
        http_status(&format!("http://127.0.0.1:{port}/healthz")).await,
        Some(200)
    );
    let pid = child.id().to_string();
    assert!(
        Command::new("kill")
            .args(["-TERM", &pid])
            .status()
            .expect("kill")
            .success()
    );
    let deadline = Instant::now() + Duration::from_secs(15);
    let status = loop {
        if let Some(status) = child.try_wait().expect("wait") {
            break status;
        }
        assert!(
            Instant::now() < deadline,
            "controller did not exit within 15s of SIGTERM"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert!(
        status.success(),
        "clean exit on SIGTERM expected, got {status}"
    );
}

fn run_controller(kubeconfig: &Path) -> (bool, String) {
    let port = free_port();
    let out = Command::new(env!("CARGO_BIN_EXE_olmv1"))
        .args([
            "controller",
            "--health-probe-bind-address",
            &format!("127.0.0.1:{port}"),
        ])
        .arg("--kubeconfig")
        .arg(kubeconfig)
        .env_remove("KUBECONFIG")
        .output()
        .expect("run controller");
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn controller_rejects_bad_kubeconfigs() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (ok, stderr) = run_controller(&dir.path().join("missing.kubeconfig"));
    assert!(!ok);
    assert!(
        stderr.contains("reading kubeconfig") && stderr.contains("missing.kubeconfig"),
        "{stderr}"
    );

    let garbage = dir.path().join("garbage.kubeconfig");
    std::fs::write(&garbage, "this: [is not a kubeconfig").expect("write");
    let (ok, stderr) = run_controller(&garbage);
    assert!(!ok);
    assert!(stderr.contains("garbage.kubeconfig"), "{stderr}");

    let unreachable = dir.path().join("unreachable.kubeconfig");
    let port = free_port();
    olmv1::testenv::write_kubeconfig(
        &unreachable,
        &format!("https://127.0.0.1:{port}"),
        "",
        "token",
        "nobody",
    )
    .expect("write");
    let (ok, stderr) = run_controller(&unreachable);
    assert!(!ok);
    assert!(stderr.contains(&format!("127.0.0.1:{port}")), "{stderr}");
}

#[test]
fn supervised_processes_stop_when_their_owner_lets_go() {
    let dir = tempfile::tempdir().expect("tempdir");
    let marker = format!("{}", 100_000 + rand::random::<u32>() % 800_000);
    let cleanup = dir.path().join("data");
    std::fs::create_dir_all(&cleanup).expect("mkdir");
    let mut process = olmv1::testenv::process::Process::spawn(
        "sleeper",
        Path::new("/bin/sleep"),
        std::slice::from_ref(&marker),
        &dir.path().join("sleeper.log"),
        olmv1::testenv::Lifetime::Supervised,
        Some(&cleanup),
        dir.path(),
    )
    .expect("spawn");
    let running = || {
        Command::new("pgrep")
            .args(["-f", &format!("^/bin/sleep {marker}$")])
            .output()
            .map(|o| o.status.success())
            .unwrap_or(false)
    };
    let deadline = Instant::now() + Duration::from_secs(5);
    while !running() {
        assert!(Instant::now() < deadline, "sleeper did not start");
        std::thread::sleep(Duration::from_millis(50));
    }
    process.stop();
    assert!(!running(), "the supervised child must be gone");
    assert!(!cleanup.exists(), "its data directory must be removed");
}
