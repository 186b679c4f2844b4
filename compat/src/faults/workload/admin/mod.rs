//! The admin churn: while the faults run, one librdkafka admin client creates
//! topics (`churn-<n>`, one or two partitions, replicated on up to three
//! nodes) and adds a partition to one of them (CreatePartitions), an
//! operation every second or two, each recorded with what the client was
//! told: acknowledged, failed (with the error code's name), or timed out.
//! The admin calls have short timeouts, so that a fault does not wedge the
//! churn; a failed or timed-out operation may or may not have taken effect.
//!
//! After the heal the churn stops, the healed cluster's churn topics are read
//! (waiting, bounded, until they agree with what was acknowledged and every
//! partition has a leader), and one record is written (acks=all) to every
//! partition of every churn topic and read back. `check::check`
//! reads the history.

pub mod check;

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::{consumer, producer};
use check::{
    state_anomalies, AdminHistory, AdminOp, AdminOpKind, AdminOutcome, AdminStats, Probe,
    TopicPartitions, CHURN_PREFIX,
};
use rdkafka::admin::{
    AdminClient, AdminOptions, NewPartitions, NewTopic, TopicReplication, TopicResult,
};
use rdkafka::client::DefaultClientContext;
use rdkafka::config::ClientConfig;
use rdkafka::consumer::Consumer;
use rdkafka::error::{KafkaError, KafkaResult, RDKafkaErrorCode};
use rdkafka::message::Message;
use rdkafka::metadata::Metadata;
use rdkafka::producer::FutureRecord;
use rdkafka::{Offset, TopicPartitionList};

use super::{join_within, REQUEST_TIMEOUT_MS};
use crate::faults::schedule::{Rng, RunClock};

/// The pause before each operation, in ms.
const OP_INTERVAL_MIN_MS: u64 = 1_000;
const OP_INTERVAL_MAX_MS: u64 = 2_000;
/// Mixed into the run's seed, so that the churn draws a sequence of its own
/// rather than the nemesis's.
const SEED_SALT: u64 = 0xad31_0c4e_2b5d_9f17;
/// One operation in this many grows a topic (when there is one to grow); the
/// others create one.
const GROW_ONE_IN: u64 = 3;
/// Topics the churn creates at most; past them it only grows them, so that a
/// long run does not pile up replicas on a small machine.
const TOPICS_MAX: u32 = 40;
/// A new topic has 1 to this many partitions.
const NEW_TOPIC_PARTITIONS_MAX: u64 = 2;
/// A topic is grown to this many partitions at most.
const TOPIC_PARTITIONS_MAX: i32 = 6;
/// The broker's bound on an operation (CreateTopics' and CreatePartitions'
/// `timeout_ms`), and librdkafka's on the whole request (finding the
/// controller, sending, the answer), in ms.
const ADMIN_OPERATION_TIMEOUT_MS: u64 = 5_000;
const ADMIN_REQUEST_TIMEOUT_MS: u64 = 10_000;
/// How long the churn waits for an admin call's answer at most, in ms, should
/// librdkafka overrun its own bound: past it the operation is recorded as
/// timed out and left behind.
const ADMIN_CALL_WAIT_MS: u64 = ADMIN_REQUEST_TIMEOUT_MS + 5_000;
/// How long a metadata request of the churn may take, in ms.
const METADATA_TIMEOUT_MS: u64 = 5_000;
/// How long the churn has to stop once told, in ms: the metadata request and
/// the admin call under way.
const STOP_WAIT_MS: u64 = METADATA_TIMEOUT_MS + ADMIN_CALL_WAIT_MS + 5_000;
/// How often a pause checks whether the churn is to stop, in ms.
const STOP_CHECK_MS: u64 = 50;
/// After the heal: how long the cluster has to show every churn topic as the
/// operations allow, each partition with a leader, in ms.
const FINAL_STATE_WAIT_MS: u64 = 60_000;
/// The pause between two reads of the final state, in ms.
const CHECK_INTERVAL_MS: u64 = 500;
/// How long a probe record may take to be acknowledged, and all of them to
/// be read back, in ms.
const PROBE_DELIVERY_TIMEOUT_MS: &str = "30000";
const PROBE_READ_WAIT_MS: u64 = 30_000;
/// How long one poll of the probe's reader waits, in ms.
const POLL_MS: u64 = 100;

