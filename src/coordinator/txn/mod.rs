//! The transaction coordinator side of exactly-once (Kafka's
//! TransactionCoordinator, TransactionMetadata, TransactionStateManager,
//! ProducerIdManager and TransactionMarkerChannelManager).
//!
//! - `metadata`: one transactional id's state and its legal transitions.
//! - `coordinator`: the pure state machine over every transactional id; time
//!   is an argument, durable changes are returned as transitions to store.
//! - `producer_ids`: producer ids from controller-reserved blocks.
//! - `markers`: the partition side behind `TxnMarkerWriter`, and the group
//!   side behind `TxnOffsetCompletion` that ends a transaction's pending
//!   offsets (the group coordinator, which owns them).
//! - `service`: the one task that owns the coordinator, stores its transitions
//!   (`store::TxnStore`), writes markers and aborts timed-out transactions.
//!
//! Invariant: nothing here imports the protocol crate, sled or openraft, and
//! nothing reads the system clock. A transaction's state is changed in memory
//! only after the change is fsynced; markers are written only for a
//! transaction whose PrepareCommit or PrepareAbort is fsynced.

pub mod coordinator;
pub mod markers;
pub mod metadata;
pub mod producer_ids;
pub mod record;
pub mod service;
mod task;
pub mod topic;

#[cfg(test)]
mod service_tests;
#[cfg(test)]
mod tests;

pub use coordinator::{
    ListedTxn, MarkerJob, OffsetWriteGuard, Purpose, Transition, TxnConfig, TxnCoordinator,
    COORDINATOR_EPOCH,
};
pub use markers::{offsets_partition, MarkerFuture, TxnMarkerWriter, TxnOffsetCompletion};
pub use metadata::{TxnMetadata, TxnState, NO_PRODUCER_EPOCH, NO_PRODUCER_ID};
pub use producer_ids::{ProducerIdBlock, ProducerIdManager};
pub use service::{
    InitProducerIdResult, ProducerIdBlockError, ProducerIdBlockSource, TxnDeps, TxnService,
    TxnServiceConfig, TxnServiceStopped,
};
#[cfg(test)]
mod store_model_tests;
