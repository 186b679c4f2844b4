//! The controller of a node in a cluster: how the voters form the quorum, how a
//! proposal reaches the raft leader from any node, and KRaft's broker lifecycle
//! (register fenced, heartbeat, unfenced once caught up, fenced after the
//! session timeout).
//!
//! - Bootstrap: a voter whose raft state is pristine waits to be contacted,
//!   except the lowest voter id, which probes every other voter and initialises
//!   the quorum (with every voter, under a cluster id it generates and writes to
//!   `meta.properties` first) only when all of them answer that they are
//!   pristine too. So a quorum is initialised at most once: a restart finds
//!   raft state and never initialises, a wiped lowest voter finds the others
//!   initialised and rejoins. A node that is not a voter asks the leader to add
//!   it as a learner (KRaft's observer).
//! - Forwarding: `propose` on a node that is not the leader sends the command to
//!   the leader it knows, retrying on another while leadership moves, so no
//!   caller ever sees NOT_CONTROLLER.
//! - Heartbeat soft state (last heartbeat per broker) lives only on the leader,
//!   as in KRaft; a new leader counts every broker as heard from when it took
//!   over, so it fences late rather than early.
//!
//! Invariants: every task here holds a `Weak` of the controller and ends when
//! it is gone or shut down; no lock is held across an `.await`.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError, Weak};
use std::time::Duration;

use tokio::time::Instant;

use bytes::Bytes;
use openraft::ServerState;
use tokio::task::JoinHandle;

mod lifecycle;

use lifecycle::*;

use super::command::{CommandOutcome, MetadataCommand};
use super::features;
use super::image::MetadataImage;
use super::meta_properties::{self, MetaProperties};
use super::network::Peers;
use super::raft_types::{broker_id_of, node_id_of, ControllerNode, NodeId};
use super::rpc::{self, BrokerHeartbeat, ForwardError, HeartbeatAnswer, JoinRequest, ProbeAnswer};
use super::{Controller, ControllerError, Inner};
use crate::config::Voter;
use crate::limits::BROKER_HEARTBEATS_MISSED_BEFORE_PROBE;
use crate::limits::CONTROLLER_BOOTSTRAP_PROBE_MS;
use crate::limits::CONTROLLER_ELECTION_AFTER_LEASE_MS;
use crate::limits::CONTROLLER_FENCE_CHECK_MS;
use crate::limits::CONTROLLER_FORWARD_RETRY_MS;
use crate::limits::CONTROLLER_PROPOSE_TIMEOUT_MS;
use crate::limits::CONTROLLER_START_LOG_INTERVAL_MS;
use crate::limits::{
    CONTROLLER_PROBE_CONNECT_MS, CONTROLLER_PROBE_REFUSALS, CONTROLLER_PROBE_RETRY_MS,
};
use crate::net::{BoxFuture, ClusterId, Handler, NetConfig, NetError, Server, Transport};
use crate::types::BrokerEpoch;

/// How a node takes part in a cluster: given by the server from its config.
#[derive(Clone)]
pub struct QuorumConfig {
    /// The controller listener's bind address.
    pub listen: String,
    /// Sorted by id.
    pub voters: Vec<Voter>,
    pub transport: Arc<dyn Transport>,
    pub net: NetConfig,
    pub election_timeout_ms: u64,
    pub broker_heartbeat_interval_ms: u64,
    pub broker_session_timeout_ms: u64,
}

impl std::fmt::Debug for QuorumConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("QuorumConfig")
            .field("listen", &self.listen)
            .field("voters", &self.voters)
            .field("election_timeout_ms", &self.election_timeout_ms)
            .finish_non_exhaustive()
    }
}

impl QuorumConfig {
    pub fn is_voter(&self, node_id: i32) -> bool {
        self.voters.iter().any(|v| v.id == node_id)
    }

    /// Where the other nodes reach `node_id`'s controller, if it is a voter.
    pub fn voter_address(&self, node_id: i32) -> Option<&str> {
        self.voters
            .iter()
            .find(|v| v.id == node_id)
            .map(|v| v.address.as_str())
    }
}

