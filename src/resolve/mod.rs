//! Resolution: (catalog content, ClusterExtension spec, installed bundle) → the bundle
//! to install, or the exact error message (reference §4).
