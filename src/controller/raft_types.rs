//! The openraft type configuration of the metadata log, and the conversions between raft
//! node ids and Kafka broker ids.
//!
//! A raft node id *is* the Kafka broker id (a non-negative `i32`) widened to `u64`, the type
//! openraft's storage test suite requires. The widening is lossless and checked both ways,
//! so a node id that does not fit a broker id can only come from a corrupt log.

use std::cell::RefCell;
use std::future::Future;
use std::io::Cursor;
use std::time::Duration;

use openraft::{AsyncRuntime, OptionalSend};
use rand::rngs::StdRng;
use rand::RngCore;

use serde::{Deserialize, Serialize};

use super::command::CommandOutcome;
use super::command::MetadataRecord;

/// A raft node id: the Kafka broker id, widened.
pub type NodeId = u64;

openraft::declare_raft_types!(
    /// Types of the metadata raft group.
    pub TypeConfig:
        D = MetadataRecord,
        R = CommandOutcome,
        NodeId = NodeId,
        Node = ControllerNode,
        Entry = openraft::Entry<TypeConfig>,
        SnapshotData = Cursor<Vec<u8>>,
        AsyncRuntime = RaftRuntime,
);

/// openraft's tokio runtime, except for its random numbers (the election
/// timeouts): they come from [`RaftRng`], which a simulation seeds.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct RaftRuntime;

type Tokio = openraft::TokioRuntime;

impl AsyncRuntime for RaftRuntime {
    type JoinError = <Tokio as AsyncRuntime>::JoinError;
    type JoinHandle<T: OptionalSend + 'static> = <Tokio as AsyncRuntime>::JoinHandle<T>;
    type Sleep = <Tokio as AsyncRuntime>::Sleep;
    type Instant = <Tokio as AsyncRuntime>::Instant;
    type TimeoutError = <Tokio as AsyncRuntime>::TimeoutError;
    type Timeout<R, T: Future<Output = R> + OptionalSend> = <Tokio as AsyncRuntime>::Timeout<R, T>;
    type ThreadLocalRng = RaftRng;
    type OneshotSender<T: OptionalSend> = <Tokio as AsyncRuntime>::OneshotSender<T>;
    type OneshotReceiverError = <Tokio as AsyncRuntime>::OneshotReceiverError;
    type OneshotReceiver<T: OptionalSend> = <Tokio as AsyncRuntime>::OneshotReceiver<T>;

    fn spawn<T>(future: T) -> Self::JoinHandle<T::Output>
    where
        T: Future + OptionalSend + 'static,
        T::Output: OptionalSend + 'static,
    {
        Tokio::spawn(future)
    }

    fn sleep(duration: Duration) -> Self::Sleep {
        Tokio::sleep(duration)
    }

    fn sleep_until(deadline: Self::Instant) -> Self::Sleep {
        Tokio::sleep_until(deadline)
    }

    fn timeout<R, F: Future<Output = R> + OptionalSend>(
        duration: Duration,
        future: F,
    ) -> Self::Timeout<R, F> {
        Tokio::timeout(duration, future)
    }

    fn timeout_at<R, F: Future<Output = R> + OptionalSend>(
        deadline: Self::Instant,
        future: F,
    ) -> Self::Timeout<R, F> {
        Tokio::timeout_at(deadline, future)
    }

    fn is_panic(join_error: &Self::JoinError) -> bool {
        Tokio::is_panic(join_error)
    }

    fn thread_rng() -> RaftRng {
        RaftRng
    }

    fn oneshot<T>() -> (Self::OneshotSender<T>, Self::OneshotReceiver<T>)
    where
        T: OptionalSend,
    {
        Tokio::oneshot()
    }
}

thread_local! {
    /// This thread's seeded generator, if a simulation set one.
    static SEEDED: RefCell<Option<StdRng>> = const { RefCell::new(None) };
}

/// Raft's random numbers: the operating system's, or, on a thread a simulation
/// has seeded with [`seed_raft_rng`], a seeded sequence (turmoil runs every
/// simulated node on the test's thread, so one seed fixes them all).
pub struct RaftRng;

impl RaftRng {
    fn draw<T>(&mut self, f: impl FnOnce(&mut dyn RngCore) -> T) -> T {
        SEEDED.with(|seeded| match seeded.borrow_mut().as_mut() {
            Some(rng) => f(rng),
            None => f(&mut rand::thread_rng()),
        })
    }
}

impl RngCore for RaftRng {
    fn next_u32(&mut self) -> u32 {
        self.draw(|rng| rng.next_u32())
    }

    fn next_u64(&mut self) -> u64 {
        self.draw(|rng| rng.next_u64())
    }

    fn fill_bytes(&mut self, dest: &mut [u8]) {
        self.draw(|rng| rng.fill_bytes(dest))
    }

    fn try_fill_bytes(&mut self, dest: &mut [u8]) -> Result<(), rand::Error> {
        self.draw(|rng| rng.try_fill_bytes(dest))
    }
}

/// Seeds raft's random numbers on this thread, for a simulation.
#[cfg(test)]
pub fn seed_raft_rng(seed: u64) {
    use rand::SeedableRng;
    SEEDED.with(|seeded| *seeded.borrow_mut() = Some(StdRng::seed_from_u64(seed)));
}

/// What raft membership records about a node. Empty while the cluster is a single voter;
/// the multi-node work fills in the controller listener address. Fields carry
/// `#[serde(default)]` so that membership entries already in a log stay decodable.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ControllerNode {
    #[serde(default)]
    pub raft_addr: String,
}

pub type LogId = openraft::LogId<NodeId>;
pub type Vote = openraft::Vote<NodeId>;
pub type Entry = openraft::Entry<TypeConfig>;
pub type StoredMembership = openraft::StoredMembership<NodeId, ControllerNode>;
pub type SnapshotMeta = openraft::SnapshotMeta<NodeId, ControllerNode>;
pub type Snapshot = openraft::storage::Snapshot<TypeConfig>;
pub type StorageError = openraft::StorageError<NodeId>;

/// The raft node id of a broker, or `None` for a negative broker id.
pub fn node_id_of(broker_id: i32) -> Option<NodeId> {
    u64::try_from(broker_id).ok()
}

/// The broker id of a raft node id; -1 (Kafka's "none") for ids no broker can have.
pub fn broker_id_of(node_id: NodeId) -> i32 {
    i32::try_from(node_id).unwrap_or(-1)
}
