//! Manifest, index and blob requests with bounded bodies. `oci-client`'s
//! `pull_manifest_raw` and `fetch_manifest_digest` read the whole response into
//! memory, however large (a 512 MB manifest cost ~1 GB of RSS and the pull then
//! went on), so manifests are fetched here: a body whose Content-Length passes
//! [`super::PullerConfig::max_manifest_bytes`] is refused unread, and one without a
//! Content-Length is refused once more than the limit arrived — no more than the limit
//! plus one chunk is ever held (`tests::hostile_huge_manifest_is_refused_early`).
//! Error bodies are read up to [`ERROR_BODY_BYTES`] — for blobs too, which is why blobs
//! are requested here as well: `oci-client`'s `pull_blob_stream` read a failed blob
//! request's body whole (`tests::hostile_huge_error_body_is_not_read`) and tried the
//! descriptor's foreign `urls`, unauthenticated, whenever the registry failed the blob
//! (`tests::foreign_layer_urls_are_not_requested`); blob bodies are streamed by the
//! caller, which bounds and hashes them.
//!
//! Authentication stays `oci-client`'s (its bearer-token exchange, or Basic
//! credentials); the HTTP client here has the same extra CAs, connect and read
//! timeouts, user agent and plain-HTTP hosts as the `oci-client` client of the same
//! credential set ([`RegistryClient`] holds both).

use oci_client::client::{Certificate, CertificateEncoding, ClientConfig, ClientProtocol};
use oci_client::errors::{OciDistributionError, OciEnvelope};
use oci_client::secrets::RegistryAuth;
use oci_client::{Client, Reference, RegistryOperation};
use reqwest::StatusCode;
use reqwest::header::{ACCEPT, HeaderMap};
use sha2::{Digest as _, Sha256};

use super::error::{Classified, classify};
use super::{ImageError, MANIFEST_MEDIA_TYPES, PullerConfig};

/// Most bytes of an error response body read (for its message).
pub(super) const ERROR_BODY_BYTES: u64 = 64 << 10;

const USER_AGENT: &str = concat!("olmv1/", env!("CARGO_PKG_VERSION"));

/// The clients of one credential set: `oci-client` for blobs and authentication, and
/// a plain HTTP client for manifests.
pub(super) struct RegistryClient {
    pub(super) oci: Client,
    http: reqwest::Client,
    /// `host[:port]` reached over plain HTTP.
    plain_http: Vec<String>,
}

/// A manifest body as received and the digest the registry gave for it, if any.
pub(super) struct ManifestBody {
    pub(super) body: Vec<u8>,
    pub(super) digest_header: Option<String>,
}

/// A body read up to a limit.
enum Body {
    Complete(Vec<u8>),
    /// More than the limit was sent: the first bytes, the rest left unread.
    TooLarge(Vec<u8>),
}

impl RegistryClient {
    /// Clients with `config`'s CAs and timeouts; `plain_http` hosts over HTTP.
    pub(super) fn new(config: &PullerConfig, plain_http: Vec<String>) -> Result<Self, ImageError> {
        let extra = config
            .ca_bundle_pem
            .iter()
            .map(|pem| Certificate {
                encoding: CertificateEncoding::Pem,
                data: pem.clone(),
            })
            .collect();
        let oci = Client::new(ClientConfig {
            protocol: ClientProtocol::HttpsExcept(plain_http.clone()),
            extra_root_certificates: extra,
            platform_resolver: None,
            connect_timeout: Some(config.connect_timeout),
            read_timeout: Some(config.read_timeout),
            user_agent: USER_AGENT,
            ..Default::default()
        });
        let ca_error = |detail: String| ImageError::CaBundle {
            path: "(the configured CA bundle)".to_string(),
            detail,
        };
        let mut builder = reqwest::Client::builder()
            .connect_timeout(config.connect_timeout)
            .read_timeout(config.read_timeout)
            .user_agent(USER_AGENT);
        if let Some(pem) = &config.ca_bundle_pem {
            let certs =
                reqwest::Certificate::from_pem_bundle(pem).map_err(|e| ca_error(e.to_string()))?;
            for cert in certs {
                builder = builder.add_root_certificate(cert);
            }
        }
        let http = builder.build().map_err(|e| ca_error(e.to_string()))?;
        Ok(RegistryClient {
            oci,
            http,
            plain_http,
        })
    }

