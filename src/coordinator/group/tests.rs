//! The coordinator's behaviour as a client sees it, driven with explicit times
//! and seeded member ids (the service's own tests are in `service_tests`).

use std::sync::Arc;

use bytes::Bytes;

use super::*;
use crate::error_code::*;
use crate::random::SeededIds;
use crate::store::GroupRecord;

/// The seed of every coordinator's member ids here, so a failure replays.
const SEED: u64 = 0x5eed;

pub(super) const T0: i64 = 1_000_000;
const SESSION_MS: i32 = 10_000;
const REBALANCE_MS: i32 = 30_000;
pub(super) const DELAY_MS: i64 = 3_000;

pub(super) fn config(delay_ms: i64) -> GroupConfig {
    GroupConfig {
        initial_rebalance_delay_ms: delay_ms,
        ..GroupConfig::default()
    }
}

fn new_coordinator(config: GroupConfig) -> GroupCoordinator {
    GroupCoordinator::new(config, Arc::new(SeededIds::new(SEED)))
}

fn protocols(names: &[&str], tag: &str) -> Vec<(String, Bytes)> {
    let metadata = |name: &str| Bytes::from(format!("{tag}/{name}"));
    names.iter().map(|n| (n.to_string(), metadata(n))).collect()
}

pub(super) fn join_request(client: &str, member_id: &str, reply_to: ReplyTo) -> JoinRequest {
    JoinRequest {
        group_id: "g".to_string(),
        member_id: member_id.to_string(),
        group_instance_id: None,
        protocol_type: "consumer".to_string(),
        protocols: protocols(&["range"], client),
        session_timeout_ms: SESSION_MS,
        rebalance_timeout_ms: REBALANCE_MS,
        client_id: client.to_string(),
        client_host: "/127.0.0.1".to_string(),
        require_known_member_id: false,
        supports_skip_assignment: true,
        reply_to,
    }
}

/// The error a sync of `request` at `now` is answered with.
fn sync_error(coordinator: &mut GroupCoordinator, now: i64, request: SyncRequest) -> i16 {
    let reply_to = request.reply_to;
    sync_reply(&coordinator.sync(now, request), reply_to).error
}

/// The error a join of `request` at `now` is answered with.
fn join_error(coordinator: &mut GroupCoordinator, now: i64, request: JoinRequest) -> i16 {
    let reply_to = request.reply_to;
    join_reply(&coordinator.join(now, request), reply_to).error
}

/// A first join of `client` from a client that needs a member id first
/// (KIP-394, v4+).
fn first_join(client: &str, reply_to: ReplyTo) -> JoinRequest {
    JoinRequest {
        require_known_member_id: true,
        ..join_request(client, "", reply_to)
    }
}

fn static_request(client: &str, instance: &str, reply_to: ReplyTo) -> JoinRequest {
    JoinRequest {
        group_instance_id: Some(instance.to_string()),
        ..join_request(client, "", reply_to)
    }
}

pub(super) fn sync_request(
    member: &JoinResponse,
    assignments: Vec<(String, Bytes)>,
    reply_to: ReplyTo,
) -> SyncRequest {
    SyncRequest {
        group_id: "g".to_string(),
        generation_id: member.generation_id,
        member_id: member.member_id.clone(),
        group_instance_id: None,
        protocol_type: Some("consumer".to_string()),
        protocol_name: Some("range".to_string()),
        assignments,
        reply_to,
    }
}

fn join_reply(replies: &[Reply], reply_to: ReplyTo) -> JoinResponse {
    reply(replies, reply_to, "join", |r| match r {
        Reply::Join(to, response) => Some((*to, response)),
        Reply::Sync(..) => None,
    })
}

fn sync_reply(replies: &[Reply], reply_to: ReplyTo) -> SyncResponse {
    reply(replies, reply_to, "sync", |r| match r {
        Reply::Sync(to, response) => Some((*to, response)),
        Reply::Join(..) => None,
    })
}

/// The `kind` of reply (what `pick` takes) sent to `reply_to`.
fn reply<T: Clone>(
    replies: &[Reply],
    reply_to: ReplyTo,
    kind: &str,
    pick: impl Fn(&Reply) -> Option<(ReplyTo, &T)>,
) -> T {
    replies
        .iter()
        .filter_map(pick)
        .find_map(|(to, response)| (to == reply_to).then(|| response.clone()))
        .unwrap_or_else(|| panic!("no {kind} reply to {reply_to} in {replies:?}"))
}

fn state(coordinator: &GroupCoordinator) -> String {
    coordinator.describe("g").state
}

/// The member ids of group "g", as DescribeGroups lists them.
fn member_ids(coordinator: &GroupCoordinator) -> Vec<String> {
    coordinator
        .describe("g")
        .members
        .into_iter()
        .map(|m| m.member_id)
        .collect()
}

/// Joins clients c0..cN at T0 (dynamic members, JoinGroup v0-v3) and runs the
/// initial delay out. Answers are in join order; c0 leads.
fn form_group(coordinator: &mut GroupCoordinator, n: u64) -> Vec<JoinResponse> {
    let mut replies = Vec::new();
    for i in 0..n {
        replies.extend(coordinator.join(T0, join_request(&format!("c{i}"), "", i)));
    }
    replies.extend(coordinator.tick(T0 + DELAY_MS));
    replies.extend(coordinator.tick(T0 + 2 * DELAY_MS));
    (0..n).map(|i| join_reply(&replies, i)).collect()
}

pub(super) fn assignment_for(member: &JoinResponse) -> Bytes {
    Bytes::from(format!("assigned-to-{}", member.member_id))
}

/// Leader syncs with an assignment for every member, then the followers sync.
fn stabilize(coordinator: &mut GroupCoordinator, now_ms: i64, members: &[JoinResponse]) {
    let assignments = members
        .iter()
        .map(|m| (m.member_id.clone(), assignment_for(m)))
        .collect();
    let replies = coordinator.sync(now_ms, sync_request(&members[0], assignments, 100));
    assert_eq!(sync_reply(&replies, 100).error, NONE);
    for (i, member) in members.iter().enumerate().skip(1) {
        let reply_to = 100 + i as u64;
        let replies = coordinator.sync(now_ms, sync_request(member, Vec::new(), reply_to));
        assert_eq!(
            sync_reply(&replies, reply_to).assignment,
            assignment_for(member)
        );
    }
    assert_eq!(state(coordinator), "Stable");
}

fn stable_group(n: u64) -> (GroupCoordinator, Vec<JoinResponse>) {
    let mut coordinator = new_coordinator(config(DELAY_MS));
    let members = form_group(&mut coordinator, n);
    stabilize(&mut coordinator, T0 + 2 * DELAY_MS, &members);
    (coordinator, members)
}

const NOW: i64 = T0 + 2 * DELAY_MS;

#[test]
fn first_join_with_require_known_member_id_gets_member_id_required_then_rejoins() {
    let mut coordinator = new_coordinator(config(0));
    let request = first_join("c0", 1);
    let first = join_reply(&coordinator.join(T0, request.clone()), 1);
    assert_eq!(first.error, MEMBER_ID_REQUIRED);
    assert!(first.member_id.starts_with("c0-"), "{}", first.member_id);
    assert_eq!(state(&coordinator), "Empty");

    let rejoin = JoinRequest {
        member_id: first.member_id.clone(),
        reply_to: 2,
        ..request
    };
    let joined = join_reply(&coordinator.join(T0, rejoin), 2);
    assert_eq!(joined.error, NONE);
    assert_eq!(joined.member_id, first.member_id);
    assert_eq!(joined.generation_id, 1);
    assert_eq!(joined.leader, first.member_id);
    assert_eq!(joined.members.len(), 1);
    assert_eq!(joined.protocol_name.as_deref(), Some("range"));
    assert_eq!(state(&coordinator), "CompletingRebalance");
}

