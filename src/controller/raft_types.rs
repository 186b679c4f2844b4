//! The openraft type configuration of the metadata log, and the conversions between raft
//! node ids and Kafka broker ids.
//!
//! A raft node id *is* the Kafka broker id (a non-negative `i32`) widened to `u64`, the type
//! openraft's storage test suite requires. The widening is lossless and checked both ways,
//! so a node id that does not fit a broker id can only come from a corrupt log.

use std::io::Cursor;

use serde::{Deserialize, Serialize};

use super::command::{CommandOutcome, MetadataCommand};

/// A raft node id: the Kafka broker id, widened.
pub type NodeId = u64;

openraft::declare_raft_types!(
    /// Types of the metadata raft group.
    pub TypeConfig:
        D = MetadataCommand,
        R = CommandOutcome,
        NodeId = NodeId,
        Node = ControllerNode,
        Entry = openraft::Entry<TypeConfig>,
        SnapshotData = Cursor<Vec<u8>>,
        AsyncRuntime = openraft::TokioRuntime,
);

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
