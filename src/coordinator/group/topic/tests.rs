//! The group coordinator's store over a real `__consumer_offsets` log, which
//! this broker leads alone, with its sled cache beside it.

#![allow(clippy::unwrap_used)]

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;
use uuid::Uuid;

use super::OffsetsTopic;
use crate::clock::ManualClock;
use crate::config::Config;
use crate::controller::{MetadataImage, PartitionImage, TopicImage};
use crate::coordinator::writer::AppendTicket;
use crate::internal_topics::{group_partition, OFFSETS_TOPIC_NAME, OFFSETS_TOPIC_PARTITIONS};
use crate::log::TxnMarker;
use crate::replica::test_support::NoLeaders;
use crate::replica::ReplicaManager;
use crate::store::{
    CommittedOffset, GroupRecord, MemberValue, OffsetStore, SledOffsetStore, TxnOffsetStore,
};
use crate::types::{LeaderEpoch, ProducerEpoch, TopicPartition, TxnVerification};

const NOW_MS: i64 = 1_700_000_000_000;

/// How long a load that is not kept waiting is given to run ahead of one
/// still running, in ms.
const LOAD_RUNS_AHEAD_MS: u64 = 500;

/// The offsets topic, every partition led by node 1 alone in `leader_epoch`.
fn image(leader_epoch: i32) -> Arc<MetadataImage> {
    let mut image = MetadataImage::default();
    let topic_id = Uuid::from_u128(0x0ff5e75);
    let partitions = (0..OFFSETS_TOPIC_PARTITIONS)
        .map(|partition_index| PartitionImage {
            partition_index,
            leader_id: 1,
            leader_epoch: LeaderEpoch::new(leader_epoch),
            partition_epoch: leader_epoch,
            replicas: vec![1],
            isr: vec![1],
            elr: Vec::new(),
            last_known_elr: Vec::new(),
            adding_replicas: Vec::new(),
            removing_replicas: Vec::new(),
        })
        .collect();
    let topic = TopicImage {
        name: OFFSETS_TOPIC_NAME.to_string(),
        topic_id,
        partitions,
        configs: Default::default(),
    };
    image
        .topics
        .insert(OFFSETS_TOPIC_NAME.to_string(), Arc::new(topic));
    image
        .topic_names_by_id
        .insert(topic_id, OFFSETS_TOPIC_NAME.to_string());
    Arc::new(image)
}

/// A broker's offsets topic and its group coordinator's store.
struct Node {
    _dir: tempfile::TempDir,
    images: watch::Sender<Arc<MetadataImage>>,
    replicas: Arc<ReplicaManager>,
    cache: Arc<SledOffsetStore>,
    offsets: OffsetsTopic,
}

impl Node {
    fn start() -> Node {
        let dir = tempfile::TempDir::new().unwrap();
        let config = Config::ephemeral(dir.path());
        let (images, _) = watch::channel(image(0));
        let replicas = Arc::new(
            ReplicaManager::open(
                &config,
                Arc::new(ManualClock::new(NOW_MS)),
                images.subscribe(),
                Arc::new(NoLeaders),
                crate::limits::IDLE_SEGMENT_FILES_MAX,
            )
            .unwrap(),
        );
        replicas.sync_with(&image(0));
        let cache = Arc::new(SledOffsetStore::open(&dir.path().join("offsets")).unwrap());
        let offsets = OffsetsTopic::new(Arc::clone(&cache), Arc::clone(&replicas), false);
        Node {
            _dir: dir,
            images,
            replicas,
            cache,
            offsets,
        }
    }

    /// A node that has loaded, in epoch 0, the partition of the offsets
    /// topic that holds `group`; and that partition.
    async fn loaded_for(group: &str) -> (Node, i32) {
        let node = Node::start();
        let partition = group_partition(group);
        node.load(partition, 0).await;
        (node, partition)
    }

    /// The controller moves the partitions' leadership on to `leader_epoch`
    /// (back to this broker).
    fn lead_in(&self, leader_epoch: i32) {
        let image = image(leader_epoch);
        self.images.send_replace(Arc::clone(&image));
        self.replicas.sync_with(&image);
    }

