//! DeleteRecords: advance a partition's log start offset (whole segments below
//! it are deleted); -1 means up to the high watermark. The deletions are disk work
//! under the partition lock, so the request runs on the blocking pool.

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
    let state = Arc::clone(state);
    let topics = request.topics.clone();
    match tokio::task::spawn_blocking(move || delete(&state, &request)).await {
        Ok(response) => response,
        // Only a runtime shutting down cancels it: every partition answers the retriable
        // REQUEST_TIMED_OUT, and nothing was acknowledged.
        Err(_) => timed_out(&topics),
    }
}

fn timed_out(
    topics: &[kafka_protocol::messages::delete_records_request::DeleteRecordsTopic],
) -> DeleteRecordsResponse {
    let topics = topics
        .iter()
        .map(|topic| {
            DeleteRecordsTopicResult::default()
                .with_name(topic.name.clone())
                .with_partitions(
                    topic
                        .partitions
                        .iter()
                        .map(|p| {
                            DeleteRecordsPartitionResult::default()
                                .with_partition_index(p.partition_index)
                                .with_error_code(crate::protocol::errors::REQUEST_TIMED_OUT)
                                .with_low_watermark(-1)
                        })
                        .collect(),
                )
        })
        .collect();
    DeleteRecordsResponse::default().with_topics(topics)
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
