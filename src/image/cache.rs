//! One finished cache entry, `images/<alg>-<hex>/<mode>/`: `content/` (the unpack) and
//! `meta.json` (the pinned reference, digest and labels), moved into place by `rename`
//! ([`store_entry`]) and read back on a cache hit ([`read_cached`]).

use std::collections::BTreeMap;
use std::path::Path;

use serde::{Deserialize, Serialize};

use super::{ImageError, PulledImage, gc};

/// `meta.json` of a cache entry.
#[derive(Serialize, Deserialize)]
pub(super) struct Meta {
    pub reference: String,
    pub digest: String,
    pub labels: BTreeMap<String, String>,
}

/// Writes `meta.json` into the finished work entry and moves it to `final_dir`.
pub(super) fn store_entry(
    image: &str,
    entry: &Path,
    meta: &Meta,
    final_dir: &Path,
) -> Result<(), ImageError> {
    let meta_path = entry.join("meta.json");
    let meta_json = serde_json::to_vec_pretty(meta)
        .map_err(|e| ImageError::io(image, &meta_path, std::io::Error::other(e)))?;
    std::fs::write(&meta_path, meta_json).map_err(|e| ImageError::io(image, &meta_path, e))?;
    if let Some(parent) = final_dir.parent() {
        std::fs::create_dir_all(parent).map_err(|e| ImageError::io(image, parent, e))?;
    }
    if let Err(e) = std::fs::rename(entry, final_dir) {
        // Another pull of the same digest finished first: use its result.
        if read_cached(final_dir).is_none() {
            return Err(ImageError::io(image, final_dir, e));
        }
    }
    Ok(())
}

pub(super) fn read_cached(final_dir: &Path) -> Option<PulledImage> {
    let meta: Meta =
        serde_json::from_slice(&std::fs::read(final_dir.join("meta.json")).ok()?).ok()?;
    let dir = final_dir.join("content");
    dir.is_dir().then_some(PulledImage {
        reference: meta.reference,
        digest: meta.digest,
        labels: meta.labels,
        dir,
        from_cache: true,
        lease: gc::CacheLease::default(),
    })
}