#[test]
fn pending_member_id_lapses_after_the_session_timeout() {
    let mut coordinator = new_coordinator(config(0));
    let request = first_join("c0", 1);
    let first = join_reply(&coordinator.join(T0, request.clone()), 1);
    coordinator.tick(T0 + i64::from(SESSION_MS));
    let rejoin = JoinRequest {
        member_id: first.member_id,
        reply_to: 2,
        ..request
    };
    assert_eq!(join_error(&mut coordinator, T0, rejoin), UNKNOWN_MEMBER_ID);
}

#[test]
fn old_clients_join_directly_without_member_id_required() {
    let mut coordinator = new_coordinator(config(0));
    let joined = join_reply(&coordinator.join(T0, join_request("sarama", "", 1)), 1);
    assert_eq!(joined.error, NONE);
    assert!(joined.member_id.starts_with("sarama-"));
    assert_eq!(joined.generation_id, 1);
    assert_eq!(joined.leader, joined.member_id);
}

#[test]
fn join_with_a_member_id_to_an_unknown_group_is_unknown_member_id() {
    let mut coordinator = new_coordinator(config(0));
    let reply = join_reply(&coordinator.join(T0, join_request("c0", "c0-x", 1)), 1);
    assert_eq!(reply.error, UNKNOWN_MEMBER_ID);
    let empty_group = JoinRequest {
        group_id: String::new(),
        ..join_request("c0", "", 2)
    };
    assert_eq!(
        join_error(&mut coordinator, T0, empty_group),
        INVALID_GROUP_ID
    );
}

#[test]
fn initial_delay_is_extended_while_members_keep_arriving() {
    let mut coordinator = new_coordinator(config(DELAY_MS));
    assert!(coordinator.join(T0, join_request("c0", "", 0)).is_empty());
    assert_eq!(state(&coordinator), "PreparingRebalance");
    assert!(coordinator
        .join(T0 + 1_000, join_request("c1", "", 1))
        .is_empty());
    assert!(coordinator
        .join(T0 + 2_000, join_request("c2", "", 2))
        .is_empty());
    assert!(coordinator.tick(T0 + DELAY_MS - 1).is_empty());
    // New members arrived during the delay: it is extended by another delay.
    assert!(coordinator.tick(T0 + DELAY_MS).is_empty());
    assert!(coordinator.tick(T0 + 2 * DELAY_MS - 1).is_empty());
    let replies = coordinator.tick(T0 + 2 * DELAY_MS);
    assert_eq!(replies.len(), 3);
    let leader = join_reply(&replies, 0);
    assert_eq!(leader.generation_id, 1);
    assert_eq!(leader.leader, leader.member_id);
    let mut metadata: Vec<Bytes> = leader.members.iter().map(|m| m.metadata.clone()).collect();
    metadata.sort();
    assert_eq!(
        metadata,
        vec![
            Bytes::from("c0/range"),
            Bytes::from("c1/range"),
            Bytes::from("c2/range")
        ]
    );
    for follower in [join_reply(&replies, 1), join_reply(&replies, 2)] {
        assert_eq!(follower.error, NONE);
        assert_eq!(follower.generation_id, 1);
        assert_eq!(follower.leader, leader.member_id);
        assert!(follower.members.is_empty());
    }
    assert_eq!(state(&coordinator), "CompletingRebalance");
}

#[test]
fn initial_delay_without_new_members_completes_after_one_delay() {
    let mut coordinator = new_coordinator(config(DELAY_MS));
    coordinator.join(T0, join_request("c0", "", 0));
    let replies = coordinator.tick(T0 + DELAY_MS);
    assert_eq!(join_reply(&replies, 0).generation_id, 1);
}

#[test]
fn initial_delay_is_bounded_by_the_rebalance_timeout() {
    let mut coordinator = new_coordinator(config(DELAY_MS));
    let mut now = T0;
    coordinator.join(now, join_request("c0", "", 0));
    let mut answered = Vec::new();
    // A new member arrives in every delay; the phase still ends within the rebalance timeout.
    for i in 1..20 {
        now += DELAY_MS;
        coordinator.join(now - 1, join_request(&format!("c{i}"), "", i));
        answered.extend(coordinator.tick(now));
        if !answered.is_empty() {
            break;
        }
    }
    assert!(!answered.is_empty());
    assert!(
        now - T0 <= i64::from(REBALANCE_MS) + DELAY_MS,
        "took {} ms",
        now - T0
    );
}

#[test]
fn sync_distributes_assignments_and_a_follower_before_the_leader_waits() {
    let mut coordinator = new_coordinator(config(DELAY_MS));
    let members = form_group(&mut coordinator, 3);
    // Heartbeats between join and sync are fine.
    let hb = coordinator.heartbeat(NOW, "g", &members[1].member_id, None, 1);
    assert_eq!(hb, NONE);
    assert!(coordinator
        .sync(NOW, sync_request(&members[1], Vec::new(), 11))
        .is_empty());
    // The leader leaves c2 out: it gets an empty assignment.
    let assignments = vec![
        (members[0].member_id.clone(), Bytes::from("a0")),
        (members[1].member_id.clone(), Bytes::from("a1")),
    ];
    let replies = coordinator.sync(NOW, sync_request(&members[0], assignments, 10));
    assert_eq!(sync_reply(&replies, 10).assignment, Bytes::from("a0"));
    let follower = sync_reply(&replies, 11);
    assert_eq!(follower.error, NONE);
    assert_eq!(follower.assignment, Bytes::from("a1"));
    assert_eq!(follower.protocol_name.as_deref(), Some("range"));
    assert_eq!(state(&coordinator), "Stable");
    let late = coordinator.sync(NOW, sync_request(&members[2], Vec::new(), 12));
    assert_eq!(
        sync_reply(&late, 12),
        SyncResponse {
            error: NONE,
            protocol_type: Some("consumer".into()),
            protocol_name: Some("range".into()),
            assignment: Bytes::new()
        }
    );
}

#[test]
fn sync_errors() {
    let mut coordinator = new_coordinator(config(DELAY_MS));
    let members = form_group(&mut coordinator, 2);
    let mut stale = sync_request(&members[1], Vec::new(), 1);
    stale.generation_id = 0;
    assert_eq!(sync_error(&mut coordinator, NOW, stale), ILLEGAL_GENERATION);
    let mut unknown = sync_request(&members[1], Vec::new(), 2);
    unknown.member_id = "nobody".into();
    assert_eq!(
        sync_error(&mut coordinator, NOW, unknown),
        UNKNOWN_MEMBER_ID
    );
    let mut wrong_type = sync_request(&members[1], Vec::new(), 3);
    wrong_type.protocol_type = Some("connect".into());
    assert_eq!(
        sync_error(&mut coordinator, NOW, wrong_type),
        INCONSISTENT_GROUP_PROTOCOL
    );
    let mut wrong_name = sync_request(&members[1], Vec::new(), 4);
    wrong_name.protocol_name = Some("roundrobin".into());
    assert_eq!(
        sync_error(&mut coordinator, NOW, wrong_name),
        INCONSISTENT_GROUP_PROTOCOL
    );
    let mut unknown_group = sync_request(&members[1], Vec::new(), 5);
    unknown_group.group_id = "other".into();
    assert_eq!(
        sync_error(&mut coordinator, NOW, unknown_group),
        UNKNOWN_MEMBER_ID
    );

    // A follower waiting on its sync when a rebalance starts is sent back to rejoin.
    assert!(coordinator
        .sync(NOW, sync_request(&members[1], Vec::new(), 6))
        .is_empty());
    let replies = coordinator.join(NOW, join_request("c9", "", 7));
    assert_eq!(sync_reply(&replies, 6).error, REBALANCE_IN_PROGRESS);
    assert_eq!(state(&coordinator), "PreparingRebalance");
    let during = coordinator.sync(NOW, sync_request(&members[1], Vec::new(), 8));
    assert_eq!(sync_reply(&during, 8).error, REBALANCE_IN_PROGRESS);
}

