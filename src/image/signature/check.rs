//! The pull's signature check, the thin edge around [`super::evaluate`]: the scope
//! of the reference as written (mirrors do not change the identity checked), the
//! sigstore attachment `sha256-<hex>.sig` fetched from the source the image came
//! from (its manifest, then each payload blob, bounded by [`super::MAX_SIGNATURES`]
//! and [`super::MAX_PAYLOAD_BYTES`]), and a bounded cache of accepted
//! (reference, digest) pairs so a cached image costs no registry request.

use std::collections::HashSet;
use std::sync::Mutex;

use oci_client::Reference;
use oci_client::manifest::OciManifest;

use super::{DockerRef, Signature, evaluate, needs_signatures};
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
        let needed = needs_signatures(reqs);
        if needed && self.verified.contains(&key) {
            return Ok(());
        }
        let tag = signature_tag(digest);
        let sig_ref = Reference::with_tag(
            at.registry().to_string(),
            at.repository().to_string(),
            tag.clone(),
        );
        let fetched = if needed {
            self.fetch_signatures(remote, &sig_ref).await?
        } else {
            Ok(Vec::new())
        };
        let sig_tag = format!("{}:{tag}", at.repository());
        let outcome = fetched.and_then(|sigs| {
            evaluate(reqs, &intended, digest, &sigs, &sig_tag)
                .map_err(|refusal| (refusal.requirement, refusal.detail))
        });
        match outcome {
            Ok(()) => {
                if needed {
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
}
