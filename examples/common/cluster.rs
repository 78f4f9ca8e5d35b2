//! The local control plane the controller benchmarks (`bench_install`, `bench_scale`)
//! run the controller process against: etcd (`OLMV1_ETCD` or the vendored one),
//! kube-apiserver, optionally kube-controller-manager, and the controller's identity
//! from `config/` with its kubeconfig.

use olmv1::testenv::{Binaries, ControlPlane, Lifetime, Options, manifests};
use std::path::{Path, PathBuf};

pub struct BenchCluster {
    pub cp: ControlPlane,
    pub admin: kube::Client,
    /// The kubeconfig of the controller's ServiceAccount (config/'s RBAC).
    pub controller_kubeconfig: PathBuf,
    pub data_dir: PathBuf,
}

/// Starts the control plane with its data and logs under `dir`.
pub async fn start(dir: &Path, controller_manager: bool) -> anyhow::Result<BenchCluster> {
    let etcd = match std::env::var_os("OLMV1_ETCD") {
        Some(p) => PathBuf::from(p),
        None => etcd_bin_vendored::etcd_bin_path()
            .map_err(|e| anyhow::anyhow!("{e}"))?
            .to_path_buf(),
    };
    let data_dir = dir.join("data");
    let cp = ControlPlane::start(Options {
        binaries: Binaries::locate(Some(etcd))?,
        data_dir: data_dir.clone(),
        log_dir: dir.join("logs"),
        controller_manager,
        lifetime: Lifetime::Supervised,
        node: None,
    })
    .await?;
    let admin = cp.admin_client().await?;
    let controller_kubeconfig = dir.join("controller.kubeconfig");
    manifests::install_controller_identity(
        &admin,
        &olmv1::testenv::project_dir(),
        &cp.server,
        &cp.pki.ca_pem,
        &controller_kubeconfig,
    )
    .await?;
    Ok(BenchCluster {
        cp,
        admin,
        controller_kubeconfig,
        data_dir,
    })
}
