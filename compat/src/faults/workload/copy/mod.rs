//! The transactional copy: consume-transform-produce with librdkafka. A
//! read_committed consumer in its own group reads the run's topic; a
//! transactional producer (one transactional id for the run) writes a copy of
//! each record to the output topic, `<partition>:<offset>:<transaction>:<value>`
//! into the output partition of the input's number, a few records a
//! transaction, with the consumer's offsets sent in the same transaction
//! (`send_offsets_to_transaction`). A failed transaction is aborted and the
//! consumer rewound to the group's committed offsets; when the abort fails too
//! or the producer is fenced or fatally broken, a new producer instance takes
//! over (its `init_transactions` fences the old one and completes whatever it
//! left open) before the rewind. Every transaction is recorded with what the
//! producer was told of it, and every offset commit it carried in the group
//! history.
//!
//! After the heal the copy catches up with the input's end (bounded), stops,
//! and the group's committed offsets and the whole output, read_committed,
//! are read back for `check::check_copy`.

pub mod check;

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::create_replicated_topic;
use crate::faults::history::{
    copy_value_of, Commit, CommitOutcome, CopyHistory, CopyTxn, GroupHistory, Read, TxnOutcome,
};
use check::CopyStats;
use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer, ConsumerContext, Rebalance};
use rdkafka::error::KafkaError;
use rdkafka::message::Message;
use rdkafka::producer::{FutureProducer, FutureRecord, Producer};
use rdkafka::{ClientContext, Offset, TopicPartitionList};

use super::group::{HEARTBEAT_INTERVAL_MS, SESSION_TIMEOUT_MS};
use super::{join_within, PARTITIONS, REQUEST_TIMEOUT_MS, TOPIC};
use crate::faults::schedule::RunClock;

/// The copy's consumer group.
pub const GROUP: &str = "faults-copy";
/// The topic the copies go to: as many partitions as the input, replicated
/// on three nodes, two of them in sync for a write.
const OUTPUT_TOPIC: &str = "faults-copy";
const OUTPUT_CONFIGS: &[(&str, &str)] = &[("min.insync.replicas", "2")];
/// The run's one transactional id.
const TRANSACTIONAL_ID: &str = "faults-copy";
/// Records in one transaction at most, and how long a transaction waits for
/// them before it goes with fewer, in ms. A transaction takes a few hundred
/// ms on a small machine while the input grows by a few hundred records a
/// second: a transaction takes what arrived meanwhile (a few records when
/// the copy keeps up), and up to this many when it is behind, so that it can
/// catch up.
const TXN_MAX_RECORDS: usize = 100;
const TXN_FILL_MS: u64 = 200;
/// How long `send_offsets_to_transaction` may take before its instance is
/// given up (see `Copier::send_offsets`), in ms.
const SEND_OFFSETS_WAIT_MS: u64 = 2 * TXN_CALL_TIMEOUT_MS;
/// librdkafka's pause before it retries a request, in ms (its default is
/// 100): a transaction's first AddPartitionsToTxn is answered
/// CONCURRENT_TRANSACTIONS while the one before is still being completed.
const RETRY_BACKOFF_CLIENT_MS: &str = "20";
/// How long one poll waits for a record, in ms.
const POLL_MS: u64 = 50;
/// The bound of each transactional call (init, send offsets, commit, abort),
/// and of a rewind's offset fetch and seeks, in ms.
const TXN_CALL_TIMEOUT_MS: u64 = 10_000;
/// The broker aborts a transaction left open this long (`transaction.timeout.ms`);
/// librdkafka requires the delivery bound to be no longer.
const TXN_TIMEOUT_MS: &str = "20000";
/// A commit that fails with a retriable error is tried again this many times
/// before its outcome is given up as unknown.
const COMMIT_RETRIES: u32 = 3;
/// The pause before a failed step (a new instance, a rewind) is tried again, in ms.
const RETRY_BACKOFF_MS: u64 = 500;
/// After the heal: how long the copy has to catch up with the input's end,
/// and how long the last instance's replacement may take to fence it (to
/// complete a transaction of unknown outcome), in ms.
const CATCH_UP_WAIT_MS: u64 = 60_000;
const FENCE_WAIT_MS: u64 = 60_000;
/// How long the copy has to stop once told, in ms: the transaction under
/// way (its offsets, then up to `COMMIT_RETRIES` + 1 commits and an abort,
/// each bounded by `TXN_CALL_TIMEOUT_MS`), then the fencing of an instance
/// left in doubt (whose last try may start just before its deadline).
const STOP_WAIT_MS: u64 = SEND_OFFSETS_WAIT_MS
    + (COMMIT_RETRIES as u64 + 2) * TXN_CALL_TIMEOUT_MS
    + FENCE_WAIT_MS
    + TXN_CALL_TIMEOUT_MS;
