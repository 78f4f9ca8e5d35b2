//! Registry mirrors and blocked registries: the containers-registries.conf v2 TOML
//! format (`man 5 containers-registries.conf`, as `containers/image`'s
//! `sysregistriesv2` reads it) and the pure decision of where one image is pulled
//! from. A `[[registry]]` entry has a `prefix` (default: its `location`; a host, a
//! repository namespace or a repository, or `*.example.com` for every subdomain), a
//! `location` replacing the matched prefix, `insecure` (plain HTTP), `blocked`,
//! `mirror-by-digest-only` and `[[registry.mirror]]` entries (`location`, `insecure`,
//! `pull-from-mirror` = `all` | `digest-only` | `tag-only`). The entry with the longest
//! matching prefix wins; its mirrors are tried in order, then the location itself —
//! with `mirror-by-digest-only` only references by digest go to the mirrors. A blocked
//! registry is refused. Not implemented (parsed and ignored, with a log line from the
//! caller): `unqualified-search-registries` (every reference this project pulls is
//! fully qualified), `short-name-mode`, `[aliases]`, `credential-helpers`; the v1
//! format (`[registries.search]` …) is refused with a message.

use std::collections::BTreeMap;
use std::path::Path;

use oci_client::Reference;
use serde::Deserialize;

/// Why a registries.conf file cannot be used (a startup error).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("registries configuration {path}: {detail}")]
pub struct RegistriesConfError {
    pub path: String,
    pub detail: String,
}

/// One mirror of a registry.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Mirror {
    pub location: String,
    pub insecure: bool,
    pub pull_from: PullFrom,
}

/// Which references a mirror serves (`pull-from-mirror`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum PullFrom {
    #[default]
    All,
    DigestOnly,
    TagOnly,
}

/// One `[[registry]]` entry, validated.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RegistryEntry {
    pub prefix: String,
    /// Empty only for wildcard prefixes (the reference's own host is used).
    pub location: String,
    pub insecure: bool,
    pub blocked: bool,
    pub mirror_by_digest_only: bool,
    pub mirrors: Vec<Mirror>,
}

/// A parsed registries.conf (empty = every image from where its reference says).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RegistriesConf {
    /// The file, for messages.
    pub path: String,
    pub registries: Vec<RegistryEntry>,
    /// Keys present in the file that this project does not act on.
    pub ignored_keys: Vec<String>,
    /// False when the file does not exist (no mirrors, as containers/image treats a
    /// missing registries.conf; e.g. an optional ConfigMap mount without its ConfigMap).
    pub found: bool,
}

/// Where to try pulling from: the reference rewritten to a mirror or the location.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PullSource {
    pub reference: Reference,
    /// False for the registry's own location.
    pub mirror: bool,
    /// Reached over plain HTTP.
    pub insecure: bool,
}

/// A pull refused because the registry is blocked.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Blocked {
    /// The prefix of the blocking entry.
    pub registry: String,
    /// The registries.conf that blocks it.
    pub config: String,
}

#[derive(Deserialize)]
#[serde(rename_all = "kebab-case")]
struct RawFile {
    #[serde(default)]
    registry: Vec<RawRegistry>,
    #[serde(default)]
    registries: Option<toml::Value>,
    #[serde(flatten)]
    other: BTreeMap<String, toml::Value>,
}

#[derive(Deserialize)]
#[serde(rename_all = "kebab-case")]
struct RawRegistry {
    #[serde(default)]
    prefix: String,
    #[serde(default)]
    location: String,
    #[serde(default)]
    insecure: bool,
    #[serde(default)]
    blocked: bool,
    #[serde(default)]
    mirror_by_digest_only: bool,
    #[serde(default)]
    mirror: Vec<RawMirror>,
    #[serde(flatten)]
    other: BTreeMap<String, toml::Value>,
}

#[derive(Deserialize)]
#[serde(rename_all = "kebab-case")]
struct RawMirror {
    #[serde(default)]
    location: String,
    #[serde(default)]
    insecure: bool,
    #[serde(default)]
    pull_from_mirror: String,
    #[serde(flatten)]
    other: BTreeMap<String, toml::Value>,
}

