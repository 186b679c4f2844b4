//! What a request handler may touch, cut in three narrow contexts, each owning
//! the engines of one group of handlers and nothing else:
//!
//! - `Partitions`, for the partition APIs (Produce, Fetch, ListOffsets,
//!   DeleteRecords, OffsetForLeaderEpoch, DescribeProducers): the replica
//!   manager, the clock and the flush setting.
//! - `Coordinators`, for the group, offset and transaction APIs: the group
//!   coordinator and the transaction coordinator.
//! - `Cluster`, for Metadata and the admin APIs: the controller (image and
//!   proposals), the broker settings they answer with, and the topic-id source.
//!
//! The first two read the controller's latest metadata image but cannot propose
//! a command; only `Cluster` changes metadata. `BrokerState` is the one value the
//! server builds at start, once every engine is open, and shares by `Arc` with
//! the connections; dispatch hands each handler only the context (or contexts)
//! it declares. Every field is private: a handler reaches an engine only through
//! the methods of its context.
//!
//! They are defined here, beside the handlers they serve, and not in the server
//! that builds them, so that the import direction holds: the server imports the
//! protocol, the protocol imports the engines, and nothing below imports the
//! server. They only hold the engines; starting and stopping them is the
//! server's, through the handles it built.

use std::sync::Arc;

use tokio::sync::watch;

use crate::clock::Clock;
use crate::config::Config;
use crate::controller::{
    CommandOutcome, Controller, ControllerError, MetadataCommand, MetadataImage,
};
use crate::coordinator::group::GroupService;
use crate::coordinator::txn::TxnService;
use crate::metrics::Metrics;
use crate::random::IdSource;
use crate::replica::{FollowerFetch, FollowerRead, Partition, PartitionError, ReplicaManager};
use crate::types::Offset;

/// The controller's latest metadata image, read without waiting on raft and
/// without the means to change it.
#[derive(Clone)]
struct Images(watch::Receiver<Arc<MetadataImage>>);

impl Images {
    fn current(&self) -> Arc<MetadataImage> {
        Arc::clone(&self.0.borrow())
    }
}

/// The partition side: this broker's partitions (through the replica manager),
/// the clock appends are stamped with, and whether a produce waits for its fsync.
/// Invariant: a partition is only ever resolved against a metadata image, so a
/// handler never reaches the log of a topic the image does not have; nothing
/// here reaches a coordinator or proposes metadata.
pub struct Partitions {
    replicas: Arc<ReplicaManager>,
    images: Images,
    clock: Arc<dyn Clock>,
    flush_before_ack: bool,
}

impl Partitions {
    pub fn new(
        replicas: Arc<ReplicaManager>,
        images: watch::Receiver<Arc<MetadataImage>>,
        clock: Arc<dyn Clock>,
        flush_before_ack: bool,
    ) -> Partitions {
        Partitions {
            replicas,
            images: Images(images),
            clock,
            flush_before_ack,
        }
    }

    /// The latest metadata image; a cheap Arc clone, never waits on raft.
    pub fn image(&self) -> Arc<MetadataImage> {
        self.images.current()
    }

    /// The current time in milliseconds, as appends are stamped.
    pub fn now_ms(&self) -> i64 {
        self.clock.now_ms()
    }

    /// This broker's id.
    pub fn node_id(&self) -> i32 {
        self.replicas.node_id()
    }

    /// Whether a produce is answered only once its batches are fsynced.
    pub fn flush_before_ack(&self) -> bool {
        self.flush_before_ack
    }

    /// The partition if `image` has it, creating its log on first use. Blocking
    /// when the log is new: for callers already off the runtime worker.
    pub fn partition(
        &self,
        image: &MetadataImage,
        topic: &str,
        partition: i32,
    ) -> Result<Arc<Partition>, PartitionError> {
        self.replicas.partition(image, topic, partition)
    }

    /// Ends a producer's transaction on a partition led here (WriteTxnMarkers):
    /// see `ReplicaManager::end_txn`.
    pub async fn end_txn(
        &self,
        partition: &Arc<Partition>,
        marker: &crate::log::TxnMarker,
    ) -> Result<(), PartitionError> {
        self.replicas.end_txn(partition, marker).await
    }

    /// `partition`, for callers on a runtime worker.
    pub fn partition_on_worker(
        &self,
        image: &MetadataImage,
        topic: &str,
        partition: i32,
    ) -> Result<Arc<Partition>, PartitionError> {
        self.replicas.partition_on_worker(image, topic, partition)
    }

