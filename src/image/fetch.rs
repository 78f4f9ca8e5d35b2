//! The registry requests of one pull: manifests (bounded, see [`super::manifest`]),
//! the image config, and blobs streamed to disk (or memory, for the config) while
//! their size is bounded and their sha256 is verified. Every request goes through the
//! puller's retry policy and runs under a wall-clock [`Deadline`]: its own
//! ([`super::PullerConfig::request_timeout`]) and the whole pull's
//! ([`super::PullerConfig::pull_timeout`]), because the client's read timeout alone
//! restarts with every byte and a registry sending one byte every few seconds held a
//! pull forever (`tests::slow_drip_registry_hits_the_deadlines`).

use std::collections::BTreeMap;
use std::future::Future;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use futures::StreamExt;
use oci_client::Reference;
use oci_client::manifest::{OciDescriptor, OciManifest};
use oci_client::secrets::RegistryAuth;
use serde::Deserialize;
use sha2::{Digest as _, Sha256};
use tokio::io::AsyncWriteExt;
use tokio::time::Instant;

use super::error::{Classified, TimeoutScope, error_chain};
use super::manifest::{RegistryClient, sha256_digest};
use super::registries::PullSource;
use super::{Credentials, DockerConfig, ImageError, ImagePuller, PullerConfig, validate_digest};

/// The registry side of one pull: the image as asked for (for messages), its registry
/// host, the client and credentials to reach it, and the pull's deadline.
#[derive(Clone, Copy)]
pub(super) struct Remote<'a> {
    pub image: &'a str,
    pub registry: &'a str,
    pub client: &'a RegistryClient,
    pub auth: &'a RegistryAuth,
    pub deadline: Deadline,
}

/// The wall-clock deadlines of one pull (or tag resolution), mirrors and retries
/// included: one for the whole of it and one for each registry request in it.
#[derive(Clone, Copy, Debug)]
pub(super) struct Deadline {
    end: Instant,
    pull: Duration,
    request: Duration,
}

impl Deadline {
    /// Starts the pull's clock now.
    pub(super) fn start(config: &PullerConfig) -> Self {
        Deadline {
            end: Instant::now() + config.pull_timeout,
            pull: config.pull_timeout,
            request: config.request_timeout,
        }
    }

    /// `request` (fetching `what`, for the message), cut off at the request deadline
    /// or at the pull's, whichever comes first: then a retryable
    /// [`ImageError::Timeout`] that is not retried within this pull.
    async fn run<T>(
        &self,
        image: &str,
        what: &str,
        request: impl Future<Output = Result<T, Classified>>,
    ) -> Result<T, Classified> {
        let request_end = Instant::now() + self.request;
        let (end, scope, limit) = if request_end < self.end {
            (request_end, TimeoutScope::Request, self.request)
        } else {
            (self.end, TimeoutScope::Pull, self.pull)
        };
        match tokio::time::timeout_at(end, request).await {
            Ok(r) => r,
            Err(_) => Err(Classified::Fail(ImageError::Timeout {
                image: image.to_string(),
                what: what.to_string(),
                limit,
                scope,
            })),
        }
    }
}

impl ImagePuller {
    /// The clients for `creds` (one per credential set, created on first use), also
    /// reaching `plain_http_host` over plain HTTP when given.
    fn client(
        &self,
        creds: Option<&Credentials>,
        plain_http_host: Option<&str>,
    ) -> Result<Arc<RegistryClient>, ImageError> {
        let key = (creds.cloned(), plain_http_host.map(str::to_string));
        let mut map = self.clients.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(c) = map.get(&key) {
            return Ok(c.clone());
        }
        if map.len() > 64 {
            map.clear();
        }
        let mut plain_http = self.config.insecure_registries.clone();
        plain_http.extend(plain_http_host.map(str::to_string));
        let mut config = self.config.clone();
        config.ca_bundle_pem = self
            .ca_bundle_pem
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .clone();
        let client = Arc::new(RegistryClient::new(&config, plain_http)?);
        map.insert(key, client.clone());
        Ok(client)
    }

    /// The client and the credentials for the source's registry (a mirror's own
    /// credentials for a mirror); plain HTTP when the source is insecure.
    pub(super) fn client_and_auth(
        &self,
        src: &PullSource,
        secrets: &DockerConfig,
    ) -> Result<(Arc<RegistryClient>, RegistryAuth), ImageError> {
        let host = src.reference.registry();
        let creds = secrets.credentials_for(host);
        let auth = match creds {
            Some(c) => RegistryAuth::Basic(c.username.clone(), c.password.clone()),
            None => RegistryAuth::Anonymous,
        };
        let plain_http = (src.insecure || self.config.registries.is_insecure_host(host))
            .then_some(host)
            .filter(|h| !self.config.insecure_registries.iter().any(|i| i == h));
        Ok((self.client(creds, plain_http)?, auth))
    }

