//! Reading a segment: locating batches by offset, position and timestamp with the
//! indexes plus a short scan of batch headers, and handing out whole batches.
//!
//! Every header read back from disk is re-checked (magic, length, fits in the segment)
//! before its length is trusted to step to the next batch; a failure is a storage
//! error, since the bytes were valid when they were appended.

use std::os::unix::fs::FileExt;

use bytes::Bytes;

use super::chunk_reader::ChunkReader;
use super::Segment;
use crate::log::batch::{BatchHeader, BATCH_HEADER_SIZE_BYTES};
use crate::log::records;
use crate::log::time_index::TimestampOffset;
use crate::log::{storage_corruption, FileSlice, LogError};

impl Segment {
    /// Reads and re-checks the batch header at `position`, a batch boundary.
    pub fn read_header_at(&self, position: u64) -> Result<BatchHeader, LogError> {
        assert!(
            position < self.size_bytes,
            "header read past the end of the segment"
        );
        if self.size_bytes - position < BATCH_HEADER_SIZE_BYTES as u64 {
            return Err(self.corruption(position, "a batch header runs past the segment end"));
        }
        let mut raw = [0u8; BATCH_HEADER_SIZE_BYTES];
        self.log.file()?.read_exact_at(&mut raw, position)?;
        let header = BatchHeader::parse(&raw);
        if let Err(error) = header.check_stored() {
            return Err(self.corruption(position, &format!("{error:?}")));
        }
        if position + header.size_bytes() as u64 > self.size_bytes {
            return Err(self.corruption(position, "a batch runs past the segment end"));
        }
        Ok(header)
    }

    /// The first batch at or after `from_position` whose last offset is >= `offset`:
    /// the batch holding `offset`, or the next one after a gap. `from_position` must be
    /// a batch boundary.
    pub fn find_batch(
        &self,
        offset: i64,
        from_position: u64,
    ) -> Result<Option<(u64, BatchHeader)>, LogError> {
        let mut position = self.offset_index.lookup(offset).position.max(from_position);
        while position < self.size_bytes {
            let header = self.read_header_at(position)?;
            if header.last_offset() >= offset {
                return Ok(Some((position, header)));
            }
            position += header.size_bytes() as u64;
        }
        Ok(None)
    }

    /// The last batch boundary in `[start, bound]`, where `start` is a boundary: starts
    /// from the index entry nearest below `bound`, so at most an index interval of
    /// headers is scanned.
    fn boundary_at_or_before(&self, start: u64, bound: u64) -> Result<u64, LogError> {
        let mut position = self
            .offset_index
            .lookup_by_position(bound)
            .position
            .max(start);
        while position < self.size_bytes {
            let end = position + self.read_header_at(position)?.size_bytes() as u64;
            if end > bound {
                break;
            }
            position = end;
        }
        Ok(position)
    }

    /// Whole batches from the one holding `fetch_offset`: at most `max_bytes` unless
    /// `min_one_batch` lets a larger first batch through (KIP-74), and none holding an
    /// offset >= `max_offset` (as Kafka, the bound is the position of the batch that
    /// holds `max_offset`). None when nothing qualifies.
    pub fn read(
        &self,
        fetch_offset: i64,
        max_bytes: usize,
        max_offset: i64,
        min_one_batch: bool,
    ) -> Result<Option<FileSlice>, LogError> {
        let Some((start, first)) = self.find_batch(fetch_offset, 0)? else {
            return Ok(None);
        };
        if first.last_offset() >= max_offset {
            return Ok(None);
        }
        let first_end = start + first.size_bytes() as u64;
        let end = if first.size_bytes() > max_bytes {
            if !min_one_batch {
                return Ok(None);
            }
            first_end
        } else {
            let max_offset_position = self.position_of(max_offset, start)?;
            let bound = start
                .saturating_add(max_bytes as u64)
                .min(max_offset_position);
            self.boundary_at_or_before(start, bound)?
        };
        assert!(
            end >= first_end && end <= self.size_bytes,
            "a read must hold whole batches of this segment"
        );
        Ok(Some(FileSlice {
            file: self.log.file()?,
            position: start,
            len: (end - start) as usize,
        }))
    }

