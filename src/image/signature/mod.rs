//! Signature policy: the containers-policy.json(5) file (`/etc/containers/policy.json`,
//! as `containers/image` reads it for upstream operator-controller and catalogd) and
//! its verdict on each pulled image. What is honoured: `default` and
//! `transports.docker` scopes (an image reference, `host[:port]`,
//! `host[:port]/namespace…`, `*.domain`; the most specific matching scope wins, see
//! [`identity`]); requirements `insecureAcceptAnything`, `reject`,
//! `sigstoreSigned` with public keys (`keyPath`, `keyPaths`, `keyData`, `keyDatas`;
//! signatures read as sigstore attachments, the tag `sha256-<hex>.sig` of the image's
//! repository, see [`verify`]) and `signedBy` with `keyType: GPGKeys` (OpenPGP
//! simple signing, see [`gpg`]; signatures read from the registries.d lookaside
//! storage, see [`lookaside`]), each with every `signedIdentity`. An image passes
//! when every requirement of its scope passes. Other transports are ignored. Refused
//! at load, with the entry named: other `signedBy` key types and the keyless parts
//! of `sigstoreSigned` (`fulcio`, `pki`, `rekorPublicKey*`). A missing file accepts
//! everything, as upstream does; a file that does not parse is an error. The pull
//! edge is in [`check`].

mod check;
pub mod gpg;
pub mod identity;
pub mod lookaside;
pub mod verify;

use std::collections::BTreeMap;
use std::path::Path;

use serde_json::{Map, Value};

pub use check::{SIGNATURE_ANNOTATION, SIGNATURE_MEDIA_TYPE, VerifiedCache, signature_tag};
pub use gpg::GpgKeys;
pub use identity::{DockerRef, Scope, SignedIdentity};
pub use lookaside::RegistriesD;
pub use verify::{
    Found, Lookaside, Needed, PublicKey, Refusal, Signature, evaluate, evaluate_found, needed,
    needs_signatures,
};

/// Largest signature payload read (the simple-signing JSON is a few hundred bytes).
pub const MAX_PAYLOAD_BYTES: u64 = 64 << 10;
/// Most signatures (layers of the `.sig` manifest) looked at for one image.
pub const MAX_SIGNATURES: usize = 16;
/// Largest policy file read.
const MAX_POLICY_BYTES: u64 = 1 << 20;

/// Why a policy file or a registries.d directory cannot be used (a startup error).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{what} {path}: {detail}")]
pub struct PolicyError {
    /// `signature policy` (policy.json) or `registries.d` (the lookaside directory).
    pub what: &'static str,
    pub path: String,
    pub detail: String,
}

/// One requirement of a scope.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Requirement {
    InsecureAcceptAnything,
    Reject,
    SigstoreSigned {
        keys: Vec<PublicKey>,
        identity: SignedIdentity,
    },
    /// `signedBy` with `keyType: GPGKeys`: simple-signing signatures in registries.d
    /// lookaside storage.
    SignedBy {
        keys: GpgKeys,
        identity: SignedIdentity,
    },
}

impl Requirement {
    /// The policy's name of the requirement type.
    pub fn kind(&self) -> &'static str {
        match self {
            Requirement::InsecureAcceptAnything => "insecureAcceptAnything",
            Requirement::Reject => "reject",
            Requirement::SigstoreSigned { .. } => "sigstoreSigned",
            Requirement::SignedBy { .. } => "signedBy",
        }
    }
}

/// A parsed policy.json.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SignaturePolicy {
    /// The file, for messages.
    pub path: String,
    /// False when there is no file: everything is accepted.
    pub found: bool,
    pub default: Vec<Requirement>,
    /// `transports.docker`: scope → requirements.
    pub docker: BTreeMap<String, Vec<Requirement>>,
}

impl Default for SignaturePolicy {
    fn default() -> Self {
        SignaturePolicy {
            path: String::new(),
            found: false,
            default: vec![Requirement::InsecureAcceptAnything],
            docker: BTreeMap::new(),
        }
    }
}

