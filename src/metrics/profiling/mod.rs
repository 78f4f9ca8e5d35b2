//! Profiling endpoints on `--pprof-bind-address` (off by default), in Go's
//! `net/http/pprof` paths and format so that `go tool pprof` reads them:
//!
//! - `/debug/pprof/profile?seconds=N` (default 30, at most [`MAX_SECONDS`]): a CPU
//!   profile sampled at [`FREQUENCY`] Hz with the `pprof` crate (a SIGPROF timer), as a
//!   gzip'd `perftools.profiles.Profile` ([`encode`]); one at a time (409 otherwise).
//! - `/debug/pprof/heap`: jemalloc's sampled heap profile, converted by
//!   `jemalloc_pprof`. jemalloc only records it when the process started with
//!   `_RJEM_MALLOC_CONF=prof:true` (the option cannot be switched on later); with
//!   `prof_active:false` in it as well, recording starts only when this server does.
//!   Otherwise the endpoint answers 503 saying so.
//!
//! The server is protected as `/metrics` is (see [`super::serving`]).

pub mod encode;

use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use std::time::Duration;

/// CPU sampling frequency (Go's default).
pub const FREQUENCY: i32 = 100;
/// Longest CPU profile.
pub const MAX_SECONDS: u64 = 300;

/// The routes of the profiling server.
pub fn router() -> axum::Router {
    axum::Router::new()
        .route("/debug/pprof/", axum::routing::get(index))
        .route("/debug/pprof/profile", axum::routing::get(cpu_profile))
        .route("/debug/pprof/heap", axum::routing::get(heap_profile))
}

/// Starts jemalloc's heap sampling when the process allows it (`prof:true`); logs how
/// to enable it otherwise. Called once when the profiling server starts.
pub async fn activate_heap_profiling() {
    match jemalloc_pprof::PROF_CTL.as_ref() {
        Some(ctl) => {
            let mut ctl = ctl.lock().await;
            if !ctl.activated()
                && let Err(e) = ctl.activate()
            {
                tracing::warn!(error = %e, "cannot start jemalloc heap profiling");
                return;
            }
            tracing::info!("jemalloc heap profiling is active");
        }
        None => tracing::info!(
            "heap profiles are off: start the process with _RJEM_MALLOC_CONF=prof:true to enable /debug/pprof/heap"
        ),
    }
}

async fn index() -> &'static str {
    "olmv1 profiling endpoints (read them with `go tool pprof`):\n\
     /debug/pprof/profile?seconds=30  CPU profile\n\
     /debug/pprof/heap                heap profile (jemalloc; needs _RJEM_MALLOC_CONF=prof:true)\n"
}

#[derive(serde::Deserialize)]
struct ProfileQuery {
    seconds: Option<String>,
}

fn plain(status: StatusCode, message: String) -> Response {
    (
        status,
        [(header::CONTENT_TYPE, "text/plain; charset=utf-8")],
        message + "\n",
    )
        .into_response()
}

fn profile_response(name: &str, body: Vec<u8>) -> Response {
    (
        StatusCode::OK,
        [
            (header::CONTENT_TYPE, "application/octet-stream".to_string()),
            (
                header::CONTENT_DISPOSITION,
                format!("attachment; filename=\"{name}\""),
            ),
        ],
        body,
    )
        .into_response()
}

/// Go's `seconds` parameter: a positive whole number, 30 when absent.
fn profile_seconds(query: &ProfileQuery) -> Result<u64, String> {
    let Some(raw) = query.seconds.as_deref() else {
        return Ok(30);
    };
    match raw.trim().parse::<u64>() {
        Ok(0) | Err(_) => Err(format!("bad seconds parameter {raw:?}: a positive number")),
        Ok(n) if n > MAX_SECONDS => Err(format!("seconds={n} is longer than {MAX_SECONDS}")),
        Ok(n) => Ok(n),
    }
}

async fn cpu_profile(axum::extract::Query(query): axum::extract::Query<ProfileQuery>) -> Response {
    let seconds = match profile_seconds(&query) {
        Ok(s) => s,
        Err(message) => return plain(StatusCode::BAD_REQUEST, message),
    };
    let profiled =
        tokio::task::spawn_blocking(move || profile_cpu(Duration::from_secs(seconds))).await;
    match profiled {
        Ok(Ok(body)) => profile_response("profile", body),
        Ok(Err(CpuError::Busy(e))) => plain(
            StatusCode::CONFLICT,
            format!("could not enable CPU profiling: {e}"),
        ),
        Ok(Err(CpuError::Failed(message))) => plain(StatusCode::INTERNAL_SERVER_ERROR, message),
        Err(e) => plain(
            StatusCode::INTERNAL_SERVER_ERROR,
            format!("CPU profile: {e}"),
        ),
    }
}

enum CpuError {
    /// Another profile is running.
    Busy(::pprof::Error),
    Failed(String),
}

/// Samples this process for `duration` (blocking) and encodes the profile.
fn profile_cpu(duration: Duration) -> Result<Vec<u8>, CpuError> {
    let guard = ::pprof::ProfilerGuardBuilder::default()
        .frequency(FREQUENCY)
        .blocklist(&["libc", "libgcc", "pthread", "vdso"])
        .build()
        .map_err(CpuError::Busy)?;
    std::thread::sleep(duration);
    let report = guard
        .report()
        .build()
        .map_err(|e| CpuError::Failed(format!("CPU profile report: {e}")))?;
    drop(guard);
    encode::cpu_profile(&report)
        .map_err(|e| CpuError::Failed(format!("encoding the CPU profile: {e}")))
}

async fn heap_profile() -> Response {
    let Some(ctl) = jemalloc_pprof::PROF_CTL.as_ref().cloned() else {
        return plain(
            StatusCode::SERVICE_UNAVAILABLE,
            "heap profiling is off: start the process with the environment variable _RJEM_MALLOC_CONF=prof:true".into(),
        );
    };
    // jemalloc writes the dump to a file in $TMPDIR, then it is converted: blocking.
    let dumped = tokio::task::spawn_blocking(move || {
        let mut ctl = ctl.blocking_lock();
        if !ctl.activated() {
            return Ok(None);
        }
        ctl.dump_pprof().map(Some)
    })
    .await;
    match dumped {
        Ok(Ok(Some(body))) => profile_response("heap", body),
        Ok(Ok(None)) => plain(
            StatusCode::SERVICE_UNAVAILABLE,
            "jemalloc heap profiling is not active".into(),
        ),
        Ok(Err(e)) => plain(
            StatusCode::INTERNAL_SERVER_ERROR,
            format!("heap profile (dumped to $TMPDIR, which must be writable): {e:#}"),
        ),
        Err(e) => plain(
            StatusCode::INTERNAL_SERVER_ERROR,
            format!("heap profile: {e}"),
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn seconds(raw: Option<&str>) -> Result<u64, String> {
        profile_seconds(&ProfileQuery {
            seconds: raw.map(String::from),
        })
    }

    #[test]
    fn profile_seconds_as_go() {
        assert_eq!(seconds(None), Ok(30));
        assert_eq!(seconds(Some("5")), Ok(5));
        assert!(seconds(Some("0")).is_err());
        assert!(seconds(Some("-1")).is_err());
        assert!(seconds(Some("x")).is_err());
        assert!(seconds(Some("301")).is_err());
    }
}
