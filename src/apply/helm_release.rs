//! Upstream OLM v1's installations, as its Helm-based applier leaves them, read so that
//! olmv1 can take them over in place (README "Switching from upstream OLM v1").
//!
//! What this module owns: finding the release of a ClusterExtension among the Secrets of
//! the controller's namespace ([`latest`]), decoding it — with every size bounded, so a
//! hostile Secret cannot blow memory — and the adoption decisions: is the release's
//! bundle the one olmv1 resolved ([`check_bundle`]), and are the release's objects exactly
//! the ones olmv1 renders for it ([`compare_objects`]). Pure; listing, fetching chunks and
//! marking an adopted release are done by the controller.
//!
//! Two storages are read (facts checked in the sources of operator-controller v1.11.0 with
//! helm-operator-plugins v0.9.1, and v1.5.1 with v0.8.0 and helm v3.18.6; the chunked
//! storage is the same in both plugin versions):
//!
//! * **Chunked Secrets** ([`Storage::Chunked`]), what operator-controller writes
//!   (`action.ChunkedStorageDriverMapper` → helm-operator-plugins `storage.NewChunkedSecrets`
//!   with owner `operator-controller`; chunks of 1016 KiB, at most 11, in v1.11.0; 1 MiB,
//!   at most 10, in v1.5.1). An *index* Secret named
//!   like Helm's key (`sh.helm.release.v1.<name>.v<version>`), type
//!   `operatorframework.io/index.v1`, labels `name`, `owner`, `status`, `version`, `key`
//!   (its own name), `type=index`, `createdAt`, an ownerReference to the ClusterExtension;
//!   `data.chunk` holds the first chunk and `data.extraChunks` the JSON array of the other
//!   chunk Secrets' names, in order. Each *chunk* Secret (`<key>-<hash>`, type
//!   `operatorframework.io/chunk.v1`, labels `owner`, `key`, `type=chunk`, immutable,
//!   owned by the index) holds `data.chunk`. The concatenated chunks are gzip of the JSON
//!   release *with its labels* (`labels`, next to the release fields) — no base64 besides
//!   the API's own. operator-controller's bundle labels (`olm.operatorframework.io/
//!   package-name`, `bundle-name`, `bundle-version`, `bundle-reference`) live only there.
//! * **Helm's classic Secret driver** ([`Storage::Secrets`]): `sh.helm.release.v1.<name>.v<N>`,
//!   type `helm.sh/release.v1`, `data.release` = base64(gzip(JSON release)); the release
//!   labels are the Secret's labels (Helm's release JSON has none: `Labels` is `json:"-"`),
//!   next to Helm's own `owner=helm`, `name`, `status`, `version`. Kept for
//!   installations written by Helm's own driver; both the Secret labels and a `labels`
//!   field in the JSON are read, the JSON first.
//!
//! The release chosen is the one upstream itself reports as installed
//! (`GetInstalledBundle`: the most recent release whose status is `deployed`), across
//! both storages; without any deployed release, the most recent one (then reported as
//! not adoptable).

use super::record::ObjectRef;
use crate::api::BundleIdentity;
use k8s_openapi::api::core::v1::Secret;
use serde::Deserialize;
use serde_json::{Value, json};
use std::collections::{BTreeMap, BTreeSet};
use std::io::Read as _;

