//! The registry credentials of both reconcilers ([`read`]): the global pull secret
//! (`--global-pull-secret`, `<namespace>/<name>` as upstream's, or a bare name in the
//! controller's namespace), then the `imagePullSecrets` of the controller's
//! ServiceAccount, read from the controller's namespace at each pull.

use kube::Client;

/// A `--global-pull-secret` value: `<namespace>/<name>` (upstream's syntax) or a bare
/// `<name>` in `default_namespace`. `None` for a value with more than one `/` or an
/// empty part.
pub fn secret_key(value: &str, default_namespace: &str) -> Option<(String, String)> {
    let mut parts = value.split('/');
    let (first, second, rest) = (parts.next(), parts.next(), parts.next());
    match (first, second, rest) {
        (Some(name), None, None) if !name.is_empty() => {
            Some((default_namespace.to_string(), name.to_string()))
        }
        (Some(ns), Some(name), None) if !ns.is_empty() && !name.is_empty() => {
            Some((ns.to_string(), name.to_string()))
        }
        _ => None,
    }
}

/// Checks a `--global-pull-secret` value at start (an error names the expected syntax).
pub fn validate(value: &str) -> Result<(), String> {
    secret_key(value, "-").map(|_| ()).ok_or_else(|| {
        format!("--global-pull-secret {value:?}: expected <namespace>/<name> or <name>")
    })
}

/// The global pull secret, then the controller ServiceAccount's `imagePullSecrets`, as
/// registry credentials. Missing or unreadable secrets are logged and skipped (public
/// images still pull).
pub async fn read(
    client: &Client,
    namespace: &str,
    service_account: Option<&str>,
    global: Option<&str>,
) -> crate::image::DockerConfig {
    use k8s_openapi::api::core::v1::ServiceAccount;
    let mut keys: Vec<(String, String)> = Vec::new();
    if let Some(value) = global {
        match secret_key(value, namespace) {
            Some(key) => keys.push(key),
            None => tracing::warn!(secret = %value, "unusable --global-pull-secret value"),
        }
    }
    if let Some(sa) = service_account {
        let accounts: kube::Api<ServiceAccount> = kube::Api::namespaced(client.clone(), namespace);
        if let Ok(Some(account)) = accounts.get_opt(sa).await {
            keys.extend(
                account
                    .image_pull_secrets
                    .into_iter()
                    .flatten()
                    .map(|r| (namespace.to_string(), r.name)),
            );
        }
    }
    let mut config = crate::image::DockerConfig::default();
    for (ns, name) in keys {
        merge_secret(client, &ns, &name, &mut config).await;
    }
    config
}

/// Merges the credentials of Secret `ns/name` into `config` (logged and skipped when
/// missing or unusable).
async fn merge_secret(
    client: &Client,
    ns: &str,
    name: &str,
    config: &mut crate::image::DockerConfig,
) {
    use k8s_openapi::api::core::v1::Secret;
    let secrets: kube::Api<Secret> = kube::Api::namespaced(client.clone(), ns);
    let secret = format!("{ns}/{name}");
    match secrets.get_opt(name).await {
        Ok(Some(found)) => match crate::image::DockerConfig::from_secret(&found) {
            Ok(parsed) => config.merge(&parsed),
            Err(e) => tracing::warn!(%secret, error = %e, "ignoring unusable pull secret"),
        },
        Ok(None) => tracing::warn!(%secret, "pull secret not found"),
        Err(e) => tracing::warn!(%secret, error = %e, "reading pull secret"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn global_pull_secret_values() {
        let key = |v| secret_key(v, "olmv1-system");
        assert_eq!(
            key("openshift-config/pull-secret"),
            Some(("openshift-config".into(), "pull-secret".into()))
        );
        assert_eq!(
            key("regcred"),
            Some(("olmv1-system".into(), "regcred".into()))
        );
        for bad in ["", "/x", "x/", "a/b/c"] {
            assert_eq!(key(bad), None, "{bad:?}");
            assert!(validate(bad).is_err(), "{bad:?}");
        }
        assert!(validate("ns/name").is_ok());
    }
}
