//! Pulls through registries.conf mirrors, against two real `docker-registry`
//! processes on loopback: the image names a registry that cannot be reached (a host
//! name that does not resolve, or a closed loopback port) and the configuration sends
//! the pull to the mirrors; blocked registries; `mirror-by-digest-only`.

mod with_registry {
    //! Every test here pulls from the two shared `docker-registry` processes; hack/test.sh
    //! runs them in the integration tier (by the `::with_registry::` path segment).

    use std::collections::BTreeMap;
    use std::sync::OnceLock;
    use std::time::Duration;

    use crate::image::registries::RegistriesConf;
    use crate::image::*;
    use crate::testenv::registry::{TestRegistry, push_catalog_image};

    /// Never resolved: the tests prove that a mirror served the image.
    const UNREACHABLE: &str = "registry.olmv1-unreachable.invalid";
    /// A closed loopback port: connection refused at once.
    const CLOSED: &str = "127.0.0.1:1";

    fn crypto() {
        let _ = rustls::crypto::aws_lc_rs::default_provider().install_default();
    }

    fn mirror_a() -> &'static TestRegistry {
        static R: OnceLock<TestRegistry> = OnceLock::new();
        R.get_or_init(|| TestRegistry::start().unwrap_or_else(|e| panic!("registry A: {e:#}")))
    }

    fn mirror_b() -> &'static TestRegistry {
        static R: OnceLock<TestRegistry> = OnceLock::new();
        R.get_or_init(|| TestRegistry::start().unwrap_or_else(|e| panic!("registry B: {e:#}")))
    }

    fn files(name: &str) -> BTreeMap<String, Vec<u8>> {
        BTreeMap::from([(
            format!("{name}/catalog.json"),
            format!(r#"{{"schema":"olm.package","name":"{name}"}}"#).into_bytes(),
        )])
    }

    /// A puller with `conf` as its registries.conf (registries reached only through it:
    /// no --insecure-registry), few and short retries.
    fn puller(cache: &tempfile::TempDir, conf: &str) -> ImagePuller {
        let mut config = PullerConfig::new(cache.path().join("cache"));
        config.registries = RegistriesConf::parse("/test/registries.conf", conf).expect("conf");
        config.retry = RetryPolicy {
            max_attempts: 2,
            initial_backoff: Duration::from_millis(10),
            max_backoff: Duration::from_millis(20),
        };
        config.connect_timeout = Duration::from_secs(2);
        ImagePuller::new(config).expect("puller")
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn unreachable_registry_is_pulled_from_its_mirror() {
        crypto();
        let m = mirror_a();
        let pushed = push_catalog_image(m, "mirrored/ns/catalog:v1", &files("mirrored"))
            .await
            .expect("push");
        let conf = format!(
            r#"
[[registry]]
prefix = "{UNREACHABLE}/ns"
location = "{UNREACHABLE}/ns"
[[registry.mirror]]
location = "{}/mirrored/ns"
insecure = true
"#,
            m.host()
        );
        let tmp = tempfile::tempdir().expect("tmp");
        let p = puller(&tmp, &conf);
        let image = format!("{UNREACHABLE}/ns/catalog:v1");
        let none = DockerConfig::default();
        let pinned = format!("{UNREACHABLE}/ns/catalog@{}", pushed.digest);
        assert_eq!(p.resolve(&image, &none).await.expect("resolve"), pinned);
        let img = p
            .pull(&image, &Extract::CatalogConfigs, &none)
            .await
            .expect("pull through the mirror");
        // The result names the image as asked for, pinned to the mirror's digest.
        assert_eq!(img.reference, pinned);
        assert_eq!(img.digest, pushed.digest);
        assert!(img.dir.join("mirrored/catalog.json").is_file());
        // By digest too (from the cache now: no download).
        let again = p
            .pull(&pinned, &Extract::CatalogConfigs, &none)
            .await
            .expect("pull by digest");
        assert!(again.from_cache);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn mirrors_are_tried_in_order_then_the_registry() {
        crypto();
        let (a, b) = (mirror_a(), mirror_b());
        // Only B has the image: A answers 404, the registry itself refuses connections.
        let pushed = push_catalog_image(b, "order/catalog:v1", &files("order"))
            .await
            .expect("push");
        let conf = format!(
            r#"
[[registry]]
location = "{CLOSED}"
insecure = true
[[registry.mirror]]
location = "{}"
insecure = true
[[registry.mirror]]
location = "{}"
insecure = true
"#,
            a.host(),
            b.host()
        );
        let tmp = tempfile::tempdir().expect("tmp");
        let p = puller(&tmp, &conf);
        let none = DockerConfig::default();
        let img = p
            .pull(
                &format!("{CLOSED}/order/catalog:v1"),
                &Extract::CatalogConfigs,
                &none,
            )
            .await
            .expect("second mirror serves it");
        assert_eq!(img.digest, pushed.digest);
        assert_eq!(
            img.reference,
            format!("{CLOSED}/order/catalog@{}", pushed.digest)
        );

        // Nobody has this one: the registry's error, with what each mirror said.
        let e = p
            .pull(
                &format!("{CLOSED}/order/missing:v1"),
                &Extract::CatalogConfigs,
                &none,
            )
            .await
            .expect_err("no source has it");
        let text = e.to_string();
        assert!(matches!(e, ImageError::AllSourcesFailed { .. }), "{text}");
        assert!(
            e.is_retryable(),
            "the registry itself was unreachable: {text}"
        );
        assert!(text.contains("mirrors also failed"), "{text}");
        assert!(text.contains(a.host()) && text.contains(b.host()), "{text}");
        assert!(text.contains("not found"), "{text}");
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn blocked_registry_is_a_terminal_error_naming_registry_and_file() {
        crypto();
        let m = mirror_a();
        let pushed = push_catalog_image(m, "blocked/catalog:v1", &files("blocked"))
            .await
            .expect("push");
        let conf = format!(
            r#"
[[registry]]
prefix = "{}/blocked"
location = "{}/blocked"
blocked = true
"#,
            m.host(),
            m.host()
        );
        let tmp = tempfile::tempdir().expect("tmp");
        let p = puller(&tmp, &conf);
        let none = DockerConfig::default();
        for image in [format!("{}/blocked/catalog:v1", m.host()), pushed.reference] {
            let e = p
                .pull(&image, &Extract::CatalogConfigs, &none)
                .await
                .expect_err("blocked");
            assert_eq!(
                e.to_string(),
                format!(
                    "image {image}: registry \"{}/blocked\" is blocked in /test/registries.conf",
                    m.host()
                )
            );
            assert!(!e.is_retryable());
            assert!(e.is_blocked());
            let bundle = crate::bundle::BundleImageError::Pull(e);
            assert!(
                bundle.is_terminal(false),
                "blocked is terminal even for tags"
            );
            let e = p.resolve(&image, &none).await.expect_err("blocked");
            assert!(e.is_blocked(), "{e}");
        }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn mirror_by_digest_only_sends_tags_to_the_registry() {
        crypto();
        let m = mirror_a();
        let pushed = push_catalog_image(m, "digestonly/catalog:v1", &files("digestonly"))
            .await
            .expect("push");
        let conf = format!(
            r#"
[[registry]]
location = "{CLOSED}"
insecure = true
mirror-by-digest-only = true
[[registry.mirror]]
location = "{}"
insecure = true
"#,
            m.host()
        );
        let tmp = tempfile::tempdir().expect("tmp");
        let p = puller(&tmp, &conf);
        let none = DockerConfig::default();
        // By tag: the mirror is not asked; the (closed) registry fails.
        let e = p
            .pull(
                &format!("{CLOSED}/digestonly/catalog:v1"),
                &Extract::CatalogConfigs,
                &none,
            )
            .await
            .expect_err("tag goes to the registry");
        assert!(matches!(e, ImageError::Unavailable { .. }), "{e}");
        assert!(!e.to_string().contains(m.host()), "{e}");
        // By digest: the mirror serves it.
        let img = p
            .pull(
                &format!("{CLOSED}/digestonly/catalog@{}", pushed.digest),
                &Extract::CatalogConfigs,
                &none,
            )
            .await
            .expect("digest from the mirror");
        assert_eq!(img.digest, pushed.digest);
    }
}
