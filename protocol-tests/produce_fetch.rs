//! Produce and Fetch on the wire: offsets assigned by the broker, CRC checked,
//! batches served back byte for byte, Kafka's errors, the long poll.

use std::time::{Duration, Instant};

use bytes::Bytes;
use kafka_protocol::messages::create_topics_request::{CreatableTopic, CreatableTopicConfig};
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use kafka_protocol::messages::list_offsets_request::{ListOffsetsPartition, ListOffsetsTopic};
use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;

use crate::harness::{
    decode, encode, name, now_ms, record_batch, split_v0, split_v1, TestBroker, Wire,
};

pub fn create_topic(wire: &mut Wire, topic: &str, partitions: i32, configs: &[(&str, &str)]) {
    let request = CreateTopicsRequest::default().with_topics(vec![CreatableTopic::default()
        .with_name(name(topic))
        .with_num_partitions(partitions)
        .with_replication_factor(1)
        .with_configs(
            configs
                .iter()
                .map(|(k, v)| {
                    CreatableTopicConfig::default()
                        .with_name(StrBytes::from_string(k.to_string()))
                        .with_value(Some(StrBytes::from_string(v.to_string())))
                })
                .collect(),
        )]);
    let frame = wire.request(19, 7, 1, true, &encode(&request, 7));
    let response: CreateTopicsResponse = decode(split_v1(&frame).1, 7);
    assert_eq!(
        response.topics[0].error_code, 0,
        "{:?}",
        response.topics[0].error_message
    );
}

/// A Produce of one batch to one partition, with a 5 s timeout.
pub fn produce_request(topic: &str, partition: i32, acks: i16, batch: &[u8]) -> ProduceRequest {
    ProduceRequest::default()
        .with_acks(acks)
        .with_timeout_ms(5000)
        .with_topic_data(vec![TopicProduceData::default()
            .with_name(name(topic))
            .with_partition_data(vec![PartitionProduceData::default()
                .with_index(partition)
                .with_records(Some(Bytes::copy_from_slice(batch)))])])
}

pub fn produce(
    wire: &mut Wire,
    version: i16,
    topic: &str,
    partition: i32,
    acks: i16,
    batch: &[u8],
) -> Option<ProduceResponse> {
    let request = produce_request(topic, partition, acks, batch);
    let flexible = version >= 9;
    let frame = crate::harness::request_frame(0, version, 21, flexible, &encode(&request, version));
    wire.send_frame(&frame);
    if acks == 0 {
        return None;
    }
    let frame = wire.recv_frame();
    let (correlation_id, body) = if flexible {
        split_v1(&frame)
    } else {
        split_v0(&frame)
    };
    assert_eq!(correlation_id, 21);
    Some(decode(body, version))
}

pub fn fetch(
    wire: &mut Wire,
    version: i16,
    topic: &str,
    offset: i64,
    max_wait_ms: i32,
) -> FetchResponse {
    let request = FetchRequest::default()
        .with_replica_id(BrokerId(-1))
        .with_max_wait_ms(max_wait_ms)
        .with_min_bytes(1)
        .with_max_bytes(1 << 20)
        .with_session_epoch(-1)
        .with_topics(vec![FetchTopic::default()
            .with_topic(name(topic))
            .with_partitions(vec![FetchPartition::default()
                .with_partition(0)
                .with_fetch_offset(offset)
                .with_partition_max_bytes(1 << 20)])]);
    let flexible = version >= 12;
    let frame = wire.request(1, version, 31, flexible, &encode(&request, version));
    let (correlation_id, body) = if flexible {
        split_v1(&frame)
    } else {
        split_v0(&frame)
    };
    assert_eq!(correlation_id, 31);
    decode(body, version)
}

/// What the log stores for a produced batch: base offset and leader epoch set.
fn stored(batch: &[u8], base_offset: i64, leader_epoch: i32) -> Vec<u8> {
    let mut stored = batch.to_vec();
    stored[0..8].copy_from_slice(&base_offset.to_be_bytes());
    stored[12..16].copy_from_slice(&leader_epoch.to_be_bytes());
    stored
}