impl SignaturePolicy {
    /// Reads `path` (missing file: accept everything, as containers/image does when
    /// no policy is configured for upstream's controllers).
    pub fn load(path: &Path) -> Result<Self, PolicyError> {
        let name = path.display().to_string();
        let error = |detail: String| PolicyError {
            what: "signature policy",
            path: name.clone(),
            detail,
        };
        let meta = match std::fs::metadata(path) {
            Ok(m) => m,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Ok(SignaturePolicy {
                    path: name,
                    ..SignaturePolicy::default()
                });
            }
            Err(e) => return Err(error(e.to_string())),
        };
        if !meta.is_file() {
            return Err(error("not a regular file".to_string()));
        }
        if meta.len() > MAX_POLICY_BYTES {
            return Err(error(format!(
                "larger than the limit of {MAX_POLICY_BYTES} bytes"
            )));
        }
        let text = std::fs::read_to_string(path).map_err(|e| error(e.to_string()))?;
        Self::parse(&name, &text)
    }

    /// Parses the policy text (`path` names it in messages); key files named by
    /// `keyPath`/`keyPaths` are read now.
    pub fn parse(path: &str, text: &str) -> Result<Self, PolicyError> {
        let error = |detail: String| PolicyError {
            what: "signature policy",
            path: path.to_string(),
            detail,
        };
        let value: Value =
            serde_json::from_str(text).map_err(|e| error(format!("invalid JSON: {e}")))?;
        let Value::Object(top) = value else {
            return Err(error("the policy is not a JSON object".to_string()));
        };
        if let Some(k) = top.keys().find(|k| *k != "default" && *k != "transports") {
            return Err(error(format!("unknown key {k:?}")));
        }
        let default = match top.get("default") {
            Some(v) => requirements(v, "default").map_err(error)?,
            None => return Err(error("the \"default\" policy is missing".to_string())),
        };
        let mut docker = BTreeMap::new();
        match top.get("transports") {
            None | Some(Value::Null) => {}
            Some(Value::Object(transports)) => {
                for (transport, scopes) in transports {
                    let Value::Object(scopes) = scopes else {
                        return Err(error(format!("transports.{transport} is not an object")));
                    };
                    // Only the docker transport pulls from registries; others are ignored.
                    if transport == "docker" {
                        docker = docker_scopes(scopes).map_err(error)?;
                    }
                }
            }
            Some(_) => return Err(error("\"transports\" is not an object".to_string())),
        }
        Ok(SignaturePolicy {
            path: path.to_string(),
            found: true,
            default,
            docker,
        })
    }

    /// The scope that applies to `image` and its requirements: the exact reference,
    /// then the repository and its parent namespaces, the host, `*.domain` wildcards
    /// (see [`identity::policy_namespaces`]), the docker transport's `""`, `default`.
    pub fn requirements_for(&self, image: &DockerRef) -> (Scope, &[Requirement]) {
        let candidates =
            std::iter::once(image.to_string()).chain(identity::policy_namespaces(image));
        for scope in candidates.chain(std::iter::once(String::new())) {
            if let Some(reqs) = self.docker.get(&scope) {
                return (Scope::Docker(scope), reqs);
            }
        }
        (Scope::Default, &self.default)
    }
}

fn docker_scopes(
    scopes: &Map<String, Value>,
) -> Result<BTreeMap<String, Vec<Requirement>>, String> {
    let mut out = BTreeMap::new();
    for (scope, reqs) in scopes {
        let entry = format!("transports.docker {scope:?}");
        identity::validate_scope(scope).map_err(|e| format!("{entry}: {e}"))?;
        out.insert(scope.clone(), requirements(reqs, &entry)?);
    }
    Ok(out)
}

/// A non-empty requirements list (`entry` names it in messages).
fn requirements(v: &Value, entry: &str) -> Result<Vec<Requirement>, String> {
    let Value::Array(items) = v else {
        return Err(format!("{entry}: not a list of requirements"));
    };
    if items.is_empty() {
        return Err(format!("{entry}: the requirements list is empty"));
    }
    items
        .iter()
        .enumerate()
        .map(|(i, item)| requirement(item).map_err(|e| format!("{entry}[{i}]: {e}")))
        .collect()
}

fn requirement(v: &Value) -> Result<Requirement, String> {
    let Value::Object(m) = v else {
        return Err("a requirement is not a JSON object".to_string());
    };
    let kind = m.get("type").and_then(Value::as_str).unwrap_or_default();
    let only_type = |r: Requirement| match m.keys().find(|k| *k != "type") {
        Some(k) => Err(format!("unknown key {k:?} in {kind}")),
        None => Ok(r),
    };
    match kind {
        "insecureAcceptAnything" => only_type(Requirement::InsecureAcceptAnything),
        "reject" => only_type(Requirement::Reject),
        "sigstoreSigned" => sigstore_signed(m),
        "signedBy" => gpg::signed_by(m),
        "" => Err("requirement without a \"type\"".to_string()),
        other => Err(format!("unknown requirement type {other:?}")),
    }
}

fn sigstore_signed(m: &Map<String, Value>) -> Result<Requirement, String> {
    const KEYS: [&str; 4] = ["keyPath", "keyPaths", "keyData", "keyDatas"];
    const KEYLESS: [&str; 6] = [
        "fulcio",
        "pki",
        "rekorPublicKeyPath",
        "rekorPublicKeyPaths",
        "rekorPublicKeyData",
        "rekorPublicKeyDatas",
    ];
    for k in m.keys() {
        if KEYLESS.contains(&k.as_str()) {
            return Err(format!(
                "sigstoreSigned: {k:?} (Fulcio certificates, Rekor, PKI) is not supported; only public keys (keyPath, keyPaths, keyData, keyDatas) are"
            ));
        }
        if k != "type" && k != "signedIdentity" && !KEYS.contains(&k.as_str()) {
            return Err(format!("sigstoreSigned: unknown key {k:?}"));
        }
    }
    let given: Vec<&str> = KEYS.into_iter().filter(|k| m.contains_key(*k)).collect();
    if given.len() != 1 {
        return Err(format!(
            "sigstoreSigned: exactly one of keyPath, keyPaths, keyData, keyDatas must be set (found {})",
            if given.is_empty() {
                "none".to_string()
            } else {
                given.join(", ")
            }
        ));
    }
    let keys = verify::load_keys(given[0], &m[given[0]])?;
    let identity = match m.get("signedIdentity") {
        None => SignedIdentity::MatchRepoDigestOrExact,
        Some(v) => SignedIdentity::parse(v).map_err(|e| format!("signedIdentity: {e}"))?,
    };
    Ok(Requirement::SigstoreSigned { keys, identity })
}

#[cfg(test)]
mod gpg_tests;
#[cfg(test)]
mod tests;
