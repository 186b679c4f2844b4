//! The runtime's writer (Kafka's `PartitionWriter`): a shard's records
//! appended to its partition of the coordinator's internal topic on the
//! leader with acks=all, and answered once the high watermark passed them
//! (with `--fsync-before-ack`, also once fsynced here).
//!
//! Batching: the writes of one partition that arrive while an append of it is
//! in flight wait in the partition's queue, and the next append takes them all
//! (up to `COORDINATOR_WRITE_BATCH_BYTES_MAX`) as one batch with one acks=all
//! wait, as Kafka's runtime appends a shard's pending writes together. One
//! task per partition drains its queue, so a caller that goes away never
//! strands the writes queued behind its own. A write that finds the queue full
//! (`COORDINATOR_WRITES_QUEUED_MAX`) is appended alone. Transactional writes
//! (a TxnOffsetCommit: a batch of the producer's) and a load's own writes are
//! appended alone.
//!
//! Fencing: a shard's writes go through only while the partition is led in the
//! leader epoch it was last loaded in (`set_loaded`). A broker that lost the
//! leadership and won it back in a later epoch holds state from before, which
//! another leader may have changed meanwhile: until the shard has loaded the
//! partition again, its writes are refused (NotLeaderOrFollower, which
//! coordinators answer NOT_COORDINATOR). A batch holds writes of one epoch.
//!
//! Loads of one partition run one at a time (`exclusively`), and the epoch a
//! partition was last loaded in never goes back: a load begun in an older
//! epoch and still reading when the partition was led again can neither write
//! its stale state over the newer load's nor fence the newer epoch's writes.
//!
//! A shard's cache write that follows its append (`unless_reloaded`) never
//! lands after a load that replayed the append: a load waits for the cache
//! writes in flight on its partition (an async read-write lock, shared by
//! cache writes, taken whole by a load: the one lock here held across an
//! `.await`, which is what it is for), and a cache write whose partition was
//! loaded since its append began is dropped, since that load rebuilt the cache
//! from the log that holds the append (a stale write landing after a reload
//! moved a committed offset back).
//!
//! Invariant: a write is answered Ok only once the batch holding it is
//! committed, and a batch is appended only in the epoch all its writes were
//! fenced by.

use std::collections::{HashMap, VecDeque};
use std::future::Future;
use std::io;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::{oneshot, RwLock};

use crate::limits::{
    COORDINATOR_WRITES_QUEUED_MAX, COORDINATOR_WRITE_BATCH_BYTES_MAX, INTERNAL_LOG_WRITE_TIMEOUT_MS,
};
use crate::log::{producer_keyed_batch, KeyedRecord, LogError, TxnProducer};
use crate::replica::{off_the_worker, Partition, PartitionError, ReplicaManager};
use crate::types::TopicPartition;
use crate::types::TxnVerification;

#[derive(Clone)]
pub struct ShardLog {
    pub(super) replicas: Arc<ReplicaManager>,
    pub(super) topic: &'static str,
    fsync_before_ack: bool,
    /// Partition → the leader epoch its coordinator last loaded it in, and
    /// how many loads of it began. Held only to read or write an entry.
    loaded: Arc<Mutex<HashMap<i32, Loaded>>>,
    /// Partition → the lock each of its loads holds whole from its first read
    /// to its last write, and each cache write after an append shares. The
    /// map is held only to find or add an entry.
    load_turns: Arc<Mutex<HashMap<i32, Arc<RwLock<()>>>>>,
    /// Partition → its writes waiting for the next append. Held only to
    /// queue a write or take a batch.
    queues: Arc<Mutex<HashMap<i32, WriteQueue>>>,
}

/// One partition's writes waiting to share an append.
#[derive(Default)]
struct WriteQueue {
    writes: VecDeque<QueuedWrite>,
    /// Whether a task is draining the queue (it clears this when it finds
    /// the queue empty, under the same lock, so no write is left behind).
    draining: bool,
}

/// A write waiting in its partition's queue.
struct QueuedWrite {
    /// The leader epoch it was fenced by when it was queued.
    epoch: i32,
    records: Vec<KeyedRecord>,
    bytes: usize,
    done: oneshot::Sender<Result<(), PartitionError>>,
}

/// Bytes of keys and values of `records`.
fn record_bytes(records: &[KeyedRecord]) -> usize {
    records
        .iter()
        .map(|(key, value)| key.len() + value.as_ref().map_or(0, |v| v.len()))
        .sum()
}

