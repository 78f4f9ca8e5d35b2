//! Status fields the served CRD does not declare. olmv1's ClusterExtension status adds
//! fields to upstream's (`status.observedGeneration`, `status.install.installer`,
//! `status.install.bundle.release`; crds/); under upstream's own CRDs (its Helm chart,
//! docs/how-to/switch-from-upstream.md) the API server refuses a server-side apply that
//! carries them ("field not declared in schema"). The refusal names each such field:
//! they are remembered per kind and left out of this and every later status write, so
//! that upstream's fields are written as upstream writes them (e2e/upstream_chart.rs).

use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Mutex;

/// The suffix of each refused field in the API server's message.
const UNDECLARED: &str = ": field not declared in schema";

/// Per kind, the status fields (dotted paths below `status`) the served CRD refused.
static REFUSED: Mutex<BTreeMap<String, BTreeSet<String>>> = Mutex::new(BTreeMap::new());

/// The status fields an apply was refused for, from the API server's message (lines
/// `.status.<a>.<b>: field not declared in schema`): dotted paths below `status`. Only
/// paths through objects (no list items), so that a strip never touches a list.
pub fn undeclared_paths(message: &str) -> BTreeSet<String> {
    message
        .lines()
        .filter_map(|line| {
            let rest = line.trim().strip_prefix(".status.")?;
            let (path, _) = rest.split_once(UNDECLARED)?;
            let plain = !path.is_empty()
                && path
                    .split('.')
                    .all(|p| !p.is_empty() && p.chars().all(|c| c.is_ascii_alphanumeric()));
            plain.then(|| path.to_string())
        })
        .collect()
}

/// Removes each dotted `path` from `status` (absent paths are left alone).
pub fn strip(status: &mut Value, paths: &BTreeSet<String>) {
    for path in paths {
        let parts: Vec<&str> = path.split('.').collect();
        remove(status, &parts);
    }
}

fn remove(node: &mut Value, parts: &[&str]) {
    match parts {
        [] => {}
        [last] => {
            if let Some(map) = node.as_object_mut() {
                map.remove(*last);
            }
        }
        [first, rest @ ..] => {
            if let Some(child) = node.get_mut(*first) {
                remove(child, rest);
            }
        }
    }
}

/// The fields refused so far for `kind`.
pub fn refused(kind: &str) -> BTreeSet<String> {
    let map = REFUSED.lock().unwrap_or_else(|e| e.into_inner());
    map.get(kind).cloned().unwrap_or_default()
}

/// Remembers `paths` as refused for `kind`; returns those not known before.
pub fn remember(kind: &str, paths: &BTreeSet<String>) -> BTreeSet<String> {
    let mut map = REFUSED.lock().unwrap_or_else(|e| e.into_inner());
    let known = map.entry(kind.to_string()).or_default();
    let new: BTreeSet<String> = paths.difference(known).cloned().collect();
    known.extend(new.iter().cloned());
    new
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// The message kube-apiserver v1.37 answered under upstream's v1.11.0 CRD.
    const MESSAGE: &str = "failed to create typed patch object (/; olm.operatorframework.io/v1, Kind=ClusterExtension): errors:\n  .status.install.installer: field not declared in schema\n  .status.observedGeneration: field not declared in schema";

    #[test]
    fn the_refused_fields_are_read_from_the_api_servers_message() {
        let paths = undeclared_paths(MESSAGE);
        assert_eq!(
            paths.into_iter().collect::<Vec<_>>(),
            ["install.installer", "observedGeneration"]
        );
        assert!(undeclared_paths("conflict: the object has been modified").is_empty());
        // list items and other objects than status are not taken
        let odd = "  .status.conditions[type=\"A\"].x: field not declared in schema\n  .spec.x: field not declared in schema";
        assert!(undeclared_paths(odd).is_empty());
    }

    #[test]
    fn strip_removes_only_the_named_fields() {
        let mut status = json!({
            "observedGeneration": 2,
            "conditions": [{"type": "Installed"}],
            "install": {"bundle": {"name": "b", "version": "1.0.0", "release": "1"}, "installer": {"x": 1}},
        });
        let paths: BTreeSet<String> = [
            "install.installer",
            "install.bundle.release",
            "observedGeneration",
            "no.such",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        strip(&mut status, &paths);
        assert_eq!(
            status,
            json!({"conditions": [{"type": "Installed"}], "install": {"bundle": {"name": "b", "version": "1.0.0"}}})
        );
    }

    #[test]
    fn refused_fields_are_remembered_per_kind() {
        let kind = "StatusSchemaTestKind";
        let paths = undeclared_paths(MESSAGE);
        assert_eq!(remember(kind, &paths), paths);
        assert!(remember(kind, &paths).is_empty());
        assert_eq!(refused(kind), paths);
        assert!(refused("OtherStatusSchemaTestKind").is_empty());
    }
}
