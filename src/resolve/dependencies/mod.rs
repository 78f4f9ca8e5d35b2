//! Bundle dependencies without surprises (docs/concepts/dependencies.md): the
//! `olm.package.required`, `olm.gvk.required` and `olm.constraint` properties (package,
//! gvk, `all`/`any`/`not` and the [`cel`] subset OLM v0 rules use) of a resolved bundle,
//! checked against what the cluster already has ([`Cluster`]: installed
//! ClusterExtensions with their watch scope, served GVKs). For each dependency that does
//! not hold, the package, range, catalog and channel that would satisfy it are looked up
//! in the catalogs, and so on for their own dependencies: the full set, cycle-safe (a
//! package is planned once, the dependent counts as installed) and bounded
//! ([`MAX_SET`]). Pure: the catalogs' content for the packages named is passed in;
//! [`Check::need`] says which packages to read before asking again.

pub mod cel;
pub mod settle;
#[cfg(test)]
mod tests;

use super::{CatalogInput, ResolveRequest, resolve_with_dependencies};
use crate::fbc::model::{
    Bundle, PROPERTY_CONSTRAINT, PROPERTY_GVK, PROPERTY_GVK_REQUIRED, PROPERTY_PACKAGE,
    PROPERTY_PACKAGE_REQUIRED, PackageContent, Property,
};
use crate::version::{BundleVersion, Constraints};
use serde::Serialize;
use serde_json::{Value, json};
use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::fmt;

/// At most this many ClusterExtensions in a dependency set.
pub const MAX_SET: usize = 32;
/// How deeply `all`/`any`/`not` may nest.
const MAX_NESTING: usize = 16;

/// A group/version/kind.
#[derive(Clone, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
pub struct Gvk {
    pub group: String,
    pub version: String,
    pub kind: String,
}

impl fmt::Display for Gvk {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.group.is_empty() {
            write!(f, "{} {}", self.version, self.kind)
        } else {
            write!(f, "{}/{} {}", self.group, self.version, self.kind)
        }
    }
}

impl Gvk {
    fn of(v: &Value) -> Result<Gvk, String> {
        let field = |k: &str| v.get(k).and_then(Value::as_str).map(str::to_string);
        Ok(Gvk {
            group: field("group").unwrap_or_default(),
            version: field("version").ok_or("gvk without version")?,
            kind: field("kind").ok_or("gvk without kind")?,
        })
    }
}

/// One requirement, as declared.
#[derive(Clone, Debug, PartialEq)]
pub enum Constraint {
    /// A package in a version range (empty: any version).
    Package {
        package: String,
        range: String,
    },
    Gvk(Gvk),
    All(Vec<Constraint>),
    Any(Vec<Constraint>),
    /// None of them may hold.
    Not(Vec<Constraint>),
    Cel {
        rule: String,
        expr: cel::Expr,
    },
}

/// One dependency property of a bundle.
#[derive(Clone, Debug, PartialEq)]
pub struct Dependency {
    /// The property type (`olm.package.required`, …).
    pub property: String,
    pub constraint: Constraint,
    /// `olm.constraint`'s `failureMessage`.
    pub failure_message: Option<String>,
}

/// The dependencies among `properties` (other properties are skipped).
pub fn parse(properties: &[Property]) -> Result<Vec<Dependency>, String> {
    let mut out = Vec::new();
    for p in properties {
        let constraint = match p.type_.as_str() {
            PROPERTY_PACKAGE_REQUIRED => package_constraint(&p.value)?,
            PROPERTY_GVK_REQUIRED => Constraint::Gvk(Gvk::of(&p.value)?),
            PROPERTY_CONSTRAINT => constraint(&p.value, 0)?,
            _ => continue,
        };
        let failure_message = p
            .value
            .get("failureMessage")
            .and_then(Value::as_str)
            .map(str::to_string);
        out.push(Dependency {
            property: p.type_.clone(),
            constraint,
            failure_message,
        });
    }
    Ok(out)
}

