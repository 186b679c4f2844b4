//! `Partition` over a real log: the high watermark and last stable offset it
//! publishes without the lock, and the fetchers it wakes; and `ReplicaManager` over a
//! real data dir: which logs it serves, keeps aside or deletes as images arrive.

#![allow(clippy::unwrap_used)]

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{watch, Notify};
use uuid::Uuid;

use super::replication::PartitionView;
use super::test_support::NoLeaders;
use super::{Partition, PartitionContext, PartitionError, ReplicaManager};
use crate::clock::ManualClock;
use crate::config::Config;
use crate::controller::{MetadataImage, PartitionImage, TopicImage};
use crate::durability::StorageHealth;
use crate::log::tests::helpers::{batch, producer_batch, topic_id, tp, NOW_MS, TOPIC};
use crate::log::{AbortedTxn, IsolationLevel, LogConfig, LogDir, TxnMarker};
use crate::types::{BrokerEpoch, LeaderEpoch, Offset, ProducerEpoch};

/// A partition broker 1 leads alone, at leader epoch 0.
fn partition() -> (tempfile::TempDir, Arc<Partition>) {
    replica_partition(1, &lone_leader())
}

/// Broker 1 leading alone, at leader epoch 0.
fn lone_leader() -> PartitionView<'static> {
    PartitionView {
        leader_id: 1,
        leader_epoch: LeaderEpoch::new(0),
        partition_epoch: 0,
        replicas: &[1],
        isr: &[1],
        eligible: &[1],
        min_insync_replicas: 1,
    }
}

/// A view of the partition on brokers 1 and 2, both eligible, at partition epoch
/// `leader_epoch`.
fn on_brokers_1_and_2(
    leader_id: i32,
    leader_epoch: i32,
    isr: &[i32],
    min_insync_replicas: usize,
) -> PartitionView<'_> {
    PartitionView {
        leader_id,
        leader_epoch: LeaderEpoch::new(leader_epoch),
        partition_epoch: leader_epoch,
        replicas: &[1, 2],
        isr,
        eligible: &[1, 2],
        min_insync_replicas,
    }
}