/// The Secret type of Helm's Secret storage driver.
pub const RELEASE_SECRET_TYPE: &str = "helm.sh/release.v1";
/// The Secret type of helm-operator-plugins' chunked storage: the index Secret.
pub const INDEX_SECRET_TYPE: &str = "operatorframework.io/index.v1";
/// The Secret type of helm-operator-plugins' chunked storage: the other chunks.
pub const CHUNK_SECRET_TYPE: &str = "operatorframework.io/chunk.v1";
/// The `owner` label operator-controller's chunked storage sets.
pub const CHUNKED_OWNER: &str = "operator-controller";
/// Most chunks a release may have (operator-controller's `MaxReadChunks`: 10 in v1.5.1,
/// 11 in v1.11.0).
pub const MAX_CHUNKS: usize = 11;
/// Largest chunked release accepted, all chunks together (upstream: at most 11 chunks of
/// 1016 KiB in v1.11.0, 10 of 1 MiB in v1.5.1).
pub const MAX_CHUNKED_BYTES: usize = MAX_CHUNKS << 20;
/// Largest `data.extraChunks` accepted.
const MAX_INDEX_BYTES: usize = 16 << 10;
/// Labels the chunked storage keeps for itself (removed from the release labels).
const SYSTEM_LABELS: &[&str] = &[
    "name",
    "owner",
    "status",
    "version",
    "key",
    "type",
    "createdAt",
    "modifiedAt",
];
/// Label and value set on a release Secret once olmv1 adopted what it installed.
pub const ADOPTED_LABEL: &str = "olm.operatorframework.io/adopted-by";
pub const ADOPTED_BY: &str = "olmv1";
/// Annotation naming the olmv1 revision record the adopted release continues in.
pub const ADOPTED_RECORD_ANNOTATION: &str = "olm.operatorframework.io/adopted-into";
/// Largest `data.release` accepted (a Secret holds at most 1 MiB anyway).
pub const MAX_ENCODED_BYTES: usize = 2 << 20;
/// Largest decompressed release accepted (decompression bomb guard).
pub const MAX_DECODED_BYTES: u64 = 32 << 20;

pub const LABEL_PACKAGE: &str = "olm.operatorframework.io/package-name";
pub const LABEL_BUNDLE_NAME: &str = "olm.operatorframework.io/bundle-name";
pub const LABEL_BUNDLE_VERSION: &str = "olm.operatorframework.io/bundle-version";
pub const LABEL_BUNDLE_REFERENCE: &str = "olm.operatorframework.io/bundle-reference";
/// Set by operator-controller v1.11 only for bundles with a release (feature
/// `BundleReleaseSupport`); optional.
pub const LABEL_BUNDLE_RELEASE: &str = "olm.operatorframework.io/bundle-release";
const GZIP_MAGIC: &[u8] = &[0x1f, 0x8b, 0x08];

/// Where a release is stored.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Storage {
    /// Helm's classic Secret driver (`helm.sh/release.v1`).
    Secrets,
    /// helm-operator-plugins' chunked Secrets (index `operatorframework.io/index.v1`).
    Chunked,
}

/// The storage a Secret belongs to as a release (classic release or chunked index).
pub fn storage_of(secret: &Secret) -> Option<Storage> {
    match secret.type_.as_deref() {
        Some(RELEASE_SECRET_TYPE) => Some(Storage::Secrets),
        Some(INDEX_SECRET_TYPE) => Some(Storage::Chunked),
        _ => None,
    }
}

/// An installation by upstream OLM v1, from its latest release Secret.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UpstreamRelease {
    /// The release Secret (`sh.helm.release.v1.<extension>.v<version>`; for the chunked
    /// storage, the index Secret — the one marked when adopted).
    pub secret: String,
    pub storage: Storage,
    /// The release name (the ClusterExtension's name).
    pub name: String,
    pub version: u64,
    /// The release namespace (the ClusterExtension's `spec.namespace`).
    pub namespace: String,
    /// `info.status` (`deployed`, `failed`, `pending-upgrade`, …).
    pub status: String,
    /// The installed bundle, from the release labels (`image`: the bundle reference).
    pub bundle: BundleIdentity,
    /// Every object of the release manifest, sorted.
    pub objects: Vec<ObjectRef>,
}

/// Why a release Secret could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum HelmReleaseError {
    #[error(
        "release Secret {secret}: {reason}; remove or fix it, or delete the ClusterExtension and install it again with olmv1"
    )]
    Unreadable { secret: String, reason: String },
}

