#![forbid(unsafe_code)]
//! `olmv1-testenv up|down`: the loopback control plane for the demo and for manual
//! work (`hack/control-plane.sh` calls this). Built only with the `testenv` feature
//! (`cargo build --features testenv --bin olmv1-testenv`): the test environment is not
//! part of the shipped `olmv1` binary. `up` leaves the processes running and
//! writes `<dir>/env.sh` with `KUBECONFIG` (admin) and `OLMV1_CONTROLLER_KUBECONFIG`
//! (the controller's ServiceAccount, bound to the ClusterRole in `config/`).
//! Hidden helpers for `hack/demo.sh`: `registry` runs a loopback OCI registry until
//! interrupted, `demo-catalog` publishes synthetic bundles and a catalog to it.

use anyhow::{Context, Result};
use clap::Parser;
use olmv1::testenv::demo::{self, BundleSpec};
use olmv1::testenv::registry::TestRegistry;
use olmv1::testenv::{Binaries, ControlPlane, Lifetime, Options, manifests, process};
use std::path::PathBuf;
use std::process::ExitCode;

/// The loopback test environment of the project's tests and demo.
#[derive(Parser, Debug)]
#[command(name = "olmv1-testenv")]
pub struct TestEnvArgs {
    #[command(subcommand)]
    pub command: TestEnvCommand,
}

#[derive(clap::Subcommand, Debug)]
pub enum TestEnvCommand {
    /// Start etcd, kube-apiserver and kube-controller-manager on loopback.
    Up {
        /// Working directory (data, logs, kubeconfigs).
        #[arg(long, default_value = ".cache/testenv")]
        dir: PathBuf,
        /// etcd binary (default: $OLMV1_ETCD).
        #[arg(long)]
        etcd: Option<PathBuf>,
        /// Do not start kube-controller-manager.
        #[arg(long)]
        no_controller_manager: bool,
        /// Also start a real node: containerd + runc, kubelet, kube-scheduler,
        /// kube-proxy, CoreDNS, and a registry pods reach (needs root and
        /// `hack/build-node.sh`).
        #[arg(long)]
        node: bool,
        /// Also run cert-manager (controller and cainjector, its CRDs applied; needs
        /// `hack/build-cert-manager.sh`): the certificate provider of webhook bundles.
        #[arg(long)]
        cert_manager: bool,
    },
    /// Build a reproducible OCI image of a program (its shared libraries, a CA bundle,
    /// a non-root user, no shell) and push it or write it as an OCI archive.
    Image {
        /// The program to package (at `/<name>` in the image).
        #[arg(long)]
        program: PathBuf,
        /// Its name inside the image.
        #[arg(long, default_value = "olmv1")]
        name: String,
        /// Push to this reference (`host[:port]/repository:tag`).
        #[arg(long, required_unless_present = "oci_archive")]
        push: Option<String>,
        /// Push over plain HTTP.
        #[arg(long, requires = "push")]
        insecure: bool,
        /// Write an OCI image layout archive here instead of (or besides) pushing.
        #[arg(long)]
        oci_archive: Option<PathBuf>,
        /// Image labels `key=value`.
        #[arg(long = "label")]
        labels: Vec<String>,
        /// Other names of the program in the image (`/<link>` → `<name>`), e.g.
        /// `operator-controller` and `catalogd` (it runs as upstream's program of that name).
        #[arg(long = "link")]
        links: Vec<String>,
        /// The image's default arguments (`Cmd`), repeated.
        #[arg(long = "cmd")]
        cmd: Vec<String>,
    },
    /// Stop what `up` started and remove its data (logs are kept).
    Down {
        #[arg(long, default_value = ".cache/testenv")]
        dir: PathBuf,
    },
    /// Run a plain-HTTP loopback registry (`docker-registry`) until SIGINT/SIGTERM;
    /// writes `REGISTRY=127.0.0.1:<port>` to `<dir>/registry.env` once it serves.
    #[command(hide = true)]
    Registry {
        #[arg(long, default_value = ".cache/testenv")]
        dir: PathBuf,
    },
    /// Push synthetic bundles of `--package` (one per `--version`, each replacing the
    /// previous one) and a catalog image `catalogs/<package>:<tag>`; prints its reference.
    #[command(hide = true)]
    DemoCatalog {
        /// `host:port` of the registry.
        #[arg(long)]
        registry: String,
        #[arg(long, default_value = "demo-operator")]
        package: String,
        #[arg(long = "version", required = true)]
        versions: Vec<String>,
        #[arg(long, default_value = "latest")]
        tag: String,
        /// Also write each bundle rendered for `--namespace` to `<dir>/<version>.json`
        /// (input of `olmv1 rbac`).
        #[arg(long, requires = "namespace")]
        render_dir: Option<PathBuf>,
        #[arg(long)]
        namespace: Option<String>,
        /// The operators' image (default: an unpullable `example.com/…`, fine without
        /// nodes); on a node, `$OLMV1_WORKLOAD_IMAGE` runs for real.
        #[arg(long)]
        operator_image: Option<String>,
    },
    /// `kubectl apply -k` of `config/` with `--image` (and extra controller `--arg`s),
    /// then wait for the rollout (the cluster of $KUBECONFIG).
    Deploy {
        #[arg(long)]
        image: String,
        #[arg(long = "arg", allow_hyphen_values = true)]
        args: Vec<String>,
        /// Where the kustomize overlay is written.
        #[arg(long, default_value = ".cache/testenv/overlay")]
        overlay: PathBuf,
        #[arg(long, env = "KUBECONFIG")]
        kubeconfig: PathBuf,
    },
    /// Print the release manifest: everything config/ installs, in one multi-document
    /// YAML for `kubectl apply -f` (dist/olmv1.yaml is this output without --image).
    Release {
        /// Pin the controller image (`registry/olmv1@sha256:…`, as hack/image.sh prints).
        #[arg(long)]
        image: Option<String>,
        /// Write to this file instead of stdout.
        #[arg(short = 'o', long)]
        output: Option<PathBuf>,
        /// The config/ directory (default: the project's).
        #[arg(long)]
        config: Option<PathBuf>,
    },
}

