//! The request versions Kafka 4 removed and Kafka 3.9 served, byte for byte:
//! request bodies as Kafka 3.9's schemas lay them out, and the responses Kafka
//! 3.9 gave (header v0 for all of them).

use std::time::{Duration, Instant};

use kafka_protocol_old::messages::OffsetFetchResponse;
use kafka_protocol_old::protocol::Decodable;

use crate::harness::{
    find_group_coordinator, hex, now_ms, record_batch, split_v0, TestBroker, Wire,
};
use crate::produce_fetch::produce_for_tests;

const CREATE_TOPICS: i16 = 19;
const DELETE_TOPICS: i16 = 20;
const LIST_OFFSETS: i16 = 2;
const OFFSET_COMMIT: i16 = 8;
const OFFSET_FETCH: i16 = 9;
const OFFSET_FOR_LEADER_EPOCH: i16 = 23;
const DESCRIBE_CONFIGS: i16 = 32;

/// How long an offset committed with a 1970 timestamp may take to be expired:
/// far above the expiry pass's interval, so never a timing a slow machine can
/// miss.
const EXPIRY_WAIT_MAX: Duration = Duration::from_secs(60);
/// `offsets.retention.check.interval.ms` for that test.
const EXPIRY_CHECK_INTERVAL_MS: u64 = 100;

/// Sends an old, non-flexible request and returns the response body after
/// checking its correlation id.
fn call(wire: &mut Wire, api_key: i16, version: i16, body: &str) -> Vec<u8> {
    let frame = wire.request(api_key, version, 41, false, &hex(body));
    let (correlation_id, body) = split_v0(&frame);
    assert_eq!(correlation_id, 41);
    body.to_vec()
}

/// Topic "old" with one partition, created with CreateTopics v0.
fn create_old_topic(wire: &mut Wire) {
    let body = call(
        wire,
        CREATE_TOPICS,
        0,
        // one topic "old", 1 partition, replication 1, no assignments, no
        // configs; timeout 30 s
        "00000001 0003 6f6c64 00000001 0001 00000000 00000000 00007530",
    );
    // one topic "old", no error
    assert_eq!(body, hex("00000001 0003 6f6c64 0000"));
}

#[test]
fn create_topics_v0_and_v1() {
    let broker = TestBroker::start();
    let mut wire = broker.wire();
    create_old_topic(&mut wire);
    let body = call(
        &mut wire,
        CREATE_TOPICS,
        1,
        // as v0, then validate_only false
        "00000001 0003 6f6c64 00000001 0001 00000000 00000000 00007530 00",
    );
    // "old": TOPIC_ALREADY_EXISTS (36) with v1's error message
    let message = "Topic 'old' already exists.";
    let expected = format!(
        "00000001 0003 6f6c64 0024 {:04x} {}",
        message.len(),
        ascii(message)
    );
    assert_eq!(body, hex(&expected));
}

#[test]
fn list_offsets_v0_answers_old_style_offsets() {
    let broker = TestBroker::start();
    let mut wire = broker.wire();
    create_old_topic(&mut wire);
    produce_for_tests(
        &mut wire,
        "old",
        &record_batch(&[b"a", b"b", b"c"], now_ms()),
    );
    let ask = |wire: &mut Wire, partition: &str, timestamp: &str, max: &str| {
        // replica -1; topic "old"; one partition with timestamp and max_num_offsets
        let request =
            format!("ffffffff 00000001 0003 6f6c64 00000001 {partition} {timestamp} {max}");
        call(wire, LIST_OFFSETS, 0, &request)
    };
    let head = "00000001 0003 6f6c64 00000001";
    // latest: the high watermark
    assert_eq!(
        ask(&mut wire, "00000000", "ffffffffffffffff", "00000001"),
        hex(&format!("{head} 00000000 0000 00000001 0000000000000003"))
    );
    // earliest: the log start offset
    assert_eq!(
        ask(&mut wire, "00000000", "fffffffffffffffe", "00000001"),
        hex(&format!("{head} 00000000 0000 00000001 0000000000000000"))
    );
    // no offsets asked for: an empty list
    assert_eq!(
        ask(&mut wire, "00000000", "ffffffffffffffff", "00000000"),
        hex(&format!("{head} 00000000 0000 00000000"))
    );
    // a partition the topic lacks: UNKNOWN_TOPIC_OR_PARTITION, no offsets
    assert_eq!(
        ask(&mut wire, "00000007", "ffffffffffffffff", "00000001"),
        hex(&format!("{head} 00000007 0003 00000000"))
    );
}

