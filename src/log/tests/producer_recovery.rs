//! Producer state across restarts, truncation and retention: snapshots, the replay
//! that rebuilds what they do not hold, and the transaction indexes beside them.

use std::fs::{self, OpenOptions};
use std::path::PathBuf;

use super::helpers::*;
use crate::log::{AbortedTxn, IsolationLevel, LogConfig, LogError, PartitionLog};
use crate::types::Offset;

/// Small segments: every batch or two rolls one.
fn small_segments() -> LogConfig {
    segments_of(200)
}

fn end_txn(log: &mut PartitionLog, producer_id: i64, commit: bool) -> i64 {
    let marker = txn_marker(producer_id, 0, 2, commit);
    log.append_txn_marker(&marker, 0, NOW_MS).unwrap().get()
}

/// Idempotent producer 1 (seven batches), transactional producer 2 (aborted across
/// segments), transactional producer 3 (still open), plain records in between.
fn busy_log(config: LogConfig) -> (Fixture, PartitionLog) {
    let (fixture, mut log) = Fixture::new(config);
    log.append(&producer_batch(2, 0, 0, 2, true), 0, NOW_MS)
        .unwrap();
    for seq in 0..7 {
        log.append(&producer_batch(1, 0, seq, 1, false), 0, NOW_MS)
            .unwrap();
        if seq == 3 {
            log.append(&producer_batch(3, 0, 0, 1, true), 0, NOW_MS)
                .unwrap();
        }
    }
    log.append(&batch(2, NOW_MS), 0, NOW_MS).unwrap();
    log.append(&producer_batch(2, 0, 2, 1, true), 0, NOW_MS)
        .unwrap();
    end_txn(&mut log, 2, false);
    (fixture, log)
}

fn snapshot_offsets(fixture: &Fixture) -> Vec<i64> {
    let mut offsets: Vec<i64> = fs::read_dir(fixture.partition_dir())
        .unwrap()
        .filter_map(|e| {
            let name = e.unwrap().file_name().to_string_lossy().into_owned();
            name.strip_suffix(".snapshot")?.parse().ok()
        })
        .collect();
    offsets.sort();
    offsets
}

fn txn_index_files(fixture: &Fixture) -> Vec<(PathBuf, Vec<u8>)> {
    let mut files: Vec<(PathBuf, Vec<u8>)> = fs::read_dir(fixture.partition_dir())
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "txnindex"))
        .map(|p| {
            let bytes = fs::read(&p).unwrap();
            (p, bytes)
        })
        .collect();
    files.sort();
    files
}

/// Retries of producer 1's last five batches are still answered as duplicates.
fn assert_duplicates_caught(log: &mut PartitionLog) {
    let end = log.log_end_offset();
    for seq in 2..7 {
        let info = log
            .append(&producer_batch(1, 0, seq, 1, false), 0, NOW_MS)
            .unwrap();
        assert!(info.duplicate, "sequence {seq} is a duplicate");
    }
    assert_eq!(log.log_end_offset(), end);
    assert_err!(
        log.append(&producer_batch(1, 0, 9, 1, false), 0, NOW_MS),
        LogError::OutOfOrderSequence(_)
    );
}

fn shut_down_cleanly(fixture: &mut Fixture, mut log: PartitionLog) {
    log.flush().unwrap();
    fixture.log_dir.write_checkpoints([&log]).unwrap();
    fixture.log_dir.mark_clean_shutdown(-1).unwrap();
    drop(log);
}

#[test]
fn a_clean_restart_loads_the_shutdown_snapshot_and_replays_nothing() {
    let (mut fixture, log) = busy_log(small_segments());
    let before = producer_view(&log);
    assert_eq!(before.1, Some(6), "producer 3's transaction is open");
    assert_eq!(before.2.len(), 1);
    let end = log.log_end_offset();
    let mut log = fixture.restart_clean(log);
    assert!(snapshot_offsets(&fixture).contains(&end));
    assert_eq!(log.producer_replay_start(), None);
    assert_eq!(producer_view(&log), before);
    assert!(log.has_ongoing_txn(3) && !log.has_ongoing_txn(2));
    assert_duplicates_caught(&mut log);
}