/// How long reading the final committed offsets, waiting for the output's
/// last stable offset to reach its high watermark, and reading the output
/// may each take, in ms.
const FINAL_OFFSETS_WAIT_MS: u64 = 30_000;
const STABLE_WAIT_MS: u64 = 30_000;
const OUTPUT_READ_WAIT_MS: u64 = 60_000;
/// The pause between two polls of a condition, in ms.
const CHECK_INTERVAL_MS: u64 = 250;
/// Set, every transaction of the copy is logged with what it copied and how
/// it ended, to follow an anomaly through the nodes' logs.
const VERBOSE_VAR: &str = "SLUICE_FAULTS_VERBOSE";

/// Creates the output topic with `replicas` replicas of each partition.
pub fn create_output(bootstrap: &str, replicas: i32) {
    create_replicated_topic(
        bootstrap,
        OUTPUT_TOPIC,
        PARTITIONS,
        replicas,
        OUTPUT_CONFIGS,
    );
}

/// What the copy thread shares with the run.
#[derive(Default)]
struct Shared {
    txns: Mutex<Vec<CopyTxn>>,
    /// The committed offset of each input partition, as far as the copy knows.
    progress: Mutex<BTreeMap<i32, i64>>,
}

/// The running copy.
pub struct CopyWorkload {
    shared: Arc<Shared>,
    stop: Arc<AtomicBool>,
    thread: JoinHandle<()>,
}

impl CopyWorkload {
    pub fn start(
        bootstrap: &str,
        group_history: Arc<Mutex<GroupHistory>>,
        clock: RunClock,
    ) -> CopyWorkload {
        let shared = Arc::new(Shared::default());
        let stop = Arc::new(AtomicBool::new(false));
        let mut copier = Copier {
            bootstrap: bootstrap.to_string(),
            consumer: copy_consumer(bootstrap),
            producer: None,
            instance: 0,
            attempt: 0,
            rewind_needed: false,
            last_logged: String::new(),
            verbose: std::env::var_os(VERBOSE_VAR).is_some(),
            shared: Arc::clone(&shared),
            group_history,
            clock,
        };
        let thread_stop = Arc::clone(&stop);
        let thread = std::thread::spawn(move || copier.run(&thread_stop));
        CopyWorkload {
            shared,
            stop,
            thread,
        }
    }

    /// Lets the copy catch up with `input` (the input's final read; its end
    /// in each partition is its last offset + 1), bounded, stops it, and reads
    /// back what the cluster holds.
    pub fn finish(self, bootstrap: &str, input: &[Read], clock: RunClock) -> CopyHistory {
        let mut ends: BTreeMap<i32, i64> = (0..PARTITIONS).map(|p| (p, 0)).collect();
        for read in input {
            let end = ends.entry(read.partition).or_default();
            *end = (*end).max(read.offset + 1);
        }
        let caught_up = || {
            let progress = self.shared.progress.lock().expect("copy progress");
            ends.iter()
                .all(|(p, end)| progress.get(p).is_some_and(|at| at >= end))
        };
        let deadline = Instant::now() + Duration::from_millis(CATCH_UP_WAIT_MS);
        while !caught_up() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(CHECK_INTERVAL_MS));
        }
        let progress = self.shared.progress.lock().expect("copy progress").clone();
        if caught_up() {
            clock.log(&format!("copy caught up with the input's end {ends:?}"));
        } else {
            clock.log(&format!(
                "copy did not catch up within {CATCH_UP_WAIT_MS} ms: committed {progress:?} of {ends:?}"
            ));
        }
        self.stop.store(true, Ordering::Release);
        let mut incomplete = Vec::new();
        match join_within(vec![self.thread], STOP_WAIT_MS) {
            Ok(0) => {}
            Ok(_) => {
                clock.log(&format!(
                    "the copy did not stop within {STOP_WAIT_MS} ms; left behind"
                ));
                incomplete.push(format!(
                    "the copy did not stop within {STOP_WAIT_MS} ms (a call into librdkafka did not return)"
                ));
            }
            Err(()) => incomplete.push("the copy thread panicked".to_string()),
        }
        let txns = self.shared.txns.lock().expect("copy history").clone();
        let final_offsets = match final_offsets(bootstrap) {
            Ok(offsets) => Some(offsets),
            Err(error) => {
                incomplete.push(format!("the copy group's committed offsets: {error}"));
                None
            }
        };
        let (output, problems) = read_output(bootstrap, clock);
        incomplete.extend(problems);
        CopyHistory {
            txns,
            final_offsets,
            output,
            incomplete,
        }
    }
}