/// The running churn.
pub struct AdminWorkload {
    ops: Arc<Mutex<Vec<AdminOp>>>,
    stop: Arc<AtomicBool>,
    thread: JoinHandle<()>,
}

impl AdminWorkload {
    /// Starts the churn: topics of `replicas` replicas, the operations drawn
    /// from `seed`.
    pub fn start(bootstrap: &str, replicas: i32, seed: u64, clock: RunClock) -> AdminWorkload {
        let ops = Arc::new(Mutex::new(Vec::new()));
        let stop = Arc::new(AtomicBool::new(false));
        let admin: AdminClient<DefaultClientContext> = ClientConfig::new()
            .set("bootstrap.servers", bootstrap)
            .set("request.timeout.ms", REQUEST_TIMEOUT_MS)
            .set("socket.timeout.ms", REQUEST_TIMEOUT_MS)
            .set("allow.auto.create.topics", "false")
            .create()
            .expect("admin client");
        let mut churn = Churn {
            admin,
            replicas,
            rng: Rng(seed ^ SEED_SALT),
            created: 0,
            ops: Arc::clone(&ops),
            clock,
        };
        let thread_stop = Arc::clone(&stop);
        let thread = std::thread::spawn(move || churn.run(&thread_stop));
        AdminWorkload { ops, stop, thread }
    }

    /// Stops the churn, reads the healed cluster's churn topics and probes
    /// every partition of them.
    pub fn finish(self, bootstrap: &str, clock: RunClock) -> AdminHistory {
        self.stop.store(true, Ordering::Release);
        let mut incomplete = Vec::new();
        match join_within(vec![self.thread], STOP_WAIT_MS) {
            Ok(0) => {}
            // Its operation under way stays recorded as timed out.
            Ok(_) => clock.log(&format!(
                "the admin churn did not stop within {STOP_WAIT_MS} ms; left behind"
            )),
            Err(()) => incomplete.push("the admin churn thread panicked".to_string()),
        }
        let ops = self.ops.lock().expect("admin history").clone();
        let final_topics = final_state(bootstrap, &ops, clock);
        let probes = match &final_topics {
            Some(topics) => probe(bootstrap, topics, clock),
            None => Vec::new(),
        };
        AdminHistory {
            ops,
            final_topics,
            probes,
            incomplete,
        }
    }
}

struct Churn {
    admin: AdminClient<DefaultClientContext>,
    replicas: i32,
    rng: Rng,
    /// Topics created so far (attempted, whatever the outcome).
    created: u32,
    ops: Arc<Mutex<Vec<AdminOp>>>,
    clock: RunClock,
}

impl Churn {
    fn run(&mut self, stop: &AtomicBool) {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("runtime");
        loop {
            let pause = self.rng.between(OP_INTERVAL_MIN_MS, OP_INTERVAL_MAX_MS);
            if !pause_unless_stopped(pause, stop) {
                return;
            }
            let grow = self.created >= TOPICS_MAX || self.rng.below(GROW_ONE_IN) == 0;
            let target = if grow { self.growable() } else { None };
            match target {
                Some((topic, count)) => self.grow(&runtime, &topic, count),
                None if self.created < TOPICS_MAX => self.create(&runtime),
                None => {}
            }
        }
    }

    /// A churn topic to grow and the count to grow it to (one more than it
    /// has, as far as the client knows), or None when there is none (or the
    /// cluster cannot say).
    fn growable(&mut self) -> Option<(String, i32)> {
        let metadata = self
            .admin
            .inner()
            .fetch_metadata(None, Duration::from_millis(METADATA_TIMEOUT_MS))
            .ok()?;
        let acked = self.acked_counts();
        let candidates: Vec<(String, i32)> = churn_topics(&metadata)
            .into_iter()
            .map(|(topic, partitions)| {
                let known = (partitions.len() as i32).max(acked.get(&topic).copied().unwrap_or(0));
                (topic, known)
            })
            .filter(|(_, known)| *known < TOPIC_PARTITIONS_MAX)
            .collect();
        if candidates.is_empty() {
            return None;
        }
        let (topic, known) = candidates[self.rng.below(candidates.len() as u64) as usize].clone();
        Some((topic, known + 1))
    }

