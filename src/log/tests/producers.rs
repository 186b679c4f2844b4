//! Idempotent producers on append, rule by rule as Kafka's `ProducerAppendInfo` and
//! `UnifiedLog.analyzeAndValidateProducerState` decide them.

use bytes::Bytes;

use super::helpers::*;
use crate::log::{LogConfig, LogError, PartitionLog};
use crate::types::{Offset, ProducerEpoch};

const PID: i64 = 1000;

fn append(log: &mut PartitionLog, records: &Bytes) -> Result<(i64, i64, bool), LogError> {
    log.append(records, 0, NOW_MS).map(|info| {
        (
            info.first_offset.get(),
            info.last_offset.get(),
            info.duplicate,
        )
    })
}

fn idempotent(epoch: i16, seq: i32, count: usize) -> Bytes {
    producer_batch(PID, epoch, seq, count, false)
}

#[test]
fn sequences_continue_and_the_state_records_them() {
    let (_fixture, mut log) = Fixture::new(LogConfig::default());
    assert_eq!(
        append(&mut log, &idempotent(0, 0, 3)).unwrap(),
        (0, 2, false)
    );
    assert_eq!(
        append(&mut log, &idempotent(0, 3, 2)).unwrap(),
        (3, 4, false)
    );
    let producers = log.producers();
    assert_eq!(producers.len(), 1);
    let p = producers[0];
    assert_eq!(
        (
            p.producer_id,
            p.producer_epoch,
            p.last_sequence,
            p.last_timestamp
        ),
        (PID, ProducerEpoch::new(0), 4, NOW_MS)
    );
    assert_eq!(
        (p.coordinator_epoch, p.current_txn_start_offset),
        (-1, None)
    );
}

#[test]
fn a_retried_batch_is_answered_with_its_first_offsets_and_not_written() {
    let (_fixture, mut log) = Fixture::new(LogConfig::default());
    append(&mut log, &batch(2, NOW_MS)).unwrap(); // a plain producer's records first
    for seq in (0..15).step_by(3) {
        append(&mut log, &idempotent(0, seq, 3)).unwrap();
    }
    let end = log.log_end_offset();
    let size = log.size_bytes();
    // Each of the last five batches, retried, gets its own offsets back.
    for (i, seq) in (0..15).step_by(3).enumerate() {
        let first = 2 + 3 * i as i64;
        assert_eq!(
            append(&mut log, &idempotent(0, seq, 3)).unwrap(),
            (first, first + 2, true),
            "retry of sequence {seq}"
        );
    }
    assert_eq!((log.log_end_offset(), log.size_bytes()), (end, size));
    assert_eq!(all_batches(&log).len(), 6, "nothing new was written");
}

#[test]
fn a_duplicate_reports_its_stored_timestamp_as_kafka_does() {
    let (_fixture, mut log) = Fixture::new(log_append_time());
    let first = log.append(&idempotent(0, 0, 1), 0, NOW_MS + 5).unwrap();
    assert_eq!(first.log_append_time, NOW_MS + 5);
    let retry = log.append(&idempotent(0, 0, 1), 0, NOW_MS + 9).unwrap();
    assert!(retry.duplicate);
    assert_eq!(
        (retry.first_offset, retry.log_append_time),
        (Offset::new(0), NOW_MS + 5)
    );
}

#[test]
fn only_the_last_five_batches_are_remembered() {
    let (_fixture, mut log) = Fixture::new(LogConfig::default());
    for seq in 0..6 {
        append(&mut log, &idempotent(0, seq, 1)).unwrap();
    }
    // Sequence 0 fell out of the window: not a duplicate, and out of order.
    assert_err!(
        append(&mut log, &idempotent(0, 0, 1)),
        LogError::OutOfOrderSequence(_)
    );
    assert_eq!(
        append(&mut log, &idempotent(0, 1, 1)).unwrap(),
        (1, 1, true)
    );
}

#[test]
fn a_sequence_gap_is_out_of_order_and_writes_nothing() {
    let (_fixture, mut log) = Fixture::new(LogConfig::default());
    append(&mut log, &idempotent(0, 0, 2)).unwrap();
    for seq in [3, 1, 5] {
        let error = append(&mut log, &idempotent(0, seq, 2)).unwrap_err();
        assert!(
            matches!(error, LogError::OutOfOrderSequence(_)),
            "seq {seq}: {error:?}"
        );
    }
    assert_eq!(log.log_end_offset(), 2);
    assert_eq!(log.producers()[0].last_sequence, 1);
}

#[test]
fn sequences_wrap_at_i32_max() {
    let (_fixture, mut log) = Fixture::new(LogConfig::default());
    // An unknown producer may start anywhere: here two records before the wrap.
    append(&mut log, &idempotent(0, i32::MAX - 1, 2)).unwrap();
    assert_eq!(log.producers()[0].last_sequence, i32::MAX);
    append(&mut log, &idempotent(0, 0, 1)).unwrap();
    assert_eq!(log.producers()[0].last_sequence, 0);
    // A batch spanning the wrap: last sequence 1 after base i32::MAX... from 1 on.
    let (_fixture2, mut log2) = Fixture::new(LogConfig::default());
    append(&mut log2, &idempotent(0, i32::MAX, 3)).unwrap();
    assert_eq!(log2.producers()[0].last_sequence, 1);
    assert_eq!(
        append(&mut log2, &idempotent(0, i32::MAX, 3)).unwrap(),
        (0, 2, true)
    );
    append(&mut log2, &idempotent(0, 2, 1)).unwrap();
}