    /// The plain HTTP client (CAs and timeouts of the registries): the signature
    /// lookaside storage is read with it.
    pub(super) fn http(&self) -> &reqwest::Client {
        &self.http
    }

    /// `…/v2/<repository>/<kind>/<name>` (`kind` = `manifests` or `blobs`) like
    /// `oci-client` builds it.
    fn url(&self, r: &Reference, kind: &str, name: &str) -> String {
        let registry = r.resolve_registry();
        let scheme = if self.plain_http.iter().any(|h| h == registry) {
            "http"
        } else {
            "https"
        };
        let ns = r
            .namespace()
            .map(|ns| format!("?ns={ns}"))
            .unwrap_or_default();
        format!(
            "{scheme}://{registry}/v2/{}/{kind}/{name}{ns}",
            r.repository()
        )
    }

    /// `…/manifests/<digest or tag>` of `r`.
    fn manifest_url(&self, r: &Reference) -> String {
        self.url(r, "manifests", r.digest().or(r.tag()).unwrap_or("latest"))
    }

    /// Starts a `GET` of blob `digest` from `r`'s repository: the response once its
    /// status is 200 (its body is the caller's to read and bound), else the registry's
    /// error, classified.
    pub(super) async fn get_blob(
        &self,
        image: &str,
        r: &Reference,
        digest: &str,
        auth: &RegistryAuth,
    ) -> Result<reqwest::Response, Classified> {
        let fail = |e| classify(image, r.registry(), e);
        let url = self.url(r, "blobs", digest);
        let req = self.http.get(&url);
        let resp = self
            .authorize(req, r, auth)
            .await
            .map_err(fail)?
            .send()
            .await
            .map_err(|e| fail(e.into()))?;
        if resp.status() != StatusCode::OK {
            return Err(fail(error_response(resp, &url).await));
        }
        Ok(resp)
    }

    /// `req` with the credentials `oci-client` negotiates for pulling `r`.
    async fn authorize(
        &self,
        req: reqwest::RequestBuilder,
        r: &Reference,
        auth: &RegistryAuth,
    ) -> Result<reqwest::RequestBuilder, OciDistributionError> {
        let token = self.oci.auth(r, auth, RegistryOperation::Pull).await?;
        Ok(match (token, auth) {
            (Some(token), _) => req.bearer_auth(token),
            (None, RegistryAuth::Basic(user, password)) => req.basic_auth(user, Some(password)),
            (None, _) => req,
        })
    }

    /// Sends a manifest request (`GET` or `HEAD`) for `r`.
    async fn send(
        &self,
        method: reqwest::Method,
        r: &Reference,
        auth: &RegistryAuth,
    ) -> Result<(reqwest::Response, String), OciDistributionError> {
        let url = self.manifest_url(r);
        let req = self
            .http
            .request(method, &url)
            .header(ACCEPT, MANIFEST_MEDIA_TYPES.join(", "));
        let resp = self.authorize(req, r, auth).await?.send().await?;
        Ok((resp, url))
    }

    /// The manifest or index `r` names, at most `max` bytes; the registry's error
    /// otherwise, classified.
    pub(super) async fn get_manifest(
        &self,
        image: &str,
        r: &Reference,
        auth: &RegistryAuth,
        max: u64,
    ) -> Result<ManifestBody, Classified> {
        let fail = |e| classify(image, r.registry(), e);
        let (resp, url) = self
            .send(reqwest::Method::GET, r, auth)
            .await
            .map_err(fail)?;
        let status = resp.status();
        if status != StatusCode::OK {
            return Err(fail(error_response(resp, &url).await));
        }
        let digest_header = digest_header(resp.headers());
        let too_large = |size: String| {
            Classified::Fail(ImageError::ManifestTooLarge {
                image: image.to_string(),
                manifest: r.whole(),
                limit: max,
                size,
            })
        };
        if let Some(n) = resp.content_length().filter(|n| *n > max) {
            return Err(too_large(format!("Content-Length {n}")));
        }
        match read_at_most(resp, max).await {
            Ok(Body::Complete(body)) => Ok(ManifestBody {
                body,
                digest_header,
            }),
            Ok(Body::TooLarge(_)) => Err(too_large(format!("more than {max} bytes sent"))),
            Err(e) => Err(fail(e.into())),
        }
    }

