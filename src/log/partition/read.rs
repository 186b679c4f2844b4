//! Fetch and ListOffsets lookups. Reads take `&self`: they only locate bytes and hand
//! out `FileSlice`s, which the broker reads after releasing the partition lock.

use super::PartitionLog;
use crate::log::{IsolationLevel, LogError, LogRead};
use crate::types::Offset;

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
        Ok(self
            .read_bounded(fetch_offset, max_bytes, max_offset, min_one_batch)?
            .0)
    }

    /// A consumer's read at `isolation`: read_uncommitted reads up to
    /// `high_watermark`; read_committed up to the last stable offset, with the aborted
    /// transactions overlapping the batches read (Kafka's `collectAbortedTransactions`,
    /// bounded by the offset right after the last batch read).
    pub fn read_isolated(
        &self,
        fetch_offset: i64,
        max_bytes: usize,
        high_watermark: i64,
        min_one_batch: bool,
        isolation: IsolationLevel,
    ) -> Result<LogRead, LogError> {
        match isolation {
            IsolationLevel::ReadUncommitted => {
                self.read(fetch_offset, max_bytes, high_watermark, min_one_batch)
            }
            IsolationLevel::ReadCommitted => {
                let last_stable_offset = self.last_stable_offset(high_watermark);
                let (mut answer, upper_bound) =
                    self.read_bounded(fetch_offset, max_bytes, last_stable_offset, min_one_batch)?;
                answer.aborted_transactions = Some(match upper_bound {
                    Some(upper_bound) => self.aborted_transactions(fetch_offset, upper_bound),
                    None => Vec::new(),
                });
                Ok(answer)
            }
        }
    }

    /// `read`, with the offset right after the last batch read when there is one.
    fn read_bounded(
        &self,
        fetch_offset: i64,
        max_bytes: usize,
        max_offset: i64,
        min_one_batch: bool,
    ) -> Result<(LogRead, Option<i64>), LogError> {
        if fetch_offset < self.log_start_offset || fetch_offset > self.log_end_offset {
            return Err(self.out_of_range());
        }
        let mut answer = LogRead {
            records: None,
            log_start_offset: Offset::new(self.log_start_offset),
            log_end_offset: Offset::new(self.log_end_offset),
            aborted_transactions: None,
        };
        let mut upper_bound = None;
        if fetch_offset >= self.log_end_offset || fetch_offset >= max_offset {
            return Ok((answer, upper_bound));
        }
        // The segment whose range holds the offset; move on only when the offset lies
        // past its last batch (a gap left by recovery or compaction, or a segment
        // compaction emptied), never because of the bounds.
        for i in self.segment_index_for(fetch_offset)..self.segments.len() {
            let segment = &self.segments[i];
            if fetch_offset >= segment.next_offset() || segment.is_empty() {
                continue;
            }
            answer.records = segment.read(fetch_offset, max_bytes, max_offset, min_one_batch)?;
            if let Some(slice) = &answer.records {
                upper_bound = Some(segment.offset_at_boundary(slice.position + slice.len as u64)?);
            }
            break;
        }
        Ok((answer, upper_bound))
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