    /// The offset of partition 1 of topic "input" (what `offset` commits)
    /// that the cache holds for `group`.
    fn cached_offset(&self, group: &str) -> i64 {
        let fetched = self.cache.fetch(group, "input", 1).unwrap();
        fetched.unwrap().offset
    }

    /// `value` as `group`'s offset of partition 1 of "input", appended to
    /// `partition` of the offsets topic and not yet in the cache.
    async fn append_offset(&self, partition: i32, group: &str, value: i64) -> AppendTicket {
        let record = super::offset_record(group, "input", 1, &offset(value)[0].2);
        self.offsets
            .log
            .append(partition, vec![record])
            .await
            .unwrap()
    }

    /// The coordinator elected for `partition` loads it, as after an election.
    async fn load(&self, partition: i32, leader_epoch: i32) {
        let offsets = self.offsets.clone();
        tokio::task::spawn_blocking(move || offsets.load_partition(partition, leader_epoch))
            .await
            .unwrap()
            .unwrap();
    }
}

fn offset(value: i64) -> Vec<(String, i32, CommittedOffset)> {
    vec![(
        "input".to_string(),
        1,
        CommittedOffset {
            offset: value,
            leader_epoch: -1,
            metadata: String::new(),
            commit_timestamp_ms: NOW_MS,
        },
    )]
}

/// What the harness found: a coordinator loaded its partition while a
/// transaction had offsets pending there (so its cache held them pending,
/// beside the group's older committed offset), then lost the partition before
/// it completed them; the transaction's commit marker went into the log after
/// that load. When the partition came back, the load read only the log after
/// the last one and applied that marker over what the cache held, where the
/// cache's pending offset and its committed one had no log offsets to tell
/// which was newer: the older committed offset won, and the group's offset
/// went back (the transactional copy then copied its inputs again). A load
/// rebuilds the groups from the partition's log, as Kafka's
/// GroupMetadataManager does, so the marker commits the pending offsets.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_load_commits_offsets_pending_in_the_cache_whose_marker_followed_the_last_load() {
    let node = Node::start();
    let group = "copy";
    let partition = group_partition(group);
    let producer_id = 4000;
    node.load(partition, 0).await;
    node.offsets.commit(group, offset(500)).await.unwrap();
    node.offsets
        .stage(group, producer_id, 0, offset(600))
        .await
        .unwrap();

    // Elected again (after a restart, say): the transaction is still open.
    node.lead_in(1);
    node.load(partition, 1).await;
    assert_eq!(node.cached_offset(group), 500);
    assert_eq!(
        node.cache.pending_partitions(group).unwrap(),
        vec![("input".to_string(), 1)]
    );

    // The transaction commits: its marker goes into the partition, but this
    // coordinator loses the partition before it completes the offsets.
    let tp = TopicPartition::new(OFFSETS_TOPIC_NAME, partition);
    let marker = TxnMarker {
        producer_id,
        producer_epoch: ProducerEpoch::new(0),
        coordinator_epoch: 0,
        commit: true,
    };
    node.replicas
        .led(&tp)
        .unwrap()
        .append_txn_marker(&marker, NOW_MS)
        .unwrap();

    // Elected once more: the load sees the marker.
    node.lead_in(2);
    node.load(partition, 2).await;
    assert_eq!(
        node.cached_offset(group),
        600,
        "the marker commits the transaction's offset, newer in the log than the committed one"
    );
    assert!(
        node.cache.pending_partitions(group).unwrap().is_empty(),
        "the transaction is over"
    );
}