#[test]
fn heartbeats_by_state() {
    let (mut coordinator, members) = stable_group(2);
    let follower = members[1].member_id.as_str();
    // (group, member, instance id, generation): the answer.
    let cases = [
        (("g", follower, None, 1), NONE),
        (("g", follower, None, 0), ILLEGAL_GENERATION),
        (("g", "nobody", None, 1), UNKNOWN_MEMBER_ID),
        (("other", follower, None, 1), UNKNOWN_MEMBER_ID),
        (("", follower, None, 1), INVALID_GROUP_ID),
        (("g", follower, Some("i"), 1), UNKNOWN_MEMBER_ID),
    ];
    for ((group, member, instance, generation), expected) in cases {
        assert_eq!(
            coordinator.heartbeat(NOW, group, member, instance, generation),
            expected,
            "heartbeat of {member:?} in {group:?} ({instance:?}) at generation {generation}"
        );
    }
    // A new member starts a rebalance: the others learn it from their heartbeat.
    coordinator.join(NOW, join_request("c9", "", 9));
    assert_eq!(state(&coordinator), "PreparingRebalance");
    assert_eq!(
        coordinator.heartbeat(NOW, "g", follower, None, 1),
        REBALANCE_IN_PROGRESS
    );
}

#[test]
fn leave_triggers_a_rebalance_and_the_others_rejoin_with_the_next_generation() {
    let (mut coordinator, members) = stable_group(3);
    let leaving = vec![
        (members[2].member_id.clone(), None),
        ("nobody".to_string(), None),
    ];
    let (error, member_errors, replies) = coordinator.leave(NOW, "g", &leaving);
    assert_eq!(
        (error, member_errors),
        (NONE, vec![NONE, UNKNOWN_MEMBER_ID])
    );
    assert!(replies.is_empty());
    assert_eq!(state(&coordinator), "PreparingRebalance");
    assert!(coordinator
        .join(NOW, join_request("c0", &members[0].member_id, 20))
        .is_empty());
    let replies = coordinator.join(NOW, join_request("c1", &members[1].member_id, 21));
    let leader = join_reply(&replies, 20);
    assert_eq!(leader.generation_id, 2);
    assert_eq!(leader.members.len(), 2);
    assert_eq!(join_reply(&replies, 21).generation_id, 2);

    let (error, member_errors, _) = coordinator.leave(NOW, "other", &leaving);
    assert_eq!(
        (error, member_errors),
        (NONE, vec![UNKNOWN_MEMBER_ID, UNKNOWN_MEMBER_ID])
    );
    assert_eq!(coordinator.leave(NOW, "", &leaving).0, INVALID_GROUP_ID);
}

#[test]
fn leaving_answers_the_members_waiting_join() {
    let mut coordinator = new_coordinator(config(DELAY_MS));
    let members = form_group(&mut coordinator, 2);
    stabilize(&mut coordinator, NOW, &members);
    // c1 rejoins with new metadata (a rebalance starts), then leaves while waiting.
    let mut rejoin = join_request("c1", &members[1].member_id, 30);
    rejoin.protocols = protocols(&["range"], "c1-owned");
    assert!(coordinator.join(NOW, rejoin).is_empty());
    let (_, _, replies) = coordinator.leave(NOW, "g", &[(members[1].member_id.clone(), None)]);
    assert_eq!(join_reply(&replies, 30).error, UNKNOWN_MEMBER_ID);
}

#[test]
fn last_member_leaving_makes_the_group_empty() {
    let (mut coordinator, members) = stable_group(1);
    coordinator.leave(NOW, "g", &[(members[0].member_id.clone(), None)]);
    assert_eq!(state(&coordinator), "Empty");
    assert!(coordinator.is_empty_or_unknown("g"));
    let empty = GroupRecord {
        protocol_type: Some("consumer".to_string()),
        generation_id: 2,
        ..GroupRecord::default()
    };
    assert_eq!(coordinator.take_changed(), vec![("g".to_string(), empty)]);
}

#[test]
fn session_expiry_removes_a_member_and_rebalances() {
    let (mut coordinator, members) = stable_group(2);
    let half = i64::from(SESSION_MS) / 2;
    assert_eq!(
        coordinator.heartbeat(NOW + half, "g", &members[0].member_id, None, 1),
        NONE
    );
    assert!(coordinator.tick(NOW + i64::from(SESSION_MS) - 1).is_empty());
    coordinator.tick(NOW + i64::from(SESSION_MS));
    assert_eq!(state(&coordinator), "PreparingRebalance");
    assert_eq!(coordinator.describe("g").members.len(), 1);
    let later = NOW + i64::from(SESSION_MS);
    assert_eq!(
        coordinator.heartbeat(later, "g", &members[1].member_id, None, 1),
        UNKNOWN_MEMBER_ID
    );
    assert_eq!(
        coordinator.heartbeat(later, "g", &members[0].member_id, None, 1),
        REBALANCE_IN_PROGRESS
    );
    let replies = coordinator.join(later, join_request("c0", &members[0].member_id, 40));
    assert_eq!(join_reply(&replies, 40).generation_id, 2);
    // Without heartbeats the last member goes too, and the group is Empty.
    coordinator.tick(later + i64::from(SESSION_MS));
    assert_eq!(state(&coordinator), "Empty");
}

#[test]
fn rebalance_timeout_removes_a_member_that_never_rejoins() {
    let (mut coordinator, members) = stable_group(2);
    let mut rejoin = join_request("c0", &members[0].member_id, 50);
    rejoin.protocols = protocols(&["range"], "c0-owned-partitions");
    assert!(coordinator.join(NOW, rejoin).is_empty());
    // c1 keeps heartbeating (its poll loop is stuck), but never rejoins.
    let mut now = NOW;
    while now < NOW + i64::from(REBALANCE_MS) - 1_000 {
        now += 1_000;
        assert_eq!(
            coordinator.heartbeat(now, "g", &members[1].member_id, None, 1),
            REBALANCE_IN_PROGRESS
        );
        assert!(coordinator.tick(now).is_empty());
    }
    let replies = coordinator.tick(NOW + i64::from(REBALANCE_MS));
    let answer = join_reply(&replies, 50);
    assert_eq!(answer.generation_id, 2);
    assert_eq!(answer.members.len(), 1);
    assert_eq!(
        coordinator.heartbeat(now, "g", &members[1].member_id, None, 1),
        UNKNOWN_MEMBER_ID
    );
}

