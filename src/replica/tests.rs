//! `Partition` over a real log: the high watermark and last stable offset it
//! publishes without the lock, and the fetchers it wakes.

#![allow(clippy::unwrap_used)]

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::Notify;

use super::{Partition, PartitionContext};
use crate::clock::ManualClock;
use crate::group_commit::StorageHealth;
use crate::log::tests::helpers::{batch, producer_batch, topic_id, tp, NOW_MS};
use crate::log::{AbortedTxn, IsolationLevel, LogConfig, LogDir, TxnMarker};

fn partition() -> (tempfile::TempDir, Partition) {
    let temp = tempfile::TempDir::new().unwrap();
    let log_dir = LogDir::open(temp.path()).unwrap();
    let log = log_dir
        .create_log(&tp(), topic_id(), LogConfig::default(), NOW_MS)
        .unwrap();
    let context = PartitionContext {
        health: StorageHealth::new("test log dir"),
        clock: Arc::new(ManualClock::new(NOW_MS)),
    };
    (temp, Partition::new(log, 0, (None, None), &context))
}

fn abort(producer_id: i64) -> TxnMarker {
    TxnMarker {
        producer_id,
        producer_epoch: 0,
        coordinator_epoch: 0,
        commit: false,
    }
}

async fn woken(waiter: &Notify) -> bool {
    tokio::time::timeout(Duration::from_millis(100), waiter.notified())
        .await
        .is_ok()
}

#[tokio::test]
async fn the_last_stable_offset_follows_the_open_transactions() {
    let (_temp, partition) = partition();
    partition.append(&batch(2, NOW_MS), NOW_MS).unwrap();
    assert_eq!(
        (partition.high_watermark(), partition.last_stable_offset()),
        (2, 2)
    );

    partition
        .append(&producer_batch(7, 0, 0, 3, true), NOW_MS)
        .unwrap(); // 2..=4
    partition.append(&batch(1, NOW_MS), NOW_MS).unwrap(); // 5
    assert_eq!(
        (partition.high_watermark(), partition.last_stable_offset()),
        (6, 2)
    );
    assert!(partition.has_ongoing_txn(7).unwrap());

    let waiter = Arc::new(Notify::new());
    partition.add_waiter(&waiter);
    assert_eq!(partition.append_txn_marker(&abort(7), NOW_MS).unwrap(), 6);
    assert!(woken(&waiter).await, "a marker wakes waiting fetches");
    assert_eq!(
        (partition.high_watermark(), partition.last_stable_offset()),
        (7, 7)
    );
    assert!(!partition.has_ongoing_txn(7).unwrap());
}

#[tokio::test]
async fn a_duplicate_moves_nothing_and_wakes_nobody() {
    let (_temp, partition) = partition();
    for seq in 0..3 {
        partition
            .append(&producer_batch(1, 0, seq, 1, false), NOW_MS)
            .unwrap();
    }
    let waiter = Arc::new(Notify::new());
    partition.add_waiter(&waiter);
    let info = partition
        .append(&producer_batch(1, 0, 0, 1, false), NOW_MS)
        .unwrap();
    assert!(info.duplicate);
    assert_eq!(info.first_offset, 0);
    assert_eq!(
        partition.high_watermark(),
        3,
        "the high watermark never goes back"
    );
    assert!(!woken(&waiter).await);
}

#[test]
fn read_committed_reads_stop_at_the_last_stable_offset() {
    let (_temp, partition) = partition();
    partition
        .append(&producer_batch(7, 0, 0, 2, true), NOW_MS)
        .unwrap(); // 0..=1
    partition.append(&batch(1, NOW_MS), NOW_MS).unwrap(); // 2
    let committed = partition
        .read(0, usize::MAX, true, IsolationLevel::ReadCommitted)
        .unwrap();
    assert!(committed.records.is_none());
    assert_eq!(
        (committed.high_watermark, committed.last_stable_offset),
        (3, 0)
    );
    assert_eq!(committed.aborted_transactions, Some(Vec::new()));
    let uncommitted = partition
        .read(0, usize::MAX, true, IsolationLevel::ReadUncommitted)
        .unwrap();
    assert!(uncommitted.records.is_some());
    assert_eq!(uncommitted.aborted_transactions, None);

    partition.append_txn_marker(&abort(7), NOW_MS).unwrap(); // 3
    let committed = partition
        .read(0, usize::MAX, true, IsolationLevel::ReadCommitted)
        .unwrap();
    assert_eq!(committed.last_stable_offset, 4);
    assert!(!committed.records.unwrap().read().unwrap().is_empty());
    assert_eq!(
        committed.aborted_transactions.unwrap(),
        vec![AbortedTxn {
            producer_id: 7,
            first_offset: 0,
            last_offset: 3,
            last_stable_offset: 4,
        }]
    );
}

#[test]
fn deleting_records_keeps_the_last_stable_offset_at_or_above_the_log_start() {
    let (_temp, partition) = partition();
    partition
        .append(&producer_batch(7, 0, 0, 1, true), NOW_MS)
        .unwrap(); // 0
    partition.append(&batch(2, NOW_MS), NOW_MS).unwrap(); // 1..=2
    partition
        .append(&producer_batch(7, 0, 1, 1, true), NOW_MS)
        .unwrap(); // 3: the transaction goes on
    assert_eq!(partition.last_stable_offset(), 0);
    partition.delete_records_before(2).unwrap();
    assert_eq!(partition.log_start_offset(), 2);
    assert_eq!(
        partition.last_stable_offset(),
        2,
        "Kafka's first unstable offset is at least the log start"
    );
    assert!(partition.has_ongoing_txn(7).unwrap());
}

#[test]
fn housekeeping_expires_idle_producers() {
    let (_temp, partition) = partition();
    partition
        .append(&producer_batch(1, 0, 0, 1, false), NOW_MS)
        .unwrap();
    partition
        .append(&producer_batch(2, 0, 0, 1, true), NOW_MS)
        .unwrap();
    partition
        .housekeep(NOW_MS + crate::config::defaults::PRODUCER_ID_EXPIRATION_MS_DEFAULT)
        .unwrap();
    let left: Vec<i64> = partition
        .producers()
        .unwrap()
        .iter()
        .map(|p| p.producer_id)
        .collect();
    assert_eq!(
        left,
        vec![2],
        "a producer inside a transaction never expires"
    );
}
