//! Topic configs as Kafka defines them: the known keys, their types, defaults and
//! broker-level synonyms, and how a topic's effective value is resolved:
//! topic override, else dynamic broker default, else the static broker setting,
//! else Kafka's default. DescribeConfigs reports that chain; the log engine gets
//! the result as a `LogConfig`.

use std::collections::BTreeMap;

use crate::config::defaults::CLEANUP_POLICY_DEFAULT;
use crate::config::Config;
use crate::log::{LogConfig, TimestampType};

/// Kafka's ConfigSource values (DescribeConfigs v1+).
pub mod source {
    pub const TOPIC_CONFIG: i8 = 1;
    pub const DYNAMIC_BROKER_CONFIG: i8 = 2;
    pub const DYNAMIC_DEFAULT_BROKER_CONFIG: i8 = 3;
    pub const STATIC_BROKER_CONFIG: i8 = 4;
    pub const DEFAULT_CONFIG: i8 = 5;
}

/// Kafka's ConfigType values (DescribeConfigs v3+).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ConfigType {
    Boolean = 1,
    String = 2,
    Int = 3,
    Short = 4,
    Long = 5,
    Double = 6,
    List = 7,
    Class = 8,
}

/// One topic-level config key.
#[derive(Debug)]
pub struct TopicConfigDef {
    pub name: &'static str,
    /// The broker-level key whose value is this key's default.
    pub broker_synonym: &'static str,
    pub kind: ConfigType,
    pub default: &'static str,
    /// Smallest value accepted for numeric keys.
    pub min: i64,
    /// Accepted values for enumerated string keys; empty for any.
    pub choices: &'static [&'static str],
    pub doc: &'static str,
}

const fn def(
    name: &'static str,
    broker_synonym: &'static str,
    kind: ConfigType,
    default: &'static str,
    min: i64,
    choices: &'static [&'static str],
    doc: &'static str,
) -> TopicConfigDef {
    TopicConfigDef {
        name,
        broker_synonym,
        kind,
        default,
        min,
        choices,
        doc,
    }
}

use ConfigType::{Boolean, Double, Int, List, Long};

const LONG_MAX: &str = "9223372036854775807";

