//! Starting and stopping a broker: listeners, the accept loop (with the
//! connection limit and the request-byte budget every connection shares),
//! background tasks (metadata sync, retention, flush policy, checkpoints) and
//! graceful shutdown.
//!
//! `Broker` is the embeddable handle: `Broker::start(config)` returns once every
//! listener is bound and the controller has a leader, so a client may connect
//! immediately; `shutdown()` flushes every log and marks a clean shutdown.

mod cleaner;
mod connection;
mod descriptors;
mod isr;
mod jwks;
mod metrics_source;
mod ticks;
pub mod tls;
mod txn;
mod txn_markers;
mod users;

use std::collections::HashMap;
use std::io;
use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{watch, Semaphore};
use tokio::task::JoinSet;
use tokio_rustls::TlsAcceptor;

use crate::security::ssl_principal::PrincipalMapper;
use crate::security::tls::PeerTls;

use crate::clock::{Clock, SystemClock};
use crate::config::Config;
use crate::controller::{
    BrokerEndpoint, Controller, ControllerConfig, ControllerError, MetadataImage, QuorumConfig,
};
use crate::coordinator::actor::Stopped;
use crate::coordinator::group::{
    GroupConfig, GroupDeps, GroupService, GroupServiceConfig, Ownership,
};
use crate::coordinator::ownership::{Leadership, LedInLatestImage};
use crate::coordinator::txn::TxnService;
use crate::durability::StorageHealth;
use crate::internal_topics::{OFFSETS_TOPIC_NAME, TRANSACTION_STATE_TOPIC_NAME};
use crate::limits::{
    ACCEPT_RETRY_MS, ACCEPT_RETRY_MS_MAX, CONNECTIONS_MAX, FOLLOW_METADATA_STEP_WARN_MS,
};
use crate::limits::{LOG_CHECKPOINT_INTERVAL_MS, LOG_FLUSH_POLICY_CHECK_INTERVAL_MS};
use crate::metrics::Metrics;
use crate::protocol::context::{BrokerState, Cluster, Coordinators, Partitions};
use crate::protocol::ListenerInfo;
use crate::random::{IdSource, RandomIds};
use crate::replica::ReplicaManager;
use crate::store::{SledOffsetStore, SledTxnStore};
use crate::types::{BrokerEpoch, LeaderEpoch};

#[derive(Debug)]
pub enum StartError {
    Io(io::Error),
    Controller(ControllerError),
    /// The TLS keystore or truststore cannot be used.
    Tls(String),
    /// OAUTHBEARER's JWKS cannot be read.
    Jwks(String),
}

impl std::fmt::Display for StartError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            StartError::Io(error) => write!(f, "{error}"),
            StartError::Controller(error) => write!(f, "controller: {error}"),
            StartError::Tls(error) => write!(f, "TLS: {error}"),
            StartError::Jwks(error) => write!(f, "OAUTHBEARER: {error}"),
        }
    }
}

impl std::error::Error for StartError {}

impl From<io::Error> for StartError {
    fn from(error: io::Error) -> StartError {
        StartError::Io(error)
    }
}

/// A running broker.
pub struct Broker {
    /// What the handlers see, through its three contexts.
    state: Arc<BrokerState>,
    engines: Engines,
    local_addrs: Vec<SocketAddr>,
    metrics_addr: Option<SocketAddr>,
    stop: watch::Sender<bool>,
    tasks: JoinSet<()>,
    /// Keeps a temporary data dir alive for `start_ephemeral` brokers.
    _temp_dir: Option<tempfile::TempDir>,
}

impl Broker {
    /// Binds every listener, opens the controller and the logs, and starts serving.
    pub async fn start(config: Config) -> Result<Broker, StartError> {
        Broker::start_with_clock(config, Arc::new(SystemClock)).await
    }

    /// A broker on an ephemeral loopback port with its own temporary data dir,
    /// removed when the broker is dropped. For tests.
    pub async fn start_ephemeral() -> Result<Broker, StartError> {
        let temp_dir = tempfile::Builder::new().prefix("sluice-").tempdir()?;
        let mut broker = Broker::start(Config::ephemeral(temp_dir.path())).await?;
        broker._temp_dir = Some(temp_dir);
        Ok(broker)
    }

