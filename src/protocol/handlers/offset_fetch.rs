//! OffsetFetch: committed offsets of one group (v1-v7) or of several (v8+),
//! for the partitions asked for or, when none are named, every partition the
//! group has committed, as the group coordinator reads them (after any write
//! of the group still in flight). A partition without a commit answers offset -1. With
//! `require_stable` (v7+), a partition with offsets pending in an open
//! transaction answers UNSTABLE_OFFSET_COMMIT instead, as Kafka does.

use kafka_protocol::messages::offset_fetch_response::{
    OffsetFetchResponseGroup, OffsetFetchResponsePartition, OffsetFetchResponsePartitions,
    OffsetFetchResponseTopic, OffsetFetchResponseTopics,
};
use kafka_protocol::messages::{OffsetFetchRequest, OffsetFetchResponse, TopicName};
use kafka_protocol::protocol::{StrBytes, VersionRange};

use super::common::group_refusal;
use crate::coordinator::group::FetchedOffsets;
use crate::error_code;
use crate::protocol::context::Coordinators;
use crate::protocol::RequestContext;
use crate::security::acl::{Operation, ResourceType};
use crate::store::CommittedOffset;

/// The versions below the current codec's oldest are read by `old_versions` and
/// reach this handler at that oldest (bridge) version.
pub const VERSIONS: VersionRange = VersionRange { min: 0, max: 9 };

/// From v2 the response has a group-level error.
const GROUP_ERROR_VERSION_MIN: i16 = 2;

/// From v8 one request asks for several groups (KIP-709).
const MULTI_GROUP_VERSION_MIN: i16 = 8;

/// Offsets of one group, per topic, per partition (Ok(None): never committed;
/// Err: the partition's error).
type Fetched = Vec<(String, Vec<(i32, Result<Option<CommittedOffset>, i16>)>)>;

async fn fetch(
    coordinators: &Coordinators,
    ctx: &RequestContext,
    group_id: String,
    wanted: Option<Vec<(String, Vec<i32>)>>,
    require_stable: bool,
) -> Result<Fetched, i16> {
    // Kafka's Describe on the group before anything else.
    if let Some(error) = group_refusal(ctx, Operation::Describe, &group_id) {
        return Err(error);
    }
    // The coordinator reads after every earlier write of the group.
    let FetchedOffsets {
        committed: stored,
        pending,
    } = coordinators
        .groups()
        .fetch_offsets(group_id, require_stable)
        .await
        .unwrap_or(Err(error_code::COORDINATOR_NOT_AVAILABLE))?;
    let answer = |topic: &str, partition: i32, committed: Option<CommittedOffset>| {
        if pending.iter().any(|(t, p)| t == topic && *p == partition) {
            Err(error_code::UNSTABLE_OFFSET_COMMIT)
        } else {
            Ok(committed)
        }
    };
    let Some(wanted) = wanted else {
        let mut by_topic: Fetched = Vec::new();
        for (topic, partition, committed) in stored {
            let found = answer(&topic, partition, Some(committed));
            match by_topic.last_mut() {
                Some((last, partitions)) if *last == topic => partitions.push((partition, found)),
                _ => by_topic.push((topic, vec![(partition, found)])),
            }
        }
        // Every topic asked for: those the principal may not Describe are
        // left out, as Kafka does.
        by_topic.retain(|(topic, _)| {
            ctx.authorize_quietly(Operation::Describe, ResourceType::Topic, topic)
        });
        return Ok(by_topic);
    };
    Ok(wanted
        .into_iter()
        .map(|(topic, partitions)| {
            // A topic named that the principal may not Describe: each of its
            // partitions TOPIC_AUTHORIZATION_FAILED, as Kafka answers.
            if !ctx.authorize(Operation::Describe, ResourceType::Topic, &topic) {
                let refused = partitions
                    .into_iter()
                    .map(|partition| (partition, Err(error_code::TOPIC_AUTHORIZATION_FAILED)))
                    .collect();
                return (topic, refused);
            }
            let found = partitions
                .into_iter()
                .map(|partition| {
                    let committed = stored
                        .iter()
                        .find(|(t, p, _)| *t == topic && *p == partition)
                        .map(|(_, _, c)| c.clone());
                    (partition, answer(&topic, partition, committed))
                })
                .collect();
            (topic, found)
        })
        .collect())
}

