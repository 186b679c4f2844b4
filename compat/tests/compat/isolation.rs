//! Network faults between real nodes: three `sluice` processes, each in its own
//! network namespace with its own address, the test (the clients) in the root
//! namespace reaching all three. A partition leader cut off from the other two
//! nodes (its followers and the controller quorum) but not from clients still
//! believes it leads: it takes acks=1 writes, which Kafka's acks=1 does not
//! promise to keep, and cannot acknowledge acks=all ones. The others fence it and
//! elect a new leader, which goes on taking acks=all writes. When the link is
//! back the old leader truncates what it took alone, catches up, and leads again
//! with every acknowledged acks=all record and none of the orphans.

use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::{ApiKey, ProduceRequest, ProduceResponse, TopicName};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::records::{
    Compression, Record, RecordBatchEncoder, RecordEncodeOptions, TimestampType,
};
use sluice_compat::cluster::{start_together, ClusterNode};
use sluice_compat::netns::TestNetwork;

use crate::replication::{
    bootstrap_all, create_assigned, eventually, raw_request, read_all_partitions, FAST_CLUSTER,
};

/// Kafka's error codes the test expects.
const NONE: i16 = 0;
const REQUEST_TIMED_OUT: i16 = 7;
const NOT_ENOUGH_REPLICAS: i16 = 19;
const NOT_ENOUGH_REPLICAS_AFTER_APPEND: i16 = 20;

/// How long an acks=all produce to the isolated leader may wait for its
/// followers before the leader answers it timed out.
const ISOLATED_ACKS_ALL_TIMEOUT_MS: i32 = 3_000;

/// A Produce (v9) of one record `value` to partition 0 of `topic` on `node`,
/// sent to that node whoever leads: (error code, base offset).
fn produce_one(node: &str, topic: &str, acks: i16, value: &str) -> (i16, i64) {
    let record = Record {
        transactional: false,
        control: false,
        delete_horizon: false,
        partition_leader_epoch: -1,
        producer_id: -1,
        producer_epoch: -1,
        timestamp_type: TimestampType::Creation,
        offset: 0,
        sequence: -1,
        timestamp: 1_700_000_000_000,
        key: None,
        value: Some(bytes::Bytes::copy_from_slice(value.as_bytes())),
        headers: Default::default(),
    };
    let mut batch = bytes::BytesMut::new();
    RecordBatchEncoder::encode(
        &mut batch,
        [&record],
        &RecordEncodeOptions {
            version: 2,
            compression: Compression::None,
        },
    )
    .expect("batch");
    let request = ProduceRequest::default()
        .with_acks(acks)
        .with_timeout_ms(ISOLATED_ACKS_ALL_TIMEOUT_MS)
        .with_topic_data(vec![TopicProduceData::default()
            .with_name(TopicName(StrBytes::from_string(topic.to_string())))
            .with_partition_data(vec![PartitionProduceData::default()
                .with_index(0)
                .with_records(Some(batch.freeze()))])]);
    let response: ProduceResponse = raw_request(node, ApiKey::Produce, 9, &request);
    let answer = &response.responses[0].partition_responses[0];
    (answer.error_code, answer.base_offset)
}

#[test]
fn replication_truncates_what_an_isolated_leader_took_with_acks_1_and_never_acknowledges_acks_all()
{
    let network = TestNetwork::create(3);
    let root = tempfile::tempdir().expect("tempdir");
    let nodes: Vec<ClusterNode> = (0..3)
        .map(|host| {
            ClusterNode::in_network(host as i32 + 1, root.path(), &network, host, FAST_CLUSTER)
        })
        .collect();
    let nodes = start_together(nodes);
    let all = bootstrap_all(&nodes);
    let topic = "isolated";
    create_assigned(&all, topic, &[&[1, 2, 3]], &[("min.insync.replicas", "2")]);
    eventually(&all, topic, "node 1 leading a full ISR", |ps| {
        ps.len() == 1 && ps[0].1 == 1 && ps[0].2.len() == 3
    });
    let leader = nodes[0].bootstrap();
    let mut kept = Vec::new();
    for i in 0..5 {
        let value = format!("before-{i}");
        let (error, offset) = produce_one(&leader, topic, -1, &value);
        assert_eq!(error, NONE, "acks=all with every replica in sync");
        kept.push((offset, value));
    }

    // Node 1 loses its followers and the controller quorum, not its clients.
    network.isolate(0);
    let others = bootstrap_all(&nodes[1..]);
    eventually(&others, topic, "a new leader without node 1", |ps| {
        ps.len() == 1 && (ps[0].1 == 2 || ps[0].1 == 3) && !ps[0].2.contains(&1)
    });
    // Still leading as far as it knows: acks=1 is taken (and will be lost),
    // acks=all waits for followers that never come and is not acknowledged.
    let mut orphans = Vec::new();
    for i in 0..3 {
        let value = format!("orphan-{i}");
        let (error, _) = produce_one(&leader, topic, 1, &value);
        assert_eq!(error, NONE, "the isolated leader takes acks=1");
        orphans.push(value);
    }
    let value = "never-acknowledged".to_string();
    let (error, _) = produce_one(&leader, topic, -1, &value);
    assert!(
        [
            REQUEST_TIMED_OUT,
            NOT_ENOUGH_REPLICAS,
            NOT_ENOUGH_REPLICAS_AFTER_APPEND
        ]
        .contains(&error),
        "an isolated leader answered acks=all with {error}"
    );
    orphans.push(value);
    // The new leader takes acks=all from the two of them.
    let new_leader = nodes
        .iter()
        .find(|n| crate::replication::leader_of(&others, topic, 0) == n.node_id)
        .expect("the new leader is a node")
        .bootstrap();
    for i in 0..5 {
        let value = format!("after-{i}");
        let (error, offset) = produce_one(&new_leader, topic, -1, &value);
        assert_eq!(error, NONE, "acks=all on the new leader with two in sync");
        kept.push((offset, value));
    }

    // Back together: node 1 truncates, catches up, and (preferred) leads again.
    network.rejoin(0);
    // Asked of the quorum's side: node 1's own answer may be the image it had
    // while cut off, which says the same. Back in the ISR, it has fetched as a
    // follower, so it has truncated and its image has moved on.
    eventually(&others, topic, "node 1 leading a full ISR again", |ps| {
        ps.len() == 1 && ps[0].1 == 1 && ps[0].2.len() == 3
    });
    let stored = read_all_partitions(&all, topic, 1);
    for (offset, value) in &kept {
        assert_eq!(
            stored.get(&(0, *offset)),
            Some(value),
            "acknowledged acks=all record at offset {offset}: {stored:?}"
        );
    }
    for orphan in &orphans {
        assert!(
            !stored.values().any(|v| v == orphan),
            "{orphan} survived the isolated leader's truncation: {stored:?}"
        );
    }
    assert_eq!(stored.len(), kept.len(), "{stored:?}");
}
