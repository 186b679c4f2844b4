//! OffsetFetch: committed offsets of one group (v1-v7) or of several (v8+),
//! for the partitions asked for or, when none are named, every partition the
//! group has committed. A partition without a commit answers offset -1.

use std::sync::Arc;

use kafka_protocol::messages::offset_fetch_response::{
    OffsetFetchResponseGroup, OffsetFetchResponsePartition, OffsetFetchResponsePartitions,
    OffsetFetchResponseTopic, OffsetFetchResponseTopics,
};
use kafka_protocol::messages::{OffsetFetchRequest, OffsetFetchResponse, TopicName};
use kafka_protocol::protocol::{StrBytes, VersionRange};

use super::offsets_common::with_store;
use crate::protocol::{errors, RequestContext};
use crate::server::BrokerState;
use crate::store::CommittedOffset;

pub const VERSIONS: VersionRange = VersionRange { min: 1, max: 9 };

/// From v8 one request asks for several groups (KIP-709).
const MULTI_GROUP_VERSION_MIN: i16 = 8;

/// Offsets of one group, per topic, per partition (None: never committed).
type Fetched = Vec<(String, Vec<(i32, Option<CommittedOffset>)>)>;

async fn fetch(
    state: &Arc<BrokerState>,
    group_id: String,
    wanted: Option<Vec<(String, Vec<i32>)>>,
) -> Result<Fetched, i16> {
    if group_id.is_empty() {
        return Err(errors::INVALID_GROUP_ID);
    }
    let stored = with_store(state, move |store| store.fetch_group(&group_id))
        .await
        .map_err(|_| errors::UNKNOWN_SERVER_ERROR)?;
    let Some(wanted) = wanted else {
        let mut by_topic: Fetched = Vec::new();
        for (topic, partition, committed) in stored {
            match by_topic.last_mut() {
                Some((last, partitions)) if *last == topic => {
                    partitions.push((partition, Some(committed)))
                }
                _ => by_topic.push((topic, vec![(partition, Some(committed))])),
            }
        }
        return Ok(by_topic);
    };
    Ok(wanted
        .into_iter()
        .map(|(topic, partitions)| {
            let found = partitions
                .into_iter()
                .map(|partition| {
                    let committed = stored
                        .iter()
                        .find(|(t, p, _)| *t == topic && *p == partition)
                        .map(|(_, _, c)| c.clone());
                    (partition, committed)
                })
                .collect();
            (topic, found)
        })
        .collect())
}

/// (offset, leader epoch, metadata) as Kafka answers them, -1/-1/"" when none.
fn parts(committed: Option<CommittedOffset>) -> (i64, i32, StrBytes) {
    match committed {
        Some(c) => (c.offset, c.leader_epoch, StrBytes::from_string(c.metadata)),
        None => (-1, -1, StrBytes::default()),
    }
}

pub async fn handle(
    state: &Arc<BrokerState>,
    ctx: &RequestContext,
    request: OffsetFetchRequest,
) -> OffsetFetchResponse {
    if ctx.api_version >= MULTI_GROUP_VERSION_MIN {
        let mut groups = Vec::with_capacity(request.groups.len());
        for group in &request.groups {
            let wanted = group.topics.as_ref().map(|topics| {
                topics
                    .iter()
                    .map(|t| (t.name.to_string(), t.partition_indexes.clone()))
                    .collect()
            });
            let answer = OffsetFetchResponseGroup::default().with_group_id(group.group_id.clone());
            groups.push(
                match fetch(state, group.group_id.to_string(), wanted).await {
                    Ok(fetched) => answer.with_topics(
                        fetched
                            .into_iter()
                            .map(|(topic, partitions)| {
                                OffsetFetchResponseTopics::default()
                                    .with_name(TopicName(StrBytes::from_string(topic)))
                                    .with_partitions(
                                        partitions
                                            .into_iter()
                                            .map(|(partition, committed)| {
                                                let (offset, epoch, metadata) = parts(committed);
                                                OffsetFetchResponsePartitions::default()
                                                    .with_partition_index(partition)
                                                    .with_committed_offset(offset)
                                                    .with_committed_leader_epoch(epoch)
                                                    .with_metadata(Some(metadata))
                                            })
                                            .collect(),
                                    )
                            })
                            .collect(),
                    ),
                    Err(code) => answer.with_error_code(code),
                },
            );
        }
        return OffsetFetchResponse::default().with_groups(groups);
    }
    let wanted = request.topics.as_ref().map(|topics| {
        topics
            .iter()
            .map(|t| (t.name.to_string(), t.partition_indexes.clone()))
            .collect()
    });
    match fetch(state, request.group_id.to_string(), wanted).await {
        Ok(fetched) => OffsetFetchResponse::default().with_topics(
            fetched
                .into_iter()
                .map(|(topic, partitions)| {
                    OffsetFetchResponseTopic::default()
                        .with_name(TopicName(StrBytes::from_string(topic)))
                        .with_partitions(
                            partitions
                                .into_iter()
                                .map(|(partition, committed)| {
                                    let (offset, epoch, metadata) = parts(committed);
                                    OffsetFetchResponsePartition::default()
                                        .with_partition_index(partition)
                                        .with_committed_offset(offset)
                                        .with_committed_leader_epoch(epoch)
                                        .with_metadata(Some(metadata))
                                })
                                .collect(),
                        )
                })
                .collect(),
        ),
        Err(code) => OffsetFetchResponse::default().with_error_code(code),
    }
}
