//! Helpers shared by the benchmarks (`mod common;` in each): process memory from
//! `/proc/self/status`, percentiles, the control plane of the controller benchmarks, and the "upgrade from the oldest bundle" request.
#![allow(dead_code)] // each benchmark uses a part

pub mod cluster;

use olmv1::fbc::model::PackageContent;
use olmv1::resolve::InstalledBundle;
use olmv1::version::BundleVersion;
use std::time::Duration;

/// A `/proc/self/status` field in KiB (`VmRSS:`, `VmHWM:`), 0 when unknown.
pub fn status_kib(key: &str) -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with(key))
                .and_then(|l| l.split_whitespace().nth(1).and_then(|v| v.parse().ok()))
        })
        .unwrap_or(0)
}

/// The `p` percentile (0.0–1.0) of sorted durations.
pub fn pct(sorted: &[Duration], p: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i.min(sorted.len() - 1)]
}

/// The package's lowest-version bundle as the installed bundle of an upgrade.
pub fn oldest_installed(content: &PackageContent) -> Option<InstalledBundle> {
    content
        .bundles
        .iter()
        .filter_map(|b| BundleVersion::of_bundle(b).ok().map(|v| (v, b)))
        .min_by(|a, b| a.0.cmp(&b.0))
        .map(|(v, b)| InstalledBundle {
            name: b.name.clone(),
            version: v.status_version(),
            release: None,
        })
}