fn package_constraint(v: &Value) -> Result<Constraint, String> {
    let package = v
        .get("packageName")
        .and_then(Value::as_str)
        .ok_or("package requirement without packageName")?;
    let range = v.get("versionRange").and_then(Value::as_str).unwrap_or("");
    if !range.is_empty() {
        Constraints::parse(range).map_err(|e| format!("versionRange {range:?}: {e}"))?;
    }
    Ok(Constraint::Package {
        package: package.to_string(),
        range: range.to_string(),
    })
}

/// An `olm.constraint` value (or one of a compound's `constraints`).
fn constraint(v: &Value, depth: usize) -> Result<Constraint, String> {
    if depth > MAX_NESTING {
        return Err("olm.constraint nested too deeply".into());
    }
    let children = |key: &str| -> Result<Vec<Constraint>, String> {
        let list = v
            .get(key)
            .and_then(|c| c.get("constraints"))
            .and_then(Value::as_array)
            .ok_or_else(|| format!("{key} without constraints"))?;
        list.iter().map(|c| constraint(c, depth + 1)).collect()
    };
    if let Some(p) = v.get("package") {
        package_constraint(p)
    } else if let Some(g) = v.get("gvk") {
        Ok(Constraint::Gvk(Gvk::of(g)?))
    } else if v.get("all").is_some() {
        Ok(Constraint::All(children("all")?))
    } else if v.get("any").is_some() {
        Ok(Constraint::Any(children("any")?))
    } else if v.get("not").is_some() {
        Ok(Constraint::Not(children("not")?))
    } else if let Some(rule) = v
        .get("cel")
        .and_then(|c| c.get("rule"))
        .and_then(Value::as_str)
    {
        let expr = cel::parse(rule).map_err(|e| format!("cel rule {rule:?}: {e}"))?;
        Ok(Constraint::Cel {
            rule: rule.to_string(),
            expr,
        })
    } else {
        Err("olm.constraint without package, gvk, all, any, not or cel".into())
    }
}

impl fmt::Display for Constraint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let list = |cs: &[Constraint]| {
            cs.iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>()
                .join("; ")
        };
        match self {
            Constraint::Package { package, range } if range.is_empty() => {
                write!(f, "package {package:?}")
            }
            Constraint::Package { package, range } => {
                write!(f, "package {package:?} in range {range:?}")
            }
            Constraint::Gvk(g) => write!(f, "GVK {g}"),
            Constraint::All(cs) => write!(f, "all of [{}]", list(cs)),
            Constraint::Any(cs) => write!(f, "any of [{}]", list(cs)),
            Constraint::Not(cs) => write!(f, "none of [{}]", list(cs)),
            Constraint::Cel { rule, .. } => write!(f, "CEL rule {rule:?}"),
        }
    }
}

/// Which namespaces an extension watches (`spec.config.inline.watchNamespace`; none:
/// all).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub enum WatchScope {
    #[default]
    All,
    Namespace(String),
}

impl WatchScope {
    /// Whether an extension watching `self` serves a dependent watching `dependent`.
    pub fn covers(&self, dependent: &WatchScope) -> bool {
        *self == WatchScope::All || self == dependent
    }
}

/// An installed ClusterExtension, as dependencies see it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Installed {
    pub name: String,
    pub package: String,
    /// `status.install.bundle.version`.
    pub version: String,
    pub scope: WatchScope,
}

impl Installed {
    fn version(&self) -> Option<semver::Version> {
        BundleVersion::new_lenient(&self.version, None)
            .ok()
            .map(|v| v.version)
    }

    /// The properties a CEL rule sees of it: its `olm.package`.
    fn properties(&self) -> Vec<Value> {
        vec![json!({"type": PROPERTY_PACKAGE,
            "value": {"packageName": self.package, "version": self.version}})]
    }
}

/// What the cluster has.
#[derive(Clone, Debug, Default)]
pub struct Cluster {
    pub extensions: Vec<Installed>,
    pub served: BTreeSet<Gvk>,
}

