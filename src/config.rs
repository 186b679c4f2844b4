//! Every broker setting in one `Config`, built once from the command line, the
//! `SLUICE_*` environment and an optional TOML file (in that order of precedence),
//! validated, then passed down. Nothing reads settings from anywhere else.
//!
//! A leaf: of the broker it imports only `limits` (the ceilings it validates
//! against), so every module may take a `Config` without an import cycle.

use std::collections::BTreeSet;
use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use clap::Args;

use crate::security::acl::Authorizer;
use crate::security::oauthbearer::{JwksCache, OAuthBearerSettings};
use crate::security::sasl::{Mechanism, SaslSettings};
use crate::security::scram::{ScramMechanism, SCRAM_ITERATIONS_MAX, SCRAM_ITERATIONS_MIN};
use crate::security::ssl_principal::PrincipalMapper;
use serde::Deserialize;

use crate::limits::{
    PRODUCER_ID_BLOCK_COUNT_MAX, QUEUED_REQUEST_BYTES_DEFAULT, QUEUED_REQUEST_BYTES_MAX,
    REQUEST_SIZE_BYTES_DEFAULT, REQUEST_SIZE_BYTES_MAX,
};
use defaults::{
    GROUP_INITIAL_REBALANCE_DELAY_MS_DEFAULT, GROUP_INITIAL_REBALANCE_DELAY_MS_DEV,
    GROUP_MAX_SESSION_TIMEOUT_MS_DEFAULT, GROUP_MIN_SESSION_TIMEOUT_MS_DEFAULT,
    MESSAGE_BYTES_MAX_DEFAULT, NUM_PARTITIONS_DEFAULT, OFFSETS_RETENTION_CHECK_INTERVAL_MS_DEFAULT,
    OFFSETS_RETENTION_MINUTES_DEFAULT, PRODUCER_ID_BLOCK_SIZE_DEFAULT, RETENTION_BYTES_DEFAULT,
    RETENTION_CHECK_INTERVAL_MS_DEFAULT, RETENTION_MS_DEFAULT, SEGMENT_BYTES_DEFAULT,
    SEGMENT_MS_DEFAULT, TRANSACTIONAL_ID_EXPIRATION_MS_DEFAULT,
    TRANSACTION_ABORT_CHECK_INTERVAL_MS_DEFAULT, TRANSACTION_ABORT_CHECK_INTERVAL_MS_DEV,
    TRANSACTION_MAX_TIMEOUT_MS_DEFAULT,
};

/// The listener name used when a `--listen` entry carries none.
pub const DEFAULT_LISTENER_NAME: &str = "PLAINTEXT";
/// Where `sluice serve` listens with nothing configured.
pub const DEFAULT_LISTEN: &str = "127.0.0.1:9092";
/// Where `sluice serve` keeps its data with nothing configured.
pub const DEFAULT_DATA_DIR: &str = "./sluice-data";

/// Kafka's defaults for the broker settings Sluice reads, each once, named after
/// its setting with the unit last. They sit in this leaf so that the settings
/// below, the log's own defaults, the transaction coordinator, the topic-config
/// table and the controller's list defaults all read the same value.
pub mod defaults {
    use super::MS_PER_MINUTE;

    const MS_PER_DAY: i64 = 24 * 60 * MS_PER_MINUTE;

    /// Kafka's `num.partitions`: partitions of an auto-created topic.
    pub const NUM_PARTITIONS_DEFAULT: i32 = 1;
    /// Kafka's `log.segment.bytes` (topic `segment.bytes`): 1 GiB.
    pub const SEGMENT_BYTES_DEFAULT: u64 = 1 << 30;
    /// Kafka's `log.roll.ms` (topic `segment.ms`): 7 days.
    pub const SEGMENT_MS_DEFAULT: i64 = 7 * MS_PER_DAY;
    /// Kafka's `log.retention.ms` (topic `retention.ms`): 7 days.
    pub const RETENTION_MS_DEFAULT: i64 = 7 * MS_PER_DAY;
    /// Kafka's `log.retention.bytes` (topic `retention.bytes`): -1, no limit.
    pub const RETENTION_BYTES_DEFAULT: i64 = -1;
    /// Kafka's `log.retention.check.interval.ms`: 5 minutes.
    pub const RETENTION_CHECK_INTERVAL_MS_DEFAULT: u64 = 300_000;
    /// Kafka's `log.index.interval.bytes` (topic `index.interval.bytes`).
    pub const INDEX_INTERVAL_BYTES_DEFAULT: u32 = 4096;
    /// Kafka's `message.max.bytes` (topic `max.message.bytes`): 1 MiB plus the
    /// 12 bytes of log overhead.
    pub const MESSAGE_BYTES_MAX_DEFAULT: u32 = 1_048_588;
    /// Kafka's `log.message.timestamp.after.max.ms` (topic
    /// `message.timestamp.after.max.ms`): 1 hour.
    pub const MESSAGE_TIMESTAMP_AFTER_MAX_MS_DEFAULT: i64 = 60 * MS_PER_MINUTE;
    /// Kafka's `log.message.timestamp.before.max.ms` (topic
    /// `message.timestamp.before.max.ms`): no limit.
    pub const MESSAGE_TIMESTAMP_BEFORE_MAX_MS_DEFAULT: i64 = i64::MAX;
    /// Kafka's `log.cleanup.policy` (topic `cleanup.policy`).
    pub const CLEANUP_POLICY_DEFAULT: &str = "delete";
    /// Kafka's `group.initial.rebalance.delay.ms`.
    pub const GROUP_INITIAL_REBALANCE_DELAY_MS_DEFAULT: i64 = 3_000;
    /// The dev profile's `group.initial.rebalance.delay.ms`: a group on a laptop
    /// rebalances at once instead of waiting for members that are not coming.
    pub const GROUP_INITIAL_REBALANCE_DELAY_MS_DEV: i64 = 0;
    /// Kafka's `group.min.session.timeout.ms`.
    pub const GROUP_MIN_SESSION_TIMEOUT_MS_DEFAULT: i32 = 6_000;
    /// Kafka's `group.max.session.timeout.ms`: 30 minutes.
    pub const GROUP_MAX_SESSION_TIMEOUT_MS_DEFAULT: i32 = 1_800_000;
    /// Kafka's `offsets.retention.minutes`: 7 days.
    pub const OFFSETS_RETENTION_MINUTES_DEFAULT: i64 = 7 * 24 * 60;
    /// Kafka's `offsets.retention.check.interval.ms`: 10 minutes.
    pub const OFFSETS_RETENTION_CHECK_INTERVAL_MS_DEFAULT: u64 = 600_000;
    /// Kafka's `transaction.max.timeout.ms`: 15 minutes.
    pub const TRANSACTION_MAX_TIMEOUT_MS_DEFAULT: i32 = 900_000;
    /// Kafka's `transaction.abort.timed.out.transaction.cleanup.interval.ms`.
    pub const TRANSACTION_ABORT_CHECK_INTERVAL_MS_DEFAULT: u64 = 10_000;
    /// The dev profile's abort check interval: a test that lets a transaction
    /// time out sees it aborted within a second.
    pub const TRANSACTION_ABORT_CHECK_INTERVAL_MS_DEV: u64 = 1_000;
    /// Kafka's `transactional.id.expiration.ms`: 7 days.
    pub const TRANSACTIONAL_ID_EXPIRATION_MS_DEFAULT: i64 = 7 * MS_PER_DAY;
    /// Kafka's `producer.id.expiration.ms`: one day. A producer idle this long,
    /// with no ongoing transaction, is forgotten.
    pub const PRODUCER_ID_EXPIRATION_MS_DEFAULT: i64 = MS_PER_DAY;
    /// Kafka's `producer.id.block.size` (ProducerIdsBlock.PRODUCER_ID_BLOCK_SIZE).
    pub const PRODUCER_ID_BLOCK_SIZE_DEFAULT: i64 = 1_000;
}

/// Minutes to milliseconds, for the settings Kafka gives in minutes.
const MS_PER_MINUTE: i64 = 60_000;

/// Replicas of a topic created without a replication factor (Kafka's
/// `default.replication.factor`).
const DEFAULT_REPLICATION_FACTOR_DEFAULT: i16 = 1;
/// Kafka's `replica.lag.time.max.ms`: an ISR member that has not caught up with its
/// leader for this long leaves the ISR.
const REPLICA_LAG_TIME_MAX_MS_DEFAULT: u64 = 30_000;
/// Kafka's `leader.imbalance.check.interval.seconds`.
const LEADER_IMBALANCE_CHECK_INTERVAL_SECONDS_DEFAULT: u64 = 300;
/// Kafka's `broker.session.timeout.ms`, a third of Kafka's 9 s: a broker
/// that stops silently (a pause, a cut cable) is fenced within it. Heartbeat
/// round trips to the leader stay two orders of magnitude below it under the
/// RF 3 benchmark on two cores (`scripts/bench.sh` prints the largest), and a
/// false fence costs availability only, never data.
const BROKER_SESSION_TIMEOUT_MS_DEFAULT: u64 = 3_000;
/// Kafka's `broker.heartbeat.interval.ms`, a quarter of Kafka's 2 s, so that
/// the shorter session still spans six heartbeats.
const BROKER_HEARTBEAT_INTERVAL_MS_DEFAULT: u64 = 500;
/// Kafka's `controller.quorum.election.timeout.ms`, under a third of Kafka's
/// 1 s, and twice openraft's 150 ms (the raft core waits on every fsync, and a
/// slow disk must not cost a leader): voters refuse to vote while a leader's
/// lease (twice this) runs, so a dead metadata leader is replaced about 0.65 s
/// after its death when the others can prove it (its listener refuses), within
/// 0.6-1.2 s otherwise. Raft heartbeats go every fifth of it (60 ms).
const CONTROLLER_ELECTION_TIMEOUT_MS_DEFAULT: u64 = 300;

/// This broker's node id when none is given.
const NODE_ID_DEFAULT: i32 = 1;
/// The broker's own log filter when none is given.
const LOG_LEVEL_DEFAULT: &str = "info";

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

/// One metadata voter: its node id and the address of its controller listener.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Voter {
    pub id: i32,
    pub address: String,
}

impl fmt::Display for Voter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}@{}", self.id, self.address)
    }
}

/// `ID@HOST:PORT,...` into voters sorted by id; duplicate ids or addresses are
/// refused.
pub fn parse_voters(text: &str) -> Result<Vec<Voter>, String> {
    let items: Vec<String> = text.split(',').map(str::to_string).collect();
    parse_voter_list(&items).map_err(|e| e.0)
}

