//! `ClusterCatalog`: a catalog image whose content the cluster serves (docs/reference/api-and-status.md §1.2).

use super::validation::{self, rules};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use kube::CustomResource;
use schemars::{JsonSchema, Schema, SchemaGenerator, json_schema};
use serde::{Deserialize, Serialize};

/// ClusterCatalogSpec defines the desired state of ClusterCatalog
#[derive(CustomResource, Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "olm.operatorframework.io",
    version = "v1",
    kind = "ClusterCatalog",
    doc = "ClusterCatalog enables users to make File-Based Catalog (FBC) catalog data available to the cluster. For more information on FBC, see https://olm.operatorframework.io/docs/reference/file-based-catalogs/#docs",
    plural = "clustercatalogs",
    status = "ClusterCatalogStatus",
    printcolumn = r#"{"name":"LastUnpacked","type":"date","jsonPath":".status.lastUnpacked"}"#,
    printcolumn = r#"{"name":"Serving","type":"string","jsonPath":".status.conditions[?(@.type==\"Serving\")].status"}"#,
    printcolumn = r#"{"name":"Age","type":"date","jsonPath":".metadata.creationTimestamp"}"#
)]
#[serde(rename_all = "camelCase")]
pub struct ClusterCatalogSpec {
    /// source allows a user to define the source of a catalog. A "catalog" contains
    /// information on content that can be installed on a cluster. Providing a catalog
    /// source makes the contents of the catalog discoverable and usable by other
    /// on-cluster components. These on-cluster components may do a variety of things
    /// with this information, such as presenting the content in a GUI dashboard or
    /// installing content from the catalog on the cluster. The catalog source must
    /// contain catalog metadata in the File-Based Catalog (FBC) format.
    pub source: CatalogSource,

    /// priority allows the user to define a priority for a ClusterCatalog. priority is
    /// optional. A ClusterCatalog's priority is used by clients as a tie-breaker
    /// between ClusterCatalogs that meet the client's requirements. A higher number
    /// means higher priority. When omitted, the default priority is 0 because that is
    /// the zero value of integers. Negative numbers can be used to specify a priority
    /// lower than the default. The lowest possible value is -2147483648. The highest
    /// possible value is 2147483647.
    #[serde(default)]
    #[schemars(extend("default" = 0, "minimum" = -2147483648, "maximum" = 2147483647))]
    pub priority: i32,

    /// availabilityMode allows users to define how the ClusterCatalog is made
    /// available to clients on the cluster. availabilityMode is optional.
    ///
    /// Allowed values are "Available" and "Unavailable" and omitted.
    ///
    /// When omitted, the default value is "Available".
    ///
    /// When set to "Available", the catalog contents will be unpacked and served over
    /// the catalog content HTTP server. Setting the availabilityMode to "Available"
    /// tells clients that they should consider this ClusterCatalog and its contents
    /// as usable.
    ///
    /// When set to "Unavailable", the catalog contents will no longer be served over
    /// the catalog content HTTP server. When set to this availabilityMode it should be
    /// interpreted the same as the ClusterCatalog not existing. Setting the
    /// availabilityMode to "Unavailable" can be useful in scenarios where a user may
    /// not want to delete the ClusterCatalog all together, but would still like it to
    /// be treated as if it doesn't exist.
    #[serde(default)]
    #[schemars(extend("default" = "Available"))]
    pub availability_mode: AvailabilityMode,
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum AvailabilityMode {
    Unavailable,
    #[default]
    Available,
}

/// CatalogSource is a discriminated union of possible sources for a Catalog.
/// CatalogSource contains the sourcing information for a Catalog
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[schemars(extend("x-kubernetes-validations" = [{
    "rule": "has(self.type) && self.type == 'Image' ? has(self.image) : !has(self.image)",
    "message": "image is required when source type is Image, and forbidden otherwise"
}]))]
pub struct CatalogSource {
    /// type is a reference to the type of source the catalog is sourced from.
    /// type is required.
    ///
    /// The only allowed value is "Image".
    ///
    /// When set to "Image", the ClusterCatalog content will be sourced from an OCI
    /// image. When using an image source, the image field must be set and must be the
    /// only field defined for this type.
    #[serde(rename = "type")]
    pub type_: SourceKind,

