//! Validation of file-based catalog invariants, fed blob by blob during the streaming
//! walk so that only small keys (names and references) are kept: one `olm.package` per
//! package with an existing default channel, no duplicate package/channel/bundle, channel
//! entries naming bundles of the same package, every bundle in some channel and carrying
//! exactly one valid `olm.package` property that matches it, and the `olm.deprecations`
//! rules of operator-registry (one per known package, references to existing channels
//! and bundles, package references without a name, no duplicate references). Every
//! problem is reported with the names involved and where the blob is.

use super::model::{
    PROPERTY_PACKAGE, SCHEMA_BUNDLE, SCHEMA_CHANNEL, SCHEMA_DEPRECATIONS, SCHEMA_PACKAGE,
};
use super::parse::{Blob, BlobView, ReferenceView};
use std::collections::{BTreeMap, HashMap, HashSet};

/// At most this many problems are listed; the rest are counted.
const MAX_LISTED: usize = 100;

/// What is kept of one package until [`Validator::finish`]. Per bundle and per channel
/// entry only the bundle name is kept, as a boxed `str` (a catalog of a million tiny
/// bundles must not cost a gigabyte: `what_is_kept_per_entry_is_small`).
#[derive(Debug, Default)]
struct PackageState {
    declared_at: Option<String>,
    default_channel: String,
    /// Channel name → index into `channel_list`.
    channels: HashMap<Box<str>, u32>,
    /// Every channel: its name and where it is declared.
    channel_list: Vec<(Box<str>, Box<str>)>,
    bundles: HashSet<Box<str>>,
    /// (channel index, bundle) for every channel entry.
    entries: Vec<(u32, Box<str>)>,
    deprecations_at: Option<String>,
    deprecation_refs: Vec<ReferenceView>,
    /// Where a blob first referred to this package (for "unknown package" messages).
    first_ref: Option<String>,
}

/// Counts of what a valid catalog holds.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Summary {
    pub packages: usize,
    pub channels: usize,
    pub bundles: usize,
    pub other_blobs: usize,
}

#[derive(Debug, Default)]
pub struct Validator {
    packages: BTreeMap<String, PackageState>,
    problems: Vec<String>,
    total_problems: usize,
    other_blobs: usize,
}

impl Validator {
    fn problem(&mut self, message: String) {
        self.total_problems += 1;
        if self.problems.len() < MAX_LISTED {
            self.problems.push(message);
        }
    }

    fn state(&mut self, package: &str, at: &str) -> &mut PackageState {
        let st = self.packages.entry(package.to_string()).or_default();
        if st.first_ref.is_none() {
            st.first_ref = Some(at.to_string());
        }
        st
    }

    /// Takes one blob into account.
    pub fn add(&mut self, blob: &Blob<'_>) {
        let v = blob.view;
        let at = blob.location();
        if let Some(what) = &v.normalized {
            // Accepted as catalogd accepts it; worth fixing in the catalog.
            self.problem(format!("{at}: {} blob {:?}: {what}", v.schema(), v.name()));
        }
        let name = v.name().to_string();
        let package = v.package().to_string();
        let schema = v.schema();
        if matches!(schema, SCHEMA_CHANNEL | SCHEMA_BUNDLE | SCHEMA_DEPRECATIONS)
            && package.is_empty()
        {
            self.problem(format!("{at}: {schema} blob {name:?} has no package"));
            return;
        }
        match schema {
            SCHEMA_PACKAGE => self.add_package(v, &at, &name),
            SCHEMA_CHANNEL => self.add_channel(v, &at, &name, &package),
            SCHEMA_BUNDLE => self.add_bundle(v, &at, &name, &package),
            SCHEMA_DEPRECATIONS => self.add_deprecations(v, &at, &package),
            _ => self.other_blobs += 1,
        }
    }

    /// An `olm.package` blob: named, declared once, with a default channel.
    fn add_package(&mut self, v: &BlobView, at: &str, name: &str) {
        if name.is_empty() {
            self.problem(format!("{at}: olm.package blob has no name"));
            return;
        }
        let st = self.state(name, at);
        if let Some(prev) = st.declared_at.clone() {
            self.problem(format!(
                "{at}: duplicate package {name:?} (first declared at {prev})"
            ));
            return;
        }
        st.declared_at = Some(at.to_string());
        st.default_channel = v.default_channel.clone().unwrap_or_default();
        if st.default_channel.is_empty() {
            self.problem(format!("{at}: package {name:?} has no defaultChannel"));
        }
    }

