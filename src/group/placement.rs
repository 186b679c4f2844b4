//! Which partition of the offsets topic a group belongs to, by Kafka's rule, so
//! that a group lands where Kafka would put it and a coordinator can move with
//! that partition's leadership (see ARCHITECTURE.md).

/// Partitions of the offsets topic (Kafka's `offsets.topic.num.partitions`).
pub const OFFSETS_TOPIC_PARTITIONS: i32 = 50;

/// Java's `String.hashCode` over UTF-16 code units, as Kafka computes it.
fn java_hash_code(text: &str) -> i32 {
    text.encode_utf16().fold(0i32, |hash, unit| {
        hash.wrapping_mul(31).wrapping_add(i32::from(unit))
    })
}

/// Kafka's `Utils.abs(groupId.hashCode) % groupMetadataTopicPartitionCount`
/// (`Utils.abs` maps i32::MIN to 0).
pub fn coordinator_partition(group_id: &str) -> i32 {
    let hash = java_hash_code(group_id);
    let non_negative = if hash == i32::MIN { 0 } else { hash.abs() };
    non_negative % OFFSETS_TOPIC_PARTITIONS
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn matches_java_hash_codes() {
        // Values of "hello".hashCode() and "".hashCode() in Java.
        assert_eq!(java_hash_code("hello"), 99_162_322);
        assert_eq!(java_hash_code(""), 0);
        assert_eq!(coordinator_partition("hello"), 99_162_322 % 50);
        // A group id whose hash is negative still lands in range.
        let partition = coordinator_partition("console-consumer-12345");
        assert!((0..OFFSETS_TOPIC_PARTITIONS).contains(&partition));
    }
}
