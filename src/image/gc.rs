//! Garbage collection of the cache directory: which unpacked images (`images/<digest>`)
//! and stored catalogs (`catalogs/<name>`, `catalogs/.<name>_<version>`) go, and the
//! leases that protect what is in use.
//!
//! The decision ([`plan`]) is pure: an entry is removed only when nothing references it
//! (no ClusterCatalog's resolved image or name, no installed or pending revision's
//! bundle image), no lease holds it now, it was not used within the grace period
//! (lease released or directory modified after `since`), and its name has the shape
//! the cache writes (anything else under the cache is left alone).
//!
//! Leases ([`CacheLeases`]): a pull holds one on its image digest from before it looks
//! at the cache until the caller drops the [`PulledImage`](super::PulledImage) (the
//! bundle is loaded, the catalog stored); a catalog ingest holds one on the catalog
//! name. [`CacheLeases::sweep`] decides and moves the doomed entries out of the way
//! while holding the table's lock, so no lease can start on an entry being removed: a
//! pull that comes after finds no cache entry and pulls again.
//!
//! The stored catalogs are reached through [`CatalogStore`], which the catalog store
//! (`fbc::store::CatalogsDir`) implements and the caller passes in: this module knows
//! their names and ages, not their layout on disk.

use std::collections::{BTreeSet, HashMap};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

/// The stored catalogs the GC sweeps beside `images/`, as their owner lists and removes
/// them.
pub trait CatalogStore {
    /// Every stored catalog directory: its catalog's name and when it last changed (a
    /// catalog may have several directories). Only names the store writes are listed:
    /// anything else under it is left alone.
    fn entries(&self) -> std::io::Result<Vec<Entry>>;
    /// Removes every directory of catalog `name`.
    fn remove(&self, name: &str) -> std::io::Result<()>;
}

/// What is in the cache: names of `images/` entries (`sha256-<hex>`) and of stored
/// catalogs (link names and the names of version directories).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Inventory {
    pub images: Vec<Entry>,
    pub catalogs: Vec<Entry>,
}

/// One cache entry and when it last changed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Entry {
    pub name: String,
    pub modified: SystemTime,
}

/// What the cluster references: image digests (`sha256:<hex>`) and catalog names.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct References {
    pub digests: BTreeSet<String>,
    pub catalogs: BTreeSet<String>,
}

impl References {
    /// Adds the digest of a digest-pinned reference (`…@sha256:<hex>`); others are
    /// ignored (a tag names no cache entry).
    pub fn add_image(&mut self, reference: &str) {
        if let Some((_, digest)) = reference.rsplit_once('@') {
            self.digests.insert(digest.to_string());
        }
    }
}

/// What to remove.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Plan {
    /// `images/` entry names.
    pub images: Vec<String>,
    /// Catalog names (their link and every version directory).
    pub catalogs: Vec<String>,
}

impl Plan {
    pub fn is_empty(&self) -> bool {
        self.images.is_empty() && self.catalogs.is_empty()
    }

    pub fn len(&self) -> usize {
        self.images.len() + self.catalogs.len()
    }
}

/// The lease key of an image cache entry (`images/<name>`).
pub fn image_key(entry_name: &str) -> String {
    format!("image:{entry_name}")
}

/// The lease key of a stored catalog.
pub fn catalog_key(name: &str) -> String {
    format!("catalog:{name}")
}

/// The `images/` entry name of a digest (`sha256:<hex>` → `sha256-<hex>`).
pub fn image_entry_name(digest: &str) -> String {
    digest.replace(':', "-")
}

/// Whether `name` is an `images/` entry the cache writes (`sha256-<64 hex>`).
fn is_image_entry(name: &str) -> bool {
    name.strip_prefix("sha256-").is_some_and(|h| {
        h.len() == 64
            && h.bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
    })
}