    /// image is used to configure how catalog contents are sourced from an OCI image.
    /// This field is required when type is Image, and forbidden otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image: Option<ImageSource>,
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum SourceKind {
    #[default]
    Image,
}

/// ImageSource enables users to define the information required for sourcing a Catalog
/// from an OCI image
///
/// If we see that there is a possibly valid digest-based image reference AND
/// pollIntervalMinutes is specified, reject the resource since there is no use in
/// polling a digest-based image reference.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-validations" = [{
    "rule": "self.ref.find('(@.*:)') != \"\" ? !has(self.pollIntervalMinutes) : true",
    "message": "cannot specify pollIntervalMinutes while using digest-based image"
}]))]
pub struct ImageSource {
    /// ref allows users to define the reference to a container image containing
    /// Catalog contents. It cannot be more than 1000 characters.
    ///
    /// A reference can be broken down into 3 parts - the domain, name, and identifier.
    /// The domain is typically the registry where an image is located. The name is
    /// the repository path; the identifier is a tag (`:latest`) or a digest
    /// (`@sha256:…`). Examples: `quay.io/operatorhubio/catalog:latest`,
    /// `registry.example.com:5000/team/catalog@sha256:<64 hex characters>`.
    #[serde(rename = "ref")]
    #[schemars(schema_with = "image_ref_schema")]
    pub ref_: String,

    /// pollIntervalMinutes allows the user to set the interval, in minutes, at which
    /// the image source should be polled for new content. When specified, the image
    /// is polled at that interval; when omitted it is not polled. It cannot be
    /// specified together with a digest-based image reference.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("minimum" = 1))]
    pub poll_interval_minutes: Option<i32>,
}

/// ClusterCatalogStatus defines the observed state of ClusterCatalog
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ClusterCatalogStatus {
    /// conditions is a representation of the current state for this ClusterCatalog.
    ///
    /// The current condition types are Serving and Progressing.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(schema_with = "super::conditions::conditions_schema")]
    pub conditions: Vec<Condition>,

    /// resolvedSource contains information about the resolved source based on the
    /// source type.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resolved_source: Option<ResolvedCatalogSource>,

    /// urls contains the URLs that can be used to access the catalog.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub urls: Option<ClusterCatalogUrls>,

    /// lastUnpacked represents the last time the contents of the catalog were
    /// extracted from their source format. As an example, when using an Image source,
    /// the OCI image will be pulled and the image layers written to a file-system
    /// backed cache. We refer to the act of this extraction from the source format as
    /// "unpacking".
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_unpacked: Option<Time>,
}

/// ResolvedCatalogSource is a discriminated union of resolution information for a Catalog.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[schemars(extend("x-kubernetes-validations" = [{
    "rule": "has(self.type) && self.type == 'Image' ? has(self.image) : !has(self.image)",
    "message": "image is required when source type is Image, and forbidden otherwise"
}]))]
pub struct ResolvedCatalogSource {
    /// type is a reference to the type of source the catalog is sourced from.
    #[serde(rename = "type")]
    pub type_: SourceKind,
    /// image is a field containing resolution information for a catalog sourced from
    /// an image.
    pub image: ResolvedImageSource,
}

/// ResolvedImageSource provides information about the resolved source of a Catalog
/// sourced from an image.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ResolvedImageSource {
    /// ref contains the resolved image digest-based reference.
    #[serde(rename = "ref")]
    #[schemars(schema_with = "resolved_image_ref_schema")]
    pub ref_: String,
}

/// ClusterCatalogURLs contains the URLs that can be used to access the catalog.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ClusterCatalogUrls {
    /// base is a cluster-internal URL that provides endpoints for accessing the
    /// content of the catalog. The endpoint `/api/v1/all` serves the whole catalog
    /// and `/api/v1/metas` a filtered view of it.
    #[schemars(schema_with = "url_schema")]
    pub base: String,
}

fn image_ref_schema(_: &mut SchemaGenerator) -> Schema {
    json_schema!({
        "type": "string",
        "maxLength": 1000,
        "x-kubernetes-validations": rules(validation::IMAGE_REF_RULES),
    })
}

fn resolved_image_ref_schema(_: &mut SchemaGenerator) -> Schema {
    let mut pairs: Vec<(&str, &str)> = validation::IMAGE_REF_RULES
        .iter()
        .copied()
        .filter(|(_, message)| {
            *message != "must end with a digest or a tag" && !message.starts_with("tag is invalid")
        })
        .collect();
    pairs.insert(
        2,
        (r#"self.find('(@.*:)') != """#, "must end with a digest"),
    );
    json_schema!({
        "type": "string",
        "x-kubernetes-validations": rules(&pairs),
    })
}

fn url_schema(_: &mut SchemaGenerator) -> Schema {
    json_schema!({
        "type": "string",
        "maxLength": 525,
        "x-kubernetes-validations": rules(&[
            ("isURL(self)", "must be a valid URL"),
            ("isURL(self) ? (url(self).getScheme() == \"http\" || url(self).getScheme() == \"https\") : true", "scheme must be either http or https"),
        ]),
    })
}
