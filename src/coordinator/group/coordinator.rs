//! The group coordinator: every classic consumer group this broker coordinates,
//! as a pure state machine over plain values (Kafka's `GroupCoordinator`). It
//! reads no clock (each call carries `now_ms`), draws member ids only from the
//! `IdSource` it was given, and does no I/O; a join or sync
//! that must wait is remembered by its `ReplyTo`, and its answer comes back in
//! the `Reply` list of whichever later call (or `tick`) completes it.
//!
//! Owned by exactly one task (`GroupService`); not shared.

use std::collections::HashMap;
use std::fmt;
use std::sync::Arc;

use super::api::{
    GroupConfig, GroupDescription, JoinRequest, JoinResponse, ListedGroup, Reply, SyncRequest,
    SyncResponse,
};
use super::join::{accept_joining_member, join_current_member, join_new_member};
use super::state::{Group, GroupState};
use crate::error_code;
use crate::random::IdSource;
use crate::store::GroupRecord;

pub use super::api::{DescribedMember, JoinedMember, ReplyTo};

pub struct GroupCoordinator {
    config: GroupConfig,
    groups: HashMap<String, Group>,
    /// Each group's record as last handed out by `take_changed`.
    persisted: HashMap<String, GroupRecord>,
    /// Where new member ids come from (random on a broker, seeded in tests).
    ids: Arc<dyn IdSource>,
}

impl fmt::Debug for GroupCoordinator {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("GroupCoordinator")
            .field("config", &self.config)
            .field("groups", &self.groups)
            .field("persisted", &self.persisted)
            .finish_non_exhaustive()
    }
}

impl GroupCoordinator {
    pub fn new(config: GroupConfig, ids: Arc<dyn IdSource>) -> GroupCoordinator {
        GroupCoordinator {
            config,
            groups: HashMap::new(),
            persisted: HashMap::new(),
            ids,
        }
    }

    /// JoinGroup. The answer to `request` may be in the result or come later.
    pub fn join(&mut self, now_ms: i64, request: JoinRequest) -> Vec<Reply> {
        let reply_now = |error| {
            vec![Reply::Join(
                request.reply_to,
                JoinResponse::error(&request.member_id, error),
            )]
        };
        if request.group_id.is_empty() {
            return reply_now(error_code::INVALID_GROUP_ID);
        }
        let timeout_ms = request.session_timeout_ms;
        if timeout_ms < self.config.min_session_timeout_ms
            || timeout_ms > self.config.max_session_timeout_ms
        {
            return reply_now(error_code::INVALID_SESSION_TIMEOUT);
        }
        let is_unknown_member = request.member_id.is_empty();
        // A group is only created by a member that does not have an id yet.
        if !is_unknown_member && !self.groups.contains_key(&request.group_id) {
            return reply_now(error_code::UNKNOWN_MEMBER_ID);
        }
        let config = self.config;
        let group = self
            .groups
            .entry(request.group_id.clone())
            .or_insert_with(|| Group::new(request.group_id.clone()));
        if !accept_joining_member(group, &request.member_id, config.max_size) {
            group.remove(&request.member_id);
            let response = JoinResponse::error("", error_code::GROUP_MAX_SIZE_REACHED);
            group.reply_join(Some(request.reply_to), response);
        } else if is_unknown_member {
            // Kafka's member id: the client id, a dash and a random UUID.
            let member_id = format!("{}-{}", request.client_id, self.ids.next_uuid());
            join_new_member(group, &config, now_ms, request, member_id);
        } else {
            join_current_member(group, &config, now_ms, request);
        }
        group.try_complete_join(now_ms, &config);
        std::mem::take(&mut group.replies)
    }

