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

/// CPU time this thread has run so far (`/proc/thread-self/schedstat`, in ns): unlike
/// wall-clock time it does not depend on how busy the machine is.
fn thread_cpu_time() -> std::time::Duration {
    let stat = fs::read_to_string("/proc/thread-self/schedstat").unwrap();
    let ns = stat.split_whitespace().next().unwrap().parse().unwrap();
    std::time::Duration::from_nanos(ns)
}

/// Runs `unpack_layers` on a thread: its result and CPU time, or `None` if it has
/// not finished within `within` (the thread is left to finish on its own: a
/// quadratic unpack takes minutes).
fn unpack_within(
    layers: Vec<LayerFile>,
    dest: &Path,
    within: std::time::Duration,
) -> Option<(Result<(), ImageError>, std::time::Duration)> {
    let (tx, rx) = std::sync::mpsc::channel();
    let dest = dest.to_path_buf();
    std::thread::spawn(move || {
        let start = thread_cpu_time();
        let r = unpack_layers("img", &layers, &dest, &[], &UnpackLimits::default());
        let _ = tx.send((r, thread_cpu_time() - start));
    });
    rx.recv_timeout(within).ok()
}

/// `a/a/…/a` with `depth` components.
fn chain(depth: usize) -> String {
    vec!["a"; depth].join("/")
}

/// A ~50 KB layer of 2,000 files 1,900 directories deep used to take minutes (every
/// entry re-checked each parent by its full path): refused at its first entry now.
#[test]
fn entries_nested_too_deep_are_refused_quickly() {
    let t = tempfile::tempdir().unwrap();
    let deep = chain(1900);
    let l1 = tar_layer(t.path(), "deep", |b| {
        for i in 0..2000 {
            file(b, &format!("{deep}/f{i}"), b"x");
        }
    });
    let dest = t.path().join("out");
    fs::create_dir(&dest).unwrap();
    let (r, cpu) = unpack_within(vec![l1], &dest, std::time::Duration::from_secs(20))
        .expect("unpacking the deep layer still runs after 20 s");
    let e = r.unwrap_err();
    assert!(matches!(e, ImageError::UnsafeEntry { .. }), "{e:?}");
    let msg = e.to_string();
    assert!(
        msg.contains("layer sha256:deep")
            && msg.contains(&format!(
                "nested deeper than {MAX_DIRECTORY_DEPTH} directories"
            )),
        "{msg}"
    );
    assert!(msg.len() < 1024, "the entry is shortened: {msg}");
    assert!(
        cpu < std::time::Duration::from_secs(2),
        "took {cpu:?} of CPU"
    );
}

/// At the depth limit, the unpack time grows with the number of entries, not with
/// entries × depth²: 4,000 entries under 255 directories (files, then whiteouts and
/// hard links that check their parents) took well over a minute before parents were
/// remembered; ~2 s of CPU (debug build) now.
#[test]
fn deep_trees_within_the_limit_unpack_in_linear_time() {
    let t = tempfile::tempdir().unwrap();
    let deep = chain(MAX_DIRECTORY_DEPTH - 1);
    let l1 = tar_layer(t.path(), "l1", |b| {
        for i in 0..2000 {
            file(b, &format!("{deep}/f{i}"), b"x");
        }
    });
    let l2 = tar_layer(t.path(), "l2", |b| {
        for i in 0..1000 {
            file(b, &format!("{deep}/.wh.f{i}"), b"");
            let mut h = tar::Header::new_gnu();
            h.set_entry_type(tar::EntryType::Link);
            h.set_size(0);
            b.append_link(
                &mut h,
                format!("{deep}/h{i}"),
                format!("{deep}/f{}", i + 1000),
            )
            .unwrap();
        }
    });
    let dest = t.path().join("out");
    fs::create_dir(&dest).unwrap();
    let (r, cpu) = unpack_within(vec![l1, l2], &dest, std::time::Duration::from_secs(120))
        .expect("unpacking still runs after 120 s");
    r.unwrap();
    let dir = dest.join(&deep);
    assert!(!dir.join("f0").exists() && !dir.join("f999").exists());
    assert_eq!(fs::read(dir.join("h0")).unwrap(), b"x");
    assert_eq!(fs::read(dir.join("f1999")).unwrap(), b"x");
    assert!(
        cpu < std::time::Duration::from_secs(8),
        "took {cpu:?} of CPU"
    );
}

/// Remembered directories are forgotten when an entry replaces them: a later write
/// through the symlink that replaced a directory is still refused (same layer and
/// next layer, after a whiteout too).
#[test]
fn directories_replaced_by_symlinks_are_not_written_through() {
    let symlink = |b: &mut tar::Builder<Vec<u8>>, path: &str, target: &str| {
        let mut h = tar::Header::new_gnu();
        h.set_entry_type(tar::EntryType::Symlink);
        h.set_size(0);
        b.append_link(&mut h, path, target).unwrap();
    };
    let t = tempfile::tempdir().unwrap();
    let same = tar_layer(t.path(), "same", |b| {
        file(b, "d/e/f", b"1");
        symlink(b, "d", "x");
        file(b, "d/e/g", b"2");
    });
    let lower = tar_layer(t.path(), "lower", |b| file(b, "d/e/f", b"1"));
    let upper = tar_layer(t.path(), "upper", |b| {
        symlink(b, "d/e", "../x");
        file(b, "d/e/g", b"2");
    });
    let whiteout = tar_layer(t.path(), "whiteout", |b| {
        file(b, ".wh.d", b"");
        symlink(b, "d", "x");
        file(b, "d/e/g", b"2");
    });
    for (i, layers) in [
        vec![same],
        vec![lower.clone(), upper],
        vec![lower, whiteout],
    ]
    .into_iter()
    .enumerate()
    {
        let dest = t.path().join(format!("out{i}"));
        fs::create_dir(&dest).unwrap();
        let e = unpack_layers("img", &layers, &dest, &[], &UnpackLimits::default()).unwrap_err();
        assert!(
            e.to_string().contains("goes through the symlink"),
            "{i}: {e}"
        );
    }
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
