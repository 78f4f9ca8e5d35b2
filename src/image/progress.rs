//! Pull progress for a watching person: the puller reports, per downloaded chunk,
//! which layer of how many it is on and the bytes so far of the image's declared
//! total, to an optional [`ProgressSink`] in [`super::PullerConfig`]. The controller
//! sets none (one `Option` check per chunk); the CLI sets one that draws a status line
//! on a terminal (`cli/progress.rs`).

use std::sync::Arc;

/// Where a pull is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Progress<'a> {
    /// The image as asked for.
    pub image: &'a str,
    /// 1-based index of the layer being downloaded.
    pub layer: usize,
    pub layers: usize,
    /// Bytes of all layers downloaded so far.
    pub bytes: u64,
    /// The layers' declared total size.
    pub total_bytes: u64,
    /// Every layer is downloaded (the last report of a pull).
    pub finished: bool,
}

/// A callback receiving [`Progress`] reports; called from the pulling task, so it
/// must be quick (throttle drawing inside).
#[derive(Clone)]
pub struct ProgressSink(Arc<dyn Fn(&Progress<'_>) + Send + Sync>);

impl ProgressSink {
    pub fn new(f: impl Fn(&Progress<'_>) + Send + Sync + 'static) -> Self {
        ProgressSink(Arc::new(f))
    }

    pub fn report(&self, p: &Progress<'_>) {
        (self.0)(p)
    }
}

impl std::fmt::Debug for ProgressSink {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ProgressSink")
    }
}
