//! End-to-end on a real node (containerd + runc, kubelet, kube-scheduler, kube-proxy,
//! CoreDNS; `olmv1::testenv::node`): pods really start, Services really route, names
//! really resolve. First the node's own smoke test, then olmv1 deployed from `config/`
//! with its own image (`hack/image.sh`'s builder) as users deploy it, driven end to
//! end: install, upgrade with the leader pod deleted mid-flight, drift, catalogs served
//! through the Service, uninstall — and the operator it installs really runs; the
//! opt-in install namespace created from the bundle's template (Pod Security label
//! enforced on the real pods) and removed with the extension.

use crate::support;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{Node, Pod, Service};
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use olmv1::api::{ClusterCatalog, ClusterExtension};
use olmv1::testenv::demo::BundleSpec;
use serde_json::json;
use support::bundles::publish_on_node;
use support::extensions::{create_catalog, extension, grant_installer, wait_installed};
use support::{eventually, namespace, node_cluster};
use tokio::sync::OnceCell;

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

    // kube-proxy and CoreDNS follow the Service and its endpoints asynchronously: a
    // client started right after the rollout may be early; a later one must succeed.
    let url = format!("http://echo.{ns}.svc.cluster.local/readyz");
    let mut failures = Vec::new();
    for attempt in 0..5 {
        let pod = format!("client-{attempt}");
        let (phase, log) = run_pod(&admin, &ns, &pod, &["get", &url]).await;
        if phase == "Succeeded" {
            assert!(log.contains("200 OK"), "{log}");
            break;
        }
        failures.push(log);
        tokio::time::sleep(std::time::Duration::from_secs(1)).await;
    }
    assert!(
        failures.len() < 5,
        "no client pod could GET {url} through the Service: {failures:?}"
    );
    let pods: Api<Pod> = Api::namespaced(admin.clone(), &ns);
    pods.delete("client-0", &DeleteParams::default())
        .await
        .expect("delete pod");
    eventually(60, "client pod gone", || async {
        pods.get_opt("client-0").await.ok()?.is_none().then_some(())
    })
    .await;
}

/// Runs `args` of the workload image in a pod of `ns` to completion; its phase and log.
async fn run_pod(admin: &kube::Client, ns: &str, name: &str, args: &[&str]) -> (String, String) {
    let node = node_cluster().node.as_ref().expect("node");
    let pods: Api<Pod> = Api::namespaced(admin.clone(), ns);
    let pod: Pod = serde_json::from_value(json!({
        "metadata": {"name": name},
        "spec": {"restartPolicy": "Never", "containers": [{
            "name": "run", "image": node.workload_image, "args": args,
        }]},
    }))
    .expect("pod");
    pods.create(&PostParams::default(), &pod)
        .await
        .expect("create pod");
    let phase = eventually(120, &format!("pod {name} finished"), || async {
        let p = pods.get(name).await.ok()?;
        let phase = p.status?.phase?;
        matches!(phase.as_str(), "Succeeded" | "Failed").then_some(phase)
    })
    .await;
    let log = pods
        .logs(name, &Default::default())
        .await
        .unwrap_or_else(|e| format!("(no log: {e})"));
    (phase, log)
}

/// olmv1 deployed from `config/` (once per test binary): its image built from this
/// build's `olmv1` binary (stripped), pushed to the node registry, `kubectl apply -k`
/// of an overlay that pins it and lets the controller pull over plain HTTP from the
/// node registry; waits for the rollout (two replicas, probes passing).
async fn deploy_olmv1() -> &'static str {
    static DEPLOYED: OnceCell<String> = OnceCell::const_new();
    DEPLOYED
        .get_or_init(|| async {
            let cluster = node_cluster();
            let node = cluster.node.as_ref().expect("node");
            let work = tempfile::tempdir().expect("tempdir").keep();
            let stripped = support::process::stripped_binary(&work);
            let files = olmv1::testenv::image::program_files(&stripped, "olmv1").expect("files");
            let run = olmv1::testenv::image::RunConfig {
                entrypoint: vec!["/olmv1".into()],
                cmd: vec!["controller".into()],
                ..Default::default()
            };
            let built = olmv1::testenv::image::build(&files, &run).expect("image");
            let image = olmv1::testenv::image::push(
                &built,
                &format!("{}/olmv1/olmv1:test", node.registry),
                true,
            )
            .await
            .expect("push olmv1 image");
            let kubeconfig = cluster.admin_kubeconfig.clone();
            // A "minute" of progress deadlines lasts 2 s here (the rollout test).
            // The default installer matters only to extensions without
            // spec.serviceAccount (the install-namespace test).
            let args = vec![
                format!("--insecure-registry={}", node.registry),
                "--poll-unit-seconds=2".to_string(),
                format!("--default-installer-service-account={NODE_INSTALLER_NAMESPACE}/installer"),
            ];
            let image2 = image.clone();
            tokio::task::spawn_blocking(move || {
                olmv1::testenv::deploy::apply(
                    &kubeconfig,
                    &olmv1::testenv::project_dir(),
                    &work.join("overlay"),
                    &image2,
                    &args,
                    std::time::Duration::from_secs(180),
                )
            })
            .await
            .expect("join")
            .unwrap_or_else(|e| panic!("deploying olmv1 from config/: {e}"));
            image
        })
        .await
}