/// The writes at the head of `queue` that go in one batch: the first, and
/// those after it fenced by the same epoch while the batch stays within
/// `COORDINATOR_WRITE_BATCH_BYTES_MAX`.
fn take_batch(queue: &mut VecDeque<QueuedWrite>) -> Vec<QueuedWrite> {
    let mut batch: Vec<QueuedWrite> = Vec::new();
    let mut bytes = 0;
    while let Some(next) = queue.front() {
        let fits = bytes + next.bytes <= COORDINATOR_WRITE_BATCH_BYTES_MAX;
        if let Some(first) = batch.first() {
            if next.epoch != first.epoch || !fits {
                break;
            }
        }
        bytes += next.bytes;
        batch.extend(queue.pop_front());
    }
    batch
}

/// The same failure for another write of a failed batch: the error kinds the
/// coordinators map to Kafka's codes are kept, and a storage or log error
/// keeps its message.
fn shared_failure(error: &PartitionError) -> PartitionError {
    match error {
        PartitionError::UnknownTopicOrPartition => PartitionError::UnknownTopicOrPartition,
        PartitionError::NotLeaderOrFollower => PartitionError::NotLeaderOrFollower,
        PartitionError::NotEnoughReplicas => PartitionError::NotEnoughReplicas,
        PartitionError::NotEnoughReplicasAfterAppend => {
            PartitionError::NotEnoughReplicasAfterAppend
        }
        PartitionError::FencedLeaderEpoch => PartitionError::FencedLeaderEpoch,
        PartitionError::UnknownLeaderEpoch => PartitionError::UnknownLeaderEpoch,
        PartitionError::StaleBrokerEpoch => PartitionError::StaleBrokerEpoch,
        PartitionError::Timeout => PartitionError::Timeout,
        PartitionError::Log(LogError::MessageTooLarge) => {
            PartitionError::Log(LogError::MessageTooLarge)
        }
        PartitionError::Log(LogError::RecordListTooLarge) => {
            PartitionError::Log(LogError::RecordListTooLarge)
        }
        PartitionError::Log(other) => PartitionError::Storage(io::Error::other(other.to_string())),
        PartitionError::Storage(other) => {
            PartitionError::Storage(io::Error::new(other.kind(), other.to_string()))
        }
    }
}

/// One partition's loads, as the coordinator's writes see them.
#[derive(Clone, Copy, Debug, Default)]
struct Loaded {
    /// The leader epoch the partition was last loaded in (or raised to).
    epoch: Option<i32>,
    /// Loads of the partition begun so far.
    loads: u64,
}

/// What an append hands back for the cache write that follows it
/// (`unless_reloaded`): the loads of its partition counted when the epoch the
/// append was fenced by was read.
#[derive(Clone, Copy, Debug)]
pub struct AppendTicket {
    partition: i32,
    loads: u64,
}

impl ShardLog {
    pub fn new(
        replicas: Arc<ReplicaManager>,
        topic: &'static str,
        fsync_before_ack: bool,
    ) -> ShardLog {
        ShardLog {
            replicas,
            topic,
            fsync_before_ack,
            loaded: Arc::new(Mutex::new(HashMap::new())),
            load_turns: Arc::new(Mutex::new(HashMap::new())),
            queues: Arc::new(Mutex::new(HashMap::new())),
        }
    }

    fn turn(&self, partition: i32) -> Arc<RwLock<()>> {
        Arc::clone(
            self.load_turns
                .lock()
                .unwrap_or_else(|poisoned| poisoned.into_inner())
                .entry(partition)
                .or_default(),
        )
    }

    fn lock_loaded(&self) -> std::sync::MutexGuard<'_, HashMap<i32, Loaded>> {
        self.loaded
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Runs `load`, a coordinator's load of `partition`, once no other load
    /// of the partition runs and no cache write after an append is in flight
    /// on it (see the module's note). Blocking: it may wait for a load reading
    /// the disk, so it runs on a blocking thread, as loads do.
    pub fn exclusively<T>(&self, partition: i32, load: impl FnOnce() -> T) -> T {
        let turn = self.turn(partition);
        let _turn = turn.blocking_write();
        self.lock_loaded().entry(partition).or_default().loads += 1;
        load()
    }

    /// The coordinator has loaded `partition` as its leader in `leader_epoch`
    /// (or, led without a break, raised it to that epoch): its writes are
    /// taken while that epoch lasts. An epoch older than the last one changes
    /// nothing: leader epochs only grow.
    pub fn set_loaded(&self, partition: i32, leader_epoch: i32) {
        let mut loaded = self.lock_loaded();
        let entry = loaded.entry(partition).or_default();
        entry.epoch = Some(entry.epoch.map_or(leader_epoch, |e| e.max(leader_epoch)));
    }

