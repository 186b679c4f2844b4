//! Starting the transaction coordinator: its store, the controller as the
//! source of producer-id blocks, the partition side that writes markers, and
//! the group coordinator that completes pending offsets.

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::{Arc, OnceLock, Weak};

use crate::clock::Clock;
use crate::config::Config;
use crate::controller::{CommandOutcome, Controller, MetadataCommand};
use crate::coordinator::group::GroupService;
use crate::coordinator::ownership::Ownership;
use crate::coordinator::txn::topic::TxnStateTopic;
use crate::coordinator::txn::{
    ProducerIdBlock, ProducerIdBlockError, ProducerIdBlockSource, TxnConfig, TxnDeps,
    TxnMarkerWriter, TxnOffsetCompletion, TxnService, TxnServiceConfig,
};
use crate::error_code;
use crate::internal_topics::{OFFSETS_TOPIC_NAME, TRANSACTION_STATE_TOPIC_NAME};
use crate::limits::TXN_ID_EXPIRATION_CHECK_INTERVAL_MS;
use crate::log::TxnMarker;
use crate::protocol::peer_client::PeerConnector;
use crate::replica::{off_the_worker, PartitionError, ReplicaManager};
use crate::store::SledTxnStore;
use crate::types::{ProducerEpoch, TopicPartition};

use super::txn_markers::marker_to_leader;

/// Producer-id blocks reserved through the controller's raft log, so no two
/// blocks ever overlap, across restarts too.
pub struct ControllerProducerIds(pub Controller);

impl ProducerIdBlockSource for ControllerProducerIds {
    fn allocate(
        &self,
        count: i64,
    ) -> Pin<Box<dyn Future<Output = Result<ProducerIdBlock, ProducerIdBlockError>> + Send + 'static>>
    {
        let controller = self.0.clone();
        Box::pin(async move {
            match controller
                .propose(MetadataCommand::AllocateProducerIds { count })
                .await
            {
                Ok(CommandOutcome::ProducerIds { first, count }) => {
                    Ok(ProducerIdBlock { first, count })
                }
                Ok(CommandOutcome::Rejected(error)) => Err(error.into()),
                Ok(other) => Err(format!("unexpected controller outcome {other:?}").into()),
                Err(error) => Err(error.into()),
            }
        })
    }
}

pub fn service_config(config: &Config) -> TxnServiceConfig {
    TxnServiceConfig {
        coordinator: TxnConfig {
            max_timeout_ms: config.transactions.max_timeout_ms,
            id_expiration_ms: config.transactions.id_expiration_ms,
        },
        producer_id_block_size: config.transactions.producer_id_block_size,
        abort_check_interval_ms: config.transactions.abort_check_interval_ms,
        expiration_check_interval_ms: TXN_ID_EXPIRATION_CHECK_INTERVAL_MS,
        ownership: Ownership::Elected,
    }
}

/// Opens the transaction store and starts the coordinator (which completes
/// the transactions that were ending when the broker stopped).
pub async fn start(
    config: &Config,
    clock: Arc<dyn Clock>,
    controller: &Controller,
    offsets: Arc<dyn TxnOffsetCompletion>,
    markers: Arc<dyn TxnMarkerWriter>,
    replicas: &Arc<ReplicaManager>,
) -> io::Result<(TxnService, Arc<SledTxnStore>)> {
    let dir = config.data_dir.join("transactions");
    let store = Arc::new(
        tokio::task::spawn_blocking(move || SledTxnStore::open(&dir))
            .await
            .map_err(io::Error::other)??,
    );
    // The coordinator's store: the transaction state topic, with sled as its cache.
    let log = TxnStateTopic::new(
        Arc::clone(&store),
        Arc::clone(replicas),
        config.flush.before_ack,
    );
    let deps = TxnDeps {
        store: Arc::new(log),
        offsets,
        markers,
        blocks: Arc::new(ControllerProducerIds(controller.clone())),
        clock,
        led_in_latest_image: super::led_in_latest_image(
            controller,
            config.node_id,
            TRANSACTION_STATE_TOPIC_NAME,
        ),
    };
    let service = TxnService::start(service_config(config), deps).await?;
    Ok((service, store))
}
/// The group coordinators complete them: this broker's for the offsets
/// partitions it leads, the leader's (a WriteTxnMarkers for that partition) for
/// the others. Until `attach`, every call fails and is retried.
pub struct GroupOffsetCompletion {
    groups: GroupService,
    replicas: OnceLock<Weak<ReplicaManager>>,
    /// How markers reach a leader on another broker.
    peers: Arc<PeerConnector>,
}