fn abort(producer_id: i64) -> TxnMarker {
    TxnMarker {
        producer_id,
        producer_epoch: ProducerEpoch::new(0),
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
        (Offset::new(2), Offset::new(2))
    );

    partition
        .append(&producer_batch(7, 0, 0, 3, true), NOW_MS)
        .unwrap(); // 2..=4
    partition.append(&batch(1, NOW_MS), NOW_MS).unwrap(); // 5
    assert_eq!(
        (partition.high_watermark(), partition.last_stable_offset()),
        (Offset::new(6), Offset::new(2))
    );
    assert!(partition.has_ongoing_txn(7).unwrap());

    let waiter = Arc::new(Notify::new());
    partition.add_waiter(&waiter);
    assert_eq!(
        partition.append_txn_marker(&abort(7), NOW_MS).unwrap().0,
        Offset::new(6)
    );
    assert!(woken(&waiter).await, "a marker wakes waiting fetches");
    assert_eq!(
        (partition.high_watermark(), partition.last_stable_offset()),
        (Offset::new(7), Offset::new(7))
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
    assert!(info.info.duplicate);
    assert_eq!(info.info.first_offset, Offset::new(0));
    assert_eq!(
        partition.high_watermark(),
        Offset::new(3),
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
        (Offset::new(3), Offset::new(0))
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
    assert_eq!(committed.last_stable_offset, Offset::new(4));
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
    assert_eq!(partition.last_stable_offset(), Offset::new(0));
    partition.delete_records_before(2).unwrap();
    assert_eq!(partition.log_start_offset(), Offset::new(2));
    assert_eq!(
        partition.last_stable_offset(),
        Offset::new(2),
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

const OLD_ID: Uuid = Uuid::from_u128(0xa);
const NEW_ID: Uuid = Uuid::from_u128(0xb);

/// An image with `topics` (name, id, partition count), each partition led by node 1,
/// and `deleted` as its tombstones.
fn image(topics: &[(&str, Uuid, usize)], deleted: &[Uuid]) -> Arc<MetadataImage> {
    let mut image = MetadataImage::default();
    for &(name, topic_id, count) in topics {
        let partitions = (0..count as i32)
            .map(|partition_index| PartitionImage {
                partition_index,
                leader_id: 1,
                leader_epoch: LeaderEpoch::new(0),
                partition_epoch: 0,
                replicas: vec![1],
                isr: vec![1],
                elr: Vec::new(),
                last_known_elr: Vec::new(),
                adding_replicas: Vec::new(),
                removing_replicas: Vec::new(),
            })
            .collect();
        let topic = TopicImage {
            name: name.to_string(),
            topic_id,
            partitions,
            configs: Default::default(),
        };
        image.topics.insert(name.to_string(), Arc::new(topic));
        image.topic_names_by_id.insert(topic_id, name.to_string());
    }
    image.deleted_topic_ids = deleted.iter().copied().collect();
    Arc::new(image)
}

/// A broker's data dir, restarted with whatever image the test gives it.
struct Broker {
    temp: tempfile::TempDir,
    config: Config,
    images: watch::Sender<Arc<MetadataImage>>,
}

impl Broker {
    fn new() -> Broker {
        let temp = tempfile::TempDir::new().unwrap();
        let config = Config::ephemeral(temp.path());
        let (images, _) = watch::channel(Arc::new(MetadataImage::default()));
        Broker {
            temp,
            config,
            images,
        }
    }

    /// Opens the replica manager as a start with `image` replayed does.
    fn open(&self, image: &Arc<MetadataImage>) -> ReplicaManager {
        self.images.send_replace(Arc::clone(image));
        ReplicaManager::open(
            &self.config,
            Arc::new(ManualClock::new(NOW_MS)),
            self.images.subscribe(),
            Arc::new(NoLeaders),
            crate::limits::IDLE_SEGMENT_FILES_MAX,
        )
        .unwrap()
    }

    /// Publishes `image` as the controller does, and lets `replicas` follow it.
    fn publish(&self, replicas: &ReplicaManager, image: &Arc<MetadataImage>) {
        self.images.send_replace(Arc::clone(image));
        replicas.sync_with(image);
    }

    fn partition_dir(&self, partition: i32) -> PathBuf {
        self.temp
            .path()
            .join("logs")
            .join(crate::types::TopicPartition::new(TOPIC, partition).dir_name())
    }

    /// Opens with `image`, writes `count` records to `partition` and shuts down cleanly.
    fn write(&self, image: &Arc<MetadataImage>, partition: i32, count: usize) {
        let replicas = self.open(image);
        let served = replicas.partition(image, TOPIC, partition).unwrap();
        served.append(&batch(count, NOW_MS), NOW_MS).unwrap();
        replicas.shutdown().unwrap();
    }
}

fn unknown(result: Result<Arc<Partition>, PartitionError>) -> bool {
    matches!(result, Err(PartitionError::UnknownTopicOrPartition))
}

fn records_of(partition: &Partition) -> (i64, bool) {
    let read = partition
        .read(0, usize::MAX, true, IsolationLevel::ReadUncommitted)
        .unwrap();
    let bytes = read.records.map(|r| r.read().unwrap()).unwrap_or_default();
    (read.high_watermark.get(), !bytes.is_empty())
}

#[tokio::test]
async fn a_log_the_image_does_not_know_yet_is_kept_unserved_until_the_image_has_it() {
    let broker = Broker::new();
    let known = image(&[(TOPIC, OLD_ID, 1)], &[]);
    broker.write(&known, 0, 3);

    // A restart whose image lags behind the topic's creation.
    let lagging = image(&[], &[]);
    let replicas = broker.open(&lagging);
    assert!(
        replicas.all().is_empty(),
        "a topic not in the image is not served"
    );
    assert!(unknown(replicas.partition(&lagging, TOPIC, 0)));
    broker.publish(&replicas, &lagging);
    replicas.run_retention();
    assert!(broker.partition_dir(0).exists());
    // A clean shutdown while the log is kept aside must not lose it either.
    replicas.shutdown().unwrap();
    drop(replicas);

    let replicas = broker.open(&lagging);
    assert!(replicas.all().is_empty());
    broker.images.send_replace(Arc::clone(&known));
    let served = replicas.partition(&known, TOPIC, 0).unwrap();
    assert_eq!(served.topic_id, OLD_ID);
    assert_eq!(records_of(&served), (3, true), "the log is used as it was");
    broker.publish(&replicas, &known);
    assert!(Arc::ptr_eq(
        &replicas.partition(&known, TOPIC, 0).unwrap(),
        &served
    ));
    assert_eq!(replicas.all().len(), 1);
}

#[tokio::test]
async fn a_log_whose_topic_is_tombstoned_is_deleted_at_open_and_on_a_new_image() {
    let broker = Broker::new();
    let known = image(&[(TOPIC, OLD_ID, 1)], &[]);
    let deleted = image(&[], &[OLD_ID]);
    broker.write(&known, 0, 3);
    drop(broker.open(&deleted));
    assert!(!broker.partition_dir(0).exists());

    // Kept aside first, then deleted once the deletion is applied.
    broker.write(&known, 0, 3);
    let replicas = broker.open(&image(&[], &[]));
    assert!(broker.partition_dir(0).exists());
    broker.publish(&replicas, &deleted);
    assert!(!broker.partition_dir(0).exists());
    assert!(unknown(replicas.partition(&deleted, TOPIC, 0)));
}

#[tokio::test]
async fn delete_topics_removes_a_served_log_at_once_and_only_with_its_tombstone() {
    let broker = Broker::new();
    let known = image(&[(TOPIC, OLD_ID, 1)], &[]);
    let replicas = broker.open(&known);
    replicas
        .partition(&known, TOPIC, 0)
        .unwrap()
        .append(&batch(2, NOW_MS), NOW_MS)
        .unwrap();

    // An image without the topic but without its deletion does not delete it.
    broker.publish(&replicas, &image(&[], &[]));
    assert!(broker.partition_dir(0).exists());

    broker.publish(&replicas, &image(&[], &[OLD_ID]));
    assert!(!broker.partition_dir(0).exists());
    assert!(replicas.all().is_empty());
}

#[tokio::test]
async fn a_recreated_topic_replaces_the_old_log_once_the_old_id_is_tombstoned() {
    let broker = Broker::new();
    broker.write(&image(&[(TOPIC, OLD_ID, 1)], &[]), 0, 3);

    let recreated = image(&[(TOPIC, NEW_ID, 1)], &[OLD_ID]);
    let replicas = broker.open(&recreated);
    broker.publish(&replicas, &recreated);
    let served = replicas.partition(&recreated, TOPIC, 0).unwrap();
    assert_eq!(served.topic_id, NEW_ID);
    assert_eq!(
        records_of(&served),
        (0, false),
        "the new topic starts empty"
    );
}

#[tokio::test]
async fn a_log_of_a_later_incarnation_is_kept_aside_while_the_image_has_an_earlier_one() {
    let broker = Broker::new();
    broker.write(&image(&[(TOPIC, NEW_ID, 1)], &[OLD_ID]), 0, 3);

    // The image lags behind: the name still belongs to an incarnation whose deletion
    // this node has not applied yet, and the log on disk is of the next one.
    let earlier = image(&[(TOPIC, OLD_ID, 1)], &[]);
    let replicas = broker.open(&earlier);
    broker.publish(&replicas, &earlier);
    assert!(unknown(replicas.partition(&earlier, TOPIC, 0)));
    assert!(replicas.all().is_empty());
    assert!(broker.partition_dir(0).exists());

    let caught_up = image(&[(TOPIC, NEW_ID, 1)], &[OLD_ID]);
    broker.publish(&replicas, &caught_up);
    let served = replicas.partition(&caught_up, TOPIC, 0).unwrap();
    assert_eq!(served.topic_id, NEW_ID);
    assert_eq!(records_of(&served), (3, true));
}

#[tokio::test]
async fn a_partition_the_image_does_not_have_yet_is_kept_until_it_does() {
    let broker = Broker::new();
    broker.write(&image(&[(TOPIC, OLD_ID, 2)], &[]), 1, 3);

    // The image lags behind the CreatePartitions that added partition 1.
    let fewer = image(&[(TOPIC, OLD_ID, 1)], &[]);
    let replicas = broker.open(&fewer);
    broker.publish(&replicas, &fewer);
    assert!(broker.partition_dir(1).exists());
    assert_eq!(replicas.all().len(), 1, "only partition 0 is served");

    let grown = image(&[(TOPIC, OLD_ID, 2)], &[]);
    broker.publish(&replicas, &grown);
    let served = replicas.partition(&grown, TOPIC, 1).unwrap();
    assert_eq!(records_of(&served), (3, true));
}

fn replica_partition(
    node_id: i32,
    view: &PartitionView<'_>,
) -> (tempfile::TempDir, Arc<Partition>) {
    replica_partition_on(node_id, view, Arc::new(ManualClock::new(NOW_MS)))
}

fn replica_partition_on(
    node_id: i32,
    view: &PartitionView<'_>,
    clock: Arc<ManualClock>,
) -> (tempfile::TempDir, Arc<Partition>) {
    let temp = tempfile::TempDir::new().unwrap();
    let log_dir = LogDir::open(temp.path()).unwrap();
    let log = log_dir
        .create_log(&tp(), topic_id(), LogConfig::default(), NOW_MS)
        .unwrap();
    let context = PartitionContext {
        health: StorageHealth::new("test log dir"),
        clock,
        node_id,
        replica_lag_time_max_ms: 30_000,
    };
    let partition = Arc::new(Partition::new(log, (None, None), &context));
    partition.apply_image(view).unwrap();
    (temp, partition)
}

/// A follower's lag is measured on the monotonic clock. A wall-clock jump
/// forward is no lag (it shrank every ISR at once), and a jump back does not
/// hide a follower that stopped fetching (it froze every shrink for the
/// length of the jump, the follower holding the high watermark).
#[tokio::test]
async fn a_wall_clock_jump_neither_shrinks_the_isr_nor_hides_a_lagging_follower() {
    let view = on_brokers_1_and_2(1, 1, &[1, 2], 1);
    let clock = Arc::new(ManualClock::new(NOW_MS));
    let (_l, leader) = replica_partition_on(1, &view, Arc::clone(&clock));
    let (_f, follower) = replica_partition_on(2, &view, Arc::clone(&clock));
    fetch_once(&leader, &follower, 2);
    let epochs = |id: i32| Some(BrokerEpoch::new(i64::from(id) * 10));
    clock.jump_wall_ms(60_000);
    assert_eq!(
        leader.isr_shrink(epochs),
        None,
        "a wall-clock jump forward is no lag"
    );
    clock.jump_wall_ms(-120_000);
    clock.advance_ms(31_000);
    let shrink = leader
        .isr_shrink(epochs)
        .expect("the follower has not fetched for 31 s of monotonic time");
    assert_eq!(shrink.new_isr, vec![(1, BrokerEpoch::new(10))]);
}

/// A leader's DivergingEpoch answer.
fn epoch_end_offset(epoch: i32, end_offset: i64) -> Option<super::EpochEndOffset> {
    Some(super::EpochEndOffset {
        epoch: LeaderEpoch::new(epoch),
        end_offset: Offset::new(end_offset),
    })
}

/// One round of a follower's fetch from its leader, applied as the fetcher does.
fn fetch_once(leader: &Partition, follower: &Partition, follower_id: i32) -> super::FollowerRead {
    let position = follower.fetch_position().unwrap();
    let read = leader
        .read_for_follower(
            &super::FollowerFetch {
                replica_id: follower_id,
                broker_epoch: BrokerEpoch::new(i64::from(follower_id) * 10),
                current_leader_epoch: LeaderEpoch::known(position.leader_epoch.get()),
                fetch_offset: position.fetch_offset.get(),
                last_fetched_epoch: position.last_fetched_epoch,
                max_bytes: usize::MAX,
            },
            |id| Some(BrokerEpoch::new(i64::from(id) * 10)),
        )
        .unwrap();
    if let Some(diverging) = read.diverging_epoch {
        let target = follower.truncation_offset(diverging).unwrap();
        follower.truncate_to(target).unwrap();
        return read;
    }
    let records = read
        .records
        .as_ref()
        .map(|slice| slice.read().unwrap())
        .unwrap_or_default();
    follower
        .append_as_follower(
            &records,
            read.high_watermark.get(),
            read.log_start_offset.get(),
        )
        .unwrap();
    read
}

#[tokio::test]
async fn acks_all_waits_until_the_follower_has_fetched_past_the_append() {
    let led_by_1 = on_brokers_1_and_2(1, 1, &[1, 2], 2);
    let (_l, leader) = replica_partition(1, &led_by_1);
    let (_f, follower) = replica_partition(2, &led_by_1);
    assert!(leader.is_leader() && !follower.is_leader());
    leader.check_enough_replicas().unwrap();
    let appended = leader.append(&batch(3, NOW_MS), NOW_MS).unwrap();
    assert_eq!(
        leader.high_watermark(),
        Offset::new(0),
        "nothing is committed before the follower has it"
    );
    let committed = {
        let leader = Arc::clone(&leader);
        tokio::spawn(async move {
            leader
                .wait_committed(Offset::new(3), appended.generation)
                .await
        })
    };
    // The first fetch carries the records; the follower is not known to hold them yet.
    fetch_once(&leader, &follower, 2);
    assert_eq!(
        follower.fetch_position().unwrap().fetch_offset,
        Offset::new(3)
    );
    assert_eq!(leader.high_watermark(), Offset::new(0));
    assert!(!committed.is_finished());
    // The next fetch says it has them: committed, and the follower learns so.
    fetch_once(&leader, &follower, 2);
    assert_eq!(leader.high_watermark(), Offset::new(3));
    committed.await.unwrap().unwrap();
    fetch_once(&leader, &follower, 2);
    assert_eq!(follower.high_watermark(), Offset::new(3));

    // Leadership moves to 2: a wait begun under 1's ends NOT_LEADER_OR_FOLLOWER.
    let appended = leader.append(&batch(1, NOW_MS), NOW_MS).unwrap();
    let waiting = {
        let leader = Arc::clone(&leader);
        tokio::spawn(async move {
            leader
                .wait_committed(Offset::new(4), appended.generation)
                .await
        })
    };
    let led_by_2 = on_brokers_1_and_2(2, 2, &[2], 2);
    leader.apply_image(&led_by_2).unwrap();
    follower.apply_image(&led_by_2).unwrap();
    assert!(matches!(
        waiting.await.unwrap(),
        Err(PartitionError::NotLeaderOrFollower)
    ));
    // With the ISR below min.insync.replicas, the new leader refuses acks=all.
    assert!(matches!(
        follower.check_enough_replicas(),
        Err(PartitionError::NotEnoughReplicas)
    ));
    // The old leader's uncommitted record diverges from the new leader's epoch 2,
    // which started at 3: it fetches, is told so, and truncates to 3.
    let (new_leader, old_leader) = (&follower, &leader);
    assert_eq!(
        old_leader.fetch_position().unwrap().fetch_offset,
        Offset::new(4)
    );
    let read = fetch_once(new_leader, old_leader, 1);
    assert_eq!(read.diverging_epoch, epoch_end_offset(1, 3));
    assert_eq!(
        old_leader.fetch_position().unwrap().fetch_offset,
        Offset::new(3)
    );
    // Then it fetches on from there, caught up.
    let read = fetch_once(new_leader, old_leader, 1);
    assert_eq!(read.diverging_epoch, None);
}

/// Found by the fault runs: after a kill -9, broker 2 led for an epoch and lost the
/// leadership before anything was appended in it; the restarted broker 1 took it
/// back in a later epoch, never having known 2's. Broker 2 must still catch up:
/// the new leader's diverging epoch ends right at 2's log end, and the truncation
/// there must forget 2's empty epoch, or 2 asks with it forever and stays out of
/// the ISR.
#[tokio::test]
async fn a_follower_whose_last_epoch_led_nothing_catches_up_with_a_leader_that_never_knew_it() {
    let view =
        |leader_id: i32, leader_epoch: i32| on_brokers_1_and_2(leader_id, leader_epoch, &[1, 2], 1);
    let (_one, one) = replica_partition(1, &view(1, 1));
    let (_two, two) = replica_partition(2, &view(1, 1));
    one.append(&batch(3, NOW_MS), NOW_MS).unwrap();
    fetch_once(&one, &two, 2);
    fetch_once(&one, &two, 2);
    assert_eq!(two.fetch_position().unwrap().fetch_offset, Offset::new(3));

    // Broker 2 leads epoch 2 (broker 1 is down and sees none of it), appends nothing.
    two.apply_image(&view(2, 2)).unwrap();
    assert!(two.is_leader());
    // Broker 1 is back and leads epoch 3; broker 2 follows it.
    one.apply_image(&view(1, 3)).unwrap();
    two.apply_image(&view(1, 3)).unwrap();
    one.append(&batch(2, NOW_MS), NOW_MS).unwrap();
    assert_eq!(
        two.fetch_position().unwrap().last_fetched_epoch,
        Some(LeaderEpoch::new(2))
    );

    let diverged = fetch_once(&one, &two, 2);
    assert_eq!(diverged.diverging_epoch, epoch_end_offset(1, 3));
    assert_eq!(
        two.fetch_position().unwrap().last_fetched_epoch,
        Some(LeaderEpoch::new(1)),
        "the epoch broker 2 led without a record is forgotten"
    );
    let read = fetch_once(&one, &two, 2);
    assert_eq!(read.diverging_epoch, None);
    assert_eq!(two.fetch_position().unwrap().fetch_offset, Offset::new(5));
}

/// A transaction coordinator's marker write that timed out before the marker was
/// committed is retried; the partition no longer holds the transaction open (the
/// first marker ended it here), and the retry appends a second marker, as
/// Kafka does, which ends nothing; it is done only once both are committed
/// and fsynced: a leader change could still truncate the first, and a
/// coordinator told "done" would never write it again.
#[tokio::test]
async fn a_retried_marker_is_appended_again_and_done_once_committed() {
    let led_by_1 = on_brokers_1_and_2(1, 1, &[1, 2], 2);
    let (_l, leader) = replica_partition(1, &led_by_1);
    let (_f, follower) = replica_partition(2, &led_by_1);
    leader
        .append(&producer_batch(7, 0, 0, 3, true), NOW_MS)
        .unwrap();
    fetch_once(&leader, &follower, 2);
    fetch_once(&leader, &follower, 2);
    assert_eq!(leader.high_watermark(), Offset::new(3));

    let flusher = super::Flusher::start(StorageHealth::new("test log dir"));
    let end_txn = |partition: &Arc<Partition>| {
        let (partition, flusher) = (Arc::clone(partition), flusher.clone());
        async move { super::txn_marker_append::end_txn(&partition, &flusher, &abort(7), NOW_MS).await }
    };
    let short = Duration::from_millis(50);
    let first = tokio::time::timeout(short, end_txn(&leader)).await;
    assert!(first.is_err(), "the follower has not fetched the marker");
    assert!(
        !leader.has_ongoing_txn(7).unwrap(),
        "the marker is in the log"
    );
    let retry = tokio::spawn(end_txn(&leader));
    tokio::time::sleep(short).await;
    assert!(!retry.is_finished(), "the markers are not committed yet");

    fetch_once(&leader, &follower, 2);
    fetch_once(&leader, &follower, 2);
    assert_eq!(
        leader.high_watermark(),
        Offset::new(5),
        "the retry appended a second marker"
    );
    retry.await.unwrap().unwrap();
    assert!(leader.flushed_offset() >= 5, "done only once fsynced");
}

/// A marker is an acks=all append. Below min.insync.replicas (the committed
/// ISR) it is refused and nothing is written, so the transaction stays open
/// and the coordinator retries; a marker counted committed through a pending
/// expansion could be lost to an ELR leader that never had it.
#[tokio::test]
async fn a_marker_is_refused_below_min_insync_replicas() {
    let alone = on_brokers_1_and_2(1, 1, &[1], 2);
    let (_l, leader) = replica_partition(1, &alone);
    leader
        .append(&producer_batch(7, 0, 0, 3, true), NOW_MS)
        .unwrap();
    assert!(matches!(
        leader.append_txn_marker(&abort(7), NOW_MS),
        Err(PartitionError::NotEnoughReplicas)
    ));
    assert!(leader.has_ongoing_txn(7).unwrap(), "no marker was written");
}

/// A marker's wait is tied to the leadership it was appended in. The
/// leadership moves away and back (ABA) while the wait is not polled; the high
/// watermark of the new leadership passes the marker's end, but the marker may
/// have been truncated in between, so the wait ends NOT_LEADER_OR_FOLLOWER and
/// the coordinator writes it again (it resolved done, and the marker was lost).
#[tokio::test]
async fn a_marker_wait_ends_with_its_leadership_even_if_it_comes_back() {
    let view =
        |leader_id: i32, leader_epoch: i32| on_brokers_1_and_2(leader_id, leader_epoch, &[1], 1);
    let (_l, leader) = replica_partition(1, &view(1, 1));
    leader
        .append(&producer_batch(7, 0, 0, 3, true), NOW_MS)
        .unwrap();
    let (offset, generation) = leader.append_txn_marker(&abort(7), NOW_MS).unwrap();
    let end_offset = offset.next();
    assert_eq!(end_offset, Offset::new(4));
    leader.apply_image(&view(2, 2)).unwrap();
    leader.apply_image(&view(1, 3)).unwrap();
    leader.append(&batch(2, NOW_MS), NOW_MS).unwrap();
    assert!(leader.high_watermark() >= end_offset);
    assert!(matches!(
        leader.wait_committed(end_offset, generation).await,
        Err(PartitionError::NotLeaderOrFollower)
    ));
}
