//! Scraping the secured `/metrics` of a test controller: bearer tokens of
//! ServiceAccounts bound (or not) to a ClusterRole, and an HTTPS client that accepts
//! the controller's self-signed certificate.

use k8s_openapi::api::authentication::v1::TokenRequest;
use k8s_openapi::api::core::v1::ServiceAccount;
use k8s_openapi::api::rbac::v1::{ClusterRoleBinding, RoleRef, Subject};
use kube::api::{ObjectMeta, PostParams};

/// The ClusterRole of config/rbac that may read `/metrics`.
pub const METRICS_READER: &str = "olmv1-metrics-reader";

/// The namespace of the test ServiceAccounts.
pub const NAMESPACE: &str = "olmv1-system";

/// A token of a new ServiceAccount in [`NAMESPACE`], bound to `cluster_role` if given.
pub async fn token(admin: &kube::Client, prefix: &str, cluster_role: Option<&str>) -> String {
    let name = super::unique(prefix);
    let accounts: kube::Api<ServiceAccount> = kube::Api::namespaced(admin.clone(), NAMESPACE);
    let account = ServiceAccount {
        metadata: ObjectMeta {
            name: Some(name.clone()),
            ..Default::default()
        },
        ..Default::default()
    };
    accounts
        .create(&PostParams::default(), &account)
        .await
        .unwrap_or_else(|e| panic!("creating ServiceAccount {name}: {e}"));
    if let Some(role) = cluster_role {
        let bindings: kube::Api<ClusterRoleBinding> = kube::Api::all(admin.clone());
        let binding = ClusterRoleBinding {
            metadata: ObjectMeta {
                name: Some(name.clone()),
                ..Default::default()
            },
            role_ref: RoleRef {
                api_group: "rbac.authorization.k8s.io".into(),
                kind: "ClusterRole".into(),
                name: role.into(),
            },
            subjects: Some(vec![Subject {
                kind: "ServiceAccount".into(),
                name: name.clone(),
                namespace: Some(NAMESPACE.into()),
                ..Default::default()
            }]),
        };
        bindings
            .create(&PostParams::default(), &binding)
            .await
            .unwrap_or_else(|e| panic!("binding {role} to {name}: {e}"));
    }
    let request = accounts
        .create_token_request(&name, &PostParams::default(), &TokenRequest::default())
        .await
        .unwrap_or_else(|e| panic!("token for {name}: {e}"));
    request
        .status
        .map(|s| s.token)
        .unwrap_or_else(|| panic!("no token for {name}"))
}

/// A token allowed to read `/metrics` (one per test process).
pub async fn reader_token() -> String {
    static TOKEN: tokio::sync::OnceCell<String> = tokio::sync::OnceCell::const_new();
    TOKEN
        .get_or_init(|| async {
            let admin = super::cluster().admin().await;
            token(&admin, "metrics-reader", Some(METRICS_READER)).await
        })
        .await
        .clone()
}

/// An HTTPS client trusting any certificate (the controller's is self-signed).
pub fn client() -> reqwest::Client {
    let _ = rustls::crypto::aws_lc_rs::default_provider().install_default();
    reqwest::Client::builder()
        .danger_accept_invalid_certs(true)
        .timeout(std::time::Duration::from_secs(60))
        .build()
        .unwrap_or_else(|e| panic!("HTTPS client: {e}"))
}

/// GET `url` with `token` as bearer (none when `None`): status and body.
pub async fn get(url: &str, token: Option<&str>) -> Result<(u16, bytes::Bytes), reqwest::Error> {
    let mut request = client().get(url);
    if let Some(token) = token {
        request = request.bearer_auth(token);
    }
    let response = request.send().await?;
    let status = response.status().as_u16();
    Ok((status, response.bytes().await?))
}

/// An HTTPS client trusting the PEM CA certificate `ca`.
pub fn https_client(ca: &std::path::Path) -> reqwest::Client {
    let ca = std::fs::read(ca).unwrap_or_else(|e| panic!("{}: {e}", ca.display()));
    reqwest::Client::builder()
        .add_root_certificate(reqwest::Certificate::from_pem(&ca).expect("CA PEM"))
        .build()
        .expect("HTTPS client")
}

/// The protocol version a TLS handshake with `localhost:port` settles on, from a
/// client that offers only `versions` and trusts the PEM CA `ca`; or why it failed.
pub async fn handshake(
    port: u16,
    ca: &std::path::Path,
    versions: &[&'static rustls::SupportedProtocolVersion],
) -> Result<rustls::ProtocolVersion, String> {
    use rustls::pki_types::pem::PemObject;
    let mut roots = rustls::RootCertStore::empty();
    for cert in rustls::pki_types::CertificateDer::pem_file_iter(ca).map_err(|e| e.to_string())? {
        roots
            .add(cert.map_err(|e| e.to_string())?)
            .map_err(|e| e.to_string())?;
    }
    let provider = std::sync::Arc::new(rustls::crypto::aws_lc_rs::default_provider());
    let config = rustls::ClientConfig::builder_with_provider(provider)
        .with_protocol_versions(versions)
        .map_err(|e| e.to_string())?
        .with_root_certificates(roots)
        .with_no_client_auth();
    let tcp = tokio::net::TcpStream::connect(("127.0.0.1", port))
        .await
        .map_err(|e| e.to_string())?;
    let name = rustls::pki_types::ServerName::try_from("localhost").map_err(|e| e.to_string())?;
    let tls = tokio_rustls::TlsConnector::from(std::sync::Arc::new(config))
        .connect(name, tcp)
        .await
        .map_err(|e| e.to_string())?;
    tls.get_ref()
        .1
        .protocol_version()
        .ok_or_else(|| "no protocol version".into())
}