/// Every topic config Kafka 4.1 knows, with Kafka's defaults. A numeric default
/// cannot be formatted into a `&'static str` at compile time, so those are
/// written out and a test holds each equal to its named default in
/// `config::defaults`: `static_broker_values` compares the strings. Keys Sluice stores
/// but does not act on are listed in ARCHITECTURE.md under limits.
pub const TOPIC_CONFIGS: &[TopicConfigDef] = &[
    def(
        "cleanup.policy",
        "log.cleanup.policy",
        List,
        CLEANUP_POLICY_DEFAULT,
        0,
        &["delete", "compact", "compact,delete", "delete,compact"],
        "delete or compact old segments",
    ),
    def(
        "compression.type",
        "compression.type",
        ConfigType::String,
        "producer",
        0,
        &["producer", "uncompressed", "gzip", "snappy", "lz4", "zstd"],
        "final compression type",
    ),
    def(
        "delete.retention.ms",
        "log.cleaner.delete.retention.ms",
        Long,
        "86400000",
        0,
        &[],
        "tombstone retention for compacted topics",
    ),
    def(
        "file.delete.delay.ms",
        "log.segment.delete.delay.ms",
        Long,
        "60000",
        0,
        &[],
        "delay before deleting a file",
    ),
    def(
        "flush.messages",
        "log.flush.interval.messages",
        Long,
        LONG_MAX,
        1,
        &[],
        "fsync after this many messages",
    ),
    def(
        "flush.ms",
        "log.flush.interval.ms",
        Long,
        LONG_MAX,
        0,
        &[],
        "fsync after this long",
    ),
    def(
        "index.interval.bytes",
        "log.index.interval.bytes",
        Int,
        "4096",
        0,
        &[],
        "bytes between offset index entries",
    ),
    def(
        "max.compaction.lag.ms",
        "log.cleaner.max.compaction.lag.ms",
        Long,
        LONG_MAX,
        1,
        &[],
        "compaction lag ceiling",
    ),
    def(
        "max.message.bytes",
        "message.max.bytes",
        Int,
        "1048588",
        0,
        &[],
        "largest record batch",
    ),
    def(
        "message.timestamp.after.max.ms",
        "log.message.timestamp.after.max.ms",
        Long,
        "3600000",
        0,
        &[],
        "largest allowed future timestamp skew",
    ),
    def(
        "message.timestamp.before.max.ms",
        "log.message.timestamp.before.max.ms",
        Long,
        LONG_MAX,
        0,
        &[],
        "largest allowed past timestamp skew",
    ),
    def(
        "message.timestamp.type",
        "log.message.timestamp.type",
        ConfigType::String,
        "CreateTime",
        0,
        &["CreateTime", "LogAppendTime"],
        "timestamp kept with each record",
    ),
    def(
        "min.cleanable.dirty.ratio",
        "log.cleaner.min.cleanable.ratio",
        Double,
        "0.5",
        0,
        &[],
        "compaction trigger ratio",
    ),
    def(
        "min.compaction.lag.ms",
        "log.cleaner.min.compaction.lag.ms",
        Long,
        "0",
        0,
        &[],
        "compaction lag floor",
    ),
    def(
        "min.insync.replicas",
        "min.insync.replicas",
        Int,
        "1",
        1,
        &[],
        "replicas that must acknowledge acks=all",
    ),
    def(
        "preallocate",
        "log.preallocate",
        Boolean,
        "false",
        0,
        &[],
        "preallocate segment files",
    ),
    def(
        "retention.bytes",
        "log.retention.bytes",
        Long,
        "-1",
        -1,
        &[],
        "bytes kept per partition, -1 unlimited",
    ),
    def(
        "retention.ms",
        "log.retention.ms",
        Long,
        "604800000",
        -1,
        &[],
        "time data is kept, -1 for ever",
    ),
    def(
        "segment.bytes",
        "log.segment.bytes",
        Int,
        "1073741824",
        14,
        &[],
        "segment file size",
    ),
    def(
        "segment.index.bytes",
        "log.index.size.max.bytes",
        Int,
        "10485760",
        4,
        &[],
        "offset index size",
    ),
    def(
        "segment.jitter.ms",
        "log.roll.jitter.ms",
        Long,
        "0",
        0,
        &[],
        "roll jitter",
    ),
    def(
        "segment.ms",
        "log.roll.ms",
        Long,
        "604800000",
        1,
        &[],
        "segment age before roll",
    ),
    def(
        "unclean.leader.election.enable",
        "unclean.leader.election.enable",
        Boolean,
        "false",
        0,
        &[],
        "allow out-of-sync leaders",
    ),
];

pub fn find(name: &str) -> Option<&'static TopicConfigDef> {
    TOPIC_CONFIGS.iter().find(|d| d.name == name)
}

pub fn find_by_synonym(broker_key: &str) -> Option<&'static TopicConfigDef> {
    TOPIC_CONFIGS
        .iter()
        .find(|d| d.broker_synonym == broker_key)
}