#[test]
fn offsets_are_assigned_and_batches_come_back_byte_for_byte() {
    let broker = TestBroker::start();
    let mut wire = broker.wire();
    create_topic(&mut wire, "wire", 1, &[]);
    // Current timestamps: segment.ms counts from a segment's first timestamp, so
    // 1970 timestamps would roll a segment per batch (and a read spans one segment).
    let now = now_ms();
    let first = record_batch(&[b"a", b"b", b"c"], now);
    let second = record_batch(&[b"d"], now + 1);
    let response = produce(&mut wire, 3, "wire", 0, 1, &first).expect("acks=1 answers");
    let partition = &response.responses[0].partition_responses[0];
    assert_eq!((partition.error_code, partition.base_offset), (0, 0));
    let response = produce(&mut wire, 9, "wire", 0, -1, &second).expect("acks=-1 answers");
    let partition = &response.responses[0].partition_responses[0];
    assert_eq!(
        (
            partition.error_code,
            partition.base_offset,
            partition.log_start_offset
        ),
        (0, 3, 0)
    );
    assert_eq!(partition.log_append_time_ms, -1);

    for version in [4, 11, 12] {
        let response = fetch(&mut wire, version, "wire", 0, 0);
        let data = &response.responses[0].partitions[0];
        assert_eq!(data.error_code, 0);
        assert_eq!(data.high_watermark, 4);
        let mut expected = stored(&first, 0, 0);
        expected.extend_from_slice(&stored(&second, 3, 0));
        assert_eq!(
            data.records.as_deref(),
            Some(expected.as_slice()),
            "v{version}"
        );
    }
    // Fetching from offset 1 (inside the first batch) returns the whole batch.
    let response = fetch(&mut wire, 4, "wire", 1, 0);
    let records = response.responses[0].partitions[0]
        .records
        .clone()
        .expect("records");
    assert_eq!(&records[..first.len()], stored(&first, 0, 0).as_slice());
    // At the end: nothing; beyond it: OFFSET_OUT_OF_RANGE.
    let response = fetch(&mut wire, 4, "wire", 4, 0);
    assert_eq!(
        response.responses[0].partitions[0]
            .records
            .as_deref()
            .map(<[u8]>::len),
        Some(0)
    );
    let response = fetch(&mut wire, 4, "wire", 100, 0);
    assert_eq!(response.responses[0].partitions[0].error_code, 1);
}

#[test]
fn a_bad_crc_is_corrupt_message_and_nothing_is_stored() {
    let broker = TestBroker::start();
    let mut wire = broker.wire();
    create_topic(&mut wire, "crc", 1, &[]);
    let mut batch = record_batch(&[b"payload"], 1_000);
    let last = batch.len() - 1;
    batch[last] ^= 0xff;
    let response = produce(&mut wire, 7, "crc", 0, 1, &batch).expect("answer");
    assert_eq!(
        response.responses[0].partition_responses[0].error_code, 2,
        "CORRUPT_MESSAGE"
    );
    let good = record_batch(&[b"payload"], 1_000);
    let response = produce(&mut wire, 7, "crc", 0, 1, &good).expect("answer");
    assert_eq!(response.responses[0].partition_responses[0].base_offset, 0);
}

