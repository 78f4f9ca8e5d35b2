//! Secrets stay secret: after a failing pull (wrong credentials, and an unusable pull
//! secret) and a succeeding pull (catalog and bundle image from the authenticated TLS
//! registry), no pull-secret content, password, `user:password` encoding or API token
//! appears in the controller's logs (at `debug`), in Events, in the status of the
//! ClusterCatalog or ClusterExtension, or in the metrics.

use crate::support;

use k8s_openapi::api::core::v1::{Event, Secret, ServiceAccount};
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams};
use olmv1::api::{ClusterCatalog, ClusterExtension};
use olmv1::testenv::registry::{TEST_PASSWORD, TEST_USER};
use serde_json::{Value, json};
use support::bundles::{self, BundleSpec};
use support::extensions;
use support::process::{ControllerProcess, NAMESPACE};

fn b64(data: &[u8]) -> String {
    data_encoding::BASE64.encode(data)
}

fn dockerconfigjson(host: &str, user: &str, password: &str) -> Vec<u8> {
    let auth = b64(format!("{user}:{password}").as_bytes());
    json!({"auths": {host: {"auth": auth}}})
        .to_string()
        .into_bytes()
}

async fn put_secret(api: &Api<Secret>, name: &str, config: &[u8]) {
    let secret: Secret = serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Secret",
        "metadata": {"name": name},
        "type": "kubernetes.io/dockerconfigjson",
        "data": {".dockerconfigjson": b64(config)},
    }))
    .expect("secret");
    api.patch(
        name,
        &PatchParams::apply("secrets-test").force(),
        &Patch::Apply(&secret),
    )
    .await
    .expect("apply secret");
}

/// The bearer token in the controller's kubeconfig.
fn controller_token() -> String {
    let text = std::fs::read_to_string(&support::cluster().controller_kubeconfig)
        .expect("controller kubeconfig");
    let doc: Value = serde_saphyr::from_str(&text).expect("kubeconfig yaml");
    doc["users"][0]["user"]["token"]
        .as_str()
        .expect("token")
        .to_string()
}

/// Every secret value that must never appear, with a name for the failure message.
fn forbidden(host: &str, wrong: &str, leaky: &str) -> Vec<(String, String)> {
    let mut list = vec![
        ("registry password".to_string(), TEST_PASSWORD.to_string()),
        ("wrong password".into(), wrong.to_string()),
        ("unusable secret content".into(), leaky.to_string()),
        ("controller token".into(), controller_token()),
    ];
    for (what, pw) in [("good", TEST_PASSWORD), ("wrong", wrong)] {
        let pair = format!("{TEST_USER}:{pw}");
        list.push((format!("{what} user:password base64"), b64(pair.as_bytes())));
        list.push((
            format!("{what} .dockerconfigjson base64"),
            b64(&dockerconfigjson(host, TEST_USER, pw)),
        ));
    }
    list
}

#[track_caller]
fn assert_clean(surface: &str, text: &str, secrets: &[(String, String)]) {
    for (what, value) in secrets {
        assert!(
            !text.contains(value.as_str()),
            "the {what} appears in the {surface}"
        );
    }
}

async fn wait_catalog_message(api: &Api<ClusterCatalog>, name: &str, needle: &str) {
    support::eventually(90, &format!("catalog {name}: {needle}"), || async {
        let c = api.get(name).await.ok()?;
        let conds = c.status.as_ref()?.conditions.clone();
        conds
            .iter()
            .any(|c| c.type_ == "Progressing" && c.message.contains(needle))
            .then_some(())
    })
    .await;
}

/// Everything a user or a monitoring system can read about the two objects.
async fn surfaces(
    admin: &kube::Client,
    ctl: &ControllerProcess,
    catalog: &str,
    ext: &str,
) -> Vec<(&'static str, String)> {
    let events = Api::<Event>::all(admin.clone())
        .list(&ListParams::default())
        .await
        .expect("events");
    let cat = Api::<ClusterCatalog>::all(admin.clone())
        .get(catalog)
        .await
        .expect("catalog");
    let ext = Api::<ClusterExtension>::all(admin.clone())
        .get(ext)
        .await
        .expect("extension");
    let metrics = support::eventually(30, "metrics", || ctl.metrics()).await;
    vec![
        ("controller log", ctl.log_text()),
        (
            "Events",
            serde_json::to_string(&events.items).expect("json"),
        ),
        ("ClusterCatalog", serde_json::to_string(&cat).expect("json")),
        (
            "ClusterExtension",
            serde_json::to_string(&ext).expect("json"),
        ),
        ("metrics", metrics),
    ]
}

