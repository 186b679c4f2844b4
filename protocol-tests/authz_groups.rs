//! Authorization refusals of the group APIs on the wire (see `authz` for the
//! fixture): FindCoordinator, JoinGroup, SyncGroup, Heartbeat, LeaveGroup,
//! DescribeGroups, ListGroups, DeleteGroups, OffsetCommit, OffsetFetch and
//! OffsetDelete, each refused with Kafka's code where Kafka puts it, then
//! served once `alice` is allowed; a refused request changes nothing.

use bytes::Bytes;
use kafka_protocol::messages::join_group_request::JoinGroupRequestProtocol;
use kafka_protocol::messages::leave_group_request::MemberIdentity;
use kafka_protocol::messages::offset_commit_request::{
    OffsetCommitRequestPartition, OffsetCommitRequestTopic,
};
use kafka_protocol::messages::offset_delete_request::{
    OffsetDeleteRequestPartition, OffsetDeleteRequestTopic,
};
use kafka_protocol::messages::offset_fetch_request::{
    OffsetFetchRequestGroup, OffsetFetchRequestTopic, OffsetFetchRequestTopics,
};
use kafka_protocol::messages::sync_group_request::SyncGroupRequestAssignment;
use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;
use sluice::security::acl::{Operation, ResourceType};

use crate::authz::{
    allow, login, secured_broker, GROUP_AUTHORIZATION_FAILED, TOPIC_AUTHORIZATION_FAILED,
    TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
};
use crate::harness::{call, find_group_coordinator, text, Wire};
use crate::produce_fetch::create_topic;

const OFFSET_COMMIT: i16 = 8;
const OFFSET_FETCH: i16 = 9;
const FIND_COORDINATOR: i16 = 10;
const JOIN_GROUP: i16 = 11;
const HEARTBEAT: i16 = 12;
const LEAVE_GROUP: i16 = 13;
const SYNC_GROUP: i16 = 14;
const DESCRIBE_GROUPS: i16 = 15;
const LIST_GROUPS: i16 = 16;
const DELETE_GROUPS: i16 = 42;
const OFFSET_DELETE: i16 = 47;

/// KIP-430's "not asked for" value of authorized operations.
const AUTHORIZED_OPERATIONS_OMITTED: i32 = i32::MIN;
/// AclOperation codes as KIP-430 bits.
const READ_BIT: i32 = 1 << 3;
const DESCRIBE_BIT: i32 = 1 << 8;

fn group(name: &str) -> GroupId {
    GroupId(text(name))
}

fn topic(name: &str) -> TopicName {
    TopicName(text(name))
}

fn find_coordinator(
    wire: &mut Wire,
    version: i16,
    key_type: i8,
    keys: &[&str],
) -> FindCoordinatorResponse {
    let mut request = FindCoordinatorRequest::default().with_key_type(key_type);
    if version >= 4 {
        request = request.with_coordinator_keys(keys.iter().map(|k| text(k)).collect());
    } else {
        request = request.with_key(text(keys[0]));
    }
    call(wire, FIND_COORDINATOR, version, version >= 3, &request)
}

fn internal_topic_exists(wire: &mut Wire, name: &str) -> bool {
    let metadata: MetadataResponse = call(
        wire,
        3,
        12,
        true,
        &MetadataRequest::default().with_topics(None),
    );
    metadata
        .topics
        .iter()
        .any(|t| t.name.as_ref().map(|n| n.as_str()) == Some(name))
}

