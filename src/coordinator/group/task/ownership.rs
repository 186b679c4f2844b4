//! Which groups the task serves. With `Ownership::Every`, all of them from the
//! start. With `Ownership::Elected`, those of the offsets partitions this broker
//! leads: an election loads the partition's groups from the store (its
//! requests answered COORDINATOR_LOAD_IN_PROGRESS meanwhile), a resignation
//! unloads them (waiting joins and syncs answered NOT_COORDINATOR), and the
//! groups of every other partition are answered NOT_COORDINATOR, as Kafka's
//! GroupMetadataManager does. The table of partitions and what is served is
//! placement's `OwnedPartitions`, which the transaction coordinator keeps too;
//! what a load reads and an unload drops is here.
//!
//! Invariant: a group is in the coordinator only while its partition is
//! `Loaded` here (or ownership is `Every`); a load that finishes after its
//! partition was resigned, or re-elected in a later epoch, is dropped.

use std::io;
use std::sync::Arc;
use std::time::Duration;

use super::store_work::blocking;
use super::{Command, Task, Then};
use crate::coordinator::group::api::{GroupDescription, JoinResponse, SyncResponse};
use crate::coordinator::group::coordinator::GroupCoordinator;
use crate::coordinator::group::offsets::CommitOutcome;
use crate::coordinator::ownership::{FollowsLeadership, OwnedPartitions, Refusal};
use crate::error_code;
use crate::internal_topics::group_partition;
use crate::limits::GROUP_LOAD_RETRY_BACKOFF_MS;
use crate::store::GroupRecord;

/// One partition's groups as the store holds them.
pub struct LoadedGroups {
    records: Vec<(String, GroupRecord)>,
    with_offsets: Vec<String>,
}

impl Task {
    /// None when the command's group is served here, else the error to answer
    /// it with. A transaction's completion is never refused: its pending
    /// offsets are this broker's own (a loading partition's completion is
    /// held for the load instead, `txn_completion`).
    pub(super) fn refusal(&self, command: &Command) -> Option<i16> {
        if matches!(
            command,
            Command::CompleteTxn { .. } | Command::CompleteGroupTxn { .. }
        ) {
            return None;
        }
        let (group_id, _) = command.group()?;
        self.refusal_of(group_id)
    }

    /// None when `group_id` is served here, else the error its requests get.
    pub(super) fn refusal_of(&self, group_id: &str) -> Option<i16> {
        let refusal = self.owned.refusal(group_partition(group_id))?;
        Some(match refusal {
            Refusal::Loading => error_code::COORDINATOR_LOAD_IN_PROGRESS,
            Refusal::NotLeader => error_code::NOT_COORDINATOR,
        })
    }

    /// A load finished: its groups are served, unless the partition was
    /// resigned or re-elected meanwhile. A failed load is tried again.
    pub(super) fn loaded(
        &mut self,
        partition: i32,
        leader_epoch: i32,
        loaded: io::Result<LoadedGroups>,
    ) {
        if !self.owned.is_loading(partition, leader_epoch) {
            return;
        }
        match loaded {
            Ok(groups) => {
                let count = groups.records.len().max(groups.with_offsets.len());
                let now_ms = self.clock.now_ms();
                restore(
                    &mut self.coordinator,
                    groups.records,
                    groups.with_offsets,
                    now_ms,
                );
                self.owned.finish_load(partition, leader_epoch);
                // Completions that waited for the load run against what it left.
                self.settle_held_completions();
                tracing::info!(
                    partition,
                    leader_epoch,
                    groups = count,
                    "coordinating the groups of an offsets partition"
                );
            }
            Err(error) => {
                tracing::warn!(partition, leader_epoch, %error, "loading the groups of an offsets partition failed; retrying");
                let backoff = Duration::from_millis(GROUP_LOAD_RETRY_BACKOFF_MS);
                self.start_load(partition, leader_epoch, backoff);
            }
        }
    }
}

/// Elections load the partition's groups from the store; resignations (and
/// the reload of a later epoch) unload them.
impl FollowsLeadership for Task {
    fn owned(&mut self) -> &mut OwnedPartitions {
        &mut self.owned
    }

