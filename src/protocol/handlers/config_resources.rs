//! What DescribeConfigs, AlterConfigs and IncrementalAlterConfigs share: the
//! resource kinds and their authorization, the list of broker configs,
//! validation of a change and its proposal to the controller, and the answer
//! for one altered resource. Topic keys and their resolution live in
//! `topic_config`.

use std::collections::BTreeMap;

use super::common::{propose, Rejection};
use crate::config::Config;
use crate::controller::{ConfigOp, MetadataCommand, MetadataImage};
use crate::error_code;
use crate::protocol::context::Cluster;
use crate::protocol::RequestContext;
use crate::security::acl::{Operation, ResourceType};
use crate::topic_config::{self, source, ConfigType};

/// Kafka's ConfigResource.Type codes.
pub const RESOURCE_TOPIC: i8 = 2;
pub const RESOURCE_BROKER: i8 = 4;

/// A config resource this broker can describe or alter.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Resource {
    Topic(String),
    /// This broker, or the cluster-wide default (empty name). Sluice keeps one
    /// set of dynamic broker configs, applied cluster-wide.
    Broker,
}

/// Resolves a (type, name) pair as Kafka does, with Kafka's errors.
pub fn resource(
    config: &Config,
    image: &MetadataImage,
    resource_type: i8,
    name: &str,
) -> Result<Resource, Rejection> {
    match resource_type {
        RESOURCE_TOPIC => {
            if image.topics.contains_key(name) {
                Ok(Resource::Topic(name.to_string()))
            } else {
                Err((
                    error_code::UNKNOWN_TOPIC_OR_PARTITION,
                    format!("The topic '{name}' does not exist."),
                ))
            }
        }
        RESOURCE_BROKER => {
            if name.is_empty() || name == config.node_id.to_string() {
                Ok(Resource::Broker)
            } else {
                Err((
                    error_code::INVALID_REQUEST,
                    format!(
                        "Unexpected broker id, expected {} or empty string, but received {name}",
                        config.node_id
                    ),
                ))
            }
        }
        other => Err((
            error_code::INVALID_REQUEST,
            format!("Unsupported resource type {other}"),
        )),
    }
}

/// Kafka's refusal of `operation` (DescribeConfigs or AlterConfigs) on a
/// config resource, checked before the resource is looked up: the broker's
/// configs need it on the cluster (else CLUSTER_AUTHORIZATION_FAILED), a
/// topic's on the topic (else TOPIC_AUTHORIZATION_FAILED, whether or not it
/// exists). A type not served needs none: it is refused as unsupported.
pub fn refusal(
    ctx: &RequestContext,
    operation: Operation,
    resource_type: i8,
    name: &str,
) -> Option<Rejection> {
    match resource_type {
        RESOURCE_BROKER if !ctx.authorize_cluster(operation) => Some((
            error_code::CLUSTER_AUTHORIZATION_FAILED,
            super::common::authorization_failed(error_code::CLUSTER_AUTHORIZATION_FAILED)
                .to_string(),
        )),
        RESOURCE_TOPIC if !ctx.authorize(operation, ResourceType::Topic, name) => Some((
            error_code::TOPIC_AUTHORIZATION_FAILED,
            super::common::authorization_failed(error_code::TOPIC_AUTHORIZATION_FAILED).to_string(),
        )),
        _ => None,
    }
}

/// One described config entry.
#[derive(Debug, Clone)]
pub struct Entry {
    pub name: String,
    pub value: Option<String>,
    pub read_only: bool,
    pub source: i8,
    pub kind: ConfigType,
    pub synonyms: Vec<(String, String, i8)>,
    pub documentation: String,
}

/// Every config of a topic.
pub fn describe_topic(config: &Config, image: &MetadataImage, topic: &str) -> Vec<Entry> {
    let empty = BTreeMap::new();
    let overrides = image.topics.get(topic).map_or(&empty, |t| &t.configs);
    resolved_entries(config, image, overrides, |def| def.name)
}

/// Every topic config resolved over `overrides` (alterable), each named by
/// `name`: the topic key, or for the broker its synonym.
fn resolved_entries(
    config: &Config,
    image: &MetadataImage,
    overrides: &BTreeMap<String, String>,
    name: fn(&topic_config::TopicConfigDef) -> &'static str,
) -> Vec<Entry> {
    topic_config::resolve_all(overrides, &image.broker_configs, config)
        .into_iter()
        .map(|(def, resolved)| Entry {
            name: name(def).to_string(),
            value: Some(resolved.value),
            read_only: false,
            source: resolved.source,
            kind: def.kind,
            synonyms: resolved.synonyms,
            documentation: def.doc.to_string(),
        })
        .collect()
}

/// How a static setting's value is read from the broker's config.
type ValueOf = fn(&Config) -> String;

