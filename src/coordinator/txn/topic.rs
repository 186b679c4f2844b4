//! The transaction coordinator's store on the replicated transaction state
//! topic, as Kafka's TransactionStateManager keeps it: every state change of a
//! transactional id is a TransactionLogKey/Value record (`internal_topics::records`)
//! appended to the id's `__transaction_state` partition on its leader with
//! acks=all (the topic's `min.insync.replicas`, `--transaction-state-log-min-isr`),
//! and only then applied to the local sled copy (`SledTxnStore`), which the
//! coordinator loads from. A Dead transaction is a tombstone.
//!
//! As with the offsets topic, the log is the truth and sled its cache: an
//! election replays the partition into the cache (`load_partition`), and a
//! partition whose log is still empty takes what the cache holds of it (the
//! records of a version that kept transactions only in sled), once.
//!
//! Kafka's record carries no `lastProducerEpoch` (KIP-360's retry marker); as
//! in Kafka, a transaction loaded from the log has none.

use std::collections::{BTreeMap, BTreeSet};
use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::Arc;

use bytes::Bytes;

use crate::coordinator::loader::{self, LoadRead, Replay, ShardCache};
use crate::coordinator::txn::{record, TxnMetadata, TxnState, NO_PRODUCER_ID};
use crate::coordinator::writer::ShardLog;
use crate::internal_topics::records::{
    decode_txn_key, decode_txn_value, encode_txn_key, encode_txn_value, TxnLogValue,
};
use crate::internal_topics::{txn_partition, TRANSACTION_STATE_TOPIC_NAME};
use crate::log::{KeyedEntry, KeyedRecord};
use crate::replica::{PartitionError, ReplicaManager};
use crate::store::{LoadCheckpoint, SledTxnStore, TxnStore};
use crate::types::ProducerEpoch;

#[derive(Clone)]
pub struct TxnStateTopic {
    cache: Arc<SledTxnStore>,
    log: ShardLog,
}

impl TxnStateTopic {
    pub fn new(
        cache: Arc<SledTxnStore>,
        replicas: Arc<ReplicaManager>,
        fsync_before_ack: bool,
    ) -> TxnStateTopic {
        TxnStateTopic {
            cache,
            log: ShardLog::new(replicas, TRANSACTION_STATE_TOPIC_NAME, fsync_before_ack),
        }
    }
}

fn failed(error: PartitionError) -> io::Error {
    io::Error::other(format!("transaction log: {error}"))
}

/// Kafka's record of a transaction's metadata.
fn log_record(metadata: &TxnMetadata) -> KeyedRecord {
    let key = Bytes::from(encode_txn_key(&metadata.transactional_id));
    if metadata.state == TxnState::Dead {
        return (key, None);
    }
    let value = TxnLogValue {
        producer_id: metadata.producer_id,
        previous_producer_id: metadata.previous_producer_id,
        next_producer_id: NO_PRODUCER_ID,
        producer_epoch: metadata.producer_epoch.get(),
        timeout_ms: metadata.timeout_ms,
        status: metadata.state.id() as i8,
        partitions: metadata.partitions.iter().cloned().collect(),
        last_update_timestamp_ms: metadata.last_update_timestamp_ms,
        start_timestamp_ms: metadata.start_timestamp_ms,
    };
    (key, Some(Bytes::from(encode_txn_value(&value))))
}

/// The metadata a record of the log stands for.
fn from_log(transactional_id: String, value: TxnLogValue) -> io::Result<TxnMetadata> {
    let state = u8::try_from(value.status)
        .ok()
        .and_then(TxnState::from_id)
        .ok_or_else(|| {
            io::Error::new(
                io::ErrorKind::InvalidData,
                format!("transaction state {} of {transactional_id}", value.status),
            )
        })?;
    Ok(TxnMetadata {
        transactional_id,
        producer_id: value.producer_id,
        previous_producer_id: value.previous_producer_id,
        producer_epoch: ProducerEpoch::new(value.producer_epoch),
        last_producer_epoch: ProducerEpoch::NONE,
        timeout_ms: value.timeout_ms,
        state,
        partitions: value.partitions.into_iter().collect::<BTreeSet<_>>(),
        start_timestamp_ms: value.start_timestamp_ms,
        last_update_timestamp_ms: value.last_update_timestamp_ms,
    })
}

/// A cached record as the log holds it (no `last_producer_epoch`), to compare.
fn as_logged(key: &[u8], value: &[u8]) -> Option<Vec<u8>> {
    let transactional_id = std::str::from_utf8(key).ok()?;
    let mut metadata = record::decode(transactional_id, value).ok()?;
    metadata.last_producer_epoch = ProducerEpoch::NONE;
    Some(record::encode(&metadata))
}

