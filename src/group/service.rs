//! The task that owns the `GroupCoordinator`. Handlers talk to it through
//! `GroupService`, a cheap-to-clone handle: each call sends a command on a
//! bounded channel with a oneshot for its answer and awaits it
//! (`actor::Mailbox`). The task is the
//! only place the coordinator is mutated, so no lock exists at all; it also
//! ticks the coordinator with the injected clock.
//!
//! A join or sync whose answer comes later keeps its oneshot in a map keyed by
//! `ReplyTo` until the coordinator releases the `Reply`. A caller that went away
//! just finds its oneshot closed; the coordinator sees nothing of it, as Kafka
//! does not notice a client that gave up on a JoinGroup.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::mpsc;
use tokio::time::MissedTickBehavior;

use super::api::{
    GroupConfig, GroupDescription, JoinRequest, JoinResponse, Reply, ReplyTo, SyncRequest,
    SyncResponse,
};
use super::coordinator::GroupCoordinator;
use crate::actor::{self, Answer, Mailbox, Stopped};
use crate::clock::Clock;
use crate::random::RandomIds;

/// Commands queued for the coordinator task. A full queue makes handlers wait,
/// which is the backpressure a busy coordinator should cause.
pub const GROUP_COMMAND_QUEUE_CAPACITY: usize = 1024;

/// How often session timeouts, join delays and rebalance timeouts are checked.
/// Kafka's timers fire to the millisecond; 100 ms late is well inside the
/// seconds-long timeouts clients use.
pub const GROUP_TICK_INTERVAL_MS: u64 = 100;

/// The coordinator task has stopped; handlers answer COORDINATOR_NOT_AVAILABLE.
pub type GroupServiceStopped = Stopped;

type LeaveAnswer = (i16, Vec<i16>);

enum Command {
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
    List(Vec<String>, Answer<Vec<(String, String, String)>>),
    Delete(String, Answer<i16>),
    ValidateCommit {
        group_id: String,
        member_id: String,
        group_instance_id: Option<String>,
        generation_id: i32,
        answer: Answer<i16>,
    },
    ValidateTxnCommit {
        group_id: String,
        member_id: String,
        group_instance_id: Option<String>,
        generation_id: i32,
        answer: Answer<i16>,
    },
    IsEmptyOrUnknown(String, Answer<bool>),
    Restore {
        group_id: String,
        protocol_type: Option<String>,
        generation_id: i32,
        answer: Answer<()>,
    },
    TakeChanged(Answer<Vec<(String, Option<String>, i32)>>),
}

/// Handle to the coordinator task; cheap to clone. The task ends when the last handle is dropped.
#[derive(Clone)]
pub struct GroupService {
    mailbox: Mailbox<Command>,
}

impl GroupService {
    pub fn start(config: GroupConfig, clock: Arc<dyn Clock>) -> GroupService {
        let (mailbox, receiver) = actor::mailbox(GROUP_COMMAND_QUEUE_CAPACITY);
        let coordinator = GroupCoordinator::new(config, Box::new(RandomIds));
        tokio::spawn(run(coordinator, receiver, clock));
        GroupService { mailbox }
    }

    /// JoinGroup; `request.reply_to` is ignored (the task assigns its own).
    pub async fn join(&self, request: JoinRequest) -> Result<JoinResponse, GroupServiceStopped> {
        self.mailbox
            .call(|answer| Command::Join(request, answer))
            .await
    }

    /// SyncGroup; `request.reply_to` is ignored (the task assigns its own).
    pub async fn sync(&self, request: SyncRequest) -> Result<SyncResponse, GroupServiceStopped> {
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
    ) -> Result<i16, GroupServiceStopped> {
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
    ) -> Result<(i16, Vec<i16>), GroupServiceStopped> {
        self.mailbox
            .call(|answer| Command::Leave {
                group_id,
                members,
                answer,
            })
            .await
    }

    pub async fn describe(
        &self,
        group_id: String,
    ) -> Result<GroupDescription, GroupServiceStopped> {
        self.mailbox
            .call(|answer| Command::Describe(group_id, answer))
            .await
    }

    pub async fn list(
        &self,
        states_filter: Vec<String>,
    ) -> Result<Vec<(String, String, String)>, GroupServiceStopped> {
        self.mailbox
            .call(|answer| Command::List(states_filter, answer))
            .await
    }

    pub async fn delete(&self, group_id: String) -> Result<i16, GroupServiceStopped> {
        self.mailbox
            .call(|answer| Command::Delete(group_id, answer))
            .await
    }

    pub async fn validate_commit(
        &self,
        group_id: String,
        member_id: String,
        group_instance_id: Option<String>,
        generation_id: i32,
    ) -> Result<i16, GroupServiceStopped> {
        self.mailbox
            .call(|answer| Command::ValidateCommit {
                group_id,
                member_id,
                group_instance_id,
                generation_id,
                answer,
            })
            .await
    }

