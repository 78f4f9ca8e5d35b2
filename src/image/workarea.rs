//! The puller's work area under `<cache>/tmp`. Each [`super::ImagePuller`] works in a
//! directory of its own, `tmp/proc-XXXXXX/` (downloaded blobs, the unpack in
//! progress, cache entries on their way out), marked live by an exclusive lock on its
//! `.owner` file held for the puller's whole life. Several processes may share one
//! cache (two `olmv1` CLI runs, a CLI run beside a controller on the same disk): a
//! new puller removes only the directories of processes that are gone — their lock is
//! free — and never the work of a running one.

use std::fs::File;
use std::io;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

/// The lock file inside a process's directory.
const OWNER: &str = ".owner";

/// A directory without an owner file (left by a process that died while creating it,
/// or by a version that wrote its work directories straight into `tmp/`) is removed
/// once it is older than this.
pub const UNOWNED_GRACE: Duration = Duration::from_secs(3600);

/// This process's directory under `tmp/`; removed when dropped.
#[derive(Debug)]
pub struct WorkArea {
    dir: tempfile::TempDir,
    /// Holds the exclusive lock that marks `dir` live (released on drop or exit).
    _owner: File,
}

impl WorkArea {
    /// Clears what dead processes left in `tmp` and makes this process's directory.
    pub fn open(tmp: &Path) -> io::Result<Self> {
        std::fs::create_dir_all(tmp)?;
        remove_stale(tmp, SystemTime::now())?;
        let dir = tempfile::Builder::new().prefix("proc-").tempdir_in(tmp)?;
        // Locked before it takes its name: an `.owner` another process can see is
        // always locked while this one lives.
        let pending = dir.path().join(".owner-new");
        let owner = File::create(&pending)?;
        owner.lock()?;
        std::fs::rename(&pending, dir.path().join(OWNER))?;
        Ok(WorkArea { dir, _owner: owner })
    }

    /// Where this process's work directories go.
    pub fn path(&self) -> &Path {
        self.dir.path()
    }
}

/// Removes the entries of `tmp` no live process owns: directories whose `.owner` lock
/// is free, and anything else without an owner older than [`UNOWNED_GRACE`]. Entries
/// that vanish meanwhile (another process clearing them too) are not errors.
pub fn remove_stale(tmp: &Path, now: SystemTime) -> io::Result<Vec<PathBuf>> {
    let mut removed = Vec::new();
    for entry in std::fs::read_dir(tmp)? {
        let path = entry?.path();
        if is_stale(&path, now) && remove(&path).is_ok() {
            removed.push(path);
        }
    }
    Ok(removed)
}

fn is_stale(path: &Path, now: SystemTime) -> bool {
    match File::open(path.join(OWNER)) {
        // Free: its process is gone. Held: running (or being cleared by another).
        Ok(owner) => owner.try_lock().is_ok(),
        Err(e)
            if e.kind() == io::ErrorKind::NotFound || e.kind() == io::ErrorKind::NotADirectory =>
        {
            let changed = super::gc::modified(path);
            now.duration_since(changed).unwrap_or_default() > UNOWNED_GRACE
        }
        Err(_) => false,
    }
}

fn remove(path: &Path) -> io::Result<()> {
    let result = match std::fs::symlink_metadata(path) {
        Ok(m) if m.is_dir() => std::fs::remove_dir_all(path),
        Ok(_) => std::fs::remove_file(path),
        Err(e) => Err(e),
    };
    match result {
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
        other => other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn age(path: &Path, by: Duration) {
        let f = File::open(path).unwrap();
        f.set_modified(SystemTime::now() - by).unwrap();
    }

    #[test]
    fn a_second_puller_leaves_the_first_ones_work_alone() {
        let root = tempfile::tempdir().unwrap();
        let tmp = root.path().join("tmp");
        let first = WorkArea::open(&tmp).unwrap();
        let blob = first.path().join("pull-1/blobs/sha256-a");
        std::fs::create_dir_all(blob.parent().unwrap()).unwrap();
        std::fs::write(&blob, b"layer").unwrap();
        age(first.path(), UNOWNED_GRACE * 2);

        let second = WorkArea::open(&tmp).unwrap();
        assert_eq!(std::fs::read(&blob).unwrap(), b"layer");
        assert_ne!(first.path(), second.path());

        let first_dir = first.path().to_path_buf();
        drop(first);
        assert!(!first_dir.exists(), "a puller's directory goes with it");
        assert!(second.path().join(OWNER).exists());
    }

    #[test]
    fn what_dead_processes_left_is_removed() {
        let root = tempfile::tempdir().unwrap();
        let tmp = root.path().join("tmp");
        // A process that died: its owner file is there, unlocked.
        let dead = tmp.join("proc-dead");
        std::fs::create_dir_all(dead.join("pull-x/blobs")).unwrap();
        std::fs::write(dead.join(OWNER), b"").unwrap();
        // An old layout work directory, fresh and old; a stray file, old.
        let fresh = tmp.join("pull-fresh");
        let old = tmp.join("pull-old");
        let stray = tmp.join("stray");
        std::fs::create_dir_all(&fresh).unwrap();
        std::fs::create_dir_all(&old).unwrap();
        std::fs::write(&stray, b"").unwrap();
        age(&old, UNOWNED_GRACE * 2);
        age(&stray, UNOWNED_GRACE * 2);

        let live = WorkArea::open(&tmp).unwrap();
        assert!(!dead.exists());
        assert!(!old.exists());
        assert!(!stray.exists());
        assert!(
            fresh.exists(),
            "may be a process still creating its directory"
        );
        // The live one is held: a sweep now leaves it.
        let removed = remove_stale(&tmp, SystemTime::now()).unwrap();
        assert_eq!(removed, Vec::<PathBuf>::new());
        assert!(live.path().exists());
        // Later, the fresh unowned one ages out; the live one still stays.
        let later = SystemTime::now() + UNOWNED_GRACE * 2;
        assert_eq!(remove_stale(&tmp, later).unwrap(), vec![fresh]);
        assert!(live.path().join(OWNER).exists());
    }
}
