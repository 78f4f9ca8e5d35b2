//! Layer unpacking (tar, tar+gzip, tar+zstd, sniffed from the bytes) with small limits,
//! once for the whole image and once for a sub-directory. Invariants: nothing appears
//! beside the destination, and no symlink left in it resolves outside it.
//!
//! The body is `olmv1::fuzzing::unpack_layer` (shared with the un-instrumented replay in
//! `tests/fuzz_replay.rs`).
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| olmv1::fuzzing::unpack_layer(data));
