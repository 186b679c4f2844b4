//! Committed consumer-group offsets, and what of each group outlives a restart.
//!
//! [`SledOffsetStore`] keeps two trees in a sled database of its own: `offsets` (one entry per
//! group, topic and partition; see `codec` for the key layout, which makes a prefix scan
//! return exactly one group) and `groups` (one [`GroupRecord`] per group id). It is shared by
//! the group coordinator's tasks through `Arc<dyn OffsetStore>`.
//!
//! Durability points, each an fsync through [`DurableDb::fsync`]:
//!
//! - **OffsetCommit**: the future returned by [`OffsetStore::commit`] resolves `Ok` only after
//!   the commit was applied to sled and fsynced. The store's [`GroupCommit`] takes every
//!   commit queued so far (at most [`OFFSET_COMMIT_QUEUE_MAX`] wait), applies each as one
//!   atomic sled batch, fsyncs once for all of them and then answers each waiter. When the
//!   fsync fails, every waiter of that round gets the error.
//! - **delete_offsets, delete_group, save_group, expire**: fsynced on the caller's thread
//!   before they return `Ok`. They block for one fsync (a few milliseconds on most disks).
//!
//! A failed fsync is never retried: the kernel may have dropped the dirty pages, so a later
//! success would prove nothing. Once one fails, the store's [`StorageHealth`] is offline and
//! every later durable write is refused with an error until the broker is restarted (the
//! broker watches that health and exits). Reads (`fetch`, `fetch_group`, `load_groups`,
//! `groups_with_offsets`) only touch sled's memory and never wait for an fsync.
//!
//! Ordering: writes of one caller land in the order it awaited them. A commit whose future
//! has not resolved may land before or after a concurrent delete of the same group; the
//! group coordinator, which owns the group, serializes the two.

use std::future::Future;
use std::io;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use super::durable::{close_store, sled_to_io, DurableDb};
use super::load_checkpoint;
use crate::durability::{Durable, GroupCommit, StorageHealth};
pub use crate::internal_topics::records::MemberValue;
use crate::limits::OFFSETS_DB_CACHE_BYTES;
use crate::limits::OFFSET_COMMIT_QUEUE_MAX;

pub(in crate::store) mod codec;
mod pending;
#[cfg(test)]
mod tests;

pub use pending::{PendingOffsets, TxnOffsetStore};

const OFFSETS_TREE_NAME: &str = "offsets";
const GROUPS_TREE_NAME: &str = "groups";
const PENDING_TREE_NAME: &str = "pending_txn_offsets";
const PENDING_BY_PRODUCER_TREE_NAME: &str = "pending_txn_offsets_by_producer";
const MIGRATED_TREE_NAME: &str = "migrated_partitions";

/// One committed offset, as Kafka's OffsetAndMetadata.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CommittedOffset {
    pub offset: i64,
    /// -1 if the client sent none.
    pub leader_epoch: i32,
    pub metadata: String,
    pub commit_timestamp_ms: i64,
}

/// What is kept of a group across restarts and coordinator moves, as Kafka's
/// `GroupMetadataValue` keeps it: a group stored with members comes back Stable
/// with them (their assignments kept, their sessions started afresh); one
/// stored without comes back Empty.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct GroupRecord {
    pub protocol_type: Option<String>,
    pub generation_id: i32,
    /// The generation's protocol; None when the group has no members.
    pub protocol: Option<String>,
    pub leader: Option<String>,
    /// Each with its metadata for `protocol` (`subscription`) and its assignment.
    pub members: Vec<MemberValue>,
}

/// Everything stored of one group.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct StoredGroup {
    pub group_id: String,
    pub record: Option<GroupRecord>,
    /// By topic and partition.
    pub offsets: Vec<(String, i32, CommittedOffset)>,
}

/// Resolves once a commit is durable, or with the error that kept it from being so.
pub type CommitFuture = Pin<Box<dyn Future<Output = io::Result<()>> + Send + 'static>>;

