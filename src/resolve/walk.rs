//! The walk behind [`super::resolve`] and [`super::explain`]: per catalog the selector,
//! availability, channel, version-range and upgrade-edge filters and the catalog's best
//! bundle; across catalogs deprecation (docs/concepts/resolution.md §4.5), priority and uniqueness; then the
//! dependency check of the winner (refused, or collected for [`super::dependencies`]). When explaining, every verdict is recorded.

use super::{
    Availability, BundleExplanation, CatalogInput, CatalogStats, InstalledBundle, NoUniqueBundle,
    Reason, Resolution, ResolveError, ResolveRequest, ResolvedBundle, UpgradePolicy,
};
use crate::api::selector::Selector;
use crate::fbc::model::{
    Bundle, Channel, Deprecation, PROPERTY_CONSTRAINT, PROPERTY_GVK_REQUIRED,
    PROPERTY_PACKAGE_REQUIRED, PackageContent, Property, SCHEMA_BUNDLE,
};
use crate::version::{BundleVersion, Constraints, SkipRange, VersionError};
use std::collections::HashSet;

struct Candidate<'a> {
    catalog: usize,
    bundle: &'a Bundle,
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

/// Where the walk records its verdicts, when [`super::explain`] asked for them.
struct Notes<'e>(Option<&'e mut Vec<BundleExplanation>>);

impl Notes<'_> {
    fn on(&self) -> bool {
        self.0.is_some()
    }

    /// Records one bundle's verdict; its index, or `usize::MAX` when not recording.
    fn push(&mut self, explanation: BundleExplanation) -> usize {
        match self.0.as_deref_mut() {
            Some(out) => {
                out.push(explanation);
                out.len() - 1
            }
            None => usize::MAX,
        }
    }

    /// Adds a reason to the verdict at `index`.
    fn add(&mut self, index: usize, reason: Reason) {
        if let Some(out) = self.0.as_deref_mut() {
            out[index].reasons.push(reason);
        }
    }
}

/// The request, parsed once for all catalogs.
struct Query<'r> {
    request: &'r ResolveRequest,
    selector: Selector,
    /// The version range and its text, when the request has one.
    range: Option<(Constraints, &'r str)>,
    /// Upgrade edges are followed (policy `CatalogProvided`).
    edges: bool,
    installed: Option<&'r InstalledBundle>,
    /// Parsed when a catalog first needs it (an unparsable installed version is an error
    /// only then).
    installed_version: Option<BundleVersion>,
    installed_label: Option<String>,
}

impl<'r> Query<'r> {
    fn new(request: &'r ResolveRequest) -> Result<Self, ResolveError> {
        let selector =
            Selector::parse(request.selector.as_ref()).map_err(ResolveError::InvalidSelector)?;
        let range = match request.version_range.as_deref().filter(|r| !r.is_empty()) {
            Some(r) => Some((
                Constraints::parse(r).map_err(|source| ResolveError::InvalidVersionRange {
                    range: r.to_string(),
                    source,
                })?,
                r,
            )),
            None => None,
        };
        let installed = request.installed.as_ref();
        Ok(Query {
            request,
            selector,
            range,
            edges: request.policy != UpgradePolicy::SelfCertified,
            installed,
            installed_version: None,
            installed_label: installed.map(|i| {
                if i.name.is_empty() {
                    format!("version {}", i.version)
                } else {
                    format!("{} ({})", i.name, i.version)
                }
            }),
        })
    }

    fn range_text(&self) -> Option<&'r str> {
        self.range.as_ref().map(|(_, text)| *text)
    }
}

/// One catalog's filters: bundles in the requested channels, successors of the installed
/// bundle, deprecated bundles.
struct Filters<'c> {
    /// `None` when no channel was requested (every bundle passes).
    in_channel: Option<HashSet<&'c str>>,
    /// `None` when upgrade edges do not apply (nothing installed, or self-certified).
    successors: Option<HashSet<&'c str>>,
    deprecated: HashSet<&'c str>,
}

