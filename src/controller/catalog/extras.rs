//! What only speeds up answers, written after a catalog is stored and Serving
//! (docs/concepts/catalogs.md §9.2, "Serving first, extras after"): today the gzip copy
//! of `/api/v1/all` ([`crate::fbc::precompress`]). [`Extras`] runs it as a background
//! task, holding no reconcile worker: at most one per catalog (newer content cancels
//! the copy of the older one) and one at a time over all catalogs (the compression
//! peak does not add up), so an ingest is never slowed by more than one copy.

use crate::fbc::precompress::write_gzip_copy;
use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use tokio::sync::Semaphore;

/// The extras in progress, one per catalog.
#[derive(Clone)]
pub struct Extras {
    running: Arc<Mutex<HashMap<String, Arc<AtomicBool>>>>,
    limit: Arc<Semaphore>,
}

impl Default for Extras {
    fn default() -> Self {
        Extras {
            running: Arc::default(),
            limit: Arc::new(Semaphore::new(1)),
        }
    }
}

impl Extras {
    /// Writes the extras of catalog `name`'s version directory `dir` in the background,
    /// cancelling those of its previous content. Returns the task (awaited by tests).
    pub fn start(&self, name: &str, dir: PathBuf) -> tokio::task::JoinHandle<Option<u64>> {
        let cancel = Arc::new(AtomicBool::new(false));
        self.replace(name, Some(cancel.clone()));
        let (this, name) = (self.clone(), name.to_owned());
        tokio::spawn(async move {
            let _permit = this.limit.clone().acquire_owned().await.ok();
            let flag = cancel.clone();
            let written = tokio::task::spawn_blocking(move || {
                write_gzip_copy(&dir, &|| flag.load(Ordering::Relaxed))
            })
            .await;
            let size = match written {
                Ok(Ok(size)) => size,
                Ok(Err(e)) => {
                    tracing::warn!(catalog = %name, error = %e, "writing the gzip copy of the catalog (served uncompressed)");
                    None
                }
                Err(e) => {
                    tracing::warn!(catalog = %name, error = %e, "gzip copy task failed");
                    None
                }
            };
            if let Some(bytes) = size {
                tracing::debug!(catalog = %name, bytes, "gzip copy of the catalog written");
            }
            let mut running = this.running.lock().unwrap_or_else(|p| p.into_inner());
            if running.get(&name).is_some_and(|c| Arc::ptr_eq(c, &cancel)) {
                running.remove(&name);
            }
            size
        })
    }

    /// Cancels the extras of catalog `name` (its content is removed).
    pub fn cancel(&self, name: &str) {
        self.replace(name, None);
    }

    fn replace(&self, name: &str, next: Option<Arc<AtomicBool>>) {
        let mut running = self.running.lock().unwrap_or_else(|p| p.into_inner());
        let previous = match next {
            Some(next) => running.insert(name.to_owned(), next),
            None => running.remove(name),
        };
        if let Some(previous) = previous {
            previous.store(true, Ordering::Relaxed);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fbc::store::{CATALOG_FILE, CATALOG_GZIP_FILE};

    #[tokio::test]
    async fn newer_content_cancels_the_copy_of_the_older() {
        let dir = tempfile::tempdir().unwrap();
        let (old, new) = (dir.path().join("old"), dir.path().join("new"));
        for d in [&old, &new] {
            std::fs::create_dir_all(d).unwrap();
            std::fs::write(
                d.join(CATALOG_FILE),
                "{\"schema\":\"olm.package\"}\n".repeat(50_000),
            )
            .unwrap();
        }
        let extras = Extras::default();
        // Holding the one slot: the first copy waits, and is cancelled before it runs.
        let slot = extras.limit.clone().acquire_owned().await.unwrap();
        let first = extras.start("c", old.clone());
        let second = extras.start("c", new.clone());
        drop(slot);
        assert_eq!(first.await.unwrap(), None, "cancelled");
        assert!(second.await.unwrap().is_some());
        assert!(!old.join(CATALOG_GZIP_FILE).exists());
        assert!(new.join(CATALOG_GZIP_FILE).exists());
        assert!(extras.running.lock().unwrap().is_empty());
    }
}
