//! Opening a segment from disk, in one of two ways.
//!
//! Trusted (after a clean shutdown, or below the recovery point): the indexes are
//! loaded and sanity-checked as Kafka does, and only the headers after the last index
//! entry are scanned to find the segment's end. Recovered (above the recovery point
//! after a crash, or when an index is missing or fails its checks): every batch is
//! validated (header, CRC, contiguous offsets), the log is cut at the first bad batch,
//! and both indexes are rebuilt exactly as the appends would have written them.
//!
//! Scans read the log sequentially through a bounded buffer with positional reads.

use std::io;
use std::path::Path;
use std::sync::Arc;

use super::chunk_reader::ChunkReader;
use super::{empty_indexes, open_file, Segment};
use crate::log::batch::{BatchHeader, CRC_COVERAGE_START_BYTES, NO_TIMESTAMP};
use crate::log::files::{
    offset_file_name, INDEX_FILE_SUFFIX, LOG_FILE_SUFFIX, TIME_INDEX_FILE_SUFFIX,
};
use crate::log::index::OffsetIndex;
use crate::log::open_files::{OpenFiles, SegmentFile};
use crate::log::time_index::TimeIndex;
use crate::log::txn_index::TxnIndex;
use crate::log::{LogError, SEGMENT_BYTES_MAX};

/// A segment opened from disk, with how many bytes of invalid tail were cut off.
pub struct LoadedSegment {
    pub segment: Segment,
    pub truncated_bytes: u64,
    /// The transaction index file could not be trusted and was emptied: the log's
    /// loader rebuilds it by replaying the segment.
    pub txn_index_rebuild: bool,
}

impl Segment {
    /// Opens a segment whose data is trusted, checking and reusing its indexes; falls
    /// back to `open_and_recover` when an index is missing or inconsistent.
    /// The segment is pinned.
    pub fn open_trusted(
        dir: &Path,
        base_offset: i64,
        index_interval_bytes: u32,
        now_ms: i64,
        open_files: &Arc<OpenFiles>,
    ) -> io::Result<LoadedSegment> {
        match Segment::try_open_trusted(dir, base_offset, index_interval_bytes, now_ms, open_files)?
        {
            Ok((segment, txn_index_rebuild)) => Ok(LoadedSegment {
                segment,
                truncated_bytes: 0,
                txn_index_rebuild,
            }),
            Err(reason) => {
                tracing::warn!(dir = %dir.display(), base_offset, %reason, "rebuilding segment indexes");
                Segment::open_and_recover(
                    dir,
                    base_offset,
                    index_interval_bytes,
                    now_ms,
                    open_files,
                )
            }
        }
    }

    /// Opens a segment and re-validates all of it, rebuilding its indexes and cutting
    /// the log at the first invalid batch. The segment is pinned.
    pub fn open_and_recover(
        dir: &Path,
        base_offset: i64,
        index_interval_bytes: u32,
        now_ms: i64,
        open_files: &Arc<OpenFiles>,
    ) -> io::Result<LoadedSegment> {
        let log = open_log(dir, base_offset, open_files)?;
        let (offset_index, time_index) = empty_indexes(dir, base_offset)?;
        let (mut segment, txn_index_rebuild) =
            with_txn_index(dir, base_offset, log, (offset_index, time_index), now_ms)?;
        let truncated_bytes = segment.rebuild(index_interval_bytes, true)?;
        // The rebuilt indexes on disk now: a segment below the recovery point
        // is not flushed again.
        segment.sync_now()?;
        Ok(LoadedSegment {
            segment,
            truncated_bytes,
            txn_index_rebuild,
        })
    }

    /// Drops the batch holding `offset` and every later one, then rebuilds the indexes
    /// from the bytes that remain (truncation is rare; a rebuild keeps one code path).
    pub fn truncate_to(&mut self, offset: i64, index_interval_bytes: u32) -> Result<(), LogError> {
        let Some((position, _)) = self.find_batch(offset, 0)? else {
            return Ok(());
        };
        self.log.file()?.set_len(position)?;
        self.txn_index.truncate_to(offset)?;
        // A rebuild cuts again only if the kept bytes rotted on disk since they were
        // appended; it logs that itself.
        self.rebuild(index_interval_bytes, false)?;
        assert!(
            self.next_offset <= offset,
            "truncation must drop the batch holding the offset"
        );
        Ok(())
    }

