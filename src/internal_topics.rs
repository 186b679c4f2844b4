//! Where a coordinator's state lives, by Kafka's rules: the internal topics'
//! names and partition counts, and which of their partitions a group id or a
//! transactional id belongs to (`Utils.abs(key.hashCode) % partitions`, with
//! Java's `String.hashCode`), so a group or a transaction lands where Kafka
//! would put it and a coordinator can move with that partition's leadership
//! (see ARCHITECTURE.md).
//!
//! A leaf, importing nothing of the broker: the transaction coordinator, the
//! handlers and (with the cluster work) the group coordinator place keys
//! through it, so none of them imports another for it.
//! `records` holds the topics' record formats, Kafka's own, which the
//! coordinators write and their caches keep.
//! Invariant: the result is always in `0..partitions` and never changes for a
//! key, since stored offsets and transactions are found by it.

pub mod records;

/// Kafka's offsets topic: committed offsets and group metadata.
pub const OFFSETS_TOPIC_NAME: &str = "__consumer_offsets";
/// Kafka's transaction state topic.
pub const TRANSACTION_STATE_TOPIC_NAME: &str = "__transaction_state";
/// Partitions of the offsets topic (Kafka's `offsets.topic.num.partitions`).
pub const OFFSETS_TOPIC_PARTITIONS: i32 = 50;
/// Partitions of the transaction state topic (Kafka's
/// `transaction.state.log.num.partitions`).
pub const TRANSACTION_STATE_TOPIC_PARTITIONS: i32 = 50;

/// Whether `topic` is one of Kafka's internal topics.
pub fn is_internal_topic(topic: &str) -> bool {
    topic == OFFSETS_TOPIC_NAME || topic == TRANSACTION_STATE_TOPIC_NAME
}

/// Java's `String.hashCode` over UTF-16 code units, as Kafka computes it.
fn java_hash_code(text: &str) -> i32 {
    text.encode_utf16().fold(0i32, |hash, unit| {
        hash.wrapping_mul(31).wrapping_add(i32::from(unit))
    })
}

/// Kafka's `Utils.abs(key.hashCode) % partitions` (`Utils.abs` maps i32::MIN to 0).
fn partition_for(key: &str, partitions: i32) -> i32 {
    assert!(partitions > 0, "a topic has at least one partition");
    let hash = java_hash_code(key);
    let non_negative = if hash == i32::MIN { 0 } else { hash.abs() };
    non_negative % partitions
}

/// The partition of the offsets topic that holds `group_id` (Kafka's
/// `GroupMetadataManager.partitionFor`): its coordinator is that partition's leader.
pub fn group_partition(group_id: &str) -> i32 {
    partition_for(group_id, OFFSETS_TOPIC_PARTITIONS)
}

/// The partition of the transaction state topic that holds `transactional_id`
/// (Kafka's `TransactionStateManager.partitionFor`): its coordinator is that
/// partition's leader.
pub fn txn_partition(transactional_id: &str) -> i32 {
    partition_for(transactional_id, TRANSACTION_STATE_TOPIC_PARTITIONS)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn matches_java_hash_codes() {
        // Values of "hello".hashCode() and "".hashCode() in Java.
        assert_eq!(java_hash_code("hello"), 99_162_322);
        assert_eq!(java_hash_code(""), 0);
        assert_eq!(group_partition("hello"), 99_162_322 % 50);
        // A group id whose hash is negative still lands in range.
        let partition = group_partition("console-consumer-12345");
        assert!((0..OFFSETS_TOPIC_PARTITIONS).contains(&partition));
        // Kafka's Utils.abs: i32::MIN maps to 0 ("polygenelubricants".hashCode()).
        assert_eq!(java_hash_code("polygenelubricants"), i32::MIN);
        assert_eq!(group_partition("polygenelubricants"), 0);
        assert!(is_internal_topic(TRANSACTION_STATE_TOPIC_NAME));
    }
}
