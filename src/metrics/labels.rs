//! The label sets of the controller's own metric families ([`super::Metrics`]).

use super::{Controller, Phase};
use prometheus_client::encoding::EncodeLabelSet;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(super) struct ExtensionInfo {
    pub(super) name: String,
    pub(super) package: String,
    pub(super) version: String,
    pub(super) bundle: String,
    pub(super) catalog: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(super) struct ExtensionCondition {
    pub(super) name: String,
    pub(super) r#type: String,
    pub(super) status: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(super) struct UpgradeAvailable {
    pub(super) name: String,
    pub(super) package: String,
    pub(super) installed_version: String,
    pub(super) available_version: String,
    pub(super) reason: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(super) struct CatalogCondition {
    pub(super) catalog: String,
    pub(super) r#type: String,
    pub(super) status: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(super) struct CatalogLabel {
    pub(super) catalog: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(super) struct PhaseLabel {
    pub(super) phase: Phase,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(super) struct ControllerLabel {
    pub(super) controller: Controller,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(super) struct ErrorLabels {
    pub(super) controller: Controller,
    pub(super) reason: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(super) struct CodeLabel {
    pub(super) code: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(super) struct VerbLabel {
    pub(super) verb: String,
}
