//! Transactions on the log: markers byte for byte, fencing, the transaction index,
//! the first unstable offset and read_committed reads (Kafka's `collectAbortedTransactions`).

use std::fs;

use bytes::Bytes;
use kafka_protocol::records::RecordBatchDecoder;

use super::helpers::*;
use crate::log::{
    AbortedTxn, IsolationLevel, LogConfig, LogError, PartitionLog, TxnMarker,
    ABORTED_TXN_SIZE_BYTES,
};
use crate::types::{Offset, ProducerEpoch};

fn txn_batch(producer_id: i64, seq: i32, count: usize) -> Bytes {
    producer_batch(producer_id, 0, seq, count, true)
}

fn end_txn(log: &mut PartitionLog, producer_id: i64, commit: bool) -> i64 {
    log.append_txn_marker(&txn_marker(producer_id, 0, 1, commit), 0, NOW_MS)
        .unwrap()
        .get()
}

fn aborted(producer_id: i64, first: i64, last: i64, lso: i64) -> AbortedTxn {
    AbortedTxn {
        producer_id,
        first_offset: first,
        last_offset: last,
        last_stable_offset: lso,
    }
}

/// Bytes from hex digits; spaces are ignored.
fn hex(text: &str) -> Vec<u8> {
    let digits: Vec<u8> = text.bytes().filter(|b| !b.is_ascii_whitespace()).collect();
    digits
        .chunks(2)
        .map(|pair| u8::from_str_radix(std::str::from_utf8(pair).unwrap(), 16).unwrap())
        .collect()
}

#[test]
fn a_marker_is_written_byte_for_byte_as_kafka_writes_it() {
    let (_fixture, mut log) = Fixture::new(LogConfig::default());
    log.append(&txn_batch(42, 0, 2), 3, NOW_MS).unwrap();
    let marker = txn_marker(42, 1, 5, true);
    assert_eq!(
        log.append_txn_marker(&marker, 3, NOW_MS).unwrap(),
        Offset::new(2)
    );
    let stored = read_from(&log, 2);

    let mut expected = hex(&format!(
        "0000000000000002 00000042 00000003 02 00000000 0030 00000000 {ts:016x} {ts:016x}
         000000000000002a 0001 ffffffff 00000001
         20 00 00 00 08 0000 0001 0c 0000 00000005 00",
        ts = NOW_MS
    ));
    let crc = crc32c::crc32c(&expected[21..]);
    expected[17..21].copy_from_slice(&crc.to_be_bytes());
    assert_eq!(stored.to_vec(), expected);

    // An independent decoder reads it as Kafka's commit marker.
    let decoded = RecordBatchDecoder::decode(&mut stored.clone()).unwrap();
    let record = &decoded.records[0];
    assert!(record.control && record.transactional);
    assert_eq!(
        (record.producer_id, record.producer_epoch, record.offset),
        (42, 1, 2)
    );
    assert_eq!(record.key.as_deref(), Some(&hex("0000 0001")[..]));
    assert_eq!(record.value.as_deref(), Some(&hex("0000 00000005")[..]));

    // An abort marker differs only in its type (and CRC).
    log.append(&txn_batch(42, 0, 1), 3, NOW_MS).unwrap_err(); // epoch 0 is now fenced
    let abort = TxnMarker {
        commit: false,
        ..marker
    };
    let offset = log.append_txn_marker(&abort, 3, NOW_MS).unwrap();
    let stored = read_from(&log, offset.get());
    assert_eq!(
        &stored[stored.len() - 10..stored.len() - 8],
        &hex("0000")[..]
    );
}

#[test]
fn an_abort_is_indexed_in_kafkas_format_and_a_commit_is_not() {
    let (fixture, mut log) = Fixture::new(LogConfig::default());
    let index = fixture.segment_file(0, ".txnindex");
    log.append(&txn_batch(1, 0, 2), 0, NOW_MS).unwrap();
    assert_eq!(end_txn(&mut log, 1, true), 2);
    assert!(!index.exists(), "created with the first abort, as Kafka");
    log.append(&txn_batch(1, 2, 1), 0, NOW_MS).unwrap();
    assert_eq!(end_txn(&mut log, 1, false), 4);
    let bytes = fs::read(&index).unwrap();
    assert_eq!(bytes.len(), ABORTED_TXN_SIZE_BYTES);
    assert_eq!(
        bytes,
        hex("0000 0000000000000001 0000000000000003 0000000000000004 0000000000000005")
    );
    assert_eq!(log.aborted_transactions(0, 5), vec![aborted(1, 3, 4, 5)]);
}

