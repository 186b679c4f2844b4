//! `PartitionLog`: one partition's segments, offsets and leader epoch cache.
//!
//! Owned by one mutex in the broker; every method runs under it and none blocks on
//! an fsync except `flush`, `create` and the rare epoch checkpoint writes. Invariants
//! (checked by `check_invariants` after each mutation): there is always at least one
//! segment; segments are sorted by base offset and their offsets do not overlap; `log_end_offset` is the active segment's
//! next offset; `log_start_offset <= log_end_offset`; `recovery_point <=
//! log_end_offset`.

mod append;
mod compaction;
mod load;
mod producers;
mod read;
mod replication;
mod retention;

use std::collections::BTreeSet;
use std::fs::File;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use uuid::Uuid;

use super::epoch::LeaderEpochCache;
use super::open_files::OpenFiles;
use super::producer_state::ProducerStateManager;
use super::segment::Segment;
use super::{partition_metadata, FlushTarget, LogConfig};
use crate::limits::UNSYNCED_SEGMENT_FILES_OPEN_MAX;
use crate::types::TopicPartition;

pub use load::LoadOptions;

pub struct PartitionLog {
    tp: TopicPartition,
    topic_id: Uuid,
    dir: PathBuf,
    config: LogConfig,
    segments: Vec<Segment>,
    log_start_offset: i64,
    log_end_offset: i64,
    recovery_point: i64,
    /// The high watermark the replica layer decided (Kafka's): retention never deletes
    /// at or above it, and the log dir's `replication-offset-checkpoint` records it.
    /// Always within `[log_start_offset, log_end_offset]`.
    high_watermark: i64,
    /// The lowest log end a truncation left since the last `mark_flushed`. Offsets at
    /// and above it may have been rewritten after a flush target was taken, so that
    /// flush cannot vouch for them.
    truncated_end: Option<i64>,
    epochs: LeaderEpochCache,
    /// Idempotent and transactional producers, as of the log end offset.
    producers: ProducerStateManager,
    /// Offsets of the producer state snapshot files in `dir`.
    snapshots: BTreeSet<i64>,
    /// Snapshot files written but not yet fsynced; the next flush target syncs them
    /// (and the directory that names them).
    unsynced_snapshots: Vec<Arc<File>>,
    /// Kafka's cleaner checkpoint: below it the log was compacted (and is clean),
    /// at and above it records are dirty. Meaningful for compacted logs only.
    first_dirty_offset: i64,
    /// Where the last rebuild of the producer state started replaying the log; None
    /// when it replayed nothing. Read by tests only.
    #[cfg_attr(not(test), allow(dead_code))]
    producer_replay_start: Option<i64>,
    /// The log dir's cache of idle segment files, for the segments this log creates.
    open_files: Arc<OpenFiles>,
}

impl PartitionLog {
    /// Creates an empty log in the new directory `dir`: `partition.metadata` first
    /// (fsynced), then an empty segment at offset 0.
    pub(crate) fn create(
        dir: &Path,
        tp: TopicPartition,
        topic_id: Uuid,
        config: LogConfig,
        now_ms: i64,
        open_files: &Arc<OpenFiles>,
    ) -> io::Result<PartitionLog> {
        partition_metadata::write(dir, topic_id)?;
        let segment = Segment::create(dir, 0, now_ms, open_files)?;
        let log = PartitionLog {
            tp,
            topic_id,
            dir: dir.to_path_buf(),
            config,
            segments: vec![segment],
            log_start_offset: 0,
            log_end_offset: 0,
            recovery_point: 0,
            high_watermark: 0,
            truncated_end: None,
            epochs: LeaderEpochCache::load(dir)?,
            producers: ProducerStateManager::new(),
            snapshots: BTreeSet::new(),
            unsynced_snapshots: Vec::new(),
            first_dirty_offset: 0,
            producer_replay_start: None,
            open_files: Arc::clone(open_files),
        };
        log.check_invariants();
        Ok(log)
    }

    pub fn topic_partition(&self) -> &TopicPartition {
        &self.tp
    }

