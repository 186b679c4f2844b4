//! Every name in a log dir, as Kafka spells it, and the parsing of those names:
//! the files of a segment and the producer snapshots (`{offset:020}{suffix}`), the
//! per-partition and per-dir files with fixed names, and the suffixes of files and
//! dirs that a crash or an interrupted operation leaves behind.
//!
//! A leaf of `log`: it imports nothing of the rest of the log, so the segment, its
//! indexes, the loader and the producer state all name files through it without
//! importing one another. Invariant: `parse_offset_file_name` accepts exactly the
//! names `offset_file_name` makes (and Kafka's, which are the same), so whatever
//! the broker writes it finds again on load.

use crate::types::TopicPartition;

/// A segment's record batches.
pub const LOG_FILE_SUFFIX: &str = ".log";
/// A segment's sparse offset index.
pub const INDEX_FILE_SUFFIX: &str = ".index";
/// A segment's time index.
pub const TIME_INDEX_FILE_SUFFIX: &str = ".timeindex";
/// A segment's transaction index (aborted transactions).
pub const TXN_INDEX_FILE_SUFFIX: &str = ".txnindex";
/// A producer state snapshot, named by the offset it was taken at.
pub const SNAPSHOT_FILE_SUFFIX: &str = ".snapshot";
/// Every file a segment may have, the log first.
pub const SEGMENT_FILE_SUFFIXES: [&str; 4] = [
    LOG_FILE_SUFFIX,
    INDEX_FILE_SUFFIX,
    TIME_INDEX_FILE_SUFFIX,
    TXN_INDEX_FILE_SUFFIX,
];

/// The temp file an atomic write goes to before its rename.
pub const TEMP_FILE_SUFFIX: &str = ".tmp";
/// Leftovers of an operation Kafka interrupts midway; Sluice never writes them, but
/// they may be present in a dir written by Kafka and are deleted on load.
pub const STALE_FILE_SUFFIXES: [&str; 3] = [".deleted", ".cleaned", ".swap"];

/// In a partition dir: the leader epoch cache.
pub const LEADER_EPOCH_CHECKPOINT_FILE: &str = "leader-epoch-checkpoint";
/// In a partition dir: the topic id of this incarnation of the topic.
pub const PARTITION_METADATA_FILE: &str = "partition.metadata";

/// In the log dir: present only after a clean shutdown.
pub const CLEAN_SHUTDOWN_FILE: &str = ".kafka_cleanshutdown";
/// In the log dir: each partition's recovery point.
pub const RECOVERY_POINT_CHECKPOINT_FILE: &str = "recovery-point-offset-checkpoint";
/// In the log dir: each partition's high watermark.
pub const REPLICATION_OFFSET_CHECKPOINT_FILE: &str = "replication-offset-checkpoint";
/// In the log dir: each compacted partition's first dirty offset.
pub const CLEANER_OFFSET_CHECKPOINT_FILE: &str = "cleaner-offset-checkpoint";
/// In the log dir: each partition's log start offset.
pub const LOG_START_OFFSET_CHECKPOINT_FILE: &str = "log-start-offset-checkpoint";
/// Kafka renames a partition dir to `topic-N.<id>-delete` before removing it, so a
/// crash midway leaves a dir that is recognisably garbage.
pub const DELETE_DIR_SUFFIX: &str = "-delete";

/// Kafka's name for a file of the segment (or snapshot) at `offset`: the offset as 20
/// zero-padded digits, then the suffix.
pub fn offset_file_name(offset: i64, suffix: &str) -> String {
    format!("{offset:020}{suffix}")
}

/// The offset in a name like `00000000000000000042.log`, for the given suffix.
pub fn parse_offset_file_name(name: &str, suffix: &str) -> Option<i64> {
    let stem = name.strip_suffix(suffix)?;
    if stem.is_empty() || !stem.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    stem.parse().ok()
}

/// The name a partition dir is renamed to before it is removed.
pub fn deleted_dir_name(tp: &TopicPartition, topic_id: uuid::Uuid) -> String {
    format!("{}.{}{DELETE_DIR_SUFFIX}", tp.dir_name(), topic_id.simple())
}

/// `topic-N` (`TopicPartition::dir_name`) back into a partition; topic names may
/// themselves hold '-'.
pub fn parse_partition_dir_name(name: &str) -> Option<TopicPartition> {
    let (topic, partition) = name.rsplit_once('-')?;
    if topic.is_empty() || partition.is_empty() || !partition.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    Some(TopicPartition::new(topic, partition.parse().ok()?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn offset_names_round_trip_and_foreign_names_are_refused() {
        let name = offset_file_name(42, LOG_FILE_SUFFIX);
        assert_eq!(name, "00000000000000000042.log");
        assert_eq!(parse_offset_file_name(&name, LOG_FILE_SUFFIX), Some(42));
        assert_eq!(parse_offset_file_name(&name, INDEX_FILE_SUFFIX), None);
        assert_eq!(parse_offset_file_name(".log", LOG_FILE_SUFFIX), None);
        assert_eq!(parse_offset_file_name("-1.log", LOG_FILE_SUFFIX), None);
        assert_eq!(parse_offset_file_name("42.log.tmp", LOG_FILE_SUFFIX), None);
    }

    #[test]
    fn partition_dir_names_round_trip_with_dashes_in_topics() {
        let tp = TopicPartition::new("a-b", 7);
        assert_eq!(parse_partition_dir_name(&tp.dir_name()), Some(tp.clone()));
        assert_eq!(parse_partition_dir_name("a-"), None);
        assert_eq!(parse_partition_dir_name("-3"), None);
        assert!(deleted_dir_name(&tp, uuid::Uuid::nil()).ends_with(DELETE_DIR_SUFFIX));
    }
}
