//! OffsetCommit: the partitions' own checks here (known partition, metadata
//! size), then the group coordinator admits the commit (generation, member,
//! instance) and stores it durably in one step: the answer is sent only after
//! the fsync. Simple commits (generation -1, no member) work for groups not in
//! use.

use kafka_protocol::messages::offset_commit_response::{
    OffsetCommitResponsePartition, OffsetCommitResponseTopic,
};
use kafka_protocol::messages::{OffsetCommitRequest, OffsetCommitResponse};
use kafka_protocol::protocol::VersionRange;

use super::common::{check_offsets, offsets_to_commit};
use crate::coordinator::group::{CommitOutcome, OffsetCommit};
use crate::error_code;
use crate::protocol::context::Coordinators;
use crate::protocol::RequestContext;
use crate::security::acl::{Operation, ResourceType};

/// The versions below the current codec's oldest are read by `old_versions` and
/// reach this handler at that oldest (bridge) version.
pub const VERSIONS: VersionRange = VersionRange { min: 0, max: 9 };

pub async fn handle(
    coordinators: &Coordinators,
    ctx: &RequestContext,
    request: OffsetCommitRequest,
) -> OffsetCommitResponse {
    let group_id = request.group_id.to_string();
    // Kafka's Read on the group first: refused, every partition says so and
    // nothing is stored.
    if !ctx.authorize(Operation::Read, ResourceType::Group, &group_id) {
        return answer(&request, |_, _| error_code::GROUP_AUTHORIZATION_FAILED);
    }
    // Then Read on each topic: a refused topic's partitions are
    // TOPIC_AUTHORIZATION_FAILED and none of its offsets is stored.
    let readable: Vec<bool> = request
        .topics
        .iter()
        .map(|topic| ctx.authorize(Operation::Read, ResourceType::Topic, &topic.name))
        .collect();
    // The checks each partition of a readable topic passes on its own, and
    // the offsets to store.
    let topics = offsets_to_commit!(request.topics)
        .zip(&readable)
        .filter_map(|(topic, readable)| readable.then_some(topic));
    let (checks, mut to_store) =
        check_offsets(&coordinators.image(), coordinators.now_ms(), topics);
    if let Some(old) = &ctx.old {
        // v1 could name the commit time, which Kafka 3.9 stored (and expired
        // from) in place of its own clock.
        for (topic, partition, committed) in &mut to_store {
            if let Some(commit_timestamp_ms) = old.commit_timestamp_ms(topic, *partition) {
                committed.commit_timestamp_ms = commit_timestamp_ms;
            }
        }
    }
    let outcome = if !request.topics.is_empty() && checks.is_empty() {
        // Every topic refused: as Kafka, the coordinator is not asked.
        CommitOutcome::Refused(error_code::TOPIC_AUTHORIZATION_FAILED)
    } else if group_id.is_empty() {
        CommitOutcome::Refused(error_code::INVALID_GROUP_ID)
    } else {
        let commit = OffsetCommit {
            group_id,
            member_id: request.member_id.to_string(),
            group_instance_id: request.group_instance_id.as_ref().map(|id| id.to_string()),
            generation_id: request.generation_id_or_member_epoch,
            offsets: to_store,
        };
        coordinators
            .groups()
            .commit_offsets(commit)
            .await
            .unwrap_or(CommitOutcome::Refused(
                error_code::COORDINATOR_NOT_AVAILABLE,
            ))
    };
    tracing::debug!(group = %request.group_id.as_str(), member = %request.member_id.as_str(), generation = request.generation_id_or_member_epoch, ?outcome, "commit answered");
    // The readable topics' checks, in request order.
    let mut checks = checks.into_iter();
    let own: Vec<Option<Vec<Option<i16>>>> = readable
        .iter()
        .map(|readable| if *readable { checks.next() } else { None })
        .collect();
    answer(&request, |topic, partition| {
        let Some(own) = own.get(topic).and_then(Option::as_ref) else {
            return error_code::TOPIC_AUTHORIZATION_FAILED;
        };
        // The group's refusal comes first, then the partition's own error,
        // then the store's verdict on what it was given.
        match (outcome, own.get(partition).copied().flatten()) {
            (CommitOutcome::Refused(code), _) => code,
            (CommitOutcome::Admitted(_), Some(code)) => code,
            (CommitOutcome::Admitted(code), None) => code,
        }
    })
}

/// The response: every partition of the request, in its order, with
/// `error(topic index, partition index)`.
fn answer(
    request: &OffsetCommitRequest,
    error: impl Fn(usize, usize) -> i16,
) -> OffsetCommitResponse {
    let topics = request
        .topics
        .iter()
        .enumerate()
        .map(|(t, topic)| {
            let partitions = topic
                .partitions
                .iter()
                .enumerate()
                .map(|(p, partition)| {
                    OffsetCommitResponsePartition::default()
                        .with_partition_index(partition.partition_index)
                        .with_error_code(error(t, p))
                })
                .collect();
            OffsetCommitResponseTopic::default()
                .with_name(topic.name.clone())
                .with_partitions(partitions)
        })
        .collect();
    OffsetCommitResponse::default().with_topics(topics)
}
