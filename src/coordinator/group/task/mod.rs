//! The coordinator task: the one owner of the `GroupCoordinator`, of the joins
//! and syncs still waiting for their answer, and of the store work in flight.
//! No lock exists: everything here is touched by this task alone.
//!
//! A join or sync whose answer comes later keeps its oneshot in a map keyed by
//! `ReplyTo` until the coordinator releases the `Reply`. A caller that went away
//! just finds its oneshot closed; the coordinator sees nothing of it, as Kafka
//! does not notice a client that gave up on a JoinGroup.
//!
//! Store work runs in the task's `JoinSet` (fsyncs in the store's flusher,
//! blocking calls on the blocking pool) and comes back as a `Done`. A group's
//! own store operation holds the group's later commands in `order` until it is
//! done (see the service's module doc for why); work over every group (persist
//! rounds, expiry, the metrics read) holds nothing but what it must. Invariant:
//! the coordinator is changed only by this task, between awaits, and a group
//! never has two store operations in flight.
//!
//! A transaction's end on offsets partitions (`txn_completion`) runs here
//! whole: the read of the producer's groups, then each group's completion in
//! the group's order; for a partition still loading, only once its load is
//! done.

use std::collections::{HashMap, HashSet};
use std::future::Future;
use std::io;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::mpsc;
use tokio::task::{JoinError, JoinSet};
use tokio::time::MissedTickBehavior;

pub use self::ownership::restore;
use self::ownership::{refuse, LoadedGroups};
use self::store_work::{blocking, committed_rows};
use self::txn_completion::{CompletionId, Completions};
use super::api::{
    GroupDescription, JoinRequest, JoinResponse, Reply, ReplyTo, SyncRequest, SyncResponse,
};
use super::api::{GroupServiceConfig, ListedGroup};
use super::coordinator::GroupCoordinator;
use super::offsets::{
    CommitOutcome, CommittedRows, FetchedOffsets, OffsetCommit, SubscribedTopics, TxnOffsetCommit,
};
use super::order::{Access, GroupOrder, Store};
use crate::clock::Clock;
use crate::coordinator::actor::Answer;
use crate::coordinator::ownership::{
    FollowsLeadership, Leadership, LeadershipCommand, OwnedPartitions,
};
use crate::limits::GROUP_TICK_INTERVAL_MS;
use crate::limits::{GROUP_COMMANDS_HELD_MAX, GROUP_STORE_OPERATIONS_IN_FLIGHT_MAX};
use crate::store::{GroupRecord, OffsetStore, TxnOffsetStore};

mod ownership;
mod store_work;
mod txn_completion;

type LeaveAnswer = (i16, Vec<i16>);

/// One request to the task.
pub enum Command {
    Join(JoinRequest, Answer<JoinResponse>),
    Sync(SyncRequest, Answer<SyncResponse>),
    Heartbeat {
        group_id: String,
        member_id: String,
        group_instance_id: Option<String>,
        generation_id: i32,
        answer: Answer<i16>,
    },
    Leave {
        group_id: String,
        members: Vec<(String, Option<String>)>,
        answer: Answer<LeaveAnswer>,
    },
    Describe(String, Answer<GroupDescription>),
    List(Vec<String>, Answer<Vec<ListedGroup>>),
    Commit(OffsetCommit, Answer<CommitOutcome>),
    TxnCommit(TxnOffsetCommit, Answer<i16>),
    Fetch {
        group_id: String,
        require_stable: bool,
        answer: Answer<Result<FetchedOffsets, i16>>,
    },
    Delete(String, Answer<i16>),
    DeleteOffsets {
        group_id: String,
        topics: Vec<(String, Vec<i32>)>,
        subscribed: SubscribedTopics,
        answer: Answer<Result<HashSet<String>, i16>>,
    },
    /// A transaction ended on these offsets partitions: the producer's
    /// pending offsets in every group placed there are committed or dropped,
    /// a loading partition's once its load is done. Never refused.
    CompleteTxn {
        producer_id: i64,
        offsets_partitions: Vec<i32>,
        commit: bool,
        answer: Answer<io::Result<()>>,
    },
    /// The task's own, never the service's: one group's part of a
    /// `CompleteTxn`, in the group's order. Never refused.
    CompleteGroupTxn {
        group_id: String,
        producer_id: i64,
        commit: bool,
        completion: CompletionId,
    },
    CommittedOffsets(usize, Answer<io::Result<CommittedRows>>),
    /// This broker now leads, or no longer leads, a partition of the offsets
    /// topic: its groups are loaded and then served, or unloaded.
    Leadership(Leadership, Answer<()>),
    /// End the task; answered once the records are stored and the stores let go.
    Stop(Answer<io::Result<()>>),
}

