//! A real OCI registry for tests: the Debian `docker-registry` (distribution 2.8)
//! started as a child process on `127.0.0.1:<free port>` with storage in a temp dir,
//! plain HTTP or htpasswd auth + TLS (self-signed CA made with the `openssl` CLI).
//! The process runs under `sh -c '… & cat >/dev/null; kill; rm -rf <tempdir>'` with its
//! stdin piped from the test process, so it dies (and its storage is removed) with the
//! test process even on a crash or when held in a `static`, and on `Drop`.
//!
//! Also: builders of single-layer images from `path → bytes` (plus raw, possibly
//! hostile tar entries) with config labels, and push helpers for catalog and bundle
//! images (labels of docs/concepts/rendering.md §5.8).

use std::collections::BTreeMap;
use std::io::Write as _;
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context as _, bail};
use oci_client::client::{Certificate, CertificateEncoding, ClientConfig, ClientProtocol};
use oci_client::secrets::RegistryAuth;
use oci_client::{Client, Reference};
use sha2::{Digest as _, Sha256};

use crate::image::{CATALOG_CONFIGS_LABEL, Credentials, DockerConfig, PullerConfig};

/// Username and password accepted by [`TestRegistry::start_with_auth_tls`].
pub const TEST_USER: &str = "olmv1";
pub const TEST_PASSWORD: &str = "olmv1-test-pw";
/// bcrypt (cost 4) of TEST_PASSWORD, computed once (no htpasswd tool needed at test time).
pub const TEST_HTPASSWD: &str =
    "olmv1:$2b$04$q/htKJ6Xy2q8R4eLa4xElOxH.MA8D3sz5c.Dgcjd2eTbnqS41sYpS\n";

/// A running `docker-registry` child process.
pub struct TestRegistry {
    host: String,
    storage: PathBuf,
    ca_pem: Option<Vec<u8>>,
    auth: bool,
    /// The `sh` wrapper of the registry; behind a lock so that a shared (`static`)
    /// registry can be stopped and started again ([`Self::stop`], [`Self::start_again`]).
    child: std::sync::Mutex<Option<Child>>,
    /// `(docker-registry binary, config file, directory)` to start it again.
    serve: Option<(PathBuf, PathBuf, PathBuf)>,
    log: PathBuf,
    _dir: tempfile::TempDir,
}

impl std::fmt::Debug for TestRegistry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TestRegistry")
            .field("host", &self.host)
            .field("auth", &self.auth)
            .finish()
    }
}

pub(super) fn registry_binary() -> anyhow::Result<PathBuf> {
    for p in ["/usr/bin/docker-registry", "/usr/sbin/docker-registry"] {
        if Path::new(p).exists() {
            return Ok(PathBuf::from(p));
        }
    }
    bail!(
        "the Debian package `docker-registry` is not installed (no /usr/bin/docker-registry): \
         run `hack/prereqs.sh test` as root, which installs it without starting its service"
    )
}

fn free_port() -> anyhow::Result<u16> {
    Ok(super::control_plane::free_port()?)
}

fn openssl(dir: &Path, args: &[&str]) -> anyhow::Result<()> {
    let out = Command::new("openssl")
        .args(args)
        .current_dir(dir)
        .output()
        .context(
            "running the `openssl` CLI (needed to make the test registry's TLS certificate)",
        )?;
    if !out.status.success() {
        bail!(
            "openssl {:?} failed: {}",
            args,
            String::from_utf8_lossy(&out.stderr)
        );
    }
    Ok(())
}

impl TestRegistry {
    /// Plain-HTTP registry without auth.
    pub fn start() -> anyhow::Result<Self> {
        Self::start_inner(false)
    }

    /// Registry with htpasswd auth ([`TEST_USER`]/[`TEST_PASSWORD`]) served over TLS
    /// with a certificate for `127.0.0.1` signed by a fresh CA ([`Self::ca_pem`]).
    pub fn start_with_auth_tls() -> anyhow::Result<Self> {
        Self::start_inner(true)
    }

