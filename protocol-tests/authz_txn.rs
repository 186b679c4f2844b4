//! Authorization refusals of the producer and transaction APIs on the wire
//! (see `authz` for the fixture): Produce, InitProducerId,
//! AddPartitionsToTxn, AddOffsetsToTxn, EndTxn, TxnOffsetCommit,
//! DescribeTransactions, ListTransactions and DescribeProducers, each
//! refused with Kafka's code while alice lacks the ACL, writing nothing, and
//! served once it is granted.

use std::time::{Duration, Instant};

use bytes::Bytes;
use kafka_protocol::messages::add_partitions_to_txn_request::{
    AddPartitionsToTxnTopic, AddPartitionsToTxnTransaction,
};
use kafka_protocol::messages::describe_producers_request::TopicRequest;
use kafka_protocol::messages::list_offsets_request::{ListOffsetsPartition, ListOffsetsTopic};
use kafka_protocol::messages::metadata_request::MetadataRequestTopic;
use kafka_protocol::messages::offset_fetch_request::OffsetFetchRequestTopic;
use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::txn_offset_commit_request::{
    TxnOffsetCommitRequestPartition, TxnOffsetCommitRequestTopic,
};
use kafka_protocol::messages::*;
use sluice::security::acl::{Operation, ResourceType};

use crate::authz::{
    allow, login, secured_broker, CLUSTER_AUTHORIZATION_FAILED, GROUP_AUTHORIZATION_FAILED,
    TOPIC_AUTHORIZATION_FAILED, TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
};
use crate::harness::{
    call, encode, find_group_coordinator, find_txn_coordinator, name, now_ms, record_batch,
    request_frame, text, Wire, ANSWER_TIMEOUT_MS,
};
use crate::produce_fetch::create_topic;
use crate::producers::producer_batch;
use crate::transactions::add_offsets;

const NONE: i16 = 0;
const OPERATION_NOT_ATTEMPTED: i16 = 55;
const UNKNOWN_TOPIC_ID: i16 = 100;

const TIMEOUT_MS: i32 = 60_000;

/// InitProducerId v4: (error, producer id, epoch). The coordinator is found
/// by `admin`'s wire (FindCoordinator has its own checks).
fn init(wire: &mut Wire, transactional_id: Option<&str>) -> (i16, i64, i16) {
    let request = InitProducerIdRequest::default()
        .with_transactional_id(transactional_id.map(|id| TransactionalId(text(id))))
        .with_transaction_timeout_ms(TIMEOUT_MS)
        .with_producer_id(ProducerId(-1))
        .with_producer_epoch(-1);
    let response: InitProducerIdResponse = call(wire, 22, 4, true, &request);
    (
        response.error_code,
        response.producer_id.0,
        response.producer_epoch,
    )
}

/// A transactional producer of `admin`'s: (producer id, epoch).
fn admin_producer(admin: &mut Wire, transactional_id: &str) -> (i64, i16) {
    find_txn_coordinator(admin, transactional_id);
    let (error, producer_id, epoch) = init(admin, Some(transactional_id));
    assert_eq!(error, NONE);
    (producer_id, epoch)
}

/// AddPartitionsToTxn v3 of partition 0 of each topic: each topic's error.
fn add_partitions(
    wire: &mut Wire,
    transactional_id: &str,
    (producer_id, epoch): (i64, i16),
    topics: &[&str],
) -> Vec<i16> {
    let request = AddPartitionsToTxnRequest::default()
        .with_v3_and_below_transactional_id(TransactionalId(text(transactional_id)))
        .with_v3_and_below_producer_id(ProducerId(producer_id))
        .with_v3_and_below_producer_epoch(epoch)
        .with_v3_and_below_topics(
            topics
                .iter()
                .map(|topic| {
                    AddPartitionsToTxnTopic::default()
                        .with_name(name(topic))
                        .with_partitions(vec![0])
                })
                .collect(),
        );
    let response: AddPartitionsToTxnResponse = call(wire, 24, 3, true, &request);
    response
        .results_by_topic_v3_and_below
        .iter()
        .map(|t| t.results_by_partition[0].partition_error_code)
        .collect()
}