#[test]
fn find_coordinator_needs_describe_on_the_group_or_the_transactional_id() {
    let broker = secured_broker();
    let mut alice = login(&broker, "alice");
    let mut admin = login(&broker, "admin");

    // Before v4: the response's own error, with Kafka's message from v1, no
    // coordinator; the offsets topic is not created for a refused key.
    let refused = find_coordinator(&mut alice, 0, 0, &["g1"]);
    assert_eq!(refused.error_code, GROUP_AUTHORIZATION_FAILED);
    let refused = find_coordinator(&mut alice, 1, 0, &["g1"]);
    assert_eq!(refused.error_code, GROUP_AUTHORIZATION_FAILED);
    assert_eq!(
        refused.error_message.as_deref(),
        Some("Group authorization failed.")
    );
    assert_eq!((refused.node_id.0, refused.port), (-1, -1));
    assert!(!internal_topic_exists(&mut admin, "__consumer_offsets"));

    // v4: per key, the allowed one served and the other refused.
    allow(
        &mut admin,
        "alice",
        Operation::Describe,
        ResourceType::Group,
        "g1",
    );
    let batched = find_coordinator(&mut alice, 4, 0, &["g1", "g2"]);
    let codes: Vec<i16> = batched.coordinators.iter().map(|c| c.error_code).collect();
    assert_eq!(codes, vec![0, GROUP_AUTHORIZATION_FAILED]);
    assert_eq!(batched.coordinators[0].node_id.0, 1);
    assert_eq!(batched.coordinators[1].node_id.0, -1);
    assert_eq!(batched.coordinators[1].error_message, None);
    assert_eq!(find_coordinator(&mut alice, 0, 0, &["g1"]).error_code, 0);

    // A transactional id needs Describe on it.
    let refused = find_coordinator(&mut alice, 3, 1, &["txn"]);
    assert_eq!(refused.error_code, TRANSACTIONAL_ID_AUTHORIZATION_FAILED);
    assert!(!internal_topic_exists(&mut admin, "__transaction_state"));
    let refused = find_coordinator(&mut alice, 4, 1, &["txn"]);
    assert_eq!(
        refused.coordinators[0].error_code,
        TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    );
    allow(
        &mut admin,
        "alice",
        Operation::Describe,
        ResourceType::TransactionalId,
        "txn",
    );
    assert_eq!(find_coordinator(&mut alice, 3, 1, &["txn"]).error_code, 0);
}

fn join(wire: &mut Wire, group_id: &str) -> JoinGroupResponse {
    let request = JoinGroupRequest::default()
        .with_group_id(group(group_id))
        .with_session_timeout_ms(30_000)
        .with_rebalance_timeout_ms(30_000)
        .with_member_id(text(""))
        .with_protocol_type(text("consumer"))
        .with_protocols(vec![JoinGroupRequestProtocol::default()
            .with_name(text("range"))
            .with_metadata(Bytes::from_static(b"meta"))]);
    call(wire, JOIN_GROUP, 1, false, &request)
}

fn sync(wire: &mut Wire, group_id: &str, generation: i32, member: &StrBytes) -> SyncGroupResponse {
    let request = SyncGroupRequest::default()
        .with_group_id(group(group_id))
        .with_generation_id(generation)
        .with_member_id(member.clone())
        .with_assignments(vec![SyncGroupRequestAssignment::default()
            .with_member_id(member.clone())
            .with_assignment(Bytes::from_static(b"plan"))]);
    call(wire, SYNC_GROUP, 1, false, &request)
}

fn heartbeat(wire: &mut Wire, group_id: &str, generation: i32, member: &StrBytes) -> i16 {
    let request = HeartbeatRequest::default()
        .with_group_id(group(group_id))
        .with_generation_id(generation)
        .with_member_id(member.clone());
    let response: HeartbeatResponse = call(wire, HEARTBEAT, 1, false, &request);
    response.error_code
}

fn leave(wire: &mut Wire, group_id: &str, member: &StrBytes) -> LeaveGroupResponse {
    let request = LeaveGroupRequest::default()
        .with_group_id(group(group_id))
        .with_members(vec![
            MemberIdentity::default().with_member_id(member.clone())
        ]);
    call(wire, LEAVE_GROUP, 3, false, &request)
}

fn describe_groups(
    wire: &mut Wire,
    groups: &[&str],
    include_operations: bool,
) -> DescribeGroupsResponse {
    let request = DescribeGroupsRequest::default()
        .with_groups(groups.iter().map(|g| group(g)).collect())
        .with_include_authorized_operations(include_operations);
    call(wire, DESCRIBE_GROUPS, 5, true, &request)
}

