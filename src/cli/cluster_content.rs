//! Reading a ClusterCatalog's served content from outside the cluster, for the
//! command-line tools (`status`, and `--catalog <ClusterCatalog>` of `resolve`,
//! `catalog`, `rbac`): `status.urls.base` directly (what the controller does), and when
//! that does not answer from here because it names an in-cluster Service
//! (`http://<service>.<namespace>.svc/...`, e.g. olmv1 deployed from `config/`), the same
//! catalogd HTTP API through the API server's service proxy
//! (`/api/v1/namespaces/<ns>/services/<scheme>:<service>:<port>/proxy/...`, which needs
//! `get` on `services/proxy`). [`service_proxy_path`] is the pure URL mapping.

use crate::api::ClusterCatalog;
use crate::content::{ContentClient, ContentError, compact, endpoint};
use crate::fbc::model::{PackageContent, SCHEMA_PACKAGE};
use std::sync::Arc;

/// Why a ClusterCatalog's content could not be read.
#[derive(Debug, thiserror::Error)]
pub enum ClusterContentError {
    /// The direct request's error (no proxy fallback applies).
    #[error(transparent)]
    Direct(#[from] ContentError),
    /// Neither the direct request nor the service proxy answered.
    #[error("{direct}; through the API server's service proxy: {proxy}")]
    Proxy { direct: ContentError, proxy: String },
    #[error("{0}")]
    Write(String),
}

/// The package's (compact) content in `catalog`: directly, else through the proxy.
pub async fn package(
    content: &ContentClient,
    kube: &kube::Client,
    catalog: &ClusterCatalog,
    package: &str,
) -> Result<Arc<PackageContent>, ClusterContentError> {
    let direct = match content.package(catalog, package).await {
        Ok(c) => return Ok(c),
        Err(e) => e,
    };
    let prefix = fallback(direct.clone(), catalog)?;
    let via_proxy = async {
        let blobs = proxy_get(kube, &format!("{prefix}/api/v1/metas?package={package}")).await?;
        let mut content = compact::parse_jsonl(blobs.as_bytes(), package, false)?;
        let head = proxy_get(kube, &package_blob_path(&prefix, package)).await?;
        content.package = compact::parse_jsonl(head.as_bytes(), package, true)?.package;
        Ok::<_, String>(content)
    };
    via_proxy
        .await
        .map(Arc::new)
        .map_err(|proxy| ClusterContentError::Proxy { direct, proxy })
}

/// The catalog's raw blobs (JSON Lines as served), the whole catalog or one package,
/// written to the file `path`: directly (streamed), else through the proxy (the file
/// is started afresh, so nothing of a failed direct attempt stays in it).
pub async fn download(
    content: &ContentClient,
    kube: &kube::Client,
    catalog: &ClusterCatalog,
    package: Option<&str>,
    path: &std::path::Path,
) -> Result<(), ClusterContentError> {
    let write_err = |e: std::io::Error| format!("writing {}: {e}", path.display());
    let ep = endpoint(catalog)?;
    let file = std::fs::File::create(path).map_err(|e| ClusterContentError::Write(write_err(e)))?;
    let mut out = std::io::BufWriter::new(file);
    let direct = match content.download(&ep, package, &mut out).await {
        Ok(_) => {
            return std::io::Write::flush(&mut out)
                .map_err(|e| ClusterContentError::Write(write_err(e)));
        }
        Err(e) => e,
    };
    drop(out);
    let prefix = fallback(direct.clone(), catalog)?;
    let via_proxy = async {
        match package {
            Some(p) => {
                let head = proxy_get(kube, &package_blob_path(&prefix, p)).await?;
                let rest = proxy_get(kube, &format!("{prefix}/api/v1/metas?package={p}")).await?;
                Ok::<_, String>(format!("{head}\n{rest}"))
            }
            None => proxy_get(kube, &format!("{prefix}/api/v1/all")).await,
        }
    };
    let body = via_proxy
        .await
        .map_err(|proxy| ClusterContentError::Proxy { direct, proxy })?;
    std::fs::write(path, body).map_err(|e| ClusterContentError::Write(write_err(e)))
}

/// The proxy path prefix when the direct request could not reach a Service URL; the
/// direct error otherwise.
fn fallback(direct: ContentError, catalog: &ClusterCatalog) -> Result<String, ClusterContentError> {
    if !matches!(direct, ContentError::Request { .. }) {
        return Err(direct.into());
    }
    match endpoint(catalog)
        .ok()
        .and_then(|ep| service_proxy_path(&ep.base_url))
    {
        Some(prefix) => Ok(prefix),
        None => Err(direct.into()),
    }
}

fn package_blob_path(prefix: &str, package: &str) -> String {
    format!("{prefix}/api/v1/metas?schema={SCHEMA_PACKAGE}&name={package}")
}

async fn proxy_get(kube: &kube::Client, path: &str) -> Result<String, String> {
    let req = http::Request::get(path)
        .body(Vec::new())
        .map_err(|e| format!("GET {path}: {e}"))?;
    kube.request_text(req)
        .await
        .map_err(|e| format!("GET {path}: {e}"))
}

/// `http(s)://<service>.<namespace>.svc[.cluster.local][:port]/<path>` →
/// `/api/v1/namespaces/<namespace>/services/<scheme>:<service>:<port>/proxy/<path>`;
/// `None` for URLs that do not name a Service.
pub fn service_proxy_path(base: &str) -> Option<String> {
    let (scheme, rest) = base.split_once("://")?;
    if scheme != "http" && scheme != "https" {
        return None;
    }
    let (authority, path) = match rest.find('/') {
        Some(i) => (&rest[..i], &rest[i..]),
        None => (rest, ""),
    };
    let (host, port) = match authority.rsplit_once(':') {
        Some((h, p)) if !p.is_empty() && p.chars().all(|c| c.is_ascii_digit()) => {
            (h, p.to_string())
        }
        _ => (
            authority,
            if scheme == "https" { "443" } else { "80" }.to_string(),
        ),
    };
    let host = host
        .strip_suffix(".cluster.local")
        .unwrap_or(host)
        .strip_suffix(".svc")?;
    let (service, namespace) = host.split_once('.')?;
    if service.is_empty() || namespace.is_empty() || namespace.contains('.') {
        return None;
    }
    Some(format!(
        "/api/v1/namespaces/{namespace}/services/{scheme}:{service}:{port}/proxy{}",
        path.trim_end_matches('/')
    ))
}

#[cfg(test)]
mod tests {
    use super::service_proxy_path;

    #[test]
    fn in_cluster_urls_go_through_the_service_proxy() {
        assert_eq!(
            service_proxy_path("http://olmv1-catalogd-service.olmv1-system.svc/catalogs/demo")
                .as_deref(),
            Some(
                "/api/v1/namespaces/olmv1-system/services/http:olmv1-catalogd-service:80/proxy/catalogs/demo"
            )
        );
        assert_eq!(
            service_proxy_path("https://cat.ns.svc.cluster.local:8443/catalogs/x/").as_deref(),
            Some("/api/v1/namespaces/ns/services/https:cat:8443/proxy/catalogs/x")
        );
        assert_eq!(service_proxy_path("http://127.0.0.1:8080/catalogs/x"), None);
        assert_eq!(service_proxy_path("https://catalogs.example.com/x"), None);
        assert_eq!(service_proxy_path("ftp://a.b.svc/x"), None);
    }
}
