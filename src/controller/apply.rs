//! Applying one metadata command to the image: the controller's business logic, pure.
//!
//! Everything here is a function of the image and the command alone (no clock, no
//! randomness, no I/O), because every node applies the same log and must reach the same
//! image, today and when the log is replayed after a restart. Validation that must not race
//! (a topic already exists, a partition count that does not grow) is decided here, at the
//! command's place in the log, never by the proposer. A rejected command changes nothing.

use std::collections::BTreeMap;
use std::sync::Arc;

use super::command::{CommandOutcome, ConfigOp, MetadataCommand, MetadataError};
use super::image::{BrokerRegistration, MetadataImage, PartitionImage, TopicImage};
use crate::config::defaults::CLEANUP_POLICY_DEFAULT;
use crate::limits::PARTITIONS_PER_TOPIC_MAX;
use crate::limits::PRODUCER_ID_BLOCK_COUNT_MAX;

/// List-type configs whose default is not empty. Kafka's APPEND and SUBTRACT start from the
/// default when no override is set, so the state machine must know these defaults; they
/// are Kafka's published defaults and must not change, or replaying old entries would give
/// a different image.
const LIST_CONFIG_DEFAULTS: &[(&str, &str)] = &[
    ("cleanup.policy", CLEANUP_POLICY_DEFAULT),
    ("log.cleanup.policy", CLEANUP_POLICY_DEFAULT),
];

impl MetadataImage {
    /// Record that the entry at `log_index`, proposed by `leader_id`, has been applied.
    /// Called for every entry, including the blank and membership entries raft writes.
    pub(crate) fn note_applied(&mut self, log_index: u64, leader_id: i32) {
        assert!(
            log_index >= self.last_applied_index,
            "applied index went back from {} to {log_index}",
            self.last_applied_index
        );
        self.last_applied_index = log_index;
        self.controller_id = leader_id;
    }

    /// Apply one command. On `Rejected` the image is unchanged.
    pub(crate) fn apply(&mut self, cmd: &MetadataCommand) -> CommandOutcome {
        let result = match cmd {
            MetadataCommand::InitCluster { cluster_id } => {
                if self.cluster_id.is_empty() {
                    self.cluster_id.clone_from(cluster_id);
                }
                Ok(CommandOutcome::Done)
            }
            MetadataCommand::RegisterBroker(registration) => self.register_broker(registration),
            MetadataCommand::CreateTopic {
                name,
                topic_id,
                partitions,
                replication_factor,
                configs,
                assignments,
            } => self.create_topic(
                name,
                *topic_id,
                *partitions,
                *replication_factor,
                configs,
                assignments,
            ),
            MetadataCommand::DeleteTopic { topic_id } => self.delete_topic(topic_id),
            MetadataCommand::CreatePartitions { name, total_count } => {
                self.create_partitions(name, *total_count)
            }
            MetadataCommand::AlterTopicConfigs { name, ops, replace } => {
                self.alter_topic_configs(name, ops, *replace)
            }
            MetadataCommand::AlterBrokerConfigs { ops, replace } => {
                apply_config_ops(&self.broker_configs, ops, *replace).map(|configs| {
                    self.broker_configs = configs;
                    CommandOutcome::Done
                })
            }
            MetadataCommand::AllocateProducerIds { count } => self.allocate_producer_ids(*count),
        };
        result.unwrap_or_else(CommandOutcome::Rejected)
    }

    fn register_broker(&mut self, registration: &BrokerRegistration) -> Outcome {
        if registration.node_id < 0 || !(0..=i32::from(u16::MAX)).contains(&registration.port) {
            return Err(MetadataError::InvalidRequest(format!(
                "invalid broker registration {registration:?}"
            )));
        }
        self.brokers
            .insert(registration.node_id, registration.clone());
        Ok(CommandOutcome::Done)
    }

    fn create_topic(
        &mut self,
        name: &str,
        topic_id: uuid::Uuid,
        partitions: i32,
        replication_factor: i16,
        configs: &BTreeMap<String, String>,
        assignments: &[Vec<i32>],
    ) -> Outcome {
        if self.topics.contains_key(name) {
            return Err(MetadataError::TopicAlreadyExists(name.to_string()));
        }
        if topic_id.is_nil()
            || self.topic_names_by_id.contains_key(&topic_id)
            || self.deleted_topic_ids.contains(&topic_id)
        {
            return Err(MetadataError::InvalidRequest(format!(
                "topic id {topic_id} is reserved or already in use"
            )));
        }
        check_partition_count(partitions)?;
        let replication_factor = self.check_replication_factor(replication_factor)?;
        if let Some(key) = configs.keys().find(|k| k.is_empty()) {
            return Err(MetadataError::InvalidConfig(format!(
                "invalid config name '{key}'"
            )));
        }
        let partitions = if assignments.is_empty() {
            (0..partitions)
                .map(|index| self.new_partition(index, replication_factor))
                .collect()
        } else {
            self.check_assignments(assignments, partitions, replication_factor)?;
            assignments
                .iter()
                .zip(0..)
                .map(|(replicas, index)| PartitionImage {
                    partition_index: index,
                    leader_id: replicas[0],
                    leader_epoch: 0,
                    partition_epoch: 0,
                    isr: replicas.clone(),
                    replicas: replicas.clone(),
                })
                .collect()
        };
        let topic = TopicImage {
            name: name.to_string(),
            topic_id,
            partitions,
            configs: configs.clone(),
        };
        self.topics.insert(name.to_string(), Arc::new(topic));
        self.topic_names_by_id.insert(topic_id, name.to_string());
        Ok(CommandOutcome::TopicCreated { topic_id })
    }

