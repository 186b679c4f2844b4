//! Fetch and ListOffsets lookups. Reads take `&self`: they only locate bytes and hand
//! out `FileSlice`s, which the broker reads after releasing the partition lock.

use super::PartitionLog;
use crate::log::{LogError, LogRead};

impl PartitionLog {
    /// Whole batches from `fetch_offset`, at most `max_bytes` unless `min_one_batch`
    /// lets a larger first batch through whole (KIP-74), none holding an offset >=
    /// `max_offset` (the high watermark for consumers). Served from one segment.
    /// `fetch_offset` at the log end or at `max_offset` returns no records; outside
    /// `[log_start_offset, log_end_offset]` it is OffsetOutOfRange.
    pub fn read(
        &self,
        fetch_offset: i64,
        max_bytes: usize,
        max_offset: i64,
        min_one_batch: bool,
    ) -> Result<LogRead, LogError> {
        if fetch_offset < self.log_start_offset || fetch_offset > self.log_end_offset {
            return Err(self.out_of_range());
        }
        let mut answer = LogRead {
            records: None,
            log_start_offset: self.log_start_offset,
            log_end_offset: self.log_end_offset,
        };
        if fetch_offset >= self.log_end_offset || fetch_offset >= max_offset {
            return Ok(answer);
        }
        // The segment whose range holds the offset; move on only when the offset lies
        // past its last batch (a gap left by recovery), never because of the bounds.
        for i in self.segment_index_for(fetch_offset)..self.segments.len() {
            let segment = &self.segments[i];
            if fetch_offset >= segment.next_offset() {
                continue;
            }
            answer.records = segment.read(fetch_offset, max_bytes, max_offset, min_one_batch)?;
            break;
        }
        Ok(answer)
    }

    /// ListOffsets by timestamp: (offset, timestamp) of the first record at or after
    /// the log start offset whose timestamp is >= `target_ms`, or None. Segments are
    /// skipped by their largest timestamp; inside one, the time index and batch headers
    /// narrow the search to one batch, which alone is decoded.
    pub fn offset_for_timestamp(&self, target_ms: i64) -> Result<Option<(i64, i64)>, LogError> {
        for segment in &self.segments {
            if segment
                .max_timestamp()
                .is_none_or(|m| m.timestamp < target_ms)
            {
                continue;
            }
            if let Some(found) =
                segment.find_offset_by_timestamp(target_ms, self.log_start_offset)?
            {
                return Ok(Some((found.offset, found.timestamp)));
            }
        }
        Ok(None)
    }

    /// KIP-734 (ListOffsets -3): (offset, timestamp) of the first record carrying the
    /// largest timestamp in the log, or None when no batch has a timestamp.
    pub fn max_timestamp_offset(&self) -> Result<Option<(i64, i64)>, LogError> {
        // The first segment holding the largest timestamp, as Kafka's `maxBy`.
        let mut latest: Option<(usize, i64)> = None;
        for (i, segment) in self.segments.iter().enumerate() {
            if let Some(max) = segment.max_timestamp() {
                if latest.is_none_or(|(_, best)| max.timestamp > best) {
                    latest = Some((i, max.timestamp));
                }
            }
        }
        let Some((i, _)) = latest else {
            return Ok(None);
        };
        Ok(self.segments[i]
            .offset_of_max_timestamp()?
            .map(|found| (found.offset, found.timestamp)))
    }

    pub(super) fn out_of_range(&self) -> LogError {
        LogError::OffsetOutOfRange {
            log_start_offset: self.log_start_offset,
            log_end_offset: self.log_end_offset,
        }
    }
}