/// Prints olmv1's pods, extensions, Events and logs when the test fails
/// (`olmv1::testenv::deploy::diagnostics`).
struct DiagnoseOnPanic;

impl Drop for DiagnoseOnPanic {
    fn drop(&mut self) {
        if std::thread::panicking() {
            let kubeconfig = &node_cluster().admin_kubeconfig;
            eprintln!(
                "== olmv1 in the cluster when the test failed:\n{}",
                olmv1::testenv::deploy::diagnostics(kubeconfig)
            );
        }
    }
}

/// Points the extension at `version` (an upgrade).
async fn pin_version(api: &Api<ClusterExtension>, name: &str, version: &str) {
    api.patch(
        name,
        &PatchParams::default(),
        &Patch::Merge(json!({"spec": {"source": {"catalog": {"version": version}}}})),
    )
    .await
    .unwrap_or_else(|e| panic!("pinning {name} to {version}: {e}"));
}

async fn wait_available(deployments: &Api<Deployment>, name: &str, what: &str) {
    eventually(180, what, || async {
        let d = deployments.get(name).await.ok()?;
        let s = d.status?;
        (s.available_replicas? >= 1 && s.updated_replicas? >= 1).then_some(())
    })
    .await;
}

#[tokio::test]
async fn olmv1_in_the_cluster_installs_upgrades_and_uninstalls_an_operator_that_runs() {
    let cluster = node_cluster();
    let _diagnose = DiagnoseOnPanic;
    let node = cluster.node.as_ref().expect("node");
    deploy_olmv1().await;
    let admin = cluster.admin().await;
    let package = support::unique("runs");
    let ns = namespace(&admin, "incluster").await;
    let name = support::unique("ext");
    let mut v1 = BundleSpec::new(&package, "1.0.0");
    v1.operator_image = Some(node.workload_image.clone());
    let mut v2 = BundleSpec::new(&package, "1.1.0");
    v2.operator_image = Some(node.workload_image.clone());
    v2.replaces = Some(v1.bundle_name());
    grant_installer(
        &ns,
        &name,
        &[
            support::bundles::render(&v1, &ns),
            support::bundles::render(&v2, &ns),
        ],
    )
    .await;
    let catalog = support::unique("cat");
    let image = publish_on_node(&catalog, &package, &[v1.clone(), v2.clone()]).await;
    create_catalog(&catalog, &image).await;
    let catalogs: Api<ClusterCatalog> = Api::all(admin.clone());
    let base = eventually(180, "catalog serving", || async {
        let c = catalogs.get(&catalog).await.ok()?;
        c.status?.urls.map(|u| u.base)
    })
    .await;
    assert!(
        base.starts_with("http://olmv1-catalogd-service.olmv1-system.svc"),
        "{base}"
    );

    // Install: resolution goes through the catalog Service URL, from inside a pod.
    let api: Api<ClusterExtension> = Api::all(admin.clone());
    api.create(
        &PostParams::default(),
        &extension(&name, &ns, &package, json!({"version": "1.0.0"})),
    )
    .await
    .expect("create extension");
    wait_installed(&api, &name, "1.0.0").await;
    let deployments: Api<Deployment> = Api::namespaced(admin.clone(), &ns);
    let operator = v1.deployment_name();
    wait_available(&deployments, &operator, "the operator running (1.0.0)").await;

    // Upgrade, with the leader pod deleted right after the change.
    let leases: Api<Lease> = Api::namespaced(admin.clone(), olmv1::testenv::deploy::NAMESPACE);
    let leader = support::lease_holder(&leases).await.expect("a leader");
    pin_version(&api, &name, "1.1.0").await;
    let pods: Api<Pod> = Api::namespaced(admin.clone(), olmv1::testenv::deploy::NAMESPACE);
    pods.delete(&leader, &DeleteParams::default())
        .await
        .unwrap_or_else(|e| panic!("deleting the leader pod {leader}: {e}"));
    wait_installed(&api, &name, "1.1.0").await;
    wait_available(&deployments, &operator, "the operator running (1.1.0)").await;
    // The deleted pod may finish the upgrade while it terminates; then it releases the
    // Lease (or the Lease expires) and another replica leads.
    eventually(90, "another pod leading after the deletion", || async {
        let holder = support::lease_holder(&leases).await?;
        (!holder.is_empty() && holder != leader).then_some(())
    })
    .await;

    // Drift: the operator's Deployment deleted by hand comes back and runs again.
    deployments
        .delete(&operator, &DeleteParams::default())
        .await
        .expect("delete operator deployment");
    wait_available(&deployments, &operator, "the operator restored").await;

    // Every replica (the restarted one included) serves the catalog through the Service.
    olmv1::testenv::deploy::wait_rolled_out(
        &cluster.admin_kubeconfig,
        std::time::Duration::from_secs(120),
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let selector = "app.kubernetes.io/name=olmv1-controller";
    let replicas = pods
        .list(&kube::api::ListParams::default().labels(selector))
        .await
        .expect("olmv1 pods");
    let path = base
        .split_once(".svc")
        .map(|(_, p)| p.to_string())
        .expect("base URL path");
    let mut fetched = 0;
    for (i, pod) in replicas.items.iter().enumerate() {
        let ready = pod
            .status
            .as_ref()
            .and_then(|s| s.conditions.as_ref())
            .is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True"));
        let Some(ip) = pod.status.as_ref().and_then(|s| s.pod_ip.clone()) else {
            continue;
        };
        if !ready || pod.metadata.deletion_timestamp.is_some() {
            continue;
        }
        let url = format!("http://{ip}:8443{path}/api/v1/all");
        let (phase, log) = run_pod(&admin, &ns, &format!("fetch-{i}"), &["get", &url]).await;
        assert_eq!(phase, "Succeeded", "GET {url} from a pod: {log}");
        fetched += 1;
    }
    assert_eq!(fetched, 2, "both ready replicas serve the catalog");
    let (phase, log) = run_pod(
        &admin,
        &ns,
        "fetch-svc",
        &["get", &format!("{base}/api/v1/all")],
    )
    .await;
    assert_eq!(
        phase, "Succeeded",
        "GET {base}/api/v1/all from a pod: {log}"
    );

    // Uninstall: the operator goes away.
    api.delete(&name, &DeleteParams::default())
        .await
        .expect("delete extension");
    eventually(120, "operator deployment removed", || async {
        deployments
            .get_opt(&operator)
            .await
            .ok()?
            .is_none()
            .then_some(())
    })
    .await;
}

fn progressing(e: &ClusterExtension) -> (String, String, String) {
    support::extensions::condition(e, "Progressing")
        .map(|c| (c.status, c.reason, c.message))
        .unwrap_or_default()
}

async fn wait_progressing(
    api: &Api<ClusterExtension>,
    name: &str,
    what: &str,
    check: impl Fn(&(String, String, String)) -> bool,
) -> ClusterExtension {
    eventually(240, what, || async {
        let e = api.get(name).await.ok()?;
        check(&progressing(&e)).then_some(e)
    })
    .await
}

/// Rollout status with real pods: an image that cannot be pulled is named in
/// `RollingOut` until the deadline passes; an upgrade to an operator whose readiness
/// probe passes only after a while is `RollingOut` until then, then `Succeeded`; an
/// operator that never becomes ready stays `RollingOut` with `Installed` True.
#[tokio::test]
async fn rollout_status_follows_real_pods() {
    let cluster = node_cluster();
    let _diagnose = DiagnoseOnPanic;
    let node = cluster.node.as_ref().expect("node");
    deploy_olmv1().await;
    let admin = cluster.admin().await;
    let api: Api<ClusterExtension> = Api::all(admin.clone());

    let package = support::unique("pull");
    let ns = namespace(&admin, "rollout").await;
    let name = support::unique("ext");
    let mut v1 = BundleSpec::new(&package, "1.0.0");
    v1.operator_image = Some(format!("{}/nothing/here:v1", node.registry));
    let mut v2 = BundleSpec::new(&package, "1.1.0");
    v2.operator_image = Some(node.workload_image.clone());
    v2.operator_env = vec![("READY_AFTER".into(), "15".into())];
    v2.replaces = Some(v1.bundle_name());
    let rendered = [
        support::bundles::render(&v1, &ns),
        support::bundles::render(&v2, &ns),
    ];
    grant_installer(&ns, &name, &rendered).await;
    let catalog = support::unique("cat");
    let image = publish_on_node(&catalog, &package, &[v1.clone(), v2.clone()]).await;
    create_catalog(&catalog, &image).await;
    let mut ext = extension(&name, &ns, &package, json!({"version": "1.0.0"}));
    ext.spec.progress_deadline_minutes = Some(10);
    api.create(&PostParams::default(), &ext)
        .await
        .expect("create extension");
    let e = wait_progressing(
        &api,
        &name,
        "RollingOut naming the pull failure",
        |(s, r, m)| {
            s == "True"
                && r == "RollingOut"
                && (m.contains("ImagePullBackOff") || m.contains("ErrImagePull"))
        },
    )
    .await;
    let deployment = format!("deployment/{}", v1.deployment_name());
    assert!(
        progressing(&e).2.contains(&deployment),
        "{:?}",
        progressing(&e)
    );
    let installed = support::extensions::condition(&e, "Installed").expect("Installed");
    assert_eq!(installed.status, "True", "Installed keeps meaning applied");
    wait_progressing(&api, &name, "ProgressDeadlineExceeded", |(s, r, _)| {
        s == "False" && r == "ProgressDeadlineExceeded"
    })
    .await;

    // Upgrade to an operator that becomes ready after 15 s.
    pin_version(&api, &name, "1.1.0").await;
    wait_progressing(&api, &name, "RollingOut 1.1.0", |(s, r, m)| {
        s == "True" && r == "RollingOut" && m.contains("1.1.0")
    })
    .await;
    wait_progressing(&api, &name, "Succeeded once ready", |(s, r, _)| {
        s == "True" && r == "Succeeded"
    })
    .await;
    let deployments: Api<Deployment> = Api::namespaced(admin.clone(), &ns);
    let d = deployments
        .get(&v2.deployment_name())
        .await
        .expect("deployment");
    assert_eq!(d.status.and_then(|s| s.available_replicas), Some(1));

    // Never ready: RollingOut with what is missing.
    let package = support::unique("unready");
    let name = support::unique("ext");
    let mut never = BundleSpec::new(&package, "1.0.0");
    never.operator_image = Some(node.workload_image.clone());
    never.operator_env = vec![("READY".into(), "false".into())];
    grant_installer(&ns, &name, &[support::bundles::render(&never, &ns)]).await;
    let catalog = support::unique("cat");
    let image = publish_on_node(&catalog, &package, std::slice::from_ref(&never)).await;
    create_catalog(&catalog, &image).await;
    api.create(
        &PostParams::default(),
        &extension(&name, &ns, &package, json!({})),
    )
    .await
    .expect("create extension");
    let wanted = format!("deployment/{} 0/1 available", never.deployment_name());
    wait_progressing(&api, &name, "RollingOut: never ready", |(s, r, m)| {
        s == "True" && r == "RollingOut" && m.contains(&wanted)
    })
    .await;
}

/// The namespace of the default installer account of the node suite's olmv1.
const NODE_INSTALLER_NAMESPACE: &str = "node-installers";

/// Objects applied as the admin (server-side).
async fn apply_values(admin: &kube::Client, objects: Vec<serde_json::Value>) {
    let objects: Vec<kube::api::DynamicObject> = objects
        .into_iter()
        .map(|v| serde_json::from_value(v).expect("object"))
        .collect();
    olmv1::testenv::manifests::apply_objects(admin, &objects)
        .await
        .expect("apply");
}

fn installer_binding(name: &str) -> serde_json::Value {
    json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding", "metadata": {"name": name},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": name},
        "subjects": [{"kind": "ServiceAccount", "name": "installer", "namespace": NODE_INSTALLER_NAMESPACE}]})
}

