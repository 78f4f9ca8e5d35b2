//! Where `signedBy` signatures are read: the lookaside storage of
//! containers-registries.d(5). Every `*.yaml` file of the directory
//! (`/etc/containers/registries.d`, or `--registries-d`) is read at start
//! ([`RegistriesD::load`]); `default-docker: {lookaside: URL}` and
//! `docker: {<scope>: {lookaside: URL}}` (scopes as in policy.json, the most specific
//! with a lookaside wins, then `default-docker`; `sigstore` is the older name of
//! `lookaside`; the `*-staging` keys are for writing and ignored). A scope defined in
//! two files is an error naming both. Signature `n` of an image is at
//! `<lookaside>/<repository path>@<algo>=<hex>/signature-<n>` ([`signature_url`],
//! containers/image's docs/signature-protocols.md), `file://` or `http(s)://`.

use std::collections::BTreeMap;
use std::path::Path;

use serde::Deserialize;

use super::{DockerRef, PolicyError, identity};

/// Largest registries.d file read.
const MAX_FILE_BYTES: u64 = 1 << 20;

/// The lookaside configuration: scope → (URL, file that set it).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RegistriesD {
    /// The directory, for messages (empty: none was read).
    pub dir: String,
    default_docker: Option<Entry>,
    docker: BTreeMap<String, Entry>,
}

/// One scope's read location (`None`: the scope sets none, e.g. only
/// `use-sigstore-attachments`) and the file that defines it.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Entry {
    lookaside: Option<String>,
    file: String,
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "kebab-case")]
struct FileDoc {
    #[serde(default)]
    default_docker: Option<Namespace>,
    #[serde(default)]
    docker: BTreeMap<String, Option<Namespace>>,
}

/// containers-registries.d(5)'s per-namespace keys (unknown keys are ignored, as
/// containers/image does).
#[derive(Deserialize, Default)]
#[serde(rename_all = "kebab-case")]
struct Namespace {
    lookaside: Option<String>,
    sigstore: Option<String>,
}

impl Namespace {
    /// The read location: `lookaside`, else the older `sigstore`.
    fn read_url(&self) -> Option<String> {
        self.lookaside
            .clone()
            .or_else(|| self.sigstore.clone())
            .filter(|u| !u.is_empty())
    }
}

impl RegistriesD {
    /// Reads every `*.yaml` of `dir` (in name order); a missing directory configures
    /// nothing.
    pub fn load(dir: &Path) -> Result<Self, PolicyError> {
        let name = dir.display().to_string();
        let error = |detail: String| PolicyError {
            what: "registries.d",
            path: name.clone(),
            detail,
        };
        let mut out = RegistriesD {
            dir: name.clone(),
            ..RegistriesD::default()
        };
        let entries = match std::fs::read_dir(dir) {
            Ok(e) => e,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(out),
            Err(e) => return Err(error(e.to_string())),
        };
        let mut files: Vec<_> = entries
            .filter_map(Result::ok)
            .map(|e| e.path())
            .filter(|p| p.extension().is_some_and(|x| x == "yaml") && p.is_file())
            .collect();
        files.sort();
        for path in files {
            let file = path.display().to_string();
            let meta = std::fs::metadata(&path).map_err(|e| error(format!("{file}: {e}")))?;
            if meta.len() > MAX_FILE_BYTES {
                return Err(error(format!(
                    "{file}: larger than the limit of {MAX_FILE_BYTES} bytes"
                )));
            }
            let text = std::fs::read_to_string(&path).map_err(|e| error(format!("{file}: {e}")))?;
            out.add(&file, &text).map_err(error)?;
        }
        Ok(out)
    }

    /// Adds the file `file` with contents `text`.
    pub fn add(&mut self, file: &str, text: &str) -> Result<(), String> {
        let doc: FileDoc = if text.trim().is_empty() {
            FileDoc::default()
        } else {
            crate::yaml::from_str::<Option<FileDoc>>(text, serde_saphyr::Options::default())
                .map_err(|e| format!("{file}: {e}"))?
                .unwrap_or_default()
        };
        if let Some(ns) = doc.default_docker {
            if let Some(earlier) = &self.default_docker {
                return Err(format!(
                    "\"default-docker\" is defined both in {} and {file}",
                    earlier.file
                ));
            }
            self.default_docker = Some(entry(file, "default-docker", &ns)?);
        }
        for (scope, ns) in doc.docker {
            identity::validate_scope(&scope)
                .map_err(|e| format!("{file}: docker {scope:?}: {e}"))?;
            if let Some(earlier) = self.docker.get(&scope) {
                return Err(format!(
                    "docker {scope:?} is defined both in {} and {file}",
                    earlier.file
                ));
            }
            let what = format!("docker {scope:?}");
            let e = entry(file, &what, &ns.unwrap_or_default())?;
            self.docker.insert(scope, e);
        }
        Ok(())
    }

    /// The lookaside URL for `image` (the reference as written) and the scope that
    /// chose it: the exact reference, the repository, its namespaces, the host,
    /// `*.domain` wildcards, then `default-docker`.
    pub fn lookaside_for(&self, image: &DockerRef) -> Option<(String, String)> {
        let candidates =
            std::iter::once(image.to_string()).chain(identity::policy_namespaces(image));
        for scope in candidates {
            if let Some(url) = self.docker.get(&scope).and_then(|e| e.lookaside.clone()) {
                return Some((format!("docker {scope:?}"), url));
            }
        }
        let url = self.default_docker.as_ref()?.lookaside.clone()?;
        Some(("default-docker".to_string(), url))
    }
}

/// The entry of `ns` in `file` (`what` names it): the URL must be `file://` (absolute
/// path), `http://` or `https://`.
fn entry(file: &str, what: &str, ns: &Namespace) -> Result<Entry, String> {
    let lookaside = ns.read_url();
    if let Some(url) = &lookaside {
        let ok = url
            .strip_prefix("file://")
            .map(|p| p.starts_with('/'))
            .unwrap_or(false)
            || url.starts_with("http://")
            || url.starts_with("https://");
        if !ok {
            return Err(format!(
                "{file}: {what}: lookaside {url:?} is not a file:///…, http:// or https:// URL"
            ));
        }
    }
    Ok(Entry {
        lookaside,
        file: file.to_string(),
    })
}

/// The lookaside location of the manifest `digest` of `image` under the lookaside
/// `base`: `<base>/<repository path>@<algo>=<hex>` (the repository path is the name
/// without the registry host).
pub fn image_url(base: &str, image: &DockerRef, digest: &str) -> String {
    let repo = image
        .name
        .split_once('/')
        .map_or(image.name.as_str(), |(_, p)| p);
    let digest = digest.replacen(':', "=", 1);
    format!("{}/{repo}@{digest}", base.trim_end_matches('/'))
}

/// The URL of signature `n` (1-based): `<image_url>/signature-<n>`.
pub fn signature_url(base: &str, image: &DockerRef, digest: &str, n: usize) -> String {
    format!("{}/signature-{n}", image_url(base, image, digest))
}
