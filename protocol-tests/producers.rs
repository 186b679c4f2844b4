//! Idempotent and transactional producers on the wire: a retried batch answered
//! with the offset it was first written at, Kafka's sequence and epoch errors,
//! read_committed fetches and offsets, DescribeProducers. Producer ids are plain
//! numbers in batch headers here: no coordinator is involved.

use kafka_protocol::messages::describe_producers_request::TopicRequest;
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use kafka_protocol::messages::list_offsets_request::{ListOffsetsPartition, ListOffsetsTopic};
use kafka_protocol::messages::*;

use crate::harness::{
    decode, encode, hex, name, now_ms, record_batch, split_v0, split_v1, TestBroker, Wire,
};
use crate::produce_fetch::{create_topic, produce_request};

/// A batch of `values` from producer `producer_id` at `epoch`, first sequence `seq`.
pub(crate) fn producer_batch(
    producer_id: i64,
    epoch: i16,
    seq: i32,
    values: &[&[u8]],
    transactional: bool,
) -> Vec<u8> {
    let mut batch = record_batch(values, now_ms());
    if transactional {
        batch[21..23].copy_from_slice(&0x10i16.to_be_bytes());
    }
    batch[43..51].copy_from_slice(&producer_id.to_be_bytes());
    batch[51..53].copy_from_slice(&epoch.to_be_bytes());
    batch[53..57].copy_from_slice(&seq.to_be_bytes());
    let crc = crc32c::crc32c(&batch[21..]);
    batch[17..21].copy_from_slice(&crc.to_be_bytes());
    batch
}

fn produce_frame(topic: &str, batch: &[u8], version: i16) -> Vec<u8> {
    encode(&produce_request(topic, 0, -1, batch), version)
}

/// Produce v9 (flexible, with error messages): (error code, base offset, message).
fn produce(wire: &mut Wire, topic: &str, batch: &[u8]) -> (i16, i64, Option<String>) {
    let frame = wire.request(0, 9, 41, true, &produce_frame(topic, batch, 9));
    let response: ProduceResponse = decode(split_v1(&frame).1, 9);
    let partition = &response.responses[0].partition_responses[0];
    (
        partition.error_code,
        partition.base_offset,
        partition.error_message.as_ref().map(|m| m.to_string()),
    )
}

#[test]
fn a_retried_batch_is_answered_with_the_offset_it_was_first_written_at() {
    let broker = TestBroker::start();
    let mut wire = broker.wire();
    create_topic(&mut wire, "idem", 1, &[]);
    wire.request(
        0,
        3,
        1,
        false,
        &produce_frame("idem", &record_batch(&[b"x"], now_ms()), 3),
    );
    let first = producer_batch(1000, 0, 0, &[b"a", b"b"], false);
    let second = producer_batch(1000, 0, 2, &[b"c"], false);
    // Kafka answers a duplicate with the stored batch's timestamp as its log append
    // time, whatever the topic's timestamp type.
    let stored_timestamp = i64::from_be_bytes(first[35..43].try_into().expect("8 bytes"));
    let cases = [
        (2, &first, 1, -1),
        (3, &second, 3, -1),
        (4, &first, 1, stored_timestamp),
    ];
    for (correlation_id, batch, base_offset, log_append_time) in cases {
        let frame = wire.request(
            0,
            3,
            correlation_id,
            false,
            &produce_frame("idem", batch, 3),
        );
        // Produce v3: one topic, one partition: index 0, no error, the base offset,
        // the log append time; then throttle time 0.
        let expected = hex(&format!(
            "{correlation_id:08x} 00000001 0004 6964656d 00000001
             00000000 0000 {base_offset:016x} {log_append_time:016x} 00000000"
        ));
        assert_eq!(frame, expected, "request {correlation_id}");
    }
    // The retry wrote nothing: the log ends after the second batch.
    let request = ListOffsetsRequest::default()
        .with_replica_id(BrokerId(-1))
        .with_topics(vec![ListOffsetsTopic::default()
            .with_name(name("idem"))
            .with_partitions(vec![ListOffsetsPartition::default()
                .with_partition_index(0)
                .with_timestamp(-1)])]);
    let frame = wire.request(2, 7, 5, true, &encode(&request, 7));
    let response: ListOffsetsResponse = decode(split_v1(&frame).1, 7);
    assert_eq!(response.topics[0].partitions[0].offset, 4);
}

