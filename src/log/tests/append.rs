//! Appends: offset assignment, validation (all-or-nothing), LogAppendTime, rolling.

use bytes::Bytes;

use super::helpers::*;
use crate::log::batch::{self, BatchHeader};
use crate::log::{LogConfig, LogError};
use crate::types::Offset;

#[test]
fn offsets_are_assigned_and_base_offsets_rewritten() {
    let (_fixture, mut log) = Fixture::new(LogConfig::default());
    let first = log.append(&batch(3, NOW_MS), 5, NOW_MS).unwrap();
    assert_eq!(
        (first.first_offset, first.last_offset),
        (Offset::new(0), Offset::new(2))
    );
    assert_eq!((first.record_count, first.batch_count), (3, 1));
    assert_eq!(first.log_append_time, -1);
    assert_eq!(first.max_timestamp, NOW_MS);

    // Two batches in one append, each claiming base offset 0 as producers send them.
    let mut two = batch(2, NOW_MS).to_vec();
    two.extend_from_slice(&batch(1, NOW_MS + 1));
    let second = log.append(&Bytes::from(two), 5, NOW_MS).unwrap();
    assert_eq!(
        (second.first_offset, second.last_offset),
        (Offset::new(3), Offset::new(5))
    );
    assert_eq!((second.record_count, second.batch_count), (3, 2));
    assert_eq!(second.max_timestamp, NOW_MS + 1);
    assert_eq!(log.log_end_offset(), 6);

    let served = all_batches(&log);
    let bases: Vec<i64> = served.iter().map(|h| h.base_offset).collect();
    assert_eq!(bases, vec![0, 3, 5]);
    assert!(served.iter().all(|h| h.partition_leader_epoch == 5));
}

#[test]
fn a_bad_crc_rejects_the_whole_append() {
    let (_fixture, mut log) = Fixture::new(LogConfig::default());
    let mut corrupt = batch(2, NOW_MS).to_vec();
    let last = corrupt.len() - 1;
    corrupt[last] ^= 0xff;
    let mut records = batch(1, NOW_MS).to_vec();
    records.extend(corrupt);

    assert_err!(
        log.append(&Bytes::from(records), 0, NOW_MS),
        LogError::CorruptMessage(_)
    );
    assert_eq!((log.log_end_offset(), log.size_bytes()), (0, 0));
    assert_eq!(
        log.latest_epoch(),
        None,
        "a rejected append records no epoch"
    );
}

#[test]
fn malformed_record_sets_are_corrupt() {
    let (_fixture, mut log) = Fixture::new(LogConfig::default());
    let whole = batch(2, NOW_MS);
    let cases: Vec<(&str, Vec<u8>)> = vec![
        ("empty", Vec::new()),
        ("cut short", whole[..whole.len() - 3].to_vec()),
        ("shorter than a header", whole[..40].to_vec()),
        ("negative length", with_i32(&whole, 8, -5)),
        ("count vs lastOffsetDelta", with_i32(&whole, 57, 3)),
        (
            "more records than bytes",
            with_i32(&with_i32(&whole, 23, 99), 57, 100),
        ),
    ];
    for (name, bytes) in cases {
        let error = log.append(&Bytes::from(bytes), 0, NOW_MS).unwrap_err();
        assert!(
            matches!(error, LogError::CorruptMessage(_)),
            "{name}: {error:?}"
        );
    }
    assert_eq!(log.size_bytes(), 0);
}

#[test]
fn old_magic_is_unsupported() {
    let (_fixture, mut log) = Fixture::new(LogConfig::default());
    let mut old = batch(1, NOW_MS).to_vec();
    old[16] = 1;
    assert_err!(
        log.append(&Bytes::from(old), 0, NOW_MS),
        LogError::UnsupportedMagic(1)
    );
}

