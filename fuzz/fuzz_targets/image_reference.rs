//! Image reference parsing. Invariant: a parsed reference, printed whole, parses back
//! to the same reference (normalisation is idempotent).
#![no_main]

use libfuzzer_sys::fuzz_target;
use olmv1::image::reference::parse;

fuzz_target!(|data: &[u8]| {
    let Ok(s) = std::str::from_utf8(data) else {
        return;
    };
    let _ = olmv1::bundle::is_digest_reference(s);
    let Ok(r) = parse(s) else { return };
    let whole = r.whole();
    match parse(&whole) {
        Ok(again) => assert_eq!(again.whole(), whole, "normalisation is not idempotent"),
        Err(e) => panic!("{s:?} parsed, but its normal form {whole:?} does not: {e}"),
    }
});
