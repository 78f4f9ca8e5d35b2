#![forbid(unsafe_code)]
//! OLM v1 in Rust: the ClusterExtension controller, a catalogd-compatible ClusterCatalog
//! controller and catalog server, and offline command-line tools for the same steps.
//!
//! The path of one ClusterExtension is spec → [`resolve`] → bundle image →
//! [`image`] pull/unpack → [`bundle`] render → [`preflight`] → [`apply`] → status.
//! Decisions live in pure functions; only [`apply`], [`image`], [`controller`] and
//! [`server`] touch the outside world. [`migrate`] reads what another manager left, so
//! that an installation it made is taken over in place. [`cli`] holds the offline subcommands of the
//! binary (nothing else imports it); [`metrics`] is what the controller process reports.
//! The test environment (`testenv`) exists only in tests and with the `testenv`
//! feature, so the shipped binary does not contain it; the same holds for the fuzz
//! target bodies (`fuzzing`, feature `fuzzing`).

pub mod api;
pub mod apply;
pub mod bundle;
pub mod cli;
pub mod content;
pub mod controller;
pub mod fbc;
#[cfg(feature = "fuzzing")]
#[doc(hidden)]
pub mod fuzzing;
pub mod image;
pub mod kinds;
pub mod metrics;
pub mod migrate;
pub mod preflight;
pub mod resolve;
pub mod server;
#[cfg(any(test, feature = "testenv"))]
pub mod testenv;
pub mod version;
pub mod yaml;
