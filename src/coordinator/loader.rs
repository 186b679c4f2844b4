//! The runtime's loader (Kafka's `CoordinatorLoader`): when this broker is
//! elected leader of a partition of a coordinator's internal topic, the
//! partition is read back, in order, to its log end (this broker leads it, so
//! its end is what the followers will have), and every entry, data record or
//! transaction marker, is handed to the shard's `Replay::replay`; the state the
//! replay leaves is then materialised into the coordinator's sled cache
//! (`ShardCache::materialise`), which serves the shard's reads.
//!
//! A load reads from the log start, as Kafka's loaders do, unless the cache
//! keeps a load checkpoint (`ShardCache::checkpoint`: the transaction
//! coordinator's) and the log still holds the prefix it names: then only the
//! log after it is read. A partition whose log has never held what the cache
//! holds (a data dir of a version that kept coordinator state only in sled)
//! has the cache's records written into it first, once (`migrated`).
//!
//! Loads of one partition run one at a time and fence the shard's writes by
//! the epoch they loaded in (`ShardLog::exclusively`, `ShardLog::set_loaded`).
//!
//! Invariant: a partition is served (its epoch set) only after its cache holds
//! exactly what the replay of its whole log says, read in the epoch it is
//! served in.

use std::collections::HashSet;
use std::io;
use std::sync::Arc;

use bytes::Bytes;

use super::writer::ShardLog;
use crate::limits::{INTERNAL_LOG_LOAD_READ_BYTES, INTERNAL_LOG_MIGRATION_BATCH_BYTES};
use crate::log::{keyed_entries, KeyedEntry, KeyedRecord};
use crate::replica::{Partition, PartitionError};
use crate::store::LoadCheckpoint;

/// A shard's state as its partition's log rebuilds it, one entry at a time in
/// log order (Kafka's `CoordinatorShard.replay`).
pub trait Replay: Default {
    fn replay(&mut self, entry: KeyedEntry) -> io::Result<()>;
}

/// What a coordinator keeps of its partitions outside the log: its cache in
/// sled, which a load compares with what the replay left and brings in line.
/// Calls are blocking (a load runs on a blocking thread).
pub trait ShardCache {
    /// The state a load replays the partition into.
    type State: Replay;

    /// The coordinator's answer to a partition error of its load.
    fn refused(&self, error: PartitionError) -> io::Error;

    /// Where the cache stands in the partition, when a load may read only
    /// the log after it; None: every load replays the whole partition.
    fn checkpoint(&self, partition: i32) -> io::Result<Option<LoadCheckpoint>>;

    /// Whether what the cache held before the topic existed was written into
    /// the partition.
    fn is_migrated(&self, partition: i32) -> io::Result<bool>;

    fn mark_migrated(&self, partition: i32) -> io::Result<()>;

    /// What the cache holds of the partition, as the records that say it.
    fn cached_records(&self, partition: i32, now_ms: i64) -> io::Result<Vec<KeyedRecord>>;

    /// Makes the cache hold what `state` says of the partition.
    fn materialise(&self, partition: i32, state: Self::State, read: &LoadRead) -> io::Result<()>;
}

/// Loads `partition` into `cache` if it is still led here in `leader_epoch`,
/// once no other load of it runs, and then serves its writes in that epoch.
/// Blocking.
pub fn load<C: ShardCache>(
    log: &ShardLog,
    cache: &C,
    partition: i32,
    leader_epoch: i32,
) -> io::Result<()> {
    log.exclusively(partition, || {
        let led = log
            .led_in(partition, leader_epoch)
            .map_err(|e| cache.refused(e))?;
        let migrating = !cache.is_migrated(partition)?;
        let checkpoint = match migrating {
            true => None,
            false => cache.checkpoint(partition)?,
        };
        let mut read = log
            .read_since(&led, checkpoint)
            .map_err(|e| cache.refused(e))?;
        let mut entries = std::mem::take(&mut read.entries);
        tracing::debug!(
            topic = log.topic,
            partition,
            leader_epoch,
            entries = entries.len(),
            since_checkpoint = read.since_checkpoint,
            "replaying a coordinator's partition"
        );
        if migrating {
            entries.extend(migrate(log, cache, partition, leader_epoch, &entries)?);
            cache.mark_migrated(partition)?;
            read.migrated_now = true;
        }
        let mut state = C::State::default();
        for entry in entries {
            state.replay(entry)?;
        }
        cache.materialise(partition, state, &read)?;
        log.set_loaded(partition, leader_epoch);
        Ok(())
    })
}

/// Writes into the partition every record of what the cache held before the
/// topic existed whose key the log has never seen (an append that failed
/// half-way leaves the rest for the retry, and nothing newer in the log is
/// overwritten); the entries written, to replay after those read.
fn migrate<C: ShardCache>(
    log: &ShardLog,
    cache: &C,
    partition: i32,
    leader_epoch: i32,
    read: &[KeyedEntry],
) -> io::Result<Vec<KeyedEntry>> {
    let logged: HashSet<&Bytes> = read
        .iter()
        .filter_map(|entry| match entry {
            KeyedEntry::Record { key, .. } => Some(key),
            KeyedEntry::TxnEnd { .. } => None,
        })
        .collect();
    let missing: Vec<KeyedRecord> = cache
        .cached_records(partition, log.now_ms())?
        .into_iter()
        .filter(|(key, _)| !logged.contains(key))
        .collect();
    if !missing.is_empty() {
        tracing::info!(
            topic = log.topic,
            partition,
            records = missing.len(),
            "writing what the cache held before the topic existed into it"
        );
    }
    let mut written = Vec::with_capacity(missing.len());
    for batch in batches_by_size(missing) {
        log.append_in_epoch_blocking(partition, leader_epoch, batch.clone())
            .map_err(|e| cache.refused(e))?;
        written.extend(batch.into_iter().map(|(key, value)| KeyedEntry::Record {
            // After everything read: the log appended them there.
            offset: i64::MAX,
            txn: None,
            key,
            value,
        }));
    }
    Ok(written)
}

