//! The durable revision record (docs/concepts/rendering.md A5): what each installed revision applied —
//! package, bundle, version, release, digest-pinned image, the object references and a
//! hash of the rendered content — stored as gzip'd JSON in a ConfigMap
//! `olmv1-revision-<extension>` in the controller's namespace (written by the controller's
//! own identity; survives restarts; no Helm). Encoding, history bookkeeping and the
//! ConfigMap shape are pure; [`RevisionStore`] does the reads and writes.
//!
//! Each revision is sealed when it is recorded ([`Revision::integrity`], a SHA-256 over
//! what it names: bundle, version, image, content hash and objects), and a rollback
//! checks both the seal ([`RevisionHistory::check_integrity`]) and that the image it
//! pulled holds the bundle the revision names ([`RevisionHistory::check_pulled`]:
//! records written before the seal are covered by that one), so a record edited to put
//! another bundle's image under a version is refused, not installed under the wrong
//! name (docs/how-to/upgrade-control.md, "Rollback"; the seal and both checks live in
//! the `integrity` module). Fields this version does not know are kept as read when a
//! record is written again.

use super::gzip::gunzip;
use super::ownership::{OWNER_KIND, OWNER_KIND_LABEL, OWNER_NAME_LABEL, Owner};
use super::types::{FIELD_MANAGER, ObjectRef};
use crate::api::BundleIdentity;
use flate2::Compression;
use flate2::write::GzEncoder;
use kube::api::{Api, DeleteParams, Patch, PatchParams};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};
use std::io::Write as _;

mod integrity;

#[cfg(test)]
use integrity::same_version;
pub use integrity::{Disagreement, PulledBundle, RevisionMismatch, seal};

/// Key of the gzip'd JSON history in the ConfigMap's `binaryData`.
pub const DATA_KEY: &str = "history.json.gz";
/// Largest encoded record accepted (ConfigMaps are limited to 1 MiB in total).
pub const MAX_ENCODED_BYTES: usize = 900 * 1024;
/// Largest decoded record accepted when reading (decompression bomb guard).
pub const MAX_DECODED_BYTES: u64 = 64 * 1024 * 1024;
/// Revisions kept in the history (the current one included).
pub const KEEP_REVISIONS: usize = 5;
const NAME_PREFIX: &str = "olmv1-revision-";

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum RevisionState {
    /// Being applied (or an attempt that did not finish: its objects are pruning candidates).
    Pending,
    /// The installed revision.
    Installed,
    /// Replaced by a later installed revision; its dropped objects were pruned.
    Superseded,
}

/// One revision.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Revision {
    pub number: u64,
    pub state: RevisionState,
    #[serde(flatten)]
    pub bundle: BundleIdentity,
    /// `sha256:<hex>` of the rendered objects (see [`content_hash`]).
    pub content_hash: String,
    pub objects: Vec<ObjectRef>,
    /// Who applied it (`status.install.installer`); absent in records written before
    /// olmv1 recorded it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub installer: Option<crate::api::InstallerStatus>,
    /// The seal written with the revision ([`seal`]); absent in records written before
    /// olmv1 sealed revisions.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub integrity: Option<String>,
    /// Fields this version does not know (a later one wrote them), kept as read.
    #[serde(flatten)]
    pub extra: serde_json::Map<String, Value>,
}

/// All recorded revisions of one ClusterExtension, oldest first.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RevisionHistory {
    pub extension: String,
    pub uid: String,
    pub revisions: Vec<Revision>,
    /// Fields this version does not know (a later one wrote them), kept as read.
    #[serde(flatten)]
    pub extra: serde_json::Map<String, Value>,
}

impl RevisionHistory {
    pub fn new(owner: &Owner) -> Self {
        RevisionHistory {
            extension: owner.name.clone(),
            uid: owner.uid.clone(),
            revisions: Vec::new(),
            extra: serde_json::Map::new(),
        }
    }

    /// The installed revision, if any.
    pub fn installed(&self) -> Option<&Revision> {
        self.revisions
            .iter()
            .rev()
            .find(|r| r.state == RevisionState::Installed)
    }

    /// Whether `bundle` with `objects` is exactly what is installed and nothing newer was
    /// attempted since: applying it again only restores drift (its CRDs and permissions
    /// were checked when it was installed).
    pub fn is_current(&self, bundle: &BundleIdentity, objects: &[Value]) -> bool {
        self.revisions.last().is_some_and(|last| {
            last.state == RevisionState::Installed
                && &last.bundle == bundle
                && last.content_hash == content_hash(objects)
        })
    }

