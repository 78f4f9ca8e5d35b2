#![forbid(unsafe_code)]
//! OLM v1 in Rust: the ClusterExtension controller, a catalogd-compatible ClusterCatalog
//! controller and catalog server, and offline command-line tools for the same steps.
//!
//! The path of one ClusterExtension is spec → [`resolve`] → bundle image →
//! [`image`] pull/unpack → [`bundle`] render → [`preflight`] → [`apply`] → status.
//! Decisions live in pure functions; only [`apply`], [`image`], [`controller`] and
//! [`server`] touch the outside world.

pub mod api;
pub mod apply;
pub mod bundle;
pub mod cli;
pub mod content;
pub mod controller;
pub mod fbc;
pub mod image;
pub mod metrics;
pub mod preflight;
pub mod resolve;
pub mod server;
pub mod testenv;
pub mod version;
