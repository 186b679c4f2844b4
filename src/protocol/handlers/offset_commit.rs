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

use super::common::{committed_metadata, partition_exists};
use crate::error_code;
use crate::group::{CommitOutcome, OffsetCommit};
use crate::protocol::context::Coordinators;
use crate::protocol::RequestContext;
use crate::store::CommittedOffset;

pub const VERSIONS: VersionRange = VersionRange { min: 2, max: 9 };

/// Per partition, in request order: None when it passed its own checks (its
/// offset is among those to store), else its error.
type OwnChecks = Vec<Vec<Option<i16>>>;

/// The checks each partition passes on its own, and the offsets to store.
fn own_checks(
    coordinators: &Coordinators,
    request: &OffsetCommitRequest,
) -> (OwnChecks, Vec<(String, i32, CommittedOffset)>) {
    let image = coordinators.image();
    let now_ms = coordinators.now_ms();
    let mut to_store = Vec::new();
    let checks = request
        .topics
        .iter()
        .map(|topic| {
            topic
                .partitions
                .iter()
                .map(|p| {
                    if !partition_exists(&image, topic.name.as_str(), p.partition_index) {
                        return Some(error_code::UNKNOWN_TOPIC_OR_PARTITION);
                    }
                    let metadata = match committed_metadata(p.committed_metadata.as_ref()) {
                        Ok(metadata) => metadata,
                        Err(code) => return Some(code),
                    };
                    let committed = CommittedOffset {
                        offset: p.committed_offset,
                        leader_epoch: p.committed_leader_epoch,
                        metadata,
                        commit_timestamp_ms: now_ms,
                    };
                    to_store.push((topic.name.to_string(), p.partition_index, committed));
                    None
                })
                .collect()
        })
        .collect();
    (checks, to_store)
}

pub async fn handle(
    coordinators: &Coordinators,
    _ctx: &RequestContext,
    request: OffsetCommitRequest,
) -> OffsetCommitResponse {
    let group_id = request.group_id.to_string();
    let (checks, to_store) = own_checks(coordinators, &request);
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
