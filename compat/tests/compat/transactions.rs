//! Transactional producers through librdkafka: commit and abort as each isolation
//! level sees them, consume-transform-produce with `send_offsets_to_transaction`
//! across a crashed worker, zombie fencing, the coordinator's timeout abort, and
//! `kill -9` of the broker while transactions commit.
//!
//! Every read ends at an `END` record written to each partition after the
//! transactions under test are closed, so a test knows it has read everything a
//! consumer at that isolation level will ever see, without waiting on a timer.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::message::Message;
use rdkafka::producer::{FutureProducer, FutureRecord, Producer};
use rdkafka::{Offset, TopicPartitionList};
use sluice_compat::*;

pub(super) const WAIT: Duration = Duration::from_millis(CLIENT_WAIT_MS);
const END: &str = "END";

/// A producer with `transactional.id` = `id`, initialized.
pub(super) fn transactional(bootstrap: &str, id: &str, extra: &[(&str, &str)]) -> FutureProducer {
    let mut settings = vec![("transactional.id", id)];
    settings.extend_from_slice(extra);
    let producer = producer(bootstrap, &settings);
    producer.init_transactions(WAIT).expect("init_transactions");
    producer
}

/// Queues one record; delivery is awaited by `flush` or `commit_transaction`.
pub(super) fn send(producer: &FutureProducer, topic: &str, partition: i32, payload: &str) {
    // The delivery future is not needed: the transaction's commit or abort waits
    // for every queued record.
    drop(
        producer
            .send_result(
                FutureRecord::<(), str>::to(topic)
                    .partition(partition)
                    .payload(payload),
            )
            .map_err(|(error, _)| error)
            .expect("enqueue"),
    );
}

/// One transaction of `count` records spread over `partitions`, committed or aborted.
pub(super) fn transaction(
    producer: &FutureProducer,
    topic: &str,
    partitions: i32,
    tag: &str,
    count: i32,
    commit: bool,
) {
    producer.begin_transaction().expect("begin");
    for i in 0..count {
        send(producer, topic, i % partitions, &format!("{tag}-{i}"));
    }
    if commit {
        producer.commit_transaction(WAIT).expect("commit");
    } else {
        // librdkafka drops records still queued when a transaction aborts; flush
        // first so the aborted records are in the log, as the test wants them.
        producer.flush(WAIT).expect("flush");
        producer.abort_transaction(WAIT).expect("abort");
    }
}

/// Appends `END` to every partition with a plain (non-transactional) producer.
pub(super) fn write_end(bootstrap: &str, topic: &str, partitions: i32) {
    let producer = producer(bootstrap, &[]);
    for partition in 0..partitions {
        send(&producer, topic, partition, END);
    }
    producer.flush(WAIT).expect("flush END");
}

/// Every record before `END` in each partition, read at `isolation`, as
/// (partition, offset) -> payload.
pub(super) fn read_to_end(
    bootstrap: &str,
    topic: &str,
    partitions: i32,
    isolation: &str,
) -> BTreeMap<(i32, i64), String> {
    let consumer = consumer(bootstrap, &[("isolation.level", isolation)]);
    assign_from_start(&consumer, topic, partitions);
    let deadline = Instant::now() + WAIT;
    let mut ended = BTreeSet::new();
    let mut records = BTreeMap::new();
    while ended.len() < partitions as usize {
        assert!(
            Instant::now() < deadline,
            "{isolation}: END seen on {ended:?} only; read {} records",
            records.len()
        );
        match consumer.poll(Duration::from_millis(100)) {
            Some(Ok(message)) => {
                let message = message.detach();
                let payload = payload_text(&message);
                if payload == END {
                    ended.insert(message.partition());
                } else {
                    let previous = records.insert((message.partition(), message.offset()), payload);
                    assert!(previous.is_none(), "offset read twice");
                }
            }
            Some(Err(error)) => panic!("consumer error: {error}"),
            None => {}
        }
    }
    records
}

/// The payloads of `records`, checking that none appears twice.
fn distinct_payloads(records: &BTreeMap<(i32, i64), String>) -> BTreeSet<String> {
    let mut payloads = BTreeSet::new();
    for payload in records.values() {
        assert!(
            payloads.insert(payload.clone()),
            "duplicate record {payload}"
        );
    }
    payloads
}

pub(super) fn tagged(tag: &str, count: i32) -> BTreeSet<String> {
    (0..count).map(|i| format!("{tag}-{i}")).collect()
}