/// The entries to remove: unreferenced, not leased, not used since `since`.
/// `recently_used(key)` says whether a lease on `key` is held or was released at or
/// after `since`.
pub fn plan(
    inventory: &Inventory,
    references: &References,
    since: SystemTime,
    recently_used: impl Fn(&str) -> bool,
) -> Plan {
    let idle = |e: &Entry, key: &str| e.modified < since && !recently_used(key);
    let referenced_images: BTreeSet<String> = references
        .digests
        .iter()
        .map(|d| image_entry_name(d))
        .collect();
    let mut images: Vec<String> = inventory
        .images
        .iter()
        .filter(|e| is_image_entry(&e.name))
        .filter(|e| !referenced_images.contains(&e.name))
        .filter(|e| idle(e, &image_key(&e.name)))
        .map(|e| e.name.clone())
        .collect();
    images.sort();
    images.dedup();
    // A catalog goes only when every directory of its name is idle.
    let mut newest: HashMap<&str, SystemTime> = HashMap::new();
    for e in &inventory.catalogs {
        let t = newest.entry(&e.name).or_insert(e.modified);
        *t = (*t).max(e.modified);
    }
    let mut catalogs: Vec<String> = newest
        .into_iter()
        .filter(|(name, _)| !references.catalogs.contains(*name))
        .filter(|(name, modified)| {
            idle(
                &Entry {
                    name: name.to_string(),
                    modified: *modified,
                },
                &catalog_key(name),
            )
        })
        .map(|(name, _)| name.to_string())
        .collect();
    catalogs.sort();
    Plan { images, catalogs }
}

#[derive(Debug, Default)]
struct Lease {
    holders: usize,
    released: Option<SystemTime>,
}

/// In-use marks on cache entries (see the module documentation). Cheap to share.
#[derive(Debug, Default)]
pub struct CacheLeases {
    table: Mutex<HashMap<String, Lease>>,
}

/// Holds a lease until dropped. Clones share it.
#[derive(Clone, Debug, Default)]
pub struct CacheLease(Option<Arc<Held>>);

#[derive(Debug)]
pub struct Held {
    key: String,
    leases: Arc<CacheLeases>,
}

/// Leases carry no content: every lease equals every other (a [`super::PulledImage`]
/// compares by what was pulled).
impl PartialEq for CacheLease {
    fn eq(&self, _: &Self) -> bool {
        true
    }
}
impl Eq for CacheLease {}

impl CacheLease {
    /// The key held, if any.
    pub fn key(&self) -> Option<&str> {
        self.0.as_ref().map(|h| h.key.as_str())
    }
}

impl Drop for Held {
    fn drop(&mut self) {
        let mut table = self.leases.lock();
        if let Some(l) = table.get_mut(&self.key) {
            l.holders = l.holders.saturating_sub(1);
            l.released = Some(SystemTime::now());
        }
    }
}

impl CacheLeases {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Lease>> {
        self.table.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Marks `key` in use until the returned lease (and its clones) are dropped.
    pub fn acquire(self: &Arc<Self>, key: String) -> CacheLease {
        self.lock().entry(key.clone()).or_default().holders += 1;
        CacheLease(Some(Arc::new(Held {
            key,
            leases: self.clone(),
        })))
    }

    /// Whether `key` is leased now.
    pub fn is_held(&self, key: &str) -> bool {
        self.lock().get(key).is_some_and(|l| l.holders > 0)
    }

