//! One group's state (Kafka's `GroupMetadata`): its members, leader, generation,
//! chosen protocol, and the timers that drive it. This file holds the
//! bookkeeping that keeps those consistent; `rebalance` holds the transitions.
//!
//! Invariants: a group has a leader exactly when it has members; every static
//! member is in `static_members` under its instance id and nothing else is;
//! members awaiting a sync exist only in CompletingRebalance. Answers to waiting
//! joins and syncs are queued in `replies` and drained by the coordinator after
//! every call, so no waiting request is ever forgotten.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::fmt;

use bytes::Bytes;

use super::api::{JoinRequest, JoinResponse, JoinedMember, Reply, ReplyTo, SyncResponse};
use super::member::Member;
use crate::error_code;
use crate::store::GroupRecord;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GroupState {
    Empty,
    PreparingRebalance,
    CompletingRebalance,
    Stable,
    Dead,
}

impl GroupState {
    pub const ALL: [GroupState; 5] = [
        GroupState::Empty,
        GroupState::PreparingRebalance,
        GroupState::CompletingRebalance,
        GroupState::Stable,
        GroupState::Dead,
    ];

    /// Kafka's name for the state, as ListGroups and DescribeGroups report it.
    pub fn name(self) -> &'static str {
        match self {
            GroupState::Empty => "Empty",
            GroupState::PreparingRebalance => "PreparingRebalance",
            GroupState::CompletingRebalance => "CompletingRebalance",
            GroupState::Stable => "Stable",
            GroupState::Dead => "Dead",
        }
    }

    /// Kafka's `validPreviousStates`.
    fn may_follow(self, previous: GroupState) -> bool {
        use GroupState::*;
        match self {
            Dead => true,
            CompletingRebalance => previous == PreparingRebalance,
            Stable => previous == CompletingRebalance,
            PreparingRebalance => matches!(previous, Stable | CompletingRebalance | Empty),
            Empty => previous == PreparingRebalance,
        }
    }
}

impl fmt::Display for GroupState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// The delayed operation that ends a join phase (Kafka's rebalance purgatory).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum JoinTimer {
    /// Kafka's `InitialDelayedJoin`: a group leaving Empty waits `delay_ms`, and
    /// again while new members keep arriving, until `remaining_ms` is used up.
    Initial {
        deadline_ms: i64,
        delay_ms: i64,
        remaining_ms: i64,
    },
    /// Kafka's `DelayedJoin`: completes when every member has rejoined, or at the
    /// deadline (the largest rebalance timeout), dropping those that did not.
    Rebalance { deadline_ms: i64 },
}

impl JoinTimer {
    pub fn deadline_ms(self) -> i64 {
        match self {
            JoinTimer::Initial { deadline_ms, .. } | JoinTimer::Rebalance { deadline_ms } => {
                deadline_ms
            }
        }
    }
}

#[derive(Debug)]
pub struct Group {
    pub group_id: String,
    pub state: GroupState,
    pub generation_id: i32,
    pub protocol_type: Option<String>,
    pub protocol_name: Option<String>,
    pub leader_id: Option<String>,
    /// Ordered by member id so that every choice among members is deterministic.
    pub members: BTreeMap<String, Member>,
    /// group instance id → member id, for static members (KIP-345).
    pub static_members: HashMap<String, String>,
    /// Member ids handed out with MEMBER_ID_REQUIRED (KIP-394) → when they lapse.
    pub pending_members: HashMap<String, i64>,
    /// Members that were sent a join answer and have not synced yet.
    pub pending_sync_members: HashSet<String>,
    /// A member joined during the initial delay, so it may be extended.
    pub new_member_added: bool,
    pub join_timer: Option<JoinTimer>,
    /// When members still in `pending_sync_members` are dropped (Kafka's `DelayedSync`).
    pub sync_deadline_ms: Option<i64>,
    pub replies: Vec<Reply>,
}

