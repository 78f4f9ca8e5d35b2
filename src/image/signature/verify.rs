//! The verdict of a scope's requirements on one image ([`evaluate`]): `reject` fails,
//! `insecureAcceptAnything` passes, `sigstoreSigned` passes when one of the image's
//! sigstore signatures verifies with one of the policy's public keys (ECDSA P-256 as
//! `cosign generate-key-pair` makes, P-384, Ed25519, RSA PKCS#1 v1.5; SHA-256 as
//! sigstore uses) over its payload, and the payload — a simple-signing JSON document,
//! `critical.type` "cosign container image signature" — names the image's manifest
//! digest (`critical.image.docker-manifest-digest`) and an identity that
//! `signedIdentity` accepts (`critical.identity.docker-reference`). Pure: the
//! signatures are fetched by the caller.

use aws_lc_rs::signature::{self as sig, VerificationAlgorithm};
use serde::Deserialize;
use serde_json::Value;

use super::gpg::GpgKeys;
use super::{DockerRef, Requirement, SignedIdentity};

/// The `critical.type` of a sigstore simple-signing payload.
pub const PAYLOAD_TYPE: &str = "cosign container image signature";

/// A public key of the policy: its SubjectPublicKeyInfo DER and the algorithm it is
/// verified with; `source` names where it came from (messages).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PublicKey {
    pub source: String,
    alg: usize,
    spki: Vec<u8>,
}

/// The algorithms tried, in order, for a key (sigstore verifies with SHA-256).
const ALGORITHMS: [&dyn VerificationAlgorithm; 4] = [
    &sig::ECDSA_P256_SHA256_ASN1,
    &sig::ECDSA_P384_SHA256_ASN1,
    &sig::ED25519,
    &sig::RSA_PKCS1_2048_8192_SHA256,
];

impl PublicKey {
    /// The first `PUBLIC KEY` block of the PEM text `pem`.
    pub fn from_pem(source: &str, pem: &[u8]) -> Result<PublicKey, String> {
        let text = String::from_utf8_lossy(pem);
        let begin = "-----BEGIN PUBLIC KEY-----";
        let body = text
            .split_once(begin)
            .and_then(|(_, rest)| rest.split_once("-----END PUBLIC KEY-----"))
            .map(|(body, _)| body)
            .ok_or_else(|| format!("{source}: no PEM \"PUBLIC KEY\" block"))?;
        let b64: String = body.chars().filter(|c| !c.is_whitespace()).collect();
        let spki = data_encoding::BASE64
            .decode(b64.as_bytes())
            .map_err(|e| format!("{source}: the PEM block is not base64: {e}"))?;
        let alg = ALGORITHMS
            .iter()
            .position(|a| sig::ParsedPublicKey::new(*a, &spki).is_ok())
            .ok_or_else(|| {
                format!("{source}: not an ECDSA P-256/P-384, Ed25519 or RSA public key")
            })?;
        Ok(PublicKey {
            source: source.to_string(),
            alg,
            spki,
        })
    }

    /// Whether `signature` (raw bytes) is this key's signature of `payload`.
    pub fn verifies(&self, payload: &[u8], signature: &[u8]) -> bool {
        sig::UnparsedPublicKey::new(ALGORITHMS[self.alg], &self.spki)
            .verify(payload, signature)
            .is_ok()
    }
}

/// The keys of a `sigstoreSigned` requirement (`which` is the key that holds them):
/// files for keyPath/keyPaths, base64 of PEM for keyData/keyDatas.
pub(super) fn load_keys(which: &str, v: &Value) -> Result<Vec<PublicKey>, String> {
    let items: Vec<&Value> = match v {
        Value::Array(a) if which.ends_with('s') => a.iter().collect(),
        v if !which.ends_with('s') => vec![v],
        _ => return Err(format!("sigstoreSigned: {which} is not a list")),
    };
    if items.is_empty() {
        return Err(format!("sigstoreSigned: {which} is empty"));
    }
    let mut keys = Vec::new();
    for (i, item) in items.into_iter().enumerate() {
        let Some(s) = item.as_str().filter(|s| !s.is_empty()) else {
            return Err(format!("sigstoreSigned: {which}[{i}] is not a string"));
        };
        let key = if which.starts_with("keyPath") {
            let pem = std::fs::read(s).map_err(|e| format!("sigstoreSigned: {which} {s}: {e}"))?;
            PublicKey::from_pem(s, &pem)
        } else {
            let pem = data_encoding::BASE64
                .decode(s.trim().as_bytes())
                .map_err(|e| format!("sigstoreSigned: {which}[{i}] is not base64: {e}"))?;
            PublicKey::from_pem(&format!("{which}[{i}]"), &pem)
        };
        keys.push(key.map_err(|e| format!("sigstoreSigned: {e}"))?);
    }
    Ok(keys)
}

