//! Group APIs on the wire: old and new JoinGroup flows, batched FindCoordinator,
//! simple commits and the multi-group OffsetFetch.

use bytes::Bytes;
use kafka_protocol::messages::join_group_request::JoinGroupRequestProtocol;
use kafka_protocol::messages::offset_commit_request::{
    OffsetCommitRequestPartition, OffsetCommitRequestTopic,
};
use kafka_protocol::messages::offset_fetch_request::{
    OffsetFetchRequestGroup, OffsetFetchRequestTopic, OffsetFetchRequestTopics,
};
use kafka_protocol::messages::sync_group_request::SyncGroupRequestAssignment;
use kafka_protocol::messages::*;

use crate::harness::{
    call, find_group_coordinator, hex, offsets_topic_records, text, TestBroker, Wire,
};
use crate::produce_fetch::create_topic;

fn join(wire: &mut Wire, version: i16, group: &str, member_id: &str) -> JoinGroupResponse {
    let request = JoinGroupRequest::default()
        .with_group_id(GroupId(text(group)))
        .with_session_timeout_ms(10_000)
        .with_rebalance_timeout_ms(10_000)
        .with_member_id(text(member_id))
        .with_protocol_type(text("consumer"))
        .with_protocols(vec![JoinGroupRequestProtocol::default()
            .with_name(text("range"))
            .with_metadata(Bytes::from_static(b"meta"))]);
    call(wire, 11, version, version >= 6, &request)
}

#[test]
fn an_old_client_joins_directly_and_a_new_one_needs_a_member_id() {
    let broker = TestBroker::start();
    let mut wire = broker.wire();
    find_group_coordinator(&mut wire, "old-group");
    find_group_coordinator(&mut wire, "new-group");
    // v0-v3 (sarama, kafka-python): the first join succeeds at once.
    let joined = join(&mut wire, 1, "old-group", "");
    assert_eq!(joined.error_code, 0);
    assert!(!joined.member_id.is_empty());
    assert_eq!(joined.leader, joined.member_id);
    assert_eq!(joined.generation_id, 1);
    assert_eq!(joined.members.len(), 1, "the leader sees every member");
    let sync = SyncGroupRequest::default()
        .with_group_id(GroupId(text("old-group")))
        .with_generation_id(joined.generation_id)
        .with_member_id(joined.member_id.clone())
        .with_assignments(vec![SyncGroupRequestAssignment::default()
            .with_member_id(joined.member_id.clone())
            .with_assignment(Bytes::from_static(b"plan"))]);
    let synced: SyncGroupResponse = call(&mut wire, 14, 1, false, &sync);
    assert_eq!(synced.error_code, 0);
    assert_eq!(synced.assignment.as_ref(), b"plan");

    // v4+ (KIP-394): MEMBER_ID_REQUIRED with a member id, then the real join.
    let first = join(&mut wire, 9, "new-group", "");
    assert_eq!(first.error_code, 79, "MEMBER_ID_REQUIRED");
    assert!(!first.member_id.is_empty());
    let second = join(&mut wire, 9, "new-group", first.member_id.as_str());
    assert_eq!(second.error_code, 0);
    assert_eq!(second.member_id, first.member_id);
    assert_eq!(
        second.protocol_name.as_ref().map(|p| p.as_str()),
        Some("range")
    );
}

#[test]
fn find_coordinator_single_and_batched() {
    let broker = TestBroker::start();
    let mut wire = broker.wire();
    let single: FindCoordinatorResponse = call(
        &mut wire,
        10,
        0,
        false,
        &FindCoordinatorRequest::default().with_key(text("any-group")),
    );
    assert_eq!(single.error_code, 0);
    assert_eq!(single.node_id.0, 1);
    assert_eq!(single.port, i32::from(broker.addr.port()));
    let batched: FindCoordinatorResponse = call(
        &mut wire,
        10,
        4,
        true,
        &FindCoordinatorRequest::default().with_coordinator_keys(vec![
            text("a"),
            text("b"),
            text(""),
        ]),
    );
    assert_eq!(batched.coordinators.len(), 3);
    assert_eq!(batched.coordinators[0].error_code, 0);
    assert_eq!(batched.coordinators[1].host.as_str(), "127.0.0.1");
    assert_eq!(
        batched.coordinators[2].error_code, 42,
        "INVALID_REQUEST for an empty group id"
    );
}

