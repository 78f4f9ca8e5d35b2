//! The slots of one server ([`super::Limits::max_connections`] at once,
//! [`super::Limits::max_connections_per_peer`] per source address): which connections
//! hold one, how many each peer holds, and whom a new connection evicts when they run
//! out (the order is in the module docs of [`super`]). A connection's task holds its
//! [`Slot`] until it ends; an evicted connection gives its slot up at once, while it
//! closes.

use super::Limits;
use super::clock::Clock;
use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::Notify;
use tokio::time::Instant;

/// The slots of one server: the connections holding one (evicted ones give theirs up
/// at once, while they close) and how many each peer holds.
#[derive(Default)]
pub(super) struct Registry {
    table: Mutex<Table>,
    /// A connection ended.
    pub(super) freed: Notify,
}

#[derive(Default)]
struct Table {
    next: u64,
    /// Connections holding a slot.
    live: HashMap<u64, Entry>,
    per_peer: HashMap<IpAddr, usize>,
    /// Connection tasks still running, evicted ones included.
    running: usize,
}

struct Entry {
    peer: IpAddr,
    clock: Arc<Clock>,
}

pub(super) enum Place {
    Admit(u64, Arc<Clock>),
    /// The peer is at its limit with every connection busy.
    Refuse,
    /// Every slot is busy.
    Wait,
}

impl Registry {
    fn lock(&self) -> std::sync::MutexGuard<'_, Table> {
        self.table.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// A slot for a new connection from `peer`, evicting for it when `limits` are
    /// reached (the module docs of [`super`] say whom).
    pub(super) fn place(&self, peer: IpAddr, limits: &Limits) -> Place {
        let mut table = self.lock();
        let now = Instant::now();
        let grace = limits.eviction_grace;
        let per_peer = table.per_peer.get(&peer).copied().unwrap_or(0);
        if per_peer >= limits.max_connections_per_peer.max(1) {
            match table.victim(Some(peer), now, grace) {
                Some(id) => table.evict(id, "its address is at its connection limit"),
                None => return Place::Refuse,
            }
        }
        if table.live.len() >= limits.max_connections.max(1) {
            match table.victim(None, now, grace) {
                Some(id) => table.evict(id, "the server is at its connection limit"),
                None => return Place::Wait,
            }
        }
        table.next += 1;
        let id = table.next;
        let clock = Arc::new(Clock::new(limits));
        table.live.insert(
            id,
            Entry {
                peer,
                clock: clock.clone(),
            },
        );
        *table.per_peer.entry(peer).or_insert(0) += 1;
        table.running += 1;
        Place::Admit(id, clock)
    }

    /// Ends connection `id`'s hold on its slot (if it still has one).
    fn close(&self, id: u64) {
        let mut table = self.lock();
        table.release(id);
        table.running = table.running.saturating_sub(1);
        drop(table);
        self.freed.notify_waiters();
    }

    pub(super) async fn all_closed(&self) {
        loop {
            let freed = self.freed.notified();
            if self.lock().running == 0 {
                return;
            }
            freed.await;
        }
    }
}

impl Table {
    /// The connection to evict first, among `peer`'s when given: the longest idle,
    /// then the oldest waiting for its head past `grace`, then the oldest waiting
    /// for the rest of a body past `grace`; none doing other work.
    fn victim(&self, peer: Option<IpAddr>, now: Instant, grace: Duration) -> Option<u64> {
        self.live
            .iter()
            .filter(|(_, e)| peer.is_none_or(|p| e.peer == p))
            .filter_map(|(id, e)| e.clock.evictable(now, grace).map(|rank| (rank, *id)))
            .min()
            .map(|(_, id)| id)
    }

    fn evict(&mut self, id: u64, why: &'static str) {
        if let Some(entry) = self.release(id) {
            tracing::debug!(peer = %entry.peer, "evicting a connection: {why}");
            entry.clock.evict();
        }
    }

    fn release(&mut self, id: u64) -> Option<Entry> {
        let entry = self.live.remove(&id)?;
        if let Some(n) = self.per_peer.get_mut(&entry.peer) {
            *n -= 1;
            if *n == 0 {
                self.per_peer.remove(&entry.peer);
            }
        }
        Some(entry)
    }
}

/// A connection task's slot: given back when the task ends.
pub(super) struct Slot {
    pub(super) registry: Arc<Registry>,
    pub(super) id: u64,
}

impl Drop for Slot {
    fn drop(&mut self) {
        self.registry.close(self.id);
    }
}
