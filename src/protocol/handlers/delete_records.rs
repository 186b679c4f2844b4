//! DeleteRecords: advance a partition's log start offset (whole segments below
//! it are deleted); -1 means up to the high watermark. The deletions are disk work
//! under the partition lock, so the request runs off the runtime worker.

use std::sync::Arc;

use kafka_protocol::messages::delete_records_response::{
    DeleteRecordsPartitionResult, DeleteRecordsTopicResult,
};
use kafka_protocol::messages::{DeleteRecordsRequest, DeleteRecordsResponse};
use kafka_protocol::protocol::VersionRange;

use super::common::partition_error_code;
use crate::protocol::context::BrokerState;
use crate::protocol::RequestContext;

pub const VERSIONS: VersionRange = VersionRange { min: 0, max: 2 };

pub async fn handle(
    state: &Arc<BrokerState>,
    _ctx: &RequestContext,
    request: DeleteRecordsRequest,
) -> DeleteRecordsResponse {
    crate::replica::off_the_worker(|| delete(state, &request))
}

/// Every partition's deletion, in request order. Blocking.
fn delete(state: &BrokerState, request: &DeleteRecordsRequest) -> DeleteRecordsResponse {
    let image = state.controller.image();
    let topics = request
        .topics
        .iter()
        .map(|topic| {
            let partitions = topic
                .partitions
                .iter()
                .map(|p| {
                    let result = DeleteRecordsPartitionResult::default()
                        .with_partition_index(p.partition_index);
                    let deleted = state
                        .replicas
                        .partition(&image, &topic.name.0, p.partition_index)
                        .and_then(|partition| partition.delete_records_before(p.offset));
                    match deleted {
                        Ok(low_watermark) => result.with_low_watermark(low_watermark),
                        Err(error) => result
                            .with_error_code(partition_error_code(&error))
                            .with_low_watermark(-1),
                    }
                })
                .collect();
            DeleteRecordsTopicResult::default()
                .with_name(topic.name.clone())
                .with_partitions(partitions)
        })
        .collect();
    DeleteRecordsResponse::default().with_topics(topics)
}
