//! The commands stored in the metadata log and the outcomes the state machine gives them.
//!
//! These types are the on-disk format of the raft log (JSON through serde), so a change must
//! keep old entries decodable: add variants and `#[serde(default)]` fields, never rename.
//! A command carries everything its outcome depends on (ids, names, counts) so that applying
//! it is deterministic on every node and on every replay.

use std::collections::BTreeMap;
use std::fmt;

use serde::{Deserialize, Serialize};

use super::features;
use super::image::BrokerRegistration;
use crate::security::acl::{AclBinding, AclFilter};
use crate::types::{BrokerEpoch, LeaderEpoch};

/// A change to the cluster metadata, proposed through raft.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum MetadataCommand {
    /// Set the cluster id if none is set yet; later ones are no-ops. Proposed once, by the
    /// first controller start, so the id is part of the replicated state and never changes.
    InitCluster {
        cluster_id: String,
        /// The feature levels the cluster starts at (none in a log written
        /// before feature levels: `features::METADATA_VERSION_BASE`).
        #[serde(default)]
        features: BTreeMap<String, i16>,
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
        epoch: BrokerEpoch,
    },
    /// The broker has caught up with the metadata log since registering;
    /// applies only if `epoch` is still its registration's. It leads again the
    /// partitions left without a leader that have it in their ISR.
    UnfenceBroker {
        node_id: i32,
        epoch: BrokerEpoch,
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
        leader_epoch: LeaderEpoch,
        partition_epoch: i32,
        /// (broker id, broker epoch) of every member of the new ISR.
        new_isr: Vec<(i32, BrokerEpoch)>,
    },
    /// Kafka's FeatureLevelRecord (UpdateFeatures): finalize each feature at
    /// its level (0 takes a feature away; `metadata.version` never). Checked
    /// against every registered broker's supported levels before it is
    /// proposed; a node that supports less stops applying here
    /// (`MetadataRecord::unsupported`).
    UpdateFeatures {
        levels: BTreeMap<String, i16>,
    },
    /// Every broker whose session expired, fenced in one step: all are fenced
    /// before any leadership moves, so that no leadership moves onto a broker
    /// about to be fenced. A broker whose epoch is stale is left alone. Needs
    /// `metadata_version` (`features::METADATA_VERSION_FENCE_BROKERS`).
    FenceBrokers {
        metadata_version: i16,
        /// (node id, broker epoch).
        brokers: Vec<(i32, BrokerEpoch)>,
    },
    /// Kafka's UserScramCredentialRecord and RemoveUserScramCredentialRecord
    /// (AlterUserScramCredentials, `--add-scram`), for several users at once:
    /// each user's changes apply together or not at all (a deletion of a
    /// credential the user lacks fails that user, RESOURCE_NOT_FOUND). With
    /// `only_if_absent`, an upsertion of a credential the user already has is
    /// skipped (users created at start never overwrite a changed password).
    /// Needs `metadata_version` (`features::METADATA_VERSION_SCRAM`).
    AlterUserScramCredentials {
        metadata_version: i16,
        upsertions: Vec<ScramUpsertion>,
        deletions: Vec<ScramDeletion>,
        #[serde(default)]
        only_if_absent: bool,
    },
    /// Kafka's AccessControlEntryRecord (CreateAcls): each binding under the
    /// id its proposer drew; a binding identical to one that exists is not
    /// added again (and counts as created, as in Kafka). Needs
    /// `metadata_version` (`features::METADATA_VERSION_ACLS`).
    CreateAcls {
        metadata_version: i16,
        bindings: Vec<(uuid::Uuid, AclBinding)>,
    },
    /// Kafka's RemoveAccessControlEntryRecord (DeleteAcls): every binding
    /// each filter matches at this place in the log is removed, at most
    /// `ACL_CHANGES_PER_REQUEST_MAX` in all (more fails every filter and
    /// removes none). Needs `metadata_version`.
    DeleteAcls {
        metadata_version: i16,
        filters: Vec<AclFilter>,
    },
    /// A command with the request id its proposer gave it: applied once, however
    /// often a proposer whose answer was lost retries it, and answered each time
    /// with the outcome of the first (the last `CONTROLLER_REQUEST_IDS_KEPT`
    /// ids are kept in the image). Needs `metadata_version`
    /// (`features::METADATA_VERSION_REQUEST_IDS`).
    Request {
        metadata_version: i16,
        request_id: uuid::Uuid,
        command: Box<MetadataCommand>,
    },
}

/// One credential to create or replace.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ScramUpsertion {
    pub name: String,
    pub mechanism: i8,
    pub credential: super::image::UserScramCredential,
}

