//! Upstream OLM v1's installations, as its Helm-based applier leaves them, read so that
//! olmv1 can take them over in place (README "Switching from upstream OLM v1").
//!
//! What this module owns: finding the release Secret of a ClusterExtension among the
//! Secrets of the controller's namespace ([`latest`]), decoding it ([`decode`]: Helm's
//! Secret storage — `data.release` = base64(gzip(JSON release)) — with every size
//! bounded, so a hostile Secret cannot blow memory), and the adoption decisions: is the
//! release's bundle the one olmv1 resolved ([`check_bundle`]), and are the release's
//! objects exactly the ones olmv1 renders for it ([`compare_objects`]). Pure; the reads
//! and the marking of an adopted release are done by the controller.
//!
//! What a release holds (Helm 3 `release.Release`): `name`, `namespace` (the
//! ClusterExtension's `spec.namespace`), `version`, `info.status`, `manifest` (every
//! object, multi-document YAML) and the chart. operator-controller records the bundle in
//! the release *labels* (`olm.operatorframework.io/package-name`, `bundle-name`,
//! `bundle-version`, `bundle-reference`). Helm's plain Secret driver keeps release labels
//! on the Secret's labels, but an image reference is not a valid label value, so the
//! storage operator-controller uses keeps them in the release JSON (`labels`, next to
//! the release fields); both places are read, the JSON first. Helm's own Secret labels
//! are `owner`, `name`, `status`, `version`.

use super::record::ObjectRef;
use crate::api::BundleIdentity;
use k8s_openapi::api::core::v1::Secret;
use serde::Deserialize;
use serde_json::{Value, json};
use std::collections::{BTreeMap, BTreeSet};
use std::io::Read as _;

/// The Secret type of Helm's Secret storage driver.
pub const RELEASE_SECRET_TYPE: &str = "helm.sh/release.v1";
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
const GZIP_MAGIC: &[u8] = &[0x1f, 0x8b, 0x08];

/// An installation by upstream OLM v1, from its latest release Secret.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UpstreamRelease {
    /// The release Secret (`sh.helm.release.v1.<extension>.v<version>`).
    pub secret: String,
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

/// The Secrets of Helm's storage that belong to `extension` (label `name`), newest
/// release version last.
pub fn releases_of<'a>(secrets: &'a [Secret], extension: &str) -> Vec<(u64, &'a Secret)> {
    let mut out: Vec<(u64, &Secret)> = secrets
        .iter()
        .filter(|s| s.type_.as_deref() == Some(RELEASE_SECRET_TYPE))
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

/// The latest release Secret of `extension` (highest `version` label), if any.
pub fn latest<'a>(secrets: &'a [Secret], extension: &str) -> Option<&'a Secret> {
    releases_of(secrets, extension).last().map(|(_, s)| *s)
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

/// Decodes a release Secret of Helm's Secret storage.
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
    let release: ReleaseJson =
        serde_json::from_slice(&json).map_err(|e| fail(format!("release JSON: {e}")))?;
    let empty = BTreeMap::new();
    let secret_labels = secret.metadata.labels.as_ref().unwrap_or(&empty);
    let label = |key: &str| -> Result<String, HelmReleaseError> {
        release
            .labels
            .get(key)
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
        release: None,
        image: label(LABEL_BUNDLE_REFERENCE)?,
    };
    let objects = manifest_objects(&release.manifest).map_err(fail)?;
    Ok(UpstreamRelease {
        secret: name.clone(),
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
    let mut json = Vec::new();
    flate2::read::GzDecoder::new(raw.as_slice())
        .take(MAX_DECODED_BYTES + 1)
        .read_to_end(&mut json)
        .map_err(|e| format!("data.release gzip: {e}"))?;
    if json.len() as u64 > MAX_DECODED_BYTES {
        return Err(format!(
            "data.release is larger than {MAX_DECODED_BYTES} bytes uncompressed"
        ));
    }
    Ok(json)
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

#[cfg(test)]
#[path = "helm_release_tests.rs"]
mod tests;
