//! File-based catalogs: the typed model of FBC blobs ([`model`]) and reading catalogs
//! from files and directories. Validation and indexing are added beside it.

pub mod model;

use model::PackageContent;
use serde_json::Value;
use std::path::{Path, PathBuf};

#[derive(Debug, thiserror::Error)]
pub enum FbcError {
    #[error("reading {path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("parsing {path}: {message}")]
    Parse { path: PathBuf, message: String },
}

/// Reads every FBC blob of a file or a directory tree (JSON or multi-document YAML),
/// in path order, and calls `f` with the file it came from and the blob.
pub fn walk_blobs(
    root: &Path,
    f: &mut dyn FnMut(&Path, Value) -> Result<(), FbcError>,
) -> Result<(), FbcError> {
    let io = |path: &Path| {
        let path = path.to_path_buf();
        move |source| FbcError::Io { path, source }
    };
    if root.is_dir() {
        let mut entries: Vec<PathBuf> = std::fs::read_dir(root)
            .map_err(io(root))?
            .map(|e| e.map(|e| e.path()))
            .collect::<Result<_, _>>()
            .map_err(io(root))?;
        entries.sort();
        for entry in entries {
            walk_blobs(&entry, f)?;
        }
        return Ok(());
    }
    let ext = root
        .extension()
        .and_then(|e| e.to_str())
        .unwrap_or_default();
    if !matches!(ext, "json" | "yaml" | "yml") {
        return Ok(());
    }
    let text = std::fs::read_to_string(root).map_err(io(root))?;
    let docs: Vec<Value> = if ext == "json" {
        serde_json::Deserializer::from_str(&text)
            .into_iter::<Value>()
            .collect::<Result<_, _>>()
            .map_err(|e| FbcError::Parse {
                path: root.to_path_buf(),
                message: e.to_string(),
            })?
    } else {
        serde_saphyr::from_multiple::<Value>(&text).map_err(|e| FbcError::Parse {
            path: root.to_path_buf(),
            message: e.to_string(),
        })?
    };
    for doc in docs.into_iter().filter(|d| !d.is_null()) {
        f(root, doc)?;
    }
    Ok(())
}

/// Everything a catalog on disk holds for one package.
pub fn load_package(root: &Path, package: &str) -> Result<PackageContent, FbcError> {
    let mut content = PackageContent::default();
    walk_blobs(root, &mut |path, blob| {
        let schema = blob
            .get("schema")
            .and_then(Value::as_str)
            .unwrap_or_default();
        let owner = if schema == model::SCHEMA_PACKAGE {
            "name"
        } else {
            "package"
        };
        if blob.get(owner).and_then(Value::as_str) == Some(package) {
            content.push_blob(&blob).map_err(|e| FbcError::Parse {
                path: path.to_path_buf(),
                message: format!("{schema} blob: {e}"),
            })?;
        }
        Ok(())
    })?;
    Ok(content)
}
