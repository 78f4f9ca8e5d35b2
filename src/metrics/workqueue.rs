//! The state behind controller-runtime's work-queue families
//! (`workqueue_depth`, `workqueue_queue_duration_seconds`,
//! `workqueue_unfinished_work_seconds`, `workqueue_longest_running_processor_seconds`;
//! registered in [`super::upstream`]), taken from this controller's reconcile
//! scheduler: the queue is the reconciles waiting for a worker (the FIFO of
//! `crate::controller::workers`; a ClusterCatalog reconcile starts at once), the work
//! in progress is the reconciles running. A reconcile holds a [`Waiting`] token, then a
//! [`Running`] one; dropping it ends that state. The gauges are computed when scraped
//! ([`snapshot`], pure), as client-go computes them on its update tick.

use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Instant;

/// What a reconciler's worker limit reports into: the `olmv1_active_workers`,
/// `olmv1_active_workers_peak` and `olmv1_max_concurrent_reconciles` gauges and the
/// controller's [`WorkQueue`].
#[derive(Clone, Debug)]
pub struct WorkerGauges {
    pub running: Gauge,
    pub peak: Gauge,
    pub max: Gauge,
    pub queue: Arc<WorkQueue>,
}

/// One controller's queue.
#[derive(Debug)]
pub struct WorkQueue {
    state: Mutex<State>,
    /// `workqueue_queue_duration_seconds` of this controller.
    queue_duration: Histogram,
}

#[derive(Debug, Default)]
struct State {
    waiting: usize,
    running: BTreeMap<u64, Instant>,
    next: u64,
}

/// The gauges of one queue at one moment.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Snapshot {
    /// `workqueue_depth`: reconciles waiting to start.
    pub depth: i64,
    /// `workqueue_unfinished_work_seconds`: the time the running reconciles have run, summed.
    pub unfinished_seconds: f64,
    /// `workqueue_longest_running_processor_seconds`: the longest-running one's time.
    pub longest_seconds: f64,
}

/// The gauges for `waiting` queued reconciles and running ones started at `running`.
pub fn snapshot(waiting: usize, running: impl Iterator<Item = Instant>, now: Instant) -> Snapshot {
    let (mut unfinished, mut longest) = (0.0_f64, 0.0_f64);
    for started in running {
        let seconds = now.saturating_duration_since(started).as_secs_f64();
        unfinished += seconds;
        longest = longest.max(seconds);
    }
    Snapshot {
        depth: i64::try_from(waiting).unwrap_or(i64::MAX),
        unfinished_seconds: unfinished,
        longest_seconds: longest,
    }
}

impl WorkQueue {
    pub fn new(queue_duration: Histogram) -> Arc<WorkQueue> {
        Arc::new(WorkQueue {
            state: Mutex::new(State::default()),
            queue_duration,
        })
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// A reconcile is waiting to start.
    pub fn enqueue(self: &Arc<Self>) -> Waiting {
        self.state().waiting += 1;
        Waiting {
            queue: self.clone(),
            since: Instant::now(),
            started: false,
        }
    }

    /// The gauges now.
    pub fn snapshot(&self, now: Instant) -> Snapshot {
        let state = self.state();
        snapshot(state.waiting, state.running.values().copied(), now)
    }
}

/// A queued reconcile; [`Waiting::start`] when it runs (dropped unstarted, it leaves
/// the queue).
#[derive(Debug)]
pub struct Waiting {
    queue: Arc<WorkQueue>,
    since: Instant,
    started: bool,
}

impl Waiting {
    /// The reconcile starts: it leaves the queue (its time there observed) and runs.
    pub fn start(mut self) -> Running {
        self.started = true;
        let now = Instant::now();
        self.queue
            .queue_duration
            .observe(now.saturating_duration_since(self.since).as_secs_f64());
        let mut state = self.queue.state();
        state.waiting = state.waiting.saturating_sub(1);
        let id = state.next;
        state.next += 1;
        state.running.insert(id, now);
        drop(state);
        Running {
            queue: self.queue.clone(),
            id,
        }
    }
}

impl Drop for Waiting {
    fn drop(&mut self) {
        if !self.started {
            let mut state = self.queue.state();
            state.waiting = state.waiting.saturating_sub(1);
        }
    }
}

/// A running reconcile; dropping it ends it.
#[derive(Debug)]
pub struct Running {
    queue: Arc<WorkQueue>,
    id: u64,
}

impl Drop for Running {
    fn drop(&mut self) {
        self.queue.state().running.remove(&self.id);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn the_gauges_sum_and_bound_the_running_time() {
        let now = Instant::now();
        let started = [now - Duration::from_secs(3), now - Duration::from_secs(1)];
        let s = snapshot(2, started.into_iter(), now);
        assert_eq!(s.depth, 2);
        assert!((s.unfinished_seconds - 4.0).abs() < 1e-6, "{s:?}");
        assert!((s.longest_seconds - 3.0).abs() < 1e-6, "{s:?}");
        let idle = snapshot(0, std::iter::empty(), now);
        assert_eq!(idle.depth, 0);
        assert_eq!(idle.longest_seconds, 0.0);
    }

    #[test]
    fn tokens_move_a_reconcile_from_queued_to_running_to_done() {
        let queue = WorkQueue::new(Histogram::new([0.1, 1.0]));
        let (a, b) = (queue.enqueue(), queue.enqueue());
        assert_eq!(queue.snapshot(Instant::now()).depth, 2);
        let running = a.start();
        let s = queue.snapshot(Instant::now() + Duration::from_secs(2));
        assert_eq!(s.depth, 1);
        assert!(s.longest_seconds >= 2.0, "{s:?}");
        drop(b);
        assert_eq!(queue.snapshot(Instant::now()).depth, 0);
        drop(running);
        let done = queue.snapshot(Instant::now());
        assert_eq!((done.depth, done.longest_seconds), (0, 0.0));
    }
}
