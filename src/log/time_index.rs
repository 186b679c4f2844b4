//! The time index of one segment (`{base_offset:020}.timeindex`), as Kafka lays it out:
//! 12-byte entries of big-endian i64 timestamp and u32 relative offset.
//!
//! An entry is added at the offset index's cadence, and once more when the segment is
//! rolled, but only when the segment's max timestamp grew; it names that max timestamp
//! and the last offset of the first batch that reached it. Invariant: timestamps
//! strictly increase and offsets never decrease, so every record before an entry's
//! batch has a timestamp below the entry's.

use std::io;
use std::path::PathBuf;

use super::index_file::{IndexFile, IndexWrite};

/// Size of one time index entry on disk: i64 timestamp + u32 relative offset.
pub const TIME_INDEX_ENTRY_SIZE_BYTES: usize = 12;

/// A timestamp and the offset that carries it, Kafka's `TimestampOffset`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TimestampOffset {
    pub timestamp: i64,
    pub offset: i64,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Entry {
    timestamp: i64,
    relative_offset: u32,
}

pub struct TimeIndex {
    base_offset: i64,
    file: IndexFile,
    entries: Vec<Entry>,
}

impl TimeIndex {
    /// An empty index, its file at `path` created or emptied.
    pub fn empty(base_offset: i64, path: PathBuf) -> io::Result<TimeIndex> {
        Ok(TimeIndex {
            base_offset,
            file: IndexFile::create(path)?,
            entries: Vec::new(),
        })
    }

    /// Reads and sanity-checks the file: whole entries in order. Err(reason) means
    /// rebuild it. The segment checks the last entry against its end once known.
    pub fn load(base_offset: i64, path: PathBuf) -> io::Result<Result<TimeIndex, String>> {
        let (file, bytes) = IndexFile::read(path)?;
        if bytes.len() % TIME_INDEX_ENTRY_SIZE_BYTES != 0 {
            return Ok(Err(format!(
                "time index size {} is not a multiple of {TIME_INDEX_ENTRY_SIZE_BYTES}",
                bytes.len()
            )));
        }
        let mut entries: Vec<Entry> = Vec::with_capacity(bytes.len() / TIME_INDEX_ENTRY_SIZE_BYTES);
        for raw in bytes.chunks_exact(TIME_INDEX_ENTRY_SIZE_BYTES) {
            let mut timestamp = [0u8; 8];
            timestamp.copy_from_slice(&raw[..8]);
            let entry = Entry {
                timestamp: i64::from_be_bytes(timestamp),
                relative_offset: u32::from_be_bytes([raw[8], raw[9], raw[10], raw[11]]),
            };
            if let Some(problem) = check_entry(entries.last(), &entry) {
                return Ok(Err(problem));
            }
            entries.push(entry);
        }
        Ok(Ok(TimeIndex {
            base_offset,
            file,
            entries,
        }))
    }

    /// The write that brings the file up to the entries, if any (see `IndexFile`).
    pub fn pending_write(&self) -> Option<IndexWrite> {
        self.file
            .pending(&self.entries, TIME_INDEX_ENTRY_SIZE_BYTES, |entry, out| {
                out.extend_from_slice(&entry.timestamp.to_be_bytes());
                out.extend_from_slice(&entry.relative_offset.to_be_bytes());
            })
    }

    /// `write`, from `pending_write`, is on disk.
    pub fn written(&mut self, write: &IndexWrite) {
        self.file.written(write);
    }

    pub fn last_entry(&self) -> Option<TimestampOffset> {
        self.entries.last().map(|e| self.absolute(e))
    }

    /// Appends `max_so_far` when it is newer than the last entry, as Kafka's
    /// `TimeIndex.maybeAppend`, in memory: the file gets it at the next flush.
    pub fn maybe_append(&mut self, max_so_far: TimestampOffset) {
        let relative = max_so_far.offset - self.base_offset;
        assert!(
            (0..=i64::from(i32::MAX)).contains(&relative),
            "offset {} outside the segment at {}",
            max_so_far.offset,
            self.base_offset
        );
        let entry = Entry {
            timestamp: max_so_far.timestamp,
            relative_offset: relative as u32,
        };
        if let Some(last) = self.entries.last() {
            if entry.timestamp <= last.timestamp {
                return;
            }
            assert!(
                entry.relative_offset >= last.relative_offset,
                "time index offsets must not shrink"
            );
        }
        self.entries.push(entry);
    }

    /// The offset to start a timestamp search from: that of the largest entry whose
    /// timestamp is <= `target_ms`, or the segment's base offset.
    pub fn lookup(&self, target_ms: i64) -> i64 {
        let count = self.entries.partition_point(|e| e.timestamp <= target_ms);
        match count.checked_sub(1) {
            Some(i) => self.absolute(&self.entries[i]).offset,
            None => self.base_offset,
        }
    }

    /// Empties the index before a rebuild (the file at the next flush).
    pub fn reset(&mut self) {
        self.entries.clear();
        self.file.truncated(0);
    }

    fn absolute(&self, entry: &Entry) -> TimestampOffset {
        TimestampOffset {
            timestamp: entry.timestamp,
            offset: self.base_offset + i64::from(entry.relative_offset),
        }
    }
}

fn check_entry(previous: Option<&Entry>, entry: &Entry) -> Option<String> {
    if entry.relative_offset > i32::MAX as u32 {
        return Some(format!(
            "relative offset {} out of range",
            entry.relative_offset
        ));
    }
    match previous {
        Some(p) if entry.timestamp <= p.timestamp || entry.relative_offset < p.relative_offset => {
            Some(format!("entry {entry:?} does not grow past {p:?}"))
        }
        _ => None,
    }
}