/// The broker's static settings, read-only, under Kafka's names: (name,
/// value, type). Every setting Sluice has that Kafka names is here, since tools
/// read them (librdkafka's fetch-from-follower test reads each broker's
/// `broker.rack`); the topic-config defaults (`log.*`) are described beside
/// them, dynamically alterable.
const BROKER_STATICS: &[(&str, ValueOf, ConfigType)] = &[
    ("node.id", |c| c.node_id.to_string(), ConfigType::Int),
    ("broker.id", |c| c.node_id.to_string(), ConfigType::Int),
    (
        "broker.rack",
        |c| c.rack.clone().unwrap_or_default(),
        ConfigType::String,
    ),
    ("process.roles", process_roles, ConfigType::List),
    ("listeners", listeners, ConfigType::String),
    (
        "advertised.listeners",
        advertised_listeners,
        ConfigType::String,
    ),
    (
        "listener.security.protocol.map",
        security_protocol_map,
        ConfigType::String,
    ),
    (
        "inter.broker.listener.name",
        |c| c.inter_broker_listener.clone(),
        ConfigType::String,
    ),
    (
        "security.inter.broker.protocol",
        |_| "PLAINTEXT".to_string(),
        ConfigType::String,
    ),
    (
        "controller.listener.names",
        |c| {
            c.quorum
                .as_ref()
                .map_or_else(String::new, |_| "CONTROLLER".to_string())
        },
        ConfigType::String,
    ),
    ("controller.quorum.voters", quorum_voters, ConfigType::List),
    (
        "controller.quorum.election.timeout.ms",
        |c| {
            c.quorum
                .as_ref()
                .map_or_else(String::new, |q| q.election_timeout_ms.to_string())
        },
        ConfigType::Int,
    ),
    (
        "broker.session.timeout.ms",
        |c| {
            c.quorum
                .as_ref()
                .map_or_else(String::new, |q| q.broker_session_timeout_ms.to_string())
        },
        ConfigType::Int,
    ),
    (
        "broker.heartbeat.interval.ms",
        |c| {
            c.quorum
                .as_ref()
                .map_or_else(String::new, |q| q.broker_heartbeat_interval_ms.to_string())
        },
        ConfigType::Int,
    ),
    (
        "log.dirs",
        |c| c.data_dir.join("logs").display().to_string(),
        ConfigType::String,
    ),
    (
        "num.partitions",
        |c| c.num_partitions.to_string(),
        ConfigType::Int,
    ),
    (
        "default.replication.factor",
        |c| c.default_replication_factor.to_string(),
        ConfigType::Int,
    ),
    (
        "auto.create.topics.enable",
        |c| c.auto_create_topics.to_string(),
        ConfigType::Boolean,
    ),
    (
        "socket.request.max.bytes",
        |c| c.request_max_bytes.to_string(),
        ConfigType::Int,
    ),
    (
        "queued.max.request.bytes",
        |c| c.queued_max_request_bytes.to_string(),
        ConfigType::Long,
    ),
    (
        "log.retention.check.interval.ms",
        |c| c.retention_check_interval_ms.to_string(),
        ConfigType::Long,
    ),
    (
        "replica.lag.time.max.ms",
        |c| c.replica_lag_time_max_ms.to_string(),
        ConfigType::Long,
    ),
    (
        "replica.selector.class",
        replica_selector,
        ConfigType::Class,
    ),
    (
        "auto.leader.rebalance.enable",
        |c| c.auto_leader_rebalance_enable.to_string(),
        ConfigType::Boolean,
    ),
    (
        "leader.imbalance.check.interval.seconds",
        |c| c.leader_imbalance_check_interval_seconds.to_string(),
        ConfigType::Long,
    ),
    (
        "leader.imbalance.per.broker.percentage",
        |_| crate::limits::LEADER_IMBALANCE_PER_BROKER_PERCENTAGE.to_string(),
        ConfigType::Int,
    ),
    (
        "offsets.topic.replication.factor",
        |c| c.internal_topics.offsets_replication_factor.to_string(),
        ConfigType::Short,
    ),
    (
        "offsets.topic.num.partitions",
        |_| crate::internal_topics::OFFSETS_TOPIC_PARTITIONS.to_string(),
        ConfigType::Int,
    ),
    (
        "offsets.retention.minutes",
        |c| (c.groups.offsets_retention_ms / 60_000).to_string(),
        ConfigType::Int,
    ),
    (
        "offsets.retention.check.interval.ms",
        |c| c.groups.offsets_retention_check_interval_ms.to_string(),
        ConfigType::Long,
    ),
    (
        "transaction.state.log.replication.factor",
        |c| c.internal_topics.txn_replication_factor.to_string(),
        ConfigType::Short,
    ),
    (
        "transaction.state.log.min.isr",
        |c| c.internal_topics.txn_min_isr.to_string(),
        ConfigType::Int,
    ),
    (
        "transaction.state.log.num.partitions",
        |_| crate::internal_topics::TRANSACTION_STATE_TOPIC_PARTITIONS.to_string(),
        ConfigType::Int,
    ),
    (
        "transaction.max.timeout.ms",
        |c| c.transactions.max_timeout_ms.to_string(),
        ConfigType::Int,
    ),
    (
        "transaction.abort.timed.out.transaction.cleanup.interval.ms",
        |c| c.transactions.abort_check_interval_ms.to_string(),
        ConfigType::Int,
    ),
    (
        "transactional.id.expiration.ms",
        |c| c.transactions.id_expiration_ms.to_string(),
        ConfigType::Int,
    ),
    (
        "group.initial.rebalance.delay.ms",
        |c| c.groups.initial_rebalance_delay_ms.to_string(),
        ConfigType::Int,
    ),
    (
        "group.min.session.timeout.ms",
        |c| c.groups.min_session_timeout_ms.to_string(),
        ConfigType::Int,
    ),
    (
        "group.max.session.timeout.ms",
        |c| c.groups.max_session_timeout_ms.to_string(),
        ConfigType::Int,
    ),
    (
        "log.cleaner.enable",
        |c| c.cleaner.enable.to_string(),
        ConfigType::Boolean,
    ),
    (
        "log.cleaner.threads",
        |c| c.cleaner.threads.to_string(),
        ConfigType::Int,
    ),
    (
        "log.cleaner.dedupe.buffer.size",
        |c| c.cleaner.dedupe_buffer_bytes.to_string(),
        ConfigType::Long,
    ),
    (
        "log.cleaner.io.max.bytes.per.second",
        |c| {
            c.cleaner
                .io_max_bytes_per_second
                .unwrap_or(f64::MAX)
                .to_string()
        },
        ConfigType::Double,
    ),
    (
        "log.cleaner.backoff.ms",
        |c| c.cleaner.backoff_ms.to_string(),
        ConfigType::Long,
    ),
];

