use super::*;

const SHA: &str = "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";

fn conf(text: &str) -> RegistriesConf {
    RegistriesConf::parse("/etc/containers/registries.conf", text).expect("valid")
}

fn parse_err(text: &str) -> String {
    RegistriesConf::parse("/etc/containers/registries.conf", text)
        .expect_err("invalid")
        .to_string()
}

fn sources(c: &RegistriesConf, image: &str) -> Vec<(String, bool, bool)> {
    let r = crate::image::reference::parse(image).expect("reference");
    c.pull_sources(&r)
        .expect("not blocked")
        .into_iter()
        .map(|s| (s.reference.whole(), s.mirror, s.insecure))
        .collect()
}

#[test]
fn prefix_matching_follows_containers_image() {
    assert_eq!(
        matching_prefix_len("example.com/a/b:1", "example.com"),
        Some(11)
    );
    assert_eq!(
        matching_prefix_len("example.com/a/b:1", "example.com/a"),
        Some(13)
    );
    assert_eq!(
        matching_prefix_len("example.com/ab:1", "example.com/a"),
        None
    );
    assert_eq!(matching_prefix_len("example.com", "example.com"), Some(11));
    assert_eq!(matching_prefix_len("example.co/a", "example.com"), None);
    assert_eq!(
        matching_prefix_len("a.example.com/x:1", "*.example.com"),
        Some(13)
    );
    assert_eq!(
        matching_prefix_len("a.b.example.com/x", "*.example.com"),
        Some(15)
    );
    assert_eq!(matching_prefix_len("example.com/x", "*.example.com"), None);
    assert_eq!(
        matching_prefix_len("a.example.community/x", "*.example.com"),
        None
    );
    assert_eq!(
        matching_prefix_len("other.io/a.example.com/x", "*.example.com"),
        None
    );
    assert_eq!(
        matching_prefix_len("a.example.com:5000/x", "*.example.com"),
        Some(13)
    );
}

#[test]
fn longest_prefix_wins_and_rewrites_the_rest() {
    let c = conf(
        r#"
unqualified-search-registries = ["docker.io"]

[[registry]]
location = "quay.io"
[[registry.mirror]]
location = "mirror.local:5000/quay"

[[registry]]
prefix = "quay.io/operatorhubio"
location = "quay.io/operatorhubio"
[[registry.mirror]]
location = "mirror.local:5000/ohio"
insecure = true
[[registry.mirror]]
location = "second.local/ohio"
"#,
    );
    assert_eq!(c.ignored_keys, vec!["unqualified-search-registries"]);
    assert_eq!(
        sources(&c, "quay.io/operatorhubio/catalog:latest"),
        vec![
            ("mirror.local:5000/ohio/catalog:latest".into(), true, true),
            ("second.local/ohio/catalog:latest".into(), true, false),
            ("quay.io/operatorhubio/catalog:latest".into(), false, false),
        ]
    );
    assert_eq!(
        sources(&c, "quay.io/other/x:1"),
        vec![
            ("mirror.local:5000/quay/other/x:1".into(), true, false),
            ("quay.io/other/x:1".into(), false, false),
        ]
    );
    // No entry: the reference as it is.
    assert_eq!(
        sources(&c, "registry.example/x:1"),
        vec![("registry.example/x:1".into(), false, false)]
    );
    assert!(c.is_insecure_host("mirror.local:5000"));
    assert!(!c.is_insecure_host("quay.io"));
}

#[test]
fn location_replaces_the_prefix() {
    let c = conf(
        r#"
[[registry]]
prefix = "example.com/foo"
location = "internal.example.net/bar"
insecure = true
"#,
    );
    assert_eq!(
        sources(&c, &format!("example.com/foo/img@{SHA}")),
        vec![(format!("internal.example.net/bar/img@{SHA}"), false, true)]
    );
    assert!(c.is_insecure_host("internal.example.net"));
}

#[test]
fn wildcard_prefix_keeps_the_host_or_uses_mirrors() {
    let c = conf(
        r#"
[[registry]]
prefix = "*.example.com"
[[registry.mirror]]
location = "mirror.local/all"
"#,
    );
    assert_eq!(
        sources(&c, "a.example.com/ns/img:1"),
        vec![
            ("mirror.local/all/ns/img:1".into(), true, false),
            ("a.example.com/ns/img:1".into(), false, false),
        ]
    );
}

#[test]
fn mirror_by_digest_only_skips_mirrors_for_tags() {
    let c = conf(
        r#"
[[registry]]
location = "quay.io"
mirror-by-digest-only = true
[[registry.mirror]]
location = "mirror.local"
"#,
    );
    assert_eq!(
        sources(&c, "quay.io/a/b:v1"),
        vec![("quay.io/a/b:v1".into(), false, false)]
    );
    assert_eq!(
        sources(&c, &format!("quay.io/a/b@{SHA}")),
        vec![
            (format!("mirror.local/a/b@{SHA}"), true, false),
            (format!("quay.io/a/b@{SHA}"), false, false),
        ]
    );
}

