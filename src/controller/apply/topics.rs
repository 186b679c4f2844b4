//! Topics and their partitions: creation, deletion, growth, configs,
//! placement, elections and reassignment, and the ISR changes leaders ask for.

use super::*;

/// List-type configs whose default is not empty. Kafka's APPEND and SUBTRACT start from the
/// default when no override is set, so the state machine must know these defaults; they
/// are Kafka's published defaults and must not change, or replaying old entries would give
/// a different image.
pub(super) const LIST_CONFIG_DEFAULTS: &[(&str, &str)] = &[
    ("cleanup.policy", CLEANUP_POLICY_DEFAULT),
    ("log.cleanup.policy", CLEANUP_POLICY_DEFAULT),
];

impl MetadataImage {
    /// Every partition for which `affected` holds goes through `update`, with its
    /// topic's electorate.
    pub(super) fn update_partitions(
        &mut self,
        affected: impl Fn(&PartitionImage) -> bool,
        mut update: impl FnMut(&mut PartitionImage, &Electorate),
    ) {
        let unfenced = self.unfenced_ids();
        let defaults = TopicRules::broker_defaults(&self.broker_configs);
        for topic in self.topics.values_mut() {
            if !topic.partitions.iter().any(&affected) {
                continue;
            }
            let electorate = defaults.for_topic(&topic.configs).electorate(&unfenced);
            for partition in &mut Arc::make_mut(topic).partitions {
                if affected(partition) {
                    partition.update(|p| update(p, &electorate));
                }
            }
        }
    }

    /// The election rules of topic `name` (its overrides over the dynamic broker
    /// defaults).
    pub(super) fn topic_rules(&self, name: &str) -> TopicRules {
        let defaults = TopicRules::broker_defaults(&self.broker_configs);
        self.topics
            .get(name)
            .map_or(defaults, |t| defaults.for_topic(&t.configs))
    }

    /// After a config change: where a topic's min.insync.replicas moved, its
    /// partitions' ELR is cleared (as Kafka does), since a replica in it was
    /// known complete only under the old value.
    pub(super) fn clear_elr_where_min_isr_moved(&mut self, before: &BTreeMap<String, TopicRules>) {
        let defaults = TopicRules::broker_defaults(&self.broker_configs);
        for (name, topic) in &mut self.topics {
            let now = defaults.for_topic(&topic.configs);
            let moved = before
                .get(name)
                .is_some_and(|was| was.min_isr != now.min_isr);
            let has_elr = |p: &PartitionImage| !p.elr.is_empty() || !p.last_known_elr.is_empty();
            if !moved || !topic.partitions.iter().any(has_elr) {
                continue;
            }
            for partition in &mut Arc::make_mut(topic).partitions {
                if has_elr(partition) {
                    partition.update(|p| p.set(p.leader_id, p.isr.clone(), Vec::new(), Vec::new()));
                }
            }
        }
    }

    /// Each topic's election rules, to compare after a config change.
    pub(super) fn every_topic_rules(&self) -> BTreeMap<String, TopicRules> {
        let defaults = TopicRules::broker_defaults(&self.broker_configs);
        self.topics
            .iter()
            .map(|(name, t)| (name.clone(), defaults.for_topic(&t.configs)))
            .collect()
    }

    pub(super) fn create_topic(
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
            self.place_partitions(topic_id, 0, partitions, replication_factor)?
        } else {
            self.check_assignments(assignments, partitions, replication_factor)?;
            let mut placed = Vec::with_capacity(assignments.len());
            for (replicas, index) in assignments.iter().zip(0..) {
                placed.push(self.partition_on(index, replicas.clone())?);
            }
            placed
        };
        self.check_partition_budgets(&partitions)?;
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

    /// Refuses (POLICY_VIOLATION) new partitions that would take a broker past
    /// the partition replicas its file descriptor limit has room for (its
    /// registered budget), as Redpanda refuses past its partition budget:
    /// running out of descriptors later would fail the broker's writes.
    pub(super) fn check_partition_budgets(
        &self,
        adding: &[PartitionImage],
    ) -> Result<(), MetadataError> {
        let mut added: BTreeMap<i32, usize> = BTreeMap::new();
        for partition in adding {
            for replica in &partition.replicas {
                *added.entry(*replica).or_default() += 1;
            }
        }
        for (broker_id, count) in added {
            if let Some(refusal) = self.budget_refusal(broker_id, count) {
                return Err(MetadataError::PolicyViolation(refusal));
            }
        }
        Ok(())
    }