#[test]
fn a_member_that_never_syncs_is_removed_after_the_rebalance_timeout() {
    let mut coordinator = new_coordinator(config(DELAY_MS));
    let members = form_group(&mut coordinator, 2);
    coordinator.sync(NOW, sync_request(&members[0], Vec::new(), 60));
    assert_eq!(state(&coordinator), "Stable");
    // Both keep their sessions alive, but c1 never syncs.
    for now in (NOW + 5_000..NOW + i64::from(REBALANCE_MS)).step_by(5_000) {
        for member in &members {
            assert_eq!(
                coordinator.heartbeat(now, "g", &member.member_id, None, 1),
                NONE
            );
        }
        coordinator.tick(now);
    }
    assert_eq!(state(&coordinator), "Stable");
    coordinator.tick(NOW + i64::from(REBALANCE_MS));
    assert_eq!(state(&coordinator), "PreparingRebalance");
    assert_eq!(member_ids(&coordinator), vec![members[0].member_id.clone()]);
}

#[test]
fn cooperative_rejoins_in_stable() {
    let (mut coordinator, members) = stable_group(2);
    // Same metadata from a follower: the current generation, no rebalance.
    let same = join_reply(
        &coordinator.join(NOW, join_request("c1", &members[1].member_id, 70)),
        70,
    );
    assert_eq!((same.error, same.generation_id), (NONE, 1));
    assert!(same.members.is_empty());
    assert_eq!(state(&coordinator), "Stable");
    // Owned partitions in the metadata (cooperative): a rebalance.
    let mut owned = join_request("c1", &members[1].member_id, 71);
    owned.protocols = vec![("range".to_string(), Bytes::from("c1-owns-p0"))];
    assert!(coordinator.join(NOW, owned).is_empty());
    assert_eq!(state(&coordinator), "PreparingRebalance");
    let replies = coordinator.join(NOW, join_request("c0", &members[0].member_id, 72));
    let leader = join_reply(&replies, 72);
    assert_eq!(leader.generation_id, 2);
    assert!(leader.members.iter().any(|m| m.metadata == "c1-owns-p0"));
    assert_eq!(join_reply(&replies, 71).generation_id, 2);
}

#[test]
fn a_new_member_retrying_its_join_keeps_the_new_member_timeout() {
    let (mut coordinator, members) = stable_group(1);
    let first = first_join("c1", 1);
    let member_id = join_reply(&coordinator.join(NOW, first), 1).member_id;
    assert!(coordinator
        .join(NOW, join_request("c1", &member_id, 2))
        .is_empty());
    // The retry supersedes the first join, which is told to rejoin.
    let retried = coordinator.join(NOW + 1, join_request("c1", &member_id, 3));
    assert_eq!(join_reply(&retried, 2).error, REBALANCE_IN_PROGRESS);
    let later = NOW + i64::from(SESSION_MS) + 1;
    assert_eq!(
        coordinator.heartbeat(later - 2, "g", &members[0].member_id, None, 1),
        REBALANCE_IN_PROGRESS
    );
    coordinator.tick(later);
    assert_eq!(coordinator.describe("g").members.len(), 2);
    let replies = coordinator.join(later, join_request("c0", &members[0].member_id, 4));
    assert_eq!(join_reply(&replies, 3).generation_id, 2);
}

#[test]
fn a_leader_rejoining_stable_triggers_a_rebalance() {
    let (mut coordinator, members) = stable_group(2);
    assert!(coordinator
        .join(NOW, join_request("c0", &members[0].member_id, 80))
        .is_empty());
    assert_eq!(state(&coordinator), "PreparingRebalance");
}

#[test]
fn a_lost_join_answer_is_sent_again_in_completing_rebalance() {
    let mut coordinator = new_coordinator(config(DELAY_MS));
    let members = form_group(&mut coordinator, 2);
    let again = join_reply(
        &coordinator.join(NOW, join_request("c0", &members[0].member_id, 90)),
        90,
    );
    assert_eq!(again.generation_id, 1);
    assert_eq!(again.members.len(), 2);
    assert_eq!(state(&coordinator), "CompletingRebalance");
}

/// Two static members, l0 (leader) and f1, Stable at generation 1.
fn static_group() -> (GroupCoordinator, Vec<JoinResponse>) {
    static_group_joining(static_request)
}

/// Two static members, l0 (leader) and f1, each joining with
/// `request(client, instance, reply_to)`, Stable at generation 1.
fn static_group_joining(
    request: impl Fn(&str, &str, ReplyTo) -> JoinRequest,
) -> (GroupCoordinator, Vec<JoinResponse>) {
    let mut coordinator = new_coordinator(config(DELAY_MS));
    let mut replies = coordinator.join(T0, request("c0", "l0", 0));
    replies.extend(coordinator.join(T0, request("c1", "f1", 1)));
    replies.extend(coordinator.tick(T0 + DELAY_MS));
    replies.extend(coordinator.tick(NOW));
    let members = vec![join_reply(&replies, 0), join_reply(&replies, 1)];
    stabilize(&mut coordinator, NOW, &members);
    (coordinator, members)
}

/// A static member's restart as a client below JoinGroup v9 sends it.
fn pre_v9(request: JoinRequest) -> JoinRequest {
    JoinRequest {
        supports_skip_assignment: false,
        ..request
    }
}

/// A sync from a static member; `assignments` as a client acting as leader sends them.
fn static_sync(
    member: &JoinResponse,
    instance: &str,
    assignments: Vec<(String, Bytes)>,
    reply_to: ReplyTo,
) -> SyncRequest {
    SyncRequest {
        group_instance_id: Some(instance.to_string()),
        ..sync_request(member, assignments, reply_to)
    }
}

/// A restarted static member's join answer: a new member id in place of
/// `old`'s, generation 1 kept, `leader` named, and no assignment to run.
fn assert_rejoined_as_follower(rejoin: &JoinResponse, old: &JoinResponse, leader: &str) {
    assert_eq!(rejoin.error, NONE);
    assert_ne!(rejoin.member_id, old.member_id);
    assert_eq!(rejoin.generation_id, 1);
    assert_eq!(rejoin.leader, leader);
    assert!(rejoin.members.is_empty());
    assert!(!rejoin.skip_assignment);
}

/// `member` (static, as `instance`) heartbeats in generation 1 at `now`,
/// answered NONE, then syncs without assignments: the sync's answer.
fn heartbeat_and_sync(
    coordinator: &mut GroupCoordinator,
    now: i64,
    member: &JoinResponse,
    instance: &str,
    reply_to: ReplyTo,
) -> SyncResponse {
    assert_eq!(
        coordinator.heartbeat(now, "g", &member.member_id, Some(instance), 1),
        NONE
    );
    let sync = static_sync(member, instance, Vec::new(), reply_to);
    sync_reply(&coordinator.sync(now, sync), reply_to)
}

/// The group did not move: the generation is the same, nobody was sent back
/// to rejoin, and `other` (the member that did not restart) still holds its
/// assignment and heartbeats without being told to rebalance.
fn assert_untouched(
    coordinator: &mut GroupCoordinator,
    other: &JoinResponse,
    other_instance: &str,
    reply_to: ReplyTo,
) {
    assert_eq!(state(coordinator), "Stable");
    assert_eq!(
        coordinator.record("g").map(|record| record.generation_id),
        Some(1)
    );
    let answer = heartbeat_and_sync(coordinator, NOW + 1, other, other_instance, reply_to);
    assert_eq!(answer.error, NONE);
    assert_eq!(answer.assignment, assignment_for(other));
}