/// Marks a rebalance, so that records polled before it are not copied.
struct CopyContext {
    rebalanced: AtomicBool,
}

impl ClientContext for CopyContext {}

impl ConsumerContext for CopyContext {
    fn post_rebalance(&self, _: &BaseConsumer<Self>, _: &Rebalance<'_>) {
        self.rebalanced.store(true, Ordering::Release);
    }
}

fn copy_consumer(bootstrap: &str) -> BaseConsumer<CopyContext> {
    let consumer: BaseConsumer<CopyContext> = ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .set("group.id", GROUP)
        .set("isolation.level", "read_committed")
        .set("enable.auto.commit", "false")
        .set("auto.offset.reset", "earliest")
        .set("session.timeout.ms", SESSION_TIMEOUT_MS)
        .set("heartbeat.interval.ms", HEARTBEAT_INTERVAL_MS)
        .set("request.timeout.ms", REQUEST_TIMEOUT_MS)
        .set("socket.timeout.ms", REQUEST_TIMEOUT_MS)
        .create_with_context(CopyContext {
            rebalanced: AtomicBool::new(false),
        })
        .expect("copy consumer");
    consumer.subscribe(&[TOPIC]).expect("subscribe");
    consumer
}

/// How a transaction went, or why none was started.
enum Attempt {
    Done(TxnOutcome),
    NotBegun(String),
}

struct Copier {
    bootstrap: String,
    consumer: BaseConsumer<CopyContext>,
    /// Shared with a call left running on a helper thread (see `send_offsets`).
    producer: Option<Arc<FutureProducer>>,
    /// Producer instances so far.
    instance: u32,
    /// Transactions so far.
    attempt: u64,
    /// The consumer's position may be past records not committed: it must be
    /// set back to the committed offsets before the next transaction.
    rewind_needed: bool,
    /// The last line `log_once` printed.
    last_logged: String,
    /// Whether every transaction is logged (`VERBOSE_VAR` set).
    verbose: bool,
    shared: Arc<Shared>,
    group_history: Arc<Mutex<GroupHistory>>,
    clock: RunClock,
}

