//! One segment's transaction index (`{base_offset:020}.txnindex`), in Kafka's format:
//! one 34-byte entry per aborted transaction whose abort marker lies in the segment,
//! `version (i16) = 0, producer id (i64), first offset (i64), last offset (i64), last
//! stable offset (i64)`, big-endian, in marker order.
//!
//! Owned by its `Segment`. As Kafka, the file is created with the first entry; a
//! missing file is an empty index. The file is open while its segment is pinned,
//! and opened again for a write after `close`. Every entry is also kept in memory (aborts are
//! rare), so read_committed fetches never read the file. Invariant: entries' last
//! offsets strictly increase and are at or above the segment's base offset.

use std::fs::{self, File, OpenOptions};
use std::io;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::files::{offset_file_name, TXN_INDEX_FILE_SUFFIX};
use super::AbortedTxn;

/// Kafka's `AbortedTxn.TOTAL_SIZE`.
pub const ABORTED_TXN_SIZE_BYTES: usize = 34;
/// Kafka's `AbortedTxn.CURRENT_VERSION`, the only one there is.
const ABORTED_TXN_VERSION: i16 = 0;

pub struct TxnIndex {
    base_offset: i64,
    path: PathBuf,
    file: Option<Arc<File>>,
    entries: Vec<AbortedTxn>,
}

impl TxnIndex {
    /// An index with no entries; any file left at its path is removed.
    pub fn empty(dir: &Path, base_offset: i64) -> io::Result<TxnIndex> {
        let mut index = TxnIndex {
            base_offset,
            path: dir.join(offset_file_name(base_offset, TXN_INDEX_FILE_SUFFIX)),
            file: None,
            entries: Vec::new(),
        };
        index.reset()?;
        Ok(index)
    }

    /// Loads the index file, if any. Err(reason) when it cannot be trusted (a torn
    /// entry, an unknown version, offsets out of order or below the segment); the
    /// caller then rebuilds it from the log.
    pub fn load(dir: &Path, base_offset: i64) -> io::Result<Result<TxnIndex, String>> {
        let path = dir.join(offset_file_name(base_offset, TXN_INDEX_FILE_SUFFIX));
        let bytes = match fs::read(&path) {
            Ok(bytes) => bytes,
            Err(error) if error.kind() == io::ErrorKind::NotFound => {
                return Ok(Ok(TxnIndex {
                    base_offset,
                    path,
                    file: None,
                    entries: Vec::new(),
                }))
            }
            Err(error) => return Err(error),
        };
        if bytes.len() % ABORTED_TXN_SIZE_BYTES != 0 {
            return Ok(Err(format!(
                "{} bytes is not a whole number of entries",
                bytes.len()
            )));
        }
        let mut entries: Vec<AbortedTxn> = Vec::with_capacity(bytes.len() / ABORTED_TXN_SIZE_BYTES);
        for raw in bytes.chunks_exact(ABORTED_TXN_SIZE_BYTES) {
            let Some(entry) = decode(raw) else {
                return Ok(Err("unknown entry version".to_string()));
            };
            let ordered = entries
                .last()
                .is_none_or(|l| l.last_offset < entry.last_offset);
            if !ordered || entry.last_offset < base_offset {
                return Ok(Err(format!("entry {entry:?} out of order")));
            }
            entries.push(entry);
        }
        let file = open(&path)?;
        Ok(Ok(TxnIndex {
            base_offset,
            path,
            file: Some(Arc::new(file)),
            entries,
        }))
    }

    pub fn entries(&self) -> &[AbortedTxn] {
        &self.entries
    }

    /// The file, once one exists, for fsyncs.
    pub fn file(&self) -> Option<&Arc<File>> {
        self.file.as_ref()
    }

    /// Appends an entry (written without fsync, like the segment's other files).
    pub fn append(&mut self, entry: AbortedTxn) -> io::Result<()> {
        assert!(
            entry.last_offset >= self.base_offset
                && self
                    .entries
                    .last()
                    .is_none_or(|l| l.last_offset < entry.last_offset),
            "transaction index entries must follow each other within the segment"
        );
        let file = self.open_file()?;
        let position = (self.entries.len() * ABORTED_TXN_SIZE_BYTES) as u64;
        file.write_all_at(&encode(&entry), position)?;
        self.entries.push(entry);
        Ok(())
    }

    /// Kafka's `truncateTo`: drops the entries whose marker is at or after `offset`.
    pub fn truncate_to(&mut self, offset: i64) -> io::Result<()> {
        let keep = self.entries.partition_point(|e| e.last_offset < offset);
        if keep == self.entries.len() {
            return Ok(());
        }
        // Entries to drop mean the file exists, open or closed.
        self.open_file()?
            .set_len((keep * ABORTED_TXN_SIZE_BYTES) as u64)?;
        self.entries.truncate(keep);
        Ok(())
    }

    /// Closes the file of an idle segment; a later write opens it again.
    pub fn close(&mut self) {
        self.file = None;
    }

    /// The file, opened (created) when it is not.
    fn open_file(&mut self) -> io::Result<Arc<File>> {
        if let Some(file) = &self.file {
            return Ok(Arc::clone(file));
        }
        let file = Arc::new(open(&self.path)?);
        self.file = Some(Arc::clone(&file));
        Ok(file)
    }

    /// Drops every entry and the file.
    pub fn reset(&mut self) -> io::Result<()> {
        self.entries.clear();
        self.file = None;
        delete_file(&self.path)
    }
}

/// Removes the index file at `path`, if there is one.
pub fn delete_file(path: &Path) -> io::Result<()> {
    match fs::remove_file(path) {
        Err(error) if error.kind() != io::ErrorKind::NotFound => Err(error),
        _ => Ok(()),
    }
}

fn open(path: &Path) -> io::Result<File> {
    OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(path)
}

/// An entry's 34 bytes, as Kafka's `AbortedTxn` lays them out.
pub fn encode(entry: &AbortedTxn) -> [u8; ABORTED_TXN_SIZE_BYTES] {
    let mut out = [0u8; ABORTED_TXN_SIZE_BYTES];
    out[0..2].copy_from_slice(&ABORTED_TXN_VERSION.to_be_bytes());
    out[2..10].copy_from_slice(&entry.producer_id.to_be_bytes());
    out[10..18].copy_from_slice(&entry.first_offset.to_be_bytes());
    out[18..26].copy_from_slice(&entry.last_offset.to_be_bytes());
    out[26..34].copy_from_slice(&entry.last_stable_offset.to_be_bytes());
    out
}

fn decode(raw: &[u8]) -> Option<AbortedTxn> {
    let i64_at = |at: usize| {
        let mut bytes = [0u8; 8];
        bytes.copy_from_slice(&raw[at..at + 8]);
        i64::from_be_bytes(bytes)
    };
    // Kafka reads entries of any version up to its own, and only version 0 exists.
    let version = i16::from_be_bytes([raw[0], raw[1]]);
    if version > ABORTED_TXN_VERSION {
        return None;
    }
    Some(AbortedTxn {
        producer_id: i64_at(2),
        first_offset: i64_at(10),
        last_offset: i64_at(18),
        last_stable_offset: i64_at(26),
    })
}
