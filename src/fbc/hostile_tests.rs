//! Broken and hostile catalogs, each its own test: every one must fail with a message
//! naming the problem, and leave the previously stored content in place. Invariant
//! violations fail only in strict mode ([`StoreOptions::strict`]); by default they are
//! stored, as catalogd does, and returned as warnings.

use super::store::{CATALOG_FILE, current_dir};
use super::{FbcError, Limits, StoreOptions, store, store_with_limits, store_with_options};
use std::path::Path;
use std::time::{Duration, Instant};

const GOOD: &str = "{\"schema\":\"olm.package\",\"name\":\"p\",\"defaultChannel\":\"s\"}\n{\"schema\":\"olm.channel\",\"name\":\"s\",\"package\":\"p\",\"entries\":[{\"name\":\"p.v1\"}]}\n{\"schema\":\"olm.bundle\",\"name\":\"p.v1\",\"package\":\"p\",\"properties\":[{\"type\":\"olm.package\",\"value\":{\"packageName\":\"p\",\"version\":\"1.0.0\"}}]}\n";

/// A root with `GOOD` stored as catalog "cat".
fn stored_root() -> tempfile::TempDir {
    let root = tempfile::tempdir().unwrap();
    let src = tempfile::tempdir().unwrap();
    std::fs::write(src.path().join("catalog.json"), GOOD).unwrap();
    store(root.path(), "cat", src.path()).unwrap();
    root
}

fn assert_previous_kept(root: &Path) {
    let dir = current_dir(root, "cat").expect("still stored");
    assert_eq!(
        std::fs::read_to_string(dir.join(CATALOG_FILE)).unwrap(),
        GOOD
    );
    let names: Vec<_> = std::fs::read_dir(root)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(
        names.len(),
        2,
        "only the link and its version remain: {names:?}"
    );
}

fn ingest_file(name: &str, text: &str) -> (tempfile::TempDir, String) {
    let root = stored_root();
    let src = tempfile::tempdir().unwrap();
    std::fs::create_dir(src.path().join("pkg")).unwrap();
    std::fs::write(src.path().join("pkg").join(name), text).unwrap();
    let strict = StoreOptions {
        strict: true,
        ..StoreOptions::default()
    };
    let err = store_with_options(root.path(), "cat", src.path(), &strict)
        .unwrap_err()
        .to_string();
    assert_previous_kept(root.path());
    (root, err)
}

/// What the default (catalogd's) acceptance stores of `text`, and its warnings.
fn ingest_default(name: &str, text: &str) -> Vec<String> {
    let root = stored_root();
    let src = tempfile::tempdir().unwrap();
    std::fs::create_dir(src.path().join("pkg")).unwrap();
    std::fs::write(src.path().join("pkg").join(name), text).unwrap();
    let stored = store(root.path(), "cat", src.path()).unwrap();
    let dir = current_dir(root.path(), "cat").expect("stored");
    assert_eq!(dir, stored.dir);
    assert_eq!(
        std::fs::read_to_string(dir.join(CATALOG_FILE)).unwrap(),
        text,
        "stored as given"
    );
    stored.warnings
}

#[test]
fn invariant_violations_are_stored_by_default_with_file_and_line() {
    let text = GOOD.replace(",\"defaultChannel\":\"s\"", "").replace(
        "{\"name\":\"p.v1\"}",
        "{\"name\":\"p.v1\"},{\"name\":\"p.v0\"}",
    );
    let warnings = ingest_default("catalog.json", &text);
    assert_eq!(warnings.len(), 2, "{warnings:?}");
    assert!(
        warnings[0].starts_with("pkg/catalog.json:1: ")
            && warnings[0].contains("no defaultChannel"),
        "{warnings:?}"
    );
    assert!(
        warnings[1].contains("pkg/catalog.json:2") && warnings[1].contains("p.v0"),
        "{warnings:?}"
    );
    // Syntax errors still fail by default.
    let (_r, err) = {
        let root = stored_root();
        let src = tempfile::tempdir().unwrap();
        std::fs::write(src.path().join("c.json"), "[1]").unwrap();
        let err = store(root.path(), "cat", src.path())
            .unwrap_err()
            .to_string();
        assert_previous_kept(root.path());
        (root, err)
    };
    assert!(err.contains("c.json"), "{err}");
}

#[test]
fn invalid_json_at_known_line() {
    let text = GOOD.replace("\"entries\":[", "\"entries\":[,");
    let (_r, err) = ingest_file("catalog.json", &text);
    assert!(err.contains("pkg/catalog.json"), "{err}");
    assert!(err.contains("blob 2 starting at line 2: line 2,"), "{err}");
}

