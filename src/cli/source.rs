//! The catalog source of the command-line tools (`olmv1 resolve --catalog`, `olmv1
//! catalog --catalog`): an FBC file or directory that exists, an image reference
//! (pulled with [`crate::image::ImagePuller`] into `$XDG_CACHE_HOME/olmv1/catalog-images`
//! — or `~/.cache/…`, or a temporary directory — and its configs directory extracted),
//! or a ClusterCatalog name (read with the kubeconfig of `--kubeconfig` or
//! `KUBECONFIG`; content fetched from `status.urls.base` through
//! [`crate::content::ContentClient`], or through the API server's service proxy when
//! that URL names an in-cluster Service this machine cannot reach, see
//! [`super::cluster_content`]). [`CatalogSource::parse`] decides which one a flag value
//! is; the I/O is in the async methods, with blocking wrappers for the synchronous
//! command handlers.

use crate::api::ClusterCatalog;
use crate::content::{ContentClient, ContentConfig, ContentError};
use crate::fbc::model::PackageContent;
use crate::image::{DockerConfig, Extract, ImagePuller, PullerConfig};
use std::path::{Path, PathBuf};

/// Options shared by the commands that take `--catalog` (flatten into their args).
#[derive(Clone, Debug, Default, clap::Args)]
pub struct FetchArgs {
    /// Registry (host[:port]) reached over plain HTTP for images (repeatable; for
    /// loopback test registries).
    #[arg(long = "insecure-registry")]
    pub insecure_registries: Vec<String>,
    /// containers-registries.conf v2 file with registry mirrors and blocked registries
    /// (default: none; `/etc/containers/registries.conf` is not read unless named).
    #[arg(long)]
    pub registries_conf: Option<PathBuf>,
    /// Directory for pulled catalog images (default $XDG_CACHE_HOME/olmv1/catalog-images).
    #[arg(long = "image-cache-dir")]
    pub image_cache_dir: Option<PathBuf>,
    /// Kubeconfig for ClusterCatalog sources (default: KUBECONFIG, then ~/.kube/config).
    #[arg(long)]
    pub kubeconfig: Option<PathBuf>,
}

/// Where a catalog comes from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CatalogSource {
    /// An FBC file or directory.
    Path(PathBuf),
    /// A catalog image reference (tag or digest).
    Image(String),
    /// The name of a ClusterCatalog on the cluster.
    ClusterCatalog(String),
}

#[derive(Debug, thiserror::Error)]
pub enum SourceError {
    #[error("catalog {path}: {source}")]
    Fbc {
        path: String,
        #[source]
        source: crate::fbc::FbcError,
    },
    /// The image error names the image already.
    #[error("pulling the catalog: {source}")]
    Image {
        image: String,
        #[source]
        source: Box<crate::image::ImageError>,
    },
    #[error("catalog image {image}: {message}")]
    ImageSetup { image: String, message: String },
    #[error("ClusterCatalog {name:?}: {message}")]
    Cluster { name: String, message: String },
    #[error("ClusterCatalog {name:?} not found (and there is no file or directory of that name)")]
    ClusterCatalogNotFound { name: String },
    #[error(transparent)]
    Content(#[from] ContentError),
    #[error("{0}")]
    Io(String),
}

/// A package read from a source, with what the source says about its priority.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct LoadedPackage {
    pub content: PackageContent,
    /// `spec.priority` of a ClusterCatalog; `None` for files and images.
    pub priority: Option<i32>,
}

/// A catalog available as FBC on the local disk (kept alive by this value).
#[derive(Debug)]
pub struct LocalCatalog {
    pub path: PathBuf,
    _temp: Option<tempfile::TempDir>,
}

impl CatalogSource {
    /// An existing path, or a value that starts like a path (`.`, `/`, `~`), is a
    /// catalog on disk; a value with `/`, `:` or `@` (which a Kubernetes name cannot
    /// hold) is an image reference; anything else is a ClusterCatalog name.
    pub fn parse(s: &str) -> CatalogSource {
        let path = PathBuf::from(s);
        if path.exists() || s.starts_with(['.', '/', '~']) {
            CatalogSource::Path(path)
        } else if s.contains(['/', ':', '@']) {
            CatalogSource::Image(s.to_string())
        } else {
            CatalogSource::ClusterCatalog(s.to_string())
        }
    }