    pub async fn start_with_clock(
        config: Config,
        clock: Arc<dyn Clock>,
    ) -> Result<Broker, StartError> {
        let started = std::time::Instant::now();
        std::fs::create_dir_all(&config.data_dir)?;
        if let Some(source) = &config.sasl.jwks {
            jwks::load_off_workers(source.clone())
                .await
                .map_err(StartError::Jwks)?;
        }
        let (listeners, metrics_socket, tls_server) = bind_listeners(&config).await?;
        let (state, engines) =
            open_engines(config, clock, &listeners, tls_server.clone(), started).await?;
        let (stop, stopped) = watch::channel(false);
        let mut tasks = JoinSet::new();
        let users = engines.config.sasl.add_scram.clone();
        if !users.is_empty() {
            let adding = users::add_at_start(engines.controller.clone(), users, stopped.clone());
            // A lone node leads its metadata log: its users exist before it
            // serves. A cluster's node adds them once a metadata leader is up.
            if engines.config.quorum.is_none() {
                adding.await;
            } else {
                tasks.spawn(adding);
            }
        }
        // One TLS configuration for every SSL listener and every connection
        // between nodes, kept current.
        if let Some(server) = tls_server {
            tasks.spawn(tls::keep_current(server, stopped.clone()));
        }
        if let Some(source) = engines.config.sasl.jwks.clone() {
            tasks.spawn(jwks::keep_current(source, stopped.clone()));
        }
        let local_addrs =
            serve_listeners(&state, &engines.config, listeners, &stopped, &mut tasks)?;
        let metrics_addr = match metrics_socket {
            Some(socket) => {
                let address = socket.local_addr()?;
                let source = metrics_source::BrokerMetrics {
                    metrics: Arc::clone(state.metrics()),
                    replicas: Arc::clone(&engines.replicas),
                    groups: engines.groups.clone(),
                    controller: engines.controller.clone(),
                };
                tasks.spawn(crate::metrics::serve(
                    Arc::new(source) as _,
                    socket,
                    stopped.clone(),
                ));
                Some(address)
            }
            None => None,
        };
        tasks.spawn(follow_metadata(
            engines.controller.subscribe(),
            Arc::clone(&engines.replicas),
            engines.groups.clone(),
            engines.txns.clone(),
            stopped.clone(),
        ));
        cleaner::spawn(
            &mut tasks,
            &engines.replicas,
            &engines.config.cleaner,
            &stopped,
        );
        tasks.spawn(housekeeping(
            Arc::clone(&engines.replicas),
            engines.config.retention_check_interval_ms,
            stopped.clone(),
        ));
        if engines.config.auto_leader_rebalance_enable {
            tasks.spawn(isr::rebalance_leaders(
                engines.controller.clone(),
                engines.config.node_id,
                engines.config.leader_imbalance_check_interval_seconds,
                stopped.clone(),
            ));
        }
        tasks.spawn(isr::shrink_isrs(
            Arc::clone(&engines.replicas),
            engines.config.replica_lag_time_max_ms,
            stopped,
        ));
        tracing::info!(addresses = ?local_addrs, metrics = ?metrics_addr, node_id = engines.config.node_id, elapsed = ?started.elapsed(), "sluice is serving");
        Ok(Broker {
            state,
            engines,
            local_addrs,
            metrics_addr,
            stop,
            tasks,
            _temp_dir: None,
        })
    }

    /// The address of the first listener (the one clients bootstrap from).
    pub fn local_addr(&self) -> SocketAddr {
        self.local_addrs[0]
    }

    /// Where each client listener listens, in the order they were configured.
    pub fn local_addrs(&self) -> &[SocketAddr] {
        &self.local_addrs
    }

    /// `host:port` for a client's `bootstrap.servers`.
    pub fn bootstrap_servers(&self) -> String {
        self.local_addr().to_string()
    }

    /// Where the metrics endpoint listens, if it was configured.
    pub fn metrics_addr(&self) -> Option<SocketAddr> {
        self.metrics_addr
    }

    pub fn state(&self) -> &Arc<BrokerState> {
        &self.state
    }

    /// The partitions this broker hosts, for an embedder (or a test) that
    /// inspects them.
    pub fn replicas(&self) -> &ReplicaManager {
        &self.engines.replicas
    }

    pub fn data_dir(&self) -> &Path {
        &self.engines.config.data_dir
    }

