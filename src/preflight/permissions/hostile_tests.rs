//! Hostile bundled RBAC: rules whose cross product is huge are sized, not expanded
//! (see `rules`), and the missing-permissions message stays bounded.

use super::rbac::{BundledRbac, installer_rbac};
use super::*;
use serde_json::json;
use std::time::{Duration, Instant};

/// `n` distinct values `{prefix}{i}`.
fn values(prefix: &str, n: usize) -> Vec<String> {
    (0..n).map(|i| format!("{prefix}{i:03}")).collect()
}

/// A ClusterRole named `name` with one rule per `(groups, resources, verbs)` size.
fn role(name: &str, rules: &[(usize, usize, usize)]) -> Value {
    let rules: Vec<Value> = rules
        .iter()
        .map(|&(g, r, v)| {
            json!({"apiGroups": values("g", g), "resources": values("r", r), "verbs": values("v", v)})
        })
        .collect();
    json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
        "metadata": {"name": name}, "rules": rules})
}

fn reqs(objects: &[Value]) -> Requirements {
    let infos = describe(objects, &ResourceMap::offline(objects)).unwrap();
    requirements(objects, &infos, "ext")
}

/// One 2 KB rule of 100 apiGroups × 100 resources × 100 verbs stands for a million
/// permissions: it used to be expanded (~900 MiB, 33 s); now it is sized and refused in
/// milliseconds, unless bind+escalate covers the role.
#[test]
fn hostile_rule_is_refused_without_expanding_it() {
    let objects = vec![role("hostile", &[(100, 100, 100)])];
    let started = Instant::now();
    let req = reqs(&objects);
    assert!(req.all_checks().len() < 100, "{}", req.all_checks().len());
    let err = installer_rbac(&objects, "inst", "ext", BundledRbac::Include)
        .unwrap_err()
        .to_string();
    assert_eq!(
        err,
        "rule expands to more than 10000 permissions: ClusterRole \"hostile\" rules[0] has \
         100 apiGroups × 100 resources × 100 verbs = 1000000 permissions; give the installer \
         ServiceAccount bind and escalate on the role instead (olmv1 rbac --bundled-rbac \
         bind-escalate), or write the rule with wildcards (\"*\" counts as one)"
    );
    // bind+escalate covers the role without its grants
    let rbac = installer_rbac(&objects, "inst", "ext", BundledRbac::BindEscalate).unwrap();
    assert!(rbac.cluster_role["rules"].as_array().unwrap().len() < 10);
    let elapsed = started.elapsed();
    assert!(elapsed < Duration::from_secs(2), "{elapsed:?}");
}

/// The preflight's view of a role too large to expand: covered by bind+escalate, else
/// refused with the named limit (and `missing` fails closed on bind+escalate).
#[test]
fn too_large_role_needs_bind_and_escalate() {
    let objects = vec![role("hostile", &[(1, 101, 100)])];
    let req = reqs(&objects);
    let role = &req.roles[0];
    assert!(role.grants.is_empty());
    assert!(matches!(
        role.unexpanded,
        Some(ExpansionError::Rule { index: 0, .. })
    ));
    // bind+escalate held: nothing missing, nothing refused
    assert!(req.missing(|_| true).is_empty());
    assert!(req.too_large(|_| true).is_none());
    // without escalate: refused, and escalate is what `missing` reports
    let escalate = role.bind_escalate[1].clone();
    let allowed = |p: &Permission| p != &escalate;
    assert_eq!(
        req.too_large(allowed).unwrap().to_string(),
        role.unexpanded.as_ref().unwrap().to_string()
    );
    assert_eq!(
        req.missing(allowed).into_iter().collect::<Vec<_>>(),
        vec![escalate.clone()]
    );
}

/// A rule at the limit is expanded as before; rules below the per-rule limit still
/// share one budget across all bundled roles.
#[test]
fn limits_per_rule_and_for_all_bundled_roles() {
    let at_limit = vec![role("big", &[(1, 100, 100)])];
    let req = reqs(&at_limit);
    assert_eq!(req.roles[0].grants.len() as u64, MAX_RULE_PERMISSIONS);
    assert!(installer_rbac(&at_limit, "inst", "ext", BundledRbac::Include).is_ok());

    // 5 roles of 10,000 use up the budget of 50,000; the sixth does not fit
    let many: Vec<Value> = (0..6)
        .map(|i| role(&format!("r{i}"), &[(1, 100, 100)]))
        .collect();
    let req = reqs(&many);
    assert!(req.roles[..5].iter().all(|r| r.unexpanded.is_none()));
    assert_eq!(
        req.roles[5].unexpanded.as_ref().unwrap().to_string(),
        "the bundled roles expand to more than 50000 permissions together (limit reached at \
         ClusterRole \"r5\"); give the installer ServiceAccount bind and escalate on the role \
         instead (olmv1 rbac --bundled-rbac bind-escalate), or write the rule with wildcards \
         (\"*\" counts as one)"
    );

    // names and URLs count too; a namespaced Role is named with its namespace
    let named = vec![
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
        "metadata": {"name": "n", "namespace": "ns"},
        "rules": [{"apiGroups": ["a"], "resources": values("r", 10), "verbs": values("v", 10),
                   "resourceNames": values("n", 100), "nonResourceURLs": ["/x"]}]}),
    ];
    let err = reqs(&named).roles[0]
        .unexpanded
        .clone()
        .unwrap()
        .to_string();
    assert!(
        err.starts_with(
            "rule expands to more than 10000 permissions: Role \"ns/n\" rules[0] has 1 apiGroups \
             × 10 resources × 10 verbs × 100 resourceNames + 1 nonResourceURLs × verbs = 10010 \
             permissions; "
        ),
        "{err}"
    );
}

/// A missing-permissions message lists at most [`MAX_MISSING_LINES`] lines.
#[test]
fn missing_message_is_capped() {
    let missing: BTreeSet<Permission> = (0..MAX_MISSING_LINES + 7)
        .map(|i| Permission::resource("ns", "", "configmaps", &format!("cm-{i:05}"), "get"))
        .collect();
    let msg = missing_message(&missing).unwrap();
    let lines: Vec<&str> = msg.lines().collect();
    assert_eq!(lines.len(), 1 + MAX_MISSING_LINES + 1);
    assert_eq!(lines[0], MISSING_HEADER);
    assert_eq!(lines[MAX_MISSING_LINES + 1], "  … and 7 more");
    // below the cap: unchanged
    let few: BTreeSet<Permission> = missing.into_iter().take(MAX_MISSING_LINES).collect();
    assert_eq!(
        missing_message(&few).unwrap().lines().count(),
        1 + MAX_MISSING_LINES
    );
}
