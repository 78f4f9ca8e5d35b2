//! Image identities in the policy: normalised docker references ([`DockerRef`]), the
//! scopes an image falls under ([`policy_namespaces`], containers/image's
//! `DockerReferenceNamespaces`) and `signedIdentity`, the rule that says which
//! `docker-reference` a signature must name ([`SignedIdentity::matches`],
//! containers/image's `policy_reference_match.go`).

use std::fmt;

use serde_json::Value;

/// A normalised docker reference: `name` is `host[:port]/path` (docker.io and
/// `library/` filled in), with a tag and/or a digest unless it names only a repository.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DockerRef {
    pub name: String,
    pub tag: Option<String>,
    pub digest: Option<String>,
}

impl DockerRef {
    /// Parses `s` without adding a default tag (`reg/x` stays name-only).
    pub fn parse(s: &str) -> Option<DockerRef> {
        let r = crate::image::reference::parse(s).ok()?;
        let tag = r
            .tag()
            .filter(|t| s.ends_with(&format!(":{t}")) || s.contains(&format!(":{t}@")))
            .map(str::to_string);
        Some(DockerRef {
            name: format!("{}/{}", r.registry(), r.repository()),
            tag,
            digest: r.digest().map(str::to_string),
        })
    }

    /// The image as a pull names it: `latest` when neither tag nor digest is given.
    pub fn from_reference(r: &oci_client::Reference) -> DockerRef {
        DockerRef {
            name: format!("{}/{}", r.registry(), r.repository()),
            tag: r.tag().map(str::to_string),
            digest: r.digest().map(str::to_string),
        }
    }

    pub fn is_name_only(&self) -> bool {
        self.tag.is_none() && self.digest.is_none()
    }
}

impl fmt::Display for DockerRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.name)?;
        if let Some(t) = &self.tag {
            write!(f, ":{t}")?;
        }
        if let Some(d) = &self.digest {
            write!(f, "@{d}")?;
        }
        Ok(())
    }
}

/// The policy entry an image fell under (for messages).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Scope {
    Default,
    Docker(String),
}

impl fmt::Display for Scope {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Scope::Default => f.write_str("default"),
            Scope::Docker(s) => write!(f, "transports.docker {s:?}"),
        }
    }
}

/// The scopes below the exact reference, most specific first: the repository, each
/// parent namespace, the host, then `*.domain` for every parent domain of the host
/// (port removed): `reg.example.com:5000/ns/x` → `reg.example.com:5000/ns/x`,
/// `reg.example.com:5000/ns`, `reg.example.com:5000`, `*.example.com`, `*.com`.
pub fn policy_namespaces(image: &DockerRef) -> Vec<String> {
    let mut out = Vec::new();
    let mut name = image.name.as_str();
    loop {
        out.push(name.to_string());
        match name.rfind('/') {
            Some(i) => name = &name[..i],
            None => break,
        }
    }
    let mut host = name.split(':').next().unwrap_or(name);
    while let Some(i) = host.find('.') {
        host = &host[i + 1..];
        out.push(format!("*.{host}"));
    }
    out
}

/// A `transports.docker` scope key: `""`, `*.domain`, or a reference or namespace
/// (containers/image refuses schemes and wildcards elsewhere).
pub fn validate_scope(scope: &str) -> Result<(), String> {
    if scope.is_empty() {
        return Ok(());
    }
    if let Some(domain) = scope.strip_prefix("*.") {
        if domain.is_empty() || domain.contains(['/', '*', ':', '@']) {
            return Err("a wildcard scope is *.<domain> with nothing else".to_string());
        }
        return Ok(());
    }
    if scope.contains("://") || scope.contains('*') {
        return Err("not a registry, namespace, repository or image reference".to_string());
    }
    // A host alone (`localhost:5000`) or a name; the reference grammar checks the rest.
    let host_only = !scope.contains('/');
    if host_only || DockerRef::parse(scope).is_some() {
        Ok(())
    } else {
        Err("not a valid repository or image reference".to_string())
    }
}

/// `signedIdentity`: which `docker-reference` in a signature is acceptable.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SignedIdentity {
    MatchRepoDigestOrExact,
    MatchRepository,
    MatchExact,
    ExactReference(DockerRef),
    ExactRepository(DockerRef),
    RemapIdentity {
        prefix: String,
        signed_prefix: String,
    },
}