    /// Err(reason) when the indexes cannot be trusted; Ok(Err) is still an Ok I/O.
    /// With the segment, whether its transaction index must be rebuilt.
    fn try_open_trusted(
        dir: &Path,
        base_offset: i64,
        index_interval_bytes: u32,
        now_ms: i64,
        open_files: &Arc<OpenFiles>,
    ) -> io::Result<Result<(Segment, bool), String>> {
        for suffix in [INDEX_FILE_SUFFIX, TIME_INDEX_FILE_SUFFIX] {
            if !dir.join(offset_file_name(base_offset, suffix)).exists() {
                return Ok(Err(format!("{suffix} file is missing")));
            }
        }
        let log = open_log(dir, base_offset, open_files)?;
        let log_size = log.file()?.metadata()?.len();
        let offset_index = match OffsetIndex::load(
            base_offset,
            dir.join(offset_file_name(base_offset, INDEX_FILE_SUFFIX)),
            log_size,
        )? {
            Ok(index) => index,
            Err(reason) => return Ok(Err(reason)),
        };
        let time_index = match TimeIndex::load(
            base_offset,
            dir.join(offset_file_name(base_offset, TIME_INDEX_FILE_SUFFIX)),
        )? {
            Ok(index) => index,
            Err(reason) => return Ok(Err(reason)),
        };
        let (mut segment, txn_index_rebuild) =
            with_txn_index(dir, base_offset, log, (offset_index, time_index), now_ms)?;
        match segment.scan_tail(log_size, index_interval_bytes)? {
            Ok(()) => Ok(Ok((segment, txn_index_rebuild))),
            Err(reason) => Ok(Err(reason)),
        }
    }

    /// Finds the end of a trusted segment by scanning the headers after its last offset
    /// index entry; checks that the indexes agree with what it finds.
    fn scan_tail(
        &mut self,
        log_size: u64,
        index_interval_bytes: u32,
    ) -> io::Result<Result<(), String>> {
        let last_entry = self.offset_index.last_entry();
        let from = last_entry.map_or(0, |e| e.position);
        self.size_bytes = from;
        self.max_timestamp = self.time_index.last_entry();
        let mut reader = ChunkReader::new(self.log.file()?, log_size);
        // The offsets before the last entry's batch are not scanned: start from it.
        if let Some(header) = reader.header(from)? {
            self.next_offset = header.base_offset.max(self.base_offset);
        }
        let mut first_scanned = None;
        let end = self.scan(&mut reader, index_interval_bytes, false, &mut first_scanned)?;
        if end != log_size {
            return Ok(Err(format!(
                "invalid batch at position {end} of a trusted segment"
            )));
        }
        // Kafka names the last offset of the batch (4.x) or of the whole append (3.x)
        // at an entry's position; lookups only need the batch there to start at or
        // below the entry's offset, and the entry to lie inside the segment.
        if let Some(entry) = last_entry {
            let starts_below =
                first_scanned.is_some_and(|h: BatchHeader| h.base_offset <= entry.offset);
            if !starts_below || entry.offset >= self.next_offset {
                return Ok(Err(format!(
                    "index entry {entry:?} does not match the batch at its position"
                )));
            }
        }
        if let Some(last) = self.time_index.last_entry() {
            if last.offset >= self.next_offset {
                return Ok(Err(format!(
                    "time index entry {last:?} is past the segment end {}",
                    self.next_offset
                )));
            }
        }
        if from > 0 {
            let first = reader.header(0)?.map(|h| h.max_timestamp);
            self.first_batch_timestamp = first.filter(|&t| t != NO_TIMESTAMP);
        }
        Ok(Ok(()))
    }

    /// Resets the indexes and re-indexes the log from position 0, cutting it at the
    /// first invalid batch. Returns the number of bytes cut.
    fn rebuild(&mut self, index_interval_bytes: u32, verify_crc: bool) -> io::Result<u64> {
        self.offset_index.reset();
        self.time_index.reset();
        self.size_bytes = 0;
        self.bytes_since_last_index_entry = 0;
        self.max_timestamp = None;
        self.next_offset = self.base_offset;
        self.first_batch_timestamp = None;
        let log = self.log.file()?;
        let log_size = log.metadata()?.len();
        let mut reader = ChunkReader::new(Arc::clone(&log), log_size);
        let end = self.scan(&mut reader, index_interval_bytes, verify_crc, &mut None)?;
        let truncated = log_size - end;
        if truncated > 0 {
            tracing::warn!(dir = %self.dir.display(), base_offset = self.base_offset, position = end, truncated, "truncating invalid log tail");
            log.set_len(end)?;
        }
        Ok(truncated)
    }