    /// Runs `op` (a request fetching `what`) until it succeeds, fails for good, the
    /// retry policy gives up or `deadline` passes.
    pub(super) async fn retry<T, F, Fut>(
        &self,
        image: &str,
        what: &str,
        deadline: &Deadline,
        mut op: F,
    ) -> Result<T, ImageError>
    where
        F: FnMut() -> Fut,
        Fut: Future<Output = Result<T, Classified>>,
    {
        let policy = &self.config.retry;
        let mut delay = policy.initial_backoff;
        let mut attempt = 0;
        loop {
            attempt += 1;
            match deadline.run(image, what, op()).await {
                Ok(v) => return Ok(v),
                Err(Classified::Fail(e)) => return Err(e),
                Err(Classified::Retry(detail)) => {
                    if attempt >= policy.max_attempts.max(1) {
                        return Err(ImageError::Unavailable {
                            image: image.to_string(),
                            attempts: attempt,
                            detail,
                        });
                    }
                    tracing::debug!(image, attempt, %detail, "registry call failed, retrying");
                    tokio::time::sleep_until((Instant::now() + delay).min(deadline.end)).await;
                    delay = (delay * 2).min(policy.max_backoff);
                }
            }
        }
    }

    /// The digest `r` points at: its own, or the registry's answer for a tag.
    pub(super) async fn top_digest(
        &self,
        image: &str,
        r: &Reference,
        client: &RegistryClient,
        auth: &RegistryAuth,
        deadline: &Deadline,
    ) -> Result<String, ImageError> {
        if let Some(d) = r.digest() {
            validate_digest(image, d)?;
            return Ok(d.to_string());
        }
        let what = format!("the digest of manifest {}", r.whole());
        let max = self.config.max_manifest_bytes;
        let d = self
            .retry(image, &what, deadline, || async {
                self.counters
                    .manifest_requests
                    .fetch_add(1, Ordering::Relaxed);
                client.manifest_digest(image, r, auth, max).await
            })
            .await?;
        validate_digest(image, &d)?;
        Ok(d)
    }

    /// The manifest or index `r` points at.
    pub(super) async fn fetch_manifest(
        &self,
        remote: &Remote<'_>,
        r: &Reference,
    ) -> Result<OciManifest, ImageError> {
        let Remote {
            image,
            client,
            auth,
            deadline,
            ..
        } = *remote;
        let what = format!("manifest {}", r.whole());
        let max = self.config.max_manifest_bytes;
        let m = self
            .retry(image, &what, &deadline, || async {
                self.counters
                    .manifest_requests
                    .fetch_add(1, Ordering::Relaxed);
                client.get_manifest(image, r, auth, max).await
            })
            .await?;
        if let Some(expected) = r.digest() {
            let actual = sha256_digest(&m.body);
            if actual != expected {
                return Err(ImageError::DigestMismatch {
                    image: image.to_string(),
                    what,
                    expected: expected.to_string(),
                    actual,
                });
            }
        }
        serde_json::from_slice::<OciManifest>(&m.body).map_err(|e| ImageError::Unsupported {
            image: image.to_string(),
            detail: format!(
                "manifest {} is not an image manifest or index: {e}",
                r.whole()
            ),
        })
    }

    /// The labels of the image config blob `desc`.
    pub(super) async fn fetch_config(
        &self,
        remote: &Remote<'_>,
        r: &Reference,
        desc: &OciDescriptor,
    ) -> Result<BTreeMap<String, String>, ImageError> {
        let image = remote.image;
        let data = self
            .fetch_small_blob(remote, r, desc, self.config.max_config_bytes)
            .await?;
        #[derive(Deserialize)]
        struct Cfg {
            #[serde(default)]
            config: Option<Inner>,
        }
        #[derive(Deserialize)]
        struct Inner {
            #[serde(default, rename = "Labels")]
            labels: Option<BTreeMap<String, String>>,
        }
        let cfg: Cfg = serde_json::from_slice(&data).map_err(|e| ImageError::Unsupported {
            image: image.to_string(),
            detail: format!("image config {} is not valid JSON: {e}", desc.digest),
        })?;
        Ok(cfg.config.and_then(|c| c.labels).unwrap_or_default())
    }

