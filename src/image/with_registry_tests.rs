//! The image tests that need a real docker-registry process; hack/test.sh runs them
//! in the integration tier (they are selected or skipped by the `::with_registry::`
//! path segment). End-to-end pulls, hostile images, limits and the cache's GC against
//! one shared plain instance and one auth+TLS instance per test process (each test
//! uses its own repository names, so they run in parallel).

use std::io::Write as _;
use std::path::Path;
use std::sync::OnceLock;

use super::*;
use crate::testenv::registry::{
    ImageSpec, LayerCompression, TarEntry, TestRegistry, build_tar, compress_layer,
    push_bundle_image, push_catalog_image, push_image, push_index, push_layers,
};

fn plain() -> &'static TestRegistry {
    static R: OnceLock<TestRegistry> = OnceLock::new();
    R.get_or_init(|| {
        TestRegistry::start().unwrap_or_else(|e| panic!("starting the test registry: {e:#}"))
    })
}

fn secure() -> &'static TestRegistry {
    static R: OnceLock<TestRegistry> = OnceLock::new();
    R.get_or_init(|| {
        TestRegistry::start_with_auth_tls()
            .unwrap_or_else(|e| panic!("starting the auth+TLS test registry: {e:#}"))
    })
}

impl Area {
    fn puller(&self, reg: &TestRegistry) -> ImagePuller {
        ImagePuller::new(reg.puller_config(&self.cache())).unwrap()
    }
}