/// JoinGroup, SyncGroup, Heartbeat and LeaveGroup need Read on the group:
/// refused, the group (admin's, with one member) is as it was.
#[test]
fn the_membership_apis_need_read_on_the_group() {
    let broker = secured_broker();
    let mut admin = login(&broker, "admin");
    let mut alice = login(&broker, "alice");
    find_group_coordinator(&mut admin, "members");
    let joined = join(&mut admin, "members");
    assert_eq!(joined.error_code, 0);
    let (generation, member) = (joined.generation_id, joined.member_id.clone());
    assert_eq!(
        sync(&mut admin, "members", generation, &member).error_code,
        0
    );

    let refused = join(&mut alice, "members");
    assert_eq!(refused.error_code, GROUP_AUTHORIZATION_FAILED);
    assert_eq!(
        (refused.generation_id, refused.member_id.as_str()),
        (-1, "")
    );
    let refused = sync(&mut alice, "members", generation, &member);
    assert_eq!(refused.error_code, GROUP_AUTHORIZATION_FAILED);
    assert!(refused.assignment.is_empty());
    assert_eq!(
        heartbeat(&mut alice, "members", generation, &member),
        GROUP_AUTHORIZATION_FAILED
    );
    let refused = leave(&mut alice, "members", &member);
    assert_eq!(refused.error_code, GROUP_AUTHORIZATION_FAILED);
    assert!(refused.members.is_empty());
    let described = describe_groups(&mut admin, &["members"], false);
    assert_eq!(described.groups[0].group_state.as_str(), "Stable");
    assert_eq!(
        described.groups[0].members.len(),
        1,
        "nobody joined or left"
    );
    assert_eq!(described.groups[0].members[0].member_id, member);

    allow(
        &mut admin,
        "alice",
        Operation::Read,
        ResourceType::Group,
        "members",
    );
    assert_eq!(heartbeat(&mut alice, "members", generation, &member), 0);
    let synced = sync(&mut alice, "members", generation, &member);
    assert_eq!(synced.error_code, 0);
    assert_eq!(synced.assignment.as_ref(), b"plan");
    let left = leave(&mut alice, "members", &member);
    assert_eq!(left.error_code, 0);
    assert_eq!(left.members[0].error_code, 0);
    let joined = join(&mut alice, "members");
    assert_eq!(joined.error_code, 0);
    assert!(joined.generation_id > generation, "a new generation");
    assert_ne!(joined.member_id, member);
}

#[test]
fn describe_groups_answers_a_refused_group_with_its_error_alone() {
    let broker = secured_broker();
    let mut admin = login(&broker, "admin");
    let mut alice = login(&broker, "alice");
    find_group_coordinator(&mut admin, "described");
    assert_eq!(join(&mut admin, "described").error_code, 0);

    let refused = describe_groups(&mut alice, &["described"], true);
    let entry = &refused.groups[0];
    assert_eq!(entry.group_id.as_str(), "described");
    assert_eq!(entry.error_code, GROUP_AUTHORIZATION_FAILED);
    assert_eq!(entry.group_state.as_str(), "");
    assert_eq!(entry.protocol_type.as_str(), "");
    assert!(entry.members.is_empty());
    assert_eq!(entry.authorized_operations, AUTHORIZED_OPERATIONS_OMITTED);

    // Allowed Describe: the group, and what alice may do on it.
    allow(
        &mut admin,
        "alice",
        Operation::Describe,
        ResourceType::Group,
        "described",
    );
    let described = describe_groups(&mut alice, &["described", "other"], true);
    let entry = &described.groups[0];
    assert_eq!(entry.error_code, 0);
    assert_eq!(entry.protocol_type.as_str(), "consumer");
    assert_eq!(entry.members.len(), 1);
    assert_eq!(entry.authorized_operations, DESCRIBE_BIT);
    assert_eq!(described.groups[1].error_code, GROUP_AUTHORIZATION_FAILED);
    // Read implies Describe.
    allow(
        &mut admin,
        "alice",
        Operation::Read,
        ResourceType::Group,
        "described",
    );
    let described = describe_groups(&mut alice, &["described"], true);
    assert_eq!(
        described.groups[0].authorized_operations,
        READ_BIT | DESCRIBE_BIT
    );
    let described = describe_groups(&mut alice, &["described"], false);
    assert_eq!(
        described.groups[0].authorized_operations,
        AUTHORIZED_OPERATIONS_OMITTED
    );
}

