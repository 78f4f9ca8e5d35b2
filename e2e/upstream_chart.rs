//! Upstream OLM v1's own Helm chart (`helm/olmv1` of the operator-controller Go module,
//! fetched by hack/upstream-chart.sh), rendered by a real `helm template`
//! (hack/build-helm.sh at the version upstream builds with) with upstream's standard
//! values (`cert-manager.yaml`, as its `manifests/standard.yaml`) and then with its
//! experimental values (`experimental.yaml` on top, as `manifests/experimental.yaml`),
//! changing only the two image references to this build's image (plus upstream's own
//! `replicas` and `extraArguments` keys), applied on the real node with real
//! cert-manager. Shown: both Deployments Ready with two replicas, a ClusterCatalog
//! labelled at admission by the chart's mutating webhook and Serving, an extension
//! installed, upgraded and uninstalled, metrics read with the chart's
//! `operator-controller-metrics-reader` ClusterRole, and a private bundle pulled with
//! `--global-pull-secret` (docs/how-to/switch-from-upstream.md).
//!
//! Registries: the chart trusts, for pulls, only the CA of its own ClusterIssuer
//! (`--pull-cas-dir=/var/ca-certs`), as upstream's e2e does; so the catalog and bundles
//! are served over TLS with a certificate from that ClusterIssuer (one registry without
//! auth, one with), both over the storage of a plain-HTTP registry the test pushes to.

use crate::support;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{Node, Pod, Secret};
use kube::api::{Api, DeleteParams, DynamicObject, ListParams, Patch, PatchParams, PostParams};
use olmv1::api::{ClusterCatalog, ClusterExtension};
use olmv1::testenv::demo::{self, BundleSpec};
use olmv1::testenv::registry::{TEST_HTPASSWD, TEST_PASSWORD, TEST_USER, TestRegistry};
use serde_json::json;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use support::extensions::{extension, grant_installer, wait_installed};
use support::{eventually, namespace, node_cluster_with_cert_manager};

/// Upstream's system namespace (`namespaces.olmv1.name` of its values).
const SYSTEM: &str = "olmv1-system";
/// The pull secret named by `--global-pull-secret`.
const PULL_SECRET: &str = "upstream-chart-pull-secret";
const DEPLOYMENTS: [&str; 2] = [
    "operator-controller-controller-manager",
    "catalogd-controller-manager",
];

fn project() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// Runs a hack/ script with `env`; its stdout, trimmed (a path).
fn hack(script: &str) -> PathBuf {
    let out = Command::new(project().join("hack").join(script))
        .stderr(std::process::Stdio::inherit())
        .output()
        .unwrap_or_else(|e| panic!("hack/{script}: {e}"));
    assert!(out.status.success(), "hack/{script} failed");
    PathBuf::from(String::from_utf8_lossy(&out.stdout).trim())
}

/// `helm template olmv1 <chart> --values <each> --values <ours>`: the objects.
fn render(values: &[&str], ours: &serde_json::Value) -> Vec<DynamicObject> {
    // Upstream's chart uses `toYamlPretty` (helm >= 3.17); upstream's go.mod pins this.
    let helm = hack("build-helm.sh");
    let chart = hack("upstream-chart.sh");
    let work = tempfile::tempdir().expect("tempdir");
    let file = work.path().join("images.yaml");
    std::fs::write(&file, ours.to_string()).expect("values");
    let mut cmd = Command::new(&helm);
    cmd.arg("template").arg("olmv1").arg(chart.join("olmv1"));
    for v in values {
        cmd.arg("--values").arg(chart.join(v));
    }
    cmd.arg("--values").arg(&file);
    for d in ["cache", "config", "data"] {
        cmd.env(
            format!("HELM_{}_HOME", d.to_uppercase()),
            work.path().join(d),
        );
    }
    let out = cmd.output().expect("helm template");
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "helm template: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    olmv1::testenv::manifests::parse_objects("upstream chart", &text).expect("parse")
}