impl<'c> Filters<'c> {
    fn new(q: &mut Query<'_>, content: &'c PackageContent) -> Result<Self, ResolveError> {
        let request = q.request;
        // Channels the filters look at: the requested ones, or all.
        let selected: Vec<&Channel> = content
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
        let successors = match (q.edges, q.installed) {
            (true, Some(inst)) => Some(successors(q, inst, &selected)?),
            _ => None,
        };
        let deprecated = content
            .deprecations
            .first()
            .map(|d| {
                d.entries
                    .iter()
                    .filter(|e| e.reference.schema == SCHEMA_BUNDLE)
                    .map(|e| e.reference.name.as_str())
                    .collect()
            })
            .unwrap_or_default();
        Ok(Filters {
            in_channel,
            successors,
            deprecated,
        })
    }
}

/// Entries of `channels` that replace or skip the installed bundle, or whose skipRange
/// contains its version.
fn successors<'c>(
    q: &mut Query<'_>,
    inst: &InstalledBundle,
    channels: &[&'c Channel],
) -> Result<HashSet<&'c str>, ResolveError> {
    if q.installed_version.is_none() {
        q.installed_version = Some(
            BundleVersion::new_lenient(&inst.version, inst.release.as_deref())
                .map_err(|e| ResolveError::InstalledVersion(e.to_string()))?,
        );
    }
    let iv = q.installed_version.as_ref().map(|v| &v.version);
    let mut set = HashSet::new();
    for entry in channels.iter().flat_map(|c| &c.entries) {
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
    Ok(set)
}

/// Whether bundle `b` passes the filters, and the reasons it does not. Once one filter
/// failed, the others are only checked when `all` (explaining).
fn verdict(
    q: &Query<'_>,
    filters: &Filters<'_>,
    b: &Bundle,
    version: &Result<BundleVersion, VersionError>,
    all: bool,
) -> (bool, Vec<Reason>) {
    let v = match version {
        Err(e) => {
            let error = e.to_string();
            return (false, vec![Reason::InvalidVersion { error }]);
        }
        Ok(v) => v,
    };
    let mut reasons = Vec::new();
    let mut ok = true;
    if let Some(set) = &filters.in_channel
        && !set.contains(b.name.as_str())
    {
        ok = false;
        reasons.push(Reason::NotInChannels {
            channels: q.request.channels.clone(),
        });
    }
    if (ok || all)
        && let Some((r, text)) = &q.range
        && !r.matches(&v.version)
    {
        ok = false;
        reasons.push(Reason::OutsideRange {
            range: text.to_string(),
        });
    }
    if (ok || all)
        && let Some(set) = &filters.successors
    {
        let is_self = q.installed_version.as_ref().is_some_and(|iv| iv.same_as(v));
        if !is_self && !set.contains(b.name.as_str()) {
            ok = false;
            reasons.push(Reason::NotSuccessor {
                installed: q.installed_label.clone().unwrap_or_default(),
            });
        }
    }
    (ok, reasons)
}

/// Records the bundles of a catalog that is not considered at all.
fn note_skipped(cat: &CatalogInput<'_>, reason: Reason, notes: &mut Notes<'_>) {
    let (true, Ok(content)) = (notes.on(), &cat.content) else {
        return;
    };
    for b in &content.bundles {
        notes.push(BundleExplanation {
            catalog: cat.name.to_string(),
            bundle: b.name.clone(),
            version: BundleVersion::of_bundle(b).ok().map(|v| v.to_string()),
            deprecated: false,
            reasons: vec![reason.clone()],
        });
    }
}