#[test]
fn pull_from_mirror_selects_per_mirror() {
    let c = conf(
        r#"
[[registry]]
location = "quay.io"
[[registry.mirror]]
location = "digests.local"
pull-from-mirror = "digest-only"
[[registry.mirror]]
location = "tags.local"
pull-from-mirror = "tag-only"
"#,
    );
    let tag: Vec<String> = sources(&c, "quay.io/a:1")
        .into_iter()
        .map(|s| s.0)
        .collect();
    assert_eq!(tag, vec!["tags.local/a:1", "quay.io/a:1"]);
    let digest: Vec<String> = sources(&c, &format!("quay.io/a@{SHA}"))
        .into_iter()
        .map(|s| s.0)
        .collect();
    assert_eq!(
        digest,
        vec![format!("digests.local/a@{SHA}"), format!("quay.io/a@{SHA}")]
    );
}

#[test]
fn blocked_registry_names_prefix_and_file() {
    let c = conf(
        r#"
[[registry]]
prefix = "quay.io/forbidden"
location = "quay.io/forbidden"
blocked = true
"#,
    );
    let r = crate::image::reference::parse("quay.io/forbidden/x:1").expect("ref");
    assert_eq!(
        c.pull_sources(&r),
        Err(Blocked {
            registry: "quay.io/forbidden".into(),
            config: "/etc/containers/registries.conf".into(),
        })
    );
    let allowed = crate::image::reference::parse("quay.io/allowed/x:1").expect("ref");
    assert!(c.pull_sources(&allowed).is_ok());
}

#[test]
fn docker_io_references_are_normalised_before_matching() {
    let c = conf(
        r#"
[[registry]]
prefix = "docker.io/library"
location = "mirror.local/dockerhub"
"#,
    );
    assert_eq!(
        sources(&c, "busybox:1"),
        vec![("mirror.local/dockerhub/busybox:1".into(), false, false)]
    );
}

#[test]
fn empty_file_is_valid() {
    assert_eq!(conf("").registries, Vec::new());
}

#[test]
fn parse_errors_say_what_is_wrong() {
    let cases = [
        ("[[registry]\nlocation = 1", "invalid TOML"),
        (
            "[[registry]]\ninsecure = true",
            "both location and prefix are unset",
        ),
        (
            "[[registry]]\nlocation = \"https://quay.io\"",
            "URI schemes are not supported",
        ),
        (
            "[[registry]]\nprefix = \"*.example.com/x\"",
            "wildcarded prefix",
        ),
        (
            "[[registry]]\nprefix = \"ex*.com\"\nlocation = \"a\"",
            "only allowed as a leading",
        ),
        ("[[registry]]\nprefix = \"quay.io/x\"", "has no location"),
        (
            "[[registry]]\nlocation = \"q\"\n[[registry.mirror]]\ninsecure = true",
            "mirror #1: location is unset",
        ),
        (
            "[[registry]]\nlocation = \"q\"\n[[registry.mirror]]\nlocation = \"m\"\npull-from-mirror = \"sometimes\"",
            "unsupported pull-from-mirror value \"sometimes\"",
        ),
        (
            "[[registry]]\nlocation = \"q\"\nmirror-by-digest-only = true\n[[registry.mirror]]\nlocation = \"m\"\npull-from-mirror = \"all\"",
            "at the same time",
        ),
        (
            "[[registry]]\nprefix = \"a.io/x\"\nlocation = \"q\"\n[[registry]]\nprefix = \"a.io/y\"\nlocation = \"q\"\ninsecure = true",
            "conflicting 'insecure' setting",
        ),
        (
            "[[registry]]\nlocation = \"q\"\n[[registry]]\nlocation = \"q\"",
            "defined more than once",
        ),
        (
            "[registries.search]\nregistries = [\"quay.io\"]",
            "v1 format",
        ),
        (
            "[[registry]]\nlocation = \"q\"\nblocked = \"yes\"",
            "invalid TOML",
        ),
    ];
    for (text, want) in cases {
        let e = parse_err(text);
        assert!(
            e.starts_with("registries configuration /etc/containers/registries.conf: "),
            "{e}"
        );
        assert!(e.contains(want), "{text:?}: {e}");
    }
}

#[test]
fn unknown_keys_are_reported_not_fatal() {
    let c = conf(
        r#"
short-name-mode = "enforcing"
[aliases]
"x" = "quay.io/x"
[[registry]]
location = "q"
mirror-by-digest-onyl = true
[[registry.mirror]]
location = "m"
colour = "blue"
"#,
    );
    assert_eq!(
        c.ignored_keys,
        vec![
            "aliases",
            "short-name-mode",
            "registry[1].mirror-by-digest-onyl",
            "registry[1].mirror[1].colour"
        ]
    );
}

#[test]
fn missing_file_is_no_configuration_unreadable_is_an_error() {
    let c = RegistriesConf::load(Path::new("/nonexistent/registries.conf")).expect("missing");
    assert!(!c.found);
    assert!(c.registries.is_empty());
    let dir = tempfile::tempdir().expect("tmp");
    let e = RegistriesConf::load(dir.path()).expect_err("a directory");
    assert!(
        e.to_string().starts_with(&format!(
            "registries configuration {}: cannot read the file",
            dir.path().display()
        )),
        "{e}"
    );
    let file = dir.path().join("registries.conf");
    std::fs::write(&file, "[[registry]]\nlocation = \"quay.io\"\n").expect("write");
    let c = RegistriesConf::load(&file).expect("valid");
    assert!(c.found);
    assert_eq!(c.registries.len(), 1);
}
