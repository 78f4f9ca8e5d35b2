//! Version ranges (Masterminds constraints of `spec.source.catalog.version`), blang
//! `olm.skipRange` ranges and bundle versions. The first line is the range, the second
//! a version, the third a release; the range is checked against that version and a few
//! fixed ones.
//!
//! The body is `olmv1::fuzzing::version_range` (shared with the un-instrumented replay in
//! `tests/fuzz_replay.rs`).
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| olmv1::fuzzing::version_range(data));