fn read(p: &Path) -> String {
    std::fs::read_to_string(p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

// ---------- real registry ----------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pulls_catalog_image_configs_dir() {
    crypto();
    let reg = plain();
    let pushed = push_catalog_image(
        reg,
        "pull/catalog:v1",
        &files(&[(
            "pkg-a/catalog.json",
            r#"{"schema":"olm.package","name":"pkg-a"}"#,
        )]),
    )
    .await
    .unwrap();
    let area = Area::new();
    let p = area.puller(reg);
    let img = p
        .pull(
            &format!("{}/pull/catalog:v1", reg.host()),
            &Extract::CatalogConfigs,
            &DockerConfig::default(),
        )
        .await
        .unwrap();
    assert_eq!(img.reference, pushed.reference);
    assert_eq!(img.digest, pushed.digest);
    assert!(!img.from_cache);
    assert_eq!(
        img.labels.get(CATALOG_CONFIGS_LABEL).map(String::as_str),
        Some("/configs")
    );
    assert!(img.dir.starts_with(area.cache()));
    assert_eq!(
        read(&img.dir.join("pkg-a/catalog.json")),
        r#"{"schema":"olm.package","name":"pkg-a"}"#
    );
    assert!(
        !img.dir.join("configs").exists(),
        "only the configs dir content is extracted"
    );
    assert_eq!(area.work_left(), Vec::<String>::new());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pulls_bundle_image_whole() {
    crypto();
    let reg = plain();
    let pushed = push_bundle_image(
        reg,
        "pull/bundle:v1.0.0",
        &files(&[("manifests/csv.yaml", "kind: ClusterServiceVersion\n")]),
        "my-pkg",
        &["stable", "fast"],
    )
    .await
    .unwrap();
    let area = Area::new();
    let img = area
        .puller(reg)
        .pull(&pushed.reference, &Extract::Whole, &DockerConfig::default())
        .await
        .unwrap();
    assert_eq!(img.reference, pushed.reference);
    assert_eq!(
        read(&img.dir.join("manifests/csv.yaml")),
        "kind: ClusterServiceVersion\n"
    );
    let ann = read(&img.dir.join("metadata/annotations.yaml"));
    assert!(
        ann.contains("operators.operatorframework.io.bundle.package.v1: \"my-pkg\""),
        "{ann}"
    );
    assert_eq!(
        img.labels
            .get("operators.operatorframework.io.bundle.channels.v1")
            .map(String::as_str),
        Some("stable,fast")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tag_resolves_to_digest_cache_hits_and_new_push_changes_digest() {
    crypto();
    let reg = plain();
    let tag = format!("{}/cache/catalog:latest", reg.host());
    let first = push_catalog_image(reg, "cache/catalog:latest", &files(&[("p/c.json", "one")]))
        .await
        .unwrap();
    let area = Area::new();
    let p = area.puller(reg);
    let none = DockerConfig::default();
    assert_eq!(p.resolve(&tag, &none).await.unwrap(), first.reference);

    let a = p.pull(&tag, &Extract::CatalogConfigs, &none).await.unwrap();
    let after_first = p.stats();
    assert_eq!(after_first.blobs_downloaded, 2, "config + one layer");
    assert_eq!(a.reference, first.reference);

    // Same tag, unchanged image: one manifest request, no blob download.
    let b = p.pull(&tag, &Extract::CatalogConfigs, &none).await.unwrap();
    let s = p.stats();
    assert!(b.from_cache);
    assert_eq!(
        b,
        PulledImage {
            from_cache: true,
            ..a.clone()
        }
    );
    assert_eq!(s.blobs_downloaded, after_first.blobs_downloaded);
    assert_eq!(s.bytes_downloaded, after_first.bytes_downloaded);
    assert_eq!(s.manifest_requests, after_first.manifest_requests + 1);
    assert_eq!(s.cache_hits, 1);

    // Digest reference: no request at all. A fresh puller over the same cache dir hits too.
    let p2 = ImagePuller::new(reg.puller_config(&area.cache())).unwrap();
    let c = p2
        .pull(&first.reference, &Extract::CatalogConfigs, &none)
        .await
        .unwrap();
    assert!(c.from_cache);
    assert_eq!(
        p2.stats(),
        CacheStats {
            cache_hits: 1,
            ..Default::default()
        }
    );

    // New image on the same tag → new digest and a real download.
    let second = push_catalog_image(reg, "cache/catalog:latest", &files(&[("p/c.json", "two")]))
        .await
        .unwrap();
    assert_ne!(second.digest, first.digest);
    assert_eq!(p.resolve(&tag, &none).await.unwrap(), second.reference);
    let d = p.pull(&tag, &Extract::CatalogConfigs, &none).await.unwrap();
    assert!(!d.from_cache);
    assert_eq!(d.digest, second.digest);
    assert_eq!(read(&d.dir.join("p/c.json")), "two");
    assert_eq!(
        read(&a.dir.join("p/c.json")),
        "one",
        "the old digest's content is kept"
    );
    assert_eq!(p.stats().blobs_downloaded, after_first.blobs_downloaded + 2);

    assert_eq!(p.prune_except(&[&second.digest]).unwrap(), 1);
    assert!(!a.dir.exists() && d.dir.exists());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn image_index_picks_linux_platform() {
    crypto();
    let reg = plain();
    let amd = push_catalog_image(reg, "index/catalog:amd64", &files(&[("p/c.json", "amd64")]))
        .await
        .unwrap();
    let arm = push_catalog_image(reg, "index/catalog:s390x", &files(&[("p/c.json", "s390x")]))
        .await
        .unwrap();
    let idx = push_index(
        reg,
        "index/catalog:multi",
        &[(&arm, "linux", "s390x"), (&amd, "linux", "amd64")],
    )
    .await
    .unwrap();
    let area = Area::new();
    let img = area
        .puller(reg)
        .pull(
            &format!("{}/index/catalog:multi", reg.host()),
            &Extract::CatalogConfigs,
            &DockerConfig::default(),
        )
        .await
        .unwrap();
    assert_eq!(img.reference, idx.reference, "pinned to the index digest");
    let want = if std::env::consts::ARCH == "s390x" {
        "s390x"
    } else {
        "amd64"
    };
    assert_eq!(read(&img.dir.join("p/c.json")), want);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn uncompressed_and_zstd_layers_with_whiteouts() {
    crypto();
    let reg = plain();
    let l1 = build_tar(
        &files(&[("configs/a/c.json", "a"), ("configs/b/c.json", "b")]),
        &[],
    )
    .unwrap();
    let l2 = build_tar(
        &files(&[("configs/a/.wh.c.json", ""), ("configs/new/c.json", "new")]),
        &[],
    )
    .unwrap();
    let layers = vec![
        compress_layer(&l1, LayerCompression::None).unwrap(),
        compress_layer(&l2, LayerCompression::Zstd).unwrap(),
    ];
    let pushed = push_layers(reg, "layers/zstd:v1", layers, &catalog_labels())
        .await
        .unwrap();
    let area = Area::new();
    let img = area
        .puller(reg)
        .pull(
            &pushed.reference,
            &Extract::CatalogConfigs,
            &DockerConfig::default(),
        )
        .await
        .unwrap();
    assert!(!img.dir.join("a/c.json").exists(), "whited out");
    assert_eq!(read(&img.dir.join("b/c.json")), "b");
    assert_eq!(read(&img.dir.join("new/c.json")), "new");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn auth_tls_registry_with_pull_secret_and_custom_ca() {
    crypto();
    let reg = secure();
    let pushed = push_catalog_image(
        reg,
        "secure/catalog:v1",
        &files(&[("p/c.json", "secret content")]),
    )
    .await
    .unwrap();
    let reference = format!("{}/secure/catalog:v1", reg.host());
    let secret = DockerConfig::parse("my-pull-secret", &reg.dockerconfigjson()).unwrap();

    let area = Area::new();
    let p = area.puller(reg);
    let img = p
        .pull(&reference, &Extract::CatalogConfigs, &secret)
        .await
        .unwrap();
    assert_eq!(img.reference, pushed.reference);
    assert_eq!(read(&img.dir.join("p/c.json")), "secret content");

    // Without the secret: a clear, terminal 401.
    let area2 = Area::new();
    let e = area2
        .puller(reg)
        .pull(
            &reference,
            &Extract::CatalogConfigs,
            &DockerConfig::default(),
        )
        .await
        .unwrap_err();
    assert!(
        matches!(e, ImageError::Unauthorized { status: 401, .. }),
        "{e:?}"
    );
    let msg = e.to_string();
    assert!(
        msg.contains(&reference) && msg.contains("pull secret") && msg.contains("401"),
        "{msg}"
    );
    assert!(!e.is_retryable());
    area2.assert_clean();

    // Wrong password: same.
    let mut bad = DockerConfig::default();
    bad.insert(
        reg.host(),
        Credentials {
            username: "olmv1".into(),
            password: "nope".into(),
        },
    );
    let e = Area::new()
        .puller(reg)
        .pull(&reference, &Extract::CatalogConfigs, &bad)
        .await
        .unwrap_err();
    assert!(matches!(e, ImageError::Unauthorized { .. }), "{e:?}");

    // Without the CA the TLS handshake fails (no silent fallback to trusting it).
    let area3 = Area::new();
    let mut cfg = reg.puller_config(&area3.cache());
    cfg.ca_bundle_pem = None;
    cfg.retry.max_attempts = 1;
    let e = ImagePuller::new(cfg)
        .unwrap()
        .pull(&reference, &Extract::CatalogConfigs, &secret)
        .await
        .unwrap_err();
    assert!(matches!(e, ImageError::Unavailable { .. }), "{e:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn missing_image_is_a_terminal_not_found() {
    crypto();
    let reg = plain();
    let area = Area::new();
    let p = area.puller(reg);
    let reference = format!("{}/does/not-exist:v1", reg.host());
    let e = p
        .pull(&reference, &Extract::Whole, &DockerConfig::default())
        .await
        .unwrap_err();
    assert!(matches!(e, ImageError::NotFound { .. }), "{e:?}");
    assert!(
        e.to_string().contains(&reference) && e.to_string().contains("not found"),
        "{e}"
    );
    assert!(!e.is_retryable());
    assert_eq!(p.stats().manifest_requests, 1, "404 is not retried");
    area.assert_clean();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn corrupted_blob_is_a_digest_mismatch() {
    crypto();
    let reg = plain();
    let pushed = push_catalog_image(
        reg,
        "corrupt/catalog:v1",
        &files(&[("p/c.json", "corrupt-me")]),
    )
    .await
    .unwrap();
    let blob = reg.blob_data_path(&pushed.layer_digests[0]);
    let len = std::fs::metadata(&blob).unwrap().len() as usize;
    std::fs::write(&blob, vec![b'x'; len]).unwrap();
    let area = Area::new();
    let e = area
        .puller(reg)
        .pull(
            &pushed.reference,
            &Extract::CatalogConfigs,
            &DockerConfig::default(),
        )
        .await
        .unwrap_err();
    assert!(matches!(e, ImageError::DigestMismatch { .. }), "{e:?}");
    let msg = e.to_string();
    assert!(
        msg.contains("digest mismatch")
            && msg.contains(&format!("expected {}", pushed.layer_digests[0])),
        "{msg}"
    );
    area.assert_clean();
}

// ---------- hostile images: each ends in a clear error, nothing written outside ----------

async fn pull_hostile(repo: &str, spec: ImageSpec, extract: Extract) -> (ImageError, Area) {
    crypto();
    let reg = plain();
    let pushed = push_image(reg, &format!("hostile/{repo}:v1"), &spec)
        .await
        .unwrap();
    let area = Area::new();
    let e = area
        .puller(reg)
        .pull(&pushed.reference, &extract, &DockerConfig::default())
        .await
        .unwrap_err();
    area.assert_clean();
    assert!(!e.is_retryable(), "{e}");
    (e, area)
}

fn catalog_spec(entries: Vec<TarEntry>) -> ImageSpec {
    ImageSpec {
        files: files(&[("configs/p/c.json", "{}")]),
        entries,
        labels: catalog_labels(),
        compression: LayerCompression::Gzip,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hostile_missing_label() {
    let spec = ImageSpec {
        files: files(&[("configs/p/c.json", "{}")]),
        ..Default::default()
    };
    let (e, _) = pull_hostile("nolabel", spec, Extract::CatalogConfigs).await;
    assert!(
        e.to_string()
            .contains("catalog image is missing the required label \"operators.operatorframework.io.index.configs.v1\""),
        "{e}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hostile_label_outside_image() {
    let mut spec = catalog_spec(vec![]);
    spec.labels
        .insert(CATALOG_CONFIGS_LABEL.into(), "../../etc".into());
    let (e, _) = pull_hostile("labelout", spec, Extract::CatalogConfigs).await;
    assert!(matches!(e, ImageError::LabelOutsideImage { .. }), "{e:?}");
    assert!(e.to_string().contains("points outside the image"), "{e}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hostile_dotdot_entry() {
    let spec = catalog_spec(vec![TarEntry::File {
        path: "configs/../../../escaped-dotdot".into(),
        data: b"x".to_vec(),
    }]);
    let (e, _) = pull_hostile("dotdot", spec, Extract::CatalogConfigs).await;
    assert!(matches!(e, ImageError::UnsafeEntry { .. }), "{e:?}");
    assert!(e.to_string().contains("\"..\""), "{e}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hostile_absolute_path_entry() {
    let target = std::env::temp_dir().join(format!("olmv1-escaped-abs-{}", std::process::id()));
    let spec = ImageSpec {
        files: files(&[("p.json", "{}")]),
        entries: vec![TarEntry::File {
            path: target.display().to_string(),
            data: b"x".to_vec(),
        }],
        ..Default::default()
    };
    let (e, _) = pull_hostile("absolute", spec, Extract::Whole).await;
    assert!(e.to_string().contains("absolute path"), "{e}");
    assert!(!target.exists());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hostile_symlink_out() {
    let spec = catalog_spec(vec![TarEntry::Symlink {
        path: "configs/p/link".into(),
        target: "../../../../etc".into(),
    }]);
    let (e, _) = pull_hostile("symlinkout", spec, Extract::CatalogConfigs).await;
    assert!(e.to_string().contains("leaves the image"), "{e}");
    // A link that stays in the image but leaves the extracted directory is refused too.
    let spec = catalog_spec(vec![TarEntry::Symlink {
        path: "configs/p/l2".into(),
        target: "../../etc".into(),
    }]);
    let (e, _) = pull_hostile("symlinkout2", spec, Extract::CatalogConfigs).await;
    assert!(
        e.to_string().contains("outside the extracted directory"),
        "{e}"
    );
    let spec = catalog_spec(vec![TarEntry::Symlink {
        path: "configs/p/l3".into(),
        target: "/etc/passwd".into(),
    }]);
    let (e, _) = pull_hostile("symlinkabs", spec, Extract::CatalogConfigs).await;
    assert!(e.to_string().contains("absolute path"), "{e}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hostile_symlink_then_write_through_it() {
    // The link itself is inside, but a later entry tries to write through it.
    let spec = catalog_spec(vec![
        TarEntry::Symlink {
            path: "configs/d".into(),
            target: "p".into(),
        },
        TarEntry::File {
            path: "configs/d/x.json".into(),
            data: b"{}".to_vec(),
        },
    ]);
    let (e, _) = pull_hostile("symlinkthrough", spec, Extract::CatalogConfigs).await;
    assert!(e.to_string().contains("goes through the symlink"), "{e}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hostile_hardlink_out() {
    let spec = catalog_spec(vec![TarEntry::HardLink {
        path: "configs/p/hl".into(),
        target: "../../etc/passwd".into(),
    }]);
    let (e, _) = pull_hostile("hardlinkout", spec, Extract::CatalogConfigs).await;
    assert!(e.to_string().contains("hard link target"), "{e}");
    let spec = catalog_spec(vec![TarEntry::HardLink {
        path: "configs/p/hl".into(),
        target: "/etc/passwd".into(),
    }]);
    let (e, _) = pull_hostile("hardlinkabs", spec, Extract::CatalogConfigs).await;
    assert!(
        e.to_string().contains("hard link target") && e.to_string().contains("absolute"),
        "{e}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hostile_device_files() {
    let spec = catalog_spec(vec![TarEntry::CharDevice {
        path: "configs/p/null".into(),
    }]);
    let (e, _) = pull_hostile("chardev", spec, Extract::CatalogConfigs).await;
    assert!(
        e.to_string().contains("device files are not allowed"),
        "{e}"
    );
    let spec = catalog_spec(vec![TarEntry::BlockDevice {
        path: "configs/p/sda".into(),
    }]);
    let (e, _) = pull_hostile("blockdev", spec, Extract::CatalogConfigs).await;
    assert!(
        e.to_string().contains("device files are not allowed"),
        "{e}"
    );
    let spec = catalog_spec(vec![TarEntry::Fifo {
        path: "configs/p/fifo".into(),
    }]);
    let (e, _) = pull_hostile("fifo", spec, Extract::CatalogConfigs).await;
    assert!(e.to_string().contains("fifos are not allowed"), "{e}");
}

/// Peak resident set size of this process (VmHWM) in KiB.
fn peak_rss_kib() -> i64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap()
}

#[test]
fn registry_is_stopped_on_drop() {
    let reg = TestRegistry::start().unwrap();
    let host = reg.host().to_string();
    assert!(std::net::TcpStream::connect(&host).is_ok());
    drop(reg);
    assert!(
        std::net::TcpStream::connect(&host).is_err(),
        "registry still listening on {host}"
    );
}

fn gz_member(data: &[u8]) -> Vec<u8> {
    let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
    e.write_all(data).unwrap();
    e.finish().unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hostile_decompression_bomb() {
    crypto();
    let reg = plain();
    // 6 files of 400 MiB zeros (each under the single-file limit) = 2.4 GiB expanded,
    // as concatenated gzip members: a few MB compressed.
    let zeros = gz_member(&vec![0u8; 4 << 20]);
    let mut layer = Vec::new();
    let mut expanded: u64 = 0;
    for i in 0..6 {
        let mut h = tar::Header::new_gnu();
        h.set_path(format!("configs/bomb{i}")).unwrap();
        h.set_entry_type(tar::EntryType::Regular);
        h.set_size(400 << 20);
        h.set_mode(0o644);
        h.set_cksum();
        layer.extend(gz_member(h.as_bytes()));
        for _ in 0..100 {
            layer.extend_from_slice(&zeros);
        }
        expanded += 512 + (400 << 20);
    }
    layer.extend(gz_member(&[0u8; 1024]));
    assert!(expanded >= 2 << 30);
    assert!(
        layer.len() < 8 << 20,
        "compressed bomb is {} bytes",
        layer.len()
    );
    let pushed = push_layers(
        reg,
        "hostile/bomb:v1",
        vec![(layer, "application/vnd.oci.image.layer.v1.tar+gzip".into())],
        &catalog_labels(),
    )
    .await
    .unwrap();
    let area = Area::new();
    let hwm_before = peak_rss_kib();
    let start = Instant::now();
    let e = area
        .puller(reg)
        .pull(
            &pushed.reference,
            &Extract::CatalogConfigs,
            &DockerConfig::default(),
        )
        .await
        .unwrap_err();
    let took = start.elapsed();
    assert!(
        matches!(
            e,
            ImageError::LimitExceeded {
                limit: 1073741824,
                ..
            }
        ),
        "{e:?}"
    );
    assert!(
        e.to_string()
            .contains("expanded size exceeds the limit of 1073741824"),
        "{e}"
    );
    assert!(took < Duration::from_secs(120), "took {took:?}");
    // Streaming: the peak RSS of the whole test process grows far less than the
    // 1 GiB that was decompressed (other tests run alongside, hence the slack).
    let grown_mib = (peak_rss_kib() - hwm_before) / 1024;
    assert!(
        grown_mib < 400,
        "peak RSS grew by {grown_mib} MiB while unpacking the bomb"
    );
    area.assert_clean();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hostile_million_tiny_files() {
    crypto();
    let reg = plain();
    // 1,000,000 empty files, streamed into a gzip encoder (never the whole tar in memory).
    let gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    let mut b = tar::Builder::new(gz);
    let mut h = tar::Header::new_gnu();
    h.set_entry_type(tar::EntryType::Regular);
    h.set_size(0);
    h.set_mode(0o644);
    for i in 0..1_000_000u32 {
        h.set_path(format!("configs/f/{i}")).unwrap();
        h.set_cksum();
        b.append(&h, std::io::empty()).unwrap();
    }
    let layer = b.into_inner().unwrap().finish().unwrap();
    let pushed = push_layers(
        reg,
        "hostile/million:v1",
        vec![(layer, "application/vnd.oci.image.layer.v1.tar+gzip".into())],
        &catalog_labels(),
    )
    .await
    .unwrap();
    let area = Area::new();
    let e = area
        .puller(reg)
        .pull(
            &pushed.reference,
            &Extract::CatalogConfigs,
            &DockerConfig::default(),
        )
        .await
        .unwrap_err();
    assert!(
        matches!(e, ImageError::LimitExceeded { limit: 100000, .. }),
        "{e:?}"
    );
    assert!(
        e.to_string()
            .contains("number of tar entries exceeds the limit of 100000"),
        "{e}"
    );
    area.assert_clean();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn download_limit_is_checked_before_downloading_layers() {
    crypto();
    let reg = plain();
    // ~64 KiB of incompressible bytes.
    let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
    let noise: Vec<u8> = (0..65536)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect();
    let spec = ImageSpec {
        files: BTreeMap::from([("configs/p/noise.bin".to_string(), noise)]),
        labels: catalog_labels(),
        ..Default::default()
    };
    let pushed = push_image(reg, "limits/download:v1", &spec).await.unwrap();
    let area = Area::new();
    let mut cfg = reg.puller_config(&area.cache());
    cfg.max_download_bytes = 10_000;
    let p = ImagePuller::new(cfg).unwrap();
    let e = p
        .pull(
            &pushed.reference,
            &Extract::CatalogConfigs,
            &DockerConfig::default(),
        )
        .await
        .unwrap_err();
    assert!(
        e.to_string().contains("total layer size")
            && e.to_string().contains("exceeds the limit of 10000"),
        "{e}"
    );
    assert_eq!(
        p.stats().blobs_downloaded,
        1,
        "only the config blob was fetched"
    );
    area.assert_clean();
    let mut cfg = reg.puller_config(&area.cache());
    cfg.max_layers = 0;
    let e = ImagePuller::new(cfg)
        .unwrap()
        .pull(
            &pushed.reference,
            &Extract::CatalogConfigs,
            &DockerConfig::default(),
        )
        .await
        .unwrap_err();
    assert!(
        e.to_string()
            .contains("number of layers (1) exceeds the limit of 0"),
        "{e}"
    );
}

/// A pull holds a lease on its digest while the result lives: the GC keeps the entry
/// then, and removes it (unreferenced, no lease, not used since) afterwards; a
/// referenced entry stays; the next pull unpacks it again.
#[tokio::test]
async fn pulled_images_are_leased_and_collected_once_unused() {
    crypto();
    let reg = plain();
    let pushed = push_bundle_image(
        reg,
        "gc/bundle:v1",
        &files(&[("manifests/csv.yaml", "kind: ClusterServiceVersion\n")]),
        "gc-pkg",
        &["stable"],
    )
    .await
    .unwrap();
    let area = Area::new();
    let p = area.puller(reg);
    let none = DockerConfig::default();
    let img = p
        .pull(&pushed.reference, &Extract::Whole, &none)
        .await
        .unwrap();
    let key = gc::image_key(&gc::image_entry_name(&img.digest));
    assert!(p.leases().is_held(&key));
    let catalogs = area.root.path().join("catalogs");
    let later = std::time::SystemTime::now() + std::time::Duration::from_secs(60);
    let removed = p
        .collect_garbage(
            &crate::fbc::store::CatalogsDir(&catalogs),
            &gc::References::default(),
            later,
        )
        .unwrap();
    assert!(removed.is_empty(), "in use: {removed:?}");
    assert!(img.dir.is_dir());
    drop(img);
    assert!(!p.leases().is_held(&key));
    let mut referenced = gc::References::default();
    referenced.add_image(&pushed.reference);
    assert!(
        p.collect_garbage(
            &crate::fbc::store::CatalogsDir(&catalogs),
            &referenced,
            later
        )
        .unwrap()
        .is_empty()
    );
    let removed = p
        .collect_garbage(
            &crate::fbc::store::CatalogsDir(&catalogs),
            &gc::References::default(),
            later,
        )
        .unwrap();
    assert_eq!(removed.images.len(), 1);
    let again = p
        .pull(&pushed.reference, &Extract::Whole, &none)
        .await
        .unwrap();
    assert!(!again.from_cache, "unpacked again after the GC");
    assert!(again.dir.join("manifests/csv.yaml").is_file());
}