#[test]
fn sequence_gaps_and_stale_epochs_get_kafkas_errors() {
    let broker = TestBroker::start();
    let mut wire = broker.wire();
    create_topic(&mut wire, "seq", 1, &[]);
    assert_eq!(
        produce(&mut wire, "seq", &producer_batch(7, 3, 0, &[b"a"], false)).0,
        0
    );
    let (code, base_offset, message) =
        produce(&mut wire, "seq", &producer_batch(7, 3, 5, &[b"b"], false));
    assert_eq!(
        (code, base_offset),
        (45, -1),
        "OUT_OF_ORDER_SEQUENCE_NUMBER"
    );
    assert_eq!(
        message.as_deref(),
        Some("The broker received an out of order sequence number.")
    );
    let (code, _, message) = produce(&mut wire, "seq", &producer_batch(7, 2, 1, &[b"b"], false));
    assert_eq!(code, 47, "INVALID_PRODUCER_EPOCH");
    assert_eq!(
        message.as_deref(),
        Some("Producer attempted to produce with an old epoch.")
    );
    // A transactional producer may not slip a plain batch into its transaction.
    assert_eq!(
        produce(&mut wire, "seq", &producer_batch(8, 0, 0, &[b"t"], true)).0,
        0
    );
    let (code, _, _) = produce(&mut wire, "seq", &producer_batch(8, 0, 1, &[b"u"], false));
    assert_eq!(code, 48, "INVALID_TXN_STATE");
    // The sequence goes on where it was.
    assert_eq!(
        produce(&mut wire, "seq", &producer_batch(7, 3, 1, &[b"b"], false)),
        (0, 2, None)
    );
}

fn fetch(wire: &mut Wire, topic: &str, isolation_level: i8) -> FetchResponse {
    let request = FetchRequest::default()
        .with_replica_id(BrokerId(-1))
        .with_max_wait_ms(0)
        .with_min_bytes(0)
        .with_max_bytes(1 << 20)
        .with_isolation_level(isolation_level)
        .with_session_epoch(-1)
        .with_topics(vec![FetchTopic::default()
            .with_topic(name(topic))
            .with_partitions(vec![FetchPartition::default()
                .with_partition(0)
                .with_fetch_offset(0)
                .with_partition_max_bytes(1 << 20)])]);
    let frame = wire.request(1, 4, 51, false, &encode(&request, 4));
    decode(split_v0(&frame).1, 4)
}

fn latest_offset(wire: &mut Wire, topic: &str, isolation_level: i8) -> i64 {
    let request = ListOffsetsRequest::default()
        .with_replica_id(BrokerId(-1))
        .with_isolation_level(isolation_level)
        .with_topics(vec![ListOffsetsTopic::default()
            .with_name(name(topic))
            .with_partitions(vec![ListOffsetsPartition::default()
                .with_partition_index(0)
                .with_timestamp(-1)])]);
    let frame = wire.request(2, 2, 61, false, &encode(&request, 2));
    let response: ListOffsetsResponse = decode(split_v0(&frame).1, 2);
    response.topics[0].partitions[0].offset
}

#[test]
fn read_committed_stops_at_the_first_open_transaction() {
    let broker = TestBroker::start();
    let mut wire = broker.wire();
    create_topic(&mut wire, "txn", 1, &[]);
    let plain = record_batch(&[b"p", b"q"], now_ms());
    produce(&mut wire, "txn", &plain);
    produce(&mut wire, "txn", &producer_batch(9, 0, 0, &[b"t"], true)); // offset 2, open
    produce(&mut wire, "txn", &record_batch(&[b"r"], now_ms())); // offset 3

    let committed = fetch(&mut wire, "txn", 1);
    let partition = &committed.responses[0].partitions[0];
    assert_eq!(
        (partition.high_watermark, partition.last_stable_offset),
        (4, 2)
    );
    assert_eq!(partition.aborted_transactions.as_deref(), Some(&[][..]));
    let records = partition.records.as_deref().expect("records");
    assert_eq!(records.len(), plain.len(), "only the batch below the LSO");

    let uncommitted = fetch(&mut wire, "txn", 0);
    let partition = &uncommitted.responses[0].partitions[0];
    assert_eq!(
        (partition.high_watermark, partition.last_stable_offset),
        (4, 2)
    );
    assert_eq!(partition.aborted_transactions, None);
    assert!(partition.records.as_deref().expect("records").len() > plain.len());

    assert_eq!(latest_offset(&mut wire, "txn", 1), 2);
    assert_eq!(latest_offset(&mut wire, "txn", 0), 4);
}

