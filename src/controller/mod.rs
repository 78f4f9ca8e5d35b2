//! The reconcilers (ClusterExtension, ClusterCatalog) and their status logic.