/// This build's binary as an image with upstream's program names as links (as
/// hack/image.sh builds it), pushed to the node registry.
async fn push_image(registry: &str) -> String {
    let work = tempfile::tempdir().expect("tempdir");
    let stripped = support::process::stripped_binary(work.path());
    let files = olmv1::testenv::image::program_files(&stripped, "olmv1").expect("files");
    let run = olmv1::testenv::image::RunConfig {
        entrypoint: vec!["/olmv1".into()],
        cmd: vec!["controller".into()],
        links: vec![
            ("operator-controller".into(), "olmv1".into()),
            ("catalogd".into(), "olmv1".into()),
        ],
        ..Default::default()
    };
    let built = olmv1::testenv::image::build(&files, &run).expect("image");
    olmv1::testenv::image::push(&built, &format!("{registry}/olmv1/olmv1:upstream"), true)
        .await
        .expect("push olmv1 image")
}

/// Our values: only upstream's own keys for the images, replicas and extra arguments.
fn our_values(image: &str) -> serde_json::Value {
    json!({"options": {
        "operatorController": {"deployment": {
            "image": image, "replicas": 2,
            "extraArguments": [format!("--global-pull-secret={SYSTEM}/{PULL_SECRET}")],
        }},
        "catalogd": {"deployment": {"image": image, "replicas": 2}},
    }})
}

/// Both Deployments rolled out: two replicas updated and Ready.
async fn wait_deployments(admin: &kube::Client) {
    let api: Api<Deployment> = Api::namespaced(admin.clone(), SYSTEM);
    for name in DEPLOYMENTS {
        eventually(300, &format!("{name}: two replicas Ready"), || async {
            let d = api.get(name).await.ok()?;
            let s = d.status?;
            let current = s.observed_generation == d.metadata.generation;
            (current
                && s.replicas == Some(2)
                && s.updated_replicas == Some(2)
                && s.ready_replicas == Some(2)
                && s.available_replicas == Some(2))
            .then_some(())
        })
        .await;
    }
}

/// A `docker-registry` over TLS on every address, serving `storage`; killed on drop.
struct TlsRegistry {
    child: Child,
    host: String,
}

impl Drop for TlsRegistry {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn tls_registry(dir: &Path, storage: &Path, ip: &str, auth: bool) -> TlsRegistry {
    let listener = std::net::TcpListener::bind("0.0.0.0:0").expect("port");
    let port = listener.local_addr().expect("addr").port();
    drop(listener);
    let mut cfg = format!(
        "version: 0.1\nlog:\n  level: warn\nstorage:\n  filesystem:\n    rootdirectory: {}\nhttp:\n  addr: 0.0.0.0:{port}\n  secret: upstream-chart\n  tls:\n    certificate: {}\n    key: {}\n",
        storage.display(),
        dir.join("tls.crt").display(),
        dir.join("tls.key").display()
    );
    if auth {
        std::fs::write(dir.join("htpasswd"), TEST_HTPASSWD).expect("htpasswd");
        cfg.push_str(&format!(
            "auth:\n  htpasswd:\n    realm: upstream-chart\n    path: {}\n",
            dir.join("htpasswd").display()
        ));
    }
    let file = dir.join(format!("registry-{port}.yml"));
    std::fs::write(&file, cfg).expect("config");
    let log = std::fs::File::create(dir.join(format!("registry-{port}.log"))).expect("log");
    let child = Command::new("/usr/bin/docker-registry")
        .arg("serve")
        .arg(&file)
        .stdout(log.try_clone().expect("log"))
        .stderr(log)
        .spawn()
        .expect("docker-registry");
    let host = format!("{ip}:{port}");
    for _ in 0..100 {
        if std::net::TcpStream::connect(&host).is_ok() {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    TlsRegistry { child, host }
}

/// The two TLS registries (public, private) with a certificate for `ip` issued by the
/// chart's ClusterIssuer `olmv1-ca`.
async fn registries(
    admin: &kube::Client,
    dir: &Path,
    storage: &Path,
    ip: &str,
) -> (TlsRegistry, TlsRegistry) {
    let certificate: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "cert-manager.io/v1", "kind": "Certificate",
        "metadata": {"name": "upstream-chart-registry", "namespace": SYSTEM},
        "spec": {
            "ipAddresses": [ip], "secretName": "upstream-chart-registry",
            "issuerRef": {"group": "cert-manager.io", "kind": "ClusterIssuer", "name": "olmv1-ca"},
        },
    }))
    .expect("certificate");
    olmv1::testenv::manifests::apply_objects(admin, &[certificate])
        .await
        .expect("apply Certificate");
    let secrets: Api<Secret> = Api::namespaced(admin.clone(), SYSTEM);
    let data = eventually(120, "the registry certificate issued", || async {
        let d = secrets.get("upstream-chart-registry").await.ok()?.data?;
        Some((d.get("tls.crt")?.0.clone(), d.get("tls.key")?.0.clone()))
    })
    .await;
    std::fs::write(dir.join("tls.crt"), data.0).expect("crt");
    std::fs::write(dir.join("tls.key"), data.1).expect("key");
    (
        tls_registry(dir, storage, ip, false),
        tls_registry(dir, storage, ip, true),
    )
}

