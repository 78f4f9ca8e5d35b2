//! Real cert-manager for the test control plane: its CRDs applied and its controller
//! and cainjector running as supervised processes (`hack/build-cert-manager.sh` builds
//! them from the cert-manager Go module and caches them with the module's CRDs), then
//! a self-check that a self-signed Issuer and a Certificate become Ready. This is the
//! certificate provider webhook bundles are rendered for (`cert-manager.io/v1` Issuer
//! and Certificate, CA injection by annotation).
//!
//! cert-manager's own webhook is not run and its webhook configurations are not
//! registered: it only validates and defaults cert-manager's resources (what it
//! rejects is invalid input the tests never write; the controllers default what they
//! need themselves) and converts between API versions the CRDs no longer serve.

use super::TestEnvError;
use super::process::{Lifetime, Process};
use kube::api::{Api, DynamicObject};
use serde_json::{Value, json};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// The cert-manager release `hack/cert-manager/go.mod` pins.
pub const CERT_MANAGER_VERSION: &str = "v1.21.2";

/// The namespace of the Secrets ClusterIssuers use (`--cluster-resource-namespace`);
/// the self-check's Issuer and Certificate live there too.
pub const NAMESPACE: &str = "cert-manager";

/// The cached build: the two programs and the CRD files.
#[derive(Clone, Debug)]
pub struct CertManagerBinaries {
    pub controller: PathBuf,
    pub cainjector: PathBuf,
    pub crds: PathBuf,
}

/// `$OLMV1_CERT_MANAGER_DIR`, else `$XDG_CACHE_HOME/olmv1/cert-manager/<version>` (or
/// `~/.cache/…`), as `hack/build-cert-manager.sh` writes it.
pub fn default_dir() -> PathBuf {
    if let Some(dir) = std::env::var_os("OLMV1_CERT_MANAGER_DIR") {
        return PathBuf::from(dir);
    }
    let cache = std::env::var_os("XDG_CACHE_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")))
        .unwrap_or_else(|| PathBuf::from("/tmp"));
    cache
        .join("olmv1")
        .join("cert-manager")
        .join(CERT_MANAGER_VERSION)
}

impl CertManagerBinaries {
    /// Finds the cached build, with a message saying how to make it when it is missing.
    pub fn locate() -> Result<CertManagerBinaries, TestEnvError> {
        let dir = default_dir();
        let bins = CertManagerBinaries {
            controller: dir.join("controller"),
            cainjector: dir.join("cainjector"),
            crds: dir.join("crds"),
        };
        let crd = bins.crds.join("cert-manager.io_certificates.yaml");
        for path in [&bins.controller, &bins.cainjector, &crd] {
            if !path.is_file() {
                return Err(TestEnvError::Missing(format!(
                    "{} not found: run hack/build-cert-manager.sh once (it builds cert-manager {CERT_MANAGER_VERSION} with Go and caches it in {})",
                    path.display(),
                    dir.display()
                )));
            }
        }
        Ok(bins)
    }
}

/// cert-manager running against a control plane.
pub struct CertManager {
    processes: Vec<Process>,
}