fn process_roles(config: &Config) -> String {
    match &config.quorum {
        Some(quorum) if quorum.is_voter(config.node_id) => "broker,controller".to_string(),
        Some(_) => "broker".to_string(),
        None => "broker,controller".to_string(),
    }
}

/// Every listener is PLAINTEXT today.
fn security_protocol_map(config: &Config) -> String {
    config
        .listeners
        .iter()
        .map(|l| format!("{}:PLAINTEXT", l.name))
        .collect::<Vec<_>>()
        .join(",")
}

/// Kafka's `id@host:port` list.
fn quorum_voters(config: &Config) -> String {
    config.quorum.as_ref().map_or_else(String::new, |quorum| {
        quorum
            .voters
            .iter()
            .map(|voter| format!("{}@{}", voter.id, voter.address))
            .collect::<Vec<_>>()
            .join(",")
    })
}

/// The class Kafka names for the selector.
fn replica_selector(config: &Config) -> String {
    match config.replica_selector {
        crate::config::ReplicaSelector::Leader => String::new(),
        crate::config::ReplicaSelector::RackAware => {
            "org.apache.kafka.common.replica.RackAwareReplicaSelector".to_string()
        }
    }
}

fn listeners(config: &Config) -> String {
    config
        .listeners
        .iter()
        .map(|l| format!("{}://{}", l.name, l.bind))
        .collect::<Vec<_>>()
        .join(",")
}

fn advertised_listeners(config: &Config) -> String {
    config
        .listeners
        .iter()
        .filter_map(|l| {
            l.advertised
                .as_ref()
                .map(|(h, p)| format!("{}://{h}:{p}", l.name))
        })
        .collect::<Vec<_>>()
        .join(",")
}

/// Every config of the broker: the topic defaults (dynamically alterable) and the
/// static settings (read-only).
pub fn describe_broker(config: &Config, image: &MetadataImage) -> Vec<Entry> {
    let mut entries = resolved_entries(config, image, &BTreeMap::new(), |def| def.broker_synonym);
    for (name, value_of, kind) in BROKER_STATICS {
        // An unset setting (no rack, no quorum) is null, as Kafka describes it.
        let value = Some(value_of(config)).filter(|value| !value.is_empty());
        entries.push(Entry {
            name: name.to_string(),
            synonyms: value
                .iter()
                .map(|value| {
                    (
                        name.to_string(),
                        value.clone(),
                        source::STATIC_BROKER_CONFIG,
                    )
                })
                .collect(),
            value,
            read_only: true,
            source: source::STATIC_BROKER_CONFIG,
            kind: *kind,
            documentation: String::new(),
        });
    }
    entries
}