/// WriteTxnMarkers v1, as a coordinator on another broker sends it: one
/// partition's commit marker. (error code of that partition.)
fn write_marker(
    wire: &mut Wire,
    topic: &str,
    producer_id: i64,
    epoch: i16,
    coordinator_epoch: i32,
) -> i16 {
    use kafka_protocol::messages::write_txn_markers_request::{
        WritableTxnMarker, WritableTxnMarkerTopic,
    };
    let request =
        WriteTxnMarkersRequest::default().with_markers(vec![WritableTxnMarker::default()
            .with_producer_id(ProducerId(producer_id))
            .with_producer_epoch(epoch)
            .with_transaction_result(true)
            .with_coordinator_epoch(coordinator_epoch)
            .with_topics(vec![WritableTxnMarkerTopic::default()
                .with_name(name(topic))
                .with_partition_indexes(vec![0])])]);
    let frame = wire.request(27, 1, 71, true, &encode(&request, 1));
    let response: WriteTxnMarkersResponse = decode(split_v1(&frame).1, 1);
    assert_eq!(response.markers[0].producer_id.0, producer_id);
    response.markers[0].topics[0].partitions[0].error_code
}

#[test]
fn write_txn_markers_ends_an_open_transaction_and_refuses_stale_epochs() {
    let broker = TestBroker::start();
    let mut wire = broker.wire();
    create_topic(&mut wire, "marked", 1, &[]);
    produce(&mut wire, "marked", &producer_batch(9, 3, 0, &[b"t"], true)); // offset 0, open
    assert_eq!(latest_offset(&mut wire, "marked", 1), 0);
    assert_eq!(
        write_marker(&mut wire, "marked", 9, 2, 5),
        47,
        "INVALID_PRODUCER_EPOCH"
    );
    assert_eq!(write_marker(&mut wire, "marked", 9, 3, 5), 0);
    // The commit marker (offset 1) moved the last stable offset past it.
    assert_eq!(latest_offset(&mut wire, "marked", 1), 2);
    // A retry finds the transaction closed: as in Kafka, its marker is
    // appended (offset 2) and ends nothing.
    assert_eq!(write_marker(&mut wire, "marked", 9, 3, 5), 0);
    assert_eq!(latest_offset(&mut wire, "marked", 0), 3);
    assert_eq!(latest_offset(&mut wire, "marked", 1), 3);
    // The partition knows coordinator epoch 5 even with no transaction open:
    // a zombie coordinator's late marker is refused, not appended.
    assert_eq!(
        write_marker(&mut wire, "marked", 9, 3, 4),
        52,
        "TRANSACTION_COORDINATOR_FENCED"
    );
    assert_eq!(latest_offset(&mut wire, "marked", 0), 3);
    // A zombie coordinator's older epoch is refused on the next transaction.
    produce(&mut wire, "marked", &producer_batch(9, 3, 1, &[b"u"], true));
    assert_eq!(
        write_marker(&mut wire, "marked", 9, 3, 4),
        52,
        "TRANSACTION_COORDINATOR_FENCED"
    );
    assert_eq!(
        write_marker(&mut wire, "unknown", 9, 3, 5),
        3,
        "UNKNOWN_TOPIC_OR_PARTITION"
    );
}

#[test]
fn describe_producers_lists_each_partitions_producers() {
    let broker = TestBroker::start();
    let mut wire = broker.wire();
    create_topic(&mut wire, "described", 1, &[]);
    produce(&mut wire, "described", &record_batch(&[b"plain"], now_ms()));
    produce(
        &mut wire,
        "described",
        &producer_batch(1000, 2, 0, &[b"a", b"b"], false),
    );
    produce(
        &mut wire,
        "described",
        &producer_batch(1001, 0, 0, &[b"t"], true),
    ); // offset 3

    let request = DescribeProducersRequest::default().with_topics(vec![
        TopicRequest::default()
            .with_name(name("described"))
            .with_partition_indexes(vec![0, 5]),
        TopicRequest::default()
            .with_name(name("absent"))
            .with_partition_indexes(vec![0]),
    ]);
    let frame = wire.request(61, 0, 71, true, &encode(&request, 0));
    let (correlation_id, body) = split_v1(&frame);
    assert_eq!(correlation_id, 71);
    let response: DescribeProducersResponse = decode(body, 0);

    let known = &response.topics[0].partitions;
    assert_eq!((known[0].partition_index, known[0].error_code), (0, 0));
    let producers: Vec<_> = known[0]
        .active_producers
        .iter()
        .map(|p| {
            (
                p.producer_id.0,
                p.producer_epoch,
                p.last_sequence,
                p.coordinator_epoch,
                p.current_txn_start_offset,
            )
        })
        .collect();
    assert_eq!(producers, vec![(1000, 2, 1, -1, -1), (1001, 0, 0, -1, 3)]);
    assert!(known[0]
        .active_producers
        .iter()
        .all(|p| p.last_timestamp > 0));
    assert_eq!((known[1].partition_index, known[1].error_code), (5, 3));
    let absent = &response.topics[1].partitions[0];
    assert_eq!(absent.error_code, 3, "UNKNOWN_TOPIC_OR_PARTITION");
    assert_eq!(
        absent.error_message.as_deref(),
        Some("This server does not host this topic-partition.")
    );
}

