//! Resolution: (catalogs' content for one package, the ClusterExtension's catalog
//! filter, the installed bundle) → the bundle to install, or the exact upstream error
//! message (reference §4.1–4.5). Pure: catalog content is passed in, already fetched.
//!
//! Per catalog: selector and availability, then the channel, version-range and
//! upgrade-edge predicates; survivors sorted non-deprecated first, then by
//! version+release descending; the first is the catalog's candidate. Across catalogs:
//! deprecation outranks priority, then priority, then exactly one must remain.
//! [`explain`] runs the same walk and says for every bundle why it was or was not
//! chosen. [`deprecation::deprecation_conditions`] computes the condition family.

pub mod deprecation;
pub mod selector;

#[cfg(test)]
mod tests;

use crate::fbc::model::{
    Deprecation, PROPERTY_CONSTRAINT, PROPERTY_GVK_REQUIRED, PROPERTY_PACKAGE_REQUIRED,
    PackageContent, SCHEMA_BUNDLE,
};
use crate::version::{BundleVersion, ConstraintError, Constraints, SkipRange};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use selector::Selector;
use serde::Serialize;
use std::collections::{BTreeMap, HashSet};
use std::fmt;

/// `spec.source.catalog.upgradeConstraintPolicy`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, clap::ValueEnum)]
pub enum UpgradePolicy {
    #[default]
    #[value(name = "CatalogProvided")]
    CatalogProvided,
    #[value(name = "SelfCertified")]
    SelfCertified,
}

/// `ClusterCatalog.spec.availabilityMode`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub enum Availability {
    #[default]
    Available,
    Unavailable,
}

/// The installed bundle as recorded (`status.install.bundle`).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct InstalledBundle {
    pub name: String,
    /// As shown in status; legacy bundles carry the release as build metadata.
    pub version: String,
    /// Explicit release, if the record has one (empty = none).
    pub release: Option<String>,
}

/// What the ClusterExtension asks for (`spec.source.catalog` + installed state).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ResolveRequest {
    pub package: String,
    pub channels: Vec<String>,
    /// `spec.source.catalog.version`; `None` or empty = no range.
    pub version_range: Option<String>,
    /// `spec.source.catalog.selector`; `None` = all catalogs.
    pub selector: Option<LabelSelector>,
    pub policy: UpgradePolicy,
    pub installed: Option<InstalledBundle>,
}

/// One ClusterCatalog with the package's content (or the error fetching it).
#[derive(Clone, Debug)]
pub struct CatalogInput<'a> {
    pub name: &'a str,
    pub priority: i32,
    pub availability: Availability,
    pub labels: &'a BTreeMap<String, String>,
    /// The package's FBC in this catalog; an empty `PackageContent` if the catalog
    /// does not have the package; `Err` if it could not be read.
    pub content: Result<&'a PackageContent, String>,
}

/// The chosen bundle.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct ResolvedBundle {
    pub name: String,
    pub package: String,
    #[serde(serialize_with = "ser_display")]
    pub version: BundleVersion,
    pub image: String,
    pub catalog: String,
    pub priority: i32,
    pub deprecated: bool,
}

fn ser_display<S: serde::Serializer, T: fmt::Display>(v: &T, s: S) -> Result<S::Ok, S::Error> {
    s.collect_str(v)
}

/// Per-catalog numbers for the `resolution failed` log line.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct CatalogStats {
    pub catalog_name: String,
    pub package_found: bool,
    pub total_bundles: usize,
    pub matched_bundles: usize,
}

/// A successful resolution.
#[derive(Clone, Debug, PartialEq)]
pub struct Resolution {
    pub bundle: ResolvedBundle,
    /// The winning catalog's deprecation object for the package (its first
    /// `olm.deprecations` blob), for [`deprecation::deprecation_conditions`].
    pub deprecation: Option<Deprecation>,
    pub stats: Vec<CatalogStats>,
}

/// No unique bundle: the upstream `resolutionError`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NoUniqueBundle {
    pub package: String,
    pub version_range: Option<String>,
    pub channels: Vec<String>,
    /// The installed version as recorded, when upgrading.
    pub installed_version: Option<String>,
    /// Catalogs of the remaining (tied) candidates, sorted; empty if none.
    pub catalogs: Vec<String>,
    pub stats: Vec<CatalogStats>,
}

