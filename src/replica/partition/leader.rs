//! The leader's side of a partition: appends (producers', coordinators' and
//! transaction markers), the acks=all checks and wait, and the high watermark's
//! advance as the ISR allows, with the ISR changes the leader proposes and settles.
//!
//! Invariant: only the leader appends here (each append checks the leadership under
//! the log's lock), and its high watermark only moves forward, never past its log
//! end offset, and only to an offset every member of the ISR holds.

use bytes::Bytes;

use super::{LeaderAppend, Partition, PartitionError};
use crate::log::{AppendInfo, LogError, PartitionLog, TxnMarker};
use crate::replica::replication::{IsrChange, LeaderAndIsr};
use crate::types::{BrokerEpoch, Offset, VerificationGuard};

impl Partition {
    /// Validates and appends `records` (with the producer-state checks of idempotent
    /// and transactional producers) on the leader, stamped with the leader epoch read
    /// under the log's lock; the high watermark moves as far as the ISR allows (at once
    /// when this broker is the ISR alone), the last stable offset follows, and waiting
    /// fetchers are woken. A retried duplicate writes nothing and answers with its
    /// first offsets.
    pub fn append(&self, records: &Bytes, now_ms: i64) -> Result<LeaderAppend, PartitionError> {
        self.append_with(records, now_ms, PartitionLog::append)
    }

    /// `append` of a coordinator's own batches: their producer's sequence is not
    /// checked (`PartitionLog::append_as_coordinator`).
    pub fn append_as_coordinator(
        &self,
        records: &Bytes,
        now_ms: i64,
    ) -> Result<LeaderAppend, PartitionError> {
        self.append_with(records, now_ms, PartitionLog::append_as_coordinator)
    }

    /// `append` of a client's transactional batches, verified as KIP-890 asks
    /// (`PartitionLog::append_verified`: InvalidTxnState unless the producer's
    /// transaction is open here or `guard` is its verification still under way).
    pub fn append_verified(
        &self,
        records: &Bytes,
        now_ms: i64,
        guard: Option<VerificationGuard>,
    ) -> Result<LeaderAppend, PartitionError> {
        self.append_with(records, now_ms, |log, records, leader_epoch, now_ms| {
            log.append_verified(records, leader_epoch, now_ms, guard)
        })
    }

    /// `append_as_coordinator` of a coordinator's transactional batch, verified
    /// as `append_verified` is.
    pub fn append_as_coordinator_verified(
        &self,
        records: &Bytes,
        now_ms: i64,
        guard: Option<VerificationGuard>,
    ) -> Result<LeaderAppend, PartitionError> {
        self.append_with(records, now_ms, |log, records, leader_epoch, now_ms| {
            log.append_as_coordinator_verified(records, leader_epoch, now_ms, guard)
        })
    }

    /// The producer's verification guard on this leader, to take before its
    /// transaction coordinator is asked (`PartitionLog::start_txn_verification`);
    /// None when its transaction is open here.
    pub fn start_txn_verification(
        &self,
        producer_id: i64,
        now_ms: i64,
    ) -> Result<Option<VerificationGuard>, PartitionError> {
        self.with_log(|log| {
            self.leadership()?;
            Ok(log.start_txn_verification(producer_id, now_ms))
        })
    }

    fn append_with(
        &self,
        records: &Bytes,
        now_ms: i64,
        append: impl FnOnce(&mut PartitionLog, &Bytes, i32, i64) -> Result<AppendInfo, LogError>,
    ) -> Result<LeaderAppend, PartitionError> {
        let appended = self.with_log(|log| {
            let (leader_epoch, generation) = self.leadership()?;
            let info = append(log, records, leader_epoch.get(), now_ms)?;
            self.advance_high_watermark(log);
            self.publish_offsets(log);
            Ok(LeaderAppend { info, generation })
        })?;
        if !appended.info.duplicate {
            self.wake_fetchers();
        }
        Ok(appended)
    }

    /// acks=all, before the append: Kafka refuses when the committed ISR is below
    /// min.insync.replicas.
    pub fn check_enough_replicas(&self) -> Result<(), PartitionError> {
        let state = self.lock_replication();
        if state.isr.len() < state.min_insync_replicas {
            return Err(PartitionError::NotEnoughReplicas);
        }
        Ok(())
    }

    /// acks=all, after the append: resolves once the high watermark reaches
    /// `end_offset` under the leadership `generation` the append was made in (then
    /// NotEnoughReplicasAfterAppend if the ISR fell below min.insync.replicas), or
    /// with NotLeaderOrFollower as soon as that leadership ends.
    pub async fn wait_committed(
        &self,
        end_offset: Offset,
        generation: u64,
    ) -> Result<(), PartitionError> {
        let mut progress = self.progress.subscribe();
        let settled = progress
            .wait_for(|p| {
                p.generation != generation || !p.leader || p.high_watermark >= end_offset.get()
            })
            .await
            .map(|p| *p);
        match settled {
            Ok(p) if p.generation == generation && p.leader => {
                let state = self.lock_replication();
                if state.isr.len() < state.min_insync_replicas {
                    return Err(PartitionError::NotEnoughReplicasAfterAppend);
                }
                Ok(())
            }
            _ => Err(PartitionError::NotLeaderOrFollower),
        }
    }