#[test]
fn invalid_yaml_at_known_line() {
    let text = "schema: olm.package\nname: p\ndefaultChannel: s\n---\nschema: olm.channel\nname: s\npackage: p\nentries:\n  - name: p.v1\n   bad: indentation\n";
    let (_r, err) = ingest_file("catalog.yaml", text);
    assert!(err.contains("pkg/catalog.yaml"), "{err}");
    assert!(
        err.contains("document 2 starting at line 5: line 10"),
        "{err}"
    );
}

#[test]
fn duplicate_package() {
    let text = format!("{GOOD}{}\n", GOOD.lines().next().unwrap());
    let (_r, err) = ingest_file("catalog.json", &text);
    assert!(
        err.contains(
            "pkg/catalog.json:4: duplicate package \"p\" (first declared at pkg/catalog.json:1)"
        ),
        "{err}"
    );
}

#[test]
fn channel_naming_missing_bundle() {
    let text = GOOD.replace(
        "[{\"name\":\"p.v1\"}]",
        "[{\"name\":\"p.v1\"},{\"name\":\"p.v2\",\"replaces\":\"p.v1\"}]",
    );
    let (_r, err) = ingest_file("catalog.json", &text);
    assert!(err.contains("channel \"s\" of package \"p\" names bundle \"p.v2\", which is not a bundle of that package"), "{err}");
}

#[test]
fn missing_default_channel() {
    let text = GOOD.replace("\"defaultChannel\":\"s\"", "\"defaultChannel\":\"stable\"");
    let (_r, err) = ingest_file("catalog.json", &text);
    assert!(
        err.contains("package \"p\": default channel \"stable\" not found"),
        "{err}"
    );
}

#[test]
fn catalog_larger_than_size_limit() {
    let root = stored_root();
    let src = tempfile::tempdir().unwrap();
    for i in 0..10 {
        std::fs::write(src.path().join(format!("{i}.json")), GOOD).unwrap();
    }
    let limits = Limits {
        max_total_bytes: 3 * GOOD.len() as u64,
        ..Limits::default()
    };
    let err = store_with_limits(root.path(), "cat", src.path(), &limits).unwrap_err();
    assert!(matches!(err, FbcError::Limit { .. }), "{err}");
    assert!(err.to_string().contains("larger than"), "{err}");
    assert_previous_kept(root.path());
}

#[test]
fn blob_larger_than_limit() {
    let root = stored_root();
    let src = tempfile::tempdir().unwrap();
    // One endless string: the reader must stop at the limit, not buffer the file.
    let mut text = String::from("{\"schema\":\"x\",\"v\":\"");
    text.push_str(&"a".repeat(3 << 20));
    std::fs::write(src.path().join("big.json"), &text).unwrap();
    let limits = Limits {
        max_blob_bytes: 1 << 20,
        ..Limits::default()
    };
    let err = store_with_limits(root.path(), "cat", src.path(), &limits)
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("big.json:1: blob is larger than 1048576 bytes"),
        "{err}"
    );
    assert_previous_kept(root.path());
}

#[test]
fn symlinks_are_refused() {
    let root = stored_root();
    let src = tempfile::tempdir().unwrap();
    std::os::unix::fs::symlink("/etc/passwd", src.path().join("catalog.json")).unwrap();
    let err = store(root.path(), "cat", src.path())
        .unwrap_err()
        .to_string();
    assert!(err.contains("symbolic links are not allowed"), "{err}");
    assert_previous_kept(root.path());
}

#[test]
fn one_million_tiny_files_fail_fast_on_the_file_count_limit() {
    let root = stored_root();
    // A million files cost a minute to create on a disk and seconds in memory; where
    // the file system is does not matter to the limit.
    let shm = Path::new("/dev/shm");
    let src = if shm.is_dir() {
        tempfile::tempdir_in(shm).unwrap_or_else(|_| tempfile::tempdir().unwrap())
    } else {
        tempfile::tempdir().unwrap()
    };
    let dir = src.path();
    std::thread::scope(|s| {
        for t in 0..4 {
            s.spawn(move || {
                for i in (t..1_000_000).step_by(4) {
                    std::fs::File::create(dir.join(format!("{i:07}.json"))).unwrap();
                }
            });
        }
    });
    let start = Instant::now();
    let err = store(root.path(), "cat", src.path()).unwrap_err();
    let took = start.elapsed();
    assert!(matches!(err, FbcError::Limit { .. }), "{err}");
    assert!(err.to_string().contains("more than 100000 files"), "{err}");
    assert!(took < Duration::from_secs(10), "took {took:?}");
    assert_previous_kept(root.path());
}

/// Runs `f` on a thread with the controller's 2 MiB worker stack.
fn on_small_stack<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> T {
    std::thread::Builder::new()
        .stack_size(2 << 20)
        .spawn(f)
        .unwrap()
        .join()
        .unwrap()
}

