//! TxnOffsetCommit: offsets committed inside a transaction. The transaction
//! coordinator admits them (the group's offsets partition is in the producer's
//! Ongoing transaction, KIP-890's verification), then the group coordinator
//! checks member and generation as Kafka's `handleTxnCommitOffsets` does and
//! stores the offsets as pending, durably, in one step before the answer. They become
//! committed offsets when the transaction commits, and are dropped if it
//! aborts.

use kafka_protocol::messages::txn_offset_commit_response::{
    TxnOffsetCommitResponsePartition, TxnOffsetCommitResponseTopic,
};
use kafka_protocol::messages::{TxnOffsetCommitRequest, TxnOffsetCommitResponse};
use kafka_protocol::protocol::VersionRange;

use super::common::{check_offsets, offsets_to_commit};
use crate::error_code;
use crate::group::TxnOffsetCommit;
use crate::protocol::context::Coordinators;
use crate::protocol::RequestContext;
use crate::store::CommittedOffset;
use crate::txn::offsets_partition;

/// Not v5: it belongs to transaction version 2 (KIP-890 part 2, the offsets
/// partition added implicitly), which this broker does not offer.
pub const VERSIONS: VersionRange = VersionRange { min: 0, max: 4 };

/// The error for every partition that passed its own checks: the
/// transaction's verdict, then the group's and the store's (one step in the
/// group coordinator).
async fn admit_and_store(
    coordinators: &Coordinators,
    request: &TxnOffsetCommitRequest,
    group_id: &str,
    to_store: Vec<(String, i32, CommittedOffset)>,
) -> i16 {
    if group_id.is_empty() {
        return error_code::INVALID_GROUP_ID;
    }
    let hold = match admit(coordinators, request, group_id).await {
        Ok(hold) => hold,
        Err(error) => return error,
    };
    let commit = TxnOffsetCommit {
        group_id: group_id.to_string(),
        member_id: request.member_id.to_string(),
        group_instance_id: request.group_instance_id.as_ref().map(|id| id.to_string()),
        generation_id: request.generation_id,
        producer_id: request.producer_id.0,
        producer_epoch: request.producer_epoch,
        offsets: to_store,
        // The coordinator keeps the guard until the offsets are stored, so the
        // transaction cannot end before they land, even if this request's
        // connection goes away meanwhile.
        hold,
    };
    coordinators
        .groups()
        .txn_commit_offsets(commit)
        .await
        .unwrap_or(error_code::COORDINATOR_NOT_AVAILABLE)
}

/// The transaction coordinator's admission: here, a guard that keeps the
/// transaction from ending until the offsets are stored; on another broker,
/// KIP-890's verification that the group's offsets partition is in the
/// producer's ongoing transaction (the transaction's end then reaches the
/// offsets through this broker's WriteTxnMarkers, after this answer).
async fn admit(
    coordinators: &Coordinators,
    request: &TxnOffsetCommitRequest,
    group_id: &str,
) -> Result<Box<dyn Send>, i16> {
    let coordinator =
        coordinators.txn_coordinator(&coordinators.image(), request.transactional_id.as_str());
    let verdict = if coordinator == Some(coordinators.node_id()) {
        coordinators
            .txns()
            .begin_offset_write(
                request.transactional_id.to_string(),
                request.producer_id.0,
                request.producer_epoch,
                group_id.to_string(),
            )
            .await
            .map(|guard| Box::new(guard) as Box<dyn Send>)
    } else {
        let verified = coordinators
            .verify_txn_partitions(
                request.transactional_id.as_str(),
                request.producer_id.0,
                request.producer_epoch,
                vec![offsets_partition(group_id)],
            )
            .await;
        match verified.map(|codes| codes.first().copied()) {
            Ok(Some(error_code::NONE)) => Ok(Box::new(()) as Box<dyn Send>),
            Ok(Some(error)) => Err(error),
            Ok(None) => Err(error_code::COORDINATOR_NOT_AVAILABLE),
            Err(error) => Err(error),
        }
    };
    verdict.map_err(|error| match error {
        // What Kafka's verification answers a fenced producer here.
        error_code::PRODUCER_FENCED => error_code::INVALID_PRODUCER_EPOCH,
        // The transaction is ending: a passing coordinators, but clients take
        // CONCURRENT_TRANSACTIONS on this API as fatal, and retry this one.
        error_code::CONCURRENT_TRANSACTIONS => error_code::COORDINATOR_LOAD_IN_PROGRESS,
        error => error,
    })
}

pub async fn handle(
    coordinators: &Coordinators,
    _ctx: &RequestContext,
    request: TxnOffsetCommitRequest,
) -> TxnOffsetCommitResponse {
    let group_id = request.group_id.to_string();
    // Per partition: None when it passed its own checks, else its error.
    let topics = offsets_to_commit!(request.topics);
    let (own, to_store) = check_offsets(&coordinators.image(), coordinators.now_ms(), topics);
    let verdict = admit_and_store(coordinators, &request, &group_id, to_store).await;
    let topics = request
        .topics
        .iter()
        .zip(own)
        .map(|(topic, errors)| {
            let partitions = topic
                .partitions
                .iter()
                .zip(errors)
                .map(|(p, error)| {
                    TxnOffsetCommitResponsePartition::default()
                        .with_partition_index(p.partition_index)
                        .with_error_code(error.unwrap_or(verdict))
                })
                .collect();
            TxnOffsetCommitResponseTopic::default()
                .with_name(topic.name.clone())
                .with_partitions(partitions)
        })
        .collect();
    TxnOffsetCommitResponse::default().with_topics(topics)
}