    /// Starts a revision for `bundle` with `objects` (rendered, before ownership metadata):
    /// returns its number. The latest revision is reused when it has the same content and
    /// bundle (a re-apply records nothing new). Earlier pending revisions are kept so their
    /// objects are pruned too.
    pub fn begin(&mut self, bundle: BundleIdentity, objects: &[Value]) -> u64 {
        let hash = content_hash(objects);
        if let Some(last) = self.revisions.last()
            && last.content_hash == hash
            && last.bundle == bundle
            && last.state != RevisionState::Superseded
        {
            return last.number;
        }
        let number = self.revisions.iter().map(|r| r.number).max().unwrap_or(0) + 1;
        let mut refs: Vec<ObjectRef> = objects.iter().filter_map(ObjectRef::from_object).collect();
        refs.sort();
        refs.dedup();
        let mut revision = Revision {
            number,
            state: RevisionState::Pending,
            bundle,
            content_hash: hash,
            objects: refs,
            installer: None,
            integrity: None,
            extra: serde_json::Map::new(),
        };
        revision.integrity = Some(seal(&self.extension, &self.uid, &revision));
        self.revisions.push(revision);
        number
    }

    /// Records who applies revision `number` (the latest applier wins: a re-apply by
    /// another account after `spec.serviceAccount` changed is that account's).
    pub fn set_installer(&mut self, number: u64, installer: Option<crate::api::InstallerStatus>) {
        if let Some(r) = self.revisions.iter_mut().find(|r| r.number == number)
            && installer.is_some()
        {
            r.installer = installer;
        }
    }

    pub fn get(&self, number: u64) -> Option<&Revision> {
        self.revisions.iter().find(|r| r.number == number)
    }

    /// Objects of every other pending or installed revision that revision `number` does
    /// not contain: what to delete once `number` is applied.
    pub fn prune_candidates(&self, number: u64) -> Vec<ObjectRef> {
        let Some(current) = self.get(number) else {
            return Vec::new();
        };
        let keep: std::collections::HashSet<_> =
            current.objects.iter().map(|o| o.identity()).collect();
        let mut out: Vec<ObjectRef> = self
            .revisions
            .iter()
            .filter(|r| r.number != number && r.state != RevisionState::Superseded)
            .flat_map(|r| r.objects.iter())
            .filter(|o| !keep.contains(&o.identity()))
            .cloned()
            .collect();
        out.sort();
        out.dedup_by(|a, b| a.identity() == b.identity());
        out
    }

    /// Objects of every pending or installed revision that `objects` (a new rendering) no
    /// longer contain: what installing `objects` will prune.
    pub fn dropped_by(&self, objects: &[Value]) -> Vec<ObjectRef> {
        let keep: std::collections::HashSet<ObjectRef> = objects
            .iter()
            .filter_map(ObjectRef::from_object)
            .map(|mut r| {
                r.version.clear();
                r
            })
            .collect();
        let mut out: Vec<ObjectRef> = self
            .all_objects()
            .into_iter()
            .filter(|o| {
                let mut k = o.clone();
                k.version.clear();
                !keep.contains(&k)
            })
            .collect();
        out.sort();
        out
    }

    /// Marks `number` installed (after apply and prune), supersedes the others and keeps
    /// the newest [`KEEP_REVISIONS`].
    pub fn complete(&mut self, number: u64) {
        for r in &mut self.revisions {
            r.state = if r.number == number {
                RevisionState::Installed
            } else {
                RevisionState::Superseded
            };
        }
        let excess = self.revisions.len().saturating_sub(KEEP_REVISIONS);
        self.revisions.drain(..excess);
    }

    /// Every object of every non-superseded revision (what an uninstall removes).
    pub fn all_objects(&self) -> Vec<ObjectRef> {
        let mut out: Vec<ObjectRef> = self
            .revisions
            .iter()
            .filter(|r| r.state != RevisionState::Superseded)
            .flat_map(|r| r.objects.iter().cloned())
            .collect();
        out.sort();
        out.dedup_by(|a, b| a.identity() == b.identity());
        out
    }
}

/// `sha256:<hex>` over the rendered objects' JSON, one per line, in order.
pub fn content_hash(objects: &[Value]) -> String {
    let mut h = Sha256::new();
    for o in objects {
        h.update(o.to_string().as_bytes());
        h.update(b"\n");
    }
    format!("sha256:{}", data_encoding::HEXLOWER.encode(&h.finalize()))
}

/// Errors of the revision record.
#[derive(Debug, thiserror::Error)]
pub enum RecordError {
    #[error(
        "revision record of {extension}: {size} bytes compressed exceeds the {MAX_ENCODED_BYTES}-byte limit"
    )]
    TooLarge { extension: String, size: usize },
    #[error("revision record {namespace}/{name} is unreadable: {reason}")]
    Corrupt {
        namespace: String,
        name: String,
        reason: String,
    },
    #[error("revision record {namespace}/{name}: {source}")]
    Kube {
        namespace: String,
        name: String,
        #[source]
        source: kube::Error,
    },
}

/// Gzip'd JSON of the history.
pub fn encode(history: &RevisionHistory) -> Result<Vec<u8>, RecordError> {
    let json = serde_json::to_vec(history).map_err(|e| RecordError::Corrupt {
        namespace: String::new(),
        name: record_name(&history.extension),
        reason: e.to_string(),
    })?;
    let mut enc = GzEncoder::new(Vec::new(), Compression::best());
    let gz = enc
        .write_all(&json)
        .and_then(|()| enc.finish())
        .map_err(|e| RecordError::Corrupt {
            namespace: String::new(),
            name: record_name(&history.extension),
            reason: e.to_string(),
        })?;
    if gz.len() > MAX_ENCODED_BYTES {
        return Err(RecordError::TooLarge {
            extension: history.extension.clone(),
            size: gz.len(),
        });
    }
    Ok(gz)
}