impl LeadershipCommand for Command {
    fn leadership(change: Leadership, answer: Answer<()>) -> Command {
        Command::Leadership(change, answer)
    }
}

impl Command {
    /// The group whose order the command takes its place in; None for commands
    /// over every group, which run at once.
    fn group(&self) -> Option<(&str, Access)> {
        let (group_id, access) = match self {
            // A sync's assignment, or a join's new member id for a static
            // member, goes out once the group's record is stored
            // (`answer_once_stored`): a persist round storing it may yet fail.
            Command::Join(request, _) => (request.group_id.as_str(), Access::Record),
            Command::Sync(request, _) => (request.group_id.as_str(), Access::Record),
            Command::Heartbeat { group_id, .. }
            | Command::Leave { group_id, .. }
            | Command::Describe(group_id, _) => (group_id.as_str(), Access::Member),
            Command::Fetch { group_id, .. }
            | Command::DeleteOffsets { group_id, .. }
            | Command::CompleteGroupTxn { group_id, .. } => (group_id.as_str(), Access::Offsets),
            Command::Commit(commit, _) => (commit.group_id.as_str(), Access::Offsets),
            Command::TxnCommit(commit, _) => (commit.group_id.as_str(), Access::Offsets),
            Command::Delete(group_id, _) => (group_id.as_str(), Access::Delete),
            Command::List(..)
            | Command::CompleteTxn { .. }
            | Command::CommittedOffsets(..)
            | Command::Leadership(..)
            | Command::Stop(_) => return None,
        };
        Some((group_id, access))
    }
}

/// The stores the task owns.
pub struct Stores {
    pub offsets: Arc<dyn OffsetStore>,
    pub pending: Arc<dyn TxnOffsetStore>,
}

/// Store work that has finished.
struct Done {
    /// The group whose store operation this was, and its kind; None for work
    /// over every group.
    group_id: Option<(String, Store)>,
    then: Then,
}

/// What the task still has to do with a result; most work answers its caller
/// itself.
enum Then {
    Nothing,
    Deleted {
        group_id: String,
        /// The group's record before the deletion, to put back if it failed.
        record: Option<GroupRecord>,
        /// Ok(false): the group was unknown and had no offsets.
        outcome: io::Result<bool>,
        answer: Answer<i16>,
    },
    Persisted {
        groups: Vec<String>,
        /// The groups whose record could not be stored.
        outcome: io::Result<Vec<String>>,
    },
    /// The groups whose offsets are all past retention, read without holding any.
    ExpiryCandidates(io::Result<Vec<String>>),
    /// An expiry round over these groups, which it held.
    Expired {
        groups: Vec<String>,
        outcome: io::Result<usize>,
    },
    /// A group's record was stored (or not) before its join or sync answers go out.
    RecordStored {
        group_id: String,
        replies: Vec<Reply>,
        error: i16,
    },
    /// The groups a transaction's completion is to complete.
    TxnGroups {
        completion: CompletionId,
        groups: io::Result<Vec<String>>,
    },
    /// One group's part of a transaction's completion is done.
    TxnGroupCompleted {
        completion: CompletionId,
        outcome: io::Result<()>,
    },
    /// A partition's groups were read from the store, for this leader epoch.
    Loaded {
        partition: i32,
        leader_epoch: i32,
        loaded: io::Result<LoadedGroups>,
    },
}

