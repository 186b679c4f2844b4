//! One partition of this broker: its log behind a mutex, its replication state
//! (leader or follower, ISR, followers' positions) behind a second one taken after
//! the log's, the high watermark and last stable offset that fetchers read without
//! either lock, the fetchers waiting for data, and the progress that acks=all
//! produces wait on.

use std::fmt;
use std::io;
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicI64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, Weak};

use bytes::Bytes;
use tokio::sync::{watch, Notify};

use crate::clock::Clock;
use crate::config::defaults::PRODUCER_ID_EXPIRATION_MS_DEFAULT;
use crate::durability::StorageHealth;
use crate::limits::FETCH_WAITERS_PER_PARTITION_MAX;
use crate::log::cleaner;
use crate::log::{
    AbortedTxn, AppendInfo, FileSlice, FlushTarget, IsolationLevel, LogConfig, LogDir, LogError,
    PartitionLog, ProducerSummary, TxnMarker,
};
use crate::types::TopicPartition;

use super::replication::{IsrChange, PartitionView, ReplicationState, Transition};

/// Why a partition operation failed; handlers map each to a Kafka error code.
#[derive(Debug)]
pub enum PartitionError {
    UnknownTopicOrPartition,
    /// Another broker leads the partition, or none does (its leader is fenced).
    NotLeaderOrFollower,
    /// acks=all before the append: the ISR is below min.insync.replicas.
    NotEnoughReplicas,
    /// acks=all after the append: committed while the ISR was below
    /// min.insync.replicas.
    NotEnoughReplicasAfterAppend,
    /// A follower fetched with a leader epoch older than this leader's.
    FencedLeaderEpoch,
    /// A follower fetched with a leader epoch newer than this leader's, or a broker
    /// that is not a replica fetched.
    UnknownLeaderEpoch,
    /// A follower fetched with a broker epoch that is not its registration's in
    /// the image (a stale incarnation, or a client posing as a follower).
    StaleBrokerEpoch,
    Log(LogError),
    Storage(io::Error),
    /// The durability wait of acks=-1 did not finish within the request timeout.
    Timeout,
}

impl fmt::Display for PartitionError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PartitionError::UnknownTopicOrPartition => f.write_str("unknown topic or partition"),
            PartitionError::NotLeaderOrFollower => {
                f.write_str("this broker is not the partition's leader")
            }
            PartitionError::Log(error) => write!(f, "{error}"),
            PartitionError::NotEnoughReplicas => {
                f.write_str("the in-sync replicas are fewer than min.insync.replicas")
            }
            PartitionError::NotEnoughReplicasAfterAppend => f.write_str(
                "written, but the in-sync replicas fell below min.insync.replicas before it was committed",
            ),
            PartitionError::FencedLeaderEpoch => f.write_str("the leader epoch is older than the leader's"),
            PartitionError::UnknownLeaderEpoch => f.write_str("the leader epoch is unknown to the leader"),
            PartitionError::StaleBrokerEpoch => {
                f.write_str("the follower's broker epoch is not its registration's")
            }
            PartitionError::Storage(error) => write!(f, "storage error: {error}"),
            PartitionError::Timeout => f.write_str("timed out"),
        }
    }
}

impl From<LogError> for PartitionError {
    fn from(error: LogError) -> PartitionError {
        match error {
            LogError::Io(error) => PartitionError::Storage(error),
            other => PartitionError::Log(other),
        }
    }
}

/// A fetch request's wake-up handle, registered with every partition it reads.
pub type FetchWaiter = Arc<Notify>;

/// What an acks=all produce waits on: the high watermark, and the leadership it was
/// appended under.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Progress {
    pub high_watermark: i64,
    pub generation: u64,
    pub leader: bool,
}

/// An append on the leader: what the log did, and the leadership it did it under.
#[derive(Clone, Copy, Debug)]
pub struct LeaderAppend {
    pub info: AppendInfo,
    pub generation: u64,
}

/// A leader's read for a follower, taken under the lock; the bytes are read after.
pub struct FollowerRead {
    /// Kafka's DivergingEpoch: (epoch, end offset) when the follower's last fetched
    /// epoch ends earlier here; no records then.
    pub diverging_epoch: Option<(i32, i64)>,
    pub records: Option<FileSlice>,
    pub high_watermark: i64,
    pub last_stable_offset: i64,
    pub log_start_offset: i64,
    /// An ISR expansion this fetch made due, for the caller to propose.
    pub isr_change: Option<IsrChange>,
}

