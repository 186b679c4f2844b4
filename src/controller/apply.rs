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
use crate::types::{BrokerEpoch, LeaderEpoch};

mod partitions;
mod security;
mod topics;

use partitions::*;
pub use topics::apply_config_ops;
use topics::*;

impl MetadataImage {
    /// Record that the entry at `log_index`, proposed by `leader_id`, has been applied.
    /// Called for every entry, including the blank and membership entries raft writes.
    pub(crate) fn note_applied(&mut self, log_index: u64, leader_id: i32) {
        assert!(
            log_index >= self.last_applied_index,
            "the metadata offset applied only grows, and went from {} to {log_index}",
            self.last_applied_index
        );
        self.last_applied_index = log_index;
        self.controller_id = leader_id;
    }

    /// Apply one command. On `Rejected` the image is unchanged.
    pub(crate) fn apply(&mut self, cmd: &MetadataCommand) -> CommandOutcome {
        let outcome = self.apply_command(cmd);
        self.check_invariants();
        outcome
    }

    /// `apply` but for the check of the whole image, which a request's inner
    /// command leaves to the request.
    fn apply_command(&mut self, cmd: &MetadataCommand) -> CommandOutcome {
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
        registration.epoch =
            BrokerEpoch::new(i64::try_from(self.last_applied_index).unwrap_or(i64::MAX));
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
        self.brokers[&id].check_invariants(previous.as_ref());
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
            command => self.apply_command(command),
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
    fn fence_brokers(&mut self, brokers: &[(i32, BrokerEpoch)]) -> CommandOutcome {
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

    fn fence_broker(&mut self, node_id: i32, epoch: BrokerEpoch) -> Outcome {
        let broker = self.current_registration(node_id, epoch)?;
        if !broker.fenced {
            broker.fenced = true;
            self.move_leaderships_off(node_id);
        }
        Ok(CommandOutcome::Done)
    }

    fn unfence_broker(&mut self, node_id: i32, epoch: BrokerEpoch) -> Outcome {
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
        epoch: BrokerEpoch,
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
}

type Outcome = Result<CommandOutcome, MetadataError>;

#[cfg(test)]
#[path = "apply_tests.rs"]
mod tests;
