//! The commands stored in the metadata log and the outcomes the state machine gives them.
//!
//! These types are the on-disk format of the raft log (JSON through serde), so a change must
//! keep old entries decodable: add variants and `#[serde(default)]` fields, never rename.
//! A command carries everything its outcome depends on (ids, names, counts) so that applying
//! it is deterministic on every node and on every replay.

use std::collections::BTreeMap;
use std::fmt;

use serde::{Deserialize, Serialize};

use super::image::BrokerRegistration;

/// A change to the cluster metadata, proposed through raft.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum MetadataCommand {
    /// Set the cluster id if none is set yet; later ones are no-ops. Proposed once, by the
    /// first controller start, so the id is part of the replicated state and never changes.
    InitCluster {
        cluster_id: String,
    },
    /// Add or replace a broker's registration; `apply` sets its epoch to the
    /// entry's index. A registration with a new incarnation id is a restart: as
    /// after an unclean shutdown, the broker leads nothing until it is unfenced.
    RegisterBroker(BrokerRegistration),
    /// The broker missed its session timeout (or asked to be fenced); applies only
    /// if `epoch` is still its registration's. Leaderships move to the next
    /// unfenced ISR member, or to none.
    FenceBroker {
        node_id: i32,
        epoch: i64,
    },
    /// The broker has caught up with the metadata log since registering;
    /// applies only if `epoch` is still its registration's. It leads again the
    /// partitions left without a leader that have it in their ISR.
    UnfenceBroker {
        node_id: i32,
        epoch: i64,
    },
    /// Create a topic. `partitions` and `replication_factor` must already be resolved from
    /// broker defaults (no -1): the state machine has no broker config to resolve them with.
    CreateTopic {
        name: String,
        topic_id: uuid::Uuid,
        partitions: i32,
        replication_factor: i16,
        configs: BTreeMap<String, String>,
        /// The client's explicit replica assignment, one list of broker ids per partition
        /// (the first leads); empty: placed by the controller.
        #[serde(default)]
        assignments: Vec<Vec<i32>>,
    },
    DeleteTopic {
        topic_id: uuid::Uuid,
    },
    /// Grow a topic to `total_count` partitions; it can never shrink.
    CreatePartitions {
        name: String,
        total_count: i32,
    },
    /// `replace = true` is AlterConfigs: the overrides become exactly the `Set` ops, and any
    /// other op is rejected. `replace = false` is IncrementalAlterConfigs: ops apply in order,
    /// all or none.
    AlterTopicConfigs {
        name: String,
        ops: Vec<ConfigOp>,
        replace: bool,
    },
    /// As `AlterTopicConfigs`, for the dynamic broker-level configs.
    AlterBrokerConfigs {
        ops: Vec<ConfigOp>,
        replace: bool,
    },
    /// Reserve a block of `count` producer ids, for idempotent and transactional producers.
    AllocateProducerIds {
        count: i64,
    },
    /// Kafka's ElectLeaders: for each partition named (every partition when None),
    /// the preferred replica (the first) takes the leadership if it is a live ISR
    /// member and does not lead yet; or, `unclean`, a leaderless partition takes
    /// its first live replica, alone in the ISR.
    ElectLeaders {
        unclean: bool,
        #[serde(default)]
        partitions: Option<Vec<(String, i32)>>,
    },
    /// Kafka's AlterPartitionReassignments (KIP-455): each partition named moves to
    /// the target replicas given (added replicas catch up and join the ISR, then the
    /// removed ones leave), or, with None, its reassignment is cancelled. With
    /// `allow_replication_factor_change` false, a target of another size is refused.
    AlterPartitionReassignments {
        reassignments: Vec<(String, i32, Option<Vec<i32>>)>,
        #[serde(default = "allow_by_default")]
        allow_replication_factor_change: bool,
    },
    /// Kafka's AlterPartition: the leader of a partition proposes a new ISR (a shrink
    /// or an expansion). Applies only if `leader_id` still leads at `leader_epoch`,
    /// `partition_epoch` is still the partition's (the compare-and-set token), the
    /// new ISR holds the leader, and every member is an unfenced replica whose
    /// registration is still the one with the broker epoch given (KIP-903; -1 skips
    /// that check). The leader epoch does not change; the partition epoch does.
    AlterPartition {
        topic_id: uuid::Uuid,
        partition: i32,
        leader_id: i32,
        leader_epoch: i32,
        partition_epoch: i32,
        /// (broker id, broker epoch) of every member of the new ISR.
        new_isr: Vec<(i32, i64)>,
    },
}

