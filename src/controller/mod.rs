//! The controller: cluster metadata (brokers, topics, partitions, configs, producer id
//! blocks) replicated through a raft log, and the metadata image handlers answer from.
//!
//! This is the only module that imports openraft. Writers call [`Controller::propose`],
//! which returns once the command is committed and applied; readers call
//! [`Controller::image`] or [`Controller::subscribe`] and never wait on raft. Invariants:
//! every image is the result of applying a prefix of the log in order, deterministically
//! ([`apply`]); a command `propose` returned `Ok` for is in the durable log (fsynced) and
//! in every image from then on, across restarts and crashes.
//!
//! Durability points, each an fsync of the raft database (`store::DurableDb::fsync`):
//! log entries, before raft is told they are flushed (so before any commit, hence before
//! `propose` returns); the vote, before `save_vote` returns; a snapshot, before raft may
//! purge the log it covers. The committed index and the in-memory state machine are not
//! synced: a restart rebuilds them from the last snapshot plus the durable log.
//!
//! A raft node id is the broker id. Without a quorum configured the controller is a single
//! voter (a single-node broker, as before clusters existed). With one (`QuorumConfig`), the
//! `quorum` module forms or joins the cluster over the `net` transport (`network`, `rpc`),
//! forwards proposals to the leader, and runs KRaft's broker lifecycle; `meta_properties`
//! pins the data dir to its node id, voters and cluster id. Storage, the state machine and
//! this API are the same in both.

pub mod apply;
pub mod command;
pub mod error;
pub mod features;
pub mod image;
mod kv;
mod log_store;
mod meta_properties;
mod network;
mod placement;
mod quorum;
mod raft_types;
mod rpc;
mod state_machine;

#[cfg(test)]
mod sim_tests;
#[cfg(test)]
mod tests;

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use openraft::error::{ClientWriteError, Fatal, RaftError};
use openraft::{Raft, ServerState, SnapshotPolicy};
use tokio::sync::{watch, Semaphore};

pub use command::{CommandOutcome, ConfigOp, MetadataCommand, MetadataError};
pub use error::ControllerError;
pub use image::{
    BrokerEndpoint, BrokerRegistration, MetadataImage, PartitionImage, TopicImage,
    UserScramCredential,
};
pub use quorum::QuorumConfig;

use kv::{ClosedSignal, KvHandle};
use log_store::LogStore;
use meta_properties::MetaProperties;
use network::{NetworkFactory, Peers};
use quorum::{Quorum, RpcHandler};
use raft_types::{node_id_of, ControllerNode, NodeId, TypeConfig};
use state_machine::StateMachineStore;

use crate::net::{ClientIdentity, ClusterId, ServerIdentity};

use crate::limits::CONTROLLER_CLOSE_WAIT_MS_MAX;
use crate::limits::CONTROLLER_LEADER_WAIT_MS_MAX;
use crate::limits::CONTROLLER_PROPOSALS_IN_FLIGHT_MAX;
use crate::limits::RAFT_ELECTION_TIMEOUT_MS_MAX;
use crate::limits::RAFT_ELECTION_TIMEOUT_MS_MIN;
use crate::limits::RAFT_HEARTBEATS_PER_ELECTION_TIMEOUT;
use crate::limits::RAFT_HEARTBEAT_INTERVAL_MS;
use crate::limits::RAFT_LOG_KEPT_AFTER_SNAPSHOT_ENTRIES;
use crate::limits::RAFT_PURGE_BATCH_ENTRIES;
use crate::limits::RAFT_REPLICATION_BATCH_ENTRIES_MAX;
use crate::limits::RAFT_SNAPSHOT_CHUNK_BYTES;
use crate::limits::RAFT_SNAPSHOT_CHUNK_TIMEOUT_MS;
use crate::limits::RAFT_SNAPSHOT_INTERVAL_ENTRIES;
use crate::store;
use crate::types::BrokerEpoch;