/// The release Secrets (classic releases and chunked indexes) that belong to `extension`
/// (label `name`), newest release version last.
pub fn releases_of<'a>(secrets: &'a [Secret], extension: &str) -> Vec<(u64, &'a Secret)> {
    let mut out: Vec<(u64, &Secret)> = secrets
        .iter()
        .filter(|s| storage_of(s).is_some())
        .filter_map(|s| {
            let labels = s.metadata.labels.as_ref()?;
            if labels.get("name").map(String::as_str) != Some(extension) {
                return None;
            }
            let version = labels.get("version")?.parse::<u64>().ok()?;
            Some((version, s))
        })
        .collect();
    out.sort_by_key(|(v, _)| *v);
    out
}

/// The release of `extension` upstream reports as installed: the highest `version` label
/// whose `status` label is `deployed`; without one, the highest version. Both storages.
pub fn latest<'a>(secrets: &'a [Secret], extension: &str) -> Option<&'a Secret> {
    let releases = releases_of(secrets, extension);
    let deployed = releases.iter().rev().find(|(_, s)| {
        s.metadata
            .labels
            .as_ref()
            .and_then(|l| l.get("status"))
            .is_some_and(|v| v == "deployed")
    });
    deployed.or(releases.last()).map(|(_, s)| *s)
}

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
    let json = gunzip(&joined).map_err(|e| {
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

/// Gunzips `raw`, at most [`MAX_DECODED_BYTES`] out.
fn gunzip(raw: &[u8]) -> Result<Vec<u8>, String> {
    let mut json = Vec::new();
    flate2::read::GzDecoder::new(raw)
        .take(MAX_DECODED_BYTES + 1)
        .read_to_end(&mut json)
        .map_err(|e| format!("gzip: {e}"))?;
    if json.len() as u64 > MAX_DECODED_BYTES {
        return Err(format!(
            "larger than {MAX_DECODED_BYTES} bytes uncompressed"
        ));
    }
    Ok(json)
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
    gunzip(&raw).map_err(|e| format!("data.release {e}"))
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

/// Whether `release` may be adopted as an installation of `target` (the bundle olmv1
/// resolved, with the release's bundle as the installed one): the release is deployed,
/// and package, bundle name and version are the same. `Err`: what differs.
pub fn check_bundle(release: &UpstreamRelease, target: &BundleIdentity) -> Result<(), String> {
    let mut differ = Vec::new();
    if release.status != "deployed" {
        differ.push(format!(
            "the release is {:?}, not \"deployed\" (an upstream install or upgrade did not finish)",
            release.status
        ));
    }
    if release.bundle.package != target.package {
        differ.push(format!(
            "package {:?} in the release, {:?} resolved",
            release.bundle.package, target.package
        ));
    }
    if release.bundle.name != target.name || release.bundle.version != target.version {
        differ.push(format!(
            "bundle {} version {} in the release, {} version {} resolved (pin spec.source.catalog.version to {} for the switch, then unpin it)",
            release.bundle.name,
            release.bundle.version,
            target.name,
            target.version,
            release.bundle.version
        ));
    }
    if differ.is_empty() {
        Ok(())
    } else {
        Err(differ.join("; "))
    }
}

/// The identity an object is compared by: group, kind, namespace, name (the API version
/// may differ: the same object served at another version is the same object).
type Identity = (String, String, String, String);

fn identity(
    r: &ObjectRef,
    default_namespace: &str,
    namespaced: &BTreeSet<(&str, &str)>,
) -> Identity {
    // Helm puts namespaced objects without metadata.namespace into the release namespace.
    let namespace =
        if r.namespace.is_empty() && namespaced.contains(&(r.group.as_str(), r.kind.as_str())) {
            default_namespace.to_string()
        } else {
            r.namespace.clone()
        };
    (r.group.clone(), r.kind.clone(), namespace, r.name.clone())
}

/// What differs between a release's objects and olmv1's rendering.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ObjectsDiffer {
    /// In the release, not in olmv1's rendering (olmv1 would leave them unmanaged).
    pub only_upstream: Vec<String>,
    /// In olmv1's rendering, not in the release (olmv1 would create them).
    pub only_olmv1: Vec<String>,
}

impl std::fmt::Display for ObjectsDiffer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut parts = Vec::new();
        if !self.only_upstream.is_empty() {
            parts.push(format!(
                "{} object(s) in the release that olmv1 does not render: {}",
                self.only_upstream.len(),
                self.only_upstream.join(", ")
            ));
        }
        if !self.only_olmv1.is_empty() {
            parts.push(format!(
                "{} object(s) olmv1 renders that are not in the release: {}",
                self.only_olmv1.len(),
                self.only_olmv1.join(", ")
            ));
        }
        f.write_str(&parts.join("; "))
    }
}