/// A source directory with `GOOD` and an `.indexignore` of `patterns` patterns that
/// match nothing.
fn catalog_with_ignore(patterns: usize) -> tempfile::TempDir {
    let src = tempfile::tempdir().unwrap();
    std::fs::write(src.path().join("catalog.json"), GOOD).unwrap();
    let text: String = (0..patterns).map(|i| format!("x{i}-*\n")).collect();
    std::fs::write(src.path().join(".indexignore"), text).unwrap();
    src
}

/// Each `.indexignore` pattern used to become its own regular expression: 100,000
/// patterns took ~1.5 GiB and 16 s. Now the count is bounded (docs: SECURITY.md,
/// "What is trusted in catalogs").
#[test]
fn indexignore_with_too_many_patterns_is_refused_with_the_limit() {
    let root = stored_root();
    let src = catalog_with_ignore(5_000);
    let start = Instant::now();
    let err = store(root.path(), "cat", src.path()).unwrap_err();
    assert!(matches!(err, FbcError::Limit { .. }), "{err}");
    let err = err.to_string();
    assert!(
        err.contains(".indexignore") && err.contains("more than 1000 patterns"),
        "{err}"
    );
    assert!(err.contains("max_ignore_patterns"), "{err}");
    assert!(
        start.elapsed() < Duration::from_secs(2),
        "{:?}",
        start.elapsed()
    );
    assert_previous_kept(root.path());
}

#[test]
fn indexignore_larger_than_the_limit_is_refused() {
    let src = tempfile::tempdir().unwrap();
    std::fs::write(src.path().join("catalog.json"), GOOD).unwrap();
    let text = format!("# {}\n*.md\n", "x".repeat(100 << 10));
    std::fs::write(src.path().join(".indexignore"), text).unwrap();
    let err = super::validate_catalog(src.path(), &StoreOptions::default())
        .unwrap_err()
        .to_string();
    assert!(
        err.contains(".indexignore") && err.contains("larger than 65536 bytes"),
        "{err}"
    );
    assert!(err.contains("max_ignore_bytes"), "{err}");
}

/// At the limit, matching stays fast: 1,000 patterns against 5,000 files.
#[test]
fn indexignore_at_the_pattern_limit_is_matched_quickly() {
    let src = catalog_with_ignore(1_000);
    let dir = src.path().join("many");
    std::fs::create_dir(&dir).unwrap();
    for i in 0..5_000 {
        std::fs::write(dir.join(format!("f{i}.txt")), "").unwrap();
    }
    let start = Instant::now();
    let v = super::validate_catalog(src.path(), &StoreOptions::default()).unwrap();
    assert_eq!(v.blobs, 3);
    assert!(
        start.elapsed() < Duration::from_secs(10),
        "{:?}",
        start.elapsed()
    );
}

/// Builds `levels` nested directories `d/d/…` under `root` (iteratively) and returns
/// the innermost one.
fn nest(root: &Path, levels: usize) -> std::path::PathBuf {
    let mut p = root.to_path_buf();
    for _ in 0..levels {
        p.push("d");
        std::fs::create_dir(&p).unwrap();
    }
    p
}

/// Removes what [`nest`] built, innermost first (so no recursion, no open directories).
fn unnest(root: &Path, levels: usize) {
    let mut p = root.to_path_buf();
    for _ in 0..levels {
        p.push("d");
    }
    for _ in 0..levels {
        let _ = std::fs::remove_dir_all(&p);
        p.pop();
    }
}

/// The walk used to recurse once per directory level: a tree ~2,000 levels deep
/// overflowed the stack and aborted the process.
#[test]
fn directory_tree_deeper_than_the_limit_is_refused_on_a_worker_stack() {
    let src = tempfile::tempdir().unwrap();
    let levels = 2_000;
    let deepest = nest(src.path(), levels);
    std::fs::write(deepest.join("c.json"), GOOD).unwrap();
    let path = src.path().to_path_buf();
    let result = on_small_stack(move || {
        super::validate_catalog(&path, &StoreOptions::default()).map_err(|e| e.to_string())
    });
    unnest(src.path(), levels);
    let err = result.unwrap_err();
    assert!(err.contains("nested deeper than 64 directories"), "{err}");
    assert!(err.contains("d/d/d"), "names the path: {err}");
}

#[test]
fn directory_tree_at_the_depth_limit_is_read() {
    let src = tempfile::tempdir().unwrap();
    let deepest = nest(src.path(), 64);
    std::fs::write(deepest.join("c.json"), GOOD).unwrap();
    let path = src.path().to_path_buf();
    let v =
        on_small_stack(move || super::validate_catalog(&path, &StoreOptions::default())).unwrap();
    assert_eq!(v.blobs, 3);
}