    fn start_inner(secure: bool) -> anyhow::Result<Self> {
        // The push client (oci-client → reqwest → rustls) needs a process-wide provider.
        let _ = rustls::crypto::aws_lc_rs::default_provider().install_default();
        let bin = registry_binary()?;
        let dir = tempfile::Builder::new()
            .prefix("olmv1-registry-")
            .tempdir()?;
        let storage = dir.path().join("storage");
        std::fs::create_dir_all(&storage)?;
        let mut extra = String::new();
        let mut ca_pem = None;
        if secure {
            let d = dir.path();
            openssl(
                d,
                &[
                    "req",
                    "-x509",
                    "-newkey",
                    "rsa:2048",
                    "-nodes",
                    "-keyout",
                    "ca.key",
                    "-out",
                    "ca.crt",
                    "-days",
                    "2",
                    "-subj",
                    "/CN=olmv1 test CA",
                ],
            )?;
            openssl(
                d,
                &[
                    "req",
                    "-newkey",
                    "rsa:2048",
                    "-nodes",
                    "-keyout",
                    "tls.key",
                    "-out",
                    "tls.csr",
                    "-subj",
                    "/CN=127.0.0.1",
                ],
            )?;
            std::fs::write(
                d.join("ext.cnf"),
                "subjectAltName=IP:127.0.0.1,DNS:localhost\nbasicConstraints=CA:FALSE\nkeyUsage=digitalSignature,keyEncipherment\nextendedKeyUsage=serverAuth\n",
            )?;
            openssl(
                d,
                &[
                    "x509",
                    "-req",
                    "-in",
                    "tls.csr",
                    "-CA",
                    "ca.crt",
                    "-CAkey",
                    "ca.key",
                    "-CAcreateserial",
                    "-out",
                    "tls.crt",
                    "-days",
                    "2",
                    "-extfile",
                    "ext.cnf",
                ],
            )?;
            std::fs::write(d.join("htpasswd"), TEST_HTPASSWD)?;
            ca_pem = Some(std::fs::read(d.join("ca.crt"))?);
            extra = format!(
                "  tls:\n    certificate: {}\n    key: {}\nauth:\n  htpasswd:\n    realm: olmv1-test\n    path: {}\n",
                d.join("tls.crt").display(),
                d.join("tls.key").display(),
                d.join("htpasswd").display()
            );
        }
        let mut last_err = None;
        for _ in 0..3 {
            let port = free_port()?;
            let cfg = dir.path().join("config.yml");
            std::fs::write(
                &cfg,
                format!(
                    "version: 0.1\nlog:\n  level: warn\n  accesslog:\n    disabled: true\nstorage:\n  filesystem:\n    rootdirectory: {}\n  delete:\n    enabled: true\nhttp:\n  addr: 127.0.0.1:{port}\n  secret: olmv1-test-secret\n{extra}",
                    storage.display()
                ),
            )?;
            let log = dir.path().join(format!("registry-{port}.log"));
            let child = spawn_serve(&bin, &cfg, dir.path(), &log)?;
            let host = format!("127.0.0.1:{port}");
            let mut reg = TestRegistry {
                host: host.clone(),
                storage: storage.clone(),
                ca_pem: ca_pem.clone(),
                auth: secure,
                child: std::sync::Mutex::new(Some(child)),
                serve: Some((bin.clone(), cfg.clone(), dir.path().to_path_buf())),
                log: log.clone(),
                _dir: tempfile::tempdir()?,
            };
            let deadline = Instant::now() + Duration::from_secs(15);
            let mut ready = false;
            while Instant::now() < deadline {
                if TcpStream::connect(&host).is_ok() {
                    ready = true;
                    break;
                }
                if let Some(c) = reg.child.get_mut().ok().and_then(|c| c.as_mut())
                    && let Ok(Some(_)) = c.try_wait()
                {
                    break;
                }
                std::thread::sleep(Duration::from_millis(50));
            }
            if ready {
                reg._dir = dir;
                return Ok(reg);
            }
            last_err = Some(format!(
                "docker-registry did not start on {host}: {}",
                std::fs::read_to_string(&log).unwrap_or_default()
            ));
            drop(reg);
        }
        bail!(last_err.unwrap_or_default())
    }