impl fmt::Display for NoUniqueBundle {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut s = String::new();
        if let Some(v) = &self.installed_version {
            s.push_str(&format!(
                "error upgrading from currently installed version {v:?}: "
            ));
        }
        if self.catalogs.len() > 1 {
            s.push_str(&format!("found bundles for package {:?} ", self.package));
        } else {
            s.push_str(&format!("no bundles found for package {:?} ", self.package));
        }
        if let Some(r) = self.version_range.as_deref().filter(|r| !r.is_empty()) {
            s.push_str(&format!("matching version {r:?} "));
        }
        if !self.channels.is_empty() {
            s.push_str(&format!("in channels [{}] ", self.channels.join(" ")));
        }
        if self.catalogs.len() > 1 {
            s.push_str(&format!(
                "in multiple catalogs with the same priority [{}] ",
                self.catalogs.join(" ")
            ));
        }
        f.write_str(s.trim())
    }
}

/// Resolution errors, displayed exactly as upstream reports them (§4.1–4.5).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ResolveError {
    #[error("desired catalog selector is invalid: {0}")]
    InvalidSelector(String),
    #[error("desired version range {range:?} is invalid: {source}")]
    InvalidVersionRange {
        range: String,
        source: ConstraintError,
    },
    #[error(
        "error walking catalogs: error getting package {package:?} from catalog {catalog:?}: {message}"
    )]
    CatalogContent {
        package: String,
        catalog: String,
        message: String,
    },
    #[error(
        "error walking catalogs: error finding upgrade edges: error parsing installed bundle version: {0}"
    )]
    InstalledVersion(String),
    #[error("{0}")]
    NoUniqueBundle(Box<NoUniqueBundle>),
    #[error(
        "validating bundle {bundle:?}: bundle {bundle:?} has a dependency declared via property {property:?} which is currently not supported"
    )]
    UnsupportedDependency { bundle: String, property: String },
}

impl ResolveError {
    /// Whether a matching catalog no longer exists at all (the controller keeps the
    /// installed bundle as target in that case, reference §3 step 4).
    pub fn no_catalog_had_package(&self) -> bool {
        matches!(self, ResolveError::NoUniqueBundle(e) if e.stats.iter().all(|s| !s.package_found))
    }
}

/// Why one bundle was or was not chosen.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(tag = "reason", rename_all = "camelCase")]
pub enum Reason {
    CatalogNotSelected,
    CatalogUnavailable,
    InvalidVersion {
        error: String,
    },
    NotInChannels {
        channels: Vec<String>,
    },
    OutsideRange {
        range: String,
    },
    NotSuccessor {
        installed: String,
    },
    /// Another bundle of the same catalog is preferred.
    Outranked {
        by: String,
        deprecated: bool,
    },
    /// This catalog's candidate is deprecated and another catalog has a
    /// non-deprecated one.
    DeprecatedCandidate {
        preferred_catalog: String,
    },
    LowerPriority {
        priority: i32,
        winner_catalog: String,
        winner_priority: i32,
    },
    Ambiguous {
        catalogs: Vec<String>,
    },
    Chosen,
    Rejected {
        error: String,
    },
}

impl fmt::Display for Reason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Reason::CatalogNotSelected => write!(f, "catalog not selected by the selector"),
            Reason::CatalogUnavailable => write!(f, "catalog availabilityMode is Unavailable"),
            Reason::InvalidVersion { error } => write!(f, "invalid version: {error}"),
            Reason::NotInChannels { channels } => {
                write!(f, "not in channels [{}]", channels.join(" "))
            }
            Reason::OutsideRange { range } => write!(f, "outside version range {range:?}"),
            Reason::NotSuccessor { installed } => write!(f, "not a successor of {installed}"),
            Reason::Outranked {
                by,
                deprecated: true,
            } => write!(f, "deprecated; {by} is not"),
            Reason::Outranked {
                by,
                deprecated: false,
            } => write!(f, "eligible, but {by} is higher"),
            Reason::DeprecatedCandidate { preferred_catalog } => {
                write!(
                    f,
                    "deprecated; catalog {preferred_catalog} has a non-deprecated candidate"
                )
            }
            Reason::LowerPriority {
                priority,
                winner_catalog,
                winner_priority,
            } => write!(
                f,
                "lower priority: catalog priority {priority} < {winner_priority} of catalog {winner_catalog}"
            ),
            Reason::Ambiguous { catalogs } => {
                write!(
                    f,
                    "eligible, but tied with catalogs of the same priority [{}]",
                    catalogs.join(" ")
                )
            }
            Reason::Chosen => write!(f, "chosen"),
            Reason::Rejected { error } => write!(f, "chosen, then rejected: {error}"),
        }
    }
}