/// Checks one value against its definition; the message is Kafka-like.
pub fn validate_value(def: &TopicConfigDef, value: &str) -> Result<(), String> {
    let bad = || format!("Invalid value {value} for configuration {}", def.name);
    match def.kind {
        Int | ConfigType::Short => {
            let parsed = value.trim().parse::<i32>().map_err(|_| bad())?;
            if i64::from(parsed) < def.min {
                return Err(format!("{}: Value must be at least {}", bad(), def.min));
            }
        }
        Long => {
            let parsed = value.trim().parse::<i64>().map_err(|_| bad())?;
            if parsed < def.min {
                return Err(format!("{}: Value must be at least {}", bad(), def.min));
            }
        }
        Double => {
            value.trim().parse::<f64>().map_err(|_| bad())?;
        }
        Boolean => {
            if !value.trim().eq_ignore_ascii_case("true")
                && !value.trim().eq_ignore_ascii_case("false")
            {
                return Err(bad());
            }
        }
        ConfigType::String | List | ConfigType::Class => {
            let normalized = value.replace(' ', "");
            if !def.choices.is_empty()
                && !def
                    .choices
                    .iter()
                    .any(|c| c.eq_ignore_ascii_case(&normalized))
            {
                return Err(format!(
                    "{}: String must be one of: {}",
                    bad(),
                    def.choices.join(", ")
                ));
            }
        }
    }
    Ok(())
}

/// Checks a set of topic overrides: every key known, every value valid.
pub fn validate_topic_configs<'a>(
    configs: impl IntoIterator<Item = (&'a str, &'a str)>,
) -> Result<(), String> {
    for (name, value) in configs {
        let def = find(name).ok_or_else(|| format!("Unknown topic config name: {name}"))?;
        validate_value(def, value)?;
    }
    Ok(())
}

/// Where an effective value came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Resolved {
    pub value: String,
    pub source: i8,
    /// Every layer that has a value, most specific first: (key, value, source).
    pub synonyms: Vec<(String, String, i8)>,
}

/// The broker's static settings that are topic defaults, by broker key. A setting
/// left at Kafka's default is not listed, so it is described as DEFAULT_CONFIG,
/// as Kafka describes a setting nobody set.
pub fn static_broker_values(config: &Config) -> BTreeMap<&'static str, String> {
    let defaults = &config.log_defaults;
    let mut values = BTreeMap::new();
    values.insert("log.segment.bytes", defaults.segment_bytes.to_string());
    values.insert("log.roll.ms", defaults.segment_ms.to_string());
    values.insert("log.retention.ms", defaults.retention_ms.to_string());
    values.insert("log.retention.bytes", defaults.retention_bytes.to_string());
    values.insert("message.max.bytes", defaults.max_message_bytes.to_string());
    if let Some(messages) = config.flush.messages {
        values.insert("log.flush.interval.messages", messages.to_string());
    }
    if let Some(ms) = config.flush.interval_ms {
        values.insert("log.flush.interval.ms", ms.to_string());
    }
    values.retain(|key, value| find_by_synonym(key).is_none_or(|def| def.default != value));
    values
}

/// The effective value of one topic key.
pub fn resolve(
    def: &TopicConfigDef,
    topic_overrides: &BTreeMap<String, String>,
    dynamic_broker: &BTreeMap<String, String>,
    static_broker: &BTreeMap<&'static str, String>,
) -> Resolved {
    let mut synonyms = Vec::new();
    if let Some(value) = topic_overrides.get(def.name) {
        synonyms.push((def.name.to_string(), value.clone(), source::TOPIC_CONFIG));
    }
    if let Some(value) = dynamic_broker.get(def.broker_synonym) {
        synonyms.push((
            def.broker_synonym.to_string(),
            value.clone(),
            source::DYNAMIC_DEFAULT_BROKER_CONFIG,
        ));
    }
    if let Some(value) = static_broker.get(def.broker_synonym) {
        synonyms.push((
            def.broker_synonym.to_string(),
            value.clone(),
            source::STATIC_BROKER_CONFIG,
        ));
    }
    synonyms.push((
        def.broker_synonym.to_string(),
        def.default.to_string(),
        source::DEFAULT_CONFIG,
    ));
    let (_, value, source) = synonyms[0].clone();
    Resolved {
        value,
        source,
        synonyms,
    }
}