#[tokio::test]
async fn pull_secrets_and_tokens_never_reach_logs_events_status_or_metrics() {
    let admin = support::cluster().admin().await;
    let auth = support::auth_registry();
    let host = auth.host().to_string();
    let secrets_api: Api<Secret> = Api::namespaced(admin.clone(), NAMESPACE);
    let (global, unusable) = (support::unique("pull"), support::unique("broken"));
    let wrong = support::unique("wrong-password");
    let leaky = support::unique("leaky-secret-value");
    put_secret(
        &secrets_api,
        &global,
        &dockerconfigjson(&host, TEST_USER, &wrong),
    )
    .await;
    // A malformed pull secret whose error could echo its content.
    put_secret(
        &secrets_api,
        &unusable,
        json!({"auths": {host.clone(): leaky.clone()}})
            .to_string()
            .as_bytes(),
    )
    .await;
    Api::<ServiceAccount>::namespaced(admin.clone(), NAMESPACE)
        .patch(
            "olmv1-controller",
            &PatchParams::default(),
            &Patch::Merge(json!({"imagePullSecrets": [{"name": unusable}]})),
        )
        .await
        .expect("service account");
    let ca = std::env::temp_dir().join(format!("{}.pem", support::unique("registry-ca")));
    std::fs::write(&ca, auth.ca_pem().unwrap_or_default()).expect("ca file");
    let ca_arg = ca.display().to_string();
    let mut ctl = ControllerProcess::start_with_log(
        "secrets",
        &["--global-pull-secret", &global, "--ca-bundle", &ca_arg],
        "debug",
    );
    ctl.wait_listening(60);

    // Failing pull: wrong credentials.
    let package = support::unique("secretpkg");
    let image = olmv1::testenv::demo::publish_catalog(
        auth,
        &format!("catalogs/{package}:latest"),
        &package,
        &["1.0.0".to_string()],
        None,
    )
    .await
    .expect("publish");
    let catalogs: Api<ClusterCatalog> = Api::all(admin.clone());
    let catalog = support::unique("secretcat");
    extensions::create_catalog(&catalog, &image).await;
    wait_catalog_message(&catalogs, &catalog, "401").await;
    assert!(
        ctl.log_text().contains("ignoring unusable pull secret"),
        "the unusable secret was read: {}",
        ctl.log_text()
    );

    // Succeeding pulls: the right credentials, catalog then bundle.
    put_secret(
        &secrets_api,
        &global,
        &dockerconfigjson(&host, TEST_USER, TEST_PASSWORD),
    )
    .await;
    let ns = support::namespace(&admin, "secrets").await;
    let name = support::unique("secretext");
    let rendered = bundles::render(&BundleSpec::new(&package, "1.0.0"), &ns);
    extensions::grant_installer(&ns, &name, &[rendered]).await;
    let exts: Api<ClusterExtension> = Api::all(admin.clone());
    exts.create(
        &PostParams::default(),
        &extensions::extension(&name, &ns, &package, json!({})),
    )
    .await
    .expect("create extension");
    extensions::wait_installed(&exts, &name, "1.0.0").await;

    let secrets = forbidden(&host, &wrong, &leaky);
    for (surface, text) in surfaces(&admin, &ctl, &catalog, &name).await {
        assert!(!text.is_empty(), "nothing read from the {surface}");
        assert_clean(surface, &text, &secrets);
    }
    ctl.kill();
    let _ = std::fs::remove_file(&ca);
}

/// The shipped Deployment runs the controller locked down, and every path it writes
/// (the cache, `/tmp`) is an emptyDir volume (no cluster needed).
#[test]
fn deployment_runs_non_root_read_only_without_capabilities() {
    let path =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("config/manager/deployment.yaml");
    let text = std::fs::read_to_string(&path).expect("deployment.yaml");
    let d: Value = serde_saphyr::from_str(&text).expect("yaml");
    let pod = &d["spec"]["template"]["spec"];
    assert_eq!(pod["securityContext"]["runAsNonRoot"], json!(true));
    assert_eq!(
        pod["securityContext"]["seccompProfile"]["type"],
        json!("RuntimeDefault")
    );
    assert!(
        pod["securityContext"]["runAsUser"]
            .as_u64()
            .is_some_and(|u| u > 0)
    );
    let containers = pod["containers"].as_array().expect("containers");
    let volumes = pod["volumes"].as_array().expect("volumes");
    for c in containers {
        let sc = &c["securityContext"];
        assert_eq!(sc["allowPrivilegeEscalation"], json!(false), "{c}");
        assert_eq!(sc["readOnlyRootFilesystem"], json!(true), "{c}");
        assert_eq!(sc["capabilities"]["drop"], json!(["ALL"]), "{c}");
        assert!(sc["capabilities"].get("add").is_none(), "{c}");
        let mounts = c["volumeMounts"].as_array().expect("mounts");
        for needed in ["/var/cache/olmv1", "/tmp"] {
            let mount = mounts
                .iter()
                .find(|m| m["mountPath"] == json!(needed))
                .unwrap_or_else(|| panic!("{needed} is not mounted"));
            let volume = volumes
                .iter()
                .find(|v| v["name"] == mount["name"])
                .expect("volume");
            assert!(volume.get("emptyDir").is_some(), "{needed}: {volume}");
        }
        // The cache flag, when given, points at the mounted cache.
        if let Some(arg) = c["args"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
            .find(|a| a.starts_with("--cache-dir="))
        {
            assert_eq!(arg, "--cache-dir=/var/cache/olmv1");
        }
    }
}
