//! Pieces the transaction handlers share: the authorization of the
//! transactional id, and Kafka's answer to old clients that predate
//! PRODUCER_FENCED (KIP-588).

use kafka_protocol::messages::ApiKey;

use crate::error_code;
use crate::protocol::RequestContext;
use crate::security::acl::{Operation, ResourceType};

/// Kafka's Write on the transactional id, the first check of a transactional
/// producer's request: refused, TRANSACTIONAL_ID_AUTHORIZATION_FAILED.
pub fn transactional_id_refusal(ctx: &RequestContext, transactional_id: &str) -> Option<i16> {
    (!ctx.authorize(
        Operation::Write,
        ResourceType::TransactionalId,
        transactional_id,
    ))
    .then_some(error_code::TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
}

/// The first version of a transaction API that understands PRODUCER_FENCED
/// (KIP-588): one table for the four APIs that can answer it.
fn producer_fenced_version_min(api_key: ApiKey) -> i16 {
    match api_key {
        ApiKey::InitProducerId => 4,
        // AddPartitionsToTxn, AddOffsetsToTxn and EndTxn learned it at v2.
        _ => 2,
    }
}

/// Kafka answers INVALID_PRODUCER_EPOCH instead of PRODUCER_FENCED to a
/// request of `api_key` older than the first version that knows the new code.
pub fn fenced_for_version(error: i16, api_key: ApiKey, version: i16) -> i16 {
    if error == error_code::PRODUCER_FENCED && version < producer_fenced_version_min(api_key) {
        error_code::INVALID_PRODUCER_EPOCH
    } else {
        error
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn old_clients_hear_invalid_producer_epoch() {
        use error_code::{CONCURRENT_TRANSACTIONS, INVALID_PRODUCER_EPOCH, PRODUCER_FENCED};
        // (error, API, version, what the client hears)
        let cases = [
            (PRODUCER_FENCED, ApiKey::EndTxn, 1, INVALID_PRODUCER_EPOCH),
            (PRODUCER_FENCED, ApiKey::EndTxn, 2, PRODUCER_FENCED),
            (
                PRODUCER_FENCED,
                ApiKey::InitProducerId,
                3,
                INVALID_PRODUCER_EPOCH,
            ),
            (
                CONCURRENT_TRANSACTIONS,
                ApiKey::EndTxn,
                0,
                CONCURRENT_TRANSACTIONS,
            ),
        ];
        for (error, api_key, version, heard) in cases {
            assert_eq!(
                fenced_for_version(error, api_key, version),
                heard,
                "{api_key:?} v{version}"
            );
        }
    }
}
