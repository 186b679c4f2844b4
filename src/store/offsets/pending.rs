//! Offsets committed inside a transaction (TxnOffsetCommit), pending until their transaction
//! ends: committed offsets then, atomically, or dropped on abort. Until then OffsetFetch does not
//! see them, and one with `require_stable` learns that the partition has some pending.
//!
//! Two trees of the offsets database: `pending_txn_offsets`, keyed `group_len | group |
//! producer_id (i64 be) | topic_len | topic | partition (i32 be)` with a committed-offset value,
//! so that one prefix selects a group's pending offsets and a longer one those of one producer;
//! and `pending_txn_offsets_by_producer`, keyed `producer_id | group_len | group`, which names
//! the groups a producer has pending offsets in. Both change together, in one sled transaction.
//!
//! Durability: `stage` resolves once the offsets are fsynced (through the commit flusher, so it
//! shares its group commit); `complete_pending` moves or drops them and fsyncs before it returns.

use std::io;

use sled::transaction::{ConflictableTransactionError, TransactionError};
use sled::Transactional;

use super::codec;
use super::{CommitFuture, CommittedOffset, Shared, SledOffsetStore, Write};
use crate::store::codec::{put_len_prefixed, Reader};
use crate::store::durable::sled_to_io;
use crate::types::TxnVerification;

/// Pending transactional offsets, kept beside the committed ones.
pub trait TxnOffsetStore: Send + Sync + 'static {
    /// Store these offsets of one group as pending in `producer_id`'s transaction (in its
    /// `producer_epoch`), replacing earlier pending ones of the same partitions. Resolves
    /// once fsynced. A store that writes them to the group's partition of the offsets
    /// topic appends them as `verification` admitted them (InvalidTxnState once a
    /// marker ended the transaction a coordinator on another broker vouched for).
    fn stage_verified(
        &self,
        group_id: &str,
        producer_id: i64,
        producer_epoch: i16,
        offsets: Vec<(String, i32, CommittedOffset)>,
        verification: TxnVerification,
    ) -> CommitFuture;

    /// `stage_verified` of a transaction this broker's coordinator holds open.
    fn stage(
        &self,
        group_id: &str,
        producer_id: i64,
        producer_epoch: i16,
        offsets: Vec<(String, i32, CommittedOffset)>,
    ) -> CommitFuture {
        let held = TxnVerification::Held;
        self.stage_verified(group_id, producer_id, producer_epoch, offsets, held)
    }

    /// The groups in which `producer_id` has pending offsets, sorted.
    fn pending_groups(&self, producer_id: i64) -> io::Result<Vec<String>>;

    /// The transaction of `producer_id` ended: its pending offsets in these groups become
    /// committed offsets (`commit`) or are dropped, all in one atomic change. Durable on
    /// return (blocks for one fsync). Idempotent: groups without pending offsets are skipped.
    fn complete_pending(&self, producer_id: i64, groups: &[String], commit: bool)
        -> io::Result<()>;

    /// The partitions of the group with offsets pending in any transaction, sorted.
    fn pending_partitions(&self, group_id: &str) -> io::Result<Vec<(String, i32)>>;
}

fn producer_prefix(group_id: &str, producer_id: i64) -> Vec<u8> {
    let mut key = codec::group_prefix(group_id);
    key.extend_from_slice(&producer_id.to_be_bytes());
    key
}

fn pending_key(group_id: &str, producer_id: i64, topic: &str, partition: i32) -> Vec<u8> {
    let mut key = producer_prefix(group_id, producer_id);
    put_len_prefixed(&mut key, topic.as_bytes());
    key.extend_from_slice(&partition.to_be_bytes());
    key
}

/// (topic, partition) of a pending key.
fn decode_pending_key(key: &[u8]) -> io::Result<(String, i32)> {
    let mut reader = Reader::new(key, "pending offset key");
    reader.len_prefixed_str()?;
    reader.array::<8>()?;
    let topic = reader.len_prefixed_str()?;
    let partition = i32::from_be_bytes(reader.array()?);
    reader.finish()?;
    Ok((topic, partition))
}

fn by_producer_key(producer_id: i64, group_id: &str) -> Vec<u8> {
    let mut key = producer_id.to_be_bytes().to_vec();
    put_len_prefixed(&mut key, group_id.as_bytes());
    key
}

/// Offsets one producer has pending in one group's transaction.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct PendingOffsets {
    pub group_id: String,
    pub producer_id: i64,
    pub offsets: Vec<(String, i32, CommittedOffset)>,
}

