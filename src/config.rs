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
mod args;
mod resolve;

pub use args::ServeArgs;
pub use resolve::local_address_of_first_listener;
use resolve::parse_bind_address;

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

#[cfg(test)]
mod tests {
    use super::resolve::*;
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
        let given: Vec<_> = users
            .iter()
            .map(|u| {
                (
                    u.mechanism,
                    u.name.as_str(),
                    u.password.as_str(),
                    u.iterations,
                )
            })
            .collect();
        assert_eq!(
            given,
            vec![
                (ScramMechanism::Sha256, "alice", "alice-secret", 4096),
                (ScramMechanism::Sha512, "bob", "a,b=c", 8192),
            ]
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
