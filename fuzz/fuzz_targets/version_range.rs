//! Version ranges (Masterminds constraints of `spec.source.catalog.version`), blang
//! `olm.skipRange` ranges and bundle versions. The first line is the range, the second
//! a version, the third a release; the range is checked against that version and a few
//! fixed ones.
#![no_main]

use libfuzzer_sys::fuzz_target;
use olmv1::version::{BundleVersion, Constraints, SkipRange};
use semver::Version;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let mut lines = text.splitn(3, '\n');
    let range = lines.next().unwrap_or_default();
    let version = lines.next().unwrap_or_default();
    let release = lines.next();
    let mut versions: Vec<Version> = ["0.0.0", "1.2.3", "1.2.3-rc.1", "18446744073709551615.0.0"]
        .iter()
        .filter_map(|v| Version::parse(v).ok())
        .collect();
    if let Ok(v) = Version::parse(version) {
        versions.push(v);
    }
    if let Ok(c) = Constraints::parse(range) {
        for v in &versions {
            let _ = c.matches(v);
        }
    }
    if let Ok(s) = SkipRange::parse(range) {
        for v in &versions {
            let _ = s.contains(v);
        }
    }
    if let Ok(b) = BundleVersion::new_lenient(version, release) {
        let _ = (b.status_version(), b.status_release());
    }
});
