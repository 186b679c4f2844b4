//! Group commit of partition logs: produces that must be durable before they are
//! acknowledged, and the flush.messages / flush.ms policies, all queue on one
//! [`GroupCommit`]. Each partition is a target of its own: a round takes the
//! partition's flush target under its lock, fsyncs outside it (on the blocking pool)
//! and then advances its recovery point, so rounds of different partitions run side
//! by side and a slow one holds up only its own producers. A failed fsync takes the
//! whole log directory offline (`StorageHealth`), as Kafka does.

use std::io;
use std::sync::Arc;

use super::partition::Partition;
use crate::durability::{Durable, GroupCommit, StorageHealth};
use crate::limits::FLUSH_WAITERS_MAX;
use crate::types::Offset;

/// Handle to the partition logs' group commit; cheap to clone.
#[derive(Clone)]
pub struct Flusher {
    commit: GroupCommit<Partition>,
}

impl Flusher {
    /// Starts the group commit on the current runtime; `health` is the log dir's.
    pub fn start(health: Arc<StorageHealth>) -> Flusher {
        let (commit, _task) = GroupCommit::start(FLUSH_WAITERS_MAX, health);
        Flusher { commit }
    }

    /// Waits until every offset below `end_offset` of `partition` is fsynced. The
    /// append of those offsets happened before this call, so any round that starts
    /// after it covers them.
    pub async fn wait_durable(
        &self,
        partition: &Arc<Partition>,
        end_offset: Offset,
    ) -> io::Result<()> {
        if self.commit.health().is_offline() {
            return Err(self.commit.health().offline_error());
        }
        if partition.flushed_offset() >= end_offset.get() {
            return Ok(());
        }
        self.commit.commit(partition, ()).await?;
        if partition.flushed_offset() < end_offset.get() {
            // Only a truncation between the append and the fsync does this.
            return Err(io::Error::other("fsync did not cover the append"));
        }
        Ok(())
    }

    /// Asks for an fsync without waiting (flush policies); dropped if the queue is
    /// full, since a flush already queued will cover it.
    pub fn request(&self, partition: &Arc<Partition>) {
        self.commit.request(partition, ());
    }
}

impl Durable for Partition {
    type Write = ();

    fn apply(&self, (): ()) -> io::Result<()> {
        Ok(())
    }

    /// The files are taken under the partition lock and fsynced outside it.
    fn sync(&self) -> io::Result<()> {
        let target = self
            .lock_log()
            .as_ref()
            .map(|log| log.flush_target())
            .transpose()?;
        let Some(target) = target else {
            // Deleted meanwhile: nothing of it is left to make durable.
            return Ok(());
        };
        target.sync()?;
        self.mark_flushed(&target);
        Ok(())
    }
}