/// Every key of a topic, resolved.
pub fn resolve_all(
    topic_overrides: &BTreeMap<String, String>,
    dynamic_broker: &BTreeMap<String, String>,
    config: &Config,
) -> Vec<(&'static TopicConfigDef, Resolved)> {
    let static_broker = static_broker_values(config);
    TOPIC_CONFIGS
        .iter()
        .map(|def| {
            (
                def,
                resolve(def, topic_overrides, dynamic_broker, &static_broker),
            )
        })
        .collect()
}

fn parse_or<T: std::str::FromStr>(value: &str, fallback: T) -> T {
    value.trim().parse().unwrap_or(fallback)
}

/// What the log engine needs of a topic's configs.
pub fn log_config(
    topic_overrides: &BTreeMap<String, String>,
    dynamic_broker: &BTreeMap<String, String>,
    config: &Config,
) -> LogConfig {
    let static_broker = static_broker_values(config);
    let value = |name: &str| -> String {
        let def = find(name).unwrap_or_else(|| unreachable!("{name} is a known topic config"));
        resolve(def, topic_overrides, dynamic_broker, &static_broker).value
    };
    let fallback = LogConfig::default();
    LogConfig {
        segment_bytes: parse_or(&value("segment.bytes"), fallback.segment_bytes),
        segment_ms: parse_or(&value("segment.ms"), fallback.segment_ms),
        index_interval_bytes: parse_or(
            &value("index.interval.bytes"),
            fallback.index_interval_bytes,
        ),
        retention_bytes: parse_or(&value("retention.bytes"), fallback.retention_bytes),
        retention_ms: parse_or(&value("retention.ms"), fallback.retention_ms),
        max_message_bytes: parse_or(&value("max.message.bytes"), fallback.max_message_bytes),
        timestamp_type: if value("message.timestamp.type") == "LogAppendTime" {
            TimestampType::LogAppendTime
        } else {
            TimestampType::CreateTime
        },
        message_timestamp_after_max_ms: parse_or(
            &value("message.timestamp.after.max.ms"),
            fallback.message_timestamp_after_max_ms,
        ),
        message_timestamp_before_max_ms: parse_or(
            &value("message.timestamp.before.max.ms"),
            fallback.message_timestamp_before_max_ms,
        ),
        cleanup: crate::log::CleanupPolicy::parse(&value("cleanup.policy")),
        min_cleanable_dirty_ratio: parse_or(
            &value("min.cleanable.dirty.ratio"),
            fallback.min_cleanable_dirty_ratio,
        ),
        min_compaction_lag_ms: parse_or(
            &value("min.compaction.lag.ms"),
            fallback.min_compaction_lag_ms,
        ),
        max_compaction_lag_ms: parse_or(
            &value("max.compaction.lag.ms"),
            fallback.max_compaction_lag_ms,
        ),
        delete_retention_ms: parse_or(&value("delete.retention.ms"), fallback.delete_retention_ms),
    }
}

/// `min.insync.replicas` of one topic: the ISR size below which acks=all is refused
/// and the high watermark stands still.
pub fn min_insync_replicas(
    topic_overrides: &BTreeMap<String, String>,
    dynamic_broker: &BTreeMap<String, String>,
    config: &Config,
) -> usize {
    let static_broker = static_broker_values(config);
    let def = find("min.insync.replicas")
        .unwrap_or_else(|| unreachable!("min.insync.replicas is a known topic config"));
    parse_or(
        &resolve(def, topic_overrides, dynamic_broker, &static_broker).value,
        1usize,
    )
    .max(1)
}

