//! The error type of image pulling and unpacking, classified as retryable (network
//! trouble, registry 5xx/429) or terminal (bad reference, 401/403, 404, digest
//! mismatch, hostile or oversized content). Every message names the image.

use std::time::Duration;

use oci_client::errors::{DigestError, OciDistributionError};

/// What went wrong while pulling or unpacking an image.
#[derive(Debug, thiserror::Error)]
pub enum ImageError {
    /// The image reference does not parse.
    #[error("invalid image reference {reference:?}: {reason}")]
    InvalidReference { reference: String, reason: String },

    /// 401/403 from the registry.
    #[error(
        "image {image}: registry {registry} refused access (HTTP {status}): check the credentials / pull secret for {registry}"
    )]
    Unauthorized {
        image: String,
        registry: String,
        status: u16,
    },

    /// 404 (manifest or blob unknown).
    #[error("image {image}: not found in registry ({detail})")]
    NotFound { image: String, detail: String },

    /// Downloaded content does not hash to the digest that named it.
    #[error("image {image}: digest mismatch for {what}: expected {expected}, got {actual}")]
    DigestMismatch {
        image: String,
        what: String,
        expected: String,
        actual: String,
    },

    /// The registry answered with a server error (5xx, 429) or could not be reached.
    #[error("image {image}: registry unavailable after {attempts} attempt(s): {detail}")]
    Unavailable {
        image: String,
        attempts: u32,
        detail: String,
    },

    /// Any other registry protocol error (4xx other than 401/403/404, spec violations).
    #[error("image {image}: registry error: {detail}")]
    Registry { image: String, detail: String },

    /// The manifest, index or config is not something we can use.
    #[error("image {image}: {detail}")]
    Unsupported { image: String, detail: String },

    /// A catalog image lacks `operators.operatorframework.io.index.configs.v1`.
    #[error("image {image}: catalog image is missing the required label \"{label}\"")]
    MissingLabel { image: String, label: String },

    /// The label names a directory that is not inside the image.
    #[error("image {image}: label \"{label}\" value {value:?} points outside the image")]
    LabelOutsideImage {
        image: String,
        label: String,
        value: String,
    },

    /// The requested directory does not exist in the image.
    #[error("image {image}: directory {dir:?} not found in the image")]
    DirectoryMissing { image: String, dir: String },

    /// A layer contains an entry we refuse to write (path escape, link escape, device...).
    #[error("image {image}: layer {layer}: unsafe entry {entry:?}: {reason}")]
    UnsafeEntry {
        image: String,
        layer: String,
        entry: String,
        reason: String,
    },

    /// A configured size or count limit was exceeded.
    #[error("image {image}: layer {layer}: {what} exceeds the limit of {limit}")]
    LimitExceeded {
        image: String,
        layer: String,
        what: String,
        limit: u64,
    },

    /// A manifest or index body larger than [`super::PullerConfig::max_manifest_bytes`]
    /// (real ones are a few KiB); no more than the limit + 1 byte was read.
    #[error(
        "image {image}: manifest {manifest} larger than {limit} bytes ({size}): refused; real manifests are a few KiB, check the image reference"
    )]
    ManifestTooLarge {
        image: String,
        manifest: String,
        limit: u64,
        /// What showed it: the declared Content-Length or the bytes received.
        size: String,
    },

    /// A registry request, or the whole pull, ran past its wall-clock deadline (a
    /// stalled or byte-dripping registry). Retryable.
    #[error(
        "image {image}: fetching {what} took longer than the {scope} deadline of {}s: the registry is stalled or too slow; the pull is retried later (--{} sets the deadline)",
        limit.as_secs(), scope.flag()
    )]
    Timeout {
        image: String,
        /// What was being fetched (`manifest <ref>`, `layer <digest>`, …).
        what: String,
        limit: Duration,
        scope: TimeoutScope,
    },

    /// A layer is not a readable tar (or compressed tar).
    #[error("image {image}: layer {layer}: corrupt layer: {detail}")]
    CorruptLayer {
        image: String,
        layer: String,
        detail: String,
    },

    /// Local file-system trouble in the cache directory.
    #[error("image {image}: cache I/O error at {path}: {source}")]
    Io {
        image: String,
        path: String,
        #[source]
        source: std::io::Error,
    },

    /// A pull secret could not be read.
    #[error("pull secret {name}: {detail}")]
    PullSecret { name: String, detail: String },

    /// The registries configuration blocks the image's registry.
    #[error("image {image}: registry {registry:?} is blocked in {config}")]
    Blocked {
        image: String,
        registry: String,
        config: String,
    },

    /// Every source (mirrors, then the registry) failed; `last` is the registry's error.
    #[error("{last} (mirrors also failed: {})", earlier.join("; "))]
    AllSourcesFailed {
        image: String,
        last: Box<ImageError>,
        earlier: Vec<String>,
    },

    /// The registries configuration (registries.conf) cannot be used.
    #[error(transparent)]
    RegistriesConf(#[from] super::registries::RegistriesConfError),

    /// The signature policy (policy.json) refuses the image: terminal until the image
    /// is signed or an administrator changes the policy.
    #[error(
        "image \"{image}\" refused by signature policy {policy} ({scope}: {requirement}): {detail}"
    )]
    SignatureRefused {
        image: String,
        policy: String,
        /// `default` or `transports.docker "<scope>"`.
        scope: String,
        /// The requirement type that failed (`reject`, `sigstoreSigned`).
        requirement: String,
        detail: String,
    },

    /// The signature policy file cannot be used.
    #[error(transparent)]
    SignaturePolicy(#[from] super::signature::PolicyError),

    /// The custom CA bundle could not be read.
    #[error("CA bundle {path}: {detail}")]
    CaBundle { path: String, detail: String },
}