/// The committed ISR, and each follower's (broker id, log end offset).
pub type FollowerPositions = (Vec<i32>, Vec<(i32, i64)>);

/// Where a follower fetches from next.
#[derive(Clone, Copy, Debug)]
pub struct FetchPosition {
    pub fetch_offset: i64,
    /// The epoch of the last batch in the log (-1 for an empty cache).
    pub last_fetched_epoch: i32,
    pub log_start_offset: i64,
    pub leader_epoch: i32,
}

/// Shared by every task that touches the partition; all fields are either
/// atomics or behind a std mutex held briefly.
pub struct Partition {
    pub tp: TopicPartition,
    pub topic_id: uuid::Uuid,
    log: Mutex<Option<PartitionLog>>,
    high_watermark: AtomicI64,
    /// The first offset of the earliest ongoing transaction, capped by the high
    /// watermark; read_committed consumers read below it.
    last_stable_offset: AtomicI64,
    log_start_offset: AtomicI64,
    leader_epoch: AtomicI32,
    flush_messages: AtomicI64,
    flush_ms: AtomicI64,
    last_flush_ms: AtomicI64,
    flushed_offset: AtomicI64,
    /// The base offset of the log's active segment: when it is above
    /// `flushed_offset`, a rolled segment waits for its fsync (and holds its
    /// file open until then), which the flush policy does at once, whatever
    /// flush.ms says, as Kafka flushes a rolled segment.
    active_segment_base: AtomicI64,
    deleted: AtomicBool,
    /// A cleaning of this log failed outside its swap (a segment it could not
    /// read, a scratch file it could not write): not cleaned again until restart,
    /// as Kafka marks such a partition uncleanable.
    uncleanable: AtomicBool,
    waiters: Mutex<Vec<Weak<Notify>>>,
    /// Leader or follower and the ISR; taken after `log` when both are held.
    replication: Mutex<ReplicationState>,
    progress: watch::Sender<Progress>,
    replica_lag_time_max_ms: i64,
    /// The log directory's health: once it is offline every operation fails with a
    /// storage error, and a failed write here takes it offline.
    health: Arc<StorageHealth>,
    clock: Arc<dyn Clock>,
}

/// What a partition shares with every other partition of its log directory.
#[derive(Clone)]
pub struct PartitionContext {
    pub health: Arc<StorageHealth>,
    pub clock: Arc<dyn Clock>,
    pub node_id: i32,
    /// Kafka's `replica.lag.time.max.ms`.
    pub replica_lag_time_max_ms: i64,
}

/// A read taken under the lock; the bytes are read after it is released.
pub struct PartitionRead {
    pub records: Option<FileSlice>,
    pub high_watermark: i64,
    pub last_stable_offset: i64,
    pub log_start_offset: i64,
    /// read_committed only: the aborted transactions overlapping the records read.
    pub aborted_transactions: Option<Vec<AbortedTxn>>,
}

impl Partition {
    /// A partition led by nobody yet: the first image it is given (`apply_image`) makes
    /// it a leader or a follower.
    pub fn new(
        log: PartitionLog,
        flush: (Option<i64>, Option<i64>),
        context: &PartitionContext,
    ) -> Partition {
        let now_ms = context.clock.now_ms();
        let tp = log.topic_partition().clone();
        let topic_id = log.topic_id();
        let end = log.log_end_offset();
        let start = log.log_start_offset();
        let flushed = log.recovery_point();
        let active_segment_base = log.active_segment_base();
        let high_watermark = log.high_watermark();
        let last_stable = log.last_stable_offset(high_watermark);
        let _ = end;
        let (progress, _) = watch::channel(Progress {
            high_watermark,
            generation: 0,
            leader: false,
        });
        Partition {
            tp,
            topic_id,
            log: Mutex::new(Some(log)),
            high_watermark: AtomicI64::new(high_watermark),
            last_stable_offset: AtomicI64::new(last_stable),
            log_start_offset: AtomicI64::new(start),
            leader_epoch: AtomicI32::new(-1),
            flush_messages: AtomicI64::new(flush.0.unwrap_or(i64::MAX)),
            flush_ms: AtomicI64::new(flush.1.unwrap_or(i64::MAX)),
            last_flush_ms: AtomicI64::new(now_ms),
            flushed_offset: AtomicI64::new(flushed),
            active_segment_base: AtomicI64::new(active_segment_base),
            deleted: AtomicBool::new(false),
            uncleanable: AtomicBool::new(false),
            waiters: Mutex::new(Vec::new()),
            replication: Mutex::new(ReplicationState::new(context.node_id)),
            progress,
            replica_lag_time_max_ms: context.replica_lag_time_max_ms,
            health: Arc::clone(&context.health),
            clock: Arc::clone(&context.clock),
        }
    }