fn parse_voter_list(items: &[String]) -> Result<Vec<Voter>, ConfigError> {
    let mut voters: Vec<Voter> = Vec::new();
    for item in items
        .iter()
        .map(|item| item.trim())
        .filter(|i| !i.is_empty())
    {
        let (id, address) = item.split_once('@').ok_or_else(|| {
            invalid(format!(
                "controller voter '{item}' is not ID@HOST:PORT (e.g. 1@127.0.0.1:9093)"
            ))
        })?;
        let id: i32 = id
            .trim()
            .parse()
            .ok()
            .filter(|id| *id >= 0)
            .ok_or_else(|| invalid(format!("controller voter '{item}' has no valid node id")))?;
        let address = parse_bind_address(address)?;
        if let Some(other) = voters.iter().find(|v| v.id == id) {
            return Err(invalid(format!(
                "controller voters name node {id} twice ({other} and {item}): give each voter its own id"
            )));
        }
        if let Some(other) = voters.iter().find(|v| v.address == address) {
            return Err(invalid(format!(
                "controller voters {other} and {item} share an address: give each voter its own"
            )));
        }
        voters.push(Voter { id, address });
    }
    if voters.is_empty() {
        return Err(invalid("--controller-voters names no voter"));
    }
    voters.sort_by_key(|v| v.id);
    Ok(voters)
}

/// A clustered node's controller settings, checked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QuorumSettings {
    /// Where this node's controller listener binds.
    pub listen: String,
    /// Sorted by id.
    pub voters: Vec<Voter>,
    pub broker_session_timeout_ms: u64,
    pub broker_heartbeat_interval_ms: u64,
    pub election_timeout_ms: u64,
    /// Mutual TLS between the nodes (`--controller-listener-security-protocol SSL`).
    pub tls: bool,
}

/// The SASL login brokers use with one another.
#[derive(Clone, PartialEq, Eq)]
pub struct InterBrokerSasl {
    pub mechanism: Mechanism,
    pub username: String,
    pub password: String,
}

impl fmt::Debug for InterBrokerSasl {
    /// Never the password.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} as {}", self.mechanism.name(), self.username)
    }
}

impl QuorumSettings {
    pub fn is_voter(&self, node_id: i32) -> bool {
        self.voters.iter().any(|v| v.id == node_id)
    }
}

/// How log lines are written (`--log-format`).
#[derive(clap::ValueEnum, Deserialize, Debug, Clone, Copy, PartialEq, Eq, Default)]
#[serde(rename_all = "kebab-case")]
pub enum LogFormat {
    /// One readable line per event, fields as `key=value`.
    #[default]
    Text,
    /// One JSON object per event, fields as members.
    Json,
}

/// Named sets of defaults (`--profile`).
#[derive(clap::ValueEnum, Deserialize, Debug, Clone, Copy, PartialEq, Eq, Default)]
#[serde(rename_all = "kebab-case")]
pub enum Profile {
    /// Apache Kafka's defaults.
    #[default]
    Kafka,
    /// Developer-friendly: no initial rebalance delay.
    Dev,
}

/// Consumer-group settings (the `group.*` and `offsets.*` family).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupSettings {
    pub initial_rebalance_delay_ms: i64,
    pub min_session_timeout_ms: i32,
    pub max_session_timeout_ms: i32,
    pub offsets_retention_ms: i64,
    pub offsets_retention_check_interval_ms: u64,
}

/// Transaction coordinator settings (the `transaction.*` family).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TxnSettings {
    pub max_timeout_ms: i32,
    pub abort_check_interval_ms: u64,
    pub id_expiration_ms: i64,
    pub producer_id_block_size: i64,
}

/// One socket the broker listens on, and what it tells clients about itself.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListenerConfig {
    pub name: String,
    pub bind: String,
    /// None: advertise the bound address (or, for a wildcard bind, the local
    /// address of each connection).
    pub advertised: Option<(String, u16)>,
    pub protocol: SecurityProtocol,
}

/// Kafka's security protocols, one per listener.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SecurityProtocol {
    Plaintext,
    Ssl,
    SaslPlaintext,
    SaslSsl,
}

impl SecurityProtocol {
    /// The protocol of Kafka's name, in any case.
    pub fn parse(name: &str) -> Option<SecurityProtocol> {
        match name.to_ascii_uppercase().as_str() {
            "PLAINTEXT" => Some(SecurityProtocol::Plaintext),
            "SSL" => Some(SecurityProtocol::Ssl),
            "SASL_PLAINTEXT" => Some(SecurityProtocol::SaslPlaintext),
            "SASL_SSL" => Some(SecurityProtocol::SaslSsl),
            _ => None,
        }
    }

    /// Kafka's name.
    pub fn name(self) -> &'static str {
        match self {
            SecurityProtocol::Plaintext => "PLAINTEXT",
            SecurityProtocol::Ssl => "SSL",
            SecurityProtocol::SaslPlaintext => "SASL_PLAINTEXT",
            SecurityProtocol::SaslSsl => "SASL_SSL",
        }
    }

    /// Whether connections run over TLS.
    pub fn uses_tls(self) -> bool {
        matches!(self, SecurityProtocol::Ssl | SecurityProtocol::SaslSsl)
    }

    /// Whether clients authenticate with SASL.
    pub fn uses_sasl(self) -> bool {
        matches!(
            self,
            SecurityProtocol::SaslPlaintext | SecurityProtocol::SaslSsl
        )
    }
}

/// Kafka's `authorizer.class.name`: none, or its StandardAuthorizer.
#[derive(clap::ValueEnum, Deserialize, Debug, Clone, Copy, PartialEq, Eq, Default)]
#[serde(rename_all = "lowercase")]
pub enum AuthorizerKind {
    #[default]
    None,
    Standard,
}

/// Kafka's `ssl.client.auth`.
#[derive(clap::ValueEnum, Deserialize, Debug, Clone, Copy, PartialEq, Eq, Default)]
#[serde(rename_all = "lowercase")]
pub enum SslClientAuth {
    #[default]
    None,
    Requested,
    Required,
}

/// What SSL listeners serve with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SslConfig {
    pub keystore: PathBuf,
    pub truststore: Option<PathBuf>,
    pub client_auth: SslClientAuth,
    /// `ssl.principal.mapping.rules` as given (checked when resolved).
    pub principal_mapping_rules: Option<String>,
}

/// What SASL listeners serve with, and the users to create at start.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SaslConfig {
    pub settings: Arc<SaslSettings>,
    pub add_scram: Vec<ScramUser>,
    /// Where OAUTHBEARER's keys are read from, into its settings' cache.
    pub jwks: Option<JwksSource>,
}

/// A JWKS, read at start and again every `refresh_ms` into `cache`.
#[derive(Debug, Clone)]
pub struct JwksSource {
    pub location: JwksLocation,
    pub refresh_ms: u64,
    pub cache: Arc<JwksCache>,
}

/// Where a JWKS is read from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum JwksLocation {
    File(PathBuf),
    /// An `https://` URL; its server's certificate must chain to one of the
    /// platform's CA certificates or to one in `truststore`.
    Https {
        url: String,
        truststore: Option<PathBuf>,
    },
}

impl fmt::Display for JwksLocation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            JwksLocation::File(path) => write!(f, "{}", path.display()),
            JwksLocation::Https { url, .. } => f.write_str(url),
        }
    }
}

impl PartialEq for JwksSource {
    fn eq(&self, other: &Self) -> bool {
        self.location == other.location
            && self.refresh_ms == other.refresh_ms
            && Arc::ptr_eq(&self.cache, &other.cache)
    }
}

impl Eq for JwksSource {}

/// Kafka's `sasl.oauthbearer.jwks.endpoint.refresh.ms` default: an hour.
pub const SASL_OAUTHBEARER_JWKS_REFRESH_MS_DEFAULT: u64 = 3_600_000;
/// Kafka's `sasl.oauthbearer.clock.skew.seconds` default.
pub const SASL_OAUTHBEARER_CLOCK_SKEW_SECONDS_DEFAULT: u64 = 30;

/// A user `--add-scram` creates.
#[derive(Clone, PartialEq, Eq)]
pub struct ScramUser {
    pub mechanism: ScramMechanism,
    pub name: String,
    pub password: String,
    pub iterations: u32,
}

impl fmt::Debug for ScramUser {
    /// Never the password.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}=[name={},iterations={}]",
            self.mechanism.name(),
            self.name,
            self.iterations
        )
    }
}

/// Flush policy for power-loss durability; see ARCHITECTURE.md, durability points.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct FlushPolicy {
    pub messages: Option<i64>,
    pub interval_ms: Option<i64>,
    pub before_ack: bool,
}

/// Broker-wide defaults for topic configs (the `log.*` family). Topic overrides and
/// dynamic broker configs are layered on top in `topic_config`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogDefaults {
    pub segment_bytes: u64,
    pub segment_ms: i64,
    pub retention_ms: i64,
    pub retention_bytes: i64,
    pub max_message_bytes: u32,
}

/// The validated configuration of one broker.
/// Kafka's settings of its internal topics.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct InternalTopicSettings {
    pub offsets_replication_factor: i16,
    pub txn_replication_factor: i16,
    pub txn_min_isr: i16,
    /// Created with no more replicas than live brokers (a single node, or the dev
    /// profile); otherwise creation waits for enough brokers, as Kafka's does.
    pub fit_to_live_brokers: bool,
}

/// Kafka's `offsets.topic.replication.factor` and
/// `transaction.state.log.replication.factor` default.
pub const INTERNAL_TOPIC_REPLICATION_FACTOR_DEFAULT: i16 = 3;
/// Kafka's `transaction.state.log.min.isr` default.
pub const TRANSACTION_STATE_LOG_MIN_ISR_DEFAULT: i16 = 2;

/// Kafka's `log.cleaner.*` settings.
#[derive(Clone, Debug, PartialEq)]
pub struct CleanerSettings {
    pub enable: bool,
    pub threads: usize,
    /// Shared by the threads: each maps `dedupe_buffer_bytes / threads`.
    pub dedupe_buffer_bytes: u64,
    /// None: unlimited.
    pub io_max_bytes_per_second: Option<f64>,
    pub backoff_ms: u64,
}

/// Kafka's `log.cleaner.threads` default.
pub const LOG_CLEANER_THREADS_DEFAULT: usize = 1;
/// Kafka's `log.cleaner.dedupe.buffer.size` default: 128 MiB, in bytes.
pub const LOG_CLEANER_DEDUPE_BUFFER_BYTES_DEFAULT: u64 = 128 * 1024 * 1024;
/// Kafka's `log.cleaner.backoff.ms` default.
pub const LOG_CLEANER_BACKOFF_MS_DEFAULT: u64 = 15_000;

