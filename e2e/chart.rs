//! The Helm chart `charts/olmv1` installed with `helm install` (a real helm v3, built
//! by hack/build-helm.sh) on a real node (`olmv1::testenv::node`), with this build's
//! image: the chart first adopts what the test harness applied from `config/` (the
//! namespace and RBAC, labelled and annotated for Helm as a user switching from
//! `kubectl apply` does), the controller Deployment rolls out with the leader-election
//! timings the values set, and a ClusterExtension installs an operator that runs.

use crate::support;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use kube::api::{Api, PostParams};
use olmv1::api::{ClusterCatalog, ClusterExtension};
use olmv1::testenv::demo::{self, BundleSpec};
use olmv1::testenv::deploy::{self, NAMESPACE};
use olmv1::testenv::registry::TestRegistry;
use serde_json::json;
use std::path::{Path, PathBuf};
use std::process::Command;
use support::extensions::{create_catalog, extension, grant_installer, wait_installed};
use support::{eventually, namespace, node_cluster};

fn project() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// Runs `program args`; panics with its output when it fails.
fn run(program: &Path, args: &[String], env: &[(&str, PathBuf)]) -> String {
    let out = Command::new(program)
        .args(args)
        .envs(env.iter().map(|(k, v)| (*k, v.as_os_str())))
        .output()
        .unwrap_or_else(|e| panic!("{}: {e}", program.display()));
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        out.status.success(),
        "{} {}:\n{text}",
        program.display(),
        args.join(" ")
    );
    text
}

/// This build's `olmv1` binary (stripped) as an image in the node registry, as
/// e2e/node.rs builds it: (repository, digest).
async fn push_image(registry: &str) -> (String, String) {
    let work = tempfile::tempdir().expect("tempdir");
    let stripped = support::process::stripped_binary(work.path());
    let files = olmv1::testenv::image::program_files(&stripped, "olmv1").expect("files");
    let run = olmv1::testenv::image::RunConfig {
        entrypoint: vec!["/olmv1".into()],
        cmd: vec!["controller".into()],
        ..Default::default()
    };
    let built = olmv1::testenv::image::build(&files, &run).expect("image");
    let image = olmv1::testenv::image::push(&built, &format!("{registry}/olmv1/olmv1:chart"), true)
        .await
        .expect("push olmv1 image");
    let (repo, digest) = image.split_once('@').expect("a digest-pinned reference");
    (repo.to_string(), digest.to_string())
}

/// Labels and annotates for Helm's release `olmv1` (in `default`) what the harness
/// applied from `config/base` and `config/rbac`, so that `helm install` adopts it.
fn adopt_for_helm(kubeconfig: &Path) {
    let kubectl = deploy::kubectl();
    let files: Vec<String> = ["config/base", "config/rbac"]
        .iter()
        .flat_map(|d| ["-f".to_string(), project().join(d).display().to_string()])
        .collect();
    let base = vec![format!("--kubeconfig={}", kubeconfig.display())];
    let mut label = base.clone();
    label.push("label".into());
    label.extend(files.clone());
    label.extend([
        "--overwrite".into(),
        "app.kubernetes.io/managed-by=Helm".into(),
    ]);
    run(&kubectl, &label, &[]);
    let mut annotate = base;
    annotate.push("annotate".into());
    annotate.extend(files);
    annotate.extend([
        "--overwrite".into(),
        "meta.helm.sh/release-name=olmv1".into(),
        "meta.helm.sh/release-namespace=default".into(),
    ]);
    run(&kubectl, &annotate, &[]);
}