    /// An `olm.channel` blob: named, unique in its package, entries named and unique.
    fn add_channel(&mut self, v: &BlobView, at: &str, name: &str, package: &str) {
        if name.is_empty() {
            self.problem(format!("{at}: channel of package {package:?} has no name"));
            return;
        }
        let st = self.state(package, at);
        if let Some(&i) = st.channels.get(name) {
            let prev = st.channel_list[i as usize].1.to_string();
            self.problem(format!(
                "{at}: package {package:?} has duplicate channel {name:?} (first at {prev})"
            ));
            return;
        }
        let index = st.channel_list.len() as u32;
        st.channels.insert(name.into(), index);
        st.channel_list.push((name.into(), at.into()));
        let mut seen = HashSet::new();
        let mut problems = Vec::new();
        for entry in v.entries.iter().flatten() {
            match entry.name.as_deref() {
                None | Some("") => problems.push(format!(
                    "{at}: channel {name:?} of package {package:?} has an entry without a name"
                )),
                Some(b) => {
                    if !seen.insert(b) {
                        problems.push(format!("{at}: channel {name:?} of package {package:?} has duplicate entry {b:?}"));
                    } else {
                        st.entries.push((index, b.into()));
                    }
                }
            }
        }
        if seen.is_empty() && problems.is_empty() {
            problems.push(format!(
                "{at}: channel {name:?} of package {package:?} has no entries"
            ));
        }
        for p in problems {
            self.problem(p);
        }
    }

    /// An `olm.bundle` blob: named, unique, exactly one valid `olm.package` property.
    fn add_bundle(&mut self, v: &BlobView, at: &str, name: &str, package: &str) {
        if name.is_empty() {
            self.problem(format!("{at}: bundle of package {package:?} has no name"));
            return;
        }
        let st = self.state(package, at);
        if !st.bundles.insert(name.into()) {
            self.problem(format!(
                "{at}: package {package:?} has duplicate bundle {name:?}"
            ));
            return;
        }
        let props: Vec<_> = v
            .properties
            .iter()
            .flatten()
            .filter(|p| p.type_ == PROPERTY_PACKAGE)
            .collect();
        let problem = match props.as_slice() {
            [] => Some("has no olm.package property".to_string()),
            [one] => match &one.package {
                Some(Ok(p)) if p.package_name != package => Some(format!(
                    "has olm.package property for package {:?}",
                    p.package_name
                )),
                Some(Ok(p)) => semver::Version::parse(&p.version).err().map(|e| {
                    format!(
                        "has invalid version {:?} in its olm.package property: {e}",
                        p.version
                    )
                }),
                Some(Err(e)) => Some(format!("has an invalid olm.package property: {e}")),
                None => Some("has an olm.package property without a value".to_string()),
            },
            many => Some(format!(
                "must have exactly one olm.package property, has {}",
                many.len()
            )),
        };
        if let Some(problem) = problem {
            self.problem(format!(
                "{at}: bundle {name:?} of package {package:?} {problem}"
            ));
        }
    }

    /// An `olm.deprecations` blob: one per package, entries with a reference and a message.
    fn add_deprecations(&mut self, v: &BlobView, at: &str, package: &str) {
        let st = self.state(package, at);
        if let Some(prev) = st.deprecations_at.clone() {
            self.problem(format!(
                "{at}: expected a maximum of one olm.deprecations per package: {package:?} (first at {prev})"
            ));
            return;
        }
        st.deprecations_at = Some(at.to_string());
        let mut seen = HashSet::new();
        let mut problems = Vec::new();
        for (i, entry) in v.entries.iter().flatten().enumerate() {
            let Some(r) = entry.reference.as_deref().cloned() else {
                problems.push(format!(
                    "{at}: olm.deprecations entry {i} of package {package:?} has no reference"
                ));
                continue;
            };
            if !seen.insert(r.clone()) {
                problems.push(format!(
                    "{at}: duplicate deprecation entry {{schema: {:?}, name: {:?}}} for package {package:?}",
                    r.schema, r.name
                ));
                continue;
            }
            if !entry.has_message {
                problems.push(format!(
                    "{at}: deprecation entry {{schema: {:?}, name: {:?}}} for package {package:?} has no message",
                    r.schema, r.name
                ));
            }
            st.deprecation_refs.push(r);
        }
        for p in problems {
            self.problem(p);
        }
    }