#[derive(Debug, Clone)]
pub struct Config {
    pub listeners: Vec<ListenerConfig>,
    /// Who may do what; shared by every connection.
    pub authorizer: Arc<Authorizer>,
    /// Set when a listener runs TLS.
    pub ssl: Option<SslConfig>,
    /// SASL listeners' mechanisms and sessions, and the users to create.
    pub sasl: SaslConfig,
    pub data_dir: PathBuf,
    pub node_id: i32,
    pub rack: Option<String>,
    pub auto_create_topics: bool,
    pub num_partitions: i32,
    pub log_defaults: LogDefaults,
    pub retention_check_interval_ms: u64,
    pub flush: FlushPolicy,
    pub request_max_bytes: u32,
    /// The broker-wide budget of request bytes in flight; never below
    /// `request_max_bytes`, so every frame the broker accepts can be admitted.
    pub queued_max_request_bytes: u64,
    /// Where the metrics endpoint listens (`HOST:PORT`), if anywhere.
    pub metrics_listen: Option<String>,
    pub log_level: String,
    pub log_format: LogFormat,
    pub profile: Profile,
    pub groups: GroupSettings,
    pub transactions: TxnSettings,
    /// Replicas of a topic created without a replication factor.
    pub default_replication_factor: i16,
    /// The name of the listener followers fetch from (one of `listeners`).
    pub inter_broker_listener: String,
    /// How brokers log in to one another over a SASL inter-broker listener.
    pub inter_broker_sasl: Option<InterBrokerSasl>,
    /// Kafka's `replica.lag.time.max.ms`.
    pub replica_lag_time_max_ms: u64,
    /// Kafka's `auto.leader.rebalance.enable`.
    pub auto_leader_rebalance_enable: bool,
    /// Kafka's `replica.selector.class`.
    pub replica_selector: ReplicaSelector,
    /// Kafka's `leader.imbalance.check.interval.seconds`, at least 1.
    pub leader_imbalance_check_interval_seconds: u64,
    /// The log cleaner (compaction).
    pub cleaner: CleanerSettings,
    /// How `__consumer_offsets` and `__transaction_state` are created.
    pub internal_topics: InternalTopicSettings,
    /// Present on a node of a cluster; `None` is a single-node broker.
    pub quorum: Option<QuorumSettings>,
}

#[derive(Debug)]
pub struct ConfigError(pub String);

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for ConfigError {}

/// Where consumers fetch from (Kafka's `replica.selector.class`).
#[derive(clap::ValueEnum, Deserialize, Debug, Clone, Copy, PartialEq, Eq, Default)]
#[serde(rename_all = "kebab-case")]
pub enum ReplicaSelector {
    /// The leader serves every fetch (Kafka's default, no selector).
    #[default]
    Leader,
    /// A replica in the consumer's rack, as Kafka's RackAwareReplicaSelector.
    RackAware,
}

impl Config {
    /// The name of the listener followers fetch from.
    pub fn inter_broker_listener(&self) -> &str {
        &self.inter_broker_listener
    }
}

fn invalid(message: impl Into<String>) -> ConfigError {
    ConfigError(message.into())
}

impl ServeArgs {
    /// Layer `self` (command line and environment) over the config file, if any.
    pub fn with_file(self) -> Result<ServeArgs, ConfigError> {
        let Some(path) = self.config.clone() else {
            return Ok(self);
        };
        let file = read_file(&path)?;
        Ok(self.over(file))
    }

    /// Field by field, `self` wins where it has a value.
    fn over(self, base: ServeArgs) -> ServeArgs {
        macro_rules! layer {
            ($($field:ident),* $(,)?) => {
                ServeArgs { $($field: self.$field.or(base.$field),)* }
            };
        }
        layer!(
            config,
            listen,
            advertise,
            listener_security_protocol_map,
            ssl_keystore_location,
            ssl_truststore_location,
            ssl_client_auth,
            ssl_principal_mapping_rules,
            sasl_enabled_mechanisms,
            authorizer,
            super_users,
            allow_everyone_if_no_acl_found,
            sasl_scram_legacy_nonce,
            connections_max_reauth_ms,
            add_scram,
            sasl_oauthbearer_jwks_endpoint_url,
            sasl_oauthbearer_jwks_endpoint_refresh_ms,
            sasl_oauthbearer_expected_audience,
            sasl_oauthbearer_expected_issuer,
            sasl_oauthbearer_sub_claim_name,
            sasl_oauthbearer_clock_skew_seconds,
            sasl_oauthbearer_unsecured,
            inter_broker_sasl_mechanism,
            inter_broker_sasl_username,
            inter_broker_sasl_password,
            controller_listener_security_protocol,
            data_dir,
            node_id,
            rack,
            auto_create_topics,
            num_partitions,
            segment_bytes,
            segment_ms,
            retention_ms,
            retention_bytes,
            retention_check_interval_ms,
            max_message_bytes,
            flush_messages,
            flush_ms,
            fsync_before_ack,
            request_max_bytes,
            queued_max_request_bytes,
            metrics_listen,
            log_level,
            log_format,
            profile,
            group_initial_rebalance_delay_ms,
            offsets_retention_minutes,
            offsets_retention_check_interval_ms,
            transaction_max_timeout_ms,
            transaction_abort_check_interval_ms,
            transactional_id_expiration_ms,
            producer_id_block_size,
            controller_voters,
            controller_listen,
            default_replication_factor,
            inter_broker_listener,
            replica_lag_time_max_ms,
            auto_leader_rebalance_enable,
            leader_imbalance_check_interval_seconds,
            replica_selector,
            offsets_topic_replication_factor,
            transaction_state_log_replication_factor,
            transaction_state_log_min_isr,
            log_cleaner_enable,
            log_cleaner_threads,
            log_cleaner_dedupe_buffer_size,
            log_cleaner_io_max_bytes_per_second,
            log_cleaner_backoff_ms,
            broker_session_timeout_ms,
            broker_heartbeat_interval_ms,
            controller_election_timeout_ms,
        )
    }

    /// Apply defaults and check every value. The checks run in a fixed order,
    /// one family at a time, and the first that fails is the one reported.
    pub fn resolve(self) -> Result<Config, ConfigError> {
        let listeners = self.resolve_listeners()?;
        let ssl = self.resolve_ssl(&listeners)?;
        let sasl = self.resolve_sasl()?;
        let authorizer = Arc::new(self.resolve_authorizer()?);
        let node_id = self.resolve_node_id()?;
        let num_partitions = self.resolve_num_partitions()?;
        let log_defaults = self.resolve_log_defaults()?;
        let flush = self.resolve_flush()?;
        let (request_max_bytes, queued_max_request_bytes) = self.resolve_request_limits()?;
        let metrics_listen = self.resolve_metrics_listen()?;
        let profile = self.profile.unwrap_or_default();
        let groups = self.resolve_groups(profile)?;
        let transactions = self.resolve_transactions(profile)?;
        let quorum = self.resolve_quorum(node_id)?;
        let cleaner = self.resolve_cleaner()?;
        let internal_topics = self.resolve_internal_topics(profile, quorum.is_some())?;
        let default_replication_factor = self
            .default_replication_factor
            .unwrap_or(DEFAULT_REPLICATION_FACTOR_DEFAULT);
        if default_replication_factor < 1 {
            return Err(invalid(format!(
                "--default-replication-factor must be at least 1, not {default_replication_factor}"
            )));
        }
        let inter_broker_listener = match &self.inter_broker_listener {
            Some(name) if listeners.iter().any(|l| &l.name == name) => name.clone(),
            Some(name) => {
                return Err(invalid(format!(
                    "--inter-broker-listener {name} names no listener of --listen"
                )))
            }
            None => listeners
                .first()
                .map(|l| l.name.clone())
                .unwrap_or_default(),
        };
        let inter_broker = listeners.iter().find(|l| l.name == inter_broker_listener);
        if let (Some(listener), Some(_)) = (inter_broker, &quorum) {
            if listener.protocol.uses_tls() && self.ssl_truststore_location.is_none() {
                return Err(invalid(format!(
                    "the inter-broker listener {} is {}: give --ssl-truststore-location, the CA the other brokers' certificates chain to",
                    listener.name,
                    listener.protocol.name()
                )));
            }
        }
        // A single node has no other broker to log in to.
        let inter_broker_sasl =
            self.resolve_inter_broker_sasl(inter_broker.filter(|_| quorum.is_some()), &sasl)?;
        let replica_lag_time_max_ms = self
            .replica_lag_time_max_ms
            .unwrap_or(REPLICA_LAG_TIME_MAX_MS_DEFAULT);
        if replica_lag_time_max_ms == 0 {
            return Err(invalid("--replica-lag-time-max-ms must be at least 1"));
        }
        Ok(Config {
            listeners,
            ssl,
            sasl,
            authorizer,
            data_dir: self
                .data_dir
                .unwrap_or_else(|| PathBuf::from(DEFAULT_DATA_DIR)),
            node_id,
            rack: self.rack,
            auto_create_topics: self.auto_create_topics.unwrap_or(true),
            num_partitions,
            log_defaults,
            retention_check_interval_ms: self
                .retention_check_interval_ms
                .unwrap_or(RETENTION_CHECK_INTERVAL_MS_DEFAULT),
            flush,
            request_max_bytes,
            queued_max_request_bytes,
            metrics_listen,
            log_level: self
                .log_level
                .unwrap_or_else(|| LOG_LEVEL_DEFAULT.to_string()),
            log_format: self.log_format.unwrap_or_default(),
            profile,
            groups,
            transactions,
            default_replication_factor,
            inter_broker_listener,
            inter_broker_sasl,
            replica_lag_time_max_ms,
            auto_leader_rebalance_enable: self.auto_leader_rebalance_enable.unwrap_or(true),
            replica_selector: self.replica_selector.unwrap_or_default(),
            leader_imbalance_check_interval_seconds: self
                .leader_imbalance_check_interval_seconds
                .unwrap_or(LEADER_IMBALANCE_CHECK_INTERVAL_SECONDS_DEFAULT)
                .max(1),
            cleaner,
            internal_topics,
            quorum,
        })
    }

    /// The authorizer and its settings.
    fn resolve_authorizer(&self) -> Result<Authorizer, ConfigError> {
        let kind = self.authorizer.unwrap_or_default();
        let super_users: BTreeSet<String> = self
            .super_users
            .iter()
            .flat_map(|users| users.split(';'))
            .map(str::trim)
            .filter(|user| !user.is_empty())
            .map(str::to_string)
            .collect();
        for user in &super_users {
            if !user
                .split_once(':')
                .is_some_and(|(kind, name)| !kind.is_empty() && !name.is_empty())
            {
                return Err(invalid(format!(
                    "--super-users: {user} is not a principal (Type:name, e.g. User:admin)"
                )));
            }
        }
        let allow_everyone = self.allow_everyone_if_no_acl_found.unwrap_or(false);
        match kind {
            AuthorizerKind::None => {
                if !super_users.is_empty() || allow_everyone {
                    return Err(invalid(
                        "--super-users and --allow-everyone-if-no-acl-found need --authorizer standard",
                    ));
                }
                Ok(Authorizer::None)
            }
            AuthorizerKind::Standard => Ok(Authorizer::Standard {
                super_users,
                allow_everyone_if_no_acl_found: allow_everyone,
            }),
        }
    }

