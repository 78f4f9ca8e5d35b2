//! Upstream OLM v1's installations, as its Helm-based applier leaves them, read so that
//! olmv1 can take them over in place (docs/how-to/switch-from-upstream.md).
//!
//! What this module owns: finding the release of a ClusterExtension among the Secrets of
//! the controller's namespace ([`latest`]), decoding it ([`decode()`], [`decode_chunked`]:
//! `decode.rs`) — with every size bounded, so a hostile Secret cannot blow memory — and
//! the adoption decisions (`compare.rs`): is the release's bundle the one olmv1 resolved
//! ([`check_bundle`]), and are the release's objects exactly the ones olmv1 renders for it
//! ([`compare_objects`]); then the mark left on an adopted release ([`adopted_patch`],
//! [`is_adopted`]). `encode.rs` writes releases as upstream does, for the tests and the
//! test tooling that lay down upstream installations. Pure; listing, fetching chunks and
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

mod compare;
mod decode;
mod encode;

pub use compare::{ObjectsDiffer, check_bundle, compare_objects};
pub use decode::{chunk_names, decode, decode_chunked, decode_release_bytes};
pub use encode::{
    ChunkedSecrets, chunk_hash, chunk_owner_reference, encode_chunked, encode_secret,
};

use crate::api::BundleIdentity;
use crate::apply::ObjectRef;
use k8s_openapi::api::core::v1::Secret;
use serde_json::{Value, json};

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

#[cfg(test)]
mod tests;