    /// The epoch writes to `partition` are fenced by, with their ticket.
    fn loaded_epoch(&self, partition: i32) -> Option<(i32, AppendTicket)> {
        let loaded = self.lock_loaded();
        let entry = loaded.get(&partition)?;
        let ticket = AppendTicket {
            partition,
            loads: entry.loads,
        };
        entry.epoch.map(|epoch| (epoch, ticket))
    }

    /// Whether `ticket`'s partition was loaded since the ticket was taken.
    fn reloaded_since(&self, ticket: AppendTicket) -> bool {
        self.lock_loaded()
            .get(&ticket.partition)
            .is_some_and(|loaded| loaded.loads != ticket.loads)
    }

    /// Runs `write`, the cache write that follows the append `ticket` came
    /// from, unless its partition was loaded since (the load replayed the
    /// append from the log, and what it left may already be newer); a load
    /// waits for it meanwhile.
    pub async fn unless_reloaded<F, Fut>(&self, ticket: AppendTicket, write: F) -> io::Result<()>
    where
        F: FnOnce() -> Fut,
        Fut: Future<Output = io::Result<()>>,
    {
        let turn = self.turn(ticket.partition);
        let _shared = turn.read().await;
        if self.reloaded_since(ticket) {
            tracing::debug!(
                topic = self.topic,
                partition = ticket.partition,
                "a cache write dropped: the partition was loaded since its append"
            );
            return Ok(());
        }
        write().await
    }

    /// `unless_reloaded` from a blocking thread (a coordinator's store calls).
    pub fn unless_reloaded_blocking(
        &self,
        ticket: AppendTicket,
        write: impl FnOnce() -> io::Result<()>,
    ) -> io::Result<()> {
        let turn = self.turn(ticket.partition);
        let _shared = turn.blocking_read();
        if self.reloaded_since(ticket) {
            return Ok(());
        }
        write()
    }

    pub fn now_ms(&self) -> i64 {
        self.replicas.clock().now_ms()
    }

    /// The partition, if this broker leads it. Blocking.
    pub fn led(&self, partition: i32) -> Result<Arc<Partition>, PartitionError> {
        self.replicas
            .led(&TopicPartition::new(self.topic, partition))
    }

    /// Appends `records` to `partition` with acks=all and waits until they are
    /// committed (at most `INTERNAL_LOG_WRITE_TIMEOUT_MS` once its batch is
    /// appended, then Timeout), if the partition is led in the epoch its shard
    /// was loaded in; in one batch with the other writes of the partition
    /// queued meanwhile (see the module's note).
    pub async fn append(
        &self,
        partition: i32,
        records: Vec<KeyedRecord>,
    ) -> Result<AppendTicket, PartitionError> {
        let (epoch, ticket) = self
            .loaded_epoch(partition)
            .ok_or(PartitionError::NotLeaderOrFollower)?;
        if records.is_empty() {
            return Ok(ticket);
        }
        let (done, answer) = oneshot::channel();
        let write = QueuedWrite {
            epoch,
            bytes: record_bytes(&records),
            records,
            done,
        };
        let queued = {
            let mut queues = self.lock_queues();
            let queue = queues.entry(partition).or_default();
            if queue.writes.len() >= COORDINATOR_WRITES_QUEUED_MAX {
                Err(write)
            } else {
                queue.writes.push_back(write);
                Ok(!std::mem::replace(&mut queue.draining, true))
            }
        };
        let start_draining = match queued {
            Ok(start_draining) => start_draining,
            Err(alone) => {
                self.append_batch(partition, epoch, alone.records, None)
                    .await?;
                return Ok(ticket);
            }
        };
        if start_draining {
            let writer = self.clone();
            tokio::spawn(async move { writer.drain(partition).await });
        }
        // A drain task that ended without answering (the runtime shutting
        // down) leaves the write unconfirmed: Timeout, as for a wait that ran out.
        answer.await.map_err(|_| PartitionError::Timeout)??;
        Ok(ticket)
    }

    fn lock_queues(&self) -> std::sync::MutexGuard<'_, HashMap<i32, WriteQueue>> {
        self.queues
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Appends `partition`'s queued writes, a batch at a time, until its queue
    /// is empty.
    async fn drain(&self, partition: i32) {
        loop {
            let batch = {
                let mut queues = self.lock_queues();
                let queue = queues
                    .get_mut(&partition)
                    .expect("a partition being drained keeps its queue");
                assert!(queue.draining, "only the drain task takes batches");
                let batch = take_batch(&mut queue.writes);
                if batch.is_empty() {
                    queues.remove(&partition);
                    return;
                }
                batch
            };
            let epoch = batch[0].epoch;
            let mut records = Vec::with_capacity(batch.iter().map(|w| w.records.len()).sum());
            let mut waiting = Vec::with_capacity(batch.len());
            for write in batch {
                debug_assert_eq!(write.epoch, epoch, "a batch holds writes of one epoch");
                records.extend(write.records);
                waiting.push(write.done);
            }
            let result = self.append_batch(partition, epoch, records, None).await;
            for done in waiting {
                let answer = match &result {
                    Ok(()) => Ok(()),
                    Err(error) => Err(shared_failure(error)),
                };
                // A caller that went away needs no answer.
                let _ = done.send(answer);
            }
        }
    }