    /// The package's content from this source (compact for ClusterCatalogs, full
    /// otherwise).
    pub async fn load_package(
        &self,
        package: &str,
        args: &FetchArgs,
    ) -> Result<LoadedPackage, SourceError> {
        match self {
            CatalogSource::Path(p) => Ok(LoadedPackage {
                content: load_fbc(p, package)?,
                priority: None,
            }),
            CatalogSource::Image(image) => {
                let dir = pull(image, args).await?;
                Ok(LoadedPackage {
                    content: load_fbc(&dir, package)?,
                    priority: None,
                })
            }
            CatalogSource::ClusterCatalog(name) => {
                let kube = kube_client(name, args).await?;
                let catalog = read_cluster_catalog(&kube, name).await?;
                let client = ContentClient::new(ContentConfig::default())?;
                let content = super::cluster_content::package(&client, &kube, &catalog, package)
                    .await
                    .map_err(|e| content_error(name, e))?;
                Ok(LoadedPackage {
                    content: std::sync::Arc::unwrap_or_clone(content),
                    priority: Some(catalog.spec.priority),
                })
            }
        }
    }

    /// The catalog (or, for ClusterCatalogs, only `package` when given) as FBC on the
    /// local disk, for the query commands: a path as it is, an image's configs
    /// directory in the image cache, a ClusterCatalog's blobs downloaded into a
    /// temporary `catalog.jsonl`.
    pub async fn local(
        &self,
        package: Option<&str>,
        args: &FetchArgs,
    ) -> Result<LocalCatalog, SourceError> {
        match self {
            CatalogSource::Path(p) => Ok(LocalCatalog {
                path: p.clone(),
                _temp: None,
            }),
            CatalogSource::Image(image) => Ok(LocalCatalog {
                path: pull(image, args).await?,
                _temp: None,
            }),
            CatalogSource::ClusterCatalog(name) => {
                let kube = kube_client(name, args).await?;
                let catalog = read_cluster_catalog(&kube, name).await?;
                let client = ContentClient::new(ContentConfig::default())?;
                let temp = tempfile::Builder::new()
                    .prefix("olmv1-catalog-")
                    .tempdir()
                    .map_err(|e| SourceError::Io(format!("creating a temporary directory: {e}")))?;
                let path = temp.path().join("catalog.jsonl");
                super::cluster_content::download(&client, &kube, &catalog, package, &path)
                    .await
                    .map_err(|e| content_error(name, e))?;
                Ok(LocalCatalog {
                    path,
                    _temp: Some(temp),
                })
            }
        }
    }

    /// [`CatalogSource::load_package`] for synchronous callers (runs its own runtime).
    pub fn load_package_blocking(
        &self,
        package: &str,
        args: &FetchArgs,
    ) -> Result<LoadedPackage, SourceError> {
        if let CatalogSource::Path(p) = self {
            return Ok(LoadedPackage {
                content: load_fbc(p, package)?,
                priority: None,
            });
        }
        super::block_on(self.load_package(package, args)).map_err(SourceError::Io)?
    }

    /// [`CatalogSource::local`] for synchronous callers (runs its own runtime).
    pub fn local_blocking(
        &self,
        package: Option<&str>,
        args: &FetchArgs,
    ) -> Result<LocalCatalog, SourceError> {
        if let CatalogSource::Path(p) = self {
            return Ok(LocalCatalog {
                path: p.clone(),
                _temp: None,
            });
        }
        super::block_on(self.local(package, args)).map_err(SourceError::Io)?
    }
}

fn load_fbc(path: &Path, package: &str) -> Result<PackageContent, SourceError> {
    crate::fbc::load_package(path, package).map_err(|source| SourceError::Fbc {
        path: path.display().to_string(),
        source,
    })
}

/// `$XDG_CACHE_HOME/olmv1/catalog-images`, `~/.cache/olmv1/catalog-images`, or a
/// directory under the system temporary directory.
pub fn default_image_cache_dir() -> PathBuf {
    let base = std::env::var_os("XDG_CACHE_HOME")
        .map(PathBuf::from)
        .filter(|p| p.is_absolute())
        .or_else(|| {
            std::env::var_os("HOME")
                .map(PathBuf::from)
                .filter(|p| p.is_absolute())
                .map(|h| h.join(".cache"))
        })
        .unwrap_or_else(std::env::temp_dir);
    base.join("olmv1").join("catalog-images")
}

/// Largest registry credentials file read (a real one holds a few entries).
const MAX_CREDENTIALS_BYTES: u64 = 4 << 20;