/// The tracing filter directive the binary should install by default: openraft logs at info
/// on every election and commit, and at error every few hundred ms while a peer is down
/// (an expected state of a cluster), which drowns the broker's own logs. The controller
/// reports what matters itself (storage failures end the broker; fencing and elections'
/// effects are logged by `quorum`); `--log-level openraft=warn` brings openraft's back.
pub const LOG_FILTER_DEFAULT: &str = "openraft=off";

/// The subdirectory of the controller dir holding the raft database.
const RAFT_DIR_NAME: &str = "raft";

/// Where and as whom this node keeps the metadata log.
#[derive(Clone, Debug)]
pub struct ControllerConfig {
    /// Directory for the controller's data; created if missing.
    pub dir: PathBuf,
    /// This broker's id, also its raft node id. Must stay the same for the same `dir`.
    pub node_id: i32,
    pub host: String,
    pub port: i32,
    pub rack: Option<String>,
    /// Every Kafka listener with its advertised address, for the registration.
    pub listeners: Vec<BrokerEndpoint>,
    /// `None`: a single-node broker, its own single voter.
    pub quorum: Option<QuorumConfig>,
    /// Where the raft state lives; `None` is sled in `dir/raft`, as the broker
    /// always has it. The simulation gives each node a disk in memory.
    pub raft_store: Option<RaftStoreSource>,
    /// The broker epoch this node's log dir says it shut down cleanly at, -1
    /// after an unclean shutdown (or none): sent with the registration (KIP-966).
    pub previous_broker_epoch: BrokerEpoch,
    /// The partition replicas this broker's open file limit has room for,
    /// registered so that the controller places no more on it.
    pub partition_budget: Option<u32>,
}

/// The metadata raft's leader (-1 while none is known) and term, for metrics.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RaftStatus {
    pub leader_id: i64,
    pub term: u64,
    /// The longest round trip of this broker's heartbeat to the leader.
    pub heartbeat_rtt_max: Duration,
}

/// Opens a raft store, once per start of the controller.
#[derive(Clone)]
pub struct RaftStoreSource(pub Arc<dyn Fn() -> Box<dyn store::RaftKv> + Send + Sync>);

impl std::fmt::Debug for RaftStoreSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("RaftStoreSource")
    }
}

/// The raft store `config` names, opened. Blocking; it runs once, at startup.
fn open_raft_store(
    config: &ControllerConfig,
    raft_dir: &std::path::Path,
) -> Result<(Arc<KvHandle>, ClosedSignal), ControllerError> {
    Ok(match &config.raft_store {
        Some(source) => KvHandle::new((source.0)()),
        None => KvHandle::open(raft_dir)?,
    })
}

/// A handle on the running controller; cheap to clone and share across tasks.
#[derive(Clone)]
pub struct Controller {
    inner: Arc<Inner>,
}

struct Inner {
    node_id: NodeId,
    /// The raft database directory, to wait for its release at shutdown.
    raft_dir: PathBuf,
    raft: Raft<TypeConfig>,
    image_rx: watch::Receiver<Arc<MetadataImage>>,
    proposals: Semaphore,
    /// The metadata log's health: offline after a failed fsync.
    health: Arc<crate::durability::StorageHealth>,
    /// Taken by the first `shutdown`, which waits on it outside the lock.
    closed: Mutex<Option<ClosedSignal>>,
    /// The clustered part; `None` on a single-node broker.
    quorum: Option<Quorum>,
}