#[test]
fn a_marker_ends_the_transaction_and_the_first_unstable_offset_follows() {
    let (_fixture, mut log) = Fixture::new(LogConfig::default());
    log.append(&txn_batch(1, 0, 2), 0, NOW_MS).unwrap(); // 0..=1
    log.append(&batch(1, NOW_MS), 0, NOW_MS).unwrap(); // 2
    log.append(&txn_batch(2, 0, 1), 0, NOW_MS).unwrap(); // 3
    assert!(log.has_ongoing_txn(1) && log.has_ongoing_txn(2));
    assert_eq!(log.first_unstable_offset(), Some(0));
    assert_eq!(log.last_stable_offset(4), 0);
    assert_eq!(
        log.producers()[0].current_txn_start_offset,
        Some(Offset::new(0))
    );

    // Aborting producer 1 while producer 2 is open records 2's start as the LSO.
    assert_eq!(end_txn(&mut log, 1, false), 4);
    assert!(!log.has_ongoing_txn(1));
    assert_eq!(log.first_unstable_offset(), Some(3));
    assert_eq!(log.last_stable_offset(5), 3);
    assert_eq!(log.last_stable_offset(2), 2, "capped by the high watermark");
    assert_eq!(end_txn(&mut log, 2, true), 5);
    assert_eq!(log.first_unstable_offset(), None);
    assert_eq!(log.last_stable_offset(6), 6);
    assert_eq!(log.aborted_transactions(0, 6), vec![aborted(1, 0, 4, 3)]);
}

#[test]
fn a_marker_without_a_transaction_is_written_and_indexes_nothing() {
    let (_fixture, mut log) = Fixture::new(LogConfig::default());
    assert_eq!(end_txn(&mut log, 9, false), 0);
    assert_eq!(log.log_end_offset(), 1);
    assert!(!log.has_ongoing_txn(9));
    assert!(log.aborted_transactions(0, 1).is_empty());
    let p = log.producers()[0];
    assert_eq!(
        (
            p.producer_id,
            p.coordinator_epoch,
            p.current_txn_start_offset
        ),
        (9, 1, None)
    );
}

#[test]
fn markers_are_fenced_by_producer_and_coordinator_epochs() {
    let (_fixture, mut log) = Fixture::new(LogConfig::default());
    log.append(&producer_batch(1, 3, 0, 1, true), 0, NOW_MS)
        .unwrap();
    let stale = txn_marker(1, 2, 1, true);
    assert_err!(
        log.append_txn_marker(&stale, 0, NOW_MS),
        LogError::InvalidProducerEpoch(_)
    );

    let current = TxnMarker {
        producer_epoch: ProducerEpoch::new(3),
        coordinator_epoch: 7,
        ..stale
    };
    log.append_txn_marker(&current, 0, NOW_MS).unwrap();
    log.append(&producer_batch(1, 3, 1, 1, true), 0, NOW_MS)
        .unwrap();
    let zombie = TxnMarker {
        coordinator_epoch: 6,
        ..current
    };
    assert_err!(
        log.append_txn_marker(&zombie, 0, NOW_MS),
        LogError::TransactionCoordinatorFenced(_)
    );
    assert_eq!(log.log_end_offset(), 3, "a fenced marker writes nothing");
    assert!(log.has_ongoing_txn(1));

    // A coordinator that bumped the epoch aborts with the new one: the old epoch's
    // batches are forgotten and the new epoch starts at sequence 0.
    let bumped = TxnMarker {
        producer_epoch: ProducerEpoch::new(4),
        commit: false,
        ..current
    };
    log.append_txn_marker(&bumped, 0, NOW_MS).unwrap();
    assert_err!(
        log.append(&producer_batch(1, 4, 2, 1, false), 0, NOW_MS),
        LogError::OutOfOrderSequence(_)
    );
    log.append(&producer_batch(1, 4, 0, 1, false), 0, NOW_MS)
        .unwrap();
}