/// The first FindCoordinator of each kind creates its internal topic, as Kafka
/// does: 50 partitions, compacted, listed as internal; on one node with one
/// replica, and `__transaction_state` with its min ISR cut to that.
#[test]
fn find_coordinator_creates_the_internal_topics() {
    let broker = TestBroker::start();
    let mut wire = broker.wire();
    let metadata = |wire: &mut Wire| -> MetadataResponse {
        call(
            wire,
            3,
            12,
            true,
            &MetadataRequest::default().with_topics(None),
        )
    };
    assert!(metadata(&mut wire).topics.is_empty());
    for (key_type, topic) in [(0i8, "__consumer_offsets"), (1, "__transaction_state")] {
        let found: FindCoordinatorResponse = call(
            &mut wire,
            10,
            4,
            true,
            &FindCoordinatorRequest::default()
                .with_key_type(key_type)
                .with_coordinator_keys(vec![text("key")]),
        );
        assert_eq!(found.coordinators[0].error_code, 0);
        let listed = metadata(&mut wire);
        let internal = listed
            .topics
            .iter()
            .find(|t| t.name.as_ref().map(|n| n.0.as_str()) == Some(topic))
            .expect("created");
        assert!(internal.is_internal);
        assert_eq!(internal.partitions.len(), 50);
        assert!(internal
            .partitions
            .iter()
            .all(|p| p.replica_nodes.len() == 1));
        let configs: DescribeConfigsResponse = call(
            &mut wire,
            32,
            4,
            true,
            &DescribeConfigsRequest::default().with_resources(vec![
                describe_configs_request::DescribeConfigsResource::default()
                    .with_resource_type(2)
                    .with_resource_name(text(topic))
                    .with_configuration_keys(None),
            ]),
        );
        let value = |key: &str| {
            configs.results[0]
                .configs
                .iter()
                .find(|c| c.name.as_str() == key)
                .and_then(|c| c.value.as_ref().map(|v| v.to_string()))
        };
        assert_eq!(value("cleanup.policy").as_deref(), Some("compact"));
        if key_type == 1 {
            assert_eq!(value("min.insync.replicas").as_deref(), Some("1"));
        }
    }
}

#[test]
fn simple_commits_and_multi_group_fetch() {
    let broker = TestBroker::start();
    let mut wire = broker.wire();
    create_topic(&mut wire, "committed", 2, &[]);
    find_group_coordinator(&mut wire, "simple-a");
    find_group_coordinator(&mut wire, "simple-b");
    let commit = |wire: &mut Wire, group: &str, offset: i64| -> OffsetCommitResponse {
        let request = OffsetCommitRequest::default()
            .with_group_id(GroupId(text(group)))
            .with_generation_id_or_member_epoch(-1)
            .with_member_id(text(""))
            .with_topics(vec![
                OffsetCommitRequestTopic::default()
                    .with_name(TopicName(text("committed")))
                    .with_partitions(vec![OffsetCommitRequestPartition::default()
                        .with_partition_index(1)
                        .with_committed_offset(offset)
                        .with_committed_leader_epoch(0)
                        .with_committed_metadata(Some(text("note")))]),
                OffsetCommitRequestTopic::default()
                    .with_name(TopicName(text("missing")))
                    .with_partitions(vec![
                        OffsetCommitRequestPartition::default().with_partition_index(0)
                    ]),
            ]);
        call(wire, 8, 8, true, &request)
    };
    let committed = commit(&mut wire, "simple-a", 42);
    assert_eq!(committed.topics[0].partitions[0].error_code, 0);
    assert_eq!(
        committed.topics[1].partitions[0].error_code, 3,
        "UNKNOWN_TOPIC_OR_PARTITION"
    );
    commit(&mut wire, "simple-b", 7);

    // v1: one group, named partitions; a partition never committed is -1.
    let request = OffsetFetchRequest::default()
        .with_group_id(GroupId(text("simple-a")))
        .with_topics(Some(vec![OffsetFetchRequestTopic::default()
            .with_name(TopicName(text("committed")))
            .with_partition_indexes(vec![0, 1])]));
    let fetched: OffsetFetchResponse = call(&mut wire, 9, 1, false, &request);
    let partitions = &fetched.topics[0].partitions;
    assert_eq!(
        (
            partitions[0].committed_offset,
            partitions[1].committed_offset
        ),
        (-1, 42)
    );
    assert_eq!(
        partitions[1].metadata.as_ref().map(|m| m.as_str()),
        Some("note")
    );

    // v8: two groups in one request, all partitions of each.
    let request = OffsetFetchRequest::default().with_groups(vec![
        OffsetFetchRequestGroup::default()
            .with_group_id(GroupId(text("simple-a")))
            .with_topics(None),
        OffsetFetchRequestGroup::default()
            .with_group_id(GroupId(text("simple-b")))
            .with_topics(Some(vec![OffsetFetchRequestTopics::default()
                .with_name(TopicName(text("committed")))
                .with_partition_indexes(vec![1])])),
    ]);
    let fetched: OffsetFetchResponse = call(&mut wire, 9, 8, true, &request);
    assert_eq!(fetched.groups.len(), 2);
    assert_eq!(
        fetched.groups[0].topics[0].partitions[0].committed_offset,
        42
    );
    assert_eq!(
        fetched.groups[0].topics[0].partitions[0].committed_leader_epoch,
        0
    );
    assert_eq!(
        fetched.groups[1].topics[0].partitions[0].committed_offset,
        7
    );
}