    fn delete_topic(&mut self, topic_id: &uuid::Uuid) -> Outcome {
        let name = self
            .topic_names_by_id
            .remove(topic_id)
            .ok_or(MetadataError::UnknownTopicId(*topic_id))?;
        let removed = self.topics.remove(&name);
        assert!(
            removed.is_some(),
            "topic id {topic_id} named missing topic {name}"
        );
        self.deleted_topic_ids.insert(*topic_id);
        Ok(CommandOutcome::Done)
    }

    fn create_partitions(&mut self, name: &str, total_count: i32) -> Outcome {
        let current = self
            .topics
            .get(name)
            .ok_or_else(|| MetadataError::UnknownTopic(name.to_string()))?;
        let current_count = current.partitions.len();
        let current_count = i32::try_from(current_count).unwrap_or(i32::MAX);
        if total_count == current_count {
            return Err(MetadataError::InvalidPartitions(format!(
                "Topic already has {current_count} partitions."
            )));
        }
        if total_count < current_count {
            return Err(MetadataError::InvalidPartitions(format!(
                "Topic currently has {current_count} partitions, which is higher than the requested {total_count}."
            )));
        }
        check_partition_count(total_count)?;
        // New partitions get as many replicas as the topic's first partition has.
        let replication_factor = current
            .partitions
            .first()
            .map_or(1, |p| p.replicas.len().max(1));
        let new: Vec<PartitionImage> = (current_count..total_count)
            .map(|index| self.new_partition(index, replication_factor))
            .collect();
        let topic = self.topics.get_mut(name).map(Arc::make_mut);
        if let Some(topic) = topic {
            topic.partitions.extend(new);
        }
        Ok(CommandOutcome::Done)
    }

    fn alter_topic_configs(&mut self, name: &str, ops: &[ConfigOp], replace: bool) -> Outcome {
        let topic = self
            .topics
            .get_mut(name)
            .ok_or_else(|| MetadataError::UnknownTopic(name.to_string()))?;
        let configs = apply_config_ops(&topic.configs, ops, replace)?;
        Arc::make_mut(topic).configs = configs;
        Ok(CommandOutcome::Done)
    }

    fn allocate_producer_ids(&mut self, count: i64) -> Outcome {
        if !(1..=PRODUCER_ID_BLOCK_COUNT_MAX).contains(&count) {
            return Err(MetadataError::InvalidRequest(format!(
                "producer id block of {count} is outside 1..={PRODUCER_ID_BLOCK_COUNT_MAX}"
            )));
        }
        let first = self.next_producer_id;
        self.next_producer_id = first
            .checked_add(count)
            .ok_or_else(|| MetadataError::InvalidRequest("producer ids exhausted".to_string()))?;
        Ok(CommandOutcome::ProducerIds { first, count })
    }

    /// The replication factor as a replica count, if the registered brokers can host it.
    fn check_replication_factor(&self, replication_factor: i16) -> Result<usize, MetadataError> {
        let brokers = self.brokers.len();
        match usize::try_from(replication_factor) {
            Ok(rf) if rf >= 1 && rf <= brokers => Ok(rf),
            Ok(rf) if rf > brokers => Err(MetadataError::InvalidReplicationFactor(format!(
                "Replication factor: {rf} larger than available brokers: {brokers}."
            ))),
            _ => Err(MetadataError::InvalidReplicationFactor(
                "Replication factor must be larger than 0.".to_string(),
            )),
        }
    }