    /// Every durable store of the broker, each with the one failure rule.
    fn storage(&self) -> Vec<Arc<StorageHealth>> {
        let engines = &self.engines;
        vec![
            Arc::clone(engines.replicas.health()),
            Arc::clone(engines.offsets.health()),
            Arc::clone(engines.txn_store.health()),
            Arc::clone(engines.controller.health()),
        ]
    }

    /// Resolves once a store went offline after a failed write or fsync, with what failed
    /// and why. A node has one data directory, so the log dir going offline is Kafka's
    /// "all log dirs failed": the caller should stop without a clean shutdown, so that the
    /// next start recovers.
    pub async fn storage_failure(&self) -> String {
        let storage = self.storage();
        let (failed, mut first) = tokio::sync::mpsc::channel(storage.len());
        let mut watchers = JoinSet::new();
        for health in storage {
            let failed = failed.clone();
            watchers.spawn(async move {
                health.wait_offline().await;
                let _ = failed.send(health).await;
            });
        }
        drop(failed);
        match first.recv().await {
            Some(health) => format!(
                "{}: {}",
                health.name(),
                health.failure().unwrap_or("unknown failure")
            ),
            // Every watcher ended without a failure: only when the runtime stops.
            None => std::future::pending().await,
        }
    }

    /// Stops accepting, ends every connection, fsyncs every log, writes
    /// checkpoints and the clean-shutdown marker, and stops the controller.
    pub async fn shutdown(mut self) -> io::Result<()> {
        // In a cluster, leaderships go to other replicas first, while clients can
        // still be told where they went.
        if let Err(error) = self.engines.controller.controlled_shutdown().await {
            tracing::warn!(%error, "controlled shutdown did not hand over every leadership");
        }
        let _ = self.stop.send(true);
        while self.tasks.join_next().await.is_some() {}
        // Transactions first: a transaction's end completes pending offsets
        // through the group coordinator, which then stores its group records.
        self.engines.txns.shutdown().await;
        self.engines.groups.shutdown().await?;
        let replicas = Arc::clone(&self.engines.replicas);
        tokio::task::spawn_blocking(move || replicas.shutdown())
            .await
            .map_err(io::Error::other)??;
        self.engines
            .controller
            .shutdown()
            .await
            .map_err(|e| io::Error::other(e.to_string()))?;
        // The offset and transaction stores close once nothing else holds them,
        // which is now that both coordinators have stopped and every connection
        // has ended.
        let Engines {
            offsets, txn_store, ..
        } = self.engines;
        if let Ok(offsets) = Arc::try_unwrap(offsets) {
            offsets.close().await?;
        }
        if let Ok(txn_store) = Arc::try_unwrap(txn_store) {
            txn_store.close().await?;
        }
        tracing::info!("sluice stopped cleanly");
        Ok(())
    }
}

/// The engines the server opened, kept for the background tasks, the metrics,
/// the storage health and shutdown. Handlers reach them only through the
/// contexts of `BrokerState`; the stores (offsets, transactions) not at all.
struct Engines {
    config: Config,
    controller: Controller,
    replicas: Arc<ReplicaManager>,
    groups: GroupService,
    txns: TxnService,
    txn_store: Arc<SledTxnStore>,
    offsets: Arc<SledOffsetStore>,
}

/// How this broker connects to the others' inter-broker listener: in its
/// security protocol, with this broker's certificate and SASL login.
fn peer_connector(
    config: &Config,
    tls_server: Option<&Arc<tls::TlsServer>>,
) -> Arc<crate::protocol::peer_client::PeerConnector> {
    use crate::protocol::peer_client::{PeerConnector, PeerSasl};
    let Some(listener) = config
        .listeners
        .iter()
        .find(|l| l.name == config.inter_broker_listener())
    else {
        return PeerConnector::plaintext();
    };
    let tls = listener
        .protocol
        .uses_tls()
        .then(|| tls_server.filter(|server| server.has_peer_tls()))
        .flatten()
        .map(|server| Arc::clone(server) as Arc<dyn PeerTls>);
    let sasl = listener
        .protocol
        .uses_sasl()
        .then(|| config.inter_broker_sasl.clone())
        .flatten()
        .map(|sasl| PeerSasl {
            mechanism: sasl.mechanism,
            username: sasl.username,
            password: sasl.password,
        });
    PeerConnector::new(tls, sasl)
}

