//! The group coordinator's store on the replicated offsets topic, as Kafka's
//! GroupMetadataManager keeps it: every committed offset, group record and
//! deletion is a batch of Kafka's `__consumer_offsets` records
//! (`internal_topics::records`) appended to the group's partition on its leader, and
//! answered only once the high watermark passed it (acks=all; with
//! `--fsync-before-ack` also once fsynced here). Only then is it applied to the
//! local sled copy (`SledOffsetStore`), which every read serves.
//!
//! The log is the truth and sled a cache of it: a broker elected leader of a
//! partition replays the partition's log into the cache before its groups are
//! served (`load_partition`), so it sees what earlier leaders wrote. A
//! partition whose log is still empty takes what the cache holds of it, which
//! is how offsets and groups stored by a version that kept them only in sled
//! are written into the topic, once, at the first load.
//!
//! Refusals carry Kafka's mapping of append errors (`StoreRefused`):
//! NOT_LEADER_OR_FOLLOWER and storage errors answer NOT_COORDINATOR;
//! NOT_ENOUGH_REPLICAS, a missing partition and a timeout answer
//! COORDINATOR_NOT_AVAILABLE; a record too large answers
//! INVALID_COMMIT_OFFSET_SIZE.
//!
//! A TxnOffsetCommit is a transactional batch of the producer (its id and
//! epoch) appended the same way, and pending in the cache; the transaction's
//! marker, written to the partition when the transaction ends, commits or
//! aborts it there, after which the cache follows. A load replays both, so
//! a transaction left open by a coordinator that went away keeps its pending
//! offsets on the next one.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::io;
use std::sync::Arc;

use bytes::Bytes;

use crate::coordinator::group::StoreRefused;
use crate::coordinator::loader::{self, LoadRead, Replay, ShardCache};
use crate::coordinator::writer::{AppendTicket, ShardLog};
use crate::error_code;
use crate::internal_topics::records::{
    decode_group_value, decode_offset_value, decode_offsets_key, encode_group_value,
    encode_offset_value, encode_offsets_key, GroupValue, OffsetValue, OffsetsKey,
};
use crate::internal_topics::{group_partition, OFFSETS_TOPIC_NAME};
use crate::log::{KeyedEntry, KeyedRecord, LogError, TxnProducer};
use crate::replica::{PartitionError, ReplicaManager};
use crate::store::{
    CommitFuture, CommittedOffset, GroupRecord, LoadCheckpoint, OffsetStore, PendingOffsets,
    SledOffsetStore, StoredGroup, TxnOffsetStore,
};
use crate::types::TxnVerification;

#[derive(Clone)]
pub struct OffsetsTopic {
    cache: Arc<SledOffsetStore>,
    log: ShardLog,
}

impl OffsetsTopic {
    pub fn new(
        cache: Arc<SledOffsetStore>,
        replicas: Arc<ReplicaManager>,
        fsync_before_ack: bool,
    ) -> OffsetsTopic {
        OffsetsTopic {
            cache,
            log: ShardLog::new(replicas, OFFSETS_TOPIC_NAME, fsync_before_ack),
        }
    }

    fn append_blocking(
        &self,
        partition: i32,
        records: Vec<KeyedRecord>,
    ) -> io::Result<AppendTicket> {
        self.log
            .append_blocking(partition, records)
            .map_err(refused)
    }

    /// What the cache holds of the groups placed on `partition`.
    fn cached_groups(&self, partition: i32) -> io::Result<Vec<StoredGroup>> {
        let placed = |group_id: &String| group_partition(group_id) == partition;
        let mut groups: BTreeMap<String, StoredGroup> = BTreeMap::new();
        for (group_id, record) in self.cache.load_groups()? {
            if placed(&group_id) {
                groups.entry(group_id.clone()).or_default().record = Some(record);
            }
        }
        for group_id in self.cache.groups_with_offsets()? {
            if placed(&group_id) {
                let offsets = self.cache.fetch_group(&group_id)?;
                groups.entry(group_id.clone()).or_default().offsets = offsets;
            }
        }
        Ok(groups
            .into_iter()
            .map(|(group_id, group)| StoredGroup { group_id, ..group })
            .collect())
    }
}

