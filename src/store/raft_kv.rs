//! Raft persistence as plain bytes: the vote, the log (index -> entry bytes), the committed
//! and last-purged log ids, and the latest state machine snapshot.
//!
//! The controller encodes raft's types; this module only stores them, so it knows nothing of
//! raft. Invariants: the log has no holes (appends are contiguous, truncation removes a
//! suffix, purging removes a prefix), and a purge records the last purged id in the same
//! atomic batch as the removal, so after a crash the two never disagree. Writes are ordered
//! but not durable until [`RaftKv::sync`] returns.

use std::io;
use std::ops::Bound;
use std::path::Path;
use std::sync::Arc;

use super::durable::{sled_to_io, DurableDb};
use crate::limits::RAFT_DB_CACHE_BYTES;

/// The raft state of one controller. Implementations are shared across tasks and threads.
///
/// Every write method returns once the write is visible to readers; none of them is durable
/// by itself. A caller that promises durability calls [`RaftKv::sync`] first.
pub trait RaftKv: Send + Sync {
    fn read_vote(&self) -> io::Result<Option<Vec<u8>>>;
    fn save_vote(&self, vote: &[u8]) -> io::Result<()>;

    fn read_committed(&self) -> io::Result<Option<Vec<u8>>>;
    fn save_committed(&self, committed: &[u8]) -> io::Result<()>;

    /// The id of the last purged entry, as saved by [`RaftKv::purge_upto`].
    fn read_last_purged(&self) -> io::Result<Option<Vec<u8>>>;

    /// Append entries, atomically. Indexes must be contiguous and follow the last entry.
    fn append(&self, entries: &[(u64, Vec<u8>)]) -> io::Result<()>;
    /// Up to `entries_max` entries in `range`, in index order.
    fn read_range(
        &self,
        range: (Bound<u64>, Bound<u64>),
        entries_max: usize,
    ) -> io::Result<Vec<(u64, Vec<u8>)>>;
    /// The entry with the highest index, if any.
    fn last_entry(&self) -> io::Result<Option<(u64, Vec<u8>)>>;
    /// Remove every entry at `index` or above.
    fn truncate_from(&self, index: u64) -> io::Result<()>;
    /// Remove every entry at `index` or below and record `last_purged` (the encoded id of
    /// entry `index`), atomically.
    fn purge_upto(&self, index: u64, last_purged: &[u8]) -> io::Result<()>;

    /// Replace the stored snapshot, atomically.
    fn save_snapshot(&self, snapshot: &SnapshotBlobs) -> io::Result<()>;
    fn read_snapshot(&self) -> io::Result<Option<SnapshotBlobs>>;

    /// Make every write completed before this call durable. Blocking: call it from a blocking
    /// thread (unless [`RaftKv::in_memory`]).
    fn sync(&self) -> io::Result<()>;

    /// Whether the store is memory alone (the simulation's disk), so that its syncs and
    /// writes cost nothing and run in place instead of on the blocking pool: a thread of
    /// the blocking pool races the simulated clock and would make a seed's run differ
    /// from one run to the next.
    fn in_memory(&self) -> bool {
        false
    }
}

/// A state machine snapshot: `meta` says which log it covers (last applied id, membership),
/// `data` is the state itself. Both are opaque here.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SnapshotBlobs {
    pub meta: Vec<u8>,
    pub data: Vec<u8>,
}

/// The tree holding the log and the small raft state, so that a purge and its marker
/// share one atomic batch.
const RAFT_TREE_NAME: &str = "raft";
/// The snapshot lives in a tree of its own. sled rewrites a whole leaf page on every write
/// to any key in it, and a page holding a large value is written as a new blob file: next
/// to the committed id, a snapshot would be rewritten in full on every commit.
const SNAPSHOT_TREE_NAME: &str = "raft_snapshot";
/// Log keys are this tag then the big-endian index, so that key order is index order.
const LOG_KEY_TAG: u8 = b'l';
const LOG_KEY_LEN_BYTES: usize = 1 + 8;
const VOTE_KEY: &[u8] = b"m/vote";
const COMMITTED_KEY: &[u8] = b"m/committed";
const LAST_PURGED_KEY: &[u8] = b"m/last_purged";
const SNAPSHOT_META_KEY: &[u8] = b"meta";
const SNAPSHOT_DATA_KEY: &[u8] = b"data";