#[test]
fn batches_larger_than_max_message_bytes_are_rejected() {
    let small = batch(1, NOW_MS);
    let config = LogConfig {
        max_message_bytes: small.len() as u32,
        ..LogConfig::default()
    };
    let (_fixture, mut log) = Fixture::new(config);
    log.append(&small, 0, NOW_MS).unwrap();
    assert_err!(
        log.append(&batch(2, NOW_MS), 0, NOW_MS),
        LogError::MessageTooLarge
    );
    assert_eq!(log.log_end_offset(), 1);
}

#[test]
fn a_record_set_larger_than_a_segment_is_rejected() {
    let (_fixture, mut log) = Fixture::new(segments_of(100));
    assert_err!(
        log.append(&batch(10, NOW_MS), 0, NOW_MS),
        LogError::RecordListTooLarge
    );
}

#[test]
fn timestamps_outside_the_window_are_invalid() {
    let config = LogConfig {
        message_timestamp_before_max_ms: 60_000,
        ..LogConfig::default()
    };
    let (_fixture, mut log) = Fixture::new(config);
    let an_hour_ms = 3_600_000;
    for timestamp in [NOW_MS + an_hour_ms + 1, NOW_MS - 60_001] {
        let error = log.append(&batch(1, timestamp), 0, NOW_MS).unwrap_err();
        assert!(
            matches!(error, LogError::InvalidTimestamp),
            "{timestamp}: {error:?}"
        );
    }
    // At the edges, and "no timestamp", are fine.
    for timestamp in [NOW_MS + an_hour_ms, NOW_MS - 60_000, -1] {
        log.append(&batch(1, timestamp), 0, NOW_MS).unwrap();
    }
    // A producer may not claim LogAppendTime on a CreateTime topic.
    let mut claimed = batch(1, NOW_MS).to_vec();
    batch::set_log_append_time(&mut claimed, NOW_MS);
    assert_err!(
        log.append(&Bytes::from(claimed), 0, NOW_MS),
        LogError::InvalidTimestamp
    );
}

#[test]
fn log_append_time_rewrites_the_batch_with_a_valid_crc() {
    let (_fixture, mut log) = Fixture::new(log_append_time());
    // Producer clocks far off are irrelevant on a LogAppendTime topic.
    let info = log.append(&batch(3, 42), 0, NOW_MS).unwrap();
    assert_eq!(info.log_append_time, NOW_MS);
    assert_eq!(info.max_timestamp, NOW_MS);

    let bytes = read_from(&log, 0);
    let header: BatchHeader = headers(&bytes)[0]; // checks the CRC
    assert!(header.is_log_append_time());
    assert_eq!(header.max_timestamp, NOW_MS);
    assert_eq!(
        header.base_timestamp, 42,
        "records themselves are untouched"
    );
    assert_eq!(log.offset_for_timestamp(NOW_MS).unwrap(), Some((0, NOW_MS)));
}

#[test]
fn segments_roll_by_size() {
    let one = batch(1, NOW_MS);
    let (_fixture, mut log) = Fixture::new(segments_of(3 * one.len() as u64));
    for _ in 0..7 {
        log.append(&one, 0, NOW_MS).unwrap();
    }
    assert_eq!(log.segment_base_offsets(), vec![0, 3, 6]);
    assert_eq!(log.size_bytes(), 7 * one.len() as u64);
    assert_every_offset_found(&log);
}

#[test]
fn segments_roll_by_time() {
    let config = LogConfig {
        segment_ms: 1_000,
        ..LogConfig::default()
    };
    let (_fixture, mut log) = Fixture::new(config);
    assert!(
        !log.maybe_roll(NOW_MS + 10_000).unwrap(),
        "an empty segment never rolls"
    );
    log.append(&batch(1, NOW_MS), 0, NOW_MS).unwrap();
    log.append(&batch(1, NOW_MS + 1_000), 0, NOW_MS + 1_000)
        .unwrap();
    assert_eq!(log.segment_count(), 1, "not older than segment.ms yet");
    log.append(&batch(1, NOW_MS + 1_001), 0, NOW_MS + 1_001)
        .unwrap();
    assert_eq!(log.segment_base_offsets(), vec![0, 2]);

    // Without appends, the periodic check rolls.
    assert!(!log.maybe_roll(NOW_MS + 2_001).unwrap());
    assert!(log.maybe_roll(NOW_MS + 2_002).unwrap());
    assert_eq!(log.segment_base_offsets(), vec![0, 2, 3]);
    assert!(
        !log.maybe_roll(NOW_MS + 10_000).unwrap(),
        "the new segment is empty"
    );
}