/// Kafka's mapping of an offsets-log append error to the coordinator's answer
/// (GroupMetadataManager's `storeOffsets` / `storeGroup`).
fn refused(error: PartitionError) -> io::Error {
    let code = match &error {
        PartitionError::NotLeaderOrFollower
        | PartitionError::FencedLeaderEpoch
        | PartitionError::UnknownLeaderEpoch
        | PartitionError::StaleBrokerEpoch
        | PartitionError::Storage(_) => error_code::NOT_COORDINATOR,
        PartitionError::UnknownTopicOrPartition
        | PartitionError::NotEnoughReplicas
        | PartitionError::NotEnoughReplicasAfterAppend
        | PartitionError::Timeout => error_code::COORDINATOR_NOT_AVAILABLE,
        PartitionError::Log(LogError::MessageTooLarge | LogError::RecordListTooLarge) => {
            error_code::INVALID_COMMIT_OFFSET_SIZE
        }
        PartitionError::Log(_) => error_code::NOT_COORDINATOR,
    };
    io::Error::other(Tagged {
        refused: StoreRefused(code),
        cause: error.to_string(),
    })
}

/// As `refused`, for a group's record (Kafka's `storeGroup`): one too large
/// for the partition (a group with very many members or large assignments) is
/// UNKNOWN_SERVER_ERROR, as Kafka answers it, not an offset's size error.
fn group_refused(error: PartitionError) -> io::Error {
    match error {
        PartitionError::Log(LogError::MessageTooLarge | LogError::RecordListTooLarge) => {
            io::Error::other(Tagged {
                refused: StoreRefused(error_code::UNKNOWN_SERVER_ERROR),
                cause: error.to_string(),
            })
        }
        other => refused(other),
    }
}

/// A refusal with what caused it, for the log line.
#[derive(Debug)]
struct Tagged {
    refused: StoreRefused,
    cause: String,
}

impl std::fmt::Display for Tagged {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.refused, self.cause)
    }
}

impl std::error::Error for Tagged {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(&self.refused)
    }
}

fn offset_record(
    group_id: &str,
    topic: &str,
    partition: i32,
    value: &CommittedOffset,
) -> KeyedRecord {
    let key = OffsetsKey::Offset {
        group: group_id.to_string(),
        topic: topic.to_string(),
        partition,
    };
    let value = OffsetValue {
        offset: value.offset,
        leader_epoch: value.leader_epoch,
        metadata: value.metadata.clone(),
        commit_timestamp_ms: value.commit_timestamp_ms,
        expire_timestamp_ms: -1,
    };
    (
        Bytes::from(encode_offsets_key(&key)),
        Some(Bytes::from(encode_offset_value(&value))),
    )
}

fn offset_tombstone(group_id: &str, topic: &str, partition: i32) -> KeyedRecord {
    let key = OffsetsKey::Offset {
        group: group_id.to_string(),
        topic: topic.to_string(),
        partition,
    };
    (Bytes::from(encode_offsets_key(&key)), None)
}

fn group_record(group_id: &str, record: &GroupRecord, now_ms: i64) -> KeyedRecord {
    let key = OffsetsKey::Group {
        group: group_id.to_string(),
    };
    let value = GroupValue {
        protocol_type: record.protocol_type.clone().unwrap_or_default(),
        generation: record.generation_id,
        protocol: record.protocol.clone(),
        leader: record.leader.clone(),
        current_state_timestamp_ms: now_ms,
        members: record.members.clone(),
    };
    (
        Bytes::from(encode_offsets_key(&key)),
        Some(Bytes::from(encode_group_value(&value))),
    )
}

fn group_tombstone(group_id: &str) -> KeyedRecord {
    let key = OffsetsKey::Group {
        group: group_id.to_string(),
    };
    (Bytes::from(encode_offsets_key(&key)), None)
}

/// Every record of a stored group.
fn stored_group_records(group: &StoredGroup, now_ms: i64) -> Vec<KeyedRecord> {
    let mut records: Vec<KeyedRecord> = group
        .offsets
        .iter()
        .map(|(topic, partition, value)| offset_record(&group.group_id, topic, *partition, value))
        .collect();
    if let Some(record) = &group.record {
        records.push(group_record(&group.group_id, record, now_ms));
    }
    records
}

