//! OffsetForLeaderEpoch: the end offset of a leader epoch, from the partition's
//! leader-epoch cache, which consumers use to detect log truncation (KIP-320).
//! A consumer needs Describe on each topic (else TOPIC_AUTHORIZATION_FAILED for
//! its partitions); a request from a broker (a replica id) needs ClusterAction,
//! else every partition is CLUSTER_AUTHORIZATION_FAILED, as in Kafka.

use kafka_protocol::messages::offset_for_leader_epoch_response::{
    EpochEndOffset, OffsetForLeaderTopicResult,
};
use kafka_protocol::messages::{OffsetForLeaderEpochRequest, OffsetForLeaderEpochResponse};
use kafka_protocol::protocol::VersionRange;

use std::collections::HashSet;

use super::common::{on_leader_partition, per_partition};
use crate::error_code;
use crate::protocol::context::Partitions;
use crate::protocol::RequestContext;
use crate::security::acl::{Operation, ResourceType};

/// The versions below the current codec's oldest are read by `old_versions` and
/// reach this handler at that oldest (bridge) version.
pub const VERSIONS: VersionRange = VersionRange { min: 0, max: 4 };

pub async fn handle(
    partitions: &Partitions,
    ctx: &RequestContext,
    request: OffsetForLeaderEpochRequest,
) -> OffsetForLeaderEpochResponse {
    let image = partitions.image();
    let from_broker = request.replica_id.0 >= 0;
    let refused_all = (from_broker && !ctx.may_cluster_action())
        .then_some(error_code::CLUSTER_AUTHORIZATION_FAILED);
    let denied: HashSet<&str> = if from_broker {
        HashSet::new()
    } else {
        request
            .topics
            .iter()
            .map(|topic| topic.topic.0.as_str())
            .filter(|name| !ctx.authorize(Operation::Describe, ResourceType::Topic, name))
            .collect()
    };
    let topics = per_partition(
        &request.topics,
        |topic| &topic.partitions,
        |topic, p| {
            let result = EpochEndOffset::default().with_partition(p.partition);
            let refused = refused_all.or_else(|| {
                denied
                    .contains(topic.topic.0.as_str())
                    .then_some(error_code::TOPIC_AUTHORIZATION_FAILED)
            });
            let found = match refused {
                Some(code) => Err(code),
                None => on_leader_partition(
                    partitions,
                    &image,
                    &topic.topic.0,
                    p.partition,
                    p.current_leader_epoch,
                    |partition| {
                        partition.with_log(|log| Ok(log.end_offset_for_epoch(p.leader_epoch)))
                    },
                ),
            };
            match found {
                Ok((epoch, end_offset)) => {
                    result.with_leader_epoch(epoch).with_end_offset(end_offset)
                }
                Err(code) => result
                    .with_error_code(code)
                    .with_leader_epoch(-1)
                    .with_end_offset(-1),
            }
        },
        |topic, results| {
            OffsetForLeaderTopicResult::default()
                .with_topic(topic.topic.clone())
                .with_partitions(results)
        },
    );
    OffsetForLeaderEpochResponse::default().with_topics(topics)
}
