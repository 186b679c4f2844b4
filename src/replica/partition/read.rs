//! Reads of a partition: a consumer's (below the high watermark, or the last
//! stable offset for read_committed), a follower's as its leader answers it (which
//! records the follower's position and may move the high watermark or make the
//! follower due to join the ISR), and the producer state the handlers ask about.
//!
//! Invariant: a consumer never reads at or above the high watermark; a follower's
//! read is answered only by the leader, at the follower's own leader epoch.

use super::{
    EpochEndOffset, FollowerFetch, FollowerRead, Partition, PartitionError, PartitionRead,
};
use crate::log::{IsolationLevel, LogError, ProducerSummary};
use crate::types::{BrokerEpoch, LeaderEpoch, Offset};

impl Partition {
    /// Whole batches from `fetch_offset` below the high watermark (read_uncommitted)
    /// or the last stable offset (read_committed, with the aborted transactions of
    /// the range read).
    pub fn read(
        &self,
        fetch_offset: i64,
        max_bytes: usize,
        min_one_batch: bool,
        isolation: IsolationLevel,
    ) -> Result<PartitionRead, PartitionError> {
        let high_watermark = self.high_watermark();
        let (read, last_stable_offset) = self.with_log(|log| {
            let read = log.read_isolated(
                fetch_offset,
                max_bytes,
                high_watermark.get(),
                min_one_batch,
                isolation,
            )?;
            Ok((read, log.last_stable_offset(high_watermark.get())))
        })?;
        Ok(PartitionRead {
            records: read.records,
            high_watermark,
            last_stable_offset: Offset::new(last_stable_offset),
            log_start_offset: read.log_start_offset,
            aborted_transactions: read.aborted_transactions,
        })
    }

    /// The leader's read for a follower (Kafka's follower branch of `fetchRecords`):
    /// the follower's epoch is checked, a divergence from this log answered with
    /// DivergingEpoch and nothing else, otherwise its position recorded (which may move
    /// the high watermark and make it due to join the ISR) and records read up to the
    /// log end offset.
    pub fn read_for_follower(
        &self,
        fetch: &FollowerFetch,
        broker_epoch_of: impl Fn(i32) -> Option<BrokerEpoch>,
    ) -> Result<FollowerRead, PartitionError> {
        let now_ms = self.lag_clock_ms();
        let (read, moved) = self.with_log(|log| {
            let leader_epoch = {
                let state = self.lock_replication();
                if !state.is_leader() {
                    return Err(PartitionError::NotLeaderOrFollower);
                }
                state.leader_epoch
            };
            match fetch.current_leader_epoch {
                Some(current) if current < leader_epoch => {
                    return Err(PartitionError::FencedLeaderEpoch)
                }
                Some(current) if current > leader_epoch => {
                    return Err(PartitionError::UnknownLeaderEpoch)
                }
                _ => {}
            }
            let high_watermark = log.high_watermark();
            if let Some(last_fetched_epoch) = fetch.last_fetched_epoch {
                let (epoch, end_offset) = log.end_offset_for_epoch(last_fetched_epoch.get());
                if epoch < 0 || end_offset < 0 {
                    return Err(PartitionError::Log(LogError::OffsetOutOfRange {
                        log_start_offset: log.log_start_offset(),
                        log_end_offset: log.log_end_offset(),
                    }));
                }
                if epoch < last_fetched_epoch.get() || end_offset < fetch.fetch_offset {
                    let diverged = FollowerRead {
                        diverging_epoch: Some(EpochEndOffset {
                            epoch: LeaderEpoch::new(epoch),
                            end_offset: Offset::new(end_offset),
                        }),
                        records: None,
                        high_watermark: Offset::new(high_watermark),
                        last_stable_offset: Offset::new(log.last_stable_offset(high_watermark)),
                        log_start_offset: Offset::new(log.log_start_offset()),
                        isr_change: None,
                    };
                    return Ok((diverged, false));
                }
            }
            let read = log.read(
                fetch.fetch_offset,
                fetch.max_bytes,
                log.log_end_offset(),
                true,
            )?;
            let known = self.lock_replication().record_fetch(
                fetch.replica_id,
                fetch.broker_epoch,
                fetch.fetch_offset,
                log.log_end_offset(),
                now_ms,
            );
            if !known {
                return Err(PartitionError::UnknownLeaderEpoch);
            }
            let moved = self.advance_high_watermark(log);
            let high_watermark = log.high_watermark();
            let isr_change = {
                let mut state = self.lock_replication();
                let change =
                    state.isr_expansion(fetch.replica_id, high_watermark, now_ms, &broker_epoch_of);
                if let Some(change) = &change {
                    state.propose(change);
                }
                change
            };
            self.publish_offsets(log);
            let answer = FollowerRead {
                diverging_epoch: None,
                records: read.records,
                high_watermark: Offset::new(high_watermark),
                last_stable_offset: Offset::new(log.last_stable_offset(high_watermark)),
                log_start_offset: Offset::new(log.log_start_offset()),
                isr_change,
            };
            Ok((answer, moved))
        })?;
        if moved {
            self.wake_fetchers();
        }
        Ok(read)
    }

    /// Whether the producer has a transaction in this partition that no marker ended.
    pub fn has_ongoing_txn(&self, producer_id: i64) -> Result<bool, PartitionError> {
        self.with_log(|log| Ok(log.has_ongoing_txn(producer_id)))
    }

    /// Every producer the log knows, ordered by producer id (DescribeProducers).
    pub fn producers(&self) -> Result<Vec<ProducerSummary>, PartitionError> {
        self.with_log(|log| Ok(log.producers()))
    }
}
