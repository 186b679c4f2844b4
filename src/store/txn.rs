//! Transaction metadata: one record per transactional id (Kafka's
//! `__transaction_state` log, kept as its latest value per key).
//!
//! [`SledTxnStore`] keeps one tree, `transactions`, in a sled database of its own, keyed by the
//! transactional id. Durability point: the future of [`TxnStore::save`] resolves `Ok` only after
//! the record was written (or, for a Dead record, removed) and fsynced through
//! [`DurableDb::fsync`]. The store's [`GroupCommit`] takes every save queued so far (at most
//! [`TXN_SAVE_QUEUE_MAX`] wait), applies them, fsyncs once for all of them (group commit across
//! concurrent transactions) and answers each. As in every store, a failed fsync is never
//! retried: the store's [`StorageHealth`] goes offline and every later save is refused until
//! restart.
//!
//! Ordering: saves are applied in the order they were queued; the coordinator never has two saves
//! of one transactional id in flight, so the stored record is always its latest.

use std::collections::BTreeSet;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use super::durable::{sled_to_io, wait_until_released, DurableDb};
use super::offsets::codec::{invalid, put_len_prefixed, Reader};
use super::CommitFuture;
use crate::group_commit::{Durable, GroupCommit, StorageHealth, Waiter};
use crate::txn::{TxnMetadata, TxnState};
use crate::types::TopicPartition;

/// Saves that may wait for the group commit at once; beyond it, `save` futures wait for
/// room. One record is a few dozen bytes plus its partition names.
pub const TXN_SAVE_QUEUE_MAX: usize = 1024;

/// sled's page cache for the transaction database: one small record per transactional id.
pub const TXN_DB_CACHE_BYTES: u64 = 16 * 1024 * 1024;

const TXN_TREE_NAME: &str = "transactions";
/// Version byte of the record encoding below.
const TXN_VALUE_VERSION: u8 = 1;

/// Persistence of transaction metadata. Shared across tasks through `Arc<dyn TxnStore>`.
pub trait TxnStore: Send + Sync + 'static {
    /// Store the metadata of its transactional id, replacing the earlier record; a Dead record
    /// removes it. The future resolves `Ok` once that is fsynced; it never blocks the runtime.
    fn save(&self, metadata: &TxnMetadata) -> CommitFuture;

    /// Every stored record, sorted by transactional id. Blocking; it runs once, at start.
    fn load_all(&self) -> io::Result<Vec<TxnMetadata>>;
}

/// [`TxnStore`] on a sled database of its own, with its group commit.
pub struct SledTxnStore {
    shared: Arc<Shared>,
    saves: GroupCommit<Shared>,
    flusher: tokio::task::JoinHandle<()>,
    dir: PathBuf,
}

struct Shared {
    db: DurableDb,
    tree: sled::Tree,
    fsyncs: AtomicU64,
    health: Arc<StorageHealth>,
}

/// One queued save: the record's key and its new value (None: remove the record).
struct Save {
    key: Vec<u8>,
    value: Option<Vec<u8>>,
}

impl Durable for Shared {
    type Write = Save;

    fn apply(&self, save: Save) -> io::Result<()> {
        match save.value {
            Some(value) => self.tree.insert(save.key, value).map(drop),
            None => self.tree.remove(save.key).map(drop),
        }
        .map_err(sled_to_io)
    }

    fn sync(&self) -> io::Result<()> {
        self.fsyncs.fetch_add(1, Ordering::Relaxed);
        self.db.fsync()
    }
}

impl SledTxnStore {
    /// Open (creating if needed) the database in `dir` and start its group commit on the
    /// current runtime. Blocking.
    pub fn open(dir: &Path) -> io::Result<SledTxnStore> {
        let db = DurableDb::open(dir, TXN_DB_CACHE_BYTES)?;
        let health = StorageHealth::new(format!("transaction store {}", dir.display()));
        let shared = Arc::new(Shared {
            tree: db.open_tree(TXN_TREE_NAME)?,
            db,
            fsyncs: AtomicU64::new(0),
            health: Arc::clone(&health),
        });
        let (saves, flusher) = GroupCommit::start(TXN_SAVE_QUEUE_MAX, health);
        Ok(SledTxnStore {
            shared,
            saves,
            flusher,
            dir: dir.to_path_buf(),
        })
    }

    /// The store's health: offline after a failed write or fsync.
    pub fn health(&self) -> &Arc<StorageHealth> {
        &self.shared.health
    }

    /// Answer every queued save, stop the group commit and wait until sled released the
    /// directory.
    pub async fn close(self) -> io::Result<()> {
        let SledTxnStore {
            shared,
            saves,
            flusher,
            dir,
        } = self;
        saves.close();
        drop(saves);
        flusher
            .await
            .map_err(|e| io::Error::other(format!("txn group commit failed: {e}")))?;
        drop(shared);
        tokio::task::spawn_blocking(move || wait_until_released(&dir))
            .await
            .map_err(|e| io::Error::other(format!("txn store close task failed: {e}")))?
    }

    /// fsyncs attempted since open.
    pub fn fsync_count(&self) -> u64 {
        self.shared.fsyncs.load(Ordering::Relaxed)
    }
}

impl TxnStore for SledTxnStore {
    fn save(&self, metadata: &TxnMetadata) -> CommitFuture {
        let save = Save {
            key: metadata.transactional_id.as_bytes().to_vec(),
            value: (metadata.state != TxnState::Dead).then(|| encode(metadata)),
        };
        let saves = self.saves.clone();
        // Weak: a future not yet polled must not keep a closed store's database open.
        let shared = Arc::downgrade(&self.shared);
        Box::pin(async move {
            let closed = || io::Error::other("transaction store is closed");
            let shared = shared.upgrade().ok_or_else(closed)?;
            let (done, done_rx) = tokio::sync::oneshot::channel();
            saves.submit(&shared, save, Waiter::Channel(done)).await;
            drop(saves);
            drop(shared);
            done_rx.await.map_err(|_| closed())?
        })
    }

