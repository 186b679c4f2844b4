//! The transaction coordinator's records: one value per key (Kafka's `__transaction_state` log,
//! kept as its latest value per key). The store speaks bytes: the coordinator keys its records
//! by transactional id and encodes them itself (`txn::record`), so nothing here knows what a
//! transaction is.
//!
//! [`SledTxnStore`] keeps one tree, `transactions`, in a sled database of its own. Durability
//! point: the future of [`TxnStore::save`] resolves `Ok` only after the value was written (or,
//! for `None`, the key removed) and fsynced through
//! [`DurableDb::fsync`]. The store's [`GroupCommit`] takes every save queued so far (at most
//! [`TXN_SAVE_QUEUE_MAX`] wait), applies them, fsyncs once for all of them (group commit across
//! concurrent transactions) and answers each. As in every store, a failed fsync is never
//! retried: the store's [`StorageHealth`] goes offline and every later save is refused until
//! restart.
//!
//! Ordering: saves are applied in the order they were queued; the coordinator never has two saves
//! of one key in flight, so the stored value is always its latest.

use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use super::durable::{close_store, sled_to_io, DurableDb};
use super::load_checkpoint::{self, LoadCheckpoint};
use super::CommitFuture;
use crate::durability::{Durable, GroupCommit, StorageHealth, Waiter};
use crate::limits::TXN_DB_CACHE_BYTES;
use crate::limits::TXN_SAVE_QUEUE_MAX;

const TXN_TREE_NAME: &str = "transactions";
const MIGRATED_TREE_NAME: &str = "migrated_partitions";

/// One stored record: its key and its value, as the caller encoded them.
pub type KeyedRecord = (Vec<u8>, Vec<u8>);

/// Persistence of the transaction coordinator's records, as keyed bytes. Shared across tasks
/// through `Arc<dyn TxnStore>`.
pub trait TxnStore: Send + Sync + 'static {
    /// Store `value` under `key`, replacing the earlier value; `None` removes the key. The
    /// future resolves `Ok` once that is fsynced; it never blocks the runtime.
    fn save(&self, key: Vec<u8>, value: Option<Vec<u8>>) -> CommitFuture;

    /// Every stored record, sorted by key. Blocking.
    fn load_all(&self) -> io::Result<Vec<KeyedRecord>>;

    /// Brings what this store holds of one partition of the transaction state
    /// topic up to date before its transactions are loaded: a store kept beside
    /// a replicated log reads what other leaders wrote. A store that is the only
    /// copy has nothing to do. Writes to the partition are taken from then on
    /// only while it is led in `leader_epoch`. Blocking.
    fn load_partition(&self, _partition: i32, _leader_epoch: i32) -> io::Result<()> {
        Ok(())
    }

    /// The partition, loaded earlier and led here without a break since, is led
    /// in the later `leader_epoch`: writes to it are taken in that epoch from
    /// now on, with nothing loaded again. Cheap: no I/O.
    fn raise_epoch(&self, _partition: i32, _leader_epoch: i32) {}
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
    /// The transaction-log partitions whose records were written into the log.
    migrated: sled::Tree,
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
            migrated: db.open_tree(MIGRATED_TREE_NAME)?,
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
        close_store(saves, flusher, shared, dir, "txn store").await
    }

    /// Replaces these records (a value, or None to remove the key), in one
    /// batch and one fsync: what a copy of the replicated transaction log,
    /// rebuilt from it, writes. Blocking.
    pub fn replace(&self, records: Vec<(Vec<u8>, Option<Vec<u8>>)>) -> io::Result<()> {
        if records.is_empty() {
            return Ok(());
        }
        let mut batch = sled::Batch::default();
        for (key, value) in records {
            match value {
                Some(value) => batch.insert(key, value),
                None => batch.remove(key),
            }
        }
        self.shared.tree.apply_batch(batch).map_err(sled_to_io)?;
        self.shared.health.guard(|| Durable::sync(&*self.shared))
    }

    /// Whether the records this store held of `partition` before the
    /// transaction log existed were written into it (`mark_migrated`).
    pub fn is_migrated(&self, partition: i32) -> io::Result<bool> {
        load_checkpoint::is_migrated(&self.shared.migrated, partition)
    }

    /// Notes, durably, that `partition`'s records are in the transaction log.
    pub fn mark_migrated(&self, partition: i32) -> io::Result<()> {
        load_checkpoint::mark_migrated(&self.shared.migrated, partition)?;
        self.shared.health.guard(|| Durable::sync(&*self.shared))
    }

    /// Where this cache stands in `partition`'s log, as its last load left it.
    pub fn load_checkpoint(&self, partition: i32) -> io::Result<Option<LoadCheckpoint>> {
        load_checkpoint::read(&self.shared.migrated, partition)
    }

    /// Notes, durably, that this cache holds `partition`'s log up to `checkpoint`
    /// (and that the partition is migrated).
    pub fn set_load_checkpoint(
        &self,
        partition: i32,
        checkpoint: LoadCheckpoint,
    ) -> io::Result<()> {
        load_checkpoint::write(&self.shared.migrated, partition, checkpoint)?;
        self.shared.health.guard(|| Durable::sync(&*self.shared))
    }

    /// fsyncs attempted since open.
    pub fn fsync_count(&self) -> u64 {
        self.shared.fsyncs.load(Ordering::Relaxed)
    }
}

impl TxnStore for SledTxnStore {
    fn save(&self, key: Vec<u8>, value: Option<Vec<u8>>) -> CommitFuture {
        let save = Save { key, value };
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

    fn load_all(&self) -> io::Result<Vec<KeyedRecord>> {
        let mut out = Vec::new();
        for item in self.shared.tree.iter() {
            let (key, value) = item.map_err(sled_to_io)?;
            out.push((key.to_vec(), value.to_vec()));
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn saves_survive_reopen_and_removed_keys_stay_removed() -> io::Result<()> {
        let dir = tempfile::tempdir()?;
        let path = dir.path().join("txn");
        let store = SledTxnStore::open(&path)?;
        let first = (b"a".to_vec(), vec![1, 2, 3]);
        let second = (b"b".to_vec(), vec![4]);
        let saves: Vec<_> = [&first, &second]
            .iter()
            .map(|(key, value)| store.save(key.clone(), Some(value.clone())))
            .collect();
        for save in saves {
            save.await?;
        }
        // Two saves queued together may share one fsync; at least one was made.
        assert!(store.fsync_count() >= 1);
        store.save(second.0.clone(), None).await?;
        store.close().await?;

        let store = SledTxnStore::open(&path)?;
        assert_eq!(store.load_all()?, vec![first]);
        store.close().await
    }
}