/// The clustered part of a controller. Owned by `Inner`.
pub struct Quorum {
    pub config: QuorumConfig,
    pub peers: Arc<Peers>,
    pub cluster_id: ClusterId,
    /// New at every start: KRaft's incarnation id.
    pub incarnation_id: uuid::Uuid,
    pub server: Mutex<Option<Server>>,
    pub tasks: Mutex<Vec<JoinHandle<()>>>,
    heartbeats: Mutex<Heartbeats>,
    /// Wakes the fence loop for a pass now: a node's connection closed, or a
    /// probe proved a broker gone.
    fence_wake: Arc<tokio::sync::Notify>,
    /// Set by a controlled shutdown: the broker stops heartbeating, so that the
    /// fence it asked for is not undone by an unfence.
    shutting_down: std::sync::atomic::AtomicBool,
    /// The longest round trip of this broker's heartbeat to the leader since
    /// start, in microseconds: what a session must stay well above.
    heartbeat_rtt_max_us: std::sync::atomic::AtomicU64,
}

/// The leader's soft state of broker sessions.
#[derive(Default)]
struct Heartbeats {
    /// The term this node has led since, and since when; a new term resets it.
    leading: Option<(u64, Instant)>,
    last_seen: HashMap<i32, Instant>,
    /// Unfence proposals in flight, so a burst of heartbeats proposes one.
    unfencing: HashMap<i32, Instant>,
    /// When each node's last connection to this node closed: a hint, kept by
    /// every voter, that a newly elected leader acts on at once.
    closed: HashMap<i32, Instant>,
    /// Nodes whose process is being probed, with when the probe began.
    probing: HashMap<i32, Instant>,
    /// Nodes a probe proved gone (its listener refused connections twice),
    /// with when the probe began, to fence in the next pass.
    gone: HashMap<i32, Instant>,
}

impl Quorum {
    pub fn new(config: QuorumConfig, peers: Arc<Peers>, cluster_id: ClusterId) -> Quorum {
        Quorum {
            config,
            peers,
            cluster_id,
            incarnation_id: uuid::Uuid::new_v4(),
            server: Mutex::new(None),
            tasks: Mutex::new(Vec::new()),
            heartbeats: Mutex::new(Heartbeats::default()),
            fence_wake: Arc::new(tokio::sync::Notify::new()),
            shutting_down: std::sync::atomic::AtomicBool::new(false),
            heartbeat_rtt_max_us: std::sync::atomic::AtomicU64::new(0),
        }
    }

    fn note_heartbeat_rtt(&self, rtt: Duration) {
        let us = u64::try_from(rtt.as_micros()).unwrap_or(u64::MAX);
        self.heartbeat_rtt_max_us
            .fetch_max(us, std::sync::atomic::Ordering::Relaxed);
    }

    /// See `heartbeat_rtt_max_us`.
    pub fn heartbeat_rtt_max(&self) -> Duration {
        Duration::from_micros(
            self.heartbeat_rtt_max_us
                .load(std::sync::atomic::Ordering::Relaxed),
        )
    }

    fn lock_heartbeats(&self) -> std::sync::MutexGuard<'_, Heartbeats> {
        self.heartbeats
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    pub fn spawn(&self, task: JoinHandle<()>) {
        self.tasks
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(task);
    }
}

/// Answers the other controllers' messages; holds the controller weakly, so a
/// stopped controller answers nothing.
pub struct RpcHandler {
    pub inner: Weak<Inner>,
}

impl Handler for RpcHandler {
    fn handle(&self, kind: u8, body: Bytes) -> BoxFuture<'static, Result<Bytes, String>> {
        let inner = self.inner.upgrade();
        Box::pin(async move {
            let inner = inner.ok_or_else(|| "the controller is shutting down".to_string())?;
            let controller = Controller { inner };
            controller
                .answer(kind, body)
                .await
                .map_err(|e| e.to_string())
        })
    }

    /// A node's connection to this one closed: remembered, and the fence loop
    /// woken to probe it (see `fence_loop`).
    fn closed(&self, node: NodeId) {
        let Some(inner) = self.inner.upgrade() else {
            return;
        };
        let controller = Controller { inner };
        if let Some(quorum) = controller.quorum() {
            let now = Instant::now();
            quorum
                .lock_heartbeats()
                .closed
                .insert(broker_id_of(node), now);
            quorum.fence_wake.notify_one();
            let leader = controller.inner.raft.metrics().borrow().current_leader;
            if leader == Some(node) && node != controller.inner.node_id {
                tokio::spawn(elect_on_evidence(
                    Arc::downgrade(&controller.inner),
                    node,
                    now,
                ));
            }
        }
    }
}

