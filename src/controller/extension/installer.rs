//! Who installs an extension (docs/concepts/installer-permissions.md A3): the ServiceAccount
//! named in `spec.serviceAccount` (in `spec.namespace`); when the field is absent — as in
//! YAML written for current upstream releases, where it is optional — the cluster
//! administrator's policy on the controller: a default installer account
//! (`--default-installer-service-account`), the controller's own ServiceAccount
//! (`--allow-controller-identity`, upstream's behaviour), or refusal with a condition
//! that says what to set. Never silently cluster-admin. Pure.

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

/// The installer of an extension with `spec`, given the controller's default (`None`:
/// refuse extensions that do not name one).
pub fn choose(
    spec: &ClusterExtensionSpec,
    default: Option<&InstallerAccount>,
) -> Result<InstallerAccount, String> {
    if let Some(account) = &spec.service_account {
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
        let chosen = choose(&spec(Some("sa")), Some(&default)).unwrap();
        assert_eq!(chosen.to_string(), "system:serviceaccount:ns:sa");
        assert_eq!(chosen.status().source, InstallerSource::ServiceAccount);
        assert_eq!(
            chosen.status().username,
            "system:serviceaccount:ns:sa".to_string()
        );
        let defaulted = choose(&spec(None), Some(&default)).unwrap();
        assert_eq!(defaulted, default);
        assert_eq!(
            defaulted.status().source,
            InstallerSource::DefaultInstallerServiceAccount
        );
    }

    #[test]
    fn without_account_or_default_the_message_says_what_to_set() {
        let message = choose(&spec(None), None).unwrap_err();
        assert!(
            message.starts_with("spec.serviceAccount is not set"),
            "{message}"
        );
        assert!(message.contains("namespace \"ns\""));
        assert!(message.contains("--default-installer-service-account=<namespace>/<name>"));
    }

    #[test]
    fn parse_needs_namespace_and_name() {
        assert!(InstallerAccount::parse("a/b").is_ok());
        for bad in ["", "a", "/b", "a/", "a/b/c"] {
            assert!(InstallerAccount::parse(bad).is_err(), "{bad}");
        }
    }
}