/// The id a restarted static member replaced is fenced wherever it shows up.
fn assert_fenced(coordinator: &mut GroupCoordinator, old: &JoinResponse, instance: &str) {
    let old_id = old.member_id.as_str();
    assert_eq!(
        coordinator.heartbeat(NOW, "g", old_id, Some(instance), 1),
        FENCED_INSTANCE_ID
    );
    assert_eq!(
        coordinator.validate_commit(NOW, "g", old_id, Some(instance), 1),
        FENCED_INSTANCE_ID
    );
    let sync = static_sync(old, instance, Vec::new(), 99);
    assert_eq!(sync_error(coordinator, NOW, sync), FENCED_INSTANCE_ID);
}

#[test]
fn static_leader_restarting_below_v9_keeps_the_generation_and_its_assignment() {
    let (mut coordinator, members) = static_group();
    let (old_leader, follower) = (&members[0], &members[1]);
    let rejoin = join_reply(
        &coordinator.join(NOW, pre_v9(static_request("c0", "l0", 2))),
        2,
    );
    // Kafka names the leader as it was before the restart, so the restarted
    // member acts as a follower: the assignor does not run again.
    assert_rejoined_as_follower(&rejoin, old_leader, &old_leader.member_id);
    assert_untouched(&mut coordinator, follower, "f1", 3);
    assert_fenced(&mut coordinator, old_leader, "l0");

    let answer = heartbeat_and_sync(&mut coordinator, NOW, &rejoin, "l0", 4);
    assert_eq!(answer.error, NONE);
    assert_eq!(answer.assignment, assignment_for(old_leader));
    // The group's leader is the restarted member under its new id.
    let described = coordinator.describe("g");
    let ids: Vec<&str> = described
        .members
        .iter()
        .map(|m| m.member_id.as_str())
        .collect();
    assert!(ids.contains(&rejoin.member_id.as_str()), "{ids:?}");
    assert!(!ids.contains(&old_leader.member_id.as_str()), "{ids:?}");
    assert_untouched(&mut coordinator, follower, "f1", 5);
}

#[test]
fn a_stable_group_keeps_its_assignments_whatever_a_restarted_leader_syncs() {
    let (mut coordinator, members) = static_group();
    let rejoin = join_reply(
        &coordinator.join(NOW, pre_v9(static_request("c0", "l0", 2))),
        2,
    );
    // A client that assigns anyway: a Stable group answers with what it has.
    let other = vec![
        (rejoin.member_id.clone(), Bytes::from_static(b"other")),
        (members[1].member_id.clone(), Bytes::from_static(b"other")),
    ];
    let answer = sync_reply(
        &coordinator.sync(NOW, static_sync(&rejoin, "l0", other, 3)),
        3,
    );
    assert_eq!(answer.assignment, assignment_for(&members[0]));
    assert_untouched(&mut coordinator, &members[1], "f1", 4);
}

#[test]
fn static_follower_restarting_keeps_the_generation_and_its_assignment() {
    for supports_skip_assignment in [false, true] {
        let (mut coordinator, members) = static_group();
        let (leader, old_follower) = (&members[0], &members[1]);
        let request = JoinRequest {
            supports_skip_assignment,
            ..static_request("c1", "f1", 2)
        };
        let rejoin = join_reply(&coordinator.join(NOW, request), 2);
        assert_rejoined_as_follower(&rejoin, old_follower, &leader.member_id);
        assert_untouched(&mut coordinator, leader, "l0", 3);
        assert_fenced(&mut coordinator, old_follower, "f1");

        let answer = heartbeat_and_sync(&mut coordinator, NOW, &rejoin, "f1", 4);
        assert_eq!(answer.assignment, assignment_for(old_follower));
    }
}

#[test]
fn static_leader_restarting_at_v9_is_told_to_skip_assignment() {
    let (mut coordinator, members) = static_group();
    let (old_leader, follower) = (&members[0], &members[1]);
    let rejoin = join_reply(&coordinator.join(NOW, static_request("c0", "l0", 2)), 2);
    assert_eq!(rejoin.error, NONE);
    assert_ne!(rejoin.member_id, old_leader.member_id);
    assert_eq!(rejoin.generation_id, 1);
    assert_eq!(rejoin.leader, rejoin.member_id);
    assert!(rejoin.skip_assignment);
    let mut joined: Vec<&str> = rejoin
        .members
        .iter()
        .map(|m| m.member_id.as_str())
        .collect();
    joined.sort_unstable();
    let mut expected = vec![rejoin.member_id.as_str(), follower.member_id.as_str()];
    expected.sort_unstable();
    assert_eq!(joined, expected);
    assert_untouched(&mut coordinator, follower, "f1", 3);
    assert_fenced(&mut coordinator, old_leader, "l0");

    // A leader that skips assignment syncs with none and gets its own back.
    let sync = static_sync(&rejoin, "l0", Vec::new(), 4);
    let answer = sync_reply(&coordinator.sync(NOW, sync), 4);
    assert_eq!(answer.assignment, assignment_for(old_leader));
    assert_untouched(&mut coordinator, follower, "f1", 5);
}

#[test]
fn static_member_whose_protocol_choice_stays_does_not_rebalance() {
    // More protocols, or other metadata for the chosen one: the group's
    // protocol stays range, so Kafka keeps the generation.
    let offers = [
        protocols(&["roundrobin", "range"], "c1"),
        protocols(&["range"], "c1-other-subscription"),
    ];
    for offer in offers {
        let (mut coordinator, members) = static_group();
        let request = JoinRequest {
            protocols: offer,
            ..pre_v9(static_request("c1", "f1", 2))
        };
        let rejoin = join_reply(&coordinator.join(NOW, request), 2);
        assert_eq!((rejoin.error, rejoin.generation_id), (NONE, 1));
        assert_untouched(&mut coordinator, &members[0], "l0", 3);
    }
}

/// Two static members that both offer range and roundrobin (range first),
/// Stable at generation 1 on range.
fn static_group_with_two_protocols() -> (GroupCoordinator, Vec<JoinResponse>) {
    static_group_joining(|client, instance, reply_to| JoinRequest {
        protocols: protocols(&["range", "roundrobin"], client),
        ..static_request(client, instance, reply_to)
    })
}

#[test]
fn static_member_restarting_with_a_protocol_change_rebalances() {
    for (client, instance, other, other_instance) in [("c0", "l0", 1, "f1"), ("c1", "f1", 0, "l0")]
    {
        let (mut coordinator, members) = static_group_with_two_protocols();
        let request = JoinRequest {
            protocols: protocols(&["roundrobin"], client),
            ..pre_v9(static_request(client, instance, 2))
        };
        assert!(
            coordinator.join(NOW, request).is_empty(),
            "the join waits for the next generation"
        );
        assert_eq!(state(&coordinator), "PreparingRebalance");
        let other = &members[other];
        assert_eq!(
            coordinator.heartbeat(NOW, "g", &other.member_id, Some(other_instance), 1),
            REBALANCE_IN_PROGRESS
        );
        let rejoin = JoinRequest {
            member_id: other.member_id.clone(),
            protocols: protocols(&["range", "roundrobin"], "other"),
            ..static_request("other", other_instance, 3)
        };
        let replies = coordinator.join(NOW, rejoin);
        let restarted = join_reply(&replies, 2);
        assert_eq!(restarted.generation_id, 2);
        assert_eq!(restarted.protocol_name.as_deref(), Some("roundrobin"));
        assert_eq!(join_reply(&replies, 3).generation_id, 2);
    }
}