    /// The first offset at or after `position`, a batch boundary: the base offset of
    /// the batch there, or the segment's next offset at its end.
    pub fn offset_at_boundary(&self, position: u64) -> Result<i64, LogError> {
        if position >= self.size_bytes {
            return Ok(self.next_offset);
        }
        Ok(self.read_header_at(position)?.base_offset)
    }

    /// Calls `visit(position, header)` for every batch from the one holding `offset`
    /// (or the next one) to the segment end, reading headers sequentially through one
    /// bounded buffer, each re-checked as in `read_header_at`.
    pub fn scan_batches(
        &self,
        offset: i64,
        mut visit: impl FnMut(u64, &BatchHeader) -> Result<(), LogError>,
    ) -> Result<(), LogError> {
        let Some((mut position, _)) = self.find_batch(offset, 0)? else {
            return Ok(());
        };
        let mut reader = ChunkReader::new(self.log.file()?, self.size_bytes);
        while position < self.size_bytes {
            let Some(header) = reader.header(position)? else {
                return Err(self.corruption(position, "a batch header runs past the segment end"));
            };
            if let Err(error) = header.check_stored() {
                return Err(self.corruption(position, &format!("{error:?}")));
            }
            if position + header.size_bytes() as u64 > self.size_bytes {
                return Err(self.corruption(position, "a batch runs past the segment end"));
            }
            visit(position, &header)?;
            position += header.size_bytes() as u64;
        }
        Ok(())
    }

    /// Position of the batch holding `offset`, or the segment end when it is past it.
    fn position_of(&self, offset: i64, from_position: u64) -> Result<u64, LogError> {
        if offset >= self.next_offset {
            return Ok(self.size_bytes);
        }
        Ok(self
            .find_batch(offset, from_position)?
            .map_or(self.size_bytes, |(position, _)| position))
    }

    /// The whole batch at `position`.
    pub fn read_batch(&self, position: u64, header: &BatchHeader) -> Result<Bytes, LogError> {
        let mut bytes = vec![0u8; header.size_bytes()];
        self.log.file()?.read_exact_at(&mut bytes, position)?;
        Ok(Bytes::from(bytes))
    }

    /// Kafka's `LogSegment.findOffsetByTimestamp`: the first record at or after
    /// `starting_offset` whose timestamp is >= `target_ms`. The time index gives a batch
    /// before which every record is older than the target; headers are scanned from
    /// there, and only the batch whose maxTimestamp reaches the target is decoded.
    pub fn find_offset_by_timestamp(
        &self,
        target_ms: i64,
        starting_offset: i64,
    ) -> Result<Option<TimestampOffset>, LogError> {
        let from_offset = self.time_index.lookup(target_ms).max(starting_offset);
        let mut position = self.offset_index.lookup(from_offset).position;
        while position < self.size_bytes {
            let header = self.read_header_at(position)?;
            if header.last_offset() >= starting_offset && header.max_timestamp >= target_ms {
                let batch = self.read_batch(position, &header)?;
                if let Some(found) =
                    records::first_at_or_after(batch, &header, target_ms, starting_offset)
                {
                    return Ok(Some(found));
                }
            }
            position += header.size_bytes() as u64;
        }
        Ok(None)
    }

    /// KIP-734: the record carrying this segment's largest timestamp, found by decoding
    /// the batch that first reached it.
    pub fn offset_of_max_timestamp(&self) -> Result<Option<TimestampOffset>, LogError> {
        let Some(max) = self.max_timestamp else {
            return Ok(None);
        };
        let Some((position, header)) = self.find_batch(max.offset, 0)? else {
            return Err(
                self.corruption(self.size_bytes, "max timestamp offset is past the segment")
            );
        };
        let batch = self.read_batch(position, &header)?;
        let offset = records::offset_of_timestamp(batch, &header, max.timestamp);
        Ok(Some(TimestampOffset {
            timestamp: max.timestamp,
            offset,
        }))
    }

    fn corruption(&self, position: u64, what: &str) -> LogError {
        LogError::Io(storage_corruption(format!(
            "segment {} at position {position}: {what}",
            self.base_offset
        )))
    }
}
