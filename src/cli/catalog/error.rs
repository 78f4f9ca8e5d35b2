//! The error of every `olmv1 catalog` command ([`CliError`]): reading the catalog, an
//! unsupported request, the `--catalog` source, writing the output.

use crate::cli::source::SourceError;
use crate::fbc::FbcError;

/// Why an `olmv1 catalog` command failed.
#[derive(Debug, thiserror::Error)]
pub enum CliError {
    #[error(transparent)]
    Fbc(#[from] FbcError),
    #[error("{0}")]
    Unsupported(String),
    #[error(transparent)]
    Source(#[from] SourceError),
    #[error("writing output: {0}")]
    Output(String),
}
