//! AddOffsetsToTxn: the group's partition of the offsets topic joins the
//! transaction (where Kafka's group coordinator places the group), so that a
//! TxnOffsetCommit for the group may follow. Answered once that is fsynced.

use kafka_protocol::messages::{AddOffsetsToTxnRequest, AddOffsetsToTxnResponse};
use kafka_protocol::protocol::VersionRange;

use super::txn_common::fenced_for_version;
use crate::protocol::context::Coordinators;
use crate::protocol::RequestContext;

/// v4 only adds TRANSACTION_ABORTABLE to the codes a client understands.
pub const VERSIONS: VersionRange = VersionRange { min: 0, max: 4 };

/// The first version that understands PRODUCER_FENCED (KIP-588).
const PRODUCER_FENCED_VERSION_MIN: i16 = 2;

pub async fn handle(
    coordinators: &Coordinators,
    ctx: &RequestContext,
    request: AddOffsetsToTxnRequest,
) -> AddOffsetsToTxnResponse {
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
        ctx.api_version,
        PRODUCER_FENCED_VERSION_MIN,
    ))
}