#[test]
fn static_member_restarting_while_the_group_completes_a_rebalance_rebalances() {
    let mut coordinator = new_coordinator(config(DELAY_MS));
    let mut replies = coordinator.join(T0, static_request("c0", "l0", 0));
    replies.extend(coordinator.join(T0, static_request("c1", "f1", 1)));
    replies.extend(coordinator.tick(T0 + DELAY_MS));
    replies.extend(coordinator.tick(NOW));
    let follower = join_reply(&replies, 1);
    assert_eq!(state(&coordinator), "CompletingRebalance");
    // The follower's sync waits for the leader, which restarts instead.
    let waiting = static_sync(&follower, "f1", Vec::new(), 2);
    assert!(coordinator.sync(NOW, waiting).is_empty());
    let replies = coordinator.join(NOW, pre_v9(static_request("c0", "l0", 3)));
    assert_eq!(sync_reply(&replies, 2).error, REBALANCE_IN_PROGRESS);
    assert_eq!(state(&coordinator), "PreparingRebalance");
}

#[test]
fn duplicate_static_instance_fences_the_waiting_join() {
    let mut coordinator = new_coordinator(config(DELAY_MS));
    assert!(coordinator
        .join(T0, static_request("c0", "i1", 1))
        .is_empty());
    let replies = coordinator.join(T0 + 1, static_request("c0-copy", "i1", 2));
    assert_eq!(join_reply(&replies, 1).error, FENCED_INSTANCE_ID);
    let replies = coordinator.tick(T0 + DELAY_MS + 1);
    let winner = join_reply(&replies, 2);
    assert_eq!(winner.error, NONE);
    assert_eq!(coordinator.describe("g").members.len(), 1);
    // The fenced copy trying again with a member id of its own is fenced too.
    let stale = JoinRequest {
        member_id: "c0-old".into(),
        ..static_request("c0", "i1", 3)
    };
    let now = T0 + DELAY_MS + 1;
    assert_eq!(join_error(&mut coordinator, now, stale), FENCED_INSTANCE_ID);
    let hb = coordinator.heartbeat(
        now,
        "g",
        &winner.member_id,
        Some("i1"),
        winner.generation_id,
    );
    assert_eq!(hb, NONE);
}

#[test]
fn static_member_session_expiry_removes_it() {
    let (mut coordinator, members) = static_group();
    coordinator.heartbeat(NOW + 5_000, "g", &members[0].member_id, Some("l0"), 1);
    coordinator.tick(NOW + i64::from(SESSION_MS));
    assert_eq!(member_ids(&coordinator), vec![members[0].member_id.clone()]);
    assert_eq!(state(&coordinator), "PreparingRebalance");
}

#[test]
fn leave_by_group_instance_id() {
    let (mut coordinator, _) = static_group();
    let leaving = vec![
        (String::new(), Some("f1".to_string())),
        (String::new(), Some("zz".to_string())),
    ];
    let (error, member_errors, _) = coordinator.leave(NOW, "g", &leaving);
    assert_eq!(
        (error, member_errors),
        (NONE, vec![NONE, UNKNOWN_MEMBER_ID])
    );
    assert_eq!(coordinator.describe("g").members.len(), 1);
}

#[test]
fn protocol_selection_by_votes_among_common_protocols() {
    let mut coordinator = new_coordinator(config(DELAY_MS));
    let offers: [&[&str]; 3] = [
        &["roundrobin", "range"],
        &["roundrobin", "range"],
        &["range", "roundrobin", "sticky"],
    ];
    let mut replies = Vec::new();
    for (i, offer) in offers.iter().enumerate() {
        let mut request = join_request(&format!("c{i}"), "", i as u64);
        request.protocols = protocols(offer, &format!("c{i}"));
        replies.extend(coordinator.join(T0, request));
    }
    let mut sticky_only = join_request("c3", "", 3);
    sticky_only.protocols = protocols(&["sticky"], "c3");
    let rejected = coordinator.join(T0, sticky_only);
    assert_eq!(join_reply(&rejected, 3).error, INCONSISTENT_GROUP_PROTOCOL);
    replies.extend(coordinator.tick(T0 + DELAY_MS));
    replies.extend(coordinator.tick(NOW));
    // Only roundrobin and range are common to all; roundrobin has two votes of three.
    let leader = join_reply(&replies, 0);
    assert_eq!(leader.protocol_name.as_deref(), Some("roundrobin"));
    assert!(leader
        .members
        .iter()
        .all(|m| m.metadata.ends_with(b"/roundrobin")));
}

#[test]
fn inconsistent_group_protocol() {
    let mut coordinator = new_coordinator(config(DELAY_MS));
    let mut no_protocols = join_request("c0", "", 1);
    no_protocols.protocols.clear();
    assert_eq!(
        join_error(&mut coordinator, T0, no_protocols),
        INCONSISTENT_GROUP_PROTOCOL
    );
    coordinator.join(T0, join_request("c0", "", 2));
    let mut other_type = join_request("c1", "", 3);
    other_type.protocol_type = "connect".into();
    assert_eq!(
        join_error(&mut coordinator, T0, other_type),
        INCONSISTENT_GROUP_PROTOCOL
    );
    let mut other_protocol = join_request("c1", "", 4);
    other_protocol.protocols = protocols(&["sticky"], "c1");
    assert_eq!(
        join_error(&mut coordinator, T0, other_protocol),
        INCONSISTENT_GROUP_PROTOCOL
    );
}

#[test]
fn invalid_session_timeout() {
    let mut coordinator = new_coordinator(config(0));
    for (reply_to, timeout_ms) in [(1, 5_999), (2, 1_800_001)] {
        let request = JoinRequest {
            session_timeout_ms: timeout_ms,
            ..join_request("c0", "", reply_to)
        };
        assert_eq!(
            join_error(&mut coordinator, T0, request),
            INVALID_SESSION_TIMEOUT
        );
    }
    assert_eq!(state(&coordinator), "Dead");
}

#[test]
fn group_max_size() {
    let mut coordinator = new_coordinator(GroupConfig {
        max_size: 2,
        ..config(DELAY_MS)
    });
    coordinator.join(T0, join_request("c0", "", 0));
    coordinator.join(T0, join_request("c1", "", 1));
    let full = join_reply(&coordinator.join(T0, join_request("c2", "", 2)), 2);
    assert_eq!(full.error, GROUP_MAX_SIZE_REACHED);
    assert_eq!(full.member_id, "");
    let mut replies = coordinator.tick(T0 + DELAY_MS);
    replies.extend(coordinator.tick(NOW));
    let members = [join_reply(&replies, 0), join_reply(&replies, 1)];
    stabilize(&mut coordinator, NOW, &members);
    let still_full = join_reply(&coordinator.join(NOW, join_request("c3", "", 3)), 3);
    assert_eq!(still_full.error, GROUP_MAX_SIZE_REACHED);
    assert_eq!(state(&coordinator), "Stable");
}