#[test]
fn a_crash_replays_the_whole_log_to_the_same_state() {
    let (mut fixture, log) = busy_log(small_segments());
    let before = producer_view(&log);
    let indexes = txn_index_files(&fixture);
    assert_eq!(indexes.len(), 1);
    assert!(snapshot_offsets(&fixture).len() > 3, "one per roll");
    let mut log = fixture.restart_after_crash(log);
    // Nothing was fsynced: no snapshot is trusted and every index is rebuilt.
    assert_eq!(log.producer_replay_start(), Some(0));
    assert_eq!(producer_view(&log), before);
    assert_eq!(txn_index_files(&fixture), indexes);
    assert_duplicates_caught(&mut log);
}

#[test]
fn a_crash_replays_from_the_snapshot_below_the_recovery_point() {
    let (mut fixture, mut log) = busy_log(small_segments());
    log.flush().unwrap();
    fixture.log_dir.write_checkpoints([&log]).unwrap();
    let checkpointed = log.log_end_offset();
    // After the checkpoint: producer 3 aborts and producer 4 opens a transaction.
    log.append(&batch(1, NOW_MS), 0, NOW_MS).unwrap();
    end_txn(&mut log, 3, false);
    log.append(&producer_batch(4, 0, 0, 1, true), 0, NOW_MS)
        .unwrap();
    let before = producer_view(&log);
    assert_eq!(before.2.len(), 2);
    let indexes = txn_index_files(&fixture);

    let mut log = fixture.restart_after_crash(log);
    assert_eq!(log.producer_replay_start(), Some(checkpointed));
    assert_eq!(producer_view(&log), before);
    assert_eq!(txn_index_files(&fixture), indexes);
    assert_duplicates_caught(&mut log);
}

#[test]
fn deleted_snapshots_are_rebuilt_from_the_log() {
    let (mut fixture, log) = busy_log(small_segments());
    let before = producer_view(&log);
    shut_down_cleanly(&mut fixture, log);
    for offset in snapshot_offsets(&fixture) {
        fs::remove_file(fixture.segment_file(offset, ".snapshot")).unwrap();
    }
    let mut log = fixture.reload(true);
    assert_eq!(log.producer_replay_start(), Some(0));
    assert_eq!(producer_view(&log), before);
    assert_duplicates_caught(&mut log);
}

#[test]
fn a_corrupt_snapshot_is_deleted_and_an_older_one_used() {
    let (mut fixture, log) = busy_log(small_segments());
    let before = producer_view(&log);
    shut_down_cleanly(&mut fixture, log);
    let offsets = snapshot_offsets(&fixture);
    let newest = *offsets.last().unwrap();
    let older = offsets[offsets.len() - 2];
    let path = fixture.segment_file(newest, ".snapshot");
    let mut bytes = fs::read(&path).unwrap();
    let last = bytes.len() - 1;
    bytes[last] ^= 0x40;
    fs::write(&path, bytes).unwrap();

    let mut log = fixture.reload(true);
    assert!(!path.exists());
    assert_eq!(log.producer_replay_start(), Some(older));
    assert_eq!(producer_view(&log), before);
    assert_duplicates_caught(&mut log);
}

#[test]
fn a_torn_transaction_index_is_rebuilt() {
    let (mut fixture, log) = busy_log(small_segments());
    let before = producer_view(&log);
    let indexes = txn_index_files(&fixture);
    shut_down_cleanly(&mut fixture, log);
    let (path, bytes) = &indexes[0];
    OpenOptions::new()
        .write(true)
        .open(path)
        .unwrap()
        .set_len((bytes.len() - 3) as u64)
        .unwrap();
    let log = fixture.reload(true);
    assert_eq!(producer_view(&log), before);
    assert_eq!(txn_index_files(&fixture), indexes);
}

#[test]
fn truncation_rewinds_the_producer_state() {
    let (mut fixture, mut log) = busy_log(small_segments());
    // Producer 2's abort marker is the last batch; producer 1's seq 6 is before it.
    let marker = log.log_end_offset() - 1;
    log.truncate_to(marker).unwrap();
    assert!(
        log.has_ongoing_txn(2),
        "the abort is gone, the transaction open again"
    );
    assert!(log.aborted_transactions(0, marker).is_empty());
    assert_eq!(log.first_unstable_offset(), Some(0));
    assert!(snapshot_offsets(&fixture).iter().all(|&o| o <= marker));
    for (_, bytes) in txn_index_files(&fixture) {
        assert!(bytes.is_empty());
    }

    // Back to before producer 1's last two batches: sequence 5 is new again.
    let seq5 = all_batches(&log)
        .iter()
        .find(|h| h.producer_id == 1 && h.base_sequence == 5)
        .unwrap()
        .base_offset;
    log.truncate_to(seq5).unwrap();
    assert_eq!(
        log.producers()
            .iter()
            .find(|p| p.producer_id == 1)
            .unwrap()
            .last_sequence,
        4
    );
    let info = log
        .append(&producer_batch(1, 0, 5, 1, false), 0, NOW_MS)
        .unwrap();
    assert!(!info.duplicate);
    assert_eq!(info.first_offset, Offset::new(seq5));
    let retry = log
        .append(&producer_batch(1, 0, 3, 1, false), 0, NOW_MS)
        .unwrap();
    assert!(retry.duplicate);

    // The state survives a crash after the truncation the same way.
    let view = producer_view(&log);
    let log = fixture.restart_after_crash(log);
    assert_eq!(producer_view(&log), view);
}