    /// The internal topics' replication settings.
    fn resolve_internal_topics(
        &self,
        profile: Profile,
        clustered: bool,
    ) -> Result<InternalTopicSettings, ConfigError> {
        let settings = InternalTopicSettings {
            offsets_replication_factor: self
                .offsets_topic_replication_factor
                .unwrap_or(INTERNAL_TOPIC_REPLICATION_FACTOR_DEFAULT),
            txn_replication_factor: self
                .transaction_state_log_replication_factor
                .unwrap_or(INTERNAL_TOPIC_REPLICATION_FACTOR_DEFAULT),
            txn_min_isr: self
                .transaction_state_log_min_isr
                .unwrap_or(TRANSACTION_STATE_LOG_MIN_ISR_DEFAULT),
            fit_to_live_brokers: !clustered || profile == Profile::Dev,
        };
        if settings.offsets_replication_factor < 1
            || settings.txn_replication_factor < 1
            || settings.txn_min_isr < 1
        {
            return Err(invalid(
                "internal topic replication factors and min ISR must be at least 1",
            ));
        }
        Ok(settings)
    }

    /// The `log.cleaner.*` settings.
    fn resolve_cleaner(&self) -> Result<CleanerSettings, ConfigError> {
        let threads = self
            .log_cleaner_threads
            .unwrap_or(LOG_CLEANER_THREADS_DEFAULT);
        if threads == 0 {
            return Err(invalid("--log-cleaner-threads must be at least 1"));
        }
        let io_max = self.log_cleaner_io_max_bytes_per_second;
        if io_max.is_some_and(|rate| rate.is_nan() || rate <= 0.0) {
            return Err(invalid(
                "--log-cleaner-io-max-bytes-per-second must be above 0",
            ));
        }
        Ok(CleanerSettings {
            enable: self.log_cleaner_enable.unwrap_or(true),
            threads,
            dedupe_buffer_bytes: self
                .log_cleaner_dedupe_buffer_size
                .unwrap_or(LOG_CLEANER_DEDUPE_BUFFER_BYTES_DEFAULT),
            io_max_bytes_per_second: io_max,
            backoff_ms: self
                .log_cleaner_backoff_ms
                .unwrap_or(LOG_CLEANER_BACKOFF_MS_DEFAULT)
                .max(1),
        })
    }

    /// `--controller-voters` and `--controller-listen`, checked against each
    /// other and this node's id.
    fn resolve_quorum(&self, node_id: i32) -> Result<Option<QuorumSettings>, ConfigError> {
        let Some(voters) = &self.controller_voters else {
            if self.controller_listen.is_some() {
                return Err(invalid(
                    "--controller-listen needs --controller-voters: name the voters of the cluster",
                ));
            }
            return Ok(None);
        };
        let voters = parse_voter_list(voters)?;
        let listen = self.controller_listen.as_deref().ok_or_else(|| {
            invalid("--controller-voters needs --controller-listen: where this node listens for the others")
        })?;
        let listen = parse_bind_address(listen)?;
        let (listen_host, listen_port) = split_host_port(&listen);
        let wildcard = matches!(listen_host, "0.0.0.0" | "[::]" | "");
        match voters.iter().find(|v| v.id == node_id) {
            Some(own) => {
                let (_, own_port) = split_host_port(&own.address);
                let matches = own.address == listen || (wildcard && own_port == listen_port);
                if !matches {
                    return Err(invalid(format!(
                        "node {node_id} is voter {own} but --controller-listen is {listen}: listen on the voter's own address (or on its port with host 0.0.0.0)"
                    )));
                }
            }
            None => {
                if let Some(other) = voters.iter().find(|v| v.address == listen) {
                    return Err(invalid(format!(
                        "--controller-listen {listen} is the address of voter {other}, but this node's id is {node_id}: use that voter's --node-id, or another address"
                    )));
                }
                if wildcard {
                    return Err(invalid(format!(
                        "node {node_id} is not a voter, so the voters connect to its --controller-listen: give an address they can reach, not {listen}"
                    )));
                }
            }
        }
        let positive = |value: Option<u64>, default: u64, flag: &str| match value {
            Some(0) => Err(invalid(format!("{flag} must be above 0"))),
            Some(v) => Ok(v),
            None => Ok(default),
        };
        let broker_session_timeout_ms = positive(
            self.broker_session_timeout_ms,
            BROKER_SESSION_TIMEOUT_MS_DEFAULT,
            "--broker-session-timeout-ms",
        )?;
        let broker_heartbeat_interval_ms = positive(
            self.broker_heartbeat_interval_ms,
            BROKER_HEARTBEAT_INTERVAL_MS_DEFAULT,
            "--broker-heartbeat-interval-ms",
        )?;
        if broker_heartbeat_interval_ms >= broker_session_timeout_ms {
            return Err(invalid(format!(
                "--broker-heartbeat-interval-ms ({broker_heartbeat_interval_ms}) must be below --broker-session-timeout-ms ({broker_session_timeout_ms})"
            )));
        }
        let election_timeout_ms = positive(
            self.controller_election_timeout_ms,
            CONTROLLER_ELECTION_TIMEOUT_MS_DEFAULT,
            "--controller-election-timeout-ms",
        )?;
        Ok(Some(QuorumSettings {
            listen,
            voters,
            broker_session_timeout_ms,
            broker_heartbeat_interval_ms,
            election_timeout_ms,
            tls: self.controller_tls()?,
        }))
    }

    /// Whether `--controller-listener-security-protocol` asks for mutual TLS.
    fn controller_tls(&self) -> Result<bool, ConfigError> {
        match self.controller_listener_security_protocol.as_deref() {
            None | Some("PLAINTEXT") => Ok(false),
            Some("SSL") => {
                if self.ssl_keystore_location.is_none() || self.ssl_truststore_location.is_none() {
                    return Err(invalid(
                        "--controller-listener-security-protocol SSL needs --ssl-keystore-location (this node's key and certificate) and --ssl-truststore-location (the CA the other nodes' certificates chain to)",
                    ));
                }
                Ok(true)
            }
            Some(other) => Err(invalid(format!(
                "--controller-listener-security-protocol is PLAINTEXT or SSL, not {other}"
            ))),
        }
    }

    /// The inter-broker SASL login, when the inter-broker listener is a SASL
    /// one (and then it must be complete).
    fn resolve_inter_broker_sasl(
        &self,
        listener: Option<&ListenerConfig>,
        sasl: &SaslConfig,
    ) -> Result<Option<InterBrokerSasl>, ConfigError> {
        let Some(listener) = listener.filter(|l| l.protocol.uses_sasl()) else {
            return Ok(None);
        };
        let name = self
            .inter_broker_sasl_mechanism
            .as_deref()
            .unwrap_or("SCRAM-SHA-512");
        let mechanism = Mechanism::from_name(name).ok_or_else(|| {
            invalid(format!(
                "--inter-broker-sasl-mechanism: '{name}' is not one of PLAIN, SCRAM-SHA-256, SCRAM-SHA-512"
            ))
        })?;
        if !sasl.settings.mechanisms.contains(&mechanism) {
            return Err(invalid(format!(
                "--inter-broker-sasl-mechanism {name} is not in --sasl-enabled-mechanisms"
            )));
        }
        match (&self.inter_broker_sasl_username, &self.inter_broker_sasl_password) {
            (Some(username), Some(password)) => Ok(Some(InterBrokerSasl {
                mechanism,
                username: username.clone(),
                password: password.clone(),
            })),
            _ => Err(invalid(format!(
                "the inter-broker listener {} is {}: give --inter-broker-sasl-username and --inter-broker-sasl-password (SLUICE_INTER_BROKER_SASL_PASSWORD), a user every node creates with --add-scram",
                listener.name,
                listener.protocol.name()
            ))),
        }
    }

    /// `--listen` (or the default listener) matched with `--advertise`, each
    /// with its security protocol.
    fn resolve_listeners(&self) -> Result<Vec<ListenerConfig>, ConfigError> {
        let default_listen = [DEFAULT_LISTEN.to_string()];
        let listen = self.listen.as_deref().unwrap_or(&default_listen);
        let mut listeners = parse_listeners(listen, self.advertise.as_deref().unwrap_or(&[]))?;
        for entry in self
            .listener_security_protocol_map
            .as_deref()
            .unwrap_or(&[])
        {
            let (name, protocol) = entry.split_once(':').ok_or_else(|| {
                invalid(format!(
                    "--listener-security-protocol-map entry '{entry}' is not NAME:PROTOCOL"
                ))
            })?;
            let protocol = SecurityProtocol::parse(protocol).ok_or_else(|| {
                invalid(format!(
                    "--listener-security-protocol-map: '{protocol}' is not PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL"
                ))
            })?;
            let listener = listeners
                .iter_mut()
                .find(|l| l.name.eq_ignore_ascii_case(name))
                .ok_or_else(|| {
                    invalid(format!(
                        "--listener-security-protocol-map names {name}, which is no listener of --listen"
                    ))
                })?;
            listener.protocol = protocol;
        }
        Ok(listeners)
    }

    /// The TLS settings, checked when a listener runs TLS; ignored otherwise.
    fn resolve_ssl(&self, listeners: &[ListenerConfig]) -> Result<Option<SslConfig>, ConfigError> {
        let needed_by = match listeners.iter().find(|l| l.protocol.uses_tls()) {
            Some(tls) => format!("listener {} is {}", tls.name, tls.protocol.name()),
            None if self.controller_listener_security_protocol.as_deref() == Some("SSL") => {
                "the controller listener is SSL".to_string()
            }
            None => return Ok(None),
        };
        let keystore = self.ssl_keystore_location.clone().ok_or_else(|| {
            invalid(format!(
                "{needed_by}: give --ssl-keystore-location, a PEM file with the broker's key and certificate chain"
            ))
        })?;
        let client_auth = self.ssl_client_auth.unwrap_or_default();
        if client_auth != SslClientAuth::None && self.ssl_truststore_location.is_none() {
            return Err(invalid(
                "--ssl-client-auth requested or required needs --ssl-truststore-location, the CA certificates client certificates chain to",
            ));
        }
        if let Some(rules) = &self.ssl_principal_mapping_rules {
            PrincipalMapper::parse(rules)
                .map_err(|e| invalid(format!("--ssl-principal-mapping-rules: {e}")))?;
        }
        Ok(Some(SslConfig {
            keystore,
            truststore: self.ssl_truststore_location.clone(),
            client_auth,
            principal_mapping_rules: self.ssl_principal_mapping_rules.clone(),
        }))
    }