fn main() -> ExitCode {
    let args = TestEnvArgs::parse();
    // While the API server comes up, the readiness probes fail on purpose and kube's
    // client logs each failure as an ERROR: not news for someone starting a control
    // plane (a real failure ends in this tool's own error), so those lines are off.
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info,kube_client=off"));
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .init();
    let _ = rustls::crypto::aws_lc_rs::default_provider().install_default();
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("error: starting the async runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(run(args)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::FAILURE
        }
    }
}

async fn run(args: TestEnvArgs) -> Result<()> {
    match args.command {
        TestEnvCommand::Up {
            dir,
            etcd,
            no_controller_manager,
            node,
            cert_manager,
        } => up(dir, etcd, no_controller_manager, node, cert_manager).await,
        TestEnvCommand::Image {
            program,
            name,
            push,
            insecure,
            oci_archive,
            labels,
            links,
            cmd,
        } => {
            let out = ImageOutput {
                push,
                insecure,
                oci_archive,
            };
            image(&program, &name, &out, &labels, &links, cmd).await
        }
        TestEnvCommand::Registry { dir } => registry(dir).await,
        TestEnvCommand::DemoCatalog {
            registry,
            package,
            versions,
            tag,
            render_dir,
            namespace,
            operator_image,
        } => {
            let out = DemoOutput {
                render_dir,
                namespace,
                operator_image,
            };
            demo_catalog(&registry, &package, &versions, &tag, out).await
        }
        TestEnvCommand::Deploy {
            image,
            args,
            overlay,
            kubeconfig,
        } => {
            olmv1::testenv::deploy::apply(
                &kubeconfig,
                &olmv1::testenv::project_dir(),
                &overlay,
                &image,
                &args,
                std::time::Duration::from_secs(300),
            )?;
            println!("olmv1 rolled out from config/ with {image}");
            Ok(())
        }
        TestEnvCommand::Down { dir } => down(dir),
        TestEnvCommand::Release {
            image,
            output,
            config,
        } => {
            let config = config.unwrap_or_else(|| olmv1::testenv::project_dir().join("config"));
            let manifest = olmv1::testenv::release::generate(&config, image.as_deref())?;
            match output {
                Some(path) => std::fs::write(&path, manifest)
                    .with_context(|| format!("writing {}", path.display()))?,
                None => print!("{manifest}"),
            }
            Ok(())
        }
    }
}