/// The `--global-pull-secret` Secret, with credentials for the private registry.
async fn pull_secret(admin: &kube::Client, private: &str) {
    let auth = base64_encode(&format!("{TEST_USER}:{TEST_PASSWORD}"));
    let config = json!({"auths": {private: {"auth": auth}}}).to_string();
    let secret: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Secret",
        "metadata": {"name": PULL_SECRET, "namespace": SYSTEM},
        "type": "kubernetes.io/dockerconfigjson",
        "stringData": {".dockerconfigjson": config},
    }))
    .expect("secret");
    olmv1::testenv::manifests::apply_objects(admin, &[secret])
        .await
        .expect("apply pull secret");
}

fn base64_encode(text: &str) -> String {
    data_encoding::BASE64.encode(text.as_bytes())
}

/// Pushes `public` 1.0.0 and 1.1.0, `private` 1.0.0 and a catalog of both packages
/// naming the bundles at the TLS registries; returns the catalog's reference there.
async fn publish(
    push: &TestRegistry,
    public: &str,
    private: &str,
    packages: (&str, &str),
    workload: &str,
) -> String {
    let mut files = BTreeMap::new();
    for (package, versions, host) in [
        (packages.0, &["1.0.0", "1.1.0"][..], public),
        (packages.1, &["1.0.0"][..], private),
    ] {
        let mut entries = Vec::new();
        let mut previous: Option<String> = None;
        for v in versions {
            let mut spec = BundleSpec::new(package, v);
            spec.operator_image = Some(workload.to_string());
            spec.replaces = previous.replace(spec.bundle_name());
            let pushed = demo::push_bundle(push, &spec).await.expect("bundle");
            let moved = pushed.replacen(push.host(), host, 1);
            entries.push((spec, moved));
        }
        files.insert(
            format!("{package}/catalog.json"),
            demo::catalog_fbc(package, &entries),
        );
    }
    let repo_tag = format!("catalogs/{}:latest", support::unique("up"));
    olmv1::testenv::registry::push_catalog_image(push, &repo_tag, &files)
        .await
        .expect("push catalog");
    format!("{public}/{repo_tag}")
}

/// A ClusterCatalog: labelled with its name by the chart's webhook at admission (the
/// object the API server returns), then Serving.
async fn catalog(admin: &kube::Client, image: &str) -> String {
    let name = support::unique("upcat");
    let api: Api<ClusterCatalog> = Api::all(admin.clone());
    let object: ClusterCatalog = serde_json::from_value(json!({
        "apiVersion": "olm.operatorframework.io/v1", "kind": "ClusterCatalog",
        "metadata": {"name": name},
        "spec": {"source": {"type": "Image", "image": {"ref": image}}},
    }))
    .expect("catalog");
    // The webhook (failurePolicy Fail) answers once catalogd's Service has endpoints.
    let created = eventually(120, "the ClusterCatalog admitted", || async {
        match api.create(&PostParams::default(), &object).await {
            Ok(c) => Some(c),
            Err(e) => {
                eprintln!("creating the ClusterCatalog: {e}");
                None
            }
        }
    })
    .await;
    let labels = created.metadata.labels.unwrap_or_default();
    assert_eq!(
        labels.get("olm.operatorframework.io/metadata.name"),
        Some(&name),
        "labelled at admission"
    );
    eventually(180, "the ClusterCatalog Serving", || async {
        let c = api.get(&name).await.ok()?;
        let s = c.status?;
        let serving = s
            .conditions
            .iter()
            .any(|c| c.type_ == "Serving" && c.status == "True");
        (serving && s.urls.is_some()).then_some(())
    })
    .await;
    name
}