    /// SyncGroup. A follower's answer waits for the leader's sync.
    pub fn sync(&mut self, now_ms: i64, request: SyncRequest) -> Vec<Reply> {
        let reply_to = request.reply_to;
        if request.group_id.is_empty() {
            return vec![Reply::Sync(
                reply_to,
                SyncResponse::error(error_code::INVALID_GROUP_ID),
            )];
        }
        let Some(group) = self.groups.get_mut(&request.group_id) else {
            return vec![Reply::Sync(
                reply_to,
                SyncResponse::error(error_code::UNKNOWN_MEMBER_ID),
            )];
        };
        if let Some(error) = sync_group(group, now_ms, request) {
            group
                .replies
                .push(Reply::Sync(reply_to, SyncResponse::error(error)));
        }
        std::mem::take(&mut group.replies)
    }

    /// Heartbeat; answers at once with an error code.
    pub fn heartbeat(
        &mut self,
        now_ms: i64,
        group_id: &str,
        member_id: &str,
        group_instance_id: Option<&str>,
        generation_id: i32,
    ) -> i16 {
        if group_id.is_empty() {
            return error_code::INVALID_GROUP_ID;
        }
        let Some(group) = self.groups.get_mut(group_id) else {
            return error_code::UNKNOWN_MEMBER_ID;
        };
        if group.is(GroupState::Dead) {
            return error_code::COORDINATOR_NOT_AVAILABLE;
        }
        if let Some(error) = group.validate_current_member(member_id, group_instance_id) {
            return error;
        }
        let error = match group.state {
            GroupState::Empty | GroupState::Dead => return error_code::UNKNOWN_MEMBER_ID,
            // Consumers may heartbeat between their join answer and their sync.
            GroupState::CompletingRebalance => error_code::NONE,
            GroupState::PreparingRebalance => error_code::REBALANCE_IN_PROGRESS,
            GroupState::Stable if generation_id != group.generation_id => {
                return error_code::ILLEGAL_GENERATION
            }
            GroupState::Stable => error_code::NONE,
        };
        group.refresh_session(member_id, now_ms);
        error
    }

    /// LeaveGroup (v3+ batches members, each by member id or, with an empty
    /// member id, by group instance id). Returns the group-level error, one error
    /// per member, and the answers released by the members' removal.
    pub fn leave(
        &mut self,
        now_ms: i64,
        group_id: &str,
        members: &[(String, Option<String>)],
    ) -> (i16, Vec<i16>, Vec<Reply>) {
        if group_id.is_empty() {
            return (error_code::INVALID_GROUP_ID, Vec::new(), Vec::new());
        }
        let Some(group) = self.groups.get_mut(group_id) else {
            let unknown = vec![error_code::UNKNOWN_MEMBER_ID; members.len()];
            return (error_code::NONE, unknown, Vec::new());
        };
        if group.is(GroupState::Dead) {
            return (
                error_code::COORDINATOR_NOT_AVAILABLE,
                Vec::new(),
                Vec::new(),
            );
        }
        let config = self.config;
        let member_errors = members
            .iter()
            .map(|(member_id, instance)| {
                leave_member(group, &config, now_ms, member_id, instance.as_deref())
            })
            .collect();
        (
            error_code::NONE,
            member_errors,
            std::mem::take(&mut group.replies),
        )
    }

    /// Everything time-driven: pending member ids that lapse, sessions that end,
    /// the initial delay and rebalance timeout of join phases, and members that
    /// never sync. The rebalance timeout is how `max.poll.interval.ms` is enforced.
    pub fn tick(&mut self, now_ms: i64) -> Vec<Reply> {
        let config = self.config;
        let mut replies = Vec::new();
        for group in self.groups.values_mut() {
            group.tick(now_ms, &config);
            replies.append(&mut group.replies);
        }
        replies
    }

    /// DescribeGroups for one group; an unknown group is Dead, without an error.
    pub fn describe(&self, group_id: &str) -> GroupDescription {
        let Some(group) = self.groups.get(group_id) else {
            return GroupDescription::dead();
        };
        // As Kafka: protocol and member metadata only once the group is Stable.
        let protocol = match group.state {
            GroupState::Stable => group.protocol_name.as_deref(),
            _ => None,
        };
        GroupDescription {
            error: error_code::NONE,
            state: group.state.name().to_string(),
            protocol_type: group.protocol_type.clone().unwrap_or_default(),
            protocol_name: protocol.unwrap_or_default().to_string(),
            members: group
                .members
                .values()
                .map(|m| m.describe(protocol))
                .collect(),
        }
    }

