//! The binary run as upstream OLM v1's programs (`operator-controller`, `catalogd`;
//! docs/how-to/switch-from-upstream.md): a directory with a link of that name and a
//! certificate pair, the process with upstream's arguments, its readiness, its Lease,
//! and HTTPS checks of its servers (the certificate, the `--tls-profile`).

use k8s_openapi::api::coordination::v1::Lease;
use kube::api::Api;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use super::process::NAMESPACE;

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
    let log = dir.join("stderr.log");
    let file = std::fs::File::create(&log).expect("log");
    let child = Command::new(dir.join(program))
        .args(args)
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