/// One credential to remove.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ScramDeletion {
    pub name: String,
    pub mechanism: i8,
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
        leader_epoch: LeaderEpoch,
        partition_epoch: i32,
        isr: Vec<i32>,
    },
    /// An AlterUserScramCredentials applied: each user named, with Kafka's
    /// error code for it (NONE when its changes applied) and a message.
    UsersAltered(Vec<(String, i16, Option<String>)>),
    /// A DeleteAcls applied: per filter, the bindings it removed (or, when
    /// more than `ACL_CHANGES_PER_REQUEST_MAX` matched, an error for every
    /// filter and nothing removed).
    AclsDeleted(Result<Vec<Vec<AclBinding>>, String>),
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
    /// More partitions than a broker has room for (POLICY_VIOLATION).
    PolicyViolation(String),
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
            | MetadataError::InvalidRequest(msg)
            | MetadataError::PolicyViolation(msg) => f.write_str(msg),
        }
    }
}

impl std::error::Error for MetadataError {}

/// One entry of the metadata log: a command this node understands, or a
/// record written by a newer node. Untagged, so that a command is written
/// exactly as before (the log format does not change) and anything this node
/// cannot read as a command is kept as it was written, for the error.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum MetadataRecord {
    Command(MetadataCommand),
    Newer(serde_json::Value),
}

impl From<MetadataCommand> for MetadataRecord {
    fn from(command: MetadataCommand) -> MetadataRecord {
        MetadataRecord::Command(command)
    }
}

impl MetadataRecord {
    /// Why this node cannot apply the record, if it cannot: a record it does
    /// not understand (named with the `metadata.version` it says it needs), or
    /// feature levels above what it supports.
    pub fn unsupported(&self) -> Option<String> {
        let needs = match self {
            MetadataRecord::Newer(value) => {
                let (name, needs) = newer_record(value);
                return Some(format!(
                    "metadata record {name} is newer than this node understands (it needs \
                     metadata.version {}; this node supports up to {}): upgrade this node",
                    needs.map_or_else(|| "unknown".to_string(), features::metadata_version_name),
                    features::metadata_version_name(features::METADATA_VERSION_LATEST),
                ));
            }
            MetadataRecord::Command(MetadataCommand::UpdateFeatures { levels }) => levels,
            MetadataRecord::Command(_) => return None,
        };
        let ours = features::supported();
        needs.iter().find_map(|(feature, level)| {
            let within = ours
                .get(feature)
                .is_some_and(|(min, max)| (*min..=*max).contains(level) || *level == 0);
            (!within).then(|| {
                format!(
                    "metadata record UpdateFeatures sets {feature} to {level}, which this node \
                     does not support ({}): upgrade this node",
                    ours.get(feature).map_or_else(
                        || "not at all".to_string(),
                        |(min, max)| format!("{min} to {max}")
                    )
                )
            })
        })
    }
}

/// The name of a record this node does not understand (the key of its JSON
/// object), and the `metadata.version` it says it needs: every command added
/// since feature levels carries it as `metadata_version`.
fn newer_record(value: &serde_json::Value) -> (String, Option<i16>) {
    match value {
        serde_json::Value::Object(fields) if fields.len() == 1 => {
            let (name, body) = fields
                .iter()
                .next()
                .map_or(("?", &serde_json::Value::Null), |(k, v)| (k.as_str(), v));
            let needs = body
                .get("metadata_version")
                .and_then(serde_json::Value::as_i64)
                .and_then(|level| i16::try_from(level).ok());
            (name.to_string(), needs)
        }
        serde_json::Value::String(name) => (name.clone(), None),
        other => (other.to_string().chars().take(80).collect(), None),
    }
}

#[cfg(test)]
mod record_tests {
    use std::collections::BTreeMap;

    use super::*;

    #[test]
    fn a_command_is_written_as_before_and_a_newer_record_is_kept_with_its_level() {
        let command = MetadataCommand::DeleteTopic {
            topic_id: uuid::Uuid::nil(),
        };
        let as_command = serde_json::to_vec(&command).expect("encode");
        let as_record =
            serde_json::to_vec(&MetadataRecord::Command(command.clone())).expect("encode");
        assert_eq!(as_command, as_record, "the log format is unchanged");
        let decoded: MetadataRecord = serde_json::from_slice(&as_command).expect("decode");
        assert_eq!(decoded, MetadataRecord::Command(command));
        assert_eq!(decoded.unsupported(), None);

        let newer = br#"{"SplitTheAtom":{"metadata_version":99,"how":"carefully"}}"#;
        let decoded: MetadataRecord = serde_json::from_slice(newer).expect("decode");
        let why = decoded.unsupported().expect("not understood");
        assert!(why.contains("SplitTheAtom"), "{why}");
        assert!(why.contains("metadata.version 99"), "{why}");
        assert!(why.contains("4.1-IV1"), "{why}");
    }

    #[test]
    fn feature_levels_above_what_this_node_supports_are_refused() {
        let raise = |level: i16| {
            MetadataRecord::Command(MetadataCommand::UpdateFeatures {
                levels: BTreeMap::from([(features::METADATA_VERSION.to_string(), level)]),
            })
        };
        assert_eq!(raise(features::METADATA_VERSION_LATEST).unsupported(), None);
        let why = raise(features::METADATA_VERSION_LATEST + 1)
            .unsupported()
            .expect("too new");
        assert!(why.contains("metadata.version"), "{why}");
        assert_eq!(features::metadata_version_name(25), "4.0-IV3");
    }
}