pub struct Task {
    coordinator: GroupCoordinator,
    config: GroupServiceConfig,
    stores: Stores,
    clock: Arc<dyn Clock>,
    next_reply_to: ReplyTo,
    joins: HashMap<ReplyTo, Answer<JoinResponse>>,
    syncs: HashMap<ReplyTo, Answer<SyncResponse>>,
    order: GroupOrder<Command>,
    /// Store work in flight: at most one operation per group, one persist round
    /// and one expiry; bounded by `GROUP_STORE_OPERATIONS_IN_FLIGHT_MAX`.
    work: JoinSet<Done>,
    persisting: bool,
    /// Groups whose record a join or sync is storing (`answer_once_stored`):
    /// a persist round leaves them alone, so two writes of one group's record
    /// never race to land last.
    storing_records: HashSet<String>,
    expiring: bool,
    /// The offsets partitions whose groups this task serves or is loading,
    /// published to the service.
    owned: OwnedPartitions,
    /// Transactions' completions in flight, and those held for loads.
    completions: Completions,
}

fn interval(period_ms: u64) -> tokio::time::Interval {
    let mut ticker = tokio::time::interval(Duration::from_millis(period_ms.max(1)));
    ticker.set_missed_tick_behavior(MissedTickBehavior::Delay);
    ticker
}

impl Task {
    pub fn new(
        coordinator: GroupCoordinator,
        config: GroupServiceConfig,
        stores: Stores,
        clock: Arc<dyn Clock>,
        owned: OwnedPartitions,
    ) -> Task {
        Task {
            coordinator,
            config,
            stores,
            clock,
            next_reply_to: 0,
            joins: HashMap::new(),
            syncs: HashMap::new(),
            order: GroupOrder::default(),
            work: JoinSet::new(),
            persisting: false,
            storing_records: HashSet::new(),
            expiring: false,
            owned,
            completions: Completions::default(),
        }
    }

    pub async fn run(mut self, mut commands: mpsc::Receiver<Command>) {
        let mut ticker = interval(GROUP_TICK_INTERVAL_MS);
        let mut persist = interval(self.config.persist_interval_ms);
        let mut expire = interval(self.config.retention_check_interval_ms);
        persist.reset();
        expire.reset();
        let stop = loop {
            let taking = self.order.held() < GROUP_COMMANDS_HELD_MAX
                && self.work.len() < GROUP_STORE_OPERATIONS_IN_FLIGHT_MAX;
            tokio::select! {
                biased;
                Some(joined) = self.work.join_next() => self.on_done(joined),
                command = commands.recv(), if taking => match command {
                    Some(Command::Stop(answer)) => break Some(answer),
                    Some(command) => self.admit(command),
                    None => break None,
                },
                _ = ticker.tick() => {
                    let replies = self.coordinator.tick(self.clock.now_ms());
                    self.deliver(replies);
                }
                _ = persist.tick() => self.start_persist(),
                _ = expire.tick() => self.start_expiry(),
            }
        };
        // Held commands run as their groups' work finishes, so this ends with
        // nothing in flight and nothing held.
        while let Some(joined) = self.work.join_next().await {
            self.on_done(joined);
        }
        let persisted = self.persist_now().await;
        if let Err(error) = &persisted {
            tracing::error!(%error, "persisting group records at shutdown failed");
        }
        drop(self);
        if let Some(answer) = stop {
            // The caller may have gone away; the stores are released either way.
            let _ = answer.send(persisted);
        }
    }

    /// Runs the command now, or holds it behind its group's store work.
    fn admit(&mut self, command: Command) {
        let Some((group_id, access)) = command.group() else {
            return self.handle(command);
        };
        let group_id = group_id.to_string();
        if let Some(command) = self.order.admit(&group_id, access, command) {
            self.handle(command);
        }
    }

