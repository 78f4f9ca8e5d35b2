//! The bodies of the fuzz targets (`fuzz/fuzz_targets/*.rs` are one-line wrappers), in
//! the library so that the test command can run them un-instrumented: the integration
//! test `tests/fuzz_replay.rs` replays every seed and regression input and a few
//! seconds of simple mutations per target, while `hack/fuzz.sh` runs the same functions
//! under libFuzzer for the long, coverage-guided runs.
//!
//! Each function takes arbitrary bytes and panics only when an invariant of the code
//! under test breaks (that panic is the finding). Not part of the API.

use std::path::Path;
use std::sync::{Mutex, OnceLock};

/// A fuzz target: its name (as in `fuzz/Cargo.toml`) and its body.
pub type Target = (&'static str, fn(&[u8]));

/// Every target, in the order of `hack/fuzz.sh`.
pub const TARGETS: &[Target] = &[
    ("fbc_parse", fbc_parse),
    ("bundle_load", bundle_load),
    ("bundle_yaml", bundle_yaml),
    ("unpack_layer", unpack_layer),
    ("image_reference", image_reference),
    ("version_range", version_range),
    ("crd_compare", crd_compare),
    ("catalog_query", catalog_query),
    ("permissions", permissions),
    ("index_ignore", index_ignore),
];

fn scratch_base() -> Option<&'static std::path::PathBuf> {
    static DIR: OnceLock<Option<std::path::PathBuf>> = OnceLock::new();
    DIR.get_or_init(|| {
        tempfile::Builder::new()
            .prefix("olmv1-fuzz-")
            .tempdir()
            .ok()
            .map(tempfile::TempDir::keep)
    })
    .as_ref()
}

/// A scratch directory per target and thread (targets that write files may run in
/// parallel test threads).
fn scratch(target: &str) -> Option<std::path::PathBuf> {
    let dir = scratch_base()?
        .join(format!("{target}-{:?}", std::thread::current().id()).replace(['(', ')'], ""));
    std::fs::create_dir_all(&dir).ok()?;
    Some(dir)
}

/// Removes the scratch files of the targets (they are re-created on the next call).
pub fn remove_scratch() {
    if let Some(base) = scratch_base() {
        let _ = std::fs::remove_dir_all(base);
    }
}