    pub fn topic_id(&self) -> Uuid {
        self.topic_id
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    pub fn config(&self) -> &LogConfig {
        &self.config
    }

    /// Takes effect from the next call: the next append's roll check, the next
    /// retention pass.
    pub fn set_config(&mut self, config: LogConfig) {
        self.config = config;
    }

    pub fn log_start_offset(&self) -> i64 {
        self.log_start_offset
    }

    /// The next offset to be assigned.
    pub fn log_end_offset(&self) -> i64 {
        self.log_end_offset
    }

    /// Every offset below it has been fsynced.
    pub fn recovery_point(&self) -> i64 {
        self.recovery_point
    }

    pub fn size_bytes(&self) -> u64 {
        self.segments.iter().map(Segment::size_bytes).sum()
    }

    pub fn segment_count(&self) -> usize {
        self.segments.len()
    }

    /// Base offsets of the segments, oldest first.
    pub fn segment_base_offsets(&self) -> Vec<i64> {
        self.segments.iter().map(Segment::base_offset).collect()
    }

    pub fn latest_epoch(&self) -> Option<i32> {
        self.epochs.latest_epoch()
    }

    /// The leader epoch cache, oldest epoch first.
    pub fn leader_epoch_entries(&self) -> &[super::EpochEntry] {
        self.epochs.entries()
    }

    /// The leader epoch of the batch holding `offset`, as the epoch cache says (Kafka's
    /// `epochForOffset`, what ListOffsets answers since KIP-320).
    pub fn epoch_for_offset(&self, offset: i64) -> Option<i32> {
        self.epochs.epoch_for_offset(offset)
    }

    /// OffsetForLeaderEpoch, as Kafka's `LeaderEpochFileCache.endOffsetFor`.
    pub fn end_offset_for_epoch(&self, leader_epoch: i32) -> (i32, i64) {
        self.epochs
            .end_offset_for(leader_epoch, self.log_end_offset)
    }

    /// The files to fsync so that every offset below `end_offset` is durable: those of
    /// each segment holding offsets at or above the recovery point, and the partition
    /// dir when one of them was created since (its directory entry must be durable too).
    pub fn flush_target(&self) -> io::Result<FlushTarget> {
        let mut files = Vec::new();
        let mut index_writes = Vec::new();
        let mut new_segment = false;
        for (i, segment) in self.segments.iter().enumerate() {
            let end = self.segment_end_offset(i);
            if end <= self.recovery_point || segment.is_empty() {
                continue;
            }
            files.extend(segment.files()?);
            index_writes.extend(segment.index_writes());
            new_segment |= segment.base_offset() >= self.recovery_point;
        }
        files.extend(self.unsynced_snapshots.iter().cloned());
        let dir = (new_segment || !self.unsynced_snapshots.is_empty()).then(|| self.dir.clone());
        Ok(FlushTarget {
            files,
            index_writes,
            dir,
            end_offset: self.log_end_offset,
        })
    }

    /// Records that the files of a `flush_target` returning `end_offset` were fsynced.
    /// Flushes of one log are expected one at a time. When the log was truncated since,
    /// only offsets below the truncation count as flushed; the next flush covers the rest.
    pub fn mark_flushed(&mut self, target: &FlushTarget) {
        self.unsynced_snapshots
            .retain(|file| !target.files.iter().any(|synced| Arc::ptr_eq(synced, file)));
        for segment in &mut self.segments {
            segment.indexes_written(&target.index_writes);
        }
        let end_offset = target.end_offset;
        let mut flushed = end_offset.min(self.log_end_offset);
        if let Some(truncated_end) = self.truncated_end.take() {
            flushed = flushed.min(truncated_end);
        }
        if flushed > self.recovery_point {
            self.recovery_point = flushed;
        }
        self.release_idle_files();
    }

    /// Hands the files of every segment that is neither active nor holding
    /// offsets at or above the recovery point (data not yet fsynced) to the
    /// cache of open files.
    pub(super) fn release_idle_files(&mut self) {
        let idle = self.segments.len() - 1;
        for i in 0..idle {
            if self.segments[i].is_pinned() && self.segment_end_offset(i) <= self.recovery_point {
                self.segments[i].unpin();
            }
        }
    }

    /// Unpins the older idle segments still holding unsynced data beyond
    /// `UNSYNCED_SEGMENT_FILES_OPEN_MAX`, so that segments rolling faster than
    /// fsyncs complete (a tiny segment.bytes) do not pile up descriptors.
    /// Their fsync opens the file again: Linux (since 4.16) reports a write
    /// error no descriptor has seen yet to one opened after it.
    fn bound_unsynced_files(&mut self) {
        let mut kept = 0;
        for i in (0..self.segments.len() - 1).rev() {
            if self.segment_end_offset(i) <= self.recovery_point {
                break;
            }
            if self.segments[i].is_pinned() {
                if kept < UNSYNCED_SEGMENT_FILES_OPEN_MAX {
                    kept += 1;
                } else {
                    self.segments[i].unpin();
                }
            }
        }
    }

    /// Where the active segment starts: offsets below it are in rolled segments.
    pub fn active_segment_base(&self) -> i64 {
        self.active().base_offset()
    }

    /// How many of its segments keep their files open (the cache's are the
    /// log dir's). Read by tests only.
    #[cfg(test)]
    pub fn pinned_segments(&self) -> usize {
        self.segments.iter().filter(|s| s.is_pinned()).count()
    }

    /// `flush_target`, fsync and `mark_flushed`, all under the caller's lock, then a
    /// producer state snapshot at the log end (so a restart after a clean shutdown
    /// replays nothing).
    pub fn flush(&mut self) -> io::Result<()> {
        let target = self.flush_target()?;
        target.sync()?;
        // Nothing can truncate between this target and its sync, so the whole of it
        // counts, whatever truncation an earlier, slower flush may still be waiting on.
        self.truncated_end = None;
        self.mark_flushed(&target);
        self.take_producer_snapshot()?;
        let snapshot = self.flush_target()?;
        snapshot.sync()?;
        self.mark_flushed(&snapshot);
        Ok(())
    }

    /// What the log dir's checkpoints record of this log.
    pub fn checkpointed_offsets(&self) -> super::CheckpointedOffsets {
        super::CheckpointedOffsets {
            tp: self.tp.clone(),
            recovery_point: self.recovery_point,
            log_start_offset: self.log_start_offset,
            high_watermark: self.high_watermark,
            first_dirty_offset: self
                .config
                .cleanup
                .compact
                .then_some(self.first_dirty_offset),
        }
    }

    /// Offsets appended but not yet fsynced.
    pub fn unflushed_messages(&self) -> i64 {
        self.log_end_offset - self.recovery_point
    }

    /// One past the last offset segment `i` can hold: the next segment's base offset,
    /// or the log end for the active segment.
    fn segment_end_offset(&self, i: usize) -> i64 {
        self.segments
            .get(i + 1)
            .map_or(self.log_end_offset, Segment::base_offset)
    }

    fn active(&self) -> &Segment {
        self.segments
            .last()
            .expect("a log always has an active segment")
    }

    fn active_mut(&mut self) -> &mut Segment {
        self.segments
            .last_mut()
            .expect("a log always has an active segment")
    }

    /// Index of the segment whose range holds `offset`: the last one with a base
    /// offset <= `offset` (binary search), or the first.
    fn segment_index_for(&self, offset: i64) -> usize {
        self.segments
            .partition_point(|s| s.base_offset() <= offset)
            .saturating_sub(1)
    }

    /// Remembers a truncation for `mark_flushed`.
    fn note_truncation(&mut self) {
        let end = self.log_end_offset;
        self.truncated_end = Some(self.truncated_end.map_or(end, |t| t.min(end)));
    }

    fn check_invariants(&self) {
        assert!(
            !self.segments.is_empty(),
            "a log always has an active segment"
        );
        assert!(
            self.segments
                .windows(2)
                .all(|w| w[0].next_offset() <= w[1].base_offset()),
            "segments must be sorted and must not overlap"
        );
        assert_eq!(
            self.log_end_offset,
            self.active().next_offset(),
            "log end offset is the active segment's end"
        );
        assert!(
            self.log_start_offset <= self.log_end_offset,
            "log start offset beyond log end"
        );
        assert!(
            self.recovery_point <= self.log_end_offset,
            "recovery point beyond log end"
        );
        assert!(
            self.active().is_pinned(),
            "the active segment's file is open"
        );
        assert!(
            self.log_start_offset <= self.high_watermark
                && self.high_watermark <= self.log_end_offset,
            "high watermark {} outside the log [{}, {}]",
            self.high_watermark,
            self.log_start_offset,
            self.log_end_offset
        );
    }
}