    /// The highest partition count an acknowledged operation gave each topic.
    fn acked_counts(&self) -> BTreeMap<String, i32> {
        let mut counts: BTreeMap<String, i32> = BTreeMap::new();
        for op in self.ops.lock().expect("admin history").iter() {
            if op.outcome == AdminOutcome::Acked {
                let count = counts.entry(op.topic.clone()).or_default();
                *count = (*count).max(op.count);
            }
        }
        counts
    }

    fn create(&mut self, runtime: &tokio::runtime::Runtime) {
        let topic = format!("{CHURN_PREFIX}{}", self.created);
        self.created += 1;
        let count = 1 + self.rng.below(NEW_TOPIC_PARTITIONS_MAX) as i32;
        let index = self.begin(AdminOpKind::CreateTopic, &topic, count);
        let new_topic = NewTopic::new(&topic, count, TopicReplication::Fixed(self.replicas));
        // The timer is made inside the runtime, which drives it.
        let answer = runtime.block_on(async {
            tokio::time::timeout(
                Duration::from_millis(ADMIN_CALL_WAIT_MS),
                self.admin.create_topics([&new_topic], &options()),
            )
            .await
        });
        self.end(index, outcome(answer));
    }

    fn grow(&mut self, runtime: &tokio::runtime::Runtime, topic: &str, count: i32) {
        let index = self.begin(AdminOpKind::CreatePartitions, topic, count);
        let new_partitions = NewPartitions::new(topic, count as usize);
        // The timer is made inside the runtime, which drives it.
        let answer = runtime.block_on(async {
            tokio::time::timeout(
                Duration::from_millis(ADMIN_CALL_WAIT_MS),
                self.admin.create_partitions([&new_partitions], &options()),
            )
            .await
        });
        self.end(index, outcome(answer));
    }

    /// Records an operation before it is sent (so that one whose call never
    /// returns is recorded as timed out); its index in the history.
    fn begin(&self, kind: AdminOpKind, topic: &str, count: i32) -> usize {
        let invoked_ms = self.clock.ms();
        let mut ops = self.ops.lock().expect("admin history");
        ops.push(AdminOp {
            kind,
            topic: topic.to_string(),
            count,
            invoked_ms,
            completed_ms: invoked_ms,
            outcome: AdminOutcome::TimedOut("did not finish".to_string()),
        });
        ops.len() - 1
    }

    fn end(&self, index: usize, outcome: AdminOutcome) {
        let completed_ms = self.clock.ms();
        let mut ops = self.ops.lock().expect("admin history");
        let op = &mut ops[index];
        op.completed_ms = completed_ms;
        op.outcome = outcome;
        let what = match op.kind {
            AdminOpKind::CreateTopic => format!("create {} ({} partitions)", op.topic, op.count),
            AdminOpKind::CreatePartitions => {
                format!("grow {} to {} partitions", op.topic, op.count)
            }
        };
        let told = match &op.outcome {
            AdminOutcome::Acked => "acknowledged".to_string(),
            AdminOutcome::Failed(error) => format!("failed: {error}"),
            AdminOutcome::TimedOut(error) => format!("timed out: {error}"),
        };
        self.clock.log(&format!(
            "admin: {what} {told} (sent at {} ms)",
            op.invoked_ms
        ));
    }
}

/// Sleeps `ms`, unless the churn is told to stop meanwhile: false then.
fn pause_unless_stopped(ms: u64, stop: &AtomicBool) -> bool {
    let deadline = Instant::now() + Duration::from_millis(ms);
    while Instant::now() < deadline {
        if stop.load(Ordering::Acquire) {
            return false;
        }
        std::thread::sleep(Duration::from_millis(STOP_CHECK_MS));
    }
    !stop.load(Ordering::Acquire)
}

/// The admin calls' bounds.
fn options() -> AdminOptions {
    AdminOptions::new()
        .operation_timeout(Some(Duration::from_millis(ADMIN_OPERATION_TIMEOUT_MS)))
        .request_timeout(Some(Duration::from_millis(ADMIN_REQUEST_TIMEOUT_MS)))
}

