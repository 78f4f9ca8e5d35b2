//! Command-line options of `olmv1 controller`.

use std::path::PathBuf;

#[derive(clap::Args, Debug, Clone)]
pub struct ControllerArgs {
    /// Kubeconfig to use; default: $KUBECONFIG, ~/.kube/config, then in-cluster config.
    #[arg(long, env = "KUBECONFIG")]
    pub kubeconfig: Option<PathBuf>,

    /// Address of the /healthz and /readyz endpoints.
    #[arg(long, default_value = "0.0.0.0:8081")]
    pub health_probe_bind_address: String,
}