/// Starts the control plane detached and writes `<dir>/env.sh`.
async fn up(
    dir: PathBuf,
    etcd: Option<PathBuf>,
    no_controller_manager: bool,
    node: bool,
    cert_manager: bool,
) -> Result<()> {
    let dir = std::path::absolute(&dir).context("resolving --dir")?;
    let data_dir = dir.join("data");
    if data_dir.join("etcd.pid").exists() {
        anyhow::bail!(
            "a control plane already runs from {} (run `hack/control-plane.sh down` first)",
            dir.display()
        );
    }
    let opts = Options {
        binaries: Binaries::locate(etcd)?,
        data_dir: data_dir.clone(),
        log_dir: dir.join("logs"),
        controller_manager: !no_controller_manager,
        lifetime: Lifetime::Detached,
        node: if node {
            Some(olmv1::testenv::node::NodeBinaries::locate()?)
        } else {
            None
        },
    };
    let cp = ControlPlane::start(opts).await?;
    let admin = cp.admin_client().await?;
    let controller_kubeconfig = data_dir.join("controller.kubeconfig");
    manifests::install_controller_identity(
        &admin,
        &olmv1::testenv::project_dir(),
        &cp.server,
        &cp.pki.ca_pem,
        &controller_kubeconfig,
    )
    .await?;
    if cert_manager {
        let binaries = olmv1::testenv::cert_manager::CertManagerBinaries::locate()?;
        olmv1::testenv::cert_manager::CertManager::start(
            &binaries,
            &admin,
            &cp.admin_kubeconfig,
            &dir.join("logs"),
            Lifetime::Detached,
            &data_dir,
            std::time::Duration::from_secs(120),
        )
        .await?
        .leak();
    }
    let running_node = cp.node.clone();
    let (server, admin_kubeconfig) = cp.leak();
    let env = dir.join("env.sh");
    let mut vars = format!(
        "export KUBECONFIG={}\nexport OLMV1_CONTROLLER_KUBECONFIG={}\n",
        admin_kubeconfig.display(),
        controller_kubeconfig.display()
    );
    if let Some(n) = &running_node {
        vars.push_str(&format!(
            "export OLMV1_NODE_REGISTRY={}\nexport OLMV1_WORKLOAD_IMAGE={}\n",
            n.registry, n.workload_image
        ));
    }
    std::fs::write(&env, vars).with_context(|| format!("writing {}", env.display()))?;
    println!("control plane ready at {server}");
    if let Some(n) = &running_node {
        println!(
            "node:                  {} Ready (registry for pods: {})",
            olmv1::testenv::node::NODE_NAME,
            n.registry
        );
    }
    if cert_manager {
        println!(
            "cert-manager:          {} Ready (controller and cainjector)",
            olmv1::testenv::cert_manager::CERT_MANAGER_VERSION
        );
    }
    println!("admin kubeconfig:      {}", admin_kubeconfig.display());
    println!("controller kubeconfig: {}", controller_kubeconfig.display());
    println!("logs:                  {}", dir.join("logs").display());
    println!("use it with:           source {}", env.display());
    Ok(())
}

/// Runs a loopback registry until SIGINT/SIGTERM.
async fn registry(dir: PathBuf) -> Result<()> {
    let registry = TestRegistry::start()?;
    std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    let env = dir.join("registry.env");
    std::fs::write(&env, format!("REGISTRY={}\n", registry.host()))
        .with_context(|| format!("writing {}", env.display()))?;
    println!("registry serving at {}", registry.host());
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
        .context("installing the SIGTERM handler")?;
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        _ = term.recv() => {}
    }
    let _ = std::fs::remove_file(&env);
    drop(registry);
    Ok(())
}

