//! The open log files of a log dir's segments, bounded: a segment that takes
//! appends, or holds data not yet fsynced, keeps its `.log` open (it is
//! *pinned*); every other segment's file is opened on demand and kept in a
//! least-recently-used cache of at most `capacity` files, so that a partition
//! with thousands of segments holds as many descriptors as one with one.
//!
//! An evicted file is only closed by the cache: a reader that took the
//! `Arc<File>` before keeps reading it until it drops it, so the descriptors
//! in use are the cache's, the pinned ones, and those of reads in flight.
//!
//! A pinned file stays open until its data is fsynced, because a write error
//! of an unsynced page is reported to the descriptors open when it happened
//! (and may be forgotten with the inode once none is): an fsync through a
//! reopened file could miss it.
//!
//! Invariant: a `SegmentFile` is in the cache's map only while it is not
//! pinned and its file is open; the map and its recency order hold the same
//! entries; the map never holds more than `capacity` after an insertion.

use std::collections::{BTreeMap, HashMap};
use std::fs::{File, OpenOptions};
use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

/// The cache of one log dir's idle segment files.
pub struct OpenFiles {
    capacity: usize,
    next_id: AtomicU64,
    state: Mutex<CacheState>,
}

#[derive(Default)]
struct CacheState {
    /// Bumped on every use: the recency of an entry.
    tick: u64,
    /// By segment file id: the entry's last use and its open file.
    entries: HashMap<u64, (u64, Arc<File>)>,
    /// Last use to segment file id, oldest first.
    by_use: BTreeMap<u64, u64>,
    /// Files opened on demand and files closed by eviction, since the start.
    opened: u64,
    evicted: u64,
}

/// What the cache holds and has done, for logs and tests.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct OpenFilesStats {
    pub cached: usize,
    pub opened: u64,
    pub evicted: u64,
}

impl std::fmt::Debug for OpenFiles {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OpenFiles")
            .field("capacity", &self.capacity)
            .field("stats", &self.stats())
            .finish()
    }
}

impl OpenFiles {
    /// A cache keeping at most `capacity` idle files open (at least one).
    pub fn new(capacity: usize) -> Arc<OpenFiles> {
        Arc::new(OpenFiles {
            capacity: capacity.max(1),
            next_id: AtomicU64::new(1),
            state: Mutex::new(CacheState::default()),
        })
    }

    pub fn capacity(&self) -> usize {
        self.capacity
    }

    pub fn stats(&self) -> OpenFilesStats {
        let state = self.lock();
        OpenFilesStats {
            cached: state.entries.len(),
            opened: state.opened,
            evicted: state.evicted,
        }
    }

    fn lock(&self) -> MutexGuard<'_, CacheState> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Puts `file` in the cache as `id`'s (keeping one already there) and
    /// returns the file cached, with the files evicted to make room, which
    /// the caller drops (closes) once the lock is released.
    fn insert(&self, id: u64, file: Arc<File>, opened: bool) -> (Arc<File>, Vec<Arc<File>>) {
        let mut state = self.lock();
        state.opened += u64::from(opened);
        if let Some(cached) = state.touch(id) {
            return (cached, vec![file]);
        }
        state.tick += 1;
        let tick = state.tick;
        state.entries.insert(id, (tick, Arc::clone(&file)));
        state.by_use.insert(tick, id);
        let mut evicted = Vec::new();
        while state.entries.len() > self.capacity {
            let (_, oldest) = state.by_use.pop_first().expect("entries and order agree");
            let (_, closed) = state
                .entries
                .remove(&oldest)
                .expect("entries and order agree");
            state.evicted += 1;
            evicted.push(closed);
        }
        debug_assert_eq!(state.entries.len(), state.by_use.len());
        (file, evicted)
    }

    /// Takes `id`'s file out of the cache, if it is there.
    fn remove(&self, id: u64) -> Option<Arc<File>> {
        let mut state = self.lock();
        let (tick, file) = state.entries.remove(&id)?;
        state.by_use.remove(&tick);
        Some(file)
    }
}

impl CacheState {
    /// `id`'s file, marked as just used, if it is cached.
    fn touch(&mut self, id: u64) -> Option<Arc<File>> {
        self.tick += 1;
        let tick = self.tick;
        let (used, file) = self.entries.get_mut(&id)?;
        let previous = std::mem::replace(used, tick);
        let file = Arc::clone(file);
        self.by_use.remove(&previous);
        self.by_use.insert(tick, id);
        Some(file)
    }
}

/// One segment's log file: open while pinned, otherwise through the cache.
/// Its id tells one incarnation of a segment from another (a segment
/// recreated at the same base offset is another file).
pub struct SegmentFile {
    id: u64,
    path: PathBuf,
    cache: Arc<OpenFiles>,
    pinned: Option<Arc<File>>,
}

impl SegmentFile {
    /// The segment file at `path`, already open as `file`, pinned.
    pub fn new(cache: &Arc<OpenFiles>, path: PathBuf, file: File) -> SegmentFile {
        SegmentFile {
            id: cache.next_id.fetch_add(1, Ordering::Relaxed),
            path,
            cache: Arc::clone(cache),
            pinned: Some(Arc::new(file)),
        }
    }