impl Controller {
    /// Open the raft state in `dir` (creating it), initialise a single-voter cluster on first
    /// start (a new random cluster id is part of the replicated state, set by the first
    /// command), recover on restart, wait until this node is leader, and register this
    /// broker (RegisterBroker command) if its registration (host/port/rack) differs.
    pub async fn open(config: ControllerConfig) -> Result<Controller, ControllerError> {
        if config.quorum.is_some() {
            return Controller::open_clustered(config).await;
        }
        let started = Instant::now();
        let node_id = node_id_of(config.node_id)
            .ok_or_else(|| ControllerError::Raft(format!("invalid node id {}", config.node_id)))?;
        // Opening sled blocks for a moment; it happens once, before the broker serves.
        let raft_dir = config.dir.join(RAFT_DIR_NAME);
        let (kv, closed) = open_raft_store(&config, &raft_dir)?;
        tracing::debug!(
            elapsed_us = started.elapsed().as_micros() as u64,
            "raft store open"
        );
        let (state_machine, image_rx) = StateMachineStore::open(Arc::clone(&kv))?;
        let health = Arc::clone(kv.health());
        let log_store = LogStore::open(kv)?;
        let raft_config = raft_config(None)?;
        let raft = Raft::new(
            node_id,
            raft_config,
            NetworkFactory::single_node(),
            log_store,
            state_machine,
        )
        .await
        .map_err(fatal_error)?;
        tracing::debug!(
            elapsed_us = started.elapsed().as_micros() as u64,
            "raft started"
        );
        let controller = Controller {
            inner: Arc::new(Inner {
                node_id,
                raft_dir,
                raft,
                image_rx,
                proposals: Semaphore::new(CONTROLLER_PROPOSALS_IN_FLIGHT_MAX),
                health,
                closed: Mutex::new(Some(closed)),
                quorum: None,
            }),
        };
        let result = controller.start(&config).await;
        controller
            .opened(result, &config, started, "controller open")
            .await
    }

    /// The end of an open that began at `started`: after a start that failed
    /// the controller shuts down again, releasing the directory so the caller
    /// can retry or report cleanly; an open that worked is logged as `what`.
    async fn opened(
        self,
        result: Result<(), ControllerError>,
        config: &ControllerConfig,
        started: Instant,
        what: &str,
    ) -> Result<Controller, ControllerError> {
        if let Err(e) = result {
            let _ = self.shutdown().await;
            return Err(e);
        }
        tracing::info!(
            node_id = config.node_id,
            elapsed_us = started.elapsed().as_micros() as u64,
            last_applied_index = self.image().last_applied_index,
            "{what}"
        );
        Ok(self)
    }

