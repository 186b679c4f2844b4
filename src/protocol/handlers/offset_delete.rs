//! OffsetDelete: removes committed offsets of partitions a group no longer
//! consumes. A topic some member of an active consumer group subscribes to
//! answers GROUP_SUBSCRIBED_TO_TOPIC, as in Kafka.

use std::collections::HashSet;
use std::sync::Arc;

use bytes::Bytes;
use kafka_protocol::messages::offset_delete_response::{
    OffsetDeleteResponsePartition, OffsetDeleteResponseTopic,
};
use kafka_protocol::messages::{
    ConsumerProtocolSubscription, OffsetDeleteRequest, OffsetDeleteResponse,
};
use kafka_protocol::protocol::{Decodable, VersionRange};

use super::offsets_common::with_store;
use crate::protocol::context::BrokerState;
use crate::protocol::{errors, RequestContext};

pub const VERSIONS: VersionRange = VersionRange { min: 0, max: 0 };

/// Kafka's GROUP_SUBSCRIBED_TO_TOPIC.
const GROUP_SUBSCRIBED_TO_TOPIC: i16 = 86;
/// The protocol type of Kafka consumer groups, whose member metadata is a
/// ConsumerProtocolSubscription.
const CONSUMER_PROTOCOL_TYPE: &str = "consumer";

/// Topics the group's members subscribe to (consumer groups only).
fn subscribed_topics(protocol_type: &str, metadata: &[Bytes]) -> HashSet<String> {
    let mut topics = HashSet::new();
    if protocol_type != CONSUMER_PROTOCOL_TYPE {
        return topics;
    }
    for member in metadata {
        if member.len() < 2 {
            continue;
        }
        let version = i16::from_be_bytes([member[0], member[1]]);
        let mut body = member.slice(2..);
        if let Ok(subscription) =
            ConsumerProtocolSubscription::decode(&mut body, version.clamp(0, 3))
        {
            topics.extend(subscription.topics.iter().map(|t| t.to_string()));
        }
    }
    topics
}

pub async fn handle(
    state: &Arc<BrokerState>,
    _ctx: &RequestContext,
    request: OffsetDeleteRequest,
) -> OffsetDeleteResponse {
    let group_id = request.group_id.to_string();
    let Ok(described) = state.groups.describe(group_id.clone()).await else {
        return OffsetDeleteResponse::default().with_error_code(errors::COORDINATOR_NOT_AVAILABLE);
    };
    let group = group_id.clone();
    let has_offsets = with_store(state, move |store| store.fetch_group(&group))
        .await
        .is_ok_and(|offsets| !offsets.is_empty());
    if described.state == "Dead" && !has_offsets {
        return OffsetDeleteResponse::default().with_error_code(errors::GROUP_ID_NOT_FOUND);
    }
    let metadata: Vec<Bytes> = described
        .members
        .iter()
        .map(|m| m.metadata.clone())
        .collect();
    let subscribed = subscribed_topics(&described.protocol_type, &metadata);
    let mut deletable = Vec::new();
    let topics = request
        .topics
        .iter()
        .map(|topic| {
            let blocked = subscribed.contains(topic.name.as_str());
            let partitions = topic
                .partitions
                .iter()
                .map(|p| {
                    let error = if blocked {
                        GROUP_SUBSCRIBED_TO_TOPIC
                    } else {
                        errors::NONE
                    };
                    if !blocked {
                        deletable.push((topic.name.to_string(), p.partition_index));
                    }
                    OffsetDeleteResponsePartition::default()
                        .with_partition_index(p.partition_index)
                        .with_error_code(error)
                })
                .collect();
            OffsetDeleteResponseTopic::default()
                .with_name(topic.name.clone())
                .with_partitions(partitions)
        })
        .collect();
    if !deletable.is_empty() {
        if let Err(error) = with_store(state, move |store| {
            store.delete_offsets(&group_id, &deletable)
        })
        .await
        {
            tracing::error!(%error, "deleting committed offsets failed");
            // Kafka answers a storage failure with the retriable NOT_COORDINATOR.
            return OffsetDeleteResponse::default().with_error_code(errors::NOT_COORDINATOR);
        }
    }
    OffsetDeleteResponse::default().with_topics(topics)
}