#[test]
fn flush_target_covers_unflushed_segments() {
    let one = batch(1, NOW_MS);
    let (_fixture, mut log) = Fixture::new(segments_of(2 * one.len() as u64));
    log.append(&one, 0, NOW_MS).unwrap();
    log.append(&one, 0, NOW_MS).unwrap();
    log.append(&one, 0, NOW_MS).unwrap(); // rolled: segments 0 and 2
    assert_eq!(log.unflushed_messages(), 3);
    let target = log.flush_target().unwrap();
    // Two segments' logs, the producer snapshot written at the roll (its fsync
    // deferred to here, out of the append), and the partition dir for both;
    // the rolled segment's time index is written then (its final entry).
    assert_eq!(target.files.len(), 3);
    assert!(target.dir.is_some());
    assert_eq!(target.index_writes.len(), 1);
    assert_eq!(target.end_offset, 3);

    log.append(&one, 0, NOW_MS).unwrap(); // arrives while the fsync runs
    target.sync().unwrap();
    log.mark_flushed(&target);
    assert_eq!(log.recovery_point(), 3);
    assert_eq!(log.unflushed_messages(), 1);
    let rest = log.flush_target().unwrap();
    assert_eq!(rest.files.len(), 1, "only the active segment is left");
    assert!(rest.dir.is_none() && rest.index_writes.is_empty());
    log.flush().unwrap();
    assert_eq!(log.unflushed_messages(), 0);
    assert!(log.flush_target().unwrap().is_empty());
}

fn with_i32(bytes: &[u8], at: usize, value: i32) -> Vec<u8> {
    let mut out = bytes.to_vec();
    out[at..at + 4].copy_from_slice(&value.to_be_bytes());
    let crc = batch::compute_crc(&out);
    out[17..21].copy_from_slice(&crc.to_be_bytes());
    out
}

#[test]
fn a_flush_taken_before_a_truncation_does_not_vouch_for_rewritten_offsets() {
    let (_fixture, mut log) = Fixture::new(LogConfig::default());
    for _ in 0..3 {
        log.append(&batch(2, NOW_MS), 0, NOW_MS).unwrap();
    }
    let target = log.flush_target().unwrap(); // end 6
    log.truncate_to(2).unwrap();
    log.append(&batch(4, NOW_MS), 0, NOW_MS).unwrap(); // offsets 2..=5 again, unsynced
    target.sync().unwrap();
    log.mark_flushed(&target);
    assert_eq!(log.recovery_point(), 2);
    log.flush().unwrap();
    assert_eq!(log.recovery_point(), 6);
}

#[test]
fn message_too_large_wins_over_record_list_too_large() {
    let big = batch(10, NOW_MS);
    let config = LogConfig {
        segment_bytes: 100,
        max_message_bytes: 100,
        ..LogConfig::default()
    };
    let (_fixture, mut log) = Fixture::new(config);
    assert_err!(log.append(&big, 0, NOW_MS), LogError::MessageTooLarge);
}

#[test]
fn a_synchronous_flush_after_a_truncation_counts_whole() {
    let (_fixture, mut log) = Fixture::new(LogConfig::default());
    log.append(&batch(2, NOW_MS), 0, NOW_MS).unwrap();
    log.append(&batch(2, NOW_MS), 0, NOW_MS).unwrap();
    log.truncate_to(2).unwrap();
    log.append(&batch(3, NOW_MS), 0, NOW_MS).unwrap();
    log.flush().unwrap();
    assert_eq!(log.recovery_point(), 5);
}
