//! CreatePartitions: grow a topic's partition count, never shrink it. Each
//! topic needs Alter on it, else TOPIC_AUTHORIZATION_FAILED (whether or not
//! it exists), as Kafka's controller answers.

use kafka_protocol::messages::create_partitions_response::CreatePartitionsTopicResult;
use kafka_protocol::messages::{CreatePartitionsRequest, CreatePartitionsResponse};
use kafka_protocol::protocol::VersionRange;

use super::common::{message, propose, Rejection};
use crate::controller::MetadataCommand;
use crate::error_code;
use crate::limits::PARTITIONS_PER_TOPIC_MAX;
use crate::protocol::context::Cluster;
use crate::protocol::RequestContext;
use crate::security::acl::{Operation, ResourceType};

pub const VERSIONS: VersionRange = VersionRange { min: 0, max: 3 };

pub async fn handle(
    cluster: &Cluster,
    ctx: &RequestContext,
    request: CreatePartitionsRequest,
) -> CreatePartitionsResponse {
    let mut results = Vec::with_capacity(request.topics.len());
    for (index, topic) in request.topics.iter().enumerate() {
        let duplicate = request
            .topics
            .iter()
            .enumerate()
            .any(|(other, t)| other != index && t.name == topic.name);
        let outcome = if duplicate {
            Err((
                error_code::INVALID_REQUEST,
                "Duplicate topic in request.".to_string(),
            ))
        } else if !ctx.authorize(Operation::Alter, ResourceType::Topic, &topic.name.0) {
            Err((
                error_code::TOPIC_AUTHORIZATION_FAILED,
                super::common::authorization_failed(error_code::TOPIC_AUTHORIZATION_FAILED)
                    .to_string(),
            ))
        } else {
            grow(cluster, topic, request.validate_only).await
        };
        let result = CreatePartitionsTopicResult::default().with_name(topic.name.clone());
        results.push(match outcome {
            Ok(()) => result,
            Err((code, text)) => result
                .with_error_code(code)
                .with_error_message(message(text)),
        });
    }
    CreatePartitionsResponse::default().with_results(results)
}

async fn grow(
    cluster: &Cluster,
    topic: &kafka_protocol::messages::create_partitions_request::CreatePartitionsTopic,
    validate_only: bool,
) -> Result<(), Rejection> {
    let image = cluster.image();
    let name = topic.name.0.to_string();
    let current = image
        .topics
        .get(&name)
        .ok_or((
            error_code::UNKNOWN_TOPIC_OR_PARTITION,
            format!("The topic '{name}' does not exist."),
        ))?
        .partitions
        .len() as i32;
    if topic.count < current {
        return Err((
            error_code::INVALID_PARTITIONS,
            format!(
                "Topic currently has {current} partitions, which is higher than the requested {}.",
                topic.count
            ),
        ));
    }
    if topic.count == current {
        return Err((
            error_code::INVALID_PARTITIONS,
            format!("Topic already has {current} partitions."),
        ));
    }
    if topic.count > PARTITIONS_PER_TOPIC_MAX {
        return Err((
            error_code::INVALID_PARTITIONS,
            format!("Number of partitions must be at most {PARTITIONS_PER_TOPIC_MAX}."),
        ));
    }
    if let Some(assignments) = &topic.assignments {
        let added = (topic.count - current) as usize;
        let valid = assignments.len() == added
            && assignments.iter().all(|a| {
                !a.broker_ids.is_empty()
                    && a.broker_ids
                        .iter()
                        .all(|id| image.brokers.contains_key(&id.0))
            });
        if !valid {
            return Err((
                error_code::INVALID_REPLICA_ASSIGNMENT,
                format!(
                    "Increasing the number of partitions by {added} but {} assignments provided.",
                    assignments.len()
                ),
            ));
        }
    }
    if validate_only {
        return Ok(());
    }
    let command = MetadataCommand::CreatePartitions {
        name,
        total_count: topic.count,
    };
    propose(cluster, command).await.map(|_| ())
}