/// The metadata quorum's transport: TCP, or mutual TLS with the broker's
/// keystore and truststore (`--controller-listener-security-protocol SSL`).
fn controller_transport(
    tls: bool,
    tls_server: Option<&Arc<tls::TlsServer>>,
) -> Arc<dyn crate::net::Transport> {
    match tls_server.filter(|server| tls && server.has_peer_tls()) {
        Some(server) => Arc::new(crate::net::TlsTransport::new(
            Arc::new(crate::net::Tcp),
            Arc::clone(server) as Arc<dyn PeerTls>,
        )),
        None => Arc::new(crate::net::Tcp),
    }
}

/// A bound client listener and what it advertises.
/// A bound client listener, what it tells clients, and its TLS acceptor when
/// it is an SSL listener.
type BoundListener = (TcpListener, Arc<ListenerInfo>, Option<Arc<tls::TlsServer>>);

/// Binds every client listener (each advertising its configured address, or the one
/// it is bound to unless that is a wildcard) and the metrics listener if configured.
async fn bind_listeners(
    config: &Config,
) -> Result<
    (
        Vec<BoundListener>,
        Option<TcpListener>,
        Option<Arc<tls::TlsServer>>,
    ),
    StartError,
> {
    let tls_server = match &config.ssl {
        Some(ssl) => Some(tls::TlsServer::new(ssl).map_err(StartError::Tls)?),
        None => None,
    };
    let mut bound = Vec::with_capacity(config.listeners.len());
    for listener in &config.listeners {
        let socket = TcpListener::bind(&listener.bind).await?;
        let local = socket.local_addr()?;
        let advertised = listener.advertised.clone().or_else(|| {
            (!local.ip().is_unspecified()).then(|| (local.ip().to_string(), local.port()))
        });
        let info = Arc::new(ListenerInfo {
            name: listener.name.clone(),
            advertised,
            inter_broker: config.listeners.len() == 1
                || listener.name == config.inter_broker_listener(),
            sasl: listener
                .protocol
                .uses_sasl()
                .then(|| Arc::clone(&config.sasl.settings)),
        });
        let tls = listener
            .protocol
            .uses_tls()
            .then(|| tls_server.clone())
            .flatten();
        bound.push((socket, info, tls));
    }
    let metrics_socket = match &config.metrics_listen {
        Some(address) => Some(TcpListener::bind(address).await?),
        None => None,
    };
    Ok((bound, metrics_socket, tls_server))
}