impl Copier {
    fn run(&mut self, stop: &AtomicBool) {
        while !stop.load(Ordering::Acquire) {
            if self.producer.is_none() && !self.new_instance() {
                std::thread::sleep(Duration::from_millis(RETRY_BACKOFF_MS));
                continue;
            }
            if self.rewind_needed {
                if let Err(error) = self.rewind() {
                    self.log_once(&format!("copy: rewind failed: {error}"));
                    std::thread::sleep(Duration::from_millis(RETRY_BACKOFF_MS));
                    continue;
                }
                self.rewind_needed = false;
            }
            let batch = self.fill();
            if batch.is_empty() {
                continue;
            }
            self.attempt += 1;
            let started_ms = self.clock.ms();
            let offsets = next_offsets(&batch);
            // Recorded before it starts: a transaction whose calls never
            // return is one of unknown outcome.
            self.shared
                .txns
                .lock()
                .expect("copy history")
                .push(CopyTxn {
                    attempt: self.attempt,
                    instance: self.instance,
                    records: batch.clone(),
                    offsets: offsets.clone(),
                    started_ms,
                    completed_ms: started_ms,
                    outcome: TxnOutcome::Unknown("did not finish".to_string()),
                });
            let outcome = match self.transact(&batch, &offsets) {
                Attempt::NotBegun(error) => {
                    // Nothing was sent.
                    self.shared.txns.lock().expect("copy history").pop();
                    self.clock
                        .log(&format!("copy: cannot begin a transaction: {error}"));
                    self.producer = None;
                    self.rewind_needed = true;
                    continue;
                }
                Attempt::Done(outcome) => outcome,
            };
            let completed_ms = self.clock.ms();
            if self.verbose {
                self.clock.log(&format!(
                    "copy: transaction {} of instance {} copied {} ({} records), offsets {offsets:?}: {outcome:?} ({started_ms}-{completed_ms} ms)",
                    self.attempt,
                    self.instance,
                    ranges(&batch),
                    batch.len(),
                ));
            }
            self.record(&offsets, started_ms, completed_ms, &outcome);
            match &outcome {
                TxnOutcome::Committed => {
                    let mut progress = self.shared.progress.lock().expect("copy progress");
                    for (partition, offset) in &offsets {
                        let at = progress.entry(*partition).or_insert(-1);
                        *at = (*at).max(*offset);
                    }
                }
                TxnOutcome::Aborted => self.rewind_needed = true,
                TxnOutcome::Unknown(error) => {
                    self.clock.log(&format!(
                        "copy: transaction {} of instance {} unknown ({error}); a new instance takes over",
                        self.attempt, self.instance
                    ));
                    self.producer = None;
                    self.rewind_needed = true;
                }
            }
        }
        // A transaction of unknown outcome is left open on the broker until
        // another instance fences it: do so, so that it commits or aborts
        // before the output is read.
        let deadline = Instant::now() + Duration::from_millis(FENCE_WAIT_MS);
        while self.producer.is_none() && Instant::now() < deadline {
            if !self.new_instance() {
                std::thread::sleep(Duration::from_millis(RETRY_BACKOFF_MS));
            }
        }
    }

    /// Logs `line` unless it was the last line logged, so that a step retried
    /// through a fault is logged once.
    fn log_once(&mut self, line: &str) {
        if self.last_logged != line {
            self.clock.log(line);
            self.last_logged = line.to_string();
        }
    }

    /// A new producer instance, initialized (fencing the ones before); false
    /// when it could not be.
    fn new_instance(&mut self) -> bool {
        self.producer = None;
        let producer: FutureProducer = match ClientConfig::new()
            .set("bootstrap.servers", &self.bootstrap)
            .set("transactional.id", TRANSACTIONAL_ID)
            .set("transaction.timeout.ms", TXN_TIMEOUT_MS)
            .set("message.timeout.ms", TXN_TIMEOUT_MS)
            .set("request.timeout.ms", REQUEST_TIMEOUT_MS)
            .set("socket.timeout.ms", REQUEST_TIMEOUT_MS)
            .set("linger.ms", "2")
            .set("retry.backoff.ms", RETRY_BACKOFF_CLIENT_MS)
            .create()
        {
            Ok(producer) => producer,
            Err(error) => {
                self.log_once(&format!("copy: cannot create a producer: {error}"));
                return false;
            }
        };
        match producer.init_transactions(Duration::from_millis(TXN_CALL_TIMEOUT_MS)) {
            Ok(()) => {
                self.instance += 1;
                if self.instance > 1 {
                    self.clock.log(&format!(
                        "copy: producer instance {} initialized",
                        self.instance
                    ));
                }
                self.producer = Some(Arc::new(producer));
                true
            }
            Err(error) => {
                self.log_once(&format!("copy: init_transactions failed: {error}"));
                false
            }
        }
    }

    /// Sets the consumer back to the group's committed offsets (read
    /// read_committed: past any offsets still pending in a transaction).
    fn rewind(&mut self) -> Result<(), String> {
        let timeout = Duration::from_millis(TXN_CALL_TIMEOUT_MS);
        let assignment = self.consumer.assignment().map_err(|e| e.to_string())?;
        if assignment.count() == 0 {
            // Nothing held: the next assignment starts at the committed offsets.
            return Ok(());
        }
        let committed = self
            .consumer
            .committed_offsets(assignment, timeout)
            .map_err(|e| e.to_string())?;
        let mut progress = Vec::new();
        for element in committed.elements() {
            element.error().map_err(|e| e.to_string())?;
            let offset = match element.offset() {
                Offset::Offset(offset) => {
                    progress.push((element.partition(), offset));
                    Offset::Offset(offset)
                }
                _ => Offset::Beginning,
            };
            self.consumer
                .seek(TOPIC, element.partition(), offset, timeout)
                .map_err(|e| e.to_string())?;
        }
        let mut known = self.shared.progress.lock().expect("copy progress");
        for (partition, offset) in progress {
            let at = known.entry(partition).or_insert(-1);
            *at = (*at).max(offset);
        }
        Ok(())
    }

