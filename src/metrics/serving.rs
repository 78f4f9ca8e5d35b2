//! How the metrics and profiling servers are exposed: by default ([`Protection::Secure`])
//! over HTTPS ([`super::tls`]) with every request authenticated and authorized
//! ([`super::auth`]), as controller-runtime serves metrics with
//! `SecureServing: true` and `filters.WithAuthenticationAndAuthorization`; with
//! `--metrics-secure=false` ([`Protection::Insecure`]) over plain HTTP without
//! authentication — and then the profiling server only on a loopback address.

use super::auth::{Authorizer, require_authorization};
use std::path::PathBuf;
use std::sync::Arc;

/// TLS and authorization of a server, or neither.
#[derive(Clone)]
pub enum Protection {
    Secure {
        tls: Arc<rustls::ServerConfig>,
        authorizer: Arc<Authorizer>,
    },
    Insecure,
}

#[derive(Debug, thiserror::Error)]
pub enum ServingError {
    #[error(transparent)]
    Cert(#[from] super::tls::CertError),
    #[error(
        "--pprof-bind-address {0} is not a loopback address: without --metrics-secure the profiling endpoints would be open to anyone who reaches it"
    )]
    OpenProfiling(std::net::SocketAddr),
    #[error("the profiling listener: {0}")]
    Io(#[from] std::io::Error),
}

impl Protection {
    /// `secure` (--metrics-secure) with the certificate and key `cert_files`
    /// (--metrics-cert-path; self-signed when `None`) and the TLS options of every
    /// server (`tls`); `client` (needing `create` on tokenreviews and
    /// subjectaccessreviews) reviews the requests.
    pub fn new(
        secure: bool,
        cert_files: Option<(PathBuf, PathBuf)>,
        tls: &crate::server::tls::TlsOptions,
        client: kube::Client,
    ) -> Result<Protection, ServingError> {
        if !secure {
            return Ok(Protection::Insecure);
        }
        let tls = super::tls::server_config(cert_files, tls, &[b"h2", b"http/1.1"])?;
        Ok(Protection::Secure {
            tls,
            authorizer: Arc::new(Authorizer::new(client)),
        })
    }

    /// `https` or `http`.
    pub fn scheme(&self) -> &'static str {
        match self {
            Protection::Secure { .. } => "https",
            Protection::Insecure => "http",
        }
    }

    /// Refuses a profiling listener that would be open to the network.
    pub fn check_profiling(&self, listener: &tokio::net::TcpListener) -> Result<(), ServingError> {
        let address = listener.local_addr()?;
        match self {
            Protection::Insecure if !address.ip().is_loopback() => {
                Err(ServingError::OpenProfiling(address))
            }
            _ => Ok(()),
        }
    }

    /// Serves `router` on `listener` with this protection until the future is dropped,
    /// either way through the bounded accept loop of every server
    /// ([`crate::server::conn`]: slots with eviction, per-peer limit, header, body and
    /// idle timeouts, bounded buffers).
    pub async fn serve(
        &self,
        listener: tokio::net::TcpListener,
        router: axum::Router,
    ) -> std::io::Result<()> {
        let (tls, router) = match self {
            Protection::Secure { tls, authorizer } => (
                Some(tls.clone()),
                router.layer(axum::middleware::from_fn_with_state(
                    authorizer.clone(),
                    require_authorization,
                )),
            ),
            Protection::Insecure => (None, router),
        };
        crate::server::conn::serve(
            listener,
            tls,
            router,
            crate::server::conn::Limits::default(),
            std::future::pending(),
        )
        .await
    }
}
