//! ListTransactions (KIP-664): the transactions this coordinator knows,
//! filtered by coordinators, producer id and (v1, KIP-994) how long they have run.
//! As in Kafka, only the transactional ids the principal may Describe are
//! listed; the others are left out.

use kafka_protocol::messages::list_transactions_response::TransactionState;
use kafka_protocol::messages::{
    ListTransactionsRequest, ListTransactionsResponse, ProducerId, TransactionalId,
};
use kafka_protocol::protocol::{StrBytes, VersionRange};

use crate::error_code;
use crate::protocol::context::Coordinators;
use crate::protocol::RequestContext;
use crate::security::acl::{Operation, ResourceType};

/// Not v2: its transactional-id filter is a Java regular expression (KIP-1152),
/// which this broker does not evaluate.
pub const VERSIONS: VersionRange = VersionRange { min: 0, max: 1 };

pub async fn handle(
    coordinators: &Coordinators,
    ctx: &RequestContext,
    request: ListTransactionsRequest,
) -> ListTransactionsResponse {
    let states = request
        .state_filters
        .iter()
        .map(|s| s.to_string())
        .collect();
    let producer_ids = request.producer_id_filters.iter().map(|id| id.0).collect();
    // v0 has no duration filter; its default, -1, lists every duration.
    let listed = coordinators
        .txns()
        .list(states, producer_ids, request.duration_filter)
        .await;
    let Ok((listed, unknown)) = listed else {
        return ListTransactionsResponse::default()
            .with_error_code(error_code::COORDINATOR_NOT_AVAILABLE);
    };
    ListTransactionsResponse::default()
        .with_unknown_state_filters(unknown.into_iter().map(StrBytes::from_string).collect())
        .with_transaction_states(
            listed
                .into_iter()
                .filter(|txn| {
                    ctx.authorize_quietly(
                        Operation::Describe,
                        ResourceType::TransactionalId,
                        &txn.transactional_id,
                    )
                })
                .map(|txn| {
                    TransactionState::default()
                        .with_transactional_id(TransactionalId(StrBytes::from_string(
                            txn.transactional_id,
                        )))
                        .with_producer_id(ProducerId(txn.producer_id))
                        .with_transaction_state(StrBytes::from_static_str(txn.state.name()))
                })
                .collect(),
        )
}