    /// Why `count` more partition replicas do not fit on `broker_id`, if they
    /// do not (its registered budget; none registered: no limit).
    pub(super) fn budget_refusal(&self, broker_id: i32, count: usize) -> Option<String> {
        let budget = self.brokers.get(&broker_id)?.partition_budget?;
        let held = self
            .topics
            .values()
            .flat_map(|topic| &topic.partitions)
            .filter(|partition| partition.replicas.contains(&broker_id))
            .count();
        let budget = usize::try_from(budget).unwrap_or(usize::MAX);
        (held + count > budget).then(|| {
            format!(
                "broker {broker_id} holds {held} partition replicas and would hold {}, beyond \
                 the {budget} its open file limit has room for; raise that limit (ulimit -n, \
                 systemd's LimitNOFILE, Docker's --ulimit nofile) and restart the broker to \
                 add more",
                held + count
            )
        })
    }

    pub(super) fn delete_topic(&mut self, topic_id: &uuid::Uuid) -> Outcome {
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

    pub(super) fn create_partitions(&mut self, name: &str, total_count: i32) -> Outcome {
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
        // The brokers may have changed since the topic was made: check again.
        let replication_factor =
            self.check_replication_factor(i16::try_from(replication_factor).unwrap_or(i16::MAX))?;
        let new = self.place_partitions(
            current.topic_id,
            current_count,
            total_count - current_count,
            replication_factor,
        )?;
        self.check_partition_budgets(&new)?;
        let topic = self.topics.get_mut(name).map(Arc::make_mut);
        if let Some(topic) = topic {
            topic.partitions.extend(new);
        }
        Ok(CommandOutcome::Done)
    }

    pub(super) fn alter_topic_configs(
        &mut self,
        name: &str,
        ops: &[ConfigOp],
        replace: bool,
    ) -> Outcome {
        let topic = self
            .topics
            .get(name)
            .ok_or_else(|| MetadataError::UnknownTopic(name.to_string()))?;
        let configs = apply_config_ops(&topic.configs, ops, replace)?;
        let before = self.every_topic_rules();
        if let Some(topic) = self.topics.get_mut(name) {
            Arc::make_mut(topic).configs = configs;
        }
        self.clear_elr_where_min_isr_moved(&before);
        Ok(CommandOutcome::Done)
    }

    pub(super) fn allocate_producer_ids(&mut self, count: i64) -> Outcome {
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

    /// Kafka's `ReplicationControlManager.electLeaders`, each partition on its own.
    pub(super) fn elect_leaders(
        &mut self,
        unclean: bool,
        wanted: Option<&[(String, i32)]>,
    ) -> CommandOutcome {
        let wanted: Vec<(String, i32)> = match wanted {
            Some(wanted) => wanted.to_vec(),
            None => self
                .topics
                .iter()
                .flat_map(|(name, t)| {
                    (0..t.partitions.len() as i32).map(move |i| (name.clone(), i))
                })
                .collect(),
        };
        let unfenced = self.unfenced_ids();
        let mut results = Vec::with_capacity(wanted.len());
        for (name, index) in wanted {
            let rules = self.topic_rules(&name);
            let Some(partition) = self
                .topics
                .get_mut(&name)
                .filter(|t| index >= 0 && (index as usize) < t.partitions.len())
                .map(|t| &mut Arc::make_mut(t).partitions[index as usize])
            else {
                results.push((name, index, error_code::UNKNOWN_TOPIC_OR_PARTITION));
                continue;
            };
            let before = partition.epochs();
            let code = if unclean {
                if partition.leader_id >= 0 {
                    error_code::ELECTION_NOT_NEEDED
                } else {
                    let electorate = Electorate {
                        unclean: true,
                        ..rules.electorate(&unfenced)
                    };
                    partition.transition(partition.isr.clone(), &electorate, None);
                    if partition.leader_id >= 0 {
                        error_code::NONE
                    } else {
                        error_code::ELIGIBLE_LEADERS_NOT_AVAILABLE
                    }
                }
            } else {
                let preferred = partition.replicas.first().copied().unwrap_or(-1);
                if partition.leader_id == preferred {
                    error_code::ELECTION_NOT_NEEDED
                } else if partition.isr.contains(&preferred) && unfenced.contains(&preferred) {
                    let isr = partition.isr.clone();
                    partition.change(preferred, isr);
                    error_code::NONE
                } else {
                    error_code::PREFERRED_LEADER_NOT_AVAILABLE
                }
            };
            partition.check_invariants(Some(before));
            results.push((name, index, code));
        }
        CommandOutcome::Elected(results)
    }

    /// Kafka's `alterPartitionReassignments`, each partition on its own: a new
    /// target replaces a reassignment in progress; None cancels one.
    pub(super) fn reassign(
        &mut self,
        reassignments: &[(String, i32, Option<Vec<i32>>)],
        allow_replication_factor_change: bool,
    ) -> CommandOutcome {
        let unfenced = self.unfenced_ids();
        let registered: std::collections::BTreeSet<i32> = self.brokers.keys().copied().collect();
        let mut results = Vec::with_capacity(reassignments.len());
        for (name, index, target) in reassignments {
            let electorate = self.topic_rules(name).electorate(&unfenced);
            // A broker the target adds holds one more replica: within its budget.
            let over_budget = target.as_ref().is_some_and(|target| {
                let current = self
                    .topics
                    .get(name)
                    .and_then(|t| {
                        usize::try_from(*index)
                            .ok()
                            .and_then(|i| t.partitions.get(i))
                    })
                    .map(|p| p.replicas.clone())
                    .unwrap_or_default();
                target
                    .iter()
                    .filter(|id| !current.contains(id))
                    .any(|id| self.budget_refusal(*id, 1).is_some())
            });
            let Some(partition) = self
                .topics
                .get_mut(name)
                .filter(|t| *index >= 0 && (*index as usize) < t.partitions.len())
                .map(|t| &mut Arc::make_mut(t).partitions[*index as usize])
            else {
                results.push((name.clone(), *index, error_code::UNKNOWN_TOPIC_OR_PARTITION));
                continue;
            };
            let before = partition.epochs();
            let code = match target {
                None => partition.cancel_reassignment(&electorate),
                Some(target) => {
                    let mut seen = std::collections::BTreeSet::new();
                    let valid = !target.is_empty()
                        && target
                            .iter()
                            .all(|id| seen.insert(*id) && registered.contains(id));
                    let original: Vec<i32> = partition
                        .replicas
                        .iter()
                        .copied()
                        .filter(|id| !partition.adding_replicas.contains(id))
                        .collect();
                    if !valid {
                        error_code::INVALID_REPLICA_ASSIGNMENT
                    } else if over_budget {
                        error_code::POLICY_VIOLATION
                    } else if !allow_replication_factor_change && target.len() != original.len() {
                        error_code::INVALID_REPLICATION_FACTOR
                    } else {
                        partition.start_reassignment(original, target, &electorate);
                        error_code::NONE
                    }
                }
            };
            partition.check_invariants(Some(before));
            results.push((name.clone(), *index, code));
        }
        CommandOutcome::Elected(results)
    }

    /// Kafka's `ReplicationControlManager.alterPartition` with its validation
    /// (`validateAlterPartitionData`), in Kafka's order of checks.
    pub(super) fn alter_partition(
        &mut self,
        topic_id: &uuid::Uuid,
        partition: i32,
        leader_id: i32,
        leader_epoch: LeaderEpoch,
        partition_epoch: i32,
        new_isr: &[(i32, BrokerEpoch)],
    ) -> Outcome {
        let name = self
            .topic_names_by_id
            .get(topic_id)
            .cloned()
            .ok_or(MetadataError::UnknownTopicId(*topic_id))?;
        let current = self
            .topics
            .get(&name)
            .and_then(|t| t.partitions.get(usize::try_from(partition).ok()?))
            .ok_or_else(|| MetadataError::UnknownTopic(format!("{name}-{partition}")))?;
        if leader_epoch < current.leader_epoch {
            return Err(MetadataError::FencedLeaderEpoch(format!(
                "leader epoch {leader_epoch} of {name}-{partition} is older than {}",
                current.leader_epoch
            )));
        }
        if leader_id != current.leader_id || leader_epoch > current.leader_epoch {
            return Err(MetadataError::InvalidRequest(format!(
                "broker {leader_id} at leader epoch {leader_epoch} does not lead {name}-{partition} (leader {} at {})",
                current.leader_id, current.leader_epoch
            )));
        }
        if partition_epoch != current.partition_epoch {
            return Err(MetadataError::InvalidUpdateVersion(format!(
                "partition epoch {partition_epoch} of {name}-{partition} is not {}",
                current.partition_epoch
            )));
        }
        if !new_isr.iter().any(|(id, _)| *id == leader_id) {
            return Err(MetadataError::InvalidRequest(format!(
                "the new ISR of {name}-{partition} leaves out its leader {leader_id}"
            )));
        }
        let mut isr = Vec::with_capacity(new_isr.len());
        for &(id, broker_epoch) in new_isr {
            let eligible = current.replicas.contains(&id)
                && !isr.contains(&id)
                && self.brokers.get(&id).is_some_and(|b| {
                    !b.fenced && (broker_epoch.get() < 0 || b.epoch == broker_epoch)
                });
            if !eligible {
                return Err(MetadataError::IneligibleReplica(format!(
                    "broker {id} (epoch {broker_epoch}) may not be in the ISR of {name}-{partition}"
                )));
            }
            isr.push(id);
        }
        // The ISR in replica order, as Kafka keeps it.
        let replicas = current.replicas.clone();
        isr.sort_by_key(|id| replicas.iter().position(|r| r == id));
        let unfenced = self.unfenced_ids();
        let electorate = self.topic_rules(&name).electorate(&unfenced);
        let topic = self
            .topics
            .get_mut(&name)
            .map(Arc::make_mut)
            .expect("the topic was found above");
        let changed = &mut topic.partitions[partition as usize];
        let before = changed.epochs();
        // The leader is an unfenced member of the new ISR (checked above), so it stays.
        changed.transition(isr, &electorate, None);
        changed.maybe_complete_reassignment(&electorate);
        changed.check_invariants(Some(before));
        Ok(CommandOutcome::PartitionChanged {
            leader_epoch: changed.leader_epoch,
            partition_epoch: changed.partition_epoch,
            isr: changed.isr.clone(),
        })
    }

    /// The replication factor as a replica count, if the live (unfenced) brokers can
    /// host it.
    pub(super) fn check_replication_factor(
        &self,
        replication_factor: i16,
    ) -> Result<usize, MetadataError> {
        let brokers = self.unfenced_ids().len();
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
    pub(super) fn check_assignments(
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

    /// Partitions `start .. start + count` of a topic, placed by Kafka's striped,
    /// rack-aware placer over the registered brokers (an unfenced leader first),
    /// seeded by the topic id so that every node places them alike.
    pub(super) fn place_partitions(
        &self,
        topic_id: uuid::Uuid,
        start: i32,
        count: i32,
        replication_factor: usize,
    ) -> Result<Vec<PartitionImage>, MetadataError> {
        let brokers: Vec<PlacementBroker> = self
            .brokers
            .values()
            .map(|b| PlacementBroker {
                id: b.node_id,
                rack: b.rack.clone(),
                fenced: b.fenced,
            })
            .collect();
        let seed = topic_id.as_u64_pair().0;
        let placed = placement::place(&brokers, start, count, replication_factor, seed)
            .map_err(|e| MetadataError::InvalidReplicationFactor(e.to_string()))?;
        placed
            .into_iter()
            .zip(start..)
            .map(|(replicas, index)| self.partition_on(index, replicas))
            .collect()
    }

    /// A new partition on `replicas`, led by the first unfenced one (Kafka's
    /// initial election), with every unfenced replica in the ISR: an empty log is
    /// in sync by definition.
    pub(super) fn partition_on(
        &self,
        partition_index: i32,
        replicas: Vec<i32>,
    ) -> Result<PartitionImage, MetadataError> {
        let leader = replicas
            .iter()
            .copied()
            .find(|id| self.is_unfenced(*id))
            .ok_or_else(|| {
                MetadataError::InvalidReplicationFactor(
                    "All brokers specified in the partition assignment are currently fenced."
                        .to_string(),
                )
            })?;
        let isr = replicas
            .iter()
            .copied()
            .filter(|id| self.is_unfenced(*id))
            .collect();
        Ok(PartitionImage::new(partition_index, replicas, leader, isr))
    }
}

/// `min.insync.replicas` of `configs`, else `default`; at least 1.
pub(super) fn topic_min_isr(configs: &BTreeMap<String, String>, default: usize) -> usize {
    configs
        .get("min.insync.replicas")
        .and_then(|v| v.trim().parse::<usize>().ok())
        .unwrap_or(default)
        .max(1)
}

/// The topic's `unclean.leader.election.enable`, else the broker default.
pub(super) fn topic_unclean(configs: &BTreeMap<String, String>, broker_default: bool) -> bool {
    configs
        .get("unclean.leader.election.enable")
        .map_or(broker_default, |v| v.trim().eq_ignore_ascii_case("true"))
}

pub(super) fn check_partition_count(partitions: i32) -> Result<(), MetadataError> {
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
pub(super) fn list_value(configs: &BTreeMap<String, String>, key: &str) -> Vec<String> {
    let value = configs.get(key).map(String::as_str).or_else(|| {
        LIST_CONFIG_DEFAULTS
            .iter()
            .find(|(k, _)| *k == key)
            .map(|(_, v)| *v)
    });
    value.map(split_list).unwrap_or_default()
}

/// Kafka's list parsing: comma-separated, whitespace around items ignored, empty items dropped.
pub(super) fn split_list(value: &str) -> Vec<String> {
    value
        .split(',')
        .map(str::trim)
        .filter(|item| !item.is_empty())
        .map(str::to_string)
        .collect()
}
