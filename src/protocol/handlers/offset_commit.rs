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
use crate::error_code;
use crate::group::{CommitOutcome, OffsetCommit};
use crate::protocol::context::Coordinators;
use crate::protocol::RequestContext;

/// The versions below the current codec's oldest are read by `old_versions` and
/// reach this handler at that oldest (bridge) version.
pub const VERSIONS: VersionRange = VersionRange { min: 0, max: 9 };

pub async fn handle(
    coordinators: &Coordinators,
    ctx: &RequestContext,
    request: OffsetCommitRequest,
) -> OffsetCommitResponse {
    let group_id = request.group_id.to_string();
    // The checks each partition passes on its own, and the offsets to store.
    let topics = offsets_to_commit!(request.topics);
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
    let outcome = if group_id.is_empty() {
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
    let topics = request
        .topics
        .iter()
        .zip(checks)
        .map(|(topic, checks)| {
            let partitions = topic
                .partitions
                .iter()
                .zip(checks)
                .map(|(p, own)| {
                    // The group's refusal comes first, then the partition's own
                    // error, then the store's verdict on what it was given.
                    let error = match (outcome, own) {
                        (CommitOutcome::Refused(code), _) => code,
                        (CommitOutcome::Admitted(_), Some(code)) => code,
                        (CommitOutcome::Admitted(code), None) => code,
                    };
                    OffsetCommitResponsePartition::default()
                        .with_partition_index(p.partition_index)
                        .with_error_code(error)
                })
                .collect();
            OffsetCommitResponseTopic::default()
                .with_name(topic.name.clone())
                .with_partitions(partitions)
        })
        .collect();
    OffsetCommitResponse::default().with_topics(topics)
}