    /// `append` of records in the producer's transaction (a TxnOffsetCommit):
    /// a transactional batch, which the transaction's marker later commits or
    /// aborts in the partition.
    /// A transaction's first batch on the partition needs `verification`
    /// (`Partition::append_as_coordinator_verified`).
    pub async fn append_txn(
        &self,
        partition: i32,
        producer: TxnProducer,
        records: Vec<KeyedRecord>,
        verification: TxnVerification,
    ) -> Result<AppendTicket, PartitionError> {
        let txn = Some((producer, verification));
        self.append_in_loaded_epoch(partition, records, txn).await
    }

    /// An append in the producer's transaction, alone in its batch: fenced by
    /// the leader epoch the partition's shard was loaded in
    /// (NOT_LEADER_OR_FOLLOWER when none is).
    async fn append_in_loaded_epoch(
        &self,
        partition: i32,
        records: Vec<KeyedRecord>,
        txn: Option<(TxnProducer, TxnVerification)>,
    ) -> Result<AppendTicket, PartitionError> {
        let (epoch, ticket) = self
            .loaded_epoch(partition)
            .ok_or(PartitionError::NotLeaderOrFollower)?;
        self.append_batch(partition, epoch, records, txn).await?;
        Ok(ticket)
    }

    /// `append`, while the partition is led in `leader_epoch` (a load's own
    /// writes, before `set_loaded`).
    pub async fn append_in_epoch(
        &self,
        partition: i32,
        leader_epoch: i32,
        records: Vec<KeyedRecord>,
    ) -> Result<(), PartitionError> {
        self.append_batch(partition, leader_epoch, records, None)
            .await
    }

    async fn append_batch(
        &self,
        partition: i32,
        leader_epoch: i32,
        records: Vec<KeyedRecord>,
        txn: Option<(TxnProducer, TxnVerification)>,
    ) -> Result<(), PartitionError> {
        if records.is_empty() {
            return Ok(());
        }
        let now_ms = self.now_ms();
        let (producer, verification) = txn.unzip();
        let batch = producer_keyed_batch(records, producer, now_ms)
            .map_err(|e| PartitionError::Storage(io::Error::other(e)))?;
        let led = off_the_worker(|| self.led(partition))?;
        if led.leader_epoch().get() != leader_epoch {
            return Err(PartitionError::NotLeaderOrFollower);
        }
        led.check_enough_replicas()?;
        let appended = off_the_worker(|| match verification {
            Some(TxnVerification::Guarded(guard)) => {
                led.append_as_coordinator_verified(&batch, now_ms, guard)
            }
            Some(TxnVerification::Held) | None => led.append_as_coordinator(&batch, now_ms),
        })?;
        let end_offset = appended.info.last_offset.next();
        let wait = Duration::from_millis(INTERNAL_LOG_WRITE_TIMEOUT_MS);
        tokio::time::timeout(wait, led.wait_committed(end_offset, appended.generation))
            .await
            .map_err(|_| PartitionError::Timeout)??;
        if self.fsync_before_ack {
            self.replicas
                .flusher()
                .wait_durable(&led, end_offset)
                .await
                .map_err(PartitionError::Storage)?;
        }
        Ok(())
    }

    /// `append` from a blocking thread (a coordinator's store calls).
    pub fn append_blocking(
        &self,
        partition: i32,
        records: Vec<KeyedRecord>,
    ) -> Result<AppendTicket, PartitionError> {
        block_on(self.append(partition, records))
    }

    /// `append_in_epoch` from a blocking thread (a load's migration).
    pub fn append_in_epoch_blocking(
        &self,
        partition: i32,
        leader_epoch: i32,
        records: Vec<KeyedRecord>,
    ) -> Result<(), PartitionError> {
        block_on(self.append_in_epoch(partition, leader_epoch, records))
    }
}

/// Runs `append` to its end from a blocking thread of the runtime.
fn block_on<T>(
    append: impl Future<Output = Result<T, PartitionError>>,
) -> Result<T, PartitionError> {
    let runtime = tokio::runtime::Handle::try_current()
        .map_err(|e| PartitionError::Storage(io::Error::other(e)))?;
    runtime.block_on(append)
}