    /// The digest of the manifest `r` names: the registry's `Docker-Content-Digest`
    /// answer to a `HEAD`, else the sha256 of the (bounded) body.
    pub(super) async fn manifest_digest(
        &self,
        image: &str,
        r: &Reference,
        auth: &RegistryAuth,
        max: u64,
    ) -> Result<String, Classified> {
        let fail = |e| classify(image, r.registry(), e);
        let (head, _) = self
            .send(reqwest::Method::HEAD, r, auth)
            .await
            .map_err(fail)?;
        if head.status() == StatusCode::OK
            && let Some(d) = digest_header(head.headers())
        {
            return Ok(d);
        }
        // No digest header (or an error, which the GET reports with its body).
        let m = self.get_manifest(image, r, auth, max).await?;
        let actual = sha256_digest(&m.body);
        match m.digest_header {
            Some(said) if said.starts_with("sha256:") && said != actual => {
                Err(Classified::Fail(ImageError::DigestMismatch {
                    image: image.to_string(),
                    what: format!("manifest {}", r.whole()),
                    expected: said,
                    actual,
                }))
            }
            _ => Ok(actual),
        }
    }
}

/// `sha256:<hex>` of `data`.
pub(super) fn sha256_digest(data: &[u8]) -> String {
    format!(
        "sha256:{}",
        data_encoding::HEXLOWER.encode(&Sha256::digest(data))
    )
}

fn digest_header(headers: &HeaderMap) -> Option<String> {
    headers
        .get("Docker-Content-Digest")
        .and_then(|v| v.to_str().ok())
        .map(str::to_string)
}

/// Reads `resp`'s body, stopping once more than `max` bytes arrived: never holds
/// more than `max` bytes plus one received chunk.
async fn read_at_most(mut resp: reqwest::Response, max: u64) -> Result<Body, reqwest::Error> {
    let max = usize::try_from(max).unwrap_or(usize::MAX);
    let mut body = Vec::new();
    while let Some(chunk) = resp.chunk().await? {
        if chunk.len() > max - body.len() {
            let keep = max - body.len();
            body.extend_from_slice(&chunk[..keep]);
            return Ok(Body::TooLarge(body));
        }
        body.extend_from_slice(&chunk);
    }
    Ok(Body::Complete(body))
}

/// The error of a non-200 answer, as `oci-client` builds it (the OCI error envelope
/// of a 4xx), from at most [`ERROR_BODY_BYTES`] of its body.
async fn error_response(resp: reqwest::Response, url: &str) -> OciDistributionError {
    let status = resp.status();
    let body = match read_at_most(resp, ERROR_BODY_BYTES).await {
        Ok(Body::Complete(b) | Body::TooLarge(b)) => b,
        Err(_) => Vec::new(),
    };
    let url = url.to_string();
    let message = || String::from_utf8_lossy(&body).into_owned();
    match status {
        StatusCode::UNAUTHORIZED => OciDistributionError::UnauthorizedError { url },
        s if s.is_success() => OciDistributionError::SpecViolationError(format!(
            "Expected HTTP Status 200, got {s} instead"
        )),
        s if s.is_client_error() => match serde_json::from_slice::<OciEnvelope>(&body) {
            Ok(envelope) => OciDistributionError::RegistryError { envelope, url },
            Err(_) => OciDistributionError::ServerError {
                code: s.as_u16(),
                url,
                message: message(),
            },
        },
        s => OciDistributionError::ServerError {
            code: s.as_u16(),
            url,
            message: message(),
        },
    }
}