/// A commit is a record of Kafka's own format in the group's partition of
/// `__consumer_offsets`, where a tool that reads Kafka's offsets topic reads
/// it: OffsetCommitKey (type 1: group, topic, partition) and OffsetCommitValue
/// v3 (offset, leader epoch, metadata, commit time); a deleted group leaves
/// tombstones for its offsets and its group metadata key (type 2).
#[test]
fn offset_commits_are_kafka_records_in_the_offsets_topic() {
    let broker = TestBroker::start();
    let mut wire = broker.wire();
    create_topic(&mut wire, "recorded", 1, &[]);
    let group = "recorded-group";
    find_group_coordinator(&mut wire, group);
    let before = crate::harness::now_ms();
    let request = OffsetCommitRequest::default()
        .with_group_id(GroupId(text(group)))
        .with_generation_id_or_member_epoch(-1)
        .with_member_id(text(""))
        .with_topics(vec![OffsetCommitRequestTopic::default()
            .with_name(TopicName(text("recorded")))
            .with_partitions(vec![OffsetCommitRequestPartition::default()
                .with_partition_index(0)
                .with_committed_offset(42)
                .with_committed_leader_epoch(3)
                .with_committed_metadata(Some(text("m")))])]);
    let committed: OffsetCommitResponse = call(&mut wire, 8, 8, true, &request);
    assert_eq!(committed.topics[0].partitions[0].error_code, 0);
    let deleted: DeleteGroupsResponse = call(
        &mut wire,
        42,
        1,
        false,
        &DeleteGroupsRequest::default().with_groups_names(vec![GroupId(text(group))]),
    );
    assert_eq!(deleted.results[0].error_code, 0);

    let partition = sluice::internal_topics::group_partition(group);
    let records = offsets_topic_records(&mut wire, partition);
    let offset_key = [
        "0001", // key type 1: an offset commit
        "000e", // "recorded-group"
        "7265636f726465642d67726f7570",
        "0008", // "recorded"
        "7265636f72646564",
        "00000000", // partition 0
    ]
    .concat();
    let group_key = ["0002", "000e", "7265636f726465642d67726f7570"].concat();
    let commit = records
        .iter()
        .position(|r| r.key.as_deref() == Some(hex(&offset_key).as_slice()))
        .expect("an OffsetCommitKey record");
    let value = records[commit].value.as_deref().expect("a value");
    assert_eq!(
        &value[..17],
        hex("0003 000000000000002a 00000003 0001 6d").as_slice(),
        "OffsetCommitValue v3: version, offset 42, leader epoch 3, metadata \"m\""
    );
    let commit_time = i64::from_be_bytes(value[17..25].try_into().expect("8 bytes"));
    assert!(commit_time >= before, "the commit time is the broker's");
    assert_eq!(value.len(), 25);
    let tombstones: Vec<(Vec<u8>, bool)> = records[commit + 1..]
        .iter()
        .map(|r| {
            (
                r.key.as_deref().unwrap_or_default().to_vec(),
                r.value.is_none(),
            )
        })
        .collect();
    assert!(
        tombstones.contains(&(hex(&offset_key), true)),
        "the deletion's offset tombstone: {tombstones:?}"
    );
    assert_eq!(
        tombstones.last(),
        Some(&(hex(&group_key), true)),
        "the deletion's group tombstone"
    );
}

