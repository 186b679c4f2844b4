//! The group coordinator's store over a real `__consumer_offsets` log, which
//! this broker leads alone, with its sled cache beside it.

#![allow(clippy::unwrap_used)]

use std::sync::Arc;

use tokio::sync::watch;
use uuid::Uuid;

use super::OffsetsLog;
use crate::clock::ManualClock;
use crate::config::Config;
use crate::controller::{MetadataImage, PartitionImage, TopicImage};
use crate::log::TxnMarker;
use crate::placement::{group_partition, OFFSETS_TOPIC_NAME, OFFSETS_TOPIC_PARTITIONS};
use crate::replica::{BoxFuture, LeaderConnector, LeaderLink, ReplicaManager};
use crate::store::{CommittedOffset, OffsetStore, SledOffsetStore, TxnOffsetStore};
use crate::types::TopicPartition;

const NOW_MS: i64 = 1_700_000_000_000;

/// This broker follows nobody.
struct NoLeaders;

impl LeaderConnector for NoLeaders {
    fn connect(
        &self,
        host: String,
        port: u16,
    ) -> BoxFuture<'static, std::io::Result<Box<dyn LeaderLink>>> {
        Box::pin(async move {
            Err(std::io::Error::other(format!(
                "no leader is reachable in this test ({host}:{port})"
            )))
        })
    }
}

/// The offsets topic, every partition led by node 1 alone in `leader_epoch`.
fn image(leader_epoch: i32) -> Arc<MetadataImage> {
    let mut image = MetadataImage::default();
    let topic_id = Uuid::from_u128(0x0ff5e75);
    let partitions = (0..OFFSETS_TOPIC_PARTITIONS)
        .map(|partition_index| PartitionImage {
            partition_index,
            leader_id: 1,
            leader_epoch,
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
    offsets: OffsetsLog,
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
            )
            .unwrap(),
        );
        replicas.sync_with(&image(0));
        let cache = Arc::new(SledOffsetStore::open(&dir.path().join("offsets")).unwrap());
        let offsets = OffsetsLog::new(Arc::clone(&cache), Arc::clone(&replicas), false);
        Node {
            _dir: dir,
            images,
            replicas,
            cache,
            offsets,
        }
    }

    /// The controller moves the partitions' leadership on to `leader_epoch`
    /// (back to this broker).
    fn lead_in(&self, leader_epoch: i32) {
        let image = image(leader_epoch);
        self.images.send_replace(Arc::clone(&image));
        self.replicas.sync_with(&image);
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
    assert_eq!(
        node.cache.fetch(group, "input", 1).unwrap().unwrap().offset,
        500
    );
    assert_eq!(
        node.cache.pending_partitions(group).unwrap(),
        vec![("input".to_string(), 1)]
    );

    // The transaction commits: its marker goes into the partition, but this
    // coordinator loses the partition before it completes the offsets.
    let tp = TopicPartition::new(OFFSETS_TOPIC_NAME, partition);
    let marker = TxnMarker {
        producer_id,
        producer_epoch: 0,
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
        node.cache.fetch(group, "input", 1).unwrap().unwrap().offset,
        600,
        "the marker commits the transaction's offset, newer in the log than the committed one"
    );
    assert!(
        node.cache.pending_partitions(group).unwrap().is_empty(),
        "the transaction is over"
    );
}
