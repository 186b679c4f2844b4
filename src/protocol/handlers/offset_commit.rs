//! OffsetCommit: admitted by the group coordinator (generation, member,
//! instance), then stored durably: the answer is sent only after the fsync.
//! Simple commits (generation -1, no member) work for groups not in use.

use std::sync::Arc;

use kafka_protocol::messages::offset_commit_response::{
    OffsetCommitResponsePartition, OffsetCommitResponseTopic,
};
use kafka_protocol::messages::{OffsetCommitRequest, OffsetCommitResponse};
use kafka_protocol::protocol::VersionRange;

use crate::limits::OFFSET_METADATA_BYTES_MAX;
use crate::protocol::context::BrokerState;
use crate::protocol::{errors, RequestContext};
use crate::store::{CommittedOffset, OffsetStore};

pub const VERSIONS: VersionRange = VersionRange { min: 2, max: 9 };

/// Kafka's OFFSET_METADATA_TOO_LARGE.
const OFFSET_METADATA_TOO_LARGE: i16 = 12;

pub async fn handle(
    state: &Arc<BrokerState>,
    _ctx: &RequestContext,
    request: OffsetCommitRequest,
) -> OffsetCommitResponse {
    let group_id = request.group_id.to_string();
    let admitted = if group_id.is_empty() {
        errors::INVALID_GROUP_ID
    } else {
        state
            .groups
            .validate_commit(
                group_id.clone(),
                request.member_id.to_string(),
                request.group_instance_id.as_ref().map(|id| id.to_string()),
                request.generation_id_or_member_epoch,
            )
            .await
            .unwrap_or(errors::COORDINATOR_NOT_AVAILABLE)
    };
    let image = state.controller.image();
    let now_ms = state.clock.now_ms();
    // Per partition: Ok(offset to store) or the error to answer with.
    let mut decided: Vec<Vec<Result<CommittedOffset, i16>>> =
        Vec::with_capacity(request.topics.len());
    let mut to_store = Vec::new();
    for topic in &request.topics {
        let known = image.topics.get(topic.name.as_str());
        let partitions = topic
            .partitions
            .iter()
            .map(|p| {
                if admitted != errors::NONE {
                    return Err(admitted);
                }
                if !known.is_some_and(|t| {
                    p.partition_index >= 0 && (p.partition_index as usize) < t.partitions.len()
                }) {
                    return Err(errors::UNKNOWN_TOPIC_OR_PARTITION);
                }
                let metadata = p
                    .committed_metadata
                    .as_ref()
                    .map(|m| m.to_string())
                    .unwrap_or_default();
                if metadata.len() > OFFSET_METADATA_BYTES_MAX {
                    return Err(OFFSET_METADATA_TOO_LARGE);
                }
                let committed = CommittedOffset {
                    offset: p.committed_offset,
                    leader_epoch: p.committed_leader_epoch,
                    metadata,
                    commit_timestamp_ms: now_ms,
                };
                to_store.push((topic.name.to_string(), p.partition_index, committed.clone()));
                Ok(committed)
            })
            .collect();
        decided.push(partitions);
    }
    let stored = if to_store.is_empty() {
        Ok(())
    } else {
        state.offsets.commit(&group_id, to_store).await
    };
    if let Err(error) = &stored {
        tracing::error!(group = %group_id, %error, "storing committed offsets failed");
    }
    let topics = request
        .topics
        .iter()
        .zip(decided)
        .map(|(topic, partitions)| {
            let partitions = topic
                .partitions
                .iter()
                .zip(partitions)
                .map(|(p, decision)| {
                    let error = match (decision, &stored) {
                        (Err(code), _) => code,
                        (Ok(_), Ok(())) => errors::NONE,
                        // Kafka maps a failed offsets-log write (KAFKA_STORAGE_ERROR)
                        // to the retriable NOT_COORDINATOR.
                        (Ok(_), Err(_)) => errors::NOT_COORDINATOR,
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
