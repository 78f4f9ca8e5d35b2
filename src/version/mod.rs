//! Version ranges: Masterminds constraints (`spec.source.catalog.version`), blang
//! `olm.skipRange` ranges, and version+release ordering of bundles.