    /// Cross-blob checks; `Ok` with counts, or the counts and every problem found.
    pub fn finish(mut self) -> Result<Summary, (Summary, Vec<String>)> {
        let mut summary = Summary {
            other_blobs: self.other_blobs,
            ..Summary::default()
        };
        let packages = std::mem::take(&mut self.packages);
        for (name, st) in &packages {
            let Some(declared) = &st.declared_at else {
                let at = st.first_ref.as_deref().unwrap_or("?");
                self.problem(format!(
                    "{at}: unknown package {name:?} (no olm.package blob declares it)"
                ));
                continue;
            };
            summary.packages += 1;
            summary.channels += st.channels.len();
            summary.bundles += st.bundles.len();
            if st.channels.is_empty() {
                self.problem(format!("{declared}: package {name:?} has no channels"));
            } else if !st.default_channel.is_empty()
                && !st.channels.contains_key(st.default_channel.as_str())
            {
                self.problem(format!(
                    "{declared}: package {name:?}: default channel {:?} not found",
                    st.default_channel
                ));
            }
            let mut in_channel = HashSet::new();
            for (channel, bundle) in &st.entries {
                if st.bundles.contains(bundle) {
                    in_channel.insert(&**bundle);
                } else {
                    let (channel, at) = &st.channel_list[*channel as usize];
                    self.problem(format!(
                        "{at}: channel {channel:?} of package {name:?} names bundle {bundle:?}, which is not a bundle of that package"
                    ));
                }
            }
            let mut orphans: Vec<_> = st
                .bundles
                .iter()
                .filter(|b| !in_channel.contains(&***b))
                .collect();
            orphans.sort();
            for b in orphans {
                self.problem(format!(
                    "package {name:?}: bundle {b:?} is not in any channel"
                ));
            }
            let dep_at = st.deprecations_at.as_deref().unwrap_or("?");
            for r in &st.deprecation_refs {
                let problem = match r.schema.as_str() {
                    SCHEMA_BUNDLE if !st.bundles.contains(r.name.as_str()) => Some(format!(
                        "cannot deprecate bundle {:?} for package {name:?}: bundle not found",
                        r.name
                    )),
                    SCHEMA_CHANNEL if !st.channels.contains_key(r.name.as_str()) => Some(format!(
                        "cannot deprecate channel {:?} for package {name:?}: channel not found",
                        r.name
                    )),
                    SCHEMA_PACKAGE if !r.name.is_empty() => Some(format!(
                        "package name must be empty for deprecated package {name:?} (specified {:?})",
                        r.name
                    )),
                    SCHEMA_BUNDLE | SCHEMA_CHANNEL | SCHEMA_PACKAGE => None,
                    other => Some(format!(
                        "cannot deprecate object {{schema: {other:?}, name: {:?}}} for package {name:?}: object schema unknown",
                        r.name
                    )),
                };
                if let Some(p) = problem {
                    self.problem(format!("{dep_at}: {p}"));
                }
            }
        }
        if self.total_problems == 0 {
            return Ok(summary);
        }
        let mut problems = self.problems;
        if self.total_problems > problems.len() {
            problems.push(format!(
                "… and {} more problems",
                self.total_problems - problems.len()
            ));
        }
        Err((summary, problems))
    }
}

#[cfg(test)]
mod tests {
    use super::super::parse::{Limits, walk_catalog};
    use super::*;

    fn validate(text: &str) -> Result<Summary, Vec<String>> {
        let d = tempfile::tempdir().unwrap();
        std::fs::write(d.path().join("catalog.yaml"), text).unwrap();
        let mut v = Validator::default();
        walk_catalog(d.path(), &Limits::default(), &mut |b| {
            v.add(b);
            Ok(())
        })
        .unwrap();
        v.finish().map_err(|(_, p)| p)
    }

    const GOOD: &str = "schema: olm.package\nname: p\ndefaultChannel: stable\n---\nschema: olm.channel\nname: stable\npackage: p\nentries:\n- name: p.v1.0.0\n- name: p.v1.1.0\n  replaces: p.v1.0.0\n---\nschema: olm.bundle\nname: p.v1.0.0\npackage: p\nimage: quay.io/p:1\nproperties:\n- type: olm.package\n  value: {packageName: p, version: 1.0.0}\n---\nschema: olm.bundle\nname: p.v1.1.0\npackage: p\nimage: quay.io/p:2\nproperties:\n- type: olm.gvk\n  value: {group: a, kind: B, version: v1}\n- type: olm.package\n  value: {packageName: p, version: 1.1.0}\n---\nschema: my.own\nfoo: bar\n";

    #[test]
    fn valid_catalog_counts() {
        let s = validate(GOOD).unwrap();
        assert_eq!(
            s,
            Summary {
                packages: 1,
                channels: 1,
                bundles: 2,
                other_blobs: 1
            }
        );
    }

    fn problems(extra: &str) -> String {
        validate(&format!("{GOOD}---\n{extra}"))
            .unwrap_err()
            .join("\n")
    }

    #[test]
    fn duplicate_package() {
        let p = problems("schema: olm.package\nname: p\ndefaultChannel: stable\n");
        assert!(p.contains("duplicate package \"p\""), "{p}");
        assert!(p.contains("catalog.yaml:"), "{p}");
    }

