//! Conditional and range requests of the `all` endpoint, as Go's `ServeContent`:
//! HTTP dates, `If-Match` / `If-None-Match` / `If-(Un)Modified-Since` in RFC 9110
//! order, `If-Range`, and single `bytes=` ranges.

use super::Loaded;
use axum::http::{HeaderMap, HeaderValue, header};
use std::time::{SystemTime, UNIX_EPOCH};

pub(super) fn http_date(t: SystemTime) -> String {
    let secs = t
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs() as i64)
        .unwrap_or_default();
    jiff::Timestamp::from_second(secs)
        .map(|ts| {
            jiff::fmt::rfc2822::DateTimePrinter::new()
                .timestamp_to_rfc9110_string(&ts)
                .unwrap_or_default()
        })
        .unwrap_or_default()
}

pub(super) fn parse_http_date(v: &HeaderValue) -> Option<i64> {
    let s = v.to_str().ok()?;
    jiff::fmt::rfc2822::DateTimeParser::new()
        .parse_timestamp(s)
        .ok()
        .map(|t| t.as_second())
}

pub(super) fn unix_secs(t: SystemTime) -> i64 {
    t.duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs() as i64)
        .unwrap_or_default()
}

/// Whether an `If-Match`/`If-None-Match` list contains `etag` (`*` matches anything).
pub(super) fn etag_matches(list: &HeaderValue, etag: &HeaderValue, weak: bool) -> bool {
    let Ok(list) = list.to_str() else {
        return false;
    };
    let ours = etag.to_str().unwrap_or_default();
    list.split(',')
        .map(str::trim)
        .any(|t| t == "*" || t == ours || (weak && t.strip_prefix("W/").is_some_and(|t| t == ours)))
}

pub(super) enum Precondition {
    Proceed,
    NotModified,
    Failed,
}

/// RFC 9110 §13.2.2 evaluation order, as Go's `checkPreconditions`; `etag` is the ETag
/// of the representation the response would carry.
pub(super) fn check_preconditions(
    headers: &HeaderMap,
    l: &Loaded,
    etag: &HeaderValue,
) -> Precondition {
    let modified = unix_secs(l.modified);
    if let Some(im) = headers.get(header::IF_MATCH) {
        if !etag_matches(im, etag, false) {
            return Precondition::Failed;
        }
    } else if let Some(ius) = headers
        .get(header::IF_UNMODIFIED_SINCE)
        .and_then(parse_http_date)
        && modified > ius
    {
        return Precondition::Failed;
    }
    if let Some(inm) = headers.get(header::IF_NONE_MATCH) {
        if etag_matches(inm, etag, true) {
            return Precondition::NotModified;
        }
    } else if let Some(ims) = headers
        .get(header::IF_MODIFIED_SINCE)
        .and_then(parse_http_date)
        && modified <= ims
    {
        return Precondition::NotModified;
    }
    Precondition::Proceed
}

pub(super) fn if_range_holds(headers: &HeaderMap, l: &Loaded) -> bool {
    let Some(ir) = headers.get(header::IF_RANGE) else {
        return true;
    };
    let Ok(s) = ir.to_str() else { return false };
    if s.starts_with('"') {
        return s == l.etag.to_str().unwrap_or_default();
    }
    parse_http_date(ir) == Some(unix_secs(l.modified))
}

#[derive(Debug, PartialEq, Eq)]
pub(super) enum RangeSpec {
    Full,
    Unsatisfiable,
    Part(u64, u64),
}

/// One `bytes=` range; several ranges or a malformed header serve the whole content.
pub(super) fn parse_range(v: &HeaderValue, size: u64) -> RangeSpec {
    let Some(spec) = v
        .to_str()
        .ok()
        .and_then(|s| s.trim().strip_prefix("bytes="))
    else {
        return RangeSpec::Full;
    };
    if spec.contains(',') {
        return RangeSpec::Full;
    }
    let Some((a, b)) = spec.trim().split_once('-') else {
        return RangeSpec::Full;
    };
    let (a, b) = (a.trim(), b.trim());
    if a.is_empty() {
        let Ok(n) = b.parse::<u64>() else {
            return RangeSpec::Full;
        };
        if n == 0 || size == 0 {
            return RangeSpec::Unsatisfiable;
        }
        let n = n.min(size);
        return RangeSpec::Part(size - n, n);
    }
    let Ok(start) = a.parse::<u64>() else {
        return RangeSpec::Full;
    };
    if start >= size {
        return RangeSpec::Unsatisfiable;
    }
    let end = if b.is_empty() {
        size - 1
    } else {
        match b.parse::<u64>() {
            Ok(e) if e >= start => e.min(size - 1),
            _ => return RangeSpec::Full,
        }
    };
    RangeSpec::Part(start, end - start + 1)
}