    /// Up to `TXN_MAX_RECORDS` records, waiting at most `TXN_FILL_MS`. A
    /// rebalance, or a record at or before one already taken from its
    /// partition (the position was set back), drops what was taken before.
    fn fill(&mut self) -> Vec<(i32, i64, String)> {
        let mut batch: Vec<(i32, i64, String)> = Vec::new();
        let deadline = Instant::now() + Duration::from_millis(TXN_FILL_MS);
        while batch.len() < TXN_MAX_RECORDS && Instant::now() < deadline {
            let polled = self.consumer.poll(Duration::from_millis(POLL_MS));
            if self
                .consumer
                .context()
                .rebalanced
                .swap(false, Ordering::AcqRel)
            {
                batch.clear();
            }
            let Some(Ok(message)) = polled else {
                continue;
            };
            let (partition, offset) = (message.partition(), message.offset());
            if batch
                .iter()
                .any(|(p, o, _)| *p == partition && *o >= offset)
            {
                batch.clear();
            }
            let value = String::from_utf8_lossy(message.payload().unwrap_or_default());
            batch.push((partition, offset, value.into_owned()));
        }
        batch
    }

    /// One transaction copying `batch` and committing `offsets`.
    fn transact(&self, batch: &[(i32, i64, String)], offsets: &[(i32, i64)]) -> Attempt {
        let Some(producer) = self.producer.clone() else {
            return Attempt::NotBegun("no producer".to_string());
        };
        let timeout = Duration::from_millis(TXN_CALL_TIMEOUT_MS);
        if let Err(error) = producer.begin_transaction() {
            return Attempt::NotBegun(error.to_string());
        }
        let mut failure = None;
        for (partition, offset, value) in batch {
            let copy = copy_value_of(*partition, *offset, self.attempt, value);
            let record = FutureRecord::<(), str>::to(OUTPUT_TOPIC)
                .partition(*partition)
                .payload(&copy);
            // The delivery is awaited by the commit (or undone by the abort).
            if let Err((error, _)) = producer.send_result(record) {
                failure = Some(format!("send: {error}"));
                break;
            }
        }
        if failure.is_none() {
            match self.send_offsets(&producer, offsets, timeout) {
                Some(Ok(())) => {}
                Some(Err(error)) => failure = Some(format!("send offsets: {error}")),
                // The instance is left to its call and replaced.
                None => {
                    return Attempt::Done(TxnOutcome::Unknown(format!(
                    "send_offsets_to_transaction did not return within {SEND_OFFSETS_WAIT_MS} ms"
                )))
                }
            }
        }
        if let Some(error) = failure {
            return Attempt::Done(abort(&producer, &error, timeout));
        }
        let mut tries = 0;
        loop {
            match producer.commit_transaction(timeout) {
                Ok(()) => return Attempt::Done(TxnOutcome::Committed),
                Err(KafkaError::Transaction(error))
                    if error.is_retriable() && tries < COMMIT_RETRIES =>
                {
                    tries += 1;
                }
                Err(error) if requires_abort(&error) => {
                    return Attempt::Done(abort(&producer, &format!("commit: {error}"), timeout))
                }
                Err(error) => {
                    return Attempt::Done(TxnOutcome::Unknown(format!("commit: {error}")))
                }
            }
        }
    }

    /// `send_offsets_to_transaction`, on a helper thread: librdkafka can
    /// wait past its timeout for a group coordinator it has cached but that is
    /// gone (its coordinator requests' own timeout is never checked), until
    /// some broker connection changes state. None when it did not return
    /// within `SEND_OFFSETS_WAIT_MS`: the call is left running.
    fn send_offsets(
        &self,
        producer: &Arc<FutureProducer>,
        offsets: &[(i32, i64)],
        timeout: Duration,
    ) -> Option<Result<(), String>> {
        let mut list = TopicPartitionList::new();
        for (partition, offset) in offsets {
            if let Err(error) =
                list.add_partition_offset(TOPIC, *partition, Offset::Offset(*offset))
            {
                return Some(Err(error.to_string()));
            }
        }
        let Some(group) = self.consumer.group_metadata() else {
            return Some(Err("no group metadata".to_string()));
        };
        let (answer, answered) = std::sync::mpsc::channel();
        let producer = Arc::clone(producer);
        std::thread::spawn(move || {
            let sent = producer
                .send_offsets_to_transaction(&list, &group, timeout)
                .map_err(|e| e.to_string());
            // The copy may have stopped waiting.
            let _ = answer.send(sent);
        });
        answered
            .recv_timeout(Duration::from_millis(SEND_OFFSETS_WAIT_MS))
            .ok()
    }