    #[test]
    fn duplicates_of_channel_and_bundle() {
        let p = problems(
            "schema: olm.channel\nname: stable\npackage: p\nentries: [{name: p.v1.0.0}]\n",
        );
        assert!(p.contains("duplicate channel \"stable\""), "{p}");
        let p = problems(
            "schema: olm.bundle\nname: p.v1.0.0\npackage: p\nproperties: [{type: olm.package, value: {packageName: p, version: 1.0.0}}]\n",
        );
        assert!(p.contains("duplicate bundle \"p.v1.0.0\""), "{p}");
    }

    #[test]
    fn channel_naming_missing_bundle() {
        let p =
            problems("schema: olm.channel\nname: fast\npackage: p\nentries: [{name: p.v9.9.9}]\n");
        assert!(
            p.contains("channel \"fast\" of package \"p\" names bundle \"p.v9.9.9\""),
            "{p}"
        );
    }

    #[test]
    fn missing_default_channel() {
        let text = GOOD.replace("defaultChannel: stable", "defaultChannel: beta");
        let p = validate(&text).unwrap_err().join("\n");
        assert!(p.contains("default channel \"beta\" not found"), "{p}");
    }

    #[test]
    fn bundle_package_property_rules() {
        let p = problems("schema: olm.bundle\nname: q1\npackage: p\n");
        assert!(
            p.contains("bundle \"q1\" of package \"p\" has no olm.package property"),
            "{p}"
        );
        assert!(p.contains("bundle \"q1\" is not in any channel"), "{p}");
        let p = problems(
            "schema: olm.bundle\nname: q2\npackage: p\nproperties: [{type: olm.package, value: {packageName: other, version: 1.0.0}}]\n",
        );
        assert!(
            p.contains("has olm.package property for package \"other\""),
            "{p}"
        );
        let p = problems(
            "schema: olm.bundle\nname: q3\npackage: p\nproperties: [{type: olm.package, value: {packageName: p, version: one}}, {type: olm.package, value: {packageName: p, version: 1.0.0}}]\n",
        );
        assert!(p.contains("exactly one olm.package property, has 2"), "{p}");
        let p = problems(
            "schema: olm.bundle\nname: q4\npackage: p\nproperties: [{type: olm.package, value: {packageName: p, version: one}}]\n",
        );
        assert!(p.contains("invalid version \"one\""), "{p}");
    }

    #[test]
    fn unknown_package_references() {
        let p = problems("schema: olm.channel\nname: c\npackage: ghost\nentries: [{name: g1}]\n");
        assert!(p.contains("unknown package \"ghost\""), "{p}");
    }

    #[test]
    fn deprecation_rules() {
        let ok = "schema: olm.deprecations\npackage: p\nentries:\n- reference: {schema: olm.package}\n  message: gone\n- reference: {schema: olm.channel, name: stable}\n  message: use fast\n- reference: {schema: olm.bundle, name: p.v1.0.0}\n  message: old\n";
        validate(&format!("{GOOD}---\n{ok}")).unwrap();
        let p = problems(&format!("{ok}---\n{ok}"));
        assert!(
            p.contains("maximum of one olm.deprecations per package"),
            "{p}"
        );
        let bad = "schema: olm.deprecations\npackage: p\nentries:\n- reference: {schema: olm.bundle, name: nope}\n  message: m\n- reference: {schema: olm.channel, name: nope}\n  message: m\n- reference: {schema: olm.package, name: x}\n  message: m\n- reference: {schema: olm.bundle, name: nope}\n  message: m\n- reference: {schema: olm.thing, name: t}\n  message: m\n";
        let p = problems(bad);
        assert!(p.contains("cannot deprecate bundle \"nope\""), "{p}");
        assert!(p.contains("cannot deprecate channel \"nope\""), "{p}");
        assert!(p.contains("package name must be empty"), "{p}");
        assert!(p.contains("duplicate deprecation entry"), "{p}");
        assert!(p.contains("object schema unknown"), "{p}");
        let p = problems("schema: olm.deprecations\npackage: ghost\nentries: []\n");
        assert!(p.contains("unknown package \"ghost\""), "{p}");
    }

    /// What a channel entry costs while its blob is read and until the end of the walk
    /// (a million-entry channel used to take ~100 bytes per entry twice over).
    #[test]
    fn what_is_kept_per_entry_is_small() {
        assert!(std::mem::size_of::<super::super::parse::EntryView>() <= 32);
        assert!(std::mem::size_of::<(u32, Box<str>)>() <= 24);
    }

    #[test]
    fn problem_list_is_bounded() {
        let mut text = GOOD.to_string();
        for i in 0..300 {
            text.push_str(&format!(
                "---\nschema: olm.package\nname: p\ndefaultChannel: stable\n# {i}\n"
            ));
        }
        let p = validate(&text).unwrap_err();
        assert_eq!(p.len(), MAX_LISTED + 1);
        assert!(
            p.last().unwrap().contains("200 more problems"),
            "{:?}",
            p.last()
        );
    }
}