impl CertManager {
    /// Applies the CRDs, starts the controller and the cainjector with the admin
    /// kubeconfig, and waits (up to `limit`) until a self-signed Issuer and a
    /// Certificate in [`NAMESPACE`] are Ready and the Certificate's Secret exists.
    pub async fn start(
        binaries: &CertManagerBinaries,
        admin: &kube::Client,
        admin_kubeconfig: &Path,
        log_dir: &Path,
        lifetime: Lifetime,
        pid_dir: &Path,
        limit: Duration,
    ) -> Result<CertManager, TestEnvError> {
        super::manifests::apply_dir(admin, &binaries.crds).await?;
        wait_established(admin, limit).await?;
        super::manifests::apply_objects(admin, &[namespace_object()?]).await?;
        let kubeconfig = format!("--kubeconfig={}", admin_kubeconfig.display());
        let mut cm = CertManager {
            processes: Vec::new(),
        };
        for (name, program, args) in [
            (
                "cert-manager-controller",
                &binaries.controller,
                vec![
                    kubeconfig.clone(),
                    "--leader-elect=false".to_string(),
                    format!("--cluster-resource-namespace={NAMESPACE}"),
                    "--v=2".to_string(),
                ],
            ),
            (
                "cert-manager-cainjector",
                &binaries.cainjector,
                vec![
                    kubeconfig.clone(),
                    "--leader-elect=false".to_string(),
                    "--v=2".to_string(),
                ],
            ),
        ] {
            let log = log_dir.join(format!("{name}.log"));
            match Process::spawn(name, program, &args, &log, lifetime, None, pid_dir) {
                Ok(p) => cm.processes.push(p),
                Err(e) => {
                    cm.stop();
                    return Err(e);
                }
            }
        }
        if let Err(e) = cm.self_check(admin, limit).await {
            cm.stop();
            return Err(e);
        }
        Ok(cm)
    }

    /// Issues a certificate from a self-signed Issuer and waits until it is Ready.
    async fn self_check(
        &mut self,
        admin: &kube::Client,
        limit: Duration,
    ) -> Result<(), TestEnvError> {
        let objects = self_check_objects()?;
        super::manifests::apply_objects(admin, &objects).await?;
        let certificates: Api<DynamicObject> = Api::namespaced_with(
            admin.clone(),
            NAMESPACE,
            &kube::discovery::ApiResource::from_gvk(&kube::api::GroupVersionKind::gvk(
                "cert-manager.io",
                "v1",
                "Certificate",
            )),
        );
        let secrets: Api<k8s_openapi::api::core::v1::Secret> =
            Api::namespaced(admin.clone(), NAMESPACE);
        let start = Instant::now();
        let mut last = String::from("no status yet");
        loop {
            for p in self.processes.iter_mut() {
                p.check_running()?;
            }
            if let Ok(cert) = certificates.get(SELF_CHECK).await {
                let value = serde_json::to_value(&cert).unwrap_or(Value::Null);
                match ready_condition(&value) {
                    Some((true, _)) => {
                        if let Ok(Some(s)) = secrets.get_opt(SELF_CHECK).await
                            && s.data.is_some_and(|d| d.contains_key("tls.crt"))
                        {
                            return Ok(());
                        }
                        last =
                            format!("Certificate Ready but Secret {SELF_CHECK} has no tls.crt yet");
                    }
                    Some((false, message)) => last = message,
                    None => {}
                }
            }
            if start.elapsed() > limit {
                let log = self
                    .processes
                    .first()
                    .map(|p| p.log.clone())
                    .unwrap_or_default();
                return Err(TestEnvError::NotReady {
                    name: format!("cert-manager (Certificate {NAMESPACE}/{SELF_CHECK}: {last})"),
                    seconds: limit.as_secs(),
                    tail: super::process::log_tail(&log, 20),
                    log,
                });
            }
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
    }

    /// Stops both processes.
    pub fn stop(&mut self) {
        for p in self.processes.iter_mut().rev() {
            p.stop();
        }
        self.processes.clear();
    }

    /// Hands the processes over: they keep running after this value is dropped
    /// (supervised ones still stop when this process exits).
    pub fn leak(mut self) {
        let processes = std::mem::take(&mut self.processes);
        std::mem::forget(processes);
    }
}

impl Drop for CertManager {
    fn drop(&mut self) {
        self.stop();
    }
}

/// Name of the self-check's Issuer, Certificate and Secret.
pub const SELF_CHECK: &str = "olmv1-testenv-self-check";

fn namespace_object() -> Result<DynamicObject, TestEnvError> {
    to_object(json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}}))
}