#[test]
fn an_unknown_producer_may_start_at_any_sequence() {
    let (_fixture, mut log) = Fixture::new(LogConfig::default());
    append(&mut log, &idempotent(3, 42, 1)).unwrap();
    append(&mut log, &idempotent(3, 43, 1)).unwrap();
    assert_eq!(log.producers()[0].last_sequence, 43);
}

#[test]
fn a_new_epoch_must_start_at_sequence_zero() {
    let (_fixture, mut log) = Fixture::new(LogConfig::default());
    append(&mut log, &idempotent(0, 0, 2)).unwrap();
    assert_err!(
        append(&mut log, &idempotent(1, 5, 1)),
        LogError::OutOfOrderSequence(_)
    );
    append(&mut log, &idempotent(1, 0, 1)).unwrap();
    let p = log.producers()[0];
    assert_eq!(
        (p.producer_epoch, p.last_sequence),
        (ProducerEpoch::new(1), 0)
    );
    // The old epoch's batches are forgotten: a retry of one is now fenced.
    assert_err!(
        append(&mut log, &idempotent(0, 0, 2)),
        LogError::InvalidProducerEpoch(_)
    );
}

#[test]
fn a_stale_epoch_is_fenced() {
    let (_fixture, mut log) = Fixture::new(LogConfig::default());
    append(&mut log, &idempotent(5, 0, 1)).unwrap();
    assert_err!(
        append(&mut log, &idempotent(4, 1, 1)),
        LogError::InvalidProducerEpoch(_)
    );
    assert_eq!(log.log_end_offset(), 1);
}

#[test]
fn an_append_is_all_or_nothing_across_batches_and_producers() {
    let (_fixture, mut log) = Fixture::new(LogConfig::default());
    append(&mut log, &idempotent(0, 0, 1)).unwrap();
    // A good batch of another producer, then a gap of this one: nothing is written,
    // and the other producer is not remembered.
    let mut records = producer_batch(7, 0, 0, 2, false).to_vec();
    records.extend_from_slice(&idempotent(0, 9, 1));
    assert_err!(
        append(&mut log, &Bytes::from(records)),
        LogError::OutOfOrderSequence(_)
    );
    assert_eq!(log.log_end_offset(), 1);
    assert_eq!(log.producers().len(), 1);
    // Two batches of one producer in one append continue each other.
    let mut records = idempotent(0, 1, 2).to_vec();
    records.extend_from_slice(&idempotent(0, 3, 1));
    assert_eq!(
        append(&mut log, &Bytes::from(records)).unwrap(),
        (1, 3, false)
    );
    assert_eq!(log.producers()[0].last_sequence, 3);
}

#[test]
fn control_batches_and_missing_sequences_from_clients_are_invalid_records() {
    let (_fixture, mut log) = Fixture::new(LogConfig::default());
    let mut control = idempotent(0, 0, 1).to_vec();
    control[21..23].copy_from_slice(&0x30i16.to_be_bytes());
    let crc = crate::log::batch::compute_crc(&control);
    control[17..21].copy_from_slice(&crc.to_be_bytes());
    assert_err!(
        append(&mut log, &Bytes::from(control)),
        LogError::InvalidRecord(_)
    );

    assert_err!(
        append(&mut log, &idempotent(0, -1, 1)),
        LogError::InvalidRecord(_)
    );
    assert_eq!(log.log_end_offset(), 0);
}

#[test]
fn plain_producers_leave_no_state() {
    let (_fixture, mut log) = Fixture::new(LogConfig::default());
    append(&mut log, &batch(3, NOW_MS)).unwrap();
    append(&mut log, &batch(3, NOW_MS)).unwrap();
    assert!(log.producers().is_empty());
    assert_eq!(log.first_unstable_offset(), None);
}

#[test]
fn idle_producers_expire_but_not_inside_a_transaction() {
    let (_fixture, mut log) = Fixture::new(LogConfig::default());
    append(&mut log, &idempotent(0, 0, 1)).unwrap();
    append(&mut log, &producer_batch(2, 0, 0, 1, true)).unwrap();
    let expiration_ms = 1000;
    assert_eq!(
        log.remove_expired_producers(NOW_MS + expiration_ms - 1, expiration_ms),
        0
    );
    assert_eq!(
        log.remove_expired_producers(NOW_MS + expiration_ms, expiration_ms),
        1
    );
    let left: Vec<i64> = log.producers().iter().map(|p| p.producer_id).collect();
    assert_eq!(left, vec![2]);
    // The forgotten producer is unknown again: any sequence is accepted.
    append(&mut log, &idempotent(0, 17, 1)).unwrap();
}
