//! The follower's append: a leader's batches written byte for byte at the leader's
//! offsets and epochs, the producer state and transaction index following them, the
//! epoch cache answering DivergingEpoch and truncation, all through restarts.

use bytes::Bytes;

use super::helpers::*;
use crate::log::{LogConfig, LogError, PartitionLog};
use crate::types::Offset;

/// Every byte the log serves, from its start.
fn served_bytes(log: &PartitionLog) -> Vec<u8> {
    let read = log
        .read(log.log_start_offset(), usize::MAX, i64::MAX, true)
        .unwrap();
    read.records
        .map(|r| r.read().unwrap().to_vec())
        .unwrap_or_default()
}

/// A leader with batches in epochs 0 and 3 (a transaction aborted in between).
fn leader() -> (Fixture, PartitionLog) {
    let (fixture, mut log) = Fixture::new(LogConfig::default());
    log.append(&batch(2, NOW_MS), 0, NOW_MS).unwrap();
    log.append(&producer_batch(9, 0, 0, 3, true), 0, NOW_MS)
        .unwrap();
    let marker = txn_marker(9, 0, 1, false);
    log.append_txn_marker(&marker, 0, NOW_MS).unwrap();
    log.append(&producer_batch(4, 0, 0, 2, false), 3, NOW_MS)
        .unwrap();
    (fixture, log)
}

#[test]
fn a_follower_keeps_the_leaders_bytes_offsets_epochs_and_producer_state() {
    let (_leader_fixture, leader) = leader();
    let (mut fixture, mut follower) = Fixture::new(LogConfig::default());
    let bytes = Bytes::from(served_bytes(&leader));
    let appended = follower
        .append_as_follower(&bytes, NOW_MS + 5)
        .unwrap()
        .unwrap();
    assert_eq!(
        (appended.first_offset, appended.last_offset),
        (Offset::new(0), Offset::new(7))
    );
    assert_eq!(served_bytes(&follower), bytes.to_vec(), "byte for byte");
    assert_eq!(
        follower.leader_epoch_entries(),
        leader.leader_epoch_entries()
    );
    assert_eq!(producer_view(&follower), producer_view(&leader));
    // A retry of the idempotent producer's batch is a duplicate on the follower too,
    // so a follower that becomes leader never writes it twice.
    let retry = follower
        .append(&producer_batch(4, 0, 0, 2, false), 4, NOW_MS)
        .unwrap();
    assert!(retry.duplicate);
    assert_eq!(retry.first_offset, Offset::new(6));
    // And all of it survives a crash.
    follower.set_high_watermark(8);
    let follower = fixture.restart_after_crash(follower);
    assert_eq!(served_bytes(&follower), bytes.to_vec());
    assert_eq!(
        follower.leader_epoch_entries(),
        leader.leader_epoch_entries()
    );
    assert_eq!(producer_view(&follower), producer_view(&leader));
}

#[test]
fn a_replicated_set_that_does_not_continue_the_log_or_is_corrupt_writes_nothing() {
    let (_leader_fixture, leader) = leader();
    let (_fixture, mut follower) = Fixture::new(LogConfig::default());
    let bytes = served_bytes(&leader);
    follower
        .append_as_follower(&Bytes::from(bytes.clone()), NOW_MS)
        .unwrap();
    // The same batches again do not continue the log.
    assert!(matches!(
        follower.append_as_follower(&Bytes::from(bytes.clone()), NOW_MS),
        Err(LogError::InvalidRecord(_))
    ));
    let mut corrupt = served_bytes(&leader);
    let last = corrupt.len() - 1;
    corrupt[last] ^= 0xff;
    let (_other, mut fresh) = Fixture::new(LogConfig::default());
    assert!(fresh
        .append_as_follower(&Bytes::from(corrupt), NOW_MS)
        .is_err());
    assert_eq!(fresh.log_end_offset(), 0);
    assert!(fresh
        .append_as_follower(&Bytes::new(), NOW_MS)
        .unwrap()
        .is_none());
}

#[test]
fn a_diverged_tail_is_found_by_the_epoch_cache_and_truncated_through_a_restart() {
    // The follower was leader in epoch 1 and wrote 2 records nobody else has; the new
    // leader (epoch 2) started epoch 2 at offset 2.
    let (_leader_fixture, mut leader) = Fixture::new(LogConfig::default());
    leader.append(&batch(2, NOW_MS), 0, NOW_MS).unwrap();
    leader.assign_leader_epoch_start(2).unwrap();
    leader.append(&batch(1, NOW_MS), 2, NOW_MS).unwrap();
    let (mut fixture, mut follower) = Fixture::new(LogConfig::default());
    follower.append(&batch(2, NOW_MS), 0, NOW_MS).unwrap();
    follower.append(&batch(2, NOW_MS), 1, NOW_MS).unwrap();
    // The follower fetches at 4 with last fetched epoch 1: the leader's epoch 1 is
    // unknown, the largest below it (0) ends at 2.
    assert_eq!(leader.end_offset_for_epoch(1), (0, 2));
    let (_, own_end) = follower.end_offset_for_epoch(0);
    assert_eq!(own_end, 2);
    follower.truncate_to(own_end.min(2)).unwrap();
    let mut follower = fixture.restart_after_crash(follower);
    assert_eq!(follower.log_end_offset(), 2, "the truncation is durable");
    let rest = leader.read(2, usize::MAX, i64::MAX, true).unwrap();
    let rest = rest.records.unwrap().read().unwrap();
    follower.append_as_follower(&rest, NOW_MS).unwrap();
    assert_eq!(served_bytes(&follower), served_bytes(&leader));
    assert_eq!(
        follower.leader_epoch_entries(),
        leader.leader_epoch_entries()
    );
}

#[test]
fn the_high_watermark_is_checkpointed_and_kept_within_the_log() {
    let (mut fixture, mut log) = Fixture::new(LogConfig::default());
    log.append(&batch(5, NOW_MS), 0, NOW_MS).unwrap();
    log.set_high_watermark(3);
    let mut log = fixture.restart_clean(log);
    assert_eq!(log.high_watermark(), 3);
    log.truncate_to(2).unwrap();
    assert_eq!(
        log.high_watermark(),
        0,
        "a truncation mid-batch ends the log at the batch"
    );
    log.set_high_watermark(99);
    assert_eq!(log.high_watermark(), log.log_end_offset());
}

#[test]
fn the_epoch_of_an_offset_is_the_epoch_of_the_batch_holding_it() {
    let (_fixture, log) = leader();
    assert_eq!(log.epoch_for_offset(0), Some(0));
    assert_eq!(
        log.epoch_for_offset(5),
        Some(0),
        "the marker, written in epoch 0"
    );
    assert_eq!(log.epoch_for_offset(6), Some(3));
    assert_eq!(log.epoch_for_offset(99), Some(3));
    let (_other, empty) = Fixture::new(LogConfig::default());
    assert_eq!(empty.epoch_for_offset(0), None);
}

#[test]
fn a_replicated_batch_far_past_the_log_end_is_refused_unwritten() {
    let (_fixture, mut follower) = Fixture::new(LogConfig::default());
    for base_offset in [i64::MAX - 1, i64::MAX, 1 << 40] {
        let mut far = batch_with(&[NOW_MS], 8);
        far[..8].copy_from_slice(&i64::to_be_bytes(base_offset));
        assert!(
            matches!(
                follower.append_as_follower(&Bytes::from(far), NOW_MS),
                Err(LogError::CorruptMessage(_))
            ),
            "base offset {base_offset}"
        );
        assert_eq!(follower.log_end_offset(), 0);
    }
}