fn end_txn(wire: &mut Wire, transactional_id: &str, (producer_id, epoch): (i64, i16)) -> i16 {
    let request = EndTxnRequest::default()
        .with_transactional_id(TransactionalId(text(transactional_id)))
        .with_producer_id(ProducerId(producer_id))
        .with_producer_epoch(epoch)
        .with_committed(true);
    let response: EndTxnResponse = call(wire, 26, 3, true, &request);
    response.error_code
}

/// TxnOffsetCommit v3 of offset 5 for partition 0 of each topic: each
/// topic's error.
fn txn_offset_commit(
    wire: &mut Wire,
    transactional_id: &str,
    (producer_id, epoch): (i64, i16),
    group: &str,
    topics: &[&str],
) -> Vec<i16> {
    let request = TxnOffsetCommitRequest::default()
        .with_transactional_id(TransactionalId(text(transactional_id)))
        .with_group_id(GroupId(text(group)))
        .with_producer_id(ProducerId(producer_id))
        .with_producer_epoch(epoch)
        .with_generation_id(-1)
        .with_topics(
            topics
                .iter()
                .map(|topic| {
                    TxnOffsetCommitRequestTopic::default()
                        .with_name(name(topic))
                        .with_partitions(vec![TxnOffsetCommitRequestPartition::default()
                            .with_partition_index(0)
                            .with_committed_offset(5)
                            .with_committed_leader_epoch(-1)])
                })
                .collect(),
        );
    let response: TxnOffsetCommitResponse = call(wire, 28, 3, true, &request);
    response
        .topics
        .iter()
        .map(|t| t.partitions[0].error_code)
        .collect()
}

/// The committed offset of partition 0 (OffsetFetch v7), -1 for none.
fn committed(wire: &mut Wire, group: &str, topic: &str) -> i64 {
    let request = OffsetFetchRequest::default()
        .with_group_id(GroupId(text(group)))
        .with_topics(Some(vec![OffsetFetchRequestTopic::default()
            .with_name(name(topic))
            .with_partition_indexes(vec![0])]));
    let response: OffsetFetchResponse = call(wire, 9, 7, true, &request);
    response.topics[0].partitions[0].committed_offset
}

/// The end offset of partition 0 (ListOffsets v7, latest).
fn end_offset(wire: &mut Wire, topic: &str) -> i64 {
    let request = ListOffsetsRequest::default()
        .with_replica_id(BrokerId(-1))
        .with_topics(vec![ListOffsetsTopic::default()
            .with_name(name(topic))
            .with_partitions(vec![ListOffsetsPartition::default()
                .with_partition_index(0)
                .with_timestamp(-1)])]);
    let response: ListOffsetsResponse = call(wire, 2, 7, true, &request);
    let partition = &response.topics[0].partitions[0];
    assert_eq!(partition.error_code, NONE);
    partition.offset
}

fn topic_id(wire: &mut Wire, topic: &str) -> uuid::Uuid {
    let request = MetadataRequest::default().with_topics(Some(vec![
        MetadataRequestTopic::default().with_name(Some(name(topic))),
    ]));
    let response: MetadataResponse = call(wire, 3, 12, true, &request);
    response.topics[0].topic_id
}

/// A Produce with one batch for partition 0 of each topic, by name.
fn produce_request(
    topics: &[&str],
    batch: &[u8],
    transactional_id: Option<&str>,
) -> ProduceRequest {
    ProduceRequest::default()
        .with_acks(1)
        .with_timeout_ms(5000)
        .with_transactional_id(transactional_id.map(|id| TransactionalId(text(id))))
        .with_topic_data(
            topics
                .iter()
                .map(|topic| {
                    TopicProduceData::default()
                        .with_name(name(topic))
                        .with_partition_data(vec![PartitionProduceData::default()
                            .with_index(0)
                            .with_records(Some(Bytes::copy_from_slice(batch)))])
                })
                .collect(),
        )
}

/// Produce at `version`: each topic's error for partition 0.
fn produce(wire: &mut Wire, version: i16, request: &ProduceRequest) -> Vec<i16> {
    let response: ProduceResponse = call(wire, 0, version, true, request);
    response
        .responses
        .iter()
        .map(|t| t.partition_responses[0].error_code)
        .collect()
}