    /// The clustered open: check the data dir against the command line, start
    /// raft and the controller listener, form or join the quorum, register, and
    /// return once this broker is unfenced.
    async fn open_clustered(config: ControllerConfig) -> Result<Controller, ControllerError> {
        let started = Instant::now();
        let Some(quorum_config) = config.quorum.clone() else {
            return Err(ControllerError::Raft("no quorum configured".to_string()));
        };
        let node_id = node_id_of(config.node_id)
            .ok_or_else(|| ControllerError::Raft(format!("invalid node id {}", config.node_id)))?;
        let meta = check_data_dir(&config, &quorum_config)?;
        let raft_dir = config.dir.join(RAFT_DIR_NAME);
        let (kv, closed) = open_raft_store(&config, &raft_dir)?;
        let (state_machine, image_rx) = StateMachineStore::open(Arc::clone(&kv))?;
        let health = Arc::clone(kv.health());
        let log_store = LogStore::open(kv)?;
        let image_cluster = image_rx.borrow().cluster_id.clone();
        let cluster_id = match (&meta.cluster_id, image_cluster.is_empty()) {
            (Some(id), _) => ClusterId::known(id.clone()),
            (None, false) => ClusterId::known(image_cluster),
            (None, true) => ClusterId::unknown(),
        };
        let listener = quorum_config
            .transport
            .bind(&quorum_config.listen)
            .await
            .map_err(|e| {
                ControllerError::Storage(format!(
                    "cannot listen for the cluster on {}: {e}",
                    quorum_config.listen
                ))
            })?;
        let peers = Arc::new(Peers::new(
            Arc::clone(&quorum_config.transport),
            ClientIdentity {
                cluster_id: cluster_id.clone(),
                node_id,
            },
            quorum_config.net.clone(),
        ));
        let raft = Raft::new(
            node_id,
            raft_config(Some(&quorum_config))?,
            NetworkFactory::over(Arc::clone(&peers)),
            log_store,
            state_machine,
        )
        .await
        .map_err(fatal_error)?;
        let net_config = quorum_config.net.clone();
        let controller = Controller {
            inner: Arc::new(Inner {
                node_id,
                raft_dir,
                raft,
                image_rx,
                proposals: Semaphore::new(CONTROLLER_PROPOSALS_IN_FLIGHT_MAX),
                health,
                closed: Mutex::new(Some(closed)),
                quorum: Some(Quorum::new(quorum_config, peers, cluster_id.clone())),
            }),
        };
        let handler = Arc::new(RpcHandler {
            inner: Arc::downgrade(&controller.inner),
        });
        let identity = ServerIdentity {
            cluster_id,
            node_id,
        };
        let server = crate::net::serve(listener, identity, handler, net_config)?;
        if let Some(quorum) = &controller.inner.quorum {
            *quorum
                .server
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner) = Some(server);
        }
        let result = async {
            controller.check_membership(&config).await?;
            controller
                .start_clustered(registration_of(&config), meta, &config.dir)
                .await
        }
        .await;
        controller
            .opened(result, &config, started, "controller open, broker unfenced")
            .await
    }

    /// An initialised raft state must have been made with the voters given now.
    async fn check_membership(&self, config: &ControllerConfig) -> Result<(), ControllerError> {
        let raft = &self.inner.raft;
        if !raft.is_initialized().await.map_err(fatal_error)? {
            return Ok(());
        }
        let Some(quorum) = &config.quorum else {
            return Ok(());
        };
        let membership = raft.metrics().borrow().membership_config.clone();
        let voters: Vec<NodeId> = membership.membership().voter_ids().collect();
        let configured: Vec<NodeId> = quorum
            .voters
            .iter()
            .filter_map(|v| node_id_of(v.id))
            .collect();
        if voters != configured {
            return Err(ControllerError::Storage(format!(
                "the metadata log in {} has voters {voters:?}, but --controller-voters names {configured:?}: start with the voters this data dir was created with",
                config.dir.display()
            )));
        }
        Ok(())
    }

    /// Where the metadata raft stands, as this node sees it.
    pub fn raft_status(&self) -> RaftStatus {
        let metrics = self.inner.raft.metrics();
        let metrics = metrics.borrow();
        RaftStatus {
            leader_id: metrics
                .current_leader
                .map_or(-1, |id| i64::try_from(id).unwrap_or(-1)),
            term: metrics.current_term,
            heartbeat_rtt_max: self
                .quorum()
                .map_or(Duration::ZERO, Quorum::heartbeat_rtt_max),
        }
    }

    /// The raft term this node is in and whether it leads it, for the
    /// simulation's one-leader-per-term check.
    #[cfg(test)]
    pub(crate) fn raft_role(&self) -> (u64, bool) {
        let metrics = self.inner.raft.metrics();
        let metrics = metrics.borrow();
        let leads = metrics.state == ServerState::Leader
            && metrics.current_leader == Some(self.inner.node_id);
        (metrics.current_term, leads)
    }

    /// The metadata log's health: offline after a failed write or fsync.
    pub fn health(&self) -> &Arc<crate::durability::StorageHealth> {
        &self.inner.health
    }

    /// The latest applied metadata image; a cheap Arc clone, never waits on raft.
    pub fn image(&self) -> Arc<MetadataImage> {
        Arc::clone(&self.inner.image_rx.borrow())
    }

    /// Watch image changes; the broker uses it to create and delete partition logs.
    pub fn subscribe(&self) -> watch::Receiver<Arc<MetadataImage>> {
        self.inner.image_rx.clone()
    }

    /// Propose a command through raft and wait until it is committed and applied; returns
    /// the state machine's outcome, already visible in `image()`. Waits as long as raft
    /// takes; a handler bounds it with its request's timeout.
    pub async fn propose(&self, cmd: MetadataCommand) -> Result<CommandOutcome, ControllerError> {
        let _slot = self
            .inner
            .proposals
            .acquire()
            .await
            .map_err(|_| ControllerError::ShuttingDown)?;
        self.propose_anywhere(cmd).await
    }

    /// Propose on this node's raft, which must be the leader (else `NotLeader`).
    async fn propose_local(&self, cmd: MetadataCommand) -> Result<CommandOutcome, ControllerError> {
        match self.inner.raft.client_write(cmd.into()).await {
            Ok(response) => Ok(response.data),
            Err(RaftError::APIError(ClientWriteError::ForwardToLeader(_))) => {
                Err(ControllerError::NotLeader)
            }
            Err(RaftError::APIError(e)) => Err(ControllerError::Raft(e.to_string())),
            Err(RaftError::Fatal(e)) => Err(fatal_error(e)),
        }
    }

    /// Stop raft and close the data directory; later calls to `propose` fail with
    /// `ShuttingDown`. Returns once the directory can be opened again.
    pub async fn shutdown(&self) -> Result<(), ControllerError> {
        self.inner.proposals.close();
        if let Some(quorum) = &self.inner.quorum {
            let tasks: Vec<_> = std::mem::take(
                &mut *quorum
                    .tasks
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner),
            );
            for task in tasks {
                task.abort();
            }
            let server = quorum
                .server
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .take();
            if let Some(server) = server {
                server.shutdown().await;
            }
        }
        self.inner
            .raft
            .shutdown()
            .await
            .map_err(|e| ControllerError::Raft(format!("raft task failed: {e}")))?;
        let closed = match self.inner.closed.lock() {
            Ok(mut guard) => guard.take(),
            Err(_) => None,
        };
        let Some(closed) = closed else {
            return Ok(());
        };
        let wait = Duration::from_millis(CONTROLLER_CLOSE_WAIT_MS_MAX);
        let still_open = || {
            ControllerError::Storage(format!(
                "metadata store still in use {CONTROLLER_CLOSE_WAIT_MS_MAX} ms after shutdown"
            ))
        };
        // The signal fires (as a receive error: nothing is ever sent) when the last user of
        // the store is gone.
        if tokio::time::timeout(wait, closed).await.is_err() {
            return Err(still_open());
        }
        // Then sled's own threads let go of the files, a moment later.
        let raft_dir = self.inner.raft_dir.clone();
        let released = tokio::task::spawn_blocking(move || store::wait_until_released(&raft_dir));
        tokio::time::timeout(wait, released)
            .await
            .map_err(|_| still_open())?
            .map_err(|e| {
                ControllerError::Storage(format!("waiting for the store to close: {e}"))
            })??;
        Ok(())
    }

    /// Become leader with everything in the log applied, then make sure the cluster id and
    /// this broker's registration are in the image.
    async fn start(&self, config: &ControllerConfig) -> Result<(), ControllerError> {
        self.become_leader().await?;
        let image = self.image();
        let mut commands = Vec::new();
        if image.cluster_id.is_empty() {
            commands.push(MetadataCommand::InitCluster {
                cluster_id: image::new_cluster_id(),
                features: features::bootstrap(),
            });
        }
        let registration = registration_of(config);
        // The epoch is set by `apply`; the rest says whether anything changed.
        let registered = image
            .brokers
            .get(&config.node_id)
            .map(|b| BrokerRegistration {
                epoch: BrokerEpoch::new(0),
                previous_broker_epoch: registration.previous_broker_epoch,
                ..b.clone()
            });
        if registered.as_ref() != Some(&registration) {
            commands.push(MetadataCommand::RegisterBroker(registration));
        }
        self.propose_all_expecting_done(commands).await
    }

    /// Propose `commands` without waiting for each in turn, so that their appends can share
    /// one fsync, then wait for all of them. Startup only: each must apply as `Done`.
    async fn propose_all_expecting_done(
        &self,
        commands: Vec<MetadataCommand>,
    ) -> Result<(), ControllerError> {
        let mut pending = Vec::with_capacity(commands.len());
        for cmd in commands {
            let rx = self
                .inner
                .raft
                .client_write_ff(cmd.into())
                .await
                .map_err(fatal_error)?;
            pending.push(rx);
        }
        for rx in pending {
            let response = rx.await.map_err(|_| ControllerError::ShuttingDown)?;
            match response {
                Ok(response) if response.data == CommandOutcome::Done => {}
                Ok(response) => {
                    return Err(ControllerError::Raft(format!(
                        "startup command was not applied: {:?}",
                        response.data
                    )))
                }
                Err(ClientWriteError::ForwardToLeader(_)) => {
                    return Err(ControllerError::NotLeader)
                }
                Err(e) => return Err(ControllerError::Raft(e.to_string())),
            }
        }
        Ok(())
    }

    async fn become_leader(&self) -> Result<(), ControllerError> {
        let raft = &self.inner.raft;
        let id = self.inner.node_id;
        if raft.is_initialized().await.map_err(fatal_error)? {
            let membership = raft.metrics().borrow().membership_config.clone();
            if !membership.membership().voter_ids().any(|voter| voter == id) {
                return Err(ControllerError::Storage(format!(
                    "the metadata log belongs to another cluster: node {id} is not a voter in {membership:?}"
                )));
            }
            // Restart: raft restores a node that was leader at once; otherwise elect now
            // instead of after an election timeout. Ignored by a node that is leader.
            raft.trigger().elect().await.map_err(fatal_error)?;
        } else {
            // A single voter elects itself as part of initialisation.
            let members = BTreeMap::from([(id, ControllerNode::default())]);
            raft.initialize(members)
                .await
                .map_err(|e| ControllerError::Raft(e.to_string()))?;
        }
        let metrics = raft
            .wait(Some(Duration::from_millis(CONTROLLER_LEADER_WAIT_MS_MAX)))
            .metrics(
                |m| {
                    let caught_up = m.last_applied.map(|id| id.index) >= m.last_log_index;
                    m.running_state.is_err()
                        || (m.state == ServerState::Leader
                            && m.current_leader == Some(id)
                            && caught_up)
                },
                "leader with the whole log applied",
            )
            .await
            .map_err(|e| match e {
                openraft::metrics::WaitError::Timeout(..) => ControllerError::NotLeader,
                openraft::metrics::WaitError::ShuttingDown => ControllerError::ShuttingDown,
            })?;
        metrics.running_state.map_err(fatal_error)
    }
}