    pub fn id(&self) -> u64 {
        self.id
    }

    pub fn is_pinned(&self) -> bool {
        self.pinned.is_some()
    }

    /// The open file: the pinned one, the cached one, or opened again now
    /// (and cached, evicting the least recently used beyond the capacity).
    pub fn file(&self) -> io::Result<Arc<File>> {
        if let Some(file) = &self.pinned {
            return Ok(Arc::clone(file));
        }
        if let Some(file) = self.cache.lock().touch(self.id) {
            return Ok(file);
        }
        let file = Arc::new(open_read_write(&self.path)?);
        let (file, evicted) = self.cache.insert(self.id, file, true);
        drop(evicted);
        Ok(file)
    }

    /// Keeps the file open until `unpin`, out of the cache.
    pub fn pin(&mut self) -> io::Result<()> {
        if self.pinned.is_none() {
            let file = match self.cache.remove(self.id) {
                Some(file) => file,
                None => Arc::new(open_read_write(&self.path)?),
            };
            self.pinned = Some(file);
        }
        Ok(())
    }

    /// Hands the file to the cache, which may close it from now on.
    pub fn unpin(&mut self) {
        if let Some(file) = self.pinned.take() {
            let (_, evicted) = self.cache.insert(self.id, file, false);
            drop(evicted);
        }
    }
}

impl Drop for SegmentFile {
    fn drop(&mut self) {
        drop(self.cache.remove(self.id));
    }
}

fn open_read_write(path: &Path) -> io::Result<File> {
    OpenOptions::new().read(true).write(true).open(path)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;
    use std::io::Write;

    fn files(dir: &Path, cache: &Arc<OpenFiles>, count: usize) -> Vec<SegmentFile> {
        (0..count)
            .map(|i| {
                let path = dir.join(format!("{i}.log"));
                let mut file = File::create(&path).unwrap();
                file.write_all(&[i as u8]).unwrap();
                SegmentFile::new(cache, path.clone(), open_read_write(&path).unwrap())
            })
            .collect()
    }

    fn byte_of(file: &SegmentFile) -> u8 {
        let mut byte = [0u8];
        std::os::unix::fs::FileExt::read_exact_at(&*file.file().unwrap(), &mut byte, 0).unwrap();
        byte[0]
    }

    #[test]
    fn idle_files_beyond_the_capacity_are_closed_least_recently_used_first() {
        let temp = tempfile::tempdir().unwrap();
        let cache = OpenFiles::new(2);
        let mut segments = files(temp.path(), &cache, 4);
        for segment in &mut segments {
            segment.unpin();
        }
        // Unpinning the third and fourth evicted the first two.
        assert_eq!(cache.stats().cached, 2);
        assert_eq!(cache.stats().evicted, 2);
        // A read of an evicted one opens it again and evicts the oldest (2).
        assert_eq!(byte_of(&segments[0]), 0);
        assert_eq!(cache.stats().opened, 1);
        // 3 is used, then 0 again: 3 is now the least recently used, and
        // opening 1 evicts it rather than 0.
        assert_eq!(byte_of(&segments[3]), 3);
        assert_eq!(byte_of(&segments[0]), 0);
        assert_eq!(byte_of(&segments[1]), 1);
        assert_eq!(cache.stats().opened, 2);
        assert_eq!(byte_of(&segments[0]), 0);
        assert_eq!(cache.stats().opened, 2, "0 stayed cached");
        assert_eq!(byte_of(&segments[3]), 3);
        assert_eq!(cache.stats().opened, 3, "3 was evicted");
        assert_eq!(cache.stats().cached, 2);
    }

    #[test]
    fn a_pinned_file_is_out_of_the_cache_and_a_dropped_one_leaves_it() {
        let temp = tempfile::tempdir().unwrap();
        let cache = OpenFiles::new(1);
        let mut segments = files(temp.path(), &cache, 3);
        assert_eq!(cache.stats().cached, 0, "new files are pinned");
        segments[0].unpin();
        segments[1].unpin();
        assert_eq!(cache.stats().cached, 1);
        segments[1].pin().unwrap();
        assert_eq!(cache.stats().cached, 0);
        assert!(segments[1].is_pinned());
        assert_eq!(byte_of(&segments[1]), 1);
        segments[0].file().unwrap();
        assert_eq!(cache.stats().cached, 1);
        drop(segments.remove(0));
        assert_eq!(cache.stats().cached, 0);
        assert_ne!(segments[0].id(), segments[1].id());
    }

    #[test]
    fn a_reader_keeps_reading_a_file_the_cache_closed() {
        let temp = tempfile::tempdir().unwrap();
        let cache = OpenFiles::new(1);
        let mut segments = files(temp.path(), &cache, 2);
        segments[0].unpin();
        let held = segments[0].file().unwrap();
        segments[1].unpin();
        assert_eq!(cache.stats().evicted, 1);
        let mut byte = [9u8];
        std::os::unix::fs::FileExt::read_exact_at(&*held, &mut byte, 0).unwrap();
        assert_eq!(byte[0], 0);
    }
}
