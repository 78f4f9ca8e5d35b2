//! `ClusterExtension`: what an administrator asks to install (docs/reference/api-and-status.md §1.1).

use super::validation::{self, rules};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, LabelSelector};
use kube::CustomResource;
use schemars::{JsonSchema, Schema, SchemaGenerator, json_schema};
use serde::{Deserialize, Serialize};

/// ClusterExtensionSpec defines the desired state of a ClusterExtension.
#[derive(CustomResource, Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "olm.operatorframework.io",
    version = "v1",
    kind = "ClusterExtension",
    doc = "ClusterExtension is the Schema for the clusterextensions API",
    plural = "clusterextensions",
    status = "ClusterExtensionStatus",
    printcolumn = r#"{"name":"Installed Bundle","type":"string","jsonPath":".status.install.bundle.name"}"#,
    printcolumn = r#"{"name":"Version","type":"string","jsonPath":".status.install.bundle.version"}"#,
    printcolumn = r#"{"name":"Installed","type":"string","jsonPath":".status.conditions[?(@.type=='Installed')].status"}"#,
    printcolumn = r#"{"name":"Progressing","type":"string","jsonPath":".status.conditions[?(@.type=='Progressing')].status"}"#,
    printcolumn = r#"{"name":"Age","type":"date","jsonPath":".metadata.creationTimestamp"}"#
)]
#[serde(rename_all = "camelCase")]
pub struct ClusterExtensionSpec {
    /// namespace is a reference to a Kubernetes namespace. This is the namespace in which
    /// the provided ServiceAccount must exist. It also designates the default namespace
    /// where namespace-scoped resources for the extension are applied to the cluster.
    /// Some extensions may contain namespace-scoped resources to be applied in other
    /// namespaces. This namespace must exist.
    ///
    /// namespace is required, immutable, and follows the DNS label standard as defined
    /// in [RFC 1123].
    #[schemars(schema_with = "namespace_schema")]
    pub namespace: String,

    /// serviceAccount is an optional reference to a ServiceAccount used to perform all
    /// interactions with the cluster that are required to manage the extension.
    /// The ServiceAccount must be configured with the necessary permissions to perform
    /// these interactions. The ServiceAccount must exist in the namespace referenced
    /// in the spec. When it is not set, the controller's configuration decides: a
    /// default installer ServiceAccount, the controller's own identity, or (the default)
    /// a Progressing condition saying what to set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub service_account: Option<ServiceAccountReference>,

    /// source is a required field which selects the installation source of content for
    /// this ClusterExtension. Selection is performed by setting the sourceType.
    ///
    /// Catalog is currently the only implemented sourceType, and setting the sourcetype
    /// to "Catalog" requires the catalog field to also be defined.
    pub source: SourceConfig,

    /// install is an optional field used to configure the installation options for the
    /// ClusterExtension such as the pre-flight check configuration.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub install: Option<ClusterExtensionInstallConfig>,

    /// config is an optional field used to specify bundle specific configuration used
    /// to configure the bundle. Configuration is bundle specific and a bundle may
    /// provide a configuration schema. When not specified, the default configuration
    /// of the resolved bundle will be used.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub config: Option<ClusterExtensionConfig>,

    /// progressDeadlineMinutes is an optional field that defines the maximum period of
    /// time in minutes after which an installation should be considered failed and
    /// require manual intervention. This functionality is disabled when no value is
    /// provided. The minimum period is 10 minutes, and the maximum is 720 minutes
    /// (12 hours).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("minimum" = 10, "maximum" = 720))]
    pub progress_deadline_minutes: Option<i32>,
}

/// ServiceAccountReference identifies the serviceAccount used fo install a ClusterExtension.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ServiceAccountReference {
    /// name is a required, reference to a ServiceAccount that must exist in the
    /// namespace specified by the ClusterExtension. The ServiceAccount performs every
    /// change of the extension's objects, so its RBAC decides what may be installed.
    #[schemars(schema_with = "service_account_name_schema")]
    pub name: String,
}