impl Controller {
    pub(super) fn quorum(&self) -> Option<&Quorum> {
        self.inner.quorum.as_ref()
    }

    /// One controller message, answered.
    async fn answer(&self, kind: u8, body: Bytes) -> std::io::Result<Bytes> {
        let raft = &self.inner.raft;
        match kind {
            rpc::KIND_APPEND_ENTRIES => {
                let request = rpc::decode(&body)?;
                rpc::encode(&raft.append_entries(request).await)
            }
            rpc::KIND_VOTE => {
                let request = rpc::decode(&body)?;
                rpc::encode(&raft.vote(request).await)
            }
            rpc::KIND_INSTALL_SNAPSHOT => {
                let request = rpc::decode(&body)?;
                rpc::encode(&raft.install_snapshot(request).await)
            }
            rpc::KIND_PROPOSE => {
                let command: MetadataCommand = rpc::decode(&body)?;
                rpc::encode(&self.propose_here(command).await)
            }
            rpc::KIND_PROBE => {
                let initialized = raft
                    .is_initialized()
                    .await
                    .map_err(|e| std::io::Error::other(e.to_string()))?;
                let answer: Result<ProbeAnswer, ForwardError> = Ok(ProbeAnswer {
                    initialized,
                    cluster_id: self.quorum().and_then(|q| q.cluster_id.get()),
                });
                rpc::encode(&answer)
            }
            rpc::KIND_BROKER_HEARTBEAT => {
                let heartbeat: BrokerHeartbeat = rpc::decode(&body)?;
                rpc::encode(&self.heartbeat_here(&heartbeat))
            }
            rpc::KIND_JOIN => {
                let join: JoinRequest = rpc::decode(&body)?;
                rpc::encode(&self.join_here(join).await)
            }
            other => Err(std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                format!("no controller message of kind {other}"),
            )),
        }
    }

    /// The raft leader as this node knows it, with its controller address.
    fn leader(&self) -> Option<(NodeId, String)> {
        let metrics = self.inner.raft.metrics();
        let metrics = metrics.borrow();
        let leader = metrics.current_leader?;
        let address = metrics
            .membership_config
            .membership()
            .get_node(&leader)
            .map(|node| node.raft_addr.clone())?;
        Some((leader, address))
    }

    fn not_leader(&self) -> ForwardError {
        ForwardError::NotLeader {
            leader: self.inner.raft.metrics().borrow().current_leader,
        }
    }

    /// Propose on this node's raft only, as a forwarded proposal must: never
    /// forwarded again, so a message cannot loop between two nodes that each
    /// think the other leads.
    async fn propose_here(&self, command: MetadataCommand) -> Result<CommandOutcome, ForwardError> {
        match self.propose_local(command).await {
            Ok(outcome) => Ok(outcome),
            Err(ControllerError::NotLeader) => Err(self.not_leader()),
            Err(e) => Err(ForwardError::Failed(e.to_string())),
        }
    }

    /// Propose through the leader, wherever it is: here, or forwarded to it,
    /// retrying while there is none or it moves, for up to the propose timeout.
    pub(super) async fn propose_anywhere(
        &self,
        command: MetadataCommand,
    ) -> Result<CommandOutcome, ControllerError> {
        let Some(quorum) = self.quorum() else {
            return self.propose_local(command).await;
        };
        let deadline = Instant::now() + Duration::from_millis(CONTROLLER_PROPOSE_TIMEOUT_MS);
        // One request id for every attempt: an attempt whose answer
        // was lost may have applied, and the retry must not apply it again.
        let command = match command {
            MetadataCommand::Request { .. } => command,
            command
                if self.image().metadata_version() >= features::METADATA_VERSION_REQUEST_IDS =>
            {
                MetadataCommand::Request {
                    metadata_version: features::METADATA_VERSION_REQUEST_IDS,
                    request_id: uuid::Uuid::new_v4(),
                    command: Box::new(command),
                }
            }
            command => command,
        };
        loop {
            let attempt = match self.leader() {
                Some((leader, _)) if leader == self.inner.node_id => {
                    self.propose_local(command.clone()).await
                }
                Some((leader, address)) => {
                    let peer = quorum.peers.get(leader, &address);
                    let remaining = deadline.saturating_duration_since(Instant::now());
                    let body = rpc::encode(&command)?;
                    match peer.call(rpc::KIND_PROPOSE, body, Some(remaining)).await {
                        Ok(answer) => {
                            match rpc::decode::<Result<CommandOutcome, ForwardError>>(&answer)? {
                                Ok(outcome) => Ok(outcome),
                                Err(ForwardError::NotLeader { .. }) => {
                                    Err(ControllerError::NotLeader)
                                }
                                Err(ForwardError::Failed(why)) => Err(ControllerError::Raft(why)),
                            }
                        }
                        Err(NetError::Timeout) => Err(ControllerError::Timeout),
                        // The leader is gone or moved: ask again once raft knows.
                        Err(_) => Err(ControllerError::NotLeader),
                    }
                }
                None => Err(ControllerError::NotLeader),
            };
            match attempt {
                Err(ControllerError::NotLeader) if Instant::now() < deadline => {
                    let pause = Duration::from_millis(CONTROLLER_FORWARD_RETRY_MS)
                        .min(deadline.saturating_duration_since(Instant::now()));
                    tokio::time::sleep(pause).await;
                }
                Err(ControllerError::NotLeader) => return Err(ControllerError::Timeout),
                other => return other,
            }
        }
    }

    /// Kafka's controlled shutdown, before a clean stop: this broker stops
    /// heartbeating and asks to be fenced, which takes it out of every ISR (into the
    /// ELR below min ISR) and moves each of its leaderships to another ISR member;
    /// it then waits, at most `CONTROLLED_SHUTDOWN_WAIT_MS`, until its own image
    /// shows it fenced and leading nothing, so that clients are sent to the new
    /// leaders (with NOT_LEADER_OR_FOLLOWER, which they retry) before it goes. A
    /// single-node broker has nobody to hand over to and returns at once.
    pub async fn controlled_shutdown(&self) -> Result<(), ControllerError> {
        let Some(quorum) = self.quorum() else {
            return Ok(());
        };
        quorum
            .shutting_down
            .store(true, std::sync::atomic::Ordering::Release);
        let node_id = broker_id_of(self.inner.node_id);
        let Some(epoch) = self.image().brokers.get(&node_id).map(|b| b.epoch) else {
            return Ok(());
        };
        let outcome = self
            .propose(MetadataCommand::FenceBroker { node_id, epoch })
            .await?;
        if let CommandOutcome::Rejected(error) = outcome {
            // A newer registration of this node, or none: nothing to hand over.
            tracing::info!(%error, "controlled shutdown: not fenced");
            return Ok(());
        }
        let mut images = self.subscribe();
        let handed_over = |image: &Arc<MetadataImage>| {
            image.brokers.get(&node_id).is_none_or(|b| b.fenced)
                && !image
                    .topics
                    .values()
                    .any(|t| t.partitions.iter().any(|p| p.leader_id == node_id))
        };
        let wait = Duration::from_millis(crate::limits::CONTROLLED_SHUTDOWN_WAIT_MS);
        let handed = tokio::time::timeout(wait, images.wait_for(|image| handed_over(image)))
            .await
            .map(|answer| answer.is_ok());
        match handed {
            Ok(true) => {
                tracing::info!("controlled shutdown: every leadership handed over");
                Ok(())
            }
            _ => Err(ControllerError::Timeout),
        }
    }

    /// A broker's heartbeat, on the leader: note it, and unfence a fenced
    /// broker that has caught up with the log since its registration.
    fn heartbeat_here(&self, heartbeat: &BrokerHeartbeat) -> Result<HeartbeatAnswer, ForwardError> {
        let Some(quorum) = self.quorum() else {
            return Err(ForwardError::Failed("not a cluster".to_string()));
        };
        let image = self.image();
        let fenced = match image.brokers.get(&heartbeat.node_id) {
            Some(broker) if broker.epoch == heartbeat.broker_epoch => broker.fenced,
            // A heartbeat of an older registration: that broker has restarted.
            _ => return Ok(HeartbeatAnswer { fenced: true }),
        };
        let now = Instant::now();
        // Every voter keeps the sessions, on its own clock, so that a leader
        // elected later fences from when it last heard from each broker,
        // not from its election (a dead leader's broker is not given a new
        // session).
        quorum
            .lock_heartbeats()
            .last_seen
            .insert(heartbeat.node_id, now);
        if !self.is_leader() {
            return Err(self.not_leader());
        }
        let unfence = {
            let mut heartbeats = quorum.lock_heartbeats();
            let caught_up = i64::try_from(heartbeat.metadata_offset).unwrap_or(i64::MAX)
                >= heartbeat.broker_epoch.get();
            let retry = Duration::from_millis(quorum.config.broker_heartbeat_interval_ms);
            let in_flight = heartbeats
                .unfencing
                .get(&heartbeat.node_id)
                .is_some_and(|since| now.duration_since(*since) < retry);
            let unfence = fenced && caught_up && !in_flight;
            if unfence {
                heartbeats.unfencing.insert(heartbeat.node_id, now);
            }
            unfence
        };
        if unfence {
            let controller = self.clone();
            let command = MetadataCommand::UnfenceBroker {
                node_id: heartbeat.node_id,
                epoch: heartbeat.broker_epoch,
            };
            tokio::spawn(async move {
                if let Err(error) = controller.propose_local(command).await {
                    tracing::debug!(%error, "unfencing a broker failed; its next heartbeat retries");
                }
            });
        }
        Ok(HeartbeatAnswer { fenced })
    }

    /// A non-voter asks to follow the log: add it as a learner (once).
    async fn join_here(&self, join: JoinRequest) -> Result<(), ForwardError> {
        if !self.is_leader() {
            return Err(self.not_leader());
        }
        let known = self
            .inner
            .raft
            .metrics()
            .borrow()
            .membership_config
            .membership()
            .get_node(&join.node_id)
            .cloned();
        if let Some(node) = known {
            if node.raft_addr == join.address {
                return Ok(());
            }
            return Err(ForwardError::Failed(format!(
                "node {} is already a member at {}",
                join.node_id, node.raft_addr
            )));
        }
        let node = ControllerNode {
            raft_addr: join.address,
        };
        self.inner
            .raft
            .add_learner(join.node_id, node, false)
            .await
            .map(|_| ())
            .map_err(|e| ForwardError::Failed(e.to_string()))
    }

    fn is_leader(&self) -> bool {
        let metrics = self.inner.raft.metrics();
        let metrics = metrics.borrow();
        metrics.state == ServerState::Leader && metrics.current_leader == Some(self.inner.node_id)
    }

    /// The clustered start: form or join the quorum, register this broker,
    /// heartbeat, and return once it is unfenced.
    pub(super) async fn start_clustered(
        &self,
        registration: super::BrokerRegistration,
        meta: MetaProperties,
        dir: &std::path::Path,
    ) -> Result<(), ControllerError> {
        let Some(quorum) = self.quorum() else {
            return Err(ControllerError::Raft("not a cluster".to_string()));
        };
        let node_id = broker_id_of(self.inner.node_id);
        let voter = quorum.config.is_voter(node_id);
        self.check_cluster_of_peers().await?;
        if !self
            .inner
            .raft
            .is_initialized()
            .await
            .map_err(super::fatal_error)?
        {
            if voter {
                self.bootstrap(meta, dir).await?;
            } else {
                self.join().await?;
            }
        }
        let incarnation_id = quorum.incarnation_id;
        let command = MetadataCommand::RegisterBroker(super::BrokerRegistration {
            incarnation_id,
            fenced: true,
            ..registration
        });
        self.propose_until_done(command, "registering this broker")
            .await?;
        if let Some(cluster_id) = quorum.cluster_id.get() {
            if self.image().cluster_id.is_empty() {
                let command = MetadataCommand::InitCluster {
                    cluster_id,
                    features: super::features::bootstrap(),
                };
                self.propose_until_done(command, "recording the cluster id")
                    .await?;
            }
        }
        // The registration is applied at the leader; wait to apply it here.
        let image = self
            .wait_for_image("applying this broker's registration", |image| {
                image
                    .brokers
                    .get(&node_id)
                    .is_some_and(|b| b.incarnation_id == incarnation_id)
            })
            .await?;
        let epoch = image
            .brokers
            .get(&node_id)
            .map_or(BrokerEpoch::new(0), |b| b.epoch);
        tracing::info!(
            node_id,
            broker_epoch = epoch.get(),
            "broker registered, fenced until caught up"
        );
        let weak = Arc::downgrade(&self.inner);
        quorum.spawn(tokio::spawn(heartbeat_loop(weak.clone(), node_id, epoch)));
        quorum.spawn(tokio::spawn(fence_loop(weak.clone())));
        quorum.spawn(tokio::spawn(persist_cluster_id(
            weak,
            dir.to_path_buf(),
            meta_node(node_id, quorum),
        )));
        self.wait_for_image("being unfenced by the controller", |image| {
            image
                .brokers
                .get(&node_id)
                .is_some_and(|b| b.incarnation_id == incarnation_id && !b.fenced)
        })
        .await?;
        Ok(())
    }

    /// Probes every other voter once, failing the start if one of them belongs
    /// to another cluster than the one in this data dir.
    async fn check_cluster_of_peers(&self) -> Result<(), ControllerError> {
        let Some(quorum) = self.quorum() else {
            return Ok(());
        };
        for voter in &quorum.config.voters {
            if Some(voter.id) == Some(broker_id_of(self.inner.node_id)) {
                continue;
            }
            if let Err(ProbeError::WrongCluster(why)) = self.probe(voter).await {
                return Err(ControllerError::Storage(why));
            }
        }
        Ok(())
    }

    async fn probe(&self, voter: &Voter) -> Result<ProbeAnswer, ProbeError> {
        let Some(quorum) = self.quorum() else {
            return Err(ProbeError::Unreachable("not a cluster".to_string()));
        };
        let Some(node) = node_id_of(voter.id) else {
            return Err(ProbeError::Unreachable(format!("invalid voter {voter}")));
        };
        let peer = quorum.peers.get(node, &voter.address);
        match peer.call(rpc::KIND_PROBE, Bytes::new(), None).await {
            Ok(answer) => match rpc::decode::<Result<ProbeAnswer, ForwardError>>(&answer) {
                Ok(Ok(answer)) => Ok(answer),
                Ok(Err(e)) => Err(ProbeError::Unreachable(format!("{e:?}"))),
                Err(e) => Err(ProbeError::Unreachable(e.to_string())),
            },
            Err(NetError::Handshake(crate::net::HandshakeError::WrongCluster { expected, got })) => {
                Err(ProbeError::WrongCluster(format!(
                    "this node's data dir belongs to cluster {expected}, but voter {voter} is in cluster {got}: start this node with an empty --data-dir to join that cluster, or point --controller-voters at this node's own cluster"
                )))
            }
            Err(e) => Err(ProbeError::Unreachable(e.to_string())),
        }
    }

    /// A pristine voter: the lowest id initialises the quorum once every other
    /// voter has answered that it is pristine too; the others (and the lowest,
    /// if it finds the quorum already formed) wait to be contacted.
    async fn bootstrap(
        &self,
        mut meta: MetaProperties,
        dir: &std::path::Path,
    ) -> Result<(), ControllerError> {
        let Some(quorum) = self.quorum() else {
            return Ok(());
        };
        let node_id = broker_id_of(self.inner.node_id);
        let lowest = quorum.config.voters.first().map(|v| v.id) == Some(node_id);
        if !lowest {
            tracing::info!(
                node_id,
                "waiting for the lowest voter id to form the metadata quorum"
            );
            return Ok(());
        }
        let started = Instant::now();
        let mut logged = Instant::now();
        loop {
            let mut waiting_for = Vec::new();
            let mut formed = None;
            for voter in quorum.config.voters.iter().filter(|v| v.id != node_id) {
                match self.probe(voter).await {
                    Ok(answer) if answer.initialized => formed = Some(voter.clone()),
                    Ok(_) => {}
                    Err(ProbeError::WrongCluster(why)) => {
                        return Err(ControllerError::Storage(why))
                    }
                    Err(ProbeError::Unreachable(why)) => {
                        waiting_for.push(format!("{voter} ({why})"))
                    }
                }
            }
            if let Some(voter) = formed {
                tracing::info!(node_id, %voter, "the metadata quorum exists already; rejoining it");
                return Ok(());
            }
            if waiting_for.is_empty() {
                break;
            }
            if logged.elapsed() >= Duration::from_millis(CONTROLLER_START_LOG_INTERVAL_MS) {
                logged = Instant::now();
                tracing::info!(
                    waiting_for = %waiting_for.join(","),
                    elapsed_ms = started.elapsed().as_millis() as u64,
                    "forming the metadata quorum: waiting for every voter to start"
                );
            }
            tokio::time::sleep(Duration::from_millis(CONTROLLER_BOOTSTRAP_PROBE_MS)).await;
        }
        // The cluster id is durable before any node can hear of it, so a crash
        // between here and `initialize` retries with the same one.
        let cluster_id = match &meta.cluster_id {
            Some(id) => id.clone(),
            None => super::image::new_cluster_id(),
        };
        if quorum.cluster_id.adopt(&cluster_id).is_err() {
            return Err(ControllerError::Storage(format!(
                "a voter named cluster {:?} while this node formed {cluster_id}",
                quorum.cluster_id.get()
            )));
        }
        if meta.cluster_id.is_none() {
            meta.cluster_id = Some(cluster_id.clone());
            let dir = dir.to_path_buf();
            let meta = meta.clone();
            tokio::task::spawn_blocking(move || meta_properties::write(&dir, &meta))
                .await
                .map_err(|e| ControllerError::Storage(e.to_string()))??;
        }
        let members: std::collections::BTreeMap<NodeId, ControllerNode> = quorum
            .config
            .voters
            .iter()
            .filter_map(|v| {
                node_id_of(v.id).map(|id| {
                    (
                        id,
                        ControllerNode {
                            raft_addr: v.address.clone(),
                        },
                    )
                })
            })
            .collect();
        tracing::info!(node_id, %cluster_id, voters = members.len(), "initialising the metadata quorum");
        self.inner
            .raft
            .initialize(members)
            .await
            .map_err(|e| ControllerError::Raft(e.to_string()))?;
        Ok(())
    }

    /// A pristine node that is not a voter: ask the leader to add it as a
    /// learner, trying every voter until one leads.
    async fn join(&self) -> Result<(), ControllerError> {
        let Some(quorum) = self.quorum() else {
            return Ok(());
        };
        let request = JoinRequest {
            node_id: self.inner.node_id,
            address: quorum.config.listen.clone(),
        };
        let body = rpc::encode(&request)?;
        let started = Instant::now();
        let mut logged = Instant::now();
        loop {
            for voter in &quorum.config.voters {
                let Some(node) = node_id_of(voter.id) else {
                    continue;
                };
                let peer = quorum.peers.get(node, &voter.address);
                if let Ok(answer) = peer.call(rpc::KIND_JOIN, body.clone(), None).await {
                    match rpc::decode::<Result<(), ForwardError>>(&answer)? {
                        Ok(()) => {
                            tracing::info!(
                                node_id = broker_id_of(self.inner.node_id),
                                leader = voter.id,
                                "joined the metadata log as a non-voting broker"
                            );
                            return Ok(());
                        }
                        Err(ForwardError::Failed(why)) => return Err(ControllerError::Raft(why)),
                        Err(ForwardError::NotLeader { .. }) => {}
                    }
                }
            }
            if logged.elapsed() >= Duration::from_millis(CONTROLLER_START_LOG_INTERVAL_MS) {
                logged = Instant::now();
                tracing::info!(
                    elapsed_ms = started.elapsed().as_millis() as u64,
                    "waiting for a metadata leader to join"
                );
            }
            tokio::time::sleep(Duration::from_millis(CONTROLLER_BOOTSTRAP_PROBE_MS)).await;
        }
    }

    /// `propose_anywhere` until the command applies, however long there is no
    /// leader (a start waits for its quorum). A rejection is an error.
    async fn propose_until_done(
        &self,
        command: MetadataCommand,
        what: &str,
    ) -> Result<(), ControllerError> {
        let started = Instant::now();
        loop {
            match self.propose_anywhere(command.clone()).await {
                Ok(CommandOutcome::Rejected(e)) => {
                    return Err(ControllerError::Raft(format!("{what}: rejected: {e}")))
                }
                Ok(_) => return Ok(()),
                Err(ControllerError::Timeout) => {
                    tracing::info!(
                        elapsed_ms = started.elapsed().as_millis() as u64,
                        "{what}: waiting for a metadata leader"
                    );
                }
                Err(e) => return Err(e),
            }
        }
    }

    /// Waits until this node's image satisfies `ready`, logging now and then.
    async fn wait_for_image(
        &self,
        what: &str,
        ready: impl Fn(&MetadataImage) -> bool,
    ) -> Result<Arc<MetadataImage>, ControllerError> {
        let mut images = self.subscribe();
        let started = Instant::now();
        loop {
            let image = Arc::clone(&images.borrow_and_update());
            if ready(&image) {
                return Ok(image);
            }
            let log_every = Duration::from_millis(CONTROLLER_START_LOG_INTERVAL_MS);
            match tokio::time::timeout(log_every, images.changed()).await {
                Ok(Ok(())) => {}
                Ok(Err(_)) => return Err(ControllerError::ShuttingDown),
                Err(_) => tracing::info!(
                    elapsed_ms = started.elapsed().as_millis() as u64,
                    applied_index = image.last_applied_index,
                    "{what}"
                ),
            }
        }
    }
}