impl SignedIdentity {
    pub(super) fn parse(v: &Value) -> Result<SignedIdentity, String> {
        let Value::Object(m) = v else {
            return Err("not a JSON object".to_string());
        };
        let kind = m.get("type").and_then(Value::as_str).unwrap_or_default();
        let allowed: &[&str] = match kind {
            "exactReference" => &["type", "dockerReference"],
            "exactRepository" => &["type", "dockerRepository"],
            "remapIdentity" => &["type", "prefix", "signedPrefix"],
            _ => &["type"],
        };
        if let Some(k) = m.keys().find(|k| !allowed.contains(&k.as_str())) {
            return Err(format!("unknown key {k:?} in {kind:?}"));
        }
        let field = |k: &str| m.get(k).and_then(Value::as_str).unwrap_or_default();
        match kind {
            "matchRepoDigestOrExact" => Ok(SignedIdentity::MatchRepoDigestOrExact),
            "matchRepository" => Ok(SignedIdentity::MatchRepository),
            "matchExact" => Ok(SignedIdentity::MatchExact),
            "exactReference" => match DockerRef::parse(field("dockerReference")) {
                Some(r) if !r.is_name_only() => Ok(SignedIdentity::ExactReference(r)),
                _ => Err(format!(
                    "exactReference: dockerReference {:?} is not a reference with a tag or digest",
                    field("dockerReference")
                )),
            },
            "exactRepository" => match DockerRef::parse(field("dockerRepository")) {
                Some(r) => Ok(SignedIdentity::ExactRepository(r)),
                None => Err(format!(
                    "exactRepository: dockerRepository {:?} is not a repository",
                    field("dockerRepository")
                )),
            },
            "remapIdentity" => {
                let (prefix, signed) = (field("prefix"), field("signedPrefix"));
                for (k, p) in [("prefix", prefix), ("signedPrefix", signed)] {
                    if p.is_empty() || p.contains(['@', '*']) || p.contains("://") {
                        return Err(format!("remapIdentity: invalid {k} {p:?}"));
                    }
                }
                Ok(SignedIdentity::RemapIdentity {
                    prefix: prefix.to_string(),
                    signed_prefix: signed.to_string(),
                })
            }
            "" => Err("without a \"type\"".to_string()),
            other => Err(format!("unknown type {other:?}")),
        }
    }

    /// Whether a signature naming `signed` (its `docker-reference`) is acceptable for
    /// `image`, the reference the user wrote (not a mirror's).
    pub fn matches(&self, image: &DockerRef, signed: &str) -> bool {
        let Some(signed) = DockerRef::parse(signed) else {
            return false;
        };
        match self {
            SignedIdentity::MatchRepoDigestOrExact => repo_digest_or_exact(image, &signed),
            SignedIdentity::MatchRepository => signed.name == image.name,
            SignedIdentity::MatchExact => {
                !image.is_name_only() && !signed.is_name_only() && signed == *image
            }
            SignedIdentity::ExactReference(r) => !signed.is_name_only() && signed == *r,
            SignedIdentity::ExactRepository(r) => signed.name == r.name,
            SignedIdentity::RemapIdentity {
                prefix,
                signed_prefix,
            } => match remap(image, prefix, signed_prefix) {
                Some(remapped) => repo_digest_or_exact(&remapped, &signed),
                None => false,
            },
        }
    }
}

/// matchRepoDigestOrExact: a tagged image needs exactly its reference; an image by
/// digest needs its repository (the digest itself is checked against the payload).
fn repo_digest_or_exact(image: &DockerRef, signed: &DockerRef) -> bool {
    if signed.is_name_only() {
        return false;
    }
    if image.tag.is_some() {
        signed == image
    } else if image.digest.is_some() {
        signed.name == image.name
    } else {
        false
    }
}

/// `image` with `prefix` replaced by `signed_prefix` when its name starts with it at a
/// `/` boundary (containers/image's `refMatchesPrefix`), else `image` itself.
fn remap(image: &DockerRef, prefix: &str, signed_prefix: &str) -> Option<DockerRef> {
    let name = image.name.as_str();
    let matches = name == prefix
        || (name.starts_with(prefix) && name.as_bytes().get(prefix.len()) == Some(&b'/'));
    if !matches {
        return Some(image.clone());
    }
    let whole = image.to_string();
    DockerRef::parse(&whole.replacen(prefix, signed_prefix, 1))
}
