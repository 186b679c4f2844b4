//! Replicated partitions across three real nodes on loopback, through librdkafka:
//! an idempotent acks=all producer keeps writing while the leader of a partition
//! is killed with SIGKILL, node after node; every record it was acknowledged is
//! read back at its offset, none twice, the ISR heals once the node is back, and
//! each partition is given back to its preferred replica.
//! A clean stop (SIGTERM) of a leader hands its leaderships over first, so the
//! producer never fails a send. Committed and aborted transactions read the
//! same on the next leaders. And min.insync.replicas: with a node down,
//! acks=all is refused with NOT_ENOUGH_REPLICAS while acks=1 goes on.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::message::Message;
use rdkafka::metadata::Metadata;
use rdkafka::producer::FutureRecord;
use rdkafka::{Offset, TopicPartitionList};
use sluice_compat::cluster::{start_voters, ClusterNode};
use sluice_compat::{consumer, create_replicated_topic, producer, CLIENT_WAIT_MS};

pub(crate) use sluice_compat::cluster::FAST_CLUSTER;

const TOPIC_PARTITIONS: i32 = 3;

pub(crate) fn bootstrap_all(nodes: &[ClusterNode]) -> String {
    nodes
        .iter()
        .map(ClusterNode::bootstrap)
        .collect::<Vec<_>>()
        .join(",")
}

pub(crate) fn metadata(bootstrap: &str, topic: &str) -> Metadata {
    let consumer: BaseConsumer = rdkafka::config::ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .create()
        .expect("consumer");
    consumer
        .fetch_metadata(Some(topic), Duration::from_millis(CLIENT_WAIT_MS))
        .expect("metadata")
}