/// Inverse of [`encode`]; `Err(reason)` for data that is not a record.
pub fn decode(gz: &[u8]) -> Result<RevisionHistory, String> {
    let json = gunzip(gz, MAX_DECODED_BYTES)?;
    serde_json::from_slice(&json).map_err(|e| format!("JSON: {e}"))
}

/// `olmv1-revision-<extension>`, shortened with a hash when longer than 253 characters.
pub fn record_name(extension: &str) -> String {
    let name = format!("{NAME_PREFIX}{extension}");
    if name.len() <= 253 {
        return name;
    }
    let h = Sha256::digest(extension.as_bytes());
    let suffix = &data_encoding::HEXLOWER.encode(&h)[..16];
    let keep = 253 - NAME_PREFIX.len() - suffix.len() - 1;
    let mut cut = extension[..keep.min(extension.len())].to_owned();
    while !extension.is_char_boundary(cut.len()) {
        cut.pop();
    }
    format!("{NAME_PREFIX}{}-{suffix}", cut.trim_end_matches(['-', '.']))
}

/// The ConfigMap holding `history` (owned by the ClusterExtension, so garbage collection
/// removes it with the extension).
pub fn record_configmap(history: &RevisionHistory, namespace: &str) -> Result<Value, RecordError> {
    let gz = encode(history)?;
    Ok(json!({
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {
            "name": record_name(&history.extension),
            "namespace": namespace,
            "labels": {
                OWNER_KIND_LABEL: OWNER_KIND,
                OWNER_NAME_LABEL: history.extension,
                "app.kubernetes.io/managed-by": "olmv1",
                "olm.operatorframework.io/revision-record": "true",
            },
            "ownerReferences": [{
                "apiVersion": super::ownership::OWNER_API_VERSION,
                "kind": OWNER_KIND,
                "name": history.extension,
                "uid": history.uid,
                "controller": true,
            }],
        },
        "binaryData": { DATA_KEY: data_encoding::BASE64.encode(&gz) },
    }))
}

/// Reads and writes revision records with the controller's own identity.
#[derive(Clone)]
pub struct RevisionStore {
    api: Api<k8s_openapi::api::core::v1::ConfigMap>,
    namespace: String,
}

impl RevisionStore {
    /// Records in `namespace` (the controller's namespace).
    pub fn new(client: kube::Client, namespace: &str) -> Self {
        RevisionStore {
            api: Api::namespaced(client, namespace),
            namespace: namespace.to_owned(),
        }
    }

    fn kube_err(&self, extension: &str, source: kube::Error) -> RecordError {
        RecordError::Kube {
            namespace: self.namespace.clone(),
            name: record_name(extension),
            source,
        }
    }

    /// The history of `extension`, `None` if nothing was recorded. A record left by an
    /// earlier ClusterExtension of the same name (other uid) is not returned.
    pub async fn load(&self, owner: &Owner) -> Result<Option<RevisionHistory>, RecordError> {
        let name = record_name(&owner.name);
        let Some(cm) = self
            .api
            .get_opt(&name)
            .await
            .map_err(|e| self.kube_err(&owner.name, e))?
        else {
            return Ok(None);
        };
        let corrupt = |reason: String| RecordError::Corrupt {
            namespace: self.namespace.clone(),
            name: name.clone(),
            reason,
        };
        let data = cm
            .binary_data
            .as_ref()
            .and_then(|d| d.get(DATA_KEY))
            .ok_or_else(|| corrupt(format!("no binaryData key {DATA_KEY}")))?;
        let history = decode(&data.0).map_err(corrupt)?;
        if history.extension != owner.name {
            return Err(corrupt(format!(
                "records extension {:?}",
                history.extension
            )));
        }
        if !owner.uid.is_empty() && history.uid != owner.uid {
            return Ok(None);
        }
        Ok(Some(history))
    }

    /// Writes `history` (server-side apply; unchanged content is not a change).
    pub async fn save(&self, history: &RevisionHistory) -> Result<(), RecordError> {
        let cm = record_configmap(history, &self.namespace)?;
        self.api
            .patch(
                &record_name(&history.extension),
                &PatchParams::apply(FIELD_MANAGER).force(),
                &Patch::Apply(&cm),
            )
            .await
            .map_err(|e| self.kube_err(&history.extension, e))?;
        Ok(())
    }

    /// Removes the record of `extension` (absent is fine).
    pub async fn delete(&self, extension: &str) -> Result<(), RecordError> {
        match self
            .api
            .delete(&record_name(extension), &DeleteParams::default())
            .await
        {
            Ok(_) => Ok(()),
            Err(kube::Error::Api(s)) if s.code == 404 => Ok(()),
            Err(e) => Err(self.kube_err(extension, e)),
        }
    }
}

#[cfg(test)]
mod tests;
