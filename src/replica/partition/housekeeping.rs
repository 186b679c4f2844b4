//! Keeping a partition's log in shape: the flush policy (flush.messages, flush.ms,
//! a rolled segment) and the flusher's marks, the config the image changes,
//! DeleteRecords, retention and time-based rolls, and cleaning of compacted logs.
//!
//! Invariant: nothing here removes data at or above the high watermark, and the
//! flushed offset only grows.

use std::io;
use std::sync::atomic::Ordering;

use super::{Partition, PartitionError};
use crate::config::defaults::PRODUCER_ID_EXPIRATION_MS_DEFAULT;
use crate::log::cleaner;
use crate::log::{FlushTarget, LogConfig, LogError};

impl Partition {
    /// True, after an append, when flush.messages says this partition must
    /// be fsynced now, or the append rolled a segment.
    pub fn flush_due_after_append(&self) -> bool {
        let flushed = self.flushed_offset();
        let unflushed = self.high_watermark().get() - flushed;
        unflushed >= self.flush_messages.load(Ordering::Relaxed)
            || self.active_segment_base.load(Ordering::Acquire) > flushed
    }

    /// True when flush.ms says this partition must be fsynced now, or a
    /// segment rolled since the last fsync.
    pub fn flush_due(&self, now_ms: i64) -> bool {
        let interval = self.flush_ms.load(Ordering::Relaxed);
        let flushed = self.flushed_offset();
        let rolled = self.active_segment_base.load(Ordering::Acquire) > flushed;
        rolled
            || (self.high_watermark().get() > flushed
                && now_ms.saturating_sub(self.last_flush_ms.load(Ordering::Relaxed)) >= interval)
    }

    /// Called by the flusher after the files of `target` are on disk.
    pub(crate) fn mark_flushed(&self, target: &FlushTarget) {
        let now_ms = self.clock.now_ms();
        let end_offset = target.end_offset;
        let mut guard = self.lock_log();
        if let Some(log) = guard.as_mut() {
            log.mark_flushed(target);
        }
        drop(guard);
        self.flushed_offset.fetch_max(end_offset, Ordering::AcqRel);
        self.last_flush_ms.store(now_ms, Ordering::Relaxed);
    }

    /// Synchronous fsync, for shutdown. Blocking: call it off the runtime.
    pub fn flush_now(&self) -> io::Result<()> {
        self.health.guard(|| {
            let mut guard = self.lock_log();
            if let Some(log) = guard.as_mut() {
                log.flush()?;
                self.flushed_offset
                    .fetch_max(log.log_end_offset(), Ordering::AcqRel);
            }
            Ok(())
        })
    }

    /// DeleteRecords: move the log start offset up to `offset` (-1: the high watermark).
    pub fn delete_records_before(&self, offset: i64) -> Result<i64, PartitionError> {
        if !self.is_leader() {
            return Err(PartitionError::NotLeaderOrFollower);
        }
        let high_watermark = self.high_watermark().get();
        let target = if offset == -1 { high_watermark } else { offset };
        if target < 0 || target > high_watermark {
            let log_start_offset = self.log_start_offset().get();
            return Err(PartitionError::Log(LogError::OffsetOutOfRange {
                log_start_offset,
                log_end_offset: high_watermark,
            }));
        }
        self.with_log(|log| {
            let start = log.delete_records_before(target)?;
            self.publish_offsets(log);
            Ok(start)
        })
    }

    /// Applies a changed config from the metadata image.
    pub fn update(&self, config: &LogConfig, flush: (Option<i64>, Option<i64>)) {
        self.flush_messages
            .store(flush.0.unwrap_or(i64::MAX), Ordering::Relaxed);
        self.flush_ms
            .store(flush.1.unwrap_or(i64::MAX), Ordering::Relaxed);
        let mut guard = self.lock_log();
        if let Some(log) = guard.as_mut() {
            if log.config() != config {
                log.set_config(config.clone());
            }
        }
    }

    /// Time-based roll, retention, and expiry of idle producers
    /// (`producer.id.expiration.ms`, Kafka's default).
    pub fn housekeep(&self, now_ms: i64) -> Result<(), PartitionError> {
        self.with_log(|log| {
            log.maybe_roll(now_ms)?;
            log.apply_retention(now_ms)?;
            log.remove_expired_producers(now_ms, PRODUCER_ID_EXPIRATION_MS_DEFAULT);
            self.publish_offsets(log);
            Ok(())
        })
    }

    /// How dirty the log is, if it is compacted and due for a cleaning.
    pub fn dirty_ratio(&self, now_ms: i64) -> Option<f64> {
        if self.uncleanable.load(Ordering::Acquire) {
            return None;
        }
        self.with_log(|log| Ok(log.cleanable(now_ms)))
            .ok()
            .flatten()
    }

    /// One cleaning of the log (`log::cleaner`): planned and swapped under the
    /// log's lock, read and written without it. A failure of the swap is a
    /// storage failure (the log dir goes offline); any other failure leaves the
    /// log as it was and makes it uncleanable until restart.
    pub fn clean(
        &self,
        dedupe_buffer_bytes: u64,
        now_ms: i64,
        io: &mut dyn FnMut(u64),
    ) -> Result<Option<cleaner::CleaningStats>, PartitionError> {
        let Some(plan) =
            self.with_log(|log| log.cleaning_plan(now_ms).map_err(PartitionError::Storage))?
        else {
            return Ok(None);
        };
        let mut swap_failure = None;
        let result = cleaner::clean(&plan, dedupe_buffer_bytes, now_ms, io, &mut |group| {
            self.with_log(|log| {
                log.swap_cleaned(&group, now_ms)
                    .map_err(PartitionError::Storage)
            })
            .map_err(|error| {
                let text = error.to_string();
                swap_failure = Some(error);
                io::Error::other(text)
            })
        });
        if let Some(error) = swap_failure {
            return Err(error);
        }
        match result {
            Ok(stats) => {
                self.with_log(|log| {
                    log.set_first_dirty_offset(stats.end_offset);
                    Ok(())
                })?;
                Ok(Some(stats))
            }
            Err(error) => {
                tracing::error!(partition = %self.tp, %error, "compaction failed; the log is not cleaned again until restart");
                self.uncleanable.store(true, Ordering::Release);
                let _ = cleaner::abandon(&plan.dir);
                Ok(None)
            }
        }
    }
}