    /// The SASL mechanisms, the session lifetime and the users to create.
    fn resolve_sasl(&self) -> Result<SaslConfig, ConfigError> {
        let mechanisms = match &self.sasl_enabled_mechanisms {
            None => Mechanism::ALL.to_vec(),
            Some(names) => {
                let mut mechanisms = Vec::new();
                for name in names.iter().map(|n| n.trim()).filter(|n| !n.is_empty()) {
                    let mechanism = Mechanism::from_name(name).ok_or_else(|| {
                        invalid(format!(
                            "--sasl-enabled-mechanisms: '{name}' is not one of PLAIN, SCRAM-SHA-256, SCRAM-SHA-512, OAUTHBEARER"
                        ))
                    })?;
                    if !mechanisms.contains(&mechanism) {
                        mechanisms.push(mechanism);
                    }
                }
                if mechanisms.is_empty() {
                    return Err(invalid("--sasl-enabled-mechanisms names no mechanism"));
                }
                mechanisms
            }
        };
        let (oauthbearer, jwks) = self.resolve_oauthbearer()?;
        let mut mechanisms = mechanisms;
        if oauthbearer.is_some()
            && self.sasl_enabled_mechanisms.is_none()
            && !mechanisms.contains(&Mechanism::OAuthBearer)
        {
            mechanisms.push(Mechanism::OAuthBearer);
        }
        if mechanisms.contains(&Mechanism::OAuthBearer) && oauthbearer.is_none() {
            return Err(invalid(
                "OAUTHBEARER needs --sasl-oauthbearer-jwks-endpoint-url (the keys tokens are signed with) or, for development, --sasl-oauthbearer-unsecured true",
            ));
        }
        let legacy_default = self.profile.unwrap_or_default() == Profile::Dev;
        let max_reauth = match self.connections_max_reauth_ms.unwrap_or(0) {
            0 => None,
            ms => Some(std::time::Duration::from_millis(ms)),
        };
        let add_scram = self
            .add_scram
            .iter()
            .flatten()
            .map(|entry| entry.trim())
            .filter(|entry| !entry.is_empty())
            .map(parse_scram_user)
            .collect::<Result<Vec<_>, _>>()?;
        Ok(SaslConfig {
            settings: Arc::new(SaslSettings {
                mechanisms,
                scram_legacy_nonce: self.sasl_scram_legacy_nonce.unwrap_or(legacy_default),
                max_reauth,
                oauthbearer,
            }),
            add_scram,
            jwks,
        })
    }

    /// OAUTHBEARER's settings and where its keys are read, when it is
    /// configured.
    fn resolve_oauthbearer(
        &self,
    ) -> Result<(Option<Arc<OAuthBearerSettings>>, Option<JwksSource>), ConfigError> {
        let unsecured = self.sasl_oauthbearer_unsecured.unwrap_or(false);
        let jwks = match self.sasl_oauthbearer_jwks_endpoint_url.as_deref() {
            None => None,
            Some(url) => {
                let location = if let Some(path) = url.strip_prefix("file://") {
                    JwksLocation::File(PathBuf::from(path))
                } else if url
                    .strip_prefix("https://")
                    .is_some_and(|rest| !rest.is_empty() && !rest.starts_with('/'))
                {
                    JwksLocation::Https {
                        url: url.to_string(),
                        truststore: self.ssl_truststore_location.clone(),
                    }
                } else {
                    return Err(invalid(format!(
                        "--sasl-oauthbearer-jwks-endpoint-url {url}: give a file:// or an https:// URL"
                    )));
                };
                let refresh_ms = match self.sasl_oauthbearer_jwks_endpoint_refresh_ms {
                    Some(0) => {
                        return Err(invalid(
                            "--sasl-oauthbearer-jwks-endpoint-refresh-ms must be above 0",
                        ))
                    }
                    Some(ms) => ms,
                    None => SASL_OAUTHBEARER_JWKS_REFRESH_MS_DEFAULT,
                };
                Some(JwksSource {
                    location,
                    refresh_ms,
                    cache: Arc::default(),
                })
            }
        };
        if unsecured && jwks.is_some() {
            return Err(invalid(
                "--sasl-oauthbearer-unsecured and --sasl-oauthbearer-jwks-endpoint-url exclude each other: tokens are either signed or not",
            ));
        }
        if !unsecured && jwks.is_none() {
            return Ok((None, None));
        }
        let settings = OAuthBearerSettings {
            unsecured,
            jwks: jwks
                .as_ref()
                .map_or_else(Arc::default, |source| Arc::clone(&source.cache)),
            expected_audience: self
                .sasl_oauthbearer_expected_audience
                .iter()
                .flatten()
                .map(|a| a.trim().to_string())
                .filter(|a| !a.is_empty())
                .collect(),
            expected_issuer: self.sasl_oauthbearer_expected_issuer.clone(),
            sub_claim: self
                .sasl_oauthbearer_sub_claim_name
                .clone()
                .unwrap_or_else(|| "sub".to_string()),
            clock_skew_seconds: self
                .sasl_oauthbearer_clock_skew_seconds
                .unwrap_or(SASL_OAUTHBEARER_CLOCK_SKEW_SECONDS_DEFAULT),
        };
        Ok((Some(Arc::new(settings)), jwks))
    }

    /// This broker's id. Kafka's `node.id` has no default; a lone broker is 1.
    fn resolve_node_id(&self) -> Result<i32, ConfigError> {
        let node_id = self.node_id.unwrap_or(NODE_ID_DEFAULT);
        if node_id < 0 {
            return Err(invalid("node id must be >= 0"));
        }
        Ok(node_id)
    }

    /// Partitions of an auto-created topic, within what a topic may have.
    fn resolve_num_partitions(&self) -> Result<i32, ConfigError> {
        let num_partitions = self.num_partitions.unwrap_or(NUM_PARTITIONS_DEFAULT);
        if !(1..=crate::limits::PARTITIONS_PER_TOPIC_MAX).contains(&num_partitions) {
            return Err(invalid("num partitions must be between 1 and 100000"));
        }
        Ok(num_partitions)
    }

    /// The `log.*` defaults topics inherit, within what the log can hold.
    fn resolve_log_defaults(&self) -> Result<LogDefaults, ConfigError> {
        let log_defaults = LogDefaults {
            segment_bytes: self.segment_bytes.unwrap_or(SEGMENT_BYTES_DEFAULT),
            segment_ms: self.segment_ms.unwrap_or(SEGMENT_MS_DEFAULT),
            retention_ms: self.retention_ms.unwrap_or(RETENTION_MS_DEFAULT),
            retention_bytes: self.retention_bytes.unwrap_or(RETENTION_BYTES_DEFAULT),
            max_message_bytes: self.max_message_bytes.unwrap_or(MESSAGE_BYTES_MAX_DEFAULT),
        };
        if log_defaults.segment_bytes < 14 || log_defaults.segment_bytes > i32::MAX as u64 {
            return Err(invalid("segment bytes must be between 14 and 2147483647"));
        }
        if log_defaults.segment_ms < 1 {
            return Err(invalid("segment ms must be >= 1"));
        }
        if log_defaults.retention_ms < -1 || log_defaults.retention_bytes < -1 {
            return Err(invalid("retention ms and bytes must be >= -1"));
        }
        Ok(log_defaults)
    }

    /// When partitions are forced to disk; unset counts and intervals never force.
    fn resolve_flush(&self) -> Result<FlushPolicy, ConfigError> {
        let flush = FlushPolicy {
            messages: self.flush_messages,
            interval_ms: self.flush_ms,
            before_ack: self.fsync_before_ack.unwrap_or(false),
        };
        if flush.messages.is_some_and(|m| m < 1) || flush.interval_ms.is_some_and(|m| m < 0) {
            return Err(invalid("flush messages must be >= 1 and flush ms >= 0"));
        }
        Ok(flush)
    }

    /// The largest frame and the budget of request bytes in flight, as
    /// `(request_max_bytes, queued_max_request_bytes)`.
    fn resolve_request_limits(&self) -> Result<(u32, u64), ConfigError> {
        let request_max_bytes = self.request_max_bytes.unwrap_or(REQUEST_SIZE_BYTES_DEFAULT);
        if !(1024..=REQUEST_SIZE_BYTES_MAX).contains(&request_max_bytes) {
            return Err(invalid(format!(
                "request max bytes must be between 1024 and {REQUEST_SIZE_BYTES_MAX}"
            )));
        }
        // A budget below the frame limit would leave the largest frames waiting
        // for ever (or, if clamped, exceed the budget it claims), so the two are
        // checked together and the user told which to change.
        let queued_max_request_bytes = self
            .queued_max_request_bytes
            .unwrap_or(QUEUED_REQUEST_BYTES_DEFAULT);
        if queued_max_request_bytes > QUEUED_REQUEST_BYTES_MAX {
            return Err(invalid(format!(
                "queued max request bytes must be at most {QUEUED_REQUEST_BYTES_MAX}"
            )));
        }
        if u64::from(request_max_bytes) > queued_max_request_bytes {
            return Err(invalid(format!(
                "request max bytes ({request_max_bytes}) is larger than queued max request \
                 bytes ({queued_max_request_bytes}), so a frame of the largest size could \
                 never be read: raise --queued-max-request-bytes to at least \
                 {request_max_bytes} or lower --request-max-bytes"
            )));
        }
        Ok((request_max_bytes, queued_max_request_bytes))
    }

    /// The metrics endpoint's bind address, if one is asked for.
    fn resolve_metrics_listen(&self) -> Result<Option<String>, ConfigError> {
        self.metrics_listen
            .as_deref()
            .map(parse_bind_address)
            .transpose()
    }

