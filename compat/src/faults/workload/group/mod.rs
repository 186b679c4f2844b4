//! The consumer-group workload: librdkafka consumers in one group, subscribed
//! to the run's topic, each committing its position synchronously every few
//! records, and recording every commit and every assignment (with the
//! generation it belongs to); beside them a client outside the group samples
//! the committed offsets of this group and of the transactional copy's group
//! (`copy`) from the cluster. `check::check_group` reads the
//! history.
//!
//! The generation of an assignment: the `rdkafka` crate has no accessor for
//! it, so the rebalance callback asks librdkafka for the consumer's group
//! metadata (`rd_kafka_consumer_group_metadata`, the object librdkafka gives
//! `send_offsets_to_transaction`) and reads its generation and member id. An
//! eager member does not rejoin before the application has taken its
//! assignment, so that is the assignment's generation; when the member holds
//! no generation at that moment (its session was lost meanwhile) it reads -1
//! and the assignment is recorded unchecked.

pub mod check;

use std::ffi::CStr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use crate::faults::history::{Assignment, Commit, CommitOutcome, GroupHistory, OffsetSample};
use check::GroupStats;
use rdkafka::config::ClientConfig;
use rdkafka::consumer::{
    BaseConsumer, CommitMode, Consumer, ConsumerContext, DefaultConsumerContext, Rebalance,
};
use rdkafka::{ClientContext, Offset, TopicPartitionList};

use super::{join_within, PARTITIONS, REQUEST_TIMEOUT_MS, TOPIC};
use crate::faults::schedule::RunClock;

/// The group of the committing consumers.
pub const GROUP: &str = "faults-group";
/// Members of the group, each its own librdkafka client and thread.
const MEMBERS: u32 = 3;
/// A member commits its position after this many records.
const COMMIT_EVERY_RECORDS: usize = 5;
/// The members' session and heartbeat, in ms: shorter than a fault
/// (`FAULT_MIN_MS`), so that a member cut off from its coordinator is
/// replaced within the fault, and no shorter than the broker's minimum
/// (`group.min.session.timeout.ms`, 6 s).
pub const SESSION_TIMEOUT_MS: &str = "6000";
pub const HEARTBEAT_INTERVAL_MS: &str = "1000";
/// How long one poll of a member waits for a record, in ms.
const POLL_MS: u64 = 100;
/// How often the committed offsets are sampled, and how long one sample may
/// take, in ms.
const SAMPLE_INTERVAL_MS: u64 = 250;
const SAMPLE_TIMEOUT_MS: u64 = 5_000;
/// How long the threads have to stop, in ms: a synchronous commit waits for
/// its coordinator up to a session and then for its request.
const STOP_WAIT_MS: u64 = 60_000;

/// The running workload.
pub struct GroupWorkload {
    history: Arc<Mutex<GroupHistory>>,
    stop: Arc<AtomicBool>,
    threads: Vec<JoinHandle<()>>,
}

impl GroupWorkload {
    /// Starts the members and the sampler of `sampled` groups' offsets of the
    /// run's topic.
    pub fn start(bootstrap: &str, sampled: &[&str], clock: RunClock) -> GroupWorkload {
        let history = Arc::new(Mutex::new(GroupHistory::default()));
        let stop = Arc::new(AtomicBool::new(false));
        let mut threads: Vec<JoinHandle<()>> = (0..MEMBERS)
            .map(|member| spawn_member(member, bootstrap, &history, &stop, clock))
            .collect();
        threads.push(spawn_sampler(bootstrap, sampled, &history, &stop, clock));
        GroupWorkload {
            history,
            stop,
            threads,
        }
    }

    /// The history, for the copy to record its offset commits in.
    pub fn history(&self) -> Arc<Mutex<GroupHistory>> {
        Arc::clone(&self.history)
    }