    /// Indexes valid batches from `self.size_bytes` on; returns where the valid bytes end.
    fn scan(
        &mut self,
        reader: &mut ChunkReader,
        index_interval_bytes: u32,
        verify_crc: bool,
        first: &mut Option<BatchHeader>,
    ) -> io::Result<u64> {
        let mut position = self.size_bytes;
        while position < reader.file_len() {
            match self.check_batch(reader, position, verify_crc)? {
                Ok(header) => {
                    first.get_or_insert(header);
                    self.index_batch(position, &header, index_interval_bytes);
                    position += header.size_bytes() as u64;
                }
                Err(reason) => {
                    tracing::warn!(dir = %self.dir.display(), base_offset = self.base_offset, position, %reason, "invalid batch");
                    break;
                }
            }
        }
        Ok(position)
    }

    /// Validates the batch at `position` as found on disk: a whole header, a sane
    /// length within the file, offsets following the previous batch and within the
    /// segment's relative range, and (when asked) the CRC.
    fn check_batch(
        &self,
        reader: &mut ChunkReader,
        position: u64,
        verify_crc: bool,
    ) -> io::Result<Result<BatchHeader, String>> {
        let Some(header) = reader.header(position)? else {
            return Ok(Err("torn batch header".to_string()));
        };
        if let Err(error) = header.check_stored() {
            return Ok(Err(format!("{error:?}")));
        }
        let size = header.size_bytes() as u64;
        if position + size > reader.file_len() {
            return Ok(Err(format!(
                "batch of {size} bytes runs past the end of the file"
            )));
        }
        if position + size > SEGMENT_BYTES_MAX {
            return Ok(Err(format!(
                "batch ends past the largest segment ({SEGMENT_BYTES_MAX} bytes)"
            )));
        }
        // baseOffset is outside the CRC, so a flipped bit there is only caught by
        // position: offsets inside a segment grow, each batch starting at or after
        // the end of the previous one (compaction leaves gaps, as in Kafka).
        if header.base_offset < self.next_offset || !self.can_hold_offset(header.last_offset()) {
            return Ok(Err(format!(
                "base offset {} where {} was expected",
                header.base_offset, self.next_offset
            )));
        }
        if verify_crc {
            let crc = reader.crc(position + CRC_COVERAGE_START_BYTES as u64, position + size)?;
            if crc != header.crc {
                return Ok(Err(format!(
                    "CRC mismatch at base offset {}",
                    header.base_offset
                )));
            }
        }
        Ok(Ok(header))
    }
}

/// The segment's transaction index, or an empty one (its file removed) and `true`
/// when the file cannot be trusted.
/// The segment of `log` and its indexes, with its transaction index loaded, and whether
/// that index must be rebuilt.
fn with_txn_index(
    dir: &Path,
    base_offset: i64,
    log: SegmentFile,
    (offset_index, time_index): (OffsetIndex, TimeIndex),
    now_ms: i64,
) -> io::Result<(Segment, bool)> {
    let (txn_index, txn_index_rebuild) = load_txn_index(dir, base_offset)?;
    let segment = Segment::from_parts(
        dir,
        base_offset,
        log,
        (offset_index, time_index, txn_index),
        now_ms,
    );
    Ok((segment, txn_index_rebuild))
}

/// The segment's log file, opened and pinned.
fn open_log(dir: &Path, base_offset: i64, open_files: &Arc<OpenFiles>) -> io::Result<SegmentFile> {
    let log = open_file(dir, base_offset, LOG_FILE_SUFFIX, false)?;
    let path = dir.join(offset_file_name(base_offset, LOG_FILE_SUFFIX));
    Ok(SegmentFile::new(open_files, path, log))
}

fn load_txn_index(dir: &Path, base_offset: i64) -> io::Result<(TxnIndex, bool)> {
    match TxnIndex::load(dir, base_offset)? {
        Ok(index) => Ok((index, false)),
        Err(reason) => {
            tracing::warn!(dir = %dir.display(), base_offset, %reason, "rebuilding transaction index");
            Ok((TxnIndex::empty(dir, base_offset)?, true))
        }
    }
}
