//! Applying one metadata command to the image: the controller's business logic, pure.
//!
//! Everything here is a function of the image and the command alone (no clock, no
//! randomness, no I/O), because every node applies the same log and must reach the same
//! image, today and when the log is replayed after a restart. Validation that must not race
//! (a topic already exists, a partition count that does not grow) is decided here, at the
//! command's place in the log, never by the proposer. A rejected command changes nothing.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use super::command::{
    CommandOutcome, ConfigOp, MetadataCommand, MetadataError, ScramDeletion, ScramUpsertion,
};
use super::image::{BrokerRegistration, MetadataImage, PartitionImage, TopicImage};
use super::placement::{self, PlacementBroker};
use crate::config::defaults::CLEANUP_POLICY_DEFAULT;
use crate::error_code;
use crate::limits::ACL_CHANGES_PER_REQUEST_MAX;
use crate::limits::CONTROLLER_REQUEST_IDS_KEPT;
use crate::limits::PARTITIONS_PER_TOPIC_MAX;
use crate::limits::PRODUCER_ID_BLOCK_COUNT_MAX;
use crate::security::acl::{AclBinding, AclFilter};

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
            MetadataCommand::InitCluster {
                cluster_id,
                features,
            } => {
                if self.cluster_id.is_empty() {
                    self.cluster_id.clone_from(cluster_id);
                    self.set_features(features);
                }
                Ok(CommandOutcome::Done)
            }
            MetadataCommand::UpdateFeatures { levels } => {
                self.set_features(levels);
                Ok(CommandOutcome::Done)
            }
            MetadataCommand::FenceBrokers {
                metadata_version,
                brokers,
            } => self
                .requires(*metadata_version, "FenceBrokers")
                .map(|()| self.fence_brokers(brokers)),
            MetadataCommand::Request {
                metadata_version,
                request_id,
                command,
            } => self
                .requires(*metadata_version, "a request id")
                .map(|()| self.apply_request(*request_id, command)),
            MetadataCommand::AlterUserScramCredentials {
                metadata_version,
                upsertions,
                deletions,
                only_if_absent,
            } => self
                .requires(*metadata_version, "AlterUserScramCredentials")
                .map(|()| self.alter_scram(upsertions, deletions, *only_if_absent)),
            MetadataCommand::CreateAcls {
                metadata_version,
                bindings,
            } => self
                .requires(*metadata_version, "CreateAcls")
                .map(|()| self.create_acls(bindings)),
            MetadataCommand::DeleteAcls {
                metadata_version,
                filters,
            } => self
                .requires(*metadata_version, "DeleteAcls")
                .map(|()| self.delete_acls(filters)),
            MetadataCommand::RegisterBroker(registration) => self.register_broker(registration),
            MetadataCommand::FenceBroker { node_id, epoch } => self.fence_broker(*node_id, *epoch),
            MetadataCommand::UnfenceBroker { node_id, epoch } => {
                self.unfence_broker(*node_id, *epoch)
            }
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
                    let before = self.every_topic_rules();
                    self.broker_configs = configs;
                    self.clear_elr_where_min_isr_moved(&before);
                    CommandOutcome::Done
                })
            }
            MetadataCommand::AllocateProducerIds { count } => self.allocate_producer_ids(*count),
            MetadataCommand::ElectLeaders {
                unclean,
                partitions,
            } => Ok(self.elect_leaders(*unclean, partitions.as_deref())),
            MetadataCommand::AlterPartitionReassignments {
                reassignments,
                allow_replication_factor_change,
            } => Ok(self.reassign(reassignments, *allow_replication_factor_change)),
            MetadataCommand::AlterPartition {
                topic_id,
                partition,
                leader_id,
                leader_epoch,
                partition_epoch,
                new_isr,
            } => self.alter_partition(
                topic_id,
                *partition,
                *leader_id,
                *leader_epoch,
                *partition_epoch,
                new_isr,
            ),
        };
        result.unwrap_or_else(CommandOutcome::Rejected)
    }

    fn register_broker(&mut self, registration: &BrokerRegistration) -> Outcome {
        if registration.node_id < 0 || !(0..=i32::from(u16::MAX)).contains(&registration.port) {
            return Err(MetadataError::InvalidRequest(format!(
                "invalid broker registration {registration:?}"
            )));
        }
        let id = registration.node_id;
        // The same process registering again (its proposal's answer was lost
        // and it retried): the registration it made stands, epoch and all, so
        // the epoch it learnt from the first is still the one it heartbeats
        // with. A single node registers with the nil incarnation at every
        // start, each time anew.
        if !registration.incarnation_id.is_nil()
            && self
                .brokers
                .get(&id)
                .is_some_and(|current| current.incarnation_id == registration.incarnation_id)
        {
            return Ok(CommandOutcome::Done);
        }
        let mut registration = registration.clone();
        // The broker epoch is where the registration sits in the log, so it only grows.
        registration.epoch = i64::try_from(self.last_applied_index).unwrap_or(i64::MAX);
        let fenced = registration.fenced;
        // KIP-966: a restart that does not follow a clean shutdown of the
        // registration it replaces may have lost records it had not flushed, so
        // it leaves every ISR and ELR (Kafka's handleBrokerUncleanShutdown). A
        // single node (the nil incarnation) is its partitions' only replica and
        // registers again only when its address changes.
        let restarted_unclean = !registration.incarnation_id.is_nil()
            && self
                .brokers
                .get(&id)
                .is_some_and(|current| current.epoch != registration.previous_broker_epoch);
        let previous = self.brokers.insert(id, registration);
        if restarted_unclean {
            self.update_partitions(
                |p| p.isr.contains(&id) || p.elr.contains(&id),
                |p, electorate| {
                    let isr = p.isr.iter().copied().filter(|r| *r != id).collect();
                    p.transition(isr, electorate, Some(id));
                },
            );
        }
        if fenced {
            self.move_leaderships_off(id);
        } else if previous.is_none_or(|previous| previous.fenced) {
            self.elect_where_leaderless(id);
        }
        Ok(CommandOutcome::Done)
    }

    /// Each user's credential changes, together or not at all, in the order
    /// the users first appear.
    fn create_acls(&mut self, bindings: &[(uuid::Uuid, AclBinding)]) -> CommandOutcome {
        if bindings.len() > ACL_CHANGES_PER_REQUEST_MAX {
            return CommandOutcome::Rejected(MetadataError::InvalidRequest(format!(
                "a request may create at most {ACL_CHANGES_PER_REQUEST_MAX} ACLs"
            )));
        }
        let acls = Arc::make_mut(&mut self.acls);
        for (id, binding) in bindings {
            // An identical binding is kept once; a taken id (never drawn
            // twice in practice) leaves the binding out rather than replace
            // another.
            acls.insert(*id, binding.clone());
        }
        CommandOutcome::Done
    }

    fn delete_acls(&mut self, filters: &[AclFilter]) -> CommandOutcome {
        let matched: Vec<Vec<(uuid::Uuid, AclBinding)>> = filters
            .iter()
            .map(|filter| {
                self.acls
                    .matching(filter)
                    .map(|(id, binding)| (*id, binding.clone()))
                    .collect()
            })
            .collect();
        let ids: BTreeSet<uuid::Uuid> = matched.iter().flatten().map(|(id, _)| *id).collect();
        if ids.len() > ACL_CHANGES_PER_REQUEST_MAX {
            return CommandOutcome::AclsDeleted(Err(format!(
                "the filters match {} ACLs; a request may delete at most {ACL_CHANGES_PER_REQUEST_MAX}",
                ids.len()
            )));
        }
        if !ids.is_empty() {
            let acls = Arc::make_mut(&mut self.acls);
            for id in &ids {
                acls.remove(id);
            }
        }
        CommandOutcome::AclsDeleted(Ok(matched
            .into_iter()
            .map(|bindings| bindings.into_iter().map(|(_, binding)| binding).collect())
            .collect()))
    }

    fn alter_scram(
        &mut self,
        upsertions: &[ScramUpsertion],
        deletions: &[ScramDeletion],
        only_if_absent: bool,
    ) -> CommandOutcome {
        let mut users: Vec<&str> = Vec::new();
        for name in deletions
            .iter()
            .map(|d| d.name.as_str())
            .chain(upsertions.iter().map(|u| u.name.as_str()))
        {
            if !users.contains(&name) {
                users.push(name);
            }
        }
        let mut results = Vec::with_capacity(users.len());
        for user in users {
            let missing = deletions.iter().find(|d| {
                d.name == user
                    && !self
                        .scram_credentials
                        .get(user)
                        .is_some_and(|by_mechanism| by_mechanism.contains_key(&d.mechanism))
            });
            if missing.is_some() {
                results.push((
                    user.to_string(),
                    error_code::RESOURCE_NOT_FOUND,
                    Some("Attempt to delete a user credential that does not exist".to_string()),
                ));
                continue;
            }
            let credentials = self.scram_credentials.entry(user.to_string()).or_default();
            for deletion in deletions.iter().filter(|d| d.name == user) {
                credentials.remove(&deletion.mechanism);
            }
            for upsertion in upsertions.iter().filter(|u| u.name == user) {
                if only_if_absent && credentials.contains_key(&upsertion.mechanism) {
                    continue;
                }
                credentials.insert(upsertion.mechanism, upsertion.credential.clone());
            }
            if credentials.is_empty() {
                self.scram_credentials.remove(user);
            }
            results.push((user.to_string(), error_code::NONE, None));
        }
        CommandOutcome::UsersAltered(results)
    }

    /// A record that needs `metadata.version` `level` applies only once the
    /// image has finalized it (its proposer checks first; a proposal made
    /// against an older image is refused here, the same on every node).
    fn requires(&self, level: i16, record: &str) -> Result<(), MetadataError> {
        if self.metadata_version() < level {
            return Err(MetadataError::InvalidRequest(format!(
                "{record} needs metadata.version {}, and the cluster is at {}",
                super::features::metadata_version_name(level),
                super::features::metadata_version_name(self.metadata_version())
            )));
        }
        Ok(())
    }

    /// Finalizes each feature at its level (0 takes it away).
    fn set_features(&mut self, levels: &BTreeMap<String, i16>) {
        if levels.is_empty() {
            return;
        }
        for (feature, level) in levels {
            if *level == 0 && feature != super::features::METADATA_VERSION {
                self.features.remove(feature);
            } else {
                self.features.insert(feature.clone(), *level);
            }
        }
        self.features_epoch = self.last_applied_index;
    }

    /// `command` under its proposer's `request_id`: a retry of a request
    /// already applied is answered with the first outcome and changes nothing.
    fn apply_request(
        &mut self,
        request_id: uuid::Uuid,
        command: &MetadataCommand,
    ) -> CommandOutcome {
        if let Some((_, outcome)) = self
            .applied_requests
            .iter()
            .find(|(id, _)| *id == request_id)
        {
            return outcome.clone();
        }
        let outcome = match command {
            // Requests do not nest.
            MetadataCommand::Request { .. } => CommandOutcome::Rejected(
                MetadataError::InvalidRequest("a request inside a request".to_string()),
            ),
            command => self.apply(command),
        };
        if self.applied_requests.len() >= CONTROLLER_REQUEST_IDS_KEPT {
            self.applied_requests.pop_front();
        }
        self.applied_requests
            .push_back((request_id, outcome.clone()));
        outcome
    }

    /// Fences every broker of `brokers` whose epoch is current, then moves
    /// their leaderships, so that none moves onto another broker of the list.
    fn fence_brokers(&mut self, brokers: &[(i32, i64)]) -> CommandOutcome {
        let mut fenced = Vec::new();
        for (node_id, epoch) in brokers {
            if let Ok(broker) = self.current_registration(*node_id, *epoch) {
                if !broker.fenced {
                    broker.fenced = true;
                    fenced.push(*node_id);
                }
            }
        }
        for node_id in fenced {
            self.move_leaderships_off(node_id);
        }
        CommandOutcome::Done
    }

    fn fence_broker(&mut self, node_id: i32, epoch: i64) -> Outcome {
        let broker = self.current_registration(node_id, epoch)?;
        if !broker.fenced {
            broker.fenced = true;
            self.move_leaderships_off(node_id);
        }
        Ok(CommandOutcome::Done)
    }

    fn unfence_broker(&mut self, node_id: i32, epoch: i64) -> Outcome {
        let broker = self.current_registration(node_id, epoch)?;
        if broker.fenced {
            broker.fenced = false;
            self.elect_where_leaderless(node_id);
        }
        Ok(CommandOutcome::Done)
    }

    /// The registration of `node_id` if `epoch` is still its epoch: a fence or
    /// unfence meant for an earlier registration must not touch a newer one.
    fn current_registration(
        &mut self,
        node_id: i32,
        epoch: i64,
    ) -> Result<&mut BrokerRegistration, MetadataError> {
        match self.brokers.get_mut(&node_id) {
            Some(broker) if broker.epoch == epoch => Ok(broker),
            Some(broker) => Err(MetadataError::StaleBrokerEpoch(format!(
                "broker {node_id} has epoch {}, not {epoch}",
                broker.epoch
            ))),
            None => Err(MetadataError::InvalidRequest(format!(
                "broker {node_id} is not registered"
            ))),
        }
    }

    /// The brokers that may lead: registered and not fenced.
    fn unfenced_ids(&self) -> std::collections::BTreeSet<i32> {
        self.live_brokers().map(|b| b.node_id).collect()
    }

    fn is_unfenced(&self, node_id: i32) -> bool {
        self.brokers.get(&node_id).is_some_and(|b| !b.fenced)
    }

    /// `node_id` was fenced: it leaves every ISR it is in, into the ELR where the
    /// ISR falls below min.insync.replicas (KIP-966), and each partition it led
    /// goes to the first unfenced ISR member in replica order, else as
    /// `PartitionImage::transition` elects, else to no leader.
    fn move_leaderships_off(&mut self, node_id: i32) {
        self.update_partitions(
            |p| p.isr.contains(&node_id),
            |p, electorate| {
                let isr = p.isr.iter().copied().filter(|id| *id != node_id).collect();
                p.transition(isr, electorate, None);
            },
        );
    }

    /// `node_id` can lead again: every partition without a leader that it is a
    /// replica of holds an election.
    fn elect_where_leaderless(&mut self, node_id: i32) {
        self.update_partitions(
            |p| p.leader_id < 0 && p.replicas.contains(&node_id),
            |p, electorate| p.transition(p.isr.clone(), electorate, None),
        );
    }

    /// Every partition for which `affected` holds goes through `update`, with its
    /// topic's electorate.
    fn update_partitions(
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
                    update(partition, &electorate);
                }
            }
        }
    }

    /// The election rules of topic `name` (its overrides over the dynamic broker
    /// defaults).
    fn topic_rules(&self, name: &str) -> TopicRules {
        let defaults = TopicRules::broker_defaults(&self.broker_configs);
        self.topics
            .get(name)
            .map_or(defaults, |t| defaults.for_topic(&t.configs))
    }

    /// After a config change: where a topic's min.insync.replicas moved, its
    /// partitions' ELR is cleared (as Kafka does), since a replica in it was
    /// known complete only under the old value.
    fn clear_elr_where_min_isr_moved(&mut self, before: &BTreeMap<String, TopicRules>) {
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
                    let (leader, isr) = (partition.leader_id, partition.isr.clone());
                    partition.set(leader, isr, Vec::new(), Vec::new());
                }
            }
        }
    }

    /// Each topic's election rules, to compare after a config change.
    fn every_topic_rules(&self) -> BTreeMap<String, TopicRules> {
        let defaults = TopicRules::broker_defaults(&self.broker_configs);
        self.topics
            .iter()
            .map(|(name, t)| (name.clone(), defaults.for_topic(&t.configs)))
            .collect()
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
    fn check_partition_budgets(&self, adding: &[PartitionImage]) -> Result<(), MetadataError> {
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
    fn budget_refusal(&self, broker_id: i32, count: usize) -> Option<String> {
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

    fn alter_topic_configs(&mut self, name: &str, ops: &[ConfigOp], replace: bool) -> Outcome {
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

    /// Kafka's `ReplicationControlManager.electLeaders`, each partition on its own.
    fn elect_leaders(&mut self, unclean: bool, wanted: Option<&[(String, i32)]>) -> CommandOutcome {
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
            results.push((name, index, code));
        }
        CommandOutcome::Elected(results)
    }

    /// Kafka's `alterPartitionReassignments`, each partition on its own: a new
    /// target replaces a reassignment in progress; None cancels one.
    fn reassign(
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
            results.push((name.clone(), *index, code));
        }
        CommandOutcome::Elected(results)
    }

    /// Kafka's `ReplicationControlManager.alterPartition` with its validation
    /// (`validateAlterPartitionData`), in Kafka's order of checks.
    fn alter_partition(
        &mut self,
        topic_id: &uuid::Uuid,
        partition: i32,
        leader_id: i32,
        leader_epoch: i32,
        partition_epoch: i32,
        new_isr: &[(i32, i64)],
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
                && self
                    .brokers
                    .get(&id)
                    .is_some_and(|b| !b.fenced && (broker_epoch < 0 || b.epoch == broker_epoch));
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
        // The leader is an unfenced member of the new ISR (checked above), so it stays.
        changed.transition(isr, &electorate, None);
        changed.maybe_complete_reassignment(&electorate);
        Ok(CommandOutcome::PartitionChanged {
            leader_epoch: changed.leader_epoch,
            partition_epoch: changed.partition_epoch,
            isr: changed.isr.clone(),
        })
    }

    /// The replication factor as a replica count, if the live (unfenced) brokers can
    /// host it.
    fn check_replication_factor(&self, replication_factor: i16) -> Result<usize, MetadataError> {
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

    /// Partitions `start .. start + count` of a topic, placed by Kafka's striped,
    /// rack-aware placer over the registered brokers (an unfenced leader first),
    /// seeded by the topic id so that every node places them alike.
    fn place_partitions(
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
    fn partition_on(
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

type Outcome = Result<CommandOutcome, MetadataError>;

impl PartitionImage {
    fn new(partition_index: i32, replicas: Vec<i32>, leader: i32, isr: Vec<i32>) -> PartitionImage {
        PartitionImage {
            partition_index,
            leader_id: leader,
            leader_epoch: 0,
            partition_epoch: 0,
            isr,
            replicas,
            elr: Vec::new(),
            last_known_elr: Vec::new(),
            adding_replicas: Vec::new(),
            removing_replicas: Vec::new(),
        }
    }

    /// Starts moving from `original` to `target` replicas: the replica set is the
    /// target followed by the replicas leaving, those joining are added, and the
    /// reassignment completes at once if they are all in the ISR already.
    fn start_reassignment(&mut self, original: Vec<i32>, target: &[i32], electorate: &Electorate) {
        let adding: Vec<i32> = target
            .iter()
            .copied()
            .filter(|id| !original.contains(id))
            .collect();
        let removing: Vec<i32> = original
            .iter()
            .copied()
            .filter(|id| !target.contains(id))
            .collect();
        let mut replicas = target.to_vec();
        replicas.extend(removing.iter().copied());
        // A replica added by an earlier target and not in this one leaves the ISR.
        let isr: Vec<i32> = self
            .isr
            .iter()
            .copied()
            .filter(|id| replicas.contains(id))
            .collect();
        self.replicas = replicas;
        self.adding_replicas = adding;
        self.removing_replicas = removing;
        self.partition_epoch += 1;
        self.transition(isr, electorate, None);
        self.maybe_complete_reassignment(electorate);
    }

    /// Cancels a reassignment in progress: back to the original replicas, the
    /// added ones out of the ISR (and of the leadership).
    fn cancel_reassignment(&mut self, electorate: &Electorate) -> i16 {
        if self.adding_replicas.is_empty() && self.removing_replicas.is_empty() {
            return error_code::NO_REASSIGNMENT_IN_PROGRESS;
        }
        let adding = std::mem::take(&mut self.adding_replicas);
        self.removing_replicas.clear();
        self.replicas.retain(|id| !adding.contains(id));
        self.finish_replica_change(electorate);
        error_code::NONE
    }

    /// Kafka's `PartitionReassignmentReplicas.maybeCompleteReassignment`: once every
    /// added replica is in the ISR, the replicas leaving go (from the ISR and the
    /// leadership too, with a new leader epoch), unless that would empty the ISR.
    fn maybe_complete_reassignment(&mut self, electorate: &Electorate) {
        if self.adding_replicas.is_empty() && self.removing_replicas.is_empty() {
            return;
        }
        if !self.adding_replicas.iter().all(|id| self.isr.contains(id)) {
            return;
        }
        let removing = self.removing_replicas.clone();
        if self.isr.iter().all(|id| removing.contains(id)) {
            return;
        }
        self.replicas.retain(|id| !removing.contains(id));
        self.adding_replicas.clear();
        self.removing_replicas.clear();
        self.finish_replica_change(electorate);
    }

    /// After replicas left: the ISR and ELR keep only replicas, a leader that left
    /// is replaced by election, and the leader epoch moves either way (Kafka bumps
    /// it when replicas are removed, so that the leaving ones are fenced).
    fn finish_replica_change(&mut self, electorate: &Electorate) {
        let replicas = self.replicas.clone();
        let isr: Vec<i32> = self
            .isr
            .iter()
            .copied()
            .filter(|id| replicas.contains(id))
            .collect();
        let (leader_epoch, partition_epoch) = (self.leader_epoch, self.partition_epoch);
        self.transition(isr, electorate, None);
        if self.leader_epoch == leader_epoch {
            self.leader_epoch += 1;
        }
        if self.partition_epoch == partition_epoch {
            self.partition_epoch += 1;
        }
    }

    /// Moves to `isr`. The leader stays if it is a live member of it; otherwise
    /// `elect` names one, and a leader from outside the ISR is the ISR alone. The
    /// ELR follows KIP-966: below min.insync.replicas, replicas leaving the ISR
    /// join it (they hold every committed record, as the high watermark cannot
    /// move meanwhile), except `unclean_shutdown`, a broker that restarted
    /// without a clean shutdown and may have lost what it had not flushed.
    fn transition(
        &mut self,
        isr: Vec<i32>,
        electorate: &Electorate,
        unclean_shutdown: Option<i32>,
    ) {
        let (elr, last_known_elr) = self.next_elr(&isr, electorate.min_isr, unclean_shutdown);
        let leader =
            if isr.contains(&self.leader_id) && electorate.unfenced.contains(&self.leader_id) {
                self.leader_id
            } else {
                elect(&self.replicas, &isr, &elr, &last_known_elr, electorate)
            };
        if leader < 0 || isr.contains(&leader) {
            self.set(leader, isr, elr, last_known_elr);
            return;
        }
        let staged = PartitionImage {
            isr,
            elr,
            last_known_elr,
            ..self.clone()
        };
        let (elr, last_known_elr) = staged.next_elr(&[leader], electorate.min_isr, None);
        self.set(leader, vec![leader], elr, last_known_elr);
    }

    /// The ELR and last known ELR after the ISR becomes `isr`. At or above min
    /// ISR both are empty. Below it, the ELR is every replica that was in the ISR
    /// or ELR and is not in the new ISR (nor `unclean_shutdown`). When the ISR and
    /// ELR both end empty, the last known ELR keeps who was in them last (Kafka's
    /// LastKnownElr), the replicas most likely to hold every committed record.
    fn next_elr(
        &self,
        isr: &[i32],
        min_isr: usize,
        unclean_shutdown: Option<i32>,
    ) -> (Vec<i32>, Vec<i32>) {
        if isr.len() >= min_isr {
            return (Vec::new(), Vec::new());
        }
        let was_eligible = |id: &i32| self.isr.contains(id) || self.elr.contains(id);
        let elr: Vec<i32> = self
            .replicas
            .iter()
            .copied()
            .filter(|id| was_eligible(id) && !isr.contains(id) && Some(*id) != unclean_shutdown)
            .collect();
        if !isr.is_empty() || !elr.is_empty() {
            return (elr, Vec::new());
        }
        let last: Vec<i32> = self
            .replicas
            .iter()
            .copied()
            .filter(|id| was_eligible(id))
            .collect();
        let last_known_elr = if last.is_empty() {
            self.last_known_elr.clone()
        } else {
            last
        };
        (elr, last_known_elr)
    }

    /// A preferred-leader election: `leader`, a live ISR member, leads.
    fn change(&mut self, leader: i32, isr: Vec<i32>) {
        let (elr, last_known_elr) = (self.elr.clone(), self.last_known_elr.clone());
        self.set(leader, isr, elr, last_known_elr);
    }

    /// Kafka's PartitionChangeRecord replay: a new leader bumps the leader epoch,
    /// and any change bumps the partition epoch (the compare-and-set token of
    /// AlterPartition). No change, no bump.
    fn set(&mut self, leader: i32, isr: Vec<i32>, elr: Vec<i32>, last_known_elr: Vec<i32>) {
        let leader_changed = leader != self.leader_id;
        if !leader_changed
            && isr == self.isr
            && elr == self.elr
            && last_known_elr == self.last_known_elr
        {
            return;
        }
        if leader_changed {
            self.leader_id = leader;
            self.leader_epoch += 1;
        }
        self.isr = isr;
        self.elr = elr;
        self.last_known_elr = last_known_elr;
        self.partition_epoch += 1;
    }
}

/// What an election of one topic's partitions may draw on: the live brokers,
/// whether unclean election is on, and min.insync.replicas.
struct Electorate<'a> {
    unfenced: &'a std::collections::BTreeSet<i32>,
    unclean: bool,
    min_isr: usize,
}

/// A topic's election settings as the log knows them: its own overrides, else
/// the dynamic broker defaults, else Kafka's defaults. A node's static config is
/// not in the log, so it cannot decide what every node applies: a static
/// `min.insync.replicas` above 1 is enforced by the brokers (the high watermark
/// and acks=all) but the controller counts the ELR with 1, which only keeps it
/// smaller, never wrong.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct TopicRules {
    unclean: bool,
    min_isr: usize,
}

impl TopicRules {
    fn broker_defaults(configs: &BTreeMap<String, String>) -> TopicRules {
        TopicRules {
            unclean: topic_unclean(configs, false),
            min_isr: topic_min_isr(configs, 1),
        }
    }

    fn for_topic(self, configs: &BTreeMap<String, String>) -> TopicRules {
        TopicRules {
            unclean: topic_unclean(configs, self.unclean),
            min_isr: topic_min_isr(configs, self.min_isr),
        }
    }

    fn electorate(self, unfenced: &std::collections::BTreeSet<i32>) -> Electorate<'_> {
        Electorate {
            unfenced,
            unclean: self.unclean,
            min_isr: self.min_isr,
        }
    }
}

/// Kafka's election order with ELR (KIP-966), each in replica order and only
/// among unfenced brokers: an ISR member; with the ISR empty, an ELR member;
/// with both empty, a member of the last known ELR (Kafka's balanced recovery:
/// it was in the ISR or ELR last, so it is the best hope for the committed
/// records); then, with unclean election on, any replica, the last known ELR
/// first. -1: none can lead.
fn elect(
    replicas: &[i32],
    isr: &[i32],
    elr: &[i32],
    last_known_elr: &[i32],
    electorate: &Electorate,
) -> i32 {
    let live_in = |ids: &[i32]| {
        replicas
            .iter()
            .copied()
            .find(|id| ids.contains(id) && electorate.unfenced.contains(id))
    };
    live_in(isr)
        .or_else(|| isr.is_empty().then(|| live_in(elr)).flatten())
        .or_else(|| {
            (isr.is_empty() && elr.is_empty())
                .then(|| live_in(last_known_elr))
                .flatten()
        })
        .or_else(|| {
            electorate
                .unclean
                .then(|| live_in(last_known_elr).or_else(|| live_in(replicas)))
                .flatten()
        })
        .unwrap_or(-1)
}

/// `min.insync.replicas` of `configs`, else `default`; at least 1.
fn topic_min_isr(configs: &BTreeMap<String, String>, default: usize) -> usize {
    configs
        .get("min.insync.replicas")
        .and_then(|v| v.trim().parse::<usize>().ok())
        .unwrap_or(default)
        .max(1)
}

/// The topic's `unclean.leader.election.enable`, else the broker default.
fn topic_unclean(configs: &BTreeMap<String, String>, broker_default: bool) -> bool {
    configs
        .get("unclean.leader.election.enable")
        .map_or(broker_default, |v| v.trim().eq_ignore_ascii_case("true"))
}

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