#[test]
fn produce_errors_are_kafkas() {
    let broker = TestBroker::start();
    let mut wire = broker.wire();
    create_topic(&mut wire, "limits", 1, &[("max.message.bytes", "100")]);
    let batch = record_batch(&[b"small"], 1);
    let unknown = produce(&mut wire, 8, "nope", 0, 1, &batch).expect("answer");
    assert_eq!(
        unknown.responses[0].partition_responses[0].error_code, 3,
        "UNKNOWN_TOPIC_OR_PARTITION"
    );
    let missing_partition = produce(&mut wire, 8, "limits", 7, 1, &batch).expect("answer");
    assert_eq!(
        missing_partition.responses[0].partition_responses[0].error_code,
        3
    );
    let large = record_batch(&[&[0u8; 200]], 1);
    let too_large = produce(&mut wire, 8, "limits", 0, 1, &large).expect("answer");
    assert_eq!(
        too_large.responses[0].partition_responses[0].error_code, 10,
        "MESSAGE_TOO_LARGE"
    );
    let bad_acks = produce(&mut wire, 8, "limits", 0, 2, &batch).expect("answer");
    assert_eq!(
        bad_acks.responses[0].partition_responses[0].error_code, 21,
        "INVALID_REQUIRED_ACKS"
    );
    let mut old_magic = batch.clone();
    old_magic[16] = 1;
    let response = produce(&mut wire, 8, "limits", 0, 1, &old_magic).expect("answer");
    assert_ne!(response.responses[0].partition_responses[0].error_code, 0);
}

#[test]
fn acks_zero_gets_no_response_but_is_stored() {
    let broker = TestBroker::start();
    let mut wire = broker.wire();
    create_topic(&mut wire, "fire", 1, &[]);
    assert!(produce(&mut wire, 8, "fire", 0, 0, &record_batch(&[b"x"], 1)).is_none());
    // The next answer on this connection is for the next request.
    let response = fetch(&mut wire, 4, "fire", 0, 0);
    assert_eq!(response.responses[0].partitions[0].high_watermark, 1);
    // A failed acks=0 produce closes the connection, as in Kafka.
    assert!(produce(&mut wire, 8, "nope", 0, 0, &record_batch(&[b"x"], 1)).is_none());
    assert!(wire.is_closed_by_broker());
}

#[test]
fn a_waiting_fetch_is_woken_by_a_produce() {
    let broker = TestBroker::start();
    let mut wire = broker.wire();
    create_topic(&mut wire, "poll", 1, &[]);
    let addr = broker.addr;
    let producer = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(300));
        let mut wire = Wire::connect(addr);
        produce(&mut wire, 8, "poll", 0, 1, &record_batch(&[b"wake"], 1)).expect("answer");
    });
    let started = Instant::now();
    // max_wait 20 s: without the wake-up this would take 20 s.
    let response = fetch(&mut wire, 11, "poll", 0, 20_000);
    let waited = started.elapsed();
    producer.join().expect("producer");
    assert_eq!(response.responses[0].partitions[0].high_watermark, 1);
    assert!(response.responses[0].partitions[0]
        .records
        .as_ref()
        .is_some_and(|r| !r.is_empty()));
    assert!(
        waited < Duration::from_millis(15_000),
        "woken by the timeout, not the append: {waited:?}"
    );
}

/// ListOffsets v7 for partition 0 of `topic` at `timestamp`: (error, offset,
/// timestamp).
pub fn list_offsets_at(wire: &mut Wire, topic: &str, timestamp: i64) -> (i16, i64, i64) {
    let request = ListOffsetsRequest::default()
        .with_replica_id(BrokerId(-1))
        .with_topics(vec![ListOffsetsTopic::default()
            .with_name(name(topic))
            .with_partitions(vec![ListOffsetsPartition::default()
                .with_partition_index(0)
                .with_timestamp(timestamp)])]);
    let frame = wire.request(2, 7, 41, true, &encode(&request, 7));
    let response: ListOffsetsResponse = decode(split_v1(&frame).1, 7);
    let p = &response.topics[0].partitions[0];
    (p.error_code, p.offset, p.timestamp)
}