/// Polls until `done` holds (markers are written after EndTxn is answered).
fn eventually(what: &str, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_millis(ANSWER_TIMEOUT_MS);
    while !done() {
        assert!(Instant::now() < deadline, "{what} did not happen in time");
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn init_producer_id_needs_write_on_the_id_or_idempotent_write() {
    let broker = secured_broker();
    let mut admin = login(&broker, "admin");
    let mut alice = login(&broker, "alice");
    let mut bob = login(&broker, "bob");
    find_txn_coordinator(&mut admin, "tx");
    assert_eq!(
        init(&mut alice, Some("tx")),
        (TRANSACTIONAL_ID_AUTHORIZATION_FAILED, -1, -1)
    );
    assert_eq!(
        init(&mut alice, None),
        (CLUSTER_AUTHORIZATION_FAILED, -1, -1)
    );
    allow(
        &mut admin,
        "alice",
        Operation::Write,
        ResourceType::TransactionalId,
        "tx",
    );
    assert_eq!(init(&mut alice, Some("tx")).0, NONE);
    // Write on some topic makes an idempotent producer.
    allow(
        &mut admin,
        "alice",
        Operation::Write,
        ResourceType::Topic,
        "any",
    );
    assert_eq!(init(&mut alice, None).0, NONE);
    // As does IdempotentWrite on the cluster; neither gives a transactional id.
    allow(
        &mut admin,
        "bob",
        Operation::IdempotentWrite,
        ResourceType::Cluster,
        "kafka-cluster",
    );
    assert_eq!(init(&mut bob, None).0, NONE);
    assert_eq!(
        init(&mut bob, Some("tx")).0,
        TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    );
}

/// Each topic needs Write: a refused topic's partition answers
/// TOPIC_AUTHORIZATION_FAILED and is not written, by name or by id, while
/// the request's other topics are; a topic id unknown stays UNKNOWN_TOPIC_ID.
/// A failed acks=0 produce closes the connection.
#[test]
fn produce_needs_write_on_each_topic() {
    let broker = secured_broker();
    let mut admin = login(&broker, "admin");
    let mut alice = login(&broker, "alice");
    create_topic(&mut admin, "open", 1, &[]);
    create_topic(&mut admin, "closed", 1, &[]);
    let batch = record_batch(&[b"v"], now_ms());
    let both = produce_request(&["open", "closed"], &batch, None);
    assert_eq!(
        produce(&mut alice, 9, &both),
        [TOPIC_AUTHORIZATION_FAILED, TOPIC_AUTHORIZATION_FAILED]
    );
    allow(
        &mut admin,
        "alice",
        Operation::Write,
        ResourceType::Topic,
        "open",
    );
    assert_eq!(
        produce(&mut alice, 9, &both),
        [NONE, TOPIC_AUTHORIZATION_FAILED]
    );
    assert_eq!(end_offset(&mut admin, "open"), 1);
    assert_eq!(end_offset(&mut admin, "closed"), 0, "nothing written");

    // v13 names topics by id.
    let open_id = topic_id(&mut admin, "open");
    let closed_id = topic_id(&mut admin, "closed");
    let mut by_id = produce_request(&["", "", ""], &batch, None);
    for (topic, id) in
        by_id
            .topic_data
            .iter_mut()
            .zip([open_id, closed_id, uuid::Uuid::from_u128(7)])
    {
        topic.topic_id = id;
    }
    assert_eq!(
        produce(&mut alice, 13, &by_id),
        [NONE, TOPIC_AUTHORIZATION_FAILED, UNKNOWN_TOPIC_ID]
    );
    assert_eq!(end_offset(&mut admin, "open"), 2);
    assert_eq!(end_offset(&mut admin, "closed"), 0);

    // acks=0: no answer, and the refusal closes the connection.
    let fire_and_forget = produce_request(&["closed"], &batch, None).with_acks(0);
    alice.send_frame(&request_frame(0, 9, 5, true, &encode(&fire_and_forget, 9)));
    assert!(alice.is_closed_by_broker());
    assert_eq!(end_offset(&mut admin, "closed"), 0);
}

/// Transactional batches need Write on the transactional id: refused, every
/// partition answers TRANSACTIONAL_ID_AUTHORIZATION_FAILED and none is
/// written; granted, each topic still needs Write.
#[test]
fn a_transactional_produce_needs_write_on_the_transactional_id() {
    let broker = secured_broker();
    let mut admin = login(&broker, "admin");
    let mut alice = login(&broker, "alice");
    create_topic(&mut admin, "open", 1, &[]);
    create_topic(&mut admin, "closed", 1, &[]);
    allow(
        &mut admin,
        "alice",
        Operation::Write,
        ResourceType::Topic,
        "open",
    );
    let producer = admin_producer(&mut admin, "ptx");
    assert_eq!(
        add_partitions(&mut admin, "ptx", producer, &["open", "closed"]),
        [NONE, NONE]
    );
    let batch = producer_batch(producer.0, producer.1, 0, &[b"t"], true);
    let request = produce_request(&["open", "closed"], &batch, Some("ptx"));
    assert_eq!(
        produce(&mut alice, 9, &request),
        [
            TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
            TRANSACTIONAL_ID_AUTHORIZATION_FAILED
        ]
    );
    assert_eq!(end_offset(&mut admin, "open"), 0, "nothing written");
    // Without a transactional id, transactional batches are refused alike.
    let anonymous = produce_request(&["open"], &batch, None);
    assert_eq!(
        produce(&mut alice, 9, &anonymous),
        [TRANSACTIONAL_ID_AUTHORIZATION_FAILED]
    );
    // A transactional batch behind a plain one is found all the same.
    let mut behind = record_batch(&[b"plain"], now_ms());
    behind.extend_from_slice(&batch);
    assert_eq!(
        produce(&mut alice, 9, &produce_request(&["open"], &behind, None)),
        [TRANSACTIONAL_ID_AUTHORIZATION_FAILED]
    );
    assert_eq!(end_offset(&mut admin, "open"), 0, "nothing written");
    allow(
        &mut admin,
        "alice",
        Operation::Write,
        ResourceType::TransactionalId,
        "ptx",
    );
    assert_eq!(
        produce(&mut alice, 9, &request),
        [NONE, TOPIC_AUTHORIZATION_FAILED]
    );
    assert_eq!(end_offset(&mut admin, "open"), 1);
    assert_eq!(end_offset(&mut admin, "closed"), 0);
}

/// The client form needs Write on the id, then on each topic: one refused
/// topic and nothing is added (the others OPERATION_NOT_ATTEMPTED). The
/// broker form (v4+) needs ClusterAction.
#[test]
fn add_partitions_to_txn_needs_write_on_the_id_and_each_topic() {
    let broker = secured_broker();
    let mut admin = login(&broker, "admin");
    let mut alice = login(&broker, "alice");
    create_topic(&mut admin, "open", 1, &[]);
    create_topic(&mut admin, "closed", 1, &[]);
    allow(
        &mut admin,
        "alice",
        Operation::Write,
        ResourceType::Topic,
        "open",
    );
    let producer = admin_producer(&mut admin, "atx");
    assert_eq!(
        add_partitions(&mut alice, "atx", producer, &["open", "closed"]),
        [
            TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
            TRANSACTIONAL_ID_AUTHORIZATION_FAILED
        ]
    );
    allow(
        &mut admin,
        "alice",
        Operation::Write,
        ResourceType::TransactionalId,
        "atx",
    );
    assert_eq!(
        add_partitions(&mut alice, "atx", producer, &["open", "closed"]),
        [OPERATION_NOT_ATTEMPTED, TOPIC_AUTHORIZATION_FAILED]
    );
    let described = describe(&mut admin, &["atx"]);
    assert_eq!(described[0].error_code, NONE);
    assert!(described[0].topics.is_empty(), "nothing added");
    assert_eq!(
        add_partitions(&mut alice, "atx", producer, &["open"]),
        [NONE]
    );

    let verify = AddPartitionsToTxnRequest::default().with_transactions(vec![
        AddPartitionsToTxnTransaction::default()
            .with_transactional_id(TransactionalId(text("atx")))
            .with_producer_id(ProducerId(producer.0))
            .with_producer_epoch(producer.1)
            .with_verify_only(true)
            .with_topics(vec![AddPartitionsToTxnTopic::default()
                .with_name(name("open"))
                .with_partitions(vec![0])]),
    ]);
    let refused: AddPartitionsToTxnResponse = call(&mut alice, 24, 4, true, &verify);
    assert_eq!(refused.error_code, CLUSTER_AUTHORIZATION_FAILED);
    assert!(refused.results_by_transaction.is_empty());
    let verified: AddPartitionsToTxnResponse = call(&mut admin, 24, 4, true, &verify);
    assert_eq!(verified.error_code, NONE);
    assert_eq!(
        verified.results_by_transaction[0].topic_results[0].results_by_partition[0]
            .partition_error_code,
        NONE
    );
}

/// AddOffsetsToTxn needs Write on the id and Read on the group; EndTxn
/// Write on the id.
#[test]
fn add_offsets_and_end_txn_need_write_on_the_id_and_read_on_the_group() {
    let broker = secured_broker();
    let mut admin = login(&broker, "admin");
    let mut alice = login(&broker, "alice");
    let mut bob = login(&broker, "bob");
    find_group_coordinator(&mut admin, "g");
    let producer = admin_producer(&mut admin, "otx");
    assert_eq!(
        add_offsets(&mut alice, "otx", producer, "g"),
        TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    );
    allow(
        &mut admin,
        "alice",
        Operation::Write,
        ResourceType::TransactionalId,
        "otx",
    );
    assert_eq!(
        add_offsets(&mut alice, "otx", producer, "g"),
        GROUP_AUTHORIZATION_FAILED
    );
    let described = describe(&mut admin, &["otx"]);
    assert_eq!(
        described[0].transaction_state.as_str(),
        "Empty",
        "nothing added"
    );
    allow(
        &mut admin,
        "alice",
        Operation::Read,
        ResourceType::Group,
        "g",
    );
    assert_eq!(add_offsets(&mut alice, "otx", producer, "g"), NONE);

    assert_eq!(
        end_txn(&mut bob, "otx", producer),
        TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    );
    assert_eq!(
        describe(&mut admin, &["otx"])[0].transaction_state.as_str(),
        "Ongoing",
        "still open"
    );
    assert_eq!(end_txn(&mut alice, "otx", producer), NONE);
}

/// TxnOffsetCommit: Write on the id and Read on the group refuse every
/// partition; a topic without Read is refused alone and its offset never
/// committed.
#[test]
fn txn_offset_commit_needs_the_id_the_group_and_each_topic() {
    let broker = secured_broker();
    let mut admin = login(&broker, "admin");
    let mut alice = login(&broker, "alice");
    create_topic(&mut admin, "open", 1, &[]);
    create_topic(&mut admin, "closed", 1, &[]);
    find_group_coordinator(&mut admin, "g");
    let producer = admin_producer(&mut admin, "ctx");
    assert_eq!(add_offsets(&mut admin, "ctx", producer, "g"), NONE);
    let topics = ["open", "closed"];
    assert_eq!(
        txn_offset_commit(&mut alice, "ctx", producer, "g", &topics),
        [
            TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
            TRANSACTIONAL_ID_AUTHORIZATION_FAILED
        ]
    );
    allow(
        &mut admin,
        "alice",
        Operation::Write,
        ResourceType::TransactionalId,
        "ctx",
    );
    assert_eq!(
        txn_offset_commit(&mut alice, "ctx", producer, "g", &topics),
        [GROUP_AUTHORIZATION_FAILED, GROUP_AUTHORIZATION_FAILED]
    );
    allow(
        &mut admin,
        "alice",
        Operation::Read,
        ResourceType::Group,
        "g",
    );
    assert_eq!(
        txn_offset_commit(&mut alice, "ctx", producer, "g", &topics),
        [TOPIC_AUTHORIZATION_FAILED, TOPIC_AUTHORIZATION_FAILED]
    );
    allow(
        &mut admin,
        "alice",
        Operation::Read,
        ResourceType::Topic,
        "open",
    );
    assert_eq!(
        txn_offset_commit(&mut alice, "ctx", producer, "g", &topics),
        [NONE, TOPIC_AUTHORIZATION_FAILED]
    );
    assert_eq!(end_txn(&mut admin, "ctx", producer), NONE);
    eventually("the offset is committed", || {
        committed(&mut admin, "g", "open") == 5
    });
    assert_eq!(committed(&mut admin, "g", "closed"), -1);
}

fn describe(
    wire: &mut Wire,
    transactional_ids: &[&str],
) -> Vec<describe_transactions_response::TransactionState> {
    let request = DescribeTransactionsRequest::default().with_transactional_ids(
        transactional_ids
            .iter()
            .map(|id| TransactionalId(text(id)))
            .collect(),
    );
    let response: DescribeTransactionsResponse = call(wire, 65, 0, true, &request);
    response.transaction_states
}

fn list(wire: &mut Wire) -> Vec<String> {
    let response: ListTransactionsResponse =
        call(wire, 66, 1, true, &ListTransactionsRequest::default());
    assert_eq!(response.error_code, NONE);
    let mut ids: Vec<String> = response
        .transaction_states
        .iter()
        .map(|t| t.transactional_id.to_string())
        .collect();
    ids.sort();
    ids
}

/// DescribeTransactions refuses an id without Describe and leaves out the
/// topics alice may not Describe; ListTransactions lists only the ids she
/// may Describe.
#[test]
fn transactions_are_described_and_listed_as_far_as_describe_allows() {
    let broker = secured_broker();
    let mut admin = login(&broker, "admin");
    let mut alice = login(&broker, "alice");
    create_topic(&mut admin, "open", 1, &[]);
    create_topic(&mut admin, "closed", 1, &[]);
    let seen = admin_producer(&mut admin, "seen");
    admin_producer(&mut admin, "hidden");
    assert_eq!(
        add_partitions(&mut admin, "seen", seen, &["open", "closed"]),
        [NONE, NONE]
    );
    assert!(list(&mut alice).is_empty());
    let refused = describe(&mut alice, &["seen", "hidden"]);
    assert_eq!(
        refused.iter().map(|t| t.error_code).collect::<Vec<_>>(),
        [
            TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
            TRANSACTIONAL_ID_AUTHORIZATION_FAILED
        ]
    );

    allow(
        &mut admin,
        "alice",
        Operation::Describe,
        ResourceType::TransactionalId,
        "seen",
    );
    allow(
        &mut admin,
        "alice",
        Operation::Describe,
        ResourceType::Topic,
        "open",
    );
    assert_eq!(list(&mut alice), ["seen"]);
    assert_eq!(list(&mut admin), ["hidden", "seen"]);
    let described = describe(&mut alice, &["seen", "hidden"]);
    assert_eq!(described[0].error_code, NONE);
    assert_eq!(described[0].producer_id.0, seen.0);
    let topics: Vec<&str> = described[0]
        .topics
        .iter()
        .map(|t| t.topic.as_str())
        .collect();
    assert_eq!(topics, ["open"]);
    assert_eq!(
        described[1].error_code,
        TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    );
    let all = describe(&mut admin, &["seen"]);
    assert_eq!(all[0].topics.len(), 2);
}

/// DescribeProducers needs Read on each topic.
#[test]
fn describe_producers_needs_read_on_the_topic() {
    let broker = secured_broker();
    let mut admin = login(&broker, "admin");
    let mut alice = login(&broker, "alice");
    create_topic(&mut admin, "open", 1, &[]);
    create_topic(&mut admin, "closed", 1, &[]);
    let batch = producer_batch(1000, 0, 0, &[b"a"], false);
    for topic in ["open", "closed"] {
        assert_eq!(
            produce(&mut admin, 9, &produce_request(&[topic], &batch, None)),
            [NONE]
        );
    }
    let request = DescribeProducersRequest::default().with_topics(
        ["open", "closed"]
            .iter()
            .map(|topic| {
                TopicRequest::default()
                    .with_name(name(topic))
                    .with_partition_indexes(vec![0, 1])
            })
            .collect(),
    );
    let codes = |response: &DescribeProducersResponse| -> Vec<Vec<i16>> {
        response
            .topics
            .iter()
            .map(|t| t.partitions.iter().map(|p| p.error_code).collect())
            .collect()
    };
    let refused: DescribeProducersResponse = call(&mut alice, 61, 0, true, &request);
    assert_eq!(
        codes(&refused),
        [
            [TOPIC_AUTHORIZATION_FAILED, TOPIC_AUTHORIZATION_FAILED],
            [TOPIC_AUTHORIZATION_FAILED, TOPIC_AUTHORIZATION_FAILED]
        ]
    );
    assert!(refused.topics[0].partitions[0].active_producers.is_empty());
    allow(
        &mut admin,
        "alice",
        Operation::Read,
        ResourceType::Topic,
        "open",
    );
    let allowed: DescribeProducersResponse = call(&mut alice, 61, 0, true, &request);
    assert_eq!(
        codes(&allowed),
        [
            [NONE, 3], // UNKNOWN_TOPIC_OR_PARTITION
            [TOPIC_AUTHORIZATION_FAILED, TOPIC_AUTHORIZATION_FAILED]
        ]
    );
    assert_eq!(
        allowed.topics[0].partitions[0].active_producers[0]
            .producer_id
            .0,
        1000
    );
}