/// [`RaftKv`] on a sled tree of a [`DurableDb`].
pub struct SledRaftKv {
    db: Arc<DurableDb>,
    tree: sled::Tree,
    snapshot_tree: sled::Tree,
}

impl SledRaftKv {
    /// Open the raft tree of an already open database (which other stores may share).
    pub fn open(db: Arc<DurableDb>) -> io::Result<SledRaftKv> {
        let tree = db.open_tree(RAFT_TREE_NAME)?;
        let snapshot_tree = db.open_tree(SNAPSHOT_TREE_NAME)?;
        Ok(SledRaftKv {
            db,
            tree,
            snapshot_tree,
        })
    }

    /// Open (creating) a database of its own in `dir`.
    pub fn open_dir(dir: &Path) -> io::Result<SledRaftKv> {
        SledRaftKv::open(Arc::new(DurableDb::open(dir, RAFT_DB_CACHE_BYTES)?))
    }

    fn get(&self, key: &[u8]) -> io::Result<Option<Vec<u8>>> {
        get(&self.tree, key)
    }

    fn put(&self, key: &[u8], value: &[u8]) -> io::Result<()> {
        self.tree.insert(key, value).map_err(sled_to_io)?;
        Ok(())
    }

    fn log_keys(&self, range: (Bound<u64>, Bound<u64>)) -> sled::Iter {
        let map = |b: Bound<u64>| match b {
            Bound::Included(i) => Bound::Included(log_key(i)),
            Bound::Excluded(i) => Bound::Excluded(log_key(i)),
            Bound::Unbounded => Bound::Unbounded,
        };
        let (start, end) = range;
        // Unbounded ends are clamped to the log's tag so that meta keys never leak in.
        let start = match map(start) {
            Bound::Unbounded => Bound::Included(log_key(0)),
            b => b,
        };
        let end = match map(end) {
            Bound::Unbounded => Bound::Included(log_key(u64::MAX)),
            b => b,
        };
        self.tree.range::<[u8; LOG_KEY_LEN_BYTES], _>((start, end))
    }

    fn remove_log_range(
        &self,
        range: (Bound<u64>, Bound<u64>),
        batch: &mut sled::Batch,
    ) -> io::Result<()> {
        for item in self.log_keys(range) {
            let (key, _) = item.map_err(sled_to_io)?;
            batch.remove(key);
        }
        Ok(())
    }
}

fn get(tree: &sled::Tree, key: &[u8]) -> io::Result<Option<Vec<u8>>> {
    Ok(tree.get(key).map_err(sled_to_io)?.map(|v| v.to_vec()))
}

fn log_key(index: u64) -> [u8; LOG_KEY_LEN_BYTES] {
    let mut key = [0u8; LOG_KEY_LEN_BYTES];
    key[0] = LOG_KEY_TAG;
    key[1..].copy_from_slice(&index.to_be_bytes());
    key
}

fn decode_log_key(key: &[u8]) -> io::Result<u64> {
    match key.split_first() {
        Some((&LOG_KEY_TAG, index)) if key.len() == LOG_KEY_LEN_BYTES => {
            let mut bytes = [0u8; 8];
            bytes.copy_from_slice(index);
            Ok(u64::from_be_bytes(bytes))
        }
        _ => Err(io::Error::new(
            io::ErrorKind::InvalidData,
            format!("malformed raft log key {key:?}"),
        )),
    }
}