impl Drop for Inner {
    /// The last handle dropped without `shutdown`: stop raft in the background rather than
    /// leave its tasks running with the database open for the life of the runtime.
    fn drop(&mut self) {
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            let raft = self.raft.clone();
            runtime.spawn(async move {
                let _ = raft.shutdown().await;
            });
        }
    }
}

/// This broker's registration as its config describes it (epoch 0: `apply` sets it).
fn registration_of(config: &ControllerConfig) -> BrokerRegistration {
    BrokerRegistration {
        node_id: config.node_id,
        host: config.host.clone(),
        port: config.port,
        rack: config.rack.clone(),
        listeners: config.listeners.clone(),
        supported_features: features::supported(),
        partition_budget: config.partition_budget,
        incarnation_id: uuid::Uuid::nil(),
        epoch: BrokerEpoch::new(0),
        fenced: false,
        previous_broker_epoch: config.previous_broker_epoch,
    }
}

/// Raft's settings; a quorum's election timeout is `[min, 2 * min)` and its
/// heartbeat a fifth of the minimum, as KRaft's proportions.
fn raft_config(quorum: Option<&QuorumConfig>) -> Result<Arc<openraft::Config>, ControllerError> {
    let (heartbeat, election_min, election_max) = match quorum {
        Some(quorum) => {
            let min = quorum.election_timeout_ms.max(RAFT_ELECTION_TIMEOUT_MS_MIN);
            (
                (min / RAFT_HEARTBEATS_PER_ELECTION_TIMEOUT).max(1),
                min,
                min * 2,
            )
        }
        None => (
            RAFT_HEARTBEAT_INTERVAL_MS,
            RAFT_ELECTION_TIMEOUT_MS_MIN,
            RAFT_ELECTION_TIMEOUT_MS_MAX,
        ),
    };
    let config = openraft::Config {
        cluster_name: "sluice-metadata".to_string(),
        heartbeat_interval: heartbeat,
        election_timeout_min: election_min,
        election_timeout_max: election_max,
        install_snapshot_timeout: RAFT_SNAPSHOT_CHUNK_TIMEOUT_MS,
        snapshot_max_chunk_size: RAFT_SNAPSHOT_CHUNK_BYTES,
        snapshot_policy: SnapshotPolicy::LogsSinceLast(RAFT_SNAPSHOT_INTERVAL_ENTRIES),
        max_in_snapshot_log_to_keep: RAFT_LOG_KEPT_AFTER_SNAPSHOT_ENTRIES,
        purge_batch_size: RAFT_PURGE_BATCH_ENTRIES,
        max_payload_entries: RAFT_REPLICATION_BATCH_ENTRIES_MAX,
        ..Default::default()
    };
    let config = config
        .validate()
        .map_err(|e| ControllerError::Raft(format!("invalid raft config: {e}")))?;
    Ok(Arc::new(config))
}