/// The key as the topic-config table knows it, for validation.
fn definition(
    resource: &Resource,
    key: &str,
) -> Result<&'static topic_config::TopicConfigDef, Rejection> {
    match resource {
        Resource::Topic(_) => topic_config::find(key).ok_or_else(|| {
            (
                error_code::INVALID_CONFIG,
                format!("Unknown topic config name: {key}"),
            )
        }),
        Resource::Broker => topic_config::find_by_synonym(key).ok_or_else(|| {
            let known_static = BROKER_STATICS.iter().any(|(name, _, _)| *name == key);
            if known_static {
                (
                    error_code::INVALID_REQUEST,
                    format!("Cannot update these configs dynamically: Set({key})"),
                )
            } else {
                (
                    error_code::INVALID_CONFIG,
                    format!("Unknown broker config name: {key}"),
                )
            }
        }),
    }
}

/// Checks each operation against the key's type and the value it would leave.
pub fn validate_ops(
    resource: &Resource,
    current: &BTreeMap<String, String>,
    ops: &[ConfigOp],
) -> Result<(), Rejection> {
    for op in ops {
        let (key, value) = match op {
            ConfigOp::Set { key, value } => (key, Some(value.clone())),
            ConfigOp::Delete { key } => (key, None),
            ConfigOp::Append { key, value } | ConfigOp::Subtract { key, value } => {
                let def = definition(resource, key)?;
                if def.kind != ConfigType::List {
                    return Err((
                        error_code::INVALID_CONFIG,
                        format!("Config value append is not allowed for config key: {key}"),
                    ));
                }
                let mut items: Vec<String> = current
                    .get(key)
                    .map(|v| {
                        v.split(',')
                            .map(|s| s.trim().to_string())
                            .filter(|s| !s.is_empty())
                            .collect()
                    })
                    .unwrap_or_default();
                if matches!(op, ConfigOp::Append { .. }) {
                    for item in value.split(',').map(str::trim).filter(|s| !s.is_empty()) {
                        if !items.iter().any(|existing| existing == item) {
                            items.push(item.to_string());
                        }
                    }
                } else {
                    items.retain(|item| !value.split(',').any(|s| s.trim() == item));
                }
                (key, Some(items.join(",")))
            }
        };
        let def = definition(resource, key)?;
        if let Some(value) = value {
            if !value.is_empty() || def.kind != ConfigType::List {
                topic_config::validate_value(def, &value)
                    .map_err(|m| (error_code::INVALID_CONFIG, m))?;
            }
        }
    }
    Ok(())
}

/// Validates `ops` on a resource and, unless `validate_only`, commits them:
/// AlterConfigs and IncrementalAlterConfigs alike. The principal's
/// AlterConfigs on the resource is checked first (`refusal`), then the ops
/// as the request gave them (a rejection of them is the answer). `replace`
/// (AlterConfigs) makes the set of Sets the resource's whole set of
/// overrides.
pub async fn alter(
    cluster: &Cluster,
    ctx: &RequestContext,
    (resource_type, resource_name): (i8, &str),
    ops: Result<Vec<ConfigOp>, Rejection>,
    replace: bool,
    validate_only: bool,
) -> Result<(), Rejection> {
    if let Some(refused) = refusal(ctx, Operation::AlterConfigs, resource_type, resource_name) {
        return Err(refused);
    }
    let ops = ops?;
    let image = cluster.image();
    let resource = resource(
        cluster.broker_config(),
        &image,
        resource_type,
        resource_name,
    )?;
    let empty = BTreeMap::new();
    let current = match &resource {
        Resource::Topic(name) => image.topics.get(name).map_or(&empty, |t| &t.configs),
        Resource::Broker => &image.broker_configs,
    };
    let base = if replace { &empty } else { current };
    validate_ops(&resource, base, &ops)?;
    if validate_only {
        return Ok(());
    }
    let command = match resource {
        Resource::Topic(name) => MetadataCommand::AlterTopicConfigs { name, ops, replace },
        Resource::Broker => MetadataCommand::AlterBrokerConfigs { ops, replace },
    };
    propose(cluster, command).await.map(|_| ())
}

/// The answer for one resource of AlterConfigs or IncrementalAlterConfigs (the
/// same fields in two types): its type and name, and the error if it failed.
macro_rules! altered {
    ($response:ident, $resource:expr, $outcome:expr) => {{
        let response = $response::default()
            .with_resource_type($resource.resource_type)
            .with_resource_name($resource.resource_name.clone());
        match $outcome {
            Ok(()) => response,
            Err((code, text)) => response
                .with_error_code(code)
                .with_error_message($crate::protocol::handlers::common::message(text)),
        }
    }};
}
pub(super) use altered;
