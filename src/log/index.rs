//! The sparse offset index of one segment (`{base_offset:020}.index`), as Kafka lays it
//! out: 8-byte entries of big-endian u32 relative offset and u32 file position.
//!
//! Like Kafka's `LogSegment.append`, an entry is added for the batch that crosses each
//! `index_interval_bytes` of appended log, and names that batch's *last* offset and its
//! starting position. Invariant: entries strictly increase in both offset and position,
//! and each position is the start of a batch whose offsets are all <= the entry's.
//!
//! Entries live in a `Vec` owned by the segment; the file (`IndexFile`) is
//! written from them at flush time and only read when a segment is loaded.

use std::io;
use std::path::PathBuf;

use super::index_file::{IndexFile, IndexWrite};

/// Size of one offset index entry on disk: u32 relative offset + u32 position.
pub const OFFSET_INDEX_ENTRY_SIZE_BYTES: usize = 8;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct OffsetPosition {
    pub offset: i64,
    pub position: u64,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Entry {
    relative_offset: u32,
    position: u32,
}

pub struct OffsetIndex {
    base_offset: i64,
    file: IndexFile,
    entries: Vec<Entry>,
}

impl OffsetIndex {
    /// An empty index, its file at `path` created or emptied.
    pub fn empty(base_offset: i64, path: PathBuf) -> io::Result<OffsetIndex> {
        Ok(OffsetIndex {
            base_offset,
            file: IndexFile::create(path)?,
            entries: Vec::new(),
        })
    }

    /// Reads the file and sanity-checks it as Kafka's `OffsetIndex.sanityCheck` does, plus
    /// order and bounds: Err(reason) means the caller must rebuild it from the log.
    pub fn load(
        base_offset: i64,
        path: PathBuf,
        log_size_bytes: u64,
    ) -> io::Result<Result<OffsetIndex, String>> {
        let (file, bytes) = IndexFile::read(path)?;
        if bytes.len() % OFFSET_INDEX_ENTRY_SIZE_BYTES != 0 {
            return Ok(Err(format!(
                "index size {} is not a multiple of {OFFSET_INDEX_ENTRY_SIZE_BYTES}",
                bytes.len()
            )));
        }
        let mut entries: Vec<Entry> =
            Vec::with_capacity(bytes.len() / OFFSET_INDEX_ENTRY_SIZE_BYTES);
        for raw in bytes.chunks_exact(OFFSET_INDEX_ENTRY_SIZE_BYTES) {
            let entry = Entry {
                relative_offset: u32::from_be_bytes([raw[0], raw[1], raw[2], raw[3]]),
                position: u32::from_be_bytes([raw[4], raw[5], raw[6], raw[7]]),
            };
            if let Some(problem) = check_entry(entries.last(), &entry, log_size_bytes) {
                return Ok(Err(problem));
            }
            entries.push(entry);
        }
        Ok(Ok(OffsetIndex {
            base_offset,
            file,
            entries,
        }))
    }

    /// The write that brings the file up to the entries, if any (see `IndexFile`).
    pub fn pending_write(&self) -> Option<IndexWrite> {
        self.file.pending(
            &self.entries,
            OFFSET_INDEX_ENTRY_SIZE_BYTES,
            |entry, out| {
                out.extend_from_slice(&entry.relative_offset.to_be_bytes());
                out.extend_from_slice(&entry.position.to_be_bytes());
            },
        )
    }

    /// `write`, from `pending_write`, is on disk.
    pub fn written(&mut self, write: &IndexWrite) {
        self.file.written(write);
    }

    /// Adds an entry for the batch starting at `position` whose last offset is
    /// `offset`, in memory: the file gets it at the next flush.
    pub fn append(&mut self, offset: i64, position: u64) {
        let entry = Entry {
            relative_offset: self.relative(offset),
            position: u32::try_from(position).expect("segment positions fit in u32"),
        };
        if let Some(last) = self.entries.last() {
            assert!(
                entry.relative_offset > last.relative_offset,
                "offset index offsets must grow"
            );
            assert!(
                entry.position > last.position,
                "offset index positions must grow"
            );
        }
        self.entries.push(entry);
    }

    /// The largest entry whose offset is <= `offset`, or (base_offset, 0) when there is
    /// none: scanning batch headers from that position finds `offset`.
    pub fn lookup(&self, offset: i64) -> OffsetPosition {
        if offset < self.base_offset {
            return self.start();
        }
        let relative = (offset - self.base_offset).min(i64::from(u32::MAX)) as u32;
        let count = self
            .entries
            .partition_point(|e| e.relative_offset <= relative);
        match count.checked_sub(1) {
            Some(i) => self.absolute(&self.entries[i]),
            None => self.start(),
        }
    }

    /// The largest entry whose position is <= `position`, or the segment start.
    pub fn lookup_by_position(&self, position: u64) -> OffsetPosition {
        let count = self
            .entries
            .partition_point(|e| u64::from(e.position) <= position);
        match count.checked_sub(1) {
            Some(i) => self.absolute(&self.entries[i]),
            None => self.start(),
        }
    }

    pub fn last_entry(&self) -> Option<OffsetPosition> {
        self.entries.last().map(|e| self.absolute(e))
    }

    /// Drops every entry at or past `position` (a batch boundary being truncated).
    pub fn truncate_to_position(&mut self, position: u64) {
        let keep = self
            .entries
            .partition_point(|e| u64::from(e.position) < position);
        self.entries.truncate(keep);
        self.file
            .truncated((keep * OFFSET_INDEX_ENTRY_SIZE_BYTES) as u64);
    }

    /// Empties the index before a rebuild (the file at the next flush).
    pub fn reset(&mut self) {
        self.truncate_to_position(0);
    }

    fn relative(&self, offset: i64) -> u32 {
        let relative = offset - self.base_offset;
        assert!(
            (0..=i64::from(i32::MAX)).contains(&relative),
            "offset {offset} outside the segment at {}",
            self.base_offset
        );
        relative as u32
    }

    fn absolute(&self, entry: &Entry) -> OffsetPosition {
        OffsetPosition {
            offset: self.base_offset + i64::from(entry.relative_offset),
            position: u64::from(entry.position),
        }
    }

    fn start(&self) -> OffsetPosition {
        OffsetPosition {
            offset: self.base_offset,
            position: 0,
        }
    }
}

fn check_entry(previous: Option<&Entry>, entry: &Entry, log_size_bytes: u64) -> Option<String> {
    if entry.relative_offset > i32::MAX as u32 {
        return Some(format!(
            "relative offset {} out of range",
            entry.relative_offset
        ));
    }
    if u64::from(entry.position) >= log_size_bytes {
        return Some(format!(
            "position {} beyond the log ({log_size_bytes} bytes)",
            entry.position
        ));
    }
    match previous {
        Some(p) if entry.relative_offset <= p.relative_offset || entry.position <= p.position => {
            Some(format!("entry {entry:?} does not grow past {p:?}"))
        }
        _ => None,
    }
}