    pub(crate) fn lock_log(&self) -> MutexGuard<'_, Option<PartitionLog>> {
        self.log
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Runs `f` on the log, or fails if the partition was deleted meanwhile or its log
    /// directory is offline. A write that fails takes the directory offline: after a
    /// failed write the page cache cannot be trusted, so nothing on it is acknowledged
    /// again until a restart has recovered it.
    pub fn with_log<T>(
        &self,
        f: impl FnOnce(&mut PartitionLog) -> Result<T, PartitionError>,
    ) -> Result<T, PartitionError> {
        if self.health.is_offline() {
            return Err(PartitionError::Storage(self.health.offline_error()));
        }
        let mut guard = self.lock_log();
        let log = guard
            .as_mut()
            .ok_or(PartitionError::UnknownTopicOrPartition)?;
        let result = f(log);
        drop(guard);
        if let Err(PartitionError::Storage(error)) = &result {
            self.health.mark_failed(error);
        }
        result
    }

    pub fn is_deleted(&self) -> bool {
        self.deleted.load(Ordering::Acquire)
    }

    pub fn high_watermark(&self) -> i64 {
        self.high_watermark.load(Ordering::Acquire)
    }

    /// The last stable offset, read without the lock (like `high_watermark`).
    pub fn last_stable_offset(&self) -> i64 {
        self.last_stable_offset.load(Ordering::Acquire)
    }

    pub fn log_start_offset(&self) -> i64 {
        self.log_start_offset.load(Ordering::Acquire)
    }

    pub fn leader_epoch(&self) -> i32 {
        self.leader_epoch.load(Ordering::Acquire)
    }

    pub fn flushed_offset(&self) -> i64 {
        self.flushed_offset.load(Ordering::Acquire)
    }

    /// The time replication lag is measured in: the monotonic clock, so that a
    /// wall-clock jump neither freezes ISR shrinks (back) nor shrinks every ISR
    /// at once (forward).
    fn lag_clock_ms(&self) -> i64 {
        self.clock.monotonic_ms()
    }

    fn lock_replication(&self) -> MutexGuard<'_, ReplicationState> {
        self.replication
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

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

    fn append_with(
        &self,
        records: &Bytes,
        now_ms: i64,
        append: fn(&mut PartitionLog, &Bytes, i32, i64) -> Result<AppendInfo, LogError>,
    ) -> Result<LeaderAppend, PartitionError> {
        let appended = self.with_log(|log| {
            let (leader_epoch, generation) = self.leadership()?;
            let info = append(log, records, leader_epoch, now_ms)?;
            self.advance_high_watermark(log);
            self.publish_offsets(log);
            Ok(LeaderAppend { info, generation })
        })?;
        if !appended.info.duplicate {
            self.wake_fetchers();
        }
        Ok(appended)
    }

