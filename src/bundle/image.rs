//! Loading a registry+v1 bundle from an image: pull and unpack the whole image with the
//! shared [`ImagePuller`] (digest-keyed cache, safe bounded unpacking), check the image
//! labels (a catalog image or another bundle media type is refused before any reading),
//! then [`load_dir`] on the unpacked directory. Every error names the image.

use super::{Bundle, LoadError, LoadOptions, load_dir};
use crate::image::{
    CATALOG_CONFIGS_LABEL, DockerConfig, Extract, ImageError, ImagePuller, PulledImage,
};
use std::collections::BTreeMap;

/// Image label holding the bundle media type (`registry+v1`).
pub const MEDIATYPE_LABEL: &str = "operators.operatorframework.io.bundle.mediatype.v1";

/// Why a bundle image could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum BundleImageError {
    /// Pulling or unpacking failed (the message names the image).
    #[error("{0}")]
    Pull(#[from] ImageError),
    /// The image labels say this is not a registry+v1 bundle.
    #[error("image {image}: not a registry+v1 bundle image: {reason}")]
    NotRegistryV1 { image: String, reason: String },
    /// The unpacked content is not a loadable bundle.
    #[error("bundle image {image}: {source}")]
    Load {
        image: String,
        #[source]
        source: LoadError,
    },
    /// The blocking load task could not finish (runtime shutting down).
    #[error("bundle image {image}: loading was interrupted: {detail}")]
    Interrupted { image: String, detail: String },
}

impl BundleImageError {
    /// Whether trying again later may succeed without anyone changing anything.
    pub fn is_retryable(&self) -> bool {
        match self {
            BundleImageError::Pull(e) => e.is_retryable(),
            BundleImageError::Interrupted { .. } => true,
            BundleImageError::Load {
                source: LoadError::Io { .. },
                ..
            } => true,
            _ => false,
        }
    }

    /// Whether the failure is final for this image reference, so the extension should be
    /// reported Blocked rather than retried: an invalid reference always is; content that
    /// cannot be used (bad YAML, alias bomb, not a bundle, unsafe or oversized layers) is
    /// when the reference is pinned by digest, as the same bytes will always fail (a tag
    /// may be re-pushed with a fix). Registry, network and local I/O errors never are.
    /// The image content errors ([`ImageError::is_content_error`]) are those the catalog
    /// controller treats the same way.
    pub fn is_terminal(&self, image_ref_is_digest: bool) -> bool {
        match self {
            BundleImageError::Pull(ImageError::InvalidReference { .. }) => true,
            // Blocked by the registries configuration or refused by the signature
            // policy: an administrator (or a signature) must act.
            BundleImageError::Pull(e) if e.is_blocked() => true,
            BundleImageError::Pull(e) if e.is_content_error() => image_ref_is_digest,
            BundleImageError::Pull(_) | BundleImageError::Interrupted { .. } => false,
            BundleImageError::Load {
                source: LoadError::Io { .. },
                ..
            } => false,
            BundleImageError::NotRegistryV1 { .. } | BundleImageError::Load { .. } => {
                image_ref_is_digest
            }
        }
    }
}

/// Whether `reference` names an image by digest (`…@sha256:…`), so its content can never change.
pub fn is_digest_reference(reference: &str) -> bool {
    reference.contains('@')
}

/// Decides from the image config labels whether the image may be a registry+v1 bundle:
/// a media type label other than `registry+v1`, or a catalog image (configs label and no
/// bundle media type), is refused. Images without labels are judged by their
/// `metadata/annotations.yaml` when loading.
pub fn check_labels(
    image: &str,
    labels: &BTreeMap<String, String>,
) -> Result<(), BundleImageError> {
    match labels.get(MEDIATYPE_LABEL) {
        Some(m) if m == "registry+v1" => Ok(()),
        Some(m) => Err(BundleImageError::NotRegistryV1 {
            image: image.to_string(),
            reason: format!("label \"{MEDIATYPE_LABEL}\" is \"{m}\", expected \"registry+v1\""),
        }),
        None if labels.contains_key(CATALOG_CONFIGS_LABEL) => {
            Err(BundleImageError::NotRegistryV1 {
                image: image.to_string(),
                reason: format!(
                    "it is a catalog image (label \"{CATALOG_CONFIGS_LABEL}\") without the \"{MEDIATYPE_LABEL}\" label"
                ),
            })
        }
        None => Ok(()),
    }
}

/// Pulls `reference` (tag or digest) with `puller`, unpacking the whole image into the
/// cache, checks its labels and loads the bundle. Returns the bundle and the pulled
/// image (digest-pinned reference, labels, unpacked directory).
pub async fn load_image(
    puller: &ImagePuller,
    reference: &str,
    secrets: &DockerConfig,
    opts: &LoadOptions,
) -> Result<(Bundle, PulledImage), BundleImageError> {
    let pulled = puller.pull(reference, &Extract::Whole, secrets).await?;
    check_labels(reference, &pulled.labels)?;
    let dir = pulled.dir.clone();
    let opts = opts.clone();
    let loaded = tokio::task::spawn_blocking(move || load_dir(&dir, &opts))
        .await
        .map_err(|e| BundleImageError::Interrupted {
            image: reference.to_string(),
            detail: e.to_string(),
        })?;
    match loaded {
        Ok(bundle) => Ok((bundle, pulled)),
        Err(LoadError::NotRegistryV1(reason)) => Err(BundleImageError::NotRegistryV1 {
            image: reference.to_string(),
            reason,
        }),
        Err(source) => Err(BundleImageError::Load {
            image: reference.to_string(),
            source,
        }),
    }
}

#[cfg(test)]
#[path = "image_tests.rs"]
mod tests;
