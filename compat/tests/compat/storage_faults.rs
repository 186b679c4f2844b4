//! Storage faults in the real binary: a shim loaded with `LD_PRELOAD` makes fsync
//! (or writes) under one part of the data dir fail with EIO, as a failing disk
//! does, at a moment the test picks. Whatever failed must not be acknowledged,
//! nothing on that storage may be acknowledged after it, and the broker must stop
//! by itself with a failure status and without the clean-shutdown marker, since a
//! failed fsync may have lost data that a later fsync would not report. After a
//! restart on the same data without the fault, everything acknowledged before is
//! there and the broker works again.
//!
//! The fault phase's expectations are collected rather than asserted one by one,
//! so that a run shows every one of them that the broker misses; the test fails at
//! its end if any was missed.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::time::Duration;

use rdkafka::consumer::{BaseConsumer, CommitMode, Consumer};
use rdkafka::message::Message;
use rdkafka::producer::{FutureProducer, FutureRecord, Producer};
use rdkafka::{Offset, TopicPartitionList};
use sluice_compat::faults::nemesis::shim::{FaultCount, FaultOps, FaultShim};
use sluice_compat::*;

use super::transactions::{read_to_end, send, tagged, transaction, transactional, write_end, WAIT};

/// How long the broker has to stop by itself after the fault. Generous, only so a
/// broker that never stops does not hang the test.
const EXIT_DEADLINE: Duration = Duration::from_secs(30);

/// How long a client keeps retrying a record, waits for a coordinator or for a
/// transaction's commit while the broker is failing or gone. It bounds the fault
/// phase; an answer that takes longer counts as no acknowledgement.
const FAULT_CLIENT_TIMEOUT_MS: u64 = 10_000;

/// Expectations of the fault phase that the broker missed. Each is printed as it
/// is found, so that a later panic does not hide it.
struct Findings {
    test: String,
    missed: Vec<String>,
}

impl Findings {
    /// Named after the running test, which is its thread's name.
    fn new() -> Findings {
        let test = std::thread::current()
            .name()
            .unwrap_or("storage fault test")
            .to_string();
        Findings {
            test,
            missed: Vec::new(),
        }
    }

    fn check(&mut self, held: bool, expectation: impl Into<String>) {
        if !held {
            let expectation = expectation.into();
            eprintln!("{}: missed: {expectation}", self.test);
            self.missed.push(expectation);
        }
    }

    fn finish(self) {
        assert!(
            self.missed.is_empty(),
            "{}: the broker missed {} expectation(s):\n- {}",
            self.test,
            self.missed.len(),
            self.missed.join("\n- ")
        );
    }
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime")
}

/// The temporary data dir as the kernel names it (no symlinks), which is how the
/// shim sees the paths of the files it fails.
fn data_dir(dir: &tempfile::TempDir) -> std::path::PathBuf {
    std::fs::canonicalize(dir.path()).expect("canonical data dir")
}

/// A producer whose records give up after FAULT_CLIENT_TIMEOUT_MS.
fn fault_producer(bootstrap: &str) -> FutureProducer {
    let timeout = FAULT_CLIENT_TIMEOUT_MS.to_string();
    producer(
        bootstrap,
        &[("linger.ms", "0"), ("message.timeout.ms", timeout.as_str())],
    )
}

/// Sends every (partition, payload) to `topic` and waits for each delivery
/// report: the offset it was acknowledged at, or the error.
fn deliver_all(
    producer: &FutureProducer,
    topic: &str,
    records: Vec<(i32, String)>,
) -> Vec<((i32, String), Result<i64, String>)> {
    let runtime = runtime();
    let futures: Vec<_> = records
        .into_iter()
        .map(|(partition, payload)| {
            let future = producer
                .send_result(
                    FutureRecord::<(), str>::to(topic)
                        .partition(partition)
                        .payload(&payload),
                )
                .map_err(|(error, _)| error)
                .expect("enqueue");
            ((partition, payload), future)
        })
        .collect();
    futures
        .into_iter()
        .map(|(record, future)| {
            let outcome = match runtime.block_on(future) {
                Ok(Ok(delivery)) => Ok(delivery.offset),
                Ok(Err((error, _))) => Err(error.to_string()),
                Err(canceled) => Err(canceled.to_string()),
            };
            (record, outcome)
        })
        .collect()
}

