//! Removing data: retention by time and size, DeleteRecords, truncation.

use super::helpers::*;
use crate::log::{LogConfig, LogError, PartitionLog};
use crate::types::Offset;

const HOUR_MS: i64 = 3_600_000;

/// Five one-batch segments stamped T, T+1h, ... T+4h (the last one active).
fn hourly_log(config: LogConfig) -> (Fixture, PartitionLog) {
    let one = batch(2, NOW_MS);
    let config = LogConfig {
        segment_bytes: one.len() as u64,
        ..config
    };
    let (fixture, mut log) = Fixture::new(config);
    for hour in 0..5 {
        let t = NOW_MS + hour * HOUR_MS;
        log.append(&batch(2, t), 0, t).unwrap();
    }
    assert_eq!(log.segment_base_offsets(), vec![0, 2, 4, 6, 8]);
    // Everything is committed, as on a leader alone in its ISR.
    log.set_high_watermark(log.log_end_offset());
    (fixture, log)
}

#[test]
fn retention_never_deletes_a_segment_above_the_high_watermark() {
    let (_fixture, log) = hourly_log(LogConfig {
        retention_ms: 2 * HOUR_MS,
        ..LogConfig::default()
    });
    // Committed up to offset 3 only: the segment at 2 holds offsets 2..=3, but the
    // segment after it starts at 4, above the high watermark, so it stays.
    let mut uncommitted = log;
    uncommitted.set_high_watermark(3);
    assert_eq!(
        uncommitted.apply_retention(NOW_MS + 100 * HOUR_MS).unwrap(),
        1
    );
    assert_eq!(uncommitted.segment_base_offsets(), vec![2, 4, 6, 8]);
    uncommitted.set_high_watermark(10);
    assert_eq!(
        uncommitted.apply_retention(NOW_MS + 100 * HOUR_MS).unwrap(),
        3
    );
    assert_eq!(uncommitted.segment_base_offsets(), vec![8]);
}

#[test]
fn retention_by_time_deletes_old_segments_and_moves_the_log_start() {
    let (fixture, mut log) = hourly_log(LogConfig {
        retention_ms: 2 * HOUR_MS,
        ..LogConfig::default()
    });
    let now = NOW_MS + 4 * HOUR_MS;
    assert_eq!(
        log.apply_retention(now).unwrap(),
        2,
        "T and T+1h are more than 2h old"
    );
    assert_eq!(log.segment_base_offsets(), vec![4, 6, 8]);
    assert_eq!(log.log_start_offset(), 4);
    assert!(!fixture.segment_file(0, ".log").exists());
    assert!(!fixture.segment_file(2, ".index").exists());
    assert!(matches!(
        log.read(3, 1, i64::MAX, true),
        Err(LogError::OffsetOutOfRange { .. })
    ));

    // The active segment is never deleted by retention, however old.
    assert_eq!(log.apply_retention(now + 100 * HOUR_MS).unwrap(), 2);
    assert_eq!(log.segment_base_offsets(), vec![8]);
    assert_eq!((log.log_start_offset(), log.log_end_offset()), (8, 10));
}

#[test]
fn retention_by_size_deletes_the_oldest_segments() {
    let (_fixture, mut log) = hourly_log(LogConfig::default());
    let segment = log.size_bytes() / 5;
    log.set_config(LogConfig {
        retention_bytes: (3 * segment + segment / 2) as i64,
        ..log.config().clone()
    });
    assert_eq!(
        log.apply_retention(NOW_MS).unwrap(),
        1,
        "deleting one brings 5 down to 4, then 3 would undershoot"
    );
    assert_eq!(log.apply_retention(NOW_MS).unwrap(), 0);
    assert_eq!(log.segment_base_offsets(), vec![2, 4, 6, 8]);
    assert_eq!(log.log_start_offset(), 2);

    log.set_config(LogConfig {
        retention_bytes: 0,
        ..log.config().clone()
    });
    assert_eq!(log.apply_retention(NOW_MS).unwrap(), 3);
    assert_eq!(log.segment_base_offsets(), vec![8]);
}