/// Whether `c` holds on `cluster` for a dependent watching `scope`.
pub fn holds(c: &Constraint, cluster: &Cluster, scope: &WatchScope) -> bool {
    let serving = || cluster.extensions.iter().filter(|e| e.scope.covers(scope));
    match c {
        Constraint::Package { package, range } => {
            let range = (!range.is_empty()).then(|| Constraints::parse(range).ok());
            serving().any(|e| {
                &e.package == package
                    && match &range {
                        None => true,
                        Some(r) => r
                            .as_ref()
                            .zip(e.version())
                            .is_some_and(|(r, v)| r.matches(&v)),
                    }
            })
        }
        Constraint::Gvk(g) => cluster.served.contains(g),
        Constraint::All(cs) => cs.iter().all(|c| holds(c, cluster, scope)),
        Constraint::Any(cs) => cs.iter().any(|c| holds(c, cluster, scope)),
        Constraint::Not(cs) => !cs.iter().any(|c| holds(c, cluster, scope)),
        Constraint::Cel { expr, .. } => {
            serving().any(|e| cel::matches(expr, &e.properties()).unwrap_or(false))
        }
    }
}

/// A ClusterExtension that would satisfy a dependency.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Suggestion {
    pub package: String,
    /// The version range to ask for (`spec.source.catalog.version`); `None`: any.
    pub range: Option<String>,
    pub catalog: String,
    /// The channel holding the bundle (the default channel when it does).
    pub channel: Option<String>,
    pub bundle: String,
    pub image: String,
    pub version: String,
    /// The bundle whose dependency this satisfies.
    pub required_by: String,
}

impl fmt::Display for Suggestion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "package {:?}", self.package)?;
        if let Some(r) = &self.range {
            write!(f, " version {r:?}")?;
        }
        write!(f, " from catalog {:?}", self.catalog)?;
        if let Some(c) = &self.channel {
            write!(f, " channel {c:?}")?;
        }
        write!(f, " (bundle {})", self.bundle)
    }
}

/// A dependency of the dependent that does not hold.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Missing {
    /// The dependency, described.
    pub dependency: String,
    /// What would satisfy it, or why nothing found would.
    pub satisfied_by: Result<Vec<Suggestion>, String>,
}

/// The verdict on a dependent's dependencies.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Check {
    /// The dependent's own dependencies that do not hold on the cluster.
    pub missing: Vec<Missing>,
    /// The ClusterExtensions to create so that everything holds (dependencies of
    /// dependencies included), in the order found.
    pub set: Vec<Suggestion>,
    /// Packages whose catalog content was not given: read them and check again.
    pub need: Vec<String>,
    /// Dependencies of planned extensions that nothing found satisfies.
    pub unsatisfiable: Vec<String>,
}

impl Check {
    pub fn satisfied(&self) -> bool {
        self.missing.is_empty()
    }

    /// What olmv1 appends to upstream's refusal (empty when nothing is missing).
    pub fn detail(&self) -> String {
        if self.missing.is_empty() {
            return String::new();
        }
        let parts: Vec<String> = self
            .missing
            .iter()
            .map(|m| match &m.satisfied_by {
                Ok(s) => format!(
                    "{} (satisfied by {})",
                    m.dependency,
                    s.iter()
                        .map(ToString::to_string)
                        .collect::<Vec<_>>()
                        .join(" and ")
                ),
                Err(e) => format!("{} ({e})", m.dependency),
            })
            .collect();
        format!(
            ". Missing dependencies: {}; `olmv1 resolve --with-dependencies` prints the ClusterExtensions that satisfy them",
            parts.join("; ")
        )
    }
}

/// The dependent: the resolved bundle with its dependencies.
#[derive(Clone, Debug)]
pub struct Dependent<'a> {
    pub bundle: &'a str,
    pub package: &'a str,
    pub version: &'a str,
    pub scope: WatchScope,
    pub dependencies: &'a [Dependency],
}

/// Every package's content per catalog, keyed by package.
pub type Catalogs<'a> = BTreeMap<String, Vec<CatalogInput<'a>>>;

