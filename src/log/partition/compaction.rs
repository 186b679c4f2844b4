//! The partition's side of compaction (`log::cleaner` does the work): what is
//! cleanable and how dirty it is, the plan handed to the cleaner, and the swap of
//! a cleaned group under the partition's lock.

use std::collections::HashMap;
use std::io;
use std::sync::Arc;

use super::PartitionLog;
use crate::log::cleaner::{self, CleanedGroup, CleaningPlan, PlannedSegment};
use crate::log::segment::Segment;

impl PartitionLog {
    /// Kafka's cleaner checkpoint: where the dirty section starts.
    pub fn first_dirty_offset(&self) -> i64 {
        self.first_dirty_offset.max(self.log_start_offset)
    }

    /// Kafka's `firstUncleanableOffset`: no record at or above the active segment,
    /// the high watermark, the first unstable offset or the first segment younger
    /// than `min.compaction.lag.ms` is compacted.
    fn first_uncleanable_offset(&self, now_ms: i64) -> i64 {
        let mut offset = self
            .active()
            .base_offset()
            .min(self.high_watermark)
            .min(self.first_unstable_offset().unwrap_or(i64::MAX));
        let lag = self.config.min_compaction_lag_ms;
        if lag > 0 {
            if let Some(young) = self
                .segments
                .iter()
                .find(|s| now_ms.saturating_sub(s.largest_timestamp_ms()) <= lag)
            {
                offset = offset.min(young.base_offset());
            }
        }
        offset.max(self.log_start_offset)
    }

    /// The share of the cleanable bytes not compacted yet, and whether the log is
    /// due for a cleaning: a compacted log with dirty bytes whose ratio reached
    /// `min.cleanable.dirty.ratio`, or whose oldest dirty segment is older than
    /// `max.compaction.lag.ms`.
    pub fn cleanable(&self, now_ms: i64) -> Option<f64> {
        if !self.config.cleanup.compact {
            return None;
        }
        let first_dirty = self.first_dirty_offset();
        let first_uncleanable = self.first_uncleanable_offset(now_ms);
        if first_dirty >= first_uncleanable {
            return None;
        }
        let mut clean_bytes = 0;
        let mut dirty_bytes = 0;
        let mut oldest_dirty_age_ms = 0;
        for (i, segment) in self.segments.iter().enumerate() {
            let end = self.segment_end_offset(i);
            if segment.base_offset() < first_dirty {
                clean_bytes += segment.size_bytes();
            } else if end > first_dirty && segment.base_offset() < first_uncleanable {
                dirty_bytes += segment.size_bytes();
                oldest_dirty_age_ms = oldest_dirty_age_ms.max(segment.rolling_age_ms(now_ms));
            }
        }
        if dirty_bytes == 0 {
            return None;
        }
        let ratio = dirty_bytes as f64 / (clean_bytes + dirty_bytes) as f64;
        let due = ratio >= self.config.min_cleanable_dirty_ratio
            || oldest_dirty_age_ms > self.config.max_compaction_lag_ms;
        due.then_some(ratio)
    }

    /// What the cleaner needs, when the log is due (`cleanable`).
    /// The planned segments' files are opened here (those the cache closed),
    /// so that the cleaner reads them as they are now, whatever retention
    /// deletes meanwhile.
    pub fn cleaning_plan(&self, now_ms: i64) -> io::Result<Option<CleaningPlan>> {
        if self.cleanable(now_ms).is_none() {
            return Ok(None);
        }
        let first_uncleanable = self.first_uncleanable_offset(now_ms);
        let segments = (0..self.segments.len() - 1)
            .filter(|&i| self.segments[i].base_offset() < first_uncleanable)
            .map(|i| {
                let segment = &self.segments[i];
                Ok(PlannedSegment {
                    base_offset: segment.base_offset(),
                    end_offset: self.segment_end_offset(i),
                    log: segment.log_file()?,
                    file_id: segment.file_id(),
                    size_bytes: segment.size_bytes(),
                    largest_timestamp_ms: segment.largest_timestamp_ms(),
                })
            })
            .collect::<io::Result<_>>()?;
        let aborted = self
            .segments
            .iter()
            .flat_map(|s| s.aborted_txns().iter().copied())
            .collect();
        let producer_last_offsets: HashMap<i64, i64> = self
            .producers
            .entries()
            .into_iter()
            .map(|entry| (entry.producer_id, entry.last_data_offset()))
            .collect();
        Ok(Some(CleaningPlan {
            dir: self.dir.clone(),
            open_files: Arc::clone(&self.open_files),
            config: self.config.clone(),
            segments,
            first_dirty_offset: self.first_dirty_offset(),
            first_uncleanable_offset: first_uncleanable,
            aborted,
            producer_last_offsets,
        }))
    }

    /// Swaps a cleaned group in for the segments it replaces, if they still stand
    /// as planned (same base offsets, same files, none of them active); otherwise
    /// drops it and answers false.
    pub fn swap_cleaned(&mut self, group: &CleanedGroup, now_ms: i64) -> io::Result<bool> {
        let first = self
            .segments
            .iter()
            .position(|s| s.base_offset() == group.base_offset);
        let unchanged = first.is_some_and(|first| {
            let last = first + group.replaced.len();
            last < self.segments.len()
                && self.segment_end_offset(last - 1) == group.end_offset
                && self.segments[first..last].iter().zip(&group.replaced).all(
                    |(segment, (base, file_id))| {
                        segment.base_offset() == *base && segment.file_id() == *file_id
                    },
                )
        });
        let Some(first) = first.filter(|_| unchanged) else {
            cleaner::abandon(&self.dir)?;
            return Ok(false);
        };
        cleaner::commit_swap(&self.dir)?;
        let loaded = Segment::open_trusted(
            &self.dir,
            group.base_offset,
            self.config.index_interval_bytes,
            now_ms,
            &self.open_files,
        )?;
        let replaced: Vec<Segment> = self
            .segments
            .splice(first..first + group.replaced.len(), [loaded.segment])
            .collect();
        drop(replaced);
        self.check_invariants();
        Ok(true)
    }

    /// Records where the cleaner's last run ended.
    pub fn set_first_dirty_offset(&mut self, offset: i64) {
        self.first_dirty_offset = offset.clamp(self.log_start_offset, self.log_end_offset);
    }
}
