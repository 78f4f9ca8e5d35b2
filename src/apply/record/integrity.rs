//! The integrity of a recorded revision (docs/how-to/upgrade-control.md, "Rollback"):
//! the seal written with each revision ([`seal`]), the checks a rollback makes before
//! it pulls and before it applies ([`RevisionHistory::check_integrity`],
//! [`RevisionHistory::check_pulled`] against the [`PulledBundle`] the image holds), and
//! the [`RevisionMismatch`] that refuses a revision edited after it was recorded.

use super::{Revision, RevisionHistory, record_name};
use crate::api::BundleIdentity;
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

impl RevisionHistory {
    /// Whether revision `number` still carries the seal it was recorded with: `Ok` when
    /// it does or has none (written before olmv1 sealed revisions, or not recorded —
    /// [`RevisionHistory::check_pulled`] covers those), else how it was edited.
    pub fn check_integrity(&self, number: u64) -> Result<(), RevisionMismatch> {
        let Some(revision) = self.get(number) else {
            return Ok(());
        };
        let Some(recorded) = &revision.integrity else {
            return Ok(());
        };
        let actual = seal(&self.extension, &self.uid, revision);
        if &actual == recorded {
            return Ok(());
        }
        Err(RevisionMismatch {
            record: record_name(&self.extension),
            number,
            named: Box::new(revision.bundle.clone()),
            disagrees: Box::new(Disagreement::Integrity {
                recorded: recorded.clone(),
                actual,
            }),
        })
    }

    /// Whether the image pulled for revision `number` (`image`, the digest-pinned
    /// reference it was pulled as) holds the bundle the revision names: `pulled` (read
    /// from the image's own metadata) has its package, bundle name and version, and the
    /// image has its digest. `Ok` when `pulled` is `None` (the image's metadata was not
    /// read: executors in tests) or revision `number` is not recorded.
    pub fn check_pulled(
        &self,
        number: u64,
        pulled: Option<&PulledBundle>,
        image: &str,
    ) -> Result<(), RevisionMismatch> {
        let (Some(revision), Some(pulled)) = (self.get(number), pulled) else {
            return Ok(());
        };
        let named = &revision.bundle;
        let mismatch = |disagrees| RevisionMismatch {
            record: record_name(&self.extension),
            number,
            named: Box::new(named.clone()),
            disagrees: Box::new(disagrees),
        };
        if let (Some(recorded), Some(got)) = (digest(&named.image), digest(image))
            && recorded != got
        {
            return Err(mismatch(Disagreement::Digest {
                pulled: image.to_string(),
            }));
        }
        let mut fields = Vec::new();
        if pulled.package != named.package {
            fields.push("package");
        }
        if pulled.name != named.name {
            fields.push("bundle name");
        }
        if !same_version(&pulled.version, &named.version) {
            fields.push("version");
        }
        if fields.is_empty() {
            return Ok(());
        }
        Err(mismatch(Disagreement::Bundle {
            fields,
            image: digest(image).unwrap_or(image).to_string(),
            holds: pulled.clone(),
        }))
    }
}

/// The seal of `revision` in the record of `extension` (uid `uid`): `sha256:<hex>` over
/// the JSON array of a format tag, the extension, its uid, the revision number, the
/// bundle's package, name, version, release and image, the content hash and the object
/// references (an array: the same bytes whatever the map order). Its state and installer
/// change after it is recorded and are not sealed.
pub fn seal(extension: &str, uid: &str, revision: &Revision) -> String {
    let b = &revision.bundle;
    let sealed = json!([
        "olmv1.revision.v1",
        extension,
        uid,
        revision.number,
        b.package,
        b.name,
        b.version,
        b.release,
        b.image,
        revision.content_hash,
        revision.objects,
    ]);
    let h = Sha256::digest(sealed.to_string().as_bytes());
    format!("sha256:{}", data_encoding::HEXLOWER.encode(&h))
}

/// What a pulled bundle image holds, from its own metadata: the package of
/// `metadata/annotations.yaml`, the CSV's `metadata.name` and `spec.version`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PulledBundle {
    pub package: String,
    pub name: String,
    pub version: String,
}

impl PulledBundle {
    /// What `bundle` holds.
    pub fn of(bundle: &crate::bundle::Bundle) -> PulledBundle {
        PulledBundle {
            package: bundle.package_name.clone(),
            name: bundle.name().to_string(),
            version: bundle
                .csv
                .pointer("/spec/version")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_string(),
        }
    }
}

/// A recorded revision that is not what it names (edited after it was recorded):
/// a rollback to it is refused before anything is applied.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RevisionMismatch {
    /// The record's ConfigMap name.
    pub record: String,
    pub number: u64,
    /// The bundle the revision names.
    pub named: Box<BundleIdentity>,
    pub disagrees: Box<Disagreement>,
}

/// Which part of a revision disagrees.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Disagreement {
    /// Its seal: the revision's fields no longer hash to the seal it was recorded with.
    Integrity { recorded: String, actual: String },
    /// The image pulled for it has another digest than the recorded image.
    Digest { pulled: String },
    /// The pulled image holds another bundle: `fields` are the ones that differ
    /// (`package`, `bundle name`, `version`); `image` is its digest.
    Bundle {
        fields: Vec<&'static str>,
        image: String,
        holds: PulledBundle,
    },
}

impl std::fmt::Display for RevisionMismatch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let (n, record, named) = (self.number, &self.record, &self.named);
        write!(
            f,
            "revision {n} of record {record} names bundle {} version {}",
            named.name, named.version
        )?;
        match self.disagrees.as_ref() {
            Disagreement::Integrity { recorded, actual } => write!(
                f,
                " but fails its integrity check: its bundle, version, image ({}) and objects hash to {actual}, not to the integrity {recorded} it was recorded with",
                named.image
            )?,
            Disagreement::Digest { pulled } => write!(
                f,
                " with image {} but the image pulled for it is {pulled} (the image digest disagrees)",
                named.image
            )?,
            Disagreement::Bundle {
                fields,
                image,
                holds,
            } => {
                if fields.contains(&"package") {
                    write!(f, " of package {}", named.package)?;
                }
                write!(
                    f,
                    " but its image {image} holds {} version {}",
                    holds.name, holds.version
                )?;
                if fields.contains(&"package") {
                    write!(f, " of package {}", holds.package)?;
                }
                let verb = if fields.len() == 1 {
                    "disagrees"
                } else {
                    "disagree"
                };
                write!(f, " (the {} {verb})", fields.join(" and "))?;
            }
        }
        f.write_str(": the record was edited; roll back to another revision or re-install")
    }
}

impl std::error::Error for RevisionMismatch {}

/// The `sha256:<hex>` digest of an image reference pinned by digest.
fn digest(image: &str) -> Option<&str> {
    image
        .rsplit_once('@')
        .map(|(_, d)| d)
        .filter(|d| !d.is_empty())
}

/// Whether the CSV's version `pulled` is the recorded `named` (the status form; a
/// leading `v` tolerated): equal as semver, build metadata included, else as text.
pub(super) fn same_version(pulled: &str, named: &str) -> bool {
    let trim = |v: &str| {
        let v = v.trim();
        v.strip_prefix('v').unwrap_or(v).to_string()
    };
    let (a, b) = (trim(pulled), trim(named));
    match (semver::Version::parse(&a), semver::Version::parse(&b)) {
        (Ok(a), Ok(b)) => a == b,
        _ => a == b,
    }
}