/// Installs `package` 1.0.0; upgrades to 1.1.0 when `upgrade`; uninstalls. With
/// `secret_for`, the pull of the (private) bundle is first seen refused, then the
/// `--global-pull-secret` Secret with credentials for that registry is created.
async fn lifecycle(admin: &kube::Client, package: &str, upgrade: bool, secret_for: Option<&str>) {
    let ns = namespace(admin, "upchart").await;
    let name = support::unique("upext");
    let mut rendered = Vec::new();
    for v in ["1.0.0", "1.1.0"] {
        rendered.push(support::bundles::render(&BundleSpec::new(package, v), &ns));
    }
    grant_installer(&ns, &name, &rendered).await;
    let api: Api<ClusterExtension> = Api::all(admin.clone());
    let ext = extension(&name, &ns, package, json!({"version": "1.0.0"}));
    api.create(&PostParams::default(), &ext)
        .await
        .expect("create extension");
    if let Some(private) = secret_for {
        let refused = eventually(
            120,
            "the private pull refused without credentials",
            || async {
                let e = api.get(&name).await.ok()?;
                let c = support::extensions::condition(&e, "Progressing")?;
                let m = c.message.to_lowercase();
                (m.contains("401") || m.contains("unauthorized")).then_some(c.message)
            },
        )
        .await;
        eprintln!("without the pull secret: {refused}");
        pull_secret(admin, private).await;
    }
    wait_installed(&api, &name, "1.0.0").await;
    let operator = BundleSpec::new(package, "1.0.0").deployment_name();
    let deployments: Api<Deployment> = Api::namespaced(admin.clone(), &ns);
    eventually(180, "the operator Deployment", || async {
        deployments.get(&operator).await.ok().map(|_| ())
    })
    .await;
    if upgrade {
        let patch = json!({"spec": {"source": {"catalog": {"version": "1.1.0"}}}});
        api.patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
            .expect("upgrade");
        wait_installed(&api, &name, "1.1.0").await;
    }
    api.delete(&name, &DeleteParams::default())
        .await
        .expect("delete extension");
    eventually(180, "the extension and its operator gone", || async {
        let gone = api.get_opt(&name).await.ok()?.is_none();
        let operator_gone = deployments.get_opt(&operator).await.ok()?.is_none();
        (gone && operator_gone).then_some(())
    })
    .await;
}

/// `/metrics` of each operator-controller pod (`:8443`, HTTPS) with a token of a
/// ServiceAccount bound to the chart's `operator-controller-metrics-reader`.
async fn scrape(admin: &kube::Client) {
    let token = support::metrics::token(
        admin,
        "upchart-metrics",
        Some("operator-controller-metrics-reader"),
    )
    .await;
    let pods: Api<Pod> = Api::namespaced(admin.clone(), SYSTEM);
    let list = pods
        .list(&ListParams::default().labels("control-plane=operator-controller-controller-manager"))
        .await
        .expect("pods");
    let ips: Vec<String> = list
        .items
        .iter()
        .filter_map(|p| p.status.as_ref()?.pod_ip.clone())
        .collect();
    assert!(!ips.is_empty(), "operator-controller pods with an IP");
    let mut found = false;
    for ip in ips {
        let url = format!("https://{ip}:8443/metrics");
        let (status, body) = support::metrics::get(&url, Some(&token))
            .await
            .unwrap_or_else(|e| panic!("{url}: {e}"));
        assert_eq!(status, 200, "{url}");
        let (denied, _) = support::metrics::get(&url, None).await.expect("scrape");
        assert_eq!(denied, 401, "{url} without a token");
        found |= String::from_utf8_lossy(&body).contains("controller_runtime_reconcile_total");
    }
    assert!(found, "controller_runtime_reconcile_total on the leader");
}