    /// The blob `desc` (at most `max` bytes, digest verified) in memory: the image
    /// config, a signature payload.
    pub(super) async fn fetch_small_blob(
        &self,
        remote: &Remote<'_>,
        r: &Reference,
        desc: &OciDescriptor,
        max: u64,
    ) -> Result<Vec<u8>, ImageError> {
        validate_digest(remote.image, &desc.digest)?;
        let what = format!("blob {}", desc.digest);
        self.retry(remote.image, &what, &remote.deadline, || async {
            let mut buf = Vec::new();
            self.stream_blob(remote, r, desc, max, &mut buf, None)
                .await?;
            Ok(buf)
        })
        .await
    }

    /// Layer blob `desc` into the file `path`, at most `max` bytes; its size.
    pub(super) async fn download_layer(
        &self,
        remote: &Remote<'_>,
        r: &Reference,
        desc: &OciDescriptor,
        path: &Path,
        max: u64,
        on_bytes: Option<&(dyn Fn(u64) + Sync)>,
    ) -> Result<u64, ImageError> {
        let image = remote.image;
        let what = format!("layer {}", desc.digest);
        self.retry(image, &what, &remote.deadline, || async {
            let mut file = tokio::fs::File::create(path)
                .await
                .map_err(|e| Classified::Fail(ImageError::io(image, path, e)))?;
            let n = self
                .stream_blob(remote, r, desc, max, &mut file, on_bytes)
                .await?;
            file.flush()
                .await
                .map_err(|e| Classified::Fail(ImageError::io(image, path, e)))?;
            Ok(n)
        })
        .await
    }

    /// Stream one blob into `out`, hashing as it goes; never buffers the whole blob
    /// unless `out` does. At most `max` bytes (and never more than the descriptor's size).
    /// `on_bytes` hears the bytes received so far after each chunk.
    async fn stream_blob<W: tokio::io::AsyncWrite + Unpin>(
        &self,
        remote: &Remote<'_>,
        r: &Reference,
        desc: &OciDescriptor,
        max: u64,
        out: &mut W,
        on_bytes: Option<&(dyn Fn(u64) + Sync)>,
    ) -> Result<u64, Classified> {
        let Remote {
            image,
            client,
            auth,
            ..
        } = *remote;
        let declared = u64::try_from(desc.size).unwrap_or(0);
        if declared > max {
            return Err(Classified::Fail(ImageError::LimitExceeded {
                image: image.to_string(),
                layer: desc.digest.clone(),
                what: format!("blob size ({declared} bytes)"),
                limit: max,
            }));
        }
        // The descriptor's `urls` (foreign layers) are never requested.
        let mut stream = client
            .get_blob(image, r, &desc.digest, auth)
            .await?
            .bytes_stream();
        self.counters
            .blobs_downloaded
            .fetch_add(1, Ordering::Relaxed);
        let mut hasher = Sha256::new();
        let mut total: u64 = 0;
        let cap = if declared > 0 { declared } else { max };
        while let Some(chunk) = stream.next().await {
            let chunk = chunk.map_err(|e| {
                Classified::Retry(format!("reading blob {}: {}", desc.digest, error_chain(&e)))
            })?;
            total += chunk.len() as u64;
            self.counters
                .bytes_downloaded
                .fetch_add(chunk.len() as u64, Ordering::Relaxed);
            if total > cap {
                return Err(Classified::Fail(if declared > 0 {
                    ImageError::DigestMismatch {
                        image: image.to_string(),
                        what: format!("size of blob {}", desc.digest),
                        expected: format!("{cap} bytes"),
                        actual: format!("more than {cap} bytes"),
                    }
                } else {
                    ImageError::LimitExceeded {
                        image: image.to_string(),
                        layer: desc.digest.clone(),
                        what: "blob size".to_string(),
                        limit: cap,
                    }
                }));
            }
            hasher.update(&chunk);
            out.write_all(&chunk)
                .await
                .map_err(|e| Classified::Fail(ImageError::io(image, Path::new("(blob)"), e)))?;
            if let Some(f) = on_bytes {
                f(total);
            }
        }
        let actual = format!(
            "sha256:{}",
            data_encoding::HEXLOWER.encode(&hasher.finalize())
        );
        if actual != desc.digest {
            return Err(Classified::Fail(ImageError::DigestMismatch {
                image: image.to_string(),
                what: format!("blob {}", desc.digest),
                expected: desc.digest.clone(),
                actual,
            }));
        }
        Ok(total)
    }
}