/// One sigstore signature: the payload blob and the base64 signature annotation
/// (`None` when the layer has none).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Signature {
    pub payload: Vec<u8>,
    pub signature: Option<String>,
}

/// Why the requirements refuse an image: the requirement (index and type) and why.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Refusal {
    pub index: usize,
    pub requirement: &'static str,
    pub detail: String,
}

/// What evaluating `reqs` needs read: sigstore attachments, lookaside signatures.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Needed {
    pub sigstore: bool,
    pub lookaside: bool,
}

/// The signatures the requirements before the first `reject` (which refuses without
/// them) look at.
pub fn needed(reqs: &[Requirement]) -> Needed {
    let mut n = Needed::default();
    for r in reqs {
        match r {
            Requirement::Reject => break,
            Requirement::SigstoreSigned { .. } => n.sigstore = true,
            Requirement::SignedBy { .. } => n.lookaside = true,
            Requirement::InsecureAcceptAnything => {}
        }
    }
    n
}

/// Whether evaluating `reqs` needs any of the image's signatures.
pub fn needs_signatures(reqs: &[Requirement]) -> bool {
    let n = needed(reqs);
    n.sigstore || n.lookaside
}

/// The `signedBy` signatures of an image: the lookaside location of its manifest
/// (`<lookaside>/<repo>@<algo>=<hex>`) and the `signature-<n>` files found there, or
/// why there is no location (no registries.d entry).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Lookaside {
    Unconfigured(String),
    Found { url: String, blobs: Vec<Vec<u8>> },
}

/// Every signature found for an image: sigstore attachments (`sig_tag` names where)
/// and lookaside signatures.
#[derive(Clone, Copy, Debug)]
pub struct Found<'a> {
    pub sigstore: &'a [Signature],
    pub sig_tag: &'a str,
    pub lookaside: &'a Lookaside,
}

/// Every requirement of `reqs` on `image` (the reference as written) whose manifest
/// digest is `digest`, with the signatures found (`sig_tag` names where, for the
/// message when there are none). The first failing requirement refuses.
pub fn evaluate(
    reqs: &[Requirement],
    image: &DockerRef,
    digest: &str,
    sigs: &[Signature],
    sig_tag: &str,
) -> Result<(), Refusal> {
    let none = Lookaside::Unconfigured("no lookaside was read".to_string());
    let found = Found {
        sigstore: sigs,
        sig_tag,
        lookaside: &none,
    };
    evaluate_found(reqs, image, digest, &found)
}

/// [`evaluate`] with sigstore and lookaside signatures.
pub fn evaluate_found(
    reqs: &[Requirement],
    image: &DockerRef,
    digest: &str,
    found: &Found<'_>,
) -> Result<(), Refusal> {
    let (sigs, sig_tag) = (found.sigstore, found.sig_tag);
    for (index, r) in reqs.iter().enumerate() {
        let refuse = |detail: String| Refusal {
            index,
            requirement: r.kind(),
            detail,
        };
        match r {
            Requirement::InsecureAcceptAnything => {}
            Requirement::Reject => {
                return Err(refuse(
                    "the policy rejects every image in this scope".to_string(),
                ));
            }
            Requirement::SigstoreSigned { keys, identity } => {
                sigstore_signed(keys, identity, image, digest, sigs, sig_tag).map_err(refuse)?;
            }
            Requirement::SignedBy { keys, identity } => {
                signed_by(keys, identity, image, digest, found.lookaside).map_err(refuse)?;
            }
        }
    }
    Ok(())
}

/// One signature accepted, else why none was (containers/image's wording for none,
/// one, several).
fn sigstore_signed(
    keys: &[PublicKey],
    identity: &SignedIdentity,
    image: &DockerRef,
    digest: &str,
    sigs: &[Signature],
    sig_tag: &str,
) -> Result<(), String> {
    let mut reasons = Vec::new();
    for s in sigs {
        match accept(keys, identity, image, digest, s) {
            Ok(()) => return Ok(()),
            Err(e) => reasons.push(e),
        }
    }
    match reasons.len() {
        0 => Err(format!(
            "a signature is required, but none was found (no sigstore attachment {sig_tag})"
        )),
        1 => Err(reasons.remove(0)),
        n => Err(format!(
            "none of the {n} signatures was accepted: {}",
            reasons.join("; ")
        )),
    }
}

