//! Leaves tested alone: the epoch cache's Kafka semantics, the topic id encoding,
//! checkpoint parsing.

use std::fs;

use tempfile::TempDir;
use uuid::Uuid;

use crate::log::checkpoint::{read_offsets, write_offsets};
use crate::log::epoch::{EpochEntry, LeaderEpochCache};
use crate::log::partition_metadata::{decode_topic_id, encode_topic_id};
use crate::types::TopicPartition;

fn entries(cache: &LeaderEpochCache) -> Vec<(i32, i64)> {
    cache
        .entries()
        .iter()
        .map(|e: &EpochEntry| (e.epoch, e.start_offset))
        .collect()
}

#[test]
fn epoch_assign_drops_contradicted_entries() {
    let temp = TempDir::new().unwrap();
    let mut cache = LeaderEpochCache::load(temp.path()).unwrap();
    cache.assign(1, 0).unwrap();
    cache.assign(1, 5).unwrap(); // same epoch, later offset: nothing new
    cache.assign(2, 10).unwrap();
    cache.assign(4, 20).unwrap();
    assert_eq!(entries(&cache), vec![(1, 0), (2, 10), (4, 20)]);
    cache.assign(3, 15).unwrap(); // a newer-offset claim for an older epoch wins over 4
    assert_eq!(entries(&cache), vec![(1, 0), (2, 10), (3, 15)]);
    let reloaded = LeaderEpochCache::load(temp.path()).unwrap();
    assert_eq!(entries(&reloaded), entries(&cache));
}

#[test]
fn epoch_truncation_from_both_ends() {
    let temp = TempDir::new().unwrap();
    let mut cache = LeaderEpochCache::load(temp.path()).unwrap();
    for (epoch, start) in [(1, 0), (2, 10), (3, 20)] {
        cache.assign(epoch, start).unwrap();
    }
    cache.truncate_from_start(12).unwrap();
    assert_eq!(entries(&cache), vec![(2, 12), (3, 20)]);
    cache.truncate_from_start(5).unwrap();
    assert_eq!(entries(&cache), vec![(2, 12), (3, 20)]);
    cache.truncate_from_end(20).unwrap();
    assert_eq!(entries(&cache), vec![(2, 12)]);
    cache.clear().unwrap();
    assert_eq!(cache.latest_epoch(), None);
    assert_eq!(cache.end_offset_for(2, 30), (-1, -1));
}

#[test]
fn topic_ids_round_trip_in_kafka_form() {
    for id in [
        Uuid::nil(),
        Uuid::from_u128(u128::MAX),
        Uuid::from_u128(0x1234_5678_9abc),
    ] {
        let text = encode_topic_id(id);
        assert_eq!(text.len(), 22);
        assert_eq!(decode_topic_id(&text), Some(id));
    }
    let id = Uuid::from_u128(42);
    assert_eq!(decode_topic_id(&id.hyphenated().to_string()), Some(id));
    assert_eq!(decode_topic_id("not an id"), None);
}

#[test]
fn offset_checkpoints_round_trip_and_reject_garbage() {
    let temp = TempDir::new().unwrap();
    let path = temp.path().join("checkpoint");
    assert!(read_offsets(&path).unwrap().is_empty(), "missing is empty");
    let entries = vec![
        (TopicPartition::new("a-b", 3), 17),
        (TopicPartition::new("c.d", 0), 0),
    ];
    write_offsets(&path, &entries).unwrap();
    let read = read_offsets(&path).unwrap();
    assert_eq!(read.len(), 2);
    assert_eq!(read[&TopicPartition::new("a-b", 3)], 17);

    for garbage in ["", "1\n0\n", "0\n2\na 0 1\n", "0\n1\na x 1\n"] {
        fs::write(&path, garbage).unwrap();
        assert!(read_offsets(&path).is_err(), "{garbage:?}");
    }
}

#[test]
fn a_partition_log_can_move_between_tasks() {
    // The broker keeps each log in a Mutex shared across tokio tasks.
    fn assert_send<T: Send + Sync>() {}
    assert_send::<crate::log::PartitionLog>();
    assert_send::<crate::log::FileSlice>();
    assert_send::<crate::log::FlushTarget>();
}