/// Until principals and ACLs exist: with a listener for clients and one for
/// brokers, the client listener serves neither WriteTxnMarkers
/// (CLUSTER_AUTHORIZATION_FAILED, and the transaction stays open) nor a
/// follower's Fetch (TOPIC_AUTHORIZATION_FAILED): a client posing as a follower
/// would move the high watermark past records a replica lacks. The
/// inter-broker listener serves both.
#[test]
fn inter_broker_requests_are_served_only_on_the_inter_broker_listener() {
    let broker = TestBroker::start_with(|config| {
        let listener = |name: &str| sluice::config::ListenerConfig {
            name: name.to_string(),
            bind: "127.0.0.1:0".to_string(),
            advertised: None,
            protocol: sluice::config::SecurityProtocol::Plaintext,
        };
        config.listeners = vec![listener("CLIENT"), listener("REPLICATION")];
        config.inter_broker_listener = "REPLICATION".to_string();
    });
    let addrs = broker
        .broker
        .as_ref()
        .expect("running")
        .local_addrs()
        .to_vec();
    let mut client = Wire::connect(addrs[0]);
    let mut inter_broker = Wire::connect(addrs[1]);
    create_topic(&mut client, "guarded", 1, &[]);
    produce(
        &mut client,
        "guarded",
        &producer_batch(9, 3, 0, &[b"t"], true),
    );

    assert_eq!(write_marker(&mut client, "guarded", 9, 3, 0), 31);
    assert_eq!(
        latest_offset(&mut client, "guarded", 1),
        0,
        "the transaction is still open"
    );
    assert_eq!(follower_fetch(&mut client, "guarded", 2, 7), 29);

    assert_eq!(write_marker(&mut inter_broker, "guarded", 9, 3, 0), 0);
    assert_eq!(latest_offset(&mut client, "guarded", 1), 2);
    assert_eq!(
        follower_fetch(&mut inter_broker, "guarded", 2, 7),
        77,
        "served there, and refused for its broker epoch"
    );
}

/// A follower's Fetch must carry the broker epoch of the follower's
/// registration in the image; a broker the image does not have, or an
/// earlier incarnation's epoch, is answered STALE_BROKER_EPOCH and moves
/// nothing.
#[test]
fn a_follower_fetch_with_a_broker_epoch_not_in_the_image_is_refused() {
    let broker = TestBroker::start();
    let mut wire = broker.wire();
    create_topic(&mut wire, "followed", 1, &[]);
    produce(
        &mut wire,
        "followed",
        &producer_batch(9, 0, 0, &[b"a"], false),
    );
    assert_eq!(follower_fetch(&mut wire, "followed", 2, 1), 77);
    assert_eq!(follower_fetch(&mut wire, "followed", 1, 123_456), 77);
}

/// A follower's Fetch v15 (KIP-903's ReplicaState) of partition 0 from
/// offset 0; the partition's error code.
fn follower_fetch(wire: &mut Wire, topic: &str, replica_id: i32, broker_epoch: i64) -> i16 {
    let topic_id = topic_id(wire, topic);
    let request = FetchRequest::default()
        .with_replica_state(
            fetch_request::ReplicaState::default()
                .with_replica_id(BrokerId(replica_id))
                .with_replica_epoch(broker_epoch),
        )
        .with_max_wait_ms(0)
        .with_min_bytes(1)
        .with_max_bytes(1 << 20)
        .with_topics(vec![FetchTopic::default()
            .with_topic_id(topic_id)
            .with_partitions(vec![FetchPartition::default()
                .with_partition(0)
                .with_fetch_offset(0)
                .with_partition_max_bytes(1 << 20)])]);
    let frame = wire.request(1, 15, 72, true, &encode(&request, 15));
    let response: FetchResponse = decode(split_v1(&frame).1, 15);
    response.responses[0].partitions[0].error_code
}

/// The topic's id, from Metadata v12.
fn topic_id(wire: &mut Wire, topic: &str) -> uuid::Uuid {
    let request = MetadataRequest::default().with_topics(Some(vec![
        metadata_request::MetadataRequestTopic::default().with_name(Some(name(topic))),
    ]));
    let frame = wire.request(3, 12, 73, true, &encode(&request, 12));
    let response: MetadataResponse = decode(split_v1(&frame).1, 12);
    response.topics[0].topic_id
}
