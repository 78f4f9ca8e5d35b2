//! Who installs an extension (docs/concepts/installer-permissions.md A3): the ServiceAccount
//! named in `spec.serviceAccount` (in `spec.namespace`); when the field is absent — as in
//! YAML written for current upstream releases, where it is optional — the cluster
//! administrator's policy on the controller: a default installer account
//! (`--default-installer-service-account`), the controller's own ServiceAccount
//! (`--allow-controller-identity`, upstream's behaviour), or refusal with a condition
//! that says what to set. Never silently cluster-admin. In upstream's `operator-controller`
//! program (docs/how-to/switch-from-upstream.md) the field is [`ServiceAccountField::Ignored`],
//! as upstream treats it since deprecating it: the controller's own identity installs.
//! Pure.

use crate::api::{ClusterExtensionSpec, InstallerSource, InstallerStatus};
use std::fmt;

/// The ServiceAccount every write of an extension's objects is made as.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct InstallerAccount {
    pub namespace: String,
    pub name: String,
    /// Why this account (`status.install.installer.source`).
    pub source: InstallerSource,
}

impl InstallerAccount {
    /// `namespace/name`, as the `--default-installer-service-account` flag takes it.
    pub fn parse(value: &str) -> Result<InstallerAccount, String> {
        match value.split_once('/') {
            Some((namespace, name))
                if !namespace.is_empty() && !name.is_empty() && !name.contains('/') =>
            {
                Ok(InstallerAccount {
                    namespace: namespace.to_string(),
                    name: name.to_string(),
                    source: InstallerSource::DefaultInstallerServiceAccount,
                })
            }
            _ => Err(format!(
                "invalid installer ServiceAccount {value:?}: expected <namespace>/<name>"
            )),
        }
    }
}

impl InstallerAccount {
    /// `status.install.installer` for a revision applied as this account.
    pub fn status(&self) -> InstallerStatus {
        InstallerStatus {
            username: self.to_string(),
            source: self.source,
        }
    }
}

impl fmt::Display for InstallerAccount {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "system:serviceaccount:{}:{}", self.namespace, self.name)
    }
}

/// What `spec.serviceAccount` means to this controller.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum ServiceAccountField {
    /// The named account installs (olmv1's model).
    #[default]
    Honoured,
    /// Ignored, with [`DEPRECATION_WARNING`] logged: upstream's model since it deprecated
    /// the field (operator-controller v1.11.0); the default installer installs.
    Ignored,
}

/// Upstream's log line for an extension that still names `spec.serviceAccount`
/// (operator-controller v1.11.0, `ServiceAccountDeprecationWarning`).
pub const DEPRECATION_WARNING: &str = "spec.serviceAccount is deprecated, ignored, and will be removed in a future release - operator-controller's cluster-admin service account is used for all cluster interactions";

/// [`DEPRECATION_WARNING`] when `field` ignores a `spec.serviceAccount` that names an
/// account.
pub fn ignored_warning(
    spec: &ClusterExtensionSpec,
    field: ServiceAccountField,
) -> Option<&'static str> {
    let named = spec
        .service_account
        .as_ref()
        .is_some_and(|a| !a.name.is_empty());
    (named && field == ServiceAccountField::Ignored).then_some(DEPRECATION_WARNING)
}

/// The installer of an extension with `spec`, given the controller's default (`None`:
/// refuse extensions that do not name one) and what `spec.serviceAccount` means.
pub fn choose(
    spec: &ClusterExtensionSpec,
    default: Option<&InstallerAccount>,
    field: ServiceAccountField,
) -> Result<InstallerAccount, String> {
    if let Some(account) = spec
        .service_account
        .as_ref()
        .filter(|_| field == ServiceAccountField::Honoured)
    {
        return Ok(InstallerAccount {
            namespace: spec.namespace.clone(),
            name: account.name.clone(),
            source: InstallerSource::ServiceAccount,
        });
    }
    default.cloned().ok_or_else(|| {
        format!(
            "spec.serviceAccount is not set and this controller has no default installer: set spec.serviceAccount.name to a ServiceAccount in namespace {:?} that may install the extension (`olmv1 rbac` prints the RBAC it needs), or have the cluster administrator start the controller with --default-installer-service-account=<namespace>/<name> (or --allow-controller-identity to install as the controller itself)",
            spec.namespace
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::ServiceAccountReference;

    fn spec(account: Option<&str>) -> ClusterExtensionSpec {
        ClusterExtensionSpec {
            namespace: "ns".into(),
            service_account: account.map(|name| ServiceAccountReference { name: name.into() }),
            ..Default::default()
        }
    }

    #[test]
    fn the_named_account_wins_over_the_default() {
        let default = InstallerAccount::parse("olmv1-system/installer").unwrap();
        let chosen = choose(
            &spec(Some("sa")),
            Some(&default),
            ServiceAccountField::Honoured,
        )
        .unwrap();
        assert_eq!(chosen.to_string(), "system:serviceaccount:ns:sa");
        assert_eq!(chosen.status().source, InstallerSource::ServiceAccount);
        assert_eq!(
            chosen.status().username,
            "system:serviceaccount:ns:sa".to_string()
        );
        let defaulted = choose(&spec(None), Some(&default), ServiceAccountField::Honoured).unwrap();
        assert_eq!(defaulted, default);
        assert_eq!(
            defaulted.status().source,
            InstallerSource::DefaultInstallerServiceAccount
        );
    }

    #[test]
    fn without_account_or_default_the_message_says_what_to_set() {
        let message = choose(&spec(None), None, ServiceAccountField::Honoured).unwrap_err();
        assert!(
            message.starts_with("spec.serviceAccount is not set"),
            "{message}"
        );
        assert!(message.contains("namespace \"ns\""));
        assert!(message.contains("--default-installer-service-account=<namespace>/<name>"));
    }

    #[test]
    fn upstreams_model_ignores_the_named_account_with_its_warning() {
        let controller = InstallerAccount {
            namespace: "olmv1-system".into(),
            name: "operator-controller-controller-manager".into(),
            source: InstallerSource::ControllerIdentity,
        };
        let ignored = ServiceAccountField::Ignored;
        let chosen = choose(&spec(Some("some-sa")), Some(&controller), ignored).unwrap();
        assert_eq!(chosen, controller);
        assert_eq!(chosen.status().source, InstallerSource::ControllerIdentity);
        assert_eq!(
            ignored_warning(&spec(Some("some-sa")), ignored),
            Some(DEPRECATION_WARNING)
        );
        assert_eq!(ignored_warning(&spec(None), ignored), None);
        assert_eq!(ignored_warning(&spec(Some("")), ignored), None);
        let honoured = ServiceAccountField::Honoured;
        assert_eq!(ignored_warning(&spec(Some("some-sa")), honoured), None);
        assert!(choose(&spec(Some("x")), None, ignored).is_err());
    }

    #[test]
    fn parse_needs_namespace_and_name() {
        assert!(InstallerAccount::parse("a/b").is_ok());
        for bad in ["", "a", "/b", "a/", "a/b/c"] {
            assert!(InstallerAccount::parse(bad).is_err(), "{bad}");
        }
    }
}
