//! The follower's side of replication, after Kafka's `UnifiedLog.appendAsFollower`:
//! batches fetched from the leader are written as they are (the leader's offsets,
//! leader epochs, timestamps and bytes, never re-assigned), the leader epoch cache
//! learns each new epoch at the first batch that carries it, and the producer state
//! and transaction index follow the batches as a replay would. Also the high
//! watermark the replica layer decides, kept here so that retention never deletes
//! above it and the log dir's `replication-offset-checkpoint` can record it.

use bytes::Bytes;

use super::PartitionLog;
use crate::log::batch::{self, BatchHeader};
use crate::log::segment::RELATIVE_OFFSET_MAX;
use crate::log::{LogError, ReplicatedAppend};
use crate::types::Offset;

impl PartitionLog {
    /// Appends batches a leader sent, unchanged. The first must start at the log end
    /// offset or after it, and each later one after the one before it (Kafka's offset
    /// monotonicity check; a gap is allowed, as compaction leaves them). Every batch's header, length
    /// and CRC32C are checked before anything is written; nothing is written if one
    /// fails. Returns the offsets appended, or None for an empty record set.
    pub fn append_as_follower(
        &mut self,
        records: &Bytes,
        now_ms: i64,
    ) -> Result<Option<ReplicatedAppend>, LogError> {
        let batches = self.check_replicated(records)?;
        let (Some(first), Some(last)) = (batches.first(), batches.last()) else {
            return Ok(None);
        };
        let first_offset = first.1.base_offset;
        let last_offset = last.1.last_offset();
        // One write per run of batches of one leader epoch, so that the epoch cache
        // names the first offset of each epoch.
        let mut run_start = 0;
        while run_start < batches.len() {
            let epoch = batches[run_start].1.partition_leader_epoch;
            let run_end = batches[run_start..]
                .iter()
                .position(|(_, h)| h.partition_leader_epoch != epoch)
                .map_or(batches.len(), |n| run_start + n);
            let run = &batches[run_start..run_end];
            let from = run[0].0;
            let to = run[run.len() - 1].0 + run[run.len() - 1].1.size_bytes();
            let relative: Vec<(usize, BatchHeader)> =
                run.iter().map(|(p, h)| (p - from, *h)).collect();
            let run_last = run[run.len() - 1].1.last_offset();
            self.write(&records[from..to], &relative, run_last, epoch, now_ms)?;
            for (position, header) in run {
                self.replay_replicated_batch(
                    &records[*position..*position + header.size_bytes()],
                    header,
                )?;
            }
            run_start = run_end;
        }
        self.check_invariants();
        Ok(Some(ReplicatedAppend {
            first_offset: Offset::new(first_offset),
            last_offset: Offset::new(last_offset),
        }))
    }

    /// Each batch of a replicated record set with its position, checked: a whole v2
    /// header, a sane length, the CRC, offsets that only grow from the log end.
    fn check_replicated(&self, records: &[u8]) -> Result<Vec<(usize, BatchHeader)>, LogError> {
        let mut batches = Vec::new();
        let mut position = 0;
        let mut next_offset = self.log_end_offset;
        while position < records.len() {
            let rest = &records[position..];
            let header = BatchHeader::parse_prefix(rest).ok_or_else(|| {
                LogError::CorruptMessage(format!(
                    "{} trailing bytes of a replicated record set are not a batch",
                    rest.len()
                ))
            })?;
            header.check_stored().map_err(LogError::from)?;
            let size = header.size_bytes();
            if size > rest.len() {
                return Err(LogError::CorruptMessage(format!(
                    "replicated batch of {size} bytes is cut short: {} bytes left",
                    rest.len()
                )));
            }
            batch::check_crc(&rest[..size], &header).map_err(LogError::from)?;
            if header.base_offset < next_offset {
                return Err(LogError::InvalidRecord(format!(
                    "replicated batch at offset {} does not follow offset {}",
                    header.base_offset,
                    next_offset - 1
                )));
            }
            next_offset = header.last_offset().saturating_add(1);
            batches.push((position, header));
            position += size;
        }
        // Offsets a segment can index from the log end: a peer's batch far beyond it
        // (or at the end of the offset range) is refused, never written or overflowed.
        if let Some((_, last)) = batches.last() {
            let span = last.last_offset().saturating_sub(self.log_end_offset);
            if last.last_offset() == i64::MAX || span > RELATIVE_OFFSET_MAX {
                return Err(LogError::CorruptMessage(format!(
                    "replicated batches end at offset {}, too far past the log end {}",
                    last.last_offset(),
                    self.log_end_offset
                )));
            }
        }
        Ok(batches)
    }

    /// The high watermark this log keeps for retention and the checkpoint; the replica
    /// layer decides it.
    pub fn high_watermark(&self) -> i64 {
        self.high_watermark
    }

    /// Records the high watermark the replica layer computed, kept within the log's
    /// offsets: never above the log end, never below the log start.
    pub fn set_high_watermark(&mut self, high_watermark: i64) {
        self.high_watermark = high_watermark
            .min(self.log_end_offset)
            .max(self.log_start_offset);
    }

    /// Kafka's `maybeIncrementLogStartOffset` on a follower: the leader's log start
    /// offset, once it is past this log's, moves this one (never past the high
    /// watermark, never back).
    pub fn follow_log_start_offset(
        &mut self,
        leader_log_start_offset: i64,
    ) -> Result<(), LogError> {
        let target = leader_log_start_offset.min(self.high_watermark);
        if target > self.log_start_offset {
            self.delete_records_before(target)?;
        }
        Ok(())
    }

    /// Empties the log and restarts it at `offset`, as a follower whose fetch offset the
    /// leader no longer holds does (its log start offset moved past it).
    pub fn truncate_fully_and_restart_at(&mut self, offset: i64) -> Result<(), LogError> {
        if offset < 0 {
            return Err(self.out_of_range());
        }
        self.truncate_fully_and_start_at(offset)
    }

    /// Kafka's `LeaderEpochFileCache.assign` on becoming leader: the new epoch starts
    /// at the log end offset, so OffsetForLeaderEpoch and DivergingEpoch answer with
    /// it before the first append of the epoch. Writes the checkpoint (fsynced).
    pub fn assign_leader_epoch_start(&mut self, leader_epoch: i32) -> Result<(), LogError> {
        let offset = self.log_end_offset;
        self.maybe_assign_epoch(leader_epoch, offset)
    }
}
