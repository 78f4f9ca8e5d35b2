//! Deploying olmv1 the way users do: `kubectl apply -k` of a kustomization whose only
//! resource is the repository's `config/`, with the image overridden to one just built
//! (`hack/image.sh`) and extra controller arguments patched in. Used by the node-backed
//! tests and by `hack/demo.sh` (through `olmv1-testenv deploy`).

use super::TestEnvError;
use std::path::{Component, Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

/// The namespace and Deployment `config/` creates.
pub const NAMESPACE: &str = "olmv1-system";
pub const DEPLOYMENT: &str = "olmv1-controller";

/// `to` relative to `from` (both absolute), e.g. `../../work/main/config`.
pub fn relative(from: &Path, to: &Path) -> PathBuf {
    let a: Vec<Component> = from.components().collect();
    let b: Vec<Component> = to.components().collect();
    let common = a.iter().zip(&b).take_while(|(x, y)| x == y).count();
    let mut out = PathBuf::new();
    for _ in common..a.len() {
        out.push("..");
    }
    for c in &b[common..] {
        out.push(c.as_os_str());
    }
    out
}

/// The kustomization of an overlay in `dir` over `config`.
pub fn overlay(dir: &Path, config: &Path, image: &str, args: &[String]) -> String {
    let (name, pin) = match image.split_once('@') {
        Some((name, digest)) => (name.to_string(), format!("  digest: {digest}\n")),
        None => match image.rsplit_once(':').filter(|(_, tag)| !tag.contains('/')) {
            Some((name, tag)) => (name.to_string(), format!("  newTag: {tag}\n")),
            None => (image.to_string(), String::new()),
        },
    };
    let mut k = format!(
        "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n- {}\nimages:\n- name: olmv1\n  newName: {name}\n{pin}",
        relative(dir, config).display()
    );
    if !args.is_empty() {
        k.push_str(&format!(
            "patches:\n- target: {{kind: Deployment, name: {DEPLOYMENT}}}\n  patch: |-\n"
        ));
        for a in args {
            let value = serde_json::Value::String(a.clone());
            k.push_str(&format!(
                "    - op: add\n      path: /spec/template/spec/containers/0/args/-\n      value: {value}\n"
            ));
        }
    }
    k
}

/// `kubectl` next to the other Kubernetes binaries (`hack/build-node.sh` builds it).
pub fn kubectl() -> PathBuf {
    super::control_plane::default_kube_bin_dir().join("kubectl")
}

fn run_kubectl(kubeconfig: &Path, args: &[&str]) -> Result<String, TestEnvError> {
    let bin = kubectl();
    let out = Command::new(&bin)
        .arg(format!("--kubeconfig={}", kubeconfig.display()))
        .args(args)
        .output()
        .map_err(|e| TestEnvError::Spawn {
            program: bin.display().to_string(),
            source: e,
        })?;
    if !out.status.success() {
        return Err(TestEnvError::Kube(format!(
            "kubectl {}: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        )));
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// `kubectl apply -k` of an overlay (written in `work_dir`) over `project/config`
/// with `image` and `args`, then waits until the Deployment has rolled out.
pub fn apply(
    kubeconfig: &Path,
    project: &Path,
    work_dir: &Path,
    image: &str,
    args: &[String],
    timeout: Duration,
) -> Result<(), TestEnvError> {
    let dir = std::path::absolute(work_dir).map_err(|e| TestEnvError::io(work_dir, e))?;
    std::fs::create_dir_all(&dir).map_err(|e| TestEnvError::io(&dir, e))?;
    let config =
        std::path::absolute(project.join("config")).map_err(|e| TestEnvError::io(project, e))?;
    let file = dir.join("kustomization.yaml");
    std::fs::write(&file, overlay(&dir, &config, image, args))
        .map_err(|e| TestEnvError::io(&file, e))?;
    let dir_arg = dir.display().to_string();
    run_kubectl(kubeconfig, &["apply", "--server-side", "-k", &dir_arg])?;
    wait_rolled_out(kubeconfig, timeout)
}

/// Waits until `olmv1-controller` has all its replicas updated and available.
pub fn wait_rolled_out(kubeconfig: &Path, timeout: Duration) -> Result<(), TestEnvError> {
    let start = Instant::now();
    let secs = format!("--timeout={}s", timeout.as_secs().max(1));
    let target = format!("deployment/{DEPLOYMENT}");
    let result = run_kubectl(
        kubeconfig,
        &["-n", NAMESPACE, "rollout", "status", &target, &secs],
    );
    if let Err(e) = result {
        let pods = run_kubectl(kubeconfig, &["-n", NAMESPACE, "get", "pods", "-o", "wide"])
            .unwrap_or_default();
        let events = run_kubectl(
            kubeconfig,
            &["-n", NAMESPACE, "get", "events", "--sort-by=.lastTimestamp"],
        )
        .unwrap_or_default();
        return Err(TestEnvError::Kube(format!(
            "olmv1 did not roll out within {}s: {e}\n{pods}\n{events}",
            start.elapsed().as_secs()
        )));
    }
    Ok(())
}

/// What a failed end-to-end test prints about olmv1 in the cluster: its pods (with
/// restarts), every ClusterExtension's status, recent Events of the namespace and the
/// last lines of each replica's log (and of its previous container, if it restarted).
pub fn diagnostics(kubeconfig: &Path) -> String {
    let run = |args: &[&str]| run_kubectl(kubeconfig, args).unwrap_or_else(|e| format!("({e})\n"));
    let mut out = String::new();
    out += &run(&["-n", NAMESPACE, "get", "pods", "-o", "wide"]);
    out += &run(&["get", "clusterextensions", "-o", "yaml"]);
    out += &run(&["-n", NAMESPACE, "get", "events", "--sort-by=.lastTimestamp"]);
    let selector = "--selector=app.kubernetes.io/name=olmv1-controller";
    out += &run(&["-n", NAMESPACE, "logs", selector, "--prefix", "--tail=200"]);
    out += &run(&[
        "-n",
        NAMESPACE,
        "logs",
        selector,
        "--prefix",
        "--tail=50",
        "--previous",
    ]);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn relative_paths_climb_to_the_common_ancestor() {
        assert_eq!(
            relative(Path::new("/tmp/ov"), Path::new("/work/main/config")),
            PathBuf::from("../../work/main/config")
        );
        assert_eq!(
            relative(
                Path::new("/work/main/target/x"),
                Path::new("/work/main/config")
            ),
            PathBuf::from("../../config")
        );
    }

    #[test]
    fn the_overlay_pins_the_image_and_appends_arguments() {
        let k = overlay(
            Path::new("/w/t/o"),
            Path::new("/w/config"),
            "10.88.0.1:5000/olmv1@sha256:abc",
            &["--insecure-registry=10.88.0.1:5000".into()],
        );
        assert!(k.contains("- ../../config\n"), "{k}");
        assert!(
            k.contains("newName: 10.88.0.1:5000/olmv1\n  digest: sha256:abc\n"),
            "{k}"
        );
        assert!(
            k.contains("value: \"--insecure-registry=10.88.0.1:5000\""),
            "{k}"
        );
        let tagged = overlay(Path::new("/a"), Path::new("/b"), "r:5000/olmv1:dev", &[]);
        assert!(
            tagged.contains("newName: r:5000/olmv1\n  newTag: dev\n"),
            "{tagged}"
        );
    }
}
