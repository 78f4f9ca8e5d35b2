//! What a SOURCE or `--diff` argument of `olmv1 rbac` names: a path, a bundle image, or
//! a bundle of a catalog package ([`classify_source`], [`classify_diff`]).

use crate::version::BundleVersion;
use std::path::{Path, PathBuf};

/// What a SOURCE or `--diff` argument names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Input {
    /// An existing file or directory (bundle directory or rendered manifests).
    Path(PathBuf),
    /// A bundle image reference.
    Image(String),
    /// A bundle of a catalog package: the given version, or (`None`) the bundle a
    /// ClusterExtension naming only the package would install.
    Catalog {
        package: String,
        version: Option<String>,
    },
}

/// Why an argument cannot be used the way it was given.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum InputError {
    #[error("the source is empty")]
    Empty,
    #[error(
        "--catalog was given, but {arg:?} is an existing file or directory; --catalog is only for package@version sources"
    )]
    CatalogWithPath { arg: String },
    #[error(
        "--catalog was given, but {arg:?} is neither package@version nor a package name; for a bundle image reference leave out --catalog"
    )]
    CatalogWithImage { arg: String },
    #[error("{arg:?} names a version of a catalog package: give the catalog with --catalog")]
    NeedsCatalog { arg: String },
    #[error(
        "{arg:?} names a version of a catalog package, which needs a package@version SOURCE and --catalog"
    )]
    DiffNeedsCatalogSource { arg: String },
}

/// A package name as a catalog spells it: non-empty, no `/`, `:`, `@` or whitespace
/// (which image references use).
fn is_package_name(s: &str) -> bool {
    !s.is_empty() && !s.contains(['/', ':', '@']) && !s.contains(char::is_whitespace)
}

fn is_version(s: &str) -> bool {
    BundleVersion::new_lenient(s, None).is_ok()
}

/// An existing path, or a value that starts like one (`/`, `.`, `~`), which no image
/// reference or package name does: a missing path then fails as a missing file.
fn is_path(arg: &str) -> bool {
    arg.starts_with(['/', '.', '~']) || Path::new(arg).exists()
}

/// `package@version` with a package name and a semver version (leading `v` allowed);
/// `repo@sha256:…` is not.
pub fn package_at_version(s: &str) -> Option<(&str, &str)> {
    let (package, version) = s.rsplit_once('@')?;
    (is_package_name(package) && is_version(version)).then_some((package, version))
}

/// Classifies SOURCE: an existing (or path-like) path; with `catalog`, `package@version` or a package
/// name; otherwise an image reference.
pub fn classify_source(arg: &str, catalog: bool) -> Result<Input, InputError> {
    if arg.is_empty() {
        return Err(InputError::Empty);
    }
    let arg_owned = || arg.to_string();
    if is_path(arg) {
        return match catalog {
            true => Err(InputError::CatalogWithPath { arg: arg_owned() }),
            false => Ok(Input::Path(PathBuf::from(arg))),
        };
    }
    if let Some((package, version)) = package_at_version(arg) {
        return match catalog {
            true => Ok(Input::Catalog {
                package: package.to_string(),
                version: Some(version.to_string()),
            }),
            false => Err(InputError::NeedsCatalog { arg: arg_owned() }),
        };
    }
    match catalog {
        true if is_package_name(arg) => Ok(Input::Catalog {
            package: arg_owned(),
            version: None,
        }),
        true => Err(InputError::CatalogWithImage { arg: arg_owned() }),
        false => Ok(Input::Image(arg_owned())),
    }
}

/// Classifies the `--diff` value. `source_package` is SOURCE's package when SOURCE is a
/// catalog package (then a bare version is a version of that package); an existing
/// path, then `package@version`, then an image reference.
pub fn classify_diff(arg: &str, source_package: Option<&str>) -> Result<Input, InputError> {
    if arg.is_empty() {
        return Err(InputError::Empty);
    }
    if is_path(arg) {
        return Ok(Input::Path(PathBuf::from(arg)));
    }
    let catalog_form = package_at_version(arg)
        .or_else(|| source_package.filter(|_| is_version(arg)).map(|p| (p, arg)))
        .or_else(|| is_version(arg).then_some(("", arg)));
    match (catalog_form, source_package) {
        (Some((package, version)), Some(_)) => Ok(Input::Catalog {
            package: package.to_string(),
            version: Some(version.to_string()),
        }),
        (Some(_), None) => Err(InputError::DiffNeedsCatalogSource {
            arg: arg.to_string(),
        }),
        (None, _) => Ok(Input::Image(arg.to_string())),
    }
}
