//! Pieces several handlers share: Kafka's topic-name rule, error-code mapping,
//! leader-epoch checks, the resolve-then-read of a partition, and the checks
//! OffsetCommit and TxnOffsetCommit make of each partition.

use std::collections::BTreeSet;

use kafka_protocol::messages::BrokerId;
use kafka_protocol::protocol::StrBytes;
use uuid::Uuid;

use crate::controller::{
    CommandOutcome, ControllerError, MetadataCommand, MetadataError, MetadataImage,
};
use crate::error_code;
use crate::limits::OFFSET_METADATA_BYTES_MAX;
use crate::limits::TOPIC_NAME_LENGTH_MAX;
use crate::log::LogError;
use crate::protocol::context::{Cluster, Partitions};
use crate::protocol::RequestContext;
use crate::replica::{Partition, PartitionError};
use crate::security::acl::{Operation, ResourceType};
use crate::store::CommittedOffset;
use std::sync::Arc;

/// Kafka's message for an authorization error code (its `Errors` defaults),
/// the one text every handler answers a refusal with.
pub fn authorization_failed(code: i16) -> &'static str {
    match code {
        error_code::TOPIC_AUTHORIZATION_FAILED => "Topic authorization failed.",
        error_code::GROUP_AUTHORIZATION_FAILED => "Group authorization failed.",
        error_code::TRANSACTIONAL_ID_AUTHORIZATION_FAILED => {
            "Transactional Id authorization failed."
        }
        _ => "Cluster authorization failed.",
    }
}

/// Kafka's "authorized operations not requested" marker.
pub const AUTHORIZED_OPERATIONS_OMITTED: i32 = i32::MIN;

/// Kafka's `Topic.validate`: 1..=249 of `[a-zA-Z0-9._-]`, not `.` or `..`.
pub fn validate_topic_name(name: &str) -> Result<(), String> {
    if name.is_empty() {
        return Err("Topic name is illegal, it can't be empty".to_string());
    }
    if name == "." || name == ".." {
        return Err("Topic name cannot be \".\" or \"..\"".to_string());
    }
    if name.len() > TOPIC_NAME_LENGTH_MAX {
        return Err(format!(
            "Topic name is illegal, it can't be longer than {TOPIC_NAME_LENGTH_MAX} characters, topic name: {name}"
        ));
    }
    if !name
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || b == b'.' || b == b'_' || b == b'-')
    {
        return Err(format!(
            "Topic name {name} is illegal, it contains a character other than ASCII alphanumerics, '.', '_' and '-'"
        ));
    }
    Ok(())
}

/// The Kafka error code for a failed partition operation.
pub fn partition_error_code(error: &PartitionError) -> i16 {
    match error {
        PartitionError::UnknownTopicOrPartition => error_code::UNKNOWN_TOPIC_OR_PARTITION,
        PartitionError::NotLeaderOrFollower => error_code::NOT_LEADER_OR_FOLLOWER,
        PartitionError::NotEnoughReplicas => error_code::NOT_ENOUGH_REPLICAS,
        PartitionError::NotEnoughReplicasAfterAppend => {
            error_code::NOT_ENOUGH_REPLICAS_AFTER_APPEND
        }
        PartitionError::FencedLeaderEpoch => error_code::FENCED_LEADER_EPOCH,
        PartitionError::UnknownLeaderEpoch => error_code::UNKNOWN_LEADER_EPOCH,
        PartitionError::StaleBrokerEpoch => error_code::STALE_BROKER_EPOCH,
        PartitionError::Storage(_) => error_code::KAFKA_STORAGE_ERROR,
        PartitionError::Timeout => error_code::REQUEST_TIMED_OUT,
        PartitionError::Log(log_error) => log_error_code(log_error),
    }
}