/// File-based catalog reader: one file (JSON stream or multi-document YAML, as the
/// walker sniffs it), walked with small limits, every blob validated and the first
/// package loaded into the model. Invariant: every blob handed out is one line of valid
/// JSON (the store writes it as one line of `catalog.jsonl`).
pub fn fbc_parse(data: &[u8]) {
    use crate::fbc::validate::Validator;
    use crate::fbc::{Limits, load_package, walk_catalog};
    let Some(dir) = scratch("fbc_parse") else {
        return;
    };
    let path = dir.join("catalog");
    if std::fs::write(&path, data).is_err() {
        return;
    }
    let limits = Limits {
        max_total_bytes: 1 << 20,
        max_files: 16,
        max_blob_bytes: 256 << 10,
        ..Limits::default()
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
}

fn split_bundle(data: &[u8]) -> Vec<&[u8]> {
    let mut parts = Vec::new();
    let mut rest = data;
    while let Some(i) = rest.windows(5).position(|w| w == b"\n@@@\n") {
        parts.push(&rest[..i]);
        rest = &rest[i + 5..];
    }
    parts.push(rest);
    parts
}

fn lay_out_bundle(root: &Path, parts: &[&[u8]]) -> std::io::Result<()> {
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

/// registry+v1 bundle loading, validation and rendering. The input is split on lines
/// `@@@`: the first part is `metadata/annotations.yaml`, the second (when not empty)
/// `metadata/properties.yaml`, every further part one file in `manifests/`.
pub fn bundle_load(data: &[u8]) {
    use crate::bundle::{LoadOptions, RenderOptions, load_dir, render};
    let Some(dir) = scratch("bundle_load") else {
        return;
    };
    let root = dir.join("bundle");
    if lay_out_bundle(&root, &split_bundle(data)).is_err() {
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
}

/// The bundle loader's YAML reading, differentially: whenever the event-level fast path
/// returns documents, the full deserializer (bounded by `crate::yaml`) must accept the
/// same text and return the same values. Also exercises the alias-bomb guard.
pub fn bundle_yaml(data: &[u8]) {
    use crate::bundle::LoadOptions;
    use crate::bundle::fuzz_api::{fast_documents, full_documents};
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let opts = LoadOptions {
        max_file_bytes: 1 << 20,
        max_yaml_nodes: 100_000,
        ..LoadOptions::default()
    };
    let full = full_documents(text, &opts);
    if let Some(fast) = fast_documents(text, &opts) {
        match full {
            Ok(full) => assert_eq!(fast, full, "fast path and deserializer disagree"),
            Err(e) => panic!("fast path accepted what the deserializer refuses: {e}"),
        }
    }
    let _ = crate::yaml::check_aliases(text);
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

/// Layer unpacking (tar, tar+gzip, tar+zstd, sniffed from the bytes) with small limits,
/// once for the whole image and once for a sub-directory. Invariants: nothing appears
/// beside the destination, and no symlink left in it resolves outside it.
pub fn unpack_layer(data: &[u8]) {
    use crate::image::UnpackLimits;
    use crate::image::unpack::{LayerFile, unpack_layers};
    let Some(dir) = scratch("unpack_layer") else {
        return;
    };
    let work = dir.join("work");
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
        max_depth: 64,
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
}

/// Image reference parsing. Invariant: a parsed reference, printed whole, parses back
/// to the same reference (normalisation is idempotent).
pub fn image_reference(data: &[u8]) {
    use crate::image::reference::parse;
    let Ok(s) = std::str::from_utf8(data) else {
        return;
    };
    let _ = crate::bundle::is_digest_reference(s);
    let Ok(r) = parse(s) else { return };
    let whole = r.whole();
    match parse(&whole) {
        Ok(again) => assert_eq!(again.whole(), whole, "normalisation is not idempotent"),
        Err(e) => panic!("{s:?} parsed, but its normal form {whole:?} does not: {e}"),
    }
}

/// Version ranges (Masterminds constraints of `spec.source.catalog.version`), blang
/// `olm.skipRange` ranges and bundle versions. The first line is the range, the second
/// a version, the third a release; the range is checked against that version and a few
/// fixed ones.
pub fn version_range(data: &[u8]) {
    use crate::version::{BundleVersion, Constraints, SkipRange};
    use semver::Version;
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
}

/// CRD reading and upgrade-safety comparison: the input is two CRDs (YAML or JSON)
/// separated by a line `====`; the first is the live CRD, the second the new one. Both
/// the comparison and its message must complete for any pair that parses.
pub fn crd_compare(data: &[u8]) {
    use crate::preflight::crd_safety::{check, message, parse_crd};
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let (old, new) = text.split_once("\n====\n").unwrap_or((text, text));
    let (Ok(old), Ok(new)) = (parse_crd(old), parse_crd(new)) else {
        return;
    };
    let findings = check(&old, &new);
    let _ = message(&old.metadata.name.clone().unwrap_or_default(), &findings);
    let _ = check(&new, &old);
}

const QUERY_CATALOG: &str = r#"{"schema":"olm.package","name":"pkg","defaultChannel":"stable"}
{"schema":"olm.channel","package":"pkg","name":"stable","entries":[{"name":"pkg.v1.0.0"}]}
{"schema":"olm.bundle","package":"pkg","name":"pkg.v1.0.0","image":"example.com/pkg@sha256:0000000000000000000000000000000000000000000000000000000000000000","properties":[{"type":"olm.package","value":{"packageName":"pkg","version":"1.0.0"}}]}
"#;

struct QueryEnv {
    _dir: tempfile::TempDir,
    router: axum::Router,
    rt: Mutex<tokio::runtime::Runtime>,
}

fn query_env() -> Option<&'static QueryEnv> {
    static ENV: OnceLock<Option<QueryEnv>> = OnceLock::new();
    ENV.get_or_init(|| {
        let dir = tempfile::tempdir().ok()?;
        let source = dir.path().join("source.json");
        std::fs::write(&source, QUERY_CATALOG).ok()?;
        let root = dir.path().join("store");
        crate::fbc::store(&root, "cat", &source).ok()?;
        let router = crate::server::catalog::router(&root);
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .ok()?;
        Some(QueryEnv {
            _dir: dir,
            router,
            rt: Mutex::new(rt),
        })
    })
    .as_ref()
}

fn query_request(text: &str) -> Option<http::Request<axum::body::Body>> {
    let mut lines = text.split('\n');
    let first = lines.next()?;
    let (method, target) = match first.strip_prefix("HEAD ") {
        Some(t) => (http::Method::HEAD, t),
        None => (http::Method::GET, first),
    };
    let mut builder = http::Request::builder().method(method).uri(target);
    for line in lines {
        let (name, value) = line.split_once(':')?;
        builder = builder.header(name.trim(), value.trim());
    }
    builder.body(axum::body::Body::empty()).ok()
}

/// The catalog HTTP API over a small stored catalog: the first line of the input is the
/// request target (path and query), the next lines are `Name: value` headers; a leading
/// `HEAD ` selects HEAD. Invariant: no request makes the server fail (5xx).
pub fn catalog_query(data: &[u8]) {
    use tower::ServiceExt as _;
    let Some(env) = query_env() else { return };
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let Some(req) = query_request(text) else {
        return;
    };
    let rt = match env.rt.lock() {
        Ok(rt) => rt,
        Err(poisoned) => poisoned.into_inner(),
    };
    rt.block_on(async {
        let Ok(resp) = env.router.clone().oneshot(req).await;
        let status = resp.status();
        let body = axum::body::to_bytes(resp.into_body(), 64 << 20).await;
        assert!(!status.is_server_error(), "{text:?} -> {status}");
        assert!(body.is_ok(), "{text:?}: body failed");
    });
}

/// The permission preflight's pure part (docs/concepts/installer-permissions.md): the input is a
/// JSON array of manifests (or one YAML stream); their requirements — bundled roles sized
/// before they are expanded — and the missing-permissions message for an account that
/// holds nothing. Invariants: the message lists at most
/// [`crate::preflight::permissions::MAX_MISSING_LINES`] permissions, and a role refused
/// as too large is never reported as covered.
pub fn permissions(data: &[u8]) {
    use crate::preflight::permissions::{
        MAX_MISSING_LINES, ResourceMap, describe, missing_message, requirements,
    };
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let objects: Vec<serde_json::Value> = match serde_json::from_str(text) {
        Ok(serde_json::Value::Array(items)) => items,
        _ => match crate::yaml::from_multiple(text, serde_saphyr::Options::default()) {
            Ok(docs) => docs,
            Err(_) => return,
        },
    };
    let map = ResourceMap::offline(&objects);
    let Ok(infos) = describe(&objects, &map) else {
        return;
    };
    let req = requirements(&objects, &infos, "fuzz");
    let missing = req.missing(|_| false);
    if let Some(message) = missing_message(&missing) {
        assert!(
            message.lines().count() <= MAX_MISSING_LINES + 2,
            "the missing-permissions message is not capped"
        );
    }
    assert!(
        req.too_large(|_| true).is_none(),
        "bind and escalate on every role must cover a role too large to expand"
    );
}

/// `.indexignore` matching (docs/concepts/catalogs.md): the input is an `.indexignore` file, a
/// line `====`, then one catalog-relative path a line (a trailing `/` marks a
/// directory). Invariant: matching is a function of the path (the same answer twice).
pub fn index_ignore(data: &[u8]) {
    use crate::fbc::ignore::{IgnoreFile, IgnoreStack};
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let (patterns, paths) = text.split_once("\n====\n").unwrap_or((text, ""));
    let Ok(file) = IgnoreFile::parse(patterns) else {
        return;
    };
    let mut stack = IgnoreStack::default();
    stack.push("", file);
    for line in paths.lines().filter(|l| !l.is_empty()) {
        let (path, is_dir) = match line.strip_suffix('/') {
            Some(dir) => (dir, true),
            None => (line, false),
        };
        let first = stack.is_ignored(path, is_dir);
        assert_eq!(first, stack.is_ignored(path, is_dir), "{path:?}");
    }
}