/// Waits until `check` holds of `topic`'s partitions as `bootstrap` describes
/// them: (partition, leader, ISR).
pub(crate) fn eventually(
    bootstrap: &str,
    topic: &str,
    what: &str,
    check: impl Fn(&[(i32, i32, Vec<i32>)]) -> bool,
) {
    let deadline = Instant::now() + Duration::from_millis(CLIENT_WAIT_MS * 2);
    loop {
        let metadata = metadata(bootstrap, topic);
        let partitions: Vec<(i32, i32, Vec<i32>)> = metadata
            .topics()
            .iter()
            .filter(|t| t.name() == topic)
            .flat_map(|t| t.partitions())
            .map(|p| (p.id(), p.leader(), p.isr().to_vec()))
            .collect();
        if check(&partitions) {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "{bootstrap}: never saw {what}: {partitions:?}"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// Each partition's preferred replica (its first).
fn preferred_replicas(bootstrap: &str, topic: &str) -> BTreeMap<i32, i32> {
    metadata(bootstrap, topic)
        .topics()
        .iter()
        .filter(|t| t.name() == topic)
        .flat_map(|t| t.partitions())
        .map(|p| (p.id(), p.replicas()[0]))
        .collect()
}

pub(crate) fn leader_of(bootstrap: &str, topic: &str, partition: i32) -> i32 {
    let metadata = metadata(bootstrap, topic);
    metadata
        .topics()
        .iter()
        .find(|t| t.name() == topic)
        .and_then(|t| t.partitions().iter().find(|p| p.id() == partition))
        .map(|p| p.leader())
        .expect("the partition is described")
}

/// (partition, offset) -> payload of every acknowledged record.
type Acked = Arc<Mutex<BTreeMap<(i32, i64), String>>>;

/// An idempotent acks=all producer writing numbered records until stopped.
struct Writer {
    acked: Acked,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<u64>>,
}

impl Writer {
    fn start(bootstrap: &str, topic: &str) -> Writer {
        let producer = producer(
            bootstrap,
            &[
                ("enable.idempotence", "true"),
                ("acks", "all"),
                ("message.timeout.ms", "120000"),
                // A request to a paused node (produce or metadata) is given up
                // sooner than the 30 s and 60 s defaults, then retried elsewhere:
                // a paused process keeps its connections open, as a stalled Kafka
                // broker does, and clients wait for their own timeouts.
                ("request.timeout.ms", "5000"),
                ("socket.timeout.ms", "5000"),
                ("linger.ms", "5"),
            ],
        );
        let acked: Acked = Arc::default();
        let stop = Arc::new(AtomicBool::new(false));
        let topic = topic.to_string();
        let thread = {
            let acked = Arc::clone(&acked);
            let stop = Arc::clone(&stop);
            std::thread::spawn(move || {
                let runtime = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                    .expect("runtime");
                let mut failed = 0u64;
                let mut next = 0u64;
                while !stop.load(Ordering::Acquire) {
                    // A window of sends in flight, awaited in order.
                    let window: Vec<_> = (0..20)
                        .map(|_| {
                            let payload = format!("record-{next}");
                            let key = next.to_string();
                            next += 1;
                            let send = producer
                                .send_result(FutureRecord::to(&topic).key(&key).payload(&payload))
                                .map_err(|(error, _)| error);
                            (payload, send)
                        })
                        .collect();
                    for (payload, send) in window {
                        let Ok(delivery) = send else {
                            failed += 1;
                            continue;
                        };
                        match runtime.block_on(delivery) {
                            Ok(Ok(delivered)) => {
                                acked
                                    .lock()
                                    .expect("acked")
                                    .insert((delivered.partition, delivered.offset), payload);
                            }
                            _ => failed += 1,
                        }
                    }
                }
                failed
            })
        };
        Writer {
            acked,
            stop,
            thread: Some(thread),
        }
    }

    fn acked_count(&self) -> usize {
        self.acked.lock().expect("acked").len()
    }

    /// Waits until `more` records beyond now were acknowledged.
    fn wait_for_more(&self, more: usize, what: &str) {
        let target = self.acked_count() + more;
        let deadline = Instant::now() + Duration::from_millis(CLIENT_WAIT_MS * 3);
        while self.acked_count() < target {
            assert!(
                Instant::now() < deadline,
                "no progress {what}: {} acked",
                self.acked_count()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Stops writing; returns every acknowledged record and how many sends failed.
    fn finish(mut self) -> (BTreeMap<(i32, i64), String>, u64) {
        self.stop.store(true, Ordering::Release);
        let failed = self.thread.take().map_or(0, |t| t.join().expect("writer"));
        let acked = std::mem::take(&mut *self.acked.lock().expect("acked"));
        (acked, failed)
    }
}

/// Every record of `topic`, read from each partition's start to its high watermark.
fn read_all(bootstrap: &str, topic: &str) -> BTreeMap<(i32, i64), String> {
    read_all_partitions(bootstrap, topic, TOPIC_PARTITIONS)
}

/// `read_all` for a topic of `partitions`.
pub(crate) fn read_all_partitions(
    bootstrap: &str,
    topic: &str,
    partitions: i32,
) -> BTreeMap<(i32, i64), String> {
    let reader = consumer(bootstrap, &[]);
    let mut ends = BTreeMap::new();
    let deadline = Instant::now() + Duration::from_millis(CLIENT_WAIT_MS * 2);
    for partition in 0..partitions {
        // A new leader answers OFFSET_NOT_AVAILABLE until its high watermark
        // reaches its epoch's start (KIP-207): retriable, as clients retry it.
        let high = loop {
            match reader.fetch_watermarks(topic, partition, Duration::from_millis(CLIENT_WAIT_MS)) {
                Ok((_, high)) => break high,
                Err(KafkaError::MetadataFetch(RDKafkaErrorCode::OffsetNotAvailable))
                    if Instant::now() < deadline =>
                {
                    std::thread::sleep(Duration::from_millis(100));
                }
                Err(error) => panic!("watermarks of {topic}-{partition}: {error}"),
            }
        };
        ends.insert(partition, high);
    }
    let mut assignment = TopicPartitionList::new();
    for partition in 0..partitions {
        assignment
            .add_partition_offset(topic, partition, Offset::Beginning)
            .expect("assign");
    }
    reader.assign(&assignment).expect("assign");
    let mut records = BTreeMap::new();
    let mut next: BTreeMap<i32, i64> = BTreeMap::new();
    let deadline = Instant::now() + Duration::from_millis(CLIENT_WAIT_MS * 2);
    while ends
        .iter()
        .any(|(p, end)| next.get(p).copied().unwrap_or(0) < *end)
    {
        assert!(
            Instant::now() < deadline,
            "read {} records, not up to {ends:?}",
            records.len()
        );
        match reader.poll(Duration::from_millis(100)) {
            Some(Ok(message)) => {
                let payload =
                    String::from_utf8_lossy(message.payload().unwrap_or_default()).into_owned();
                next.insert(message.partition(), message.offset() + 1);
                records.insert((message.partition(), message.offset()), payload);
            }
            Some(Err(error)) => panic!("consumer error: {error}"),
            None => {}
        }
    }
    records
}

/// Creates `topic` with an explicit replica assignment (the first of each list
/// leads) and topic configs.
pub(crate) fn create_assigned(
    bootstrap: &str,
    topic: &str,
    assignment: &[&[i32]],
    configs: &[(&str, &str)],
) {
    use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
    use rdkafka::client::DefaultClientContext;
    let admin: AdminClient<DefaultClientContext> = rdkafka::config::ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .create()
        .expect("admin");
    let mut new_topic = NewTopic::new(
        topic,
        assignment.len() as i32,
        TopicReplication::Variable(assignment),
    );
    for (key, value) in configs {
        new_topic = new_topic.set(key, value);
    }
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    for result in runtime
        .block_on(admin.create_topics([&new_topic], &AdminOptions::new()))
        .expect("create")
    {
        result.expect("topic created");
    }
}

/// Three voters and `topic` of `TOPIC_PARTITIONS` partitions on all three
/// (min.insync.replicas 2), every replica in sync.
fn cluster_with_topic(root: &std::path::Path, topic: &str) -> (Vec<ClusterNode>, String) {
    let nodes = start_voters(root, FAST_CLUSTER);
    let bootstrap = bootstrap_all(&nodes);
    create_replicated_topic(
        &nodes[0].bootstrap(),
        topic,
        TOPIC_PARTITIONS,
        3,
        &[("min.insync.replicas", "2")],
    );
    eventually(&bootstrap, topic, "every replica in sync", |ps| {
        ps.len() == TOPIC_PARTITIONS as usize && ps.iter().all(|(_, _, isr)| isr.len() == 3)
    });
    (nodes, bootstrap)
}

/// How a round takes a leader away.
#[derive(Clone, Copy, Debug)]
enum Fault {
    /// SIGKILL, then a restart on the same data dir.
    Kill9,
    /// SIGSTOP until the others have moved on, then SIGCONT.
    Pause,
    /// SIGTERM (a controlled shutdown), then a restart.
    Bounce,
}

#[test]
fn replication_keeps_every_acknowledged_record_through_kill9_pause_and_bounce_of_each_leader() {
    let root = tempfile::tempdir().expect("tempdir");
    let topic = "replicated";
    let (mut nodes, bootstrap) = cluster_with_topic(root.path(), topic);
    let writer = Writer::start(&bootstrap, topic);
    writer.wait_for_more(300, "before any fault");
    let started = Instant::now();
    let log = |what: &str| eprintln!("{:>6} ms: {what}", started.elapsed().as_millis());
    for (round, fault) in [Fault::Kill9, Fault::Pause, Fault::Bounce]
        .into_iter()
        .enumerate()
    {
        let round = round as i32;
        // The leader of partition `round`.
        let victim_id = leader_of(&bootstrap, topic, round);
        let victim = nodes
            .iter_mut()
            .find(|n| n.node_id == victim_id)
            .expect("the leader is a node");
        eprintln!("round {round}: {fault:?} of node {victim_id}, the leader of partition {round}");
        match fault {
            Fault::Kill9 => victim.kill9(),
            Fault::Pause => victim.signal(true),
            Fault::Bounce => {
                let status = victim.terminate().expect("running");
                assert!(status.success(), "node {victim_id} stopped with {status}");
            }
        }
        writer.wait_for_more(300, &format!("after the {fault:?} of node {victim_id}"));
        log("progress after the fault");
        let victim = nodes
            .iter_mut()
            .find(|n| n.node_id == victim_id)
            .expect("the victim");
        match fault {
            Fault::Pause => victim.signal(false),
            Fault::Kill9 | Fault::Bounce => {
                victim.spawn();
                victim.wait_serving();
            }
        }
        let survivors: String = nodes
            .iter()
            .filter(|n| n.node_id != victim_id)
            .map(ClusterNode::bootstrap)
            .collect::<Vec<_>>()
            .join(",");
        eventually(&survivors, topic, "the ISR healed", |ps| {
            ps.iter()
                .all(|(_, leader, isr)| *leader >= 0 && isr.len() == 3)
        });
        writer.wait_for_more(100, &format!("after node {victim_id} rejoined"));
    }
    // Auto leader rebalance gives each partition back to its preferred replica.
    let preferred = preferred_replicas(&bootstrap, topic);
    eventually(
        &bootstrap,
        topic,
        "every partition led by its preferred replica",
        |ps| {
            ps.iter()
                .all(|(p, leader, _)| preferred.get(p) == Some(leader))
        },
    );
    let (acked, failed) = writer.finish();
    eprintln!(
        "{} records acknowledged, {failed} sends failed",
        acked.len()
    );
    let stored = read_all(&bootstrap, topic);
    for ((partition, offset), payload) in &acked {
        assert_eq!(
            stored.get(&(*partition, *offset)),
            Some(payload),
            "acknowledged {payload} at {partition}/{offset} is not there"
        );
    }
    let mut seen = BTreeSet::new();
    for payload in stored.values() {
        assert!(seen.insert(payload), "{payload} is stored twice");
    }
}

#[test]
fn replication_refuses_acks_all_below_min_insync_replicas_and_takes_acks_1() {
    let root = tempfile::tempdir().expect("tempdir");
    let mut nodes = start_voters(root.path(), FAST_CLUSTER);
    let topic = "strict";
    create_replicated_topic(
        &nodes[0].bootstrap(),
        topic,
        1,
        3,
        &[("min.insync.replicas", "3")],
    );
    let bootstrap = bootstrap_all(&nodes);
    eventually(&bootstrap, topic, "every replica in sync", |ps| {
        ps.len() == 1 && ps.iter().all(|(_, _, isr)| isr.len() == 3)
    });
    let leader = leader_of(&bootstrap, topic, 0);
    let victim = nodes
        .iter_mut()
        .find(|n| n.node_id != leader)
        .expect("a follower");
    victim.kill9();
    let victim_id = victim.node_id;
    let alive: String = nodes
        .iter()
        .filter(|n| n.node_id != victim_id)
        .map(ClusterNode::bootstrap)
        .collect::<Vec<_>>()
        .join(",");
    eventually(&alive, topic, "the ISR shrunk to two", |ps| {
        ps.iter().all(|(_, _, isr)| isr.len() == 2)
    });
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let strict = producer(
        &alive,
        &[
            ("acks", "all"),
            ("retries", "0"),
            ("message.timeout.ms", "10000"),
        ],
    );
    let refused = runtime.block_on(strict.send(
        FutureRecord::to(topic).key("k").payload("all"),
        Duration::from_secs(10),
    ));
    match refused {
        Err((KafkaError::MessageProduction(RDKafkaErrorCode::NotEnoughReplicas), _)) => {}
        other => panic!("acks=all with two of three in sync: {other:?}"),
    }
    let relaxed = producer(&alive, &[("acks", "1")]);
    runtime
        .block_on(relaxed.send(
            FutureRecord::to(topic).key("k").payload("one"),
            Duration::from_secs(10),
        ))
        .expect("acks=1 is taken");
}

#[test]
fn replication_controlled_shutdown_hands_leadership_over_before_the_node_stops() {
    let root = tempfile::tempdir().expect("tempdir");
    let topic = "handover";
    let (mut nodes, bootstrap) = cluster_with_topic(root.path(), topic);
    let writer = Writer::start(&bootstrap, topic);
    writer.wait_for_more(200, "before the stop");
    let victim_id = leader_of(&bootstrap, topic, 0);
    let victim = nodes
        .iter_mut()
        .find(|n| n.node_id == victim_id)
        .expect("the leader is a node");
    let status = victim.terminate().expect("the node was running");
    assert!(status.success(), "node {victim_id} stopped with {status}");
    let survivors: String = nodes
        .iter()
        .filter(|n| n.node_id != victim_id)
        .map(ClusterNode::bootstrap)
        .collect::<Vec<_>>()
        .join(",");
    // Before it exited, every leadership it held went elsewhere.
    eventually(
        &survivors,
        topic,
        "no partition led by the stopped node",
        |ps| {
            ps.iter()
                .all(|(_, leader, _)| *leader >= 0 && *leader != victim_id)
        },
    );
    writer.wait_for_more(200, "after the stop");
    let (acked, failed) = writer.finish();
    assert_eq!(failed, 0, "a send failed across a controlled shutdown");
    let stored = read_all(&survivors, topic);
    for ((partition, offset), payload) in &acked {
        assert_eq!(stored.get(&(*partition, *offset)), Some(payload));
    }
}

#[test]
fn replication_carries_transactions_to_the_next_leader() {
    let root = tempfile::tempdir().expect("tempdir");
    let mut nodes = start_voters(root.path(), FAST_CLUSTER);
    let bootstrap = bootstrap_all(&nodes);
    let topic = "replicated-txn";
    // Led by node 1, the cluster's transaction coordinator (the lowest live id,
    // until the coordinators live on the internal topics), which writes the
    // markers where it runs.
    create_assigned(
        &nodes[0].bootstrap(),
        topic,
        &[&[1, 2, 3], &[1, 3, 2], &[1, 2, 3]],
        &[("min.insync.replicas", "2")],
    );
    eventually(&bootstrap, topic, "every replica in sync", |ps| {
        ps.len() == 3
            && ps
                .iter()
                .all(|(_, leader, isr)| *leader == 1 && isr.len() == 3)
    });
    commit_abort_commit(&bootstrap, &nodes[0].bootstrap(), "replicated-txn", topic);
    // Node 1 stops cleanly: its leaderships go to the followers, which hold the
    // batches, the markers, the aborted-transaction index and the producer state.
    let status = nodes[0].terminate().expect("running");
    assert!(status.success());
    let survivors = format!("{},{}", nodes[1].bootstrap(), nodes[2].bootstrap());
    eventually(&survivors, topic, "new leaders", |ps| {
        ps.iter().all(|(_, leader, _)| *leader == 2 || *leader == 3)
    });
    assert_reads_committed_only(&survivors, topic, "on the new leaders");
}

/// Through a transactional producer on `bootstrap`, 30 records over the
/// topic's 3 partitions committed ("first"), 30 aborted, 30 committed
/// ("third"); then each partition's END, written through `end_through`.
fn commit_abort_commit(bootstrap: &str, end_through: &str, transactional_id: &str, topic: &str) {
    use super::transactions::{transaction, transactional, write_end};
    let producer = transactional(bootstrap, transactional_id, &[("acks", "all")]);
    transaction(&producer, topic, 3, "first", 30, true);
    transaction(&producer, topic, 3, "aborted", 30, false);
    transaction(&producer, topic, 3, "third", 30, true);
    drop(producer);
    write_end(end_through, topic, 3);
}

/// read_committed through `bootstrap` sees the two committed transactions of
/// `commit_abort_commit` whole and nothing of the aborted one; read_uncommitted
/// sees all 90 records, which it returns.
fn assert_reads_committed_only(
    bootstrap: &str,
    topic: &str,
    where_read: &str,
) -> BTreeMap<(i32, i64), String> {
    use super::transactions::{read_to_end, tagged};
    let committed: BTreeSet<String> = read_to_end(bootstrap, topic, 3, "read_committed")
        .into_values()
        .collect();
    let expected: BTreeSet<String> = tagged("first", 30)
        .into_iter()
        .chain(tagged("third", 30))
        .collect();
    assert_eq!(committed, expected, "read_committed {where_read}");
    let everything = read_to_end(bootstrap, topic, 3, "read_uncommitted");
    assert_eq!(everything.len(), 90, "read_uncommitted {where_read}");
    everything
}

/// A transaction over partitions led by three different nodes: the coordinator
/// writes its markers to the leaders on the other nodes with WriteTxnMarkers, so
/// a committed transaction reads whole and an aborted one not at all, on every
/// partition, and each partition's last stable offset moves past it.
#[test]
fn replication_ends_a_transaction_on_partitions_led_by_other_nodes() {
    let root = tempfile::tempdir().expect("tempdir");
    let nodes = start_voters(root.path(), FAST_CLUSTER);
    let bootstrap = bootstrap_all(&nodes);
    let topic = "spread-txn";
    create_assigned(
        &bootstrap,
        topic,
        &[&[1, 2, 3], &[2, 3, 1], &[3, 1, 2]],
        &[("min.insync.replicas", "2")],
    );
    eventually(
        &bootstrap,
        topic,
        "leaders 1, 2 and 3, every replica in sync",
        |ps| {
            ps.len() == 3
                && ps
                    .iter()
                    .all(|(partition, leader, isr)| *leader == partition + 1 && isr.len() == 3)
        },
    );
    commit_abort_commit(&bootstrap, &bootstrap, "spread-txn", topic);
    let everything = assert_reads_committed_only(&bootstrap, topic, "over three leaders");
    assert!(
        (0..3).all(|p| everything.keys().any(|(partition, _)| *partition == p)),
        "every partition took part"
    );
}

/// A zombie transactional producer, fenced by a newer instance with its
/// transactional id, produces again to partitions led by each of the three
/// nodes. The fence aborted its transaction, so each leader verifies the
/// produce with the coordinator (KIP-890), locally or on another node, and
/// must answer INVALID_PRODUCER_EPOCH, as Kafka maps the coordinator's
/// PRODUCER_FENCED for a produce: librdkafka then raises its fatal "fenced"
/// error. PRODUCER_FENCED on a produce it takes as abortable, and the zombie
/// would never learn it is dead.
#[test]
fn replication_tells_a_fenced_zombie_it_is_dead_from_every_partition_leader() {
    use super::transactions::{send, transactional};
    use rdkafka::producer::Producer;
    let wait = Duration::from_millis(CLIENT_WAIT_MS);
    let root = tempfile::tempdir().expect("tempdir");
    let nodes = start_voters(root.path(), FAST_CLUSTER);
    let bootstrap = bootstrap_all(&nodes);
    let topic = "zombie-spread";
    create_assigned(
        &bootstrap,
        topic,
        &[&[1, 2, 3], &[2, 3, 1], &[3, 1, 2]],
        &[],
    );
    eventually(&bootstrap, topic, "leaders 1, 2 and 3", |ps| {
        ps.len() == 3
            && ps
                .iter()
                .all(|(partition, leader, _)| *leader == partition + 1)
    });
    let zombie = transactional(&bootstrap, "zombie-spread", &[]);
    zombie.begin_transaction().expect("begin");
    for partition in 0..3 {
        send(&zombie, topic, partition, "before the fence");
    }
    zombie.flush(wait).expect("the zombie's first records");
    let _successor = transactional(&bootstrap, "zombie-spread", &[]);
    for partition in 0..3 {
        send(&zombie, topic, partition, "after the fence");
    }
    let _ = zombie.flush(wait);
    let deadline = Instant::now() + wait;
    let fatal = loop {
        if let Some(fatal) = zombie.client().fatal_error() {
            break fatal;
        }
        assert!(
            Instant::now() < deadline,
            "the zombie was never told it is fenced"
        );
        std::thread::sleep(Duration::from_millis(50));
    };
    assert_eq!(fatal.0, RDKafkaErrorCode::Fenced, "{fatal:?}");
}

/// One request over a fresh connection, Kafka-framed, answered in kind.
pub(crate) fn raw_request<Req, Resp>(
    bootstrap: &str,
    api_key: kafka_protocol::messages::ApiKey,
    version: i16,
    request: &Req,
) -> Resp
where
    Req: kafka_protocol::protocol::Encodable,
    Resp: kafka_protocol::protocol::Decodable,
{
    use bytes::BufMut;
    use kafka_protocol::messages::{RequestHeader, ResponseHeader};
    use kafka_protocol::protocol::{Decodable, Encodable, StrBytes};
    use std::io::{Read, Write};
    let header = RequestHeader::default()
        .with_request_api_key(api_key as i16)
        .with_request_api_version(version)
        .with_correlation_id(7)
        .with_client_id(Some(StrBytes::from_static_str("compat")));
    let mut body = bytes::BytesMut::new();
    header
        .encode(&mut body, api_key.request_header_version(version))
        .expect("header");
    request.encode(&mut body, version).expect("body");
    let mut frame = bytes::BytesMut::new();
    frame.put_i32(body.len() as i32);
    frame.put_slice(&body);
    let mut stream = std::net::TcpStream::connect(bootstrap).expect("connect");
    stream
        .set_read_timeout(Some(Duration::from_millis(CLIENT_WAIT_MS * 2)))
        .expect("read timeout");
    stream.write_all(&frame).expect("send");
    let mut length = [0u8; 4];
    stream.read_exact(&mut length).expect("length");
    let mut answer = vec![0u8; i32::from_be_bytes(length) as usize];
    stream.read_exact(&mut answer).expect("answer");
    let mut answer = bytes::Bytes::from(answer);
    let header = ResponseHeader::decode(&mut answer, api_key.response_header_version(version))
        .expect("response header");
    assert_eq!(header.correlation_id, 7);
    Resp::decode(&mut answer, version).expect("response")
}

#[test]
fn replication_reassigns_a_partition_onto_a_fourth_node_while_it_is_written() {
    use kafka_protocol::messages::alter_partition_reassignments_request::{
        ReassignablePartition, ReassignableTopic,
    };
    use kafka_protocol::messages::{
        AlterPartitionReassignmentsRequest, AlterPartitionReassignmentsResponse, ApiKey, BrokerId,
        ListPartitionReassignmentsRequest, ListPartitionReassignmentsResponse, TopicName,
    };
    use kafka_protocol::protocol::StrBytes;
    use sluice_compat::cluster::voter_list;

    let root = tempfile::tempdir().expect("tempdir");
    let mut nodes = start_voters(root.path(), FAST_CLUSTER);
    let mut fourth = ClusterNode::new(4, root.path(), &voter_list(&nodes), FAST_CLUSTER);
    fourth.spawn();
    fourth.wait_serving();
    let bootstrap = format!("{},{}", bootstrap_all(&nodes), fourth.bootstrap());
    let topic = "moving";
    create_assigned(
        &nodes[0].bootstrap(),
        topic,
        &[&[1, 2, 3]],
        &[("min.insync.replicas", "2")],
    );
    eventually(&bootstrap, topic, "every replica in sync", |ps| {
        ps.len() == 1 && ps[0].2.len() == 3
    });
    let writer = Writer::start(&bootstrap, topic);
    writer.wait_for_more(300, "before the move");
    // Move from [1, 2, 3] to [2, 3, 4]: node 4 catches up while the writes go on,
    // then node 1, the leader, leaves.
    let request = AlterPartitionReassignmentsRequest::default()
        .with_timeout_ms(30_000)
        .with_topics(vec![ReassignableTopic::default()
            .with_name(TopicName(StrBytes::from_static_str("moving")))
            .with_partitions(vec![ReassignablePartition::default()
                .with_partition_index(0)
                .with_replicas(Some(vec![
                    BrokerId(2),
                    BrokerId(3),
                    BrokerId(4),
                ]))])]);
    // Every node knows the fourth before the move is asked for.
    for through in [
        nodes[0].bootstrap(),
        nodes[1].bootstrap(),
        nodes[2].bootstrap(),
    ] {
        let deadline = Instant::now() + Duration::from_millis(CLIENT_WAIT_MS);
        while metadata(&through, topic).brokers().len() < 4 {
            assert!(
                Instant::now() < deadline,
                "{through} never listed the fourth node"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }
    let answer: AlterPartitionReassignmentsResponse = raw_request(
        &nodes[1].bootstrap(),
        ApiKey::AlterPartitionReassignments,
        0,
        &request,
    );
    assert_eq!(answer.error_code, 0);
    assert_eq!(
        answer.responses[0].partitions[0].error_code, 0,
        "{answer:?}"
    );
    eventually(
        &bootstrap,
        topic,
        "the partition on 2, 3 and 4, all in sync",
        |ps| {
            let isr: BTreeSet<i32> = ps[0].2.iter().copied().collect();
            isr == [2, 3, 4].into() && ps[0].1 != 1
        },
    );
    let listed: ListPartitionReassignmentsResponse = raw_request(
        &nodes[2].bootstrap(),
        ApiKey::ListPartitionReassignments,
        0,
        &ListPartitionReassignmentsRequest::default().with_timeout_ms(30_000),
    );
    assert!(listed.topics.is_empty(), "no move left: {listed:?}");
    writer.wait_for_more(300, "after the move");
    let (acked, failed) = writer.finish();
    eprintln!(
        "{} records acknowledged across the move, {failed} sends failed",
        acked.len()
    );
    // Node 1 is out: its copy no longer counts. Read through node 4's leadership.
    nodes[0].kill9();
    let survivors = format!(
        "{},{},{}",
        nodes[1].bootstrap(),
        nodes[2].bootstrap(),
        fourth.bootstrap()
    );
    let deadline = Instant::now() + Duration::from_millis(CLIENT_WAIT_MS);
    while metadata(&survivors, topic).brokers().len() > 3 {
        assert!(Instant::now() < deadline, "node 1 was never fenced");
        std::thread::sleep(Duration::from_millis(100));
    }
    let stored = read_all_partitions(&survivors, topic, 1);
    for ((partition, offset), payload) in &acked {
        assert_eq!(stored.get(&(*partition, *offset)), Some(payload));
    }
}

/// `sluice_requests_total{api="Fetch"}` of a node, from its metrics endpoint.
fn fetches_served(metrics: &str) -> u64 {
    use std::io::{Read, Write};
    let mut stream = std::net::TcpStream::connect(metrics).expect("metrics");
    stream
        .write_all(b"GET /metrics HTTP/1.0\r\nHost: test\r\n\r\n")
        .expect("scrape");
    let mut text = String::new();
    stream.read_to_string(&mut text).expect("scrape");
    text.lines()
        .find_map(|line| line.strip_prefix("sluice_requests_total{api=\"Fetch\"} "))
        .map_or(0, |n| n.trim().parse().expect("a count"))
}

#[test]
fn replication_sends_a_consumer_to_the_replica_in_its_rack() {
    use sluice_compat::cluster::start_together;
    let root = tempfile::tempdir().expect("tempdir");
    let metrics: Vec<String> = (0..3)
        .map(|_| format!("127.0.0.1:{}", sluice_compat::free_port()))
        .collect();
    let nodes: Vec<ClusterNode> = (1..=3)
        .map(|id| {
            let rack = format!("rack-{id}");
            let mut args: Vec<&str> = FAST_CLUSTER.to_vec();
            args.extend([
                "--rack",
                &rack,
                "--replica-selector",
                "rack-aware",
                "--metrics-listen",
                &metrics[(id - 1) as usize],
                // One replica per offsets topic partition: no follower fetches
                // from node 3 for the consumer's group, so its Fetch count is
                // its consumers'.
                "--offsets-topic-replication-factor",
                "1",
            ]);
            ClusterNode::new(id, root.path(), "", &args)
        })
        .collect();
    let nodes = start_together(nodes);
    let bootstrap = bootstrap_all(&nodes);
    let topic = "racked";
    create_assigned(&bootstrap, topic, &[&[1, 2, 3]], &[]);
    eventually(&bootstrap, topic, "every replica in sync", |ps| {
        ps.len() == 1 && ps[0].1 == 1 && ps[0].2.len() == 3
    });
    let writer = Writer::start(&bootstrap, topic);
    writer.wait_for_more(500, "before reading");
    let (acked, _) = writer.finish();
    // A consumer in rack-2 is sent by the leader (node 1) to node 2, which serves
    // it; node 3, in another rack, serves no consumer (followers fetch from the
    // leader only, so a follower's Fetch count is its consumers').
    let before_2 = fetches_served(&metrics[1]);
    let before_3 = fetches_served(&metrics[2]);
    let reader = consumer(&bootstrap, &[("client.rack", "rack-2")]);
    let mut assignment = TopicPartitionList::new();
    assignment
        .add_partition_offset(topic, 0, Offset::Beginning)
        .expect("assign");
    reader.assign(&assignment).expect("assign");
    let mut read = BTreeMap::new();
    let deadline = Instant::now() + Duration::from_millis(CLIENT_WAIT_MS);
    while read.len() < acked.len() {
        assert!(
            Instant::now() < deadline,
            "read {} of {}",
            read.len(),
            acked.len()
        );
        if let Some(Ok(message)) = reader.poll(Duration::from_millis(100)) {
            let payload =
                String::from_utf8_lossy(message.payload().unwrap_or_default()).into_owned();
            read.insert((message.partition(), message.offset()), payload);
        }
    }
    for (place, payload) in &acked {
        assert_eq!(read.get(place), Some(payload));
    }
    assert!(
        fetches_served(&metrics[1]) > before_2,
        "node 2 served the rack-2 consumer"
    );
    assert_eq!(
        fetches_served(&metrics[2]),
        before_3,
        "node 3 served no consumer"
    );
}

/// KIP-966 through real processes: a partition on nodes 4 and 3 (min ISR 2)
/// whose replicas stop cleanly one after the other is led again by the first
/// to come back, from the ELR, with every record acknowledged at acks=all. The
/// rule before the ELR (the last ISR member alone may lead) would have waited
/// for node 4. Node 4 then catches up and both are in the ISR again.
#[test]
fn replication_elects_an_eligible_replica_when_the_last_isr_member_is_down() {
    use sluice_compat::cluster::voter_list;

    let root = tempfile::tempdir().expect("tempdir");
    let mut nodes = start_voters(root.path(), FAST_CLUSTER);
    let mut fourth = ClusterNode::new(4, root.path(), &voter_list(&nodes), FAST_CLUSTER);
    fourth.spawn();
    fourth.wait_serving();
    let topic = "eligible";
    let deadline = Instant::now() + Duration::from_millis(CLIENT_WAIT_MS);
    while metadata(&nodes[0].bootstrap(), topic).brokers().len() < 4 {
        assert!(Instant::now() < deadline, "node 1 never listed node 4");
        std::thread::sleep(Duration::from_millis(100));
    }
    create_assigned(
        &nodes[0].bootstrap(),
        topic,
        &[&[4, 3]],
        &[("min.insync.replicas", "2")],
    );
    let voters = bootstrap_all(&nodes);
    eventually(&voters, topic, "both replicas in sync", |ps| {
        ps.len() == 1 && ps[0].2.len() == 2
    });
    let writer = Writer::start(&voters, topic);
    writer.wait_for_more(300, "with both replicas");
    let (acked, failed) = writer.finish();
    assert_eq!(failed, 0);
    // Node 3 stops: the ISR is [4], below min ISR, so 3 is eligible.
    let status = nodes[2].terminate().expect("node 3 was running");
    assert!(status.success(), "node 3 stopped with {status}");
    let quorum = bootstrap_all(&nodes[..2]);
    eventually(&quorum, topic, "node 3 out of the ISR", |ps| {
        ps.len() == 1 && ps[0].2 == vec![4]
    });
    let status = fourth.terminate().expect("node 4 was running");
    assert!(status.success(), "node 4 stopped with {status}");
    eventually(&quorum, topic, "no leader", |ps| {
        ps.len() == 1 && ps[0].1 < 0
    });
    // Node 3 is back first: an eligible replica, it leads.
    nodes[2].spawn();
    nodes[2].wait_serving();
    eventually(&voters, topic, "node 3 leading from the ELR", |ps| {
        ps.len() == 1 && ps[0].1 == 3 && ps[0].2 == vec![3]
    });
    // Alone in the ISR it takes acks=1; its high watermark stands still below
    // min ISR (KIP-966's strict min ISR), so that record is read once node 4 is
    // back in the ISR.
    let one = producer(&voters, &[("acks", "1")]);
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let after = runtime
        .block_on(one.send(
            FutureRecord::to(topic).key("k").payload("after"),
            Duration::from_millis(CLIENT_WAIT_MS),
        ))
        .expect("acks=1 on the ELR leader");
    assert!(acked.keys().all(|at| *at < (after.partition, after.offset)));
    fourth.spawn();
    fourth.wait_serving();
    eventually(&voters, topic, "node 4 back in the ISR", |ps| {
        ps.len() == 1 && ps[0].2.len() == 2
    });
    let stored = read_all_partitions(&voters, topic, 1);
    for (at, payload) in &acked {
        assert_eq!(
            stored.get(at),
            Some(payload),
            "acknowledged record at {at:?}"
        );
    }
    assert_eq!(
        stored
            .get(&(after.partition, after.offset))
            .map(String::as_str),
        Some("after")
    );
}
