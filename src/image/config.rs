//! What a pull is asked to do: the [`PullerConfig`] (cache directory, registries and
//! trust, retries, size and time limits), what to [`Extract`] from an image and where
//! that is inside it ([`extract_dir`]), and which manifest of an index is ours
//! ([`select_platform`]).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use oci_client::manifest::ImageIndexEntry;
use sha2::{Digest as _, Sha256};

use super::registries::RegistriesConf;
use super::signature::{RegistriesD, SignaturePolicy};
use super::{ImageError, UnpackLimits, progress};

/// Label naming the FBC directory inside a catalog image.
pub const CATALOG_CONFIGS_LABEL: &str = "operators.operatorframework.io.index.configs.v1";

pub(super) const MANIFEST_MEDIA_TYPES: &[&str] = &[
    "application/vnd.oci.image.manifest.v1+json",
    "application/vnd.oci.image.index.v1+json",
    "application/vnd.docker.distribution.manifest.v2+json",
    "application/vnd.docker.distribution.manifest.list.v2+json",
];

/// Retry policy for registry calls (5xx, 429, connection errors only).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RetryPolicy {
    /// Total attempts including the first (default 4).
    pub max_attempts: u32,
    /// Delay before the second attempt, doubled each time (default 500 ms).
    pub initial_backoff: Duration,
    /// Upper bound of one delay (default 10 s).
    pub max_backoff: Duration,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        RetryPolicy {
            max_attempts: 4,
            initial_backoff: Duration::from_millis(500),
            max_backoff: Duration::from_secs(10),
        }
    }
}

/// Default of [`PullerConfig::max_manifest_bytes`]: 4 MiB, the largest manifest the
/// `distribution` registry (the reference implementation of the OCI distribution
/// spec) accepts on push, so no image it serves is bigger; real manifests and indexes
/// are a few KiB.
pub const MAX_MANIFEST_BYTES: u64 = 4 << 20;
/// Default of [`PullerConfig::pull_timeout`]: 10 minutes (controller flag
/// `--pull-timeout`).
pub const PULL_TIMEOUT: Duration = Duration::from_secs(600);
/// Default of [`PullerConfig::request_timeout`]: 5 minutes (controller flag
/// `--registry-request-timeout`).
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(300);

/// Configuration of an [`ImagePuller`].
#[derive(Clone, Debug)]
pub struct PullerConfig {
    /// Root of the digest-keyed cache; everything the puller writes stays below it.
    pub cache_dir: PathBuf,
    /// `host[:port]` of registries reached over plain HTTP.
    pub insecure_registries: Vec<String>,
    /// Extra trusted CA certificates (PEM, may hold several).
    pub ca_bundle_pem: Option<Vec<u8>>,
    pub limits: UnpackLimits,
    pub retry: RetryPolicy,
    /// Largest image config blob accepted (default 4 MiB).
    pub max_config_bytes: u64,
    /// Largest manifest or index accepted ([`MAX_MANIFEST_BYTES`]); at most this much
    /// of one is ever held in memory.
    pub max_manifest_bytes: u64,
    /// Largest total (compressed) size of all layer blobs of one image (default 2 GiB).
    pub max_download_bytes: u64,
    /// Most layers one image may have (default 128).
    pub max_layers: usize,
    pub connect_timeout: Duration,
    /// Longest wait for the next bytes of a response (restarts with every byte).
    pub read_timeout: Duration,
    /// Wall-clock limit of one pull or tag resolution, mirrors and retries included
    /// ([`PULL_TIMEOUT`]); unpacking is bounded by [`UnpackLimits`] instead.
    pub pull_timeout: Duration,
    /// Wall-clock limit of one registry request within it, body included
    /// ([`REQUEST_TIMEOUT`]).
    pub request_timeout: Duration,
    /// Mirrors and blocked registries (registries.conf); empty = none.
    pub registries: RegistriesConf,
    /// Signature policy (policy.json); the default accepts everything.
    pub signature_policy: SignaturePolicy,
    /// Lookaside signature storage (registries.d) read by `signedBy`; empty = none.
    pub registries_d: RegistriesD,
    /// Receives layer/byte progress of downloads (the CLI on a terminal); none by default.
    pub progress: Option<progress::ProgressSink>,
}

impl PullerConfig {
    /// Defaults for everything but the cache directory.
    pub fn new(cache_dir: impl Into<PathBuf>) -> Self {
        PullerConfig {
            cache_dir: cache_dir.into(),
            insecure_registries: Vec::new(),
            ca_bundle_pem: None,
            limits: UnpackLimits::default(),
            retry: RetryPolicy::default(),
            max_config_bytes: 4 << 20,
            max_manifest_bytes: MAX_MANIFEST_BYTES,
            max_download_bytes: 2 << 30,
            max_layers: 128,
            connect_timeout: Duration::from_secs(10),
            read_timeout: Duration::from_secs(60),
            pull_timeout: PULL_TIMEOUT,
            request_timeout: REQUEST_TIMEOUT,
            registries: RegistriesConf::default(),
            signature_policy: SignaturePolicy::default(),
            registries_d: RegistriesD::default(),
            progress: None,
        }
    }

