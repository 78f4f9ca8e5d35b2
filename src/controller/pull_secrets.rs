//! The registry credentials of both reconcilers ([`read`]): the global pull secret
//! (`--global-pull-secret`), then the `imagePullSecrets` of the controller's
//! ServiceAccount, read from the controller's namespace at each pull.

use kube::Client;

/// The global pull secret, then the controller ServiceAccount's `imagePullSecrets`, as
/// registry credentials. Missing or unreadable secrets are logged and skipped (public
/// images still pull).
pub async fn read(
    client: &Client,
    namespace: &str,
    service_account: Option<&str>,
    global: Option<&str>,
) -> crate::image::DockerConfig {
    use k8s_openapi::api::core::v1::{Secret, ServiceAccount};
    let secrets: kube::Api<Secret> = kube::Api::namespaced(client.clone(), namespace);
    let mut names: Vec<String> = global.iter().map(|s| s.to_string()).collect();
    if let Some(sa) = service_account {
        let accounts: kube::Api<ServiceAccount> = kube::Api::namespaced(client.clone(), namespace);
        if let Ok(Some(account)) = accounts.get_opt(sa).await {
            names.extend(
                account
                    .image_pull_secrets
                    .into_iter()
                    .flatten()
                    .map(|r| r.name),
            );
        }
    }
    let mut config = crate::image::DockerConfig::default();
    for name in names {
        match secrets.get_opt(&name).await {
            Ok(Some(secret)) => match crate::image::DockerConfig::from_secret(&secret) {
                Ok(parsed) => config.merge(&parsed),
                Err(e) => {
                    tracing::warn!(secret = %name, error = %e, "ignoring unusable pull secret")
                }
            },
            Ok(None) => tracing::warn!(secret = %name, "pull secret not found"),
            Err(e) => tracing::warn!(secret = %name, error = %e, "reading pull secret"),
        }
    }
    config
}