impl ImageError {
    /// Whether trying again later may succeed without anyone changing anything
    /// (network trouble, 5xx, 429, local I/O). Terminal errors need a new image,
    /// new credentials or a new configuration.
    pub fn is_retryable(&self) -> bool {
        match self {
            ImageError::AllSourcesFailed { last, .. } => last.is_retryable(),
            e => matches!(
                e,
                ImageError::Unavailable { .. } | ImageError::Io { .. } | ImageError::Timeout { .. }
            ),
        }
    }

    /// Whether this failure of one pull source (a mirror) is a reason to try the next
    /// one: registry and network errors, not content or local errors.
    pub fn next_source_may_help(&self) -> bool {
        matches!(
            self,
            ImageError::Unavailable { .. }
                | ImageError::NotFound { .. }
                | ImageError::Unauthorized { .. }
                | ImageError::Registry { .. }
                | ImageError::DigestMismatch { .. }
                | ImageError::AllSourcesFailed { .. }
                | ImageError::Timeout {
                    scope: TimeoutScope::Request,
                    ..
                }
        )
    }

    /// Whether the image's own content is unusable (labels, layout, unsafe or oversized
    /// entries, manifest, media types): the same bytes always fail, so a reference
    /// pinned by digest cannot succeed by retrying (a tag may be re-pushed with a fix).
    /// Both reconcilers classify content failures by it.
    pub fn is_content_error(&self) -> bool {
        matches!(
            self,
            ImageError::MissingLabel { .. }
                | ImageError::LabelOutsideImage { .. }
                | ImageError::DirectoryMissing { .. }
                | ImageError::UnsafeEntry { .. }
                | ImageError::LimitExceeded { .. }
                | ImageError::ManifestTooLarge { .. }
                | ImageError::Unsupported { .. }
        )
    }

    /// A configuration that refuses the image ([`ImageError::Blocked`] by the
    /// registries configuration, [`ImageError::SignatureRefused`] by the signature
    /// policy): terminal until the image or the configuration changes.
    pub fn is_blocked(&self) -> bool {
        matches!(
            self,
            ImageError::Blocked { .. } | ImageError::SignatureRefused { .. }
        )
    }

    pub(crate) fn io(image: &str, path: &std::path::Path, source: std::io::Error) -> Self {
        ImageError::Io {
            image: image.to_string(),
            path: path.display().to_string(),
            source,
        }
    }
}

