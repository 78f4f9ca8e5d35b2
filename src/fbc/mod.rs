//! File-based catalogs: the typed model of FBC blobs ([`model`]), streaming parsing of
//! catalogs from files and directories ([`parse`], honouring [`ignore`]), validation of
//! catalog invariants ([`validate`]), on-disk storage with an index ([`store`]) and the
//! `olmv1 catalog` query command ([`cli`]).

pub mod ignore;
pub mod model;
pub mod parse;
pub mod precompress;
pub mod query;
pub mod store;
pub mod validate;

#[cfg(test)]
mod hostile_tests;

pub use parse::{Blob, Limits, walk_catalog};
pub use store::{
    StoreOptions, StoredCatalog, Validation, classify_violations, delete, store, store_with_limits,
    store_with_options, validate_catalog,
};

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
    /// A hard limit against hostile input was exceeded.
    #[error("{message}")]
    Limit { message: String },
    /// The catalog parsed but breaks catalog invariants; every problem is listed.
    #[error("invalid catalog: {}", problems.join("; "))]
    Invalid { problems: Vec<String> },
    #[error("invalid catalog name: {message}")]
    InvalidName { message: String },
}

/// Reads every FBC blob of a file or a directory tree (JSON streams or multi-document
/// YAML, `.indexignore` honoured), in walk order, and calls `f` with the file it came
/// from and the blob. Default [`Limits`] apply.
pub fn walk_blobs(
    root: &Path,
    f: &mut dyn FnMut(&Path, Value) -> Result<(), FbcError>,
) -> Result<(), FbcError> {
    walk_catalog(root, &Limits::default(), &mut |blob| {
        let value: Value = serde_json::from_slice(blob.json).map_err(|e| FbcError::Parse {
            path: blob.path.to_path_buf(),
            message: e.to_string(),
        })?;
        f(blob.path, value)
    })?;
    Ok(())
}

/// Everything a catalog on disk holds for one package. Only that package's blobs are
/// fully parsed.
pub fn load_package(root: &Path, package: &str) -> Result<PackageContent, FbcError> {
    let mut content = PackageContent::default();
    walk_catalog(root, &Limits::default(), &mut |blob| {
        if blob.view.package() != package {
            return Ok(());
        }
        content
            .push_json(blob.view.schema(), blob.json)
            .map_err(|e| FbcError::Parse {
                path: blob.path.to_path_buf(),
                message: format!("{} blob at line {}: {e}", blob.view.schema(), blob.line),
            })
    })?;
    Ok(content)
}
