//! `signedBy` with `keyType: GPGKeys` (containers-policy.json(5)): the policy's
//! OpenPGP keyring ([`GpgKeys`], binary or ASCII-armored, from `keyPath`, `keyPaths`
//! or `keyData`) and the "simple signing" signatures of containers-signature(5)
//! ([`open`]): an OpenPGP message — maybe compressed, as gpg writes it — with a
//! one-pass signature, the literal data (the JSON payload, `critical.type`
//! "atomic container signature") and the signature, made by the primary key or a
//! bound subkey of one of the keys. The payload checks are those of `sigstoreSigned`
//! ([`super::verify::check_payload`]). Verification is rpgp's (pure Rust). Key
//! expiration and revocation are not checked (docs/concepts/signature-policy.md).

use std::io::Read as _;

use pgp::composed::{Deserializable as _, Message, SignedPublicKey};
use serde_json::{Map, Value};

use super::{MAX_PAYLOAD_BYTES, Requirement, SignedIdentity};

/// The `critical.type` of a simple-signing payload (containers-signature(5)).
pub const PAYLOAD_TYPE: &str = "atomic container signature";

/// The OpenPGP public keys of a `signedBy` requirement; `sources` name where they came
/// from (messages).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GpgKeys {
    pub sources: Vec<String>,
    keys: Vec<SignedPublicKey>,
}

impl GpgKeys {
    /// Every key of the keyring `bytes` (binary or ASCII-armored; `source` names it).
    pub fn parse(source: &str, bytes: &[u8]) -> Result<GpgKeys, String> {
        let (iter, _) = SignedPublicKey::from_reader_many(bytes)
            .map_err(|e| format!("{source}: not an OpenPGP keyring: {e}"))?;
        let keys = iter
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| format!("{source}: not an OpenPGP keyring: {e}"))?;
        if keys.is_empty() {
            return Err(format!("{source}: no OpenPGP public key in it"));
        }
        Ok(GpgKeys {
            sources: vec![source.to_string()],
            keys,
        })
    }

    /// Whether the (fully read) signed `msg` is signed by one of the keys: a primary
    /// key, or a subkey whose binding signature verifies.
    fn verify(&self, msg: &Message<'_>) -> bool {
        self.keys.iter().any(|k| {
            msg.verify(&k.primary_key).is_ok()
                || k.public_subkeys.iter().any(|s| {
                    s.verify_bindings(&k.primary_key).is_ok() && msg.verify(&s.key).is_ok()
                })
        })
    }
}

/// The payload of the signature `blob` when one of `keys` signed it; else why not.
pub fn open(keys: &GpgKeys, blob: &[u8]) -> Result<Vec<u8>, String> {
    let msg =
        Message::from_bytes(blob).map_err(|e| format!("the signature is not OpenPGP data: {e}"))?;
    let mut msg = if msg.is_compressed() {
        msg.decompress()
            .map_err(|e| format!("the signature does not decompress: {e}"))?
    } else {
        msg
    };
    if !msg.is_signed() {
        return Err("the signature is not a signed OpenPGP message".to_string());
    }
    let mut payload = Vec::new();
    (&mut msg)
        .take(MAX_PAYLOAD_BYTES + 1)
        .read_to_end(&mut payload)
        .map_err(|e| format!("the signature's OpenPGP message is malformed: {e}"))?;
    if payload.len() as u64 > MAX_PAYLOAD_BYTES {
        return Err(format!(
            "the signed payload exceeds the limit of {MAX_PAYLOAD_BYTES} bytes"
        ));
    }
    if !keys.verify(&msg) {
        return Err("no signature verifies with the policy's keys".to_string());
    }
    Ok(payload)
}

/// The keys of a `signedBy` entry that may be used for `signedBy`.
const KEYS: [&str; 3] = ["keyPath", "keyPaths", "keyData"];

/// Parses a `signedBy` requirement (key files are read now).
pub(super) fn signed_by(m: &Map<String, Value>) -> Result<Requirement, String> {
    for k in m.keys() {
        let known = ["type", "keyType", "signedIdentity"].contains(&k.as_str())
            || KEYS.contains(&k.as_str());
        if !known {
            return Err(format!("signedBy: unknown key {k:?}"));
        }
    }
    match m.get("keyType").and_then(Value::as_str) {
        Some("GPGKeys") => {}
        Some(other) => {
            return Err(format!(
                "signedBy: keyType {other:?} is not supported; only \"GPGKeys\" is"
            ));
        }
        None => return Err("signedBy: keyType is missing (\"GPGKeys\")".to_string()),
    }
    let given: Vec<&str> = KEYS.into_iter().filter(|k| m.contains_key(*k)).collect();
    let [which] = given[..] else {
        return Err(format!(
            "signedBy: exactly one of keyPath, keyPaths, keyData must be set (found {})",
            if given.is_empty() {
                "none".to_string()
            } else {
                given.join(", ")
            }
        ));
    };
    let keys = load(which, &m[which]).map_err(|e| format!("signedBy: {e}"))?;
    let identity = match m.get("signedIdentity") {
        None => SignedIdentity::MatchRepoDigestOrExact,
        Some(v) => SignedIdentity::parse(v).map_err(|e| format!("signedIdentity: {e}"))?,
    };
    Ok(Requirement::SignedBy { keys, identity })
}

/// The keyrings of `which` (`keyPath`, `keyPaths`: files; `keyData`: base64).
fn load(which: &str, v: &Value) -> Result<GpgKeys, String> {
    let mut out = GpgKeys {
        sources: Vec::new(),
        keys: Vec::new(),
    };
    let items: Vec<&Value> = match (which, v) {
        ("keyPaths", Value::Array(a)) if !a.is_empty() => a.iter().collect(),
        ("keyPaths", _) => return Err("keyPaths is not a non-empty list".to_string()),
        _ => vec![v],
    };
    for (i, item) in items.into_iter().enumerate() {
        let Some(s) = item.as_str().filter(|s| !s.is_empty()) else {
            return Err(format!("{which}[{i}] is not a string"));
        };
        let ring = if which == "keyData" {
            let bytes = data_encoding::BASE64
                .decode(s.trim().as_bytes())
                .map_err(|e| format!("keyData is not base64: {e}"))?;
            GpgKeys::parse("keyData", &bytes)?
        } else {
            let bytes = std::fs::read(s).map_err(|e| format!("{which} {s}: {e}"))?;
            GpgKeys::parse(s, &bytes)?
        };
        out.sources.extend(ring.sources);
        out.keys.extend(ring.keys);
    }
    Ok(out)
}