    /// Writes the transaction coordinator's commit or abort marker on the leader, as
    /// any acks=all append: refused with NotEnoughReplicas while the committed ISR is
    /// below min.insync.replicas. The high watermark and the last stable offset move
    /// as the ISR allows, and waiting fetchers are woken. Returns the marker's offset
    /// and the leadership generation it was appended in (for `wait_committed`).
    ///
    /// The marker is appended whether or not the partition holds the transaction
    /// open, as Kafka appends it for WriteTxnMarkers, so that the partition learns
    /// the coordinator's epoch even where the transaction wrote nothing (or its
    /// marker is here already): a marker of a coordinator that was replaced,
    /// arriving later, is then refused by coordinator epoch instead of ending the
    /// producer's next transaction. A retry appends a second marker that ends
    /// nothing.
    pub fn append_txn_marker(
        &self,
        marker: &TxnMarker,
        now_ms: i64,
    ) -> Result<(Offset, u64), PartitionError> {
        let (open, appended) = self.with_log(|log| {
            let open = log.has_ongoing_txn(marker.producer_id);
            Ok((open, self.append_marker_locked(log, marker, now_ms)?))
        })?;
        tracing::debug!(
            partition = %self.tp,
            producer_id = marker.producer_id,
            producer_epoch = %marker.producer_epoch,
            coordinator_epoch = marker.coordinator_epoch,
            commit = marker.commit,
            open,
            offset = %appended.0,
            "transaction marker"
        );
        self.wake_fetchers();
        Ok(appended)
    }

    fn append_marker_locked(
        &self,
        log: &mut PartitionLog,
        marker: &TxnMarker,
        now_ms: i64,
    ) -> Result<(Offset, u64), PartitionError> {
        let (leader_epoch, generation) = self.leadership()?;
        self.check_enough_replicas()?;
        let offset = log.append_txn_marker(marker, leader_epoch.get(), now_ms)?;
        self.advance_high_watermark(log);
        self.publish_offsets(log);
        Ok((offset, generation))
    }

    /// Moves the leader's high watermark as far as the ISR allows. Under the log's
    /// lock; true when it moved.
    pub(super) fn advance_high_watermark(&self, log: &mut PartitionLog) -> bool {
        let current = log.high_watermark();
        let end = log.log_end_offset();
        let high_watermark = {
            let state = self.lock_replication();
            let Some(next) = state.next_high_watermark(
                current,
                end,
                self.replica_lag_time_max_ms,
                self.lag_clock_ms(),
            ) else {
                return false;
            };
            assert!(
                state.is_leader() && current < next && next <= end,
                "the high watermark of {} moves from {current} to {next}: only on the leader, only forward, and never past its log end offset {end}",
                self.tp
            );
            // The high watermark is the least log end offset over the ISR (and the
            // followers about to join it), so when it moves every member of the
            // committed ISR holds it, and the committed ISR is at least
            // min.insync.replicas. Not the reverse: it may lag behind them (frozen
            // below min ISR, or until each member fetched in a new epoch), and a
            // member that restarted may fetch from below it.
            debug_assert!(
                state.isr.len() >= state.min_insync_replicas
                    && state.isr.iter().all(|id| {
                        *id == state.node_id
                            || state
                                .followers
                                .get(id)
                                .is_some_and(|f| f.log_end_offset >= next)
                    }),
                "the high watermark of {} moves to {next}, which the committed ISR {:?} (min.insync.replicas {}) does not all hold: followers at {:?}",
                self.tp,
                state.isr,
                state.min_insync_replicas,
                state.followers
            );
            next
        };
        log.set_high_watermark(high_watermark);
        true
    }

    /// ISR members that lag by more than `replica.lag.time.max.ms` leave the ISR: the
    /// change to propose, marked in flight, if one is due.
    pub fn isr_shrink(
        &self,
        broker_epoch_of: impl Fn(i32) -> Option<BrokerEpoch>,
    ) -> Option<IsrChange> {
        let now_ms = self.lag_clock_ms();
        let mut state = self.lock_replication();
        let change = state.isr_shrink(self.replica_lag_time_max_ms, now_ms, broker_epoch_of)?;
        state.propose(&change);
        Some(change)
    }

    /// The controller's answer to an ISR proposal made at partition epoch
    /// `proposed_at`: the partition as it now is when the change applied.
    pub fn settle_isr(&self, proposed_at: i32, applied: Option<LeaderAndIsr>) {
        let now_ms = self.lag_clock_ms();
        let moved = self
            .with_log(|log| {
                self.lock_replication().settle(proposed_at, applied, now_ms);
                let moved = self.advance_high_watermark(log);
                self.publish_offsets(log);
                Ok(moved)
            })
            .unwrap_or(false);
        if moved {
            self.wake_fetchers();
        }
    }
}