/// Opens the engines in dependency order (controller, logs, offsets and the group
/// coordinator, transactions) and builds the contexts handlers see from them; the
/// engines are also handed back on their own, for the server's work on them.
async fn open_engines(
    config: Config,
    clock: Arc<dyn Clock>,
    listeners: &[BoundListener],
    tls_server: Option<Arc<tls::TlsServer>>,
    started: std::time::Instant,
) -> Result<(Arc<BrokerState>, Engines), StartError> {
    let peers = peer_connector(&config, tls_server.as_ref());
    let (host, port) = listeners
        .first()
        .and_then(|(_, info, _)| info.advertised.clone())
        .unwrap_or_else(|| ("localhost".to_string(), 9092));
    let broker_listeners = listeners
        .iter()
        .filter_map(|(_, info, _)| {
            info.advertised.as_ref().map(|(host, port)| BrokerEndpoint {
                name: info.name.clone(),
                host: host.clone(),
                port: i32::from(*port),
            })
        })
        .collect();
    let quorum = config.quorum.as_ref().map(|quorum| QuorumConfig {
        listen: quorum.listen.clone(),
        voters: quorum.voters.clone(),
        transport: controller_transport(quorum.tls, tls_server.as_ref()),
        net: crate::net::NetConfig::default(),
        election_timeout_ms: quorum.election_timeout_ms,
        broker_heartbeat_interval_ms: quorum.broker_heartbeat_interval_ms,
        broker_session_timeout_ms: quorum.broker_session_timeout_ms,
    });
    // Read before the log dir is opened, which removes the marker.
    let previous_broker_epoch =
        crate::log::LogDir::clean_shutdown_broker_epoch(&crate::replica::log_dir_path(&config))?
            .map_or(BrokerEpoch::NONE, BrokerEpoch::new);
    let descriptors = descriptors::budget();
    let controller = Controller::open(ControllerConfig {
        dir: config.data_dir.join("controller"),
        node_id: config.node_id,
        host,
        port: i32::from(port),
        rack: config.rack.clone(),
        listeners: broker_listeners,
        quorum,
        raft_store: None,
        previous_broker_epoch,
        partition_budget: descriptors.partitions,
    })
    .await
    .map_err(StartError::Controller)?;
    tracing::debug!(elapsed = ?started.elapsed(), "controller open");
    let replicas = Arc::new(ReplicaManager::open(
        &config,
        Arc::clone(&clock),
        controller.subscribe(),
        Arc::new(crate::protocol::replica_client::TcpLeaderConnector::new(
            config.node_id,
            Arc::clone(&peers),
        )),
        descriptors.idle_segment_files,
    )?);
    replicas.set_isr_proposer(Arc::new(isr::ControllerIsr::new(controller.clone())));
    tracing::debug!(elapsed = ?started.elapsed(), "logs loaded");
    let offsets = Arc::new(SledOffsetStore::open(&config.data_dir.join("offsets"))?);
    // The group coordinator's store: the offsets topic, with sled as its cache.
    let offsets_log = Arc::new(crate::coordinator::group::topic::OffsetsTopic::new(
        Arc::clone(&offsets),
        Arc::clone(&replicas),
        config.flush.before_ack,
    ));
    // One id source for the broker: member ids and topic ids alike.
    let ids: Arc<dyn IdSource> = Arc::new(RandomIds);
    let groups = GroupService::start(
        GroupServiceConfig {
            retention_check_interval_ms: config.groups.offsets_retention_check_interval_ms,
            ownership: Ownership::Elected,
            ..GroupServiceConfig::new(group_config(&config), config.groups.offsets_retention_ms)
        },
        GroupDeps {
            offsets: Arc::clone(&offsets_log) as _,
            pending: offsets_log as _,
            clock: Arc::clone(&clock),
            ids: Arc::clone(&ids),
            led_in_latest_image: led_in_latest_image(
                &controller,
                config.node_id,
                OFFSETS_TOPIC_NAME,
            ),
        },
    )
    .await?;
    tracing::debug!(elapsed = ?started.elapsed(), "groups restored");
    let markers = txn_markers::PartitionMarkerWriter::new(Arc::clone(&peers));
    let completion = txn::GroupOffsetCompletion::new(groups.clone(), Arc::clone(&peers));
    let (txns, txn_store) = txn::start(
        &config,
        Arc::clone(&clock),
        &controller,
        Arc::clone(&completion) as _,
        Arc::clone(&markers) as _,
        &replicas,
    )
    .await?;
    tracing::debug!(elapsed = ?started.elapsed(), "transactions loaded");
    let state = Arc::new(BrokerState::new(
        Partitions::new(
            Arc::clone(&replicas),
            controller.subscribe(),
            Arc::clone(&clock),
            config.flush.before_ack,
        ),
        Coordinators::new(
            groups.clone(),
            txns.clone(),
            controller.subscribe(),
            clock,
            config.node_id,
            config.inter_broker_listener().to_string(),
            peers,
        ),
        Cluster::new(controller.clone(), config.clone(), ids),
        Arc::new(Metrics::new()),
    ));
    markers.attach(&replicas);
    completion.attach(&replicas);
    let engines = Engines {
        config,
        controller,
        replicas,
        groups,
        txns,
        txn_store,
        offsets,
    };
    Ok((state, engines))
}

/// A connection to an SSL listener: the TLS handshake, within
/// `TLS_HANDSHAKE_TIMEOUT_MS`, then the connection over the session. A
/// failed handshake (a plaintext client, an untrusted or missing client
/// certificate where one is required) closes the connection, logged at debug.
async fn serve_tls(
    state: Arc<BrokerState>,
    request_max_bytes: u32,
    stream: TcpStream,
    listener: Arc<ListenerInfo>,
    (acceptor, mapper): (TlsAcceptor, &PrincipalMapper),
    request_budget: Arc<Semaphore>,
) {
    let mut ends = connection::Ends::accepted(&stream, listener);
    let peer_addr = ends.peer_addr;
    let sasl = ends.listener.sasl.is_some();
    let session = match tls::accept(acceptor, mapper, sasl, stream).await {
        Ok((session, principal)) => {
            if let Some(principal) = principal {
                ends.principal = principal;
            }
            session
        }
        Err(error) => {
            tracing::debug!(%peer_addr, %error, "closing a TLS connection");
            return;
        }
    };
    connection::serve_stream(state, request_max_bytes, session, ends, request_budget).await;
}