    /// A handle to a plain-HTTP registry without auth that runs elsewhere (e.g. started
    /// by `olmv1 testenv registry`), for pushing; dropping it stops nothing.
    pub fn existing(host: &str) -> anyhow::Result<Self> {
        let dir = tempfile::tempdir()?;
        Ok(TestRegistry {
            host: host.to_owned(),
            storage: PathBuf::new(),
            ca_pem: None,
            auth: false,
            child: std::sync::Mutex::new(None),
            serve: None,
            log: dir.path().join("registry.log"),
            _dir: dir,
        })
    }

    /// `127.0.0.1:<port>`.
    pub fn host(&self) -> &str {
        &self.host
    }

    /// The storage root (`docker/registry/v2/...`), e.g. to corrupt blobs.
    pub fn storage_dir(&self) -> &Path {
        &self.storage
    }

    /// Path of a stored blob's data (digest `sha256:<hex>`).
    pub fn blob_data_path(&self, digest: &str) -> PathBuf {
        let hex = digest.trim_start_matches("sha256:");
        self.storage
            .join("docker/registry/v2/blobs/sha256")
            .join(&hex[..2.min(hex.len())])
            .join(hex)
            .join("data")
    }

    /// The registry's log so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// PEM of the CA that signed the TLS certificate (TLS mode only).
    pub fn ca_pem(&self) -> Option<&[u8]> {
        self.ca_pem.as_deref()
    }

    pub fn requires_auth(&self) -> bool {
        self.auth
    }

    /// A `.dockerconfigjson` document with this registry's credentials.
    pub fn dockerconfigjson(&self) -> Vec<u8> {
        let auth = data_encoding::BASE64.encode(format!("{TEST_USER}:{TEST_PASSWORD}").as_bytes());
        serde_json::json!({"auths": {self.host.clone(): {"auth": auth}}})
            .to_string()
            .into_bytes()
    }

    /// The pull secret for this registry (empty for a registry without auth).
    pub fn docker_config(&self) -> DockerConfig {
        let mut c = DockerConfig::default();
        if self.auth {
            c.insert(
                &self.host,
                Credentials {
                    username: TEST_USER.into(),
                    password: TEST_PASSWORD.into(),
                },
            );
        }
        c
    }

    /// A puller configuration that reaches this registry (insecure for plain HTTP,
    /// trusting the CA for TLS), with short retry delays.
    pub fn puller_config(&self, cache_dir: &Path) -> PullerConfig {
        let mut c = PullerConfig::new(cache_dir);
        if let Some(pem) = &self.ca_pem {
            c.ca_bundle_pem = Some(pem.clone());
        } else {
            c.insecure_registries = vec![self.host.clone()];
        }
        c.retry.initial_backoff = Duration::from_millis(20);
        c
    }

    /// An `oci-client` client (with auth) for pushing.
    pub fn client(&self) -> (Client, RegistryAuth) {
        let mut cfg = ClientConfig::default();
        match &self.ca_pem {
            Some(pem) => {
                cfg.extra_root_certificates = vec![Certificate {
                    encoding: CertificateEncoding::Pem,
                    data: pem.clone(),
                }];
            }
            None => cfg.protocol = ClientProtocol::HttpsExcept(vec![self.host.clone()]),
        }
        let auth = if self.auth {
            RegistryAuth::Basic(TEST_USER.into(), TEST_PASSWORD.into())
        } else {
            RegistryAuth::Anonymous
        };
        (Client::new(cfg), auth)
    }
}

