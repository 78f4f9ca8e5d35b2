//! Image pull progress of the command-line tools: on a terminal, one status line on
//! stderr (`pulling quay.io/org/img:tag: layer 2/5, 12.3/40.1 MB`) redrawn in place
//! with `\r` at most ten times a second and erased when the pull ends; when stderr is
//! not a terminal, nothing (no sink is installed at all). The line's text is
//! [`line`], a pure function.

use crate::image::progress::{Progress, ProgressSink};
use std::io::{IsTerminal, Write};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// `pulling <image>: layer <n>/<m>, <done>/<total> MB` (kB when the image is
/// smaller than a megabyte).
pub fn line(p: &Progress<'_>) -> String {
    let (div, unit) = if p.total_bytes < 1_000_000 {
        (1_000.0, "kB")
    } else {
        (1_000_000.0, "MB")
    };
    format!(
        "pulling {}: layer {}/{}, {:.1}/{:.1} {unit}",
        p.image,
        p.layer,
        p.layers,
        p.bytes as f64 / div,
        p.total_bytes as f64 / div
    )
}

/// A sink drawing on stderr when stderr is a terminal; `None` otherwise.
pub fn terminal_sink() -> Option<ProgressSink> {
    if !std::io::stderr().is_terminal() {
        return None;
    }
    let last: Mutex<Option<Instant>> = Mutex::new(None);
    Some(ProgressSink::new(move |p| {
        let mut last = last.lock().unwrap_or_else(|e| e.into_inner());
        let mut err = std::io::stderr().lock();
        if p.finished {
            // erase the line: the command's own output follows
            let _ = write!(err, "\r\x1b[2K");
            let _ = err.flush();
            *last = None;
            return;
        }
        let now = Instant::now();
        if last.is_some_and(|t| now.duration_since(t) < Duration::from_millis(100)) {
            return;
        }
        *last = Some(now);
        let _ = write!(err, "\r\x1b[2K{}", line(p));
        let _ = err.flush();
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_line_names_layers_and_megabytes() {
        let p = Progress {
            image: "quay.io/org/op:v1",
            layer: 2,
            layers: 5,
            bytes: 12_345_678,
            total_bytes: 40_100_000,
            finished: false,
        };
        assert_eq!(
            line(&p),
            "pulling quay.io/org/op:v1: layer 2/5, 12.3/40.1 MB"
        );
        let small = Progress {
            layer: 1,
            layers: 1,
            bytes: 1_200,
            total_bytes: 2_500,
            ..p
        };
        assert_eq!(
            line(&small),
            "pulling quay.io/org/op:v1: layer 1/1, 1.2/2.5 kB"
        );
    }

    #[test]
    fn no_sink_when_stderr_is_not_a_terminal() {
        // cargo test captures stderr through a pipe unless run with a terminal
        if !std::io::stderr().is_terminal() {
            assert!(terminal_sink().is_none());
        }
    }
}
