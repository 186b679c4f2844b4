//! DescribeTransactions (KIP-664): coordinators, producer id and epoch, timeout,
//! start time and partitions of each transactional id asked for. As in Kafka,
//! an id the principal may not Describe answers
//! TRANSACTIONAL_ID_AUTHORIZATION_FAILED, and a transaction's topics it may
//! not Describe are left out.

use std::collections::HashMap;

use kafka_protocol::messages::describe_transactions_response::{TopicData, TransactionState};
use kafka_protocol::messages::{
    DescribeTransactionsRequest, DescribeTransactionsResponse, ProducerId, TopicName,
};
use kafka_protocol::protocol::{StrBytes, VersionRange};

use crate::error_code;
use crate::protocol::context::Coordinators;
use crate::protocol::RequestContext;
use crate::security::acl::{Operation, ResourceType};

pub const VERSIONS: VersionRange = VersionRange { min: 0, max: 0 };

pub async fn handle(
    coordinators: &Coordinators,
    ctx: &RequestContext,
    request: DescribeTransactionsRequest,
) -> DescribeTransactionsResponse {
    let mut described = Vec::with_capacity(request.transactional_ids.len());
    let mut describable: HashMap<String, bool> = HashMap::new();
    for transactional_id in request.transactional_ids {
        let answer = TransactionState::default().with_transactional_id(transactional_id.clone());
        if !ctx.authorize(
            Operation::Describe,
            ResourceType::TransactionalId,
            transactional_id.as_str(),
        ) {
            described
                .push(answer.with_error_code(error_code::TRANSACTIONAL_ID_AUTHORIZATION_FAILED));
            continue;
        }
        let metadata = match coordinators
            .txns()
            .describe(transactional_id.to_string())
            .await
        {
            Ok(metadata) => metadata,
            Err(error) => {
                described.push(answer.with_error_code(error));
                continue;
            }
        };
        // Partitions come sorted by topic, then partition.
        let mut topics: Vec<TopicData> = Vec::new();
        for tp in &metadata.partitions {
            let allowed = *describable.entry(tp.topic.clone()).or_insert_with(|| {
                ctx.authorize_quietly(Operation::Describe, ResourceType::Topic, &tp.topic)
            });
            if !allowed {
                continue;
            }
            match topics.last_mut() {
                Some(last) if last.topic.as_str() == tp.topic => last.partitions.push(tp.partition),
                _ => topics.push(
                    TopicData::default()
                        .with_topic(TopicName(StrBytes::from_string(tp.topic.clone())))
                        .with_partitions(vec![tp.partition]),
                ),
            }
        }
        described.push(
            answer
                .with_error_code(error_code::NONE)
                .with_transaction_state(StrBytes::from_static_str(metadata.state.name()))
                .with_transaction_timeout_ms(metadata.timeout_ms)
                .with_transaction_start_time_ms(metadata.start_timestamp_ms)
                .with_producer_id(ProducerId(metadata.producer_id))
                .with_producer_epoch(metadata.producer_epoch.get())
                .with_topics(topics),
        );
    }
    DescribeTransactionsResponse::default().with_transaction_states(described)
}