    /// ListGroups: the groups, filtered by state names compared
    /// case-insensitively; an empty filter lists every group.
    pub fn list(&self, states_filter: &[String]) -> Vec<ListedGroup> {
        let wanted = |state: GroupState| {
            states_filter.is_empty()
                || states_filter
                    .iter()
                    .any(|s| s.eq_ignore_ascii_case(state.name()))
        };
        let mut groups: Vec<ListedGroup> = self
            .groups
            .values()
            .filter(|g| wanted(g.state))
            .map(|g| ListedGroup {
                group_id: g.group_id.clone(),
                protocol_type: g.protocol_type.clone().unwrap_or_default(),
                state: g.state.name().to_string(),
            })
            .collect();
        groups.sort();
        groups
    }

    /// The group's record as it would be stored now, if the coordinator knows it.
    pub fn record(&self, group_id: &str) -> Option<GroupRecord> {
        self.groups.get(group_id).map(Group::record)
    }

    /// DeleteGroups for one group: only an Empty group may go.
    pub fn delete(&mut self, group_id: &str) -> i16 {
        let Some(group) = self.groups.get_mut(group_id) else {
            return error_code::GROUP_ID_NOT_FOUND;
        };
        match group.state {
            GroupState::Dead => error_code::GROUP_ID_NOT_FOUND,
            GroupState::Empty => {
                group.transition_to(GroupState::Dead);
                self.groups.remove(group_id);
                self.persisted.remove(group_id);
                error_code::NONE
            }
            _ => error_code::NON_EMPTY_GROUP,
        }
    }

    /// OffsetCommit admission (Kafka's `validateOffsetCommit`). Generation -1
    /// with no member id is a simple commit (a consumer using `assign()`), let in
    /// only while the group is Empty; an unknown group is then created Empty.
    pub fn validate_commit(
        &mut self,
        now_ms: i64,
        group_id: &str,
        member_id: &str,
        group_instance_id: Option<&str>,
        generation_id: i32,
    ) -> i16 {
        if !self.groups.contains_key(group_id) {
            if generation_id >= 0 {
                // A commit from an older life of the group.
                return error_code::ILLEGAL_GENERATION;
            }
            self.groups
                .insert(group_id.to_string(), Group::new(group_id.to_string()));
        }
        let Some(group) = self.groups.get_mut(group_id) else {
            return error_code::UNKNOWN_SERVER_ERROR;
        };
        validate_group_commit(group, now_ms, member_id, group_instance_id, generation_id)
    }

    /// Kafka's `doTxnCommitOffsets` checks for a TxnOffsetCommit: an unknown
    /// group is created (its offsets arrive with the transaction); member id,
    /// instance id and generation are enforced only when the client sets them.
    pub fn validate_txn_commit(
        &mut self,
        group_id: &str,
        member_id: &str,
        group_instance_id: Option<&str>,
        generation_id: i32,
    ) -> i16 {
        let group = self
            .groups
            .entry(group_id.to_string())
            .or_insert_with(|| Group::new(group_id.to_string()));
        if group.is(GroupState::Dead) {
            return error_code::COORDINATOR_NOT_AVAILABLE;
        }
        if let Some(instance) = group_instance_id {
            if group
                .validate_current_member(member_id, Some(instance))
                .is_some_and(|error| error == error_code::FENCED_INSTANCE_ID)
            {
                return error_code::FENCED_INSTANCE_ID;
            }
        }
        if !member_id.is_empty() && group.validate_current_member(member_id, None).is_some() {
            return error_code::UNKNOWN_MEMBER_ID;
        }
        if generation_id >= 0 && generation_id != group.generation_id {
            return error_code::ILLEGAL_GENERATION;
        }
        error_code::NONE
    }

    pub fn is_empty_or_unknown(&self, group_id: &str) -> bool {
        self.groups
            .get(group_id)
            .is_none_or(|g| g.is(GroupState::Empty))
    }

