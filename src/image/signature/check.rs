//! The pull's signature check, the thin edge around [`super::evaluate`]: the scope
//! of the reference as written (mirrors do not change the identity checked), the
//! sigstore attachment `sha256-<hex>.sig` fetched from the source the image came
//! from (its manifest, then each payload blob, bounded by [`super::MAX_SIGNATURES`]
//! and [`super::MAX_PAYLOAD_BYTES`]), the `signedBy` signatures in the registries.d
//! lookaside storage (`file://` or `http(s)://`, same limits), and a bounded cache of accepted
//! (reference, digest) pairs so a cached image costs no registry request.

use std::collections::HashSet;
use std::sync::Mutex;

use oci_client::Reference;
use oci_client::manifest::OciManifest;

use super::lookaside::image_url;
use super::{DockerRef, Found, Lookaside, Signature, evaluate_found, needed};
use crate::image::fetch::Remote;
use crate::image::{ImageError, ImagePuller};

/// The media type of a sigstore signature layer.
pub const SIGNATURE_MEDIA_TYPE: &str = "application/vnd.dev.cosign.simplesigning.v1+json";
/// The layer annotation holding the base64 signature.
pub const SIGNATURE_ANNOTATION: &str = "dev.cosignproject.cosign/signature";
/// Accepted (reference, digest) pairs remembered.
const CACHE_ENTRIES: usize = 1024;

/// Images already accepted by signature: (reference as written, manifest digest).
#[derive(Debug, Default)]
pub struct VerifiedCache(Mutex<HashSet<(String, String)>>);

impl VerifiedCache {
    fn contains(&self, key: &(String, String)) -> bool {
        self.0
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .contains(key)
    }

    fn insert(&self, key: (String, String)) {
        let mut set = self.0.lock().unwrap_or_else(|p| p.into_inner());
        if set.len() >= CACHE_ENTRIES {
            set.clear();
        }
        set.insert(key);
    }
}

/// The tag of the sigstore attachment of `digest` (`sha256-<hex>.sig`).
pub fn signature_tag(digest: &str) -> String {
    format!("{}.sig", digest.replace(':', "-"))
}

impl ImagePuller {
    /// Applies the signature policy to `image` (`r` as written) whose top manifest
    /// `digest` was found at `at` (maybe a mirror) through `remote`.
    pub(in crate::image) async fn check_signature_policy(
        &self,
        remote: &Remote<'_>,
        r: &Reference,
        at: &Reference,
        digest: &str,
    ) -> Result<(), ImageError> {
        let policy = &self.config.signature_policy;
        if !policy.found {
            return Ok(());
        }
        let image = remote.image;
        let intended = DockerRef::from_reference(r);
        let (scope, reqs) = policy.requirements_for(&intended);
        let key = (image.to_string(), digest.to_string());
        let needed = needed(reqs);
        let any = needed.sigstore || needed.lookaside;
        if any && self.verified.contains(&key) {
            return Ok(());
        }
        let tag = signature_tag(digest);
        let sig_ref = Reference::with_tag(
            at.registry().to_string(),
            at.repository().to_string(),
            tag.clone(),
        );
        let fetched = if needed.sigstore {
            self.fetch_signatures(remote, &sig_ref).await?
        } else {
            Ok(Vec::new())
        };
        let lookaside = if needed.lookaside {
            self.fetch_lookaside(remote, &intended, digest).await?
        } else {
            Ok(Lookaside::Unconfigured(String::new()))
        };
        let sig_tag = format!("{}:{tag}", at.repository());
        let outcome =
            fetched
                .and_then(|sigs| Ok((sigs, lookaside?)))
                .and_then(|(sigs, lookaside)| {
                    let found = Found {
                        sigstore: &sigs,
                        sig_tag: &sig_tag,
                        lookaside: &lookaside,
                    };
                    evaluate_found(reqs, &intended, digest, &found)
                        .map_err(|refusal| (refusal.requirement, refusal.detail))
                });
        match outcome {
            Ok(()) => {
                if any {
                    self.verified.insert(key);
                }
                tracing::debug!(image, %scope, "signature policy accepts the image");
                Ok(())
            }
            Err((requirement, detail)) => Err(ImageError::SignatureRefused {
                image: image.to_string(),
                policy: policy.path.clone(),
                scope: scope.to_string(),
                requirement: requirement.to_string(),
                detail,
            }),
        }
    }

