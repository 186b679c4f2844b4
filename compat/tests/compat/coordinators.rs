//! Group coordinators on the replicated offsets topic, across three real nodes
//! on loopback, through librdkafka: a group's committed offsets outlive the
//! node that coordinated it (kill -9), its members resume there on the next
//! leader of the group's `__consumer_offsets` partition; and a transaction
//! whose coordinator is on one node commits the offsets of a group coordinated
//! on another; a Stable group's member keeps its place across the move, while an aborted one leaves them as they were, and commits them
//! still when that group's coordinator is killed before the commit.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, CommitMode, Consumer, ConsumerContext, Rebalance};
use rdkafka::message::Message;
use rdkafka::producer::{FutureRecord, Producer};
use rdkafka::types::RDKafkaErrorCode;
use rdkafka::ClientContext;
use rdkafka::{Offset, TopicPartitionList};
use sluice::internal_topics::{
    group_partition, txn_partition, OFFSETS_TOPIC_NAME, TRANSACTION_STATE_TOPIC_NAME,
};
use sluice_compat::cluster::{start_voters, ClusterNode};
use sluice_compat::{consumer, create_replicated_topic, producer, CLIENT_WAIT_MS};

use crate::replication::{bootstrap_all, eventually, leader_of, raw_request, FAST_CLUSTER};

const WAIT: Duration = Duration::from_millis(CLIENT_WAIT_MS);
const PARTITIONS: i32 = 3;
const RECORDS_PER_PARTITION: usize = 40;