/// What a partition's log leaves: its groups, and the offsets of the
/// transactions still open in it.
#[derive(Default)]
struct Replayed {
    groups: HashMap<String, StoredGroup>,
    pending: Vec<PendingOffsets>,
}

/// An offset and the log offset of the record that wrote it.
type Logged = (CommittedOffset, i64);

/// Group → (topic, partition) → its offset.
type LoggedOffsets = HashMap<String, BTreeMap<(String, i32), Logged>>;

/// A partition's groups as its entries leave them, applied in log order
/// from the log start, as Kafka's GroupMetadataManager loads them: the latest
/// value of each key wins and a tombstone removes it; a transaction's offsets
/// wait for its marker, which commits them (unless a plain commit of the same
/// partition was written after them: their log offsets decide) or drops them.
#[derive(Default)]
pub struct GroupReplay {
    offsets: LoggedOffsets,
    /// Producer id → the offsets of its open transaction.
    open: HashMap<i64, LoggedOffsets>,
    records_of: HashMap<String, Option<GroupRecord>>,
}

fn invalid(what: String) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, what)
}

fn decode_offset(value: &Bytes) -> io::Result<CommittedOffset> {
    let value = decode_offset_value(value).map_err(|e| invalid(e.0))?;
    Ok(CommittedOffset {
        offset: value.offset,
        leader_epoch: value.leader_epoch,
        metadata: value.metadata,
        commit_timestamp_ms: value.commit_timestamp_ms,
    })
}

impl Replay for GroupReplay {
    fn replay(&mut self, entry: KeyedEntry) -> io::Result<()> {
        let (at, txn, key, value) = match entry {
            KeyedEntry::TxnEnd {
                producer_id,
                commit,
                ..
            } => {
                self.end_txn(producer_id, commit);
                return Ok(());
            }
            KeyedEntry::Record {
                offset,
                txn,
                key,
                value,
            } => (offset, txn, key, value),
        };
        match decode_offsets_key(&key).map_err(|e| invalid(e.0))? {
            // A record type this broker does not know, as Kafka skips them.
            None => {}
            Some(OffsetsKey::Offset {
                group,
                topic,
                partition,
            }) => {
                let entry = match txn {
                    Some(producer_id) => self
                        .open
                        .entry(producer_id)
                        .or_default()
                        .entry(group)
                        .or_default(),
                    None => self.offsets.entry(group).or_default(),
                };
                match value {
                    Some(value) => {
                        entry.insert((topic, partition), (decode_offset(&value)?, at));
                    }
                    None => {
                        entry.remove(&(topic, partition));
                    }
                }
            }
            Some(OffsetsKey::Group { group }) => {
                let value = match value {
                    Some(value) => {
                        let value = decode_group_value(&value).map_err(|e| invalid(e.0))?;
                        Some(GroupRecord {
                            protocol_type: Some(value.protocol_type)
                                .filter(|protocol_type| !protocol_type.is_empty()),
                            generation_id: value.generation,
                            protocol: value.protocol,
                            leader: value.leader,
                            members: value.members,
                        })
                    }
                    None => None,
                };
                self.records_of.insert(group, value);
            }
        }
        Ok(())
    }
}

impl GroupReplay {
    /// A transaction's marker: its offsets are committed over older ones, or dropped.
    fn end_txn(&mut self, producer_id: i64, commit: bool) {
        let Some(ended) = self.open.remove(&producer_id) else {
            return;
        };
        if !commit {
            return;
        }
        for (group, by_partition) in ended {
            let committed = self.offsets.entry(group).or_default();
            for (key, (value, at)) in by_partition {
                if committed.get(&key).is_none_or(|(_, later)| *later < at) {
                    committed.insert(key, (value, at));
                }
            }
        }
    }

    /// The groups and the open transactions' offsets the replay left.
    fn finish(self) -> Replayed {
        let mut replayed = Replayed::default();
        let groups = &mut replayed.groups;
        for (group_id, by_partition) in self.offsets {
            let group = groups.entry(group_id.clone()).or_default();
            group.group_id = group_id;
            group.offsets = by_partition
                .into_iter()
                .map(|((topic, partition), (value, _))| (topic, partition, value))
                .collect();
        }
        for (group_id, record) in self.records_of {
            let group = groups.entry(group_id.clone()).or_default();
            group.group_id = group_id;
            group.record = record;
        }
        for (producer_id, by_group) in self.open {
            for (group_id, by_partition) in by_group {
                replayed.pending.push(PendingOffsets {
                    group_id,
                    producer_id,
                    offsets: by_partition
                        .into_iter()
                        .map(|((topic, partition), (value, _))| (topic, partition, value))
                        .collect(),
                });
            }
        }
        replayed
    }
}

