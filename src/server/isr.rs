//! The leader's side of ISR changes: proposals go to the controller as Kafka's
//! AlterPartition (a metadata command forwarded to the raft leader), and every
//! partition this broker leads is checked for lagging members at half of
//! `replica.lag.time.max.ms`, as Kafka's `isr-expiration` task does. And
//! Kafka's auto leader rebalance: the metadata leader gives leaderships back to
//! their preferred replicas when a broker's share passes
//! `LEADER_IMBALANCE_PER_BROKER_PERCENTAGE`.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;

use super::ticks::{every, next_tick};
use crate::controller::{CommandOutcome, Controller, MetadataCommand};
use crate::limits::{ISR_SHRINK_CHECK_INTERVAL_MS_MAX, LEADER_IMBALANCE_PER_BROKER_PERCENTAGE};
use crate::replica::{BoxFuture, IsrChange, IsrProposer, LeaderAndIsr, ReplicaManager};

/// ISR changes proposed through the controller.
pub struct ControllerIsr {
    controller: Controller,
}

impl ControllerIsr {
    pub fn new(controller: Controller) -> ControllerIsr {
        ControllerIsr { controller }
    }
}

impl IsrProposer for ControllerIsr {
    fn alter_partition(
        &self,
        topic_id: uuid::Uuid,
        partition: i32,
        leader_id: i32,
        change: IsrChange,
    ) -> BoxFuture<'static, Option<LeaderAndIsr>> {
        let controller = self.controller.clone();
        Box::pin(async move {
            let command = MetadataCommand::AlterPartition {
                topic_id,
                partition,
                leader_id,
                leader_epoch: change.leader_epoch,
                partition_epoch: change.partition_epoch,
                new_isr: change.new_isr,
            };
            match controller.propose(command).await {
                Ok(CommandOutcome::PartitionChanged {
                    leader_epoch,
                    partition_epoch,
                    isr,
                }) => Some(LeaderAndIsr {
                    leader_epoch,
                    partition_epoch,
                    isr,
                }),
                Ok(outcome) => {
                    tracing::debug!(?outcome, partition, "an ISR change was refused");
                    None
                }
                Err(error) => {
                    tracing::warn!(%error, partition, "proposing an ISR change failed");
                    None
                }
            }
        })
    }
}

/// Drops lagging ISR members of the partitions this broker leads, until stopped.
pub async fn shrink_isrs(
    replicas: Arc<ReplicaManager>,
    replica_lag_time_max_ms: u64,
    mut stopped: watch::Receiver<bool>,
) {
    let period_ms = (replica_lag_time_max_ms / 2).clamp(1, ISR_SHRINK_CHECK_INTERVAL_MS_MAX);
    let mut ticks = every(Duration::from_millis(period_ms));
    while next_tick(&mut ticks, &mut stopped).await {
        let replicas = Arc::clone(&replicas);
        let _ = tokio::task::spawn_blocking(move || replicas.shrink_isrs()).await;
    }
}

/// Every `interval_seconds`, on the metadata leader only, a preferred-leader
/// election of the partitions whose preferred broker is too often not their
/// leader; until stopped.
pub async fn rebalance_leaders(
    controller: Controller,
    node_id: i32,
    interval_seconds: u64,
    mut stopped: watch::Receiver<bool>,
) {
    let mut ticks = every(Duration::from_secs(interval_seconds));
    while next_tick(&mut ticks, &mut stopped).await {
        if controller.raft_status().leader_id != i64::from(node_id) {
            continue;
        }
        let partitions = controller
            .image()
            .imbalanced_preferred_leaders(LEADER_IMBALANCE_PER_BROKER_PERCENTAGE);
        if partitions.is_empty() {
            continue;
        }
        tracing::info!(
            partitions = partitions.len(),
            "giving leaderships back to preferred replicas"
        );
        let command = MetadataCommand::ElectLeaders {
            unclean: false,
            partitions: Some(partitions),
        };
        if let Err(error) = controller.propose(command).await {
            tracing::warn!(%error, "the preferred-leader election failed");
        }
    }
}