/// A Stable group's record goes into the partition as Kafka's
/// GroupMetadataValue, members, subscriptions and assignments included, and
/// a load rebuilds it from the log: the next coordinator restores the group
/// with its members, whatever its own cache held.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_groups_members_and_assignments_come_back_from_the_log() {
    let group = "members";
    let (node, partition) = Node::loaded_for(group).await;
    let stable = GroupRecord {
        protocol_type: Some("consumer".to_string()),
        generation_id: 3,
        protocol: Some("range".to_string()),
        leader: Some("c-1".to_string()),
        members: vec![MemberValue {
            member_id: "c-1".to_string(),
            group_instance_id: None,
            client_id: "c".to_string(),
            client_host: "/127.0.0.1".to_string(),
            rebalance_timeout_ms: 300_000,
            session_timeout_ms: 45_000,
            subscription: vec![0, 1, 0, 0, 0, 1, 0, 5, b'i', b'n', b'p', b'u', b't'],
            assignment: vec![0, 1, 0, 0, 0, 1],
        }],
    };
    let offsets = node.offsets.clone();
    let record = stable.clone();
    tokio::task::spawn_blocking(move || offsets.save_group(group, &record))
        .await
        .unwrap()
        .unwrap();
    // This cache forgets the members; the partition's log has them.
    let bare = GroupRecord {
        protocol_type: stable.protocol_type.clone(),
        generation_id: stable.generation_id,
        ..GroupRecord::default()
    };
    node.cache.save_group(group, &bare).unwrap();

    node.lead_in(1);
    node.load(partition, 1).await;
    assert_eq!(
        node.cache.load_groups().unwrap(),
        vec![(group.to_string(), stable)]
    );
}

/// A load begun in an older leader epoch can still be reading when the
/// partition is led here again and the newer epoch's load starts; it ended
/// by setting the partition loaded in its own epoch, over the newer one, and
/// every write of the newer epoch was then refused (NOT_COORDINATOR until the
/// next election). The loaded epoch never goes back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_load_of_an_older_epoch_ending_last_leaves_the_newer_epoch_writable() {
    let group = "late";
    let (node, partition) = Node::loaded_for(group).await;
    node.lead_in(1);
    node.load(partition, 1).await;
    // The older load's last step, after the newer load's.
    node.offsets.log.set_loaded(partition, 0);
    node.offsets.commit(group, offset(700)).await.unwrap();
    assert_eq!(node.cached_offset(group), 700);
}

/// Two loads of one partition never run side by side: a newer epoch's load
/// waits for an older one still running, then rebuilds the cache from the
/// log, so what the older one wrote last (here a stale offset) does not stay.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_load_waits_for_an_older_load_of_its_partition_and_rebuilds_after_it() {
    let group = "overlap";
    let (node, partition) = Node::loaded_for(group).await;
    node.offsets.commit(group, offset(500)).await.unwrap();

    // The older epoch's load is running: it has read, and has yet to write.
    let (entered_tx, entered_rx) = std::sync::mpsc::channel();
    let (release_tx, release_rx) = std::sync::mpsc::channel::<()>();
    let older = {
        let offsets = node.offsets.clone();
        let cache = Arc::clone(&node.cache);
        let runtime = tokio::runtime::Handle::current();
        tokio::task::spawn_blocking(move || {
            offsets.log.exclusively(partition, || {
                entered_tx.send(()).unwrap();
                release_rx.recv().unwrap();
                // What it read before the epoch changed: a stale offset.
                runtime.block_on(cache.commit(group, offset(100))).unwrap();
            })
        })
    };
    tokio::task::spawn_blocking(move || entered_rx.recv().unwrap())
        .await
        .unwrap();

    // Led again: the newer epoch's load starts while the older one runs.
    node.lead_in(1);
    let mut newer = {
        let offsets = node.offsets.clone();
        tokio::task::spawn_blocking(move || offsets.load_partition(partition, 1))
    };
    // Kept waiting, it cannot end while the older one runs. (Were it not, it
    // would end within this time on any machine but a very slow one, where
    // this test only grows weaker.)
    let ran_beside =
        tokio::time::timeout(Duration::from_millis(LOAD_RUNS_AHEAD_MS), &mut newer).await;
    assert!(
        ran_beside.is_err(),
        "the newer load ran beside the older one"
    );
    release_tx.send(()).unwrap();
    older.await.unwrap();
    newer.await.unwrap().unwrap();
    assert_eq!(
        node.cached_offset(group),
        500,
        "the newer load, after the older one, left what the log holds"
    );
}

