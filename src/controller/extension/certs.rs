//! Which certificate provider a bundle is rendered with (docs/concepts/rendering.md §5.2, §5.5 item 9):
//! cert-manager only when the cluster serves its `Certificate` and `Issuer` kinds.
//! Without it a bundle with webhooks is rejected before anything is written, with the
//! documented `unsupported bundle: webhookDefinitions are not supported`, instead of
//! failing later on the kinds nobody serves. Pure; the discovery call is in the
//! reconciler.

use crate::bundle::CertProvider;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::APIResourceList;
use serde_json::Value;

/// The API group version whose kinds the cert-manager provider renders.
pub const CERT_MANAGER_API: &str = "cert-manager.io/v1";

/// Whether the CSV declares webhooks (only those need a certificate provider).
pub fn has_webhooks(csv: &Value) -> bool {
    csv["spec"]["webhookdefinitions"]
        .as_array()
        .is_some_and(|w| !w.is_empty())
}

/// The provider to render with: `configured`, unless that is cert-manager and the
/// cluster does not serve its kinds (`served` = the discovery of [`CERT_MANAGER_API`],
/// `None` when the group version is not served).
pub fn effective(configured: CertProvider, served: Option<&APIResourceList>) -> CertProvider {
    if configured != CertProvider::CertManager {
        return configured;
    }
    let serves = |kind: &str| served.is_some_and(|l| l.resources.iter().any(|r| r.kind == kind));
    if serves("Certificate") && serves("Issuer") {
        CertProvider::CertManager
    } else {
        CertProvider::None
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn list(kinds: &[&str]) -> APIResourceList {
        serde_json::from_value(json!({
            "groupVersion": CERT_MANAGER_API,
            "resources": kinds.iter().map(|k| json!({
                "name": format!("{}s", k.to_lowercase()), "kind": k, "namespaced": true,
                "singularName": k.to_lowercase(), "verbs": ["get"]
            })).collect::<Vec<_>>()
        }))
        .unwrap()
    }

    #[test]
    fn cert_manager_only_when_served() {
        let cm = CertProvider::CertManager;
        assert_eq!(effective(cm, None), CertProvider::None);
        assert_eq!(
            effective(cm, Some(&list(&["Certificate"]))),
            CertProvider::None
        );
        assert_eq!(
            effective(cm, Some(&list(&["Certificate", "Issuer", "ClusterIssuer"]))),
            CertProvider::CertManager
        );
        assert_eq!(
            effective(CertProvider::None, Some(&list(&["Certificate", "Issuer"]))),
            CertProvider::None
        );
    }

    #[test]
    fn webhooks_declared() {
        assert!(!has_webhooks(&json!({"spec": {}})));
        assert!(!has_webhooks(&json!({"spec": {"webhookdefinitions": []}})));
        assert!(has_webhooks(
            &json!({"spec": {"webhookdefinitions": [{"type": "ValidatingAdmissionWebhook"}]}})
        ));
    }
}