/// Which wall-clock deadline a [`ImageError::Timeout`] hit.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TimeoutScope {
    /// One registry request ([`super::PullerConfig::request_timeout`]).
    Request,
    /// The whole pull or tag resolution ([`super::PullerConfig::pull_timeout`]).
    Pull,
}

impl TimeoutScope {
    /// The controller flag that sets this deadline.
    pub fn flag(self) -> &'static str {
        match self {
            TimeoutScope::Request => "registry-request-timeout",
            TimeoutScope::Pull => "pull-timeout",
        }
    }
}

impl std::fmt::Display for TimeoutScope {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            TimeoutScope::Request => "registry request",
            TimeoutScope::Pull => "pull",
        })
    }
}

/// How one failed registry call should be treated by the retry loop.
#[derive(Debug)]
pub(crate) enum Classified {
    Retry(String),
    Fail(ImageError),
}

/// Map an `oci-client` error for `image` (with `registry` host) to our classification.
pub(crate) fn classify(image: &str, registry: &str, err: OciDistributionError) -> Classified {
    use OciDistributionError as E;
    let unauthorized = |status: u16| {
        Classified::Fail(ImageError::Unauthorized {
            image: image.to_string(),
            registry: registry.to_string(),
            status,
        })
    };
    match err {
        E::UnauthorizedError { .. } => unauthorized(401),
        E::AuthenticationFailure(_) => unauthorized(401),
        E::ServerError { code, url, message } => match code {
            401 | 403 => unauthorized(code),
            404 => Classified::Fail(ImageError::NotFound {
                image: image.to_string(),
                detail: format!("HTTP 404 from {url}"),
            }),
            408 | 429 | 500..=599 => Classified::Retry(format!(
                "HTTP {code} from {url}: {}",
                truncate(&message, 200)
            )),
            _ => Classified::Fail(ImageError::Registry {
                image: image.to_string(),
                detail: format!("HTTP {code} from {url}: {}", truncate(&message, 200)),
            }),
        },
        E::RegistryError { envelope, url } => {
            let codes: Vec<String> = envelope
                .errors
                .iter()
                .map(|e| format!("{:?}", e.code))
                .collect();
            let text = format!("{envelope} ({}) from {url}", codes.join(", "));
            let upper = codes.join(",").to_ascii_uppercase();
            if upper.contains("UNAUTHORIZED") || upper.contains("DENIED") {
                unauthorized(401)
            } else if upper.contains("UNKNOWN") || upper.contains("NOTFOUND") {
                Classified::Fail(ImageError::NotFound {
                    image: image.to_string(),
                    detail: text,
                })
            } else if upper.contains("TOOMANYREQUESTS") {
                Classified::Retry(text)
            } else {
                Classified::Fail(ImageError::Registry {
                    image: image.to_string(),
                    detail: text,
                })
            }
        }
        E::ImageManifestNotFoundError(d) => Classified::Fail(ImageError::NotFound {
            image: image.to_string(),
            detail: d,
        }),
        E::DigestError(DigestError::VerificationError { expected, actual }) => {
            Classified::Fail(ImageError::DigestMismatch {
                image: image.to_string(),
                what: "manifest".to_string(),
                expected,
                actual,
            })
        }
        E::RequestError(e) => Classified::Retry(error_chain(&e)),
        E::IoError(e) => Classified::Retry(error_chain(&e)),
        other => Classified::Fail(ImageError::Registry {
            image: image.to_string(),
            detail: other.to_string(),
        }),
    }
}

/// `err` and all its sources joined with `: `.
pub(crate) fn error_chain(err: &dyn std::error::Error) -> String {
    let mut out = err.to_string();
    let mut cur = err.source();
    while let Some(s) = cur {
        let text = s.to_string();
        if !out.contains(&text) {
            out.push_str(": ");
            out.push_str(&text);
        }
        cur = s.source();
    }
    out
}

fn truncate(s: &str, max: usize) -> String {
    let trimmed = s.trim();
    if trimmed.len() <= max {
        return trimmed.to_string();
    }
    let mut end = max;
    while !trimmed.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &trimmed[..end])
}
