//! Version ranges and bundle versions: Masterminds semver v3 constraints
//! (`spec.source.catalog.version`, [`constraint`]), blang `olm.skipRange` ranges
//! ([`skiprange`]), and bundle version+release parsing and ordering ([`bundle`]).
//! Pure functions only; the `semver` crate is used for `Version` parsing and
//! precedence, the range grammars are implemented here (docs/concepts/resolution.md §4.3).

pub mod bundle;
pub mod constraint;
pub mod skiprange;

pub use bundle::{BundleVersion, Release, VersionError};
pub use constraint::{ConstraintError, Constraints};
pub use skiprange::{SkipRange, SkipRangeError};
