//! Tests of safe layer unpacking.

use super::*;

#[test]
fn paths_are_normalized_and_escapes_rejected() {
    assert_eq!(
        normalize_entry_path("./a//b/./c").unwrap(),
        vec!["a", "b", "c"]
    );
    assert!(
        normalize_entry_path("a/../../b")
            .unwrap_err()
            .contains("..")
    );
    assert!(
        normalize_entry_path("/etc/passwd")
            .unwrap_err()
            .contains("absolute")
    );
}

#[test]
fn symlink_resolution_is_lexical_and_bounded() {
    let link = vec!["configs".to_string(), "x".to_string()];
    assert_eq!(
        resolve_symlink(&link, "../other/y").unwrap(),
        vec!["other", "y"]
    );
    assert!(resolve_symlink(&link, "../../etc").is_err());
    assert!(resolve_symlink(&link, "/etc/passwd").is_err());
    assert!(resolve_symlink(&link, "").is_err());
}

fn tar_layer(dir: &Path, name: &str, build: impl FnOnce(&mut tar::Builder<Vec<u8>>)) -> LayerFile {
    let mut b = tar::Builder::new(Vec::new());
    build(&mut b);
    let data = b.into_inner().unwrap();
    let path = dir.join(name);
    fs::write(&path, data).unwrap();
    LayerFile {
        path,
        digest: format!("sha256:{name}"),
        media_type: String::new(),
    }
}

fn file(b: &mut tar::Builder<Vec<u8>>, path: &str, data: &[u8]) {
    let mut h = tar::Header::new_gnu();
    h.set_size(data.len() as u64);
    h.set_mode(0o644);
    h.set_entry_type(tar::EntryType::Regular);
    b.append_data(&mut h, path, data).unwrap();
}

#[test]
fn whiteouts_and_opaque_dirs_apply_across_layers() {
    let t = tempfile::tempdir().unwrap();
    let l1 = tar_layer(t.path(), "l1", |b| {
        file(b, "configs/a/catalog.json", b"a");
        file(b, "configs/b/catalog.json", b"b");
        file(b, "configs/c/x.json", b"c");
        file(b, "other/z", b"z");
    });
    let l2 = tar_layer(t.path(), "l2", |b| {
        file(b, "configs/a/.wh.catalog.json", b"");
        file(b, "configs/c/new.json", b"n");
        file(b, "configs/c/.wh..wh..opq", b"");
    });
    let dest = t.path().join("out");
    fs::create_dir(&dest).unwrap();
    let sub = vec!["configs".to_string()];
    unpack_layers("img", &[l1, l2], &dest, &sub, &UnpackLimits::default()).unwrap();
    assert!(!dest.join("a/catalog.json").exists());
    assert_eq!(fs::read(dest.join("b/catalog.json")).unwrap(), b"b");
    assert!(!dest.join("c/x.json").exists());
    assert_eq!(fs::read(dest.join("c/new.json")).unwrap(), b"n");
    assert!(!dest.join("z").exists() && !dest.join("other").exists());
}

#[test]
fn whiteout_of_extracted_dir_clears_it() {
    let t = tempfile::tempdir().unwrap();
    let l1 = tar_layer(t.path(), "l1", |b| file(b, "configs/a.json", b"a"));
    let l2 = tar_layer(t.path(), "l2", |b| {
        file(b, ".wh.configs", b"");
        file(b, "configs/b.json", b"b");
    });
    let dest = t.path().join("out");
    fs::create_dir(&dest).unwrap();
    let sub = vec!["configs".to_string()];
    unpack_layers("img", &[l1, l2], &dest, &sub, &UnpackLimits::default()).unwrap();
    assert!(!dest.join("a.json").exists());
    assert!(dest.join("b.json").exists());
}

#[test]
fn missing_subdir_is_an_error_and_entry_limit_counts_skipped_entries() {
    let t = tempfile::tempdir().unwrap();
    let l1 = tar_layer(t.path(), "l1", |b| {
        for i in 0..20 {
            file(b, &format!("x/{i}"), b"");
        }
    });
    let dest = t.path().join("out");
    fs::create_dir(&dest).unwrap();
    let sub = vec!["configs".to_string()];
    let e = unpack_layers(
        "img",
        std::slice::from_ref(&l1),
        &dest,
        &sub,
        &UnpackLimits::default(),
    )
    .unwrap_err();
    assert!(matches!(e, ImageError::DirectoryMissing { .. }), "{e}");
    let limits = UnpackLimits {
        max_entries: 10,
        ..Default::default()
    };
    let e = unpack_layers("img", &[l1], &dest, &sub, &limits).unwrap_err();
    assert!(
        e.to_string()
            .contains("number of tar entries exceeds the limit of 10"),
        "{e}"
    );
}

#[test]
fn writes_through_symlinks_are_refused() {
    let t = tempfile::tempdir().unwrap();
    let l1 = tar_layer(t.path(), "l1", |b| {
        let mut h = tar::Header::new_gnu();
        h.set_entry_type(tar::EntryType::Symlink);
        h.set_size(0);
        b.append_link(&mut h, "d", "sub").unwrap();
        file(b, "sub/keep", b"k");
        file(b, "d/f", b"x");
    });
    let dest = t.path().join("out");
    fs::create_dir(&dest).unwrap();
    let e = unpack_layers("img", &[l1], &dest, &[], &UnpackLimits::default()).unwrap_err();
    assert!(e.to_string().contains("goes through the symlink"), "{e}");
}

