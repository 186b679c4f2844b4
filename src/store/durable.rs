//! A sled database whose `fsync` is a real fsync.
//!
//! sled's own `flush()` is not enough for a durability promise on Linux: it writes its log
//! with `sync_file_range`, which persists neither the inode (a file that grew can come back
//! short after power loss) nor the drive's volatile cache, and it writes large values to
//! files under `blobs/` that it never syncs at all. [`DurableDb::fsync`] follows sled's flush
//! with `sync_all` on every file sled writes and on its directories.
//!
//! Invariant: when `fsync` returns `Ok`, every write to the database that had completed when
//! `fsync` was called survives a crash or power loss. A `DurableDb` is shared across tasks
//! and threads through `Arc`; `fsync` may be called concurrently from several of them.
//!
//! Invariant: dropping a `DurableDb` never panics. sled's last handle flushes and then
//! `sync_all().unwrap()`s its data file when dropped, which aborts the process on a failing
//! disk; a database whose fsync failed, or whose final one fails, is abandoned instead
//! (see `Drop`): sled never closes it, it stays locked until the process exits, and
//! [`wait_until_released`] reports that rather than waiting for it.

use std::collections::HashSet;
use std::ffi::OsString;
use std::fs::File;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;

use crate::durability::{Durable, GroupCommit};

/// The file in which sled keeps its log and pages.
const SLED_DATA_FILE_NAME: &str = "db";
/// The file in which sled keeps its storage parameters, written once at creation.
const SLED_CONF_FILE_NAME: &str = "conf";
/// The directory in which sled writes values too large for a log segment, one file each.
const SLED_BLOBS_DIR_NAME: &str = "blobs";

/// An open sled database plus the file handles needed to fsync it. Owned by one store and
/// shared through `Arc`; nothing outside `store` sees the sled types inside.
pub struct DurableDb {
    db: sled::Db,
    /// sled's data file, opened once at open time so that `fsync` pays for no `open`.
    /// On Linux an fsync on any descriptor of a file flushes the whole inode.
    data_file: File,
    /// Files synced by the first `fsync` only: `conf`, which sled writes once at
    /// creation. Each later durability point then costs one fsync of the data file
    /// instead of three, which is most of an empty start's time.
    unsynced_once: Mutex<Vec<File>>,
    /// The database directory: its entries (`db`, `conf`, `blobs`, sled's snapshot
    /// files) must be durable too. Synced when the set of entries changed.
    dir: File,
    dir_path: PathBuf,
    synced_dir_entries: Mutex<HashSet<OsString>>,
    blobs_dir: File,
    blobs_dir_path: PathBuf,
    /// Names of blob files already synced. Blob files are immutable once sled has written
    /// them, so each needs one fsync; the set is pruned as sled removes blobs.
    synced_blobs: Mutex<HashSet<OsString>>,
    /// The parent of a database directory created by `open`, synced by the first `fsync`
    /// so that the directory itself cannot vanish after power loss. Deferred rather than
    /// synced at open so an empty start pays for no fsync it does not need yet.
    unsynced_parent: Mutex<Option<File>>,
    /// Set once an `fsync` failed: the disk cannot be trusted to take sled's last flush.
    failed: AtomicBool,
}

/// Directories of databases abandoned by `Drop` after a failed fsync: sled still holds
/// them open and locked, and will until the process exits.
static ABANDONED: Mutex<Vec<PathBuf>> = Mutex::new(Vec::new());

impl DurableDb {
    /// Open (creating if needed) the sled database in `dir`. `cache_capacity_bytes` bounds
    /// sled's page cache.
    pub fn open(dir: &Path, cache_capacity_bytes: u64) -> io::Result<DurableDb> {
        let created = !dir.exists();
        std::fs::create_dir_all(dir)?;
        let db = sled::Config::new()
            .path(dir)
            .cache_capacity(cache_capacity_bytes)
            .open()
            .map_err(sled_to_io)?;
        let data_file = File::open(dir.join(SLED_DATA_FILE_NAME))?;
        let conf_file = File::open(dir.join(SLED_CONF_FILE_NAME))?;
        let blobs_dir_path = dir.join(SLED_BLOBS_DIR_NAME);
        // sled creates `blobs/` at open; create it anyway so that a layout change in sled
        // surfaces as an extra directory rather than a failed open.
        std::fs::create_dir_all(&blobs_dir_path)?;
        let unsynced_parent = match dir.parent() {
            Some(parent) if created && !parent.as_os_str().is_empty() => Some(File::open(parent)?),
            _ => None,
        };
        Ok(DurableDb {
            db,
            data_file,
            unsynced_once: Mutex::new(vec![conf_file]),
            dir: File::open(dir)?,
            dir_path: dir.to_path_buf(),
            // Empty: the first fsync syncs the directory whatever it holds.
            synced_dir_entries: Mutex::new(HashSet::new()),
            blobs_dir: File::open(&blobs_dir_path)?,
            blobs_dir_path,
            synced_blobs: Mutex::new(HashSet::new()),
            unsynced_parent: Mutex::new(unsynced_parent),
            failed: AtomicBool::new(false),
        })
    }