#[derive(Deserialize)]
struct Payload {
    critical: Critical,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Critical {
    #[serde(rename = "type")]
    kind: String,
    image: PayloadImage,
    identity: PayloadIdentity,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct PayloadImage {
    #[serde(rename = "docker-manifest-digest")]
    digest: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct PayloadIdentity {
    #[serde(rename = "docker-reference")]
    reference: String,
}

/// One signature against the requirement: the cryptographic signature first, then
/// the (now trusted) payload.
pub fn accept(
    keys: &[PublicKey],
    identity: &SignedIdentity,
    image: &DockerRef,
    digest: &str,
    s: &Signature,
) -> Result<(), String> {
    let Some(b64) = &s.signature else {
        return Err(
            "a signature layer has no dev.cosignproject.cosign/signature annotation".to_string(),
        );
    };
    let raw = data_encoding::BASE64
        .decode(b64.trim().as_bytes())
        .map_err(|e| format!("the signature annotation is not base64: {e}"))?;
    if !keys.iter().any(|k| k.verifies(&s.payload, &raw)) {
        return Err("no signature verifies with the policy's keys".to_string());
    }
    check_payload(&s.payload, PAYLOAD_TYPE, identity, image, digest)
}

/// The (already verified) simple-signing `payload`: its `critical.type` is `kind`,
/// it names the manifest `digest` and an identity `identity` accepts for `image`.
pub(super) fn check_payload(
    payload: &[u8],
    kind: &str,
    identity: &SignedIdentity,
    image: &DockerRef,
    digest: &str,
) -> Result<(), String> {
    let p: Payload = serde_json::from_slice(payload)
        .map_err(|e| format!("the signed payload is not a simple-signing document: {e}"))?;
    let c = p.critical;
    if c.kind != kind {
        return Err(format!(
            "the signed payload's critical.type is {:?}, not {kind:?}",
            c.kind
        ));
    }
    if c.image.digest != digest {
        return Err(format!(
            "the signature is for manifest digest {}, not {digest}",
            c.image.digest
        ));
    }
    if !identity.matches(image, &c.identity.reference) {
        return Err(format!(
            "the signature's identity {:?} does not match {image} (signedIdentity {})",
            c.identity.reference,
            identity.kind()
        ));
    }
    Ok(())
}

/// `signedBy`: one lookaside signature made by one of `keys` whose payload passes,
/// else why none did.
fn signed_by(
    keys: &GpgKeys,
    identity: &SignedIdentity,
    image: &DockerRef,
    digest: &str,
    lookaside: &Lookaside,
) -> Result<(), String> {
    let (url, blobs) = match lookaside {
        Lookaside::Unconfigured(why) => return Err(why.clone()),
        Lookaside::Found { url, blobs } => (url, blobs),
    };
    let mut reasons = Vec::new();
    for blob in blobs {
        let checked = super::gpg::open(keys, blob)
            .and_then(|p| check_payload(&p, super::gpg::PAYLOAD_TYPE, identity, image, digest));
        match checked {
            Ok(()) => return Ok(()),
            Err(e) => reasons.push(e),
        }
    }
    let unverified = "no signature verifies with the policy's keys";
    if reasons.is_empty() {
        return Err(format!(
            "a signature is required, but none was found (no {url}/signature-1)"
        ));
    }
    if reasons.iter().all(|r| r == unverified) {
        return Err(format!(
            "no signature in lookaside {url} verifies with the policy's keys"
        ));
    }
    match reasons.len() {
        1 => Err(reasons.remove(0)),
        n => Err(format!(
            "none of the {n} signatures in lookaside {url} was accepted: {}",
            reasons.join("; ")
        )),
    }
}

impl SignedIdentity {
    /// The policy's name of the rule.
    pub fn kind(&self) -> &'static str {
        match self {
            SignedIdentity::MatchRepoDigestOrExact => "matchRepoDigestOrExact",
            SignedIdentity::MatchRepository => "matchRepository",
            SignedIdentity::MatchExact => "matchExact",
            SignedIdentity::ExactReference(_) => "exactReference",
            SignedIdentity::ExactRepository(_) => "exactRepository",
            SignedIdentity::RemapIdentity { .. } => "remapIdentity",
        }
    }
}