    /// Read and validate a containers-registries.conf v2 file into `registries`.
    pub fn with_registries_conf(mut self, path: &Path) -> Result<Self, ImageError> {
        self.registries = RegistriesConf::load(path)?;
        Ok(self)
    }

    /// Read and validate a containers-policy.json file into `signature_policy` (a
    /// missing file accepts everything).
    pub fn with_signature_policy(mut self, path: &Path) -> Result<Self, ImageError> {
        self.signature_policy = SignaturePolicy::load(path)?;
        Ok(self)
    }

    /// Read the `*.yaml` files of a containers-registries.d directory into
    /// `registries_d` (a missing directory configures nothing).
    pub fn with_registries_d(mut self, dir: &Path) -> Result<Self, ImageError> {
        self.registries_d = RegistriesD::load(dir)?;
        Ok(self)
    }

    /// Add the PEM certificates of every file in `dir` (upstream's --pull-cas-dir) to
    /// `ca_bundle_pem`; files without a certificate are skipped.
    pub fn with_ca_dir(mut self, dir: &Path) -> Result<Self, ImageError> {
        let error = |detail: String| ImageError::CaBundle {
            path: dir.display().to_string(),
            detail,
        };
        let mut paths: Vec<PathBuf> = std::fs::read_dir(dir)
            .map_err(|e| error(e.to_string()))?
            .filter_map(|entry| entry.ok().map(|e| e.path()))
            .filter(|p| p.is_file())
            .collect();
        paths.sort();
        let mut pem = self.ca_bundle_pem.take().unwrap_or_default();
        for path in paths {
            let bytes = std::fs::read(&path).map_err(|e| error(e.to_string()))?;
            if String::from_utf8_lossy(&bytes).contains("-----BEGIN CERTIFICATE-----") {
                pem.extend_from_slice(&bytes);
                pem.push(b'\n');
            }
        }
        self.ca_bundle_pem = (!pem.is_empty()).then_some(pem);
        Ok(self)
    }

    /// Read a PEM CA bundle file into `ca_bundle_pem`.
    pub fn with_ca_bundle_file(mut self, path: &Path) -> Result<Self, ImageError> {
        let pem = std::fs::read(path).map_err(|e| ImageError::CaBundle {
            path: path.display().to_string(),
            detail: e.to_string(),
        })?;
        if !String::from_utf8_lossy(&pem).contains("-----BEGIN CERTIFICATE-----") {
            return Err(ImageError::CaBundle {
                path: path.display().to_string(),
                detail: "no PEM certificate found".to_string(),
            });
        }
        self.ca_bundle_pem = Some(pem);
        Ok(self)
    }
}

/// What to unpack from the image.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Extract {
    /// The whole file system (bundles: `manifests/` + `metadata/`).
    Whole,
    /// The directory named by the label [`CATALOG_CONFIGS_LABEL`] (catalogs).
    CatalogConfigs,
    /// One directory, given as an image path (`/configs`).
    Dir(String),
}

impl Extract {
    pub(super) fn cache_key(&self) -> String {
        match self {
            Extract::Whole => "whole".to_string(),
            Extract::CatalogConfigs => "catalog".to_string(),
            Extract::Dir(d) => {
                let h = Sha256::digest(d.as_bytes());
                format!("dir-{}", &data_encoding::HEXLOWER.encode(&h)[..16])
            }
        }
    }
}

/// Pick the manifest for linux on the running architecture, else linux/amd64.
pub fn select_platform(entries: &[ImageIndexEntry]) -> Option<String> {
    use oci_spec::image::{Arch, Os};
    let find = |arch: &Arch| {
        entries
            .iter()
            .find(|e| {
                e.platform
                    .as_ref()
                    .is_some_and(|p| p.os == Os::Linux && p.architecture == *arch)
            })
            .map(|e| e.digest.clone())
    };
    find(&Arch::default()).or_else(|| find(&Arch::Amd64))
}

/// The image-path components to extract for `extract`, given the config labels.
pub fn extract_dir(
    image: &str,
    extract: &Extract,
    labels: &BTreeMap<String, String>,
) -> Result<Vec<String>, ImageError> {
    let (label, value) = match extract {
        Extract::Whole => return Ok(Vec::new()),
        Extract::Dir(d) => ("(requested directory)", d.as_str()),
        Extract::CatalogConfigs => match labels.get(CATALOG_CONFIGS_LABEL) {
            Some(v) => (CATALOG_CONFIGS_LABEL, v.as_str()),
            None => {
                return Err(ImageError::MissingLabel {
                    image: image.to_string(),
                    label: CATALOG_CONFIGS_LABEL.to_string(),
                });
            }
        },
    };
    let outside = || ImageError::LabelOutsideImage {
        image: image.to_string(),
        label: label.to_string(),
        value: value.to_string(),
    };
    if value.trim().is_empty() || value.contains('\0') {
        return Err(outside());
    }
    let mut comps: Vec<String> = Vec::new();
    for c in value.trim().split('/') {
        match c {
            "" | "." => {}
            ".." => {
                if comps.pop().is_none() {
                    return Err(outside());
                }
            }
            c => comps.push(c.to_string()),
        }
    }
    Ok(comps)
}