/// Checks `dependent`'s dependencies on `cluster` and plans the set that satisfies
/// them from `catalogs`.
pub fn check(dependent: &Dependent<'_>, cluster: &Cluster, catalogs: &Catalogs<'_>) -> Check {
    let mut out = Check::default();
    // The cluster as it would be with the planned set (and the dependent) installed.
    let mut planned = cluster.clone();
    planned.extensions.push(Installed {
        name: dependent.bundle.to_string(),
        package: dependent.package.to_string(),
        version: dependent.version.to_string(),
        scope: dependent.scope.clone(),
    });
    let mut queue: VecDeque<(String, WatchScope, Vec<Dependency>, bool)> = VecDeque::new();
    queue.push_back((
        dependent.bundle.to_string(),
        dependent.scope.clone(),
        dependent.dependencies.to_vec(),
        true,
    ));
    while let Some((by, scope, deps, top)) = queue.pop_front() {
        for d in deps {
            // The dependent's own against the cluster; the planned ones' against the
            // cluster with the set planned so far.
            if holds(&d.constraint, if top { cluster } else { &planned }, &scope) {
                continue;
            }
            let found = suggest(&d.constraint, &by, &planned, catalogs, &mut out.need);
            let found = found.map(|list| {
                let mut shown = Vec::new();
                for (s, sub) in list {
                    match out.set.iter().find(|p| p.package == s.package) {
                        Some(p) if p.bundle != s.bundle => out.unsatisfiable.push(format!(
                            "{by} requires {}, which conflicts with {p} planned already",
                            s.bundle
                        )),
                        Some(_) => {}
                        None if out.set.len() >= MAX_SET => out
                            .unsatisfiable
                            .push(format!("more than {MAX_SET} dependencies: {s} left out")),
                        None => {
                            planned.extensions.push(Installed {
                                name: s.package.clone(),
                                package: s.package.clone(),
                                version: s.version.clone(),
                                scope: WatchScope::All,
                            });
                            queue.push_back((s.bundle.clone(), WatchScope::All, sub, false));
                            out.set.push(s.clone());
                        }
                    }
                    shown.push(s);
                }
                shown
            });
            let mut dependency = d.constraint.to_string();
            if let Some(m) = &d.failure_message {
                dependency.push_str(&format!(" ({m:?})"));
            }
            if top {
                out.missing.push(Missing {
                    dependency,
                    satisfied_by: found,
                });
            } else if let Err(e) = found {
                out.unsatisfiable
                    .push(format!("{by} requires {dependency}: {e}"));
            }
        }
    }
    out.need.sort();
    out.need.dedup();
    out
}

type Found = Vec<(Suggestion, Vec<Dependency>)>;

/// The extensions that would make `c` hold (for a dependent `by`).
fn suggest(
    c: &Constraint,
    by: &str,
    planned: &Cluster,
    catalogs: &Catalogs<'_>,
    need: &mut Vec<String>,
) -> Result<Found, String> {
    match c {
        Constraint::Package { package, range } => {
            let range = (!range.is_empty()).then(|| range.clone());
            pick(package, range, by, catalogs, need, |_| true).map(|s| vec![s])
        }
        Constraint::Gvk(g) => {
            for (package, inputs) in catalogs {
                let provides = |b: &Bundle| provides_gvk(b, g);
                if contents(inputs).any(|c| c.bundles.iter().any(provides))
                    && let Ok(s) = pick(package, None, by, catalogs, need, provides)
                {
                    return Ok(vec![s]);
                }
            }
            Err("no package in the catalogs read provides it".into())
        }
        Constraint::All(cs) => {
            let mut all = Vec::new();
            for c in cs.iter().filter(|c| !holds(c, planned, &WatchScope::All)) {
                all.extend(suggest(c, by, planned, catalogs, need)?);
            }
            Ok(all)
        }
        Constraint::Any(cs) => {
            let mut why = Vec::new();
            for c in cs {
                match suggest(c, by, planned, catalogs, need) {
                    Ok(found) => return Ok(found),
                    Err(e) => why.push(format!("{c}: {e}")),
                }
            }
            Err(why.join("; "))
        }
        Constraint::Not(_) => Err(
            "a \"not\" constraint is satisfied by removing extensions, not by installing".into(),
        ),
        Constraint::Cel { expr, .. } => {
            let mut hints = Vec::new();
            cel::package_names(expr, &mut hints);
            if hints.is_empty() {
                return Err("the rule names no package (p.value.packageName) to look for".into());
            }
            let rule = |b: &Bundle| {
                let props: Vec<Value> = b
                    .properties
                    .iter()
                    .map(|p| json!({"type": p.type_, "value": p.value}))
                    .collect();
                cel::matches(expr, &props).unwrap_or(false)
            };
            let mut why = Vec::new();
            for package in &hints {
                match pick(package, None, by, catalogs, need, rule) {
                    Ok(s) => return Ok(vec![s]),
                    Err(e) => why.push(e),
                }
            }
            Err(why.join("; "))
        }
    }
}

