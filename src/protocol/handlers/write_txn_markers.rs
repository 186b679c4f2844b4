//! WriteTxnMarkers: a transaction coordinator on another broker asks this one
//! to end a transaction on the partitions it leads, as Kafka's
//! TransactionMarkerChannelManager asks each partition leader. Each marker is
//! appended as Kafka appends it (acks=all: answered once the high watermark has
//! passed it, so every in-sync replica has it) with the coordinator epoch it
//! carries, so a zombie coordinator's older epoch is refused with
//! TRANSACTION_COORDINATOR_FENCED and an older producer epoch with
//! INVALID_PRODUCER_EPOCH. A partition that no longer holds the producer's
//! transaction open gets the marker too, as in Kafka: it then knows the
//! coordinator's epoch, and a replaced coordinator's late marker is refused.
//!
//! A partition of the offsets topic gets its marker too, after which its group
//! coordinator completes the transaction: the producer's offsets pending in the
//! groups placed there become committed offsets or are dropped, as Kafka's
//! group coordinator completes them (the marker in the partition is what a
//! coordinator loading it later reads).

use kafka_protocol::messages::write_txn_markers_response::{
    WritableTxnMarkerPartitionResult, WritableTxnMarkerResult, WritableTxnMarkerTopicResult,
};
use kafka_protocol::messages::{WriteTxnMarkersRequest, WriteTxnMarkersResponse};
use kafka_protocol::protocol::VersionRange;

use super::common::partition_error_code;
use crate::error_code;
use crate::internal_topics::OFFSETS_TOPIC_NAME;
use crate::log::TxnMarker;
use crate::protocol::context::{Coordinators, Partitions};
use crate::protocol::RequestContext;
use crate::replica::PartitionError;
use crate::types::ProducerEpoch;

/// Kafka 4 answers v1 only (v0 was removed with KIP-896).
pub const VERSIONS: VersionRange = VersionRange { min: 1, max: 1 };

pub async fn handle(
    partitions: &Partitions,
    coordinators: &Coordinators,
    ctx: &RequestContext,
    request: WriteTxnMarkersRequest,
) -> WriteTxnMarkersResponse {
    // A cluster action: refused partition by partition, as Kafka's
    // sendErrorResponse answers an unauthorized WriteTxnMarkers.
    let refused = !ctx.may_cluster_action();
    let mut results = Vec::with_capacity(request.markers.len());
    for marker in request.markers {
        let txn_marker = TxnMarker {
            producer_id: marker.producer_id.0,
            producer_epoch: ProducerEpoch::new(marker.producer_epoch),
            coordinator_epoch: marker.coordinator_epoch,
            commit: marker.transaction_result,
        };
        let mut topics = Vec::with_capacity(marker.topics.len());
        for topic in marker.topics {
            let mut answers = Vec::with_capacity(topic.partition_indexes.len());
            for index in topic.partition_indexes {
                let code = if refused {
                    error_code::CLUSTER_AUTHORIZATION_FAILED
                } else {
                    match write(partitions, topic.name.as_str(), index, &txn_marker).await {
                        Err(error) => partition_error_code(&error),
                        Ok(()) if topic.name.as_str() == OFFSETS_TOPIC_NAME => {
                            complete_offsets(coordinators, index, &txn_marker).await
                        }
                        Ok(()) => error_code::NONE,
                    }
                };
                answers.push(
                    WritableTxnMarkerPartitionResult::default()
                        .with_partition_index(index)
                        .with_error_code(code),
                );
            }
            topics.push(
                WritableTxnMarkerTopicResult::default()
                    .with_name(topic.name)
                    .with_partitions(answers),
            );
        }
        results.push(
            WritableTxnMarkerResult::default()
                .with_producer_id(marker.producer_id)
                .with_topics(topics),
        );
    }
    WriteTxnMarkersResponse::default().with_markers(results)
}

/// An offsets partition's end of the transaction, on its leader, once its
/// marker is in the partition: the group coordinator commits or drops the
/// producer's pending offsets there.
async fn complete_offsets(coordinators: &Coordinators, index: i32, marker: &TxnMarker) -> i16 {
    match coordinators
        .groups()
        .complete_txn_offsets(marker.producer_id, vec![index], marker.commit)
        .await
    {
        Ok(()) => error_code::NONE,
        Err(error) => {
            tracing::warn!(partition = index, %error, "completing transactional offsets failed");
            error_code::NOT_COORDINATOR
        }
    }
}

/// One partition's marker: appended on the leader (with the min ISR check of
/// any acks=all append), then waited for until committed and fsynced
/// (`ReplicaManager::end_txn`).
async fn write(
    partitions: &Partitions,
    topic: &str,
    index: i32,
    marker: &TxnMarker,
) -> Result<(), PartitionError> {
    let image = partitions.image();
    let partition = partitions.partition_on_worker(&image, topic, index)?;
    partitions.end_txn(&partition, marker).await
}