/// Starts an accept loop per client listener, sharing the connection slots and the
/// request memory budget; returns the addresses they listen on.
fn serve_listeners(
    state: &Arc<BrokerState>,
    config: &Config,
    listeners: Vec<BoundListener>,
    stopped: &watch::Receiver<bool>,
    tasks: &mut JoinSet<()>,
) -> io::Result<Vec<SocketAddr>> {
    let connections = Arc::new(Semaphore::new(CONNECTIONS_MAX));
    let request_budget = Arc::new(Semaphore::new(request_budget_bytes(config)));
    let mut local_addrs = Vec::with_capacity(listeners.len());
    for (socket, info, tls) in listeners {
        local_addrs.push(socket.local_addr()?);
        tasks.spawn(accept_loop(
            Arc::clone(state),
            config.request_max_bytes,
            socket,
            (info, tls),
            stopped.clone(),
            Arc::clone(&connections),
            Arc::clone(&request_budget),
        ));
    }
    Ok(local_addrs)
}

async fn accept_loop(
    state: Arc<BrokerState>,
    request_max_bytes: u32,
    socket: TcpListener,
    (info, tls): (Arc<ListenerInfo>, Option<Arc<tls::TlsServer>>),
    mut stopped: watch::Receiver<bool>,
    connections: Arc<Semaphore>,
    request_budget: Arc<Semaphore>,
) {
    let mut open = JoinSet::new();
    // Accepts failing in a row: logged at the first, backed off from
    // `ACCEPT_RETRY_MS` doubling to `ACCEPT_RETRY_MS_MAX` (out of descriptors,
    // every accept fails until a connection closes).
    let mut failing: u32 = 0;
    loop {
        let permit = tokio::select! {
            _ = stopped.changed() => break,
            permit = Arc::clone(&connections).acquire_owned() => match permit {
                Ok(permit) => permit,
                Err(_) => break,
            },
        };
        let accepted = tokio::select! {
            _ = stopped.changed() => break,
            accepted = socket.accept() => accepted,
        };
        match accepted {
            Ok((stream, _)) => {
                if failing > 0 {
                    tracing::info!(failed = failing, "accepting connections again");
                    failing = 0;
                }
                let state = Arc::clone(&state);
                let info = Arc::clone(&info);
                let request_budget = Arc::clone(&request_budget);
                let tls = tls.as_ref().map(|server| {
                    (
                        server.acceptor(info.sasl.is_some()),
                        server.principal_mapper(),
                    )
                });
                open.spawn(async move {
                    match tls {
                        None => {
                            connection::serve(
                                state,
                                request_max_bytes,
                                stream,
                                info,
                                request_budget,
                            )
                            .await;
                        }
                        Some((acceptor, mapper)) => {
                            serve_tls(
                                state,
                                request_max_bytes,
                                stream,
                                info,
                                (acceptor, &mapper),
                                request_budget,
                            )
                            .await;
                        }
                    }
                    drop(permit);
                });
            }
            Err(error) => {
                if failing == 0 {
                    tracing::warn!(%error, "accept failed; backing off until it works again");
                }
                let pause = ACCEPT_RETRY_MS
                    .saturating_mul(1 << failing.min(16))
                    .min(ACCEPT_RETRY_MS_MAX);
                failing = failing.saturating_add(1);
                tokio::time::sleep(Duration::from_millis(pause)).await;
            }
        }
        while open.try_join_next().is_some() {}
    }
    open.shutdown().await;
}

/// Permits of the broker-wide request budget, one per byte. `Config::resolve`
/// refuses a budget below the frame limit, but a `Config` changed by hand after
/// that (as embedders may) is raised to it here, so that every frame the
/// connection accepts can be admitted instead of waiting for ever.
fn request_budget_bytes(config: &Config) -> usize {
    let bytes = config
        .queued_max_request_bytes
        .max(u64::from(config.request_max_bytes));
    usize::try_from(bytes)
        .unwrap_or(usize::MAX)
        .min(Semaphore::MAX_PERMITS)
}

fn group_config(config: &Config) -> GroupConfig {
    GroupConfig {
        initial_rebalance_delay_ms: config.groups.initial_rebalance_delay_ms,
        min_session_timeout_ms: config.groups.min_session_timeout_ms,
        max_session_timeout_ms: config.groups.max_session_timeout_ms,
        ..GroupConfig::default()
    }
}