#[test]
fn moving_the_log_start_forgets_producers_whose_batches_are_gone() {
    // One batch per segment.
    let config = LogConfig {
        segment_bytes: 100,
        ..LogConfig::default()
    };
    let (mut fixture, mut log) = Fixture::new(config);
    log.append(&producer_batch(1, 0, 0, 1, false), 0, NOW_MS)
        .unwrap(); // 0
    log.append(&producer_batch(2, 0, 0, 1, true), 0, NOW_MS)
        .unwrap(); // 1
    log.append(&batch(1, NOW_MS), 0, NOW_MS).unwrap(); // 2
    let marker = txn_marker(2, 0, 0, false);
    log.append_txn_marker(&marker, 0, NOW_MS).unwrap(); // 3
    log.append(&producer_batch(5, 0, 0, 1, false), 0, NOW_MS)
        .unwrap(); // 4
    log.flush().unwrap(); // a snapshot at the log end too
    assert!(snapshot_offsets(&fixture).iter().any(|&o| o < 2));

    log.delete_records_before(2).unwrap();
    let ids: Vec<i64> = log.producers().iter().map(|p| p.producer_id).collect();
    assert_eq!(
        ids,
        vec![5],
        "producers 1 and 2 wrote nothing at or after 2"
    );
    assert!(snapshot_offsets(&fixture).iter().all(|&o| o >= 2));
    // The abort of producer 2 is still there for fetches from the log start.
    assert_eq!(
        log.aborted_transactions(2, 5),
        vec![AbortedTxn {
            producer_id: 2,
            first_offset: 1,
            last_offset: 3,
            last_stable_offset: 4,
        }]
    );
    // Segments deleted whole take their transaction index with them.
    log.delete_records_before(4).unwrap();
    assert!(!fixture.segment_file(3, ".txnindex").exists());
    assert!(txn_index_files(&fixture).is_empty());
    let view = producer_view(&log);
    let log = fixture.restart_clean(log);
    assert_eq!(producer_view(&log), view);
}

#[test]
fn read_committed_reads_agree_after_a_restart() {
    let (mut fixture, log) = busy_log(small_segments());
    let read = |log: &PartitionLog| {
        let mut seen = Vec::new();
        let lso = log.last_stable_offset(log.log_end_offset());
        let mut offset = 0;
        while offset < lso {
            let read = log
                .read_isolated(
                    offset,
                    1,
                    log.log_end_offset(),
                    true,
                    IsolationLevel::ReadCommitted,
                )
                .unwrap();
            let bytes = read.records.unwrap().read().unwrap();
            offset = headers(&bytes).last().unwrap().last_offset() + 1;
            seen.push(read.aborted_transactions.unwrap());
        }
        seen
    };
    let before = read(&log);
    let log = fixture.restart_after_crash(log);
    assert_eq!(read(&log), before);
}

#[test]
fn a_snapshot_is_taken_at_each_roll() {
    let (fixture, mut log) = Fixture::new(small_segments());
    for seq in 0..4 {
        log.append(&producer_batch(1, 0, seq, 1, false), 0, NOW_MS)
            .unwrap();
    }
    let bases = log.segment_base_offsets();
    assert!(bases.len() > 1);
    assert_eq!(snapshot_offsets(&fixture), bases[1..].to_vec());
    // Each holds the state of everything before it: decode the newest.
    let newest = fs::read(fixture.segment_file(*bases.last().unwrap(), ".snapshot")).unwrap();
    let entries = crate::log::producer_state::decode_snapshot(&newest).unwrap();
    assert_eq!(entries.len(), 1);
    assert_eq!(entries[0].last_data_offset(), bases.last().unwrap() - 1);
}