    /// Open a named tree (key space) of this database. Trees are how several stores share
    /// one database and one fsync.
    pub(in crate::store) fn open_tree(&self, name: &str) -> io::Result<sled::Tree> {
        self.db.open_tree(name).map_err(sled_to_io)
    }

    /// Make every write completed before this call durable. Blocks for the duration of
    /// several fsyncs: call it from a blocking thread, not from an async task.
    pub fn fsync(&self) -> io::Result<()> {
        let synced = self.sync_everything();
        if synced.is_err() {
            self.failed.store(true, Ordering::Release);
        }
        synced
    }

    fn sync_everything(&self) -> io::Result<()> {
        // Blob files first: sled's log points at them, so they must be durable no later than
        // the log that references them.
        self.sync_new_blobs()?;
        self.db.flush().map_err(sled_to_io)?;
        self.data_file.sync_all()?;
        {
            let mut once = self
                .unsynced_once
                .lock()
                .map_err(|_| io::Error::other("durable db file lock poisoned"))?;
            for file in once.iter() {
                file.sync_all()?;
            }
            once.clear();
        }
        self.sync_dir_if_changed()?;
        let mut parent = self
            .unsynced_parent
            .lock()
            .map_err(|_| io::Error::other("durable db parent lock poisoned"))?;
        if let Some(parent_dir) = parent.as_ref() {
            parent_dir.sync_all()?;
            *parent = None;
        }
        Ok(())
    }

    /// fsync of the directory, only when its entries differ from those last synced.
    fn sync_dir_if_changed(&self) -> io::Result<()> {
        let mut synced = self
            .synced_dir_entries
            .lock()
            .map_err(|_| io::Error::other("durable db dir set lock poisoned"))?;
        let mut present = HashSet::with_capacity(synced.len().max(4));
        for entry in std::fs::read_dir(&self.dir_path)? {
            present.insert(entry?.file_name());
        }
        if present.is_empty() || *synced != present {
            self.dir.sync_all()?;
            *synced = present;
        }
        Ok(())
    }

    fn sync_new_blobs(&self) -> io::Result<()> {
        let mut synced = self
            .synced_blobs
            .lock()
            .map_err(|_| io::Error::other("durable db blob set lock poisoned"))?;
        let mut present = HashSet::with_capacity(synced.len());
        let mut synced_any = false;
        for entry in std::fs::read_dir(&self.blobs_dir_path)? {
            let name = entry?.file_name();
            if !synced.contains(&name) {
                match File::open(self.blobs_dir_path.join(&name)) {
                    Ok(blob) => blob.sync_all()?,
                    // sled removed it between the listing and the open: nothing to make durable.
                    Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
                    Err(e) => return Err(e),
                }
                synced_any = true;
            }
            present.insert(name);
        }
        *synced = present;
        if synced_any {
            self.blobs_dir.sync_all()?;
        }
        Ok(())
    }
}

impl Drop for DurableDb {
    /// Runs sled's last flush and sync itself, where a failure can be survived: if it
    /// fails, or an fsync failed before, one sled handle is leaked so that sled's own drop,
    /// which would repeat them and panic on the error, never runs. Blocks for a flush and an
    /// fsync, as sled's drop would.
    fn drop(&mut self) {
        let healthy = !self.failed.load(Ordering::Acquire)
            && self.db.flush().is_ok()
            && self.data_file.sync_all().is_ok();
        if healthy {
            return;
        }
        std::mem::forget(self.db.clone());
        if let Ok(mut abandoned) = ABANDONED.lock() {
            abandoned.push(self.dir_path.clone());
        }
        tracing::error!(
            dir = %self.dir_path.display(),
            "a database whose fsync failed was left open until exit instead of closed"
        );
    }
}

