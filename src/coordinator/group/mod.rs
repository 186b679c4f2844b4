//! The group coordinator for Kafka's classic consumer-group protocol (JoinGroup,
//! SyncGroup, Heartbeat, LeaveGroup, DescribeGroups, ListGroups, DeleteGroups)
//! and every offset API (OffsetCommit, TxnOffsetCommit, OffsetFetch,
//! OffsetDelete), as Kafka's GroupCoordinator and GroupMetadataManager run them.
//!
//! - `coordinator`: the pure state machine over plain values; time is an
//!   argument and member ids come from an injected `IdSource`.
//! - `service`: the async API for the handlers; it owns the offsets stores.
//! - `task`: the one task that owns the coordinator, ticked by the injected
//!   clock; `task::store_work` is its store work: offsets, group records
//!   (persisted periodically and at shutdown) and offset expiry.
//! - `order`: how one group's commands wait for its store work.
//! - `api`, `offsets`: the values it speaks (its error codes are the crate's
//!   `error_code`).
//! - `state`, `member`, `join`, `rebalance`: one group's bookkeeping and transitions.
//!
//! Invariant: nothing here imports the protocol crate, sled or openraft, and
//! nothing reads the system clock or draws its own random numbers. A group's
//! check and its store write are one step: no other command of that group runs
//! in between.

pub mod api;
pub mod coordinator;
mod join;
mod member;
pub mod offsets;
mod order;
mod rebalance;
pub mod service;
pub mod state;
mod task;
pub mod topic;

#[cfg(test)]
mod service_tests;
#[cfg(test)]
mod tests;

pub use api::{
    DescribedMember, GroupConfig, GroupDescription, JoinRequest, JoinResponse, JoinedMember,
    ListedGroup, Reply, ReplyTo, SyncRequest, SyncResponse,
};
pub use api::{GroupServiceConfig, Ownership};
pub use coordinator::GroupCoordinator;
pub use offsets::{
    CommitOutcome, CommittedRows, FetchedOffsets, OffsetCommit, StoreRefused, SubscribedTopics,
    TxnOffsetCommit,
};
pub use service::{GroupDeps, GroupService, GroupServiceStopped};
pub use state::GroupState;