impl Drop for TestRegistry {
    fn drop(&mut self) {
        if let Some(child) = self.child.get_mut().ok().and_then(|c| c.take()) {
            stop_child(child);
        }
    }
}

/// Starts `docker-registry serve <cfg>` under a shell that stops it when our end of its
/// stdin closes (Drop or crash) and then removes `dir`, unless `dir` holds the
/// [`super::process::KEEP_MARKER`] (a stop for a restart).
fn spawn_serve(bin: &Path, cfg: &Path, dir: &Path, log: &Path) -> anyhow::Result<Child> {
    let logf = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(log)?;
    Command::new("sh")
        .arg("-c")
        .arg(format!(
            "\"$0\" serve \"$1\" & pid=$!; cat >/dev/null; kill $pid 2>/dev/null; wait $pid; [ -e \"$2/{}\" ] || rm -rf \"$2\"",
            super::process::KEEP_MARKER
        ))
        .arg(bin)
        .arg(cfg)
        .arg(dir)
        .stdin(Stdio::piped())
        .stdout(logf.try_clone()?)
        .stderr(logf)
        .spawn()
        .context("spawning docker-registry")
}

/// Closes the wrapper's stdin (the registry is killed) and waits, bounded.
fn stop_child(mut child: Child) {
    drop(child.stdin.take()); // EOF → the shell kills the registry
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        match child.try_wait() {
            Ok(Some(_)) | Err(_) => break,
            Ok(None) if Instant::now() > deadline => {
                let _ = child.kill();
                let _ = child.wait();
                break;
            }
            Ok(None) => std::thread::sleep(Duration::from_millis(20)),
        }
    }
}

impl TestRegistry {
    /// Stops the registry process, keeping its storage, configuration and port (a fault
    /// test: clients now get "connection refused"). [`Self::start_again`] undoes it.
    pub fn stop(&self) -> anyhow::Result<()> {
        let Some((_, _, dir)) = &self.serve else {
            bail!("this registry was not started here: it cannot be stopped");
        };
        let mut guard = self
            .child
            .lock()
            .map_err(|_| anyhow::anyhow!("registry lock poisoned"))?;
        let Some(child) = guard.take() else {
            bail!("the registry on {} is not running", self.host);
        };
        let marker = dir.join(super::process::KEEP_MARKER);
        std::fs::write(&marker, b"")?;
        stop_child(child);
        std::fs::remove_file(&marker)?;
        // The port is free once nothing listens on it any more.
        let deadline = Instant::now() + Duration::from_secs(5);
        while TcpStream::connect(&self.host).is_ok() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(20));
        }
        Ok(())
    }

    /// Starts a registry stopped by [`Self::stop`] again on the same port and storage,
    /// and waits until it accepts connections.
    pub fn start_again(&self) -> anyhow::Result<()> {
        let Some((bin, cfg, dir)) = &self.serve else {
            bail!("this registry was not started here: it cannot be started");
        };
        let mut guard = self
            .child
            .lock()
            .map_err(|_| anyhow::anyhow!("registry lock poisoned"))?;
        if guard.is_some() {
            bail!("the registry on {} is already running", self.host);
        }
        let mut child = spawn_serve(bin, cfg, dir, &self.log)?;
        let deadline = Instant::now() + Duration::from_secs(15);
        while TcpStream::connect(&self.host).is_err() {
            if let Ok(Some(status)) = child.try_wait() {
                bail!(
                    "docker-registry exited ({status}) when started again on {}: {}",
                    self.host,
                    self.log()
                );
            }
            if Instant::now() > deadline {
                *guard = Some(child);
                bail!("docker-registry did not listen again on {}", self.host);
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        *guard = Some(child);
        Ok(())
    }
}

/// One tar entry, written as given (paths are NOT validated: hostile cases welcome).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TarEntry {
    File { path: String, data: Vec<u8> },
    Dir { path: String },
    Symlink { path: String, target: String },
    HardLink { path: String, target: String },
    CharDevice { path: String },
    BlockDevice { path: String },
    Fifo { path: String },
}