/// After the fault: the broker stops by itself, with a failure status, and does
/// not claim a clean shutdown (the next start must recover the logs). A broker
/// still running at the deadline is killed so the test can go on.
fn expect_fault_exit(broker: &mut BrokerProcess, data: &Path, findings: &mut Findings) {
    match broker.wait_for_exit(EXIT_DEADLINE) {
        Some(status) => findings.check(
            !status.success(),
            format!(
                "the broker exits with a failure status after the fault (it exited with {status})"
            ),
        ),
        None => {
            findings.check(
                false,
                format!(
                    "the broker exits by itself after the fault (still running {} s later)",
                    EXIT_DEADLINE.as_secs()
                ),
            );
            broker.kill9();
        }
    }
    findings.check(
        !data.join("logs").join(".kafka_cleanshutdown").exists(),
        "the broker leaves no clean-shutdown marker after the fault",
    );
}

/// The fault must have happened: otherwise the test would prove nothing.
fn assert_injected(shim: &FaultShim, what: &str) {
    let injected = shim.injected();
    assert!(
        !injected.is_empty(),
        "the shim injected no fault: the broker did no {what} on the faulted path after the trigger"
    );
    let distinct: BTreeSet<&String> = injected.iter().collect();
    eprintln!("{} failures injected, on: {distinct:?}", injected.len());
}

/// Produce with `--fsync-before-ack` while `ops` fail once under `logs/`, the way
/// Linux reports a writeback error once: the produce that hit the failure, and
/// every produce after it to any partition of that log dir, must go
/// unacknowledged, even though the next fsync would succeed.
fn produce_after_a_failure(topic: &str, ops: FaultOps, what: &str) {
    let shim = FaultShim::build();
    let dir = tempfile::tempdir().expect("temp dir");
    let data = data_dir(&dir);
    let env = shim.env(&data.join("logs"), ops, FaultCount::First(1));
    let mut broker = BrokerProcess::start_with_env(&data, &["--fsync-before-ack", "true"], env);
    let bootstrap = broker.bootstrap();
    create_topic(&bootstrap, topic, 2, &[]);
    let producer = fault_producer(&bootstrap);
    // (partition, offset) -> payload of every record acknowledged at any time.
    let mut acknowledged = BTreeMap::new();
    let before = (0..100).map(|i| (i % 2, format!("before-{i}"))).collect();
    for ((partition, payload), outcome) in deliver_all(&producer, topic, before) {
        let offset = outcome.expect("produce acknowledged before the fault");
        acknowledged.insert((partition, offset), payload);
    }

    let mut findings = Findings::new();
    shim.arm();
    let faulted = deliver_all(&producer, topic, vec![(0, "faulted".to_string())]);
    assert_injected(&shim, what);
    for ((partition, payload), outcome) in faulted {
        if let Ok(offset) = outcome {
            acknowledged.insert((partition, offset), payload);
        }
        findings.check(
            outcome.is_err(),
            format!("the produce whose {what} failed is not acknowledged (it was: {outcome:?})"),
        );
    }
    // Both partitions: the other one's files never failed, but they are on the
    // same storage.
    let later = (0..20).map(|i| (i % 2, format!("later-{i}"))).collect();
    let mut acknowledged_later = Vec::new();
    for ((partition, payload), outcome) in deliver_all(&producer, topic, later) {
        if let Ok(offset) = outcome {
            acknowledged_later.push((partition, offset));
            acknowledged.insert((partition, offset), payload);
        }
    }
    findings.check(
        acknowledged_later.is_empty(),
        format!(
            "no produce after the failed {what} is acknowledged (acknowledged at (partition, offset) {acknowledged_later:?})"
        ),
    );
    expect_fault_exit(&mut broker, &data, &mut findings);
    drop(producer);

    shim.disarm();
    broker.set_env(Vec::new());
    broker.restart_on_new_port();
    let bootstrap = broker.bootstrap();
    let ends = [
        watermarks(&bootstrap, topic, 0).1,
        watermarks(&bootstrap, topic, 1).1,
    ];
    let stored: BTreeMap<(i32, i64), String> =
        read_back(&bootstrap, topic, 2, (ends[0] + ends[1]) as usize)
            .iter()
            .map(|m| ((m.partition(), m.offset()), payload_text(m)))
            .collect();
    for (at, payload) in &acknowledged {
        assert_eq!(
            stored.get(at),
            Some(payload),
            "acknowledged (partition, offset) {at:?} lost after the restart"
        );
    }
    let again = vec![(0, "again".to_string()), (1, "again".to_string())];
    for ((partition, _), outcome) in deliver_all(&fault_producer(&bootstrap), topic, again) {
        let offset = outcome.expect("a produce after the restart is acknowledged");
        assert_eq!(
            offset, ends[partition as usize],
            "partition {partition} goes on where it ended"
        );
    }
    findings.finish();
}

