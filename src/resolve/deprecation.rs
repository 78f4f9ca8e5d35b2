//! The ClusterExtension deprecation condition family (docs/reference/api-and-status.md §2.1):
//! `Deprecated`, `PackageDeprecated`, `ChannelDeprecated`, `BundleDeprecated`, computed
//! as plain data from the winning catalog's `olm.deprecations`, the requested channels
//! and the installed bundle. The controller maps these onto Kubernetes Conditions.

use crate::fbc::model::{
    Deprecation, DeprecationEntry, SCHEMA_BUNDLE, SCHEMA_CHANNEL, SCHEMA_PACKAGE,
};

pub const TYPE_DEPRECATED: &str = "Deprecated";
pub const TYPE_PACKAGE_DEPRECATED: &str = "PackageDeprecated";
pub const TYPE_CHANNEL_DEPRECATED: &str = "ChannelDeprecated";
pub const TYPE_BUNDLE_DEPRECATED: &str = "BundleDeprecated";

pub const REASON_DEPRECATED: &str = "Deprecated";
pub const REASON_NOT_DEPRECATED: &str = "NotDeprecated";
pub const REASON_UNKNOWN: &str = "DeprecationStatusUnknown";
pub const REASON_ABSENT: &str = "Absent";

pub const MESSAGE_UNKNOWN: &str = "deprecation status unknown: catalog data unavailable";
pub const MESSAGE_NO_BUNDLE: &str = "no bundle installed yet";

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ConditionStatus {
    True,
    False,
    Unknown,
}

impl ConditionStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            ConditionStatus::True => "True",
            ConditionStatus::False => "False",
            ConditionStatus::Unknown => "Unknown",
        }
    }
}

/// One condition, ready to become a `metav1.Condition`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DeprecationCondition {
    pub type_: &'static str,
    pub status: ConditionStatus,
    pub reason: &'static str,
    pub message: String,
}

/// What the resolver knew about the catalog when the conditions are computed.
#[derive(Clone, Copy, Debug)]
pub enum CatalogData<'a> {
    /// Resolution failed, or was skipped because a rollout is in progress.
    Unavailable,
    /// Resolution succeeded; the winning catalog's deprecation object for the package
    /// (the first `olm.deprecations` blob), if any.
    Available(Option<&'a Deprecation>),
}

fn cond(
    type_: &'static str,
    status: ConditionStatus,
    reason: &'static str,
    message: impl Into<String>,
) -> DeprecationCondition {
    DeprecationCondition {
        type_,
        status,
        reason,
        message: message.into(),
    }
}

/// `BundleDeprecated` when nothing is installed.
fn no_bundle() -> DeprecationCondition {
    cond(
        TYPE_BUNDLE_DEPRECATED,
        ConditionStatus::Unknown,
        REASON_ABSENT,
        MESSAGE_NO_BUNDLE,
    )
}

/// The four conditions when the catalog data is unavailable: all Unknown.
fn unknown_conditions(installed: bool) -> [DeprecationCondition; 4] {
    let unknown = |t| cond(t, ConditionStatus::Unknown, REASON_UNKNOWN, MESSAGE_UNKNOWN);
    [
        unknown(TYPE_DEPRECATED),
        unknown(TYPE_PACKAGE_DEPRECATED),
        unknown(TYPE_CHANNEL_DEPRECATED),
        if installed {
            unknown(TYPE_BUNDLE_DEPRECATED)
        } else {
            no_bundle()
        },
    ]
}

/// Whether an entry's reference matches `pred` (schema, name), and the non-empty
/// messages of the entries that do.
fn matching(entries: &[DeprecationEntry], pred: impl Fn(&str, &str) -> bool) -> (bool, Vec<&str>) {
    let hits: Vec<_> = entries
        .iter()
        .filter(|e| pred(&e.reference.schema, &e.reference.name))
        .collect();
    let messages = hits
        .iter()
        .map(|e| e.message.as_str())
        .filter(|m| !m.is_empty())
        .collect();
    (!hits.is_empty(), messages)
}

/// One of the package, channel and bundle conditions: True with the messages, else False.
fn specific(type_: &'static str, hit: bool, msgs: &[&str], not_msg: &str) -> DeprecationCondition {
    if hit {
        cond(
            type_,
            ConditionStatus::True,
            REASON_DEPRECATED,
            msgs.join("\n"),
        )
    } else {
        cond(
            type_,
            ConditionStatus::False,
            REASON_NOT_DEPRECATED,
            not_msg,
        )
    }
}

/// Computes the four conditions, in the order Deprecated, PackageDeprecated,
/// ChannelDeprecated, BundleDeprecated. `installed_bundle` is the name of the bundle
/// that is installed now (not the resolved one), `None` if nothing is installed.
pub fn deprecation_conditions(
    data: CatalogData<'_>,
    requested_channels: &[String],
    installed_bundle: Option<&str>,
) -> [DeprecationCondition; 4] {
    let deprecation = match data {
        CatalogData::Unavailable => return unknown_conditions(installed_bundle.is_some()),
        CatalogData::Available(d) => d,
    };
    let entries = deprecation
        .map(|d| d.entries.as_slice())
        .unwrap_or_default();
    let (pkg_hit, pkg_msgs) = matching(entries, |schema, _| schema == SCHEMA_PACKAGE);
    let (ch_hit, ch_msgs) = matching(entries, |schema, name| {
        schema == SCHEMA_CHANNEL
            && (requested_channels.is_empty() || requested_channels.iter().any(|c| c == name))
    });
    let (b_hit, b_msgs) = match installed_bundle {
        Some(b) => matching(entries, |schema, name| schema == SCHEMA_BUNDLE && name == b),
        None => (false, Vec::new()),
    };
    let all: Vec<&str> = pkg_msgs
        .iter()
        .chain(&ch_msgs)
        .chain(&b_msgs)
        .copied()
        .collect();
    let rollup = if all.is_empty() {
        cond(
            TYPE_DEPRECATED,
            ConditionStatus::False,
            REASON_NOT_DEPRECATED,
            "not deprecated",
        )
    } else {
        cond(
            TYPE_DEPRECATED,
            ConditionStatus::True,
            REASON_DEPRECATED,
            all.join("\n"),
        )
    };
    [
        rollup,
        specific(
            TYPE_PACKAGE_DEPRECATED,
            pkg_hit,
            &pkg_msgs,
            "package not deprecated",
        ),
        specific(
            TYPE_CHANNEL_DEPRECATED,
            ch_hit,
            &ch_msgs,
            "channel not deprecated",
        ),
        if installed_bundle.is_some() {
            specific(
                TYPE_BUNDLE_DEPRECATED,
                b_hit,
                &b_msgs,
                "bundle not deprecated",
            )
        } else {
            no_bundle()
        },
    ]
}

#[cfg(test)]
#[path = "deprecation_tests.rs"]
mod tests;
