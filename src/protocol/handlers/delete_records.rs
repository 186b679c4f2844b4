//! DeleteRecords: advance a partition's log start offset (whole segments below
//! it are deleted); -1 means up to the high watermark. The deletions are disk work
//! under the partition lock, so the request runs off the runtime worker.

use kafka_protocol::messages::delete_records_response::{
    DeleteRecordsPartitionResult, DeleteRecordsTopicResult,
};
use kafka_protocol::messages::{DeleteRecordsRequest, DeleteRecordsResponse};
use kafka_protocol::protocol::VersionRange;

use super::common::{partition_error_code, per_partition};
use crate::protocol::context::Partitions;
use crate::protocol::RequestContext;

pub const VERSIONS: VersionRange = VersionRange { min: 0, max: 2 };

pub async fn handle(
    partitions: &Partitions,
    _ctx: &RequestContext,
    request: DeleteRecordsRequest,
) -> DeleteRecordsResponse {
    crate::replica::off_the_worker(|| delete(partitions, &request))
}

/// Every partition's deletion, in request order. Blocking.
fn delete(partitions: &Partitions, request: &DeleteRecordsRequest) -> DeleteRecordsResponse {
    let image = partitions.image();
    let topics = per_partition(
        &request.topics,
        |topic| &topic.partitions,
        |topic, p| {
            let result =
                DeleteRecordsPartitionResult::default().with_partition_index(p.partition_index);
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