fn contents<'c>(inputs: &'c [CatalogInput<'_>]) -> impl Iterator<Item = &'c PackageContent> {
    inputs
        .iter()
        .filter_map(|i| i.content.as_ref().ok().copied())
}

/// Whether `b` provides `g`: its `olm.gvk` values as in the catalog, or as the content
/// cache keeps them (`content::compact::gvk_key`).
fn provides_gvk(b: &Bundle, g: &Gvk) -> bool {
    let key = format!("{}/{}/{}", g.group, g.version, g.kind);
    b.properties_of(PROPERTY_GVK)
        .any(|p| crate::content::compact::gvk_key(&p.value).as_deref() == Some(key.as_str()))
}

/// Resolves `package` in `range`; when the newest bundle does not pass `fits`, pins
/// the newest one that does.
fn pick(
    package: &str,
    range: Option<String>,
    by: &str,
    catalogs: &Catalogs<'_>,
    need: &mut Vec<String>,
    fits: impl Fn(&Bundle) -> bool,
) -> Result<(Suggestion, Vec<Dependency>), String> {
    let Some(inputs) = catalogs.get(package) else {
        need.push(package.to_string());
        return Err(format!("catalogs not read for package {package:?}"));
    };
    let request = |range: Option<String>| ResolveRequest {
        package: package.to_string(),
        version_range: range,
        ..Default::default()
    };
    let (mut resolution, mut props) =
        resolve_with_dependencies(&request(range.clone()), inputs).map_err(|e| e.to_string())?;
    let mut range = range;
    let winner = |name: &str| {
        contents(inputs)
            .flat_map(|c| &c.bundles)
            .find(|b| b.name == name)
    };
    if !winner(&resolution.bundle.name).is_some_and(&fits) {
        let best = contents(inputs)
            .flat_map(|c| &c.bundles)
            .filter(|b| fits(b))
            .filter_map(|b| BundleVersion::of_bundle(b).ok())
            .max()
            .ok_or_else(|| format!("no bundle of package {package:?} fits"))?;
        let pin = best.version.to_string();
        (resolution, props) = resolve_with_dependencies(&request(Some(pin.clone())), inputs)
            .map_err(|e| e.to_string())?;
        range = Some(pin);
    }
    let bundle = resolution.bundle;
    let channel = inputs
        .iter()
        .find(|i| i.name == bundle.catalog)
        .and_then(|i| i.content.as_ref().ok())
        .and_then(|c| channel_of(c, &bundle.name));
    let deps = parse(&props).map_err(|e| format!("bundle {}: {e}", bundle.name))?;
    Ok((
        Suggestion {
            package: package.to_string(),
            range,
            catalog: bundle.catalog,
            channel,
            bundle: bundle.name,
            image: bundle.image,
            version: bundle.version.status_version(),
            required_by: by.to_string(),
        },
        deps,
    ))
}

/// The channel holding `bundle`: the default channel when it does, else the first.
fn channel_of(content: &PackageContent, bundle: &str) -> Option<String> {
    let default = content.package.as_ref().map(|p| p.default_channel.as_str());
    let holding = || {
        content
            .channels
            .iter()
            .filter(|c| c.entries.iter().any(|e| e.name == bundle))
    };
    holding()
        .find(|c| Some(c.name.as_str()) == default)
        .or_else(|| holding().next())
        .map(|c| c.name.clone())
}
