//! Reading a bundle's `metadata/` directory as opm does (docs/concepts/rendering.md §5.1):
//! every regular file in it (in lexical walk order, subdirectories included) is read by
//! content, not by name. The annotations come from the first file whose first document
//! holds a non-empty `annotations` map, the dependencies from the first with a non-empty
//! `dependencies` list, the properties from the first with a non-empty `properties` list;
//! so `metadata/dependency.yaml`, or a `dependencies:` list inside
//! `metadata/properties.yaml`, count like `metadata/dependencies.yaml`. A file that cannot
//! be decoded (invalid YAML, or the key holding the wrong shape) is skipped with a
//! warning, as opm skips it; only the annotations are required.

use super::load::{LoadError, LoadOptions, parse_documents, read_optional};
use serde_json::{Map, Value};
use std::fs;
use std::path::Path;

/// The canonical annotations file, named in errors when no file holds annotations.
pub(super) const ANNOTATIONS_REL: &str = "metadata/annotations.yaml";

/// What `metadata/` declares.
#[derive(Debug, Default)]
pub(super) struct Metadata {
    pub annotations: Option<Map<String, Value>>,
    pub properties: Vec<Value>,
    pub dependencies: Vec<Value>,
    /// Files skipped because they could not be decoded, one message each.
    pub warnings: Vec<String>,
    /// Why `metadata/annotations.yaml` itself gave no annotations, if it exists.
    pub annotations_problem: Option<LoadError>,
}

/// Regular files under `dir` (relative names, `/`-separated), in the lexical order of
/// Go's `fs.WalkDir`; at most `max` of them.
fn walk(dir: &Path, prefix: &str, max: usize, out: &mut Vec<String>) -> Result<(), LoadError> {
    let io = |source| LoadError::Io {
        path: dir.to_path_buf(),
        source,
    };
    let mut names: Vec<(String, bool)> = Vec::new();
    for entry in fs::read_dir(dir).map_err(io)? {
        let entry = entry.map_err(io)?;
        let is_dir = entry.file_type().map_err(io)?.is_dir();
        names.push((entry.file_name().to_string_lossy().into_owned(), is_dir));
    }
    names.sort();
    for (name, is_dir) in names {
        let rel = format!("{prefix}{name}");
        if is_dir {
            walk(&dir.join(&name), &format!("{rel}/"), max, out)?;
        } else {
            out.push(rel);
        }
        if out.len() > max {
            return Err(LoadError::TooManyFiles { limit: max });
        }
    }
    Ok(())
}

/// The value of `key` in `doc` when it is a non-empty list: `Ok(None)` when absent or
/// empty, `Err` when present with another shape (Go's decoding fails: the file is skipped).
fn list<'a>(doc: &'a Value, key: &str) -> Result<Option<&'a Vec<Value>>, String> {
    match doc.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Array(items)) if items.is_empty() => Ok(None),
        Some(Value::Array(items)) => Ok(Some(items)),
        Some(_) => Err(format!("\"{key}\" must be a list")),
    }
}

/// Reads every file of `metadata/` (see the module documentation).
pub(super) fn read_metadata(
    metadata_dir: &Path,
    opts: &LoadOptions,
    budget: &mut u64,
) -> Result<Metadata, LoadError> {
    let mut md = Metadata::default();
    let mut files = Vec::new();
    if metadata_dir.is_dir() {
        walk(metadata_dir, "metadata/", opts.max_files, &mut files)?;
    }
    for rel in files {
        let path = metadata_dir.join(rel.trim_start_matches("metadata/"));
        let Some(text) = read_optional(&path, &rel, opts, budget)? else {
            continue;
        };
        let doc = match parse_documents(&rel, &text, opts) {
            Ok(docs) => docs.into_iter().find(|d| !d.is_null()),
            Err(e) => {
                skip(&mut md, &rel, e.to_string());
                if rel == ANNOTATIONS_REL {
                    md.annotations_problem = Some(e);
                }
                continue;
            }
        };
        let Some(doc) = doc else { continue };
        take(&mut md, &rel, &doc);
    }
    Ok(md)
}

fn skip(md: &mut Metadata, rel: &str, why: String) {
    let message = format!("skipping {rel}: {why}");
    tracing::warn!("{message}");
    md.warnings.push(message);
}

/// Takes from one decoded metadata document what is still missing.
fn take(md: &mut Metadata, rel: &str, doc: &Value) {
    if md.annotations.is_none() {
        match doc.get("annotations") {
            Some(Value::Object(map)) if !map.is_empty() => md.annotations = Some(map.clone()),
            Some(Value::Object(_)) => {}
            None | Some(Value::Null) => {
                if rel == ANNOTATIONS_REL {
                    md.annotations_problem = Some(LoadError::InvalidMetadata {
                        path: rel.into(),
                        reason: "missing the \"annotations\" map".into(),
                    });
                }
            }
            Some(_) => skip(md, rel, "\"annotations\" must be a map".to_string()),
        }
    }
    let mut skipped = Vec::new();
    for (key, slot) in [
        ("dependencies", &mut md.dependencies),
        ("properties", &mut md.properties),
    ] {
        if !slot.is_empty() {
            continue;
        }
        match list(doc, key) {
            Ok(Some(items)) => *slot = items.clone(),
            Ok(None) => {}
            Err(why) => skipped.push(why),
        }
    }
    for why in skipped {
        skip(md, rel, why);
    }
}