impl TxnStore for TxnStateTopic {
    fn save(
        &self,
        key: Vec<u8>,
        value: Option<Vec<u8>>,
    ) -> Pin<Box<dyn Future<Output = io::Result<()>> + Send + 'static>> {
        let this = self.clone();
        Box::pin(async move {
            let transactional_id = String::from_utf8(key.clone())
                .map_err(|_| io::Error::other("transactional id is not UTF-8"))?;
            let record = match &value {
                Some(bytes) => log_record(&record::decode(&transactional_id, bytes)?),
                None => (Bytes::from(encode_txn_key(&transactional_id)), None),
            };
            let ticket = this
                .log
                .append(txn_partition(&transactional_id), vec![record])
                .await
                .map_err(failed)?;
            this.log
                .unless_reloaded(ticket, || this.cache.save(key, value))
                .await
        })
    }

    fn load_all(&self) -> io::Result<Vec<(Vec<u8>, Vec<u8>)>> {
        self.cache.load_all()
    }

    fn load_partition(&self, partition: i32, leader_epoch: i32) -> io::Result<()> {
        loader::load(&self.log, self, partition, leader_epoch)
    }

    fn raise_epoch(&self, partition: i32, leader_epoch: i32) {
        self.log.set_loaded(partition, leader_epoch);
    }
}

/// A partition's transactions as its records leave them: the latest record
/// of each transactional id, as the cache encodes it (None: a tombstone or a
/// Dead transaction). Markers are not the transaction log's.
#[derive(Default)]
pub struct TxnReplay {
    latest: BTreeMap<Vec<u8>, Option<Vec<u8>>>,
}

impl Replay for TxnReplay {
    fn replay(&mut self, entry: KeyedEntry) -> io::Result<()> {
        let KeyedEntry::Record { key, value, .. } = entry else {
            return Ok(());
        };
        let invalid = |e: String| io::Error::new(io::ErrorKind::InvalidData, e);
        let transactional_id = decode_txn_key(&key).map_err(|e| invalid(e.0))?;
        let stored = match value {
            Some(value) => {
                let value = decode_txn_value(&value).map_err(|e| invalid(e.0))?;
                let metadata = from_log(transactional_id.clone(), value)?;
                (metadata.state != TxnState::Dead).then(|| record::encode(&metadata))
            }
            None => None,
        };
        self.latest.insert(transactional_id.into_bytes(), stored);
        Ok(())
    }
}

/// The transaction state cache, as a load brings it in line with the log.
impl ShardCache for TxnStateTopic {
    type State = TxnReplay;

    fn refused(&self, error: PartitionError) -> io::Error {
        failed(error)
    }

    fn checkpoint(&self, partition: i32) -> io::Result<Option<LoadCheckpoint>> {
        self.cache.load_checkpoint(partition)
    }

    fn is_migrated(&self, partition: i32) -> io::Result<bool> {
        self.cache.is_migrated(partition)
    }

    fn mark_migrated(&self, partition: i32) -> io::Result<()> {
        self.cache.mark_migrated(partition)
    }

    fn cached_records(&self, partition: i32, _now_ms: i64) -> io::Result<Vec<KeyedRecord>> {
        self.cached(partition)?
            .iter()
            .map(|(key, value)| {
                let transactional_id = String::from_utf8(key.clone())
                    .map_err(|_| io::Error::other("transactional id is not UTF-8"))?;
                Ok(log_record(&record::decode(&transactional_id, value)?))
            })
            .collect()
    }

    /// From a checkpoint, only the ids written since can have changed; an id
    /// the log and the cache agree on keeps what only the cache knows (its
    /// `last_producer_epoch`).
    fn materialise(&self, partition: i32, state: TxnReplay, read: &LoadRead) -> io::Result<()> {
        let cached = self.cached(partition)?;
        let latest = state.latest;
        let mut replaced: Vec<(Vec<u8>, Option<Vec<u8>>)> = Vec::new();
        for (key, value) in &cached {
            match latest.get(key) {
                None if !read.since_checkpoint => replaced.push((key.clone(), None)),
                None => {}
                Some(from_log) if *from_log != as_logged(key, value) => {
                    replaced.push((key.clone(), from_log.clone()));
                }
                // The same transaction: the cache keeps what only it knows.
                Some(_) => {}
            }
        }
        for (key, value) in latest {
            if !cached.contains_key(&key) && value.is_some() {
                replaced.push((key, value));
            }
        }
        if !replaced.is_empty() {
            tracing::info!(
                partition,
                transactions = replaced.len(),
                "the transaction log changed transactions since this broker last led the partition"
            );
        }
        self.cache.replace(replaced)?;
        match read.checkpoint {
            Some(checkpoint) => self.cache.set_load_checkpoint(partition, checkpoint),
            None => Ok(()),
        }
    }
}

impl TxnStateTopic {
    /// What the cache holds of the transactional ids placed on `partition`.
    fn cached(&self, partition: i32) -> io::Result<BTreeMap<Vec<u8>, Vec<u8>>> {
        let placed =
            |key: &[u8]| std::str::from_utf8(key).is_ok_and(|id| txn_partition(id) == partition);
        Ok(self
            .cache
            .load_all()?
            .into_iter()
            .filter(|(key, _)| placed(key))
            .collect())
    }
}