impl Group {
    pub fn new(group_id: String) -> Group {
        Group {
            group_id,
            state: GroupState::Empty,
            generation_id: 0,
            protocol_type: None,
            protocol_name: None,
            leader_id: None,
            members: BTreeMap::new(),
            static_members: HashMap::new(),
            pending_members: HashMap::new(),
            pending_sync_members: HashSet::new(),
            new_member_added: false,
            join_timer: None,
            sync_deadline_ms: None,
            replies: Vec::new(),
        }
    }

    /// A group as its stored record left it (Kafka's `loadGroup` and
    /// `onGroupLoaded`): Stable with the record's members, each session
    /// starting afresh at `now_ms`, or Empty when it has none (or no protocol
    /// to hold them by).
    pub fn restored(group_id: String, record: GroupRecord, now_ms: i64) -> Group {
        let mut group = Group::new(group_id);
        group.generation_id = record.generation_id;
        group.protocol_type = record.protocol_type;
        let (Some(protocol_type), Some(protocol)) = (&group.protocol_type, record.protocol) else {
            return group;
        };
        if record.members.is_empty() {
            return group;
        }
        let protocol_type = protocol_type.clone();
        for value in record.members {
            // A record not written here may name a member or an instance twice:
            // the first stands, so that every instance maps to one member.
            let instance_taken = value
                .group_instance_id
                .as_ref()
                .is_some_and(|instance| group.static_members.contains_key(instance));
            if group.members.contains_key(&value.member_id) || instance_taken {
                continue;
            }
            group.add(Member::restored(value, &protocol_type, &protocol, now_ms));
        }
        if let Some(leader) = record
            .leader
            .filter(|leader| group.members.contains_key(leader))
        {
            group.leader_id = Some(leader);
        }
        group.protocol_name = Some(protocol);
        group.state = GroupState::Stable;
        group
    }

    /// What the group's record keeps of it now: with its members and their
    /// assignments while Stable, without in any other state.
    pub fn record(&self) -> GroupRecord {
        let mut record = GroupRecord {
            protocol_type: self.protocol_type.clone(),
            generation_id: self.generation_id,
            ..GroupRecord::default()
        };
        if let (GroupState::Stable, Some(protocol)) = (self.state, &self.protocol_name) {
            record.protocol = Some(protocol.clone());
            record.leader = self.leader_id.clone();
            record.members = self.members.values().map(|m| m.value(protocol)).collect();
        }
        record
    }

    /// Whether `record()` would give `stored`, without copying the members.
    pub fn is_stored_as(&self, stored: &GroupRecord) -> bool {
        if self.protocol_type != stored.protocol_type || self.generation_id != stored.generation_id
        {
            return false;
        }
        match (self.state, &self.protocol_name) {
            (GroupState::Stable, Some(protocol)) => {
                stored.protocol.as_ref() == Some(protocol)
                    && stored.leader == self.leader_id
                    && stored.members.len() == self.members.len()
                    && self
                        .members
                        .values()
                        .zip(&stored.members)
                        .all(|(member, value)| member.is_stored_as(protocol, value))
            }
            _ => stored.protocol.is_none() && stored.leader.is_none() && stored.members.is_empty(),
        }
    }

    pub fn is(&self, state: GroupState) -> bool {
        self.state == state
    }

    pub fn transition_to(&mut self, target: GroupState) {
        assert!(
            target.may_follow(self.state),
            "group {} cannot go from {} to {}",
            self.group_id,
            self.state,
            target
        );
        self.state = target;
    }

    pub fn is_leader(&self, member_id: &str) -> bool {
        self.leader_id.as_deref() == Some(member_id)
    }

    /// The longest rebalance timeout of any member: how long a join phase may last.
    pub fn rebalance_timeout_ms(&self) -> i64 {
        let longest = self.members.values().map(|m| m.rebalance_timeout_ms).max();
        i64::from(longest.unwrap_or(0))
    }