#[test]
fn a_produce_whose_fsync_failed_is_never_acknowledged() {
    produce_after_a_failure("fsync-fault", FaultOps::Sync, "fsync");
}

#[test]
fn a_produce_whose_write_failed_is_never_acknowledged() {
    produce_after_a_failure("write-fault", FaultOps::Write, "write");
}

/// A consumer of group `group` that only commits and reads committed offsets
/// (it never joins), and gives up on a missing coordinator after
/// FAULT_CLIENT_TIMEOUT_MS.
fn committer(bootstrap: &str, group: &str) -> BaseConsumer {
    let timeout = FAULT_CLIENT_TIMEOUT_MS.to_string();
    consumer(
        bootstrap,
        &[
            ("group.id", group),
            ("session.timeout.ms", timeout.as_str()),
            ("socket.timeout.ms", timeout.as_str()),
        ],
    )
}

fn offsets(topic: &str, offsets: &[(i32, i64)]) -> TopicPartitionList {
    let mut list = TopicPartitionList::new();
    for (partition, offset) in offsets {
        list.add_partition_offset(topic, *partition, Offset::Offset(*offset))
            .expect("partition offset");
    }
    list
}

fn commit(consumer: &BaseConsumer, topic: &str, committed: &[(i32, i64)]) -> Result<(), String> {
    consumer
        .commit(&offsets(topic, committed), CommitMode::Sync)
        .map_err(|error| error.to_string())
}

/// A commit by a new consumer of `group` on a thread of its own: its answer, or
/// None if none came within FAULT_CLIENT_TIMEOUT_MS. librdkafka retries a commit
/// whose connection broke for as long as the coordinator cannot be reached, and
/// its consumer cannot be dropped meanwhile; such a commit is left behind on its
/// thread, which ends with the test process. The broker then restarts on a new
/// port, so the commit can never reach it.
fn commit_or_nothing(
    bootstrap: &str,
    group: &str,
    topic: &str,
    committed: &[(i32, i64)],
) -> Option<Result<(), String>> {
    let (answer, answered) = std::sync::mpsc::channel();
    let (bootstrap, group, topic) = (bootstrap.to_string(), group.to_string(), topic.to_string());
    let committed = committed.to_vec();
    std::thread::spawn(move || {
        let consumer = committer(&bootstrap, &group);
        // The receiver is gone only if the test stopped waiting: nobody needs it.
        let _ = answer.send(commit(&consumer, &topic, &committed));
    });
    answered
        .recv_timeout(Duration::from_millis(FAULT_CLIENT_TIMEOUT_MS))
        .ok()
}

/// The committed offset of each of `partitions` for `group`, None where there is none.
fn committed(bootstrap: &str, group: &str, topic: &str, partitions: i32) -> Vec<Option<i64>> {
    let query = offsets(topic, &(0..partitions).map(|p| (p, 0)).collect::<Vec<_>>());
    let answer = committer(bootstrap, group)
        .committed_offsets(query, WAIT)
        .expect("committed offsets");
    (0..partitions)
        .map(|p| {
            match answer
                .find_partition(topic, p)
                .expect("partition in the answer")
                .offset()
            {
                Offset::Offset(offset) => Some(offset),
                _ => None,
            }
        })
        .collect()
}

