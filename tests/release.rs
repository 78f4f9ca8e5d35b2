//! The release manifest `dist/olmv1.yaml`: it is what `olmv1-testenv release` generates
//! from `config/` (drift check), and `kubectl apply -f` of it — client-side as most
//! users run it, and server-side — on a fresh real control plane creates every object
//! it lists (the Deployment's pods need a node; they are not asked for here).

use kube::api::{Api, DynamicObject, GroupVersionKind};
use kube::discovery::{Discovery, Scope};
use olmv1::testenv::{Binaries, ControlPlane, Lifetime, Options, deploy, manifests, release};
use std::path::{Path, PathBuf};
use std::process::Command;

fn project() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

#[test]
fn committed_release_manifest_is_what_config_generates() {
    let generated = release::generate(&project().join("config"), None).expect("generate");
    let committed =
        std::fs::read_to_string(project().join(release::COMMITTED)).unwrap_or_else(|e| {
            panic!(
                "{}: {e}; create it with: {}",
                release::COMMITTED,
                release::REGENERATE
            )
        });
    assert!(
        committed == generated,
        "{} differs from what config/ generates: regenerate it with\n  {}",
        release::COMMITTED,
        release::REGENERATE
    );
}

#[test]
fn pinned_release_manifest_names_the_image_once() {
    let image = "registry.example.com/olmv1@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";
    let out = release::generate(&project().join("config"), Some(image)).expect("generate");
    let line = format!("image: {image}");
    assert_eq!(out.lines().filter(|l| l.trim() == line).count(), 1, "{out}");
    assert!(!out.contains("image: olmv1:latest"), "{out}");
}

async fn fresh_control_plane(name: &str) -> ControlPlane {
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
    let data_dir = std::env::temp_dir().join(format!(
        "olmv1-release-{name}-{}-{stamp}",
        std::process::id()
    ));
    ControlPlane::start(Options {
        binaries,
        data_dir,
        log_dir: crate::support::tmp_dir()
            .join("testenv-logs")
            .join(format!("release-{name}-{}", std::process::id())),
        controller_manager: false,
        lifetime: Lifetime::Supervised,
        node: None,
    })
    .await
    .unwrap_or_else(|e| panic!("starting a control plane: {e}"))
}

/// `kubectl apply <mode> -f dist/olmv1.yaml`, then every object of the file exists.
async fn apply_and_check(mode: &[&str]) {
    let name = if mode.is_empty() { "csa" } else { "ssa" };
    let cp = fresh_control_plane(name).await;
    let kubectl = deploy::kubectl();
    assert!(
        kubectl.exists(),
        "{} is missing: hack/build-node.sh builds it",
        kubectl.display()
    );
    let manifest = project().join(release::COMMITTED);
    let out = Command::new(&kubectl)
        .arg(format!("--kubeconfig={}", cp.admin_kubeconfig.display()))
        .arg("apply")
        .args(mode)
        .arg("-f")
        .arg(&manifest)
        .output()
        .expect("run kubectl");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "kubectl apply {mode:?} -f {}:\n{stdout}{stderr}",
        manifest.display()
    );

    let text = std::fs::read_to_string(&manifest).expect("manifest");
    let objects = manifests::parse_objects(release::COMMITTED, &text).expect("parse");
    let client = cp.admin_client().await.expect("client");
    let discovery = Discovery::new(client.clone())
        .run()
        .await
        .expect("discovery");
    let mut kinds = std::collections::BTreeSet::new();
    for obj in &objects {
        let types = obj.types.as_ref().expect("apiVersion/kind");
        let gvk = GroupVersionKind::try_from(types).expect("gvk");
        let (resource, caps) = discovery
            .resolve_gvk(&gvk)
            .unwrap_or_else(|| panic!("the API server does not serve {gvk:?}"));
        let obj_name = obj.metadata.name.clone().expect("name");
        let api: Api<DynamicObject> = match caps.scope {
            Scope::Namespaced => Api::namespaced_with(
                client.clone(),
                obj.metadata
                    .namespace
                    .as_deref()
                    .expect("namespaced object has a namespace"),
                &resource,
            ),
            Scope::Cluster => Api::all_with(client.clone(), &resource),
        };
        let live = api
            .get_opt(&obj_name)
            .await
            .expect("get")
            .unwrap_or_else(|| {
                panic!(
                    "{} {obj_name} was not created by kubectl apply {mode:?}",
                    types.kind
                )
            });
        assert_eq!(live.metadata.name.as_deref(), Some(obj_name.as_str()));
        assert!(
            stdout.contains(&obj_name),
            "kubectl did not report {} {obj_name}:\n{stdout}",
            types.kind
        );
        kinds.insert(types.kind.clone());
    }
    for kind in [
        "Namespace",
        "CustomResourceDefinition",
        "ServiceAccount",
        "ClusterRole",
        "ClusterRoleBinding",
        "Role",
        "RoleBinding",
        "ConfigMap",
        "Deployment",
        "Service",
        "ValidatingAdmissionPolicy",
        "ValidatingAdmissionPolicyBinding",
    ] {
        assert!(
            kinds.contains(kind),
            "the release manifest has no {kind}: {kinds:?}"
        );
    }
    eprintln!("kubectl apply {mode:?}: {} objects exist", objects.len());
}

#[tokio::test]
async fn kubectl_apply_client_side_installs_every_object() {
    apply_and_check(&[]).await;
}

#[tokio::test]
async fn kubectl_apply_server_side_installs_every_object() {
    apply_and_check(&["--server-side"]).await;
}
