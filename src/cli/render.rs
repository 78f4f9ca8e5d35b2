//! `olmv1 render`: load, validate and render a registry+v1 bundle offline and print the
//! objects as YAML documents (or every problem, exit code 1). The bundle comes from a
//! directory or from an image pulled into the local cache.

use crate::bundle::{
    Bundle, CertProvider, LoadOptions, RenderOptions, load_dir, load_image, render_owned,
    to_yaml_documents,
};
use crate::image::{DockerConfig, ImagePuller};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

/// Where a bundle comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BundleSource {
    /// An unpacked bundle directory (holding `manifests/` and `metadata/`).
    Directory(PathBuf),
    /// An image reference, pulled into the cache directory.
    Image(String),
}

impl BundleSource {
    /// An existing path is a directory; anything else is taken as an image reference.
    pub fn parse(s: &str) -> BundleSource {
        let p = PathBuf::from(s);
        if p.exists() {
            BundleSource::Directory(p)
        } else {
            BundleSource::Image(s.to_string())
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum CertProviderArg {
    CertManager,
    /// OpenShift's service-ca operator (Service and CA-injection annotations only).
    OpenshiftServiceCa,
    None,
}

/// Render a registry+v1 bundle into the Kubernetes objects that would be applied.
#[derive(Debug, clap::Args)]
pub struct RenderArgs {
    /// Bundle directory (holding manifests/ and metadata/) or bundle image reference.
    pub source: String,
    /// Install namespace.
    #[arg(long, short = 'n')]
    pub namespace: String,
    /// Namespace the operator watches (shorthand for the config's watchNamespace).
    #[arg(long)]
    pub watch_namespace: Option<String>,
    /// Bundle configuration file (JSON or YAML), the same object as spec.config.inline.
    #[arg(long)]
    pub config: Option<PathBuf>,
    /// Certificate provider for webhooks.
    #[arg(long, value_enum, default_value = "cert-manager")]
    pub cert_provider: CertProviderArg,
    /// Also render the OperatorCondition, its Role and RoleBinding and the
    /// OPERATOR_CONDITION_NAME env var, as the controller does on a cluster that serves
    /// operators.coreos.com/v2 OperatorCondition.
    #[arg(long)]
    pub operator_condition: bool,
    /// Cache directory for pulled images (default $XDG_CACHE_HOME/olmv1 or ~/.cache/olmv1).
    #[arg(long)]
    pub cache_dir: Option<PathBuf>,
    /// Registry (host[:port]) reached over plain HTTP; may be repeated.
    #[arg(long = "insecure-registry")]
    pub insecure_registries: Vec<String>,
    /// containers-registries.conf v2 file with registry mirrors and blocked registries.
    #[arg(long)]
    pub registries_conf: Option<PathBuf>,
}

/// `$XDG_CACHE_HOME/olmv1`, else `$HOME/.cache/olmv1`.
pub fn default_cache_dir() -> Result<PathBuf, String> {
    if let Some(x) = std::env::var_os("XDG_CACHE_HOME").filter(|x| !x.is_empty()) {
        return Ok(PathBuf::from(x).join("olmv1"));
    }
    match std::env::var_os("HOME").filter(|h| !h.is_empty()) {
        Some(h) => Ok(PathBuf::from(h).join(".cache").join("olmv1")),
        None => Err("no cache directory: set --cache-dir, XDG_CACHE_HOME or HOME".to_string()),
    }
}

/// Pulls a bundle image (tag or digest) into `cache_dir` (default [`default_cache_dir`])
/// and loads it, for the offline commands (`olmv1 render`, `olmv1 rbac`): the blocking
/// edge around [`load_image`]. `insecure_registries` are reached over plain HTTP;
/// `registries_conf` names mirrors and blocked registries. The error names the image.
pub fn pull_bundle_blocking(
    reference: &str,
    cache_dir: Option<&Path>,
    insecure_registries: &[String],
    registries_conf: Option<&Path>,
) -> Result<Bundle, String> {
    let cache_dir = match cache_dir {
        Some(d) => d.to_path_buf(),
        None => default_cache_dir()?,
    };
    let config = super::source::puller_config(cache_dir, insecure_registries, registries_conf)
        .map_err(|e| e.to_string())?;
    let puller = ImagePuller::new(config).map_err(|e| e.to_string())?;
    super::block_on(load_image(
        &puller,
        reference,
        &DockerConfig::default(),
        &LoadOptions::default(),
    ))?
    .map(|(bundle, _)| bundle)
    .map_err(|e| e.to_string())
}

fn pull_bundle(reference: &str, args: &RenderArgs) -> Result<Bundle, String> {
    pull_bundle_blocking(
        reference,
        args.cache_dir.as_deref(),
        &args.insecure_registries,
        args.registries_conf.as_deref(),
    )
}

const MAX_CONFIG_BYTES: u64 = 1024 * 1024;

fn read_config(path: &Path) -> Result<Value, String> {
    let text = super::input_file::read_string(path, MAX_CONFIG_BYTES)
        .map_err(|e| format!("config file {e}"))?;
    crate::yaml::from_str::<Value>(&text, serde_saphyr::Options::default())
        .map_err(|e| format!("config file {}: {e}", path.display()))
}

fn run_inner(args: RenderArgs) -> Result<String, String> {
    let mut config = match &args.config {
        Some(p) => read_config(p)?,
        None => Value::Object(Default::default()),
    };
    if let Some(ns) = &args.watch_namespace {
        match config.as_object_mut() {
            Some(o) => {
                o.insert("watchNamespace".into(), Value::String(ns.clone()));
            }
            None => return Err("the config file must hold an object".to_string()),
        }
    }
    let bundle = match BundleSource::parse(&args.source) {
        BundleSource::Directory(d) => {
            load_dir(&d, &LoadOptions::default()).map_err(|e| e.to_string())?
        }
        BundleSource::Image(r) => pull_bundle(&r, &args)?,
    };
    let options = RenderOptions {
        cert_provider: match args.cert_provider {
            CertProviderArg::CertManager => CertProvider::CertManager,
            CertProviderArg::OpenshiftServiceCa => CertProvider::OpenShiftServiceCa,
            CertProviderArg::None => CertProvider::None,
        },
        operator_condition: args.operator_condition,
        dependencies_checked: false,
    };
    let objects = render_owned(bundle, &args.namespace, Some(&config), &options)
        .map_err(|e| e.to_string())?;
    to_yaml_documents(&objects)
}

/// Runs `olmv1 render`.
pub fn run(args: RenderArgs) -> ExitCode {
    match run_inner(args) {
        Ok(yaml) => {
            print!("{yaml}");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn testdata(p: &str) -> String {
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("src/bundle/testdata")
            .join(p)
            .to_string_lossy()
            .into_owned()
    }

    fn args(source: &str) -> RenderArgs {
        RenderArgs {
            source: source.to_string(),
            namespace: "widget-system".into(),
            watch_namespace: None,
            config: None,
            cert_provider: CertProviderArg::CertManager,
            operator_condition: false,
            cache_dir: None,
            insecure_registries: Vec::new(),
            registries_conf: None,
        }
    }

    /// `--config /dev/zero` used to be read until memory ran out (its metadata says 0 bytes).
    #[test]
    fn config_must_be_a_regular_file() {
        let mut a = args(&testdata("bundles/all-namespaces"));
        a.config = Some(PathBuf::from("/dev/zero"));
        let err = run_inner(a).unwrap_err();
        assert!(
            err.starts_with("config file /dev/zero is not a regular file"),
            "{err}"
        );
    }

    #[test]
    fn prints_the_golden_yaml() {
        let out = run_inner(args(&testdata("bundles/all-namespaces"))).unwrap();
        assert_eq!(
            out,
            std::fs::read_to_string(testdata("golden/all-namespaces.yaml")).unwrap()
        );
    }

    #[test]
    fn watch_namespace_and_config_file() {
        let mut a = args(&testdata("bundles/single-namespace"));
        a.watch_namespace = Some("team-a".into());
        assert_eq!(
            run_inner(a).unwrap(),
            std::fs::read_to_string(testdata("golden/single-namespace.yaml")).unwrap()
        );
        let mut a = args(&testdata("bundles/all-namespaces"));
        a.config = Some(PathBuf::from(testdata("configs/deploymentconfig-env.json")));
        assert_eq!(
            run_inner(a).unwrap(),
            std::fs::read_to_string(testdata("golden/deploymentconfig-env.yaml")).unwrap()
        );
    }

    #[test]
    fn errors_are_reported() {
        let err = run_inner(args(&testdata("bundles/own-namespace"))).unwrap_err();
        assert_eq!(
            err,
            "invalid configuration: required field \"watchNamespace\" is missing"
        );
        let mut a = args(&testdata("bundles/webhook-mutating"));
        a.cert_provider = CertProviderArg::None;
        assert_eq!(
            run_inner(a).unwrap_err(),
            "unsupported bundle: webhookDefinitions are not supported"
        );
        // An unreachable plain-HTTP registry: the error names the image.
        let cache = tempfile::tempdir().unwrap();
        let mut a = args("127.0.0.1:1/example/bundle:v1");
        a.cache_dir = Some(cache.path().to_path_buf());
        a.insecure_registries = vec!["127.0.0.1:1".into()];
        let err = pull_bundle("127.0.0.1:1/example/bundle:v1", &a).unwrap_err();
        assert!(err.contains("127.0.0.1:1/example/bundle:v1"), "{err}");
        assert_eq!(
            run(args(&testdata("bundles/own-namespace"))),
            ExitCode::FAILURE
        );
    }
}
