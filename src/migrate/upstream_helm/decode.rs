//! Decoding a release of either storage (see the parent module): the classic Secret's
//! `data.release`, the chunked storage's index and chunks, the release JSON and the
//! objects of its manifest. Every size is bounded.

use super::{
    CHUNK_SECRET_TYPE, HelmReleaseError, LABEL_BUNDLE_NAME, LABEL_BUNDLE_REFERENCE,
    LABEL_BUNDLE_RELEASE, LABEL_BUNDLE_VERSION, LABEL_PACKAGE, MAX_CHUNKED_BYTES, MAX_CHUNKS,
    MAX_DECODED_BYTES, MAX_ENCODED_BYTES, MAX_INDEX_BYTES, SYSTEM_LABELS, Storage, UpstreamRelease,
};
use crate::api::BundleIdentity;
use crate::apply::ObjectRef;
use crate::apply::gzip::gunzip;
use k8s_openapi::api::core::v1::Secret;
use serde::Deserialize;
use serde_json::Value;
use std::collections::BTreeMap;

const GZIP_MAGIC: &[u8] = &[0x1f, 0x8b, 0x08];

#[derive(Deserialize)]
struct ReleaseJson {
    #[serde(default)]
    name: String,
    #[serde(default)]
    namespace: String,
    #[serde(default)]
    version: u64,
    #[serde(default)]
    info: InfoJson,
    #[serde(default)]
    manifest: String,
    #[serde(default)]
    labels: BTreeMap<String, String>,
}

#[derive(Default, Deserialize)]
struct InfoJson {
    #[serde(default)]
    status: String,
}

/// Decodes a release Secret of Helm's classic Secret storage.
pub fn decode(secret: &Secret) -> Result<UpstreamRelease, HelmReleaseError> {
    let name = secret.metadata.name.clone().unwrap_or_default();
    let fail = |reason: String| HelmReleaseError::Unreadable {
        secret: name.clone(),
        reason,
    };
    let data = secret
        .data
        .as_ref()
        .and_then(|d| d.get("release"))
        .ok_or_else(|| fail("no data.release".into()))?;
    let json = decode_release_bytes(&data.0).map_err(fail)?;
    let empty = BTreeMap::new();
    let secret_labels = secret.metadata.labels.as_ref().unwrap_or(&empty);
    release_from_json(&name, Storage::Secrets, &json, secret_labels)
}

/// The names of the chunk Secrets an index Secret of the chunked storage lists
/// (`data.extraChunks`), in order: what the controller fetches for [`decode_chunked`].
pub fn chunk_names(index: &Secret) -> Result<Vec<String>, HelmReleaseError> {
    let name = index.metadata.name.clone().unwrap_or_default();
    let fail = |reason: String| HelmReleaseError::Unreadable {
        secret: name.clone(),
        reason,
    };
    let data = index
        .data
        .as_ref()
        .and_then(|d| d.get("extraChunks"))
        .ok_or_else(|| fail("index Secret without data.extraChunks".into()))?;
    if data.0.len() > MAX_INDEX_BYTES {
        return Err(fail(format!(
            "data.extraChunks is {} bytes, more than the {MAX_INDEX_BYTES} accepted",
            data.0.len()
        )));
    }
    let names: Vec<String> = serde_json::from_slice(&data.0)
        .map_err(|e| fail(format!("data.extraChunks is not a JSON list of names: {e}")))?;
    if 1 + names.len() > MAX_CHUNKS {
        return Err(fail(format!(
            "the release has {} chunks, more than the {MAX_CHUNKS} accepted (operator-controller's own limit)",
            1 + names.len()
        )));
    }
    if let Some(bad) = names.iter().find(|n| n.is_empty() || n.len() > 253) {
        return Err(fail(format!(
            "data.extraChunks names {bad:?}, not a Secret name"
        )));
    }
    Ok(names)
}