#[test]
fn offset_commit_v0_v1_and_offset_fetch_v0() {
    let broker = TestBroker::start();
    let mut wire = broker.wire();
    create_old_topic(&mut wire);
    find_group_coordinator(&mut wire, "g-old");
    let committed = "00000001 0003 6f6c64 00000001 00000000 0000";
    // v0: group "g-old"; "old" partition 0 at offset 2 with metadata "m0"
    let body = call(
        &mut wire,
        OFFSET_COMMIT,
        0,
        "0005 672d6f6c64 00000001 0003 6f6c64 00000001 00000000 0000000000000002 0002 6d30",
    );
    assert_eq!(body, hex(committed));
    let fetch = "0005 672d6f6c64 00000001 0003 6f6c64 00000001 00000000";
    assert_eq!(
        call(&mut wire, OFFSET_FETCH, 0, fetch),
        // partition 0: offset 2, metadata "m0", no error
        hex("00000001 0003 6f6c64 00000001 00000000 0000000000000002 0002 6d30 0000")
    );
    // v1: generation -1, no member (a simple commit), offset 5, no commit
    // timestamp, null metadata
    let body = call(
        &mut wire,
        OFFSET_COMMIT,
        1,
        "0005 672d6f6c64 ffffffff 0000 00000001 0003 6f6c64 00000001 \
         00000000 0000000000000005 ffffffffffffffff ffff",
    );
    assert_eq!(body, hex(committed));
    assert_eq!(
        call(&mut wire, OFFSET_FETCH, 0, fetch),
        hex("00000001 0003 6f6c64 00000001 00000000 0000000000000005 0000 0000")
    );
    // an unknown topic is refused per partition
    let body = call(
        &mut wire,
        OFFSET_COMMIT,
        0,
        "0005 672d6f6c64 00000001 0004 6e6f6e65 00000001 00000000 0000000000000002 ffff",
    );
    assert_eq!(body, hex("00000001 0004 6e6f6e65 00000001 00000000 0003"));
}