/// A data dir from a version that kept committed offsets and group records
/// only in its sled store: the first load of the group's partition writes them
/// into `__consumer_offsets`, once, so that they outlive the store. With the
/// store gone, they come back from the topic.
#[test]
fn offsets_stored_before_the_offsets_topic_are_written_into_it_once() {
    use sluice::store::{CommittedOffset, GroupRecord, OffsetStore, SledOffsetStore};

    let mut broker = TestBroker::unstarted();
    let group = "stored-before";
    let offsets_dir = broker.data_dir().join("offsets");
    broker.runtime.block_on(async {
        let old = SledOffsetStore::open(&offsets_dir).expect("old store");
        let value = CommittedOffset {
            offset: 17,
            leader_epoch: -1,
            metadata: "old".to_string(),
            commit_timestamp_ms: crate::harness::now_ms(),
        };
        old.commit(group, vec![("migrated".to_string(), 0, value)])
            .await
            .expect("old commit");
        let record = GroupRecord {
            protocol_type: Some("consumer".to_string()),
            generation_id: 4,
            ..GroupRecord::default()
        };
        old.save_group(group, &record).expect("old group record");
        old.close().await.expect("old store closed");
    });
    let fetch_offset = |wire: &mut Wire| -> (i16, i64) {
        find_group_coordinator(wire, group);
        let request = OffsetFetchRequest::default()
            .with_group_id(GroupId(text(group)))
            .with_topics(Some(vec![OffsetFetchRequestTopic::default()
                .with_name(TopicName(text("migrated")))
                .with_partition_indexes(vec![0])]));
        let fetched: OffsetFetchResponse = call(wire, 9, 1, false, &request);
        let partition = &fetched.topics[0].partitions[0];
        (partition.error_code, partition.committed_offset)
    };

    broker.start_again();
    let mut wire = broker.wire();
    create_topic(&mut wire, "migrated", 1, &[]);
    assert_eq!(fetch_offset(&mut wire), (0, 17), "the old offset is served");
    let described: DescribeGroupsResponse = call(
        &mut wire,
        15,
        0,
        false,
        &DescribeGroupsRequest::default().with_groups(vec![GroupId(text(group))]),
    );
    assert_eq!(
        described.groups[0].protocol_type.as_str(),
        "consumer",
        "the old group record is restored"
    );
    broker.stop();

    // The sled store is only a cache now: without it, the topic has it all.
    std::fs::remove_dir_all(&offsets_dir).expect("store removed");
    broker.start_again();
    assert_eq!(
        fetch_offset(&mut broker.wire()),
        (0, 17),
        "the offset came back from the topic"
    );
}

/// A coordinator's load rebuilds its groups from the offsets log alone, as
/// Kafka's GroupMetadataManager does: a value only the cache holds (there is
/// no record of it in the log) is put right by the next load.
#[test]
fn a_load_rebuilds_the_groups_from_the_offsets_log_not_from_the_cache() {
    use sluice::store::{CommittedOffset, OffsetStore, SledOffsetStore};

    let mut broker = TestBroker::start();
    let group = "rebuilt";
    let offsets_dir = broker.data_dir().join("offsets");
    let fetch_offset = |wire: &mut Wire| -> i64 {
        find_group_coordinator(wire, group);
        let request = OffsetFetchRequest::default()
            .with_group_id(GroupId(text(group)))
            .with_topics(Some(vec![OffsetFetchRequestTopic::default()
                .with_name(TopicName(text("cp")))
                .with_partition_indexes(vec![0])]));
        let fetched: OffsetFetchResponse = call(wire, 9, 1, false, &request);
        let answer = &fetched.topics[0].partitions[0];
        assert_eq!(answer.error_code, 0);
        answer.committed_offset
    };

    let mut wire = broker.wire();
    create_topic(&mut wire, "cp", 1, &[]);
    find_group_coordinator(&mut wire, group);
    commit_offset(&mut wire, group, "cp", 5);
    broker.stop();
    broker.start_again();
    assert_eq!(fetch_offset(&mut broker.wire()), 5);
    broker.stop();

    broker.runtime.block_on(async {
        let cache = SledOffsetStore::open(&offsets_dir).expect("store");
        let planted = CommittedOffset {
            offset: 99,
            leader_epoch: -1,
            metadata: String::new(),
            commit_timestamp_ms: crate::harness::now_ms(),
        };
        cache
            .commit(group, vec![("cp".to_string(), 0, planted)])
            .await
            .expect("planted");
        cache.close().await.expect("closed");
    });
    broker.start_again();
    assert_eq!(
        fetch_offset(&mut broker.wire()),
        5,
        "the load takes the log's offset, not the cache's"
    );
}

/// OffsetCommit v8 of one offset, outside any generation; asserts it is taken.
fn commit_offset(wire: &mut Wire, group: &str, topic: &str, offset: i64) {
    let request = OffsetCommitRequest::default()
        .with_group_id(GroupId(text(group)))
        .with_generation_id_or_member_epoch(-1)
        .with_member_id(text(""))
        .with_topics(vec![OffsetCommitRequestTopic::default()
            .with_name(TopicName(text(topic)))
            .with_partitions(vec![OffsetCommitRequestPartition::default()
                .with_partition_index(0)
                .with_committed_offset(offset)])]);
    let committed: OffsetCommitResponse = call(wire, 8, 8, true, &request);
    assert_eq!(committed.topics[0].partitions[0].error_code, 0);
}