/// A batch as sarama 1.22 writes it: each record with its own timestamp, but -1
/// as the header's maxTimestamp (and a CRC over that header). The broker stores
/// the records' newest as maxTimestamp, as Kafka does, so lookups by time work.
#[test]
fn a_batch_without_a_max_timestamp_is_found_by_time() {
    use kafka_protocol::records::{
        Compression, Record, RecordBatchEncoder, RecordEncodeOptions, TimestampType,
    };
    const MAX_TIMESTAMP_AT: usize = 35;
    let broker = TestBroker::start();
    let mut wire = broker.wire();
    create_topic(&mut wire, "sarama", 1, &[]);
    let records: Vec<Record> = [1_000i64, 3_000, 2_000]
        .iter()
        .enumerate()
        .map(|(i, &timestamp)| Record {
            transactional: false,
            control: false,
            delete_horizon: false,
            partition_leader_epoch: -1,
            producer_id: -1,
            producer_epoch: -1,
            timestamp_type: TimestampType::Creation,
            offset: i as i64,
            sequence: i as i32,
            timestamp,
            key: None,
            value: Some(Bytes::from_static(b"v")),
            headers: Default::default(),
        })
        .collect();
    for compression in [Compression::None, Compression::Gzip] {
        let mut encoded = bytes::BytesMut::new();
        let options = RecordEncodeOptions {
            version: 2,
            compression,
        };
        RecordBatchEncoder::encode(&mut encoded, &records, &options).expect("encode");
        let mut batch = encoded.to_vec();
        batch[MAX_TIMESTAMP_AT..MAX_TIMESTAMP_AT + 8].copy_from_slice(&(-1i64).to_be_bytes());
        let crc = crc32c::crc32c(&batch[21..]);
        batch[17..21].copy_from_slice(&crc.to_be_bytes());
        let response = produce(&mut wire, 8, "sarama", 0, 1, &batch).expect("answer");
        assert_eq!(response.responses[0].partition_responses[0].error_code, 0);
    }
    let ask = |wire: &mut Wire, timestamp: i64| list_offsets_at(wire, "sarama", timestamp);
    // the first record at or after 2500 is offset 1 (3000) of the plain batch
    assert_eq!(ask(&mut wire, 2_500), (0, 1, 3_000));
    // KIP-734's max timestamp: the first record that carries it
    assert_eq!(ask(&mut wire, -3), (0, 1, 3_000));
    // the stored headers carry the records' newest timestamp, with a valid CRC
    for offset in [0, 3] {
        let fetched = fetch(&mut wire, 11, "sarama", offset, 0);
        let stored = fetched.responses[0].partitions[0]
            .records
            .clone()
            .expect("records");
        let length = i32::from_be_bytes(stored[8..12].try_into().expect("length")) as usize + 12;
        let batch = &stored[..length];
        let max = i64::from_be_bytes(
            batch[MAX_TIMESTAMP_AT..MAX_TIMESTAMP_AT + 8]
                .try_into()
                .expect("max timestamp"),
        );
        assert_eq!(max, 3_000, "batch at {offset}");
        let crc = u32::from_be_bytes(batch[17..21].try_into().expect("crc"));
        assert_eq!(crc, crc32c::crc32c(&batch[21..]), "batch at {offset}");
    }
}

/// A fetch that names no partition (the Java consumer's at close) is answered
/// at once, not after max_wait_ms.
#[test]
fn a_fetch_of_no_partitions_is_answered_at_once() {
    let broker = TestBroker::start();
    let mut wire = broker.wire();
    for (version, correlation_id) in [(4, 51), (12, 52), (18, 53)] {
        let request = FetchRequest::default()
            .with_replica_id(BrokerId(-1))
            .with_max_wait_ms(EMPTY_FETCH_MAX_WAIT_MS)
            .with_min_bytes(1)
            .with_max_bytes(1 << 20)
            .with_session_epoch(-1);
        let flexible = version >= 12;
        let started = Instant::now();
        let frame = wire.request(
            1,
            version,
            correlation_id,
            flexible,
            &encode(&request, version),
        );
        let waited = started.elapsed();
        let (answered, body) = if flexible {
            split_v1(&frame)
        } else {
            split_v0(&frame)
        };
        assert_eq!(answered, correlation_id);
        let response: FetchResponse = decode(body, version);
        assert_eq!(response.error_code, 0);
        assert!(response.responses.is_empty());
        // Half the wait: a slow machine answers well within it, a long poll
        // cannot.
        assert!(
            waited < Duration::from_millis(EMPTY_FETCH_MAX_WAIT_MS as u64 / 2),
            "v{version}: an empty fetch waited {waited:?}"
        );
    }
}

