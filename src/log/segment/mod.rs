//! One log segment: `{base_offset:020}.log` with its offset index, time index and
//! transaction index. Only the log (and a transaction index that has entries)
//! is held open, and only while the segment is pinned (active, or holding data
//! not yet fsynced); an idle segment's log is opened on demand through the log
//! dir's bounded cache (`OpenFiles`) and its transaction index is closed. The
//! offset and time indexes are written at flush time.
//!
//! A segment is owned by its `PartitionLog`; only the last (active) segment is
//! appended to. Invariants: `size_bytes` is the length of valid batches in the log
//! file, batches tile `[0, size_bytes)` with strictly increasing offsets, every offset
//! is in `[base_offset, base_offset + i32::MAX]`, and `next_offset` is one past the
//! last batch's last offset (`base_offset` while empty).

mod chunk_reader;
mod load;
mod read;

use std::fs::{self, File, OpenOptions};
use std::io;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::batch::{BatchHeader, NO_TIMESTAMP};
use super::files::{
    offset_file_name, INDEX_FILE_SUFFIX, LOG_FILE_SUFFIX, SEGMENT_FILE_SUFFIXES,
    TIME_INDEX_FILE_SUFFIX,
};
use super::index::OffsetIndex;
use super::index_file::IndexWrite;
use super::open_files::{OpenFiles, SegmentFile};
use super::time_index::{TimeIndex, TimestampOffset};
use super::txn_index::TxnIndex;
use super::AbortedTxn;

pub use load::LoadedSegment;

/// The largest distance from a segment's base offset that its indexes can store:
/// Kafka keeps relative offsets below `Int.MaxValue` and rolls before crossing it.
pub const RELATIVE_OFFSET_MAX: i64 = i32::MAX as i64;

pub struct Segment {
    dir: PathBuf,
    base_offset: i64,
    log: SegmentFile,
    size_bytes: u64,
    offset_index: OffsetIndex,
    time_index: TimeIndex,
    /// The aborted transactions whose markers are in this segment.
    txn_index: TxnIndex,
    /// Bytes appended since the last index entry; an entry is due when it passes
    /// `index_interval_bytes`.
    bytes_since_last_index_entry: u64,
    /// Kafka's `maxTimestampAndOffsetSoFar`: the largest batch maxTimestamp and the
    /// last offset of the first batch that carried it.
    max_timestamp: Option<TimestampOffset>,
    next_offset: i64,
    /// When this process created or opened the segment, from the injected clock.
    created_ms: i64,
    /// maxTimestamp of the first batch, which `segment.ms` measures age from (as
    /// Kafka's `rollingBasedTimestamp`), when the producer set one.
    first_batch_timestamp: Option<i64>,
}

impl Segment {
    /// Creates empty segment files at `base_offset`, replacing stale ones. Nothing is
    /// fsynced: the new directory entries become durable with the next flush.
    /// The new segment is pinned.
    pub fn create(
        dir: &Path,
        base_offset: i64,
        now_ms: i64,
        open_files: &Arc<OpenFiles>,
    ) -> io::Result<Segment> {
        let log = open_file(dir, base_offset, LOG_FILE_SUFFIX, true)?;
        log.set_len(0)?;
        let (offset_index, time_index) = empty_indexes(dir, base_offset)?;
        let txn_index = TxnIndex::empty(dir, base_offset)?;
        Ok(Segment::from_parts(
            dir,
            base_offset,
            SegmentFile::new(
                open_files,
                dir.join(offset_file_name(base_offset, LOG_FILE_SUFFIX)),
                log,
            ),
            (offset_index, time_index, txn_index),
            now_ms,
        ))
    }

    /// A segment of `log` with no batch seen yet, at `base_offset`.
    fn from_parts(
        dir: &Path,
        base_offset: i64,
        log: SegmentFile,
        (offset_index, time_index, txn_index): (OffsetIndex, TimeIndex, TxnIndex),
        now_ms: i64,
    ) -> Segment {
        Segment {
            dir: dir.to_path_buf(),
            base_offset,
            log,
            size_bytes: 0,
            offset_index,
            time_index,
            txn_index,
            bytes_since_last_index_entry: 0,
            max_timestamp: None,
            next_offset: base_offset,
            created_ms: now_ms,
            first_batch_timestamp: None,
        }
    }

    pub fn base_offset(&self) -> i64 {
        self.base_offset
    }

    pub fn next_offset(&self) -> i64 {
        self.next_offset
    }