pub fn log_error_code(error: &LogError) -> i16 {
    match error {
        LogError::CorruptMessage(_) => error_code::CORRUPT_MESSAGE,
        LogError::MessageTooLarge => error_code::MESSAGE_TOO_LARGE,
        LogError::RecordListTooLarge => error_code::RECORD_LIST_TOO_LARGE,
        LogError::InvalidTimestamp => error_code::INVALID_TIMESTAMP,
        LogError::OffsetOutOfRange { .. } => error_code::OFFSET_OUT_OF_RANGE,
        LogError::UnsupportedMagic(_)
        | LogError::InvalidRecord(_)
        | LogError::InvalidRecords { .. } => error_code::INVALID_RECORD,
        LogError::InvalidProducerEpoch(_) => error_code::INVALID_PRODUCER_EPOCH,
        LogError::OutOfOrderSequence(_) => error_code::OUT_OF_ORDER_SEQUENCE_NUMBER,
        LogError::InvalidTxnState(_) => error_code::INVALID_TXN_STATE,
        LogError::TransactionCoordinatorFenced(_) => error_code::TRANSACTION_COORDINATOR_FENCED,
        LogError::Io(_) => error_code::KAFKA_STORAGE_ERROR,
    }
}

/// A failure as (Kafka error code, message).
pub type Rejection = (i16, String);

/// Proposes a metadata command; a command the controller rejects, or a proposal
/// that fails, comes back as Kafka's error code and message.
pub async fn propose(
    cluster: &Cluster,
    command: MetadataCommand,
) -> Result<CommandOutcome, Rejection> {
    match cluster.propose(command).await {
        Ok(CommandOutcome::Rejected(error)) => Err(metadata_error(&error)),
        Ok(outcome) => Ok(outcome),
        Err(error) => Err(controller_error(&error)),
    }
}

fn controller_error(error: &ControllerError) -> Rejection {
    match error {
        // Proposals are forwarded to the leader; these mean none took it in time.
        ControllerError::NotLeader | ControllerError::Timeout => {
            (error_code::REQUEST_TIMED_OUT, error.to_string())
        }
        _ => (error_code::UNKNOWN_SERVER_ERROR, error.to_string()),
    }
}

/// The Kafka error code and message for a rejected metadata command.
fn metadata_error(error: &MetadataError) -> Rejection {
    match error {
        MetadataError::TopicAlreadyExists(name) => (
            error_code::TOPIC_ALREADY_EXISTS,
            format!("Topic '{name}' already exists."),
        ),
        MetadataError::UnknownTopic(name) => (
            error_code::UNKNOWN_TOPIC_OR_PARTITION,
            format!("This server does not host this topic-partition: {name}"),
        ),
        MetadataError::UnknownTopicId(id) => (
            error_code::UNKNOWN_TOPIC_ID,
            format!("Unknown topic id {id}"),
        ),
        MetadataError::InvalidPartitions(message) => {
            (error_code::INVALID_PARTITIONS, message.clone())
        }
        MetadataError::InvalidConfig(message) => (error_code::INVALID_CONFIG, message.clone()),
        MetadataError::InvalidReplicationFactor(message) => {
            (error_code::INVALID_REPLICATION_FACTOR, message.clone())
        }
        MetadataError::InvalidReplicaAssignment(message) => {
            (error_code::INVALID_REPLICA_ASSIGNMENT, message.clone())
        }
        MetadataError::InvalidRequest(message) => (error_code::INVALID_REQUEST, message.clone()),
        MetadataError::PolicyViolation(message) => (error_code::POLICY_VIOLATION, message.clone()),
        MetadataError::StaleBrokerEpoch(message) => {
            (error_code::STALE_BROKER_EPOCH, message.clone())
        }
        MetadataError::FencedLeaderEpoch(message) => {
            (error_code::FENCED_LEADER_EPOCH, message.clone())
        }
        MetadataError::InvalidUpdateVersion(message) => {
            (error_code::INVALID_UPDATE_VERSION, message.clone())
        }
        MetadataError::IneligibleReplica(message) => {
            (error_code::INELIGIBLE_REPLICA, message.clone())
        }
    }
}

/// True when the metadata image has this topic partition.
pub fn partition_exists(image: &MetadataImage, topic: &str, partition: i32) -> bool {
    image
        .topics
        .get(topic)
        .is_some_and(|t| partition >= 0 && (partition as usize) < t.partitions.len())
}

/// One partition of an OffsetCommit or TxnOffsetCommit request.
pub struct OffsetToCommit<'a> {
    pub partition: i32,
    pub offset: i64,
    pub leader_epoch: i32,
    pub metadata: Option<&'a StrBytes>,
}

