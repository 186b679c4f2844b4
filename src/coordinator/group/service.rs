//! `GroupService`, the cheap-to-clone handle through which handlers reach the
//! group coordinator, and its start. Each call is one command on a bounded
//! channel (`actor::Mailbox`) to the one task that owns the coordinator
//! (`task`), with a oneshot for its answer. The service owns the offsets store
//! and the pending transactional offsets: no handler touches a store, so every
//! offset API is checked and stored by the coordinator that owns the group.
//!
//! One step per group, without stalling the others: the task checks a request
//! against the group and starts its store operation (a commit's fsync, a
//! fetch's read, a deletion), then goes on with other groups' commands while
//! that runs; commands of the same group that arrive meanwhile are held and run
//! in arrival order once the store has answered (`order`). So a commit racing a
//! DeleteGroups either lands before the deletion (and goes with it) or is
//! checked against the group as the deletion left it, never in between; and an
//! OffsetFetch always reads after every write of its group that came before it.
//! Blocking store calls run on the blocking pool, never on a runtime worker.
//!
//! The task also ticks the coordinator with the injected clock (session and
//! rebalance timeouts), stores the records of changed groups every
//! `persist_interval_ms` and at shutdown, and expires the committed offsets of
//! empty groups every `retention_check_interval_ms`. At start (or, elected, at
//! each load) it restores every stored group from its record: Stable with its
//! members, or Empty.

use std::collections::HashSet;
use std::io;
use std::sync::Arc;
use std::time::Duration;

use super::api::{
    GroupDescription, JoinRequest, JoinResponse, ListedGroup, SyncRequest, SyncResponse,
};
use super::api::{GroupServiceConfig, Ownership};
use super::coordinator::GroupCoordinator;
use super::offsets::{
    CommitOutcome, CommittedRows, FetchedOffsets, OffsetCommit, SubscribedTopics, TxnOffsetCommit,
};
use super::task::{restore, Command, Stores, Task};
use crate::clock::Clock;
use crate::coordinator::actor::{self, Mailbox, Stopped};
use crate::coordinator::ownership::{
    Leadership, LedInLatestImage, OwnedPartitions, ServedPartitions,
};
use crate::error_code;
use crate::internal_topics::group_partition;
use crate::limits::{GROUP_COMMAND_QUEUE_MAX, OFFSET_COMMIT_LOAD_WAIT_MS};
use crate::random::IdSource;
use crate::store::{OffsetStore, TxnOffsetStore};

/// The coordinator task has stopped; handlers answer COORDINATOR_NOT_AVAILABLE.
pub type GroupServiceStopped = Stopped;

/// What the service needs from the rest of the broker.
pub struct GroupDeps {
    /// Committed offsets and group records.
    pub offsets: Arc<dyn OffsetStore>,
    /// Offsets pending in open transactions.
    pub pending: Arc<dyn TxnOffsetStore>,
    pub clock: Arc<dyn Clock>,
    /// Where member ids come from.
    pub ids: Arc<dyn IdSource>,
    /// The offsets partitions the latest image has this broker lead.
    pub led_in_latest_image: LedInLatestImage,
}

/// Handle to the coordinator task; cheap to clone. The task ends on `shutdown`
/// or when the last handle is dropped.
#[derive(Clone)]
pub struct GroupService {
    mailbox: Mailbox<Command>,
    /// The offsets partitions whose groups are served.
    served: ServedPartitions,
}

impl GroupService {
    /// Starts the task; with `Ownership::Every` it first restores every stored
    /// group, with `Ownership::Elected` it serves none until elected.
    pub async fn start(config: GroupServiceConfig, deps: GroupDeps) -> io::Result<GroupService> {
        let mut coordinator = GroupCoordinator::new(config.coordinator, deps.ids);
        if config.ownership == Ownership::Every {
            let offsets = Arc::clone(&deps.offsets);
            let (records, with_offsets) = tokio::task::spawn_blocking(move || -> io::Result<_> {
                Ok((offsets.load_groups()?, offsets.groups_with_offsets()?))
            })
            .await
            .map_err(io::Error::other)??;
            restore(&mut coordinator, records, with_offsets, deps.clock.now_ms());
        }
        let (mailbox, receiver) = actor::mailbox(GROUP_COMMAND_QUEUE_MAX);
        let stores = Stores {
            offsets: deps.offsets,
            pending: deps.pending,
        };
        let (owned, served) = OwnedPartitions::new(config.ownership, deps.led_in_latest_image);
        let task = Task::new(coordinator, config, stores, deps.clock, owned);
        tokio::spawn(task.run(receiver));
        Ok(GroupService { mailbox, served })
    }

    /// JoinGroup; `request.reply_to` is ignored (the task assigns its own).
    pub async fn join(&self, request: JoinRequest) -> Result<JoinResponse, Stopped> {
        self.mailbox
            .call(|answer| Command::Join(request, answer))
            .await
    }

    /// SyncGroup; `request.reply_to` is ignored (the task assigns its own).
    pub async fn sync(&self, request: SyncRequest) -> Result<SyncResponse, Stopped> {
        self.mailbox
            .call(|answer| Command::Sync(request, answer))
            .await
    }

    pub async fn heartbeat(
        &self,
        group_id: String,
        member_id: String,
        group_instance_id: Option<String>,
        generation_id: i32,
    ) -> Result<i16, Stopped> {
        self.mailbox
            .call(|answer| Command::Heartbeat {
                group_id,
                member_id,
                group_instance_id,
                generation_id,
                answer,
            })
            .await
    }