    /// Kafka's `supportsProtocols`: an Empty group takes any non-empty offer;
    /// otherwise the type must match and one protocol must be supported by all.
    pub fn supports_protocols(&self, protocol_type: &str, protocols: &[(String, Bytes)]) -> bool {
        if self.is(GroupState::Empty) {
            return !protocol_type.is_empty() && !protocols.is_empty();
        }
        self.protocol_type.as_deref() == Some(protocol_type)
            && protocols
                .iter()
                .any(|(name, _)| self.members.values().all(|m| m.supports(name)))
    }

    /// Protocols every member supports.
    fn candidate_protocols(&self) -> Vec<String> {
        let Some(first) = self.members.values().next() else {
            return Vec::new();
        };
        first
            .protocols
            .iter()
            .map(|(name, _)| name.clone())
            .filter(|name| self.members.values().all(|m| m.supports(name)))
            .collect()
    }

    /// Kafka's `selectProtocol`: each member votes for its most preferred
    /// candidate; the most votes win. Ties go to the candidate first in the
    /// first member's preference, where Kafka's pick is arbitrary.
    pub fn select_protocol(&self) -> String {
        let candidates = self.candidate_protocols();
        assert!(
            !candidates.is_empty(),
            "group {} has members without a common protocol",
            self.group_id
        );
        let votes = |candidate: &String| {
            let voters = self.members.values().filter_map(|m| m.vote(&candidates));
            voters.filter(|vote| vote == candidate).count()
        };
        let mut best = &candidates[0];
        for candidate in &candidates[1..] {
            if votes(candidate) > votes(best) {
                best = candidate;
            }
        }
        best.clone()
    }

    pub fn add(&mut self, member: Member) {
        if self.members.is_empty() {
            self.protocol_type = Some(member.protocol_type.clone());
        }
        assert!(
            self.protocol_type.as_deref() == Some(member.protocol_type.as_str()),
            "member {} joined group {} with another protocol type",
            member.member_id,
            self.group_id
        );
        if self.leader_id.is_none() {
            self.leader_id = Some(member.member_id.clone());
        }
        if let Some(instance) = &member.group_instance_id {
            self.static_members
                .insert(instance.clone(), member.member_id.clone());
        }
        self.pending_members.remove(&member.member_id);
        self.members.insert(member.member_id.clone(), member);
    }

    /// Removes a member without answering it; the leader passes to another member.
    pub fn remove(&mut self, member_id: &str) -> Option<Member> {
        let member = self.members.remove(member_id)?;
        if let Some(instance) = &member.group_instance_id {
            if self.static_members.get(instance).map(String::as_str) == Some(member_id) {
                self.static_members.remove(instance);
            }
        }
        if self.is_leader(member_id) {
            self.leader_id = self.members.keys().next().cloned();
        }
        self.pending_sync_members.remove(member_id);
        Some(member)
    }

    /// Kafka's `hasAllMembersJoined`: every member and no pending member is waiting to join.
    pub fn has_all_members_joined(&self) -> bool {
        self.pending_members.is_empty() && self.members.values().all(|m| m.awaiting_join.is_some())
    }

    /// Kafka's `maybeElectNewJoinedLeader`: a leader that did not rejoin hands over
    /// to one that did; false when nobody rejoined.
    pub fn maybe_elect_new_joined_leader(&mut self) -> bool {
        let Some(leader) = self.leader_id.as_ref() else {
            return false;
        };
        if self
            .members
            .get(leader)
            .is_some_and(|m| m.awaiting_join.is_some())
        {
            return true;
        }
        let joined = self.members.values().find(|m| m.awaiting_join.is_some());
        match joined.map(|m| m.member_id.clone()) {
            Some(member_id) => {
                self.leader_id = Some(member_id);
                true
            }
            None => false,
        }
    }

    /// Kafka's `initNextGeneration`.
    pub fn init_next_generation(&mut self) {
        self.generation_id = self.generation_id.wrapping_add(1);
        if self.members.is_empty() {
            self.protocol_name = None;
            self.transition_to(GroupState::Empty);
        } else {
            self.protocol_name = Some(self.select_protocol());
            self.transition_to(GroupState::CompletingRebalance);
        }
        self.pending_sync_members.clear();
    }

