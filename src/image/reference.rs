//! Image reference parsing: the grammar and normalisation of
//! `github.com/distribution/reference` (as `oci_spec`'s `Reference::try_from` ports
//! it), with the regular expression compiled for ASCII. Go's `\w` is ASCII; the Unicode
//! form `oci_spec` compiles accepts more and costs about 9 MB of NFA and search cache in
//! a long-running controller, against a few kilobytes here.

use oci_client::Reference;
use regex::{Regex, RegexBuilder};
use std::sync::OnceLock;

/// The anchored reference grammar: name, tag, digest.
const REFERENCE_REGEXP: &str = r"^((?:(?:[a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9])(?:(?:\.(?:[a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9]))+)?(?::[0-9]+)?/)?[a-z0-9]+(?:(?:(?:[._]|__|[-]*)[a-z0-9]+)+)?(?:(?:/[a-z0-9]+(?:(?:(?:[._]|__|[-]*)[a-z0-9]+)+)?)+)?)(?::([\w][\w.-]{0,127}))?(?:@([A-Za-z][A-Za-z0-9]*(?:[-_+.][A-Za-z][A-Za-z0-9]*)*[:][[:xdigit:]]{32,}))?$";
const NAME_TOTAL_LENGTH_MAX: usize = 255;

fn reference_regexp() -> Option<&'static Regex> {
    static RE: OnceLock<Option<Regex>> = OnceLock::new();
    RE.get_or_init(|| {
        RegexBuilder::new(REFERENCE_REGEXP)
            .unicode(false)
            .build()
            .ok()
    })
    .as_ref()
}

/// Why a reference does not parse (the messages of `oci_spec::distribution::ParseError`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ReferenceError {
    #[error("repository name must have at least one component")]
    NameEmpty,
    #[error("invalid reference format")]
    InvalidFormat,
    #[error("repository name must not be more than 255 characters")]
    NameTooLong,
    #[error("invalid checksum digest format")]
    DigestInvalidFormat,
    #[error("invalid checksum digest length")]
    DigestInvalidLength,
    #[error("unsupported digest algorithm")]
    DigestUnsupported,
}

/// Parses `s` like `oci_spec`'s `Reference::try_from` (docker.io and `library/`
/// defaults, `latest` when neither tag nor digest is given), ASCII only.
pub fn parse(s: &str) -> Result<Reference, ReferenceError> {
    if s.is_empty() {
        return Err(ReferenceError::NameEmpty);
    }
    let captures = reference_regexp()
        .and_then(|re| re.captures(s))
        .ok_or(ReferenceError::InvalidFormat)?;
    let name = captures.get(1).map_or("", |m| m.as_str());
    let tag = captures.get(2).map(|m| m.as_str().to_owned());
    let digest = captures.get(3).map(|m| m.as_str().to_owned());
    let (registry, repository) = split_domain(name);
    if repository.len() > NAME_TOTAL_LENGTH_MAX {
        return Err(ReferenceError::NameTooLong);
    }
    if let Some(digest) = &digest {
        let expected = match digest.split_once(':') {
            None => return Err(ReferenceError::DigestInvalidFormat),
            Some(("sha256", _)) => 64,
            Some(("sha384", _)) => 96,
            Some(("sha512", _)) => 128,
            Some(_) => return Err(ReferenceError::DigestUnsupported),
        };
        if digest.split_once(':').map_or(0, |(_, hex)| hex.len()) != expected {
            return Err(ReferenceError::DigestInvalidLength);
        }
    }
    Ok(match (tag, digest) {
        (Some(tag), Some(digest)) => {
            Reference::with_tag_and_digest(registry, repository, tag, digest)
        }
        (None, Some(digest)) => Reference::with_digest(registry, repository, digest),
        (Some(tag), None) => Reference::with_tag(registry, repository, tag),
        (None, None) => Reference::with_tag(registry, repository, "latest".to_owned()),
    })
}