/// Layer compression for built images.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum LayerCompression {
    #[default]
    Gzip,
    None,
    Zstd,
}

/// A single-layer image to build: files (`path → bytes`), extra raw entries appended
/// after them, config labels.
#[derive(Clone, Debug, Default)]
pub struct ImageSpec {
    pub files: BTreeMap<String, Vec<u8>>,
    pub entries: Vec<TarEntry>,
    pub labels: BTreeMap<String, String>,
    pub compression: LayerCompression,
}

/// Result of a push.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PushedImage {
    /// `<host>/<repo>@sha256:…`
    pub reference: String,
    /// Manifest digest.
    pub digest: String,
    /// Manifest size in bytes (for building indexes).
    pub manifest_size: u64,
    /// Digests of the layer blobs.
    pub layer_digests: Vec<String>,
    /// Digest of the config blob.
    pub config_digest: String,
}

fn raw_header(
    path: &str,
    kind: tar::EntryType,
    size: u64,
    link: Option<&str>,
) -> anyhow::Result<tar::Header> {
    let mut h = tar::Header::new_gnu();
    h.set_entry_type(kind);
    h.set_size(size);
    h.set_mode(if kind.is_dir() { 0o755 } else { 0o644 });
    h.set_mtime(0);
    let old = h.as_old_mut();
    if path.len() > old.name.len() || link.is_some_and(|l| l.len() > old.linkname.len()) {
        bail!("raw tar entry path too long for a test header: {path}");
    }
    old.name = [0; 100];
    old.name[..path.len()].copy_from_slice(path.as_bytes());
    if let Some(l) = link {
        old.linkname = [0; 100];
        old.linkname[..l.len()].copy_from_slice(l.as_bytes());
    }
    h.set_cksum();
    Ok(h)
}

/// Build an uncompressed tar from files (with their parent directories) and entries.
pub fn build_tar(
    files: &BTreeMap<String, Vec<u8>>,
    entries: &[TarEntry],
) -> anyhow::Result<Vec<u8>> {
    let mut b = tar::Builder::new(Vec::new());
    let mut dirs = std::collections::BTreeSet::new();
    for path in files.keys() {
        let parts: Vec<&str> = path.split('/').collect();
        for i in 1..parts.len() {
            dirs.insert(parts[..i].join("/"));
        }
    }
    for d in &dirs {
        let mut h = tar::Header::new_gnu();
        h.set_entry_type(tar::EntryType::Directory);
        h.set_mode(0o755);
        h.set_size(0);
        h.set_mtime(0);
        b.append_data(&mut h, format!("{d}/"), std::io::empty())?;
    }
    for (path, data) in files {
        let mut h = tar::Header::new_gnu();
        h.set_entry_type(tar::EntryType::Regular);
        h.set_mode(0o644);
        h.set_size(data.len() as u64);
        h.set_mtime(0);
        b.append_data(&mut h, path, data.as_slice())?;
    }
    for e in entries {
        use tar::EntryType as T;
        let (h, data): (tar::Header, &[u8]) = match e {
            TarEntry::File { path, data } => {
                (raw_header(path, T::Regular, data.len() as u64, None)?, data)
            }
            TarEntry::Dir { path } => (raw_header(path, T::Directory, 0, None)?, &[]),
            TarEntry::Symlink { path, target } => {
                (raw_header(path, T::Symlink, 0, Some(target))?, &[])
            }
            TarEntry::HardLink { path, target } => {
                (raw_header(path, T::Link, 0, Some(target))?, &[])
            }
            TarEntry::CharDevice { path } => (raw_header(path, T::Char, 0, None)?, &[]),
            TarEntry::BlockDevice { path } => (raw_header(path, T::Block, 0, None)?, &[]),
            TarEntry::Fifo { path } => (raw_header(path, T::Fifo, 0, None)?, &[]),
        };
        b.append(&h, data)?;
    }
    Ok(b.into_inner()?)
}