    /// Runs the group's held commands that may run now, in order.
    fn release(&mut self, group_id: &str) {
        while let Some(command) = self.order.next_ready(group_id) {
            self.handle(command);
        }
    }

    fn on_done(&mut self, joined: Result<Done, JoinError>) {
        let done = match joined {
            Ok(done) => done,
            // A job panicked: a broken invariant, which must not pass silently.
            Err(error) if error.is_panic() => std::panic::resume_unwind(error.into_panic()),
            // Jobs are never aborted; only a runtime shutting down cancels them.
            Err(_) => return,
        };
        match done.then {
            Then::Nothing => {}
            Then::Deleted {
                group_id,
                record,
                outcome,
                answer,
            } => self.deleted(&group_id, record, outcome, answer),
            Then::Persisted { groups, outcome } => {
                self.persisting = false;
                match outcome {
                    // Stored in a later round, unless they left meanwhile.
                    Ok(failed) => {
                        for group_id in failed {
                            self.coordinator.forget_persisted(&group_id);
                        }
                    }
                    Err(error) => {
                        tracing::error!(%error, "persisting group records failed");
                        for group_id in &groups {
                            self.coordinator.forget_persisted(group_id);
                        }
                    }
                }
                for group_id in groups {
                    self.order.end_saving(&group_id);
                    self.release(&group_id);
                }
            }
            Then::Loaded {
                partition,
                leader_epoch,
                loaded,
            } => self.loaded(partition, leader_epoch, loaded),
            Then::RecordStored {
                group_id,
                replies,
                error,
            } => {
                self.storing_records.remove(&group_id);
                self.record_stored(&group_id, replies, error)
            }
            Then::TxnGroups { completion, groups } => self.txn_groups(completion, groups),
            Then::TxnGroupCompleted {
                completion,
                outcome,
            } => self.txn_part_done(completion, outcome),
            Then::ExpiryCandidates(candidates) => self.expire_candidates(candidates),
            Then::Expired { groups, outcome } => {
                self.expiring = false;
                for group_id in groups {
                    self.order.end_store(&group_id, Store::Offsets);
                    self.release(&group_id);
                }
                match outcome {
                    Ok(0) => {}
                    Ok(count) => tracing::info!(count, "expired committed offsets"),
                    Err(error) => tracing::error!(%error, "expiring committed offsets failed"),
                }
            }
        }
        if let Some((group_id, store)) = done.group_id {
            self.order.end_store(&group_id, store);
            self.release(&group_id);
        }
    }

    /// Runs `work` as the group's store operation of kind `store`: the
    /// group's later commands that conflict with it are held until it is done.
    fn store_op(
        &mut self,
        group_id: String,
        store: Store,
        work: impl Future<Output = Then> + Send + 'static,
    ) {
        self.order.begin_store(&group_id, store);
        self.work.spawn(async move {
            let then = work.await;
            Done {
                group_id: Some((group_id, store)),
                then,
            }
        });
    }

    /// Runs `work` ordered with no group.
    fn background(&mut self, work: impl Future<Output = Then> + Send + 'static) {
        self.work.spawn(async move {
            let then = work.await;
            Done {
                group_id: None,
                then,
            }
        });
    }

    fn reply_to(&mut self) -> ReplyTo {
        self.next_reply_to = self.next_reply_to.wrapping_add(1);
        self.next_reply_to
    }