fn list_groups(wire: &mut Wire) -> Vec<String> {
    let response: ListGroupsResponse =
        call(wire, LIST_GROUPS, 4, true, &ListGroupsRequest::default());
    assert_eq!(response.error_code, 0, "never an authorization error");
    let mut groups: Vec<String> = response
        .groups
        .iter()
        .map(|g| g.group_id.to_string())
        .collect();
    groups.sort();
    groups
}

#[test]
fn list_groups_leaves_out_groups_the_principal_may_not_describe() {
    let broker = secured_broker();
    let mut admin = login(&broker, "admin");
    let mut alice = login(&broker, "alice");
    for name in ["listed-a", "listed-b"] {
        find_group_coordinator(&mut admin, name);
        assert_eq!(join(&mut admin, name).error_code, 0);
    }
    assert!(list_groups(&mut alice).is_empty());
    allow(
        &mut admin,
        "alice",
        Operation::Describe,
        ResourceType::Group,
        "listed-b",
    );
    assert_eq!(list_groups(&mut alice), vec!["listed-b".to_string()]);
    // Describe on the cluster lists every group.
    allow(
        &mut admin,
        "alice",
        Operation::Describe,
        ResourceType::Cluster,
        "kafka-cluster",
    );
    assert_eq!(
        list_groups(&mut alice),
        vec!["listed-a".to_string(), "listed-b".to_string()]
    );
}

fn commit(wire: &mut Wire, group_id: &str, topics: &[&str], offset: i64) -> Vec<Vec<i16>> {
    let request = OffsetCommitRequest::default()
        .with_group_id(group(group_id))
        .with_generation_id_or_member_epoch(-1)
        .with_member_id(text(""))
        .with_topics(
            topics
                .iter()
                .map(|name| {
                    OffsetCommitRequestTopic::default()
                        .with_name(topic(name))
                        .with_partitions(vec![OffsetCommitRequestPartition::default()
                            .with_partition_index(0)
                            .with_committed_offset(offset)
                            .with_committed_leader_epoch(-1)])
                })
                .collect(),
        );
    let response: OffsetCommitResponse = call(wire, OFFSET_COMMIT, 8, true, &request);
    response
        .topics
        .iter()
        .map(|t| t.partitions.iter().map(|p| p.error_code).collect())
        .collect()
}

/// OffsetFetch v8 of one group: its error, and (topic, partition 0's error,
/// offset) per topic answered.
fn fetch_v8(
    wire: &mut Wire,
    group_id: &str,
    topics: Option<&[&str]>,
) -> (i16, Vec<(String, i16, i64)>) {
    let request =
        OffsetFetchRequest::default().with_groups(vec![OffsetFetchRequestGroup::default()
            .with_group_id(group(group_id))
            .with_topics(topics.map(|topics| {
                topics
                    .iter()
                    .map(|name| {
                        OffsetFetchRequestTopics::default()
                            .with_name(topic(name))
                            .with_partition_indexes(vec![0])
                    })
                    .collect()
            }))]);
    let response: OffsetFetchResponse = call(wire, OFFSET_FETCH, 8, true, &request);
    let answered = &response.groups[0];
    let topics = answered
        .topics
        .iter()
        .map(|t| {
            (
                t.name.to_string(),
                t.partitions[0].error_code,
                t.partitions[0].committed_offset,
            )
        })
        .collect();
    (answered.error_code, topics)
}

/// A broker with topics `names` (one partition each) and admin's commits of
/// offset 5 to each for `group_id`.
fn committed_group(admin: &mut Wire, group_id: &str, names: &[&str]) {
    for name in names {
        create_topic(admin, name, 1, &[]);
    }
    find_group_coordinator(admin, group_id);
    let codes = commit(admin, group_id, names, 5);
    assert!(codes.iter().flatten().all(|code| *code == 0), "{codes:?}");
}

