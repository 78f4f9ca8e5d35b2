//! Image reference parsing. Invariant: a parsed reference, printed whole, parses back
//! to the same reference (normalisation is idempotent).
//!
//! The body is `olmv1::fuzzing::image_reference` (shared with the un-instrumented replay in
//! `tests/fuzz_replay.rs`).
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| olmv1::fuzzing::image_reference(data));
