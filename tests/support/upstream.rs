//! The binary run as upstream OLM v1's programs (`operator-controller`, `catalogd`;
//! docs/how-to/switch-from-upstream.md): a directory with a link of that name and a
//! certificate pair, the process with upstream's arguments, its readiness, its Lease,
//! and HTTPS checks of its servers (the certificate, the `--tls-profile`).

use k8s_openapi::api::coordination::v1::Lease;
use kube::api::Api;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use super::process::NAMESPACE;
use k8s_openapi::api::core::v1::Secret;
use kube::api::{DynamicObject, PostParams};
use olmv1::testenv::registry::{TEST_PASSWORD, TEST_USER};
use serde_json::json;

/// A process of the binary under another program name; killed when dropped.
pub struct Upstream {
    pub child: Child,
    pub log: PathBuf,
    pub dir: PathBuf,
}

impl Drop for Upstream {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

impl Upstream {
    pub fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }
}

/// A directory with a link `<program>` to the binary, a certificate pair named as in
/// upstream's manifests (`tls_cert`), and a CA directory.
pub fn prepare(program: &str, tls_cert: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(super::unique(program));
    std::fs::create_dir_all(dir.join("certs")).expect("dir");
    std::os::unix::fs::symlink(super::process::binary(), dir.join(program)).expect("link");
    let generated =
        rcgen::generate_simple_self_signed(vec!["localhost".to_string(), "127.0.0.1".to_string()])
            .expect("certificate");
    std::fs::write(dir.join("certs").join(tls_cert), generated.cert.pem()).expect("cert");
    std::fs::write(
        dir.join("certs/tls.key"),
        generated.signing_key.serialize_pem(),
    )
    .expect("key");
    std::fs::write(dir.join("certs/ca.crt"), generated.cert.pem()).expect("ca");
    dir
}

pub fn spawn(dir: PathBuf, program: &str, args: &[String]) -> Upstream {
    spawn_with_env(dir, program, args, &[])
}

/// [`spawn`] with `env` set (our own knobs, e.g. short leader-election timings).
pub fn spawn_with_env(
    dir: PathBuf,
    program: &str,
    args: &[String],
    env: &[(&str, &str)],
) -> Upstream {
    let log = dir.join("stderr.log");
    let file = std::fs::File::create(&log).expect("log");
    let child = Command::new(dir.join(program))
        .args(args)
        .envs(env.iter().copied())
        .env("KUBECONFIG", &super::cluster().controller_kubeconfig)
        .env_remove("RUST_LOG")
        .env_remove("POD_NAMESPACE")
        .env_remove("POD_NAME")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(file)
        .spawn()
        .expect("start");
    Upstream { child, log, dir }
}

pub async fn wait_ready(process: &mut Upstream, health: u16) {
    let url = format!("http://127.0.0.1:{health}/readyz");
    for _ in 0..600 {
        if let Ok(Some(status)) = process.child.try_wait() {
            panic!("exited with {status}: {}", process.log_text());
        }
        if reqwest::get(&url)
            .await
            .is_ok_and(|r| r.status().is_success())
        {
            return;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    panic!("not ready in 60s: {}", process.log_text());
}

pub async fn lease_holder(name: &str) -> String {
    let admin = super::cluster().admin().await;
    let leases: Api<Lease> = Api::namespaced(admin, NAMESPACE);
    super::eventually(60, &format!("Lease {name} held"), || async {
        leases
            .get_opt(name)
            .await
            .ok()
            .flatten()?
            .spec?
            .holder_identity
    })
    .await
}

pub fn https_client(dir: &Path) -> reqwest::Client {
    super::metrics::https_client(&dir.join("certs/ca.crt"))
}

/// Whether `port` refuses TLS 1.2 and speaks TLS 1.3 (`--tls-profile=modern`).
pub async fn tls13_only(dir: &Path, port: u16) -> bool {
    let ca = dir.join("certs/ca.crt");
    let v12 = super::metrics::handshake(port, &ca, &[&rustls::version::TLS12]).await;
    let v13 = super::metrics::handshake(port, &ca, &[&rustls::version::TLS13]).await;
    v12.is_err() && v13 == Ok(rustls::ProtocolVersion::TLSv1_3)
}

pub fn dockerconfigjson(host: &str) -> String {
    let auth = data_encoding::BASE64.encode(format!("{TEST_USER}:{TEST_PASSWORD}").as_bytes());
    data_encoding::BASE64.encode(
        json!({"auths": {host: {"auth": auth}}})
            .to_string()
            .as_bytes(),
    )
}

/// Upstream's operator-controller identity (its chart's ServiceAccount in the system
/// namespace, bound to cluster-admin as that chart binds it).
pub async fn upstream_controller_identity(admin: &kube::Client) {
    let objects: Vec<DynamicObject> = [
        json!({"apiVersion": "v1", "kind": "ServiceAccount",
            "metadata": {"name": "operator-controller-controller-manager", "namespace": NAMESPACE}}),
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
            "metadata": {"name": "operator-controller-manager-admin-rolebinding"},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "cluster-admin"},
            "subjects": [{"kind": "ServiceAccount", "name": "operator-controller-controller-manager",
                          "namespace": NAMESPACE}]}),
    ]
    .into_iter()
    .map(|v| serde_json::from_value(v).expect("object"))
    .collect();
    olmv1::testenv::manifests::apply_objects(admin, &objects)
        .await
        .expect("upstream's controller identity");
}

/// A dockerconfigjson Secret for the authenticating test registry in the system
/// namespace; returns `<namespace>/<name>` for `--global-pull-secret`.
pub async fn registry_pull_secret(admin: &kube::Client) -> String {
    let name = super::unique("upstream-pull");
    let secret: Secret = serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Secret",
        "metadata": {"name": name},
        "type": "kubernetes.io/dockerconfigjson",
        "data": {".dockerconfigjson": dockerconfigjson(super::auth_registry().host())},
    }))
    .expect("secret");
    Api::<Secret>::namespaced(admin.clone(), NAMESPACE)
        .create(&PostParams::default(), &secret)
        .await
        .expect("create secret");
    format!("{NAMESPACE}/{name}")
}