/// Registry and repository of a validated name (distribution's `splitDockerDomain`):
/// the first component is a registry when it has a `.` or `:`, is `localhost`, or has
/// an upper-case letter (repository components cannot; `oci_spec` misses this rule, so
/// `Host/repo` became the invalid `docker.io/Host/repo` — found by fuzzing).
fn split_domain(name: &str) -> (String, String) {
    let is_domain = |left: &str| {
        left.contains('.')
            || left.contains(':')
            || left == "localhost"
            || left.bytes().any(|b| b.is_ascii_uppercase())
    };
    let (mut domain, mut remainder) = match name.split_once('/') {
        Some((left, right)) if is_domain(left) => (left.to_owned(), right.to_owned()),
        _ => ("docker.io".to_owned(), name.to_owned()),
    };
    if domain == "index.docker.io" {
        domain = "docker.io".to_owned();
    }
    if domain == "docker.io" && !remainder.contains('/') {
        remainder = format!("library/{remainder}");
    }
    (domain, remainder)
}

#[cfg(test)]
mod tests {
    use super::*;

    const SHA: &str = "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";

    /// The same result as `oci_spec` for every ASCII input, valid or not.
    #[test]
    fn agrees_with_oci_spec() {
        let cases = [
            "busybox".to_string(),
            "busybox:1.36".into(),
            "library/busybox".into(),
            "docker.io/busybox".into(),
            "index.docker.io/busybox:latest".into(),
            "quay.io/operatorhubio/catalog:latest".into(),
            "localhost/foo".into(),
            "localhost:5000/foo/bar:v1.0.0".into(),
            "127.0.0.1:5000/bundles/x".into(),
            format!("quay.io/a/b@{SHA}"),
            format!("quay.io/a/b:v1@{SHA}"),
            "quay.io/a/b@sha256:abc".into(),
            format!("quay.io/a/b@md5:{}", "0".repeat(32)),
            format!("quay.io/a/b@sha512:{}", "0".repeat(128)),
            format!("quay.io/a/b@sha384:{}", "0".repeat(64)),
            "quay.io/a__b/c-d/e.f:tag_1.2-3".into(),
            "Quay.io/a/b".into(),
            "quay.io/A/b".into(),
            "quay.io/a/b:".into(),
            "quay.io/a/b:-tag".into(),
            format!("quay.io/a/b:{}", "t".repeat(128)),
            format!("quay.io/a/b:{}", "t".repeat(129)),
            format!("quay.io/{}", "a".repeat(256)),
            format!("quay.io/{}", "a".repeat(255)),
            "quay.io//a".into(),
            "quay.io/a/../b".into(),
            "-quay.io/a".into(),
            "a b".into(),
            ":tag".into(),
            "@sha256:x".into(),
            "".into(),
            "foo/bar/baz/qux:1".into(),
            "my-registry.example.com:443/ns/img@".into(),
        ];
        for case in &cases {
            let ours = parse(case).map(|r| r.whole()).map_err(|e| e.to_string());
            let theirs = oci_client::Reference::try_from(case.as_str())
                .map(|r| r.whole())
                .map_err(|e| e.to_string());
            assert_eq!(ours, theirs, "{case:?}");
        }
    }

    /// Regression (fuzz target `image_reference`): an upper-case first component is a
    /// registry host in Go's `splitDockerDomain`; the parsed reference must print as a
    /// reference that parses back to itself.
    #[test]
    fn upper_case_first_component_is_a_registry_as_in_go() {
        let r = parse("UPPER/case:tag").expect("valid in Go");
        assert_eq!((r.registry(), r.repository()), ("UPPER", "case"));
        assert_eq!(r.whole(), "UPPER/case:tag");
        assert_eq!(parse(&r.whole()).map(|p| p.whole()), Ok(r.whole()));
        assert_eq!(
            parse("Registry/a/b@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef")
                .map(|r| r.registry().to_string()),
            Ok("Registry".to_string())
        );
        assert_eq!(parse("UPPER/Case"), Err(ReferenceError::InvalidFormat));
    }

    #[test]
    fn non_ascii_word_characters_are_rejected_as_go_does() {
        assert_eq!(
            parse("quay.io/a/b:tägé"),
            Err(ReferenceError::InvalidFormat)
        );
    }
}
