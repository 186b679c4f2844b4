//! A group's transitions (Kafka's GroupCoordinator callbacks on one group):
//! starting and completing a join phase, propagating the leader's assignment,
//! removing members, and everything time drives (session expiry, the join and
//! sync timers). Every answer they produce is queued in `Group::replies`.

use bytes::Bytes;
use std::collections::HashMap;

use super::api::{GroupConfig, JoinResponse, SyncResponse};
use super::state::{Group, GroupState, JoinTimer};
use crate::error_code;

impl Group {
    /// Kafka's `maybePrepareRebalance`: only a group that can rebalance starts one.
    pub fn maybe_prepare_rebalance(&mut self, now_ms: i64, config: &GroupConfig) {
        use GroupState::*;
        if matches!(self.state, Stable | CompletingRebalance | Empty) {
            self.prepare_rebalance(now_ms, config);
        }
    }

    /// Kafka's `prepareRebalance`: waiting syncs are sent back to rejoin, and the
    /// join phase starts with its timer (the initial delay when leaving Empty).
    pub fn prepare_rebalance(&mut self, now_ms: i64, config: &GroupConfig) {
        if self.is(GroupState::CompletingRebalance) {
            self.reset_and_propagate_assignment_error(error_code::REBALANCE_IN_PROGRESS, now_ms);
        }
        self.sync_deadline_ms = None;
        let timer = if self.is(GroupState::Empty) {
            let delay_ms = config.initial_rebalance_delay_ms;
            JoinTimer::Initial {
                deadline_ms: now_ms.saturating_add(delay_ms),
                delay_ms,
                remaining_ms: (self.rebalance_timeout_ms() - delay_ms).max(0),
            }
        } else {
            JoinTimer::Rebalance {
                deadline_ms: now_ms.saturating_add(self.rebalance_timeout_ms()),
            }
        };
        self.transition_to(GroupState::PreparingRebalance);
        self.join_timer = Some(timer);
        self.try_complete_join(now_ms, config);
    }

    /// Kafka's `checkAndComplete` on the join: a DelayedJoin completes once all
    /// members rejoined; an InitialDelayedJoin only when its time has come.
    pub fn try_complete_join(&mut self, now_ms: i64, config: &GroupConfig) {
        // Each expiry either completes the phase or clears `new_member_added`,
        // so this loop runs at most twice.
        while self.is(GroupState::PreparingRebalance) {
            match self.join_timer {
                Some(timer) if timer.deadline_ms() <= now_ms => {
                    self.expire_join_timer(now_ms, config)
                }
                Some(JoinTimer::Rebalance { .. }) if self.has_all_members_joined() => {
                    self.complete_join(now_ms)
                }
                _ => return,
            }
        }
    }

    fn expire_join_timer(&mut self, now_ms: i64, config: &GroupConfig) {
        match self.join_timer {
            Some(JoinTimer::Initial {
                delay_ms,
                remaining_ms,
                ..
            }) if self.new_member_added && remaining_ms != 0 => {
                self.new_member_added = false;
                let next_delay_ms = config.initial_rebalance_delay_ms.min(remaining_ms);
                self.join_timer = Some(JoinTimer::Initial {
                    deadline_ms: now_ms.saturating_add(next_delay_ms),
                    delay_ms: next_delay_ms,
                    remaining_ms: (remaining_ms - delay_ms).max(0),
                });
            }
            _ => self.complete_join(now_ms),
        }
    }

    /// Kafka's `onCompleteJoin`: dynamic members that did not rejoin are dropped,
    /// the next generation starts and every waiting join is answered.
    pub fn complete_join(&mut self, now_ms: i64) {
        let not_rejoined: Vec<String> = self
            .members
            .values()
            .filter(|m| m.awaiting_join.is_none() && m.group_instance_id.is_none())
            .map(|m| m.member_id.clone())
            .collect();
        for member_id in &not_rejoined {
            self.remove(member_id);
        }
        self.join_timer = None;
        if !self.maybe_elect_new_joined_leader() && !self.members.is_empty() {
            // Only static members that did not rejoin are left: wait for them
            // to rejoin or for their sessions to end.
            let deadline_ms = now_ms.saturating_add(self.rebalance_timeout_ms());
            self.join_timer = Some(JoinTimer::Rebalance { deadline_ms });
            return;
        }
        self.init_next_generation();
        if self.is(GroupState::CompletingRebalance) {
            self.answer_joined_members(now_ms);
        }
    }

    fn answer_joined_members(&mut self, now_ms: i64) {
        let leader = self.leader_id.clone().unwrap_or_default();
        let all_members = self.current_member_metadata();
        let member_ids: Vec<String> = self.members.keys().cloned().collect();
        for member_id in member_ids {
            let is_leader = member_id == leader;
            let response = JoinResponse {
                error: error_code::NONE,
                generation_id: self.generation_id,
                protocol_type: self.protocol_type.clone(),
                protocol_name: self.protocol_name.clone(),
                leader: leader.clone(),
                member_id: member_id.clone(),
                members: if is_leader {
                    all_members.clone()
                } else {
                    Vec::new()
                },
                skip_assignment: false,
            };
            self.answer_join(&member_id, response);
            if let Some(member) = self.members.get_mut(&member_id) {
                member.refresh_session(now_ms);
                member.is_new = false;
            }
            self.pending_sync_members.insert(member_id);
        }
        self.sync_deadline_ms = Some(now_ms.saturating_add(self.rebalance_timeout_ms()));
    }