/// Three nodes, `topic` on all three written with `RECORDS_PER_PARTITION`
/// records a partition ("p<partition>-<n>"), and the offsets topic created by
/// a first FindCoordinator with every replica in sync.
fn cluster(root: &std::path::Path, topic: &str, group: &str) -> (Vec<ClusterNode>, String) {
    let nodes = start_voters(root, FAST_CLUSTER);
    let bootstrap = bootstrap_all(&nodes);
    create_replicated_topic(
        &nodes[0].bootstrap(),
        topic,
        PARTITIONS,
        3,
        &[("min.insync.replicas", "2")],
    );
    let writer = producer(
        &bootstrap,
        &[("acks", "all"), ("enable.idempotence", "true")],
    );
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    for partition in 0..PARTITIONS {
        for n in 0..RECORDS_PER_PARTITION {
            let payload = format!("p{partition}-{n}");
            let record = FutureRecord::<(), str>::to(topic)
                .partition(partition)
                .payload(&payload);
            runtime
                .block_on(writer.send(record, WAIT))
                .expect("acknowledged");
        }
    }
    // A consumer's first FindCoordinator creates the offsets topic.
    let probe = consumer(&bootstrap, &[("group.id", group)]);
    let mut wanted = TopicPartitionList::new();
    wanted.add_partition(topic, 0);
    let deadline = Instant::now() + WAIT * 3;
    while probe.committed_offsets(wanted.clone(), WAIT).is_err() {
        assert!(
            Instant::now() < deadline,
            "the group never had a coordinator"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    eventually(
        &bootstrap,
        OFFSETS_TOPIC_NAME,
        "every offsets replica in sync",
        |ps| ps.len() == 50 && ps.iter().all(|(_, _, isr)| isr.len() == 3),
    );
    (nodes, bootstrap)
}

/// The node that coordinates `group`: the leader of its offsets partition.
fn coordinator_of(bootstrap: &str, group: &str) -> i32 {
    leader_of(bootstrap, OFFSETS_TOPIC_NAME, group_partition(group))
}

/// Reads until `count` records came, or fails after a while.
fn read<C: ConsumerContext>(
    consumer: &BaseConsumer<C>,
    count: usize,
) -> BTreeMap<(i32, i64), String> {
    let mut got = BTreeMap::new();
    let deadline = Instant::now() + WAIT * 6;
    while got.len() < count {
        assert!(
            Instant::now() < deadline,
            "read {} of {count} records",
            got.len()
        );
        if let Some(Ok(message)) = consumer.poll(Duration::from_millis(200)) {
            let payload =
                String::from_utf8_lossy(message.payload().unwrap_or_default()).to_string();
            got.insert((message.partition(), message.offset()), payload);
        }
    }
    got
}

fn committed(consumer: &BaseConsumer, topic: &str) -> BTreeMap<i32, Offset> {
    let mut wanted = TopicPartitionList::new();
    for partition in 0..PARTITIONS {
        wanted.add_partition(topic, partition);
    }
    // A coordinator that moved answers NOT_COORDINATOR (or is loading) until
    // the client finds the new one: retriable, as clients retry it.
    let deadline = Instant::now() + WAIT * 3;
    let listed = loop {
        match consumer.committed_offsets(wanted.clone(), WAIT) {
            Ok(listed) => break listed,
            Err(rdkafka::error::KafkaError::MetadataFetch(
                rdkafka::types::RDKafkaErrorCode::NotCoordinator
                | rdkafka::types::RDKafkaErrorCode::CoordinatorLoadInProgress
                | rdkafka::types::RDKafkaErrorCode::CoordinatorNotAvailable,
            )) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(100)),
            Err(error) => panic!("committed offsets: {error}"),
        }
    };
    (0..PARTITIONS)
        .map(|p| {
            let offset = listed.find_partition(topic, p).expect("partition").offset();
            (p, offset)
        })
        .collect()
}

/// Kills -9 the node that coordinates `group` and waits until its offsets
/// partition has another leader; returns the killed node's index and the
/// survivors' bootstrap list.
fn kill_group_coordinator(
    nodes: &mut [ClusterNode],
    bootstrap: &str,
    group: &str,
) -> (usize, String) {
    let victim = coordinator_of(bootstrap, group);
    println!("killing node {victim}, the coordinator of {group}");
    let index = nodes
        .iter()
        .position(|n| n.node_id == victim)
        .expect("the coordinator is one of the nodes");
    nodes[index].kill9();
    let survivors: Vec<String> = nodes
        .iter()
        .filter(|n| n.node_id != victim)
        .map(ClusterNode::bootstrap)
        .collect();
    let survivors = survivors.join(",");
    let deadline = Instant::now() + WAIT * 6;
    while coordinator_of(&survivors, group) == victim {
        assert!(
            Instant::now() < deadline,
            "the offsets partition never moved off node {victim}"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    (index, survivors)
}

/// Groups committing at once on a fresh cluster: the first commit creates the
/// offsets topic, and each group's coordinator may not have followed the
/// topic's image yet when the commit reaches it. Every commit is accepted
/// (the broker says "loading", or the client looks again, rather than
/// NOT_COORDINATOR, which librdkafka hands to a synchronous commit as its
/// error). Found by the benchmark's commit latency run.
#[test]
fn coordinators_the_first_commits_on_a_fresh_cluster_are_accepted() {
    const GROUPS: usize = 8;
    let root = tempfile::tempdir().expect("tempdir");
    let nodes = start_voters(root.path(), FAST_CLUSTER);
    let bootstrap = bootstrap_all(&nodes);
    let topic = "first-commits";
    create_replicated_topic(&bootstrap, topic, 1, 3, &[]);
    let members: Vec<BaseConsumer> = (0..GROUPS)
        .map(|n| consumer(&bootstrap, &[("group.id", &format!("first-commit-{n}"))]))
        .collect();
    let committers: Vec<_> = members
        .into_iter()
        .enumerate()
        .map(|(n, member)| {
            let topic = topic.to_string();
            std::thread::spawn(move || {
                let mut offsets = TopicPartitionList::new();
                offsets
                    .add_partition_offset(&topic, 0, Offset::Offset(n as i64 + 1))
                    .expect("offsets");
                member.commit(&offsets, CommitMode::Sync)
            })
        })
        .collect();
    for (n, committer) in committers.into_iter().enumerate() {
        let committed = committer.join().expect("committer");
        assert!(
            committed.is_ok(),
            "group first-commit-{n}'s first commit failed: {committed:?}"
        );
    }
}

#[test]
fn coordinators_a_group_resumes_at_its_committed_offsets_after_its_coordinator_is_killed() {
    let root = tempfile::tempdir().expect("tempdir");
    let (topic, group) = ("coord-in", "coord-group");
    let (mut nodes, bootstrap) = cluster(root.path(), topic, group);
    let settings = [
        ("group.id", group),
        ("enable.auto.commit", "false"),
        ("auto.offset.reset", "earliest"),
        ("session.timeout.ms", "6000"),
    ];

    let first = consumer(&bootstrap, &settings);
    first.subscribe(&[topic]).expect("subscribe");
    let half = PARTITIONS as usize * RECORDS_PER_PARTITION / 2;
    let before = read(&first, half);
    first
        .commit_consumer_state(CommitMode::Sync)
        .expect("offsets committed");
    let kept = committed(&first, topic);
    drop(first);

    let (index, survivors) = kill_group_coordinator(&mut nodes, &bootstrap, group);

    let second = consumer(&survivors, &settings);
    assert_eq!(
        committed(&second, topic),
        kept,
        "the new coordinator has every committed offset"
    );
    second.subscribe(&[topic]).expect("subscribe");
    let rest = PARTITIONS as usize * RECORDS_PER_PARTITION - half;
    let after = read(&second, rest);
    for (partition, offset) in after.keys() {
        // A partition the first member never committed starts at the beginning.
        let start = match kept[partition] {
            Offset::Offset(start) => start,
            _ => 0,
        };
        assert!(
            *offset >= start,
            "partition {partition} was read again from {offset}, below its committed {start}"
        );
    }
    let mut every: BTreeMap<(i32, i64), String> = before;
    every.extend(after);
    assert_eq!(
        every.len(),
        PARTITIONS as usize * RECORDS_PER_PARTITION,
        "every record read once across the move"
    );
    second
        .commit_consumer_state(CommitMode::Sync)
        .expect("committed on the new coordinator");
    drop(second);

    // The killed node comes back as a follower and catches up; the group's
    // offsets read the same through it.
    nodes[index].spawn();
    nodes[index].wait_serving();
    let through = consumer(&nodes[index].bootstrap(), &settings);
    let end = RECORDS_PER_PARTITION as i64;
    let deadline = Instant::now() + WAIT * 6;
    while committed(&through, topic)
        .values()
        .any(|o| *o != Offset::Offset(end))
    {
        assert!(
            Instant::now() < deadline,
            "the group's final offsets never read {end} everywhere"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// A session long enough that no coordinator move, however slow the machine,
/// outlasts it: the test below asserts that the member was never dropped.
const LONG_SESSION_MS: &str = "300000";

/// What librdkafka's rebalances handed the consumer, in order.
struct RecordedRebalances(Arc<Mutex<Vec<String>>>);

impl ClientContext for RecordedRebalances {}

impl ConsumerContext for RecordedRebalances {
    fn post_rebalance(&self, _: &BaseConsumer<Self>, rebalance: &Rebalance<'_>) {
        let event = match rebalance {
            Rebalance::Assign(partitions) => format!("assign {}", partitions.count()),
            Rebalance::Revoke(partitions) => format!("revoke {}", partitions.count()),
            Rebalance::Error(error) => format!("error {error}"),
        };
        self.0.lock().expect("rebalance log").push(event);
    }
}

/// A consumer in a Stable group keeps its member id, generation and
/// assignment when its coordinator is killed: the next leader of the group's
/// offsets partition restores the group Stable with its members, as Kafka's
/// loadGroup does, so the member's heartbeats and commits go on there without
/// a rebalance. With groups restored Empty, the member was sent back to join
/// as a new member (revoke, then assign again), and a commit sent with its old
/// member id could keep the group rebalancing for minutes.
#[test]
fn coordinators_a_stable_groups_member_keeps_its_assignment_when_its_coordinator_is_killed() {
    let root = tempfile::tempdir().expect("tempdir");
    let (topic, group) = ("keep-in", "keep-group");
    let (mut nodes, bootstrap) = cluster(root.path(), topic, group);
    let rebalances = Arc::new(Mutex::new(Vec::new()));
    let member: BaseConsumer<RecordedRebalances> = ClientConfig::new()
        .set("bootstrap.servers", &bootstrap)
        .set("group.id", group)
        .set("enable.auto.commit", "false")
        .set("auto.offset.reset", "earliest")
        .set("session.timeout.ms", LONG_SESSION_MS)
        .set("max.poll.interval.ms", LONG_SESSION_MS)
        .create_with_context(RecordedRebalances(Arc::clone(&rebalances)))
        .expect("consumer");
    member.subscribe(&[topic]).expect("subscribe");
    let total = PARTITIONS as usize * RECORDS_PER_PARTITION;
    let before = read(&member, total / 2);
    member
        .commit_consumer_state(CommitMode::Sync)
        .expect("offsets committed");
    let assigned = vec![format!("assign {PARTITIONS}")];
    assert_eq!(*rebalances.lock().expect("rebalance log"), assigned);

    kill_group_coordinator(&mut nodes, &bootstrap, group);

    let after = read(&member, total - before.len());
    let mut every = before;
    every.extend(after);
    assert_eq!(every.len(), total, "every record read once across the move");
    // The commit reaches the new coordinator once the client has found it:
    // until then it is refused as retriable, never for the member or its
    // generation.
    let deadline = Instant::now() + WAIT * 6;
    loop {
        match member.commit_consumer_state(CommitMode::Sync) {
            Ok(()) => break,
            Err(rdkafka::error::KafkaError::ConsumerCommit(
                RDKafkaErrorCode::NotCoordinator
                | RDKafkaErrorCode::CoordinatorLoadInProgress
                | RDKafkaErrorCode::CoordinatorNotAvailable
                | RDKafkaErrorCode::RequestTimedOut,
            )) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(200)),
            Err(error) => panic!("the member's commit on the new coordinator: {error}"),
        }
    }
    assert_eq!(
        *rebalances.lock().expect("rebalance log"),
        assigned,
        "the member was never revoked nor assigned again"
    );
}

#[test]
fn coordinators_a_transaction_commits_the_offsets_of_a_group_coordinated_on_another_node() {
    let root = tempfile::tempdir().expect("tempdir");
    let topic = "coord-txn-in";
    let (_nodes, bootstrap) = cluster(root.path(), topic, "coord-txn-probe");
    // The transaction's coordinator leads its transaction state partition;
    // pick a group whose offsets partition another node leads.
    let txn = producer(&bootstrap, &[("transactional.id", "coord-txn")]);
    txn.init_transactions(WAIT).expect("init_transactions");
    let txn_node = leader_of(
        &bootstrap,
        TRANSACTION_STATE_TOPIC_NAME,
        txn_partition("coord-txn"),
    );
    let group = (0..)
        .map(|n| format!("coord-txn-group-{n}"))
        .find(|g| coordinator_of(&bootstrap, g) != txn_node)
        .expect("a group placed on another node");
    println!(
        "group {group} is coordinated by node {}, the transaction by node {txn_node}",
        coordinator_of(&bootstrap, &group)
    );
    let member = consumer(&bootstrap, &[("group.id", group.as_str())]);
    let metadata = member.group_metadata().expect("group metadata");
    let offsets = |offset: i64| {
        let mut list = TopicPartitionList::new();
        for partition in 0..PARTITIONS {
            list.add_partition_offset(
                topic,
                partition,
                Offset::Offset(offset + i64::from(partition)),
            )
            .expect("tpl");
        }
        list
    };
    let wanted: BTreeMap<i32, Offset> = (0..PARTITIONS)
        .map(|p| (p, Offset::Offset(7 + i64::from(p))))
        .collect();

    txn.begin_transaction().expect("begin");
    txn.send_offsets_to_transaction(&offsets(7), &metadata, WAIT)
        .expect("send offsets");
    txn.commit_transaction(WAIT).expect("commit");
    let deadline = Instant::now() + WAIT * 3;
    while committed(&member, topic) != wanted {
        assert!(
            Instant::now() < deadline,
            "the transaction's offsets never became committed: {:?}",
            committed(&member, topic)
        );
        std::thread::sleep(Duration::from_millis(100));
    }

    txn.begin_transaction().expect("begin");
    txn.send_offsets_to_transaction(&offsets(30), &metadata, WAIT)
        .expect("send offsets");
    txn.abort_transaction(WAIT).expect("abort");
    // A successor starts only once the abort is complete everywhere.
    let successor = producer(&bootstrap, &[("transactional.id", "coord-txn")]);
    successor.init_transactions(WAIT).expect("successor init");
    assert_eq!(
        committed(&member, topic),
        wanted,
        "an aborted transaction's offsets never show"
    );
}

/// Offsets sent in a transaction are in the group's offsets partition, on
/// every replica, before the send is answered: the group coordinator's node
/// killed before the commit, the next leader of that partition holds them
/// pending and commits them when the transaction's marker reaches it.
#[test]
fn coordinators_offsets_sent_in_a_transaction_outlive_their_group_coordinator() {
    let root = tempfile::tempdir().expect("tempdir");
    let topic = "coord-pending-in";
    let (mut nodes, bootstrap) = cluster(root.path(), topic, "coord-pending-probe");
    let id = "coord-pending";
    let txn = producer(&bootstrap, &[("transactional.id", id)]);
    txn.init_transactions(WAIT).expect("init_transactions");
    let txn_node = leader_of(&bootstrap, TRANSACTION_STATE_TOPIC_NAME, txn_partition(id));
    let group = (0..)
        .map(|n| format!("coord-pending-group-{n}"))
        .find(|g| coordinator_of(&bootstrap, g) != txn_node)
        .expect("a group placed on another node");
    let member = consumer(&bootstrap, &[("group.id", group.as_str())]);
    let metadata = member.group_metadata().expect("group metadata");
    drop(member);
    let mut offsets = TopicPartitionList::new();
    for partition in 0..PARTITIONS {
        offsets
            .add_partition_offset(topic, partition, Offset::Offset(11 + i64::from(partition)))
            .expect("tpl");
    }
    txn.begin_transaction().expect("begin");
    txn.send_offsets_to_transaction(&offsets, &metadata, WAIT)
        .expect("send offsets");

    let (_, survivors) = kill_group_coordinator(&mut nodes, &bootstrap, &group);
    let deadline = Instant::now() + WAIT * 6;
    loop {
        match txn.commit_transaction(WAIT * 2) {
            Ok(()) => break,
            Err(rdkafka::error::KafkaError::Transaction(error))
                if error.is_retriable() && Instant::now() < deadline => {}
            Err(error) => panic!("commit after the group coordinator was killed: {error}"),
        }
    }
    let wanted: BTreeMap<i32, Offset> = (0..PARTITIONS)
        .map(|p| (p, Offset::Offset(11 + i64::from(p))))
        .collect();
    let reader = consumer(&survivors, &[("group.id", group.as_str())]);
    let deadline = Instant::now() + WAIT * 3;
    while committed(&reader, topic) != wanted {
        assert!(
            Instant::now() < deadline,
            "the transaction's offsets never became committed on the new coordinator: {:?}",
            committed(&reader, topic)
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// What became of one transaction, as the producer learned it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Outcome {
    Committed,
    Aborted,
    /// The call failed without saying: it may or may not have committed.
    Unknown,
}

/// Commits (or, when the client says it must, aborts) transaction `n`: one
/// record "t<n>" on each partition.
fn one_transaction(
    txn: &rdkafka::producer::FutureProducer,
    runtime: &tokio::runtime::Runtime,
    topic: &str,
    n: usize,
) -> Outcome {
    if txn.begin_transaction().is_err() {
        return Outcome::Unknown;
    }
    for partition in 0..PARTITIONS {
        let payload = format!("t{n}");
        let record = FutureRecord::<(), str>::to(topic)
            .partition(partition)
            .payload(&payload);
        if runtime.block_on(txn.send(record, WAIT)).is_err() {
            return match txn.abort_transaction(WAIT * 2) {
                Ok(()) => Outcome::Aborted,
                Err(_) => Outcome::Unknown,
            };
        }
    }
    loop {
        match txn.commit_transaction(WAIT * 2) {
            Ok(()) => return Outcome::Committed,
            Err(rdkafka::error::KafkaError::Transaction(error)) if error.is_retriable() => {}
            Err(rdkafka::error::KafkaError::Transaction(error)) if error.txn_requires_abort() => {
                return match txn.abort_transaction(WAIT * 2) {
                    Ok(()) => Outcome::Aborted,
                    Err(_) => Outcome::Unknown,
                };
            }
            Err(_) => return Outcome::Unknown,
        }
    }
}

#[test]
fn coordinators_transactions_stay_whole_when_their_coordinator_is_killed_between_and_during_commits(
) {
    let root = tempfile::tempdir().expect("tempdir");
    let topic = "coord-kill-out";
    let (mut nodes, bootstrap) = cluster(root.path(), topic, "coord-kill-probe");
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let transactional_id = "coord-kill-txn";
    let settings = [
        ("transactional.id", transactional_id),
        ("transaction.timeout.ms", "30000"),
    ];
    let mut txn = producer(&bootstrap, &settings);
    txn.init_transactions(WAIT * 2).expect("init_transactions");
    let mut outcomes: Vec<Outcome> = Vec::new();
    let run =
        |txn: &rdkafka::producer::FutureProducer, count: usize, outcomes: &mut Vec<Outcome>| {
            for _ in 0..count {
                let n = outcomes.len();
                outcomes.push(one_transaction(txn, &runtime, topic, n));
            }
        };
    run(&txn, 5, &mut outcomes);

    // Between commits: the coordinator's node dies, the next leader of the
    // transaction state partition takes over.
    for round in 0..2 {
        let coordinator = leader_of(
            &bootstrap,
            TRANSACTION_STATE_TOPIC_NAME,
            txn_partition(transactional_id),
        );
        let index = nodes
            .iter()
            .position(|n| n.node_id == coordinator)
            .expect("the coordinator is a node");
        println!("round {round}: killing node {coordinator}, the transaction coordinator");
        if round == 0 {
            nodes[index].kill9();
        } else {
            // During a commit: the kill lands while EndTxn and its markers run.
            let pid_killer = std::thread::scope(|scope| {
                let node = &mut nodes[index];
                let killer = scope.spawn(move || {
                    std::thread::sleep(Duration::from_millis(5));
                    node.kill9();
                });
                run(&txn, 1, &mut outcomes);
                killer.join()
            });
            pid_killer.expect("killer thread");
        }
        // The producer goes on, or is replaced by a new instance of the same
        // id (which fences the old one and ends what it left).
        let before = outcomes.len();
        run(&txn, 5, &mut outcomes);
        if outcomes[before..].iter().all(|o| *o != Outcome::Committed) {
            println!("the producer could not go on; a new instance takes over");
            txn = producer(&bootstrap, &settings);
            txn.init_transactions(WAIT * 3)
                .expect("init_transactions after the kill");
            run(&txn, 5, &mut outcomes);
        }
        nodes[index].spawn();
        nodes[index].wait_serving();
        eventually(
            &bootstrap,
            TRANSACTION_STATE_TOPIC_NAME,
            "every replica back in sync",
            |ps| ps.iter().all(|(_, _, isr)| isr.len() == 3),
        );
    }
    println!("outcomes: {outcomes:?}");
    assert!(
        outcomes
            .iter()
            .filter(|o| **o == Outcome::Committed)
            .count()
            >= 10,
        "transactions kept committing across the kills"
    );

    // read_committed, to the end of every partition.
    let reader = consumer(
        &bootstrap,
        &[
            ("isolation.level", "read_committed"),
            ("auto.offset.reset", "earliest"),
        ],
    );
    let mut assignment = TopicPartitionList::new();
    for partition in 0..PARTITIONS {
        assignment
            .add_partition_offset(topic, partition, Offset::Beginning)
            .expect("assign");
    }
    reader.assign(&assignment).expect("assign");
    let mut seen: BTreeMap<String, Vec<i32>> = BTreeMap::new();
    let mut idle = 0;
    let deadline = Instant::now() + WAIT * 6;
    while idle < 20 {
        assert!(Instant::now() < deadline, "reading never settled");
        match reader.poll(Duration::from_millis(100)) {
            Some(Ok(message)) => {
                idle = 0;
                let payload =
                    String::from_utf8_lossy(message.payload().unwrap_or_default()).to_string();
                if payload.starts_with('t') {
                    seen.entry(payload).or_default().push(message.partition());
                }
            }
            Some(Err(error)) => panic!("read_committed consumer: {error}"),
            None => idle += 1,
        }
    }
    for (n, outcome) in outcomes.iter().enumerate() {
        let mut partitions = seen.remove(&format!("t{n}")).unwrap_or_default();
        partitions.sort_unstable();
        match outcome {
            Outcome::Committed => assert_eq!(
                partitions,
                (0..PARTITIONS).collect::<Vec<_>>(),
                "committed transaction t{n} is read whole, once"
            ),
            Outcome::Aborted => assert!(
                partitions.is_empty(),
                "aborted transaction t{n} is never read: {partitions:?}"
            ),
            Outcome::Unknown => {
                assert!(
                    partitions.is_empty() || partitions == (0..PARTITIONS).collect::<Vec<_>>(),
                    "transaction t{n} is read whole or not at all: {partitions:?}"
                );
            }
        }
    }
    assert!(seen.is_empty(), "records of no transaction: {seen:?}");
}

/// The leader epoch of `topic`'s `partition` (Metadata v9, raw).
fn leader_epoch_of(bootstrap: &str, topic: &str, partition: i32) -> i32 {
    use kafka_protocol::messages::metadata_request::MetadataRequestTopic;
    use kafka_protocol::messages::{ApiKey, MetadataRequest, MetadataResponse, TopicName};
    use kafka_protocol::protocol::StrBytes;
    let request =
        MetadataRequest::default().with_topics(Some(vec![MetadataRequestTopic::default()
            .with_name(Some(TopicName(StrBytes::from_string(topic.to_string()))))]));
    let address = bootstrap.split(',').next().expect("an address");
    let answer: MetadataResponse = raw_request(address, ApiKey::Metadata, 9, &request);
    answer.topics[0]
        .partitions
        .iter()
        .find(|p| p.partition_index == partition)
        .map(|p| p.leader_epoch)
        .expect("the partition is described")
}

/// The (producer id, producer epoch) of `transactional_id`, from its
/// coordinator (DescribeTransactions, raw).
fn producer_of(bootstrap: &str, transactional_id: &str) -> (i64, i16) {
    use kafka_protocol::messages::{
        ApiKey, DescribeTransactionsRequest, DescribeTransactionsResponse, TransactionalId,
    };
    use kafka_protocol::protocol::StrBytes;
    let coordinator = leader_of(
        bootstrap,
        TRANSACTION_STATE_TOPIC_NAME,
        txn_partition(transactional_id),
    );
    let address = bootstrap_of_node(bootstrap, coordinator);
    let request =
        DescribeTransactionsRequest::default().with_transactional_ids(vec![TransactionalId(
            StrBytes::from_string(transactional_id.to_string()),
        )]);
    let answer: DescribeTransactionsResponse =
        raw_request(&address, ApiKey::DescribeTransactions, 0, &request);
    let state = &answer.transaction_states[0];
    assert_eq!(
        state.error_code, 0,
        "DescribeTransactions of {transactional_id}"
    );
    (state.producer_id.0, state.producer_epoch)
}

/// The Kafka address of node `id`, as the cluster's metadata lists it.
fn bootstrap_of_node(bootstrap: &str, id: i32) -> String {
    let metadata = crate::replication::metadata(bootstrap, TRANSACTION_STATE_TOPIC_NAME);
    let broker = metadata
        .brokers()
        .iter()
        .find(|b| b.id() == id)
        .expect("the node is listed");
    format!("{}:{}", broker.host(), broker.port())
}

/// A transaction coordinator that was replaced (its node killed, the
/// `__transaction_state` partition led by another in a later epoch) is a
/// zombie: a marker it would still send carries its old coordinator epoch, the
/// partition's leader epoch when it was elected, and a partition the new
/// coordinator has written to refuses it with TRANSACTION_COORDINATOR_FENCED
/// instead of ending the new coordinator's transaction.
#[test]
fn coordinators_markers_of_a_replaced_transaction_coordinator_are_refused() {
    use sluice::log::TxnMarker;
    use sluice::types::{ProducerEpoch, TopicPartition};

    const TRANSACTION_COORDINATOR_FENCED: i16 = 52;
    let root = tempfile::tempdir().expect("tempdir");
    let topic = "coord-zombie-out";
    let (mut nodes, bootstrap) = cluster(root.path(), topic, "coord-zombie-probe");
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let id = "coord-zombie-txn";
    let settings = [
        ("transactional.id", id),
        ("transaction.timeout.ms", "60000"),
    ];
    let first = producer(&bootstrap, &settings);
    first.init_transactions(WAIT).expect("init_transactions");
    assert_eq!(
        one_transaction(&first, &runtime, topic, 0),
        Outcome::Committed
    );
    let partition = txn_partition(id);
    let old_node = leader_of(&bootstrap, TRANSACTION_STATE_TOPIC_NAME, partition);
    let old_epoch = leader_epoch_of(&bootstrap, TRANSACTION_STATE_TOPIC_NAME, partition);
    println!("the transaction coordinator is node {old_node}, elected in leader epoch {old_epoch}");
    drop(first);

    let index = nodes
        .iter()
        .position(|n| n.node_id == old_node)
        .expect("the coordinator is one of the nodes");
    nodes[index].kill9();
    let survivors: Vec<String> = nodes
        .iter()
        .filter(|n| n.node_id != old_node)
        .map(ClusterNode::bootstrap)
        .collect();
    let survivors = survivors.join(",");
    let deadline = Instant::now() + WAIT * 6;
    while leader_of(&survivors, TRANSACTION_STATE_TOPIC_NAME, partition) == old_node {
        assert!(
            Instant::now() < deadline,
            "the transaction state partition never moved off node {old_node}"
        );
        std::thread::sleep(Duration::from_millis(200));
    }

    // The new coordinator commits one transaction (its markers carry its
    // epoch), then leaves another open on every partition.
    let second = producer(&survivors, &settings);
    second
        .init_transactions(WAIT * 2)
        .expect("init_transactions");
    assert_eq!(
        one_transaction(&second, &runtime, topic, 1),
        Outcome::Committed
    );
    second.begin_transaction().expect("begin");
    let record = FutureRecord::<(), str>::to(topic)
        .partition(0)
        .payload("open");
    runtime
        .block_on(second.send(record, WAIT))
        .expect("acknowledged");
    let new_epoch = leader_epoch_of(&survivors, TRANSACTION_STATE_TOPIC_NAME, partition);
    assert!(
        new_epoch > old_epoch,
        "the new coordinator's epoch is later"
    );
    let (producer_id, producer_epoch) = producer_of(&survivors, id);

    let zombie = TxnMarker {
        producer_id,
        producer_epoch: ProducerEpoch::new(producer_epoch),
        coordinator_epoch: old_epoch,
        commit: false,
    };
    let data = TopicPartition::new(topic, 0);
    let leader = bootstrap_of_node(&survivors, leader_of(&survivors, topic, 0));
    let (host, port) = leader.rsplit_once(':').expect("host:port");
    let answer = runtime
        .block_on(sluice::protocol::broker_client::write_txn_marker(
            sluice::protocol::broker_client::PeerTarget {
                connector: &sluice::protocol::peer_client::PeerConnector::plaintext(),
                host,
                port: port.parse().expect("port"),
                client_id: "zombie-coordinator",
            },
            &data,
            &zombie,
        ))
        .expect("an answer");
    assert_eq!(
        answer, TRANSACTION_COORDINATOR_FENCED,
        "the zombie's abort marker is refused"
    );
    second
        .commit_transaction(WAIT * 2)
        .expect("the open transaction commits");
    let reader = consumer(
        &survivors,
        &[
            ("group.id", "coord-zombie-reader"),
            ("isolation.level", "read_committed"),
            ("auto.offset.reset", "earliest"),
        ],
    );
    reader.subscribe(&[topic]).expect("subscribe");
    let got = read(
        &reader,
        PARTITIONS as usize * RECORDS_PER_PARTITION + 2 * PARTITIONS as usize + 1,
    );
    assert!(
        got.values().any(|payload| payload == "open"),
        "the transaction the zombie tried to abort committed"
    );
}