enum ProbeError {
    WrongCluster(String),
    Unreachable(String),
}

fn meta_node(node_id: i32, quorum: &Quorum) -> MetaProperties {
    MetaProperties {
        node_id,
        voters: quorum.config.voters.clone(),
        cluster_id: None,
    }
}

/// Writes the cluster id to `meta.properties` once the image has it, and makes
/// it this node's for every connection from then on.
async fn persist_cluster_id(inner: Weak<Inner>, dir: std::path::PathBuf, meta: MetaProperties) {
    let Some(controller) = inner.upgrade().map(|inner| Controller { inner }) else {
        return;
    };
    let Ok(image) = controller
        .wait_for_image("waiting for the cluster id", |image| {
            !image.cluster_id.is_empty()
        })
        .await
    else {
        return;
    };
    let cluster_id = image.cluster_id.clone();
    drop(controller);
    let Some(inner) = inner.upgrade() else {
        return;
    };
    let Some(quorum) = inner.quorum.as_ref() else {
        return;
    };
    if let Err(known) = quorum.cluster_id.adopt(&cluster_id) {
        tracing::error!(%known, %cluster_id, "the metadata log names another cluster id than this node's connections");
        return;
    }
    let meta = MetaProperties {
        cluster_id: Some(cluster_id),
        ..meta
    };
    let written = tokio::task::spawn_blocking(move || {
        let current = meta_properties::read(&dir)?;
        if current.is_some_and(|current| current.cluster_id == meta.cluster_id) {
            return Ok(());
        }
        meta_properties::write(&dir, &meta)
    })
    .await;
    if !matches!(written, Ok(Ok(()))) {
        tracing::error!("writing the cluster id to meta.properties failed");
    }
}