impl OffsetStore for OffsetsTopic {
    fn commit(&self, group_id: &str, offsets: Vec<(String, i32, CommittedOffset)>) -> CommitFuture {
        let records = offsets
            .iter()
            .map(|(topic, partition, value)| offset_record(group_id, topic, *partition, value))
            .collect();
        let partition = group_partition(group_id);
        let log = self.clone();
        let group_id = group_id.to_string();
        Box::pin(async move {
            let ticket = log.log.append(partition, records).await.map_err(refused)?;
            log.log
                .unless_reloaded(ticket, || log.cache.commit(&group_id, offsets))
                .await
        })
    }

    fn fetch(
        &self,
        group_id: &str,
        topic: &str,
        partition: i32,
    ) -> io::Result<Option<CommittedOffset>> {
        self.cache.fetch(group_id, topic, partition)
    }

    fn fetch_group(&self, group_id: &str) -> io::Result<Vec<(String, i32, CommittedOffset)>> {
        self.cache.fetch_group(group_id)
    }

    fn delete_offsets(&self, group_id: &str, partitions: &[(String, i32)]) -> io::Result<()> {
        let records = partitions
            .iter()
            .map(|(topic, partition)| offset_tombstone(group_id, topic, *partition))
            .collect();
        let ticket = self.append_blocking(group_partition(group_id), records)?;
        self.log
            .unless_reloaded_blocking(ticket, || self.cache.delete_offsets(group_id, partitions))
    }

    fn delete_group(&self, group_id: &str) -> io::Result<()> {
        let mut records: Vec<KeyedRecord> = self
            .cache
            .fetch_group(group_id)?
            .iter()
            .map(|(topic, partition, _)| offset_tombstone(group_id, topic, *partition))
            .collect();
        records.push(group_tombstone(group_id));
        let ticket = self.append_blocking(group_partition(group_id), records)?;
        self.log
            .unless_reloaded_blocking(ticket, || self.cache.delete_group(group_id))
    }

    fn save_group(&self, group_id: &str, record: &GroupRecord) -> io::Result<()> {
        let now_ms = self.log.now_ms();
        let records = vec![group_record(group_id, record, now_ms)];
        let ticket = self
            .log
            .append_blocking(group_partition(group_id), records)
            .map_err(group_refused)?;
        self.log
            .unless_reloaded_blocking(ticket, || self.cache.save_group(group_id, record))
    }

    fn load_groups(&self) -> io::Result<Vec<(String, GroupRecord)>> {
        self.cache.load_groups()
    }

    fn groups_with_offsets(&self) -> io::Result<Vec<String>> {
        self.cache.groups_with_offsets()
    }

    /// Kafka's GroupMetadataManager on an election: the partition's groups are
    /// rebuilt from its log, every record from the log start, and nothing
    /// else; the cache takes what the log leaves. (What the cache held is
    /// only compared with it, and written into a log that never had it.)
    fn load_partition(&self, partition: i32, leader_epoch: i32) -> io::Result<()> {
        loader::load(&self.log, self, partition, leader_epoch)
    }

    fn raise_epoch(&self, partition: i32, leader_epoch: i32) {
        self.log.set_loaded(partition, leader_epoch);
    }

    fn expire_group(&self, group_id: &str, cutoff_ms: i64) -> io::Result<usize> {
        let offsets = self.cache.fetch_group(group_id)?;
        let newest_ms = offsets
            .iter()
            .map(|(_, _, value)| value.commit_timestamp_ms)
            .max();
        if newest_ms.is_none_or(|newest| newest >= cutoff_ms) {
            return Ok(0);
        }
        let partitions: Vec<(String, i32)> = offsets
            .into_iter()
            .map(|(topic, partition, _)| (topic, partition))
            .collect();
        self.delete_offsets(group_id, &partitions)?;
        Ok(partitions.len())
    }
}

