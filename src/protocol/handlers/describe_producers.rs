//! DescribeProducers (KIP-664): the active idempotent and transactional producers
//! of each requested partition, from the partition log's producer state, as
//! Kafka's `KafkaApis.handleDescribeProducersRequest` answers: an invalid topic
//! name is INVALID_TOPIC_EXCEPTION and an unknown topic UNKNOWN_TOPIC_OR_PARTITION
//! for each of its partitions (with Kafka's message), an unknown partition of a
//! known topic UNKNOWN_TOPIC_OR_PARTITION without one. A topic the principal
//! may not Read answers TOPIC_AUTHORIZATION_FAILED for each of its partitions,
//! before any other check (Kafka's order).

use kafka_protocol::messages::describe_producers_response::{
    PartitionResponse, ProducerState, TopicResponse,
};
use kafka_protocol::messages::{DescribeProducersRequest, DescribeProducersResponse, ProducerId};
use kafka_protocol::protocol::VersionRange;

use super::common::{message, on_leader_partition, validate_topic_name};
use crate::error_code;
use crate::log::ProducerSummary;
use crate::protocol::context::Partitions;
use crate::protocol::RequestContext;
use crate::security::acl::{Operation, ResourceType};
use crate::types::Offset;

pub const VERSIONS: VersionRange = VersionRange { min: 0, max: 0 };

pub async fn handle(
    partitions: &Partitions,
    ctx: &RequestContext,
    request: DescribeProducersRequest,
) -> DescribeProducersResponse {
    let image = partitions.image();
    let topics = request
        .topics
        .iter()
        .map(|topic| {
            let name = topic.name.0.as_str();
            let topic_error = if !ctx.authorize(Operation::Read, ResourceType::Topic, name) {
                Some((error_code::TOPIC_AUTHORIZATION_FAILED, None))
            } else {
                match validate_topic_name(name) {
                    Err(why) => Some((error_code::INVALID_TOPIC_EXCEPTION, Some(why))),
                    Ok(()) if !image.topics.contains_key(name) => Some((
                        error_code::UNKNOWN_TOPIC_OR_PARTITION,
                        Some("This server does not host this topic-partition.".to_string()),
                    )),
                    Ok(()) => None,
                }
            };
            let results = topic
                .partition_indexes
                .iter()
                .map(|&index| {
                    let response = PartitionResponse::default().with_partition_index(index);
                    if let Some((code, why)) = &topic_error {
                        return response
                            .with_error_code(*code)
                            .with_error_message(why.clone().and_then(message));
                    }
                    // No leader epoch to check (-1): DescribeProducers names none.
                    let producers =
                        on_leader_partition(partitions, &image, name, index, -1, |partition| {
                            partition.producers()
                        });
                    match producers {
                        Ok(producers) => response
                            .with_active_producers(producers.iter().map(producer_state).collect()),
                        Err(code) => response.with_error_code(code),
                    }
                })
                .collect();
            TopicResponse::default()
                .with_name(topic.name.clone())
                .with_partitions(results)
        })
        .collect();
    DescribeProducersResponse::default().with_topics(topics)
}

fn producer_state(summary: &ProducerSummary) -> ProducerState {
    ProducerState::default()
        .with_producer_id(ProducerId(summary.producer_id))
        .with_producer_epoch(i32::from(summary.producer_epoch.get()))
        .with_last_sequence(summary.last_sequence)
        .with_last_timestamp(summary.last_timestamp)
        .with_coordinator_epoch(summary.coordinator_epoch)
        .with_current_txn_start_offset(summary.current_txn_start_offset.map_or(-1, Offset::get))
}