    /// Records the outcome of the transaction under way (the last one
    /// recorded), and its offsets as commits of the group.
    fn record(
        &self,
        offsets: &[(i32, i64)],
        started_ms: u64,
        completed_ms: u64,
        outcome: &TxnOutcome,
    ) {
        let commit_outcome = match outcome {
            TxnOutcome::Committed => CommitOutcome::Acked,
            TxnOutcome::Aborted => CommitOutcome::Failed("aborted".to_string()),
            TxnOutcome::Unknown(error) => CommitOutcome::Failed(error.clone()),
        };
        {
            let mut history = self.group_history.lock().expect("group history");
            for (partition, offset) in offsets {
                history.commits.push(Commit {
                    group: GROUP.to_string(),
                    member: self.instance,
                    partition: *partition,
                    offset: *offset,
                    invoked_ms: started_ms,
                    completed_ms,
                    outcome: commit_outcome.clone(),
                });
            }
        }
        let mut txns = self.shared.txns.lock().expect("copy history");
        if let Some(txn) = txns.last_mut().filter(|t| t.attempt == self.attempt) {
            txn.completed_ms = completed_ms;
            txn.outcome = outcome.clone();
        }
    }
}

/// True when librdkafka says the transaction can only be aborted.
fn requires_abort(error: &KafkaError) -> bool {
    matches!(error, KafkaError::Transaction(e) if e.txn_requires_abort())
}

/// Aborts after `error`: Aborted if the abort succeeded, else Unknown.
fn abort(producer: &FutureProducer, error: &str, timeout: Duration) -> TxnOutcome {
    match producer.abort_transaction(timeout) {
        Ok(()) => TxnOutcome::Aborted,
        Err(abort_error) => TxnOutcome::Unknown(format!("{error}; abort: {abort_error}")),
    }
}

/// The input ranges of `batch`, `partition:first-last` each.
fn ranges(batch: &[(i32, i64, String)]) -> String {
    let mut ranges: BTreeMap<i32, (i64, i64)> = BTreeMap::new();
    for (partition, offset, _) in batch {
        let range = ranges.entry(*partition).or_insert((*offset, *offset));
        range.0 = range.0.min(*offset);
        range.1 = range.1.max(*offset);
    }
    ranges
        .iter()
        .map(|(partition, (first, last))| format!("{partition}:{first}-{last}"))
        .collect::<Vec<_>>()
        .join(",")
}

/// The offset after the last record of each partition in `batch`.
fn next_offsets(batch: &[(i32, i64, String)]) -> Vec<(i32, i64)> {
    let mut next: BTreeMap<i32, i64> = BTreeMap::new();
    for (partition, offset, _) in batch {
        let at = next.entry(*partition).or_insert(0);
        *at = (*at).max(offset + 1);
    }
    next.into_iter().collect()
}

/// The copy group's committed offsets of the input, read read_committed (an
/// offset still pending in a transaction is waited for).
fn final_offsets(bootstrap: &str) -> Result<Vec<(i32, i64)>, String> {
    let client: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .set("group.id", GROUP)
        .set("isolation.level", "read_committed")
        .set("enable.auto.commit", "false")
        .create()
        .map_err(|e| e.to_string())?;
    let deadline = Instant::now() + Duration::from_millis(FINAL_OFFSETS_WAIT_MS);
    loop {
        let mut wanted = TopicPartitionList::new();
        for partition in 0..PARTITIONS {
            wanted.add_partition(TOPIC, partition);
        }
        let answer = client
            .committed_offsets(wanted, Duration::from_millis(TXN_CALL_TIMEOUT_MS))
            .map_err(|e| e.to_string())
            .and_then(|committed| {
                committed
                    .elements()
                    .iter()
                    .map(|element| {
                        element.error().map_err(|e| e.to_string())?;
                        Ok(match element.offset() {
                            Offset::Offset(offset) => (element.partition(), offset),
                            _ => (element.partition(), -1),
                        })
                    })
                    .collect::<Result<Vec<_>, String>>()
            });
        match answer {
            Ok(offsets) => return Ok(offsets),
            Err(error) if Instant::now() > deadline => {
                return Err(format!("not within {FINAL_OFFSETS_WAIT_MS} ms: {error}"))
            }
            Err(_) => std::thread::sleep(Duration::from_millis(CHECK_INTERVAL_MS)),
        }
    }
}