fn allow_by_default() -> bool {
    true
}

/// One config change. Keys and values are validated against the config definitions by the
/// handler before proposing; the state machine only applies them.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum ConfigOp {
    Set {
        key: String,
        value: String,
    },
    /// Remove the override, falling back to the default. Removing an absent key is not an error.
    Delete {
        key: String,
    },
    /// Add the comma-separated items of `value` not already in the list, as Kafka's APPEND.
    Append {
        key: String,
        value: String,
    },
    /// Remove the comma-separated items of `value` from the list, as Kafka's SUBTRACT.
    Subtract {
        key: String,
        value: String,
    },
}

impl ConfigOp {
    pub fn key(&self) -> &str {
        match self {
            ConfigOp::Set { key, .. }
            | ConfigOp::Delete { key }
            | ConfigOp::Append { key, .. }
            | ConfigOp::Subtract { key, .. } => key,
        }
    }
}

/// What applying a command did.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum CommandOutcome {
    Done,
    TopicCreated {
        topic_id: uuid::Uuid,
    },
    /// Producer ids `first .. first + count` belong to the proposer, never to anyone else.
    ProducerIds {
        first: i64,
        count: i64,
    },
    /// An ElectLeaders applied: each partition with Kafka's error code for it
    /// (NONE when the leadership moved).
    Elected(Vec<(String, i32, i16)>),
    /// An AlterPartition applied: the partition as it now is.
    PartitionChanged {
        leader_epoch: i32,
        partition_epoch: i32,
        isr: Vec<i32>,
    },
    /// The command was valid raft input but not valid against the metadata at its place in
    /// the log; nothing changed.
    Rejected(MetadataError),
}

/// A client-visible reason a command was rejected; handlers map each to a Kafka error code.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum MetadataError {
    TopicAlreadyExists(String),
    UnknownTopic(String),
    UnknownTopicId(uuid::Uuid),
    InvalidPartitions(String),
    InvalidConfig(String),
    /// More replicas than registered brokers, or fewer than one.
    InvalidReplicationFactor(String),
    /// An explicit replica assignment that names an unknown or repeated broker, or whose
    /// partitions differ in replica count.
    InvalidReplicaAssignment(String),
    /// A fence or unfence for a registration that has since been replaced.
    StaleBrokerEpoch(String),
    /// AlterPartition from a leader epoch older than the partition's (FENCED_LEADER_EPOCH).
    FencedLeaderEpoch(String),
    /// AlterPartition at a partition epoch other than the partition's
    /// (INVALID_UPDATE_VERSION): the proposer's view is stale.
    InvalidUpdateVersion(String),
    /// AlterPartition naming a member that may not join the ISR: not a replica, fenced,
    /// or registered anew since the epoch given (INELIGIBLE_REPLICA).
    IneligibleReplica(String),
    /// A command no client request should produce (a negative broker id, a producer id block
    /// out of range): the proposer's mistake, reported rather than applied.
    InvalidRequest(String),
}

impl fmt::Display for MetadataError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            MetadataError::TopicAlreadyExists(name) => write!(f, "Topic '{name}' already exists."),
            MetadataError::UnknownTopic(name) => write!(f, "Topic '{name}' does not exist."),
            MetadataError::UnknownTopicId(id) => write!(f, "Topic id {id} does not exist."),
            MetadataError::InvalidPartitions(msg)
            | MetadataError::InvalidConfig(msg)
            | MetadataError::InvalidReplicationFactor(msg)
            | MetadataError::InvalidReplicaAssignment(msg)
            | MetadataError::StaleBrokerEpoch(msg)
            | MetadataError::FencedLeaderEpoch(msg)
            | MetadataError::InvalidUpdateVersion(msg)
            | MetadataError::IneligibleReplica(msg)
            | MetadataError::InvalidRequest(msg) => f.write_str(msg),
        }
    }
}

impl std::error::Error for MetadataError {}