/// One catalog's part of the walk: its stats and its best bundle (non-deprecated first,
/// then the highest version); `None` when the catalog is skipped or lacks the package.
fn catalog_candidate<'a>(
    q: &mut Query<'_>,
    notes: &mut Notes<'_>,
    ci: usize,
    cat: &CatalogInput<'a>,
) -> Result<Option<(CatalogStats, Option<Candidate<'a>>)>, ResolveError> {
    let skip_reason = if !q.selector.matches(cat.labels) {
        Some(Reason::CatalogNotSelected)
    } else if cat.availability == Availability::Unavailable {
        Some(Reason::CatalogUnavailable)
    } else {
        None
    };
    if let Some(reason) = skip_reason {
        note_skipped(cat, reason, notes);
        return Ok(None);
    }
    let content: &'a PackageContent = match &cat.content {
        Ok(c) => c,
        Err(message) => {
            return Err(ResolveError::CatalogContent {
                package: q.request.package.clone(),
                catalog: cat.name.to_string(),
                message: message.clone(),
            });
        }
    };
    if is_empty(content) {
        return Ok(None);
    }
    let mut stat = CatalogStats {
        catalog_name: cat.name.to_string(),
        package_found: content.package.is_some(),
        total_bundles: content.bundles.len(),
        matched_bundles: 0,
    };
    let filters = Filters::new(q, content)?;

    // Filter, remembering the best survivor.
    let mut best: Option<Candidate<'a>> = None;
    let mut survivors: Vec<(usize, bool)> = Vec::new(); // (explanation index, deprecated)
    for b in &content.bundles {
        let deprecated = filters.deprecated.contains(b.name.as_str());
        let version = BundleVersion::of_bundle(b);
        let (ok, reasons) = verdict(q, &filters, b, &version, notes.on());
        let explain_index = notes.push(BundleExplanation {
            catalog: cat.name.to_string(),
            bundle: b.name.clone(),
            version: version.as_ref().ok().map(ToString::to_string),
            deprecated,
            reasons,
        });
        let (true, Ok(version)) = (ok, version) else {
            continue;
        };
        stat.matched_bundles += 1;
        survivors.push((explain_index, deprecated));
        let better = best.as_ref().is_none_or(|cur| {
            (!deprecated && cur.deprecated)
                || (deprecated == cur.deprecated && version > cur.version)
        });
        if better {
            best = Some(Candidate {
                catalog: ci,
                bundle: b,
                version,
                deprecated,
                deprecation: content.deprecations.first(),
                explain_index,
            });
        }
    }
    if let Some(best) = &best {
        for &(i, deprecated) in survivors.iter().filter(|(i, _)| *i != best.explain_index) {
            notes.add(
                i,
                Reason::Outranked {
                    by: best.bundle.name.clone(),
                    deprecated: deprecated && !best.deprecated,
                },
            );
        }
    }
    Ok(Some((stat, best)))
}

/// Adds catalog `cat`'s best bundle to the cross-catalog candidates (docs/concepts/resolution.md §4.5): a deprecated
/// one does not join non-deprecated ones, a non-deprecated one displaces deprecated ones.
fn add_candidate<'a>(
    candidates: &mut Vec<Candidate<'a>>,
    best: Candidate<'a>,
    catalogs: &[CatalogInput<'a>],
    notes: &mut Notes<'_>,
) {
    if let Some(prior) = candidates.last() {
        if best.deprecated && !prior.deprecated {
            let preferred_catalog = catalogs[prior.catalog].name.to_string();
            notes.add(
                best.explain_index,
                Reason::DeprecatedCandidate { preferred_catalog },
            );
            return;
        }
        if !best.deprecated && prior.deprecated {
            for c in candidates.iter() {
                notes.add(
                    c.explain_index,
                    Reason::DeprecatedCandidate {
                        preferred_catalog: catalogs[best.catalog].name.to_string(),
                    },
                );
            }
            candidates.clear();
        }
    }
    candidates.push(best);
}

/// Keeps only the candidates of the highest catalog priority.
fn keep_highest_priority<'a>(
    mut candidates: Vec<Candidate<'a>>,
    catalogs: &[CatalogInput<'a>],
    notes: &mut Notes<'_>,
) -> Vec<Candidate<'a>> {
    if candidates.len() <= 1 {
        return candidates;
    }
    candidates.sort_by_key(|c| std::cmp::Reverse(catalogs[c.catalog].priority));
    let top = catalogs[candidates[0].catalog].priority;
    let (keep, dropped): (Vec<_>, Vec<_>) = candidates
        .into_iter()
        .partition(|c| catalogs[c.catalog].priority == top);
    for c in &dropped {
        notes.add(
            c.explain_index,
            Reason::LowerPriority {
                priority: catalogs[c.catalog].priority,
                winner_catalog: catalogs[keep[0].catalog].name.to_string(),
                winner_priority: top,
            },
        );
    }
    keep
}

