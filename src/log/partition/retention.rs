//! Removing data: DeleteRecords, time and size retention, and truncation. Whole
//! segments are deleted; the log start offset moves first in memory, so a failure
//! while deleting files never exposes data the caller asked to remove.

use super::PartitionLog;
use crate::log::checkpoint::sync_dir;
use crate::log::segment::Segment;
use crate::log::LogError;

impl PartitionLog {
    /// DeleteRecords: moves the log start offset up to `offset` (the caller has checked
    /// it against the high watermark) and deletes the segments wholly below it.
    /// Returns the new log start offset.
    pub fn delete_records_before(&mut self, offset: i64) -> Result<i64, LogError> {
        if offset > self.log_end_offset {
            return Err(self.out_of_range());
        }
        if offset <= self.log_start_offset {
            return Ok(self.log_start_offset);
        }
        self.log_start_offset = offset;
        self.high_watermark = self.high_watermark.max(offset);
        self.epochs.truncate_from_start(offset)?;
        // As Kafka: a segment goes when the next one starts at or below the log start.
        let below = (1..self.segments.len())
            .take_while(|&i| self.segments[i].base_offset() <= offset)
            .count();
        self.delete_oldest_segments(below)?;
        self.on_log_start_offset_moved()?;
        self.check_invariants();
        Ok(self.log_start_offset)
    }

    /// Retention: deletes the oldest non-active segments whose largest timestamp is
    /// more than `retention.ms` before `now_ms`, then the oldest non-active segments
    /// while the log is larger than `retention.bytes`. Returns the segments deleted.
    pub fn apply_retention(&mut self, now_ms: i64) -> Result<usize, LogError> {
        // A compacted log keeps its keys however old or large (`compact` alone).
        if !self.config.cleanup.delete {
            return Ok(0);
        }
        let expired = self.segments_past_retention_ms(now_ms);
        let mut deleted = self.delete_oldest_segments(expired)?;
        let excess = self.segments_past_retention_bytes();
        deleted += self.delete_oldest_segments(excess)?;
        self.check_invariants();
        Ok(deleted)
    }

    /// Truncates the log so its end is `offset`: drops the batch holding `offset` and
    /// all after it (offsets mid-batch end the log at that batch's base offset). Below
    /// the first segment, the log is emptied and restarted at `offset`.
    pub fn truncate_to(&mut self, offset: i64) -> Result<(), LogError> {
        if offset < 0 {
            return Err(self.out_of_range());
        }
        if offset >= self.log_end_offset {
            // No record goes, but an epoch may start at the log end with none in
            // it: this broker led that epoch and lost it before its first append.
            // A leader that never knew the epoch answers with a diverging epoch
            // ending here; kept, the epoch would be asked with again and again
            // (Kafka's `UnifiedLog.truncateTo` forgets it the same way).
            self.epochs.truncate_from_end(self.log_end_offset)?;
            return Ok(());
        }
        if offset < self.segments[0].base_offset() {
            return self.truncate_fully_and_start_at(offset);
        }
        // Later segments go first, so a crash midway cannot leave them behind a gap.
        let keep = self.segment_index_for(offset) + 1;
        for segment in self.segments.split_off(keep) {
            segment.delete()?;
        }
        let index_interval_bytes = self.config.index_interval_bytes;
        self.active_mut().pin()?;
        self.active_mut()
            .truncate_to(offset, index_interval_bytes)?;
        self.sync_truncation()?;
        self.log_end_offset = self.active().next_offset();
        self.log_start_offset = self.log_start_offset.min(self.log_end_offset);
        self.recovery_point = self.recovery_point.min(self.log_end_offset);
        self.high_watermark = self.high_watermark.min(self.log_end_offset);
        self.note_truncation();
        self.epochs.truncate_from_end(self.log_end_offset)?;
        // The producer state goes back to the newest snapshot at or below the new end
        // and is replayed from there; the segment's transaction index was truncated
        // with it, so no index entry is rewritten.
        let above: Vec<i64> = self
            .snapshots
            .range(self.log_end_offset + 1..)
            .copied()
            .collect();
        self.delete_snapshots(&above)?;
        sync_dir(&self.dir)?;
        self.rebuild_producer_state(self.log_end_offset, None)?;
        self.check_invariants();
        Ok(())
    }

    /// Replaces every segment with one empty segment at `offset`.
    pub(super) fn truncate_fully_and_start_at(&mut self, offset: i64) -> Result<(), LogError> {
        // No clock here: the fresh segment inherits the age of the active one.
        let fresh = Segment::create(
            &self.dir,
            offset,
            self.active().created_ms(),
            &self.open_files,
        )?;
        let old = std::mem::replace(&mut self.segments, vec![fresh]);
        self.log_start_offset = offset;
        self.log_end_offset = offset;
        self.recovery_point = offset;
        self.high_watermark = offset;
        self.note_truncation();
        self.epochs.clear()?;
        self.clear_producer_state()?;
        for segment in old {
            segment.delete()?;
        }
        self.sync_truncation()?;
        self.check_invariants();
        Ok(())
    }

    /// Truncation is made durable before it returns (it is rare): otherwise a power
    /// loss could bring the dropped batches back, valid, for recovery to keep.
    fn sync_truncation(&mut self) -> Result<(), LogError> {
        self.active_mut().sync_now()?;
        sync_dir(&self.dir)?;
        Ok(())
    }

    fn segments_past_retention_ms(&self, now_ms: i64) -> usize {
        let retention_ms = self.config.retention_ms;
        if retention_ms < 0 {
            return 0;
        }
        self.inactive_segments()
            .iter()
            .take_while(|s| now_ms.saturating_sub(s.largest_timestamp_ms()) > retention_ms)
            .count()
    }

    fn segments_past_retention_bytes(&self) -> usize {
        let retention_bytes = self.config.retention_bytes;
        if retention_bytes < 0 {
            return 0;
        }
        let mut excess = self.size_bytes() as i64 - retention_bytes;
        self.inactive_segments()
            .iter()
            .take_while(|s| {
                let fits = excess - s.size_bytes() as i64 >= 0;
                if fits {
                    excess -= s.size_bytes() as i64;
                }
                fits
            })
            .count()
    }

    /// The segments retention may delete: never the active one, and only those wholly
    /// below the high watermark (Kafka's rule: nothing not yet committed goes).
    fn inactive_segments(&self) -> &[Segment] {
        let below_high_watermark = (1..self.segments.len())
            .take_while(|&i| self.segments[i].base_offset() <= self.high_watermark)
            .count();
        &self.segments[..below_high_watermark]
    }

    /// Deletes the `count` oldest segments (never the active one) and moves the log
    /// start offset to the first remaining segment when that is further on.
    fn delete_oldest_segments(&mut self, count: usize) -> Result<usize, LogError> {
        if count == 0 {
            return Ok(0);
        }
        assert!(
            count < self.segments.len(),
            "the active segment is never deleted whole"
        );
        let removed: Vec<Segment> = self.segments.drain(..count).collect();
        let first_base_offset = self.segments[0].base_offset();
        let advanced = first_base_offset > self.log_start_offset;
        if advanced {
            self.log_start_offset = first_base_offset;
            self.high_watermark = self.high_watermark.max(first_base_offset);
        }
        for segment in removed {
            tracing::debug!(tp = %self.tp, base_offset = segment.base_offset(), "deleting segment");
            segment.delete()?;
        }
        if advanced {
            self.epochs.truncate_from_start(first_base_offset)?;
            self.on_log_start_offset_moved()?;
        }
        Ok(count)
    }
}