impl SledOffsetStore {
    /// Replaces every pending offset of the groups `placed` selects (whatever
    /// their producer) with `pending`, in one sled transaction and one fsync:
    /// what a copy of the replicated offsets log, rebuilt from it, writes.
    /// Blocking.
    pub fn replace_pending(
        &self,
        placed: &dyn Fn(&str) -> bool,
        pending: Vec<PendingOffsets>,
    ) -> io::Result<()> {
        let mut pending_batch = sled::Batch::default();
        let mut by_producer = sled::Batch::default();
        let mut changed = false;
        for item in self.shared.pending.iter() {
            let (key, _) = item.map_err(sled_to_io)?;
            let group = Reader::new(&key, "pending offset key").len_prefixed_str()?;
            if placed(&group) {
                pending_batch.remove(key);
                changed = true;
            }
        }
        for item in self.shared.pending_by_producer.iter() {
            let (key, _) = item.map_err(sled_to_io)?;
            let mut reader = Reader::new(&key, "pending offsets index key");
            reader.array::<8>()?;
            if placed(&reader.len_prefixed_str()?) {
                by_producer.remove(key);
                changed = true;
            }
        }
        for entry in &pending {
            if entry.offsets.is_empty() {
                continue;
            }
            for (topic, partition, value) in &entry.offsets {
                pending_batch.insert(
                    pending_key(&entry.group_id, entry.producer_id, topic, *partition),
                    codec::encode_offset(value),
                );
            }
            by_producer.insert(
                by_producer_key(entry.producer_id, &entry.group_id),
                Vec::new(),
            );
            changed = true;
        }
        if !changed {
            return Ok(());
        }
        apply_staged(&self.shared, &pending_batch, &by_producer)?;
        self.shared.fsync()
    }
}

/// Applies one staged write: both trees or neither.
pub(super) fn apply_staged(
    shared: &Shared,
    pending: &sled::Batch,
    by_producer: &sled::Batch,
) -> io::Result<()> {
    (&shared.pending, &shared.pending_by_producer)
        .transaction(|(pending_tree, index_tree)| {
            pending_tree.apply_batch(pending)?;
            index_tree.apply_batch(by_producer)?;
            Ok::<(), ConflictableTransactionError<()>>(())
        })
        .map_err(transaction_to_io)
}

fn transaction_to_io(error: TransactionError<()>) -> io::Error {
    match error {
        TransactionError::Storage(e) => sled_to_io(e),
        TransactionError::Abort(()) => io::Error::other("pending offsets transaction aborted"),
    }
}

impl TxnOffsetStore for SledOffsetStore {
    /// Kept in sled alone: no partition to verify the transaction on.
    fn stage_verified(
        &self,
        group_id: &str,
        producer_id: i64,
        _producer_epoch: i16,
        offsets: Vec<(String, i32, CommittedOffset)>,
        _verification: TxnVerification,
    ) -> CommitFuture {
        if offsets.is_empty() {
            return Box::pin(std::future::ready(Ok(())));
        }
        let mut pending = sled::Batch::default();
        for (topic, partition, value) in &offsets {
            pending.insert(
                pending_key(group_id, producer_id, topic, *partition),
                codec::encode_offset(value),
            );
        }
        let mut by_producer = sled::Batch::default();
        by_producer.insert(by_producer_key(producer_id, group_id), Vec::new());
        self.queue(Write::Pending {
            pending,
            by_producer,
        })
    }

    fn pending_groups(&self, producer_id: i64) -> io::Result<Vec<String>> {
        let mut out = Vec::new();
        for item in self
            .shared
            .pending_by_producer
            .scan_prefix(producer_id.to_be_bytes())
        {
            let (key, _) = item.map_err(sled_to_io)?;
            let mut reader = Reader::new(&key, "pending offsets index key");
            reader.array::<8>()?;
            let group = reader.len_prefixed_str()?;
            reader.finish()?;
            out.push(group);
        }
        out.sort();
        Ok(out)
    }

