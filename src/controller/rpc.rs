//! The messages between controllers: raft's own (append entries, vote,
//! install snapshot) and the controller's (a proposal forwarded to the leader,
//! the bootstrap probe, a broker's heartbeat, a non-voter asking to follow the
//! log). Each is a request kind of the `net` transport with a JSON body; every
//! answer is a JSON `Result`, so a remote failure is an answer, not a broken
//! connection.
//!
//! These types cross the wire between nodes of one version; the handshake's
//! protocol version guards a change of them.

use std::io;

use bytes::Bytes;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

use crate::types::BrokerEpoch;

pub const KIND_APPEND_ENTRIES: u8 = 0;
pub const KIND_VOTE: u8 = 1;
/// On the bulk connection.
pub const KIND_INSTALL_SNAPSHOT: u8 = 2;
/// [`MetadataCommand`](super::command::MetadataCommand) in, `Result<CommandOutcome, ForwardError>` out.
pub const KIND_PROPOSE: u8 = 3;
/// Nothing in, `Result<ProbeAnswer, ForwardError>` out.
pub const KIND_PROBE: u8 = 4;
/// [`BrokerHeartbeat`] in, `Result<HeartbeatAnswer, ForwardError>` out.
pub const KIND_BROKER_HEARTBEAT: u8 = 5;
/// [`JoinRequest`] in, `Result<(), ForwardError>` out.
pub const KIND_JOIN: u8 = 6;

/// Why the node asked could not do what a controller message asked.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum ForwardError {
    /// It is not the raft leader; `leader` is the one it knows of, if any.
    NotLeader { leader: Option<u64> },
    /// It is the leader but raft failed (or is shutting down).
    Failed(String),
}

/// What a voter answers the bootstrap probe.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProbeAnswer {
    /// Whether its raft state holds a vote or a log (it is part of a cluster).
    pub initialized: bool,
    pub cluster_id: Option<String>,
}

/// A broker's heartbeat to the active controller (Kafka's BrokerHeartbeat).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct BrokerHeartbeat {
    pub node_id: i32,
    pub broker_epoch: BrokerEpoch,
    /// How far the broker has applied the metadata log.
    pub metadata_offset: u64,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct HeartbeatAnswer {
    /// Whether the broker is fenced in the leader's image.
    pub fenced: bool,
}

/// A node that is not a voter asks the leader to replicate the log to it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct JoinRequest {
    pub node_id: u64,
    /// Its controller listener, where the leader reaches it.
    pub address: String,
}

pub fn encode<T: Serialize>(value: &T) -> io::Result<Bytes> {
    serde_json::to_vec(value)
        .map(Bytes::from)
        .map_err(io::Error::other)
}

pub fn decode<T: DeserializeOwned>(bytes: &[u8]) -> io::Result<T> {
    serde_json::from_slice(bytes).map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))
}