/// What the client was told of a one-topic admin call.
fn outcome(
    answer: Result<KafkaResult<Vec<TopicResult>>, tokio::time::error::Elapsed>,
) -> AdminOutcome {
    let code = match answer {
        Err(_) => {
            return AdminOutcome::TimedOut(format!("no answer within {ADMIN_CALL_WAIT_MS} ms"))
        }
        Ok(Err(KafkaError::AdminOp(code))) => code,
        Ok(Err(error)) => return AdminOutcome::Failed(error.to_string()),
        Ok(Ok(results)) => match results.into_iter().next() {
            Some(Ok(_)) => return AdminOutcome::Acked,
            Some(Err((_, code))) => code,
            None => return AdminOutcome::Failed("no result for the topic".to_string()),
        },
    };
    match code {
        RDKafkaErrorCode::OperationTimedOut | RDKafkaErrorCode::RequestTimedOut => {
            AdminOutcome::TimedOut(format!("{code:?}"))
        }
        _ => AdminOutcome::Failed(format!("{code:?}")),
    }
}

/// The churn topics of `metadata`, each with (partition, leader) in
/// partition order.
fn churn_topics(metadata: &Metadata) -> BTreeMap<String, TopicPartitions> {
    metadata
        .topics()
        .iter()
        .filter(|topic| topic.name().starts_with(CHURN_PREFIX))
        .map(|topic| {
            let mut partitions: TopicPartitions = topic
                .partitions()
                .iter()
                .map(|p| (p.id(), p.leader()))
                .collect();
            partitions.sort_unstable();
            (topic.name().to_string(), partitions)
        })
        .collect()
}

/// The healed cluster's churn topics, once they agree with the operations
/// and every partition has a leader, or as they last were when that did not
/// come within `FINAL_STATE_WAIT_MS`; None when they could not be read.
fn final_state(
    bootstrap: &str,
    ops: &[AdminOp],
    clock: RunClock,
) -> Option<BTreeMap<String, TopicPartitions>> {
    let client = consumer(bootstrap, &[("allow.auto.create.topics", "false")]);
    let deadline = Instant::now() + Duration::from_millis(FINAL_STATE_WAIT_MS);
    let mut last = None;
    loop {
        if let Ok(metadata) =
            client.fetch_metadata(None, Duration::from_millis(METADATA_TIMEOUT_MS))
        {
            let topics = churn_topics(&metadata);
            let anomalies = state_anomalies(ops, &topics);
            let partitions: usize = topics.values().map(Vec::len).sum();
            if anomalies.is_empty() {
                clock.log(&format!(
                    "admin churn: {} topics, {partitions} partitions after the heal ({} says)",
                    topics.len(),
                    metadata.orig_broker_name()
                ));
                return Some(topics);
            }
            if Instant::now() > deadline {
                clock.log(&format!(
                    "admin churn: {} topics, {partitions} partitions ({} says), not as acknowledged within {FINAL_STATE_WAIT_MS} ms: {}",
                    topics.len(),
                    metadata.orig_broker_name(),
                    anomalies
                        .iter()
                        .map(ToString::to_string)
                        .collect::<Vec<_>>()
                        .join("; ")
                ));
                return Some(topics);
            }
            last = Some(topics);
        } else if Instant::now() > deadline {
            clock.log(&format!(
                "admin churn: the cluster's topics could not be read within {FINAL_STATE_WAIT_MS} ms"
            ));
            return last;
        }
        std::thread::sleep(Duration::from_millis(CHECK_INTERVAL_MS));
    }
}

/// A churn partition, and what its probe came to: the offset written at (or
/// read back at), or what went wrong.
type ProbeResults = BTreeMap<(String, i32), Result<i64, String>>;

/// The value the probe writes to a partition.
fn probe_value(topic: &str, partition: i32) -> String {
    format!("probe {topic}-{partition}")
}

/// Writes one record (acks=all) to every partition of `topics` and reads it
/// back: each partition's offset, or what went wrong.
fn probe(
    bootstrap: &str,
    topics: &BTreeMap<String, TopicPartitions>,
    clock: RunClock,
) -> Vec<Probe> {
    let written = probe_write(bootstrap, topics);
    let read = probe_read(bootstrap, &written);
    let probes: Vec<Probe> = written
        .into_iter()
        .map(|((topic, partition), result)| {
            let outcome = result.and_then(|_| {
                read.get(&(topic.clone(), partition))
                    .cloned()
                    .unwrap_or_else(|| {
                        Err(format!(
                            "read: not read back within {PROBE_READ_WAIT_MS} ms"
                        ))
                    })
            });
            Probe {
                topic,
                partition,
                outcome,
            }
        })
        .collect();
    let failed = probes.iter().filter(|p| p.outcome.is_err()).count();
    clock.log(&format!(
        "admin churn: a record written to and read back from {} of {} churn partitions",
        probes.len() - failed,
        probes.len()
    ));
    probes
}