    /// The signatures in the attachment manifest `sig_ref` (none when it does not
    /// exist). The inner `Err` is a refusal (a malformed or oversized attachment:
    /// requirement `sigstoreSigned`); the outer one a registry error.
    async fn fetch_signatures(
        &self,
        remote: &Remote<'_>,
        sig_ref: &Reference,
    ) -> Result<Result<Vec<Signature>, (&'static str, String)>, ImageError> {
        let refuse = |detail: String| Ok(Err(("sigstoreSigned", detail)));
        let manifest = match self.fetch_manifest(remote, sig_ref).await {
            Ok(m) => m,
            Err(ImageError::NotFound { .. }) => return Ok(Ok(Vec::new())),
            Err(e) => return Err(e),
        };
        let OciManifest::Image(manifest) = manifest else {
            return refuse(format!(
                "the signature attachment {} is an index, not a manifest",
                sig_ref.whole()
            ));
        };
        if manifest.layers.len() > super::MAX_SIGNATURES {
            return refuse(format!(
                "the signature attachment {} has {} signatures, more than the limit of {}",
                sig_ref.whole(),
                manifest.layers.len(),
                super::MAX_SIGNATURES
            ));
        }
        let mut sigs = Vec::new();
        for layer in &manifest.layers {
            if layer.media_type != SIGNATURE_MEDIA_TYPE {
                return refuse(format!(
                    "the signature attachment {} has a layer of media type {:?}, not {SIGNATURE_MEDIA_TYPE}",
                    sig_ref.whole(),
                    layer.media_type
                ));
            }
            if u64::try_from(layer.size).unwrap_or(u64::MAX) > super::MAX_PAYLOAD_BYTES {
                return refuse(format!(
                    "signature payload {} of {} bytes exceeds the limit of {} bytes",
                    layer.digest,
                    layer.size,
                    super::MAX_PAYLOAD_BYTES
                ));
            }
            let payload = self
                .fetch_small_blob(remote, sig_ref, layer, super::MAX_PAYLOAD_BYTES)
                .await?;
            let signature = layer
                .annotations
                .as_ref()
                .and_then(|a| a.get(SIGNATURE_ANNOTATION))
                .cloned();
            sigs.push(Signature { payload, signature });
        }
        Ok(Ok(sigs))
    }

    /// The `signedBy` signatures of `intended`'s manifest `digest`: `signature-1`,
    /// `signature-2`, … under its lookaside location until the first missing one
    /// (registries.d; the reference as written chooses it, as containers/image does).
    /// The inner `Err` is a refusal (over a limit); the outer one a read error.
    async fn fetch_lookaside(
        &self,
        remote: &Remote<'_>,
        intended: &DockerRef,
        digest: &str,
    ) -> Result<Result<Lookaside, (&'static str, String)>, ImageError> {
        let conf = &self.config.registries_d;
        let Some((_, base)) = conf.lookaside_for(intended) else {
            let dir = if conf.dir.is_empty() {
                String::new()
            } else {
                format!(" ({})", conf.dir)
            };
            return Ok(Ok(Lookaside::Unconfigured(format!(
                "no lookaside configured in registries.d{dir} for {}",
                intended.name
            ))));
        };
        let url = image_url(&base, intended, digest);
        let mut blobs = Vec::new();
        for n in 1..=super::MAX_SIGNATURES + 1 {
            let file = format!("{url}/signature-{n}");
            let Some(blob) = self.read_lookaside(remote, &file).await? else {
                break;
            };
            if n > super::MAX_SIGNATURES {
                return Ok(Err((
                    "signedBy",
                    format!(
                        "lookaside {url} has more than the limit of {} signatures",
                        super::MAX_SIGNATURES
                    ),
                )));
            }
            if blob.len() as u64 > super::MAX_PAYLOAD_BYTES {
                return Ok(Err((
                    "signedBy",
                    format!(
                        "signature {file} exceeds the limit of {} bytes",
                        super::MAX_PAYLOAD_BYTES
                    ),
                )));
            }
            blobs.push(blob);
        }
        Ok(Ok(Lookaside::Found { url, blobs }))
    }

    /// The lookaside file `url` (`file://` or `http(s)://`): `None` when missing (404),
    /// else at most [`super::MAX_PAYLOAD_BYTES`] + 1 bytes of it.
    async fn read_lookaside(
        &self,
        remote: &Remote<'_>,
        url: &str,
    ) -> Result<Option<Vec<u8>>, ImageError> {
        let max = super::MAX_PAYLOAD_BYTES + 1;
        let fail = |detail: String| ImageError::Registry {
            image: remote.image.to_string(),
            detail: format!("signature lookaside {url}: {detail}"),
        };
        if let Some(path) = url.strip_prefix("file://") {
            let file = match std::fs::File::open(path) {
                Ok(f) => f,
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
                Err(e) => return Err(fail(e.to_string())),
            };
            let mut buf = Vec::new();
            std::io::Read::read_to_end(&mut std::io::Read::take(file, max), &mut buf)
                .map_err(|e| fail(e.to_string()))?;
            return Ok(Some(buf));
        }
        let request = remote
            .client
            .http()
            .get(url)
            .timeout(self.config.request_timeout);
        let mut resp = request.send().await.map_err(|e| fail(e.to_string()))?;
        if resp.status() == reqwest::StatusCode::NOT_FOUND {
            return Ok(None);
        }
        if !resp.status().is_success() {
            return Err(fail(format!("HTTP status {}", resp.status())));
        }
        let mut buf = Vec::new();
        while let Some(chunk) = resp.chunk().await.map_err(|e| fail(e.to_string()))? {
            buf.extend_from_slice(&chunk);
            if buf.len() as u64 >= max {
                buf.truncate(max as usize);
                break;
            }
        }
        Ok(Some(buf))
    }
}