    fn handle(&mut self, command: Command) {
        let now_ms = self.clock.now_ms();
        if let Some(error) = self.refusal(&command) {
            return refuse(command, error);
        }
        match command {
            Command::Join(mut request, answer) => {
                request.reply_to = self.reply_to();
                self.joins.insert(request.reply_to, answer);
                let group_id = request.group_id.clone();
                let replies = self.coordinator.join(now_ms, request);
                self.answer_once_stored(group_id, replies);
            }
            Command::Sync(mut request, answer) => {
                request.reply_to = self.reply_to();
                self.syncs.insert(request.reply_to, answer);
                let group_id = request.group_id.clone();
                let replies = self.coordinator.sync(now_ms, request);
                self.answer_once_stored(group_id, replies);
            }
            Command::Leave {
                group_id,
                members,
                answer,
            } => {
                let (error, member_errors, replies) =
                    self.coordinator.leave(now_ms, &group_id, &members);
                self.deliver(replies);
                // The caller may have gone away; nothing depends on it hearing back.
                let _ = answer.send((error, member_errors));
            }
            Command::Commit(commit, answer) => self.commit(now_ms, commit, answer),
            Command::TxnCommit(commit, answer) => self.txn_commit(commit, answer),
            Command::Delete(group_id, answer) => self.delete(group_id, answer),
            Command::DeleteOffsets {
                group_id,
                topics,
                subscribed,
                answer,
            } => self.delete_offsets(group_id, topics, subscribed, answer),
            Command::CompleteTxn {
                producer_id,
                offsets_partitions,
                commit,
                answer,
            } => self.complete_txn_offsets(producer_id, offsets_partitions, commit, answer),
            Command::CompleteGroupTxn {
                group_id,
                producer_id,
                commit,
                completion,
            } => self.complete_group_txn(group_id, producer_id, commit, completion),
            command => self.handle_read(now_ms, command),
        }
    }

    /// Commands that change no group: answered at once, or by a store read.
    fn handle_read(&mut self, now_ms: i64, command: Command) {
        let coordinator = &mut self.coordinator;
        // Every `send` below may find its caller gone; that is harmless.
        match command {
            Command::Heartbeat {
                group_id,
                member_id,
                group_instance_id,
                generation_id,
                answer,
            } => {
                let instance = group_instance_id.as_deref();
                let _ = answer.send(coordinator.heartbeat(
                    now_ms,
                    &group_id,
                    &member_id,
                    instance,
                    generation_id,
                ));
            }
            Command::Describe(group_id, answer) => {
                let _ = answer.send(coordinator.describe(&group_id));
            }
            Command::List(states_filter, answer) => {
                let _ = answer.send(coordinator.list(&states_filter));
            }
            Command::Fetch {
                group_id,
                require_stable,
                answer,
            } => self.fetch(group_id, require_stable, answer),
            Command::CommittedOffsets(rows_max, answer) => {
                let offsets = Arc::clone(&self.stores.offsets);
                let served = self.owned.served();
                self.background(async move {
                    let rows = blocking(move || {
                        committed_rows(offsets.as_ref(), rows_max, served.as_ref())
                    });
                    let _ = answer.send(rows.await);
                    Then::Nothing
                });
            }
            Command::Leadership(change, answer) => {
                self.follow(change);
                // A resignation fails the completions held for the partition's load.
                self.settle_held_completions();
                let _ = answer.send(());
            }
            Command::Join(..)
            | Command::Sync(..)
            | Command::Leave { .. }
            | Command::Commit(..)
            | Command::TxnCommit(..)
            | Command::Delete(..)
            | Command::DeleteOffsets { .. }
            | Command::CompleteTxn { .. }
            | Command::CompleteGroupTxn { .. }
            | Command::Stop(_) => {
                unreachable!("changes are handled by Task::handle, a stop by Task::run")
            }
        }
    }

    fn deliver(&mut self, replies: Vec<Reply>) {
        for reply in replies {
            // A missing entry or a closed oneshot means the caller gave up.
            match reply {
                Reply::Join(reply_to, response) => {
                    if let Some(answer) = self.joins.remove(&reply_to) {
                        let _ = answer.send(response);
                    }
                }
                Reply::Sync(reply_to, response) => {
                    if let Some(answer) = self.syncs.remove(&reply_to) {
                        let _ = answer.send(response);
                    }
                }
            }
        }
    }
}
