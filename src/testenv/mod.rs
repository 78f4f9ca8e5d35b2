//! A real, loopback Kubernetes control plane (etcd, kube-apiserver, optionally
//! kube-controller-manager) for tests and the local demo, and access to the shared
//! real-world fixtures that conformance tests read.

use std::path::PathBuf;

/// The `shared/` folder beside the project (`$OLMV1_SHARED_DIR` overrides it).
///
/// Conformance tests over real bundles and catalogs call this. A fresh clone has no
/// `shared/`: the test is skipped with a message, except under CI (`CI` set), which
/// always provides the folder, so its absence there fails the test loudly.
pub fn shared_dir(sub: &str) -> Option<PathBuf> {
    let base = std::env::var_os("OLMV1_SHARED_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../shared"));
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
