//! The serving certificate after a takeover (olm-v0 reference §3.3, "Cert hand-over"):
//! OLM v0 issued the operator's webhook and APIService serving certificate itself and
//! rolls the pods whenever its CA changes, through the pod-template annotation
//! [`CA_HASH_ANNOTATION`] (the SHA-256 of the CA, in OLM v0's install/certresources.go).
//! After the takeover cert-manager re-issues that Secret under the same name and the
//! webhook configurations and CRD conversion carry cert-manager's CA, but a pod that
//! read its certificate at start keeps serving OLM v0's: every call to the webhooks
//! fails TLS verification (seen with the real OLM v0, e2e/migrate_v0.rs). Doing what
//! OLM v0 does on a CA change — the annotation set to the new CA's hash, one rollout —
//! ends that. Pure; `olmv1 migrate convert` reads and patches.

use serde_json::{Value, json};
use sha2::{Digest, Sha256};

/// OLM v0's pod-template annotation: the hex SHA-256 of the serving CA (PEM).
pub const CA_HASH_ANNOTATION: &str = "olmcahash";

/// The volumes OLM v0 (and olmv1's renderer) mount the serving certificate through.
const CERT_VOLUMES: [&str; 2] = ["webhook-cert", "apiservice-cert"];

/// What to do with one Deployment of the operator.
#[derive(Debug, Clone, PartialEq)]
pub enum CertRollout {
    /// Not OLM v0's certificate set-up, or its pods already run with the current CA.
    Nothing,
    /// cert-manager has not re-issued the Secret yet.
    Wait,
    /// Merge patch of the Deployment: the annotation set to the new CA's hash (one
    /// rollout, as OLM v0 does when its CA changes).
    Patch { secret: String, patch: Value },
}

/// The Secret the Deployment mounts its serving certificate from, when it has OLM
/// v0's certificate volumes and CA-hash annotation.
pub fn serving_secret(deployment: &Value) -> Option<String> {
    let template = deployment.pointer("/spec/template")?;
    template
        .pointer("/metadata/annotations")?
        .get(CA_HASH_ANNOTATION)?;
    template
        .pointer("/spec/volumes")?
        .as_array()?
        .iter()
        .filter(|v| CERT_VOLUMES.contains(&v["name"].as_str().unwrap_or_default()))
        .find_map(|v| v.pointer("/secret/secretName")?.as_str().map(str::to_owned))
}

/// The hex SHA-256 of `pem`, as OLM v0's `PEMSHA256`.
pub fn ca_hash(pem: &[u8]) -> String {
    Sha256::digest(pem)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// Decides for `deployment` given the live Secret it mounts (`None`: missing).
pub fn rollout(deployment: &Value, secret: Option<&Value>) -> CertRollout {
    let Some(name) = serving_secret(deployment) else {
        return CertRollout::Nothing;
    };
    let Some(secret) = secret else {
        return CertRollout::Wait;
    };
    let issued_by_cert_manager = secret
        .pointer("/metadata/annotations")
        .and_then(|a| a.get("cert-manager.io/certificate-name"))
        .is_some();
    let ca = secret
        .pointer("/data/ca.crt")
        .and_then(Value::as_str)
        .and_then(|b| data_encoding::BASE64.decode(b.as_bytes()).ok())
        .filter(|ca| !ca.is_empty());
    let Some(ca) = ca.filter(|_| issued_by_cert_manager) else {
        return CertRollout::Wait;
    };
    let hash = ca_hash(&ca);
    let current = deployment
        .pointer("/spec/template/metadata/annotations")
        .and_then(|a| a.get(CA_HASH_ANNOTATION))
        .and_then(Value::as_str);
    if current == Some(hash.as_str()) {
        return CertRollout::Nothing;
    }
    CertRollout::Patch {
        secret: name,
        patch: json!({"spec": {"template": {"metadata": {"annotations": {CA_HASH_ANNOTATION: hash}}}}}),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn deployment(hash: Option<&str>) -> Value {
        let mut d = json!({"spec": {"template": {"metadata": {"annotations": {}}, "spec": {"volumes": [
            {"name": "apiservice-cert", "secret": {"secretName": "op-service-cert"}},
            {"name": "webhook-cert", "secret": {"secretName": "op-service-cert"}},
        ]}}}});
        if let Some(h) = hash {
            d["spec"]["template"]["metadata"]["annotations"][CA_HASH_ANNOTATION] = json!(h);
        }
        d
    }

    fn secret(cert_manager: bool, ca: &[u8]) -> Value {
        let mut s = json!({"metadata": {"annotations": {}},
            "data": {"ca.crt": data_encoding::BASE64.encode(ca)}});
        if cert_manager {
            s["metadata"]["annotations"]["cert-manager.io/certificate-name"] =
                json!("op-service-cert");
        }
        s
    }

    #[test]
    fn the_hash_is_olm_v0s() {
        // sha256("") as in Go's hex.EncodeToString(sha256.New().Sum(nil))
        assert_eq!(
            ca_hash(b""),
            "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
        );
    }

    #[test]
    fn rolls_once_when_cert_manager_reissued_the_secret() {
        let old = deployment(Some(&ca_hash(b"v0 CA")));
        // OLM v0's Secret still there (not re-issued yet), or missing: wait
        assert_eq!(
            rollout(&old, Some(&secret(false, b"v0 CA"))),
            CertRollout::Wait
        );
        assert_eq!(rollout(&old, None), CertRollout::Wait);
        assert_eq!(rollout(&old, Some(&secret(true, b""))), CertRollout::Wait);
        // re-issued: the annotation gets the new CA's hash
        let new_ca = b"cert-manager CA";
        let CertRollout::Patch {
            secret: name,
            patch,
        } = rollout(&old, Some(&secret(true, new_ca)))
        else {
            panic!("a patch");
        };
        assert_eq!(name, "op-service-cert");
        assert_eq!(
            patch["spec"]["template"]["metadata"]["annotations"][CA_HASH_ANNOTATION],
            json!(ca_hash(new_ca))
        );
        // rolled: nothing more
        let rolled = deployment(Some(&ca_hash(new_ca)));
        assert_eq!(
            rollout(&rolled, Some(&secret(true, new_ca))),
            CertRollout::Nothing
        );
    }

    #[test]
    fn deployments_without_olm_v0s_certificate_set_up_are_left_alone() {
        assert_eq!(rollout(&deployment(None), None), CertRollout::Nothing);
        let no_volumes = json!({"spec": {"template": {"metadata": {"annotations": {CA_HASH_ANNOTATION: "x"}}, "spec": {}}}});
        assert_eq!(rollout(&no_volumes, None), CertRollout::Nothing);
    }
}