/// Registry credentials the way container tools find them: `REGISTRY_AUTH_FILE`,
/// then `$DOCKER_CONFIG/config.json`, then `~/.docker/config.json` (missing = none).
pub fn local_registry_credentials() -> Result<DockerConfig, String> {
    let candidates = [
        std::env::var_os("REGISTRY_AUTH_FILE").map(PathBuf::from),
        std::env::var_os("DOCKER_CONFIG").map(|d| PathBuf::from(d).join("config.json")),
        std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".docker/config.json")),
    ];
    for path in candidates.into_iter().flatten() {
        match super::input_file::read_bytes(&path, MAX_CREDENTIALS_BYTES) {
            Ok(bytes) => {
                return DockerConfig::parse(&path.display().to_string(), &bytes)
                    .map_err(|e| e.to_string());
            }
            Err(super::input_file::InputFileError::Io { source, .. })
                if source.kind() == std::io::ErrorKind::NotFound =>
            {
                continue;
            }
            Err(e) => return Err(e.to_string()),
        }
    }
    Ok(DockerConfig::default())
}

/// The `--signature-policy` of this process (the global flag of the offline commands).
static SIGNATURE_POLICY: std::sync::OnceLock<Option<PathBuf>> = std::sync::OnceLock::new();

/// Sets the signature policy every [`puller_config`] of this process applies (once;
/// `main` calls it with the global `--signature-policy`).
pub fn set_signature_policy(path: Option<PathBuf>) {
    let _ = SIGNATURE_POLICY.set(path);
}

/// The `--registries-d` of this process (the global flag of the offline commands).
static REGISTRIES_D: std::sync::OnceLock<Option<PathBuf>> = std::sync::OnceLock::new();

/// Sets the registries.d directory every [`puller_config`] of this process reads
/// (once; `main` calls it with the global `--registries-d`).
pub fn set_registries_d(path: Option<PathBuf>) {
    let _ = REGISTRIES_D.set(path);
}

/// The image puller configuration of the command-line tools: the cache, plain-HTTP
/// registries, the registries configuration (mirrors, blocked registries), the
/// signature policy of `--signature-policy` (with the registries.d lookaside
/// configuration of `--registries-d`), and pull progress on stderr when it is a
/// terminal.
pub fn puller_config(
    cache: PathBuf,
    insecure_registries: &[String],
    registries_conf: Option<&Path>,
) -> Result<PullerConfig, crate::image::ImageError> {
    let mut config = PullerConfig::new(cache);
    config.insecure_registries = insecure_registries.to_vec();
    config.progress = super::progress::terminal_sink();
    if let Some(path) = registries_conf {
        config = config.with_registries_conf(path)?;
        config.registries.warn_unused();
    }
    if let Some(path) = SIGNATURE_POLICY.get().and_then(Option::as_deref) {
        config = config.with_signature_policy(path)?;
        // registries.d only matters to a policy's signedBy.
        let default = Path::new(crate::controller::options::DEFAULT_REGISTRIES_D);
        let named = REGISTRIES_D.get().and_then(Option::as_deref);
        if let Some(dir) = crate::controller::options::registries_d_or(named, default) {
            config = config.with_registries_d(&dir)?;
        }
    }
    Ok(config)
}

/// Pulls a catalog image and returns its unpacked configs directory.
async fn pull(image: &str, args: &FetchArgs) -> Result<PathBuf, SourceError> {
    let setup = |message: String| SourceError::ImageSetup {
        image: image.to_string(),
        message,
    };
    let cache = args
        .image_cache_dir
        .clone()
        .unwrap_or_else(default_image_cache_dir);
    std::fs::create_dir_all(&cache)
        .map_err(|e| setup(format!("creating the image cache {}: {e}", cache.display())))?;
    let config = puller_config(
        cache,
        &args.insecure_registries,
        args.registries_conf.as_deref(),
    )
    .map_err(|source| SourceError::Image {
        image: image.to_string(),
        source: Box::new(source),
    })?;
    let puller = ImagePuller::new(config).map_err(|source| SourceError::Image {
        image: image.to_string(),
        source: Box::new(source),
    })?;
    let secrets = local_registry_credentials().map_err(setup)?;
    let pulled = puller
        .pull(image, &Extract::CatalogConfigs, &secrets)
        .await
        .map_err(|source| SourceError::Image {
            image: image.to_string(),
            source: Box::new(source),
        })?;
    Ok(pulled.dir)
}