/// A commit's append was acknowledged in epoch 0 and its cache write
/// stalled; the partition was led again (here in epoch 1), loaded from the
/// log, and a newer offset committed. The stalled write must not land over
/// it: OffsetFetch would answer the older offset until the next load, and
/// consumers would read again what they had processed.
#[tokio::test(flavor = "multi_thread")]
async fn a_cache_write_after_a_reload_of_its_partition_is_dropped() {
    let group = "stalled";
    let (node, partition) = Node::loaded_for(group).await;
    let ticket = node.append_offset(partition, group, 100).await;

    node.lead_in(1);
    node.load(partition, 1).await;
    node.offsets.commit(group, offset(500)).await.unwrap();
    let cache = Arc::clone(&node.cache);
    node.offsets
        .log
        .unless_reloaded(ticket, || cache.commit(group, offset(100)))
        .await
        .unwrap();
    assert_eq!(
        node.cached_offset(group),
        500,
        "the stalled write landed over the newer offset"
    );
}

/// A load waits for a cache write in flight on its partition, so that the
/// write cannot land after the load has rebuilt the cache.
#[tokio::test(flavor = "multi_thread")]
async fn a_load_waits_for_the_cache_writes_in_flight_on_its_partition() {
    let group = "in-flight";
    let (node, partition) = Node::loaded_for(group).await;
    let ticket = node.append_offset(partition, group, 7).await;
    let (release_tx, release_rx) = tokio::sync::oneshot::channel::<()>();
    let (entered_tx, entered_rx) = tokio::sync::oneshot::channel::<()>();
    let writing = {
        let log = node.offsets.log.clone();
        tokio::spawn(async move {
            log.unless_reloaded(ticket, || async move {
                entered_tx.send(()).unwrap();
                release_rx.await.unwrap();
                Ok(())
            })
            .await
        })
    };
    entered_rx.await.unwrap();
    node.lead_in(1);
    let mut load = {
        let offsets = node.offsets.clone();
        tokio::task::spawn_blocking(move || offsets.load_partition(partition, 1))
    };
    // (On a very slow machine the load might not have reached the lock in
    // this time; the test then only grows weaker.)
    let ran_beside =
        tokio::time::timeout(Duration::from_millis(LOAD_RUNS_AHEAD_MS), &mut load).await;
    assert!(ran_beside.is_err(), "the load ran beside a cache write");
    release_tx.send(()).unwrap();
    writing.await.unwrap().unwrap();
    load.await.unwrap().unwrap();
}

/// A load checkpoint is used only while the cleaner has not cleaned past
/// it. Compaction drops a tombstone (with the value it deletes) after
/// delete.retention.ms; a read from the checkpoint would never see that the
/// key was deleted, and the transaction coordinator's cache would bring an
/// expired transactional id back with its old producer id and epoch.
#[tokio::test(flavor = "multi_thread")]
async fn a_load_checkpoint_the_cleaner_passed_is_read_from_the_log_start() {
    let group = "checkpointed";
    let (node, partition) = Node::loaded_for(group).await;
    for value in [1, 2, 3] {
        node.offsets.commit(group, offset(value)).await.unwrap();
    }
    let log = node.offsets.log.clone();
    let led = node
        .replicas
        .led(&TopicPartition::new(OFFSETS_TOPIC_NAME, partition))
        .unwrap();
    let read = tokio::task::spawn_blocking(move || {
        let first = log.read_since(&led, None).unwrap();
        let checkpoint = first.checkpoint.unwrap();
        let middle = crate::store::LoadCheckpoint {
            end_offset: checkpoint.end_offset - 1,
            ..checkpoint
        };
        let since = log.read_since(&led, Some(middle)).unwrap();
        assert!(since.since_checkpoint, "the cleaner has cleaned nothing");
        assert_eq!(since.entries.len(), 1);
        led.with_log(|log| {
            log.set_first_dirty_offset(checkpoint.end_offset);
            Ok(())
        })
        .unwrap();
        log.read_since(&led, Some(middle)).unwrap()
    })
    .await
    .unwrap();
    assert!(
        !read.since_checkpoint,
        "the cleaner passed the checkpoint: read from the log start"
    );
    assert_eq!(read.entries.len(), 3);
}