    /// Decides with [`plan`] and moves each doomed entry out of the way with
    /// `remove` — all while no lease can start — then forgets leases released before
    /// `since`. Returns the plan that was carried out (entries `remove` failed on
    /// are left out and logged).
    pub fn sweep(
        &self,
        inventory: &Inventory,
        references: &References,
        since: SystemTime,
        mut remove: impl FnMut(Doomed<'_>) -> std::io::Result<()>,
    ) -> Plan {
        let mut table = self.lock();
        let recently_used = |key: &str| {
            table
                .get(key)
                .is_some_and(|l| l.holders > 0 || l.released.is_some_and(|r| r >= since))
        };
        let planned = plan(inventory, references, since, recently_used);
        let mut done = Plan::default();
        for name in planned.images {
            match remove(Doomed::Image(&name)) {
                Ok(()) => done.images.push(name),
                Err(e) => tracing::warn!(entry = %name, error = %e, "cache GC: removing an image"),
            }
        }
        for name in planned.catalogs {
            match remove(Doomed::Catalog(&name)) {
                Ok(()) => done.catalogs.push(name),
                Err(e) => {
                    tracing::warn!(catalog = %name, error = %e, "cache GC: removing a catalog")
                }
            }
        }
        table.retain(|_, l| l.holders > 0 || l.released.is_some_and(|r| r >= since));
        done
    }
}

/// An entry [`CacheLeases::sweep`] removes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Doomed<'a> {
    Image(&'a str),
    Catalog(&'a str),
}

/// Lists `images_dir` (missing: empty) and the entries of `catalogs`.
pub fn inventory(images_dir: &Path, catalogs: &dyn CatalogStore) -> std::io::Result<Inventory> {
    let mut images = Vec::new();
    let entries = match std::fs::read_dir(images_dir) {
        Ok(e) => Some(e),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
        Err(e) => return Err(e),
    };
    for entry in entries.into_iter().flatten() {
        let entry = entry?;
        let Some(name) = entry.file_name().to_str().map(str::to_string) else {
            continue;
        };
        images.push(Entry {
            name,
            modified: modified(&entry.path()),
        });
    }
    Ok(Inventory {
        images,
        catalogs: catalogs.entries()?,
    })
}

/// When `path` (not followed if a link) last changed; now when that cannot be read.
pub fn modified(path: &Path) -> SystemTime {
    std::fs::symlink_metadata(path)
        .and_then(|m| m.modified())
        .unwrap_or_else(|_| SystemTime::now())
}

/// Removes an `images/` entry: renamed into `trash_dir` first (atomic; a later pull
/// finds nothing and pulls again), then deleted.
pub fn remove_image(images_dir: &Path, trash_dir: &Path, name: &str) -> std::io::Result<()> {
    std::fs::create_dir_all(trash_dir)?;
    let trash: PathBuf = trash_dir.join(format!("gc-{name}-{}", std::process::id()));
    std::fs::rename(images_dir.join(name), &trash)?;
    std::fs::remove_dir_all(&trash)
}

/// The grace period of an interval: entries used within it are kept this time.
pub fn grace(interval: Duration) -> Duration {
    interval.min(Duration::from_secs(600))
}

#[cfg(test)]
mod tests {
    use super::*;

    const A: &str = "sha256-aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa";
    const B: &str = "sha256-bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb";
    const C: &str = "sha256-cccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccc";

    fn at(secs: u64) -> SystemTime {
        SystemTime::UNIX_EPOCH + Duration::from_secs(secs)
    }
    fn entry(name: &str, secs: u64) -> Entry {
        Entry {
            name: name.into(),
            modified: at(secs),
        }
    }

    #[test]
    fn unreferenced_idle_entries_go_the_rest_stays() {
        let inv = Inventory {
            images: vec![
                entry(A, 10),
                entry(B, 10),
                entry(C, 10),
                entry("not-a-digest", 10),
            ],
            catalogs: vec![
                entry("kept", 10),
                entry("kept", 11),
                entry("gone", 10),
                entry("gone", 12),
            ],
        };
        let mut refs = References::default();
        refs.add_image(&format!("reg/x@{}", A.replacen('-', ":", 1)));
        refs.add_image("reg/y:latest");
        refs.catalogs.insert("kept".into());
        let p = plan(&inv, &refs, at(100), |_| false);
        assert_eq!(p.images, [B, C]);
        assert_eq!(p.catalogs, ["gone"]);
        assert_eq!(p.len(), 3);
    }

    #[test]
    fn leased_recently_used_and_recent_entries_stay() {
        let inv = Inventory {
            images: vec![entry(A, 10), entry(B, 200), entry(C, 10)],
            catalogs: vec![entry("old", 10), entry("fresh", 10), entry("fresh", 150)],
        };
        let refs = References::default();
        let leased = [image_key(A)];
        let p = plan(&inv, &refs, at(100), |k| leased.contains(&k.to_string()));
        assert_eq!(p.images, [C], "A leased, B modified after `since`");
        assert_eq!(p.catalogs, ["old"], "one directory of `fresh` is recent");
        assert!(plan(&inv, &refs, at(5), |_| false).is_empty());
    }

    #[test]
    fn sweep_respects_live_and_recent_leases_and_forgets_old_ones() {
        let leases = Arc::new(CacheLeases::default());
        let inv = Inventory {
            images: vec![entry(A, 10), entry(B, 10), entry(C, 10)],
            catalogs: vec![entry("cat", 10)],
        };
        let held = leases.acquire(image_key(A));
        let clone = held.clone();
        drop(held);
        assert!(leases.is_held(&image_key(A)), "a clone keeps the lease");
        let released = leases.acquire(catalog_key("cat"));
        drop(released); // released now: after `since` below
        let since = SystemTime::now() - Duration::from_secs(1);
        let mut removed = Vec::new();
        let done = leases.sweep(&inv, &References::default(), since, |d| {
            removed.push(format!("{d:?}"));
            if d == Doomed::Image(C) {
                Err(std::io::Error::other("busy"))
            } else {
                Ok(())
            }
        });
        assert_eq!(done.images, [B], "A leased; C failed to go");
        assert!(done.catalogs.is_empty(), "released after `since`");
        assert_eq!(removed.len(), 2);
        drop(clone);
        assert!(!leases.is_held(&image_key(A)));
        // Later, with `since` after both releases: both go; the table forgets them.
        let since = SystemTime::now() + Duration::from_secs(1);
        let done = leases.sweep(&inv, &References::default(), since, |_| Ok(()));
        assert_eq!(done.images, [A, B, C]);
        assert_eq!(done.catalogs, ["cat"]);
        assert!(leases.lock().is_empty());
    }

    #[test]
    fn inventory_and_removal_on_disk() {
        let root = tempfile::tempdir().unwrap();
        let (images, catalogs) = (root.path().join("images"), root.path().join("catalogs"));
        std::fs::create_dir_all(images.join(A).join("whole/content")).unwrap();
        std::fs::create_dir_all(catalogs.join(".cat_123")).unwrap();
        std::os::unix::fs::symlink(".cat_123", catalogs.join("cat")).unwrap();
        // Not names the catalog store writes: not listed, so never removed.
        std::fs::create_dir_all(catalogs.join("Not_A_Name")).unwrap();
        std::fs::create_dir_all(catalogs.join(".Not_A_Name_1")).unwrap();
        std::fs::create_dir_all(catalogs.join(".noversion")).unwrap();
        let store = crate::fbc::store::CatalogsDir(&catalogs);
        let inv = inventory(&images, &store).unwrap();
        assert_eq!(inv.images.len(), 1);
        let mut names: Vec<_> = inv.catalogs.iter().map(|e| e.name.as_str()).collect();
        names.sort();
        assert_eq!(names, ["cat", "cat"]);
        remove_image(&images, &root.path().join("tmp"), A).unwrap();
        assert!(!images.join(A).exists());
        assert_eq!(
            std::fs::read_dir(root.path().join("tmp")).unwrap().count(),
            0
        );
        assert_eq!(
            inventory(&root.path().join("none"), &store).unwrap().images,
            []
        );
    }

    #[test]
    fn grace_is_the_interval_up_to_ten_minutes() {
        assert_eq!(grace(Duration::from_secs(2)), Duration::from_secs(2));
        assert_eq!(grace(Duration::from_secs(43200)), Duration::from_secs(600));
    }
}
