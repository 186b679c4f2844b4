//! ListOffsets by timestamp and KIP-734 max timestamp, including a gzip batch.

use bytes::{Bytes, BytesMut};
use kafka_protocol::records::{
    Compression, Record, RecordBatchEncoder, RecordEncodeOptions,
    TimestampType as RecordTimestampType,
};

use super::helpers::*;
use crate::log::{LogConfig, PartitionLog};

/// A gzip batch encoded as a Kafka client would, one record per timestamp.
fn gzip_batch(timestamps: &[i64]) -> Bytes {
    let records: Vec<Record> = timestamps
        .iter()
        .enumerate()
        .map(|(i, &timestamp)| Record {
            transactional: false,
            control: false,
            delete_horizon: false,
            partition_leader_epoch: -1,
            producer_id: -1,
            producer_epoch: -1,
            timestamp_type: RecordTimestampType::Creation,
            offset: i as i64,
            // The encoder groups records into one batch only when sequences follow offsets.
            sequence: i as i32,
            timestamp,
            key: None,
            value: Some(Bytes::from(vec![b'z'; 200])),
            headers: Default::default(),
        })
        .collect();
    let mut out = BytesMut::new();
    let options = RecordEncodeOptions {
        version: 2,
        compression: Compression::Gzip,
    };
    RecordBatchEncoder::encode(&mut out, &records, &options).unwrap();
    out.freeze()
}

/// Timestamps T+0..: segment boundaries fall between batches; one batch holds
/// out-of-order timestamps; the last is gzip.
fn timed_log() -> (Fixture, PartitionLog) {
    let (fixture, mut log) = Fixture::new(indexed(250, 100));
    let t = NOW_MS;
    log.append(&Bytes::from(batch_with(&[t, t + 10, t + 20], 10)), 0, t)
        .unwrap(); // 0..=2
    log.append(
        &Bytes::from(batch_with(&[t + 30, t + 50, t + 40], 10)),
        0,
        t,
    )
    .unwrap(); // 3..=5
    log.append(&batch(2, t + 60), 0, t).unwrap(); // 6..=7
    log.append(&batch(2, t + 70), 0, t).unwrap(); // 8..=9
    log.append(&gzip_batch(&[t + 80, t + 95, t + 90]), 0, t)
        .unwrap(); // 10..=12
    assert!(
        log.segment_count() >= 3,
        "segments: {:?}",
        log.segment_base_offsets()
    );
    (fixture, log)
}

#[test]
fn offset_for_timestamp_finds_the_first_record_at_or_after() {
    let (_fixture, log) = timed_log();
    let t = NOW_MS;
    let cases = [
        (t - 1_000, Some((0, t))),   // before everything
        (t, Some((0, t))),           // exact, first record
        (t + 15, Some((2, t + 20))), // between records of one batch
        (t + 35, Some((4, t + 50))), // out of order: first in offset order wins
        (t + 45, Some((4, t + 50))),
        (t + 60, Some((6, t + 60))), // first record of a later segment
        (t + 65, Some((8, t + 70))),
        (t + 85, Some((11, t + 95))), // inside the gzip batch
        (t + 95, Some((11, t + 95))),
        (t + 96, None), // after everything
    ];
    for (target, expected) in cases {
        assert_eq!(
            log.offset_for_timestamp(target).unwrap(),
            expected,
            "target T+{}",
            target - t
        );
    }
}

#[test]
fn offset_for_timestamp_respects_the_log_start_offset() {
    let (_fixture, mut log) = timed_log();
    log.delete_records_before(1).unwrap();
    assert_eq!(
        log.offset_for_timestamp(NOW_MS).unwrap(),
        Some((1, NOW_MS + 10))
    );
}

#[test]
fn max_timestamp_offset_names_the_record() {
    let (_fixture, log) = timed_log();
    assert_eq!(log.max_timestamp_offset().unwrap(), Some((11, NOW_MS + 95)));
    let (_fixture, empty) = Fixture::new(LogConfig::default());
    assert_eq!(empty.max_timestamp_offset().unwrap(), None);
    assert_eq!(empty.offset_for_timestamp(0).unwrap(), None);
}

#[test]
fn timestamp_lookups_survive_a_clean_restart() {
    let (mut fixture, log) = timed_log();
    let log = fixture.restart_clean(log);
    assert_eq!(log.max_timestamp_offset().unwrap(), Some((11, NOW_MS + 95)));
    assert_eq!(
        log.offset_for_timestamp(NOW_MS + 35).unwrap(),
        Some((4, NOW_MS + 50))
    );
    assert_eq!(
        log.offset_for_timestamp(NOW_MS + 85).unwrap(),
        Some((11, NOW_MS + 95))
    );
}

/// A batch as sarama 1.22 writes it: every record timed, but maxTimestamp -1 in
/// the header (the CRC recomputed over that header, so it is valid).
fn without_max_timestamp(mut batch: Vec<u8>) -> Bytes {
    const MAX_TIMESTAMP_AT: usize = 35;
    batch[MAX_TIMESTAMP_AT..MAX_TIMESTAMP_AT + 8].copy_from_slice(&(-1i64).to_be_bytes());
    let crc = crate::log::batch::compute_crc(&batch);
    batch[17..21].copy_from_slice(&crc.to_be_bytes());
    Bytes::from(batch)
}

/// Kafka takes a CreateTime batch's maxTimestamp from its records on append; so
/// does the log when the header's is below the base timestamp, plain or
/// compressed: the stored header, the time index and ListOffsets all see it, and
/// still do after a restart.
#[test]
fn a_batch_without_a_max_timestamp_gets_its_records_newest() {
    let (mut fixture, mut log) = Fixture::new(LogConfig::default());
    let t = NOW_MS;
    log.append(
        &without_max_timestamp(batch_with(&[t, t + 200, t + 100], 10)),
        0,
        t,
    )
    .unwrap(); // 0..=2
    let gzip = gzip_batch(&[t + 300, t + 500, t + 400]).to_vec();
    log.append(&without_max_timestamp(gzip), 0, t).unwrap(); // 3..=5
    let stored: Vec<i64> = all_batches(&log).iter().map(|h| h.max_timestamp).collect();
    assert_eq!(stored, vec![t + 200, t + 500]);
    let bytes = read_from(&log, 0);
    let mut position = 0;
    for header in headers(&bytes) {
        let whole = &bytes[position..position + header.size_bytes()];
        crate::log::batch::check_crc(whole, &header).expect("the rewritten header's CRC");
        position += header.size_bytes();
    }
    let check = |log: &PartitionLog| {
        assert_eq!(
            log.offset_for_timestamp(t + 150).unwrap(),
            Some((1, t + 200))
        );
        assert_eq!(
            log.offset_for_timestamp(t + 450).unwrap(),
            Some((4, t + 500))
        );
        assert_eq!(log.max_timestamp_offset().unwrap(), Some((4, t + 500)));
    };
    check(&log);
    let log = fixture.restart_clean(log);
    check(&log);
    let log = fixture.restart_after_crash(log);
    check(&log);
}