impl RegistriesConf {
    /// Reads and validates the file at `path`; a file that does not exist is an empty
    /// configuration with `found: false` (the caller says so in its log).
    pub fn load(path: &Path) -> Result<Self, RegistriesConfError> {
        let shown = path.display().to_string();
        let text = match std::fs::read_to_string(path) {
            Ok(text) => text,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Ok(RegistriesConf {
                    path: shown,
                    ..RegistriesConf::default()
                });
            }
            Err(e) => {
                return Err(RegistriesConfError {
                    path: shown,
                    detail: format!("cannot read the file: {e}"),
                });
            }
        };
        Self::parse(&shown, &text)
    }

    /// Parses and validates `text` (`path` names it in messages).
    pub fn parse(path: &str, text: &str) -> Result<Self, RegistriesConfError> {
        let err = |detail: String| RegistriesConfError {
            path: path.to_string(),
            detail,
        };
        let raw: RawFile = toml::from_str(text).map_err(|e| err(format!("invalid TOML: {e}")))?;
        if raw.registries.is_some() {
            return Err(err(
                "the v1 format ([registries.search], [registries.insecure], [registries.block]) is not supported: use [[registry]] entries (containers-registries.conf v2)".to_string(),
            ));
        }
        let mut ignored_keys: Vec<String> = raw.other.keys().cloned().collect();
        let mut registries = Vec::new();
        for (i, r) in raw.registry.into_iter().enumerate() {
            let n = i + 1;
            ignored_keys.extend(r.other.keys().map(|k| format!("registry[{n}].{k}")));
            for (j, m) in r.mirror.iter().enumerate() {
                let mn = j + 1;
                ignored_keys.extend(
                    m.other
                        .keys()
                        .map(|k| format!("registry[{n}].mirror[{mn}].{k}")),
                );
            }
            registries.push(validate_entry(r).map_err(|d| err(format!("[[registry]] #{n}: {d}")))?);
        }
        check_conflicts(&registries).map_err(err)?;
        Ok(RegistriesConf {
            path: path.to_string(),
            registries,
            ignored_keys,
            found: true,
        })
    }

    /// Warns about what the file does not do: missing file, keys not acted on.
    pub fn warn_unused(&self) {
        if !self.found {
            tracing::warn!(file = %self.path,
                "registries configuration not found: no mirrors, no blocked registries");
        } else if !self.ignored_keys.is_empty() {
            tracing::warn!(file = %self.path, keys = ?self.ignored_keys,
                "registries configuration keys not used by olmv1");
        }
    }

    /// The entry whose prefix matches `reference` (`host/repo[:tag][@digest]`) longest.
    pub fn find(&self, reference: &str) -> Option<&RegistryEntry> {
        let mut best: Option<&RegistryEntry> = None;
        for r in &self.registries {
            if matching_prefix_len(reference, &r.prefix).is_some()
                && best.is_none_or(|b| r.prefix.len() > b.prefix.len())
            {
                best = Some(r);
            }
        }
        best
    }

    /// Where to pull `r` from, in order: mirrors, then the location. An image that no
    /// entry matches comes from where its reference says.
    pub fn pull_sources(&self, r: &Reference) -> Result<Vec<PullSource>, Blocked> {
        let whole = r.whole();
        let Some(entry) = self.find(&whole) else {
            return Ok(vec![PullSource {
                reference: r.clone(),
                mirror: false,
                insecure: false,
            }]);
        };
        if entry.blocked {
            return Err(Blocked {
                registry: entry.prefix.clone(),
                config: self.path.clone(),
            });
        }
        let by_digest = r.digest().is_some();
        let mut sources = Vec::new();
        for m in &entry.mirrors {
            let used = if entry.mirror_by_digest_only {
                by_digest
            } else {
                match m.pull_from {
                    PullFrom::All => true,
                    PullFrom::DigestOnly => by_digest,
                    PullFrom::TagOnly => !by_digest,
                }
            };
            if !used {
                continue;
            }
            // A mirror whose rewrite does not parse is skipped (the location remains).
            if let Some(reference) = rewrite(&whole, &entry.prefix, &m.location) {
                sources.push(PullSource {
                    reference,
                    mirror: true,
                    insecure: m.insecure,
                });
            }
        }
        let primary = if entry.location.is_empty() {
            Some(r.clone())
        } else {
            rewrite(&whole, &entry.prefix, &entry.location)
        };
        sources.push(PullSource {
            reference: primary.unwrap_or_else(|| r.clone()),
            mirror: false,
            insecure: entry.insecure,
        });
        Ok(sources)
    }

    /// Whether `host` (`host[:port]`) is marked insecure as a location or a mirror.
    pub fn is_insecure_host(&self, host: &str) -> bool {
        let host_of = |loc: &str| loc.split('/').next().unwrap_or_default().to_string();
        self.registries.iter().any(|r| {
            (r.insecure && !r.location.is_empty() && host_of(&r.location) == host)
                || r.mirrors
                    .iter()
                    .any(|m| m.insecure && host_of(&m.location) == host)
        })
    }
}

/// The reference with the matched `prefix` replaced by `location`.
fn rewrite(whole: &str, prefix: &str, location: &str) -> Option<Reference> {
    let n = matching_prefix_len(whole, prefix)?;
    let text = format!("{location}{}", whole.get(n..)?);
    super::reference::parse(&text).ok()
}