    /// The leader epoch and generation of this broker's leadership, or
    /// NotLeaderOrFollower. Called under the log's lock, so an image applied meanwhile
    /// cannot change them before the append is done.
    fn leadership(&self) -> Result<(i32, u64), PartitionError> {
        let state = self.lock_replication();
        if !state.is_leader() {
            return Err(PartitionError::NotLeaderOrFollower);
        }
        Ok((state.leader_epoch, state.generation))
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
        end_offset: i64,
        generation: u64,
    ) -> Result<(), PartitionError> {
        let mut progress = self.progress.subscribe();
        let settled = progress
            .wait_for(|p| p.generation != generation || !p.leader || p.high_watermark >= end_offset)
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
    pub fn append_txn_marker(
        &self,
        marker: &TxnMarker,
        now_ms: i64,
    ) -> Result<(i64, u64), PartitionError> {
        let appended = self.with_log(|log| self.append_marker_locked(log, marker, now_ms))?;
        self.wake_fetchers();
        Ok(appended)
    }

    /// Ends the producer's transaction here, as Kafka's leader does for
    /// WriteTxnMarkers: the marker is appended (`append_txn_marker`) only if the
    /// partition still holds the transaction open, so a coordinator's retry never
    /// doubles it. Returns the log end offset and the leadership generation, read
    /// under one hold of the log's lock: a retry that finds the transaction ended
    /// (by its own earlier marker, perhaps not committed yet, perhaps truncated by
    /// a leader change and appended again here) waits for the log end in this
    /// leadership, never for an offset of an earlier one.
    pub fn end_txn_marker(
        &self,
        marker: &TxnMarker,
        now_ms: i64,
    ) -> Result<(i64, u64), PartitionError> {
        let (end_offset, generation, appended) = self.with_log(|log| {
            if !log.has_ongoing_txn(marker.producer_id) {
                let (_, generation) = self.leadership()?;
                return Ok((log.log_end_offset(), generation, false));
            }
            let (offset, generation) = self.append_marker_locked(log, marker, now_ms)?;
            Ok((offset + 1, generation, true))
        })?;
        if appended {
            self.wake_fetchers();
        }
        Ok((end_offset, generation))
    }

    fn append_marker_locked(
        &self,
        log: &mut PartitionLog,
        marker: &TxnMarker,
        now_ms: i64,
    ) -> Result<(i64, u64), PartitionError> {
        let (leader_epoch, generation) = self.leadership()?;
        self.check_enough_replicas()?;
        let offset = log.append_txn_marker(marker, leader_epoch, now_ms)?;
        self.advance_high_watermark(log);
        self.publish_offsets(log);
        Ok((offset, generation))
    }

    /// Moves the leader's high watermark as far as the ISR allows. Under the log's
    /// lock; true when it moved.
    fn advance_high_watermark(&self, log: &mut PartitionLog) -> bool {
        let next = self.lock_replication().next_high_watermark(
            log.high_watermark(),
            log.log_end_offset(),
            self.replica_lag_time_max_ms,
            self.lag_clock_ms(),
        );
        match next {
            Some(high_watermark) => {
                log.set_high_watermark(high_watermark);
                true
            }
            None => false,
        }
    }

    /// Follows an image of the partition: becomes leader (the new epoch starts at the
    /// log end offset, written to the epoch cache, fsynced) or follower, or takes a new
    /// ISR. Blocking when it becomes leader: call it off the runtime worker.
    pub fn apply_image(&self, view: &PartitionView<'_>) -> Result<Transition, PartitionError> {
        let now_ms = self.lag_clock_ms();
        let transition = self.with_log(|log| {
            let transition = {
                let mut state = self.lock_replication();
                let transition = state.apply(view, log.log_end_offset(), now_ms);
                self.leader_epoch
                    .store(state.leader_epoch, Ordering::Release);
                transition
            };
            if transition == Transition::BecameLeader {
                log.assign_leader_epoch_start(view.leader_epoch)?;
            }
            self.advance_high_watermark(log);
            self.publish_offsets(log);
            Ok(transition)
        })?;
        self.wake_fetchers();
        Ok(transition)
    }

    /// The leader's read for a follower (Kafka's follower branch of `fetchRecords`):
    /// the follower's epoch is checked, a divergence from this log answered with
    /// DivergingEpoch and nothing else, otherwise its position recorded (which may move
    /// the high watermark and make it due to join the ISR) and records read up to the
    /// log end offset.
    pub fn read_for_follower(
        &self,
        fetch: &FollowerFetch,
        broker_epoch_of: impl Fn(i32) -> Option<i64>,
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
            if fetch.current_leader_epoch >= 0 && fetch.current_leader_epoch < leader_epoch {
                return Err(PartitionError::FencedLeaderEpoch);
            }
            if fetch.current_leader_epoch > leader_epoch {
                return Err(PartitionError::UnknownLeaderEpoch);
            }
            let high_watermark = log.high_watermark();
            if fetch.last_fetched_epoch >= 0 {
                let (epoch, end_offset) = log.end_offset_for_epoch(fetch.last_fetched_epoch);
                if epoch < 0 || end_offset < 0 {
                    return Err(PartitionError::Log(LogError::OffsetOutOfRange {
                        log_start_offset: log.log_start_offset(),
                        log_end_offset: log.log_end_offset(),
                    }));
                }
                if epoch < fetch.last_fetched_epoch || end_offset < fetch.fetch_offset {
                    let diverged = FollowerRead {
                        diverging_epoch: Some((epoch, end_offset)),
                        records: None,
                        high_watermark,
                        last_stable_offset: log.last_stable_offset(high_watermark),
                        log_start_offset: log.log_start_offset(),
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
                high_watermark,
                last_stable_offset: log.last_stable_offset(high_watermark),
                log_start_offset: log.log_start_offset(),
                isr_change,
            };
            Ok((answer, moved))
        })?;
        if moved {
            self.wake_fetchers();
        }
        Ok(read)
    }

    /// ISR members that lag by more than `replica.lag.time.max.ms` leave the ISR: the
    /// change to propose, marked in flight, if one is due.
    pub fn isr_shrink(&self, broker_epoch_of: impl Fn(i32) -> Option<i64>) -> Option<IsrChange> {
        let now_ms = self.lag_clock_ms();
        let mut state = self.lock_replication();
        let change = state.isr_shrink(self.replica_lag_time_max_ms, now_ms, broker_epoch_of)?;
        state.propose(&change);
        Some(change)
    }

    /// The controller's answer to an ISR proposal made at partition epoch
    /// `proposed_at`: (leader epoch, partition epoch, ISR) when it applied.
    pub fn settle_isr(&self, proposed_at: i32, applied: Option<(i32, i32, Vec<i32>)>) {
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

    /// A follower's next fetch position.
    pub fn fetch_position(&self) -> Result<FetchPosition, PartitionError> {
        self.with_log(|log| {
            Ok(FetchPosition {
                fetch_offset: log.log_end_offset(),
                last_fetched_epoch: log.latest_epoch().unwrap_or(-1),
                log_start_offset: log.log_start_offset(),
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

    /// A follower's answer to DivergingEpoch (epoch, end offset) from its leader: the
    /// offset to truncate to, as Kafka's KIP-595 follower computes it (its own end of
    /// that epoch, or of the largest epoch below it, and never past the leader's).
    pub fn truncation_offset(&self, epoch: i32, end_offset: i64) -> Result<i64, PartitionError> {
        self.with_log(|log| {
            let (_, own_end) = log.end_offset_for_epoch(epoch);
            let target = if own_end >= 0 {
                own_end.min(end_offset)
            } else {
                end_offset
            };
            Ok(target.min(log.log_end_offset()))
        })
    }

    /// The offset this broker's leadership began at, while it leads (KIP-207: until
    /// the high watermark reaches it, the latest offset is not known).
    pub fn epoch_start_offset(&self) -> Option<i64> {
        let state = self.lock_replication();
        state.is_leader().then_some(state.epoch_start_offset)
    }

    /// The leader this broker follows, or leads as (its own id); -1 for none.
    pub fn leader_id(&self) -> i32 {
        let state = self.lock_replication();
        match state.role {
            super::replication::Role::Leader => state.node_id,
            super::replication::Role::Follower { leader_id } => leader_id,
        }
    }

    /// On the leader: the committed ISR and each follower's log end offset (-1
    /// until it fetched in this epoch); None on a follower.
    pub fn follower_positions(&self) -> Option<FollowerPositions> {
        let state = self.lock_replication();
        if !state.is_leader() {
            return None;
        }
        let followers = state
            .followers
            .iter()
            .map(|(id, f)| (*id, f.log_end_offset))
            .collect();
        Some((state.isr.clone(), followers))
    }

    /// Whether this broker leads the partition now.
    pub fn is_leader(&self) -> bool {
        self.lock_replication().is_leader()
    }

    /// The committed ISR as this broker knows it.
    pub fn isr(&self) -> Vec<i32> {
        self.lock_replication().isr.clone()
    }

    /// Whether the producer has a transaction in this partition that no marker ended.
    pub fn has_ongoing_txn(&self, producer_id: i64) -> Result<bool, PartitionError> {
        self.with_log(|log| Ok(log.has_ongoing_txn(producer_id)))
    }

    /// Every producer the log knows, ordered by producer id (DescribeProducers).
    pub fn producers(&self) -> Result<Vec<ProducerSummary>, PartitionError> {
        self.with_log(|log| Ok(log.producers()))
    }

    /// Publishes the log's offsets to the lock-free readers and the acks=all waiters,
    /// under the log's lock so concurrent publications cannot reorder.
    fn publish_offsets(&self, log: &PartitionLog) {
        let high_watermark = log.high_watermark();
        self.high_watermark.store(high_watermark, Ordering::Release);
        self.last_stable_offset
            .store(log.last_stable_offset(high_watermark), Ordering::Release);
        self.log_start_offset
            .store(log.log_start_offset(), Ordering::Release);
        self.active_segment_base
            .store(log.active_segment_base(), Ordering::Release);
        let (generation, leader) = {
            let state = self.lock_replication();
            (state.generation, state.is_leader())
        };
        self.progress.send_if_modified(|p| {
            let next = Progress {
                high_watermark,
                generation,
                leader,
            };
            let changed = *p != next;
            *p = next;
            changed
        });
    }

    /// True, after an append, when flush.messages says this partition must
    /// be fsynced now, or the append rolled a segment.
    pub fn flush_due_after_append(&self) -> bool {
        let flushed = self.flushed_offset();
        let unflushed = self.high_watermark() - flushed;
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
            || (self.high_watermark() > flushed
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
                high_watermark,
                min_one_batch,
                isolation,
            )?;
            Ok((read, log.last_stable_offset(high_watermark)))
        })?;
        Ok(PartitionRead {
            records: read.records,
            high_watermark,
            last_stable_offset,
            log_start_offset: read.log_start_offset,
            aborted_transactions: read.aborted_transactions,
        })
    }

    /// Registers a fetch request to be woken by the next append.
    pub fn add_waiter(&self, waiter: &FetchWaiter) {
        let mut waiters = self
            .waiters
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        waiters.retain(|w| w.strong_count() > 0);
        if waiters.len() >= FETCH_WAITERS_PER_PARTITION_MAX {
            waiters.remove(0);
        }
        waiters.push(Arc::downgrade(waiter));
    }

    fn wake_fetchers(&self) {
        let waiters = std::mem::take(
            &mut *self
                .waiters
                .lock()
                .unwrap_or_else(|poisoned| poisoned.into_inner()),
        );
        for waiter in waiters.iter().filter_map(Weak::upgrade) {
            waiter.notify_one();
        }
    }

    /// DeleteRecords: move the log start offset up to `offset` (-1: the high watermark).
    pub fn delete_records_before(&self, offset: i64) -> Result<i64, PartitionError> {
        if !self.is_leader() {
            return Err(PartitionError::NotLeaderOrFollower);
        }
        let high_watermark = self.high_watermark();
        let target = if offset == -1 { high_watermark } else { offset };
        if target < 0 || target > high_watermark {
            let log_start_offset = self.log_start_offset();
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

    /// Removes the log from disk; later operations see UnknownTopicOrPartition.
    pub(crate) fn delete(&self, log_dir: &LogDir) -> io::Result<()> {
        self.deleted.store(true, Ordering::Release);
        let log = self.lock_log().take();
        self.wake_fetchers();
        match log {
            Some(log) => log_dir.delete_log(log),
            None => Ok(()),
        }
    }
}

/// A follower's fetch of one partition, as its leader reads it.
#[derive(Clone, Copy, Debug)]
pub struct FollowerFetch {
    pub replica_id: i32,
    /// The follower's broker epoch (Fetch v15 ReplicaState); -1 before v15.
    pub broker_epoch: i64,
    pub current_leader_epoch: i32,
    pub fetch_offset: i64,
    /// -1 when the follower's log has no epoch yet, or before Fetch v12.
    pub last_fetched_epoch: i32,
    pub max_bytes: usize,
}