#[tokio::test]
async fn the_install_namespace_is_created_from_the_bundle_and_removed_with_it() {
    use k8s_openapi::api::core::v1::Namespace;
    use olmv1::controller::extension::namespace as install_namespace;
    let cluster = node_cluster();
    let _diagnose = DiagnoseOnPanic;
    let node = cluster.node.as_ref().expect("node");
    deploy_olmv1().await;
    let admin = cluster.admin().await;
    let package = support::unique("nsop");
    let ns = support::unique("created");
    let name = support::unique("ext");
    let mut v1 = BundleSpec::new(&package, "1.0.0");
    v1.operator_image = Some(node.workload_image.clone());
    let template = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns,
        "labels": {"pod-security.kubernetes.io/enforce": "baseline", "pod-security.kubernetes.io/warn": "baseline"}}});
    v1.csv_annotations = vec![(
        install_namespace::CSV_SUGGESTED_NAMESPACE_TEMPLATE.into(),
        template.to_string(),
    )];
    // The default installer: the bundle's generated RBAC, plus creating, deleting and
    // (for the emptiness check) listing what lives in namespaces.
    let rbac = olmv1::preflight::permissions::rbac::installer_rbac(
        &support::bundles::render(&v1, &ns),
        NODE_INSTALLER_NAMESPACE,
        &name,
        olmv1::preflight::permissions::rbac::BundledRbac::Include,
    )
    .expect("rbac");
    let role = rbac.cluster_role["metadata"]["name"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    apply_values(&admin, vec![
        json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NODE_INSTALLER_NAMESPACE}}),
        json!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "installer", "namespace": NODE_INSTALLER_NAMESPACE}}),
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "metadata": {"name": "node-installer-namespaces"}, "rules": [
            {"apiGroups": [""], "resources": ["namespaces"], "verbs": ["create", "delete", "get"]},
            {"apiGroups": ["*"], "resources": ["*"], "verbs": ["list"]},
        ]}),
        installer_binding("node-installer-namespaces"),
        rbac.cluster_role.clone(),
        installer_binding(&role),
    ])
    .await;
    let catalog = support::unique("cat");
    let image = publish_on_node(&catalog, &package, std::slice::from_ref(&v1)).await;
    create_catalog(&catalog, &image).await;
    let mut ext = extension(&name, &ns, &package, json!({}));
    ext.spec.service_account = None;
    ext.metadata.annotations = Some(
        [(
            install_namespace::ANNOTATION_CREATE_NAMESPACE.to_string(),
            "true".to_string(),
        )]
        .into(),
    );
    let api: Api<ClusterExtension> = Api::all(admin.clone());
    api.create(&PostParams::default(), &ext)
        .await
        .expect("create extension");

    // Installed and rolled out: the operator's pod runs in the created namespace, under
    // the template's Pod Security level.
    wait_progressing(&api, &name, "Succeeded once ready", |(s, r, _)| {
        s == "True" && r == "Succeeded"
    })
    .await;
    let namespaces: Api<Namespace> = Api::all(admin.clone());
    let live = namespaces.get(&ns).await.expect("namespace created");
    let labels = live.metadata.labels.unwrap_or_default();
    assert_eq!(
        labels
            .get("pod-security.kubernetes.io/enforce")
            .map(String::as_str),
        Some("baseline")
    );
    assert_eq!(labels.get(install_namespace::LABEL_CREATED_BY), Some(&name));
    let deployments: Api<Deployment> = Api::namespaced(admin.clone(), &ns);
    wait_available(&deployments, &v1.deployment_name(), "operator available").await;
    // Pod Security is enforced there: a privileged pod is refused.
    let privileged: Pod = serde_json::from_value(json!({"metadata": {"name": "privileged"},
        "spec": {"containers": [{"name": "c", "image": node.workload_image, "securityContext": {"privileged": true}}]}}))
    .expect("pod");
    let refused = Api::<Pod>::namespaced(admin.clone(), &ns)
        .create(&PostParams::default(), &privileged)
        .await;
    assert!(
        matches!(&refused, Err(kube::Error::Api(e)) if e.message.contains("violates PodSecurity")),
        "{refused:?}"
    );

    // Uninstall with the operator's pod still running: its ReplicaSet and Pod go with
    // the Deployment (garbage collection), so the namespace goes too.
    api.delete(&name, &DeleteParams::default())
        .await
        .expect("delete extension");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(180);
    while !matches!(namespaces.get_opt(&ns).await, Ok(None)) {
        if std::time::Instant::now() > deadline {
            // What the controller said about the namespace, and where its deletion stands.
            let events = Api::<k8s_openapi::api::core::v1::Event>::all(admin.clone())
                .list(&ListParams::default().fields(&format!("involvedObject.name={name}")))
                .await
                .map(|l| {
                    l.items
                        .into_iter()
                        .map(|e| (e.reason, e.message))
                        .collect::<Vec<_>>()
                });
            let live = namespaces.get_opt(&ns).await.map(|n| n.map(|n| n.status));
            panic!(
                "namespace {ns} not deleted with the extension in 180 s: events {events:?}; namespace status {live:?}"
            );
        }
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    }
}