/// OffsetCommit v1's commit timestamp is the commit's time, as in Kafka 3.9:
/// an offset committed "in 1970" is past `offsets.retention.minutes` at once and
/// is expired by the next pass (every 100 ms here), while one committed now stays.
#[test]
fn offset_commit_v1_commit_timestamp_is_the_commit_time() {
    let broker = TestBroker::start_with(|config| {
        config.groups.offsets_retention_check_interval_ms = EXPIRY_CHECK_INTERVAL_MS;
    });
    let mut wire = broker.wire();
    create_old_topic(&mut wire);
    find_group_coordinator(&mut wire, "g-1970");
    find_group_coordinator(&mut wire, "g-now");
    let commit = |wire: &mut Wire, group: &str, timestamp: &str| {
        let request = format!(
            "{:04x} {} ffffffff 0000 00000001 0003 6f6c64 00000001 \
             00000000 0000000000000004 {timestamp} ffff",
            group.len(),
            ascii(group)
        );
        call(wire, OFFSET_COMMIT, 1, &request)
    };
    let fetch = |wire: &mut Wire, group: &str| {
        let request = format!(
            "{:04x} {} 00000001 0003 6f6c64 00000001 00000000",
            group.len(),
            ascii(group)
        );
        let body = call(wire, OFFSET_FETCH, 0, &request);
        let response = OffsetFetchResponse::decode(&mut bytes::Bytes::from(body), 0)
            .expect("OffsetFetch v0 response");
        response.topics[0].partitions[0].committed_offset
    };
    commit(&mut wire, "g-1970", "00000000000003e8");
    commit(&mut wire, "g-now", "ffffffffffffffff");
    let started = Instant::now();
    while fetch(&mut wire, "g-1970") != -1 {
        assert!(
            started.elapsed() < EXPIRY_WAIT_MAX,
            "an offset committed in 1970 was never expired"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    assert_eq!(fetch(&mut wire, "g-now"), 4);
}

#[test]
fn offset_for_leader_epoch_v0_and_v1() {
    let broker = TestBroker::start();
    let mut wire = broker.wire();
    create_old_topic(&mut wire);
    produce_for_tests(
        &mut wire,
        "old",
        &record_batch(&[b"a", b"b", b"c"], now_ms()),
    );
    // "old" partition 0, leader epoch 0
    let request = "00000001 0003 6f6c64 00000001 00000000 00000000";
    assert_eq!(
        call(&mut wire, OFFSET_FOR_LEADER_EPOCH, 0, request),
        // no error, partition 0, end offset 3
        hex("00000001 0003 6f6c64 00000001 0000 00000000 0000000000000003")
    );
    assert_eq!(
        call(&mut wire, OFFSET_FOR_LEADER_EPOCH, 1, request),
        // v1 adds the leader epoch
        hex("00000001 0003 6f6c64 00000001 0000 00000000 00000000 0000000000000003")
    );
}

#[test]
fn describe_configs_v0_says_is_default() {
    let broker = TestBroker::start();
    let mut wire = broker.wire();
    create_old_topic(&mut wire);
    // topic (2) "old", keys ["cleanup.policy"]
    let request = format!(
        "00000001 02 0003 6f6c64 00000001 000e {}",
        ascii("cleanup.policy")
    );
    let body = call(&mut wire, DESCRIBE_CONFIGS, 0, &request);
    let expected = format!(
        // throttle 0; one result: no error, an empty message (the schema's
        // default, as Kafka sends it), topic "old"; one config
        "00000000 00000001 0000 0000 02 0003 6f6c64 00000001 \
         000e {} 0006 {} 00 01 00",
        ascii("cleanup.policy"),
        ascii("delete")
    );
    // value "delete", not read-only, default, not sensitive
    assert_eq!(body, hex(&expected));
}

#[test]
fn delete_topics_v0() {
    let broker = TestBroker::start();
    let mut wire = broker.wire();
    create_old_topic(&mut wire);
    // topic names ["old"], timeout 30 s
    let body = call(&mut wire, DELETE_TOPICS, 0, "00000001 0003 6f6c64 00007530");
    assert_eq!(body, hex("00000001 0003 6f6c64 0000"));
    let body = call(&mut wire, DELETE_TOPICS, 0, "00000001 0003 6f6c64 00007530");
    // gone: UNKNOWN_TOPIC_OR_PARTITION
    assert_eq!(body, hex("00000001 0003 6f6c64 0003"));
}

/// Produce below v3 (message formats v0 and v1) stays out: the connection is
/// closed, as for any version we do not serve.
#[test]
fn produce_v2_is_still_turned_away() {
    let broker = TestBroker::start();
    let mut wire = broker.wire();
    // acks 1, timeout 1 s, no topics
    wire.send_frame(&crate::harness::request_frame(
        0,
        2,
        1,
        false,
        &hex("0001 000003e8 00000000"),
    ));
    assert!(wire.is_closed_by_broker());
}

fn ascii(text: &str) -> String {
    text.bytes().map(|b| format!("{b:02x}")).collect()
}