    /// Every member's metadata for the chosen protocol, for the leader's join answer.
    pub fn current_member_metadata(&self) -> Vec<JoinedMember> {
        let protocol = self.protocol_name.as_deref().unwrap_or_default();
        self.members
            .values()
            .map(|m| JoinedMember {
                member_id: m.member_id.clone(),
                group_instance_id: m.group_instance_id.clone(),
                metadata: m.metadata(protocol),
            })
            .collect()
    }

    /// Kafka's `validateCurrentMember`: a static member must be the one its
    /// instance id maps to, and the member must exist.
    pub fn validate_current_member(&self, member_id: &str, instance: Option<&str>) -> Option<i16> {
        if let Some(instance) = instance {
            return match self.static_members.get(instance) {
                Some(current) if current != member_id => Some(error_code::FENCED_INSTANCE_ID),
                Some(_) => None,
                None => Some(error_code::UNKNOWN_MEMBER_ID),
            };
        }
        if self.members.contains_key(member_id) {
            None
        } else {
            Some(error_code::UNKNOWN_MEMBER_ID)
        }
    }

    /// Kafka's `replaceStaticMember`: the instance's member gets `new_id`; a join
    /// or sync the old id was waiting on is answered FENCED_INSTANCE_ID.
    pub fn replace_static_member(&mut self, instance: &str, old_id: &str, new_id: &str) {
        self.answer_join(
            old_id,
            JoinResponse::error(old_id, error_code::FENCED_INSTANCE_ID),
        );
        self.answer_sync(old_id, SyncResponse::error(error_code::FENCED_INSTANCE_ID));
        let mut member = self
            .members
            .remove(old_id)
            .unwrap_or_else(|| panic!("static member {old_id} of {instance} is not in the group"));
        member.member_id = new_id.to_string();
        self.members.insert(new_id.to_string(), member);
        if self.is_leader(old_id) {
            self.leader_id = Some(new_id.to_string());
        }
        if self.pending_sync_members.remove(old_id) {
            self.pending_sync_members.insert(new_id.to_string());
        }
        self.static_members
            .insert(instance.to_string(), new_id.to_string());
    }

    /// Kafka's `updateMember`: new protocols and timeouts, and the join now waiting.
    /// A join already waiting is superseded; it is answered REBALANCE_IN_PROGRESS
    /// (Kafka drops it) so that its caller is not left waiting.
    pub fn update_member(&mut self, member_id: &str, request: &JoinRequest) {
        self.answer_join(
            member_id,
            JoinResponse::error(member_id, error_code::REBALANCE_IN_PROGRESS),
        );
        let Some(member) = self.members.get_mut(member_id) else {
            return;
        };
        member.protocols = request.protocols.clone();
        member.rebalance_timeout_ms = request.rebalance_timeout_ms;
        member.session_timeout_ms = request.session_timeout_ms;
        member.awaiting_join = Some(request.reply_to);
    }

    /// Answers the member's waiting join, if any.
    pub fn answer_join(&mut self, member_id: &str, response: JoinResponse) -> bool {
        let waiting = self
            .members
            .get_mut(member_id)
            .and_then(|m| m.awaiting_join.take());
        self.reply_join(waiting, response)
    }

    /// Answers the member's waiting sync, if any.
    pub fn answer_sync(&mut self, member_id: &str, response: SyncResponse) -> bool {
        let waiting = self
            .members
            .get_mut(member_id)
            .and_then(|m| m.awaiting_sync.take());
        match waiting {
            Some(reply_to) => {
                self.replies.push(Reply::Sync(reply_to, response));
                true
            }
            None => false,
        }
    }

    pub fn reply_join(&mut self, reply_to: Option<ReplyTo>, response: JoinResponse) -> bool {
        match reply_to {
            Some(reply_to) => {
                self.replies.push(Reply::Join(reply_to, response));
                true
            }
            None => false,
        }
    }

    pub fn refresh_session(&mut self, member_id: &str, now_ms: i64) {
        if let Some(member) = self.members.get_mut(member_id) {
            member.refresh_session(now_ms);
        }
    }
}