/// `{"schema":"x","v":[[…]]}` with the object and `depth - 1` arrays.
fn nested_blob(depth: usize) -> String {
    format!(
        "{{\"schema\":\"x\",\"v\":{}{}}}\n",
        "[".repeat(depth - 1),
        "]".repeat(depth - 1)
    )
}

/// Go's encoding/json (so catalogd and opm) refuses JSON nested deeper than 10,000
/// levels ("exceeded max depth", `maxNestingDepth` in encoding/json's scanner.go);
/// the scanner used to accept 100,000 levels.
#[test]
fn json_nested_deeper_than_go_allows_is_refused() {
    let src = tempfile::tempdir().unwrap();
    std::fs::create_dir(src.path().join("pkg")).unwrap();
    let text = format!("{GOOD}{}", nested_blob(100_000));
    std::fs::write(src.path().join("pkg/catalog.json"), text).unwrap();
    let path = src.path().to_path_buf();
    let err = on_small_stack(move || {
        super::validate_catalog(&path, &StoreOptions::default()).map_err(|e| e.to_string())
    })
    .unwrap_err();
    assert!(err.contains("pkg/catalog.json:4"), "{err}");
    assert!(
        err.contains("nested deeper than 10000 levels") && err.contains("max_json_depth"),
        "{err}"
    );
    assert!(err.contains("exceeded max depth"), "{err}");
}

#[test]
fn json_nested_as_deep_as_go_allows_is_accepted() {
    let src = tempfile::tempdir().unwrap();
    let text = format!("{GOOD}{}", nested_blob(10_000));
    std::fs::write(src.path().join("catalog.json"), text).unwrap();
    let path = src.path().to_path_buf();
    let v =
        on_small_stack(move || super::validate_catalog(&path, &StoreOptions::default())).unwrap();
    assert_eq!(v.blobs, 4);
}

/// One package, one channel naming `listed` bundles, and `n` tiny bundles.
fn write_tiny_bundles(path: &Path, n: usize, listed: usize) {
    use std::io::Write;
    let mut w = std::io::BufWriter::new(std::fs::File::create(path).unwrap());
    writeln!(w, "{}", GOOD.lines().next().unwrap()).unwrap();
    write!(
        w,
        "{{\"schema\":\"olm.channel\",\"name\":\"s\",\"package\":\"p\",\"entries\":["
    )
    .unwrap();
    for i in 0..listed {
        write!(w, "{}{{\"name\":\"p.v{i}\"}}", if i > 0 { "," } else { "" }).unwrap();
    }
    writeln!(w, "]}}").unwrap();
    for i in 0..n {
        writeln!(w, "{{\"schema\":\"olm.bundle\",\"name\":\"p.v{i}\",\"package\":\"p\",\"properties\":[{{\"type\":\"olm.package\",\"value\":{{\"packageName\":\"p\",\"version\":\"0.{i}.0\"}}}}]}}").unwrap();
    }
    w.flush().unwrap();
}

/// A million tiny bundles (195 MB, within the 1 GiB size limit) used to cost 0.3–1 GB
/// in `catalog validate`, `catalog packages` and `resolve`; past the blob limit the walk
/// now stops. (`/work/hostile/fbc/gen-many-blobs.sh` writes the full-size catalog.)
#[test]
fn more_blobs_than_the_limit_are_refused() {
    let src = tempfile::tempdir().unwrap();
    write_tiny_bundles(&src.path().join("catalog.json"), 250_001, 1);
    let err = super::validate_catalog(src.path(), &StoreOptions::default()).unwrap_err();
    assert!(matches!(err, FbcError::Limit { .. }), "{err}");
    let err = err.to_string();
    assert!(
        err.contains("catalog.json:250001: catalog has more than 250000 blobs (limit max_blobs)"),
        "{err}"
    );
}

/// One channel blob listing a million entries (25 MB, within the blob size limit) was
/// read whole into entry views before the blob count could apply; a channel cannot list
/// more bundles than a catalog may hold, so the list is refused while it is read.
#[test]
fn channel_listing_more_entries_than_the_blob_limit_is_refused() {
    let src = tempfile::tempdir().unwrap();
    write_tiny_bundles(&src.path().join("catalog.json"), 1, 250_001);
    let err = super::validate_catalog(src.path(), &StoreOptions::default()).unwrap_err();
    let err = err.to_string();
    assert!(
        err.contains("catalog.json: blob 2 starting at line 2")
            && err.contains("more than 250000 entries (limit max_blobs"),
        "{err}"
    );
    // At the limit the channel is read (and then found to name missing bundles).
    write_tiny_bundles(&src.path().join("catalog.json"), 1, 250_000);
    let err = super::validate_catalog(src.path(), &StoreOptions::default())
        .map(|_| String::new())
        .unwrap_or_else(|e| e.to_string());
    assert!(!err.contains("limit max_blobs"), "{err}");
}
