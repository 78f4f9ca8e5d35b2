//! Benchmark of the CRD upgrade-safety check: all CRDs of the sn-operator 0.19.7 bundle
//! (32 CRDs, 6.8 MB) against themselves and against a copy with one change each.
//! Target: ≤ 50 ms for both passes together. Parsing is timed separately (the
//! reconciler already holds parsed objects).
//!
//! `cargo run --release --example bench_crd_safety [-- <manifests dir>]`

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::{
    CustomResourceDefinition, JSONSchemaProps,
};
use olmv1::preflight::crd_safety::{check, message, parse_crd};
use std::time::Instant;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let dir = match std::env::args().nth(1) {
        Some(d) => std::path::PathBuf::from(d),
        None => olmv1::testenv::shared_dir("fixtures/bundles/sn-operator/0.19.7/manifests")
            .ok_or("shared fixtures not found; pass the manifests directory")?,
    };
    let mut files: Vec<_> = std::fs::read_dir(&dir)?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|e| e == "yaml" || e == "yml"))
        .collect();
    files.sort();

    let t = Instant::now();
    let mut crds = Vec::new();
    let mut bytes = 0;
    for f in &files {
        let text = std::fs::read_to_string(f)?;
        if !text.contains("kind: CustomResourceDefinition") {
            continue;
        }
        bytes += text.len();
        crds.push(parse_crd(&text).map_err(|e| format!("{}: {e}", f.display()))?);
    }
    let parse = t.elapsed();

    let changed: Vec<CustomResourceDefinition> = crds
        .iter()
        .enumerate()
        .map(|(i, c)| one_change(i, c))
        .collect();

    // Warm-up, then the measured runs (best of 5).
    let run = |pairs: &[(&CustomResourceDefinition, &CustomResourceDefinition)]| {
        let mut findings = 0;
        let mut msg_bytes = 0;
        for (old, new) in pairs {
            let f = check(old, new);
            findings += f.len();
            if !f.is_empty() {
                msg_bytes += message(new.metadata.name.as_deref().unwrap_or(""), &f).len();
            }
        }
        (findings, msg_bytes)
    };
    let same: Vec<_> = crds.iter().map(|c| (c, c)).collect();
    let diff: Vec<_> = crds.iter().zip(&changed).collect();
    let _ = run(&same);
    let _ = run(&diff);
    let mut best_same = std::time::Duration::MAX;
    let mut best_diff = std::time::Duration::MAX;
    let mut result = ((0, 0), (0, 0));
    for _ in 0..5 {
        let t = Instant::now();
        let a = run(&same);
        best_same = best_same.min(t.elapsed());
        let t = Instant::now();
        let b = run(&diff);
        best_diff = best_diff.min(t.elapsed());
        result = (a, b);
    }

    println!(
        "CRDs: {} ({:.1} MB of YAML), parse: {:.1?}",
        crds.len(),
        bytes as f64 / 1e6,
        parse
    );
    println!(
        "against themselves:   {:>8.2?}  findings: {}",
        best_same, result.0.0
    );
    println!(
        "against one change:   {:>8.2?}  findings: {} (messages: {} bytes)",
        best_diff, result.1.0, result.1.1
    );
    println!(
        "total check time:     {:>8.2?}  (target ≤ 50 ms)",
        best_same + best_diff
    );
    if result.0.0 != 0 || result.1.0 < crds.len() {
        return Err("unexpected findings count".into());
    }
    Ok(())
}

/// One change per CRD, alternating between removing a field and requiring one.
fn one_change(i: usize, crd: &CustomResourceDefinition) -> CustomResourceDefinition {
    let mut c = crd.clone();
    let version = c.spec.versions.iter_mut().find(|v| v.storage);
    let spec = version
        .and_then(|v| v.schema.as_mut())
        .and_then(|s| s.open_api_v3_schema.as_mut())
        .and_then(|s| s.properties.as_mut())
        .and_then(|p| p.get_mut("spec"));
    let Some(spec) = spec else { return c };
    if i.is_multiple_of(2) {
        remove_first_field(spec);
    } else {
        let name = spec.properties.as_ref().and_then(|p| {
            p.keys()
                .find(|k| !spec.required.as_ref().is_some_and(|r| r.contains(k)))
                .cloned()
        });
        match name {
            Some(n) => spec.required.get_or_insert_with(Vec::new).push(n),
            None => remove_first_field(spec),
        }
    }
    c
}

fn remove_first_field(s: &mut JSONSchemaProps) {
    if let Some(p) = s.properties.as_mut()
        && let Some(k) = p.keys().next().cloned()
    {
        p.remove(&k);
    } else {
        s.type_ = Some("integer".into());
    }
}