/// Reads of a shard's partition, on its leader.
impl ShardLog {
    /// The partition if this broker leads it in `leader_epoch`. Blocking.
    pub fn led_in(
        &self,
        partition: i32,
        leader_epoch: i32,
    ) -> Result<Arc<Partition>, PartitionError> {
        let led = self.led(partition).inspect_err(|error| {
            tracing::warn!(topic = self.topic, partition, leader_epoch, %error, "a coordinator's partition is not led here in the latest image");
        })?;
        if led.leader_epoch().get() != leader_epoch {
            tracing::warn!(
                topic = self.topic,
                partition,
                leader_epoch,
                local_leader_epoch = led.leader_epoch().get(),
                "a coordinator's partition is led here in another leader epoch"
            );
            return Err(PartitionError::NotLeaderOrFollower);
        }
        Ok(led)
    }

    /// The entries (data records, with their transaction, and transaction
    /// markers) of the partition, in order, up to its log end (this broker leads
    /// it, so its end is what the followers will have): those after
    /// `checkpoint` when the log still holds the prefix it names (its end within
    /// the log, the record below it written in the same leader epoch, and
    /// nothing after it compacted yet), else every one from the log start (as
    /// Kafka's TransactionStateManager always reads); with the checkpoint this
    /// read reached.
    /// Blocking.
    pub fn read_since(
        &self,
        led: &Arc<Partition>,
        checkpoint: Option<LoadCheckpoint>,
    ) -> Result<LoadRead, PartitionError> {
        let read = led.with_log(|log| {
            let epoch_below = |offset: i64| log.epoch_for_offset(offset - 1);
            // The cleaner must not have cleaned past the checkpoint: it drops a
            // tombstone (and the value it deletes) after delete.retention.ms,
            // and a read from the checkpoint would never see that the key was
            // deleted, so the cache would bring it back.
            let holds = checkpoint.is_some_and(|checkpoint| {
                checkpoint.end_offset > log.log_start_offset()
                    && checkpoint.end_offset <= log.log_end_offset()
                    && log.first_dirty_offset() <= checkpoint.end_offset
                    && epoch_below(checkpoint.end_offset) == Some(checkpoint.leader_epoch)
            });
            let end = log.log_end_offset();
            let reached = epoch_below(end).map(|leader_epoch| LoadCheckpoint {
                end_offset: end,
                leader_epoch,
            });
            Ok((log.log_start_offset(), end, reached, holds))
        })?;
        let (start, end, reached, holds) = read;
        let from = match checkpoint {
            Some(checkpoint) if holds => checkpoint.end_offset,
            _ => start,
        };
        Ok(LoadRead {
            entries: self.read_range(led, from, end)?,
            checkpoint: reached,
            since_checkpoint: holds,
            migrated_now: false,
        })
    }

    /// The entries of offsets `from..end`. Blocking.
    fn read_range(
        &self,
        led: &Arc<Partition>,
        from: i64,
        end: i64,
    ) -> Result<Vec<KeyedEntry>, PartitionError> {
        let mut offset = from;
        let mut out = Vec::new();
        while offset < end {
            let read = led.with_log(|log| {
                log.read(offset, INTERNAL_LOG_LOAD_READ_BYTES, end, true)
                    .map_err(PartitionError::Log)
            })?;
            let Some(slice) = read.records else { break };
            let bytes = slice.read().map_err(PartitionError::Storage)?;
            let (records, next) = keyed_entries(bytes).map_err(|e| {
                PartitionError::Storage(io::Error::new(io::ErrorKind::InvalidData, e))
            })?;
            out.extend(records);
            // Past the last batch read, records or none (compaction may empty one).
            offset = next.unwrap_or(end).max(offset + 1);
        }
        Ok(out)
    }
}

/// What a load read of its partition.
pub struct LoadRead {
    /// The entries read (taken by the replay before the cache materialises it).
    pub entries: Vec<KeyedEntry>,
    /// Where the read ended (None for an empty log).
    pub checkpoint: Option<LoadCheckpoint>,
    /// Whether `entries` are only those after the load's checkpoint.
    pub since_checkpoint: bool,
    /// Whether this load wrote what the cache held before the topic existed
    /// into the partition (the cache may hold what the log never had).
    pub migrated_now: bool,
}

/// `records` in batches of at most `INTERNAL_LOG_MIGRATION_BATCH_BYTES` of
/// keys and values each (a record larger than that is a batch of its own).
fn batches_by_size(records: Vec<KeyedRecord>) -> Vec<Vec<KeyedRecord>> {
    let mut batches = Vec::new();
    let mut batch = Vec::new();
    let mut bytes = 0;
    for record in records {
        let size = record.0.len() + record.1.as_ref().map_or(0, |v| v.len());
        if !batch.is_empty() && bytes + size > INTERNAL_LOG_MIGRATION_BATCH_BYTES {
            batches.push(std::mem::take(&mut batch));
            bytes = 0;
        }
        bytes += size;
        batch.push(record);
    }
    if !batch.is_empty() {
        batches.push(batch);
    }
    batches
}