/// The batches of `partition`'s log: (records in it) for each, in order.
fn batch_sizes(node: &Node, partition: i32) -> Vec<i64> {
    let led = node
        .replicas
        .led(&TopicPartition::new(OFFSETS_TOPIC_NAME, partition))
        .unwrap();
    let bytes = led
        .with_log(|log| {
            let end = log.log_end_offset();
            let read = log.read(0, usize::MAX / 2, end, true).unwrap();
            Ok(read.records.map(|slice| slice.read().unwrap()))
        })
        .unwrap()
        .unwrap_or_default();
    let mut sizes = Vec::new();
    let mut rest = &bytes[..];
    while let Some(header) = crate::log::batch::BatchHeader::parse_prefix(rest) {
        sizes.push(header.last_offset() - header.base_offset + 1);
        rest = &rest[header.size_bytes()..];
    }
    sizes
}

/// Commits of many groups on one partition that arrive while an append is in
/// flight share the next append and its acks=all wait: here every commit is
/// queued before the partition's writer runs (one worker thread), so one
/// batch holds them all, and each commit is answered and in the cache.
#[tokio::test]
async fn commits_arriving_together_share_one_append() {
    const GROUPS: usize = 16;
    let node = Node::start();
    let partition = group_partition("together-0");
    let groups: Vec<String> = (0..)
        .map(|n| format!("together-{n}"))
        .filter(|group| group_partition(group) == partition)
        .take(GROUPS)
        .collect();
    node.load(partition, 0).await;
    let mut commits = tokio::task::JoinSet::new();
    for (n, group) in groups.iter().enumerate() {
        let future = node.offsets.commit(group, offset(n as i64));
        commits.spawn(future);
    }
    while let Some(done) = commits.join_next().await {
        done.unwrap().unwrap();
    }
    assert_eq!(batch_sizes(&node, partition), vec![GROUPS as i64]);
    for (n, group) in groups.iter().enumerate() {
        let committed = node.cache.fetch(group, "input", 1).unwrap().unwrap();
        assert_eq!(committed.offset, n as i64, "{group}");
    }
}

/// KIP-890 on the offsets topic: a TxnOffsetCommit admitted by a transaction
/// coordinator on another broker carries the guard taken on the group's
/// partition before that coordinator was asked. A marker that ended the
/// transaction meanwhile lets go of the guard, and the offsets are refused
/// instead of opening a transaction after its end (whose next marker, of the
/// producer's next transaction, would then complete them); a fresh guard
/// admits them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn offsets_verified_before_their_transaction_ended_are_refused() {
    let group = "verified";
    let (node, partition) = Node::loaded_for(group).await;
    let producer_id = 4100;
    let tp = TopicPartition::new(OFFSETS_TOPIC_NAME, partition);
    let led = node.replicas.led(&tp).unwrap();
    let stale = led.start_txn_verification(producer_id, NOW_MS).unwrap();
    assert!(
        stale.is_some(),
        "no transaction of the producer is open there"
    );
    let marker = TxnMarker {
        producer_id,
        producer_epoch: ProducerEpoch::new(0),
        coordinator_epoch: 0,
        commit: false,
    };
    led.append_txn_marker(&marker, NOW_MS).unwrap();
    let refused = node
        .offsets
        .stage_verified(
            group,
            producer_id,
            0,
            offset(700),
            TxnVerification::Guarded(stale),
        )
        .await;
    assert!(refused.is_err(), "the guard went with the marker");
    assert!(node.cache.pending_partitions(group).unwrap().is_empty());

    let fresh = led.start_txn_verification(producer_id, NOW_MS).unwrap();
    node.offsets
        .stage_verified(
            group,
            producer_id,
            0,
            offset(700),
            TxnVerification::Guarded(fresh),
        )
        .await
        .unwrap();
    assert_eq!(
        node.cache.pending_partitions(group).unwrap(),
        vec![("input".to_string(), 1)]
    );
}