/// Persistence of committed offsets and group records. Shared across tasks and threads.
pub trait OffsetStore: Send + Sync + 'static {
    /// Store these offsets of one group, atomically. The future resolves `Ok` once they are
    /// fsynced; it never blocks the async runtime (the fsync runs on the flusher thread).
    fn commit(&self, group_id: &str, offsets: Vec<(String, i32, CommittedOffset)>) -> CommitFuture;

    fn fetch(
        &self,
        group_id: &str,
        topic: &str,
        partition: i32,
    ) -> io::Result<Option<CommittedOffset>>;

    /// Every offset of the group, sorted by topic then partition.
    fn fetch_group(&self, group_id: &str) -> io::Result<Vec<(String, i32, CommittedOffset)>>;

    /// Remove these offsets of one group. Durable on return: blocks for one fsync.
    fn delete_offsets(&self, group_id: &str, partitions: &[(String, i32)]) -> io::Result<()>;

    /// Remove every offset of the group and its record. Durable on return: blocks for one
    /// fsync.
    fn delete_group(&self, group_id: &str) -> io::Result<()>;

    /// Store the group's record, replacing any earlier one. Durable on return: blocks for
    /// one fsync.
    fn save_group(&self, group_id: &str, record: &GroupRecord) -> io::Result<()>;

    /// Every stored group record, sorted by group id.
    fn load_groups(&self) -> io::Result<Vec<(String, GroupRecord)>>;

    /// Every group id with at least one committed offset, sorted.
    fn groups_with_offsets(&self) -> io::Result<Vec<String>>;

    /// Brings what this store holds of one partition of the offsets topic up to
    /// date before its groups are loaded: a store kept beside a replicated log
    /// reads what other leaders wrote. A store that is the only copy has
    /// nothing to do. Writes to the partition are taken from then on only
    /// while it is led in `leader_epoch`.
    fn load_partition(&self, _partition: i32, _leader_epoch: i32) -> io::Result<()> {
        Ok(())
    }

    /// The partition, loaded earlier and led here without a break since, is led
    /// in the later `leader_epoch`: writes to it are taken in that epoch from
    /// now on, with nothing loaded again. Cheap: no I/O.
    fn raise_epoch(&self, _partition: i32, _leader_epoch: i32) {}

    /// Delete every offset of the group if its newest `commit_timestamp_ms` is older than
    /// `cutoff_ms`. Returns how many offsets were removed; durable on return (blocks for one
    /// fsync when anything was removed). An offset committed meanwhile is never removed.
    fn expire_group(&self, group_id: &str, cutoff_ms: i64) -> io::Result<usize>;

    /// `offsets.retention.minutes`: `expire_group` each group for which `is_empty` is
    /// true, with the cutoff `now_ms - retention_ms`. Returns how many offsets were
    /// removed, each group's durable before the next is looked at.
    fn expire(
        &self,
        now_ms: i64,
        retention_ms: i64,
        is_empty: &dyn Fn(&str) -> bool,
    ) -> io::Result<usize> {
        let cutoff_ms = now_ms.saturating_sub(retention_ms);
        let mut removed = 0;
        for group_id in self.groups_with_offsets()? {
            if is_empty(&group_id) {
                removed += self.expire_group(&group_id, cutoff_ms)?;
            }
        }
        Ok(removed)
    }
}

/// [`OffsetStore`] on a sled database of its own, with its group commit.
pub struct SledOffsetStore {
    shared: Arc<Shared>,
    commits: GroupCommit<Shared>,
    flusher: tokio::task::JoinHandle<()>,
    dir: PathBuf,
}

/// What the store and its flusher thread share.
struct Shared {
    db: DurableDb,
    offsets: sled::Tree,
    groups: sled::Tree,
    /// Offsets of open transactions, by group then producer id (see `pending`).
    pending: sled::Tree,
    /// Which groups each producer id has pending offsets in.
    pending_by_producer: sled::Tree,
    /// The offsets-topic partitions whose offsets and groups were written into
    /// the topic.
    migrated: sled::Tree,
    /// fsyncs attempted, for tests and metrics.
    fsyncs: AtomicU64,
    /// Offline after the first failed write or fsync; every later durable write is refused.
    health: Arc<StorageHealth>,
    #[cfg(test)]
    hooks: tests::Hooks,
}