/// Decodes a release of the chunked storage: `index` and its chunk Secrets (`chunks`, by
/// name, as fetched for [`chunk_names`]; a missing one is an error naming it). The
/// concatenation is bounded ([`MAX_CHUNKED_BYTES`]) and gunzipped (bounded), then read as
/// the release JSON with its labels, as helm-operator-plugins does.
pub fn decode_chunked(
    index: &Secret,
    chunks: &BTreeMap<String, Secret>,
) -> Result<UpstreamRelease, HelmReleaseError> {
    let name = index.metadata.name.clone().unwrap_or_default();
    let fail = |reason: String| HelmReleaseError::Unreadable {
        secret: name.clone(),
        reason,
    };
    let names = chunk_names(index)?;
    let first = index
        .data
        .as_ref()
        .and_then(|d| d.get("chunk"))
        .ok_or_else(|| fail("index Secret without data.chunk (chunk 1)".into()))?;
    let mut joined: Vec<u8> = Vec::new();
    let mut append = |i: usize, bytes: &[u8]| -> Result<(), HelmReleaseError> {
        if joined.len() + bytes.len() > MAX_CHUNKED_BYTES {
            return Err(fail(format!(
                "the chunks up to chunk {i} hold more than the {MAX_CHUNKED_BYTES} bytes accepted"
            )));
        }
        joined.extend_from_slice(bytes);
        Ok(())
    };
    append(1, &first.0)?;
    for (i, chunk_name) in names.iter().enumerate() {
        let n = i + 2;
        let chunk = chunks.get(chunk_name).ok_or_else(|| {
            fail(format!(
                "chunk {n} of {}, Secret {chunk_name:?}, is missing",
                names.len() + 1
            ))
        })?;
        if chunk.type_.as_deref() != Some(CHUNK_SECRET_TYPE) {
            return Err(fail(format!(
                "chunk {n}, Secret {chunk_name:?}, is of type {:?}, not {CHUNK_SECRET_TYPE:?}",
                chunk.type_.as_deref().unwrap_or("")
            )));
        }
        let data = chunk
            .data
            .as_ref()
            .and_then(|d| d.get("chunk"))
            .ok_or_else(|| {
                fail(format!(
                    "chunk {n}, Secret {chunk_name:?}, has no data.chunk"
                ))
            })?;
        append(n, &data.0)?;
    }
    let json = gunzip(&joined, MAX_DECODED_BYTES).map_err(|e| {
        fail(format!(
            "the {} chunk(s) joined are not a whole gzip stream ({e}): a chunk is truncated or altered",
            names.len() + 1
        ))
    })?;
    release_from_json(&name, Storage::Chunked, &json, &BTreeMap::new())
}

/// The release JSON of either storage; the bundle labels from the JSON's `labels` (minus
/// the storage's own), else from `secret_labels`.
fn release_from_json(
    secret: &str,
    storage: Storage,
    json: &[u8],
    secret_labels: &BTreeMap<String, String>,
) -> Result<UpstreamRelease, HelmReleaseError> {
    let fail = |reason: String| HelmReleaseError::Unreadable {
        secret: secret.to_string(),
        reason,
    };
    let release: ReleaseJson =
        serde_json::from_slice(json).map_err(|e| fail(format!("release JSON: {e}")))?;
    let label = |key: &str| -> Result<String, HelmReleaseError> {
        release
            .labels
            .get(key)
            .filter(|_| !SYSTEM_LABELS.contains(&key))
            .or_else(|| secret_labels.get(key))
            .filter(|v| !v.is_empty())
            .cloned()
            .ok_or_else(|| {
                fail(format!(
                    "no label {key}: not a release written by operator-controller"
                ))
            })
    };
    let bundle = BundleIdentity {
        package: label(LABEL_PACKAGE)?,
        name: label(LABEL_BUNDLE_NAME)?,
        version: label(LABEL_BUNDLE_VERSION)?,
        release: label(LABEL_BUNDLE_RELEASE).ok(),
        image: label(LABEL_BUNDLE_REFERENCE)?,
    };
    let objects = manifest_objects(&release.manifest).map_err(fail)?;
    Ok(UpstreamRelease {
        secret: secret.to_string(),
        storage,
        name: release.name,
        version: release.version,
        namespace: release.namespace,
        status: release.info.status,
        bundle,
        objects,
    })
}

/// `data.release` (as stored in the Secret, i.e. after the API's own base64): base64
/// text of gzip'd JSON (Helm also reads plain JSON after the base64), bounded.
pub fn decode_release_bytes(stored: &[u8]) -> Result<Vec<u8>, String> {
    if stored.len() > MAX_ENCODED_BYTES {
        return Err(format!(
            "data.release is {} bytes, more than the {MAX_ENCODED_BYTES} accepted",
            stored.len()
        ));
    }
    let text: Vec<u8> = stored
        .iter()
        .copied()
        .filter(|b| !b.is_ascii_whitespace())
        .collect();
    let raw = data_encoding::BASE64
        .decode(&text)
        .map_err(|e| format!("data.release is not base64: {e}"))?;
    if !raw.starts_with(GZIP_MAGIC) {
        return Ok(raw);
    }
    gunzip(&raw, MAX_DECODED_BYTES).map_err(|e| format!("data.release {e}"))
}

/// The objects of a release manifest (multi-document YAML; empty documents skipped),
/// sorted.
fn manifest_objects(manifest: &str) -> Result<Vec<ObjectRef>, String> {
    let docs: Vec<Value> = crate::yaml::from_multiple(manifest, serde_saphyr::Options::default())
        .map_err(|e| format!("release manifest: {e}"))?;
    let mut out = Vec::new();
    for (i, doc) in docs.iter().enumerate() {
        if doc.is_null() {
            continue;
        }
        let r = ObjectRef::from_object(doc).ok_or_else(|| {
            format!(
                "release manifest document {}: apiVersion, kind and metadata.name are required",
                i + 1
            )
        })?;
        out.push(r);
    }
    out.sort();
    out.dedup();
    Ok(out)
}
