//! `olmv1 testenv up|down`: the loopback control plane for the demo and for manual
//! work (`hack/control-plane.sh` calls this). `up` leaves the processes running and
//! writes `<dir>/env.sh` with `KUBECONFIG` (admin) and `OLMV1_CONTROLLER_KUBECONFIG`
//! (the controller's ServiceAccount, bound to the ClusterRole in `config/`).
//! Hidden helpers for `hack/demo.sh`: `registry` runs a loopback OCI registry until
//! interrupted, `demo-catalog` publishes synthetic bundles and a catalog to it.

use super::{Binaries, ControlPlane, Lifetime, Options, manifests, process};
use anyhow::{Context, Result};
use std::path::PathBuf;

#[derive(clap::Args, Debug)]
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
    },
}

pub async fn run(args: TestEnvArgs) -> Result<()> {
    match args.command {
        TestEnvCommand::Up {
            dir,
            etcd,
            no_controller_manager,
        } => {
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
            };
            let cp = ControlPlane::start(opts).await?;
            let admin = cp.admin_client().await?;
            let controller_kubeconfig = data_dir.join("controller.kubeconfig");
            manifests::install_controller_identity(
                &admin,
                &super::project_dir(),
                &cp.server,
                &cp.pki.ca_pem,
                &controller_kubeconfig,
            )
            .await?;
            let (server, admin_kubeconfig) = cp.leak();
            let env = dir.join("env.sh");
            std::fs::write(
                &env,
                format!(
                    "export KUBECONFIG={}\nexport OLMV1_CONTROLLER_KUBECONFIG={}\n",
                    admin_kubeconfig.display(),
                    controller_kubeconfig.display()
                ),
            )
            .with_context(|| format!("writing {}", env.display()))?;
            println!("control plane ready at {server}");
            println!("admin kubeconfig:      {}", admin_kubeconfig.display());
            println!("controller kubeconfig: {}", controller_kubeconfig.display());
            println!("logs:                  {}", dir.join("logs").display());
            println!("use it with:           source {}", env.display());
            Ok(())
        }
        TestEnvCommand::Registry { dir } => {
            let registry = super::registry::TestRegistry::start()?;
            std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
            let env = dir.join("registry.env");
            std::fs::write(&env, format!("REGISTRY={}\n", registry.host()))
                .with_context(|| format!("writing {}", env.display()))?;
            println!("registry serving at {}", registry.host());
            let mut term =
                tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
                    .context("installing the SIGTERM handler")?;
            tokio::select! {
                _ = tokio::signal::ctrl_c() => {}
                _ = term.recv() => {}
            }
            let _ = std::fs::remove_file(&env);
            drop(registry);
            Ok(())
        }
        TestEnvCommand::DemoCatalog {
            registry,
            package,
            versions,
            tag,
            render_dir,
            namespace,
        } => {
            let registry = super::registry::TestRegistry::existing(&registry)?;
            let reference = super::demo::publish_catalog(
                &registry,
                &format!("catalogs/{package}:{tag}"),
                &package,
                &versions,
            )
            .await?;
            if let (Some(dir), Some(ns)) = (render_dir, namespace) {
                std::fs::create_dir_all(&dir)
                    .with_context(|| format!("creating {}", dir.display()))?;
                for v in &versions {
                    let objects =
                        super::demo::render(&super::demo::BundleSpec::new(&package, v), &ns)?;
                    let path = dir.join(format!("{v}.json"));
                    let text = objects
                        .iter()
                        .map(|o| o.to_string())
                        .collect::<Vec<_>>()
                        .join("\n---\n");
                    std::fs::write(&path, text)
                        .with_context(|| format!("writing {}", path.display()))?;
                }
            }
            println!("{reference}");
            Ok(())
        }
        TestEnvCommand::Down { dir } => {
            let data_dir = dir.join("data");
            let stopped = process::stop_detached(&data_dir)?;
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
    }
}