/// The one remaining candidate, or the sorted catalogs of the tied ones (none or several).
fn single_winner<'a>(
    mut candidates: Vec<Candidate<'a>>,
    catalogs: &[CatalogInput<'a>],
    notes: &mut Notes<'_>,
) -> Result<Candidate<'a>, Vec<String>> {
    match candidates.pop() {
        Some(w) if candidates.is_empty() => Ok(w),
        other => {
            candidates.extend(other);
            let mut names: Vec<String> = candidates
                .iter()
                .map(|c| catalogs[c.catalog].name.to_string())
                .collect();
            names.sort();
            for c in &candidates {
                notes.add(
                    c.explain_index,
                    Reason::Ambiguous {
                        catalogs: names.clone(),
                    },
                );
            }
            Err(names)
        }
    }
}

/// Whether `p` declares a dependency (docs/concepts/dependencies.md §1).
pub(super) fn is_dependency(p: &Property) -> bool {
    matches!(
        p.type_.as_str(),
        PROPERTY_PACKAGE_REQUIRED | PROPERTY_GVK_REQUIRED | PROPERTY_CONSTRAINT
    )
}

/// Rejects a winner with dependencies (unsupported) unless `deps` collects them, else
/// the resolution.
fn finish(
    request: &ResolveRequest,
    catalogs: &[CatalogInput<'_>],
    winner: Candidate<'_>,
    (mut notes, deps): (Notes<'_>, Option<&mut Vec<Property>>),
    stats: Vec<CatalogStats>,
) -> Result<Resolution, ResolveError> {
    let cat = &catalogs[winner.catalog];
    let bundle = winner.bundle;
    if let Some(deps) = deps {
        deps.extend(
            bundle
                .properties
                .iter()
                .filter(|p| is_dependency(p))
                .cloned(),
        );
    } else if let Some(p) = bundle.properties.iter().find(|p| is_dependency(p)) {
        let err = ResolveError::UnsupportedDependency {
            bundle: bundle.name.clone(),
            property: p.type_.clone(),
            detail: String::new(),
        };
        let error = err.to_string();
        notes.add(winner.explain_index, Reason::Rejected { error });
        return Err(err);
    }
    notes.add(winner.explain_index, Reason::Chosen);
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

/// Resolves `request` against `catalogs`, recording verdicts in `explain` if given.
pub(super) fn walk(
    request: &ResolveRequest,
    catalogs: &[CatalogInput<'_>],
    explain: Option<&mut Vec<BundleExplanation>>,
    deps: Option<&mut Vec<Property>>,
) -> Result<Resolution, ResolveError> {
    let mut notes = Notes(explain);
    let mut q = Query::new(request)?;
    let mut stats = Vec::new();
    let mut candidates: Vec<Candidate<'_>> = Vec::new();
    for (ci, cat) in catalogs.iter().enumerate() {
        let Some((stat, best)) = catalog_candidate(&mut q, &mut notes, ci, cat)? else {
            continue;
        };
        stats.push(stat);
        if let Some(best) = best {
            add_candidate(&mut candidates, best, catalogs, &mut notes);
        }
    }
    let candidates = keep_highest_priority(candidates, catalogs, &mut notes);
    match single_winner(candidates, catalogs, &mut notes) {
        Ok(winner) => finish(request, catalogs, winner, (notes, deps), stats),
        Err(names) => Err(ResolveError::NoUniqueBundle(Box::new(NoUniqueBundle {
            package: request.package.clone(),
            version_range: q.range_text().map(str::to_string),
            channels: request.channels.clone(),
            installed_version: q.installed.map(|i| i.version.clone()),
            catalogs: names,
            stats,
        }))),
    }
}