/// Compress a tar for a layer; returns `(bytes, media type)`.
pub fn compress_layer(tar: &[u8], c: LayerCompression) -> anyhow::Result<(Vec<u8>, String)> {
    Ok(match c {
        LayerCompression::None => (
            tar.to_vec(),
            "application/vnd.oci.image.layer.v1.tar".into(),
        ),
        LayerCompression::Gzip => {
            let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
            e.write_all(tar)?;
            (
                e.finish()?,
                "application/vnd.oci.image.layer.v1.tar+gzip".into(),
            )
        }
        LayerCompression::Zstd => (
            zstd::encode_all(tar, 3)?,
            "application/vnd.oci.image.layer.v1.tar+zstd".into(),
        ),
    })
}

pub(crate) fn sha256_digest(data: &[u8]) -> String {
    format!(
        "sha256:{}",
        data_encoding::HEXLOWER.encode(&Sha256::digest(data))
    )
}

/// Push a single-layer image built from `spec` to `<registry>/<repo_tag>`.
pub async fn push_image(
    registry: &TestRegistry,
    repo_tag: &str,
    spec: &ImageSpec,
) -> anyhow::Result<PushedImage> {
    let tar = build_tar(&spec.files, &spec.entries)?;
    let (layer, media_type) = compress_layer(&tar, spec.compression)?;
    push_layers(registry, repo_tag, vec![(layer, media_type)], &spec.labels).await
}

/// Push an image made of the given already-encoded layers `(bytes, media type)`.
pub async fn push_layers(
    registry: &TestRegistry,
    repo_tag: &str,
    layers: Vec<(Vec<u8>, String)>,
    labels: &BTreeMap<String, String>,
) -> anyhow::Result<PushedImage> {
    let reference: Reference = format!("{}/{}", registry.host(), repo_tag).parse()?;
    let (client, auth) = registry.client();
    client
        .store_auth_if_needed(reference.resolve_registry(), &auth)
        .await;
    let config = serde_json::json!({
        "architecture": "amd64",
        "os": "linux",
        "config": {"Labels": labels},
        "rootfs": {"type": "layers", "diff_ids": []},
    });
    let config = serde_json::to_vec(&config)?;
    let config_digest = sha256_digest(&config);
    let mut layer_descs = Vec::new();
    let mut layer_digests = Vec::new();
    for (data, media_type) in layers {
        let digest = sha256_digest(&data);
        layer_descs.push(
            serde_json::json!({"mediaType": media_type, "digest": digest, "size": data.len()}),
        );
        client
            .push_blob(&reference, data, &digest)
            .await
            .context("pushing a layer blob")?;
        layer_digests.push(digest);
    }
    let config_len = config.len();
    client
        .push_blob(&reference, config, &config_digest)
        .await
        .context("pushing the config blob")?;
    let manifest = serde_json::json!({
        "schemaVersion": 2,
        "mediaType": "application/vnd.oci.image.manifest.v1+json",
        "config": {"mediaType": "application/vnd.oci.image.config.v1+json", "digest": config_digest, "size": config_len},
        "layers": layer_descs,
    });
    let mut pushed = push_manifest(
        &client,
        &reference,
        &manifest,
        "application/vnd.oci.image.manifest.v1+json",
    )
    .await?;
    pushed.layer_digests = layer_digests;
    pushed.config_digest = config_digest;
    Ok(pushed)
}

/// Pushes `manifest` (an image manifest or index of `media_type`) under `reference`.
pub(crate) async fn push_manifest(
    client: &oci_client::Client,
    reference: &Reference,
    manifest: &serde_json::Value,
    media_type: &'static str,
) -> anyhow::Result<PushedImage> {
    let body = serde_json::to_vec(manifest)?;
    let digest = sha256_digest(&body);
    let size = body.len() as u64;
    client
        .push_manifest_raw(reference, body, http::HeaderValue::from_static(media_type))
        .await
        .with_context(|| format!("pushing the {media_type}"))?;
    Ok(PushedImage {
        reference: format!(
            "{}/{}@{}",
            reference.registry(),
            reference.repository(),
            digest
        ),
        digest,
        manifest_size: size,
        layer_digests: Vec::new(),
        config_digest: String::new(),
    })
}