    /// A partition a consumer may read here (KIP-392: a follower too, when
    /// `from_follower`).
    pub fn readable_on_worker(
        &self,
        image: &MetadataImage,
        topic: &str,
        partition: i32,
        from_follower: bool,
    ) -> Result<Arc<Partition>, PartitionError> {
        self.replicas
            .readable_on_worker(image, topic, partition, from_follower)
    }

    /// KIP-392: the replica a consumer in `client_rack` should fetch from instead.
    pub fn preferred_read_replica(
        &self,
        partition: &Partition,
        fetch_offset: i64,
        client_rack: &str,
    ) -> Option<i32> {
        self.replicas
            .preferred_read_replica(partition, fetch_offset, client_rack)
    }

    /// A follower's fetch of a partition this broker leads.
    pub fn read_for_follower(
        &self,
        partition: &Arc<Partition>,
        fetch: &FollowerFetch,
    ) -> Result<FollowerRead, PartitionError> {
        self.replicas.read_for_follower(partition, fetch)
    }

    /// Asks the group commit to fsync `partition` soon.
    pub fn request_flush(&self, partition: &Arc<Partition>) {
        self.replicas.flusher().request(partition);
    }

    /// Resolves once `partition` is durable up to `end_offset`.
    pub async fn wait_durable(
        &self,
        partition: &Arc<Partition>,
        end_offset: Offset,
    ) -> std::io::Result<()> {
        self.replicas
            .flusher()
            .wait_durable(partition, end_offset)
            .await
    }
}

/// The coordinators: the group coordinator (groups, committed and pending
/// offsets) and the transaction coordinator, with the metadata image the offset
/// and transaction APIs check partitions against, the clock commits are stamped
/// with, and this node's id (on one node, every group's and transaction's
/// coordinator). Invariant: offsets and transaction state are reached only
/// through the two coordinators' handles, never a store; nothing here reaches a
/// partition log or proposes metadata.
pub struct Coordinators {
    groups: GroupService,
    txns: TxnService,
    images: Images,
    clock: Arc<dyn Clock>,
    node_id: i32,
    /// The listener other brokers are reached on, and how.
    inter_broker_listener: String,
    peers: Arc<crate::protocol::peer_client::PeerConnector>,
}

impl Coordinators {
    pub fn new(
        groups: GroupService,
        txns: TxnService,
        images: watch::Receiver<Arc<MetadataImage>>,
        clock: Arc<dyn Clock>,
        node_id: i32,
        inter_broker_listener: String,
        peers: Arc<crate::protocol::peer_client::PeerConnector>,
    ) -> Coordinators {
        Coordinators {
            groups,
            txns,
            images: Images(images),
            clock,
            node_id,
            inter_broker_listener,
            peers,
        }
    }

    /// The broker that coordinates `transactional_id`: the leader of its
    /// partition of the transaction state topic, if it has one.
    pub fn txn_coordinator(&self, image: &MetadataImage, transactional_id: &str) -> Option<i32> {
        let partition = crate::internal_topics::txn_partition(transactional_id);
        image
            .partition(
                crate::internal_topics::TRANSACTION_STATE_TOPIC_NAME,
                partition,
            )
            .map(|partition| partition.leader_id)
            .filter(|leader| *leader >= 0)
    }

    /// KIP-890: whether `partitions` are in `transactional_id`'s ongoing
    /// transaction, asked of its coordinator (here, or over the inter-broker
    /// listener): one code per partition, or the error that kept it from
    /// answering (retriable).
    pub async fn verify_txn_partitions(
        &self,
        transactional_id: &str,
        producer_id: i64,
        producer_epoch: i16,
        partitions: Vec<crate::types::TopicPartition>,
    ) -> Result<Vec<i16>, i16> {
        let image = self.image();
        let coordinator = self
            .txn_coordinator(&image, transactional_id)
            .ok_or(crate::error_code::COORDINATOR_NOT_AVAILABLE)?;
        if coordinator == self.node_id {
            return self
                .txns
                .verify_partitions(
                    transactional_id.to_string(),
                    producer_id,
                    producer_epoch,
                    partitions,
                )
                .await;
        }
        let broker = image
            .brokers
            .get(&coordinator)
            .ok_or(crate::error_code::COORDINATOR_NOT_AVAILABLE)?;
        let (host, port) = broker.endpoint(&self.inter_broker_listener);
        let port = u16::try_from(port).map_err(|_| crate::error_code::COORDINATOR_NOT_AVAILABLE)?;
        let client_id = format!("sluice-txn-verifier-{}", self.node_id);
        let wait = std::time::Duration::from_millis(crate::limits::TXN_VERIFY_WAIT_MS);
        let answer = tokio::time::timeout(
            wait,
            crate::protocol::broker_client::verify_txn_partitions(
                crate::protocol::broker_client::PeerTarget {
                    connector: &self.peers,
                    host,
                    port,
                    client_id: &client_id,
                },
                transactional_id,
                producer_id,
                producer_epoch,
                &partitions,
            ),
        )
        .await;
        match answer {
            Ok(Ok(result)) => result,
            Ok(Err(error)) => {
                tracing::warn!(coordinator, %error, "verifying transaction partitions failed");
                Err(crate::error_code::COORDINATOR_NOT_AVAILABLE)
            }
            Err(_) => Err(crate::error_code::REQUEST_TIMED_OUT),
        }
    }

