//! Sequential reads of a segment file for scans (recovery, index rebuilds): one
//! bounded buffer refilled with positional reads, so a scan of a whole segment costs
//! a read per chunk rather than per batch, and never allocates beyond one chunk.
//!
//! Owned by the scan that creates it; holds its own handle on the file.

use std::fs::File;
use std::io;
use std::os::unix::fs::FileExt;
use std::sync::Arc;

use crate::limits::LOG_SCAN_CHUNK_BYTES;
use crate::log::batch::{BatchHeader, BATCH_HEADER_SIZE_BYTES};

/// Sequential positional reads through one bounded buffer.
pub struct ChunkReader {
    file: Arc<File>,
    file_len: u64,
    buffer: Vec<u8>,
    buffer_start: u64,
}

impl ChunkReader {
    pub fn new(file: Arc<File>, file_len: u64) -> ChunkReader {
        ChunkReader {
            file,
            file_len,
            buffer: Vec::with_capacity(LOG_SCAN_CHUNK_BYTES),
            buffer_start: 0,
        }
    }

    pub fn file_len(&self) -> u64 {
        self.file_len
    }

    /// `len` bytes at `position`; the caller keeps `position + len` within the file
    /// and `len` within one chunk.
    fn slice(&mut self, position: u64, len: usize) -> io::Result<&[u8]> {
        assert!(len <= LOG_SCAN_CHUNK_BYTES && position + len as u64 <= self.file_len);
        let buffered = position >= self.buffer_start
            && position + len as u64 <= self.buffer_start + self.buffer.len() as u64;
        if !buffered {
            let fill = (self.file_len - position).min(LOG_SCAN_CHUNK_BYTES as u64) as usize;
            self.buffer.resize(fill, 0);
            self.file.read_exact_at(&mut self.buffer, position)?;
            self.buffer_start = position;
        }
        let at = (position - self.buffer_start) as usize;
        Ok(&self.buffer[at..at + len])
    }

    /// The header at `position`, or None when the file ends inside it.
    pub fn header(&mut self, position: u64) -> io::Result<Option<BatchHeader>> {
        if self.file_len - position < BATCH_HEADER_SIZE_BYTES as u64 {
            return Ok(None);
        }
        Ok(BatchHeader::parse_prefix(
            self.slice(position, BATCH_HEADER_SIZE_BYTES)?,
        ))
    }

    /// CRC32C of the bytes in `[from, to)`, a chunk at a time.
    pub fn crc(&mut self, from: u64, to: u64) -> io::Result<u32> {
        let mut crc = 0;
        let mut position = from;
        while position < to {
            let len = (to - position).min(LOG_SCAN_CHUNK_BYTES as u64) as usize;
            crc = crc32c::crc32c_append(crc, self.slice(position, len)?);
            position += len as u64;
        }
        Ok(crc)
    }
}
