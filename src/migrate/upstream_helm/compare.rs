//! The adoption decisions: may a release be taken over as the installation of the bundle
//! olmv1 resolved ([`check_bundle`]), and are its objects exactly the ones olmv1 renders
//! for it ([`compare_objects`]). Pure.

use super::UpstreamRelease;
use crate::api::BundleIdentity;
use crate::apply::ObjectRef;
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};

/// Whether `release` may be adopted as an installation of `target` (the bundle olmv1
/// resolved, with the release's bundle as the installed one): the release is deployed,
/// and package, bundle name and version are the same. `Err`: what differs.
pub fn check_bundle(release: &UpstreamRelease, target: &BundleIdentity) -> Result<(), String> {
    let mut differ = Vec::new();
    if release.status != "deployed" {
        differ.push(format!(
            "the release is {:?}, not \"deployed\" (an upstream install or upgrade did not finish)",
            release.status
        ));
    }
    if release.bundle.package != target.package {
        differ.push(format!(
            "package {:?} in the release, {:?} resolved",
            release.bundle.package, target.package
        ));
    }
    if release.bundle.name != target.name || release.bundle.version != target.version {
        differ.push(format!(
            "bundle {} version {} in the release, {} version {} resolved (pin spec.source.catalog.version to {} for the switch, then unpin it)",
            release.bundle.name,
            release.bundle.version,
            target.name,
            target.version,
            release.bundle.version
        ));
    }
    if differ.is_empty() {
        Ok(())
    } else {
        Err(differ.join("; "))
    }
}

/// The identity an object is compared by: group, kind, namespace, name (the API version
/// may differ: the same object served at another version is the same object).
type Identity = (String, String, String, String);

fn identity(
    r: &ObjectRef,
    default_namespace: &str,
    namespaced: &BTreeSet<(&str, &str)>,
) -> Identity {
    // Helm puts namespaced objects without metadata.namespace into the release namespace.
    let namespace =
        if r.namespace.is_empty() && namespaced.contains(&(r.group.as_str(), r.kind.as_str())) {
            default_namespace.to_string()
        } else {
            r.namespace.clone()
        };
    (r.group.clone(), r.kind.clone(), namespace, r.name.clone())
}

/// What differs between a release's objects and olmv1's rendering.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ObjectsDiffer {
    /// In the release, not in olmv1's rendering (olmv1 would leave them unmanaged).
    pub only_upstream: Vec<String>,
    /// In olmv1's rendering, not in the release (olmv1 would create them).
    pub only_olmv1: Vec<String>,
}

impl std::fmt::Display for ObjectsDiffer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut parts = Vec::new();
        if !self.only_upstream.is_empty() {
            parts.push(format!(
                "{} object(s) in the release that olmv1 does not render: {}",
                self.only_upstream.len(),
                self.only_upstream.join(", ")
            ));
        }
        if !self.only_olmv1.is_empty() {
            parts.push(format!(
                "{} object(s) olmv1 renders that are not in the release: {}",
                self.only_olmv1.len(),
                self.only_olmv1.join(", ")
            ));
        }
        f.write_str(&parts.join("; "))
    }
}

/// Whether the release's objects are exactly the objects of `rendered` (olmv1's rendering
/// of the same bundle for the same namespace and configuration): the same set of
/// (group, kind, namespace, name); the API version and the content may differ (olmv1's
/// apply brings the content to its rendering, in place).
pub fn compare_objects(release: &UpstreamRelease, rendered: &[Value]) -> Result<(), ObjectsDiffer> {
    let refs: Vec<ObjectRef> = rendered.iter().filter_map(ObjectRef::from_object).collect();
    // Kinds olmv1 renders with a namespace are namespaced.
    let namespaced: BTreeSet<(&str, &str)> = refs
        .iter()
        .filter(|r| !r.namespace.is_empty())
        .map(|r| (r.group.as_str(), r.kind.as_str()))
        .collect();
    let ours: BTreeMap<Identity, &ObjectRef> = refs
        .iter()
        .map(|r| (identity(r, &release.namespace, &namespaced), r))
        .collect();
    let theirs: BTreeMap<Identity, &ObjectRef> = release
        .objects
        .iter()
        .map(|r| (identity(r, &release.namespace, &namespaced), r))
        .collect();
    let differ = ObjectsDiffer {
        only_upstream: theirs
            .iter()
            .filter(|(k, _)| !ours.contains_key(*k))
            .map(|(_, r)| r.to_string())
            .collect(),
        only_olmv1: ours
            .iter()
            .filter(|(k, _)| !theirs.contains_key(*k))
            .map(|(_, r)| r.to_string())
            .collect(),
    };
    if differ == ObjectsDiffer::default() {
        Ok(())
    } else {
        Err(differ)
    }
}