/// (offset, leader epoch, metadata, error) as Kafka answers them, -1/-1/""
/// when none or on error.
fn parts(committed: Result<Option<CommittedOffset>, i16>) -> (i64, i32, StrBytes, i16) {
    match committed {
        Ok(Some(c)) => (
            c.offset,
            c.leader_epoch,
            StrBytes::from_string(c.metadata),
            error_code::NONE,
        ),
        Ok(None) => (-1, -1, StrBytes::default(), error_code::NONE),
        Err(error) => (-1, -1, StrBytes::default(), error),
    }
}

/// What the client asks of one group: the named partitions of each topic, or
/// every committed partition when no topic is named. v8+ and older requests
/// name them alike in two types.
macro_rules! wanted {
    ($topics:expr) => {
        $topics.as_ref().map(|topics| {
            topics
                .iter()
                .map(|t| (t.name.to_string(), t.partition_indexes.clone()))
                .collect()
        })
    };
}

/// One group's fetched offsets as the response's topics: v8+ and older
/// responses carry the same fields in two types.
macro_rules! response_topics {
    ($fetched:expr, $topic:ident, $partition:ident) => {
        $fetched
            .into_iter()
            .map(|(topic, partitions)| {
                let partitions = partitions
                    .into_iter()
                    .map(|(partition, committed)| {
                        let (offset, epoch, metadata, error) = parts(committed);
                        $partition::default()
                            .with_partition_index(partition)
                            .with_committed_offset(offset)
                            .with_committed_leader_epoch(epoch)
                            .with_metadata(Some(metadata))
                            .with_error_code(error)
                    })
                    .collect();
                $topic::default()
                    .with_name(TopicName(StrBytes::from_string(topic)))
                    .with_partitions(partitions)
            })
            .collect()
    };
}

pub async fn handle(
    coordinators: &Coordinators,
    ctx: &RequestContext,
    request: OffsetFetchRequest,
) -> OffsetFetchResponse {
    if ctx.api_version >= MULTI_GROUP_VERSION_MIN {
        let mut groups = Vec::with_capacity(request.groups.len());
        for group in &request.groups {
            let wanted = wanted!(group.topics);
            let answer = OffsetFetchResponseGroup::default().with_group_id(group.group_id.clone());
            groups.push(
                match fetch(
                    coordinators,
                    ctx,
                    group.group_id.to_string(),
                    wanted,
                    request.require_stable,
                )
                .await
                {
                    Ok(fetched) => answer.with_topics(response_topics!(
                        fetched,
                        OffsetFetchResponseTopics,
                        OffsetFetchResponsePartitions
                    )),
                    Err(code) => answer.with_error_code(code),
                },
            );
        }
        return OffsetFetchResponse::default().with_groups(groups);
    }
    let wanted: Option<Vec<(String, Vec<i32>)>> = wanted!(request.topics);
    match fetch(
        coordinators,
        ctx,
        request.group_id.to_string(),
        wanted.clone(),
        request.require_stable,
    )
    .await
    {
        Ok(fetched) => OffsetFetchResponse::default().with_topics(response_topics!(
            fetched,
            OffsetFetchResponseTopic,
            OffsetFetchResponsePartition
        )),
        // v0 and v1 have no group-level error: Kafka gives it to every
        // partition asked for.
        Err(code) if ctx.api_version < GROUP_ERROR_VERSION_MIN => {
            let failed: Fetched = wanted
                .unwrap_or_default()
                .into_iter()
                .map(|(topic, partitions)| {
                    (
                        topic,
                        partitions.into_iter().map(|p| (p, Err(code))).collect(),
                    )
                })
                .collect();
            OffsetFetchResponse::default().with_topics(response_topics!(
                failed,
                OffsetFetchResponseTopic,
                OffsetFetchResponsePartition
            ))
        }
        Err(code) => OffsetFetchResponse::default().with_error_code(code),
    }
}
