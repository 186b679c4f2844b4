//! What DescribeConfigs, AlterConfigs and IncrementalAlterConfigs share: the
//! resource kinds, the list of broker configs, and validation of a change before
//! it is proposed to the controller. Topic keys and their resolution live in
//! `topic_config`.

use std::collections::BTreeMap;

use crate::config::Config;
use crate::controller::{ConfigOp, MetadataImage};
use crate::error_code;
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

pub type Rejection = (i16, String);

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
    topic_config::resolve_all(overrides, &image.broker_configs, config)
        .into_iter()
        .map(|(def, resolved)| Entry {
            name: def.name.to_string(),
            value: Some(resolved.value),
            read_only: false,
            source: resolved.source,
            kind: def.kind,
            synonyms: resolved.synonyms,
            documentation: def.doc.to_string(),
        })
        .collect()
}

/// Every config of the broker: the topic defaults (dynamically alterable) and the
/// static settings (read-only).
pub fn describe_broker(config: &Config, image: &MetadataImage) -> Vec<Entry> {
    let empty = BTreeMap::new();
    let mut entries: Vec<Entry> = topic_config::resolve_all(&empty, &image.broker_configs, config)
        .into_iter()
        .map(|(def, resolved)| Entry {
            name: def.broker_synonym.to_string(),
            value: Some(resolved.value),
            read_only: false,
            source: resolved.source,
            kind: def.kind,
            synonyms: resolved.synonyms,
            documentation: def.doc.to_string(),
        })
        .collect();
    let listeners = config
        .listeners
        .iter()
        .map(|l| format!("{}://{}", l.name, l.bind))
        .collect::<Vec<_>>()
        .join(",");
    let advertised = config
        .listeners
        .iter()
        .filter_map(|l| {
            l.advertised
                .as_ref()
                .map(|(h, p)| format!("{}://{h}:{p}", l.name))
        })
        .collect::<Vec<_>>()
        .join(",");
    let statics = [
        ("node.id", config.node_id.to_string(), ConfigType::Int),
        ("broker.id", config.node_id.to_string(), ConfigType::Int),
        ("listeners", listeners, ConfigType::String),
        ("advertised.listeners", advertised, ConfigType::String),
        (
            "log.dirs",
            config.data_dir.join("logs").display().to_string(),
            ConfigType::String,
        ),
        (
            "num.partitions",
            config.num_partitions.to_string(),
            ConfigType::Int,
        ),
        (
            "default.replication.factor",
            "1".to_string(),
            ConfigType::Int,
        ),
        (
            "auto.create.topics.enable",
            config.auto_create_topics.to_string(),
            ConfigType::Boolean,
        ),
        (
            "socket.request.max.bytes",
            config.request_max_bytes.to_string(),
            ConfigType::Int,
        ),
        (
            "queued.max.request.bytes",
            config.queued_max_request_bytes.to_string(),
            ConfigType::Long,
        ),
        (
            "log.retention.check.interval.ms",
            config.retention_check_interval_ms.to_string(),
            ConfigType::Long,
        ),
    ];
    for (name, value, kind) in statics {
        entries.push(Entry {
            name: name.to_string(),
            synonyms: vec![(
                name.to_string(),
                value.clone(),
                source::STATIC_BROKER_CONFIG,
            )],
            value: Some(value),
            read_only: true,
            source: source::STATIC_BROKER_CONFIG,
            kind,
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
            let known_static = describe_broker_static_names().contains(&key);
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

fn describe_broker_static_names() -> [&'static str; 11] {
    [
        "node.id",
        "broker.id",
        "listeners",
        "advertised.listeners",
        "log.dirs",
        "num.partitions",
        "default.replication.factor",
        "auto.create.topics.enable",
        "socket.request.max.bytes",
        "queued.max.request.bytes",
        "log.retention.check.interval.ms",
    ]
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
