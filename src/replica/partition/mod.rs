//! One partition of this broker: its log behind a mutex, its replication state
//! (leader or follower, ISR, followers' positions) behind a second one taken after
//! the log's, the high watermark and last stable offset that fetchers read without
//! either lock, the fetchers waiting for data, and the progress that acks=all
//! produces wait on.
//!
//! Invariants, asserted at every publication of the offsets (`publish_offsets`):
//! the high watermark lies within the log, between its start and end offsets; the
//! leadership generation only grows; on a leader the high watermark never moves
//! back. The files below hold one role each and the invariants of that role:
//! `leader` (appends and the high watermark's advance), `role` (the image and the
//! leader epoch), `follower` (follower appends and truncation), `read`, and
//! `housekeeping` (flushes, retention, cleaning).

mod follower;
mod housekeeping;
mod leader;
mod read;
mod role;

use std::fmt;
use std::io;
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicI64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, Weak};

use tokio::sync::{watch, Notify};

use crate::clock::Clock;
use crate::durability::StorageHealth;
use crate::limits::FETCH_WAITERS_PER_PARTITION_MAX;
use crate::log::{AbortedTxn, AppendInfo, FileSlice, LogDir, LogError, PartitionLog};
use crate::types::{BrokerEpoch, LeaderEpoch, Offset, TopicPartition};

use super::replication::{IsrChange, ReplicationState};

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

/// Where a leader epoch ends in a leader's log (Kafka's FetchResponse
/// `EpochEndOffset`): the largest epoch at or below the one asked about, and the
/// offset after its last record there.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EpochEndOffset {
    pub epoch: LeaderEpoch,
    pub end_offset: Offset,
}

/// A leader's read for a follower, taken under the lock; the bytes are read after.
pub struct FollowerRead {
    /// Kafka's DivergingEpoch: when the follower's last fetched epoch ends earlier
    /// here; no records then.
    pub diverging_epoch: Option<EpochEndOffset>,
    pub records: Option<FileSlice>,
    pub high_watermark: Offset,
    pub last_stable_offset: Offset,
    pub log_start_offset: Offset,
    /// An ISR expansion this fetch made due, for the caller to propose.
    pub isr_change: Option<IsrChange>,
}

/// The committed ISR, and each follower's (broker id, log end offset).
pub type FollowerPositions = (Vec<i32>, Vec<(i32, i64)>);

/// Where a follower fetches from next.
#[derive(Clone, Copy, Debug)]
pub struct FetchPosition {
    pub fetch_offset: Offset,
    /// The epoch of the last batch in the log; None for an empty cache.
    pub last_fetched_epoch: Option<LeaderEpoch>,
    pub log_start_offset: Offset,
    pub leader_epoch: LeaderEpoch,
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
    pub high_watermark: Offset,
    pub last_stable_offset: Offset,
    pub log_start_offset: Offset,
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
            leader_epoch: AtomicI32::new(LeaderEpoch::NONE.get()),
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

    pub fn high_watermark(&self) -> Offset {
        Offset::new(self.high_watermark.load(Ordering::Acquire))
    }

    /// The last stable offset, read without the lock (like `high_watermark`).
    pub fn last_stable_offset(&self) -> Offset {
        Offset::new(self.last_stable_offset.load(Ordering::Acquire))
    }

    pub fn log_start_offset(&self) -> Offset {
        Offset::new(self.log_start_offset.load(Ordering::Acquire))
    }

    /// The leader epoch of the latest image applied; `NONE` before the first.
    pub fn leader_epoch(&self) -> LeaderEpoch {
        LeaderEpoch::new(self.leader_epoch.load(Ordering::Acquire))
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

    /// Publishes the log's offsets to the lock-free readers and the acks=all waiters,
    /// under the log's lock so concurrent publications cannot reorder.
    fn publish_offsets(&self, log: &PartitionLog) {
        let high_watermark = log.high_watermark();
        let (generation, leader) = {
            let state = self.lock_replication();
            (state.generation, state.is_leader())
        };
        let previous = *self.progress.borrow();
        assert!(
            log.log_start_offset() <= high_watermark && high_watermark <= log.log_end_offset(),
            "the high watermark {high_watermark} of {} is outside its log [{}, {}]",
            self.tp,
            log.log_start_offset(),
            log.log_end_offset()
        );
        assert!(
            generation >= previous.generation,
            "the leadership generation of {} went back from {} to {generation}",
            self.tp,
            previous.generation
        );
        // A leader never truncates (the follower's methods refuse it) and its log
        // start offset only grows, so from one publication to the next under
        // leadership, in one generation or across a change of leader epoch that
        // kept it leader, what consumers and acks=all producers were told is
        // committed stays committed.
        assert!(
            !(leader && previous.leader) || high_watermark >= previous.high_watermark,
            "the high watermark of {} moved back on its leader from {} to {high_watermark} (generation {} to {generation})",
            self.tp,
            previous.high_watermark,
            previous.generation
        );
        self.high_watermark.store(high_watermark, Ordering::Release);
        self.last_stable_offset
            .store(log.last_stable_offset(high_watermark), Ordering::Release);
        self.log_start_offset
            .store(log.log_start_offset(), Ordering::Release);
        self.active_segment_base
            .store(log.active_segment_base(), Ordering::Release);
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
    /// The follower's broker epoch (Fetch v15 ReplicaState); `NONE` before v15.
    pub broker_epoch: BrokerEpoch,
    /// The leader epoch the follower follows in; None when it does not say.
    pub current_leader_epoch: Option<LeaderEpoch>,
    /// The offset the follower fetches from, as it sent it: the log refuses one
    /// it does not hold.
    pub fetch_offset: i64,
    /// None when the follower's log has no epoch yet, or before Fetch v12.
    pub last_fetched_epoch: Option<LeaderEpoch>,
    pub max_bytes: usize,
}