    /// An explicit assignment: one non-empty list per partition, each of the topic's
    /// replication factor, of distinct registered brokers (Kafka's checks).
    fn check_assignments(
        &self,
        assignments: &[Vec<i32>],
        partitions: i32,
        replication_factor: usize,
    ) -> Result<(), MetadataError> {
        let invalid = |message: String| Err(MetadataError::InvalidReplicaAssignment(message));
        if assignments.len() != usize::try_from(partitions).unwrap_or(0) {
            return invalid(format!(
                "{} partition assignments for {partitions} partitions",
                assignments.len()
            ));
        }
        for (index, replicas) in assignments.iter().enumerate() {
            if replicas.len() != replication_factor {
                return invalid("All partitions should have the same number of replicas".into());
            }
            let mut seen = std::collections::BTreeSet::new();
            if let Some(duplicate) = replicas.iter().find(|id| !seen.insert(**id)) {
                return invalid(format!(
                    "Duplicate brokers not allowed in replica assignment: broker {duplicate} in partition {index}"
                ));
            }
            if let Some(unknown) = replicas.iter().find(|id| !self.brokers.contains_key(id)) {
                return invalid(format!(
                    "Unknown broker {unknown} in replica assignment of partition {index}"
                ));
            }
        }
        Ok(())
    }

    /// Replicas placed round-robin over the registered brokers by partition index, first
    /// replica leading, as Kafka's rack-unaware assignment does. With one broker every
    /// partition is `[that broker]`.
    fn new_partition(&self, partition_index: i32, replication_factor: usize) -> PartitionImage {
        let ids: Vec<i32> = self.brokers.keys().copied().collect();
        assert!(
            replication_factor >= 1 && replication_factor <= ids.len(),
            "replication factor {replication_factor} was not checked against {} brokers",
            ids.len()
        );
        let start = usize::try_from(partition_index).unwrap_or(0);
        let replicas: Vec<i32> = (0..replication_factor)
            .map(|j| ids[(start + j) % ids.len()])
            .collect();
        PartitionImage {
            partition_index,
            leader_id: replicas[0],
            leader_epoch: 0,
            partition_epoch: 0,
            isr: replicas.clone(),
            replicas,
        }
    }
}

type Outcome = Result<CommandOutcome, MetadataError>;

fn check_partition_count(partitions: i32) -> Result<(), MetadataError> {
    if partitions < 1 {
        return Err(MetadataError::InvalidPartitions(
            "Number of partitions was set to an invalid non-positive value.".to_string(),
        ));
    }
    if partitions > PARTITIONS_PER_TOPIC_MAX {
        return Err(MetadataError::InvalidPartitions(format!(
            "Number of partitions {partitions} is above the limit of {PARTITIONS_PER_TOPIC_MAX}."
        )));
    }
    Ok(())
}

/// The overrides after `ops`, or why not. `replace` keeps exactly the `Set` ops (AlterConfigs);
/// otherwise ops apply in order to a copy (IncrementalAlterConfigs), so a failure leaves the
/// caller's map untouched. Public so that a `validate_only` request can compute the result
/// the state machine would reach, without proposing.
pub fn apply_config_ops(
    current: &BTreeMap<String, String>,
    ops: &[ConfigOp],
    replace: bool,
) -> Result<BTreeMap<String, String>, MetadataError> {
    if let Some(op) = ops.iter().find(|op| op.key().is_empty()) {
        return Err(MetadataError::InvalidConfig(format!(
            "empty config name in {op:?}"
        )));
    }
    if replace {
        let mut next = BTreeMap::new();
        for op in ops {
            match op {
                ConfigOp::Set { key, value } => {
                    next.insert(key.clone(), value.clone());
                }
                other => {
                    return Err(MetadataError::InvalidConfig(format!(
                        "AlterConfigs can only set values, not {other:?}"
                    )))
                }
            }
        }
        return Ok(next);
    }
    let mut next = current.clone();
    for op in ops {
        match op {
            ConfigOp::Set { key, value } => {
                next.insert(key.clone(), value.clone());
            }
            ConfigOp::Delete { key } => {
                next.remove(key);
            }
            ConfigOp::Append { key, value } => {
                let mut items = list_value(&next, key);
                for item in split_list(value) {
                    if !items.contains(&item) {
                        items.push(item);
                    }
                }
                next.insert(key.clone(), items.join(","));
            }
            ConfigOp::Subtract { key, value } => {
                let remove = split_list(value);
                let mut items = list_value(&next, key);
                items.retain(|item| !remove.contains(item));
                next.insert(key.clone(), items.join(","));
            }
        }
    }
    Ok(next)
}

/// The current list value of `key`: its override, else its Kafka default, else empty.
fn list_value(configs: &BTreeMap<String, String>, key: &str) -> Vec<String> {
    let value = configs.get(key).map(String::as_str).or_else(|| {
        LIST_CONFIG_DEFAULTS
            .iter()
            .find(|(k, _)| *k == key)
            .map(|(_, v)| *v)
    });
    value.map(split_list).unwrap_or_default()
}

/// Kafka's list parsing: comma-separated, whitespace around items ignored, empty items dropped.
fn split_list(value: &str) -> Vec<String> {
    value
        .split(',')
        .map(str::trim)
        .filter(|item| !item.is_empty())
        .map(str::to_string)
        .collect()
}

#[cfg(test)]
#[path = "apply_tests.rs"]
mod tests;