impl RaftKv for SledRaftKv {
    fn read_vote(&self) -> io::Result<Option<Vec<u8>>> {
        self.get(VOTE_KEY)
    }

    fn save_vote(&self, vote: &[u8]) -> io::Result<()> {
        self.put(VOTE_KEY, vote)
    }

    fn read_committed(&self) -> io::Result<Option<Vec<u8>>> {
        self.get(COMMITTED_KEY)
    }

    fn save_committed(&self, committed: &[u8]) -> io::Result<()> {
        self.put(COMMITTED_KEY, committed)
    }

    fn read_last_purged(&self) -> io::Result<Option<Vec<u8>>> {
        self.get(LAST_PURGED_KEY)
    }

    fn append(&self, entries: &[(u64, Vec<u8>)]) -> io::Result<()> {
        for pair in entries.windows(2) {
            assert_eq!(
                pair[0].0 + 1,
                pair[1].0,
                "raft log append must be contiguous"
            );
        }
        let mut batch = sled::Batch::default();
        for (index, bytes) in entries {
            batch.insert(&log_key(*index), bytes.as_slice());
        }
        self.tree.apply_batch(batch).map_err(sled_to_io)
    }

    fn read_range(
        &self,
        range: (Bound<u64>, Bound<u64>),
        entries_max: usize,
    ) -> io::Result<Vec<(u64, Vec<u8>)>> {
        let mut out = Vec::new();
        for item in self.log_keys(range).take(entries_max) {
            let (key, value) = item.map_err(sled_to_io)?;
            out.push((decode_log_key(&key)?, value.to_vec()));
        }
        Ok(out)
    }

    fn last_entry(&self) -> io::Result<Option<(u64, Vec<u8>)>> {
        match self
            .log_keys((Bound::Unbounded, Bound::Unbounded))
            .next_back()
        {
            None => Ok(None),
            Some(item) => {
                let (key, value) = item.map_err(sled_to_io)?;
                Ok(Some((decode_log_key(&key)?, value.to_vec())))
            }
        }
    }

    fn truncate_from(&self, index: u64) -> io::Result<()> {
        let mut batch = sled::Batch::default();
        self.remove_log_range((Bound::Included(index), Bound::Unbounded), &mut batch)?;
        self.tree.apply_batch(batch).map_err(sled_to_io)
    }

    fn purge_upto(&self, index: u64, last_purged: &[u8]) -> io::Result<()> {
        let mut batch = sled::Batch::default();
        self.remove_log_range((Bound::Unbounded, Bound::Included(index)), &mut batch)?;
        batch.insert(LAST_PURGED_KEY, last_purged);
        self.tree.apply_batch(batch).map_err(sled_to_io)
    }

    fn save_snapshot(&self, snapshot: &SnapshotBlobs) -> io::Result<()> {
        let mut batch = sled::Batch::default();
        batch.insert(SNAPSHOT_META_KEY, snapshot.meta.as_slice());
        batch.insert(SNAPSHOT_DATA_KEY, snapshot.data.as_slice());
        self.snapshot_tree.apply_batch(batch).map_err(sled_to_io)
    }

    fn read_snapshot(&self) -> io::Result<Option<SnapshotBlobs>> {
        let meta = get(&self.snapshot_tree, SNAPSHOT_META_KEY)?;
        let data = get(&self.snapshot_tree, SNAPSHOT_DATA_KEY)?;
        match (meta, data) {
            (Some(meta), Some(data)) => Ok(Some(SnapshotBlobs { meta, data })),
            (None, None) => Ok(None),
            _ => Err(io::Error::new(
                io::ErrorKind::InvalidData,
                "raft snapshot meta and data are not both present",
            )),
        }
    }