/// What one queued write changes.
enum Write {
    /// Committed offsets.
    Offsets(sled::Batch),
    /// Pending transactional offsets and their producer index, applied together atomically.
    Pending {
        pending: sled::Batch,
        by_producer: sled::Batch,
    },
}

impl SledOffsetStore {
    /// Open (creating if needed) the offsets database in `dir` and start its group commit on
    /// the current runtime. Blocking; it runs once, at startup.
    pub fn open(dir: &Path) -> io::Result<SledOffsetStore> {
        let db = DurableDb::open(dir, OFFSETS_DB_CACHE_BYTES)?;
        let health = StorageHealth::new(format!("offsets store {}", dir.display()));
        let shared = Arc::new(Shared {
            offsets: db.open_tree(OFFSETS_TREE_NAME)?,
            groups: db.open_tree(GROUPS_TREE_NAME)?,
            pending: db.open_tree(PENDING_TREE_NAME)?,
            pending_by_producer: db.open_tree(PENDING_BY_PRODUCER_TREE_NAME)?,
            migrated: db.open_tree(MIGRATED_TREE_NAME)?,
            db,
            fsyncs: AtomicU64::new(0),
            health: Arc::clone(&health),
            #[cfg(test)]
            hooks: tests::Hooks::default(),
        });
        let (commits, flusher) = GroupCommit::start(OFFSET_COMMIT_QUEUE_MAX, health);
        Ok(SledOffsetStore {
            shared,
            commits,
            flusher,
            dir: dir.to_path_buf(),
        })
    }

    /// The store's health: offline after a failed write or fsync.
    pub fn health(&self) -> &Arc<StorageHealth> {
        &self.shared.health
    }

    /// Answer every commit queued so far, stop the flusher thread and wait until sled has
    /// released the directory, so that it may be opened again. Commits queued after this
    /// fail with an error. Dropping the store without `close` is safe too (every commit that
    /// resolved `Ok` is durable), but the directory is released a moment later.
    pub async fn close(self) -> io::Result<()> {
        let SledOffsetStore {
            shared,
            commits,
            flusher,
            dir,
        } = self;
        close_store(commits, flusher, shared, dir, "offsets").await
    }

    /// Replaces everything stored of each given group (its committed offsets and
    /// its record) with what is given: a group with no record and no offsets is
    /// removed. One fsync for all of them; what a copy of the replicated offsets
    /// log, rebuilt from it, writes. Blocking.
    pub fn replace_groups(&self, groups: Vec<StoredGroup>) -> io::Result<()> {
        if groups.is_empty() {
            return Ok(());
        }
        let mut offsets = sled::Batch::default();
        let mut records = sled::Batch::default();
        for group in &groups {
            for (key, _) in self.shared.group_offsets_raw(&group.group_id)? {
                offsets.remove(key);
            }
            for (topic, partition, value) in &group.offsets {
                offsets.insert(
                    codec::offset_key(&group.group_id, topic, *partition),
                    codec::encode_offset(value),
                );
            }
            match &group.record {
                Some(record) => {
                    records.insert(group.group_id.as_bytes(), codec::encode_group(record))
                }
                None => records.remove(group.group_id.as_bytes()),
            }
        }
        self.shared
            .offsets
            .apply_batch(offsets)
            .map_err(sled_to_io)?;
        self.shared
            .groups
            .apply_batch(records)
            .map_err(sled_to_io)?;
        self.shared.fsync()
    }

    /// Whether the offsets and groups this store held of `partition` before the
    /// offsets topic existed were written into it (`mark_migrated`).
    pub fn is_migrated(&self, partition: i32) -> io::Result<bool> {
        load_checkpoint::is_migrated(&self.shared.migrated, partition)
    }

    /// Notes, durably, that `partition`'s offsets and groups are in the topic.
    pub fn mark_migrated(&self, partition: i32) -> io::Result<()> {
        load_checkpoint::mark_migrated(&self.shared.migrated, partition)?;
        self.shared.fsync()
    }

