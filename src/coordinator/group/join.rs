//! JoinGroup on one group (Kafka's `doNewMemberJoinGroup`,
//! `doCurrentMemberJoinGroup`, `doStaticMemberJoinGroup` and friends). The
//! caller has checked the group id and session timeout and found or created the
//! group; every answer goes to `Group::replies`.

use super::api::{GroupConfig, JoinRequest, JoinResponse};
use super::member::Member;
use super::state::{Group, GroupState};
use crate::error_code;

/// Kafka's `acceptJoiningMember`: members already counted are let back in;
/// newcomers only while the group is below `group.max.size`.
pub fn accept_joining_member(group: &Group, member_id: &str, max_size: usize) -> bool {
    let known = group.members.get(member_id);
    match group.state {
        GroupState::Empty | GroupState::Dead => true,
        GroupState::PreparingRebalance => {
            let awaiting = group
                .members
                .values()
                .filter(|m| m.awaiting_join.is_some())
                .count();
            known.is_some_and(|m| m.awaiting_join.is_some()) || awaiting < max_size
        }
        GroupState::CompletingRebalance | GroupState::Stable => {
            known.is_some() || group.members.len() < max_size
        }
    }
}

fn reply_error(group: &mut Group, request: &JoinRequest, member_id: &str, error: i16) {
    let response = JoinResponse::error(member_id, error);
    group.reply_join(Some(request.reply_to), response);
}

/// A join with an empty member id; `member_id` is the one to hand out.
pub fn join_new_member(
    group: &mut Group,
    config: &GroupConfig,
    now_ms: i64,
    request: JoinRequest,
    member_id: String,
) {
    if group.is(GroupState::Dead) {
        return reply_error(group, &request, "", error_code::COORDINATOR_NOT_AVAILABLE);
    }
    if !group.supports_protocols(&request.protocol_type, &request.protocols) {
        return reply_error(group, &request, "", error_code::INCONSISTENT_GROUP_PROTOCOL);
    }
    if let Some(instance) = request.group_instance_id.clone() {
        match group.static_members.get(&instance).cloned() {
            Some(old_id) => update_static_member(
                group, config, now_ms, request, &instance, &old_id, member_id,
            ),
            None => add_member_and_rebalance(group, config, now_ms, request, member_id),
        }
    } else if request.require_known_member_id {
        // KIP-394: the id is handed out first, so a client that gives up on its
        // join does not leave a member behind; it lapses after a session timeout.
        let deadline_ms = now_ms.saturating_add(i64::from(request.session_timeout_ms));
        group.pending_members.insert(member_id.clone(), deadline_ms);
        reply_error(group, &request, &member_id, error_code::MEMBER_ID_REQUIRED);
    } else {
        add_member_and_rebalance(group, config, now_ms, request, member_id);
    }
}

/// A join with a member id the client already has.
pub fn join_current_member(
    group: &mut Group,
    config: &GroupConfig,
    now_ms: i64,
    request: JoinRequest,
) {
    let member_id = request.member_id.clone();
    if group.is(GroupState::Dead) {
        return reply_error(
            group,
            &request,
            &member_id,
            error_code::COORDINATOR_NOT_AVAILABLE,
        );
    }
    if !group.supports_protocols(&request.protocol_type, &request.protocols) {
        return reply_error(
            group,
            &request,
            &member_id,
            error_code::INCONSISTENT_GROUP_PROTOCOL,
        );
    }
    if group.pending_members.contains_key(&member_id) {
        // Pending ids are only handed to dynamic members; Kafka fails such a
        // join with an IllegalStateException, which reaches the client as this.
        if request.group_instance_id.is_some() {
            return reply_error(
                group,
                &request,
                &member_id,
                error_code::UNKNOWN_SERVER_ERROR,
            );
        }
        return add_member_and_rebalance(group, config, now_ms, request, member_id);
    }
    let instance = request.group_instance_id.as_deref();
    if let Some(error) = group.validate_current_member(&member_id, instance) {
        return reply_error(group, &request, &member_id, error);
    }
    rejoin_known_member(group, config, now_ms, request);
}