/// SourceConfig is a discriminated union which selects the installation source.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-validations" = [{
    "rule": "has(self.sourceType) && self.sourceType == 'Catalog' ? has(self.catalog) : !has(self.catalog)",
    "message": "catalog is required when sourceType is Catalog, and forbidden otherwise"
}]))]
pub struct SourceConfig {
    /// sourceType is a required reference to the type of install source.
    ///
    /// Allowed values are "Catalog"
    ///
    /// When this field is set to "Catalog", information for determining the
    /// appropriate bundle of content to install will be fetched from ClusterCatalog
    /// resources existing on the cluster. When using the Catalog sourceType, the
    /// catalog field must also be set.
    pub source_type: SourceType,

    /// catalog is used to configure how information is sourced from a catalog.
    /// This field is required when sourceType is "Catalog", and forbidden otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub catalog: Option<CatalogFilter>,
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum SourceType {
    #[default]
    Catalog,
}

/// CatalogFilter defines the attributes used to identify and filter content from a catalog.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CatalogFilter {
    /// packageName is a reference to the name of the package to be installed and is
    /// used to filter the content from catalogs.
    ///
    /// packageName is required, immutable, and follows the DNS subdomain standard as
    /// defined in [RFC 1123].
    #[schemars(schema_with = "package_name_schema")]
    pub package_name: String,

    /// version is an optional semver constraint (a specific version or range of
    /// versions). When unspecified, the latest version available will be installed.
    ///
    /// Acceptable version ranges are no longer than 64 characters. Version ranges are
    /// composed of comma- or space-delimited values and one or more comparison
    /// operators, known as comparison strings. Additional comparison strings can be
    /// added using the OR operator (||). Examples: ">=1.2.3 <2.0.0", "~1.2", "^1.4",
    /// "1.14.x", ">=1.11, <1.13 || >2.0".
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "version_schema")]
    pub version: Option<String>,

    /// channels is an optional reference to a set of channels belonging to the package
    /// specified in the packageName field. When specified, only bundles that are
    /// entries of one of these channels are considered.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "channels_schema")]
    pub channels: Option<Vec<String>>,

    /// selector is an optional field that can be used to filter the set of
    /// ClusterCatalogs used in the bundle selection process. When unspecified, all
    /// ClusterCatalogs will be used in the bundle selection process.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub selector: Option<LabelSelector>,

    /// upgradeConstraintPolicy is an optional field that controls whether the upgrade
    /// path(s) defined in the catalog are enforced for the package referenced in the
    /// packageName field.
    ///
    /// Allowed values are: "CatalogProvided" or "SelfCertified", or omitted.
    /// When this field is set to "CatalogProvided", automatic upgrades will only occur
    /// when upgrade constraints specified by the package author are met.
    /// When this field is set to "SelfCertified", the upgrade constraints specified by
    /// the package author are ignored. This allows for upgrades and downgrades to any
    /// version of the package.
    /// When this field is omitted, the default value is "CatalogProvided".
    #[serde(default)]
    #[schemars(extend("default" = "CatalogProvided"))]
    pub upgrade_constraint_policy: UpgradeConstraintPolicy,
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum UpgradeConstraintPolicy {
    #[default]
    CatalogProvided,
    SelfCertified,
}

/// ClusterExtensionInstallConfig is a union which selects the clusterExtension
/// installation config.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[schemars(extend("x-kubernetes-validations" = [{
    "rule": "has(self.preflight)",
    "message": "at least one of [preflight] are required when install is specified"
}]))]
pub struct ClusterExtensionInstallConfig {
    /// preflight is an optional field that can be used to configure the checks that
    /// are run before installation or upgrade of the content for the package
    /// specified in the packageName field.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub preflight: Option<PreflightConfig>,
}

