//! The follower's side of a partition: where it fetches from next, the appends
//! of what its leader sent (with the leader's high watermark and log start
//! offset), and the truncations that bring its log back to the leader's.
//!
//! Invariant: none of these runs while this broker leads the partition (each
//! checks under the log's lock), so a leader's log is never truncated and never
//! takes records it did not assign; a follower's high watermark never passes its
//! own log end offset.

use bytes::Bytes;

use super::{EpochEndOffset, FetchPosition, Partition, PartitionError};
use crate::types::{LeaderEpoch, Offset};

impl Partition {
    /// A follower's next fetch position.
    pub fn fetch_position(&self) -> Result<FetchPosition, PartitionError> {
        self.with_log(|log| {
            Ok(FetchPosition {
                fetch_offset: Offset::new(log.log_end_offset()),
                last_fetched_epoch: log.latest_epoch().and_then(LeaderEpoch::known),
                log_start_offset: Offset::new(log.log_start_offset()),
                leader_epoch: self.leader_epoch(),
            })
        })
    }

    /// A follower's append of what its leader sent, then the leader's high watermark
    /// (capped by this log's end) and log start offset. Blocking.
    pub fn append_as_follower(
        &self,
        records: &Bytes,
        leader_high_watermark: i64,
        leader_log_start_offset: i64,
    ) -> Result<(), PartitionError> {
        let now_ms = self.clock.now_ms();
        self.with_log(|log| {
            if self.lock_replication().is_leader() {
                return Err(PartitionError::NotLeaderOrFollower);
            }
            if !records.is_empty() {
                log.append_as_follower(records, now_ms)?;
            }
            let high_watermark = leader_high_watermark.min(log.log_end_offset());
            if high_watermark > log.high_watermark() {
                log.set_high_watermark(high_watermark);
            }
            log.follow_log_start_offset(leader_log_start_offset)?;
            self.publish_offsets(log);
            Ok(())
        })?;
        self.wake_fetchers();
        Ok(())
    }

    /// A follower truncates its log to `offset` (DivergingEpoch, or a leader whose log
    /// ends before this one's). Blocking.
    ///
    /// Not asserted: that this stays at or above the high watermark. With clean
    /// elections it does (the new leader holds every committed record), but after
    /// an unclean election, or when every eligible replica restarted uncleanly and
    /// the last known one leads, the new leader may lack committed records and the
    /// follower must truncate below its high watermark to follow it, as Kafka's
    /// does. Both come with a new leader epoch.
    pub fn truncate_to(&self, offset: i64) -> Result<(), PartitionError> {
        self.with_log(|log| {
            if self.lock_replication().is_leader() {
                return Err(PartitionError::NotLeaderOrFollower);
            }
            if offset < log.log_end_offset() {
                tracing::info!(partition = %self.tp, from = log.log_end_offset(), to = offset, "truncating to the leader's log");
            }
            log.truncate_to(offset)?;
            self.publish_offsets(log);
            Ok(())
        })
    }

    /// A follower whose fetch offset the leader no longer holds restarts its log empty
    /// at the leader's log start offset. Blocking.
    pub fn truncate_fully_and_restart_at(&self, offset: i64) -> Result<(), PartitionError> {
        self.with_log(|log| {
            if self.lock_replication().is_leader() {
                return Err(PartitionError::NotLeaderOrFollower);
            }
            tracing::info!(partition = %self.tp, offset, "restarting the log at the leader's log start offset");
            log.truncate_fully_and_restart_at(offset)?;
            self.publish_offsets(log);
            Ok(())
        })
    }

    /// A follower's answer to DivergingEpoch from its leader: the offset to truncate
    /// to, as Kafka's KIP-595 follower computes it (its own end of that epoch, or of
    /// the largest epoch below it, and never past the leader's).
    pub fn truncation_offset(&self, diverging: EpochEndOffset) -> Result<i64, PartitionError> {
        let end_offset = diverging.end_offset.get();
        self.with_log(|log| {
            let (_, own_end) = log.end_offset_for_epoch(diverging.epoch.get());
            let target = if own_end >= 0 {
                own_end.min(end_offset)
            } else {
                end_offset
            };
            Ok(target.min(log.log_end_offset()))
        })
    }
}