/// Brings the logs in line with every new image (`follow_metadata_logs`), and
/// behind them the coordinators (`follow_metadata_coordinators`): each serves
/// the keys of the internal topic partitions this broker leads (groups on
/// `__consumer_offsets`, transactional ids on `__transaction_state`), loaded on
/// election and unloaded on resignation. Two tasks, so that partition
/// leadership never waits on a coordinator's mailbox (which client requests
/// fill too); a coordinator acts on an image only once the logs have applied
/// it, so it loads a partition this broker already leads.
async fn follow_metadata(
    images: watch::Receiver<Arc<MetadataImage>>,
    replicas: Arc<ReplicaManager>,
    groups: GroupService,
    txns: TxnService,
    stopped: watch::Receiver<bool>,
) {
    let (applied, applied_images) = watch::channel(Arc::clone(&images.borrow()));
    let logs = follow_metadata_logs(images, Arc::clone(&replicas), applied, stopped.clone());
    let coordinators =
        follow_metadata_coordinators(applied_images, replicas, groups, txns, stopped);
    tokio::join!(logs, coordinators);
}

/// Applies every new image to the logs, then publishes it to `applied`.
async fn follow_metadata_logs(
    mut images: watch::Receiver<Arc<MetadataImage>>,
    replicas: Arc<ReplicaManager>,
    applied: watch::Sender<Arc<MetadataImage>>,
    mut stopped: watch::Receiver<bool>,
) {
    loop {
        tokio::select! {
            _ = stopped.changed() => return,
            changed = images.changed() => if changed.is_err() { return },
        }
        let image = images.borrow_and_update().clone();
        let synced = Arc::clone(&replicas);
        let applying = Arc::clone(&image);
        let synced = tokio::task::spawn_blocking(move || synced.sync_with(&applying));
        if watched("applying an image to the logs", synced, &mut stopped)
            .await
            .is_none()
        {
            return;
        }
        applied.send_replace(image);
    }
}

/// Elects and resigns the coordinators for every image the logs have applied
/// (an image skipped while a step was held up is harmless: each step works
/// from the whole image).
async fn follow_metadata_coordinators(
    mut images: watch::Receiver<Arc<MetadataImage>>,
    replicas: Arc<ReplicaManager>,
    groups: GroupService,
    txns: TxnService,
    mut stopped: watch::Receiver<bool>,
) {
    let mut offsets = LedPartitions::new(
        OFFSETS_TOPIC_NAME,
        "electing a group coordinator",
        "resigning a group coordinator",
    );
    let mut txn_state = LedPartitions::new(
        TRANSACTION_STATE_TOPIC_NAME,
        "electing a transaction coordinator",
        "resigning a transaction coordinator",
    );
    let mut image = images.borrow_and_update().clone();
    loop {
        let followed = async {
            let groups_follow = |change| groups.follow(change);
            offsets
                .follow(&image, &replicas, groups_follow, &mut stopped)
                .await?;
            let txns_follow = |change| txns.follow(change);
            txn_state
                .follow(&image, &replicas, txns_follow, &mut stopped)
                .await
        };
        if followed.await.is_none() {
            return;
        }
        tokio::select! {
            _ = stopped.changed() => return,
            changed = images.changed() => if changed.is_err() { return },
        }
        image = images.borrow_and_update().clone();
    }
}

/// The partitions of a coordinator's internal topic it was last told this
/// broker leads, each with its leader epoch.
struct LedPartitions {
    topic: &'static str,
    led: HashMap<i32, i32>,
    /// The names of its steps, for a slow one's warning.
    electing: &'static str,
    resigning: &'static str,
}

impl LedPartitions {
    /// The partitions of `topic` led: none yet.
    fn new(topic: &'static str, electing: &'static str, resigning: &'static str) -> LedPartitions {
        LedPartitions {
            topic,
            led: HashMap::new(),
            electing,
            resigning,
        }
    }