impl TxnOffsetStore for OffsetsTopic {
    fn stage_verified(
        &self,
        group_id: &str,
        producer_id: i64,
        producer_epoch: i16,
        offsets: Vec<(String, i32, CommittedOffset)>,
        verification: TxnVerification,
    ) -> CommitFuture {
        let records = offsets
            .iter()
            .map(|(topic, partition, value)| offset_record(group_id, topic, *partition, value))
            .collect();
        let partition = group_partition(group_id);
        let producer = TxnProducer {
            producer_id,
            producer_epoch,
        };
        let log = self.clone();
        let group_id = group_id.to_string();
        Box::pin(async move {
            let ticket = log
                .log
                .append_txn(partition, producer, records, verification)
                .await
                .map_err(refused)?;
            log.log
                .unless_reloaded(ticket, || {
                    log.cache
                        .stage(&group_id, producer_id, producer_epoch, offsets)
                })
                .await
        })
    }

    fn pending_groups(&self, producer_id: i64) -> io::Result<Vec<String>> {
        self.cache.pending_groups(producer_id)
    }

    /// The transaction's marker is in the partition already (written before
    /// its groups are completed), so only the cache follows it.
    fn complete_pending(
        &self,
        producer_id: i64,
        groups: &[String],
        commit: bool,
    ) -> io::Result<()> {
        self.cache.complete_pending(producer_id, groups, commit)
    }

    fn pending_partitions(&self, group_id: &str) -> io::Result<Vec<(String, i32)>> {
        self.cache.pending_partitions(group_id)
    }
}

/// The cache of the offsets partitions, as a load brings it in line with the
/// log: Kafka's GroupMetadataManager rebuilds a partition's groups from its
/// whole log on an election, and the cache takes what the log leaves. (What
/// the cache held is only compared with it, and written into a log that
/// never had it.)
impl ShardCache for OffsetsTopic {
    type State = GroupReplay;

    fn refused(&self, error: PartitionError) -> io::Error {
        refused(error)
    }

    /// None: the cache cannot stand for a prefix of the log (see
    /// `store::LoadCheckpoint`), so every load replays the whole partition.
    fn checkpoint(&self, _partition: i32) -> io::Result<Option<LoadCheckpoint>> {
        Ok(None)
    }

    fn is_migrated(&self, partition: i32) -> io::Result<bool> {
        self.cache.is_migrated(partition)
    }

    fn mark_migrated(&self, partition: i32) -> io::Result<()> {
        self.cache.mark_migrated(partition)
    }

    fn cached_records(&self, partition: i32, now_ms: i64) -> io::Result<Vec<KeyedRecord>> {
        Ok(self
            .cached_groups(partition)?
            .iter()
            .flat_map(|group| stored_group_records(group, now_ms))
            .collect())
    }

    fn materialise(&self, partition: i32, state: GroupReplay, read: &LoadRead) -> io::Result<()> {
        let Replayed {
            groups: mut replayed,
            pending,
        } = state.finish();
        let mut replaced: Vec<StoredGroup> = Vec::new();
        let mut seen: HashSet<String> = HashSet::new();
        for group in self.cached_groups(partition)? {
            seen.insert(group.group_id.clone());
            let from_log = replayed.remove(&group.group_id).unwrap_or(StoredGroup {
                group_id: group.group_id.clone(),
                ..StoredGroup::default()
            });
            if from_log != group {
                replaced.push(from_log);
            }
        }
        replaced.extend(
            replayed
                .into_values()
                .filter(|group| !seen.contains(&group.group_id)),
        );
        if !replaced.is_empty() {
            tracing::info!(
                partition,
                groups = replaced.len(),
                "the offsets log changed groups since this broker last led the partition"
            );
        }
        self.cache.replace_groups(replaced)?;
        // Offsets of transactions open in the log are pending here, and no
        // others: a transaction another leader ended is ended here too. (The
        // pending offsets of a cache from before the topic are kept besides:
        // they were never in the log.)
        let replaced =
            |group_id: &str| !read.migrated_now && group_partition(group_id) == partition;
        self.cache.replace_pending(&replaced, pending)
    }
}

#[cfg(test)]
mod tests;