    /// The group coordinator, which owns every group and offset.
    pub fn groups(&self) -> &GroupService {
        &self.groups
    }

    /// The transaction coordinator.
    pub fn txns(&self) -> &TxnService {
        &self.txns
    }

    /// The latest metadata image; a cheap Arc clone, never waits on raft.
    pub fn image(&self) -> Arc<MetadataImage> {
        self.images.current()
    }

    /// The current time in milliseconds, as commits are stamped.
    pub fn now_ms(&self) -> i64 {
        self.clock.now_ms()
    }

    /// This broker's node id.
    pub fn node_id(&self) -> i32 {
        self.node_id
    }
}

/// The cluster's metadata as the admin and Metadata APIs see it: the controller
/// (the image, and proposals through raft), the broker's settings they answer
/// with or resolve topic configs against, and the source of new topic ids.
/// Invariant: the only context that changes cluster metadata, and only by a
/// command the controller validates and applies; nothing here reaches a
/// partition log or a coordinator.
pub struct Cluster {
    controller: Controller,
    config: Config,
    ids: Arc<dyn IdSource>,
}

impl Cluster {
    pub fn new(controller: Controller, config: Config, ids: Arc<dyn IdSource>) -> Cluster {
        Cluster {
            controller,
            config,
            ids,
        }
    }

    /// The latest applied metadata image; a cheap Arc clone, never waits on raft.
    pub fn image(&self) -> Arc<MetadataImage> {
        self.controller.image()
    }

    /// Who may do what (`--authorizer`).
    pub fn authorizer(&self) -> &Arc<crate::security::acl::Authorizer> {
        &self.config.authorizer
    }

    /// Proposes a command through raft and waits until it is applied.
    pub async fn propose(&self, cmd: MetadataCommand) -> Result<CommandOutcome, ControllerError> {
        self.controller.propose(cmd).await
    }

    /// This broker's node id.
    pub fn node_id(&self) -> i32 {
        self.config.node_id
    }

    /// `num.partitions`: the partition count of a topic created without one.
    pub fn default_partitions(&self) -> i32 {
        self.config.num_partitions
    }

    /// `default.replication.factor`.
    pub fn default_replication_factor(&self) -> i16 {
        self.config.default_replication_factor
    }

    /// `auto.create.topics.enable`.
    pub fn auto_create_topics(&self) -> bool {
        self.config.auto_create_topics
    }

    /// The broker's static settings, which topic configs fall back to and
    /// DescribeConfigs lists for the broker.
    pub fn broker_config(&self) -> &Config {
        &self.config
    }

    /// A fresh id for a new record (a topic, an ACL binding).
    pub fn next_id(&self) -> uuid::Uuid {
        self.ids.next_uuid()
    }
}

/// The three contexts and the request metrics, one per broker, shared by `Arc`.
/// Built once by the server; dispatch hands each handler what it declares.
pub struct BrokerState {
    partitions: Arc<Partitions>,
    coordinators: Coordinators,
    cluster: Cluster,
    /// Shared on its own with connection writers, which must not keep the
    /// whole state alive past shutdown.
    metrics: Arc<Metrics>,
}

impl BrokerState {
    pub fn new(
        partitions: Partitions,
        coordinators: Coordinators,
        cluster: Cluster,
        metrics: Arc<Metrics>,
    ) -> BrokerState {
        BrokerState {
            partitions: Arc::new(partitions),
            coordinators,
            cluster,
            metrics,
        }
    }

    /// By `Arc`: a produce waiting for its fsync outlives the dispatch call.
    pub fn partitions(&self) -> &Arc<Partitions> {
        &self.partitions
    }

    pub fn coordinators(&self) -> &Coordinators {
        &self.coordinators
    }

    pub fn cluster(&self) -> &Cluster {
        &self.cluster
    }

    pub fn metrics(&self) -> &Arc<Metrics> {
        &self.metrics
    }
}