    /// TxnOffsetCommit's group checks (Kafka's `doTxnCommitOffsets`).
    pub async fn validate_txn_commit(
        &self,
        group_id: String,
        member_id: String,
        group_instance_id: Option<String>,
        generation_id: i32,
    ) -> Result<i16, GroupServiceStopped> {
        self.mailbox
            .call(|answer| Command::ValidateTxnCommit {
                group_id,
                member_id,
                group_instance_id,
                generation_id,
                answer,
            })
            .await
    }

    pub async fn is_empty_or_unknown(&self, group_id: String) -> Result<bool, GroupServiceStopped> {
        self.mailbox
            .call(|answer| Command::IsEmptyOrUnknown(group_id, answer))
            .await
    }

    pub async fn restore(
        &self,
        group_id: String,
        protocol_type: Option<String>,
        generation_id: i32,
    ) -> Result<(), GroupServiceStopped> {
        self.mailbox
            .call(|answer| Command::Restore {
                group_id,
                protocol_type,
                generation_id,
                answer,
            })
            .await
    }

    pub async fn take_changed(
        &self,
    ) -> Result<Vec<(String, Option<String>, i32)>, GroupServiceStopped> {
        self.mailbox.call(Command::TakeChanged).await
    }
}

/// The coordinator task's state besides the coordinator: the joins and syncs
/// still waiting for their answer.
struct Task {
    coordinator: GroupCoordinator,
    clock: Arc<dyn Clock>,
    next_reply_to: ReplyTo,
    joins: HashMap<ReplyTo, Answer<JoinResponse>>,
    syncs: HashMap<ReplyTo, Answer<SyncResponse>>,
}

async fn run(
    coordinator: GroupCoordinator,
    mut commands: mpsc::Receiver<Command>,
    clock: Arc<dyn Clock>,
) {
    let mut task = Task {
        coordinator,
        clock,
        next_reply_to: 0,
        joins: HashMap::new(),
        syncs: HashMap::new(),
    };
    let mut ticker = tokio::time::interval(Duration::from_millis(GROUP_TICK_INTERVAL_MS));
    ticker.set_missed_tick_behavior(MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            command = commands.recv() => match command {
                Some(command) => task.handle(command),
                None => break,
            },
            _ = ticker.tick() => {
                let replies = task.coordinator.tick(task.clock.now_ms());
                task.deliver(replies);
            }
        }
    }
}

impl Task {
    fn reply_to(&mut self) -> ReplyTo {
        self.next_reply_to = self.next_reply_to.wrapping_add(1);
        self.next_reply_to
    }

    fn handle(&mut self, command: Command) {
        let now_ms = self.clock.now_ms();
        match command {
            Command::Join(mut request, answer) => {
                request.reply_to = self.reply_to();
                self.joins.insert(request.reply_to, answer);
                let replies = self.coordinator.join(now_ms, request);
                self.deliver(replies);
            }
            Command::Sync(mut request, answer) => {
                request.reply_to = self.reply_to();
                self.syncs.insert(request.reply_to, answer);
                let replies = self.coordinator.sync(now_ms, request);
                self.deliver(replies);
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
            command => self.handle_immediate(now_ms, command),
        }
    }

    /// Commands answered at once and releasing no other answers.
    fn handle_immediate(&mut self, now_ms: i64, command: Command) {
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
            Command::Delete(group_id, answer) => {
                let _ = answer.send(coordinator.delete(&group_id));
            }
            Command::ValidateCommit {
                group_id,
                member_id,
                group_instance_id,
                generation_id,
                answer,
            } => {
                let instance = group_instance_id.as_deref();
                let error = coordinator.validate_commit(
                    now_ms,
                    &group_id,
                    &member_id,
                    instance,
                    generation_id,
                );
                let _ = answer.send(error);
            }
            Command::ValidateTxnCommit {
                group_id,
                member_id,
                group_instance_id,
                generation_id,
                answer,
            } => {
                let instance = group_instance_id.as_deref();
                let error =
                    coordinator.validate_txn_commit(&group_id, &member_id, instance, generation_id);
                let _ = answer.send(error);
            }
            Command::IsEmptyOrUnknown(group_id, answer) => {
                let _ = answer.send(coordinator.is_empty_or_unknown(&group_id));
            }
            Command::Restore {
                group_id,
                protocol_type,
                generation_id,
                answer,
            } => {
                coordinator.restore(&group_id, protocol_type, generation_id);
                let _ = answer.send(());
            }
            Command::TakeChanged(answer) => {
                let _ = answer.send(coordinator.take_changed());
            }
            Command::Join(..) | Command::Sync(..) | Command::Leave { .. } => {
                unreachable!("join, sync and leave are handled by Task::handle")
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