/// Flush policy of one topic: (flush.messages, flush.ms), None where unlimited.
pub fn flush_policy(
    topic_overrides: &BTreeMap<String, String>,
    dynamic_broker: &BTreeMap<String, String>,
    config: &Config,
) -> (Option<i64>, Option<i64>) {
    let static_broker = static_broker_values(config);
    let value = |name: &str| -> Option<i64> {
        let def = find(name)?;
        let parsed: i64 = parse_or(
            &resolve(def, topic_overrides, dynamic_broker, &static_broker).value,
            i64::MAX,
        );
        (parsed != i64::MAX).then_some(parsed)
    };
    (value("flush.messages"), value("flush.ms"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::ServeArgs;

    #[test]
    fn topic_override_wins_then_dynamic_then_static_then_default() {
        let config = ServeArgs {
            retention_ms: Some(1000),
            ..ServeArgs::default()
        }
        .resolve()
        .expect("valid");
        let def = find("retention.ms").expect("known");
        let static_broker = static_broker_values(&config);
        let mut topic = BTreeMap::new();
        let mut dynamic = BTreeMap::new();
        assert_eq!(
            resolve(def, &topic, &dynamic, &static_broker).source,
            source::STATIC_BROKER_CONFIG
        );
        dynamic.insert("log.retention.ms".to_string(), "2000".to_string());
        assert_eq!(resolve(def, &topic, &dynamic, &static_broker).value, "2000");
        topic.insert("retention.ms".to_string(), "3000".to_string());
        let resolved = resolve(def, &topic, &dynamic, &static_broker);
        assert_eq!(
            (resolved.value.as_str(), resolved.source),
            ("3000", source::TOPIC_CONFIG)
        );
        assert_eq!(resolved.synonyms.len(), 4);
        let def = find("cleanup.policy").expect("known");
        assert_eq!(
            resolve(def, &topic, &dynamic, &static_broker).source,
            source::DEFAULT_CONFIG
        );
    }

    /// The described defaults are the named ones the broker runs with, so a
    /// setting left at its default is never reported as set.
    #[test]
    fn the_table_describes_the_named_defaults() {
        use crate::config::defaults;
        let named = [
            ("cleanup.policy", CLEANUP_POLICY_DEFAULT.to_string()),
            (
                "index.interval.bytes",
                defaults::INDEX_INTERVAL_BYTES_DEFAULT.to_string(),
            ),
            (
                "max.message.bytes",
                defaults::MESSAGE_BYTES_MAX_DEFAULT.to_string(),
            ),
            (
                "message.timestamp.after.max.ms",
                defaults::MESSAGE_TIMESTAMP_AFTER_MAX_MS_DEFAULT.to_string(),
            ),
            (
                "message.timestamp.before.max.ms",
                defaults::MESSAGE_TIMESTAMP_BEFORE_MAX_MS_DEFAULT.to_string(),
            ),
            (
                "retention.bytes",
                defaults::RETENTION_BYTES_DEFAULT.to_string(),
            ),
            ("retention.ms", defaults::RETENTION_MS_DEFAULT.to_string()),
            ("segment.bytes", defaults::SEGMENT_BYTES_DEFAULT.to_string()),
            ("segment.ms", defaults::SEGMENT_MS_DEFAULT.to_string()),
        ];
        for (name, value) in named {
            assert_eq!(find(name).expect("known").default, value, "{name}");
        }
        assert_eq!(LONG_MAX, i64::MAX.to_string());
        let config = ServeArgs::default().resolve().expect("defaults are valid");
        assert!(static_broker_values(&config).is_empty());
    }

    #[test]
    fn validation_follows_kafka() {
        assert!(validate_topic_configs([("retention.ms", "-1")]).is_ok());
        assert!(validate_topic_configs([("retention.ms", "-2")]).is_err());
        assert!(validate_topic_configs([("segment.bytes", "abc")]).is_err());
        assert!(validate_topic_configs([("no.such.key", "1")]).is_err());
        assert!(validate_topic_configs([("message.timestamp.type", "LogAppendTime")]).is_ok());
        assert!(validate_topic_configs([("message.timestamp.type", "Never")]).is_err());
        assert!(validate_topic_configs([("cleanup.policy", "compact,delete")]).is_ok());
    }
}