/// A request's topics as `check_offsets` takes them: OffsetCommit and
/// TxnOffsetCommit name their topic and partition fields alike.
macro_rules! offsets_to_commit {
    ($topics:expr) => {
        $topics.iter().map(|topic| {
            let partitions = topic.partitions.iter().map(|p| {
                $crate::protocol::handlers::common::OffsetToCommit {
                    partition: p.partition_index,
                    offset: p.committed_offset,
                    leader_epoch: p.committed_leader_epoch,
                    metadata: p.committed_metadata.as_ref(),
                }
            });
            (topic.name.as_str(), partitions)
        })
    };
}
pub(super) use offsets_to_commit;

/// Per topic and partition, in request order: None when the partition passed its
/// own checks (its offset is among those to store), else its error.
pub type OwnChecks = Vec<Vec<Option<i16>>>;

/// The checks each partition of an offset commit passes on its own (OffsetCommit
/// and TxnOffsetCommit alike: the partition exists in `image`, its metadata
/// fits), and the offsets of those that pass, stamped `now_ms`, to store.
pub fn check_offsets<'a, P>(
    image: &MetadataImage,
    now_ms: i64,
    topics: impl IntoIterator<Item = (&'a str, P)>,
) -> (OwnChecks, Vec<(String, i32, CommittedOffset)>)
where
    P: IntoIterator<Item = OffsetToCommit<'a>>,
{
    let mut to_store = Vec::new();
    let checks = topics
        .into_iter()
        .map(|(topic, partitions)| {
            partitions
                .into_iter()
                .map(|p| {
                    if !partition_exists(image, topic, p.partition) {
                        return Some(error_code::UNKNOWN_TOPIC_OR_PARTITION);
                    }
                    let metadata = match committed_metadata(p.metadata) {
                        Ok(metadata) => metadata,
                        Err(code) => return Some(code),
                    };
                    let committed = CommittedOffset {
                        offset: p.offset,
                        leader_epoch: p.leader_epoch,
                        metadata,
                        commit_timestamp_ms: now_ms,
                    };
                    to_store.push((topic.to_string(), p.partition, committed));
                    None
                })
                .collect()
        })
        .collect();
    (checks, to_store)
}

/// A committed offset's metadata string, or OFFSET_METADATA_TOO_LARGE past Kafka's
/// `offset.metadata.max.bytes`.
fn committed_metadata(metadata: Option<&StrBytes>) -> Result<String, i16> {
    let metadata = metadata.map(|m| m.to_string()).unwrap_or_default();
    if metadata.len() > OFFSET_METADATA_BYTES_MAX {
        return Err(error_code::OFFSET_METADATA_TOO_LARGE);
    }
    Ok(metadata)
}

/// The partition a client names, led by this broker at the leader epoch the
/// client believes in (-1 skips that check), or the Kafka error code.
pub fn leader_partition(
    partitions: &Partitions,
    image: &MetadataImage,
    topic: &str,
    partition: i32,
    current_leader_epoch: i32,
) -> Result<Arc<Partition>, i16> {
    resolve_partition(
        partitions,
        image,
        topic,
        partition,
        current_leader_epoch,
        false,
    )
}

/// The partition here (led here, or with `from_follower` any replica here) at the
/// leader epoch the client believes in (-1 skips that check). A consumer's
/// Fetch that carries client metadata (KIP-392) may be served `from_follower`.
pub fn resolve_partition(
    partitions: &Partitions,
    image: &MetadataImage,
    topic: &str,
    partition: i32,
    current_leader_epoch: i32,
    from_follower: bool,
) -> Result<Arc<Partition>, i16> {
    let found = partitions
        .readable_on_worker(image, topic, partition, from_follower)
        .map_err(|e| partition_error_code(&e))?;
    check_leader_epoch(current_leader_epoch, found.leader_epoch().get())?;
    Ok(found)
}

/// Runs `op` on the partition a client names, led by this broker at the leader
/// epoch the client believes in (-1 skips that check); a failure to resolve it
/// or of `op` comes back as its Kafka error code.
pub fn on_leader_partition<T>(
    partitions: &Partitions,
    image: &MetadataImage,
    topic: &str,
    partition: i32,
    current_leader_epoch: i32,
    op: impl FnOnce(&Partition) -> Result<T, PartitionError>,
) -> Result<T, i16> {
    let found = leader_partition(partitions, image, topic, partition, current_leader_epoch)?;
    op(&found).map_err(|e| partition_error_code(&e))
}

