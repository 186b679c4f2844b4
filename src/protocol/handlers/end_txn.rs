//! EndTxn: commit or abort. Answered, as Kafka does, once PrepareCommit or
//! PrepareAbort is fsynced; the markers (and the transaction's pending
//! offsets) are then written in the background, and calls on the same
//! transactional id answer CONCURRENT_TRANSACTIONS until they are. Needs
//! Write on the transactional id, else TRANSACTIONAL_ID_AUTHORIZATION_FAILED.

use kafka_protocol::messages::{EndTxnRequest, EndTxnResponse};
use kafka_protocol::protocol::VersionRange;

use super::txn_common::{fenced_for_version, transactional_id_refusal};
use crate::protocol::context::Coordinators;
use crate::protocol::RequestContext;

/// Not v5: it is transaction version 2 (KIP-890 part 2: an epoch bump at the
/// end of every transaction, partitions added by their leaders), which this
/// broker does not offer; clients use it only when the broker advertises the
/// `transaction.version` feature.
pub const VERSIONS: VersionRange = VersionRange { min: 0, max: 4 };

pub async fn handle(
    coordinators: &Coordinators,
    ctx: &RequestContext,
    request: EndTxnRequest,
) -> EndTxnResponse {
    if let Some(error) = transactional_id_refusal(ctx, &request.transactional_id) {
        return EndTxnResponse::default().with_error_code(error);
    }
    let error = coordinators
        .txns()
        .end_txn(
            request.transactional_id.to_string(),
            request.producer_id.0,
            request.producer_epoch,
            request.committed,
        )
        .await;
    EndTxnResponse::default().with_error_code(fenced_for_version(
        error,
        ctx.api_key,
        ctx.api_version,
    ))
}
