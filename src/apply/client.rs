//! Clients that act as an installer ServiceAccount (reference A3), cached per account.

use std::collections::HashMap;
use std::sync::Mutex;

/// The user name of a ServiceAccount: `system:serviceaccount:<ns>:<name>`.
pub fn service_account_user(namespace: &str, name: &str) -> String {
    format!("system:serviceaccount:{namespace}:{name}")
}

/// The groups the API server gives a ServiceAccount.
pub fn service_account_groups(namespace: &str) -> Vec<String> {
    vec![
        "system:serviceaccounts".to_owned(),
        format!("system:serviceaccounts:{namespace}"),
        "system:authenticated".to_owned(),
    ]
}

/// `base` impersonating the ServiceAccount `namespace/name`.
///
/// Only `Impersonate-User` is sent: for a ServiceAccount user name without
/// `Impersonate-Group` headers the API server itself assigns exactly
/// [`service_account_groups`] (`system:serviceaccounts`, `system:serviceaccounts:<ns>`,
/// and `system:authenticated`), so the effective identity is the same, while sending the
/// groups explicitly would need `impersonate` on `groups` in the controller's ClusterRole.
/// The integration tests check the effective groups with a SelfSubjectReview.
pub fn installer_config(base: &kube::Config, namespace: &str, name: &str) -> kube::Config {
    let mut config = base.clone();
    config.auth_info.impersonate = Some(service_account_user(namespace, name));
    config.auth_info.impersonate_groups = None;
    config.auth_info.impersonate_uid = None;
    config.auth_info.impersonate_user_extra = None;
    config
}

/// [`installer_config`] as a client.
pub fn installer_client(
    base: &kube::Config,
    namespace: &str,
    name: &str,
) -> Result<kube::Client, kube::Error> {
    kube::Client::try_from(installer_config(base, namespace, name))
}

/// Installer clients keyed by (namespace, ServiceAccount name), reused across reconciles.
pub struct InstallerClients {
    base: kube::Config,
    cache: Mutex<HashMap<(String, String), kube::Client>>,
}

impl InstallerClients {
    /// `base` is the controller's own configuration.
    pub fn new(base: kube::Config) -> Self {
        InstallerClients {
            base,
            cache: Mutex::new(HashMap::new()),
        }
    }

    /// The client acting as `namespace/name` (created on first use).
    pub fn get(&self, namespace: &str, name: &str) -> Result<kube::Client, kube::Error> {
        let key = (namespace.to_owned(), name.to_owned());
        let mut cache = self.cache.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(c) = cache.get(&key) {
            return Ok(c.clone());
        }
        let client = installer_client(&self.base, namespace, name)?;
        cache.insert(key, client.clone());
        Ok(client)
    }

    /// Drops the cached client of `namespace/name` (e.g. when the account was deleted).
    pub fn forget(&self, namespace: &str, name: &str) {
        let mut cache = self.cache.lock().unwrap_or_else(|p| p.into_inner());
        cache.remove(&(namespace.to_owned(), name.to_owned()));
    }

    /// Number of cached clients.
    pub fn len(&self) -> usize {
        self.cache.lock().unwrap_or_else(|p| p.into_inner()).len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn base() -> kube::Config {
        let url: http::Uri = "https://127.0.0.1:6443".parse().unwrap();
        let mut c = kube::Config::new(url);
        c.auth_info.impersonate_groups = Some(vec!["x".into()]);
        c
    }

    #[test]
    fn config_impersonates_the_service_account() {
        let c = installer_config(&base(), "ns", "sa");
        assert_eq!(
            c.auth_info.impersonate.as_deref(),
            Some("system:serviceaccount:ns:sa")
        );
        assert_eq!(c.auth_info.impersonate_groups, None);
        assert_eq!(c.cluster_url, base().cluster_url);
        assert_eq!(
            service_account_groups("ns"),
            vec![
                "system:serviceaccounts",
                "system:serviceaccounts:ns",
                "system:authenticated"
            ]
        );
    }

    #[tokio::test]
    async fn clients_are_cached_per_account() {
        let _ = rustls::crypto::aws_lc_rs::default_provider().install_default();
        let clients = InstallerClients::new(base());
        clients.get("ns", "a").unwrap();
        clients.get("ns", "a").unwrap();
        clients.get("ns", "b").unwrap();
        clients.get("other", "a").unwrap();
        assert_eq!(clients.len(), 3);
        clients.forget("ns", "a");
        assert_eq!(clients.len(), 2);
    }
}