/// Gives the node upstream's control-plane role label: the chart's pods select it.
async fn label_node(admin: &kube::Client) {
    let nodes: Api<Node> = Api::all(admin.clone());
    let list = nodes.list(&ListParams::default()).await.expect("nodes");
    let patch = json!({"metadata": {"labels": {"node-role.kubernetes.io/control-plane": ""}}});
    for n in list.items {
        let name = n.metadata.name.unwrap_or_default();
        nodes
            .patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
            .expect("label node");
    }
}

#[tokio::test]
async fn upstream_chart_standard_then_experimental_runs_olmv1() {
    let cluster = node_cluster_with_cert_manager();
    let node = cluster.node.as_ref().expect("node");
    let admin = cluster.admin().await;
    let _diagnose = DiagnoseOnPanic;
    let image = push_image(&node.registry).await;
    label_node(&admin).await;
    let values = our_values(&image);
    let ip = node.registry.split(':').next().expect("ip").to_string();
    let push = TestRegistry::start().expect("registry");
    let work = tempfile::tempdir().expect("tempdir");
    let mut served: Option<(TlsRegistry, TlsRegistry)> = None;

    for (case, files) in [
        ("standard", &["cert-manager.yaml"][..]),
        (
            "experimental",
            &["cert-manager.yaml", "experimental.yaml"][..],
        ),
    ] {
        eprintln!("== upstream chart, {case} values");
        let objects = render(files, &values);
        olmv1::testenv::manifests::apply_objects(&admin, &objects)
            .await
            .unwrap_or_else(|e| panic!("{case}: {e}"));
        wait_deployments(&admin).await;
        if served.is_none() {
            served = Some(registries(&admin, work.path(), push.storage_dir(), &ip).await);
        }
        // The first case shows the private pull refused until the Secret exists.
        let secret_for = (case == "standard").then(|| served.as_ref().map(|r| r.1.host.clone()));
        let (public, private) = served.as_ref().expect("registries");
        let packages = (support::unique("uppub"), support::unique("uppriv"));
        let catalog_image = publish(
            &push,
            &public.host,
            &private.host,
            (&packages.0, &packages.1),
            &node.workload_image,
        )
        .await;
        catalog(&admin, &catalog_image).await;
        lifecycle(&admin, &packages.0, true, None).await;
        lifecycle(&admin, &packages.1, false, secret_for.flatten().as_deref()).await;
        scrape(&admin).await;
    }
}

/// Prints the upstream Deployments' pods and logs when the test fails.
struct DiagnoseOnPanic;

impl Drop for DiagnoseOnPanic {
    fn drop(&mut self) {
        if std::thread::panicking() {
            let kubeconfig = &node_cluster_with_cert_manager().admin_kubeconfig;
            let out = Command::new(olmv1::testenv::deploy::kubectl())
                .arg(format!("--kubeconfig={}", kubeconfig.display()))
                .args(["-n", SYSTEM, "get", "pods,deploy,leases", "-o", "wide"])
                .output();
            if let Ok(o) = out {
                eprintln!("{}", String::from_utf8_lossy(&o.stdout));
            }
            for d in DEPLOYMENTS {
                let out = Command::new(olmv1::testenv::deploy::kubectl())
                    .arg(format!("--kubeconfig={}", kubeconfig.display()))
                    .args(["-n", SYSTEM, "logs", "--prefix", "--tail=60"])
                    .arg(format!("-lcontrol-plane={d}"))
                    .output();
                if let Ok(o) = out {
                    eprintln!("== {d}:\n{}", String::from_utf8_lossy(&o.stdout));
                }
            }
        }
    }
}