/// A response's topics built from a request's, in request order: `answer` for
/// each requested partition of a topic, then `topic_response` over its answers.
pub fn per_partition<'a, T, P: 'a, R, O>(
    topics: &'a [T],
    partitions: impl Fn(&'a T) -> &'a [P],
    mut answer: impl FnMut(&'a T, &'a P) -> R,
    mut topic_response: impl FnMut(&'a T, Vec<R>) -> O,
) -> Vec<O> {
    topics
        .iter()
        .map(|topic| {
            let answers = partitions(topic).iter().map(|p| answer(topic, p)).collect();
            topic_response(topic, answers)
        })
        .collect()
}

/// Kafka's check of a client's `current_leader_epoch` (-1 skips it).
pub fn check_leader_epoch(requested: i32, current: i32) -> Result<(), i16> {
    if requested == -1 || requested == current {
        Ok(())
    } else if requested > current {
        Err(error_code::UNKNOWN_LEADER_EPOCH)
    } else {
        Err(error_code::FENCED_LEADER_EPOCH)
    }
}

/// A broker as a client should see it: (node id, host, port, rack).
pub struct AdvertisedBroker {
    pub node_id: i32,
    pub host: StrBytes,
    pub port: i32,
    pub rack: Option<StrBytes>,
}

/// Every live (unfenced) broker, each with the address of its listener of the
/// name the client came in on, and this one with the address the client
/// reached, so each client is told addresses it can reach. A fenced broker
/// leads nothing and is left out, as Kafka does.
pub fn advertised_brokers(
    image: &MetadataImage,
    own_node_id: i32,
    ctx: &RequestContext,
) -> Vec<AdvertisedBroker> {
    let (own_host, own_port) = ctx.advertised_endpoint();
    image
        .brokers
        .values()
        .filter(|broker| !broker.fenced)
        .map(|broker| {
            let (host, port) = if broker.node_id == own_node_id {
                (own_host.clone(), own_port)
            } else {
                let (host, port) = broker.endpoint(&ctx.listener.name);
                (host.to_string(), port)
            };
            AdvertisedBroker {
                node_id: broker.node_id,
                host: StrBytes::from_string(host),
                port,
                rack: broker.rack.clone().map(StrBytes::from_string),
            }
        })
        .collect()
}

/// KIP-951: for a partition a client sent to the wrong broker (an error of
/// `code`), the leader it should go to and its epoch, from `image`; None for other
/// errors, or when the partition has no leader.
pub fn current_leader(
    image: &MetadataImage,
    topic: &str,
    partition: i32,
    code: i16,
) -> Option<(i32, i32)> {
    if code != error_code::NOT_LEADER_OR_FOLLOWER && code != error_code::FENCED_LEADER_EPOCH {
        return None;
    }
    let p = image
        .topics
        .get(topic)?
        .partitions
        .get(usize::try_from(partition).ok()?)?;
    (p.leader_id >= 0).then_some((p.leader_id, p.leader_epoch.get()))
}

/// KIP-951's current leaders over a Produce or Fetch response: each partition
/// refused for leadership learns its leader (`current_leader`), and the
/// response lists the endpoints of the leaders so named.
pub struct CurrentLeaders {
    image: Arc<MetadataImage>,
    by_topic_id: bool,
    named: BTreeSet<i32>,
}

impl CurrentLeaders {
    /// Against the current image; the response names its topics by id when
    /// `by_topic_id` (its version does).
    pub fn new(partitions: &Partitions, by_topic_id: bool) -> CurrentLeaders {
        CurrentLeaders {
            image: partitions.image(),
            by_topic_id,
            named: BTreeSet::new(),
        }
    }

    /// A response topic's name: that of its id in the image when topics go by
    /// id (None for an id the image does not know), else `name`.
    pub fn topic_name(&self, topic_id: Uuid, name: &str) -> Option<String> {
        if self.by_topic_id {
            self.image.topic_names_by_id.get(&topic_id).cloned()
        } else {
            Some(name.to_string())
        }
    }

    /// The leader and its epoch for a partition of `topic` answered `code`
    /// (see `current_leader`), remembered for `endpoints`.
    pub fn leader(&mut self, topic: &str, partition: i32, code: i16) -> Option<(BrokerId, i32)> {
        let (leader, epoch) = current_leader(&self.image, topic, partition, code)?;
        self.named.insert(leader);
        Some((BrokerId(leader), epoch))
    }

    /// The addresses of the leaders named, on the listener the client came in
    /// on, for the response's NodeEndpoints.
    pub fn endpoints(
        &self,
        partitions: &Partitions,
        ctx: &RequestContext,
    ) -> Vec<AdvertisedBroker> {
        if self.named.is_empty() {
            return Vec::new();
        }
        advertised_brokers(&self.image, partitions.node_id(), ctx)
            .into_iter()
            .filter(|b| self.named.contains(&b.node_id))
            .collect()
    }
}

/// Kafka's first check of a group API: `operation` on the group (refused,
/// GROUP_AUTHORIZATION_FAILED), then an id that is not empty (else
/// INVALID_GROUP_ID). Authorization comes first, so that a refused principal
/// learns nothing more of the group.
pub fn group_refusal(ctx: &RequestContext, operation: Operation, group_id: &str) -> Option<i16> {
    if !ctx.authorize(operation, ResourceType::Group, group_id) {
        Some(error_code::GROUP_AUTHORIZATION_FAILED)
    } else if group_id.is_empty() {
        Some(error_code::INVALID_GROUP_ID)
    } else {
        None
    }
}

pub fn message(text: impl Into<String>) -> Option<StrBytes> {
    Some(StrBytes::from_string(text.into()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::LeaderEpoch;

    #[test]
    fn topic_names_follow_kafka() {
        assert!(validate_topic_name("orders.v1_a-b").is_ok());
        assert!(validate_topic_name("").is_err());
        assert!(validate_topic_name("..").is_err());
        assert!(validate_topic_name("a/b").is_err());
        assert!(validate_topic_name(&"x".repeat(250)).is_err());
        assert!(validate_topic_name(&"x".repeat(249)).is_ok());
    }

    #[test]
    fn a_refused_partition_names_its_current_leader_only_for_leadership_errors() {
        use crate::controller::{PartitionImage, TopicImage};
        let mut image = MetadataImage::default();
        let partition = |leader_id| PartitionImage {
            partition_index: 0,
            leader_id,
            leader_epoch: LeaderEpoch::new(4),
            partition_epoch: 6,
            replicas: vec![1, 2, 3],
            isr: vec![2, 3],
            elr: Vec::new(),
            last_known_elr: Vec::new(),
            adding_replicas: Vec::new(),
            removing_replicas: Vec::new(),
        };
        let topic = |leader_id| TopicImage {
            name: "t".to_string(),
            topic_id: uuid::Uuid::from_u128(1),
            partitions: vec![partition(leader_id)],
            configs: Default::default(),
        };
        image.topics.insert("t".to_string(), Arc::new(topic(2)));
        let not_leader = error_code::NOT_LEADER_OR_FOLLOWER;
        assert_eq!(current_leader(&image, "t", 0, not_leader), Some((2, 4)));
        assert_eq!(
            current_leader(&image, "t", 0, error_code::FENCED_LEADER_EPOCH),
            Some((2, 4))
        );
        assert_eq!(current_leader(&image, "t", 0, error_code::NONE), None);
        assert_eq!(current_leader(&image, "t", 1, not_leader), None);
        assert_eq!(current_leader(&image, "u", 0, not_leader), None);
        image.topics.insert("t".to_string(), Arc::new(topic(-1)));
        assert_eq!(
            current_leader(&image, "t", 0, not_leader),
            None,
            "no leader to name"
        );
    }

    #[test]
    fn leader_epoch_checks() {
        assert_eq!(check_leader_epoch(-1, 3), Ok(()));
        assert_eq!(check_leader_epoch(3, 3), Ok(()));
        assert_eq!(
            check_leader_epoch(4, 3),
            Err(error_code::UNKNOWN_LEADER_EPOCH)
        );
        assert_eq!(
            check_leader_epoch(2, 3),
            Err(error_code::FENCED_LEADER_EPOCH)
        );
    }
}
