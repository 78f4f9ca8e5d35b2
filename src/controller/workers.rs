//! Bounded, fair reconcile workers (`--max-concurrent-reconciles`).
//!
//! kube-runtime's `Controller` already never runs two reconciles of the same object at
//! once and keeps at most one queued entry per object (later triggers merge into it).
//! Its own concurrency limit, however, picks the next object among those held back
//! in hash-set order, so an object can wait behind others that keep coming back. Here
//! the controller runs unbounded and every reconcile first takes a permit of a FIFO
//! semaphore (tokio's semaphore is fair): at most `limit` reconciles run, and the
//! waiting ones start in the order they arrived. With one queue entry per object, an
//! extension that fails and is retried goes back to the end of the line: every waiting
//! extension starts after at most (waiting ahead of it) / `limit` reconciles, whatever
//! the others' retries do. Image pulls and unpacks of bundles happen inside reconciles,
//! so they are bounded by the same limit.
//!
//! The gauges `olmv1_active_workers`, `olmv1_active_workers_peak` and
//! `olmv1_max_concurrent_reconciles` report it, and controller-runtime's work-queue
//! families are read from it ([`crate::metrics::workqueue`]: the waiting reconciles are
//! the queue).

use crate::metrics::workqueue::{Running, WorkQueue, WorkerGauges};
use prometheus_client::metrics::gauge::Gauge;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// Default of `--max-concurrent-reconciles`: reconciles mostly wait on the API server
/// and registries; ten keep both busy without letting a burst of installs hold every
/// rendered bundle in memory at once.
pub const DEFAULT_MAX_CONCURRENT_RECONCILES: usize = 10;

/// The worker limit of one reconciler. Cheap to share (`Arc`).
#[derive(Debug)]
pub struct Workers {
    permits: Arc<Semaphore>,
    limit: usize,
    running: AtomicUsize,
    peak: AtomicUsize,
    gauges: Option<(Gauge, Gauge)>,
    queue: Option<Arc<WorkQueue>>,
}

/// Held while a reconcile runs; dropping it lets the next waiting one start.
#[derive(Debug)]
pub struct Worker {
    _permit: Option<OwnedSemaphorePermit>,
    workers: Arc<Workers>,
    _running: Option<Running>,
}

impl Workers {
    /// At most `limit` (at least 1) reconciles at once.
    pub fn new(limit: usize) -> Arc<Workers> {
        let limit = limit.max(1);
        Arc::new(Workers {
            permits: Arc::new(Semaphore::new(limit)),
            limit,
            running: AtomicUsize::new(0),
            peak: AtomicUsize::new(0),
            gauges: None,
            queue: None,
        })
    }

    /// [`Workers::new`], reporting into the gauges (running, peak, limit).
    pub fn with_gauges(limit: usize, gauges: WorkerGauges) -> Arc<Workers> {
        let limit = limit.max(1);
        gauges.max.set(limit as i64);
        Arc::new(Workers {
            permits: Arc::new(Semaphore::new(limit)),
            limit,
            running: AtomicUsize::new(0),
            peak: AtomicUsize::new(0),
            gauges: Some((gauges.running, gauges.peak)),
            queue: Some(gauges.queue),
        })
    }

    /// Waits (first come, first served) until fewer than `limit` reconciles run.
    pub async fn start(self: &Arc<Self>) -> Worker {
        // The semaphore is never closed; were it, reconciles would run unbounded
        // rather than stop.
        let waiting = self.queue.as_ref().map(|q| q.enqueue());
        let permit = self.permits.clone().acquire_owned().await.ok();
        let running = waiting.map(|w| w.start());
        let now = self.running.fetch_add(1, Ordering::SeqCst) + 1;
        let peak = self.peak.fetch_max(now, Ordering::SeqCst).max(now);
        if let Some((running, max)) = &self.gauges {
            running.set(now as i64);
            max.set(peak as i64);
        }
        Worker {
            _permit: permit,
            workers: self.clone(),
            _running: running,
        }
    }

    pub fn limit(&self) -> usize {
        self.limit
    }

