//! The runtime's writer (Kafka's `PartitionWriter`): a shard's records
//! appended to its partition of the coordinator's internal topic on the
//! leader with acks=all, and answered once the high watermark passed them
//! (with `--fsync-before-ack`, also once fsynced here).
//! Each write is its own append with its own wait; writes of one partition
//! are not yet batched together.
//!
//! Fencing: a shard's writes go through only while the partition is led in the
//! leader epoch it was last loaded in (`set_loaded`). A broker that lost the
//! leadership and won it back in a later epoch holds state from before, which
//! another leader may have changed meanwhile: until the shard has loaded the
//! partition again, its writes are refused (NotLeaderOrFollower, which
//! coordinators answer NOT_COORDINATOR).
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
//! Invariant: a write is answered Ok only once it is committed, and it is
//! appended only in the epoch it was fenced by.

use std::collections::HashMap;
use std::future::Future;
use std::io;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::RwLock;

use crate::limits::INTERNAL_LOG_WRITE_TIMEOUT_MS;
use crate::log::{producer_keyed_batch, KeyedRecord, TxnProducer};
use crate::replica::{off_the_worker, Partition, PartitionError, ReplicaManager};
use crate::types::TopicPartition;

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
    /// committed (at most `INTERNAL_LOG_WRITE_TIMEOUT_MS`, then Timeout), if
    /// the partition is led in the epoch its shard was loaded in. Blocking
    /// calls run off the worker.
    pub async fn append(
        &self,
        partition: i32,
        records: Vec<KeyedRecord>,
    ) -> Result<AppendTicket, PartitionError> {
        let (epoch, ticket) = self
            .loaded_epoch(partition)
            .ok_or(PartitionError::NotLeaderOrFollower)?;
        self.append_batch(partition, epoch, records, None).await?;
        Ok(ticket)
    }

    /// `append` of records in the producer's transaction (a TxnOffsetCommit):
    /// a transactional batch, which the transaction's marker later commits or
    /// aborts in the partition.
    pub async fn append_txn(
        &self,
        partition: i32,
        producer: TxnProducer,
        records: Vec<KeyedRecord>,
    ) -> Result<AppendTicket, PartitionError> {
        let (epoch, ticket) = self
            .loaded_epoch(partition)
            .ok_or(PartitionError::NotLeaderOrFollower)?;
        self.append_batch(partition, epoch, records, Some(producer))
            .await?;
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
        txn: Option<TxnProducer>,
    ) -> Result<(), PartitionError> {
        if records.is_empty() {
            return Ok(());
        }
        let now_ms = self.now_ms();
        let batch = producer_keyed_batch(records, txn, now_ms)
            .map_err(|e| PartitionError::Storage(io::Error::other(e)))?;
        let led = off_the_worker(|| self.led(partition))?;
        if led.leader_epoch().get() != leader_epoch {
            return Err(PartitionError::NotLeaderOrFollower);
        }
        led.check_enough_replicas()?;
        let appended = off_the_worker(|| led.append_as_coordinator(&batch, now_ms))?;
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
        let runtime = tokio::runtime::Handle::try_current()
            .map_err(|e| PartitionError::Storage(io::Error::other(e)))?;
        runtime.block_on(self.append(partition, records))
    }

    /// `append_in_epoch` from a blocking thread (a load's migration).
    pub fn append_in_epoch_blocking(
        &self,
        partition: i32,
        leader_epoch: i32,
        records: Vec<KeyedRecord>,
    ) -> Result<(), PartitionError> {
        let runtime = tokio::runtime::Handle::try_current()
            .map_err(|e| PartitionError::Storage(io::Error::other(e)))?;
        runtime.block_on(self.append_in_epoch(partition, leader_epoch, records))
    }
}