/// Whether the release's objects are exactly the objects of `rendered` (olmv1's rendering
/// of the same bundle for the same namespace and configuration): the same set of
/// (group, kind, namespace, name); the API version and the content may differ (olmv1's
/// apply brings the content to its rendering, in place).
pub fn compare_objects(release: &UpstreamRelease, rendered: &[Value]) -> Result<(), ObjectsDiffer> {
    let refs: Vec<ObjectRef> = rendered.iter().filter_map(ObjectRef::from_object).collect();
    // Kinds olmv1 renders with a namespace are namespaced.
    let namespaced: BTreeSet<(&str, &str)> = refs
        .iter()
        .filter(|r| !r.namespace.is_empty())
        .map(|r| (r.group.as_str(), r.kind.as_str()))
        .collect();
    let ours: BTreeMap<Identity, &ObjectRef> = refs
        .iter()
        .map(|r| (identity(r, &release.namespace, &namespaced), r))
        .collect();
    let theirs: BTreeMap<Identity, &ObjectRef> = release
        .objects
        .iter()
        .map(|r| (identity(r, &release.namespace, &namespaced), r))
        .collect();
    let differ = ObjectsDiffer {
        only_upstream: theirs
            .iter()
            .filter(|(k, _)| !ours.contains_key(*k))
            .map(|(_, r)| r.to_string())
            .collect(),
        only_olmv1: ours
            .iter()
            .filter(|(k, _)| !theirs.contains_key(*k))
            .map(|(_, r)| r.to_string())
            .collect(),
    };
    if differ == ObjectsDiffer::default() {
        Ok(())
    } else {
        Err(differ)
    }
}

/// The merge patch that marks an adopted release Secret (left in place for a way back
/// to upstream; olmv1 never reads it again once its own record exists).
pub fn adopted_patch(record: &str) -> Value {
    json!({"metadata": {
        "labels": {ADOPTED_LABEL: ADOPTED_BY},
        "annotations": {ADOPTED_RECORD_ANNOTATION: record},
    }})
}

/// Whether a release Secret was already marked as adopted.
pub fn is_adopted(secret: &Secret) -> bool {
    secret
        .metadata
        .labels
        .as_ref()
        .and_then(|l| l.get(ADOPTED_LABEL))
        .is_some_and(|v| v == ADOPTED_BY)
}

/// A release Secret in Helm's storage format (tests and the test tooling that lays down
/// upstream installations): `release` is the release JSON (release labels in its
/// `labels`), `labels` the Secret's.
pub fn encode_secret(
    secret_name: &str,
    namespace: &str,
    release: &Value,
    labels: &BTreeMap<String, String>,
) -> Value {
    use std::io::Write as _;
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    // Writing into a Vec cannot fail.
    let _ = gz.write_all(release.to_string().as_bytes());
    let compressed = gz.finish().unwrap_or_default();
    let text = data_encoding::BASE64.encode(&compressed);
    json!({
        "apiVersion": "v1",
        "kind": "Secret",
        "type": RELEASE_SECRET_TYPE,
        "metadata": {"name": secret_name, "namespace": namespace, "labels": labels},
        "data": {"release": data_encoding::BASE64.encode(text.as_bytes())},
    })
}

/// A release in the chunked storage, as helm-operator-plugins v0.8.0 writes it.
#[derive(Clone, Debug)]
pub struct ChunkedSecrets {
    /// The index Secret (create it first; set its ownerReference to the
    /// ClusterExtension, as operator-controller does, before creating it).
    pub index: Value,
    /// The other chunks, in order; each needs [`chunk_owner_reference`] to the created
    /// index before being created.
    pub chunks: Vec<Value>,
}