    /// Stops every thread and returns what they recorded. A thread still
    /// inside a librdkafka call after `STOP_WAIT_MS` is left behind (what it
    /// has not recorded yet is as if it had not happened: an unknown outcome).
    pub fn stop(self, clock: RunClock) -> Result<GroupHistory, String> {
        self.stop.store(true, Ordering::Release);
        let left = join_within(self.threads, STOP_WAIT_MS)
            .map_err(|()| "a consumer-group thread panicked".to_string())?;
        if left > 0 {
            clock.log(&format!(
                "{left} consumer-group threads did not stop within {STOP_WAIT_MS} ms; left behind"
            ));
        }
        let history = self.history.lock().expect("group history").clone();
        Ok(history)
    }
}

/// Records a member's assignments, with the generation they belong to.
struct MemberContext {
    member: u32,
    history: Arc<Mutex<GroupHistory>>,
    clock: RunClock,
}

impl ClientContext for MemberContext {}

impl ConsumerContext for MemberContext {
    fn post_rebalance(&self, consumer: &BaseConsumer<Self>, rebalance: &Rebalance<'_>) {
        match rebalance {
            Rebalance::Assign(assigned) => {
                let (member_id, generation) =
                    membership(consumer).unwrap_or_else(|| (String::new(), -1));
                let mut partitions: Vec<i32> =
                    assigned.elements().iter().map(|e| e.partition()).collect();
                partitions.sort_unstable();
                self.clock.log(&format!(
                    "group member {}: generation {generation}, partitions {partitions:?}",
                    self.member
                ));
                self.history
                    .lock()
                    .expect("group history")
                    .assignments
                    .push(Assignment {
                        group: GROUP.to_string(),
                        member: self.member,
                        member_id,
                        generation,
                        partitions,
                        at_ms: self.clock.ms(),
                    });
            }
            Rebalance::Revoke(_) => {}
            Rebalance::Error(error) => self.clock.log(&format!(
                "group member {}: rebalance error {error}",
                self.member
            )),
        }
    }
}

/// (member id, generation) of the consumer's group membership as librdkafka
/// holds it now, or None outside a group. The `rdkafka` crate keeps the
/// group metadata's fields to itself, so they are read through librdkafka's
/// own accessors.
#[allow(unsafe_code)]
fn membership<C: ConsumerContext>(consumer: &BaseConsumer<C>) -> Option<(String, i32)> {
    use rdkafka::bindings as rd;
    let client = consumer.client().native_ptr();
    // SAFETY: `client` is the consumer's live handle for this borrow.
    // librdkafka returns a new metadata object (or NULL outside a group) that
    // the caller owns; its member id string lives as long as the object, is
    // copied out before the object is destroyed, and the object is destroyed
    // exactly once.
    unsafe {
        let metadata = rd::rd_kafka_consumer_group_metadata(client);
        if metadata.is_null() {
            return None;
        }
        let generation = rd::rd_kafka_consumer_group_metadata_generation_id(metadata);
        let member_id = rd::rd_kafka_consumer_group_metadata_member_id(metadata);
        let member_id = if member_id.is_null() {
            String::new()
        } else {
            CStr::from_ptr(member_id).to_string_lossy().into_owned()
        };
        rd::rd_kafka_consumer_group_metadata_destroy(metadata);
        Some((member_id, generation))
    }
}

/// One member: polls, and commits its position every `COMMIT_EVERY_RECORDS`.
fn spawn_member(
    member: u32,
    bootstrap: &str,
    history: &Arc<Mutex<GroupHistory>>,
    stop: &Arc<AtomicBool>,
    clock: RunClock,
) -> JoinHandle<()> {
    let context = MemberContext {
        member,
        history: Arc::clone(history),
        clock,
    };
    let consumer: BaseConsumer<MemberContext> = ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .set("group.id", GROUP)
        .set("enable.auto.commit", "false")
        .set("auto.offset.reset", "earliest")
        .set("session.timeout.ms", SESSION_TIMEOUT_MS)
        .set("heartbeat.interval.ms", HEARTBEAT_INTERVAL_MS)
        .set("request.timeout.ms", REQUEST_TIMEOUT_MS)
        .set("socket.timeout.ms", REQUEST_TIMEOUT_MS)
        .create_with_context(context)
        .expect("group member");
    consumer.subscribe(&[TOPIC]).expect("subscribe");
    let (history, stop) = (Arc::clone(history), Arc::clone(stop));
    std::thread::spawn(move || {
        let mut since_commit = 0;
        while !stop.load(Ordering::Acquire) {
            if let Some(Ok(_)) = consumer.poll(Duration::from_millis(POLL_MS)) {
                since_commit += 1;
            }
            if since_commit >= COMMIT_EVERY_RECORDS {
                since_commit = 0;
                commit_position(member, &consumer, &history, clock);
            }
        }
    })
}

