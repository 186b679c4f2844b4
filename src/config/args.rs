//! `ServeArgs`: the settings as a user gives them, one optional field per
//! flag, with its `SLUICE_*` variable and its documentation (what `sluice
//! serve --help` prints).

use super::*;

/// `sluice serve` settings as given by a user. Every field is optional here so that
/// the command line, the environment and the config file can be layered; `resolve`
/// fills in the defaults and checks the result.
#[derive(Args, Deserialize, Debug, Default, Clone)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct ServeArgs {
    /// TOML file with any of these settings (keys as the long flags, e.g.
    /// `data-dir = "/var/lib/sluice"`). Flags and environment variables win over it.
    #[arg(long, env = "SLUICE_CONFIG")]
    #[serde(skip)]
    pub config: Option<PathBuf>,

    /// Listeners, comma-separated `[NAME://]HOST:PORT`. Port 0 picks a free port.
    /// [default: 127.0.0.1:9092]
    #[arg(long, env = "SLUICE_LISTEN", value_delimiter = ',')]
    pub listen: Option<Vec<String>>,

    /// Addresses given to clients in Metadata, comma-separated `[NAME://]HOST:PORT`,
    /// matched to listeners by name (or by position when unnamed). A listener
    /// without one advertises the address it listens on; one bound to 0.0.0.0
    /// advertises the local address each client connected to.
    #[arg(long, env = "SLUICE_ADVERTISE", value_delimiter = ',')]
    pub advertise: Option<Vec<String>>,

    /// Each listener's security protocol, comma-separated `NAME:PROTOCOL`
    /// (`listener.security.protocol.map`), the protocol one of PLAINTEXT or
    /// SSL. A listener named after its protocol (`SSL://0.0.0.0:9093`) needs
    /// no entry. [default: a listener named after a protocol is of it, any
    /// other is PLAINTEXT]
    #[arg(
        long,
        env = "SLUICE_LISTENER_SECURITY_PROTOCOL_MAP",
        value_delimiter = ','
    )]
    pub listener_security_protocol_map: Option<Vec<String>>,

    /// A PEM file holding this broker's private key and its certificate
    /// chain, for SSL listeners (`ssl.keystore.location` with
    /// `ssl.keystore.type=PEM`). [default: unset; needed by an SSL listener]
    #[arg(long, env = "SLUICE_SSL_KEYSTORE_LOCATION")]
    pub ssl_keystore_location: Option<PathBuf>,

    /// A PEM file of the CA certificates a client certificate must chain to
    /// (`ssl.truststore.location`, type PEM). [default: unset]
    #[arg(long, env = "SLUICE_SSL_TRUSTSTORE_LOCATION")]
    pub ssl_truststore_location: Option<PathBuf>,

    /// Whether SSL listeners ask clients for a certificate (`ssl.client.auth`):
    /// `none`, `requested` (a client without one still connects, as Kafka
    /// warns) or `required`. [default: none]
    #[arg(long, env = "SLUICE_SSL_CLIENT_AUTH")]
    pub ssl_client_auth: Option<SslClientAuth>,

    /// How a client certificate's subject DN becomes its principal's name
    /// (`ssl.principal.mapping.rules`): comma-separated
    /// `RULE:pattern/replacement/[LU]` and `DEFAULT`, the first that matches
    /// the whole DN wins; none matching refuses the connection. [default:
    /// DEFAULT, the DN itself, as `CN=...,OU=...,O=...`]
    #[arg(long, env = "SLUICE_SSL_PRINCIPAL_MAPPING_RULES")]
    pub ssl_principal_mapping_rules: Option<String>,

    /// The SASL mechanisms SASL listeners offer, comma-separated
    /// (`sasl.enabled.mechanisms`): PLAIN, SCRAM-SHA-256, SCRAM-SHA-512. Every
    /// mechanism checks the same users (`--add-scram`,
    /// AlterUserScramCredentials). [default: PLAIN,SCRAM-SHA-256,SCRAM-SHA-512]
    #[arg(long, env = "SLUICE_SASL_ENABLED_MECHANISMS", value_delimiter = ',')]
    pub sasl_enabled_mechanisms: Option<Vec<String>>,

    /// Who may do what (`authorizer.class.name`): `none` allows every
    /// request and answers the ACL APIs SECURITY_DISABLED; `standard` decides
    /// by the ACLs in the metadata log, as Kafka's StandardAuthorizer.
    /// [default: none]
    #[arg(long, env = "SLUICE_AUTHORIZER")]
    pub authorizer: Option<AuthorizerKind>,

    /// Principals the authorizer allows everything, semicolon-separated
    /// (`super.users`): `User:admin;User:CN=broker-1,OU=ops,O=acme`.
    /// [default: none]
    #[arg(long, env = "SLUICE_SUPER_USERS")]
    pub super_users: Option<String>,

    /// Allow a request on a resource no ACL is on
    /// (`allow.everyone.if.no.acl.found`). [default: false]
    #[arg(long, env = "SLUICE_ALLOW_EVERYONE_IF_NO_ACL_FOUND")]
    pub allow_everyone_if_no_acl_found: Option<bool>,

    /// Also take the SCRAM client-final nonce librdkafka before 2.6.1 sends
    /// (Debian's kcat): the client's nonce once more in front of the
    /// server's, as Kafka 3.8.1 to 3.9 took it. Kafka 4 refuses it.
    /// [default: false; dev: true]
    #[arg(long, env = "SLUICE_SASL_SCRAM_LEGACY_NONCE")]
    pub sasl_scram_legacy_nonce: Option<bool>,

    /// How long a SASL session lasts before the client must authenticate
    /// again on the same connection, in ms (`connections.max.reauth.ms`,
    /// KIP-368); a connection that goes on without doing so is closed at its
    /// next request. 0: sessions never expire. [default: 0]
    #[arg(long, env = "SLUICE_CONNECTIONS_MAX_REAUTH_MS")]
    pub connections_max_reauth_ms: Option<u64>,

    /// Where OAUTHBEARER's signing keys are read, a JWKS
    /// (`sasl.oauthbearer.jwks.endpoint.url`): `file:///path/jwks.json` or
    /// `https://idp.example/jwks` (its certificate checked against the
    /// platform's CA certificates and --ssl-truststore-location's), read again
    /// every --sasl-oauthbearer-jwks-endpoint-refresh-ms. Offers
    /// OAUTHBEARER (beside the default mechanisms, unless
    /// --sasl-enabled-mechanisms lists them). [default: none]
    #[arg(long, env = "SLUICE_SASL_OAUTHBEARER_JWKS_ENDPOINT_URL")]
    pub sasl_oauthbearer_jwks_endpoint_url: Option<String>,

    /// How often the JWKS is read again, in ms
    /// (`sasl.oauthbearer.jwks.endpoint.refresh.ms`). [default: 3600000]
    #[arg(long, env = "SLUICE_SASL_OAUTHBEARER_JWKS_ENDPOINT_REFRESH_MS")]
    pub sasl_oauthbearer_jwks_endpoint_refresh_ms: Option<u64>,

    /// Audiences an OAUTHBEARER token must name one of, comma-separated
    /// (`sasl.oauthbearer.expected.audience`). [default: not checked]
    #[arg(
        long,
        env = "SLUICE_SASL_OAUTHBEARER_EXPECTED_AUDIENCE",
        value_delimiter = ','
    )]
    pub sasl_oauthbearer_expected_audience: Option<Vec<String>>,

    /// The issuer an OAUTHBEARER token must name
    /// (`sasl.oauthbearer.expected.issuer`). [default: not checked]
    #[arg(long, env = "SLUICE_SASL_OAUTHBEARER_EXPECTED_ISSUER")]
    pub sasl_oauthbearer_expected_issuer: Option<String>,

    /// The claim an OAUTHBEARER token's principal is read from
    /// (`sasl.oauthbearer.sub.claim.name`). [default: sub]
    #[arg(long, env = "SLUICE_SASL_OAUTHBEARER_SUB_CLAIM_NAME")]
    pub sasl_oauthbearer_sub_claim_name: Option<String>,

    /// How far token times may be off this broker's clock, in seconds
    /// (`sasl.oauthbearer.clock.skew.seconds`). [default: 30]
    #[arg(long, env = "SLUICE_SASL_OAUTHBEARER_CLOCK_SKEW_SECONDS")]
    pub sasl_oauthbearer_clock_skew_seconds: Option<u64>,

    /// Take unsigned OAUTHBEARER tokens (`alg: none`, as librdkafka's
    /// `enable.sasl.oauthbearer.unsecure.jwt` makes): for development only,
    /// anyone can write such a token. Offers OAUTHBEARER as the JWKS does.
    /// [default: false]
    #[arg(long, env = "SLUICE_SASL_OAUTHBEARER_UNSECURED")]
    pub sasl_oauthbearer_unsecured: Option<bool>,

    /// A user to create at start, as Kafka's `kafka-storage format
    /// --add-scram`: `'SCRAM-SHA-256=[name=alice,password=alice-secret]'`
    /// (`iterations=N` optional, 4096 to 16384). Repeatable; entries in
    /// SLUICE_ADD_SCRAM are separated by `;`. A user that already has a
    /// credential for the mechanism keeps it. [default: none]
    #[arg(long, env = "SLUICE_ADD_SCRAM", value_delimiter = ';')]
    pub add_scram: Option<Vec<String>>,

    /// Directory for all data: partition logs, controller state, group offsets.
    /// [default: ./sluice-data]
    #[arg(long, env = "SLUICE_DATA_DIR")]
    pub data_dir: Option<PathBuf>,

    /// This broker's node id (Kafka's `node.id`). [default: 1]
    #[arg(long, env = "SLUICE_NODE_ID")]
    pub node_id: Option<i32>,

    /// Rack reported in Metadata (Kafka's `broker.rack`).
    #[arg(long, env = "SLUICE_RACK")]
    pub rack: Option<String>,

    /// Create topics on the first Metadata request that names them
    /// (`auto.create.topics.enable`). [default: true]
    #[arg(long, env = "SLUICE_AUTO_CREATE_TOPICS")]
    pub auto_create_topics: Option<bool>,

    /// Partitions of an auto-created topic, or of CreateTopics with -1
    /// (`num.partitions`). [default: 1]
    #[arg(long, env = "SLUICE_NUM_PARTITIONS")]
    pub num_partitions: Option<i32>,

    /// Bytes per segment file before a new one is rolled (`log.segment.bytes`).
    /// [default: 1073741824]
    #[arg(long, env = "SLUICE_SEGMENT_BYTES")]
    pub segment_bytes: Option<u64>,

    /// Age in ms after which a segment is rolled (`log.roll.ms`). [default: 604800000]
    #[arg(long, env = "SLUICE_SEGMENT_MS")]
    pub segment_ms: Option<i64>,

    /// Keep data this long in ms, -1 for ever (`log.retention.ms`). [default: 604800000]
    #[arg(long, env = "SLUICE_RETENTION_MS", allow_negative_numbers = true)]
    pub retention_ms: Option<i64>,

    /// Keep at most this many bytes per partition, -1 for no limit
    /// (`log.retention.bytes`). [default: -1]
    #[arg(long, env = "SLUICE_RETENTION_BYTES", allow_negative_numbers = true)]
    pub retention_bytes: Option<i64>,

    /// How often retention runs, in ms (`log.retention.check.interval.ms`).
    /// [default: 300000]
    #[arg(long, env = "SLUICE_RETENTION_CHECK_INTERVAL_MS")]
    pub retention_check_interval_ms: Option<u64>,

    /// Largest record batch accepted, in bytes (`message.max.bytes`).
    /// [default: 1048588]
    #[arg(long, env = "SLUICE_MAX_MESSAGE_BYTES")]
    pub max_message_bytes: Option<u32>,

    /// fsync a partition after this many messages (`log.flush.interval.messages`).
    /// Unset: never force by count.
    #[arg(long, env = "SLUICE_FLUSH_MESSAGES")]
    pub flush_messages: Option<i64>,

    /// fsync a partition when its oldest unflushed message is this old, in ms
    /// (`log.flush.interval.ms`). Unset: never force by time.
    #[arg(long, env = "SLUICE_FLUSH_MS")]
    pub flush_ms: Option<i64>,

    /// Acknowledge produces only after fsync (group commit: one fsync covers every
    /// produce waiting on a partition). Survives power loss, not just `kill -9`.
    /// [default: false]
    #[arg(long, env = "SLUICE_FSYNC_BEFORE_ACK")]
    pub fsync_before_ack: Option<bool>,

    /// Largest request frame accepted, in bytes (`socket.request.max.bytes`).
    /// [default: 104857600]
    #[arg(long, env = "SLUICE_REQUEST_MAX_BYTES")]
    pub request_max_bytes: Option<u32>,

    /// Request bytes held in memory across all connections at once, in bytes
    /// (`queued.max.request.bytes`). A connection whose next frame does not fit
    /// stops being read until enough is given back. Must be at least
    /// `--request-max-bytes`. [default: 268435456]
    #[arg(long, env = "SLUICE_QUEUED_MAX_REQUEST_BYTES")]
    pub queued_max_request_bytes: Option<u64>,

    /// Serve Prometheus metrics over HTTP at `HOST:PORT/metrics` (e.g.
    /// `0.0.0.0:9644`). Unset: no metrics endpoint. [default: unset; the
    /// container image sets 0.0.0.0:9644]
    #[arg(long, env = "SLUICE_METRICS_LISTEN")]
    pub metrics_listen: Option<String>,

    /// Log filter for the broker's own logs (tracing syntax, e.g. `info` or
    /// `sluice=debug`). [default: info]
    #[arg(long, env = "SLUICE_LOG_LEVEL")]
    pub log_level: Option<String>,

    /// Log lines as `text` (for people) or `json` (one object per line, for log
    /// collectors). [default: text]
    #[arg(long, env = "SLUICE_LOG_FORMAT", value_enum)]
    pub log_format: Option<LogFormat>,

    /// A set of defaults: `kafka` (Kafka's own) or `dev` (for a laptop: groups
    /// rebalance at once instead of waiting 3 s for more members). Explicit
    /// settings win over the profile. [default: kafka]
    #[arg(long, env = "SLUICE_PROFILE", value_enum)]
    pub profile: Option<Profile>,

    /// How long a new group waits for more members before its first rebalance
    /// completes, in ms (`group.initial.rebalance.delay.ms`). [default: 3000; dev: 0]
    #[arg(long, env = "SLUICE_GROUP_INITIAL_REBALANCE_DELAY_MS")]
    pub group_initial_rebalance_delay_ms: Option<i64>,

    /// Committed offsets of an empty group are kept this long after their last
    /// commit, in minutes (`offsets.retention.minutes`). [default: 10080]
    #[arg(long, env = "SLUICE_OFFSETS_RETENTION_MINUTES")]
    pub offsets_retention_minutes: Option<i64>,

    /// How often committed offsets past their retention are removed, in ms
    /// (`offsets.retention.check.interval.ms`). [default: 600000]
    #[arg(long, env = "SLUICE_OFFSETS_RETENTION_CHECK_INTERVAL_MS")]
    pub offsets_retention_check_interval_ms: Option<u64>,

    /// Longest transaction timeout a producer may ask for, in ms
    /// (`transaction.max.timeout.ms`). [default: 900000]
    #[arg(long, env = "SLUICE_TRANSACTION_MAX_TIMEOUT_MS")]
    pub transaction_max_timeout_ms: Option<i32>,

    /// How often transactions past their timeout are aborted, in ms
    /// (`transaction.abort.timed.out.transaction.cleanup.interval.ms`).
    /// [default: 10000; dev: 1000]
    #[arg(long, env = "SLUICE_TRANSACTION_ABORT_CHECK_INTERVAL_MS")]
    pub transaction_abort_check_interval_ms: Option<u64>,

    /// A transactional id idle this long is forgotten, in ms
    /// (`transactional.id.expiration.ms`). [default: 604800000]
    #[arg(long, env = "SLUICE_TRANSACTIONAL_ID_EXPIRATION_MS")]
    pub transactional_id_expiration_ms: Option<i64>,

    /// Producer ids reserved from the controller at a time
    /// (`producer.id.block.size`). [default: 1000]
    #[arg(long, env = "SLUICE_PRODUCER_ID_BLOCK_SIZE")]
    pub producer_id_block_size: Option<i64>,

    /// The controller quorum, comma-separated `ID@HOST:PORT` (Kafka's
    /// `controller.quorum.voters`): the nodes named are the metadata voters, and
    /// any other node started with the same list joins as a broker that follows
    /// the metadata log without voting. Unset: a single-node broker.
    #[arg(long, env = "SLUICE_CONTROLLER_VOTERS", value_delimiter = ',')]
    pub controller_voters: Option<Vec<String>>,

    /// Where this node listens for the other nodes of its cluster (`HOST:PORT`):
    /// a voter's own address in `--controller-voters` (or that port on a wildcard
    /// host); for a non-voting broker, an address the voters can reach.
    #[arg(long, env = "SLUICE_CONTROLLER_LISTEN")]
    pub controller_listen: Option<String>,

    /// The listener (by name, from `--listen`) that followers fetch from and
    /// other brokers reach this one on (`inter.broker.listener.name`), in its
    /// security protocol: over SSL and SASL_SSL a broker shows its own
    /// certificate (--ssl-keystore-location) and checks the other's against
    /// --ssl-truststore-location and the host it dialled; over SASL_* it logs
    /// in with --inter-broker-sasl-*. [default: the first listener]
    #[arg(long, env = "SLUICE_INTER_BROKER_LISTENER")]
    pub inter_broker_listener: Option<String>,

    /// The SASL mechanism brokers log in to one another with over a SASL
    /// inter-broker listener (`sasl.mechanism.inter.broker.protocol`):
    /// PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512. [default: SCRAM-SHA-512]
    #[arg(long, env = "SLUICE_INTER_BROKER_SASL_MECHANISM")]
    pub inter_broker_sasl_mechanism: Option<String>,

    /// The user brokers log in to one another as over a SASL inter-broker
    /// listener (create it on every node with --add-scram). [default: none]
    #[arg(long, env = "SLUICE_INTER_BROKER_SASL_USERNAME")]
    pub inter_broker_sasl_username: Option<String>,

    /// That user's password; better given in the environment than on the
    /// command line. [default: none]
    #[arg(
        long,
        env = "SLUICE_INTER_BROKER_SASL_PASSWORD",
        hide_env_values = true
    )]
    pub inter_broker_sasl_password: Option<String>,

    /// The metadata quorum's transport between nodes: PLAINTEXT, or SSL for
    /// mutual TLS with --ssl-keystore-location and --ssl-truststore-location
    /// (the security protocol of Kafka's `controller.listener.names`); a node
    /// without a certificate the truststore vouches for is turned away before
    /// any command is read. [default: PLAINTEXT]
    #[arg(long, env = "SLUICE_CONTROLLER_LISTENER_SECURITY_PROTOCOL")]
    pub controller_listener_security_protocol: Option<String>,

    /// An in-sync replica that has not caught up with its leader for this long
    /// leaves the ISR, in ms (`replica.lag.time.max.ms`). [default: 30000]
    #[arg(long, env = "SLUICE_REPLICA_LAG_TIME_MAX_MS")]
    pub replica_lag_time_max_ms: Option<u64>,

    /// How a leader picks the replica a consumer should fetch from (KIP-392,
    /// `replica.selector.class`): `leader` (Kafka's default: the leader serves
    /// every fetch) or `rack-aware` (a replica in the consumer's `client.rack`,
    /// as Kafka's RackAwareReplicaSelector). [default: leader]
    #[arg(long, env = "SLUICE_REPLICA_SELECTOR", value_enum)]
    pub replica_selector: Option<ReplicaSelector>,

    /// Give leaderships back to preferred replicas (the first of each partition)
    /// when a broker's share of preferred partitions it does not lead passes 10 %
    /// (`auto.leader.rebalance.enable`). [default: true]
    #[arg(long, env = "SLUICE_AUTO_LEADER_REBALANCE_ENABLE")]
    pub auto_leader_rebalance_enable: Option<bool>,

    /// How often the metadata leader checks the leaders' balance, in seconds
    /// (`leader.imbalance.check.interval.seconds`). [default: 300]
    #[arg(long, env = "SLUICE_LEADER_IMBALANCE_CHECK_INTERVAL_SECONDS")]
    pub leader_imbalance_check_interval_seconds: Option<u64>,

    /// Replicas of `__consumer_offsets` when it is created
    /// (`offsets.topic.replication.factor`); on a single node, and with the dev
    /// profile, no more than the live brokers. [default: 3]
    #[arg(long, env = "SLUICE_OFFSETS_TOPIC_REPLICATION_FACTOR")]
    pub offsets_topic_replication_factor: Option<i16>,

    /// Replicas of `__transaction_state` when it is created
    /// (`transaction.state.log.replication.factor`), taken down as above.
    /// [default: 3]
    #[arg(long, env = "SLUICE_TRANSACTION_STATE_LOG_REPLICATION_FACTOR")]
    pub transaction_state_log_replication_factor: Option<i16>,

    /// `min.insync.replicas` of `__transaction_state`
    /// (`transaction.state.log.min.isr`), at most its replicas. [default: 2]
    #[arg(long, env = "SLUICE_TRANSACTION_STATE_LOG_MIN_ISR")]
    pub transaction_state_log_min_isr: Option<i16>,

    /// Run the log cleaner, which compacts `cleanup.policy=compact` topics
    /// (`log.cleaner.enable`). [default: true]
    #[arg(long, env = "SLUICE_LOG_CLEANER_ENABLE")]
    pub log_cleaner_enable: Option<bool>,

    /// Logs compacted at once (`log.cleaner.threads`). [default: 1]
    #[arg(long, env = "SLUICE_LOG_CLEANER_THREADS")]
    pub log_cleaner_threads: Option<usize>,

    /// Memory for the cleaners' key maps, all threads together, in bytes
    /// (`log.cleaner.dedupe.buffer.size`). [default: 134217728]
    #[arg(long, env = "SLUICE_LOG_CLEANER_DEDUPE_BUFFER_SIZE")]
    pub log_cleaner_dedupe_buffer_size: Option<u64>,

    /// The cleaners' reads and writes together, at most, in bytes per second
    /// (`log.cleaner.io.max.bytes.per.second`). [default: unlimited]
    #[arg(long, env = "SLUICE_LOG_CLEANER_IO_MAX_BYTES_PER_SECOND")]
    pub log_cleaner_io_max_bytes_per_second: Option<f64>,

    /// How long a cleaner sleeps when no log needs cleaning, in ms
    /// (`log.cleaner.backoff.ms`). [default: 15000]
    #[arg(long, env = "SLUICE_LOG_CLEANER_BACKOFF_MS")]
    pub log_cleaner_backoff_ms: Option<u64>,

    /// Replicas of an auto-created topic, or of CreateTopics with -1
    /// (`default.replication.factor`). [default: 1]
    #[arg(long, env = "SLUICE_DEFAULT_REPLICATION_FACTOR")]
    pub default_replication_factor: Option<i16>,

    /// A broker that has not heartbeated to the controller for this long is
    /// fenced, in ms (`broker.session.timeout.ms`; Kafka's is 9000).
    /// [default: 3000]
    #[arg(long, env = "SLUICE_BROKER_SESSION_TIMEOUT_MS")]
    pub broker_session_timeout_ms: Option<u64>,

    /// How often a broker heartbeats to the voters, in ms
    /// (`broker.heartbeat.interval.ms`; Kafka's is 2000). [default: 500]
    #[arg(long, env = "SLUICE_BROKER_HEARTBEAT_INTERVAL_MS")]
    pub broker_heartbeat_interval_ms: Option<u64>,

    /// The shortest metadata election timeout, in ms; each node draws its own
    /// from this to twice this (`controller.quorum.election.timeout.ms`;
    /// Kafka's is 1000). [default: 300]
    #[arg(long, env = "SLUICE_CONTROLLER_ELECTION_TIMEOUT_MS")]
    pub controller_election_timeout_ms: Option<u64>,
}
