//! Which certificate provider a bundle is rendered with (docs/concepts/rendering.md §5.2, §5.5 item 9):
//! cert-manager when the cluster serves its `Certificate` and `Issuer` kinds; else
//! OpenShift's service-ca when the cluster serves its operator's `ServiceCA` kind
//! (upstream's order when both feature gates are on: cert-manager first). Without
//! either a bundle with webhooks is rejected before anything is written, with the
//! documented `unsupported bundle: webhookDefinitions are not supported`, instead of
//! failing later on the kinds nobody serves. Pure; the discovery call is in the
//! reconciler.

use crate::bundle::CertProvider;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::APIResourceList;
use serde_json::Value;

/// The API group version whose kinds the cert-manager provider renders.
pub const CERT_MANAGER_API: &str = "cert-manager.io/v1";
/// The API group version of OpenShift's service-ca operator (`ServiceCA`): a cluster
/// serving it runs the service-ca controller.
pub const SERVICE_CA_API: &str = "operator.openshift.io/v1";

/// Whether the CSV declares webhooks (only those need a certificate provider).
pub fn has_webhooks(csv: &Value) -> bool {
    csv["spec"]["webhookdefinitions"]
        .as_array()
        .is_some_and(|w| !w.is_empty())
}

/// The provider to render with: `configured`, unless that is cert-manager (the
/// automatic choice) and the cluster does not serve its kinds (`cert_manager` = the
/// discovery of [`CERT_MANAGER_API`], `None` when the group version is not served): then
/// OpenShift service-ca when `service_ca` (the discovery of [`SERVICE_CA_API`]) has
/// `ServiceCA`, else none.
pub fn effective(
    configured: CertProvider,
    cert_manager: Option<&APIResourceList>,
    service_ca: Option<&APIResourceList>,
) -> CertProvider {
    if configured != CertProvider::CertManager {
        return configured;
    }
    let serves = |list: Option<&APIResourceList>, kind: &str| {
        list.is_some_and(|l| l.resources.iter().any(|r| r.kind == kind))
    };
    if serves(cert_manager, "Certificate") && serves(cert_manager, "Issuer") {
        CertProvider::CertManager
    } else if serves(service_ca, "ServiceCA") {
        CertProvider::OpenShiftServiceCa
    } else {
        CertProvider::None
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn list(kinds: &[&str]) -> APIResourceList {
        listed(CERT_MANAGER_API, kinds)
    }

    fn listed(group_version: &str, kinds: &[&str]) -> APIResourceList {
        serde_json::from_value(json!({
            "groupVersion": group_version,
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
        assert_eq!(effective(cm, None, None), CertProvider::None);
        assert_eq!(
            effective(cm, Some(&list(&["Certificate"])), None),
            CertProvider::None
        );
        assert_eq!(
            effective(
                cm,
                Some(&list(&["Certificate", "Issuer", "ClusterIssuer"])),
                None
            ),
            CertProvider::CertManager
        );
        assert_eq!(
            effective(
                CertProvider::None,
                Some(&list(&["Certificate", "Issuer"])),
                None
            ),
            CertProvider::None
        );
    }

    #[test]
    fn service_ca_when_served_and_cert_manager_is_not() {
        let cm = CertProvider::CertManager;
        let service_ca = listed(SERVICE_CA_API, &["ServiceCA", "Console"]);
        let other = listed(SERVICE_CA_API, &["Console"]);
        assert_eq!(
            effective(cm, None, Some(&service_ca)),
            CertProvider::OpenShiftServiceCa
        );
        assert_eq!(effective(cm, None, Some(&other)), CertProvider::None);
        // Both served: cert-manager first, as upstream's feature gates order them.
        assert_eq!(
            effective(
                cm,
                Some(&list(&["Certificate", "Issuer"])),
                Some(&service_ca)
            ),
            CertProvider::CertManager
        );
        assert_eq!(
            effective(CertProvider::None, None, Some(&service_ca)),
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