    /// Restores a group from its stored record after a restart or a move: Stable
    /// with its members (their sessions starting at `now_ms`), so that they go on
    /// heartbeating and committing in their generation, or Empty without. A group
    /// that already exists is left alone.
    pub fn restore(&mut self, group_id: &str, record: GroupRecord, now_ms: i64) {
        if self.groups.contains_key(group_id) {
            return;
        }
        let group = Group::restored(group_id.to_string(), record.clone(), now_ms);
        self.groups.insert(group_id.to_string(), group);
        self.persisted.insert(group_id.to_string(), record);
    }

    /// Kafka's `onGroupUnloaded`: this broker no longer coordinates the groups
    /// `unloaded` picks (their offsets partition went to another leader). They
    /// leave without a trace here; every join or sync still waiting is answered
    /// NOT_COORDINATOR, so its member finds the new coordinator.
    pub fn unload(&mut self, unloaded: impl Fn(&str) -> bool) -> Vec<Reply> {
        let leaving: Vec<String> = self
            .groups
            .keys()
            .filter(|group_id| unloaded(group_id))
            .cloned()
            .collect();
        let mut replies = Vec::new();
        for group_id in leaving {
            self.persisted.remove(&group_id);
            let Some(mut group) = self.groups.remove(&group_id) else {
                continue;
            };
            replies.append(&mut group.replies);
            for member in group.members.into_values() {
                if let Some(reply_to) = member.awaiting_join {
                    let response =
                        JoinResponse::error(&member.member_id, error_code::NOT_COORDINATOR);
                    replies.push(Reply::Join(reply_to, response));
                }
                if let Some(reply_to) = member.awaiting_sync {
                    let response = SyncResponse::error(error_code::NOT_COORDINATOR);
                    replies.push(Reply::Sync(reply_to, response));
                }
            }
        }
        replies
    }

    /// The group's record could not be stored: the next `take_changed` hands
    /// it out again.
    pub fn forget_persisted(&mut self, group_id: &str) {
        self.persisted.remove(group_id);
    }

    /// The record of `group_id` if it changed since it was last taken, now
    /// taken: a sync handing out a generation's assignment, or a join handing a
    /// static member's place to its new member id, stores it first.
    pub fn take_changed_group(&mut self, group_id: &str) -> Option<(String, GroupRecord)> {
        take_if_changed(&mut self.persisted, self.groups.get(group_id)?)
    }

    /// Groups whose record changed since the last call, for the caller to store,
    /// by group id.
    pub fn take_changed(&mut self) -> Vec<(String, GroupRecord)> {
        let mut changed: Vec<_> = self
            .groups
            .values()
            .filter_map(|group| take_if_changed(&mut self.persisted, group))
            .collect();
        changed.sort_by(|a, b| a.0.cmp(&b.0));
        changed
    }
}

/// The group's record if it differs from the one last taken for it, now
/// taken (written down in `persisted`). As Kafka, a group is stored Stable (its
/// generation complete) or Empty; in between, the last record stands.
fn take_if_changed(
    persisted: &mut HashMap<String, GroupRecord>,
    group: &Group,
) -> Option<(String, GroupRecord)> {
    if !group.is(GroupState::Stable) && !group.is(GroupState::Empty) {
        return None;
    }
    if persisted
        .get(&group.group_id)
        .is_some_and(|stored| group.is_stored_as(stored))
    {
        return None;
    }
    let record = group.record();
    persisted.insert(group.group_id.clone(), record.clone());
    Some((group.group_id.clone(), record))
}