#[test]
fn hard_links_inside_work_and_never_write_through() {
    let t = tempfile::tempdir().unwrap();
    let l1 = tar_layer(t.path(), "l1", |b| {
        file(b, "a/orig", b"orig");
        let mut h = tar::Header::new_gnu();
        h.set_entry_type(tar::EntryType::Link);
        h.set_size(0);
        b.append_link(&mut h, "a/link", "a/orig").unwrap();
    });
    let l2 = tar_layer(t.path(), "l2", |b| file(b, "a/link", b"replaced"));
    let dest = t.path().join("out");
    fs::create_dir(&dest).unwrap();
    unpack_layers("img", &[l1, l2], &dest, &[], &UnpackLimits::default()).unwrap();
    assert_eq!(
        fs::read(dest.join("a/orig")).unwrap(),
        b"orig",
        "no write through the link"
    );
    assert_eq!(fs::read(dest.join("a/link")).unwrap(), b"replaced");

    let l3 = tar_layer(t.path(), "l3", |b| {
        let mut h = tar::Header::new_gnu();
        h.set_entry_type(tar::EntryType::Link);
        h.set_size(0);
        b.append_link(&mut h, "x", "missing/file").unwrap();
    });
    let dest2 = t.path().join("out2");
    fs::create_dir(&dest2).unwrap();
    let e = unpack_layers("img", &[l3], &dest2, &[], &UnpackLimits::default()).unwrap_err();
    assert!(
        e.to_string()
            .contains("not a regular file extracted earlier"),
        "{e}"
    );
    assert!(!dest2.join("missing").exists());
}

#[test]
fn symlink_chains_resolving_outside_are_caught() {
    // s/d -> .. is inside (resolves to the root); l -> s/d/.. is lexically `s`, but
    // physically the parent of the root: the final physical check refuses it.
    let t = tempfile::tempdir().unwrap();
    let l1 = tar_layer(t.path(), "l1", |b| {
        let mut h = tar::Header::new_gnu();
        h.set_entry_type(tar::EntryType::Directory);
        h.set_size(0);
        b.append_data(&mut h, "s/", std::io::empty()).unwrap();
        let mut h = tar::Header::new_gnu();
        h.set_entry_type(tar::EntryType::Symlink);
        h.set_size(0);
        b.append_link(&mut h, "s/d", "..").unwrap();
        let mut h = tar::Header::new_gnu();
        h.set_entry_type(tar::EntryType::Symlink);
        h.set_size(0);
        b.append_link(&mut h, "l", "s/d/..").unwrap();
    });
    let dest = t.path().join("out");
    fs::create_dir(&dest).unwrap();
    let e = unpack_layers("img", &[l1], &dest, &[], &UnpackLimits::default()).unwrap_err();
    assert!(
        e.to_string()
            .contains("resolves outside the extracted directory"),
        "{e}"
    );
}

#[test]
fn expanded_size_limit_stops_reading() {
    let t = tempfile::tempdir().unwrap();
    let l1 = tar_layer(t.path(), "l1", |b| file(b, "big", &vec![0u8; 300_000]));
    let dest = t.path().join("out");
    fs::create_dir(&dest).unwrap();
    let limits = UnpackLimits {
        max_expanded_bytes: 100_000,
        ..Default::default()
    };
    let e = unpack_layers("img", std::slice::from_ref(&l1), &dest, &[], &limits).unwrap_err();
    assert!(
        e.to_string()
            .contains("expanded size exceeds the limit of 100000"),
        "{e}"
    );
    let dest2 = t.path().join("out2");
    fs::create_dir(&dest2).unwrap();
    let limits = UnpackLimits {
        max_file_bytes: 1000,
        ..Default::default()
    };
    let e = unpack_layers("img", &[l1], &dest2, &[], &limits).unwrap_err();
    assert!(
        e.to_string()
            .contains("file \"big\" (300000 bytes) exceeds the limit of 1000"),
        "{e}"
    );
}

/// A whiteout of `..` (`.wh...`) removed the directory above the unpack root; `.` and
/// an empty name removed their own directory. They are refused, naming the entry.
#[test]
fn whiteouts_of_dot_dot_dot_and_empty_names_are_refused() {
    let t = tempfile::tempdir().unwrap();
    for (i, name) in ["a/.wh...", ".wh...", "a/.wh..", "a/.wh."]
        .iter()
        .enumerate()
    {
        let work = t.path().join(format!("work{i}"));
        let dest = work.join("out");
        fs::create_dir_all(&dest).unwrap();
        fs::write(work.join("sentinel"), b"keep").unwrap();
        let l1 = tar_layer(&work, "l1", |b| file(b, "a/keep", b"k"));
        let l2 = tar_layer(&work, "l2", |b| file(b, name, b""));
        let e = unpack_layers("img", &[l1, l2], &dest, &[], &UnpackLimits::default()).unwrap_err();
        assert!(matches!(e, ImageError::UnsafeEntry { .. }), "{name}: {e:?}");
        let msg = e.to_string();
        assert!(
            msg.contains("layer sha256:l2")
                && msg.contains(&format!("{name:?}"))
                && msg.contains("whiteout"),
            "{name}: {msg}"
        );
        assert_eq!(fs::read(work.join("sentinel")).unwrap(), b"keep", "{name}");
        assert_eq!(fs::read(dest.join("a/keep")).unwrap(), b"k", "{name}");
    }
}