    /// fsyncs attempted since open (commit rounds plus synchronous writes).
    pub fn fsync_count(&self) -> u64 {
        self.shared.fsyncs.load(Ordering::Relaxed)
    }

    /// Hand a write to the group commit; the future resolves once it is fsynced.
    fn queue(&self, write: Write) -> CommitFuture {
        let commits = self.commits.clone();
        // Weak: a future not yet polled must not keep a closed store's database open.
        let shared = Arc::downgrade(&self.shared);
        Box::pin(async move {
            let shared = shared.upgrade().ok_or_else(flusher_gone)?;
            let (done, done_rx) = tokio::sync::oneshot::channel();
            commits
                .submit(&shared, write, crate::durability::Waiter::Channel(done))
                .await;
            #[cfg(test)]
            shared.hooks.submitted.fetch_add(1, Ordering::SeqCst);
            // Let go of the handle before waiting, so that a pending commit never keeps the
            // group commit alive past `close`.
            drop(commits);
            drop(shared);
            done_rx.await.map_err(|_| flusher_gone())?
        })
    }
}

impl Durable for Shared {
    type Write = Write;

    fn apply(&self, write: Write) -> io::Result<()> {
        #[cfg(test)]
        let _held = self.hooks.hold_flusher.lock();
        self.apply_write(write)
    }

    fn sync(&self) -> io::Result<()> {
        self.fsyncs.fetch_add(1, Ordering::Relaxed);
        #[cfg(test)]
        if self.hooks.fail_fsync.load(Ordering::Relaxed) {
            return Err(io::Error::other("injected fsync failure"));
        }
        self.db.fsync()
    }
}

impl Shared {
    /// A synchronous durability point, under the same rule as the group commit's rounds.
    fn fsync(&self) -> io::Result<()> {
        self.health.guard(|| Durable::sync(self))
    }

    fn apply_write(&self, write: Write) -> io::Result<()> {
        match write {
            Write::Offsets(batch) => self.offsets.apply_batch(batch).map_err(sled_to_io),
            Write::Pending {
                pending,
                by_producer,
            } => pending::apply_staged(self, &pending, &by_producer),
        }
    }

    fn apply_then_fsync(&self, tree: &sled::Tree, batch: sled::Batch) -> io::Result<()> {
        tree.apply_batch(batch).map_err(sled_to_io)?;
        self.fsync()
    }

    /// Every stored key and value of the group's offsets, in key order.
    fn group_offsets_raw(&self, group_id: &str) -> io::Result<Vec<(sled::IVec, sled::IVec)>> {
        let mut out = Vec::new();
        for item in self.offsets.scan_prefix(codec::group_prefix(group_id)) {
            out.push(item.map_err(sled_to_io)?);
        }
        Ok(out)
    }

    /// Remove the group's offsets if they are all older than `cutoff_ms`; how many went.
    /// Each removal is a compare-and-swap against the value scanned, so an offset committed
    /// after the scan survives (and with it, the group's newer state).
    fn expire_group(&self, group_id: &str, cutoff_ms: i64) -> io::Result<usize> {
        let entries = self.group_offsets_raw(group_id)?;
        let mut newest_ms = i64::MIN;
        for (_, value) in &entries {
            newest_ms = newest_ms.max(codec::decode_offset(value)?.commit_timestamp_ms);
        }
        if entries.is_empty() || newest_ms >= cutoff_ms {
            return Ok(0);
        }
        let mut removed = 0;
        for (key, value) in entries {
            let swapped = self
                .offsets
                .compare_and_swap(key, Some(value), None::<sled::IVec>)
                .map_err(sled_to_io)?;
            if swapped.is_ok() {
                removed += 1;
            }
        }
        Ok(removed)
    }
}

fn flusher_gone() -> io::Error {
    io::Error::other("offsets store is closed")
}

