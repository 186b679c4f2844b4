//! The controller's handle on its raft store, and the encoding of raft types into it.
//!
//! One `KvHandle` is shared (through `Arc`) by the log store, its readers, the log flusher
//! thread, the state machine and snapshot builders. Dropping the last `Arc` closes the
//! database and only then fires the close signal, so `Controller::shutdown` can wait until
//! the directory may be opened again. Everything raft stores is JSON.

use std::io;
use std::ops::Deref;
use std::path::Path;
use std::sync::Arc;

use serde::de::DeserializeOwned;
use serde::Serialize;
use tokio::sync::oneshot;

use crate::durability::{Durable, StorageHealth};
use crate::store::{RaftKv, SledRaftKv};

/// The raft store plus a signal that fires once it is closed.
pub struct KvHandle {
    // Field order matters: fields drop in declaration order, so the store is closed before
    // `_closed` drops and wakes whoever waits for the close.
    kv: Box<dyn RaftKv>,
    /// Offline after the first failed fsync; raft is then refused every later one.
    health: Arc<StorageHealth>,
    _closed: oneshot::Sender<()>,
}

/// Fires (as a receive error) once the store behind a `KvHandle` has been closed.
pub type ClosedSignal = oneshot::Receiver<()>;

impl KvHandle {
    pub fn new(kv: Box<dyn RaftKv>) -> (Arc<KvHandle>, ClosedSignal) {
        let (closed, closed_rx) = oneshot::channel();
        (
            Arc::new(KvHandle {
                kv,
                health: StorageHealth::new("metadata log"),
                _closed: closed,
            }),
            closed_rx,
        )
    }

    /// Open the sled-backed raft store in `dir`. Blocking; it runs once, at startup.
    pub fn open(dir: &Path) -> io::Result<(Arc<KvHandle>, ClosedSignal)> {
        Ok(KvHandle::new(Box::new(SledRaftKv::open_dir(dir)?)))
    }
}

impl KvHandle {
    pub fn health(&self) -> &Arc<StorageHealth> {
        &self.health
    }
}

/// The metadata log's group commit: raft entries are written before they are queued,
/// so a round has nothing to apply and one fsync to make.
impl Durable for KvHandle {
    type Write = ();

    fn apply(&self, (): ()) -> io::Result<()> {
        Ok(())
    }

    fn sync(&self) -> io::Result<()> {
        self.kv.sync()
    }

    fn blocks(&self) -> bool {
        !self.kv.in_memory()
    }
}

impl Deref for KvHandle {
    type Target = dyn RaftKv;

    fn deref(&self) -> &(dyn RaftKv + 'static) {
        &*self.kv
    }
}

/// `RaftKv::sync` on a blocking thread, so that an fsync never stalls an async worker,
/// under the store's failure rule (never retried after a failure).
pub async fn sync(kv: &Arc<KvHandle>) -> io::Result<()> {
    let store = Arc::clone(kv);
    off_worker(kv, move || store.health.guard(|| store.kv.sync())).await
}

/// Runs `work` (disk I/O on `kv`) on a blocking thread, or in place when the store is
/// memory alone, so that the simulation stays in step with its clock.
pub async fn off_worker<T: Send + 'static>(
    kv: &KvHandle,
    work: impl FnOnce() -> io::Result<T> + Send + 'static,
) -> io::Result<T> {
    if kv.kv.in_memory() {
        return work();
    }
    tokio::task::spawn_blocking(work)
        .await
        .map_err(|e| io::Error::other(format!("storage task failed: {e}")))?
}

pub fn encode<T: Serialize>(value: &T) -> io::Result<Vec<u8>> {
    serde_json::to_vec(value).map_err(io::Error::other)
}

/// Decode bytes read back from disk; a failure means corruption or an incompatible format.
pub fn decode<T: DeserializeOwned>(bytes: &[u8]) -> io::Result<T> {
    serde_json::from_slice(bytes).map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))
}

pub fn decode_opt<T: DeserializeOwned>(bytes: Option<Vec<u8>>) -> io::Result<Option<T>> {
    bytes.map(|b| decode(&b)).transpose()
}