/// Publishes the demo bundles and their catalog image; prints the catalog reference.
/// What `demo-catalog` writes besides the catalog, and the operators' image.
struct DemoOutput {
    render_dir: Option<PathBuf>,
    namespace: Option<String>,
    operator_image: Option<String>,
}

async fn demo_catalog(
    registry: &str,
    package: &str,
    versions: &[String],
    tag: &str,
    out: DemoOutput,
) -> Result<()> {
    let registry = TestRegistry::existing(registry)?;
    let reference = demo::publish_catalog(
        &registry,
        &format!("catalogs/{package}:{tag}"),
        package,
        versions,
        out.operator_image.as_deref(),
    )
    .await?;
    if let (Some(dir), Some(ns)) = (out.render_dir, out.namespace) {
        std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
        for v in versions {
            let mut spec = BundleSpec::new(package, v);
            spec.operator_image = out.operator_image.clone();
            let objects = demo::render(&spec, &ns)?;
            let path = dir.join(format!("{v}.json"));
            let text = objects
                .iter()
                .map(|o| o.to_string())
                .collect::<Vec<_>>()
                .join("\n---\n");
            std::fs::write(&path, text).with_context(|| format!("writing {}", path.display()))?;
        }
    }
    println!("{reference}");
    Ok(())
}

/// Builds a program's image; pushes it and/or writes an OCI archive. Prints the
/// digest-pinned reference (or the manifest digest).
/// Where `image` puts what it builds.
struct ImageOutput {
    push: Option<String>,
    insecure: bool,
    oci_archive: Option<PathBuf>,
}

async fn image(
    program: &std::path::Path,
    name: &str,
    out: &ImageOutput,
    labels: &[String],
    links: &[String],
    cmd: Vec<String>,
) -> Result<()> {
    use olmv1::testenv::image;
    let created = std::env::var("SOURCE_DATE_EPOCH")
        .ok()
        .map(|v| v.trim().parse::<i64>())
        .transpose()
        .context("SOURCE_DATE_EPOCH must be a number of seconds")?
        .unwrap_or(0);
    let mut run = image::RunConfig {
        entrypoint: vec![format!("/{name}")],
        cmd,
        created,
        links: links
            .iter()
            .map(|l| (l.trim_start_matches('/').to_string(), name.to_string()))
            .collect(),
        ..Default::default()
    };
    for l in labels {
        let (k, v) = l
            .split_once('=')
            .with_context(|| format!("--label {l}: expected key=value"))?;
        run.labels.insert(k.to_string(), v.to_string());
    }
    let files = image::program_files(program, name)?;
    let built = image::build(&files, &run)?;
    eprintln!(
        "image {}: {} files, layer {} bytes",
        built.manifest_digest,
        files.len(),
        built.layer.len()
    );
    if let Some(path) = &out.oci_archive {
        let ref_name = out.push.as_deref().unwrap_or(name);
        image::write_oci_archive(&built, path, ref_name)?;
        eprintln!("wrote {}", path.display());
    }
    match &out.push {
        Some(reference) => println!("{}", image::push(&built, reference, out.insecure).await?),
        None => println!("{}", built.manifest_digest),
    }
    Ok(())
}

/// Stops what `up` started and removes its data (logs are kept).
fn down(dir: PathBuf) -> Result<()> {
    let data_dir = dir.join("data");
    let stopped = process::stop_detached(&data_dir)?;
    if data_dir.join("node").exists() {
        let proxy = olmv1::testenv::node::NodeBinaries::locate()
            .ok()
            .map(|b| b.kube_proxy);
        olmv1::testenv::node::reset(proxy.as_deref());
    }
    if data_dir.exists() {
        std::fs::remove_dir_all(&data_dir)
            .with_context(|| format!("removing {}", data_dir.display()))?;
    }
    let _ = std::fs::remove_file(dir.join("env.sh"));
    println!(
        "stopped: {}",
        if stopped.is_empty() {
            "nothing was running".to_string()
        } else {
            stopped.join(", ")
        }
    );
    Ok(())
}