/// The verdict for one bundle of one catalog.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct BundleExplanation {
    pub catalog: String,
    pub bundle: String,
    /// The version as shown in status, `None` if it does not parse.
    pub version: Option<String>,
    pub deprecated: bool,
    pub reasons: Vec<Reason>,
}

/// [`explain`]'s result: the resolution outcome plus one entry per bundle.
#[derive(Clone, Debug)]
pub struct Explanation {
    pub result: Result<Resolution, ResolveError>,
    pub bundles: Vec<BundleExplanation>,
}

/// Resolves the bundle to install.
pub fn resolve(
    request: &ResolveRequest,
    catalogs: &[CatalogInput<'_>],
) -> Result<Resolution, ResolveError> {
    walk(request, catalogs, None)
}

/// Resolves like [`resolve`] and explains the verdict for every bundle of the package
/// in every catalog (in catalog order, then bundle order).
pub fn explain(request: &ResolveRequest, catalogs: &[CatalogInput<'_>]) -> Explanation {
    let mut bundles = Vec::new();
    let result = walk(request, catalogs, Some(&mut bundles));
    Explanation { result, bundles }
}

struct Candidate<'a> {
    catalog: usize,
    bundle: &'a crate::fbc::model::Bundle,
    version: BundleVersion,
    deprecated: bool,
    deprecation: Option<&'a Deprecation>,
    explain_index: usize,
}

fn is_empty(content: &PackageContent) -> bool {
    content.package.is_none()
        && content.channels.is_empty()
        && content.bundles.is_empty()
        && content.deprecations.is_empty()
}

fn walk<'a>(
    request: &ResolveRequest,
    catalogs: &[CatalogInput<'a>],
    mut explain: Option<&mut Vec<BundleExplanation>>,
) -> Result<Resolution, ResolveError> {
    let selector =
        Selector::parse(request.selector.as_ref()).map_err(ResolveError::InvalidSelector)?;
    let range_text = request.version_range.as_deref().filter(|r| !r.is_empty());
    let range = match range_text {
        Some(r) => {
            Some(
                Constraints::parse(r).map_err(|source| ResolveError::InvalidVersionRange {
                    range: r.to_string(),
                    source,
                })?,
            )
        }
        None => None,
    };
    let edges = request.policy != UpgradePolicy::SelfCertified;
    let installed = request.installed.as_ref();
    let mut installed_version: Option<BundleVersion> = None;
    let installed_label = installed.map(|i| {
        if i.name.is_empty() {
            format!("version {}", i.version)
        } else {
            format!("{} ({})", i.name, i.version)
        }
    });

    let mut stats = Vec::new();
    let mut candidates: Vec<Candidate<'a>> = Vec::new();

    for (ci, cat) in catalogs.iter().enumerate() {
        let skip_reason = if !selector.matches(cat.labels) {
            Some(Reason::CatalogNotSelected)
        } else if cat.availability == Availability::Unavailable {
            Some(Reason::CatalogUnavailable)
        } else {
            None
        };
        if let Some(reason) = skip_reason {
            if let (Some(out), Ok(content)) = (explain.as_deref_mut(), &cat.content) {
                for b in &content.bundles {
                    out.push(BundleExplanation {
                        catalog: cat.name.to_string(),
                        bundle: b.name.clone(),
                        version: BundleVersion::of_bundle(b).ok().map(|v| v.to_string()),
                        deprecated: false,
                        reasons: vec![reason.clone()],
                    });
                }
            }
            continue;
        }
        let content = match &cat.content {
            Ok(c) => *c,
            Err(message) => {
                return Err(ResolveError::CatalogContent {
                    package: request.package.clone(),
                    catalog: cat.name.to_string(),
                    message: message.clone(),
                });
            }
        };
        if is_empty(content) {
            continue;
        }
        let mut stat = CatalogStats {
            catalog_name: cat.name.to_string(),
            package_found: content.package.is_some(),
            total_bundles: content.bundles.len(),
            matched_bundles: 0,
        };

        // Channels the filters look at: the requested ones, or all.
        let selected: Vec<_> = content
            .channels
            .iter()
            .filter(|c| request.channels.is_empty() || request.channels.contains(&c.name))
            .collect();
        let in_channel: Option<HashSet<&str>> = (!request.channels.is_empty()).then(|| {
            selected
                .iter()
                .flat_map(|c| c.entries.iter().map(|e| e.name.as_str()))
                .collect()
        });
        let successors: Option<HashSet<&str>> = match (edges, installed) {
            (true, Some(inst)) => {
                if installed_version.is_none() {
                    installed_version = Some(
                        BundleVersion::new_lenient(&inst.version, inst.release.as_deref())
                            .map_err(|e| ResolveError::InstalledVersion(e.to_string()))?,
                    );
                }
                let iv = installed_version.as_ref().map(|v| &v.version);
                let mut set = HashSet::new();
                for entry in selected.iter().flat_map(|c| &c.entries) {
                    let successor = (!inst.name.is_empty()
                        && (entry.replaces.as_deref() == Some(inst.name.as_str())
                            || entry.skips.iter().any(|s| s == &inst.name)))
                        || entry.skip_range.as_deref().is_some_and(|r| {
                            SkipRange::parse(r).is_ok_and(|r| iv.is_some_and(|v| r.contains(v)))
                        });
                    if successor {
                        set.insert(entry.name.as_str());
                    }
                }
                Some(set)
            }
            _ => None,
        };
        let deprecation = content.deprecations.first();
        let deprecated_names: HashSet<&str> = deprecation
            .map(|d| {
                d.entries
                    .iter()
                    .filter(|e| e.reference.schema == SCHEMA_BUNDLE)
                    .map(|e| e.reference.name.as_str())
                    .collect()
            })
            .unwrap_or_default();

        // Filter, remembering the best survivor.
        let mut best: Option<Candidate<'a>> = None;
        let mut survivors: Vec<usize> = Vec::new(); // explanation indices
        for b in &content.bundles {
            let deprecated = deprecated_names.contains(b.name.as_str());
            let version = BundleVersion::of_bundle(b);
            let mut reasons = Vec::new();
            let ok = match &version {
                Err(e) => {
                    reasons.push(Reason::InvalidVersion {
                        error: e.to_string(),
                    });
                    false
                }
                Ok(v) => {
                    let mut ok = true;
                    if let Some(set) = &in_channel
                        && !set.contains(b.name.as_str())
                    {
                        ok = false;
                        reasons.push(Reason::NotInChannels {
                            channels: request.channels.clone(),
                        });
                    }
                    if (ok || explain.is_some())
                        && let (Some(r), Some(text)) = (&range, range_text)
                        && !r.matches(&v.version)
                    {
                        ok = false;
                        reasons.push(Reason::OutsideRange {
                            range: text.to_string(),
                        });
                    }
                    if (ok || explain.is_some())
                        && let Some(set) = &successors
                    {
                        let is_self = installed_version.as_ref().is_some_and(|iv| iv.same_as(v));
                        if !is_self && !set.contains(b.name.as_str()) {
                            ok = false;
                            reasons.push(Reason::NotSuccessor {
                                installed: installed_label.clone().unwrap_or_default(),
                            });
                        }
                    }
                    ok
                }
            };
            let explain_index = match explain.as_deref_mut() {
                Some(out) => {
                    out.push(BundleExplanation {
                        catalog: cat.name.to_string(),
                        bundle: b.name.clone(),
                        version: version.as_ref().ok().map(ToString::to_string),
                        deprecated,
                        reasons,
                    });
                    out.len() - 1
                }
                None => usize::MAX,
            };
            let (true, Ok(version)) = (ok, version) else {
                continue;
            };
            stat.matched_bundles += 1;
            survivors.push(explain_index);
            let better = match &best {
                None => true,
                Some(cur) => {
                    (!deprecated && cur.deprecated)
                        || (deprecated == cur.deprecated && version > cur.version)
                }
            };
            if better {
                best = Some(Candidate {
                    catalog: ci,
                    bundle: b,
                    version,
                    deprecated,
                    deprecation,
                    explain_index,
                });
            }
        }
        stats.push(stat);
        let Some(best) = best else { continue };
        if let Some(out) = explain.as_deref_mut() {
            let by = best.bundle.name.clone();
            for &i in survivors.iter().filter(|&&i| i != best.explain_index) {
                let deprecated = out[i].deprecated && !best.deprecated;
                out[i].reasons.push(Reason::Outranked {
                    by: by.clone(),
                    deprecated,
                });
            }
        }
        // Cross-catalog deprecation handling (§4.5).
        if let Some(prior) = candidates.last() {
            if best.deprecated && !prior.deprecated {
                if let Some(out) = explain.as_deref_mut() {
                    out[best.explain_index]
                        .reasons
                        .push(Reason::DeprecatedCandidate {
                            preferred_catalog: catalogs[prior.catalog].name.to_string(),
                        });
                }
                continue;
            }
            if !best.deprecated && prior.deprecated {
                if let Some(out) = explain.as_deref_mut() {
                    for c in &candidates {
                        out[c.explain_index]
                            .reasons
                            .push(Reason::DeprecatedCandidate {
                                preferred_catalog: cat.name.to_string(),
                            });
                    }
                }
                candidates.clear();
            }
        }
        candidates.push(best);
    }

    // Priority: keep only the candidates of the highest priority.
    if candidates.len() > 1 {
        candidates.sort_by_key(|c| std::cmp::Reverse(catalogs[c.catalog].priority));
        let top = catalogs[candidates[0].catalog].priority;
        let (keep, dropped): (Vec<_>, Vec<_>) = candidates
            .into_iter()
            .partition(|c| catalogs[c.catalog].priority == top);
        if let Some(out) = explain.as_deref_mut() {
            for c in &dropped {
                out[c.explain_index].reasons.push(Reason::LowerPriority {
                    priority: catalogs[c.catalog].priority,
                    winner_catalog: catalogs[keep[0].catalog].name.to_string(),
                    winner_priority: top,
                });
            }
        }
        candidates = keep;
    }

    let winner = match candidates.pop() {
        Some(w) if candidates.is_empty() => w,
        other => {
            candidates.extend(other);
            let mut names: Vec<String> = candidates
                .iter()
                .map(|c| catalogs[c.catalog].name.to_string())
                .collect();
            names.sort();
            if let Some(out) = explain.as_deref_mut() {
                for c in &candidates {
                    out[c.explain_index].reasons.push(Reason::Ambiguous {
                        catalogs: names.clone(),
                    });
                }
            }
            return Err(ResolveError::NoUniqueBundle(Box::new(NoUniqueBundle {
                package: request.package.clone(),
                version_range: range_text.map(str::to_string),
                channels: request.channels.clone(),
                installed_version: installed.map(|i| i.version.clone()),
                catalogs: names,
                stats,
            })));
        }
    };
    let cat = &catalogs[winner.catalog];
    let bundle = winner.bundle;
    if let Some(p) = bundle.properties.iter().find(|p| {
        matches!(
            p.type_.as_str(),
            PROPERTY_PACKAGE_REQUIRED | PROPERTY_GVK_REQUIRED | PROPERTY_CONSTRAINT
        )
    }) {
        let err = ResolveError::UnsupportedDependency {
            bundle: bundle.name.clone(),
            property: p.type_.clone(),
        };
        if let Some(out) = explain.as_deref_mut() {
            out[winner.explain_index].reasons.push(Reason::Rejected {
                error: err.to_string(),
            });
        }
        return Err(err);
    }
    if let Some(out) = explain {
        out[winner.explain_index].reasons.push(Reason::Chosen);
    }
    Ok(Resolution {
        bundle: ResolvedBundle {
            name: bundle.name.clone(),
            package: request.package.clone(),
            version: winner.version,
            image: bundle.image.clone(),
            catalog: cat.name.to_string(),
            priority: cat.priority,
            deprecated: winner.deprecated,
        },
        deprecation: winner.deprecation.cloned(),
        stats,
    })
}