/// The whole output, read_committed from its start. Each partition is read
/// to its last stable offset once that reached the high watermark (every
/// transaction closed): what was read, and what kept it from the end.
fn read_output(bootstrap: &str, clock: RunClock) -> (Vec<Read>, Vec<String>) {
    let reader = |isolation: &str| -> Result<BaseConsumer, String> {
        ClientConfig::new()
            .set("bootstrap.servers", bootstrap)
            .set("group.id", "faults-copy-check")
            .set("enable.auto.commit", "false")
            .set("auto.offset.reset", "earliest")
            .set("isolation.level", isolation)
            .set("enable.partition.eof", "true")
            .create()
            .map_err(|e| e.to_string())
    };
    let (uncommitted, committed) = match (reader("read_uncommitted"), reader("read_committed")) {
        (Ok(uncommitted), Ok(committed)) => (uncommitted, committed),
        (Err(error), _) | (_, Err(error)) => return (Vec::new(), vec![error]),
    };
    let watermark_wait = Duration::from_millis(TXN_CALL_TIMEOUT_MS);
    let deadline = Instant::now() + Duration::from_millis(STABLE_WAIT_MS);
    let mut problems = Vec::new();
    for partition in 0..PARTITIONS {
        loop {
            let high = uncommitted.fetch_watermarks(OUTPUT_TOPIC, partition, watermark_wait);
            let stable = committed.fetch_watermarks(OUTPUT_TOPIC, partition, watermark_wait);
            match (high, stable) {
                (Ok((_, high)), Ok((_, stable))) if stable >= high => break,
                (high, stable) if Instant::now() > deadline => {
                    problems.push(format!(
                        "output partition {partition}: the last stable offset did not reach the high watermark within {STABLE_WAIT_MS} ms ({stable:?} of {high:?})"
                    ));
                    break;
                }
                _ => std::thread::sleep(Duration::from_millis(CHECK_INTERVAL_MS)),
            }
        }
    }
    let mut assignment = TopicPartitionList::new();
    for partition in 0..PARTITIONS {
        assignment.add_partition(OUTPUT_TOPIC, partition);
    }
    let assigned = assignment
        .set_all_offsets(Offset::Beginning)
        .and_then(|()| committed.assign(&assignment));
    if let Err(error) = assigned {
        problems.push(format!("assigning the output: {error}"));
        return (Vec::new(), problems);
    }
    let deadline = Instant::now() + Duration::from_millis(OUTPUT_READ_WAIT_MS);
    let mut at_end = vec![false; PARTITIONS as usize];
    let mut output = Vec::new();
    while at_end.iter().any(|done| !done) {
        if Instant::now() > deadline {
            problems.push(format!(
                "the output read did not reach every partition's end within {OUTPUT_READ_WAIT_MS} ms (at the end: {at_end:?})"
            ));
            break;
        }
        match committed.poll(Duration::from_millis(POLL_MS)) {
            Some(Ok(message)) => {
                if let Some(done) = at_end.get_mut(message.partition() as usize) {
                    *done = false;
                }
                output.push(Read {
                    partition: message.partition(),
                    offset: message.offset(),
                    value: String::from_utf8_lossy(message.payload().unwrap_or_default())
                        .into_owned(),
                    at_ms: clock.ms(),
                });
            }
            Some(Err(KafkaError::PartitionEOF(partition))) => {
                if let Some(done) = at_end.get_mut(partition as usize) {
                    *done = true;
                }
            }
            Some(Err(_)) | None => {}
        }
    }
    (output, problems)
}

/// The copy's lines of the report.
pub fn report(stats: &CopyStats) -> String {
    format!(
        "transactional copy: {} transactions committed, {} aborted, {} of unknown outcome; {} input records below the committed offsets; {} copies read committed\n",
        stats.committed, stats.aborted, stats.unknown, stats.covered, stats.output_records
    )
}
