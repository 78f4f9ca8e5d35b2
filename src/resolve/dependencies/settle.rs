//! From a resolution that collected its winner's dependencies to the verdict the
//! controller reports (docs/concepts/dependencies.md §2): the ClusterExtensions as
//! [`Installed`] facts, the GVKs to ask discovery about, and [`settle`], which keeps the
//! resolution when every dependency holds and otherwise refuses with upstream's message
//! followed by what is missing and what would satisfy it.

use super::{Check, Constraint, Dependency, Gvk, Installed, WatchScope};
use crate::api::{ClusterExtension, ClusterExtensionSpec};
use crate::fbc::model::Property;
use crate::resolve::{Explanation, Reason, ResolveError};
use kube::ResourceExt;

/// The watch scope of an extension: `spec.config.inline.watchNamespace`, else all.
pub fn scope_of(spec: &ClusterExtensionSpec) -> WatchScope {
    spec.config
        .as_ref()
        .and_then(|c| c.inline.as_ref())
        .and_then(|i| i.get("watchNamespace"))
        .and_then(|w| w.as_str())
        .filter(|w| !w.is_empty())
        .map_or(WatchScope::All, |w| WatchScope::Namespace(w.to_string()))
}

/// An extension that has installed a bundle of a catalog package, as a fact.
pub fn installed_of(ext: &ClusterExtension) -> Option<Installed> {
    let package = &ext.spec.source.catalog.as_ref()?.package_name;
    let bundle = &ext.status.as_ref()?.install.as_ref()?.bundle;
    Some(Installed {
        name: ext.name_any(),
        package: package.clone(),
        version: bundle.version.clone(),
        scope: scope_of(&ext.spec),
    })
}

/// Every GVK the dependencies name (discovery is asked about these only).
pub fn required_gvks(deps: &[Dependency]) -> Vec<Gvk> {
    fn walk(c: &Constraint, out: &mut Vec<Gvk>) {
        match c {
            Constraint::Gvk(g) if !out.contains(g) => out.push(g.clone()),
            Constraint::All(cs) | Constraint::Any(cs) | Constraint::Not(cs) => {
                cs.iter().for_each(|c| walk(c, out));
            }
            _ => {}
        }
    }
    let mut out = Vec::new();
    deps.iter().for_each(|d| walk(&d.constraint, &mut out));
    out
}

/// The controller's verdict on a resolution whose winner declares the dependency
/// properties `props`: unchanged when `check` says they all hold; otherwise upstream's
/// refusal (naming the first dependency property, as upstream does) with olmv1's
/// detail appended, and the winner's verdict turned into that rejection.
pub fn settle(
    mut explained: Explanation,
    props: &[Property],
    check: Result<&Check, String>,
) -> Explanation {
    let (Some(first), Ok(resolution)) = (props.first(), &explained.result) else {
        return explained;
    };
    let detail = match check {
        Ok(c) if c.satisfied() => return explained,
        Ok(c) => c.detail(),
        Err(e) => format!(". Its dependencies cannot be checked: {e}"),
    };
    let (bundle, catalog) = (&resolution.bundle.name, &resolution.bundle.catalog);
    let err = ResolveError::UnsupportedDependency {
        bundle: bundle.clone(),
        property: first.type_.clone(),
        detail,
    };
    for b in explained
        .bundles
        .iter_mut()
        .filter(|b| &b.bundle == bundle && &b.catalog == catalog)
    {
        for r in b.reasons.iter_mut().filter(|r| **r == Reason::Chosen) {
            *r = Reason::Rejected {
                error: err.to_string(),
            };
        }
    }
    explained.result = Err(err);
    explained
}