/// `containers/image`'s `refMatchingPrefix`: the length of `reference` that `prefix`
/// matches (the prefix must end at `:`, `/`, `@` or the end), or `None`.
pub fn matching_prefix_len(reference: &str, prefix: &str) -> Option<usize> {
    if let Some(domain) = prefix.strip_prefix('*') {
        // `*.example.com`: any subdomain, in the host part only.
        let index = reference.find(domain)?;
        if reference[..index].contains('/') {
            return None;
        }
        let end = index + domain.len();
        return match reference.as_bytes().get(end) {
            None | Some(b':' | b'/' | b'@') => Some(end),
            Some(_) => None,
        };
    }
    if !reference.starts_with(prefix) {
        return None;
    }
    match reference.as_bytes().get(prefix.len()) {
        None | Some(b':' | b'/' | b'@') => Some(prefix.len()),
        Some(_) => None,
    }
}

/// `parseLocation`: no scheme, no trailing `/`.
fn parse_location(what: &str, value: &str) -> Result<String, String> {
    let v = value.trim_end_matches('/');
    if v.contains("://") {
        return Err(format!(
            "invalid {what} {value:?}: URI schemes are not supported (write host[:port][/path])"
        ));
    }
    if v.chars().any(|c| c.is_whitespace()) {
        return Err(format!("invalid {what} {value:?}: contains whitespace"));
    }
    Ok(v.to_string())
}

fn validate_entry(r: RawRegistry) -> Result<RegistryEntry, String> {
    let location = parse_location("location", &r.location)?;
    let prefix = if r.prefix.is_empty() {
        if location.is_empty() {
            return Err("both location and prefix are unset".to_string());
        }
        location.clone()
    } else {
        parse_location("prefix", &r.prefix)?
    };
    let wildcard = prefix.starts_with("*.");
    if wildcard && prefix.contains(['/', '@', ':']) {
        return Err(format!(
            "wildcarded prefix should be in the format *.example.com; {prefix:?} is not"
        ));
    }
    if !wildcard && prefix.contains('*') {
        return Err(format!(
            "prefix {prefix:?}: a wildcard is only allowed as a leading \"*.\" (e.g. *.example.com)"
        ));
    }
    if location.is_empty() && !wildcard {
        return Err(format!("prefix {prefix:?} has no location"));
    }
    let mut mirrors = Vec::new();
    for (j, m) in r.mirror.into_iter().enumerate() {
        let mn = j + 1;
        let location = parse_location("mirror location", &m.location)?;
        if location.is_empty() {
            return Err(format!("mirror #{mn}: location is unset"));
        }
        if r.mirror_by_digest_only && !m.pull_from_mirror.is_empty() {
            return Err(format!(
                "cannot set mirror-by-digest-only for the registry ({prefix:?}) and pull-from-mirror for its mirror {location:?} at the same time"
            ));
        }
        let pull_from = match m.pull_from_mirror.as_str() {
            "" | "all" => PullFrom::All,
            "digest-only" => PullFrom::DigestOnly,
            "tag-only" => PullFrom::TagOnly,
            other => {
                return Err(format!(
                    "unsupported pull-from-mirror value {other:?} for mirror {location:?} (all, digest-only or tag-only)"
                ));
            }
        };
        mirrors.push(Mirror {
            location,
            insecure: m.insecure,
            pull_from,
        });
    }
    Ok(RegistryEntry {
        prefix,
        location,
        insecure: r.insecure,
        blocked: r.blocked,
        mirror_by_digest_only: r.mirror_by_digest_only,
        mirrors,
    })
}

/// One location (or wildcard prefix) may appear in several entries, but not with
/// different `insecure` or `blocked` settings; a prefix may appear only once.
fn check_conflicts(registries: &[RegistryEntry]) -> Result<(), String> {
    let key = |r: &RegistryEntry| {
        if r.location.is_empty() {
            r.prefix.clone()
        } else {
            r.location.clone()
        }
    };
    for (i, a) in registries.iter().enumerate() {
        for b in &registries[i + 1..] {
            if a.prefix == b.prefix {
                return Err(format!("prefix {:?} is defined more than once", a.prefix));
            }
            if key(a) != key(b) {
                continue;
            }
            if a.insecure != b.insecure {
                return Err(format!(
                    "registry {:?} is defined multiple times with conflicting 'insecure' setting",
                    key(a)
                ));
            }
            if a.blocked != b.blocked {
                return Err(format!(
                    "registry {:?} is defined multiple times with conflicting 'blocked' setting",
                    key(a)
                ));
            }
        }
    }
    Ok(())
}

#[cfg(test)]
#[path = "registries_tests.rs"]
mod tests;