    /// Kafka's `resetAndPropagateAssignmentError`.
    pub fn reset_and_propagate_assignment_error(&mut self, error: i16, now_ms: i64) {
        assert!(self.is(GroupState::CompletingRebalance));
        for member in self.members.values_mut() {
            member.assignment = Bytes::new();
        }
        self.propagate_assignment(error, now_ms);
    }

    /// Kafka's `setAndPropagateAssignment`: members the leader left out get an
    /// empty assignment; assignments for unknown members are ignored.
    pub fn set_and_propagate_assignment(&mut self, assignments: Vec<(String, Bytes)>, now_ms: i64) {
        assert!(self.is(GroupState::CompletingRebalance));
        let mut assignments: HashMap<String, Bytes> = assignments.into_iter().collect();
        for member in self.members.values_mut() {
            member.assignment = assignments.remove(&member.member_id).unwrap_or_default();
        }
        self.propagate_assignment(error_code::NONE, now_ms);
    }

    fn propagate_assignment(&mut self, error: i16, now_ms: i64) {
        let member_ids: Vec<String> = self.members.keys().cloned().collect();
        for member_id in member_ids {
            let assignment = self.members.get(&member_id).map(|m| m.assignment.clone());
            let response = SyncResponse {
                error,
                protocol_type: self.protocol_type.clone(),
                protocol_name: self.protocol_name.clone(),
                assignment: assignment.unwrap_or_default(),
            };
            if self.answer_sync(&member_id, response) {
                self.refresh_session(&member_id, now_ms);
            }
        }
    }

    /// Kafka's `removeMemberAndUpdateGroup`, for a leave or an expired session.
    /// A waiting join is answered UNKNOWN_MEMBER_ID (so a live client rejoins);
    /// so is a waiting sync, which Kafka leaves unanswered.
    pub fn remove_member_and_update(&mut self, member_id: &str, now_ms: i64, config: &GroupConfig) {
        self.answer_join(
            member_id,
            JoinResponse::error("", error_code::UNKNOWN_MEMBER_ID),
        );
        self.answer_sync(
            member_id,
            SyncResponse::error(error_code::UNKNOWN_MEMBER_ID),
        );
        self.remove(member_id);
        match self.state {
            GroupState::Dead | GroupState::Empty => {}
            GroupState::Stable | GroupState::CompletingRebalance => {
                self.maybe_prepare_rebalance(now_ms, config)
            }
            GroupState::PreparingRebalance => self.try_complete_join(now_ms, config),
        }
    }

    /// Kafka's `removePendingMemberAndUpdateGroup`.
    pub fn remove_pending_member_and_update(
        &mut self,
        member_id: &str,
        now_ms: i64,
        config: &GroupConfig,
    ) {
        self.pending_members.remove(member_id);
        self.try_complete_join(now_ms, config);
    }

    /// Kafka's `onExpirePendingSync`: members that got a join answer but never
    /// synced within the rebalance timeout are dropped and the group rebalances.
    fn expire_pending_sync(&mut self, now_ms: i64, config: &GroupConfig) {
        self.sync_deadline_ms = None;
        let syncing = matches!(
            self.state,
            GroupState::CompletingRebalance | GroupState::Stable
        );
        if !syncing || self.pending_sync_members.is_empty() {
            return;
        }
        let lapsed: Vec<String> = self.pending_sync_members.drain().collect();
        for member_id in &lapsed {
            self.answer_join(
                member_id,
                JoinResponse::error("", error_code::UNKNOWN_MEMBER_ID),
            );
            self.remove(member_id);
        }
        self.prepare_rebalance(now_ms, config);
    }

    /// Everything time drives, in the order Kafka's timers would usually fire.
    pub fn tick(&mut self, now_ms: i64, config: &GroupConfig) {
        let lapsed_pending: Vec<String> = self
            .pending_members
            .iter()
            .filter(|(_, deadline_ms)| **deadline_ms <= now_ms)
            .map(|(member_id, _)| member_id.clone())
            .collect();
        for member_id in &lapsed_pending {
            self.remove_pending_member_and_update(member_id, now_ms, config);
        }
        let expired: Vec<String> = self
            .members
            .values()
            .filter(|m| m.session_expired(now_ms))
            .map(|m| m.member_id.clone())
            .collect();
        for member_id in &expired {
            self.remove_member_and_update(member_id, now_ms, config);
        }
        self.try_complete_join(now_ms, config);
        if self
            .sync_deadline_ms
            .is_some_and(|deadline_ms| deadline_ms <= now_ms)
        {
            self.expire_pending_sync(now_ms, config);
        }
    }
}
