//! registry+v1 bundle loading, validation and rendering. The input is split on lines
//! `@@@`: the first part is `metadata/annotations.yaml`, the second (when not empty)
//! `metadata/properties.yaml`, every further part one file in `manifests/`.
#![no_main]

use libfuzzer_sys::fuzz_target;
use olmv1::bundle::{LoadOptions, RenderOptions, load_dir, render};
use std::path::Path;
use std::sync::OnceLock;

fn scratch() -> Option<&'static tempfile::TempDir> {
    static DIR: OnceLock<Option<tempfile::TempDir>> = OnceLock::new();
    DIR.get_or_init(|| tempfile::tempdir().ok()).as_ref()
}

fn split(data: &[u8]) -> Vec<&[u8]> {
    let mut parts = Vec::new();
    let mut rest = data;
    while let Some(i) = rest.windows(5).position(|w| w == b"\n@@@\n") {
        parts.push(&rest[..i]);
        rest = &rest[i + 5..];
    }
    parts.push(rest);
    parts
}

fn lay_out(root: &Path, parts: &[&[u8]]) -> std::io::Result<()> {
    let _ = std::fs::remove_dir_all(root);
    std::fs::create_dir_all(root.join("metadata"))?;
    std::fs::create_dir_all(root.join("manifests"))?;
    std::fs::write(root.join("metadata/annotations.yaml"), parts[0])?;
    if let Some(p) = parts.get(1).filter(|p| !p.is_empty()) {
        std::fs::write(root.join("metadata/properties.yaml"), p)?;
    }
    for (i, p) in parts.iter().skip(2).take(16).enumerate() {
        std::fs::write(root.join(format!("manifests/m{i:02}.yaml")), p)?;
    }
    Ok(())
}

fuzz_target!(|data: &[u8]| {
    let Some(dir) = scratch() else { return };
    let root = dir.path().join("bundle");
    if lay_out(&root, &split(data)).is_err() {
        return;
    }
    let opts = LoadOptions {
        max_file_bytes: 1 << 20,
        max_total_bytes: 4 << 20,
        max_files: 32,
        max_yaml_nodes: 200_000,
        ..LoadOptions::default()
    };
    let Ok(bundle) = load_dir(&root, &opts) else {
        return;
    };
    let config = serde_json::json!({"watchNamespace": "other"});
    for cfg in [None, Some(&config)] {
        let _ = render(&bundle, "install-ns", cfg, &RenderOptions::default());
    }
});