#[test]
fn writes_must_match_the_transaction_state() {
    let (_fixture, mut log) = Fixture::new(LogConfig::default());
    log.append(&txn_batch(1, 0, 1), 0, NOW_MS).unwrap();
    let error = log
        .append(&producer_batch(1, 0, 1, 1, false), 0, NOW_MS)
        .unwrap_err();
    assert!(matches!(error, LogError::InvalidTxnState(_)), "{error:?}");
    assert_eq!(log.log_end_offset(), 1);
    // More of the transaction is fine, and a retry of it is a duplicate.
    log.append(&txn_batch(1, 1, 1), 0, NOW_MS).unwrap();
    let retry = log.append(&txn_batch(1, 1, 1), 0, NOW_MS).unwrap();
    assert!(retry.duplicate);
    assert_eq!(retry.first_offset, Offset::new(1));
    end_txn(&mut log, 1, true);
    // After the marker, idempotent writes continue the sequence.
    log.append(&producer_batch(1, 0, 2, 1, false), 0, NOW_MS)
        .unwrap();
}

#[test]
fn read_committed_stops_at_the_last_stable_offset_and_lists_the_aborts_read() {
    let (_fixture, mut log) = Fixture::new(LogConfig::default());
    log.append(&txn_batch(1, 0, 2), 0, NOW_MS).unwrap(); // 0..=1
    log.append(&txn_batch(2, 0, 1), 0, NOW_MS).unwrap(); // 2
    end_txn(&mut log, 1, false); // 3, LSO left at 2
    log.append(&batch(1, NOW_MS), 0, NOW_MS).unwrap(); // 4
    let hw = log.log_end_offset();
    let committed = |log: &PartitionLog, offset| {
        let read = log
            .read_isolated(offset, usize::MAX, hw, true, IsolationLevel::ReadCommitted)
            .unwrap();
        let bases: Vec<i64> = match read.records {
            Some(slice) => headers(&slice.read().unwrap())
                .iter()
                .map(|h| h.base_offset)
                .collect(),
            None => Vec::new(),
        };
        (bases, read.aborted_transactions.unwrap())
    };
    assert_eq!(committed(&log, 0), (vec![0], vec![aborted(1, 0, 3, 2)]));
    assert_eq!(
        committed(&log, 2),
        (vec![], vec![]),
        "at the LSO: nothing yet"
    );

    end_txn(&mut log, 2, true); // 5
    let hw = log.log_end_offset();
    let committed = |offset| {
        let read = log
            .read_isolated(offset, usize::MAX, hw, true, IsolationLevel::ReadCommitted)
            .unwrap();
        let slice = read.records.unwrap();
        (
            headers(&slice.read().unwrap()).len(),
            read.aborted_transactions.unwrap(),
        )
    };
    assert_eq!(committed(0), (5, vec![aborted(1, 0, 3, 2)]));
    assert_eq!(
        committed(3),
        (3, vec![aborted(1, 0, 3, 2)]),
        "the marker itself"
    );
    assert_eq!(committed(4), (2, vec![]));

    let uncommitted = log
        .read_isolated(0, usize::MAX, hw, true, IsolationLevel::ReadUncommitted)
        .unwrap();
    assert_eq!(uncommitted.aborted_transactions, None);
}

#[test]
fn aborted_transactions_are_found_across_segments() {
    // One batch per segment.
    let (_fixture, mut log) = Fixture::new(segments_of(100));
    log.append(&txn_batch(1, 0, 1), 0, NOW_MS).unwrap(); // 0
    log.append(&txn_batch(2, 0, 1), 0, NOW_MS).unwrap(); // 1
    log.append(&batch(1, NOW_MS), 0, NOW_MS).unwrap(); // 2
    end_txn(&mut log, 1, false); // 3: LSO 1 (producer 2 open)
    log.append(&txn_batch(3, 0, 1), 0, NOW_MS).unwrap(); // 4
    end_txn(&mut log, 2, false); // 5: LSO 4 (producer 3 open)
    log.append(&batch(1, NOW_MS), 0, NOW_MS).unwrap(); // 6
    end_txn(&mut log, 3, false); // 7: LSO 8
    assert!(log.segment_count() >= 8);
    let first = aborted(1, 0, 3, 1);
    let second = aborted(2, 1, 5, 4);
    let third = aborted(3, 4, 7, 8);
    assert_eq!(log.aborted_transactions(0, 8), vec![first, second, third]);
    // A fetch from offset 2 still learns of both transactions open there.
    assert_eq!(log.aborted_transactions(2, 3), vec![first, second]);
    // Kafka stops at the first entry whose LSO reaches the bound: 1 >= 1.
    assert_eq!(log.aborted_transactions(0, 1), vec![first]);
    assert_eq!(log.aborted_transactions(4, 5), vec![second, third]);
    assert_eq!(log.aborted_transactions(6, 8), vec![third]);
    assert!(log.aborted_transactions(8, 9).is_empty());

    // read_committed over the segment of offset 2 bounds the search by what it read.
    let read = log
        .read_isolated(2, usize::MAX, 8, true, IsolationLevel::ReadCommitted)
        .unwrap();
    assert_eq!(read.aborted_transactions.unwrap(), vec![first, second]);
}

