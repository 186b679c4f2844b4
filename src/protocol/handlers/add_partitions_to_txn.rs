//! AddPartitionsToTxn: partitions join a producer's transaction. v0-v3 is the
//! client's form (one transaction); v4+ is Kafka's batched broker form, where
//! `verify_only` asks whether partitions are already in each transaction
//! (KIP-890) instead of adding them. As in Kafka, a request naming a partition
//! that does not exist changes nothing: those partitions answer
//! UNKNOWN_TOPIC_OR_PARTITION, the others OPERATION_NOT_ATTEMPTED.
//!
//! Authorization, as Kafka's: the client's form needs Write on the
//! transactional id (else every partition answers
//! TRANSACTIONAL_ID_AUTHORIZATION_FAILED) and Write on each topic (a topic
//! refused answers TOPIC_AUTHORIZATION_FAILED and, as for an unknown
//! partition, nothing is added); the broker form needs ClusterAction (else
//! the request's CLUSTER_AUTHORIZATION_FAILED).

use std::collections::HashSet;

use kafka_protocol::messages::add_partitions_to_txn_request::AddPartitionsToTxnTopic;
use kafka_protocol::messages::add_partitions_to_txn_response::{
    AddPartitionsToTxnPartitionResult, AddPartitionsToTxnResult, AddPartitionsToTxnTopicResult,
};
use kafka_protocol::messages::{AddPartitionsToTxnRequest, AddPartitionsToTxnResponse, ApiKey};
use kafka_protocol::protocol::VersionRange;

use super::common::{partition_exists, per_partition};
use super::txn_common::fenced_for_version;
use crate::error_code;
use crate::protocol::context::Coordinators;
use crate::protocol::RequestContext;
use crate::security::acl::{Operation, ResourceType};
use crate::types::TopicPartition;

/// v5 only adds TRANSACTION_ABORTABLE to the codes a client understands.
pub const VERSIONS: VersionRange = VersionRange { min: 0, max: 5 };

/// From v4 the request carries a batch of transactions (KIP-890).
const BATCHED_VERSION_MIN: i16 = 4;
/// One transaction of the request, as the coordinator takes it.
struct Txn {
    transactional_id: String,
    producer_id: i64,
    producer_epoch: i16,
    verify_only: bool,
    topics: Vec<AddPartitionsToTxnTopic>,
}

pub async fn handle(
    coordinators: &Coordinators,
    ctx: &RequestContext,
    request: AddPartitionsToTxnRequest,
) -> AddPartitionsToTxnResponse {
    if ctx.api_version < BATCHED_VERSION_MIN {
        let txn = Txn {
            transactional_id: request.v3_and_below_transactional_id.to_string(),
            producer_id: request.v3_and_below_producer_id.0,
            producer_epoch: request.v3_and_below_producer_epoch,
            verify_only: false,
            topics: request.v3_and_below_topics,
        };
        let results = if ctx.authorize(
            Operation::Write,
            ResourceType::TransactionalId,
            &txn.transactional_id,
        ) {
            let mut denied = HashSet::new();
            for topic in &txn.topics {
                let name = topic.name.as_str();
                if !denied.contains(name)
                    && !ctx.authorize(Operation::Write, ResourceType::Topic, name)
                {
                    denied.insert(name.to_string());
                }
            }
            add_one(coordinators, ctx.api_version, &txn, &denied).await
        } else {
            topic_results(
                &txn.topics,
                std::iter::repeat(error_code::TRANSACTIONAL_ID_AUTHORIZATION_FAILED),
            )
        };
        return AddPartitionsToTxnResponse::default().with_results_by_topic_v3_and_below(results);
    }
    // Only brokers send the batched form (KIP-890's verification).
    if !ctx.may_cluster_action() {
        return AddPartitionsToTxnResponse::default()
            .with_error_code(error_code::CLUSTER_AUTHORIZATION_FAILED);
    }
    let mut results = Vec::with_capacity(request.transactions.len());
    for transaction in request.transactions {
        let txn = Txn {
            transactional_id: transaction.transactional_id.to_string(),
            producer_id: transaction.producer_id.0,
            producer_epoch: transaction.producer_epoch,
            verify_only: transaction.verify_only,
            topics: transaction.topics,
        };
        let topic_results = add_one(coordinators, ctx.api_version, &txn, &HashSet::new()).await;
        results.push(
            AddPartitionsToTxnResult::default()
                .with_transactional_id(transaction.transactional_id)
                .with_topic_results(topic_results),
        );
    }
    AddPartitionsToTxnResponse::default().with_results_by_transaction(results)
}

/// The transaction's partitions added (or verified), unless a topic is
/// `denied` or a partition unknown: then nothing is.
async fn add_one(
    coordinators: &Coordinators,
    version: i16,
    txn: &Txn,
    denied: &HashSet<String>,
) -> Vec<AddPartitionsToTxnTopicResult> {
    let image = coordinators.image();
    let partitions: Vec<TopicPartition> = txn
        .topics
        .iter()
        .flat_map(|topic| {
            topic
                .partitions
                .iter()
                .map(|p| TopicPartition::new(topic.name.as_str(), *p))
        })
        .collect();
    let failed: Vec<Option<i16>> = partitions
        .iter()
        .map(|tp| {
            if denied.contains(&tp.topic) {
                Some(error_code::TOPIC_AUTHORIZATION_FAILED)
            } else if !partition_exists(&image, &tp.topic, tp.partition) {
                Some(error_code::UNKNOWN_TOPIC_OR_PARTITION)
            } else {
                None
            }
        })
        .collect();
    let codes: Vec<i16> = if failed.iter().any(Option::is_some) {
        failed
            .iter()
            .map(|code| code.unwrap_or(error_code::OPERATION_NOT_ATTEMPTED))
            .collect()
    } else if txn.verify_only {
        match coordinators
            .txns()
            .verify_partitions(
                txn.transactional_id.clone(),
                txn.producer_id,
                txn.producer_epoch,
                partitions.clone(),
            )
            .await
        {
            Ok(codes) => codes,
            Err(error) => vec![error; partitions.len()],
        }
    } else {
        let error = coordinators
            .txns()
            .add_partitions(
                txn.transactional_id.clone(),
                txn.producer_id,
                txn.producer_epoch,
                partitions.clone(),
            )
            .await;
        vec![error; partitions.len()]
    };
    let codes = codes
        .into_iter()
        .map(|code| fenced_for_version(code, ApiKey::AddPartitionsToTxn, version));
    topic_results(&txn.topics, codes)
}

/// The topics' results, `codes` giving each partition's error in order.
fn topic_results(
    topics: &[AddPartitionsToTxnTopic],
    mut codes: impl Iterator<Item = i16>,
) -> Vec<AddPartitionsToTxnTopicResult> {
    per_partition(
        topics,
        |topic| &topic.partitions,
        |_, p| {
            AddPartitionsToTxnPartitionResult::default()
                .with_partition_index(*p)
                .with_partition_error_code(codes.next().unwrap_or(error_code::UNKNOWN_SERVER_ERROR))
        },
        |topic, results| {
            AddPartitionsToTxnTopicResult::default()
                .with_name(topic.name.clone())
                .with_results_by_partition(results)
        },
    )
}
