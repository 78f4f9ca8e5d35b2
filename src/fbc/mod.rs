//! File-based catalogs: the typed model of FBC blobs ([`model`]); parsing, validation
//! and indexing of whole catalogs are added beside it.

pub mod model;
