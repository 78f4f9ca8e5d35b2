//! Tests of the deprecation conditions.

use super::*;
use crate::fbc::model::{DeprecationEntry, PackageScopedReference};
use ConditionStatus::*;

fn entry(schema: &str, name: &str, message: &str) -> DeprecationEntry {
    DeprecationEntry {
        reference: PackageScopedReference {
            schema: schema.into(),
            name: name.into(),
        },
        message: message.into(),
    }
}

fn deprecation(entries: Vec<DeprecationEntry>) -> Deprecation {
    Deprecation {
        schema: "olm.deprecations".into(),
        package: "p".into(),
        entries,
    }
}

fn summary(c: &[DeprecationCondition; 4]) -> Vec<(&str, &str, &str, &str)> {
    c.iter()
        .map(|c| (c.type_, c.status.as_str(), c.reason, c.message.as_str()))
        .collect()
}

#[test]
fn unknown_when_catalog_data_unavailable() {
    let c = deprecation_conditions(CatalogData::Unavailable, &[], Some("p.v1"));
    assert!(c.iter().all(|c| c.status == Unknown
        && c.reason == REASON_UNKNOWN
        && c.message == MESSAGE_UNKNOWN));
    let c = deprecation_conditions(CatalogData::Unavailable, &[], None);
    assert_eq!(
        summary(&c)[3],
        (
            "BundleDeprecated",
            "Unknown",
            "Absent",
            "no bundle installed yet"
        )
    );
    assert_eq!(
        summary(&c)[0],
        (
            "Deprecated",
            "Unknown",
            "DeprecationStatusUnknown",
            MESSAGE_UNKNOWN
        )
    );
}

#[test]
fn nothing_deprecated() {
    let c = deprecation_conditions(CatalogData::Available(None), &[], Some("p.v1"));
    assert_eq!(
        summary(&c),
        vec![
            ("Deprecated", "False", "NotDeprecated", "not deprecated"),
            (
                "PackageDeprecated",
                "False",
                "NotDeprecated",
                "package not deprecated"
            ),
            (
                "ChannelDeprecated",
                "False",
                "NotDeprecated",
                "channel not deprecated"
            ),
            (
                "BundleDeprecated",
                "False",
                "NotDeprecated",
                "bundle not deprecated"
            ),
        ]
    );
}

#[test]
fn everything_deprecated() {
    let d = deprecation(vec![
        entry("olm.bundle", "p.v1", "v1 is bad"),
        entry("olm.package", "", "package gone"),
        entry("olm.channel", "alpha", "use beta"),
        entry("olm.channel", "stable", "stable moved"),
        entry("olm.bundle", "p.v2", "v2 too"),
    ]);
    let c = deprecation_conditions(
        CatalogData::Available(Some(&d)),
        &["alpha".into()],
        Some("p.v1"),
    );
    assert_eq!(
        summary(&c),
        vec![
            (
                "Deprecated",
                "True",
                "Deprecated",
                "package gone\nuse beta\nv1 is bad"
            ),
            ("PackageDeprecated", "True", "Deprecated", "package gone"),
            ("ChannelDeprecated", "True", "Deprecated", "use beta"),
            ("BundleDeprecated", "True", "Deprecated", "v1 is bad"),
        ]
    );
    // no channels requested: any deprecated channel counts
    let c = deprecation_conditions(CatalogData::Available(Some(&d)), &[], Some("p.v3"));
    assert_eq!(
        summary(&c)[2],
        (
            "ChannelDeprecated",
            "True",
            "Deprecated",
            "use beta\nstable moved"
        )
    );
    assert_eq!(
        summary(&c)[3],
        (
            "BundleDeprecated",
            "False",
            "NotDeprecated",
            "bundle not deprecated"
        )
    );
    // a channel that is not deprecated
    let c = deprecation_conditions(CatalogData::Available(Some(&d)), &["beta".into()], None);
    assert_eq!(
        summary(&c)[2],
        (
            "ChannelDeprecated",
            "False",
            "NotDeprecated",
            "channel not deprecated"
        )
    );
    assert_eq!(
        summary(&c)[3],
        (
            "BundleDeprecated",
            "Unknown",
            "Absent",
            "no bundle installed yet"
        )
    );
    assert_eq!(
        summary(&c)[0],
        ("Deprecated", "True", "Deprecated", "package gone")
    );
}

#[test]
fn empty_messages_are_skipped() {
    let d = deprecation(vec![
        entry("olm.package", "", ""),
        entry("olm.channel", "a", ""),
    ]);
    let c = deprecation_conditions(CatalogData::Available(Some(&d)), &[], None);
    assert_eq!(
        summary(&c)[1],
        ("PackageDeprecated", "True", "Deprecated", "")
    );
    assert_eq!(
        summary(&c)[0],
        ("Deprecated", "False", "NotDeprecated", "not deprecated")
    );
}
