//! Pieces the transaction handlers share: Kafka's answer to old clients that
//! predate PRODUCER_FENCED (KIP-588), and the check that a partition exists.

use crate::error_code;

/// Kafka answers INVALID_PRODUCER_EPOCH instead of PRODUCER_FENCED to a
/// request older than `fenced_version_min`, the first that knows the new code.
pub fn fenced_for_version(error: i16, version: i16, fenced_version_min: i16) -> i16 {
    if error == error_code::PRODUCER_FENCED && version < fenced_version_min {
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
        assert_eq!(
            fenced_for_version(error_code::PRODUCER_FENCED, 1, 2),
            error_code::INVALID_PRODUCER_EPOCH
        );
        assert_eq!(
            fenced_for_version(error_code::PRODUCER_FENCED, 2, 2),
            error_code::PRODUCER_FENCED
        );
        assert_eq!(
            fenced_for_version(error_code::CONCURRENT_TRANSACTIONS, 0, 2),
            error_code::CONCURRENT_TRANSACTIONS
        );
    }
}