/// KIP-890's guard: the first batch of a transaction needs the verification
/// taken before its coordinator was asked, still held. A marker ends the
/// verification (the coordinator vouched for the transaction the marker
/// ended), so a produce verified before it cannot open a transaction after it;
/// a batch of a transaction open here needs none.
#[test]
fn a_verified_first_batch_needs_its_guard_still_held() {
    let (_fixture, mut log) = Fixture::new(LogConfig::default());
    let stale = log
        .start_txn_verification(7, NOW_MS)
        .expect("no transaction open");
    assert_eq!(
        log.start_txn_verification(7, NOW_MS),
        Some(stale),
        "one verification at a time"
    );
    end_txn(&mut log, 7, false);
    assert!(matches!(
        log.append_verified(&txn_batch(7, 0, 2), 0, NOW_MS, Some(stale)),
        Err(LogError::InvalidTxnState(_))
    ));
    assert!(matches!(
        log.append_verified(&txn_batch(7, 0, 2), 0, NOW_MS, None),
        Err(LogError::InvalidTxnState(_))
    ));
    let end = log.log_end_offset();
    assert!(!log.has_ongoing_txn(7), "nothing was written");

    let guard = log
        .start_txn_verification(7, NOW_MS)
        .expect("no transaction open");
    assert_ne!(guard, stale);
    log.append_verified(&txn_batch(7, 0, 2), 0, NOW_MS, Some(guard))
        .unwrap();
    assert!(log.has_ongoing_txn(7));
    assert_eq!(
        log.start_txn_verification(7, NOW_MS),
        None,
        "the transaction is open here"
    );
    log.append_verified(&txn_batch(7, 2, 1), 0, NOW_MS, None)
        .unwrap();
    assert_eq!(log.log_end_offset(), end + 3);
    // The first batch let the guard go: after the marker it verifies nothing.
    end_txn(&mut log, 7, true);
    assert!(matches!(
        log.append_verified(&txn_batch(7, 3, 1), 0, NOW_MS, Some(guard)),
        Err(LogError::InvalidTxnState(_))
    ));
}

/// A producer that aborts with batches it was told failed (NOT_LEADER after
/// the append, say) drops them and reuses their sequence numbers in its next
/// transaction, in the same epoch. Answered as a duplicate, the next
/// transaction's batch would count as written while the log holds only the
/// aborted one: refused as out of order instead (Java's producer then bumps
/// its epoch; librdkafka's fails its instance), while a retry inside the
/// transaction that wrote the batch is still a duplicate.
#[test]
fn a_batch_repeating_one_of_an_ended_transaction_is_out_of_order() {
    let (_fixture, mut log) = Fixture::new(LogConfig::default());
    let first = log.append(&txn_batch(7, 0, 3), 0, NOW_MS).unwrap();
    let retry = log.append(&txn_batch(7, 0, 3), 0, NOW_MS).unwrap();
    assert!(retry.duplicate, "a retry inside its own transaction");
    assert_eq!(retry.first_offset, first.first_offset);
    end_txn(&mut log, 7, false);
    let end = log.log_end_offset();
    assert!(matches!(
        log.append(&txn_batch(7, 0, 3), 0, NOW_MS),
        Err(LogError::OutOfOrderSequence(_))
    ));
    assert_eq!(log.log_end_offset(), end, "nothing written");
    // The sequence after the aborted batch opens the next transaction.
    log.append(&txn_batch(7, 3, 2), 0, NOW_MS).unwrap();
    assert!(log.has_ongoing_txn(7));
}