    /// LeaveGroup: the group-level error and one error per member.
    pub async fn leave(
        &self,
        group_id: String,
        members: Vec<(String, Option<String>)>,
    ) -> Result<(i16, Vec<i16>), Stopped> {
        self.mailbox
            .call(|answer| Command::Leave {
                group_id,
                members,
                answer,
            })
            .await
    }

    pub async fn describe(&self, group_id: String) -> Result<GroupDescription, Stopped> {
        self.mailbox
            .call(|answer| Command::Describe(group_id, answer))
            .await
    }

    pub async fn list(&self, states_filter: Vec<String>) -> Result<Vec<ListedGroup>, Stopped> {
        self.mailbox
            .call(|answer| Command::List(states_filter, answer))
            .await
    }

    /// DeleteGroups for one group: an Empty group (or one known only by its
    /// committed offsets) goes with its offsets and record, in one step.
    pub async fn delete(&self, group_id: String) -> Result<i16, Stopped> {
        self.mailbox
            .call(|answer| Command::Delete(group_id, answer))
            .await
    }

    /// OffsetCommit: the group's checks, then the store, in one step. A commit
    /// that finds its group's partition loading waits for the load (at most
    /// `OFFSET_COMMIT_LOAD_WAIT_MS`) and is tried once more: librdkafka hands
    /// COORDINATOR_LOAD_IN_PROGRESS to a synchronous commit as its error rather
    /// than retrying, and a partition loads as soon as its leadership moves.
    pub async fn commit_offsets(&self, commit: OffsetCommit) -> Result<CommitOutcome, Stopped> {
        let partition = group_partition(&commit.group_id);
        let again = commit.clone();
        let outcome = self
            .mailbox
            .call(|answer| Command::Commit(commit, answer))
            .await?;
        if outcome != CommitOutcome::Refused(error_code::COORDINATOR_LOAD_IN_PROGRESS) {
            return Ok(outcome);
        }
        let wait = Duration::from_millis(OFFSET_COMMIT_LOAD_WAIT_MS);
        if !self.wait_served(partition, wait).await {
            return Ok(outcome);
        }
        self.mailbox
            .call(|answer| Command::Commit(again, answer))
            .await
    }

    /// TxnOffsetCommit after the transaction coordinator admitted it: the
    /// group's checks (Kafka's `doTxnCommitOffsets`), then the offsets stored
    /// as pending, in one step. One error for every offset given.
    pub async fn txn_commit_offsets(&self, commit: TxnOffsetCommit) -> Result<i16, Stopped> {
        self.mailbox
            .call(|answer| Command::TxnCommit(commit, answer))
            .await
    }

    /// OffsetFetch of one group, read after every earlier write of the group;
    /// Err(UNKNOWN_SERVER_ERROR) if the store could not be read.
    pub async fn fetch_offsets(
        &self,
        group_id: String,
        require_stable: bool,
    ) -> Result<Result<FetchedOffsets, i16>, Stopped> {
        self.mailbox
            .call(|answer| Command::Fetch {
                group_id,
                require_stable,
                answer,
            })
            .await
    }

    /// OffsetDelete: the offsets of these partitions go, except those of topics
    /// the group's members subscribe to (as `subscribed` reads them), checked
    /// and deleted in one step. Ok(the subscribed topics, which were kept) or
    /// the group's error.
    pub async fn delete_offsets(
        &self,
        group_id: String,
        topics: Vec<(String, Vec<i32>)>,
        subscribed: SubscribedTopics,
    ) -> Result<Result<HashSet<String>, i16>, Stopped> {
        self.mailbox
            .call(|answer| Command::DeleteOffsets {
                group_id,
                topics,
                subscribed,
                answer,
            })
            .await
    }

    /// The end of a transaction on these partitions of the offsets topic, once
    /// its marker is in them: the producer's pending offsets in every group
    /// placed there are committed (`commit`) or dropped, each group in its own
    /// order; on a partition loading after an election, once the load is done
    /// (it may have read the log before the marker). Durable on `Ok`; an error
    /// (a store failure, the partition resigned during its load) is retried by
    /// the transaction coordinator.
    pub async fn complete_txn_offsets(
        &self,
        producer_id: i64,
        offsets_partitions: Vec<i32>,
        commit: bool,
    ) -> io::Result<()> {
        self.mailbox
            .call(|answer| Command::CompleteTxn {
                producer_id,
                offsets_partitions,
                commit,
                answer,
            })
            .await
            .map_err(io::Error::other)?
    }

    /// This broker now leads a partition of the offsets topic, or no longer
    /// does: an election loads the partition's groups, then serves them
    /// (`Ownership::Elected`; `continued`, see `Leadership::Elected`), and a
    /// resignation unloads them. Returns once the task has taken the change.
    pub async fn follow(&self, change: Leadership) -> Result<(), Stopped> {
        self.mailbox.follow(change).await
    }

    /// Waits, at most `wait`, until the groups of `partition` are served here
    /// (loaded after an election); whether they are.
    pub async fn wait_served(&self, partition: i32, wait: Duration) -> bool {
        self.served.wait(partition, wait).await
    }

    /// Committed offsets across groups for a metrics scrape, at most `rows_max`.
    pub async fn committed_offsets(
        &self,
        rows_max: usize,
    ) -> Result<io::Result<CommittedRows>, Stopped> {
        self.mailbox
            .call(|answer| Command::CommittedOffsets(rows_max, answer))
            .await
    }

    /// Waits for every store operation in flight, stores the records of groups
    /// that changed, and ends the task, which lets go of the stores. Later calls
    /// get `Stopped`.
    pub async fn shutdown(&self) -> io::Result<()> {
        self.mailbox
            .call(Command::Stop)
            .await
            .map_err(io::Error::other)?
    }
}