#[test]
fn describe_list_and_delete() {
    let mut coordinator = new_coordinator(config(DELAY_MS));
    assert_eq!(coordinator.describe("g"), GroupDescription::dead());
    let members = form_group(&mut coordinator, 2);
    let completing = coordinator.describe("g");
    assert_eq!(
        (completing.state.as_str(), completing.protocol_name.as_str()),
        ("CompletingRebalance", "")
    );
    assert!(completing.members.iter().all(|m| m.metadata.is_empty()));
    stabilize(&mut coordinator, NOW, &members);
    coordinator.validate_commit(NOW, "simple", "", None, -1);

    let stable = coordinator.describe("g");
    assert_eq!(
        (
            stable.state.as_str(),
            stable.protocol_type.as_str(),
            stable.protocol_name.as_str()
        ),
        ("Stable", "consumer", "range")
    );
    assert_eq!(stable.members[0].client_id, "c0");
    assert_eq!(stable.members[0].client_host, "/127.0.0.1");
    assert_eq!(stable.members[0].metadata, Bytes::from("c0/range"));
    assert_eq!(stable.members[0].assignment, assignment_for(&members[0]));

    let all = coordinator.list(&[]);
    assert_eq!(
        all,
        vec![
            listed("g", "consumer", "Stable"),
            listed("simple", "", "Empty")
        ]
    );
    assert_eq!(coordinator.list(&["STABLE".to_string()]).len(), 1);
    assert_eq!(
        coordinator.list(&["empty".to_string(), "dead".to_string()])[0].group_id,
        "simple"
    );
    assert!(coordinator
        .list(&["PreparingRebalance".to_string()])
        .is_empty());

    assert_eq!(coordinator.delete("g"), NON_EMPTY_GROUP);
    assert_eq!(coordinator.delete("nope"), GROUP_ID_NOT_FOUND);
    assert_eq!(coordinator.delete("simple"), NONE);
    assert_eq!(coordinator.delete("simple"), GROUP_ID_NOT_FOUND);
    assert!(coordinator.is_empty_or_unknown("simple"));
    assert!(!coordinator.is_empty_or_unknown("g"));
}

#[test]
fn validate_commit_for_simple_commits_and_members() {
    let mut coordinator = new_coordinator(config(DELAY_MS));
    assert_eq!(coordinator.validate_commit(T0, "s", "", None, -1), NONE);
    assert_eq!(coordinator.describe("s").state, "Empty");
    assert_eq!(coordinator.validate_commit(T0, "s", "", None, -1), NONE);
    assert_eq!(
        coordinator.validate_commit(T0, "unknown", "", None, 3),
        ILLEGAL_GENERATION
    );

    let members = form_group(&mut coordinator, 2);
    let leader = members[0].member_id.as_str();
    assert_eq!(
        coordinator.validate_commit(NOW, "g", leader, None, 1),
        REBALANCE_IN_PROGRESS
    );
    stabilize(&mut coordinator, NOW, &members);
    // (member, generation): the answer.
    let cases = [
        ((leader, 1), NONE),
        ((leader, 0), ILLEGAL_GENERATION),
        (("nobody", 1), UNKNOWN_MEMBER_ID),
        (("", -1), UNKNOWN_MEMBER_ID),
    ];
    for ((member, generation), expected) in cases {
        assert_eq!(
            coordinator.validate_commit(NOW, "g", member, None, generation),
            expected,
            "commit of {member:?} at generation {generation}"
        );
    }
    // Commits during PreparingRebalance with the current generation are still allowed.
    coordinator.join(NOW, join_request("c9", "", 9));
    assert_eq!(coordinator.validate_commit(NOW, "g", leader, None, 1), NONE);
}

#[test]
fn a_commit_keeps_the_session_alive() {
    let (mut coordinator, members) = stable_group(1);
    let id = members[0].member_id.as_str();
    assert_eq!(
        coordinator.validate_commit(NOW + 8_000, "g", id, None, 1),
        NONE
    );
    coordinator.tick(NOW + i64::from(SESSION_MS));
    assert_eq!(state(&coordinator), "Stable");
}

#[test]
fn restore_gives_empty_groups_with_the_stored_generation() {
    let mut coordinator = new_coordinator(config(DELAY_MS));
    let record = GroupRecord {
        protocol_type: Some("consumer".to_string()),
        generation_id: 7,
        ..GroupRecord::default()
    };
    coordinator.restore("g", record, T0);
    assert_eq!(state(&coordinator), "Empty");
    assert!(coordinator.is_empty_or_unknown("g"));
    assert!(coordinator.take_changed().is_empty());
    assert_eq!(coordinator.validate_commit(T0, "g", "", None, -1), NONE);
    coordinator.join(T0, join_request("c0", "", 1));
    let joined = join_reply(&coordinator.tick(T0 + DELAY_MS), 1);
    assert_eq!(joined.generation_id, 8);
    // As Kafka, a generation is stored once complete: not while it is assigned.
    assert!(coordinator.take_changed().is_empty());
    let sync = sync_request(
        &joined,
        vec![(joined.member_id.clone(), assignment_for(&joined))],
        2,
    );
    coordinator.sync(T0 + DELAY_MS, sync);
    let changed = coordinator.take_changed();
    assert_eq!(changed.len(), 1);
    let (group_id, stored) = &changed[0];
    assert_eq!(group_id, "g");
    assert_eq!(stored.generation_id, 8);
    assert_eq!(stored.members.len(), 1);
    assert_eq!(
        stored.members[0].assignment,
        assignment_for(&joined).to_vec()
    );
    assert!(coordinator.take_changed().is_empty());
}

/// A Stable group stored at its last completed generation, as another
/// coordinator left it, and its members' join answers.
fn moved_stable_group(n: u64) -> (GroupCoordinator, Vec<JoinResponse>, GroupRecord) {
    let (mut old, members) = stable_group(n);
    let (_, record) = old
        .take_changed()
        .into_iter()
        .next()
        .expect("the stable group's record");
    let mut coordinator = new_coordinator(config(DELAY_MS));
    coordinator.restore("g", record.clone(), NOW + 5_000);
    (coordinator, members, record)
}

#[test]
fn a_group_stored_stable_comes_back_stable_and_its_members_go_on_in_their_generation() {
    let (mut coordinator, members, record) = moved_stable_group(2);
    assert_eq!(record.members.len(), 2);
    assert_eq!(record.protocol.as_deref(), Some("range"));
    assert_eq!(state(&coordinator), "Stable");
    assert!(!coordinator.is_empty_or_unknown("g"));
    // Nothing changed, so nothing is stored again.
    assert!(coordinator.take_changed().is_empty());
    let later = NOW + 6_000;
    for member in &members {
        let id = member.member_id.as_str();
        assert_eq!(coordinator.heartbeat(later, "g", id, None, 1), NONE);
        assert_eq!(coordinator.validate_commit(later, "g", id, None, 1), NONE);
    }
    // A member that missed its sync answer gets its stored assignment.
    let sync = sync_request(&members[1], Vec::new(), 40);
    let answer = sync_reply(&coordinator.sync(later, sync), 40);
    assert_eq!(answer.error, NONE);
    assert_eq!(answer.assignment, assignment_for(&members[1]));
    let described = coordinator.describe("g");
    assert_eq!(described.state, "Stable");
    assert_eq!(described.protocol_name, "range");
    assert_eq!(described.members.len(), 2);
    assert_eq!(described.members[0].assignment, assignment_for(&members[0]));
    // A stale generation is still refused.
    let id = members[0].member_id.as_str();
    assert_eq!(
        coordinator.heartbeat(later, "g", id, None, 0),
        ILLEGAL_GENERATION
    );
    assert_eq!(
        coordinator.heartbeat(later, "g", "someone-else", None, 1),
        UNKNOWN_MEMBER_ID
    );
}