impl OffsetStore for SledOffsetStore {
    fn commit(&self, group_id: &str, offsets: Vec<(String, i32, CommittedOffset)>) -> CommitFuture {
        if offsets.is_empty() {
            return Box::pin(std::future::ready(Ok(())));
        }
        let mut batch = sled::Batch::default();
        for (topic, partition, value) in &offsets {
            batch.insert(
                codec::offset_key(group_id, topic, *partition),
                codec::encode_offset(value),
            );
        }
        self.queue(Write::Offsets(batch))
    }

    fn fetch(
        &self,
        group_id: &str,
        topic: &str,
        partition: i32,
    ) -> io::Result<Option<CommittedOffset>> {
        let key = codec::offset_key(group_id, topic, partition);
        match self.shared.offsets.get(key).map_err(sled_to_io)? {
            Some(value) => Ok(Some(codec::decode_offset(&value)?)),
            None => Ok(None),
        }
    }

    fn fetch_group(&self, group_id: &str) -> io::Result<Vec<(String, i32, CommittedOffset)>> {
        let mut out = Vec::new();
        for (key, value) in self.shared.group_offsets_raw(group_id)? {
            let (group, topic, partition) = codec::decode_offset_key(&key)?;
            assert_eq!(group, group_id, "group prefix scan left its group");
            out.push((topic, partition, codec::decode_offset(&value)?));
        }
        // Key order puts shorter topics first (length prefix); Kafka order is by name.
        out.sort_by(|a, b| (&a.0, a.1).cmp(&(&b.0, b.1)));
        Ok(out)
    }

    fn delete_offsets(&self, group_id: &str, partitions: &[(String, i32)]) -> io::Result<()> {
        let mut batch = sled::Batch::default();
        for (topic, partition) in partitions {
            batch.remove(codec::offset_key(group_id, topic, *partition));
        }
        self.shared.apply_then_fsync(&self.shared.offsets, batch)
    }

    fn delete_group(&self, group_id: &str) -> io::Result<()> {
        let mut batch = sled::Batch::default();
        for (key, _) in self.shared.group_offsets_raw(group_id)? {
            batch.remove(key);
        }
        self.shared.offsets.apply_batch(batch).map_err(sled_to_io)?;
        // A crash between the two trees leaves a record without offsets: the group comes
        // back (a deleted group was Empty), as its re-creation would look anyway.
        self.shared
            .groups
            .remove(group_id.as_bytes())
            .map_err(sled_to_io)?;
        self.shared.fsync()
    }

    fn save_group(&self, group_id: &str, record: &GroupRecord) -> io::Result<()> {
        self.shared
            .groups
            .insert(group_id.as_bytes(), codec::encode_group(record))
            .map_err(sled_to_io)?;
        self.shared.fsync()
    }

    fn load_groups(&self) -> io::Result<Vec<(String, GroupRecord)>> {
        let mut out = Vec::new();
        for item in self.shared.groups.iter() {
            let (key, value) = item.map_err(sled_to_io)?;
            let group_id = String::from_utf8(key.to_vec()).map_err(|_| {
                io::Error::new(io::ErrorKind::InvalidData, "group record key is not UTF-8")
            })?;
            out.push((group_id, codec::decode_group(&value)?));
        }
        Ok(out)
    }

    fn groups_with_offsets(&self) -> io::Result<Vec<String>> {
        let mut out = Vec::new();
        let mut start = Vec::new();
        // One seek per group, not one step per offset: after a group, jump past its prefix.
        loop {
            let Some(item) = self.shared.offsets.range(start.as_slice()..).next() else {
                break;
            };
            let (key, _) = item.map_err(sled_to_io)?;
            let (group, prefix_len) = codec::decode_group_of_key(&key)?;
            out.push(group);
            match codec::prefix_successor(&key[..prefix_len]) {
                Some(next) => start = next,
                None => break,
            }
        }
        // Key order puts shorter group ids first (length prefix).
        out.sort();
        Ok(out)
    }

    fn expire_group(&self, group_id: &str, cutoff_ms: i64) -> io::Result<usize> {
        let removed = self.shared.expire_group(group_id, cutoff_ms)?;
        if removed > 0 {
            self.shared.fsync()?;
        }
        Ok(removed)
    }
}
