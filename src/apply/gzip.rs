//! The bounded gunzip of stored records: olmv1's own revision record
//! ([`super::record`]) and the release Secrets another manager left (`crate::migrate`).
//! The output is bounded, so a corrupt or hostile record cannot blow memory
//! (a decompression bomb is refused with a reason, not read).

use std::io::Read as _;

/// Gunzips `raw`, at most `max` bytes out; `Err(reason)` for data that is not gzip or
/// that decompresses to more than `max` bytes.
pub fn gunzip(raw: &[u8], max: u64) -> Result<Vec<u8>, String> {
    let mut out = Vec::new();
    flate2::read::GzDecoder::new(raw)
        .take(max + 1)
        .read_to_end(&mut out)
        .map_err(|e| format!("gzip: {e}"))?;
    if out.len() as u64 > max {
        return Err(format!("larger than {max} bytes uncompressed"));
    }
    Ok(out)
}