#[test]
fn an_offset_commit_whose_fsync_failed_is_not_acknowledged() {
    let topic = "offsets-fault";
    let shim = FaultShim::build();
    let dir = tempfile::tempdir().expect("temp dir");
    let data = data_dir(&dir);
    // A disk that stays broken: sled's own flusher thread fsyncs the same files
    // and ignores a failure, so a single injected failure might never reach the
    // broker.
    let env = shim.env(&data.join("offsets"), FaultOps::Sync, FaultCount::Every);
    let mut broker = BrokerProcess::start_with_env(&data, &[], env);
    let bootstrap = broker.bootstrap();
    create_topic(&bootstrap, topic, 2, &[]);
    let first = committer(&bootstrap, "fault-group-a");
    let second = committer(&bootstrap, "fault-group-b");
    commit(&first, topic, &[(0, 5), (1, 6)]).expect("commit before the fault");
    commit(&second, topic, &[(0, 3)]).expect("commit before the fault");
    drop((first, second));

    let mut findings = Findings::new();
    shim.arm();
    let faulted = commit_or_nothing(&bootstrap, "fault-group-a", topic, &[(0, 9)]);
    assert_injected(&shim, "fsync");
    let acknowledged = |answer: &Option<Result<(), String>>| matches!(answer, Some(Ok(())));
    findings.check(
        !acknowledged(&faulted),
        format!(
            "the offset commit whose fsync failed is not acknowledged (it answered {faulted:?})"
        ),
    );
    let later = commit_or_nothing(&bootstrap, "fault-group-b", topic, &[(0, 4)]);
    findings.check(
        !acknowledged(&later),
        format!("no offset commit after the failed fsync is acknowledged (one answered {later:?})"),
    );
    expect_fault_exit(&mut broker, &data, &mut findings);

    shim.disarm();
    broker.set_env(Vec::new());
    broker.restart_on_new_port();
    let bootstrap = broker.bootstrap();
    // A commit that was not acknowledged may or may not have been stored; one
    // that was acknowledged must be there.
    let allowed = |answer: &Option<Result<(), String>>, before: i64, tried: i64| {
        let allowed: BTreeSet<Option<i64>> = if acknowledged(answer) {
            [Some(tried)].into()
        } else {
            [Some(before), Some(tried)].into()
        };
        allowed
    };
    let group_a = committed(&bootstrap, "fault-group-a", topic, 2);
    let allowed_a0 = allowed(&faulted, 5, 9);
    assert!(
        allowed_a0.contains(&group_a[0]),
        "group a partition 0: {:?} committed, expected one of {allowed_a0:?}",
        group_a[0]
    );
    assert_eq!(group_a[1], Some(6), "group a partition 1 after the restart");
    let group_b = committed(&bootstrap, "fault-group-b", topic, 1);
    let allowed_b = allowed(&later, 3, 4);
    assert!(
        allowed_b.contains(&group_b[0]),
        "group b: {:?} committed, expected one of {allowed_b:?}",
        group_b[0]
    );

    let again = committer(&bootstrap, "fault-group-a");
    commit(&again, topic, &[(0, 11)]).expect("a commit after the restart is acknowledged");
    assert_eq!(
        committed(&bootstrap, "fault-group-a", topic, 2),
        vec![Some(11), Some(6)],
        "the commit after the restart is stored"
    );
    findings.finish();
}

