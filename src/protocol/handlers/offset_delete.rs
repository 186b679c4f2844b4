//! OffsetDelete: removes committed offsets of partitions a group no longer
//! consumes. A topic some member of an active consumer group subscribes to
//! answers GROUP_SUBSCRIBED_TO_TOPIC, as in Kafka. The group coordinator checks
//! the subscriptions (read here, with the protocol crate) and deletes in one
//! step.

use std::collections::HashSet;

use bytes::Bytes;
use kafka_protocol::messages::offset_delete_response::{
    OffsetDeleteResponsePartition, OffsetDeleteResponseTopic,
};
use kafka_protocol::messages::{
    ConsumerProtocolSubscription, OffsetDeleteRequest, OffsetDeleteResponse,
};
use kafka_protocol::protocol::{Decodable, VersionRange};

use crate::error_code;
use crate::protocol::context::Coordinators;
use crate::protocol::RequestContext;
use crate::security::acl::{Operation, ResourceType};

pub const VERSIONS: VersionRange = VersionRange { min: 0, max: 0 };

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
    coordinators: &Coordinators,
    ctx: &RequestContext,
    request: OffsetDeleteRequest,
) -> OffsetDeleteResponse {
    // Kafka's Delete on the group first: refused, nothing is deleted.
    if !ctx.authorize(Operation::Delete, ResourceType::Group, &request.group_id) {
        return OffsetDeleteResponse::default()
            .with_error_code(error_code::GROUP_AUTHORIZATION_FAILED);
    }
    // Then Read on each topic: a refused topic's offsets stay, its
    // partitions answered TOPIC_AUTHORIZATION_FAILED.
    let readable: Vec<bool> = request
        .topics
        .iter()
        .map(|topic| ctx.authorize(Operation::Read, ResourceType::Topic, &topic.name))
        .collect();
    let topics = request
        .topics
        .iter()
        .zip(&readable)
        .filter(|(_, readable)| **readable)
        .map(|(topic, _)| {
            let partitions = topic.partitions.iter().map(|p| p.partition_index);
            (topic.name.to_string(), partitions.collect())
        })
        .collect();
    let deleted = coordinators
        .groups()
        .delete_offsets(request.group_id.to_string(), topics, subscribed_topics)
        .await
        .unwrap_or(Err(error_code::COORDINATOR_NOT_AVAILABLE));
    let subscribed = match deleted {
        Ok(subscribed) => subscribed,
        Err(code) => return OffsetDeleteResponse::default().with_error_code(code),
    };
    let topics = request
        .topics
        .iter()
        .zip(&readable)
        .map(|(topic, readable)| {
            let error = if !readable {
                error_code::TOPIC_AUTHORIZATION_FAILED
            } else if subscribed.contains(topic.name.as_str()) {
                error_code::GROUP_SUBSCRIBED_TO_TOPIC
            } else {
                error_code::NONE
            };
            let partitions = topic
                .partitions
                .iter()
                .map(|p| {
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
    OffsetDeleteResponse::default().with_topics(topics)
}