    /// Brings the coordinator (its `follow`) to the partitions of the topic
    /// that `image` has this broker lead: resigns those no longer led, then
    /// elects those led in a new epoch. A later epoch continues the
    /// leadership when the log shows no epoch in between (the keys stay
    /// loaded). None when the broker stops meanwhile.
    async fn follow<F>(
        &mut self,
        image: &MetadataImage,
        replicas: &ReplicaManager,
        follow: impl Fn(Leadership) -> F,
        stopped: &mut watch::Receiver<bool>,
    ) -> Option<()>
    where
        F: std::future::Future<Output = Result<(), Stopped>>,
    {
        // A coordinator's answer is not acted on: one that has stopped
        // (`Stopped`) has nothing left to follow.
        let leading = led_partitions(image, self.topic, replicas.node_id());
        for &partition in self.led.keys().filter(|p| !leading.contains_key(*p)) {
            let resigned = Leadership::Resigned { partition };
            let _ = watched(self.resigning, follow(resigned), stopped).await?;
        }
        for (&partition, &leader_epoch) in &leading {
            let held = self.led.get(&partition).copied();
            if held == Some(leader_epoch) {
                continue;
            }
            let tp = crate::types::TopicPartition::new(self.topic, partition);
            let continued = held.is_some_and(|held| {
                replicas.led_without_a_break(
                    &tp,
                    LeaderEpoch::new(held),
                    LeaderEpoch::new(leader_epoch),
                )
            });
            let elected = Leadership::Elected {
                partition,
                leader_epoch,
                continued,
            };
            let _ = watched(self.electing, follow(elected), stopped).await?;
        }
        self.led = leading;
        Some(())
    }
}

/// Awaits one step of following the metadata, saying so when it takes longer
/// than `FOLLOW_METADATA_STEP_WARN_MS` (the coordinators or the logs are not
/// keeping up with the images), and when it is done after all; None when the
/// broker stops meanwhile, so that a step held up never holds up the shutdown.
async fn watched<T>(
    what: &'static str,
    step: impl std::future::Future<Output = T>,
    stopped: &mut watch::Receiver<bool>,
) -> Option<T> {
    tokio::pin!(step);
    let warn_after = Duration::from_millis(FOLLOW_METADATA_STEP_WARN_MS);
    tokio::select! {
        done = &mut step => return Some(done),
        _ = stopped.changed() => return None,
        () = tokio::time::sleep(warn_after) => {}
    }
    tracing::warn!(
        step = what,
        waited_ms = FOLLOW_METADATA_STEP_WARN_MS,
        "following the metadata is held up"
    );
    tokio::select! {
        done = step => {
            tracing::warn!(step = what, "following the metadata goes on");
            Some(done)
        }
        _ = stopped.changed() => None,
    }
}

/// Whether the controller's latest image has this broker lead a partition of
/// the internal `topic`, for a coordinator whose election has not arrived yet.
pub(crate) fn led_in_latest_image(
    controller: &Controller,
    node_id: i32,
    topic: &'static str,
) -> LedInLatestImage {
    let images = controller.subscribe();
    LedInLatestImage::new(move |partition| {
        let image = images.borrow();
        image
            .partition(topic, partition)
            .is_some_and(|p| p.leader_id == node_id)
    })
}

/// The partitions of `topic` that `node_id` leads in `image`, with their
/// leader epochs.
fn led_partitions(image: &MetadataImage, topic: &str, node_id: i32) -> HashMap<i32, i32> {
    let Some(topic) = image.topics.get(topic) else {
        return HashMap::new();
    };
    (0..)
        .zip(&topic.partitions)
        .filter(|(_, partition)| partition.leader_id == node_id)
        .map(|(index, partition)| (index, partition.leader_epoch.get()))
        .collect()
}

async fn housekeeping(
    replicas: Arc<ReplicaManager>,
    retention_check_interval_ms: u64,
    mut stopped: watch::Receiver<bool>,
) {
    let mut retention = ticks::every(Duration::from_millis(retention_check_interval_ms.max(1)));
    let mut flush = ticks::every(Duration::from_millis(LOG_FLUSH_POLICY_CHECK_INTERVAL_MS));
    let mut checkpoint = ticks::every(Duration::from_millis(LOG_CHECKPOINT_INTERVAL_MS));
    loop {
        let replicas = Arc::clone(&replicas);
        let work: Box<dyn FnOnce() + Send> = tokio::select! {
            _ = stopped.changed() => return,
            _ = retention.tick() => Box::new(move || replicas.run_retention()),
            _ = flush.tick() => Box::new(move || replicas.run_flush_policy()),
            _ = checkpoint.tick() => Box::new(move || {
                if let Err(error) = replicas.checkpoint() {
                    tracing::error!(%error, "writing checkpoints failed");
                }
            }),
        };
        let _ = tokio::task::spawn_blocking(work).await;
    }
}