#[test]
fn committed_and_aborted_transactions_as_each_isolation_level_sees_them() {
    let broker = EmbeddedBroker::start();
    let bootstrap = broker.bootstrap();
    create_topic(&bootstrap, "txn-basic", 3, &[]);
    let producer = transactional(&bootstrap, "txn-basic", &[]);
    transaction(&producer, "txn-basic", 3, "first", 10, true);
    transaction(&producer, "txn-basic", 3, "aborted", 10, false);
    transaction(&producer, "txn-basic", 3, "third", 10, true);
    write_end(&bootstrap, "txn-basic", 3);

    let committed = distinct_payloads(&read_to_end(&bootstrap, "txn-basic", 3, "read_committed"));
    let expected: BTreeSet<String> = tagged("first", 10)
        .into_iter()
        .chain(tagged("third", 10))
        .collect();
    assert_eq!(committed, expected);

    let uncommitted =
        distinct_payloads(&read_to_end(&bootstrap, "txn-basic", 3, "read_uncommitted"));
    let everything: BTreeSet<String> = expected.into_iter().chain(tagged("aborted", 10)).collect();
    assert_eq!(uncommitted, everything);
}

#[test]
fn an_open_transaction_holds_read_committed_readers_at_its_first_offset() {
    let broker = EmbeddedBroker::start();
    let bootstrap = broker.bootstrap();
    create_topic(&bootstrap, "txn-lso", 1, &[]);
    let plain = producer(&bootstrap, &[]);
    send(&plain, "txn-lso", 0, "before");
    plain.flush(WAIT).expect("flush");

    let producer = transactional(&bootstrap, "txn-lso", &[]);
    producer.begin_transaction().expect("begin");
    send(&producer, "txn-lso", 0, "inside");
    producer.flush(WAIT).expect("flush");
    send(&plain, "txn-lso", 0, "after");
    plain.flush(WAIT).expect("flush");

    // ListOffsets: the high watermark is 3, the last stable offset 1.
    let committed = consumer(&bootstrap, &[("isolation.level", "read_committed")]);
    let uncommitted = consumer(&bootstrap, &[("isolation.level", "read_uncommitted")]);
    let (_, stable) = committed
        .fetch_watermarks("txn-lso", 0, WAIT)
        .expect("watermarks");
    let (_, high) = uncommitted
        .fetch_watermarks("txn-lso", 0, WAIT)
        .expect("watermarks");
    assert_eq!((stable, high), (1, 3));

    producer.commit_transaction(WAIT).expect("commit");
    // The marker takes offset 3; everything is stable now.
    let (_, stable) = committed
        .fetch_watermarks("txn-lso", 0, WAIT)
        .expect("watermarks");
    assert_eq!(stable, 4);
    write_end(&bootstrap, "txn-lso", 1);
    let records = read_to_end(&bootstrap, "txn-lso", 1, "read_committed");
    let payloads: Vec<&str> = records.values().map(String::as_str).collect();
    assert_eq!(payloads, ["before", "inside", "after"]);
}

#[test]
fn a_new_producer_fences_the_zombie_and_aborts_its_transaction() {
    let broker = EmbeddedBroker::start();
    let bootstrap = broker.bootstrap();
    create_topic(&bootstrap, "txn-zombie", 2, &[]);
    let zombie = transactional(&bootstrap, "zombie", &[]);
    zombie.begin_transaction().expect("begin");
    for i in 0..5 {
        send(&zombie, "txn-zombie", i % 2, &format!("zombie-{i}"));
    }
    zombie.flush(WAIT).expect("zombie's records written");

    let successor = transactional(&bootstrap, "zombie", &[]);
    let error = zombie
        .commit_transaction(WAIT)
        .expect_err("the fenced producer cannot commit");
    assert!(
        error.to_string().to_lowercase().contains("fenced") || error.to_string().contains("epoch"),
        "unexpected error: {error}"
    );
    transaction(&successor, "txn-zombie", 2, "successor", 6, true);
    write_end(&bootstrap, "txn-zombie", 2);

    let committed = distinct_payloads(&read_to_end(&bootstrap, "txn-zombie", 2, "read_committed"));
    assert_eq!(committed, tagged("successor", 6));
    let uncommitted = distinct_payloads(&read_to_end(
        &bootstrap,
        "txn-zombie",
        2,
        "read_uncommitted",
    ));
    assert_eq!(
        uncommitted.len(),
        11,
        "the zombie's records are in the log, aborted"
    );
}