/// PreflightConfig holds the configuration for the preflight checks.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-validations" = [{
    "rule": "has(self.crdUpgradeSafety)",
    "message": "at least one of [crdUpgradeSafety] are required when preflight is specified"
}]))]
pub struct PreflightConfig {
    /// crdUpgradeSafety is used to configure the CRD Upgrade Safety pre-flight checks
    /// that run prior to upgrades of installed content.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub crd_upgrade_safety: Option<CrdUpgradeSafetyPreflightConfig>,
}

/// CrdUpgradeSafetyPreflightConfig is the configuration for CRD upgrade safety preflight check.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct CrdUpgradeSafetyPreflightConfig {
    /// enforcement is a required field, used to configure the state of the CRD Upgrade
    /// Safety pre-flight check.
    ///
    /// Allowed values are "None" or "Strict". The default value is "Strict".
    /// When set to "None", the CRD Upgrade Safety pre-flight check will be skipped
    /// when performing an upgrade operation (its findings are still reported as a
    /// Warning event). When set to "Strict", the CRD Upgrade Safety pre-flight check
    /// will be run when performing an upgrade operation.
    pub enforcement: CrdUpgradeSafetyEnforcement,
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum CrdUpgradeSafetyEnforcement {
    None,
    #[default]
    Strict,
}

/// ClusterExtensionConfig is a discriminated union which selects the source
/// configuration values to be merged into the ClusterExtension's rendered manifests.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-validations" = [{
    "rule": "has(self.configType) && self.configType == 'Inline' ?has(self.inline) : !has(self.inline)",
    "message": "inline is required when configType is Inline, and forbidden otherwise"
}]))]
pub struct ClusterExtensionConfig {
    /// configType is a required reference to the type of configuration source.
    ///
    /// Allowed values are "Inline"
    ///
    /// When this field is set to "Inline", the cluster extension configuration is
    /// defined inline within the ClusterExtension resource.
    pub config_type: ClusterExtensionConfigType,

    /// inline contains JSON or YAML values specified directly in the ClusterExtension.
    ///
    /// inline is used to specify arbitrary configuration values for the
    /// ClusterExtension. It must be set if configType is 'Inline' and must be a valid
    /// JSON/YAML object containing at least one property. The configuration values are
    /// validated at runtime against a JSON schema provided by the bundle.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "inline_config_schema")]
    pub inline: Option<serde_json::Map<String, serde_json::Value>>,
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum ClusterExtensionConfigType {
    #[default]
    Inline,
}

/// ClusterExtensionStatus defines the observed state of a ClusterExtension.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ClusterExtensionStatus {
    /// The set of condition types which apply to all spec.source variations are
    /// Installed and Progressing, plus the deprecation conditions Deprecated,
    /// PackageDeprecated, ChannelDeprecated and BundleDeprecated.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(schema_with = "super::conditions::conditions_schema")]
    pub conditions: Vec<Condition>,

    /// install is a representation of the current installation status for this
    /// ClusterExtension.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub install: Option<ClusterExtensionInstallStatus>,

    /// observedGeneration is the generation of the spec that the last reconcile acted
    /// on (also present on every condition; kstatus-based tools read it here).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
}

/// ClusterExtensionInstallStatus is a representation of the status of the identified bundle.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ClusterExtensionInstallStatus {
    /// bundle is a required field which represents the identifying attributes of a bundle.
    pub bundle: BundleMetadata,
    /// installer is the identity that applied the installed revision, and why that
    /// identity was used (olmv1 addition; clients that do not know it ignore it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub installer: Option<InstallerStatus>,
}

/// InstallerStatus names the identity every write of the installed revision was made as.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct InstallerStatus {
    /// username is the Kubernetes user the writes were made as, e.g.
    /// `system:serviceaccount:<namespace>:<name>`.
    pub username: String,
    /// source says why this identity was used: `ServiceAccount` (named in
    /// spec.serviceAccount), `DefaultInstallerServiceAccount` (the controller's
    /// --default-installer-service-account) or `ControllerIdentity` (the controller's
    /// own ServiceAccount, --allow-controller-identity).
    pub source: InstallerSource,
}

