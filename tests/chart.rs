//! The Helm chart `charts/olmv1`, checked with a real `helm` (v3, built from its Go
//! module by hack/build-helm.sh): `helm lint --strict` passes; `helm template` with the
//! default values gives exactly the objects of `config/` (the release manifest
//! generator's reading of it: no drift, compared as parsed objects, order-insensitive);
//! each value renders what it promises (PodDisruptionBudget, NetworkPolicy,
//! ServiceMonitor, metrics certificate, replicas, leader-election timings, installer
//! policy, registry mirrors, image, namespace); `helm install` on a fresh control plane
//! creates every object, the CRDs of the chart's `crds/` included (the pods need a node:
//! `e2e/chart.rs` installs the chart on the node cluster and runs it).

use olmv1::testenv::{Binaries, ControlPlane, Lifetime, Options, deploy, release};
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

fn project() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// The `helm` binary (hack/build-helm.sh builds it once, then finds it cached).
fn helm() -> &'static PathBuf {
    static HELM: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    HELM.get_or_init(|| {
        let out = Command::new(project().join("hack/build-helm.sh"))
            .stderr(std::process::Stdio::inherit())
            .output()
            .expect("run hack/build-helm.sh");
        assert!(out.status.success(), "hack/build-helm.sh failed");
        PathBuf::from(String::from_utf8_lossy(&out.stdout).trim())
    })
}