#[test]
fn a_restored_member_that_never_returns_is_dropped_when_its_fresh_session_ends() {
    let (mut coordinator, members, _) = moved_stable_group(2);
    let restored_at = NOW + 5_000;
    let session = i64::from(SESSION_MS);
    // Sessions start when the group is restored, not when they were stored.
    coordinator.tick(restored_at + session - 1);
    assert_eq!(state(&coordinator), "Stable");
    let id = members[0].member_id.as_str();
    assert_eq!(
        coordinator.heartbeat(restored_at + session - 1, "g", id, None, 1),
        NONE
    );
    coordinator.tick(restored_at + session);
    assert_eq!(state(&coordinator), "PreparingRebalance");
    let described = coordinator.describe("g");
    assert_eq!(described.members.len(), 1);
    assert_eq!(described.members[0].member_id, members[0].member_id);
}

#[test]
fn a_static_members_new_id_is_stored_before_it_is_answered() {
    let mut coordinator = new_coordinator(config(DELAY_MS));
    let first = join_reply(
        &{
            coordinator.join(T0, static_request("c0", "i0", 1));
            coordinator.tick(T0 + DELAY_MS)
        },
        1,
    );
    let sync = static_sync(
        &first,
        "i0",
        vec![(first.member_id.clone(), assignment_for(&first))],
        2,
    );
    coordinator.sync(NOW, sync);
    let stored = coordinator.take_changed();
    assert_eq!(stored[0].1.members[0].member_id, first.member_id);
    // The instance comes back with a new member id: Stable, no rebalance.
    let rejoined = join_reply(&coordinator.join(NOW, static_request("c0", "i0", 3)), 3);
    assert_eq!(rejoined.error, NONE);
    assert_ne!(rejoined.member_id, first.member_id);
    let (_, record) = coordinator
        .take_changed_group("g")
        .expect("the new member id changes the record");
    assert_eq!(record.members[0].member_id, rejoined.member_id);
    assert_eq!(record.members[0].group_instance_id.as_deref(), Some("i0"));
    // Restored elsewhere, the old id is fenced and the new one goes on.
    let mut moved = new_coordinator(config(DELAY_MS));
    moved.restore("g", record, NOW + 1);
    assert_eq!(
        moved.heartbeat(NOW + 2, "g", &first.member_id, Some("i0"), 1),
        FENCED_INSTANCE_ID
    );
    assert_eq!(
        moved.heartbeat(NOW + 2, "g", &rejoined.member_id, Some("i0"), 1),
        NONE
    );
}

#[test]
fn a_record_naming_an_instance_twice_comes_back_with_its_first_member() {
    let (_, _, mut record) = moved_stable_group(2);
    for member in &mut record.members {
        member.group_instance_id = Some("i0".to_string());
    }
    let first = record.members[0].member_id.clone();
    let second = record.members[1].member_id.clone();
    let mut coordinator = new_coordinator(config(DELAY_MS));
    coordinator.restore("g", record, NOW);
    assert_eq!(state(&coordinator), "Stable");
    let described = coordinator.describe("g");
    assert_eq!(described.members.len(), 1);
    assert_eq!(described.members[0].member_id, first);
    assert_eq!(
        coordinator.heartbeat(NOW, "g", &second, Some("i0"), 1),
        FENCED_INSTANCE_ID
    );
    // The instance's next member id takes its place without a panic.
    let rejoined = join_reply(&coordinator.join(NOW, static_request("c0", "i0", 9)), 9);
    assert_eq!(rejoined.error, NONE);
}

#[test]
fn a_record_with_members_but_no_protocol_comes_back_empty() {
    let (_, _, mut record) = moved_stable_group(1);
    record.protocol = None;
    let mut coordinator = new_coordinator(config(DELAY_MS));
    coordinator.restore("g", record, NOW);
    assert_eq!(state(&coordinator), "Empty");
    // What it holds now differs from what was stored: it is stored again, Empty.
    let changed = coordinator.take_changed();
    assert_eq!(changed.len(), 1);
    assert!(changed[0].1.members.is_empty());
}

#[test]
fn group_state_display_uses_kafka_names() {
    let names: Vec<String> = GroupState::ALL.iter().map(|s| s.to_string()).collect();
    assert_eq!(
        names,
        [
            "Empty",
            "PreparingRebalance",
            "CompletingRebalance",
            "Stable",
            "Dead"
        ]
    );
}

#[test]
fn member_ids_come_from_the_injected_source_and_replay_per_seed() {
    let ids = |seed| {
        let mut coordinator =
            GroupCoordinator::new(config(DELAY_MS), Arc::new(SeededIds::new(seed)));
        form_group(&mut coordinator, 3)
            .into_iter()
            .map(|joined| joined.member_id)
            .collect::<Vec<_>>()
    };
    let first = ids(SEED);
    assert_eq!(first, ids(SEED));
    assert_ne!(first, ids(SEED + 1));
    assert!(first.iter().all(|id| id.starts_with("c")), "{first:?}");
}

#[test]
fn transactional_commits_check_member_and_generation_only_when_given() {
    let (mut coordinator, members) = stable_group(1);
    let member = members[0].member_id.as_str();
    let generation = members[0].generation_id;
    assert_eq!(
        coordinator.validate_txn_commit("g", member, None, generation),
        NONE
    );
    // A producer that is not a member (generation -1, no member id) may commit.
    assert_eq!(coordinator.validate_txn_commit("g", "", None, -1), NONE);
    assert_eq!(
        coordinator.validate_txn_commit("g", "stranger", None, generation),
        UNKNOWN_MEMBER_ID
    );
    assert_eq!(
        coordinator.validate_txn_commit("g", member, None, generation + 1),
        ILLEGAL_GENERATION
    );
    // An unknown group is created, as Kafka's transactional commit does.
    assert_eq!(coordinator.validate_txn_commit("new", "", None, -1), NONE);
    assert_eq!(
        coordinator.validate_txn_commit("new2", "", None, 0),
        NONE,
        "a fresh group is at generation 0"
    );

    let (mut coordinator, members) = static_group();
    let old_id = members[1].member_id.clone();
    coordinator.join(NOW, static_request("c1", "f1", 2));
    assert_eq!(
        coordinator.validate_txn_commit("g", &old_id, Some("f1"), 1),
        FENCED_INSTANCE_ID
    );
}

/// The offsets log wraps a refusal with its cause; the refusal's error code
/// is what the request is answered with, not the NOT_COORDINATOR of a failed
/// store.
#[test]
fn a_refusal_wrapped_with_its_cause_keeps_its_error_code() {
    use crate::coordinator::group::offsets::store_error_code;
    use crate::coordinator::group::StoreRefused;

    #[derive(Debug)]
    struct Wrapped(StoreRefused);
    impl std::fmt::Display for Wrapped {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            write!(f, "{}: the cause", self.0)
        }
    }
    impl std::error::Error for Wrapped {
        fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
            Some(&self.0)
        }
    }
    let wrapped = std::io::Error::other(Wrapped(StoreRefused(COORDINATOR_NOT_AVAILABLE)));
    assert_eq!(store_error_code(&wrapped), COORDINATOR_NOT_AVAILABLE);
    let bare = std::io::Error::other(StoreRefused(UNKNOWN_SERVER_ERROR));
    assert_eq!(store_error_code(&bare), UNKNOWN_SERVER_ERROR);
    assert_eq!(
        store_error_code(&std::io::Error::other("disk failed")),
        NOT_COORDINATOR
    );
}

fn listed(
    group_id: &str,
    protocol_type: &str,
    state: &str,
) -> crate::coordinator::group::ListedGroup {
    crate::coordinator::group::ListedGroup {
        group_id: group_id.to_string(),
        protocol_type: protocol_type.to_string(),
        state: state.to_string(),
    }
}
