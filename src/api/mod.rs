//! The `olm.operatorframework.io/v1` API: ClusterExtension and ClusterCatalog types,
//! condition helpers and CRD generation.