    fn load_all(&self) -> io::Result<Vec<TxnMetadata>> {
        let mut out = Vec::new();
        for item in self.shared.tree.iter() {
            let (key, value) = item.map_err(sled_to_io)?;
            let transactional_id = String::from_utf8(key.to_vec())
                .map_err(|_| invalid("transaction record", "key is not UTF-8"))?;
            out.push(decode(&transactional_id, &value)?);
        }
        Ok(out)
    }
}

/// `version | producer_id | previous_producer_id | epoch | last_epoch | timeout_ms | state |
/// start_ms | last_update_ms | partition count (u32) | (topic, partition)*`, big-endian, strings
/// length-prefixed.
pub fn encode(metadata: &TxnMetadata) -> Vec<u8> {
    let mut out = Vec::with_capacity(64);
    out.push(TXN_VALUE_VERSION);
    out.extend_from_slice(&metadata.producer_id.to_be_bytes());
    out.extend_from_slice(&metadata.previous_producer_id.to_be_bytes());
    out.extend_from_slice(&metadata.producer_epoch.to_be_bytes());
    out.extend_from_slice(&metadata.last_producer_epoch.to_be_bytes());
    out.extend_from_slice(&metadata.timeout_ms.to_be_bytes());
    out.push(metadata.state.id());
    out.extend_from_slice(&metadata.start_timestamp_ms.to_be_bytes());
    out.extend_from_slice(&metadata.last_update_timestamp_ms.to_be_bytes());
    let count = u32::try_from(metadata.partitions.len()).expect("fewer than 4G partitions");
    out.extend_from_slice(&count.to_be_bytes());
    for tp in &metadata.partitions {
        put_len_prefixed(&mut out, tp.topic.as_bytes());
        out.extend_from_slice(&tp.partition.to_be_bytes());
    }
    out
}

pub fn decode(transactional_id: &str, bytes: &[u8]) -> io::Result<TxnMetadata> {
    const WHAT: &str = "transaction record";
    let mut reader = Reader::new(bytes, WHAT);
    reader.version(TXN_VALUE_VERSION)?;
    let producer_id = i64::from_be_bytes(reader.array()?);
    let previous_producer_id = i64::from_be_bytes(reader.array()?);
    let producer_epoch = i16::from_be_bytes(reader.array()?);
    let last_producer_epoch = i16::from_be_bytes(reader.array()?);
    let timeout_ms = i32::from_be_bytes(reader.array()?);
    let [state] = reader.array::<1>()?;
    let state = TxnState::from_id(state)
        .filter(|state| !matches!(state, TxnState::Dead | TxnState::PrepareEpochFence))
        .ok_or_else(|| invalid(WHAT, "bad state"))?;
    let start_timestamp_ms = i64::from_be_bytes(reader.array()?);
    let last_update_timestamp_ms = i64::from_be_bytes(reader.array()?);
    let count = u32::from_be_bytes(reader.array()?);
    let mut partitions = BTreeSet::new();
    for _ in 0..count {
        let topic = reader.len_prefixed_str()?;
        let partition = i32::from_be_bytes(reader.array()?);
        partitions.insert(TopicPartition::new(topic, partition));
    }
    reader.finish()?;
    Ok(TxnMetadata {
        transactional_id: transactional_id.to_string(),
        producer_id,
        previous_producer_id,
        producer_epoch,
        last_producer_epoch,
        timeout_ms,
        state,
        partitions,
        start_timestamp_ms,
        last_update_timestamp_ms,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ongoing(id: &str, producer_id: i64) -> TxnMetadata {
        let mut metadata = TxnMetadata::new(id, producer_id, 60_000, 1_000);
        metadata.producer_epoch = 3;
        metadata.last_producer_epoch = 2;
        metadata.state = TxnState::Ongoing;
        metadata.start_timestamp_ms = 1_500;
        metadata.partitions.insert(TopicPartition::new("orders", 2));
        metadata
            .partitions
            .insert(TopicPartition::new("__consumer_offsets", 17));
        metadata
    }

    #[test]
    fn records_round_trip_and_damage_is_reported() -> io::Result<()> {
        let metadata = ongoing("tx", 42);
        let bytes = encode(&metadata);
        assert_eq!(decode("tx", &bytes)?, metadata);
        assert!(decode("tx", &bytes[..bytes.len() - 1]).is_err());
        let mut bad_state = bytes.clone();
        bad_state[1 + 8 + 8 + 2 + 2 + 4] = 200;
        assert!(decode("tx", &bad_state).is_err());
        Ok(())
    }

    #[tokio::test]
    async fn saves_survive_reopen_and_dead_records_are_removed() -> io::Result<()> {
        let dir = tempfile::tempdir()?;
        let path = dir.path().join("txn");
        let store = SledTxnStore::open(&path)?;
        let first = ongoing("a", 1);
        let mut second = ongoing("b", 2);
        let saves: Vec<_> = [&first, &second].iter().map(|m| store.save(m)).collect();
        for save in saves {
            save.await?;
        }
        // Two saves queued together may share one fsync; at least one was made.
        assert!(store.fsync_count() >= 1);
        second.state = TxnState::Dead;
        store.save(&second).await?;
        store.close().await?;

        let store = SledTxnStore::open(&path)?;
        assert_eq!(store.load_all()?, vec![first]);
        store.close().await
    }
}
