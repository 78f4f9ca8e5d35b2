//! File-based catalog reader: one file (JSON stream or multi-document YAML, as the
//! walker sniffs it), walked with small limits, every blob validated and the first
//! package loaded into the model. Invariant: every blob handed out is one line of valid
//! JSON (the store writes it as one line of `catalog.jsonl`).
//!
//! The body is `olmv1::fuzzing::fbc_parse` (shared with the un-instrumented replay in
//! `tests/fuzz_replay.rs`).
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| olmv1::fuzzing::fbc_parse(data));
