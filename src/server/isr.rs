//! The leader's side of ISR changes: proposals go to the controller as Kafka's
//! AlterPartition (a metadata command forwarded to the raft leader), and every
//! partition this broker leads is checked for lagging members at half of
//! `replica.lag.time.max.ms`, as Kafka's `isr-expiration` task does.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;

use crate::controller::{CommandOutcome, Controller, MetadataCommand};
use crate::limits::ISR_SHRINK_CHECK_INTERVAL_MS_MAX;
use crate::replica::{BoxFuture, IsrChange, IsrProposer, ReplicaManager};

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
    ) -> BoxFuture<'static, Option<(i32, i32, Vec<i32>)>> {
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
                }) => Some((leader_epoch, partition_epoch, isr)),
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
    let mut tick = tokio::time::interval(Duration::from_millis(period_ms));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    tick.reset();
    loop {
        tokio::select! {
            _ = stopped.changed() => return,
            _ = tick.tick() => {}
        }
        let replicas = Arc::clone(&replicas);
        let _ = tokio::task::spawn_blocking(move || replicas.shrink_isrs()).await;
    }
}