/// Kafka's `doSyncGroup`; `Some(error)` to answer at once with that error.
fn sync_group(group: &mut Group, now_ms: i64, request: SyncRequest) -> Option<i16> {
    let member_id = request.member_id.as_str();
    if group.is(GroupState::Dead) {
        return Some(error_code::COORDINATOR_NOT_AVAILABLE);
    }
    if let Some(error) =
        group.validate_current_member(member_id, request.group_instance_id.as_deref())
    {
        return Some(error);
    }
    if request.generation_id != group.generation_id {
        return Some(error_code::ILLEGAL_GENERATION);
    }
    let type_differs =
        request.protocol_type.is_some() && request.protocol_type != group.protocol_type;
    let name_differs =
        request.protocol_name.is_some() && request.protocol_name != group.protocol_name;
    if type_differs || name_differs {
        return Some(error_code::INCONSISTENT_GROUP_PROTOCOL);
    }
    match group.state {
        GroupState::Empty | GroupState::Dead => Some(error_code::UNKNOWN_MEMBER_ID),
        GroupState::PreparingRebalance => Some(error_code::REBALANCE_IN_PROGRESS),
        GroupState::CompletingRebalance => {
            await_assignment(group, now_ms, request);
            None
        }
        GroupState::Stable => {
            // A sync in a Stable group just gets the member's current assignment.
            group.pending_sync_members.remove(member_id);
            group.refresh_session(member_id, now_ms);
            let assignment = group.members.get(member_id).map(|m| m.assignment.clone());
            let response = SyncResponse {
                error: error_code::NONE,
                protocol_type: group.protocol_type.clone(),
                protocol_name: group.protocol_name.clone(),
                assignment: assignment.unwrap_or_default(),
            };
            group.replies.push(Reply::Sync(request.reply_to, response));
            None
        }
    }
}

/// The sync waits; the leader's sync sets every assignment and answers all.
fn await_assignment(group: &mut Group, now_ms: i64, request: SyncRequest) {
    let member_id = request.member_id.as_str();
    // A sync already waiting is superseded; answer it rather than forget it.
    group.answer_sync(
        member_id,
        SyncResponse::error(error_code::REBALANCE_IN_PROGRESS),
    );
    if let Some(member) = group.members.get_mut(member_id) {
        member.awaiting_sync = Some(request.reply_to);
    }
    group.pending_sync_members.remove(member_id);
    if group.is_leader(member_id) {
        group.set_and_propagate_assignment(request.assignments, now_ms);
        group.transition_to(GroupState::Stable);
    }
}

/// Kafka's `handleLeaveGroup` for one member.
fn leave_member(
    group: &mut Group,
    config: &GroupConfig,
    now_ms: i64,
    member_id: &str,
    instance: Option<&str>,
) -> i16 {
    if member_id.is_empty() {
        // An administrative removal by group instance id.
        let current = instance.and_then(|i| group.static_members.get(i).cloned());
        return match current {
            Some(current) => {
                group.remove_member_and_update(&current, now_ms, config);
                error_code::NONE
            }
            None => error_code::UNKNOWN_MEMBER_ID,
        };
    }
    if group.pending_members.contains_key(member_id) {
        group.remove_pending_member_and_update(member_id, now_ms, config);
        return error_code::NONE;
    }
    if let Some(error) = group.validate_current_member(member_id, instance) {
        return error;
    }
    group.remove_member_and_update(member_id, now_ms, config);
    error_code::NONE
}

/// Kafka's `validateOffsetCommit` plus the CompletingRebalance check of `doCommitOffsets`.
fn validate_group_commit(
    group: &mut Group,
    now_ms: i64,
    member_id: &str,
    instance: Option<&str>,
    generation_id: i32,
) -> i16 {
    if group.is(GroupState::Dead) {
        return error_code::COORDINATOR_NOT_AVAILABLE;
    }
    if generation_id >= 0 || !member_id.is_empty() || instance.is_some() {
        if let Some(error) = group.validate_current_member(member_id, instance) {
            return error;
        }
        if generation_id != group.generation_id {
            return error_code::ILLEGAL_GENERATION;
        }
    } else if !group.is(GroupState::Empty) {
        // Once the group has members, only members may commit.
        return error_code::UNKNOWN_MEMBER_ID;
    }
    if group.is(GroupState::CompletingRebalance) {
        // The member knows the new generation but has no assignment yet.
        return error_code::REBALANCE_IN_PROGRESS;
    }
    group.refresh_session(member_id, now_ms);
    error_code::NONE
}
