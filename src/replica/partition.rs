//! One partition of this broker: its log behind a mutex, the high watermark and last
//! stable offset that fetchers read without the lock, and the fetchers waiting for
//! data.

use std::fmt;
use std::io;
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicI64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, Weak};

use bytes::Bytes;
use tokio::sync::Notify;

use crate::clock::Clock;
use crate::config::defaults::PRODUCER_ID_EXPIRATION_MS_DEFAULT;
use crate::group_commit::StorageHealth;
use crate::limits::FETCH_WAITERS_PER_PARTITION_MAX;
use crate::log::{
    AbortedTxn, AppendInfo, FileSlice, FlushTarget, IsolationLevel, LogConfig, LogDir, LogError,
    PartitionLog, ProducerSummary, TxnMarker,
};
use crate::types::TopicPartition;

/// Why a partition operation failed; handlers map each to a Kafka error code.
#[derive(Debug)]
pub enum PartitionError {
    UnknownTopicOrPartition,
    /// Another broker leads the partition, or none does (its leader is fenced).
    NotLeaderOrFollower,
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
    deleted: AtomicBool,
    waiters: Mutex<Vec<Weak<Notify>>>,
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
    pub fn new(
        log: PartitionLog,
        leader_epoch: i32,
        flush: (Option<i64>, Option<i64>),
        context: &PartitionContext,
    ) -> Partition {
        let now_ms = context.clock.now_ms();
        let tp = log.topic_partition().clone();
        let topic_id = log.topic_id();
        let end = log.log_end_offset();
        let start = log.log_start_offset();
        let flushed = log.recovery_point();
        let last_stable = log.last_stable_offset(end);
        Partition {
            tp,
            topic_id,
            log: Mutex::new(Some(log)),
            high_watermark: AtomicI64::new(end),
            last_stable_offset: AtomicI64::new(last_stable),
            log_start_offset: AtomicI64::new(start),
            leader_epoch: AtomicI32::new(leader_epoch),
            flush_messages: AtomicI64::new(flush.0.unwrap_or(i64::MAX)),
            flush_ms: AtomicI64::new(flush.1.unwrap_or(i64::MAX)),
            last_flush_ms: AtomicI64::new(now_ms),
            flushed_offset: AtomicI64::new(flushed),
            deleted: AtomicBool::new(false),
            waiters: Mutex::new(Vec::new()),
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
        f: impl FnOnce(&mut PartitionLog) -> Result<T, LogError>,
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
        if let Err(LogError::Io(error)) = &result {
            self.health.mark_failed(error);
        }
        Ok(result?)
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

    /// Validates and appends `records` (with the producer-state checks of idempotent
    /// and transactional producers); on a single node the high watermark moves with
    /// the log end offset, the last stable offset follows, and waiting fetchers are
    /// woken. A retried duplicate writes nothing and answers with its first offsets.
    pub fn append(&self, records: &Bytes, now_ms: i64) -> Result<AppendInfo, PartitionError> {
        let leader_epoch = self.leader_epoch();
        let info = self.with_log(|log| {
            let info = log.append(records, leader_epoch, now_ms)?;
            self.publish_offsets(log);
            Ok(info)
        })?;
        if !info.duplicate {
            self.wake_fetchers();
        }
        Ok(info)
    }

    /// Writes the transaction coordinator's commit or abort marker; the high
    /// watermark and the last stable offset move, and waiting fetchers are woken.
    /// Returns the marker's offset.
    pub fn append_txn_marker(
        &self,
        marker: &TxnMarker,
        now_ms: i64,
    ) -> Result<i64, PartitionError> {
        let leader_epoch = self.leader_epoch();
        let offset = self.with_log(|log| {
            let offset = log.append_txn_marker(marker, leader_epoch, now_ms)?;
            self.publish_offsets(log);
            Ok(offset)
        })?;
        self.wake_fetchers();
        Ok(offset)
    }

    /// Whether the producer has a transaction in this partition that no marker ended.
    pub fn has_ongoing_txn(&self, producer_id: i64) -> Result<bool, PartitionError> {
        self.with_log(|log| Ok(log.has_ongoing_txn(producer_id)))
    }

    /// Every producer the log knows, ordered by producer id (DescribeProducers).
    pub fn producers(&self) -> Result<Vec<ProducerSummary>, PartitionError> {
        self.with_log(|log| Ok(log.producers()))
    }

    /// Publishes the log's offsets to the lock-free readers, under the log's lock so
    /// concurrent publications cannot reorder. On a single node the high watermark is
    /// the log end offset.
    fn publish_offsets(&self, log: &PartitionLog) {
        let high_watermark = log.log_end_offset();
        self.high_watermark.store(high_watermark, Ordering::Release);
        self.last_stable_offset
            .store(log.last_stable_offset(high_watermark), Ordering::Release);
        self.log_start_offset
            .store(log.log_start_offset(), Ordering::Release);
    }

    /// True when flush.messages says this partition must be fsynced now.
    pub fn flush_by_count_due(&self) -> bool {
        let unflushed = self.high_watermark() - self.flushed_offset();
        unflushed >= self.flush_messages.load(Ordering::Relaxed)
    }

    /// True when flush.ms says this partition must be fsynced now.
    pub fn flush_due(&self, now_ms: i64) -> bool {
        let interval = self.flush_ms.load(Ordering::Relaxed);
        self.high_watermark() > self.flushed_offset()
            && now_ms.saturating_sub(self.last_flush_ms.load(Ordering::Relaxed)) >= interval
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

    /// Applies a changed config and leader epoch from the metadata image.
    pub fn update(&self, config: &LogConfig, leader_epoch: i32, flush: (Option<i64>, Option<i64>)) {
        self.leader_epoch.store(leader_epoch, Ordering::Release);
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