    fn start_load(&mut self, partition: i32, leader_epoch: i32, delay: Duration) {
        let offsets = Arc::clone(&self.stores.offsets);
        self.background(async move {
            tokio::time::sleep(delay).await;
            let loaded = blocking(move || {
                offsets.load_partition(partition, leader_epoch)?;
                let placed = |group_id: &str| group_partition(group_id) == partition;
                let records = offsets.load_groups()?;
                let with_offsets = offsets.groups_with_offsets()?;
                Ok(LoadedGroups {
                    records: records.into_iter().filter(|(g, _)| placed(g)).collect(),
                    with_offsets: with_offsets.into_iter().filter(|g| placed(g)).collect(),
                })
            })
            .await;
            Then::Loaded {
                partition,
                leader_epoch,
                loaded,
            }
        });
    }

    fn raise_epoch(&mut self, partition: i32, leader_epoch: i32) {
        self.stores.offsets.raise_epoch(partition, leader_epoch);
        tracing::info!(
            partition,
            leader_epoch,
            "still coordinating the groups of an offsets partition, in a later epoch"
        );
    }

    /// The groups of `partition`, no longer led here, leave the coordinator.
    fn unload(&mut self, partition: i32) {
        let replies = self
            .coordinator
            .unload(|group_id| group_partition(group_id) == partition);
        self.deliver(replies);
        tracing::info!(
            partition,
            "no longer coordinating the groups of an offsets partition"
        );
    }
}

/// Answers a command for a group not served here with `error`.
pub(super) fn refuse(command: Command, error: i16) {
    // Every `send` may find its caller gone; that is harmless.
    match command {
        Command::Join(request, answer) => {
            let _ = answer.send(JoinResponse::error(&request.member_id, error));
        }
        Command::Sync(_, answer) => {
            let _ = answer.send(SyncResponse::error(error));
        }
        Command::Heartbeat { answer, .. } => {
            let _ = answer.send(error);
        }
        Command::Leave {
            members, answer, ..
        } => {
            let _ = answer.send((error, vec![error; members.len()]));
        }
        Command::Describe(_, answer) => {
            let _ = answer.send(GroupDescription {
                error,
                ..GroupDescription::dead()
            });
        }
        Command::Commit(_, answer) => {
            let _ = answer.send(CommitOutcome::Refused(error));
        }
        Command::TxnCommit(commit, answer) => {
            drop(commit.hold);
            let _ = answer.send(error);
        }
        Command::Fetch { answer, .. } => {
            let _ = answer.send(Err(error));
        }
        Command::Delete(_, answer) => {
            let _ = answer.send(error);
        }
        Command::DeleteOffsets { answer, .. } => {
            let _ = answer.send(Err(error));
        }
        Command::CompleteTxn { answer, .. } => {
            let _ = answer.send(Err(io::Error::other(format!(
                "group not served here ({error})"
            ))));
        }
        Command::CompleteGroupTxn { .. } => {
            unreachable!("a group's part of a transaction's completion is never refused")
        }
        Command::List(_, answer) => {
            let _ = answer.send(Vec::new());
        }
        Command::CommittedOffsets(_, answer) => {
            let _ = answer.send(Ok(Default::default()));
        }
        Command::Leadership(_, answer) => {
            let _ = answer.send(());
        }
        Command::Stop(answer) => {
            let _ = answer.send(Ok(()));
        }
    }
}

/// Groups come back from their stored records after a restart or a move
/// (Stable with their members, or Empty), their members' sessions starting at
/// `now_ms`; groups known only by their committed offsets come back Empty.
pub fn restore(
    coordinator: &mut GroupCoordinator,
    records: Vec<(String, GroupRecord)>,
    with_offsets: Vec<String>,
    now_ms: i64,
) {
    for (group_id, record) in records {
        coordinator.restore(&group_id, record, now_ms);
    }
    // `restore` leaves a group that came back with its record alone.
    for group_id in with_offsets {
        coordinator.restore(&group_id, GroupRecord::default(), now_ms);
    }
}