async fn kube_client(name: &str, args: &FetchArgs) -> Result<kube::Client, SourceError> {
    let err = |message: String| SourceError::Cluster {
        name: name.to_string(),
        message,
    };
    let config = match &args.kubeconfig {
        Some(path) => {
            let kc = kube::config::Kubeconfig::read_from(path)
                .map_err(|e| err(format!("reading kubeconfig {}: {e}", path.display())))?;
            kube::Config::from_custom_kubeconfig(kc, &kube::config::KubeConfigOptions::default())
                .await
                .map_err(|e| err(format!("kubeconfig {}: {e}", path.display())))?
        }
        None => kube::Config::infer()
            .await
            .map_err(|e| err(format!("no usable kubeconfig (set KUBECONFIG): {e}")))?,
    };
    kube::Client::try_from(config).map_err(|e| err(format!("creating the client: {e}")))
}

/// A content read error of ClusterCatalog `name`: the content client's as it is, the
/// proxy's and writing errors with the catalog named.
fn content_error(name: &str, e: super::cluster_content::ClusterContentError) -> SourceError {
    match e {
        super::cluster_content::ClusterContentError::Direct(e) => SourceError::Content(e),
        other => SourceError::Cluster {
            name: name.to_string(),
            message: other.to_string(),
        },
    }
}

/// Reads a ClusterCatalog from the cluster.
pub async fn get_cluster_catalog(
    name: &str,
    args: &FetchArgs,
) -> Result<ClusterCatalog, SourceError> {
    let client = kube_client(name, args).await?;
    read_cluster_catalog(&client, name).await
}

async fn read_cluster_catalog(
    client: &kube::Client,
    name: &str,
) -> Result<ClusterCatalog, SourceError> {
    let api: kube::Api<ClusterCatalog> = kube::Api::all(client.clone());
    match api.get_opt(name).await {
        Ok(Some(c)) => Ok(c),
        Ok(None) => Err(SourceError::ClusterCatalogNotFound {
            name: name.to_string(),
        }),
        Err(e) => Err(SourceError::Cluster {
            name: name.to_string(),
            message: format!("reading the ClusterCatalog: {e}"),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_sources() {
        assert!(matches!(CatalogSource::parse("/"), CatalogSource::Path(_)));
        assert_eq!(
            CatalogSource::parse("quay.io/org/cat:v1"),
            CatalogSource::Image("quay.io/org/cat:v1".into())
        );
        assert_eq!(
            CatalogSource::parse("127.0.0.1:5000/cat@sha256:abc"),
            CatalogSource::Image("127.0.0.1:5000/cat@sha256:abc".into())
        );
        assert_eq!(
            CatalogSource::parse("operatorhubio"),
            CatalogSource::ClusterCatalog("operatorhubio".into())
        );
        assert_eq!(
            CatalogSource::parse("./no/such/dir"),
            CatalogSource::Path("./no/such/dir".into())
        );
        // a Kubernetes name cannot hold `/`: an image (docker.io shorthand)
        assert_eq!(
            CatalogSource::parse("org/catalog"),
            CatalogSource::Image("org/catalog".into())
        );
        assert_eq!(
            CatalogSource::parse("my-catalog.example"),
            CatalogSource::ClusterCatalog("my-catalog.example".into())
        );
    }

    #[test]
    fn file_sources_load_without_a_runtime() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join("c.json"),
            r#"{"schema":"olm.package","name":"p","defaultChannel":"s"}
{"schema":"olm.bundle","name":"p.v1","package":"p","image":"i","properties":[{"type":"olm.package","value":{"packageName":"p","version":"1.0.0"}}]}
"#,
        )
        .unwrap();
        let src = CatalogSource::parse(dir.path().to_str().unwrap());
        let loaded = src
            .load_package_blocking("p", &FetchArgs::default())
            .unwrap();
        assert_eq!(loaded.content.bundles.len(), 1);
        assert_eq!(loaded.priority, None);
        let local = src
            .local_blocking(Some("p"), &FetchArgs::default())
            .unwrap();
        assert_eq!(local.path, dir.path());
    }

    #[test]
    fn image_cache_dir_prefers_xdg() {
        // only checks the shape; the environment is shared by tests, so do not set it
        let d = default_image_cache_dir();
        assert!(d.ends_with("olmv1/catalog-images"), "{}", d.display());
    }
}