/// Commits the member's position in each partition it holds and has read
/// from, synchronously, and records the outcome for each partition.
fn commit_position(
    member: u32,
    consumer: &BaseConsumer<MemberContext>,
    history: &Mutex<GroupHistory>,
    clock: RunClock,
) {
    let Ok(positions) = consumer.position() else {
        return;
    };
    let mut offsets = TopicPartitionList::new();
    let mut committed = Vec::new();
    for element in positions.elements() {
        if let Offset::Offset(offset) = element.offset() {
            if offset >= 0
                && offsets
                    .add_partition_offset(TOPIC, element.partition(), Offset::Offset(offset))
                    .is_ok()
            {
                committed.push((element.partition(), offset));
            }
        }
    }
    if committed.is_empty() {
        return;
    }
    let invoked_ms = clock.ms();
    let outcome = match consumer.commit(&offsets, CommitMode::Sync) {
        Ok(()) => CommitOutcome::Acked,
        Err(error) => CommitOutcome::Failed(error.to_string()),
    };
    let completed_ms = clock.ms();
    let mut history = history.lock().expect("group history");
    for (partition, offset) in committed {
        history.commits.push(Commit {
            group: GROUP.to_string(),
            member,
            partition,
            offset,
            invoked_ms,
            completed_ms,
            outcome: outcome.clone(),
        });
    }
}

/// Samples each of `groups`' committed offsets of the run's topic, one
/// OffsetFetch after another, from clients that never join.
fn spawn_sampler(
    bootstrap: &str,
    groups: &[&str],
    history: &Arc<Mutex<GroupHistory>>,
    stop: &Arc<AtomicBool>,
    clock: RunClock,
) -> JoinHandle<()> {
    let clients: Vec<(String, BaseConsumer<DefaultConsumerContext>)> = groups
        .iter()
        .map(|group| {
            let client = ClientConfig::new()
                .set("bootstrap.servers", bootstrap)
                .set("group.id", *group)
                .set("enable.auto.commit", "false")
                .set("request.timeout.ms", REQUEST_TIMEOUT_MS)
                .set("socket.timeout.ms", REQUEST_TIMEOUT_MS)
                .create()
                .expect("offset sampler");
            (group.to_string(), client)
        })
        .collect();
    let (history, stop) = (Arc::clone(history), Arc::clone(stop));
    std::thread::spawn(move || {
        while !stop.load(Ordering::Acquire) {
            for (group, client) in &clients {
                let mut wanted = TopicPartitionList::new();
                for partition in 0..PARTITIONS {
                    wanted.add_partition(TOPIC, partition);
                }
                let invoked_ms = clock.ms();
                let Ok(committed) =
                    client.committed_offsets(wanted, Duration::from_millis(SAMPLE_TIMEOUT_MS))
                else {
                    continue;
                };
                let at_ms = clock.ms();
                let mut history = history.lock().expect("group history");
                for element in committed.elements() {
                    let offset = match element.offset() {
                        _ if element.error().is_err() => continue,
                        Offset::Offset(offset) => offset,
                        Offset::Invalid => -1,
                        _ => continue,
                    };
                    history.samples.push(OffsetSample {
                        group: group.clone(),
                        partition: element.partition(),
                        offset,
                        invoked_ms,
                        at_ms,
                    });
                }
            }
            std::thread::sleep(Duration::from_millis(SAMPLE_INTERVAL_MS));
        }
    })
}

/// The workload's lines of the report.
pub fn report(stats: &GroupStats) -> String {
    format!(
        "consumer group: {} partition offsets committed, {} acknowledged; {} assignments in {} generations ({} of unknown generation); {} committed offsets sampled\n",
        stats.commits,
        stats.acked_commits,
        stats.assignments,
        stats.generations,
        stats.unknown_generation,
        stats.samples
    )
}