    /// The `group.*` and `offsets.*` settings, the rebalance delay by profile.
    fn resolve_groups(&self, profile: Profile) -> Result<GroupSettings, ConfigError> {
        let profile_delay_ms = match profile {
            Profile::Kafka => GROUP_INITIAL_REBALANCE_DELAY_MS_DEFAULT,
            Profile::Dev => GROUP_INITIAL_REBALANCE_DELAY_MS_DEV,
        };
        let groups = GroupSettings {
            initial_rebalance_delay_ms: self
                .group_initial_rebalance_delay_ms
                .unwrap_or(profile_delay_ms),
            min_session_timeout_ms: GROUP_MIN_SESSION_TIMEOUT_MS_DEFAULT,
            max_session_timeout_ms: GROUP_MAX_SESSION_TIMEOUT_MS_DEFAULT,
            offsets_retention_ms: self
                .offsets_retention_minutes
                .unwrap_or(OFFSETS_RETENTION_MINUTES_DEFAULT)
                .saturating_mul(MS_PER_MINUTE),
            offsets_retention_check_interval_ms: self
                .offsets_retention_check_interval_ms
                .unwrap_or(OFFSETS_RETENTION_CHECK_INTERVAL_MS_DEFAULT),
        };
        if groups.initial_rebalance_delay_ms < 0
            || groups.offsets_retention_ms < 1
            || groups.offsets_retention_check_interval_ms < 1
        {
            return Err(invalid(
                "group initial rebalance delay must be >= 0, offsets retention >= 1 minute \
                 and the offsets retention check interval >= 1 ms",
            ));
        }
        Ok(groups)
    }

    /// The `transaction.*` settings, the abort check interval by profile.
    fn resolve_transactions(&self, profile: Profile) -> Result<TxnSettings, ConfigError> {
        let profile_abort_check_interval_ms = match profile {
            Profile::Kafka => TRANSACTION_ABORT_CHECK_INTERVAL_MS_DEFAULT,
            Profile::Dev => TRANSACTION_ABORT_CHECK_INTERVAL_MS_DEV,
        };
        let transactions = TxnSettings {
            max_timeout_ms: self
                .transaction_max_timeout_ms
                .unwrap_or(TRANSACTION_MAX_TIMEOUT_MS_DEFAULT),
            abort_check_interval_ms: self
                .transaction_abort_check_interval_ms
                .unwrap_or(profile_abort_check_interval_ms),
            id_expiration_ms: self
                .transactional_id_expiration_ms
                .unwrap_or(TRANSACTIONAL_ID_EXPIRATION_MS_DEFAULT),
            producer_id_block_size: self
                .producer_id_block_size
                .unwrap_or(PRODUCER_ID_BLOCK_SIZE_DEFAULT),
        };
        if transactions.max_timeout_ms < 1
            || transactions.abort_check_interval_ms < 1
            || transactions.id_expiration_ms < 1
        {
            return Err(invalid(
                "transaction max timeout, abort check interval and id expiration must be >= 1",
            ));
        }
        if !(1..=PRODUCER_ID_BLOCK_COUNT_MAX).contains(&transactions.producer_id_block_size) {
            return Err(invalid(format!(
                "producer id block size must be between 1 and {PRODUCER_ID_BLOCK_COUNT_MAX}"
            )));
        }
        Ok(transactions)
    }
}

impl Config {
    /// A broker on an ephemeral loopback port with data in `data_dir`, with the
    /// dev profile (groups rebalance at once): what tests and embedded use start
    /// from.
    pub fn ephemeral(data_dir: &Path) -> Config {
        let args = ServeArgs {
            listen: Some(vec!["127.0.0.1:0".to_string()]),
            data_dir: Some(data_dir.to_path_buf()),
            profile: Some(Profile::Dev),
            ..ServeArgs::default()
        };
        match args.resolve() {
            Ok(config) => config,
            Err(error) => unreachable!("the ephemeral defaults are valid: {error}"),
        }
    }
}

/// Kafka's `--add-scram` entry: `MECHANISM=[name=N,password=P,iterations=I]`,
/// a value optionally in double quotes (a password with a comma).
fn parse_scram_user(entry: &str) -> Result<ScramUser, ConfigError> {
    let wrong = |why: &str| {
        invalid(format!(
            "--add-scram '{}': {why} (expected SCRAM-SHA-256=[name=alice,password=alice-secret])",
            entry.split("password").next().unwrap_or_default()
        ))
    };
    let (mechanism, body) = entry.split_once('=').ok_or_else(|| wrong("no '='"))?;
    let mechanism = ScramMechanism::from_name(mechanism.trim())
        .ok_or_else(|| wrong("the mechanism is not SCRAM-SHA-256 or SCRAM-SHA-512"))?;
    let body = body
        .trim()
        .strip_prefix('[')
        .and_then(|b| b.strip_suffix(']'))
        .ok_or_else(|| wrong("the fields are not in [...]"))?;
    let (mut name, mut password, mut iterations) = (None, None, None);
    let mut rest = body;
    while !rest.is_empty() {
        let (key, after) = rest
            .split_once('=')
            .ok_or_else(|| wrong("a field has no '='"))?;
        let (value, after) = match after.strip_prefix('"') {
            Some(quoted) => {
                let (value, after) = quoted
                    .split_once('"')
                    .ok_or_else(|| wrong("a quoted value has no closing quote"))?;
                (value, after.strip_prefix(',').unwrap_or(after))
            }
            None => after.split_once(',').unwrap_or((after, "")),
        };
        match key.trim() {
            "name" => name = Some(value.to_string()),
            "password" => password = Some(value.to_string()),
            "iterations" => {
                iterations = Some(
                    value
                        .trim()
                        .parse::<u32>()
                        .map_err(|_| wrong("iterations is not a number"))?,
                )
            }
            _ => return Err(wrong("an unknown field (name, password, iterations)")),
        }
        rest = after;
    }
    let iterations = iterations.unwrap_or(SCRAM_ITERATIONS_MIN);
    if !(SCRAM_ITERATIONS_MIN..=SCRAM_ITERATIONS_MAX).contains(&iterations) {
        return Err(wrong("iterations must be 4096 to 16384"));
    }
    let name = name
        .filter(|n| !n.is_empty())
        .ok_or_else(|| wrong("no name"))?;
    let password = password
        .filter(|p| !p.is_empty())
        .ok_or_else(|| wrong("no password"))?;
    Ok(ScramUser {
        mechanism,
        name,
        password,
        iterations,
    })
}

fn read_file(path: &Path) -> Result<ServeArgs, ConfigError> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| invalid(format!("cannot read config file {}: {e}", path.display())))?;
    toml::from_str(&text).map_err(|e| invalid(format!("config file {}: {e}", path.display())))
}

/// `[NAME://]HOST:PORT` into (name, host, port).
fn parse_endpoint(text: &str) -> Result<(Option<String>, String, u16), ConfigError> {
    let (name, address) = match text.split_once("://") {
        Some((name, address)) => (Some(name.trim().to_ascii_uppercase()), address),
        None => (None, text),
    };
    let (host, port) = address
        .trim()
        .rsplit_once(':')
        .ok_or_else(|| invalid(format!("'{text}' is not HOST:PORT")))?;
    let port = port
        .parse::<u16>()
        .map_err(|_| invalid(format!("'{text}' has no valid port")))?;
    let host = host
        .trim_start_matches('[')
        .trim_end_matches(']')
        .to_string();
    Ok((name, host, port))
}

/// `HOST:PORT` (as `parse_bind_address` writes it) into host and port.
fn split_host_port(address: &str) -> (&str, &str) {
    address.rsplit_once(':').unwrap_or((address, ""))
}

/// A plain `HOST:PORT` to bind (no listener name), in the form `bind` takes.
fn parse_bind_address(text: &str) -> Result<String, ConfigError> {
    match parse_endpoint(text)? {
        (Some(_), _, _) => Err(invalid(format!("'{text}' takes no listener name"))),
        (None, host, port) if host.contains(':') => Ok(format!("[{host}]:{port}")),
        (None, host, port) => Ok(format!("{host}:{port}")),
    }
}

/// Where a local client reaches the first of `listen`'s listeners: its address,
/// with a wildcard host (`0.0.0.0`, `::`) replaced by loopback. What
/// `sluice healthcheck` connects to when given no address.
pub fn local_address_of_first_listener(listen: &[String]) -> Result<String, ConfigError> {
    let first = listen
        .first()
        .ok_or_else(|| invalid("at least one listener is required"))?;
    let (_, host, port) = parse_endpoint(first)?;
    Ok(match host.as_str() {
        "" | "0.0.0.0" => format!("127.0.0.1:{port}"),
        "::" => format!("[::1]:{port}"),
        host if host.contains(':') => format!("[{host}]:{port}"),
        host => format!("{host}:{port}"),
    })
}