    fn complete_pending(
        &self,
        producer_id: i64,
        groups: &[String],
        commit: bool,
    ) -> io::Result<()> {
        let mut offsets = sled::Batch::default();
        let mut pending = sled::Batch::default();
        let mut by_producer = sled::Batch::default();
        let mut changed = false;
        for group_id in groups {
            let index_key = by_producer_key(producer_id, group_id);
            if self
                .shared
                .pending_by_producer
                .contains_key(&index_key)
                .map_err(sled_to_io)?
            {
                by_producer.remove(index_key);
                changed = true;
            }
            for item in self
                .shared
                .pending
                .scan_prefix(producer_prefix(group_id, producer_id))
            {
                let (key, value) = item.map_err(sled_to_io)?;
                let (topic, partition) = decode_pending_key(&key)?;
                // The value is checked before it becomes a committed offset.
                codec::decode_offset(&value)?;
                if commit {
                    offsets.insert(codec::offset_key(group_id, &topic, partition), value);
                }
                pending.remove(key);
                changed = true;
            }
        }
        if !changed {
            return Ok(());
        }
        let shared = &self.shared;
        (
            &shared.offsets,
            &shared.pending,
            &shared.pending_by_producer,
        )
            .transaction(|(offsets_tree, pending_tree, index_tree)| {
                offsets_tree.apply_batch(&offsets)?;
                pending_tree.apply_batch(&pending)?;
                index_tree.apply_batch(&by_producer)?;
                Ok::<(), ConflictableTransactionError<()>>(())
            })
            .map_err(transaction_to_io)?;
        shared.fsync()
    }

    fn pending_partitions(&self, group_id: &str) -> io::Result<Vec<(String, i32)>> {
        let mut out = Vec::new();
        for item in self
            .shared
            .pending
            .scan_prefix(codec::group_prefix(group_id))
        {
            let (key, _) = item.map_err(sled_to_io)?;
            out.push(decode_pending_key(&key)?);
        }
        // Two producers may have the same partition pending.
        out.sort();
        out.dedup();
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::super::OffsetStore;
    use super::*;

    fn offset(value: i64) -> CommittedOffset {
        CommittedOffset {
            offset: value,
            leader_epoch: -1,
            metadata: "m".to_string(),
            commit_timestamp_ms: 7,
        }
    }

    #[tokio::test]
    async fn pending_offsets_become_visible_only_on_commit() -> io::Result<()> {
        let dir = tempfile::tempdir()?;
        let store = SledOffsetStore::open(&dir.path().join("offsets"))?;
        store
            .stage(
                "g",
                5,
                0,
                vec![("t".into(), 0, offset(10)), ("t".into(), 1, offset(11))],
            )
            .await?;
        store
            .stage("h", 5, 0, vec![("t".into(), 0, offset(20))])
            .await?;
        store
            .stage("g", 6, 0, vec![("t".into(), 0, offset(30))])
            .await?;
        assert_eq!(store.fetch("g", "t", 0)?, None);
        assert_eq!(
            store.pending_groups(5)?,
            vec!["g".to_string(), "h".to_string()]
        );
        assert_eq!(
            store.pending_partitions("g")?,
            vec![("t".to_string(), 0), ("t".to_string(), 1)]
        );

        store.complete_pending(5, &["g".to_string()], true)?;
        assert_eq!(store.fetch("g", "t", 0)?, Some(offset(10)));
        assert_eq!(store.fetch("g", "t", 1)?, Some(offset(11)));
        // Producer 6 still has one pending in g; producer 5 still one in h.
        assert_eq!(store.pending_partitions("g")?, vec![("t".to_string(), 0)]);
        assert_eq!(store.pending_groups(5)?, vec!["h".to_string()]);

        store.complete_pending(6, &["g".to_string()], false)?;
        assert_eq!(store.fetch("g", "t", 0)?, Some(offset(10)));
        assert!(store.pending_partitions("g")?.is_empty());
        // Completing again is harmless.
        store.complete_pending(6, &["g".to_string()], true)?;
        assert_eq!(store.fetch("g", "t", 0)?, Some(offset(10)));
        store.close().await
    }

    #[tokio::test]
    async fn pending_offsets_survive_reopen() -> io::Result<()> {
        let dir = tempfile::tempdir()?;
        let path = dir.path().join("offsets");
        let store = SledOffsetStore::open(&path)?;
        store
            .stage("g", 9, 0, vec![("t".into(), 3, offset(4))])
            .await?;
        store.close().await?;
        let store = SledOffsetStore::open(&path)?;
        assert_eq!(store.pending_groups(9)?, vec!["g".to_string()]);
        store.complete_pending(9, &["g".to_string()], true)?;
        store.close().await?;
        let store = SledOffsetStore::open(&path)?;
        assert_eq!(store.fetch("g", "t", 3)?, Some(offset(4)));
        assert!(store.pending_groups(9)?.is_empty());
        store.close().await
    }
}
