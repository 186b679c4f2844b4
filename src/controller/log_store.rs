//! The raft log and vote, on [`RaftKv`](crate::store::RaftKv).
//!
//! Owned by the raft core task; readers are cheap clones used by replication. Invariants:
//! entries are readable as soon as `append` returns, and raft hears that they are durable
//! (the `LogFlushed` callback) only after an fsync that began after they were written. That
//! fsync is a round of the store's [`GroupCommit`], which takes every callback queued so far
//! and covers them with one fsync, so concurrent proposals share the cost; a failed fsync
//! takes the metadata log offline for good, as for every store. A vote
//! is fsynced before `save_vote` returns. The committed id and purge/truncate are not
//! fsynced on their own: losing them only makes a restart replay or re-commit entries that
//! are still durable in the log, and the next fsync of the log covers them anyway. Other
//! store calls run inline on the raft task: they touch sled's memory and at worst wait for
//! one of sled's buffer writes, never for an fsync.

use std::fmt::Debug;
use std::io;
use std::ops::{Bound, RangeBounds};
use std::sync::Arc;

use openraft::storage::{LogFlushed, LogState, RaftLogReader, RaftLogStorage};
use openraft::{OptionalSend, StorageIOError};

use super::kv::{self, decode, decode_opt, encode, KvHandle};
use super::raft_types::{Entry, LogId, StorageError, TypeConfig, Vote};
use crate::durability::{GroupCommit, Waiter};
use crate::limits::RAFT_FLUSH_QUEUE_APPENDS_MAX;
use crate::limits::RAFT_LOG_READ_ENTRIES_MAX;

/// The log store raft owns.
pub struct LogStore {
    kv: Arc<KvHandle>,
    flushes: GroupCommit<KvHandle>,
}

/// A read-only view of the log for replication tasks; holds no flush queue, so readers
/// never keep the flusher alive.
#[derive(Clone)]
pub struct LogReader {
    kv: Arc<KvHandle>,
}

impl LogStore {
    /// A log store on `kv`, with its group commit on the current runtime. The group commit
    /// ends when the store is dropped.
    pub fn open(kv: Arc<KvHandle>) -> io::Result<LogStore> {
        let (flushes, _task) =
            GroupCommit::start(RAFT_FLUSH_QUEUE_APPENDS_MAX, Arc::clone(kv.health()));
        Ok(LogStore { kv, flushes })
    }
}

// The error is openraft's, which every trait method here must return as is.
#[allow(clippy::result_large_err)]
fn read_entries(
    kv: &KvHandle,
    range: (Bound<u64>, Bound<u64>),
    entries_max: usize,
) -> Result<Vec<Entry>, StorageError> {
    let raw = kv
        .read_range(range, entries_max)
        .map_err(|e| StorageIOError::read_logs(&e))?;
    let mut entries = Vec::with_capacity(raw.len());
    for (index, bytes) in raw {
        let entry: Entry =
            decode(&bytes).map_err(|e| StorageIOError::read_log_at_index(index, &e))?;
        if entry.log_id.index != index {
            let e = io::Error::new(
                io::ErrorKind::InvalidData,
                format!("log entry {} stored at index {index}", entry.log_id),
            );
            return Err(StorageIOError::read_log_at_index(index, &e).into());
        }
        entries.push(entry);
    }
    Ok(entries)
}

fn bounds<RB: RangeBounds<u64>>(range: &RB) -> (Bound<u64>, Bound<u64>) {
    (range.start_bound().cloned(), range.end_bound().cloned())
}

// `try_get_log_entries` returns the whole range asked for, as openraft requires; openraft
// bounds those ranges itself (apply batches, re-apply chunks). Replication reads go through
// `limited_get_log_entries`, which is bounded here. The store and its reader read alike, from
// their `kv`.
macro_rules! impl_log_reader {
    ($reader:ty) => {
        impl RaftLogReader<TypeConfig> for $reader {
            async fn try_get_log_entries<RB: RangeBounds<u64> + Clone + Debug + OptionalSend>(
                &mut self,
                range: RB,
            ) -> Result<Vec<Entry>, StorageError> {
                read_entries(&self.kv, bounds(&range), usize::MAX)
            }

            async fn limited_get_log_entries(
                &mut self,
                start: u64,
                end: u64,
            ) -> Result<Vec<Entry>, StorageError> {
                read_entries(&self.kv, bounds(&(start..end)), RAFT_LOG_READ_ENTRIES_MAX)
            }
        }
    };
}