fn parse_listeners(
    listen: &[String],
    advertise: &[String],
) -> Result<Vec<ListenerConfig>, ConfigError> {
    if listen.is_empty() {
        return Err(invalid("at least one listener is required"));
    }
    let mut listeners = Vec::with_capacity(listen.len());
    for (position, entry) in listen.iter().enumerate() {
        let (name, host, port) = parse_endpoint(entry)?;
        // A listener is of the protocol it is named after; any other is
        // PLAINTEXT unless the protocol map says otherwise.
        let protocol = match &name {
            Some(name) => SecurityProtocol::parse(name),
            None => Some(SecurityProtocol::Plaintext),
        };
        let name = name.unwrap_or_else(|| {
            if position == 0 {
                DEFAULT_LISTENER_NAME.to_string()
            } else {
                format!("{DEFAULT_LISTENER_NAME}{position}")
            }
        });
        if listeners.iter().any(|l: &ListenerConfig| l.name == name) {
            return Err(invalid(format!("listener name {name} used twice")));
        }
        let bind = if host.contains(':') {
            format!("[{host}]:{port}")
        } else {
            format!("{host}:{port}")
        };
        listeners.push(ListenerConfig {
            name,
            bind,
            advertised: None,
            protocol: protocol.unwrap_or(SecurityProtocol::Plaintext),
        });
    }
    for (position, entry) in advertise.iter().enumerate() {
        let (name, host, port) = parse_endpoint(entry)?;
        let listener = match name {
            Some(name) => listeners.iter_mut().find(|l| l.name == name),
            None => listeners.get_mut(position),
        }
        .ok_or_else(|| invalid(format!("advertised address '{entry}' matches no listener")))?;
        listener.advertised = Some((host, port));
    }
    Ok(listeners)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_listen_on_loopback_9092() {
        let config = ServeArgs::default().resolve().expect("defaults are valid");
        assert_eq!(config.listeners.len(), 1);
        assert_eq!(config.listeners[0].bind, "127.0.0.1:9092");
        assert_eq!(config.listeners[0].name, "PLAINTEXT");
        assert_eq!(config.data_dir, PathBuf::from(DEFAULT_DATA_DIR));
        assert!(config.auto_create_topics);
    }

    #[test]
    fn sasl_settings_and_users_to_create_parse_as_kafkas() {
        let resolved = ServeArgs {
            listen: Some(vec!["SASL_PLAINTEXT://127.0.0.1:9092".to_string()]),
            sasl_enabled_mechanisms: Some(vec!["SCRAM-SHA-512".to_string(), "PLAIN".to_string()]),
            connections_max_reauth_ms: Some(60_000),
            add_scram: Some(vec![
                "SCRAM-SHA-256=[name=alice,password=alice-secret]".to_string(),
                "SCRAM-SHA-512=[name=bob,iterations=8192,password=\"a,b=c\"]".to_string(),
            ]),
            ..ServeArgs::default()
        }
        .resolve()
        .expect("valid");
        assert_eq!(
            resolved.listeners[0].protocol,
            SecurityProtocol::SaslPlaintext
        );
        let settings = &resolved.sasl.settings;
        assert_eq!(
            settings.mechanisms,
            vec![Mechanism::Scram(ScramMechanism::Sha512), Mechanism::Plain]
        );
        assert_eq!(
            settings.max_reauth,
            Some(std::time::Duration::from_secs(60))
        );
        assert!(!settings.scram_legacy_nonce, "off unless the dev profile");
        let users = &resolved.sasl.add_scram;
        assert_eq!(users.len(), 2);
        assert_eq!(
            (
                users[0].mechanism,
                users[0].name.as_str(),
                users[0].password.as_str(),
                users[0].iterations
            ),
            (ScramMechanism::Sha256, "alice", "alice-secret", 4096)
        );
        assert_eq!(
            (
                users[1].mechanism,
                users[1].name.as_str(),
                users[1].password.as_str(),
                users[1].iterations
            ),
            (ScramMechanism::Sha512, "bob", "a,b=c", 8192)
        );
        assert!(
            !format!("{users:?}").contains("secret"),
            "Debug never shows a password"
        );

        let dev = ServeArgs {
            profile: Some(Profile::Dev),
            ..ServeArgs::default()
        }
        .resolve()
        .expect("valid");
        assert!(
            dev.sasl.settings.scram_legacy_nonce,
            "on in the dev profile"
        );
        assert_eq!(dev.sasl.settings.mechanisms, Mechanism::ALL.to_vec());

        let refused = |args: ServeArgs| args.resolve().expect_err("refused").0;
        for (entry, why) in [
            ("SCRAM-SHA-1=[name=a,password=b]", "mechanism"),
            ("SCRAM-SHA-256=name=a,password=b", "[...]"),
            ("SCRAM-SHA-256=[name=a]", "no password"),
            ("SCRAM-SHA-256=[password=b]", "no name"),
            ("SCRAM-SHA-256=[name=a,password=b,iterations=100]", "4096"),
            ("SCRAM-SHA-256=[name=a,password=b,salt=c]", "unknown field"),
        ] {
            let error = refused(ServeArgs {
                add_scram: Some(vec![entry.to_string()]),
                ..ServeArgs::default()
            });
            assert!(error.contains(why), "{entry}: {error}");
            assert!(!error.contains("password=b"), "{error}");
        }
        let error = refused(ServeArgs {
            sasl_enabled_mechanisms: Some(vec!["GSSAPI".to_string()]),
            ..ServeArgs::default()
        });
        assert!(error.contains("GSSAPI"), "{error}");
        let error = refused(ServeArgs {
            listen: Some(vec!["SSL://127.0.0.1:9093".to_string()]),
            ssl_keystore_location: Some(PathBuf::from("k.pem")),
            ssl_principal_mapping_rules: Some("RULE:(/x/".to_string()),
            ..ServeArgs::default()
        });
        assert!(error.contains("--ssl-principal-mapping-rules"), "{error}");
    }

    #[test]
    fn each_listener_has_the_protocol_of_its_name_or_of_the_map() {
        let args = |listen: &[&str], map: Option<&[&str]>| ServeArgs {
            listen: Some(listen.iter().map(|l| l.to_string()).collect()),
            listener_security_protocol_map: map.map(|m| m.iter().map(|e| e.to_string()).collect()),
            ssl_keystore_location: Some(PathBuf::from("broker.pem")),
            ..ServeArgs::default()
        };
        let config = args(
            &[
                "127.0.0.1:9092",
                "SSL://0.0.0.0:9093",
                "APPS://0.0.0.0:9094",
            ],
            Some(&["apps:ssl"]),
        )
        .resolve()
        .expect("valid");
        let protocols: Vec<SecurityProtocol> =
            config.listeners.iter().map(|l| l.protocol).collect();
        assert_eq!(
            protocols,
            [
                SecurityProtocol::Plaintext,
                SecurityProtocol::Ssl,
                SecurityProtocol::Ssl
            ]
        );
        let ssl = config.ssl.expect("an SSL listener needs TLS settings");
        assert_eq!(ssl.client_auth, SslClientAuth::None);
        // A plaintext-only start needs no TLS settings and has none.
        assert!(ServeArgs::default()
            .resolve()
            .expect("defaults")
            .ssl
            .is_none());

        let refused = |args: ServeArgs| args.resolve().expect_err("refused").0;
        assert!(refused(args(&["127.0.0.1:9092"], Some(&["OTHER:SSL"]))).contains("no listener"));
        assert!(refused(args(&["A://127.0.0.1:9092"], Some(&["A:TLS"]))).contains("'TLS'"));
        assert!(refused(args(&["A://127.0.0.1:9092"], Some(&["A"]))).contains("NAME:PROTOCOL"));
        let sasl_ssl = ServeArgs {
            ssl_keystore_location: None,
            ..args(&["SASL_SSL://127.0.0.1:9092"], None)
        };
        assert!(refused(sasl_ssl).contains("--ssl-keystore-location"));
        let no_keystore = ServeArgs {
            ssl_keystore_location: None,
            ..args(&["SSL://127.0.0.1:9093"], None)
        };
        assert!(refused(no_keystore).contains("--ssl-keystore-location"));
        let no_truststore = ServeArgs {
            ssl_client_auth: Some(SslClientAuth::Required),
            ..args(&["SSL://127.0.0.1:9093"], None)
        };
        assert!(refused(no_truststore).contains("--ssl-truststore-location"));
    }

    fn quorum_args(node_id: i32, listen: &str, voters: &str) -> ServeArgs {
        ServeArgs {
            node_id: Some(node_id),
            controller_listen: Some(listen.to_string()),
            controller_voters: Some(voters.split(',').map(str::to_string).collect()),
            ..ServeArgs::default()
        }
    }

    #[test]
    fn oauthbearer_is_offered_once_its_tokens_can_be_checked() {
        let sasl = ServeArgs {
            listen: Some(vec!["SASL_PLAINTEXT://127.0.0.1:9092".to_string()]),
            ..ServeArgs::default()
        };
        let listed = ServeArgs {
            sasl_enabled_mechanisms: Some(vec!["OAUTHBEARER".to_string()]),
            ..sasl.clone()
        };
        assert!(listed
            .clone()
            .resolve()
            .expect_err("no keys")
            .0
            .contains("--sasl-oauthbearer"));
        let jwks = ServeArgs {
            sasl_oauthbearer_jwks_endpoint_url: Some("file:///etc/idp/jwks.json".to_string()),
            sasl_oauthbearer_expected_audience: Some(vec!["kafka".to_string()]),
            ..sasl.clone()
        };
        let config = jwks.clone().resolve().expect("valid");
        assert_eq!(
            config.sasl.settings.mechanisms.last(),
            Some(&Mechanism::OAuthBearer),
            "offered beside the default mechanisms"
        );
        let source = config.sasl.jwks.expect("a JWKS to read");
        assert_eq!(
            source.location,
            JwksLocation::File(PathBuf::from("/etc/idp/jwks.json"))
        );
        assert_eq!(source.refresh_ms, SASL_OAUTHBEARER_JWKS_REFRESH_MS_DEFAULT);
        let oauth = config.sasl.settings.oauthbearer.clone().expect("settings");
        assert!(Arc::ptr_eq(&oauth.jwks, &source.cache));
        assert_eq!(oauth.expected_audience, vec!["kafka".to_string()]);
        assert_eq!(oauth.sub_claim, "sub");
        let https = ServeArgs {
            sasl_oauthbearer_jwks_endpoint_url: Some("https://idp.test/jwks".to_string()),
            ssl_truststore_location: Some(PathBuf::from("/etc/ca.pem")),
            ..sasl.clone()
        };
        assert_eq!(
            https
                .resolve()
                .expect("valid")
                .sasl
                .jwks
                .expect("read")
                .location,
            JwksLocation::Https {
                url: "https://idp.test/jwks".to_string(),
                truststore: Some(PathBuf::from("/etc/ca.pem")),
            }
        );
        for url in ["http://idp.test/jwks", "https:///jwks", "/etc/jwks.json"] {
            let refused = ServeArgs {
                sasl_oauthbearer_jwks_endpoint_url: Some(url.to_string()),
                ..sasl.clone()
            };
            assert!(
                refused.resolve().expect_err(url).0.contains("https://"),
                "{url}"
            );
        }
        let both = ServeArgs {
            sasl_oauthbearer_unsecured: Some(true),
            ..jwks
        };
        assert!(both.resolve().expect_err("either").0.contains("exclude"));
        let unsecured = ServeArgs {
            sasl_oauthbearer_unsecured: Some(true),
            ..listed
        };
        let config = unsecured.resolve().expect("valid");
        assert_eq!(
            config.sasl.settings.mechanisms,
            vec![Mechanism::OAuthBearer]
        );
        assert!(
            config
                .sasl
                .settings
                .oauthbearer
                .as_ref()
                .expect("settings")
                .unsecured
        );
    }

    #[test]
    fn a_secured_inter_broker_listener_needs_the_brokers_login_and_truststore() {
        let base = quorum_args(1, "127.0.0.1:9093", "1@127.0.0.1:9093");
        let sasl_first = ServeArgs {
            listen: Some(vec![
                "SASL_PLAINTEXT://127.0.0.1:9092".to_string(),
                "INTERNAL://127.0.0.1:9094".to_string(),
            ]),
            ..base.clone()
        };
        assert!(quorum_error(sasl_first.clone()).contains("--inter-broker-sasl-username"));
        let internal = ServeArgs {
            inter_broker_listener: Some("INTERNAL".to_string()),
            ..sasl_first.clone()
        };
        assert!(internal.resolve().is_ok());
        let logged_in = ServeArgs {
            inter_broker_sasl_username: Some("broker".to_string()),
            inter_broker_sasl_password: Some("secret".to_string()),
            ..sasl_first.clone()
        };
        let sasl = logged_in
            .clone()
            .resolve()
            .expect("valid")
            .inter_broker_sasl;
        assert_eq!(
            format!("{:?}", sasl.expect("a login")),
            "SCRAM-SHA-512 as broker",
            "the password is never shown"
        );
        let unknown = ServeArgs {
            inter_broker_sasl_mechanism: Some("GSSAPI".to_string()),
            ..logged_in
        };
        assert!(quorum_error(unknown).contains("--inter-broker-sasl-mechanism"));
        let ssl_first = ServeArgs {
            listen: Some(vec!["SSL://127.0.0.1:9092".to_string()]),
            ssl_keystore_location: Some(PathBuf::from("broker.pem")),
            ..base.clone()
        };
        assert!(quorum_error(ssl_first).contains("--ssl-truststore-location"));
        let controller_ssl = ServeArgs {
            controller_listener_security_protocol: Some("SSL".to_string()),
            ..base.clone()
        };
        assert!(quorum_error(controller_ssl.clone()).contains("--ssl-keystore-location"));
        let controller_ssl = ServeArgs {
            ssl_keystore_location: Some(PathBuf::from("broker.pem")),
            ssl_truststore_location: Some(PathBuf::from("ca.pem")),
            ..controller_ssl
        };
        let config = controller_ssl.resolve().expect("valid");
        assert!(config.quorum.expect("a cluster").tls);
        assert!(config.ssl.is_some(), "the controller's TLS needs the files");
        let tls13 = ServeArgs {
            controller_listener_security_protocol: Some("TLS".to_string()),
            ..base
        };
        assert!(quorum_error(tls13).contains("PLAINTEXT or SSL"));
    }

    fn quorum_error(args: ServeArgs) -> String {
        args.resolve().expect_err("must be refused").0
    }

    #[test]
    fn controller_voters_and_listen_are_checked_against_each_other() {
        const VOTERS: &str = "1@127.0.0.1:9093,2@127.0.0.1:9193,3@127.0.0.1:9293";
        let config = quorum_args(2, "127.0.0.1:9193", VOTERS)
            .resolve()
            .expect("valid");
        let quorum = config.quorum.expect("a cluster node");
        assert_eq!(quorum.voters.len(), 3);
        assert!(quorum.is_voter(2));
        assert_eq!(quorum.broker_session_timeout_ms, 3_000);
        assert_eq!(quorum.election_timeout_ms, 300);
        // A wildcard host on the voter's port is the voter's listener.
        assert!(quorum_args(2, "0.0.0.0:9193", VOTERS).resolve().is_ok());
        // A non-voter with its own reachable address is a broker.
        let broker = quorum_args(4, "127.0.0.1:9393", VOTERS)
            .resolve()
            .expect("valid");
        assert!(!broker.quorum.expect("a cluster node").is_voter(4));

        for (args, says) in [
            (
                quorum_args(2, "127.0.0.1:9999", VOTERS),
                "is voter 2@127.0.0.1:9193",
            ),
            (
                quorum_args(4, "127.0.0.1:9193", VOTERS),
                "is the address of voter 2",
            ),
            (
                quorum_args(4, "0.0.0.0:9393", VOTERS),
                "give an address they can reach",
            ),
            (
                quorum_args(1, "127.0.0.1:9093", "1@127.0.0.1:9093,1@127.0.0.1:9193"),
                "name node 1 twice",
            ),
            (
                quorum_args(1, "127.0.0.1:9093", "1@127.0.0.1:9093,2@127.0.0.1:9093"),
                "share an address",
            ),
            (
                quorum_args(1, "127.0.0.1:9093", "one@127.0.0.1:9093"),
                "no valid node id",
            ),
            (
                quorum_args(1, "127.0.0.1:9093", "127.0.0.1:9093"),
                "is not ID@HOST:PORT",
            ),
        ] {
            let error = quorum_error(args);
            assert!(error.contains(says), "{error:?} should say {says:?}");
        }
        let listen_alone = ServeArgs {
            controller_listen: Some("127.0.0.1:9093".to_string()),
            ..ServeArgs::default()
        };
        assert!(quorum_error(listen_alone).contains("needs --controller-voters"));
        let voters_alone = ServeArgs {
            controller_voters: Some(vec!["1@127.0.0.1:9093".to_string()]),
            ..ServeArgs::default()
        };
        assert!(quorum_error(voters_alone).contains("needs --controller-listen"));
        // Without voters a node is today's single-node broker.
        assert_eq!(ServeArgs::default().resolve().expect("valid").quorum, None);
    }

    #[test]
    fn advertised_matches_by_name_and_position() {
        let listen = vec![
            "0.0.0.0:9092".to_string(),
            "INTERNAL://0.0.0.0:29092".to_string(),
        ];
        let advertise = vec!["INTERNAL://sluice:29092".to_string()];
        let listeners = parse_listeners(&listen, &advertise).expect("valid");
        assert_eq!(listeners[0].advertised, None);
        assert_eq!(listeners[1].advertised, Some(("sluice".to_string(), 29092)));
        let by_position = parse_listeners(&listen, &["localhost:9092".to_string()]).expect("valid");
        assert_eq!(
            by_position[0].advertised,
            Some(("localhost".to_string(), 9092))
        );
    }

    #[test]
    fn a_local_client_reaches_the_first_listener_through_loopback() {
        let listen =
            |entries: &[&str]| -> Vec<String> { entries.iter().map(|e| e.to_string()).collect() };
        let address = |entries: &[&str]| local_address_of_first_listener(&listen(entries));
        assert_eq!(
            address(&["INTERNAL://0.0.0.0:9092", "EXTERNAL://0.0.0.0:19092"]).expect("valid"),
            "127.0.0.1:9092"
        );
        assert_eq!(address(&["[::]:9093"]).expect("valid"), "[::1]:9093");
        assert_eq!(address(&["10.1.2.3:9094"]).expect("valid"), "10.1.2.3:9094");
        assert!(address(&[]).is_err());
        assert!(address(&["no-port"]).is_err());
    }

    #[test]
    fn flags_win_over_the_file() {
        let file: ServeArgs = toml::from_str("node-id = 7\ndata-dir = \"/a\"").expect("toml");
        let cli = ServeArgs {
            node_id: Some(3),
            ..ServeArgs::default()
        };
        let config = cli.over(file).resolve().expect("valid");
        assert_eq!(config.node_id, 3);
        assert_eq!(config.data_dir, PathBuf::from("/a"));
    }

    #[test]
    fn dev_profile_removes_the_initial_rebalance_delay_unless_set() {
        let kafka = ServeArgs::default().resolve().expect("valid");
        assert_eq!(kafka.groups.initial_rebalance_delay_ms, 3_000);
        let dev = ServeArgs {
            profile: Some(Profile::Dev),
            ..ServeArgs::default()
        };
        assert_eq!(
            dev.resolve()
                .expect("valid")
                .groups
                .initial_rebalance_delay_ms,
            0
        );
        let explicit = ServeArgs {
            profile: Some(Profile::Dev),
            group_initial_rebalance_delay_ms: Some(500),
            ..ServeArgs::default()
        };
        assert_eq!(
            explicit
                .resolve()
                .expect("valid")
                .groups
                .initial_rebalance_delay_ms,
            500
        );
    }

    #[test]
    fn transaction_settings_default_to_kafka_and_are_checked() {
        let kafka = ServeArgs::default().resolve().expect("valid");
        assert_eq!(
            kafka.transactions,
            TxnSettings {
                max_timeout_ms: 900_000,
                abort_check_interval_ms: 10_000,
                id_expiration_ms: 604_800_000,
                producer_id_block_size: 1_000,
            }
        );
        let dev = ServeArgs {
            profile: Some(Profile::Dev),
            ..ServeArgs::default()
        };
        assert_eq!(
            dev.resolve()
                .expect("valid")
                .transactions
                .abort_check_interval_ms,
            1_000
        );
        let file: ServeArgs = toml::from_str("transaction-max-timeout-ms = 60000").expect("toml");
        assert_eq!(
            file.resolve().expect("valid").transactions.max_timeout_ms,
            60_000
        );
        for bad in [
            ServeArgs {
                producer_id_block_size: Some(0),
                ..ServeArgs::default()
            },
            ServeArgs {
                transaction_max_timeout_ms: Some(0),
                ..ServeArgs::default()
            },
        ] {
            assert!(bad.resolve().is_err());
        }
    }

    #[test]
    fn metrics_are_off_unless_given_an_address() {
        let config = ServeArgs::default().resolve().expect("valid");
        assert_eq!(config.metrics_listen, None);
        let args = ServeArgs {
            metrics_listen: Some("0.0.0.0:9644".to_string()),
            ..ServeArgs::default()
        };
        assert_eq!(
            args.resolve().expect("valid").metrics_listen.as_deref(),
            Some("0.0.0.0:9644")
        );
        let args = ServeArgs {
            metrics_listen: Some("METRICS://0.0.0.0:9644".to_string()),
            ..ServeArgs::default()
        };
        assert!(args.resolve().is_err());
    }

    #[test]
    fn the_request_budget_is_layered_and_must_admit_the_largest_frame() {
        let config = ServeArgs::default().resolve().expect("defaults are valid");
        assert_eq!(
            config.queued_max_request_bytes,
            QUEUED_REQUEST_BYTES_DEFAULT
        );
        let file: ServeArgs =
            toml::from_str("queued-max-request-bytes = 67108864\nrequest-max-bytes = 8388608")
                .expect("toml");
        let from_file = file.clone().resolve().expect("valid");
        assert_eq!(from_file.queued_max_request_bytes, 64 << 20);
        assert_eq!(from_file.request_max_bytes, 8 << 20);
        let cli = ServeArgs {
            queued_max_request_bytes: Some(32 << 20),
            ..ServeArgs::default()
        };
        assert_eq!(
            cli.over(file)
                .resolve()
                .expect("valid")
                .queued_max_request_bytes,
            32 << 20
        );
        let equal = ServeArgs {
            request_max_bytes: Some(8 << 20),
            queued_max_request_bytes: Some(8 << 20),
            ..ServeArgs::default()
        };
        assert!(equal.resolve().is_ok());
        let too_small = ServeArgs {
            request_max_bytes: Some(8 << 20),
            queued_max_request_bytes: Some(4 << 20),
            ..ServeArgs::default()
        };
        let error = too_small
            .resolve()
            .expect_err("budget below the frame limit");
        assert!(
            error.0.contains("--queued-max-request-bytes"),
            "the error says what to change: {error}"
        );
        let too_large = ServeArgs {
            queued_max_request_bytes: Some(QUEUED_REQUEST_BYTES_MAX + 1),
            ..ServeArgs::default()
        };
        assert!(too_large.resolve().is_err());
    }

    #[test]
    fn bad_values_are_refused() {
        let args = ServeArgs {
            listen: Some(vec!["nohostport".to_string()]),
            ..ServeArgs::default()
        };
        assert!(args.resolve().is_err());
        let args = ServeArgs {
            request_max_bytes: Some(10),
            ..ServeArgs::default()
        };
        assert!(args.resolve().is_err());
    }
}
