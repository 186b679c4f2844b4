//! InitProducerId: a producer id and epoch for an idempotent producer (no
//! transactional id: a fresh id at epoch 0) or a transactional one (Kafka's
//! `handleInitProducerId`: epoch bumped, an Ongoing transaction fenced and
//! aborted first). Answered once the new epoch is fsynced.
//!
//! Authorization, as Kafka's: a transactional id needs Write on it (else
//! TRANSACTIONAL_ID_AUTHORIZATION_FAILED); an idempotent producer needs
//! IdempotentWrite on the cluster or Write on some topic (else
//! CLUSTER_AUTHORIZATION_FAILED), which is where idempotence is authorized
//! since KIP-679.

use kafka_protocol::messages::{ApiKey, InitProducerIdRequest, InitProducerIdResponse, ProducerId};
use kafka_protocol::protocol::VersionRange;

use super::txn_common::{fenced_for_version, transactional_id_refusal};
use crate::coordinator::txn::{NO_PRODUCER_EPOCH, NO_PRODUCER_ID};
use crate::error_code;
use crate::protocol::context::Coordinators;
use crate::protocol::RequestContext;
use crate::security::acl::{Operation, ResourceType};

/// v5 only adds TRANSACTION_ABORTABLE to the codes a client understands.
pub const VERSIONS: VersionRange = VersionRange { min: 0, max: 5 };

pub async fn handle(
    coordinators: &Coordinators,
    ctx: &RequestContext,
    request: InitProducerIdRequest,
) -> InitProducerIdResponse {
    let refused = match request.transactional_id.as_ref() {
        Some(id) => transactional_id_refusal(ctx, id),
        // Write on some topic first: that check logs no denial, and the
        // cluster's is logged only when both refuse.
        None => (!ctx.access.authorize_any(
            ApiKey::InitProducerId,
            Operation::Write,
            ResourceType::Topic,
        ) && !ctx.authorize_cluster(Operation::IdempotentWrite))
        .then_some(error_code::CLUSTER_AUTHORIZATION_FAILED),
    };
    if let Some(error) = refused {
        return InitProducerIdResponse::default()
            .with_error_code(error)
            .with_producer_id(ProducerId(NO_PRODUCER_ID))
            .with_producer_epoch(NO_PRODUCER_EPOCH);
    }
    // KIP-360 (v3+): both or neither of producer id and epoch.
    let expected = match (request.producer_id.0, request.producer_epoch) {
        (NO_PRODUCER_ID, NO_PRODUCER_EPOCH) => None,
        (NO_PRODUCER_ID, _) | (_, NO_PRODUCER_EPOCH) => {
            return InitProducerIdResponse::default()
                .with_error_code(error_code::INVALID_REQUEST)
                .with_producer_id(ProducerId(NO_PRODUCER_ID))
                .with_producer_epoch(NO_PRODUCER_EPOCH)
        }
        (producer_id, epoch) => Some((producer_id, epoch)),
    };
    let result = coordinators
        .txns()
        .init_producer_id(
            request.transactional_id.map(|id| id.to_string()),
            request.transaction_timeout_ms,
            expected,
        )
        .await;
    InitProducerIdResponse::default()
        .with_error_code(fenced_for_version(
            result.error,
            ctx.api_key,
            ctx.api_version,
        ))
        .with_producer_id(ProducerId(result.producer_id))
        .with_producer_epoch(result.producer_epoch)
}
