//! DeleteRecords: advance a partition's log start offset (whole segments below
//! it are deleted); -1 means up to the high watermark. The deletions are disk work
//! under the partition lock, so the request runs off the runtime worker.
//! Each topic needs Delete on it, else its partitions answer
//! TOPIC_AUTHORIZATION_FAILED (before UNKNOWN_TOPIC_OR_PARTITION, as Kafka
//! checks) and nothing of it is deleted.

use kafka_protocol::messages::delete_records_response::{
    DeleteRecordsPartitionResult, DeleteRecordsTopicResult,
};
use kafka_protocol::messages::{DeleteRecordsRequest, DeleteRecordsResponse};
use kafka_protocol::protocol::VersionRange;

use std::collections::BTreeSet;

use super::common::{partition_error_code, per_partition};
use crate::error_code;
use crate::protocol::context::Partitions;
use crate::protocol::RequestContext;
use crate::security::acl::{Operation, ResourceType};

pub const VERSIONS: VersionRange = VersionRange { min: 0, max: 2 };

pub async fn handle(
    partitions: &Partitions,
    ctx: &RequestContext,
    request: DeleteRecordsRequest,
) -> DeleteRecordsResponse {
    let denied: BTreeSet<&str> = request
        .topics
        .iter()
        .map(|topic| topic.name.0.as_str())
        .filter(|name| !ctx.authorize(Operation::Delete, ResourceType::Topic, name))
        .collect();
    crate::replica::off_the_worker(|| delete(partitions, &request, &denied))
}

/// Every partition's deletion, in request order; the `denied` topics'
/// partitions are refused. Blocking.
fn delete(
    partitions: &Partitions,
    request: &DeleteRecordsRequest,
    denied: &BTreeSet<&str>,
) -> DeleteRecordsResponse {
    let image = partitions.image();
    let topics = per_partition(
        &request.topics,
        |topic| &topic.partitions,
        |topic, p| {
            let result =
                DeleteRecordsPartitionResult::default().with_partition_index(p.partition_index);
            if denied.contains(topic.name.0.as_str()) {
                return result
                    .with_error_code(error_code::TOPIC_AUTHORIZATION_FAILED)
                    .with_low_watermark(-1);
            }
            let deleted = partitions
                .partition(&image, &topic.name.0, p.partition_index)
                .and_then(|partition| partition.delete_records_before(p.offset));
            match deleted {
                Ok(low_watermark) => result.with_low_watermark(low_watermark),
                Err(error) => result
                    .with_error_code(partition_error_code(&error))
                    .with_low_watermark(-1),
            }
        },
        |topic, results| {
            DeleteRecordsTopicResult::default()
                .with_name(topic.name.clone())
                .with_partitions(results)
        },
    );
    DeleteRecordsResponse::default().with_topics(topics)
}