/// Why an installer identity was used.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum InstallerSource {
    /// spec.serviceAccount names it.
    #[default]
    ServiceAccount,
    /// The controller's --default-installer-service-account.
    DefaultInstallerServiceAccount,
    /// The controller's own ServiceAccount (--allow-controller-identity).
    ControllerIdentity,
}

/// BundleMetadata is a representation of the identifying attributes of a bundle.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct BundleMetadata {
    /// name is required and follows the DNS subdomain standard as defined in [RFC 1123].
    #[schemars(schema_with = "bundle_name_schema")]
    pub name: String,
    /// version is a required field and is a reference to the version that this bundle
    /// represents. version follows the semantic versioning standard as defined in
    /// https://semver.org/.
    #[schemars(schema_with = "bundle_version_schema")]
    pub version: String,
    /// release is the release of the bundle, when the catalog gives one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "bundle_release_schema")]
    pub release: Option<String>,
}

fn namespace_schema(_: &mut SchemaGenerator) -> Schema {
    json_schema!({
        "type": "string",
        "maxLength": 63,
        "x-kubernetes-validations": rules(&[
            ("self == oldSelf", "namespace is immutable"),
            (validation::DNS1123_LABEL_CEL, "namespace must be a valid DNS1123 label"),
        ]),
    })
}

fn service_account_name_schema(_: &mut SchemaGenerator) -> Schema {
    json_schema!({
        "type": "string",
        "minLength": 1,
        "maxLength": 253,
        "x-kubernetes-validations": rules(&[(
            validation::DNS1123_SUBDOMAIN_CEL,
            "name must be a valid DNS1123 subdomain. It must contain only lowercase alphanumeric characters, hyphens (-) or periods (.), start and end with an alphanumeric character, and be no longer than 253 characters",
        )]),
    })
}

fn package_name_schema(_: &mut SchemaGenerator) -> Schema {
    json_schema!({
        "type": "string",
        "maxLength": 253,
        "x-kubernetes-validations": rules(&[
            ("self == oldSelf", "packageName is immutable"),
            (validation::DNS1123_SUBDOMAIN_CEL, validation::DNS1123_SUBDOMAIN_MESSAGE),
        ]),
    })
}

fn version_schema(_: &mut SchemaGenerator) -> Schema {
    json_schema!({
        "type": "string",
        "maxLength": 64,
        "x-kubernetes-validations": rules(&[(validation::VERSION_RANGE_CEL, "invalid version expression")]),
    })
}

fn channels_schema(_: &mut SchemaGenerator) -> Schema {
    json_schema!({
        "type": "array",
        "maxItems": 256,
        "items": {
            "type": "string",
            "maxLength": 253,
            "x-kubernetes-validations": rules(&[(
                validation::DNS1123_SUBDOMAIN_CEL,
                "channels entries must be valid DNS1123 subdomains",
            )]),
        },
    })
}

fn inline_config_schema(_: &mut SchemaGenerator) -> Schema {
    json_schema!({
        "type": "object",
        "minProperties": 1,
        "x-kubernetes-preserve-unknown-fields": true,
    })
}

fn bundle_name_schema(_: &mut SchemaGenerator) -> Schema {
    json_schema!({
        "type": "string",
        "x-kubernetes-validations": rules(&[(validation::DNS1123_SUBDOMAIN_CEL, validation::DNS1123_SUBDOMAIN_MESSAGE)]),
    })
}

fn bundle_version_schema(_: &mut SchemaGenerator) -> Schema {
    json_schema!({
        "type": "string",
        "x-kubernetes-validations": rules(&[(validation::BUNDLE_VERSION_CEL, "version must be well-formed semver")]),
    })
}

fn bundle_release_schema(_: &mut SchemaGenerator) -> Schema {
    json_schema!({
        "type": "string",
        "maxLength": 20,
        "x-kubernetes-validations": rules(&[(
            validation::BUNDLE_RELEASE_CEL,
            "release must be dot-separated identifiers, each numeric without leading zeros or alphanumeric",
        )]),
    })
}
