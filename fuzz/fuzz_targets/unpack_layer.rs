//! Layer unpacking (tar, tar+gzip, tar+zstd, sniffed from the bytes) with small limits,
//! once for the whole image and once for a sub-directory. Invariants: nothing appears
//! beside the destination, and no symlink left in it resolves outside it.
#![no_main]

use libfuzzer_sys::fuzz_target;
use olmv1::image::UnpackLimits;
use olmv1::image::unpack::{LayerFile, unpack_layers};
use std::path::Path;
use std::sync::OnceLock;

fn scratch() -> Option<&'static tempfile::TempDir> {
    static DIR: OnceLock<Option<tempfile::TempDir>> = OnceLock::new();
    DIR.get_or_init(|| tempfile::tempdir().ok()).as_ref()
}

fn check_inside(dest: &Path) {
    let Ok(root) = dest.canonicalize() else {
        return;
    };
    let mut stack = vec![root.clone()];
    while let Some(dir) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for entry in entries.flatten() {
            let path = entry.path();
            let Ok(meta) = std::fs::symlink_metadata(&path) else {
                continue;
            };
            if meta.file_type().is_symlink() {
                if let Ok(target) = path.canonicalize() {
                    assert!(
                        target.starts_with(&root),
                        "{path:?} points outside: {target:?}"
                    );
                }
            } else if meta.is_dir() {
                stack.push(path);
            }
        }
    }
}

fuzz_target!(|data: &[u8]| {
    let Some(dir) = scratch() else { return };
    let work = dir.path().join("work");
    let _ = std::fs::remove_dir_all(&work);
    if std::fs::create_dir_all(&work).is_err() {
        return;
    }
    let layer_path = work.join("layer");
    if std::fs::write(&layer_path, data).is_err() {
        return;
    }
    let layer = LayerFile {
        path: layer_path,
        digest: "sha256:0".into(),
        media_type: "application/vnd.oci.image.layer.v1.tar+gzip".into(),
    };
    let limits = UnpackLimits {
        max_expanded_bytes: 8 << 20,
        max_entries: 1_000,
        max_file_bytes: 4 << 20,
    };
    let subdirs: [&[String]; 2] = [&[], &["configs".to_string()]];
    for (i, subdir) in subdirs.into_iter().enumerate() {
        let dest = work.join(format!("dest{i}"));
        if std::fs::create_dir(&dest).is_err() {
            return;
        }
        let _ = unpack_layers("fuzz", std::slice::from_ref(&layer), &dest, subdir, &limits);
        check_inside(&dest);
    }
    let mut names: Vec<String> = std::fs::read_dir(&work)
        .map(|d| {
            d.flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    names.sort();
    assert_eq!(
        names,
        ["dest0", "dest1", "layer"],
        "something was written beside the destination"
    );
});
