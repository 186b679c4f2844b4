//! The bounded cache of idle segment files: a log of many segments keeps its
//! active segment's file open and those of segments not yet fsynced, and
//! reads, restarts, truncations and transaction indexes work through files
//! the cache closed. (Every fixture's cache holds `FIXTURE_IDLE_SEGMENT_FILES`
//! files, so the other engine tests run through it too.)

use std::fs;

use super::helpers::*;
use crate::limits::UNSYNCED_SEGMENT_FILES_OPEN_MAX;
use crate::log::{LogConfig, PartitionLog, ABORTED_TXN_SIZE_BYTES, TXN_INDEX_FILE_SUFFIX};

const SEGMENTS: usize = 200;

/// One batch per segment: two of them do not fit in one.
fn one_batch_per_segment() -> LogConfig {
    segments_of(2 * batch(1, NOW_MS).len() as u64 - 1)
}

fn append_batches(log: &mut PartitionLog, count: usize) {
    for _ in 0..count {
        log.append(&batch(1, NOW_MS), 0, NOW_MS).unwrap();
    }
}

#[test]
fn a_log_of_many_segments_keeps_its_active_and_unsynced_segments_open_and_no_more() {
    let (mut fixture, mut log) = Fixture::new(one_batch_per_segment());
    append_batches(&mut log, SEGMENTS);
    assert_eq!(log.segment_base_offsets().len(), SEGMENTS);
    // Nothing was fsynced yet: the newest rolled segments keep their files
    // open until then, a bounded number of them.
    assert_eq!(log.pinned_segments(), 1 + UNSYNCED_SEGMENT_FILES_OPEN_MAX);
    log.flush().unwrap();
    assert_eq!(log.pinned_segments(), 1, "only the active segment");
    let cache = fixture.log_dir.open_files().stats();
    assert_eq!(cache.cached, FIXTURE_IDLE_SEGMENT_FILES);

    // Every offset is read, each segment's file opened again for it.
    assert_every_offset_found(&log);
    assert_eq!(all_batches(&log).len(), SEGMENTS);
    let cache = fixture.log_dir.open_files().stats();
    assert!(cache.opened >= SEGMENTS as u64 - 1, "{cache:?}");
    assert_eq!(cache.cached, FIXTURE_IDLE_SEGMENT_FILES);

    // A clean restart loads it all within the cache.
    let mut log = fixture.restart_clean(log);
    assert_eq!(log.pinned_segments(), 1);
    assert_eq!(
        fixture.log_dir.open_files().stats().cached,
        FIXTURE_IDLE_SEGMENT_FILES
    );
    assert_every_offset_found(&log);

    // So does a crash, with unsynced segments recovered (and fsynced) on load.
    append_batches(&mut log, 20);
    let log = fixture.restart_after_crash(log);
    assert_eq!(log.log_end_offset(), SEGMENTS as i64 + 20);
    assert_eq!(log.pinned_segments(), 1);
    assert_every_offset_found(&log);
}

#[test]
fn appends_after_a_truncation_into_a_closed_segment_go_to_its_file() {
    let (mut fixture, mut log) = Fixture::new(one_batch_per_segment());
    append_batches(&mut log, 10);
    log.flush().unwrap();
    // Offset 3's segment was idle and its file closed; it becomes the active one.
    log.truncate_to(4).unwrap();
    assert_eq!(log.log_end_offset(), 4);
    assert_eq!(log.pinned_segments(), 1);
    append_batches(&mut log, 3);
    assert_eq!(all_batches(&log).len(), 7);
    let log = fixture.restart_after_crash(log);
    assert_eq!(log.log_end_offset(), 7);
    assert_every_offset_found(&log);
}

#[test]
fn a_closed_transaction_index_is_truncated_with_its_segment() {
    let (mut fixture, mut log) = Fixture::new(one_batch_per_segment());
    log.append(&producer_batch(7, 0, 0, 1, true), 0, NOW_MS)
        .unwrap();
    let marker = txn_marker(7, 0, 1, false);
    let marker_offset = log.append_txn_marker(&marker, 0, NOW_MS).unwrap();
    append_batches(&mut log, 5);
    log.flush().unwrap();
    let segment = log
        .segment_base_offsets()
        .into_iter()
        .rev()
        .find(|&base| base <= marker_offset.get())
        .unwrap();
    let txn_index = fixture.segment_file(segment, TXN_INDEX_FILE_SUFFIX);
    assert_eq!(
        fs::metadata(&txn_index).unwrap().len(),
        ABORTED_TXN_SIZE_BYTES as u64
    );
    assert_eq!(log.pinned_segments(), 1, "the marker's segment is idle");
    log.truncate_to(marker_offset.get()).unwrap();
    assert_eq!(fs::metadata(&txn_index).unwrap().len(), 0);
    let log = fixture.restart_after_crash(log);
    assert_eq!(log.log_end_offset(), marker_offset.get());
    assert!(log.segment_base_offsets().len() <= 2);
}