#[test]
fn offset_commit_needs_read_on_the_group_then_on_each_topic() {
    let broker = secured_broker();
    let mut admin = login(&broker, "admin");
    let mut alice = login(&broker, "alice");
    committed_group(&mut admin, "committer", &["readable", "secret"]);

    let both = ["readable", "secret"];
    assert_eq!(
        commit(&mut alice, "committer", &both, 9),
        vec![vec![GROUP_AUTHORIZATION_FAILED]; 2]
    );
    allow(
        &mut admin,
        "alice",
        Operation::Read,
        ResourceType::Group,
        "committer",
    );
    assert_eq!(
        commit(&mut alice, "committer", &both, 9),
        vec![vec![TOPIC_AUTHORIZATION_FAILED]; 2]
    );
    allow(
        &mut admin,
        "alice",
        Operation::Read,
        ResourceType::Topic,
        "readable",
    );
    assert_eq!(
        commit(&mut alice, "committer", &both, 9),
        vec![vec![0], vec![TOPIC_AUTHORIZATION_FAILED]]
    );
    // Only the allowed topic's offset moved.
    let (error, topics) = fetch_v8(&mut admin, "committer", Some(&both));
    assert_eq!(error, 0);
    assert_eq!(
        topics,
        vec![("readable".to_string(), 0, 9), ("secret".to_string(), 0, 5)]
    );
}

#[test]
fn offset_fetch_needs_describe_on_the_group_and_hides_or_refuses_topics() {
    let broker = secured_broker();
    let mut admin = login(&broker, "admin");
    let mut alice = login(&broker, "alice");
    committed_group(&mut admin, "fetched", &["shown", "hidden"]);
    let both: &[&str] = &["shown", "hidden"];

    // The group refused: per group from v8, at the top from v2, on every
    // partition asked for before.
    assert_eq!(
        fetch_v8(&mut alice, "fetched", Some(both)),
        (GROUP_AUTHORIZATION_FAILED, vec![])
    );
    let request = OffsetFetchRequest::default()
        .with_group_id(group("fetched"))
        .with_topics(Some(vec![OffsetFetchRequestTopic::default()
            .with_name(topic("shown"))
            .with_partition_indexes(vec![0])]));
    let v7: OffsetFetchResponse = call(&mut alice, OFFSET_FETCH, 7, true, &request);
    assert_eq!(v7.error_code, GROUP_AUTHORIZATION_FAILED);
    assert!(v7.topics.is_empty());
    let v1: OffsetFetchResponse = call(&mut alice, OFFSET_FETCH, 1, false, &request);
    assert_eq!(
        v1.topics[0].partitions[0].error_code,
        GROUP_AUTHORIZATION_FAILED
    );
    assert_eq!(v1.topics[0].partitions[0].committed_offset, -1);

    // The group allowed: a topic named without Describe is refused, and
    // left out when every topic is asked for.
    allow(
        &mut admin,
        "alice",
        Operation::Describe,
        ResourceType::Group,
        "fetched",
    );
    assert_eq!(
        fetch_v8(&mut alice, "fetched", Some(both)),
        (
            0,
            vec![
                ("shown".to_string(), TOPIC_AUTHORIZATION_FAILED, -1),
                ("hidden".to_string(), TOPIC_AUTHORIZATION_FAILED, -1)
            ]
        )
    );
    assert_eq!(fetch_v8(&mut alice, "fetched", None), (0, vec![]));
    allow(
        &mut admin,
        "alice",
        Operation::Describe,
        ResourceType::Topic,
        "shown",
    );
    assert_eq!(
        fetch_v8(&mut alice, "fetched", Some(both)),
        (
            0,
            vec![
                ("shown".to_string(), 0, 5),
                ("hidden".to_string(), TOPIC_AUTHORIZATION_FAILED, -1)
            ]
        )
    );
    assert_eq!(
        fetch_v8(&mut alice, "fetched", None),
        (0, vec![("shown".to_string(), 0, 5)])
    );
    let v1: OffsetFetchResponse = call(&mut alice, OFFSET_FETCH, 1, false, &request);
    assert_eq!(
        (
            v1.topics[0].partitions[0].error_code,
            v1.topics[0].partitions[0].committed_offset
        ),
        (0, 5)
    );
}