#[tokio::test]
async fn helm_install_runs_the_controller_which_installs_an_operator() {
    let cluster = node_cluster();
    let node = cluster.node.as_ref().expect("node");
    let kubeconfig = cluster.admin_kubeconfig.clone();
    let (repository, digest) = push_image(&node.registry).await;
    adopt_for_helm(&kubeconfig);

    let work = tempfile::tempdir().expect("tempdir");
    let values = work.path().join("values.yaml");
    let v = json!({
        "image": {"repository": repository, "digest": digest},
        "leaderElection": {"leaseDuration": "15s", "renewDeadline": "10s", "retryPeriod": "2s"},
        "registries": {"insecure": [node.registry]},
        // A "minute" of catalog polling lasts 2 s here.
        "extraArgs": ["--poll-unit-seconds=2"],
    });
    std::fs::write(&values, v.to_string()).expect("write values");
    let helm_env = [
        ("HELM_CACHE_HOME", work.path().join("cache")),
        ("HELM_CONFIG_HOME", work.path().join("config")),
        ("HELM_DATA_HOME", work.path().join("data")),
    ];
    let out = run(
        &helm(),
        &[
            "install".into(),
            "olmv1".into(),
            project().join("charts/olmv1").display().to_string(),
            format!("--kubeconfig={}", kubeconfig.display()),
            "--namespace=default".into(),
            "-f".into(),
            values.display().to_string(),
            "--wait".into(),
            "--timeout=180s".into(),
        ],
        &helm_env,
    );
    eprintln!("helm install:\n{out}");
    let _diagnose = DiagnoseOnPanic;
    deploy::wait_rolled_out(&kubeconfig, std::time::Duration::from_secs(120))
        .unwrap_or_else(|e| panic!("{e}"));
    let status = run(
        &helm(),
        &[
            "status".into(),
            "olmv1".into(),
            format!("--kubeconfig={}", kubeconfig.display()),
            "--namespace=default".into(),
        ],
        &helm_env,
    );
    assert!(status.contains("STATUS: deployed"), "{status}");

    let admin = cluster.admin().await;
    let deployments: Api<Deployment> = Api::namespaced(admin.clone(), NAMESPACE);
    let d = deployments
        .get(deploy::DEPLOYMENT)
        .await
        .expect("deployment");
    assert_eq!(
        d.metadata
            .labels
            .as_ref()
            .and_then(|l| l.get("app.kubernetes.io/managed-by")),
        Some(&"Helm".to_string())
    );
    let s = d.status.expect("status");
    assert_eq!(s.ready_replicas, Some(2), "{s:?}");
    let pdbs: Api<PodDisruptionBudget> = Api::namespaced(admin.clone(), NAMESPACE);
    let pdb = pdbs
        .get("olmv1-controller")
        .await
        .expect("PodDisruptionBudget");
    eventually(
        60,
        "the PodDisruptionBudget counting both replicas",
        || async {
            let p = pdbs.get("olmv1-controller").await.ok()?;
            (p.status?.current_healthy == 2).then_some(())
        },
    )
    .await;
    assert!(pdb.spec.is_some());
    // The lease timings of the values reached the leader.
    let leases: Api<Lease> = Api::namespaced(admin.clone(), NAMESPACE);
    eventually(60, "the Lease held with a 15 s duration", || async {
        let spec = leases.get("olmv1-controller").await.ok()?.spec?;
        (spec.lease_duration_seconds == Some(15) && spec.holder_identity.is_some()).then_some(())
    })
    .await;

    // A ClusterExtension installs, through the catalog Service, an operator that runs.
    let package = support::unique("chart");
    let ns = namespace(&admin, "chart").await;
    let name = support::unique("ext");
    let mut v1 = BundleSpec::new(&package, "1.0.0");
    v1.operator_image = Some(node.workload_image.clone());
    grant_installer(&ns, &name, &[support::bundles::render(&v1, &ns)]).await;
    let registry = TestRegistry::existing(&node.registry).expect("registry");
    let bundle = demo::push_bundle(&registry, &v1)
        .await
        .expect("push bundle");
    let files = std::collections::BTreeMap::from([(
        format!("{package}/catalog.json"),
        demo::catalog_fbc(&package, &[(v1.clone(), bundle)]),
    )]);
    let catalog = support::unique("cat");
    let repo_tag = format!("catalogs/{catalog}:latest");
    olmv1::testenv::registry::push_catalog_image(&registry, &repo_tag, &files)
        .await
        .expect("push catalog");
    create_catalog(&catalog, &format!("{}/{repo_tag}", node.registry)).await;
    let catalogs: Api<ClusterCatalog> = Api::all(admin.clone());
    eventually(180, "catalog serving", || async {
        catalogs
            .get(&catalog)
            .await
            .ok()?
            .status?
            .urls
            .map(|u| u.base)
    })
    .await;
    let api: Api<ClusterExtension> = Api::all(admin.clone());
    api.create(
        &PostParams::default(),
        &extension(&name, &ns, &package, json!({"version": "1.0.0"})),
    )
    .await
    .expect("create extension");
    wait_installed(&api, &name, "1.0.0").await;
    let operators: Api<Deployment> = Api::namespaced(admin.clone(), &ns);
    let operator = v1.deployment_name();
    eventually(180, "the operator running", || async {
        let s = operators.get(&operator).await.ok()?.status?;
        (s.available_replicas? >= 1).then_some(())
    })
    .await;

    // `helm upgrade` with other values rolls the controller out again.
    let kube_arg = format!("--kubeconfig={}", kubeconfig.display());
    let helm_args = |verb: &[&str]| -> Vec<String> {
        let mut a: Vec<String> = verb.iter().map(|s| s.to_string()).collect();
        a.extend([kube_arg.clone(), "--namespace=default".into()]);
        a
    };
    let chart = project().join("charts/olmv1").display().to_string();
    run(
        &helm(),
        &helm_args(&[
            "upgrade",
            "olmv1",
            &chart,
            "--reuse-values",
            "--set",
            "replicas=3",
            "--wait",
            "--timeout=180s",
        ]),
        &helm_env,
    );
    let s = deployments
        .get(deploy::DEPLOYMENT)
        .await
        .expect("deployment")
        .status;
    assert_eq!(s.and_then(|s| s.ready_replicas), Some(3));
    wait_installed(&api, &name, "1.0.0").await;

    // `helm uninstall` removes the controller but not the CRDs (the chart's crds/), so
    // the ClusterExtension and the operator it installed stay.
    run(
        &helm(),
        &helm_args(&["uninstall", "olmv1", "--wait"]),
        &helm_env,
    );
    eventually(120, "the controller Deployment gone", || async {
        deployments
            .get_opt(deploy::DEPLOYMENT)
            .await
            .ok()?
            .is_none()
            .then_some(())
    })
    .await;
    assert!(api.get_opt(&name).await.expect("get extension").is_some());
    let s = operators.get(&operator).await.expect("operator").status;
    assert!(s.and_then(|s| s.available_replicas).unwrap_or(0) >= 1);
}

/// The `helm` binary (hack/build-helm.sh builds it once, then finds it cached).
fn helm() -> PathBuf {
    let out = Command::new(project().join("hack/build-helm.sh"))
        .stderr(std::process::Stdio::inherit())
        .output()
        .expect("run hack/build-helm.sh");
    assert!(out.status.success(), "hack/build-helm.sh failed");
    PathBuf::from(String::from_utf8_lossy(&out.stdout).trim())
}

/// Prints olmv1's pods, extensions, Events and logs when the test fails.
struct DiagnoseOnPanic;

impl Drop for DiagnoseOnPanic {
    fn drop(&mut self) {
        if std::thread::panicking() {
            let kubeconfig = &node_cluster().admin_kubeconfig;
            eprintln!(
                "== olmv1 in the cluster when the test failed:\n{}",
                deploy::diagnostics(kubeconfig)
            );
        }
    }
}