/// `helm <args>` with its own (empty) configuration and cache: (success, stdout, stderr).
fn run_helm(args: &[&str]) -> (bool, String, String) {
    let home = tempfile::tempdir().expect("tempdir");
    let out = Command::new(helm())
        .args(args)
        .env("HELM_CACHE_HOME", home.path().join("cache"))
        .env("HELM_CONFIG_HOME", home.path().join("config"))
        .env("HELM_DATA_HOME", home.path().join("data"))
        .output()
        .expect("run helm");
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// The objects of a multi-document YAML stream (empty documents dropped).
fn objects(what: &str, text: &str) -> Vec<Value> {
    let docs: Vec<Value> =
        serde_saphyr::from_multiple(text).unwrap_or_else(|e| panic!("{what}: {e}\n{text}"));
    docs.into_iter().filter(|d| !d.is_null()).collect()
}

/// `helm template olmv1 charts/olmv1 --include-crds` with `values` (a values file):
/// the objects by kind/namespace/name, or helm's error.
fn try_template(values: &Value) -> Result<BTreeMap<String, Value>, String> {
    let dir = tempfile::tempdir().expect("tempdir");
    let file = dir.path().join("values.yaml");
    std::fs::write(&file, serde_json::to_string(values).expect("json")).expect("write");
    let chart = project().join("charts/olmv1");
    let (ok, stdout, stderr) = run_helm(&[
        "template",
        "olmv1",
        &chart.display().to_string(),
        "--include-crds",
        "-f",
        &file.display().to_string(),
    ]);
    if !ok {
        return Err(stderr);
    }
    Ok(by_key(objects("helm template", &stdout)))
}

fn template(values: Value) -> BTreeMap<String, Value> {
    try_template(&values).unwrap_or_else(|e| panic!("helm template {values}: {e}"))
}

fn key(obj: &Value) -> String {
    format!(
        "{}/{}/{}",
        obj["kind"].as_str().unwrap_or("?"),
        obj["metadata"]["namespace"].as_str().unwrap_or(""),
        obj["metadata"]["name"].as_str().unwrap_or("?")
    )
}

fn by_key(list: Vec<Value>) -> BTreeMap<String, Value> {
    let mut map = BTreeMap::new();
    for obj in list {
        let k = key(&obj);
        assert!(map.insert(k.clone(), obj).is_none(), "{k} rendered twice");
    }
    map
}

/// The controller container's arguments.
fn args(objs: &BTreeMap<String, Value>) -> Vec<String> {
    let d = &objs["Deployment/olmv1-system/olmv1-controller"];
    d["spec"]["template"]["spec"]["containers"][0]["args"]
        .as_array()
        .expect("args")
        .iter()
        .map(|a| a.as_str().expect("string arg").to_string())
        .collect()
}

#[test]
fn helm_lint_passes_with_default_and_with_every_option_on() {
    let chart = project().join("charts/olmv1").display().to_string();
    let (ok, stdout, stderr) = run_helm(&["lint", "--strict", &chart]);
    assert!(ok, "helm lint --strict:\n{stdout}{stderr}");
    let dir = tempfile::tempdir().expect("tempdir");
    let file = dir.path().join("values.yaml");
    std::fs::write(&file, everything_on().to_string()).expect("write");
    let (ok, stdout, stderr) = run_helm(&[
        "lint",
        "--strict",
        &chart,
        "-f",
        &file.display().to_string(),
    ]);
    assert!(
        ok,
        "helm lint --strict with every option:\n{stdout}{stderr}"
    );
}

#[test]
fn default_values_render_exactly_the_objects_of_config() {
    let config = release::generate(&project().join("config"), None).expect("generate");
    let want = by_key(objects("config/", &config));
    let got = template(json!({}));
    let missing: Vec<&String> = want.keys().filter(|k| !got.contains_key(*k)).collect();
    let extra: Vec<&String> = got.keys().filter(|k| !want.contains_key(*k)).collect();
    let differ: Vec<&String> = want
        .iter()
        .filter(|(k, v)| got.get(*k).is_some_and(|g| g != *v))
        .map(|(k, _)| k)
        .collect();
    for k in &differ {
        pretty_assertions::assert_eq!(&got[*k], &want[*k], "{k}: chart (left) vs config/ (right)");
    }
    assert!(
        missing.is_empty() && extra.is_empty(),
        "the chart's default rendering differs from config/: missing {missing:?}, extra {extra:?}"
    );
    assert_eq!(got.len(), 17, "{:?}", got.keys());
}

#[test]
fn chart_version_is_the_controllers_and_its_crds_are_configs() {
    let chart: Value = serde_saphyr::from_str(
        &std::fs::read_to_string(project().join("charts/olmv1/Chart.yaml")).expect("Chart.yaml"),
    )
    .expect("parse Chart.yaml");
    assert_eq!(chart["version"], env!("CARGO_PKG_VERSION"));
    assert_eq!(chart["appVersion"], env!("CARGO_PKG_VERSION"));
    for entry in std::fs::read_dir(project().join("config/crd")).expect("config/crd") {
        let path = entry.expect("entry").path();
        let name = path.file_name().expect("name");
        let copy = project().join("charts/olmv1/crds").join(name);
        assert!(
            std::fs::read(&path).ok() == std::fs::read(&copy).ok(),
            "{} differs from {}: run `UPDATE_CRDS=1 cargo test --lib api::crd`",
            copy.display(),
            path.display()
        );
    }
}

/// Values turning on every option (also linted above).
fn everything_on() -> Value {
    json!({
        "image": {"repository": "registry.example.com/olmv1", "digest": "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"},
        "replicas": 3,
        "leaderElection": {"leaseDuration": "15s", "renewDeadline": "10s", "retryPeriod": "5s"},
        "podDisruptionBudget": {"minAvailable": 2},
        "installer": {"defaultServiceAccount": "olmv1-installers/default-installer"},
        "registries": {
            "conf": "[[registry]]\nprefix = \"quay.io\"\nlocation = \"quay.io\"\n[[registry.mirror]]\nlocation = \"mirror.example.internal:5000\"\n",
            "insecure": ["mirror.example.internal:5000"],
            "signaturePolicy": "{\"default\": [{\"type\": \"reject\"}]}",
            "lookaside": "docker:\n  quay.io/acme:\n    lookaside: https://sigs.acme.example/sigstore\n",
        },
        "metrics": {
            "certManager": {"enabled": true},
            "serviceMonitor": {
                "enabled": true,
                "labels": {"release": "prometheus"},
                "prometheusServiceAccount": {"namespace": "monitoring", "name": "prometheus"},
            },
        },
        "networkPolicy": {
            "enabled": true,
            "metricsFrom": [{"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "monitoring"}}}],
        },
        "extraArgs": ["--max-concurrent-reconciles=4"],
        "nodeSelector": {"kubernetes.io/os": "linux"},
    })
}

#[test]
fn every_option_renders_what_it_promises() {
    let objs = template(everything_on());
    let d = &objs["Deployment/olmv1-system/olmv1-controller"];
    assert_eq!(d["spec"]["replicas"], 3);
    let pod = &d["spec"]["template"]["spec"];
    assert_eq!(
        pod["containers"][0]["image"],
        "registry.example.com/olmv1@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
    );
    assert_eq!(pod["nodeSelector"], json!({"kubernetes.io/os": "linux"}));
    let a = args(&objs);
    for want in [
        "--leader-elect",
        "--leader-elect-lease-duration=15s",
        "--leader-elect-renew-deadline=10s",
        "--leader-elect-retry-period=5s",
        "--default-installer-service-account=olmv1-installers/default-installer",
        "--insecure-registry=mirror.example.internal:5000",
        "--metrics-cert-path=/var/run/olmv1/metrics-cert",
        "--max-concurrent-reconciles=4",
    ] {
        assert!(a.iter().any(|x| x == want), "{want} missing from {a:?}");
    }
    assert!(
        !a.iter().any(|x| x.starts_with("--external-address")),
        "{a:?}"
    );
    let volumes = pod["volumes"].as_array().expect("volumes");
    assert!(
        volumes.contains(
            &json!({"name": "metrics-cert", "secret": {"secretName": "olmv1-metrics-cert"}})
        ),
        "{volumes:?}"
    );

    let pdb = &objs["PodDisruptionBudget/olmv1-system/olmv1-controller"];
    assert_eq!(pdb["spec"]["minAvailable"], 2);
    assert_eq!(
        pdb["spec"]["selector"]["matchLabels"]["app.kubernetes.io/name"],
        "olmv1-controller"
    );

    let conf = &objs["ConfigMap/olmv1-system/registries-conf"]["data"]["registries.conf"];
    assert!(
        conf.as_str()
            .is_some_and(|c| c.contains("location = \"mirror.example.internal:5000\"")),
        "{conf}"
    );

    // The signature policy lands where the controller's default path reads it.
    let policy = &objs["ConfigMap/olmv1-system/registries-conf"]["data"]["policy.json"];
    olmv1::image::signature::SignaturePolicy::parse("chart", policy.as_str().unwrap_or(""))
        .expect("the signature policy parses");
    // The registries.d file lands in the directory --registries-d names.
    let lookaside = &objs["ConfigMap/olmv1-system/registries-conf"]["data"]["lookaside.yaml"];
    let mut registries_d = olmv1::image::signature::RegistriesD::default();
    registries_d
        .add("chart", lookaside.as_str().unwrap_or(""))
        .expect("the registries.d file parses");
    assert!(args(&objs).contains(&"--registries-d=/etc/containers".to_string()));

    let np = &objs["NetworkPolicy/olmv1-system/olmv1-controller"]["spec"];
    assert_eq!(np["policyTypes"], json!(["Ingress"]));
    assert_eq!(np["ingress"][0]["ports"][0]["port"], "catalogs");
    assert_eq!(np["ingress"][1]["ports"][0]["port"], "metrics");
    assert_eq!(
        np["ingress"][1]["from"][0]["namespaceSelector"]["matchLabels"]["kubernetes.io/metadata.name"],
        "monitoring"
    );

    let cert = &objs["Certificate/olmv1-system/olmv1-metrics-cert"]["spec"];
    assert_eq!(cert["secretName"], "olmv1-metrics-cert");
    assert_eq!(cert["issuerRef"]["name"], "olmv1-selfsigned");
    assert!(
        cert["dnsNames"]
            .as_array()
            .is_some_and(|n| n.contains(&json!("olmv1-catalogd-service.olmv1-system.svc")))
    );
    assert!(objs.contains_key("Issuer/olmv1-system/olmv1-selfsigned"));

    let sm = &objs["ServiceMonitor/olmv1-system/olmv1-controller"];
    assert_eq!(sm["metadata"]["labels"]["release"], "prometheus");
    let ep = &sm["spec"]["endpoints"][0];
    assert_eq!(ep["port"], "https-metrics");
    assert_eq!(ep["scheme"], "https");
    assert_eq!(
        ep["tlsConfig"]["ca"]["secret"]["name"],
        "olmv1-metrics-cert"
    );
    let crb = &objs["ClusterRoleBinding//olmv1-metrics-reader-prometheus"];
    assert_eq!(crb["roleRef"]["name"], "olmv1-metrics-reader");
    assert_eq!(
        crb["subjects"][0],
        json!({"kind": "ServiceAccount", "name": "prometheus", "namespace": "monitoring"})
    );
}

#[test]
fn one_replica_has_no_disruption_budget_and_options_can_be_turned_off() {
    let objs = template(json!({
        "replicas": 1,
        "leaderElection": {"enabled": false},
        "installer": {"allowControllerIdentity": true, "admissionPolicy": false},
        "metrics": {"secure": false, "certSecret": "my-metrics-tls", "serviceMonitor": {"enabled": true}},
        "image": {"tag": "v0.1.0"},
    }));
    assert!(
        !objs.keys().any(|k| k.starts_with("PodDisruptionBudget/")),
        "{:?}",
        objs.keys()
    );
    assert!(
        !objs
            .keys()
            .any(|k| k.starts_with("ValidatingAdmissionPolicy")),
        "{:?}",
        objs.keys()
    );
    let a = args(&objs);
    assert!(!a.iter().any(|x| x.starts_with("--leader-elect")), "{a:?}");
    for want in [
        "--allow-controller-identity",
        "--metrics-secure=false",
        "--metrics-cert-path=/var/run/olmv1/metrics-cert",
    ] {
        assert!(a.iter().any(|x| x == want), "{want} missing from {a:?}");
    }
    let d = &objs["Deployment/olmv1-system/olmv1-controller"];
    assert_eq!(
        d["spec"]["template"]["spec"]["containers"][0]["image"],
        "olmv1:v0.1.0"
    );
    let sm = &objs["ServiceMonitor/olmv1-system/olmv1-controller"];
    assert_eq!(sm["spec"]["endpoints"][0]["scheme"], "http");
    assert!(
        !objs.keys().any(|k| k.starts_with("Certificate/")),
        "{:?}",
        objs.keys()
    );
}

#[test]
fn another_namespace_moves_every_namespaced_object_and_the_catalog_urls() {
    let objs = template(json!({"namespace": {"name": "olm"}}));
    assert!(objs.contains_key("Namespace//olm"));
    for (k, obj) in &objs {
        let kind = obj["kind"].as_str().unwrap_or("");
        let cluster_scoped = matches!(
            kind,
            "Namespace" | "CustomResourceDefinition" | "ClusterRole" | "ClusterRoleBinding"
        ) || kind.starts_with("ValidatingAdmissionPolicy");
        assert_eq!(
            obj["metadata"]["namespace"].as_str().is_none(),
            cluster_scoped,
            "{k}"
        );
        if !cluster_scoped {
            assert_eq!(obj["metadata"]["namespace"], "olm", "{k}");
        }
    }
    assert_eq!(
        objs["ClusterRoleBinding//olmv1-controller"]["subjects"][0]["namespace"],
        "olm"
    );
    let a: Vec<String> = {
        let d = &objs["Deployment/olm/olmv1-controller"];
        serde_json::from_value(d["spec"]["template"]["spec"]["containers"][0]["args"].clone())
            .expect("args")
    };
    assert!(
        a.contains(&"--external-address=olmv1-catalogd-service.olm.svc".to_string()),
        "{a:?}"
    );
    let without_ns = template(json!({"namespace": {"name": "olm", "create": false}}));
    assert!(!without_ns.contains_key("Namespace//olm"));
}

#[test]
fn contradicting_values_are_refused_with_a_reason() {
    let err = try_template(&json!({"leaderElection": {"enabled": false}})).expect_err("refused");
    assert!(
        err.contains("replicas > 1 needs leaderElection.enabled"),
        "{err}"
    );
    let err = try_template(&json!({"installer": {
        "defaultServiceAccount": "a/b", "allowControllerIdentity": true,
    }}))
    .expect_err("refused");
    assert!(err.contains("exclude each other"), "{err}");
}

async fn fresh_control_plane() -> ControlPlane {
    let _ = rustls::crypto::aws_lc_rs::default_provider().install_default();
    let etcd = std::env::var_os("OLMV1_ETCD")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            etcd_bin_vendored::etcd_bin_path()
                .unwrap_or_else(|e| panic!("no vendored etcd binary: {e}"))
                .to_path_buf()
        });
    let binaries = Binaries::locate(Some(etcd)).unwrap_or_else(|e| panic!("{e}"));
    let stamp = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or_default();
    // Removed by the supervised processes when they end.
    let data_dir = std::env::temp_dir().join(format!("olmv1-chart-{}-{stamp}", std::process::id()));
    ControlPlane::start(Options {
        binaries,
        data_dir,
        log_dir: crate::support::tmp_dir()
            .join("testenv-logs")
            .join(format!("chart-{}", std::process::id())),
        controller_manager: false,
        lifetime: Lifetime::Supervised,
        node: None,
    })
    .await
    .unwrap_or_else(|e| panic!("starting a control plane: {e}"))
}

#[tokio::test]
async fn helm_install_on_a_fresh_control_plane_creates_every_object() {
    let cp = fresh_control_plane().await;
    let kubeconfig = format!("--kubeconfig={}", cp.admin_kubeconfig.display());
    let chart = project().join("charts/olmv1").display().to_string();
    let values = ["--set", "networkPolicy.enabled=true", "--set", "replicas=3"];
    let mut install = vec![
        "install",
        "olmv1",
        &chart,
        &kubeconfig,
        "--namespace=default",
    ];
    install.extend(values);
    let (ok, stdout, stderr) = run_helm(&install);
    assert!(ok, "helm install:\n{stdout}{stderr}");
    assert!(stdout.contains("STATUS: deployed"), "{stdout}");

    let mut render = vec!["template", "olmv1", &chart, "--include-crds"];
    render.extend(values);
    let (ok, rendered, stderr) = run_helm(&render);
    assert!(ok, "helm template: {stderr}");
    let expected = objects("helm template", &rendered).len();
    let dir = tempfile::tempdir().expect("tempdir");
    let file = dir.path().join("rendered.yaml");
    std::fs::write(&file, &rendered).expect("write");
    let out = Command::new(deploy::kubectl())
        .arg(&kubeconfig)
        .args(["get", "-o", "name", "-f"])
        .arg(&file)
        .output()
        .expect("run kubectl");
    let listed = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "kubectl get -f (every rendered object):\n{listed}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(listed.lines().count(), expected, "{listed}");
    for name in [
        "customresourcedefinition.apiextensions.k8s.io/clusterextensions.olm.operatorframework.io",
        "networkpolicy.networking.k8s.io/olmv1-controller",
        "poddisruptionbudget.policy/olmv1-controller",
        "deployment.apps/olmv1-controller",
    ] {
        assert!(
            listed.lines().any(|l| l == name),
            "{name} missing:\n{listed}"
        );
    }
}
