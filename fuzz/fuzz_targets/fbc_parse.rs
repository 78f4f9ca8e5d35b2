//! File-based catalog reader: one file (JSON stream or multi-document YAML, as the
//! walker sniffs it), walked with small limits, every blob validated and the first
//! package loaded into the model. Invariant: every blob handed out is one line of valid
//! JSON (the store writes it as one line of `catalog.jsonl`).
#![no_main]

use libfuzzer_sys::fuzz_target;
use olmv1::fbc::validate::Validator;
use olmv1::fbc::{Limits, load_package, walk_catalog};
use std::sync::OnceLock;

fn scratch() -> Option<&'static tempfile::TempDir> {
    static DIR: OnceLock<Option<tempfile::TempDir>> = OnceLock::new();
    DIR.get_or_init(|| tempfile::tempdir().ok()).as_ref()
}

fuzz_target!(|data: &[u8]| {
    let Some(dir) = scratch() else { return };
    let path = dir.path().join("catalog");
    if std::fs::write(&path, data).is_err() {
        return;
    }
    let limits = Limits {
        max_total_bytes: 1 << 20,
        max_files: 16,
        max_blob_bytes: 256 << 10,
    };
    let mut validator = Validator::default();
    let mut first_package = None;
    let _ = walk_catalog(&path, &limits, &mut |blob| {
        assert!(
            !blob.json.contains(&b'\n'),
            "blob at {} is not one line",
            blob.location()
        );
        if let Err(e) = serde_json::from_slice::<serde_json::Value>(blob.json) {
            panic!("blob at {} is not valid JSON: {e}", blob.location());
        }
        if first_package.is_none() && !blob.view.package().is_empty() {
            first_package = Some(blob.view.package().to_string());
        }
        validator.add(blob);
        Ok(())
    });
    let _ = validator.finish();
    if let Some(package) = first_package {
        let _ = load_package(&path, &package);
    }
});