impl_log_reader!(LogReader);
impl_log_reader!(LogStore);

impl RaftLogStorage<TypeConfig> for LogStore {
    type LogReader = LogReader;

    async fn get_log_state(&mut self) -> Result<LogState<TypeConfig>, StorageError> {
        let read_err = |e: io::Error| StorageIOError::read_logs(&e);
        let last_purged_log_id: Option<LogId> =
            decode_opt(self.kv.read_last_purged().map_err(read_err)?).map_err(read_err)?;
        let last_log_id = match self.kv.last_entry().map_err(read_err)? {
            Some((index, bytes)) => {
                let entry: Entry =
                    decode(&bytes).map_err(|e| StorageIOError::read_log_at_index(index, &e))?;
                Some(entry.log_id)
            }
            None => last_purged_log_id,
        };
        Ok(LogState {
            last_purged_log_id,
            last_log_id,
        })
    }

    async fn get_log_reader(&mut self) -> LogReader {
        LogReader {
            kv: Arc::clone(&self.kv),
        }
    }

    async fn save_vote(&mut self, vote: &Vote) -> Result<(), StorageError> {
        let write_err = |e: io::Error| StorageIOError::write_vote(&e);
        self.kv
            .save_vote(&encode(vote).map_err(write_err)?)
            .map_err(write_err)?;
        // Raft's safety rests on never forgetting a vote: durable before we return.
        kv::sync(&self.kv).await.map_err(write_err)?;
        Ok(())
    }

    async fn read_vote(&mut self) -> Result<Option<Vote>, StorageError> {
        let read_err = |e: io::Error| StorageIOError::read_vote(&e);
        Ok(decode_opt(self.kv.read_vote().map_err(read_err)?).map_err(read_err)?)
    }

    async fn save_committed(&mut self, committed: Option<LogId>) -> Result<(), StorageError> {
        // Not fsynced: a stale committed id after a crash only means the restart applies
        // fewer entries at once and the leader commits the rest again.
        if let Some(committed) = committed {
            let write_err = |e: io::Error| StorageIOError::write(&e);
            self.kv
                .save_committed(&encode(&committed).map_err(write_err)?)
                .map_err(write_err)?;
        }
        Ok(())
    }

    async fn read_committed(&mut self) -> Result<Option<LogId>, StorageError> {
        let read_err = |e: io::Error| StorageIOError::read(&e);
        Ok(decode_opt(self.kv.read_committed().map_err(read_err)?).map_err(read_err)?)
    }

    async fn append<I>(
        &mut self,
        entries: I,
        callback: LogFlushed<TypeConfig>,
    ) -> Result<(), StorageError>
    where
        I: IntoIterator<Item = Entry> + OptionalSend,
        I::IntoIter: OptionalSend,
    {
        let write_err = |e: io::Error| StorageIOError::write_logs(&e);
        let mut batch = Vec::new();
        for entry in entries {
            batch.push((entry.log_id.index, encode(&entry).map_err(write_err)?));
        }
        self.kv.append(&batch).map_err(write_err)?;
        let waiter = Waiter::Callback(Box::new(move |result| callback.log_io_completed(result)));
        self.flushes.submit(&self.kv, (), waiter).await;
        Ok(())
    }

    async fn truncate(&mut self, log_id: LogId) -> Result<(), StorageError> {
        self.kv
            .truncate_from(log_id.index)
            .map_err(|e| StorageIOError::write_logs(&e))?;
        Ok(())
    }

    async fn purge(&mut self, log_id: LogId) -> Result<(), StorageError> {
        let write_err = |e: io::Error| StorageIOError::write_logs(&e);
        self.kv
            .purge_upto(log_id.index, &encode(&log_id).map_err(write_err)?)
            .map_err(write_err)?;
        Ok(())
    }
}
