//! The group coordinator for Kafka's classic consumer-group protocol (JoinGroup,
//! SyncGroup, Heartbeat, LeaveGroup, and the group side of OffsetCommit,
//! DescribeGroups, ListGroups and DeleteGroups), as Kafka's GroupCoordinator and
//! GroupMetadata run it.
//!
//! - `coordinator`: the pure state machine over plain values; time is an
//!   argument and member ids come from an injected `IdSource`.
//! - `service`: the one task that owns the coordinator, with an async API for
//!   the handlers and a ticker driven by the injected clock.
//! - `api`, `errors`: the values it speaks and Kafka's error codes.
//! - `state`, `member`, `join`, `rebalance`: one group's bookkeeping and transitions.
//!
//! Invariant: nothing here imports the protocol crate, sled or openraft, and
//! nothing reads the system clock or draws its own random numbers.

pub mod api;
pub mod coordinator;
pub mod errors;
mod join;
mod member;
pub mod placement;
mod rebalance;
pub mod service;
pub mod state;

#[cfg(test)]
mod tests;

pub use api::{
    DescribedMember, GroupConfig, GroupDescription, JoinRequest, JoinResponse, JoinedMember, Reply,
    ReplyTo, SyncRequest, SyncResponse,
};
pub use coordinator::GroupCoordinator;
pub use placement::coordinator_partition;
pub use service::GroupService;
pub use state::GroupState;
