//! TxnOffsetCommit: offsets committed inside a transaction. The transaction
//! coordinator admits them (the group's offsets partition is in the producer's
//! Ongoing transaction, KIP-890's verification), then the group coordinator
//! checks member and generation as Kafka's `handleTxnCommitOffsets` does and
//! stores the offsets as pending, durably, in one step before the answer. They become
//! committed offsets when the transaction commits, and are dropped if it
//! aborts.
//!
//! Authorization, as Kafka's: Write on the transactional id (else every
//! partition answers TRANSACTIONAL_ID_AUTHORIZATION_FAILED), Read on the
//! group (else GROUP_AUTHORIZATION_FAILED), and Read on each topic (else its
//! partitions answer TOPIC_AUTHORIZATION_FAILED, and are not stored).

use std::collections::HashMap;

use kafka_protocol::messages::txn_offset_commit_request::TxnOffsetCommitRequestTopic;
use kafka_protocol::messages::txn_offset_commit_response::{
    TxnOffsetCommitResponsePartition, TxnOffsetCommitResponseTopic,
};
use kafka_protocol::messages::{TxnOffsetCommitRequest, TxnOffsetCommitResponse};
use kafka_protocol::protocol::VersionRange;

use super::common::{check_offsets, offsets_to_commit, OwnChecks};
use super::txn_common::transactional_id_refusal;
use crate::coordinator::group::TxnOffsetCommit;
use crate::coordinator::txn::offsets_partition;
use crate::error_code;
use crate::internal_topics::{group_partition, OFFSETS_TOPIC_NAME};
use crate::protocol::context::{Coordinators, Partitions};
use crate::protocol::RequestContext;
use crate::security::acl::{Operation, ResourceType};
use crate::store::CommittedOffset;
use crate::types::TxnVerification;

/// Not v5: it belongs to transaction version 2 (KIP-890 part 2, the offsets
/// partition added implicitly), which this broker does not offer.
pub const VERSIONS: VersionRange = VersionRange { min: 0, max: 4 };

/// The error for every partition that passed its own checks: the
/// transaction's verdict, then the group's and the store's (one step in the
/// group coordinator).
async fn admit_and_store(
    partitions: &Partitions,
    coordinators: &Coordinators,
    request: &TxnOffsetCommitRequest,
    group_id: &str,
    to_store: Vec<(String, i32, CommittedOffset)>,
) -> i16 {
    if group_id.is_empty() {
        return error_code::INVALID_GROUP_ID;
    }
    let (hold, verification) = match admit(partitions, coordinators, request, group_id).await {
        Ok(admitted) => admitted,
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
        verification,
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
/// offsets through this broker's WriteTxnMarkers, after this answer), with
/// the partition's verification guard taken before it is asked: a marker
/// that ends the transaction meanwhile lets go of the guard, and the
/// offsets' append is refused instead of opening a transaction after it.
async fn admit(
    partitions: &Partitions,
    coordinators: &Coordinators,
    request: &TxnOffsetCommitRequest,
    group_id: &str,
) -> Result<(Box<dyn Send>, TxnVerification), i16> {
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
            .map(|guard| (Box::new(guard) as Box<dyn Send>, TxnVerification::Held))
    } else {
        // This broker coordinates the group only while it leads the group's
        // offsets partition.
        let not_coordinator = |_| error_code::NOT_COORDINATOR;
        let guard = partitions
            .partition_on_worker(
                &partitions.image(),
                OFFSETS_TOPIC_NAME,
                group_partition(group_id),
            )
            .and_then(|led| led.start_txn_verification(request.producer_id.0, partitions.now_ms()))
            .map_err(not_coordinator)?;
        let verified = coordinators
            .verify_txn_partitions(
                request.transactional_id.as_str(),
                request.producer_id.0,
                request.producer_epoch,
                vec![offsets_partition(group_id)],
            )
            .await;
        match verified.map(|codes| codes.first().copied()) {
            Ok(Some(error_code::NONE)) => Ok((
                Box::new(()) as Box<dyn Send>,
                TxnVerification::Guarded(guard),
            )),
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
    partitions: &Partitions,
    coordinators: &Coordinators,
    ctx: &RequestContext,
    request: TxnOffsetCommitRequest,
) -> TxnOffsetCommitResponse {
    let group_id = request.group_id.to_string();
    // As Kafka: Write on the transactional id, then Read on the group, or
    // every partition answers the refusal.
    let refused = transactional_id_refusal(ctx, &request.transactional_id).or_else(|| {
        (!ctx.authorize(Operation::Read, ResourceType::Group, &group_id))
            .then_some(error_code::GROUP_AUTHORIZATION_FAILED)
    });
    if let Some(error) = refused {
        let own = request
            .topics
            .iter()
            .map(|topic| vec![Some(error); topic.partitions.len()])
            .collect();
        return respond(&request, own, error);
    }
    // A topic the principal may not Read answers TOPIC_AUTHORIZATION_FAILED
    // and none of its offsets is stored.
    let mut decided: HashMap<&str, bool> = HashMap::new();
    let readable: Vec<bool> = request
        .topics
        .iter()
        .map(|topic| {
            let name = topic.name.as_str();
            *decided
                .entry(name)
                .or_insert_with(|| ctx.authorize(Operation::Read, ResourceType::Topic, name))
        })
        .collect();
    let allowed: Vec<&TxnOffsetCommitRequestTopic> = request
        .topics
        .iter()
        .zip(&readable)
        .filter_map(|(topic, readable)| readable.then_some(topic))
        .collect();
    // Per partition: None when it passed its own checks, else its error.
    let topics = offsets_to_commit!(allowed);
    let (own_allowed, to_store) =
        check_offsets(&coordinators.image(), coordinators.now_ms(), topics);
    let mut own_allowed = own_allowed.into_iter();
    let own = request
        .topics
        .iter()
        .zip(&readable)
        .map(|(topic, readable)| {
            if *readable {
                own_allowed.next().unwrap_or_default()
            } else {
                vec![Some(error_code::TOPIC_AUTHORIZATION_FAILED); topic.partitions.len()]
            }
        })
        .collect();
    // Nothing to store (Kafka then asks no coordinator): every partition
    // has its own error.
    let verdict = if to_store.is_empty() {
        error_code::NONE
    } else {
        admit_and_store(partitions, coordinators, &request, &group_id, to_store).await
    };
    respond(&request, own, verdict)
}

/// The response: each partition's own error, else `verdict`.
fn respond(
    request: &TxnOffsetCommitRequest,
    own: OwnChecks,
    verdict: i16,
) -> TxnOffsetCommitResponse {
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