#[test]
fn the_coordinator_aborts_a_transaction_left_open_past_its_timeout() {
    let broker = EmbeddedBroker::start_with(|config| {
        config.transactions.abort_check_interval_ms = TIMEOUT_CHECK_INTERVAL_MS;
    });
    let bootstrap = broker.bootstrap();
    create_topic(&bootstrap, "txn-timeout", 1, &[]);
    let producer = transactional(&bootstrap, "slow", &[("transaction.timeout.ms", "2000")]);
    producer.begin_transaction().expect("begin");
    for i in 0..5 {
        send(&producer, "txn-timeout", 0, &format!("slow-{i}"));
    }
    producer.flush(WAIT).expect("records written");

    // The abort marker makes the partition stable again: offsets 0-4 plus the marker.
    let committed = consumer(&bootstrap, &[("isolation.level", "read_committed")]);
    let deadline = Instant::now() + WAIT;
    loop {
        let (_, stable) = committed
            .fetch_watermarks("txn-timeout", 0, WAIT)
            .expect("watermarks");
        if stable == 6 {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "transaction never aborted (LSO {stable})"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(
        producer.commit_transaction(WAIT).is_err(),
        "a transaction the coordinator aborted cannot commit"
    );
    write_end(&bootstrap, "txn-timeout", 1);
    assert!(read_to_end(&bootstrap, "txn-timeout", 1, "read_committed").is_empty());
    assert_eq!(
        read_to_end(&bootstrap, "txn-timeout", 1, "read_uncommitted").len(),
        5
    );
}

/// How often the broker of the timeout test looks for expired transactions, in ms.
const TIMEOUT_CHECK_INTERVAL_MS: u64 = 100;

/// Reads up to `max` records from the subscribed topic, waiting at most `idle` for the next.
fn poll_batch(consumer: &BaseConsumer, max: usize) -> Vec<rdkafka::message::OwnedMessage> {
    let deadline = Instant::now() + WAIT;
    let mut batch = Vec::new();
    while batch.len() < max && Instant::now() < deadline {
        match consumer.poll(Duration::from_millis(100)) {
            Some(Ok(message)) => batch.push(message.detach()),
            Some(Err(error)) => panic!("consumer error: {error}"),
            None => {}
        }
    }
    batch
}

/// Next offsets to commit after `batch`: per partition, the last offset + 1.
fn next_offsets(topic: &str, batch: &[rdkafka::message::OwnedMessage]) -> TopicPartitionList {
    let mut next: BTreeMap<i32, i64> = BTreeMap::new();
    for message in batch {
        let entry = next.entry(message.partition()).or_insert(0);
        *entry = (*entry).max(message.offset() + 1);
    }
    let mut list = TopicPartitionList::new();
    for (partition, offset) in next {
        list.add_partition_offset(topic, partition, Offset::Offset(offset))
            .expect("offset");
    }
    list
}

/// One consume-transform-produce worker of group `ctp`: reads `batch_size` records,
/// writes each transformed into `ctp-out`, and sends its offsets into the
/// transaction. Commits `commits` batches, then (when `crash` is set) processes one
/// more batch and disappears without committing it.
fn transform(bootstrap: &str, batch_size: usize, commits: usize, crash: bool) {
    let consumer = consumer(
        bootstrap,
        &[
            ("group.id", "ctp"),
            ("isolation.level", "read_committed"),
            ("enable.auto.commit", "false"),
        ],
    );
    consumer.subscribe(&["ctp-in"]).expect("subscribe");
    let producer = transactional(bootstrap, "ctp-worker", &[]);
    let rounds = commits + usize::from(crash);
    for round in 0..rounds {
        let batch = poll_batch(&consumer, batch_size);
        assert_eq!(batch.len(), batch_size, "round {round}: input ran dry");
        producer.begin_transaction().expect("begin");
        for message in &batch {
            let output = format!("out-{}", payload_text(message));
            send(&producer, "ctp-out", message.partition(), &output);
        }
        let group = consumer.group_metadata().expect("group metadata");
        producer
            .send_offsets_to_transaction(&next_offsets("ctp-in", &batch), &group, WAIT)
            .expect("send offsets");
        if round < commits {
            producer.commit_transaction(WAIT).expect("commit");
        } else {
            // The crash: everything is written and the offsets are in the
            // transaction, but the commit never comes.
            producer.flush(WAIT).expect("flush");
        }
    }
}

#[test]
fn consume_transform_produce_replays_after_a_crash_and_never_duplicates() {
    let broker = EmbeddedBroker::start();
    let bootstrap = broker.bootstrap();
    create_topic(&bootstrap, "ctp-in", 3, &[]);
    create_topic(&bootstrap, "ctp-out", 3, &[]);
    let input = producer(&bootstrap, &[]);
    for i in 0..60 {
        send(&input, "ctp-in", i % 3, &format!("m{i}"));
    }
    input.flush(WAIT).expect("input written");

    // The first worker commits one batch of 20, writes a second and crashes.
    transform(&bootstrap, 20, 1, true);
    // Its successor (same transactional.id) fences it, which aborts the open
    // transaction, resumes from the committed offsets and finishes the input.
    transform(&bootstrap, 20, 2, false);
    write_end(&bootstrap, "ctp-out", 3);

    let expected: BTreeSet<String> = (0..60).map(|i| format!("out-m{i}")).collect();
    let committed = distinct_payloads(&read_to_end(&bootstrap, "ctp-out", 3, "read_committed"));
    assert_eq!(committed, expected);
    // The crashed batch is in the log, aborted: 20 records seen twice uncommitted.
    assert_eq!(
        read_to_end(&bootstrap, "ctp-out", 3, "read_uncommitted").len(),
        80
    );

    // The group's committed offsets cover the whole input.
    let consumer = consumer(&bootstrap, &[("group.id", "ctp")]);
    let mut partitions = TopicPartitionList::new();
    for partition in 0..3 {
        partitions.add_partition("ctp-in", partition);
    }
    let committed_offsets = consumer
        .committed_offsets(partitions, WAIT)
        .expect("committed offsets");
    for element in committed_offsets.elements() {
        assert_eq!(
            element.offset(),
            Offset::Offset(20),
            "{}",
            element.partition()
        );
    }
}

/// Transactions of 10 records over 3 partitions, committed one after another until
/// one fails or `stop` is set; the tags whose commit was acknowledged go to
/// `acknowledged`.
fn commit_until_failure(
    bootstrap: &str,
    id: &str,
    round: usize,
    acknowledged: &Mutex<Vec<String>>,
    stop: &AtomicBool,
) {
    let producer = transactional(bootstrap, id, &[("transaction.timeout.ms", "5000")]);
    let quick = Duration::from_secs(5);
    for t in 0.. {
        if stop.load(Ordering::Acquire) {
            return;
        }
        let tag = format!("r{round}t{t}");
        if producer.begin_transaction().is_err() {
            return;
        }
        for i in 0..10 {
            send(&producer, "txn-kill", i % 3, &format!("{tag}-{i}"));
        }
        if producer.commit_transaction(quick).is_err() {
            return;
        }
        acknowledged.lock().expect("acknowledged").push(tag);
    }
}

#[test]
fn kill_9_while_transactions_commit_loses_nothing_acknowledged_and_splits_nothing() {
    let dir = tempfile::tempdir().expect("temp dir");
    let mut broker = BrokerProcess::start(dir.path(), &[]);
    let bootstrap = broker.bootstrap();
    create_topic(&bootstrap, "txn-kill", 3, &[]);
    let acknowledged = Arc::new(Mutex::new(Vec::new()));

    for round in 0..3 {
        let stop = Arc::new(AtomicBool::new(false));
        let worker = {
            let bootstrap = bootstrap.clone();
            let acknowledged = Arc::clone(&acknowledged);
            let stop = Arc::clone(&stop);
            std::thread::spawn(move || {
                commit_until_failure(&bootstrap, "killed", round, &acknowledged, &stop)
            })
        };
        // Kill after a few more transactions were acknowledged, mid-stream.
        let target = acknowledged.lock().expect("acknowledged").len() + 5 + round * 3;
        let deadline = Instant::now() + WAIT;
        while acknowledged.lock().expect("acknowledged").len() < target {
            assert!(Instant::now() < deadline, "transactions stalled");
            std::thread::sleep(Duration::from_millis(1));
        }
        broker.kill9();
        broker.restart();
        // The worker may get its last commit through to the restarted broker; it
        // stops at its next transaction either way.
        stop.store(true, Ordering::Release);
        worker.join().expect("worker");
    }
    // A last producer with the same id resolves whatever the last kill left open.
    let last = transactional(&bootstrap, "killed", &[]);
    transaction(&last, "txn-kill", 3, "last", 3, true);
    write_end(&bootstrap, "txn-kill", 3);

    let records = read_to_end(&bootstrap, "txn-kill", 3, "read_committed");
    let payloads = distinct_payloads(&records);
    let mut per_transaction: HashMap<String, usize> = HashMap::new();
    for payload in &payloads {
        let tag = payload.rsplit_once('-').expect("tag-i").0;
        *per_transaction.entry(tag.to_string()).or_default() += 1;
    }
    for tag in acknowledged.lock().expect("acknowledged").iter() {
        assert_eq!(
            per_transaction.get(tag),
            Some(&10),
            "acknowledged transaction {tag} incomplete"
        );
    }
    for (tag, count) in &per_transaction {
        let whole = if tag == "last" { 3 } else { 10 };
        assert_eq!(*count, whole, "transaction {tag} is split");
    }
}