/// Push an OCI image index over already pushed manifests `(image, os, architecture)`.
pub async fn push_index(
    registry: &TestRegistry,
    repo_tag: &str,
    manifests: &[(&PushedImage, &str, &str)],
) -> anyhow::Result<PushedImage> {
    let reference: Reference = format!("{}/{}", registry.host(), repo_tag).parse()?;
    let (client, auth) = registry.client();
    client
        .store_auth_if_needed(reference.resolve_registry(), &auth)
        .await;
    let entries: Vec<_> = manifests
        .iter()
        .map(|(img, os, arch)| {
            serde_json::json!({
                "mediaType": "application/vnd.oci.image.manifest.v1+json",
                "digest": img.digest, "size": img.manifest_size,
                "platform": {"os": os, "architecture": arch},
            })
        })
        .collect();
    let index = serde_json::json!({
        "schemaVersion": 2,
        "mediaType": "application/vnd.oci.image.index.v1+json",
        "manifests": entries,
    });
    push_manifest(
        &client,
        &reference,
        &index,
        "application/vnd.oci.image.index.v1+json",
    )
    .await
}

/// Push a catalog image: `files` are paths relative to `/configs` (e.g.
/// `mypkg/catalog.yaml`), label `operators.operatorframework.io.index.configs.v1=/configs`.
pub async fn push_catalog_image(
    registry: &TestRegistry,
    repo_tag: &str,
    files: &BTreeMap<String, Vec<u8>>,
) -> anyhow::Result<PushedImage> {
    let spec = ImageSpec {
        files: files
            .iter()
            .map(|(p, d)| (format!("configs/{}", p.trim_start_matches('/')), d.clone()))
            .collect(),
        labels: BTreeMap::from([(CATALOG_CONFIGS_LABEL.to_string(), "/configs".to_string())]),
        ..Default::default()
    };
    push_image(registry, repo_tag, &spec).await
}

/// The labels of a registry+v1 bundle image.
pub fn bundle_labels(package: &str, channels: &[&str]) -> BTreeMap<String, String> {
    BTreeMap::from([
        (
            "operators.operatorframework.io.bundle.mediatype.v1".into(),
            "registry+v1".into(),
        ),
        (
            "operators.operatorframework.io.bundle.manifests.v1".into(),
            "manifests/".into(),
        ),
        (
            "operators.operatorframework.io.bundle.metadata.v1".into(),
            "metadata/".into(),
        ),
        (
            "operators.operatorframework.io.bundle.package.v1".into(),
            package.into(),
        ),
        (
            "operators.operatorframework.io.bundle.channels.v1".into(),
            channels.join(","),
        ),
    ])
}

/// Push a registry+v1 bundle image: `files` are paths relative to the image root
/// (`manifests/…`, optionally `metadata/annotations.yaml`, which is generated from
/// the labels when absent).
pub async fn push_bundle_image(
    registry: &TestRegistry,
    repo_tag: &str,
    files: &BTreeMap<String, Vec<u8>>,
    package: &str,
    channels: &[&str],
) -> anyhow::Result<PushedImage> {
    let labels = bundle_labels(package, channels);
    let mut files = files.clone();
    files
        .entry("metadata/annotations.yaml".to_string())
        .or_insert_with(|| {
            let mut s = String::from("annotations:\n");
            for (k, v) in &labels {
                s.push_str(&format!(
                    "  {k}: {}\n",
                    serde_json::Value::String(v.clone())
                ));
            }
            s.into_bytes()
        });
    push_image(
        registry,
        repo_tag,
        &ImageSpec {
            files,
            labels,
            ..Default::default()
        },
    )
    .await
}