    fn sync(&self) -> io::Result<()> {
        self.db.fsync()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entries(range: std::ops::RangeInclusive<u64>) -> Vec<(u64, Vec<u8>)> {
        range
            .map(|i| (i, format!("entry-{i}").into_bytes()))
            .collect()
    }

    fn indexes(kv: &SledRaftKv) -> io::Result<Vec<u64>> {
        let all = kv.read_range((Bound::Unbounded, Bound::Unbounded), usize::MAX)?;
        Ok(all.into_iter().map(|(i, _)| i).collect())
    }

    #[test]
    fn log_range_truncate_purge() -> io::Result<()> {
        let tmp = tempfile::tempdir()?;
        let kv = SledRaftKv::open_dir(tmp.path())?;
        kv.save_vote(b"vote")?;
        kv.append(&entries(0..=9))?;
        assert_eq!(kv.last_entry()?.map(|(i, _)| i), Some(9));
        let some = kv.read_range((Bound::Included(3), Bound::Excluded(6)), usize::MAX)?;
        assert_eq!(some, entries(3..=5));
        let capped = kv.read_range((Bound::Included(3), Bound::Unbounded), 2)?;
        assert_eq!(capped, entries(3..=4));

        kv.truncate_from(7)?;
        assert_eq!(indexes(&kv)?, (0..=6).collect::<Vec<_>>());
        kv.purge_upto(2, b"purged-2")?;
        assert_eq!(indexes(&kv)?, (3..=6).collect::<Vec<_>>());
        assert_eq!(
            kv.read_last_purged()?.as_deref(),
            Some(b"purged-2".as_slice())
        );
        // Meta keys live in the same tree and must never show up as log entries.
        assert_eq!(kv.read_vote()?.as_deref(), Some(b"vote".as_slice()));
        kv.purge_upto(6, b"purged-6")?;
        assert_eq!(kv.last_entry()?, None);
        Ok(())
    }

    #[test]
    fn everything_survives_reopen() -> io::Result<()> {
        let tmp = tempfile::tempdir()?;
        let snapshot = SnapshotBlobs {
            meta: b"meta".to_vec(),
            // Large enough for sled to write it as a blob file.
            data: vec![1u8; 300 * 1024],
        };
        {
            let kv = SledRaftKv::open_dir(tmp.path())?;
            kv.save_vote(b"vote-1")?;
            kv.save_committed(b"committed-4")?;
            kv.append(&entries(0..=4))?;
            kv.purge_upto(1, b"purged-1")?;
            kv.save_snapshot(&snapshot)?;
            kv.sync()?;
        }
        crate::store::wait_until_released(tmp.path())?;
        let kv = SledRaftKv::open_dir(tmp.path())?;
        assert_eq!(kv.read_vote()?.as_deref(), Some(b"vote-1".as_slice()));
        assert_eq!(
            kv.read_committed()?.as_deref(),
            Some(b"committed-4".as_slice())
        );
        assert_eq!(
            kv.read_last_purged()?.as_deref(),
            Some(b"purged-1".as_slice())
        );
        assert_eq!(indexes(&kv)?, vec![2, 3, 4]);
        assert_eq!(kv.read_snapshot()?, Some(snapshot));
        Ok(())
    }

    /// Regression: with the snapshot in the same tree as the committed id, every
    /// `save_committed` rewrote the snapshot's page as a new blob file, a full copy of the
    /// snapshot per commit.
    #[test]
    fn commits_do_not_rewrite_the_snapshot() -> io::Result<()> {
        let tmp = tempfile::tempdir()?;
        let kv = SledRaftKv::open_dir(tmp.path())?;
        kv.save_snapshot(&SnapshotBlobs {
            meta: b"meta".to_vec(),
            data: vec![1u8; 300 * 1024],
        })?;
        for i in 0..50u64 {
            kv.append(&[(i, b"entry".to_vec())])?;
            kv.save_committed(&i.to_be_bytes())?;
            kv.sync()?;
        }
        let blobs = std::fs::read_dir(tmp.path().join("blobs"))?.count();
        assert!(blobs <= 2, "{blobs} blob files after 50 commits");
        Ok(())
    }
}