#[test]
fn unlimited_retention_keeps_everything() {
    let (_fixture, mut log) = hourly_log(LogConfig {
        retention_ms: -1,
        retention_bytes: -1,
        ..LogConfig::default()
    });
    assert_eq!(log.apply_retention(i64::MAX).unwrap(), 0);
    assert_eq!(log.segment_count(), 5);
}

#[test]
fn delete_records_moves_the_log_start_and_drops_segments_below_it() {
    let (_fixture, mut log) = hourly_log(LogConfig::default());
    assert_eq!(log.delete_records_before(3).unwrap(), 3);
    assert_eq!(
        log.segment_base_offsets(),
        vec![2, 4, 6, 8],
        "segment 2 still holds offset 3"
    );
    assert_eq!(
        log.delete_records_before(1).unwrap(),
        3,
        "the log start never moves back"
    );
    assert_eq!(log.delete_records_before(6).unwrap(), 6);
    assert_eq!(log.segment_base_offsets(), vec![6, 8]);
    let error = log.delete_records_before(11).unwrap_err();
    assert!(matches!(
        error,
        LogError::OffsetOutOfRange {
            log_start_offset: 6,
            log_end_offset: 10
        }
    ));
    // Up to the log end: the active segment stays, empty of readable records.
    assert_eq!(log.delete_records_before(10).unwrap(), 10);
    assert_eq!(log.segment_base_offsets(), vec![8]);
    assert!(log.read(10, 1, i64::MAX, true).unwrap().records.is_none());
    let info = log.append(&batch(1, NOW_MS), 0, NOW_MS).unwrap();
    assert_eq!(
        (info.first_offset, info.log_start_offset),
        (Offset::new(10), Offset::new(10))
    );
}

#[test]
fn truncate_to_drops_batches_at_and_above_the_offset() {
    let (_fixture, mut log) = hourly_log(LogConfig::default());
    log.truncate_to(5).unwrap(); // mid-batch 4..=5: the whole batch goes
    assert_eq!(log.log_end_offset(), 4);
    assert_eq!(log.segment_base_offsets(), vec![0, 2, 4]);
    assert_every_offset_found(&log);

    log.truncate_to(2).unwrap(); // a batch boundary
    assert_eq!(log.log_end_offset(), 2);
    assert_eq!(log.segment_base_offsets(), vec![0, 2]);
    let info = log.append(&batch(2, NOW_MS + 1), 0, NOW_MS).unwrap();
    assert_eq!(
        (info.first_offset, info.last_offset),
        (Offset::new(2), Offset::new(3))
    );
    assert_every_offset_found(&log);

    log.truncate_to(100).unwrap();
    assert_eq!(
        log.log_end_offset(),
        4,
        "truncating past the end does nothing"
    );
}

#[test]
fn truncate_below_the_first_segment_restarts_the_log() {
    let (_fixture, mut log) = hourly_log(LogConfig::default());
    log.delete_records_before(4).unwrap();
    log.truncate_to(1).unwrap();
    assert_eq!(log.segment_base_offsets(), vec![1]);
    assert_eq!((log.log_start_offset(), log.log_end_offset()), (1, 1));
    assert_eq!(
        log.append(&batch(1, NOW_MS), 0, NOW_MS)
            .unwrap()
            .first_offset,
        Offset::new(1)
    );
}

/// A broker that became leader wrote its epoch's start at its log end, then lost the
/// leadership before appending anything. As a follower, the new leader (which never
/// knew that epoch) answers its fetch with a diverging epoch ending at that same
/// offset; truncating there must forget the empty epoch, or the follower asks with
/// it again and again and never catches up (Kafka's `UnifiedLog.truncateTo`).
#[test]
fn truncating_at_the_log_end_forgets_an_epoch_that_starts_there() {
    let (_fixture, mut log) = hourly_log(LogConfig::default());
    log.assign_leader_epoch_start(4).unwrap();
    log.append(&batch(2, NOW_MS), 4, NOW_MS).unwrap();
    log.assign_leader_epoch_start(7).unwrap();
    assert_eq!(log.latest_epoch(), Some(7));
    let end = log.log_end_offset();

    log.truncate_to(end).unwrap();

    assert_eq!(log.log_end_offset(), end, "no record goes");
    assert_eq!(log.latest_epoch(), Some(4), "epoch 7 held no record");
    assert_eq!(log.end_offset_for_epoch(4), (4, end));
}
