//! A [`RaftKv`] in memory with a model of a disk, for the controller's
//! simulation: writes are visible at once but durable only once `sync`
//! returns, and a crash ([`MemDisk::crash`]) forgets every write since the last
//! sync, as a power cut forgets what was still in the page cache. A handle made
//! before a crash writes nothing afterwards, as a dead process cannot.

use std::collections::BTreeMap;
use std::io;
use std::ops::Bound;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use super::raft_kv::{RaftKv, SnapshotBlobs};

/// One node's disk; survives the node's crashes and restarts.
#[derive(Default)]
pub struct MemDisk {
    state: Mutex<Disk>,
}

#[derive(Default)]
struct Disk {
    /// Bumped by every crash; a handle of an older one is dead.
    generation: u64,
    durable: Contents,
    current: Contents,
}

#[derive(Clone, Default)]
struct Contents {
    vote: Option<Vec<u8>>,
    committed: Option<Vec<u8>>,
    last_purged: Option<Vec<u8>>,
    log: BTreeMap<u64, Vec<u8>>,
    snapshot: Option<SnapshotBlobs>,
}

impl MemDisk {
    pub fn new() -> Arc<MemDisk> {
        Arc::new(MemDisk::default())
    }

    /// A store on this disk, as a process that starts now opens it.
    pub fn open(self: &Arc<MemDisk>) -> Box<dyn RaftKv> {
        let generation = self.lock().generation;
        Box::new(MemRaftKv {
            disk: Arc::clone(self),
            generation,
        })
    }

    /// The process died: what was not synced is gone, and its handles with it.
    pub fn crash(&self) {
        let mut disk = self.lock();
        disk.generation += 1;
        disk.current = disk.durable.clone();
    }

    fn lock(&self) -> MutexGuard<'_, Disk> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

struct MemRaftKv {
    disk: Arc<MemDisk>,
    generation: u64,
}

impl MemRaftKv {
    /// Reads see the current contents, whoever asks.
    fn read<T>(&self, f: impl FnOnce(&Contents) -> T) -> T {
        f(&self.disk.lock().current)
    }

    /// Writes of a dead handle are dropped.
    fn write(&self, f: impl FnOnce(&mut Contents)) -> io::Result<()> {
        let mut disk = self.disk.lock();
        if disk.generation != self.generation {
            return Err(io::Error::other(
                "the process that held this store has crashed",
            ));
        }
        f(&mut disk.current);
        Ok(())
    }
}

impl RaftKv for MemRaftKv {
    fn read_vote(&self) -> io::Result<Option<Vec<u8>>> {
        Ok(self.read(|c| c.vote.clone()))
    }

    fn save_vote(&self, vote: &[u8]) -> io::Result<()> {
        self.write(|c| c.vote = Some(vote.to_vec()))
    }

    fn read_committed(&self) -> io::Result<Option<Vec<u8>>> {
        Ok(self.read(|c| c.committed.clone()))
    }

    fn save_committed(&self, committed: &[u8]) -> io::Result<()> {
        self.write(|c| c.committed = Some(committed.to_vec()))
    }

    fn read_last_purged(&self) -> io::Result<Option<Vec<u8>>> {
        Ok(self.read(|c| c.last_purged.clone()))
    }

    fn append(&self, entries: &[(u64, Vec<u8>)]) -> io::Result<()> {
        self.write(|c| {
            for (index, bytes) in entries {
                c.log.insert(*index, bytes.clone());
            }
        })
    }

    fn read_range(
        &self,
        range: (Bound<u64>, Bound<u64>),
        entries_max: usize,
    ) -> io::Result<Vec<(u64, Vec<u8>)>> {
        Ok(self.read(|c| {
            c.log
                .range(range)
                .take(entries_max)
                .map(|(index, bytes)| (*index, bytes.clone()))
                .collect()
        }))
    }

    fn last_entry(&self) -> io::Result<Option<(u64, Vec<u8>)>> {
        Ok(self.read(|c| {
            c.log
                .last_key_value()
                .map(|(index, bytes)| (*index, bytes.clone()))
        }))
    }

    fn truncate_from(&self, index: u64) -> io::Result<()> {
        self.write(|c| {
            c.log.split_off(&index);
        })
    }

    fn purge_upto(&self, index: u64, last_purged: &[u8]) -> io::Result<()> {
        self.write(|c| {
            c.log = c.log.split_off(&(index + 1));
            c.last_purged = Some(last_purged.to_vec());
        })
    }

    fn save_snapshot(&self, snapshot: &SnapshotBlobs) -> io::Result<()> {
        self.write(|c| c.snapshot = Some(snapshot.clone()))
    }

    fn read_snapshot(&self) -> io::Result<Option<SnapshotBlobs>> {
        Ok(self.read(|c| c.snapshot.clone()))
    }

    fn sync(&self) -> io::Result<()> {
        let mut disk = self.disk.lock();
        if disk.generation != self.generation {
            return Err(io::Error::other(
                "the process that held this store has crashed",
            ));
        }
        disk.durable = disk.current.clone();
        Ok(())
    }

    fn in_memory(&self) -> bool {
        true
    }
}