    pub fn size_bytes(&self) -> u64 {
        self.size_bytes
    }

    pub fn is_empty(&self) -> bool {
        self.size_bytes == 0
    }

    pub fn created_ms(&self) -> i64 {
        self.created_ms
    }

    pub fn max_timestamp(&self) -> Option<TimestampOffset> {
        self.max_timestamp
    }

    /// The timestamp retention.ms compares against: the largest record timestamp, or
    /// when no batch carried one, the time this process opened the segment.
    pub fn largest_timestamp_ms(&self) -> i64 {
        self.max_timestamp.map_or(self.created_ms, |m| m.timestamp)
    }

    /// How long the segment has been open for `segment.ms`.
    pub fn rolling_age_ms(&self, now_ms: i64) -> i64 {
        now_ms.saturating_sub(self.first_batch_timestamp.unwrap_or(self.created_ms))
    }

    /// Whether `last_offset` can still be stored relative to this segment's base.
    pub fn can_hold_offset(&self, last_offset: i64) -> bool {
        (0..=RELATIVE_OFFSET_MAX).contains(&last_offset.saturating_sub(self.base_offset))
    }

    /// The open files an fsync must cover for this segment's data to be
    /// durable: its log, and its transaction index when it has one. Its offset
    /// and time indexes are not held open: see `index_writes`.
    /// Opens the log again if the cache closed it (a pinned segment's is open).
    pub fn files(&self) -> io::Result<Vec<Arc<File>>> {
        let mut files = vec![self.log.file()?];
        files.extend(self.txn_index.file().cloned());
        Ok(files)
    }

    /// The log file, opened again if the cache closed it.
    pub fn log_file(&self) -> io::Result<Arc<File>> {
        self.log.file()
    }

    /// Tells one incarnation of a segment from another (one recreated at the
    /// same base offset, or a cleaned one swapped in, has another id).
    pub fn file_id(&self) -> u64 {
        self.log.id()
    }

    pub fn is_pinned(&self) -> bool {
        self.log.is_pinned()
    }

    /// Keeps the log open (a segment that becomes active again).
    pub fn pin(&mut self) -> io::Result<()> {
        self.log.pin()
    }

    /// The segment is idle and its data is on disk: its log goes to the
    /// cache of open files and its transaction index is closed (it is
    /// opened again for a write).
    pub fn unpin(&mut self) {
        self.log.unpin();
        self.txn_index.close();
    }

    /// The writes (each then fsynced) that bring the offset and time index
    /// files up to the entries in memory.
    pub fn index_writes(&self) -> Vec<IndexWrite> {
        [
            self.offset_index.pending_write(),
            self.time_index.pending_write(),
        ]
        .into_iter()
        .flatten()
        .collect()
    }

    /// `writes`, from `index_writes` of this segment or another, are on disk.
    pub fn indexes_written(&mut self, writes: &[IndexWrite]) {
        for write in writes {
            self.offset_index.written(write);
            self.time_index.written(write);
        }
    }

    /// Writes the index files and fsyncs every file of the segment, now, on
    /// the caller's thread (a cleaned segment, a truncation).
    pub fn sync_now(&mut self) -> io::Result<()> {
        let writes = self.index_writes();
        for write in &writes {
            write.apply()?;
        }
        self.indexes_written(&writes);
        for file in self.files()? {
            file.sync_all()?;
        }
        Ok(())
    }

    /// The aborted transactions whose markers are in this segment, in marker order.
    pub fn aborted_txns(&self) -> &[AbortedTxn] {
        self.txn_index.entries()
    }

    /// Records an aborted transaction whose marker was just written to this segment.
    pub fn append_aborted_txn(&mut self, entry: AbortedTxn) -> io::Result<()> {
        assert!(
            entry.last_offset < self.next_offset,
            "an abort marker is indexed after it is written"
        );
        self.txn_index.append(entry)
    }

    /// Drops the transaction index entries of markers at or after `offset`, before
    /// they are rebuilt by a replay of the log.
    pub fn truncate_txn_index(&mut self, offset: i64) -> io::Result<()> {
        self.txn_index.truncate_to(offset)
    }