/// max_wait_ms of the empty fetches: the broker's longest.
const EMPTY_FETCH_MAX_WAIT_MS: i32 = 30_000;

#[test]
fn list_offsets_earliest_latest_and_by_time() {
    let broker = TestBroker::start();
    let mut wire = broker.wire();
    create_topic(&mut wire, "times", 1, &[]);
    for timestamp in [1_000, 2_000, 3_000] {
        produce(
            &mut wire,
            8,
            "times",
            0,
            1,
            &record_batch(&[b"r"], timestamp),
        )
        .expect("answer");
    }
    let ask = |wire: &mut Wire, timestamp: i64| list_offsets_at(wire, "times", timestamp);
    assert_eq!(ask(&mut wire, -2), (0, 0, -1));
    assert_eq!(ask(&mut wire, -1), (0, 3, -1));
    assert_eq!(ask(&mut wire, 1_500), (0, 1, 2_000));
    assert_eq!(ask(&mut wire, 3_000), (0, 2, 3_000));
    assert_eq!(ask(&mut wire, 9_000), (0, -1, -1));
    assert_eq!(ask(&mut wire, -3), (0, 2, 3_000), "max timestamp");
}

/// Regression: ListOffsets below v4 has no leader epoch in its response, and
/// answering with one made the encoder fail and the connection close, which cut
/// off librdkafka 2.0 (Debian's kcat) asking for offsets at v2.
#[test]
fn list_offsets_below_v4_answers_without_a_leader_epoch() {
    let broker = TestBroker::start();
    let mut wire = broker.wire();
    create_topic(&mut wire, "old-offsets", 1, &[]);
    produce(
        &mut wire,
        8,
        "old-offsets",
        0,
        1,
        &record_batch(&[b"a", b"b"], now_ms()),
    )
    .expect("answer");
    for version in 1..=3 {
        let request = ListOffsetsRequest::default()
            .with_replica_id(BrokerId(-1))
            .with_topics(vec![ListOffsetsTopic::default()
                .with_name(name("old-offsets"))
                .with_partitions(vec![ListOffsetsPartition::default()
                    .with_partition_index(0)
                    .with_timestamp(-1)])]);
        let frame = wire.request(
            2,
            version,
            50 + i32::from(version),
            false,
            &encode(&request, version),
        );
        let response: ListOffsetsResponse = decode(split_v0(&frame).1, version);
        let p = &response.topics[0].partitions[0];
        assert_eq!((p.error_code, p.offset), (0, 2), "v{version}");
    }
}

/// Produces one batch with acks=1 to partition 0 and checks it was stored.
pub fn produce_for_tests(wire: &mut Wire, topic: &str, batch: &[u8]) {
    let response = produce(wire, 8, topic, 0, 1, batch).expect("answer");
    assert_eq!(response.responses[0].partition_responses[0].error_code, 0);
}

#[test]
fn fsync_before_ack_answers_after_the_group_commit() {
    let broker = TestBroker::start_with(|config| config.flush.before_ack = true);
    let mut wire = broker.wire();
    create_topic(&mut wire, "synced", 1, &[]);
    for round in 0..3i64 {
        let response = produce(
            &mut wire,
            9,
            "synced",
            0,
            -1,
            &record_batch(&[b"a", b"b"], now_ms()),
        )
        .expect("answer");
        let partition = &response.responses[0].partition_responses[0];
        assert_eq!(
            (partition.error_code, partition.base_offset),
            (0, round * 2)
        );
        // By the time the answer is sent, the flusher has fsynced past the batch.
        let replicas = broker.broker.as_ref().expect("running").replicas();
        let synced = replicas
            .all()
            .into_iter()
            .find(|p| p.tp.topic == "synced")
            .expect("partition");
        assert!(
            synced.flushed_offset() >= (round + 1) * 2,
            "round {round}: answered before fsync"
        );
    }
}
