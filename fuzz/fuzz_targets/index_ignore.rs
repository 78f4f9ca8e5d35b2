//! `.indexignore` matching: an ignore file, a line `====`, then paths to match.
//!
//! The body is `olmv1::fuzzing::index_ignore` (shared with the un-instrumented replay in
//! `tests/fuzz_replay.rs`).
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| olmv1::fuzzing::index_ignore(data));
