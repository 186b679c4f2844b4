//! Fetch reads: index lookups at every boundary, max_bytes, min_one_batch, max_offset.

use super::helpers::*;
use crate::log::{LogError, PartitionLog};
use crate::types::Offset;

/// Small segments and a dense index, so every kind of boundary appears: batches of 1
/// to 4 records, several index entries per segment, several segments.
fn indexed_log() -> (Fixture, PartitionLog) {
    let (fixture, mut log) = Fixture::new(indexed(1_000, 150));
    for i in 0..40 {
        log.append(&batch(1 + i % 4, NOW_MS + i as i64), 0, NOW_MS)
            .unwrap();
    }
    (fixture, log)
}

#[test]
fn every_offset_is_found_across_segments_and_index_entries() {
    let (fixture, mut log) = indexed_log();
    assert!(
        log.segment_count() >= 4,
        "segments: {:?}",
        log.segment_base_offsets()
    );
    let index_len = || {
        std::fs::metadata(fixture.segment_file(0, ".index"))
            .unwrap()
            .len()
    };
    assert_eq!(index_len(), 0, "index entries reach the file at a flush");
    log.flush().unwrap();
    assert!(
        index_len() >= 16,
        "the first segment holds several index entries"
    );
    assert_every_offset_found(&log);

    // The first offset of each segment starts a read of that segment.
    for base in log.segment_base_offsets() {
        let bytes = read_from(&log, base);
        assert_eq!(headers(&bytes)[0].base_offset, base);
    }
}

#[test]
fn fetch_bounds_at_and_past_the_log_ends() {
    let (_fixture, mut log) = indexed_log();
    let log_end_offset = log.log_end_offset();
    let at_end = log
        .read(log_end_offset, usize::MAX, i64::MAX, true)
        .unwrap();
    assert!(at_end.records.is_none());
    assert_eq!(
        (at_end.log_start_offset, at_end.log_end_offset),
        (Offset::new(0), Offset::new(log_end_offset))
    );

    let past = log
        .read(log_end_offset + 1, usize::MAX, i64::MAX, true)
        .unwrap_err();
    assert!(
        matches!(past, LogError::OffsetOutOfRange { log_start_offset: 0, log_end_offset: end } if end == log_end_offset)
    );

    log.delete_records_before(5).unwrap();
    let below = log.read(4, usize::MAX, i64::MAX, true).unwrap_err();
    assert!(matches!(
        below,
        LogError::OffsetOutOfRange {
            log_start_offset: 5,
            ..
        }
    ));
    // The batch holding the log start offset is served whole.
    let bytes = log
        .read(5, 1, i64::MAX, true)
        .unwrap()
        .records
        .unwrap()
        .read()
        .unwrap();
    let first = headers(&bytes)[0];
    assert!(first.base_offset <= 5 && 5 <= first.last_offset());
}

#[test]
fn max_bytes_returns_the_whole_batches_that_fit() {
    let (_fixture, log) = indexed_log();
    let sizes: Vec<usize> = all_batches(&log)
        .iter()
        .take(4)
        .map(|h| h.size_bytes())
        .collect();
    let two = sizes[0] + sizes[1];
    for max_bytes in [two, two + 1, two + sizes[2] - 1] {
        let slice = log
            .read(0, max_bytes, i64::MAX, false)
            .unwrap()
            .records
            .unwrap();
        assert_eq!(slice.len, two, "max_bytes {max_bytes}");
        assert_eq!(headers(&slice.read().unwrap()).len(), 2);
    }
}

#[test]
fn min_one_batch_lets_an_oversized_first_batch_through() {
    let (_fixture, log) = indexed_log();
    let first = all_batches(&log)[0].size_bytes();
    assert!(log
        .read(0, first - 1, i64::MAX, false)
        .unwrap()
        .records
        .is_none());
    let slice = log
        .read(0, first - 1, i64::MAX, true)
        .unwrap()
        .records
        .unwrap();
    assert_eq!(slice.len, first, "exactly the first batch, whole");
    let slice = log.read(0, 0, i64::MAX, true).unwrap().records.unwrap();
    assert_eq!(slice.len, first);
}

#[test]
fn reads_stop_below_max_offset() {
    let (_fixture, log) = indexed_log();
    let batches = all_batches(&log);
    let high_watermark = batches[5].base_offset;
    let bytes = log
        .read(0, usize::MAX, high_watermark, true)
        .unwrap()
        .records
        .unwrap()
        .read()
        .unwrap();
    let served = headers(&bytes);
    assert_eq!(served.last().unwrap().last_offset() + 1, high_watermark);
    assert!(log
        .read(high_watermark, usize::MAX, high_watermark, true)
        .unwrap()
        .records
        .is_none());
    // A batch holding the bound is not served, even when the fetch starts inside it.
    let holding = batches[5];
    assert!(holding.records_count > 1);
    let bound = holding.base_offset + 1;
    assert!(log
        .read(holding.base_offset, usize::MAX, bound, true)
        .unwrap()
        .records
        .is_none());
}

#[test]
fn a_read_is_served_from_one_segment() {
    let (_fixture, log) = indexed_log();
    let bases = log.segment_base_offsets();
    let bytes = read_from(&log, 0);
    assert_eq!(headers(&bytes).last().unwrap().last_offset() + 1, bases[1]);
}