/// Whether `dir` holds a database abandoned after a failed fsync.
fn abandoned(dir: &Path) -> bool {
    ABANDONED
        .lock()
        .map(|abandoned| abandoned.iter().any(|path| path == dir))
        .unwrap_or(false)
}

/// Block until no handle in this process (or any other) holds the database in `dir` open.
///
/// Dropping the last `DurableDb` does not close sled at once: sled's I/O pool threads
/// hold the locked data file until their last write task returns, a moment later. A caller
/// about to reopen the same directory (a restart within one process) waits here instead of
/// failing on sled's lock. Waiting takes the same lock sled takes, blocking, then releases it.
///
/// A database abandoned after a failed fsync is never released: that is an error, at once.
pub fn wait_until_released(dir: &Path) -> io::Result<()> {
    if abandoned(dir) {
        return Err(io::Error::other(format!(
            "{} stays open until exit: its fsync failed",
            dir.display()
        )));
    }
    let data_file = match File::open(dir.join(SLED_DATA_FILE_NAME)) {
        Ok(file) => file,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(e),
    };
    // sled holds an flock(2) on its data file while open; std's `lock` is the same
    // call, so it returns once sled's background threads have let go.
    data_file.lock()
    // Closing the file releases the lock.
}

/// The close of a store on sled: its group commit answers what is queued and
/// ends once its last handle is gone, then the store's `shared` handle is
/// dropped and sled's release of `dir` awaited. `store` names it in errors.
pub(in crate::store) async fn close_store<T: Durable, S>(
    commits: GroupCommit<T>,
    flusher: tokio::task::JoinHandle<()>,
    shared: S,
    dir: PathBuf,
    store: &str,
) -> io::Result<()> {
    commits.close();
    drop(commits);
    flusher
        .await
        .map_err(|e| io::Error::other(format!("{store} group commit failed: {e}")))?;
    drop(shared);
    tokio::task::spawn_blocking(move || wait_until_released(&dir))
        .await
        .map_err(|e| io::Error::other(format!("{store} close task failed: {e}")))?
}

/// sled reports its own error type; the rest of the broker speaks `io::Error`.
pub(in crate::store) fn sled_to_io(e: sled::Error) -> io::Error {
    match e {
        sled::Error::Io(io) => io,
        other => io::Error::other(other.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const TEST_CACHE_BYTES: u64 = 1024 * 1024;

    #[test]
    fn data_survives_reopen() -> io::Result<()> {
        let tmp = tempfile::tempdir()?;
        let dir = tmp.path().join("db");
        {
            let db = DurableDb::open(&dir, TEST_CACHE_BYTES)?;
            let tree = db.open_tree("t")?;
            tree.insert(b"small", b"value".as_slice())
                .map_err(sled_to_io)?;
            // Large enough to go to a blob file, the part sled never syncs itself.
            let big = vec![7u8; 512 * 1024];
            tree.insert(b"big", big).map_err(sled_to_io)?;
            db.fsync()?;
            assert!(db
                .synced_blobs
                .lock()
                .map(|s| !s.is_empty())
                .unwrap_or(false));
        }
        wait_until_released(&dir)?;
        let db = DurableDb::open(&dir, TEST_CACHE_BYTES)?;
        let tree = db.open_tree("t")?;
        let small = tree.get(b"small").map_err(sled_to_io)?;
        assert_eq!(small.as_deref(), Some(b"value".as_slice()));
        let big = tree.get(b"big").map_err(sled_to_io)?;
        assert_eq!(big.map(|v| v.len()), Some(512 * 1024));
        Ok(())
    }

    #[test]
    fn a_database_whose_fsync_failed_is_abandoned_not_closed() -> io::Result<()> {
        let tmp = tempfile::tempdir()?;
        let dir = tmp.path().join("db");
        let db = DurableDb::open(&dir, TEST_CACHE_BYTES)?;
        let tree = db.open_tree("t")?;
        tree.insert(b"key", b"value".as_slice())
            .map_err(sled_to_io)?;
        // As `fsync` records an error from the disk.
        db.failed.store(true, Ordering::Release);
        drop(tree);
        drop(db);
        let waited = wait_until_released(&dir);
        assert!(waited.is_err(), "an abandoned database is never released");
        assert!(
            DurableDb::open(&dir, TEST_CACHE_BYTES).is_err(),
            "sled still holds the abandoned database"
        );
        Ok(())
    }
}
