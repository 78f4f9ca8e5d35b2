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
use serde_json::{Value, json};

/// The opt-in annotation: the controller creates the ClusterExtensions that satisfy the
/// extension's missing dependencies (docs/concepts/dependencies.md §4).
pub const INSTALL_DEPENDENCIES: &str = "olm.operatorframework.io/install-dependencies";
/// The label on a dependency ClusterExtension: whose dependency it was created as.
pub const DEPENDENCY_OF: &str = "olm.operatorframework.io/dependency-of";

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

/// Whether `ext` opted in to [`INSTALL_DEPENDENCIES`].
pub fn installs_dependencies(ext: &ClusterExtension) -> bool {
    ext.annotations()
        .get(INSTALL_DEPENDENCIES)
        .is_some_and(|v| v == "true")
}

/// A name as a label value (at most 63 characters of `[A-Za-z0-9._-]`, alphanumeric at
/// both ends).
pub fn label_value(s: &str) -> String {
    let v: String = s
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || "._-".contains(c) {
                c
            } else {
                '-'
            }
        })
        .take(63)
        .collect();
    v.trim_matches(|c: char| !c.is_ascii_alphanumeric())
        .to_string()
}

/// The ClusterExtensions the controller creates for `ext` (opted in) from `check`'s
/// set: in the dependent's namespace, with its installer account, labelled
/// [`DEPENDENCY_OF`] the dependent; none unless every missing dependency can be
/// satisfied and nothing in the set conflicts.
pub fn dependency_extensions(ext: &ClusterExtension, check: &Check) -> Vec<Value> {
    let complete = check.missing.iter().all(|m| m.satisfied_by.is_ok())
        && check.unsatisfiable.is_empty()
        && check.need.is_empty();
    if !installs_dependencies(ext) || check.satisfied() || !complete {
        return Vec::new();
    }
    check
        .set
        .iter()
        .map(|s| {
            let mut catalog = json!({"packageName": s.package,
                "selector": {"matchLabels": {"olm.operatorframework.io/metadata.name": s.catalog}}});
            if let Some(r) = &s.range {
                catalog["version"] = json!(r);
            }
            if let Some(c) = &s.channel {
                catalog["channels"] = json!([c]);
            }
            let mut spec = json!({"namespace": ext.spec.namespace,
                "source": {"sourceType": "Catalog", "catalog": catalog}});
            if let Some(sa) = &ext.spec.service_account {
                spec["serviceAccount"] = json!({"name": sa.name});
            }
            json!({"apiVersion": "olm.operatorframework.io/v1", "kind": "ClusterExtension",
                "metadata": {"name": s.package,
                    "labels": {DEPENDENCY_OF: label_value(&ext.name_any())}},
                "spec": spec})
        })
        .collect()
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
    created: &[String],
) -> Explanation {
    let (Some(first), Ok(resolution)) = (props.first(), &explained.result) else {
        return explained;
    };
    let detail = match check {
        Ok(c) if c.satisfied() => return explained,
        Ok(c) if created.is_empty() => c.detail(),
        Ok(c) => format!(
            "{}. Created as {INSTALL_DEPENDENCIES} asks: ClusterExtensions [{}]",
            c.detail(),
            created.join(" ")
        ),
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

#[cfg(test)]
mod tests {
    use super::super::Missing;
    use super::*;
    use crate::resolve::{BundleExplanation, Resolution, ResolvedBundle};
    use crate::version::BundleVersion;
    use serde_json::json;

    fn explained() -> Explanation {
        let bundle = ResolvedBundle {
            name: "app.v1.0.0".into(),
            package: "app".into(),
            version: BundleVersion::new("1.0.0", None).unwrap(),
            image: "example.com/app:v1".into(),
            catalog: "cat".into(),
            priority: 0,
            deprecated: false,
        };
        Explanation {
            result: Ok(Resolution {
                bundle,
                deprecation: None,
                stats: Vec::new(),
            }),
            bundles: vec![BundleExplanation {
                catalog: "cat".into(),
                bundle: "app.v1.0.0".into(),
                version: Some("1.0.0".into()),
                deprecated: false,
                reasons: vec![Reason::Chosen],
            }],
        }
    }

    fn props() -> Vec<Property> {
        vec![Property {
            type_: "olm.gvk.required".into(),
            value: json!({"group": "g", "version": "v1", "kind": "K"}),
        }]
    }

    #[test]
    fn satisfied_keeps_the_resolution() {
        let done = settle(explained(), &props(), Ok(&Check::default()), &[]);
        assert!(done.result.is_ok());
        assert_eq!(done.bundles[0].reasons, [Reason::Chosen]);
        // No dependencies: nothing to settle even with a failed check.
        assert!(
            settle(explained(), &[], Err("x".into()), &[])
                .result
                .is_ok()
        );
    }

    #[test]
    fn missing_keeps_upstreams_message_first() {
        let check = Check {
            missing: vec![Missing {
                dependency: "GVK g/v1 K".into(),
                satisfied_by: Err("no package in the catalogs read provides it".into()),
            }],
            ..Default::default()
        };
        let upstream = "validating bundle \"app.v1.0.0\": bundle \"app.v1.0.0\" has a dependency declared via property \"olm.gvk.required\" which is currently not supported";
        let done = settle(explained(), &props(), Ok(&check), &[]);
        let message = done.result.unwrap_err().to_string();
        assert_eq!(
            message,
            format!(
                "{upstream}. Missing dependencies: GVK g/v1 K (no package in the catalogs read provides it); `olmv1 resolve --with-dependencies` prints the ClusterExtensions that satisfy them"
            )
        );
        assert_eq!(
            done.bundles[0].reasons,
            [Reason::Rejected { error: message }]
        );
        let done = settle(explained(), &props(), Err("bad rule".into()), &[]);
        assert_eq!(
            done.result.unwrap_err().to_string(),
            format!("{upstream}. Its dependencies cannot be checked: bad rule")
        );
    }

    #[test]
    fn facts_of_extensions() {
        let ext: ClusterExtension = serde_json::from_value(json!({
            "apiVersion": "olm.operatorframework.io/v1", "kind": "ClusterExtension",
            "metadata": {"name": "base"},
            "spec": {"namespace": "ns", "serviceAccount": {"name": "sa"},
                "source": {"sourceType": "Catalog", "catalog": {"packageName": "base"}},
                "config": {"configType": "Inline", "inline": {"watchNamespace": "team"}}},
            "status": {"install": {"bundle": {"name": "base.v1.2.0", "version": "1.2.0"}}},
        }))
        .unwrap();
        let got = installed_of(&ext).unwrap();
        assert_eq!(
            (got.package.as_str(), got.version.as_str(), got.scope),
            ("base", "1.2.0", WatchScope::Namespace("team".into()))
        );
        let mut pending = ext.clone();
        pending.status = None;
        assert!(installed_of(&pending).is_none());
        let deps = crate::resolve::dependencies::parse(&[Property {
            type_: "olm.constraint".into(),
            value: json!({"any": {"constraints": [
                {"gvk": {"group": "g", "version": "v1", "kind": "K"}},
                {"not": {"constraints": [{"gvk": {"group": "g", "version": "v1", "kind": "K"}}]}},
                {"gvk": {"version": "v1", "kind": "ConfigMap"}}]}}),
        }])
        .unwrap();
        let gvks: Vec<String> = required_gvks(&deps)
            .iter()
            .map(ToString::to_string)
            .collect();
        assert_eq!(gvks, ["g/v1 K", "v1 ConfigMap"]);
    }

    #[test]
    fn the_opt_in_creates_the_planned_set_only_when_complete() {
        use super::super::Suggestion;
        let mut ext: ClusterExtension = serde_json::from_value(json!({
            "apiVersion": "olm.operatorframework.io/v1", "kind": "ClusterExtension",
            "metadata": {"name": "app", "annotations": {INSTALL_DEPENDENCIES: "true"}},
            "spec": {"namespace": "ns", "serviceAccount": {"name": "app-installer"},
                "source": {"sourceType": "Catalog", "catalog": {"packageName": "app"}}},
        }))
        .unwrap();
        let s = Suggestion {
            package: "base".into(),
            range: Some(">=1".into()),
            catalog: "cat".into(),
            channel: Some("stable".into()),
            bundle: "base.v1.0.0".into(),
            image: "i".into(),
            version: "1.0.0".into(),
            required_by: "app.v1.0.0".into(),
        };
        let mut check = Check {
            missing: vec![Missing {
                dependency: "package \"base\"".into(),
                satisfied_by: Ok(vec![s.clone()]),
            }],
            set: vec![s],
            ..Default::default()
        };
        let made = dependency_extensions(&ext, &check);
        assert_eq!(made.len(), 1);
        assert_eq!(made[0]["metadata"]["labels"][DEPENDENCY_OF], "app");
        assert_eq!(made[0]["spec"]["namespace"], "ns");
        assert_eq!(made[0]["spec"]["serviceAccount"]["name"], "app-installer");
        assert_eq!(made[0]["spec"]["source"]["catalog"]["version"], ">=1");
        assert_eq!(
            made[0]["spec"]["source"]["catalog"]["selector"]["matchLabels"]["olm.operatorframework.io/metadata.name"],
            "cat"
        );
        // Incomplete plans create nothing; neither does an extension without the opt-in.
        check.unsatisfiable.push("x".into());
        assert!(dependency_extensions(&ext, &check).is_empty());
        check.unsatisfiable.clear();
        ext.metadata.annotations = None;
        assert!(dependency_extensions(&ext, &check).is_empty());
        let done = settle(explained(), &props(), Ok(&check), &["base".into()]);
        assert!(
            done.result
                .unwrap_err()
                .to_string()
                .ends_with(". Created as olm.operatorframework.io/install-dependencies asks: ClusterExtensions [base]")
        );
    }
}