#[test]
fn offset_delete_needs_delete_on_the_group_then_read_on_each_topic() {
    let broker = secured_broker();
    let mut admin = login(&broker, "admin");
    let mut alice = login(&broker, "alice");
    let both: &[&str] = &["gone", "kept"];
    committed_group(&mut admin, "pruned", both);
    let delete = |wire: &mut Wire| -> OffsetDeleteResponse {
        let request = OffsetDeleteRequest::default()
            .with_group_id(group("pruned"))
            .with_topics(
                both.iter()
                    .map(|name| {
                        OffsetDeleteRequestTopic::default()
                            .with_name(topic(name))
                            .with_partitions(vec![
                                OffsetDeleteRequestPartition::default().with_partition_index(0)
                            ])
                    })
                    .collect(),
            );
        call(wire, OFFSET_DELETE, 0, false, &request)
    };
    let codes = |response: &OffsetDeleteResponse| -> Vec<i16> {
        response
            .topics
            .iter()
            .map(|t| t.partitions[0].error_code)
            .collect()
    };

    let refused = delete(&mut alice);
    assert_eq!(refused.error_code, GROUP_AUTHORIZATION_FAILED);
    assert!(refused.topics.is_empty());
    allow(
        &mut admin,
        "alice",
        Operation::Delete,
        ResourceType::Group,
        "pruned",
    );
    let refused = delete(&mut alice);
    assert_eq!(refused.error_code, 0);
    assert_eq!(codes(&refused), vec![TOPIC_AUTHORIZATION_FAILED; 2]);
    assert_eq!(
        fetch_v8(&mut admin, "pruned", None).1.len(),
        2,
        "nothing deleted"
    );
    allow(
        &mut admin,
        "alice",
        Operation::Read,
        ResourceType::Topic,
        "gone",
    );
    let deleted = delete(&mut alice);
    assert_eq!(codes(&deleted), vec![0, TOPIC_AUTHORIZATION_FAILED]);
    assert_eq!(
        fetch_v8(&mut admin, "pruned", None),
        (0, vec![("kept".to_string(), 0, 5)])
    );
}

#[test]
fn delete_groups_needs_delete_on_each_group() {
    let broker = secured_broker();
    let mut admin = login(&broker, "admin");
    let mut alice = login(&broker, "alice");
    committed_group(&mut admin, "doomed", &["offsets"]);
    committed_group_again(&mut admin, "spared");
    let delete = |wire: &mut Wire| -> Vec<(String, i16)> {
        let request = DeleteGroupsRequest::default()
            .with_groups_names(vec![group("doomed"), group("spared")]);
        let response: DeleteGroupsResponse = call(wire, DELETE_GROUPS, 2, true, &request);
        response
            .results
            .iter()
            .map(|r| (r.group_id.to_string(), r.error_code))
            .collect()
    };
    allow(
        &mut admin,
        "alice",
        Operation::Delete,
        ResourceType::Group,
        "doomed",
    );
    assert_eq!(
        delete(&mut alice),
        vec![
            ("doomed".to_string(), 0),
            ("spared".to_string(), GROUP_AUTHORIZATION_FAILED)
        ]
    );
    assert_eq!(
        fetch_v8(&mut admin, "spared", None),
        (0, vec![("offsets".to_string(), 0, 5)]),
        "the refused group keeps its offsets"
    );
    allow(
        &mut admin,
        "alice",
        Operation::Delete,
        ResourceType::Group,
        "spared",
    );
    let deleted = delete(&mut alice);
    assert_eq!(deleted[1], ("spared".to_string(), 0));
    assert_eq!(fetch_v8(&mut admin, "spared", None), (0, vec![]));
}

/// Admin's commit of offset 5 to the existing topic `offsets` for `group_id`.
fn committed_group_again(admin: &mut Wire, group_id: &str) {
    find_group_coordinator(admin, group_id);
    assert_eq!(commit(admin, group_id, &["offsets"], 5), vec![vec![0]]);
}