/// A transactional producer commits while `ops` fail under `logs/`. The commit
/// may be refused, but if it was reported successful its records must be
/// committed after the restart; either way no transaction is split, and a
/// read_committed consumer is never stuck behind the faulted one.
fn transaction_under_a_fault(topic: &str, ops: FaultOps, what: &str) {
    let shim = FaultShim::build();
    let dir = tempfile::tempdir().expect("temp dir");
    let data = data_dir(&dir);
    let env = shim.env(&data.join("logs"), ops, FaultCount::Every);
    // A short abort check lets the coordinator time the faulted transaction out
    // soon after the restart, if it was left open.
    let mut broker = BrokerProcess::start_with_env(
        &data,
        &[
            "--fsync-before-ack",
            "true",
            "--transaction-abort-check-interval-ms",
            "500",
        ],
        env,
    );
    let bootstrap = broker.bootstrap();
    create_topic(&bootstrap, topic, 2, &[]);
    let timeout = FAULT_CLIENT_TIMEOUT_MS.to_string();
    let faulted_producer = transactional(
        &bootstrap,
        "faulted-txn",
        &[
            ("transaction.timeout.ms", timeout.as_str()),
            ("message.timeout.ms", timeout.as_str()),
        ],
    );
    transaction(&faulted_producer, topic, 2, "before", 6, true);
    faulted_producer.begin_transaction().expect("begin");
    for i in 0..6 {
        send(&faulted_producer, topic, i % 2, &format!("faulted-{i}"));
    }
    faulted_producer
        .flush(WAIT)
        .expect("the transaction's records are acknowledged before the fault");

    let mut findings = Findings::new();
    shim.arm();
    let commit = faulted_producer
        .commit_transaction(Duration::from_millis(FAULT_CLIENT_TIMEOUT_MS))
        .map_err(|error| error.to_string());
    eprintln!("the commit under the fault answered {commit:?}");
    // A produce to the same log dir fsyncs before its acknowledgement, so the
    // fault is reached even if writing the markers did no fsync.
    let plain = deliver_all(
        &fault_producer(&bootstrap),
        topic,
        vec![(0, "plain".to_string())],
    );
    assert_injected(&shim, what);
    findings.check(
        plain[0].1.is_err(),
        format!(
            "no produce after the failed {what} is acknowledged (it was: {:?})",
            plain[0].1
        ),
    );
    expect_fault_exit(&mut broker, &data, &mut findings);
    drop(faulted_producer);

    shim.disarm();
    broker.set_env(Vec::new());
    broker.restart_on_new_port();
    let bootstrap = broker.bootstrap();
    // Another transactional id: the broker itself must end the faulted
    // transaction, as the application that began it may never come back.
    let after_producer = transactional(&bootstrap, "after-txn", &[]);
    transaction(&after_producer, topic, 2, "after", 6, true);
    write_end(&bootstrap, topic, 2);
    let records = read_to_end(&bootstrap, topic, 2, "read_committed");
    let mut copies: BTreeMap<&str, usize> = BTreeMap::new();
    for payload in records.values() {
        *copies.entry(payload.as_str()).or_default() += 1;
    }
    // The plain producer is not idempotent, so each of its retries may have
    // appended the record again; every other record was written once.
    for (payload, count) in &copies {
        assert!(
            *count == 1 || *payload == "plain",
            "{payload} is there {count} times"
        );
    }
    let payloads: BTreeSet<String> = copies.keys().map(|p| p.to_string()).collect();
    assert!(
        payloads.is_superset(&tagged("before", 6)),
        "the transaction committed before the fault is whole: {payloads:?}"
    );
    assert!(
        payloads.is_superset(&tagged("after", 6)),
        "the transaction committed after the restart is whole: {payloads:?}"
    );
    let faulted: BTreeSet<String> = payloads
        .iter()
        .filter(|p| p.starts_with("faulted-"))
        .cloned()
        .collect();
    if commit.is_ok() {
        assert_eq!(
            faulted,
            tagged("faulted", 6),
            "the transaction reported committed is whole after the restart"
        );
    } else {
        assert!(
            faulted.is_empty() || faulted == tagged("faulted", 6),
            "the faulted transaction is split after the restart: {faulted:?}"
        );
    }
    if plain[0].1.is_ok() {
        assert!(
            payloads.contains("plain"),
            "the acknowledged plain record is kept"
        );
    }
    findings.finish();
}

#[test]
fn a_transaction_committing_while_the_log_fsync_fails_stays_whole() {
    transaction_under_a_fault("txn-fsync-fault", FaultOps::Sync, "fsync");
}

#[test]
fn a_transaction_whose_markers_cannot_be_written_stays_whole() {
    transaction_under_a_fault("txn-write-fault", FaultOps::SyncAndWrite, "write or fsync");
}

/// The exit status of a broker stopped by a storage failure (the broker's
/// `STORAGE_FAILURE_EXIT_CODE`, Kafka's halt status).
const STORAGE_FAILURE_EXIT_CODE: i32 = 1;

/// A broker asked to stop (SIGTERM) while its fsyncs fail exits with the
/// storage failure status: its last flush fails, and it must not abort while
/// it gives up (a store dropped on the way out flushes again, and that flush
/// fails too), which a supervisor would report as a crash.
#[test]
fn a_stop_whose_fsyncs_fail_exits_with_the_storage_failure_status() {
    let shim = FaultShim::build();
    let dir = tempfile::tempdir().expect("temp dir");
    let data = data_dir(&dir);
    let env = shim.env(&data, FaultOps::Sync, FaultCount::Every);
    let mut broker = BrokerProcess::start_with_env(&data, &[], env);
    create_topic(&broker.bootstrap(), "stop-fault", 1, &[]);
    shim.arm();
    broker.ask_to_stop();
    let Some(status) = broker.wait_for_exit(EXIT_DEADLINE) else {
        panic!(
            "the broker, its fsyncs failing, still runs {} s after SIGTERM",
            EXIT_DEADLINE.as_secs()
        );
    };
    assert_injected(&shim, "fsync");
    assert_eq!(
        status.code(),
        Some(STORAGE_FAILURE_EXIT_CODE),
        "the broker exits with the storage failure status (it exited with {status})"
    );
}