/// Sends the probe's record to every partition of `topics` at once, then
/// waits for each delivery: the offset each was written at.
fn probe_write(bootstrap: &str, topics: &BTreeMap<String, TopicPartitions>) -> ProbeResults {
    let writer = producer(
        bootstrap,
        &[
            ("acks", "all"),
            ("enable.idempotence", "true"),
            ("allow.auto.create.topics", "false"),
            ("message.timeout.ms", PROBE_DELIVERY_TIMEOUT_MS),
            ("request.timeout.ms", REQUEST_TIMEOUT_MS),
        ],
    );
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let sent: Vec<_> = topics
        .iter()
        .flat_map(|(topic, partitions)| partitions.iter().map(move |&(p, _)| (topic, p)))
        .map(|(topic, partition)| {
            let value = probe_value(topic, partition);
            let delivery = writer
                .send_result(
                    FutureRecord::<(), str>::to(topic)
                        .partition(partition)
                        .payload(&value),
                )
                .map_err(|(error, _)| error);
            (topic.clone(), partition, delivery)
        })
        .collect();
    let mut written = ProbeResults::new();
    for (topic, partition, delivery) in sent {
        let result = match delivery {
            Err(error) => Err(format!("write: {error}")),
            Ok(delivery) => match runtime.block_on(delivery) {
                Ok(Ok(delivered)) => Ok(delivered.offset),
                Ok(Err((error, _))) => Err(format!("write: {error}")),
                Err(_) => Err("write: delivery report dropped".to_string()),
            },
        };
        written.insert((topic, partition), result);
    }
    written
}

/// Reads each written probe back at the offset it was written at (bounded
/// by `PROBE_READ_WAIT_MS`): the partitions read, each with its offset or
/// what was found instead.
fn probe_read(bootstrap: &str, written: &ProbeResults) -> ProbeResults {
    let reader = consumer(bootstrap, &[("allow.auto.create.topics", "false")]);
    let mut assignment = TopicPartitionList::new();
    for ((topic, partition), result) in written {
        if let Ok(offset) = result {
            let _ = assignment.add_partition_offset(topic, *partition, Offset::Offset(*offset));
        }
    }
    let mut read = ProbeResults::new();
    let waiting = assignment.count();
    if waiting > 0 {
        if let Err(error) = reader.assign(&assignment) {
            for element in assignment.elements() {
                read.insert(
                    (element.topic().to_string(), element.partition()),
                    Err(format!("read: assign: {error}")),
                );
            }
        }
    }
    let deadline = Instant::now() + Duration::from_millis(PROBE_READ_WAIT_MS);
    while read.len() < waiting && Instant::now() < deadline {
        let Some(Ok(message)) = reader.poll(Duration::from_millis(POLL_MS)) else {
            continue;
        };
        let key = (message.topic().to_string(), message.partition());
        if read.contains_key(&key) {
            continue;
        }
        let Some(Ok(offset)) = written.get(&key) else {
            continue;
        };
        let value = String::from_utf8_lossy(message.payload().unwrap_or_default());
        let result = if message.offset() == *offset && value == probe_value(&key.0, key.1) {
            Ok(*offset)
        } else {
            Err(format!(
                "read {value:?} at offset {}, the probe was acknowledged at {offset}",
                message.offset()
            ))
        };
        read.insert(key, result);
    }
    read
}

/// The churn's lines of the report.
pub fn report(stats: &AdminStats) -> String {
    format!(
        "admin churn: {} topic creations ({} acknowledged, {} failed, {} timed out), {} partition additions ({} acknowledged, {} failed, {} timed out); {} churn topics with {} partitions after the heal, {} of them written and read back\n",
        stats.creates.0 + stats.creates.1 + stats.creates.2,
        stats.creates.0,
        stats.creates.1,
        stats.creates.2,
        stats.additions.0 + stats.additions.1 + stats.additions.2,
        stats.additions.0,
        stats.additions.1,
        stats.additions.2,
        stats.final_topics,
        stats.final_partitions,
        stats.probed_ok
    )
}
