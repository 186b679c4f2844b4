//! AddOffsetsToTxn: the group's partition of the offsets topic joins the
//! transaction (where Kafka's group coordinator places the group), so that a
//! TxnOffsetCommit for the group may follow. Answered once that is fsynced.
//! Needs Write on the transactional id (else
//! TRANSACTIONAL_ID_AUTHORIZATION_FAILED) and Read on the group (else
//! GROUP_AUTHORIZATION_FAILED), as in Kafka.

use kafka_protocol::messages::{AddOffsetsToTxnRequest, AddOffsetsToTxnResponse};
use kafka_protocol::protocol::VersionRange;

use super::txn_common::{fenced_for_version, transactional_id_refusal};
use crate::error_code;
use crate::protocol::context::Coordinators;
use crate::protocol::RequestContext;
use crate::security::acl::{Operation, ResourceType};

/// v4 only adds TRANSACTION_ABORTABLE to the codes a client understands.
pub const VERSIONS: VersionRange = VersionRange { min: 0, max: 4 };

pub async fn handle(
    coordinators: &Coordinators,
    ctx: &RequestContext,
    request: AddOffsetsToTxnRequest,
) -> AddOffsetsToTxnResponse {
    if let Some(error) = transactional_id_refusal(ctx, &request.transactional_id) {
        return AddOffsetsToTxnResponse::default().with_error_code(error);
    }
    if !ctx.authorize(
        Operation::Read,
        ResourceType::Group,
        request.group_id.as_str(),
    ) {
        return AddOffsetsToTxnResponse::default()
            .with_error_code(error_code::GROUP_AUTHORIZATION_FAILED);
    }
    let error = coordinators
        .txns()
        .add_offsets(
            request.transactional_id.to_string(),
            request.producer_id.0,
            request.producer_epoch,
            request.group_id.as_str(),
        )
        .await;
    AddOffsetsToTxnResponse::default().with_error_code(fenced_for_version(
        error,
        ctx.api_key,
        ctx.api_version,
    ))
}