fn rejoin_known_member(group: &mut Group, config: &GroupConfig, now_ms: i64, request: JoinRequest) {
    let member_id = request.member_id.clone();
    // A new member's session is the long join timeout until its first join
    // phase completes; a retried join must not shorten it.
    if group.members.get(&member_id).is_some_and(|m| !m.is_new) {
        group.refresh_session(&member_id, now_ms);
    }
    let unchanged = group
        .members
        .get(&member_id)
        .is_some_and(|m| m.matches(&request.protocols));
    match group.state {
        GroupState::PreparingRebalance => {
            update_member_and_rebalance(group, config, now_ms, &request)
        }
        GroupState::CompletingRebalance if unchanged => {
            // The join answer was lost: send it again.
            let members = group.is_leader(&member_id);
            reply_current_generation(group, &request, members, false);
        }
        GroupState::Stable if unchanged && !group.is_leader(&member_id) => {
            reply_current_generation(group, &request, false, false);
        }
        GroupState::CompletingRebalance | GroupState::Stable => {
            update_member_and_rebalance(group, config, now_ms, &request)
        }
        GroupState::Empty | GroupState::Dead => {
            reply_error(group, &request, &member_id, error_code::UNKNOWN_MEMBER_ID)
        }
    }
}

/// Answers `request` with the current generation, without a rebalance.
fn reply_current_generation(
    group: &mut Group,
    request: &JoinRequest,
    with_members: bool,
    skip_assignment: bool,
) {
    let response = current_generation(group, request, with_members, skip_assignment);
    group.reply_join(Some(request.reply_to), response);
}

/// The current generation as a join answer to `request`, naming the group's leader.
fn current_generation(
    group: &Group,
    request: &JoinRequest,
    with_members: bool,
    skip_assignment: bool,
) -> JoinResponse {
    JoinResponse {
        error: error_code::NONE,
        generation_id: group.generation_id,
        protocol_type: group.protocol_type.clone(),
        protocol_name: group.protocol_name.clone(),
        leader: group.leader_id.clone().unwrap_or_default(),
        member_id: request.member_id.clone(),
        members: if with_members {
            group.current_member_metadata()
        } else {
            Vec::new()
        },
        skip_assignment,
    }
}

fn update_member_and_rebalance(
    group: &mut Group,
    config: &GroupConfig,
    now_ms: i64,
    request: &JoinRequest,
) {
    group.update_member(&request.member_id, request);
    group.maybe_prepare_rebalance(now_ms, config);
}

/// Kafka's `addMemberAndRebalance`.
fn add_member_and_rebalance(
    group: &mut Group,
    config: &GroupConfig,
    now_ms: i64,
    request: JoinRequest,
    member_id: String,
) {
    // Only a group still in its first join phase lets the initial delay be extended.
    if group.is(GroupState::PreparingRebalance) && group.generation_id == 0 {
        group.new_member_added = true;
    }
    group.add(Member::joining(member_id, &request, now_ms));
    group.maybe_prepare_rebalance(now_ms, config);
}

/// Kafka's `updateStaticMemberAndRebalance`: a static member came back with a
/// new member id, which replaces the old one (fenced from now on) and keeps its
/// assignment. In a Stable group whose selected protocol would not change, the
/// member gets the current generation at once and nobody rebalances: from
/// JoinGroup v9 a returning leader is named leader and given the members with
/// `skip_assignment` (KIP-814); before v9 the answer names the leader as it was
/// before the replacement and carries no members, so a returning leader acts
/// as a follower and does not assign again. Either way its SyncGroup, in the
/// Stable group, gets the stored assignment. Otherwise the group rebalances.
fn update_static_member(
    group: &mut Group,
    config: &GroupConfig,
    now_ms: i64,
    mut request: JoinRequest,
    instance: &str,
    old_id: &str,
    member_id: String,
) {
    let previous_leader = group.leader_id.clone().unwrap_or_default();
    group.replace_static_member(instance, old_id, &member_id);
    request.member_id = member_id.clone();
    group.refresh_session(&member_id, now_ms);
    group.update_member(&member_id, &request);
    if !group.is(GroupState::Stable) {
        return group.maybe_prepare_rebalance(now_ms, config);
    }
    if group.protocol_name.as_deref() != Some(group.select_protocol().as_str()) {
        return group.maybe_prepare_rebalance(now_ms, config);
    }
    if let Some(member) = group.members.get_mut(&member_id) {
        member.awaiting_join = None;
    }
    let response = if request.supports_skip_assignment {
        let is_leader = group.is_leader(&member_id);
        current_generation(group, &request, is_leader, is_leader)
    } else {
        JoinResponse {
            leader: previous_leader,
            ..current_generation(group, &request, false, false)
        }
    };
    group.reply_join(Some(request.reply_to), response);
}
