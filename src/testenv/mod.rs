//! A real, loopback Kubernetes control plane (etcd, kube-apiserver, optionally
//! kube-controller-manager) for tests and the local demo; applying manifest files;
//! the controller's own non-admin identity bound to the RBAC shipped in `config/`;
//! and access to the shared real-world fixtures that conformance tests read.
//!
//! Nothing here is used by the controller itself; it is the project's test tooling,
//! kept in the library so that the test harness, `hack/control-plane.sh` and the demo
//! share one implementation. It is compiled only for the crate's own unit tests and
//! with the cargo feature `testenv` (which the integration tests, examples and the
//! `olmv1-testenv` binary get), so the shipped `olmv1` binary does not contain it.

pub mod cert_manager;
pub mod control_plane;
pub mod demo;
pub mod deploy;
pub mod gpg;
pub mod image;
pub mod manifests;
pub mod node;
pub mod pki;
pub mod process;
pub mod proxy;
pub mod release;
pub mod signing;
pub mod yaml_bombs;

pub use control_plane::{
    Binaries, ControlPlane, Options, client_from_kubeconfig, write_kubeconfig,
};
pub use process::Lifetime;

use std::path::{Path, PathBuf};

#[derive(Debug, thiserror::Error)]
pub enum TestEnvError {
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("missing {0}")]
    Missing(String),
    /// Something the machine lacks, said as a whole sentence with the command that fixes it.
    #[error("{0}")]
    Prerequisite(String),
    #[error("no free loopback port: {0}")]
    Port(String),
    #[error("starting {program}: {source}")]
    Spawn {
        program: String,
        #[source]
        source: std::io::Error,
    },
    #[error("{name} exited ({status}); log {log}:\n{tail}", log = .log.display())]
    Exited {
        name: String,
        status: String,
        log: PathBuf,
        tail: String,
    },
    #[error("{name} was not ready within {seconds}s; log {log}:\n{tail}", log = .log.display())]
    NotReady {
        name: String,
        seconds: u64,
        log: PathBuf,
        tail: String,
    },
    #[error("node image: {0}")]
    Image(String),
    #[error("certificates: {0}")]
    Pki(String),
    #[error("Kubernetes API: {0}")]
    Kube(String),
    #[error("manifest {source_name}: {message}")]
    Manifest {
        source_name: String,
        message: String,
    },
}

impl TestEnvError {
    pub fn io(path: &Path, source: std::io::Error) -> Self {
        TestEnvError::Io {
            path: path.to_path_buf(),
            source,
        }
    }

    /// A component stopped because its port was taken (its log says so).
    pub fn port_taken(&self) -> bool {
        match self {
            TestEnvError::Exited { tail, .. } | TestEnvError::NotReady { tail, .. } => {
                tail.contains("address already in use")
            }
            _ => false,
        }
    }
}

/// The project's root directory (where `config/` and `crds/` are).
pub fn project_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The `shared/` folder beside the project (`$OLMV1_SHARED_DIR` overrides it).
///
/// Conformance tests over real bundles and catalogs call this. A fresh clone has no
/// `shared/`: the test is skipped with a message, except under CI (`CI` set), which
/// always provides the folder, so its absence there fails the test loudly.
pub fn shared_dir(sub: &str) -> Option<PathBuf> {
    let base = std::env::var_os("OLMV1_SHARED_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| project_dir().join("../shared"));
    let dir = base.join(sub);
    if dir.exists() {
        return Some(dir);
    }
    if std::env::var_os("CI").is_some() {
        panic!(
            "CI expects the shared fixtures at {} but they are missing",
            dir.display()
        );
    }
    eprintln!(
        "skipping: {} not found (conformance fixtures are optional outside CI)",
        dir.display()
    );
    None
}
pub mod registry;
