//! The file of an index whose entries live in memory (a segment's offset and
//! time indexes), never held open: appends change memory only, and a flush
//! writes the entries not on disk yet (cutting what a truncation dropped),
//! fsyncs and closes the file. A segment so costs one file descriptor, its
//! log, as Kafka's memory-mapped indexes do.
//!
//! Invariant: the first `persisted_bytes` of the file equal the entries'
//! encoding, and the file holds nothing else unless `stale_tail`. A crash may
//! leave the file short of its entries: a segment at or above the recovery
//! point is recovered on load (its indexes rebuilt from the log), and one
//! below it was flushed, its index files complete.

use std::fs::{File, OpenOptions};
use std::io;
use std::os::unix::fs::FileExt;
use std::path::PathBuf;

pub struct IndexFile {
    path: PathBuf,
    persisted_bytes: u64,
    /// The file may hold bytes past `persisted_bytes` that a truncation dropped.
    stale_tail: bool,
    /// Counts truncations: a write taken before one no longer describes the file.
    generation: u64,
}

/// One index file's pending write: `bytes` at `at`, then the file cut at `len`.
#[derive(Clone, Debug)]
pub struct IndexWrite {
    path: PathBuf,
    at: u64,
    bytes: Vec<u8>,
    len: u64,
    generation: u64,
}

impl IndexWrite {
    /// Writes, cuts and fsyncs the file, which is closed again on return.
    pub fn apply(&self) -> io::Result<()> {
        let file = OpenOptions::new().write(true).open(&self.path)?;
        file.write_all_at(&self.bytes, self.at)?;
        file.set_len(self.len)?;
        file.sync_all()
    }
}

impl IndexFile {
    /// Creates the file at `path`, or empties it.
    pub fn create(path: PathBuf) -> io::Result<IndexFile> {
        OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .open(&path)?;
        Ok(IndexFile {
            path,
            persisted_bytes: 0,
            stale_tail: false,
            generation: 0,
        })
    }

    /// Reads the whole file at `path` (closed on return), which the caller
    /// turns into entries; all of it is then on disk.
    pub fn read(path: PathBuf) -> io::Result<(IndexFile, Vec<u8>)> {
        let bytes = read_whole(&OpenOptions::new().read(true).open(&path)?)?;
        let file = IndexFile {
            path,
            persisted_bytes: bytes.len() as u64,
            stale_tail: false,
            generation: 0,
        };
        Ok((file, bytes))
    }

    /// The write that brings the file to `entries`, each `entry_bytes` long
    /// as `encode` writes it, if the file differs; only the entries from the
    /// first not on disk are encoded.
    pub fn pending<T>(
        &self,
        entries: &[T],
        entry_bytes: usize,
        encode: impl Fn(&T, &mut Vec<u8>),
    ) -> Option<IndexWrite> {
        let len = (entries.len() * entry_bytes) as u64;
        if len == self.persisted_bytes && !self.stale_tail {
            return None;
        }
        let at = self.persisted_bytes.min(len);
        let first = usize::try_from(at).unwrap_or(usize::MAX) / entry_bytes;
        let mut bytes = Vec::with_capacity((entries.len() - first) * entry_bytes);
        for entry in &entries[first..] {
            encode(entry, &mut bytes);
        }
        Some(IndexWrite {
            path: self.path.clone(),
            at,
            bytes,
            len,
            generation: self.generation,
        })
    }

    /// `write`, taken from `pending`, is on disk: unless a truncation came
    /// since, the file now matches the entries up to its length.
    pub fn written(&mut self, write: &IndexWrite) {
        if write.path == self.path && write.generation == self.generation {
            self.persisted_bytes = self.persisted_bytes.max(write.len);
            self.stale_tail = false;
        }
    }

    /// The entries were cut to `len` bytes.
    pub fn truncated(&mut self, len: u64) {
        self.generation += 1;
        if len < self.persisted_bytes {
            self.persisted_bytes = len;
            self.stale_tail = true;
        }
    }
}

/// Reads a whole index file with positional reads.
fn read_whole(file: &File) -> io::Result<Vec<u8>> {
    let len = usize::try_from(file.metadata()?.len())
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidData, "index file too large"))?;
    let mut bytes = vec![0u8; len];
    file.read_exact_at(&mut bytes, 0)?;
    Ok(bytes)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn a_flush_writes_only_the_new_entries_and_cuts_what_a_truncation_dropped() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("0.index");
        let mut file = IndexFile::create(path.clone()).unwrap();
        let encoding: Vec<u8> = (0u8..16).collect();
        let byte = |b: &u8, out: &mut Vec<u8>| out.push(*b);
        let never = |_: &u8, _: &mut Vec<u8>| unreachable!("nothing to write");
        assert!(file.pending(&encoding[..0], 1, never).is_none());
        let first = file.pending(&encoding[..8], 1, byte).unwrap();
        first.apply().unwrap();
        file.written(&first);
        assert!(file.pending(&encoding[..8], 1, never).is_none());
        let second = file.pending(&encoding[..16], 1, byte).unwrap();
        assert_eq!(second.at, 8, "only the new entries are written");
        assert_eq!(second.bytes, encoding[8..16].to_vec());
        second.apply().unwrap();
        file.written(&second);
        assert_eq!(std::fs::read(&path).unwrap(), encoding);

        // Cut to 4 bytes while a write of all 16 is in flight: that write
        // lands, but does not count, and the next one cuts the file.
        let stale = file.pending(&encoding[..16], 1, never);
        assert!(stale.is_none());
        file.truncated(4);
        let late = IndexWrite {
            generation: file.generation - 1,
            ..second.clone()
        };
        late.apply().unwrap();
        file.written(&late);
        let cut = file.pending(&encoding[..4], 1, byte).unwrap();
        cut.apply().unwrap();
        file.written(&cut);
        assert_eq!(std::fs::read(&path).unwrap(), encoding[..4].to_vec());
        assert!(file.pending(&encoding[..4], 1, never).is_none());
    }
}