    /// Writes already validated and rewritten batches at the end of the log file and
    /// indexes them. `batches` holds each batch's position inside `records` and its
    /// header. On a failed write the file is cut back so a later append starts clean.
    pub fn append(
        &mut self,
        records: &[u8],
        batches: &[(usize, BatchHeader)],
        index_interval_bytes: u32,
    ) -> io::Result<()> {
        let start = self.size_bytes;
        assert!(
            start + records.len() as u64 <= u64::from(u32::MAX),
            "a segment must stay addressable by u32 positions"
        );
        let log = self.log.file()?;
        if let Err(error) = log.write_all_at(records, start) {
            if let Err(cut) = log.set_len(start) {
                tracing::warn!(%cut, "could not cut back a partial segment write");
            }
            return Err(error);
        }
        for (position, header) in batches {
            self.index_batch(start + *position as u64, header, index_interval_bytes);
        }
        assert_eq!(
            self.size_bytes,
            start + records.len() as u64,
            "indexed bytes must match written bytes"
        );
        Ok(())
    }

    /// Accounts for one batch at `position` (just appended or found by a scan), adding
    /// index entries at Kafka's cadence. Shared by append and recovery so a rebuilt
    /// index is the one the appends would have written.
    fn index_batch(&mut self, position: u64, header: &BatchHeader, index_interval_bytes: u32) {
        assert_eq!(
            position, self.size_bytes,
            "batches must be indexed in file order"
        );
        assert!(
            header.base_offset >= self.next_offset,
            "offsets must grow within a segment"
        );
        let last_offset = header.last_offset();
        assert!(
            self.can_hold_offset(last_offset),
            "offset beyond the segment's relative range"
        );
        if position == 0 && header.max_timestamp != NO_TIMESTAMP {
            self.first_batch_timestamp = Some(header.max_timestamp);
        }
        let max_so_far = self.max_timestamp.map_or(NO_TIMESTAMP, |m| m.timestamp);
        if header.max_timestamp > max_so_far {
            self.max_timestamp = Some(TimestampOffset {
                timestamp: header.max_timestamp,
                offset: last_offset,
            });
        }
        if self.bytes_since_last_index_entry > u64::from(index_interval_bytes) {
            self.add_index_entries(last_offset, position);
            self.bytes_since_last_index_entry = 0;
        }
        let size = header.size_bytes() as u64;
        self.bytes_since_last_index_entry += size;
        self.size_bytes += size;
        self.next_offset = last_offset + 1;
    }

    fn add_index_entries(&mut self, last_offset: i64, position: u64) {
        self.offset_index.append(last_offset, position);
        if let Some(max_so_far) = self.max_timestamp {
            self.time_index.maybe_append(max_so_far);
        }
    }

    /// Called when a newer segment takes over: like Kafka's `onBecomeInactiveSegment`,
    /// records the final max timestamp in the time index so a later load finds it there.
    pub fn on_become_inactive(&mut self) {
        if let Some(max_so_far) = self.max_timestamp {
            self.time_index.maybe_append(max_so_far);
        }
    }

    /// Removes the segment's files. A crash midway leaves orphans that the next load
    /// deletes (index files without a log) or loads again (a log without indexes).
    /// Readers holding a `FileSlice` keep reading the unlinked file until they drop it.
    pub fn delete(self) -> io::Result<()> {
        delete_files(&self.dir, self.base_offset)
    }
}

/// Removes the files of the segment at `base_offset` in `dir`, whichever exist.
pub fn delete_files(dir: &Path, base_offset: i64) -> io::Result<()> {
    for suffix in SEGMENT_FILE_SUFFIXES {
        match fs::remove_file(dir.join(offset_file_name(base_offset, suffix))) {
            Err(error) if error.kind() != io::ErrorKind::NotFound => return Err(error),
            _ => {}
        }
    }
    Ok(())
}

/// Empty offset and time indexes at `base_offset`, their files created or emptied.
fn empty_indexes(dir: &Path, base_offset: i64) -> io::Result<(OffsetIndex, TimeIndex)> {
    let offset_index = OffsetIndex::empty(
        base_offset,
        dir.join(offset_file_name(base_offset, INDEX_FILE_SUFFIX)),
    )?;
    let time_index = TimeIndex::empty(
        base_offset,
        dir.join(offset_file_name(base_offset, TIME_INDEX_FILE_SUFFIX)),
    )?;
    Ok((offset_index, time_index))
}

fn open_file(dir: &Path, base_offset: i64, suffix: &str, create: bool) -> io::Result<File> {
    OpenOptions::new()
        .read(true)
        .write(true)
        .create(create)
        .truncate(false)
        .open(dir.join(offset_file_name(base_offset, suffix)))
}