fn self_check_objects() -> Result<Vec<DynamicObject>, TestEnvError> {
    let meta = json!({"name": SELF_CHECK, "namespace": NAMESPACE});
    [
        json!({"apiVersion": "cert-manager.io/v1", "kind": "Issuer", "metadata": meta, "spec": {"selfSigned": {}}}),
        json!({"apiVersion": "cert-manager.io/v1", "kind": "Certificate", "metadata": meta, "spec": {
            "secretName": SELF_CHECK,
            "commonName": "self-check.cert-manager.svc",
            "dnsNames": ["self-check.cert-manager.svc"],
            "issuerRef": {"name": SELF_CHECK, "kind": "Issuer"},
        }}),
    ]
    .into_iter()
    .map(to_object)
    .collect()
}

fn to_object(v: Value) -> Result<DynamicObject, TestEnvError> {
    serde_json::from_value(v).map_err(|e| TestEnvError::Manifest {
        source_name: "cert-manager self-check".into(),
        message: e.to_string(),
    })
}

/// The `Ready` condition of a cert-manager object (Certificate, Issuer): whether it is
/// `True`, and its reason and message; `None` without one.
pub fn ready_condition(obj: &Value) -> Option<(bool, String)> {
    let c = obj["status"]["conditions"]
        .as_array()?
        .iter()
        .find(|c| c["type"] == "Ready")?;
    let text = |k: &str| c[k].as_str().unwrap_or_default().to_string();
    Some((
        c["status"] == "True",
        format!(
            "Ready={} {}: {}",
            text("status"),
            text("reason"),
            text("message")
        ),
    ))
}

/// Waits until every cert-manager CRD is Established.
async fn wait_established(admin: &kube::Client, limit: Duration) -> Result<(), TestEnvError> {
    use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
    let api: Api<CustomResourceDefinition> = Api::all(admin.clone());
    let start = Instant::now();
    loop {
        let list = api
            .list(&Default::default())
            .await
            .map_err(|e| TestEnvError::Kube(format!("listing CRDs: {e}")))?;
        let pending: Vec<String> = list
            .items
            .iter()
            .filter(|c| c.spec.group.ends_with("cert-manager.io"))
            .filter(|c| {
                !c.status
                    .as_ref()
                    .and_then(|s| s.conditions.as_ref())
                    .is_some_and(|cs| {
                        cs.iter()
                            .any(|c| c.type_ == "Established" && c.status == "True")
                    })
            })
            .filter_map(|c| c.metadata.name.clone())
            .collect();
        if pending.is_empty() {
            return Ok(());
        }
        if start.elapsed() > limit {
            return Err(TestEnvError::Kube(format!(
                "cert-manager CRDs not Established within {}s: {}",
                limit.as_secs(),
                pending.join(", ")
            )));
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ready_condition_reads_status_reason_and_message() {
        let obj = json!({"status": {"conditions": [
            {"type": "Issuing", "status": "True"},
            {"type": "Ready", "status": "False", "reason": "DoesNotExist", "message": "Issuing certificate as Secret does not exist"},
        ]}});
        assert_eq!(
            ready_condition(&obj),
            Some((
                false,
                "Ready=False DoesNotExist: Issuing certificate as Secret does not exist".into()
            ))
        );
        let ready = json!({"status": {"conditions": [{"type": "Ready", "status": "True", "reason": "Ready"}]}});
        assert_eq!(ready_condition(&ready).map(|r| r.0), Some(true));
        assert_eq!(ready_condition(&json!({"status": {}})), None);
    }

    #[test]
    fn self_check_objects_name_their_issuer() {
        let objects = self_check_objects().unwrap();
        assert_eq!(objects.len(), 2);
        let cert = serde_json::to_value(&objects[1]).unwrap();
        assert_eq!(cert["spec"]["issuerRef"]["name"], SELF_CHECK);
        assert_eq!(cert["metadata"]["namespace"], NAMESPACE);
    }
}