    /// Reconciles running now.
    pub fn running(&self) -> usize {
        self.running.load(Ordering::SeqCst)
    }

    /// Most reconciles that ran at once so far.
    pub fn peak(&self) -> usize {
        self.peak.load(Ordering::SeqCst)
    }
}

impl Drop for Worker {
    fn drop(&mut self) {
        let now = self.workers.running.fetch_sub(1, Ordering::SeqCst) - 1;
        if let Some((running, _)) = &self.workers.gauges {
            running.set(now as i64);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[tokio::test]
    async fn at_most_limit_run_and_waiters_start_in_arrival_order() {
        let workers = Workers::new(2);
        let order = Arc::new(std::sync::Mutex::new(Vec::new()));
        let mut tasks = Vec::new();
        for i in 0..8 {
            let (workers, order) = (workers.clone(), order.clone());
            tasks.push(tokio::spawn(async move {
                let _w = workers.start().await;
                order.lock().unwrap().push(i);
                assert!(workers.running() <= 2);
                tokio::time::sleep(Duration::from_millis(20)).await;
            }));
            // Arrive one after the other.
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
        for t in tasks {
            t.await.unwrap();
        }
        assert_eq!(workers.peak(), 2);
        assert_eq!(workers.running(), 0);
        assert_eq!(*order.lock().unwrap(), (0..8).collect::<Vec<_>>());
    }

    #[tokio::test]
    async fn a_retrying_task_does_not_jump_the_queue() {
        // One slot; "busy" holds it and re-queues itself three times; "other" arrives
        // while busy runs and must run before busy's second turn.
        let workers = Workers::new(1);
        let order = Arc::new(std::sync::Mutex::new(Vec::new()));
        let busy = {
            let (workers, order) = (workers.clone(), order.clone());
            tokio::spawn(async move {
                for _ in 0..3 {
                    let w = workers.start().await;
                    order.lock().unwrap().push("busy");
                    tokio::time::sleep(Duration::from_millis(20)).await;
                    drop(w);
                    tokio::task::yield_now().await;
                }
            })
        };
        tokio::time::sleep(Duration::from_millis(5)).await;
        let other = {
            let (workers, order) = (workers.clone(), order.clone());
            tokio::spawn(async move {
                let _w = workers.start().await;
                order.lock().unwrap().push("other");
            })
        };
        busy.await.unwrap();
        other.await.unwrap();
        assert_eq!(*order.lock().unwrap(), ["busy", "other", "busy", "busy"]);
    }

    #[test]
    fn gauges_report_limit() {
        let histogram = prometheus_client::metrics::histogram::Histogram::new([1.0]);
        let g = WorkerGauges {
            running: Gauge::default(),
            peak: Gauge::default(),
            max: Gauge::default(),
            queue: WorkQueue::new(histogram),
        };
        let w = Workers::with_gauges(0, g.clone());
        assert_eq!(w.limit(), 1, "0 means 1");
        assert_eq!(g.max.get(), 1);
    }

    #[tokio::test]
    async fn the_waiting_reconciles_are_the_work_queue() {
        let histogram = prometheus_client::metrics::histogram::Histogram::new([1.0]);
        let queue = WorkQueue::new(histogram);
        let g = WorkerGauges {
            running: Gauge::default(),
            peak: Gauge::default(),
            max: Gauge::default(),
            queue: queue.clone(),
        };
        let workers = Workers::with_gauges(1, g);
        let first = workers.start().await;
        let waiting = tokio::spawn({
            let workers = workers.clone();
            async move { drop(workers.start().await) }
        });
        tokio::time::sleep(Duration::from_millis(20)).await;
        let now = std::time::Instant::now();
        assert_eq!(queue.snapshot(now).depth, 1);
        assert!(queue.snapshot(now).longest_seconds >= 0.015);
        drop(first);
        waiting.await.unwrap();
        let idle = queue.snapshot(std::time::Instant::now());
        assert_eq!((idle.depth, idle.longest_seconds), (0, 0.0));
    }
}