/// Checks `meta.properties` against the command line (writing it on a node's
/// first start) and refuses a data dir that belongs to someone else.
fn check_data_dir(
    config: &ControllerConfig,
    quorum: &QuorumConfig,
) -> Result<MetaProperties, ControllerError> {
    let dir = &config.dir;
    match meta_properties::read(dir)? {
        Some(meta) => {
            if meta.node_id != config.node_id {
                return Err(ControllerError::Storage(format!(
                    "{} belongs to node {}, not {}: start with --node-id {} or another --data-dir",
                    meta_properties::path(dir).display(),
                    meta.node_id,
                    config.node_id,
                    meta.node_id
                )));
            }
            if meta.voters != quorum.voters {
                let list = |voters: &[crate::config::Voter]| {
                    voters
                        .iter()
                        .map(ToString::to_string)
                        .collect::<Vec<_>>()
                        .join(",")
                };
                return Err(ControllerError::Storage(format!(
                    "the controller voters changed under {}: it was created with --controller-voters {}, not {}; restore that list (changing voters is not supported) or start with an empty --data-dir",
                    dir.display(),
                    list(&meta.voters),
                    list(&quorum.voters)
                )));
            }
            Ok(meta)
        }
        None => {
            if dir.join(RAFT_DIR_NAME).exists() {
                return Err(ControllerError::Storage(format!(
                    "{} holds the metadata of a single-node broker, which cannot become a node of a cluster: start a cluster node with an empty --data-dir",
                    dir.display()
                )));
            }
            let meta = MetaProperties {
                node_id: config.node_id,
                voters: quorum.voters.clone(),
                cluster_id: None,
            };
            meta_properties::write(dir, &meta)?;
            Ok(meta)
        }
    }
}

fn fatal_error(e: Fatal<NodeId>) -> ControllerError {
    match e {
        Fatal::StorageError(e) => ControllerError::Storage(e.to_string()),
        Fatal::Stopped => ControllerError::ShuttingDown,
        Fatal::Panicked => ControllerError::Raft("raft task panicked".to_string()),
    }
}