impl GroupOffsetCompletion {
    pub fn new(groups: GroupService, peers: Arc<PeerConnector>) -> Arc<GroupOffsetCompletion> {
        Arc::new(GroupOffsetCompletion {
            groups,
            peers,
            replicas: OnceLock::new(),
        })
    }

    /// Connects it to the partitions whose leaders it asks. Called once.
    pub fn attach(&self, replicas: &Arc<ReplicaManager>) {
        let attached = self.replicas.set(Arc::downgrade(replicas));
        assert!(attached.is_ok(), "offset completion attached twice");
    }
}

impl TxnOffsetCompletion for GroupOffsetCompletion {
    fn complete(
        &self,
        producer_id: i64,
        producer_epoch: ProducerEpoch,
        coordinator_epoch: i32,
        offsets_partitions: Vec<i32>,
        commit: bool,
    ) -> Pin<Box<dyn Future<Output = io::Result<()>> + Send + 'static>> {
        let groups = self.groups.clone();
        let replicas = self.replicas.get().and_then(Weak::upgrade);
        let peers = Arc::clone(&self.peers);
        Box::pin(async move {
            let replicas = replicas.ok_or_else(|| io::Error::other("the broker is not running"))?;
            let marker = TxnMarker {
                producer_id,
                producer_epoch,
                coordinator_epoch,
                commit,
            };
            let mut local = Vec::new();
            for partition in offsets_partitions {
                let tp = TopicPartition::new(OFFSETS_TOPIC_NAME, partition);
                let failed =
                    |e: PartitionError| io::Error::other(format!("offsets partition {tp}: {e}"));
                let leader = replicas.marker_leader(&tp).map_err(failed)?;
                let Some((host, port)) = leader else {
                    let led = off_the_worker(|| replicas.led(&tp)).map_err(failed)?;
                    replicas.end_txn(&led, &marker).await.map_err(failed)?;
                    local.push(partition);
                    continue;
                };
                let node_id = replicas.node_id();
                let answer = marker_to_leader(&peers, node_id, (&host, port), &tp, &marker)
                    .await
                    .ok_or_else(|| {
                        io::Error::other(format!("{host}:{port} did not answer in time"))
                    })??;
                if answer != error_code::NONE {
                    return Err(io::Error::other(format!(
                        "the group coordinator of {tp} answered error {answer}"
                    )));
                }
            }
            if !local.is_empty() {
                groups
                    .complete_txn_offsets(producer_id, local, commit)
                    .await?;
            }
            Ok(())
        })
    }
}

/// The local group coordinator completes them, with no marker: for a
/// coordinator whose offsets live in sled alone (the service tests).
impl TxnOffsetCompletion for GroupService {
    fn complete(
        &self,
        producer_id: i64,
        _producer_epoch: ProducerEpoch,
        _coordinator_epoch: i32,
        offsets_partitions: Vec<i32>,
        commit: bool,
    ) -> Pin<Box<dyn Future<Output = io::Result<()>> + Send + 'static>> {
        let groups = self.clone();
        Box::pin(async move {
            groups
                .complete_txn_offsets(producer_id, offsets_partitions, commit)
                .await
        })
    }
}