/// A release in helm-operator-plugins' chunked storage (tests and the test tooling that
/// lays down upstream installations), written as `storage.chunkedSecrets.Create` does:
/// gzip (best compression) of the JSON release with its `labels`, followed by a newline
/// (Go's `json.Encoder`), split every `chunk_size` bytes; chunk Secrets are named
/// `<key>-<base32(fnv64a(chunk))>` (alphabet `a-z1-6`, no padding). `release` must hold
/// `name`, `version` and `info.status` (they become the index labels).
pub fn encode_chunked(
    key: &str,
    namespace: &str,
    release: &Value,
    chunk_size: usize,
    created_at: i64,
) -> ChunkedSecrets {
    use std::io::Write as _;
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
    // Writing into a Vec cannot fail.
    let _ = gz.write_all(release.to_string().as_bytes());
    let _ = gz.write_all(b"\n");
    let data = gz.finish().unwrap_or_default();
    let pieces: Vec<&[u8]> = data.chunks(chunk_size.max(1)).collect();
    let names: Vec<String> = pieces
        .iter()
        .skip(1)
        .map(|p| format!("{key}-{}", chunk_hash(p)))
        .collect();
    let b64 = |b: &[u8]| data_encoding::BASE64.encode(b);
    let version = release["version"].as_u64().unwrap_or_default().to_string();
    let index = json!({
        "apiVersion": "v1",
        "kind": "Secret",
        "type": INDEX_SECRET_TYPE,
        "immutable": false,
        "metadata": {"name": key, "namespace": namespace, "labels": {
            "name": release["name"].as_str().unwrap_or_default(),
            "owner": CHUNKED_OWNER,
            "status": release["info"]["status"].as_str().unwrap_or_default(),
            "version": version,
            "key": key,
            "type": "index",
            "createdAt": created_at.to_string(),
        }},
        "data": {
            "extraChunks": b64(serde_json::to_string(&names).unwrap_or_default().as_bytes()),
            "chunk": b64(pieces.first().copied().unwrap_or_default()),
        },
    });
    let chunks = pieces
        .iter()
        .skip(1)
        .zip(&names)
        .map(|(p, name)| {
            json!({
                "apiVersion": "v1",
                "kind": "Secret",
                "type": CHUNK_SECRET_TYPE,
                "immutable": true,
                "metadata": {"name": name, "namespace": namespace, "labels": {
                    "owner": CHUNKED_OWNER,
                    "key": key,
                    "type": "chunk",
                    "createdAt": created_at.to_string(),
                }},
                "data": {"chunk": b64(p)},
            })
        })
        .collect();
    ChunkedSecrets { index, chunks }
}

/// The ownerReference a chunk Secret carries to its index Secret.
pub fn chunk_owner_reference(index_name: &str, index_uid: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "Secret", "name": index_name, "uid": index_uid,
           "controller": true, "blockOwnerDeletion": false})
}

/// helm-operator-plugins' chunk name suffix: FNV-1a 64 of the chunk, big-endian, in
/// base32 with the alphabet `abcdefghijklmnopqrstuvwxyz123456`, unpadded.
pub fn chunk_hash(data: &[u8]) -> String {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in data {
        h ^= u64::from(*b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    const ALPHABET: &[u8; 32] = b"abcdefghijklmnopqrstuvwxyz123456";
    let bytes = h.to_be_bytes();
    let mut out = String::new();
    let (mut acc, mut bits) = (0u32, 0u32);
    for b in bytes {
        acc = (acc << 8) | u32::from(b);
        bits += 8;
        while bits >= 5 {
            bits -= 5;
            out.push(char::from(ALPHABET[((acc >> bits) & 31) as usize]));
        }
        acc &= (1 << bits) - 1;
    }
    if bits > 0 {
        out.push(char::from(ALPHABET[((acc << (5 - bits)) & 31) as usize]));
    }
    out
}

#[cfg(test)]
#[path = "helm_release_tests.rs"]
mod tests;
