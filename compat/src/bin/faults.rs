//! sluice-faults: a Jepsen-style fault run against a real cluster. Three to
//! five `sluice` processes, each in its own network namespace, take writes
//! from idempotent acks=all producers (librdkafka) and reads from a consumer,
//! while a seeded nemesis kills and restarts nodes, pauses them, isolates one
//! (a minority), isolates a partition's leader from its followers but not from
//! clients, isolates the metadata raft leader, makes one node's links lossy (iptables' random drop: this
//! kernel may lack netem, so there are no slow links yet), makes one node's
//! fsyncs fail with EIO or fills its data disk (each node's data dir is a
//! small tmpfs of its own, and every node runs with the fsync fault shim
//! preloaded: `sluice_compat::diskfaults`), drives a partition leader through
//! lagging followers into a bridge cut from the metadata leader (a lagging
//! bridge, `FaultKind::LaggingBridge`), and, with five
//! nodes, splits the cluster in halves joined by one node (a bridge). Everything is healed at the end, the cluster read back
//! whole, and the history checked (`sluice_compat::jepsen::checker`).
//!
//! Beside the producers, three more workloads run and are checked: consumers
//! in a group committing their positions (`group_workload`), a transactional
//! consume-transform-produce copy of the topic (`copy_workload`), and an admin
//! client creating topics and adding partitions (`admin_workload`).
//!
//! Beside the acks=all producers, an acks=1 producer writes to the same
//! topic: its writes may be lost with their leader, but a record once read
//! below the high watermark must never disappear, whatever its producer's
//! acks (`Anomaly::ReadLost`).
//!
//! Beside librdkafka, a second client writes into the topic: a producer
//! written with aiokafka, a pure-Python client (`python_workload`), whose
//! writes join the history and go through the same checks.
//!
//! `--self-test` runs the same schedule against a deliberately unsafe setting
//! (acks=1 producers, `min.insync.replicas=1`, unclean leader election) and
//! succeeds only if the checker finds the writes that setting loses: a checker
//! that finds nothing there could find nothing anywhere.
//!
//! Exit status 0 when the run found no anomaly (with `--self-test`: when it
//! found the loss); the last line says what it found. Needs root (network
//! namespaces, iptables, mount) and a C compiler (the fsync fault shim).
//!
//! Each run leaves its report in a folder of `--results`: `summary.txt`, each
//! node's log (`node-<id>.log`, warnings and errors, across its restarts), and
//! `timeline.png`, the writes acknowledged and failed per second and their
//! latency over the run, with every fault window in a lane of its kind
//! (`sluice_compat::jepsen::timeline`).

use std::fmt::Write as _;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use clap::Parser;
use rdkafka::consumer::Consumer;
use rdkafka::message::Message;
use rdkafka::producer::FutureRecord;
use sluice_compat::clockfaults::{preload_too, ClockShim};
use sluice_compat::cluster::{controller_leader_at, start_together, ClusterNode, FAST_CLUSTER};
use sluice_compat::diskfaults::{node_disk_bytes, StorageFaults};
use sluice_compat::faults::FaultCount;
use sluice_compat::jepsen::checker::{check, check_workloads, Anomaly, Findings};
use sluice_compat::jepsen::history::{value_of, FaultWindow, ObservedReads, Outcome, Read, Write};
use sluice_compat::jepsen::timeline;
use sluice_compat::netns::TestNetwork;
use sluice_compat::{assign_from_start, consumer, create_replicated_topic, producer};

#[path = "faults/admin_workload.rs"]
mod admin_workload;
#[path = "faults/copy_workload.rs"]
mod copy_workload;
#[path = "faults/group_workload.rs"]
mod group_workload;
#[path = "faults/python_workload.rs"]
mod python_workload;

/// The topic the workload writes.
const TOPIC: &str = "faults";
const PARTITIONS: i32 = 3;
/// Concurrent producers, each its own librdkafka client.
const PRODUCERS: u32 = 3;
/// The id of the safe run's acks=1 producer (after the others): its writes
/// promise nothing beyond their leader, but what a consumer read of them
/// was committed and must survive.
const LEADER_ACKED_PRODUCER: u32 = PRODUCERS;
/// Sends a producer keeps in flight.
const IN_FLIGHT: usize = 10;
/// A fault lasts between these, in ms: longer than a broker session
/// (`--broker-session-timeout-ms` below), so a cut-off leader is replaced.
const FAULT_MIN_MS: u64 = 4_000;
const FAULT_MAX_MS: u64 = 8_000;
/// Where each node serves its metrics (the raft leader is read there).
const METRICS_PORT: u16 = 9644;
/// The share of packets a lossy link drops, in percent.
const LOSSY_LINK_DROP_PERCENT: u32 = 30;
/// The quiet between two faults, in ms.
const QUIET_MIN_MS: u64 = 2_000;
const QUIET_MAX_MS: u64 = 4_000;
/// After the heal: how long the cluster has to be whole again (every node
/// serving, every replica in sync), and how long the workload then runs on.
const RECOVERY_WAIT_MS: u64 = 90_000;
const SETTLE_MS: u64 = 5_000;
/// How long the final read may take, in ms.
const FINAL_READ_WAIT_MS: u64 = 60_000;
/// How often the run logs how far it got and how much memory the harness
/// holds, in ms.
const STATUS_EVERY_MS: u64 = 60_000;
/// librdkafka's request and delivery bounds for the workload, in ms: a write
/// not acknowledged by then is recorded as failed (it may still be written).
const REQUEST_TIMEOUT_MS: &str = "5000";
const DELIVERY_TIMEOUT_MS: &str = "30000";

#[derive(Parser)]
#[command(about = "A Jepsen-style fault run against a real sluice cluster")]
struct Args {
    /// How long the nemesis runs, in seconds.
    #[arg(long, default_value_t = 60)]
    seconds: u64,
    /// The schedule's seed (random when not given; printed either way).
    #[arg(long)]
    seed: Option<u64>,
    /// Run the schedule against an unsafe setting; succeed only if the loss is found.
    #[arg(long)]
    self_test: bool,
    /// Nodes in the cluster (3 to 5).
    #[arg(long, default_value_t = 3)]
    nodes: usize,
    /// Where the report goes (a folder per run inside).
    #[arg(long, default_value = "target/faults")]
    results: PathBuf,
    /// The sluice binary (default: the one built beside this one).
    #[arg(long)]
    sluice: Option<PathBuf>,
    /// Draw only these fault kinds (comma-separated names as the log shows
    /// them, e.g. `fsync-fail,disk-full`), to exercise a few; the schedule
    /// opens with the first of them unless isolate-leader is among them.
    #[arg(long, value_delimiter = ',', value_parser = FaultKind::parse)]
    only: Vec<FaultKind>,
}

/// SplitMix64: the schedule's random numbers, the same for the same seed.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }

    fn between(&mut self, low: u64, high: u64) -> u64 {
        low + self.below(high - low + 1)
    }
}

/// Milliseconds since the run started, for every record of the history.
#[derive(Clone, Copy)]
struct RunClock(Instant);

impl RunClock {
    fn ms(self) -> u64 {
        self.0.elapsed().as_millis() as u64
    }

    fn log(self, line: &str) {
        let ms = self.ms();
        println!("[{:>4}.{:03}s] {line}", ms / 1000, ms % 1000);
    }
}

/// The kinds of fault the nemesis draws from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum FaultKind {
    Kill,
    Pause,
    IsolateNode,
    IsolateLeader,
    IsolateController,
    Bridge,
    LossyLinks,
    /// A node's fsyncs of its data files fail with EIO (`sluice_compat::diskfaults`).
    FsyncFail,
    /// A node's data disk is full.
    DiskFull,
    /// A node's link to the bridge slowed (tc's token bucket), to the other
    /// nodes and to clients alike.
    SlowLink,
    /// Every node's wall clock jumps by an offset of its own, forward or back
    /// (`sluice_compat::clockfaults`), then back to the right time.
    ClockJump,
    /// The sequence that loses read records when the high watermark is
    /// frozen on the wrong ISR (a pending expansion counted toward
    /// `min.insync.replicas`), while the acks=1 producer writes: a partition
    /// leader L, the metadata leader C and a third node O. (1) L is cut
    /// from O, which lags and leaves the ISR; (2) C's link is slowed (lossy
    /// where tc cannot slow), so C lags too and the ISR is {L} alone: the
    /// high watermark must freeze while L's log grows with acks=1 writes;
    /// (3) L is cut from C instead and O rejoined, so O (the bridge,
    /// reaching both) catches up and L asks to take it back into the ISR,
    /// which C cannot hear; L's session then ends and C elects from the ELR.
    LaggingBridge,
}

/// How long each of a lagging bridge's first two steps lasts, in ms: past
/// `--replica-lag-time-max-ms` (4 s in `FAST_CLUSTER`), so a replica cut
/// off or slowed in it leaves the ISR.
const LAGGING_STEP_MS: u64 = 5_000;

/// The share of packets a lagging bridge's lossy link drops where tc cannot
/// slow the link, in percent: enough that the replica falls behind.
const LAGGING_DROP_PERCENT: u32 = 70;

/// A slowed link passes this many kbit/s each way: a few times below what
/// the run's writes and their replication need, so queues build up.
const SLOW_LINK_RATE_KBIT: u32 = 512;

/// A slowed link queues packets for up to this long, in ms, before it drops
/// them: requests and replication arrive late, not only lost.
const SLOW_LINK_QUEUE_MS: u32 = 1_000;

/// A clock jump sets each node's wall clock up to this far off, in ms, either
/// way: well past every session and transaction timeout, well short of the
/// time-based retention (a week), which a real clock step of days would hit
/// on any Kafka broker.
const CLOCK_JUMP_MAX_MS: u64 = 300_000;

/// One fsync-fail fault in this many fails only the first fsync after it
/// starts (`FaultCount::First(1)`), the others every fsync while it lasts
/// (`FaultCount::Every`). Every is a disk that stays broken, which the broker
/// must meet by acknowledging nothing more: its first failure takes the
/// store offline and the node exits. First(1) is how Linux reports a failed
/// writeback: once, after which the next fsync succeeds although the pages
/// may be gone, so a broker that retried would acknowledge what is not on
/// disk; sluice does not retry, so it too must exit. The shim's budget is
/// per process, while Linux tells each open description of the file once:
/// when the one failure falls on an fsync the broker does not make itself
/// (sled's periodic flusher, which only logs it), the node runs on, although
/// on Linux the broker's own descriptor would still be told at its next
/// fsync. The harness log then says the node is still running.
const FSYNC_FAIL_REPORTED_ONCE_ONE_IN: u64 = 4;

impl FaultKind {
    fn name(self) -> &'static str {
        match self {
            FaultKind::Kill => "kill",
            FaultKind::Pause => "pause",
            FaultKind::IsolateNode => "isolate-node",
            FaultKind::IsolateLeader => "isolate-leader",
            FaultKind::IsolateController => "isolate-controller",
            FaultKind::Bridge => "bridge",
            FaultKind::LossyLinks => "lossy-links",
            FaultKind::FsyncFail => "fsync-fail",
            FaultKind::DiskFull => "disk-full",
            FaultKind::SlowLink => "slow-link",
            FaultKind::ClockJump => "clock-jump",
            FaultKind::LaggingBridge => "lagging-bridge",
        }
    }

    /// The kind called `name`, for `--only`.
    fn parse(name: &str) -> Result<FaultKind, String> {
        FaultKind::all(5)
            .into_iter()
            .find(|kind| kind.name() == name)
            .ok_or_else(|| {
                let names: Vec<_> = FaultKind::all(5).iter().map(|k| k.name()).collect();
                format!("no fault kind {name:?}; there are {}", names.join(", "))
            })
    }

    /// What the schedule draws from: all a cluster of `nodes` can be given,
    /// or those of `only` among them.
    fn drawn(nodes: usize, only: &[FaultKind]) -> Result<Vec<FaultKind>, String> {
        let kinds: Vec<FaultKind> = FaultKind::all(nodes)
            .into_iter()
            .filter(|kind| only.is_empty() || only.contains(kind))
            .collect();
        if kinds.is_empty() {
            return Err(format!(
                "--only leaves no fault kind a {nodes}-node cluster can be given"
            ));
        }
        Ok(kinds)
    }

    /// What a cluster of `nodes` can be given.
    fn all(nodes: usize) -> Vec<FaultKind> {
        let mut kinds = vec![
            FaultKind::Kill,
            FaultKind::Pause,
            FaultKind::IsolateNode,
            FaultKind::IsolateLeader,
            FaultKind::IsolateController,
            FaultKind::LossyLinks,
            FaultKind::FsyncFail,
            FaultKind::DiskFull,
            FaultKind::SlowLink,
            FaultKind::ClockJump,
            FaultKind::LaggingBridge,
        ];
        if nodes >= 5 {
            kinds.push(FaultKind::Bridge);
        }
        kinds
    }
}

/// The cluster under test, its network and its disks (the nodes are dropped,
/// so killed, before their disks are unmounted).
struct Cluster {
    nodes: Vec<ClusterNode>,
    storage: StorageFaults,
    clocks: ClockShim,
    network: TestNetwork,
    bootstrap: String,
    /// Whether this kernel slows links (tc's tbf).
    can_slow: bool,
}

impl Cluster {
    /// Starts `count` nodes, each on a data disk of its own (sized for a run
    /// of `seconds`) with the fsync and clock shims preloaded, their logs
    /// (stdout and stderr) going to `logs/node-<id>.log`.
    fn start(
        count: usize,
        root: &std::path::Path,
        binary: Option<&PathBuf>,
        logs: &std::path::Path,
        seconds: u64,
    ) -> Result<Cluster, String> {
        let network = TestNetwork::create(count);
        let mut nodes: Vec<ClusterNode> = (0..count)
            .map(|host| {
                let metrics = format!("{}:{METRICS_PORT}", network.address(host));
                let mut args = FAST_CLUSTER.to_vec();
                args.extend(["--metrics-listen", metrics.as_str()]);
                let mut node =
                    ClusterNode::in_network(host as i32 + 1, root, &network, host, &args);
                if let Some(binary) = binary {
                    node.binary = binary.clone();
                }
                node
            })
            .collect();
        let data_dirs: Vec<PathBuf> = nodes.iter().map(|n| n.data_dir.clone()).collect();
        let storage = StorageFaults::prepare(&data_dirs, node_disk_bytes(seconds))?;
        std::fs::create_dir_all(logs).map_err(|e| format!("{}: {e}", logs.display()))?;
        let clocks = ClockShim::build();
        for (host, node) in nodes.iter_mut().enumerate() {
            node.env = storage.node_env(host);
            node.env.extend(clocks.env_for(&host.to_string()));
            preload_too(&mut node.env, clocks.library());
            let log = logs.join(format!("node-{}.log", node.node_id));
            // A report folder is per seed: a log of an earlier run goes.
            let _ = std::fs::remove_file(&log);
            node.log = Some(log);
        }
        let nodes = start_together(nodes);
        let bootstrap = nodes
            .iter()
            .map(ClusterNode::bootstrap)
            .collect::<Vec<_>>()
            .join(",");
        let can_slow = network.can_slow();
        Ok(Cluster {
            nodes,
            storage,
            clocks,
            network,
            bootstrap,
            can_slow,
        })
    }

    /// (leader, in-sync replicas) of each partition of the topic, as the
    /// cluster reports it, or None while it cannot say.
    fn partitions(&self) -> Option<Vec<(i32, usize)>> {
        let client = consumer(&self.bootstrap, &[]);
        let metadata = client
            .fetch_metadata(Some(TOPIC), Duration::from_millis(2_000))
            .ok()?;
        let topic = metadata.topics().iter().find(|t| t.name() == TOPIC)?;
        let mut out: Vec<(i32, i32, usize)> = topic
            .partitions()
            .iter()
            .map(|p| (p.id(), p.leader(), p.isr().len()))
            .collect();
        out.sort_unstable();
        (out.len() == PARTITIONS as usize)
            .then(|| out.into_iter().map(|(_, l, i)| (l, i)).collect())
    }

    /// The host of the metadata raft leader, as the first node that answers
    /// its metrics endpoint knows it.
    fn controller_host(&self) -> Option<usize> {
        let leader = self
            .nodes
            .iter()
            .find_map(|node| controller_leader_at(&format!("{}:{METRICS_PORT}", node.host)))?;
        self.nodes.iter().position(|n| n.node_id == leader)
    }

    /// The host whose node leads `partition`, if known.
    fn leader_host(&self, partition: i32) -> Option<usize> {
        let leader = self.partitions()?.get(partition as usize)?.0;
        self.nodes.iter().position(|n| n.node_id == leader)
    }

    /// Waits until every node serves again (each fault heals itself before
    /// the next: links rejoined, paused nodes resumed, killed ones restarted).
    fn wait_whole(&mut self) {
        for node in &mut self.nodes {
            node.wait_serving();
        }
    }
}

/// What the run recorded.
#[derive(Default)]
struct History {
    writes: Mutex<Vec<Write>>,
    reads: Mutex<ObservedReads>,
    faults: Mutex<Vec<FaultWindow>>,
}

/// The settings of a run: safe (what we promise) or the self-test's unsafe one.
struct Setting {
    name: &'static str,
    topic_configs: Vec<(&'static str, &'static str)>,
    producer: Vec<(&'static str, &'static str)>,
    /// Whether an acks=1 producer writes beside the others.
    leader_acked_producer: bool,
}

impl Setting {
    fn safe() -> Setting {
        Setting {
            name: "acks=all, idempotent, min.insync.replicas=2",
            topic_configs: vec![("min.insync.replicas", "2")],
            producer: vec![("acks", "all"), ("enable.idempotence", "true")],
            leader_acked_producer: true,
        }
    }

    /// The acks=1 producer beside the safe run's: no retries, so that a
    /// retried send cannot write a value twice (it is not idempotent).
    fn leader_acked() -> Vec<(&'static str, &'static str)> {
        vec![
            ("acks", "1"),
            ("enable.idempotence", "false"),
            ("message.send.max.retries", "0"),
        ]
    }

    fn deliberately_unsafe() -> Setting {
        Setting {
            name: "acks=1, min.insync.replicas=1, unclean leader election (unsafe)",
            topic_configs: vec![
                ("min.insync.replicas", "1"),
                ("unclean.leader.election.enable", "true"),
            ],
            producer: vec![("acks", "1"), ("enable.idempotence", "false")],
            leader_acked_producer: false,
        }
    }
}

/// One producer writing `<producer>-<seq>` to partition `seq % PARTITIONS`
/// until stopped, a window of sends at a time, with `config`; `by_leader`:
/// its acknowledgements promise only that the leader had the write (acks=1
/// beside a safe run's producers).
fn spawn_producer(
    id: u32,
    bootstrap: &str,
    mut config: Vec<(&'static str, &'static str)>,
    by_leader: bool,
    history: &Arc<History>,
    stop: &Arc<AtomicBool>,
    clock: RunClock,
) -> JoinHandle<()> {
    config.extend([
        ("request.timeout.ms", REQUEST_TIMEOUT_MS),
        ("socket.timeout.ms", REQUEST_TIMEOUT_MS),
        ("message.timeout.ms", DELIVERY_TIMEOUT_MS),
        ("linger.ms", "2"),
    ]);
    let producer = producer(bootstrap, &config);
    let (history, stop) = (Arc::clone(history), Arc::clone(stop));
    std::thread::spawn(move || {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("runtime");
        let mut seq = 0u64;
        while !stop.load(Ordering::Acquire) {
            let window: Vec<_> = (0..IN_FLIGHT)
                .map(|_| {
                    let (this, value) = (seq, value_of(id, seq));
                    seq += 1;
                    let partition = (this % PARTITIONS as u64) as i32;
                    let key = this.to_string();
                    let invoked_ms = clock.ms();
                    let sent = producer.send_result(
                        FutureRecord::to(TOPIC)
                            .partition(partition)
                            .key(&key)
                            .payload(&value),
                    );
                    (this, partition, invoked_ms, sent.map_err(|(e, _)| e))
                })
                .collect();
            for (this, partition, invoked_ms, sent) in window {
                let outcome = match sent {
                    Err(error) => Outcome::Failed(error.to_string()),
                    Ok(delivery) => match runtime.block_on(delivery) {
                        Ok(Ok(delivered)) if by_leader => Outcome::AckedByLeader {
                            offset: delivered.offset,
                        },
                        Ok(Ok(delivered)) => Outcome::Acked {
                            offset: delivered.offset,
                        },
                        Ok(Err((error, _))) => Outcome::Failed(error.to_string()),
                        Err(_) => Outcome::Failed("delivery report dropped".to_string()),
                    },
                };
                history.writes.lock().expect("history").push(Write {
                    producer: id,
                    seq: this,
                    partition,
                    invoked_ms,
                    completed_ms: clock.ms(),
                    outcome,
                });
            }
        }
    })
}

/// A consumer reading every partition from the start while the run goes on,
/// recording what it sees (so that a value later truncated away is caught),
/// each record once; it logs each time a partition's position goes back.
fn spawn_reader(
    bootstrap: &str,
    history: &Arc<History>,
    stop: &Arc<AtomicBool>,
    clock: RunClock,
) -> JoinHandle<()> {
    let reader = consumer(
        bootstrap,
        &[
            ("request.timeout.ms", REQUEST_TIMEOUT_MS),
            ("socket.timeout.ms", REQUEST_TIMEOUT_MS),
        ],
    );
    assign_from_start(&reader, TOPIC, PARTITIONS);
    let (history, stop) = (Arc::clone(history), Arc::clone(stop));
    std::thread::spawn(move || {
        let mut next = vec![0i64; PARTITIONS as usize];
        while !stop.load(Ordering::Acquire) {
            if let Some(Ok(message)) = reader.poll(Duration::from_millis(100)) {
                let (partition, offset) = (message.partition(), message.offset());
                if let Some(next) = next.get_mut(partition as usize) {
                    if offset < *next {
                        clock.log(&format!(
                            "reader: partition {partition} went back from offset {} to {offset}",
                            *next
                        ));
                    }
                    *next = offset + 1;
                }
                let value = String::from_utf8_lossy(message.payload().unwrap_or_default());
                history.reads.lock().expect("history").record(Read {
                    partition,
                    offset,
                    value: value.into_owned(),
                    at_ms: clock.ms(),
                });
            }
        }
    })
}

/// One fault: applied, held for its duration, healed; returns its window.
fn inject(cluster: &mut Cluster, kind: FaultKind, rng: &mut Rng, clock: RunClock) -> FaultWindow {
    let count = cluster.nodes.len();
    let duration = Duration::from_millis(rng.between(FAULT_MIN_MS, FAULT_MAX_MS));
    let host = rng.below(count as u64) as usize;
    let start_ms = clock.ms();
    let target = match kind {
        FaultKind::Kill => {
            let node = &mut cluster.nodes[host];
            let target = format!("node {}", node.node_id);
            clock.log(&format!("kill -9 {target}"));
            node.kill9();
            std::thread::sleep(duration);
            clock.log(&format!("restart {target}"));
            node.spawn();
            target
        }
        FaultKind::Pause => {
            let node = &mut cluster.nodes[host];
            let target = format!("node {}", node.node_id);
            clock.log(&format!("SIGSTOP {target}"));
            node.signal(true);
            std::thread::sleep(duration);
            clock.log(&format!("SIGCONT {target}"));
            node.signal(false);
            target
        }
        FaultKind::IsolateNode | FaultKind::IsolateLeader | FaultKind::IsolateController => {
            let (host, target) = match kind {
                FaultKind::IsolateController => match cluster.controller_host() {
                    Some(leader) => (
                        leader,
                        format!(
                            "node {} (the metadata raft leader)",
                            cluster.nodes[leader].node_id
                        ),
                    ),
                    None => (host, format!("node {} (no raft leader known)", host + 1)),
                },
                FaultKind::IsolateLeader => {
                    let partition = rng.below(PARTITIONS as u64) as i32;
                    match cluster.leader_host(partition) {
                        Some(leader) => (
                            leader,
                            format!(
                                "node {} (leader of {TOPIC}-{partition})",
                                cluster.nodes[leader].node_id
                            ),
                        ),
                        None => (host, format!("node {} (no leader known)", host + 1)),
                    }
                }
                _ => (host, format!("node {}", cluster.nodes[host].node_id)),
            };
            clock.log(&format!(
                "{}: {target} cut from every other node, not from clients",
                kind.name()
            ));
            cluster.network.isolate(host);
            std::thread::sleep(duration);
            clock.log(&format!("heal {target}"));
            cluster.network.rejoin(host);
            target
        }
        FaultKind::LossyLinks => {
            let target = format!(
                "node {}: {LOSSY_LINK_DROP_PERCENT}% of packets to and from the others dropped",
                cluster.nodes[host].node_id
            );
            clock.log(&format!("lossy links: {target}"));
            cluster.network.degrade(host, LOSSY_LINK_DROP_PERCENT);
            std::thread::sleep(duration);
            clock.log(&format!(
                "heal node {}'s links",
                cluster.nodes[host].node_id
            ));
            cluster.network.restore(host, LOSSY_LINK_DROP_PERCENT);
            target
        }
        FaultKind::FsyncFail => {
            let count = if rng.below(FSYNC_FAIL_REPORTED_ONCE_ONE_IN) == 0 {
                FaultCount::First(1)
            } else {
                FaultCount::Every
            };
            let node = &mut cluster.nodes[host];
            let log = |line: &str| clock.log(line);
            cluster
                .storage
                .fsync_fail(node, host, count, duration, &log)
        }
        FaultKind::DiskFull => {
            let node = &mut cluster.nodes[host];
            let log = |line: &str| clock.log(line);
            cluster.storage.disk_full(node, host, duration, &log)
        }
        FaultKind::SlowLink => {
            let target = format!(
                "node {}: its link slowed to {SLOW_LINK_RATE_KBIT} kbit/s each way, \
                 queueing up to {SLOW_LINK_QUEUE_MS} ms",
                cluster.nodes[host].node_id
            );
            clock.log(&format!("slow link: {target}"));
            cluster
                .network
                .slow(host, SLOW_LINK_RATE_KBIT, SLOW_LINK_QUEUE_MS);
            std::thread::sleep(duration);
            clock.log(&format!("heal node {}'s link", cluster.nodes[host].node_id));
            cluster.network.unslow(host);
            target
        }
        FaultKind::ClockJump => {
            let offsets: Vec<i64> = (0..count)
                .map(|_| rng.between(0, 2 * CLOCK_JUMP_MAX_MS) as i64 - CLOCK_JUMP_MAX_MS as i64)
                .collect();
            let target = cluster
                .nodes
                .iter()
                .zip(&offsets)
                .map(|(node, offset)| format!("node {} {offset:+} ms", node.node_id))
                .collect::<Vec<_>>()
                .join(", ");
            clock.log(&format!("clock jump: {target}"));
            for (host, offset) in offsets.iter().enumerate() {
                cluster.clocks.set_offset_ms(&host.to_string(), *offset);
            }
            std::thread::sleep(duration);
            clock.log("heal the clocks: every node's back to the right time");
            for host in 0..count {
                cluster.clocks.set_offset_ms(&host.to_string(), 0);
            }
            target
        }
        FaultKind::LaggingBridge => lagging_bridge(cluster, rng, duration, clock),
        FaultKind::Bridge => {
            // Halves {0, 1} and {3, 4}, both joined to host 2 only.
            let target = "nodes 1,2 | 3 | 4,5 (node 3 the bridge)".to_string();
            clock.log(&format!("bridge: {target}"));
            let cuts = [(0, 3), (0, 4), (1, 3), (1, 4)];
            for (a, b) in cuts {
                cluster.network.cut(a, b);
            }
            std::thread::sleep(duration);
            clock.log("heal the bridge");
            for (a, b) in cuts {
                cluster.network.heal(a, b);
            }
            target
        }
    };
    FaultWindow {
        kind: kind.name().to_string(),
        target,
        start_ms,
        end_ms: clock.ms(),
    }
}

/// `FaultKind::LaggingBridge`, its last step held for `duration`; returns
/// what it hit.
fn lagging_bridge(
    cluster: &mut Cluster,
    rng: &mut Rng,
    duration: Duration,
    clock: RunClock,
) -> String {
    let count = cluster.nodes.len();
    let controller = cluster.controller_host();
    // A partition led by another node than the metadata leader, if any.
    let first = rng.below(PARTITIONS as u64) as i32;
    let leaders: Vec<Option<usize>> = (0..PARTITIONS)
        .map(|i| cluster.leader_host((first + i) % PARTITIONS))
        .collect();
    let (partition, leader) = leaders
        .iter()
        .enumerate()
        .find_map(|(i, leader)| leader.filter(|l| Some(*l) != controller).map(|l| (i, l)))
        .or_else(|| leaders[0].map(|l| (0, l)))
        .map(|(i, l)| ((first + i as i32) % PARTITIONS, l))
        .unwrap_or((first, rng.below(count as u64) as usize));
    let c = controller
        .filter(|&c| c != leader)
        .unwrap_or((leader + 1) % count);
    let others: Vec<usize> = (0..count).filter(|&h| h != leader && h != c).collect();
    let o = others[rng.below(others.len() as u64) as usize];
    let id = |host: usize| cluster.nodes[host].node_id;
    let target = format!(
        "{TOPIC}-{partition}: leader node {}, metadata leader node {}, third node {}",
        id(leader),
        id(c),
        id(o)
    );
    clock.log(&format!(
        "lagging bridge ({target}): cut node {} from node {}",
        id(leader),
        id(o)
    ));
    cluster.network.cut(leader, o);
    std::thread::sleep(Duration::from_millis(LAGGING_STEP_MS));
    if cluster.can_slow {
        clock.log(&format!("lagging bridge: slow node {}'s link", id(c)));
        cluster
            .network
            .slow(c, SLOW_LINK_RATE_KBIT, SLOW_LINK_QUEUE_MS);
    } else {
        clock.log(&format!(
            "lagging bridge: drop {LAGGING_DROP_PERCENT}% of node {}'s packets",
            id(c)
        ));
        cluster.network.degrade(c, LAGGING_DROP_PERCENT);
    }
    std::thread::sleep(Duration::from_millis(LAGGING_STEP_MS));
    clock.log(&format!(
        "lagging bridge: node {} rejoins node {} and is cut from node {}; node {}'s link heals",
        id(leader),
        id(o),
        id(c),
        id(c)
    ));
    cluster.network.cut(leader, c);
    cluster.network.heal(leader, o);
    if cluster.can_slow {
        cluster.network.unslow(c);
    } else {
        cluster.network.restore(c, LAGGING_DROP_PERCENT);
    }
    std::thread::sleep(duration);
    clock.log(&format!("heal the lagging bridge ({target})"));
    cluster.network.heal(leader, c);
    target
}

/// Reads every partition from its start to its high watermark.
fn final_read(bootstrap: &str, clock: RunClock) -> Result<Vec<Read>, String> {
    let reader = consumer(bootstrap, &[("isolation.level", "read_uncommitted")]);
    let deadline = Instant::now() + Duration::from_millis(FINAL_READ_WAIT_MS);
    let mut ends = Vec::new();
    for partition in 0..PARTITIONS {
        // A new leader answers OFFSET_NOT_AVAILABLE until its high watermark
        // caught up (KIP-207), as a client is told to retry.
        let high = loop {
            match reader.fetch_watermarks(TOPIC, partition, Duration::from_millis(10_000)) {
                Ok((_, high)) => break high,
                Err(error) if Instant::now() > deadline => {
                    return Err(format!("watermarks of {TOPIC}-{partition}: {error}"))
                }
                Err(_) => std::thread::sleep(Duration::from_millis(250)),
            }
        };
        ends.push(high);
    }
    assign_from_start(&reader, TOPIC, PARTITIONS);
    let mut next: Vec<i64> = vec![0; PARTITIONS as usize];
    let mut reads = Vec::new();
    while next.iter().zip(&ends).any(|(n, end)| n < end) {
        if Instant::now() > deadline {
            return Err(format!("the final read reached {next:?} of {ends:?}"));
        }
        if let Some(Ok(message)) = reader.poll(Duration::from_millis(100)) {
            let partition = message.partition();
            next[partition as usize] = message.offset() + 1;
            reads.push(Read {
                partition,
                offset: message.offset(),
                value: String::from_utf8_lossy(message.payload().unwrap_or_default()).into_owned(),
                at_ms: clock.ms(),
            });
        }
    }
    Ok(reads)
}

/// The folder of a run's report (the nodes' logs go there as the run goes).
fn report_dir(args: &Args, seed: u64) -> PathBuf {
    let mode = if args.self_test { "self-test" } else { "run" };
    args.results.join(format!("{mode}-seed-{seed}"))
}

/// One run of the schedule under `setting`: its findings and report, and
/// the writes and faults for the timeline.
fn run(
    args: &Args,
    seed: u64,
    setting: &Setting,
) -> Result<(Findings, String, Vec<Write>, Vec<FaultWindow>), String> {
    let clock = RunClock(Instant::now());
    let mut kinds = FaultKind::drawn(args.nodes, &args.only)?;
    // Before the cluster starts: a missing virtualenv fails the run at once.
    let python = python_workload::Interpreter::find()?;
    let root = tempfile::tempdir().map_err(|e| e.to_string())?;
    println!(
        "faults: {} nodes, {} s of faults, seed {seed}, {}",
        args.nodes, args.seconds, setting.name
    );
    let mut cluster = Cluster::start(
        args.nodes,
        root.path(),
        args.sluice.as_ref(),
        &report_dir(args, seed),
        args.seconds,
    )?;
    clock.log(&format!("cluster serving at {}", cluster.bootstrap));
    if kinds.contains(&FaultKind::SlowLink) && !cluster.can_slow {
        clock.log("this kernel has no tc token bucket (tbf): no slow-link faults");
        kinds.retain(|kind| *kind != FaultKind::SlowLink);
        if kinds.is_empty() {
            return Err("no fault kind left to draw".to_string());
        }
    }
    let replicas = args.nodes.min(3) as i32;
    create_replicated_topic(
        &cluster.bootstrap,
        TOPIC,
        PARTITIONS,
        replicas,
        &setting.topic_configs,
    );
    copy_workload::create_output(&cluster.bootstrap, replicas);
    wait_until("every partition has a leader", RECOVERY_WAIT_MS, || {
        cluster
            .partitions()
            .is_some_and(|ps| ps.iter().all(|(leader, _)| *leader >= 0))
    })?;

    let history = Arc::new(History::default());
    let stop_writes = Arc::new(AtomicBool::new(false));
    let stop_reads = Arc::new(AtomicBool::new(false));
    let mut producers: Vec<_> = (0..PRODUCERS)
        .map(|id| {
            spawn_producer(
                id,
                &cluster.bootstrap,
                setting.producer.clone(),
                false,
                &history,
                &stop_writes,
                clock,
            )
        })
        .collect();
    if setting.leader_acked_producer {
        producers.push(spawn_producer(
            LEADER_ACKED_PRODUCER,
            &cluster.bootstrap,
            Setting::leader_acked(),
            true,
            &history,
            &stop_writes,
            clock,
        ));
    }
    let python = python.start(
        &cluster.bootstrap,
        root.path(),
        &report_dir(args, seed),
        clock,
    )?;
    let reader = spawn_reader(&cluster.bootstrap, &history, &stop_reads, clock);
    let group = group_workload::GroupWorkload::start(
        &cluster.bootstrap,
        &[group_workload::GROUP, copy_workload::GROUP],
        clock,
    );
    let copy = copy_workload::CopyWorkload::start(&cluster.bootstrap, group.history(), clock);
    let admin = admin_workload::AdminWorkload::start(&cluster.bootstrap, replicas, seed, clock);

    let mut rng = Rng(seed);
    let nemesis_end = Duration::from_secs(args.seconds);
    // Every schedule opens with a leader cut off from its followers, the
    // fault an unsafe setting loses writes to (unless `--only` leaves it
    // out), then draws at random.
    let mut next_kind = if kinds.contains(&FaultKind::IsolateLeader) {
        FaultKind::IsolateLeader
    } else {
        kinds[0]
    };
    let mut status_due_ms = STATUS_EVERY_MS;
    while clock.0.elapsed() < nemesis_end {
        std::thread::sleep(Duration::from_millis(
            rng.between(QUIET_MIN_MS, QUIET_MAX_MS),
        ));
        let window = inject(&mut cluster, next_kind, &mut rng, clock);
        history.faults.lock().expect("history").push(window);
        next_kind = kinds[rng.below(kinds.len() as u64) as usize];
        if clock.ms() >= status_due_ms {
            status_due_ms = clock.ms() + STATUS_EVERY_MS;
            clock.log(&status(&history));
        }
    }

    clock.log("every fault healed; waiting for the cluster to be whole");
    cluster.wait_whole();
    let whole = wait_until("every replica back in sync", RECOVERY_WAIT_MS, || {
        cluster.partitions().is_some_and(|ps| {
            ps.iter()
                .all(|(leader, isr)| *leader >= 0 && *isr == replicas as usize)
        })
    });
    // (leader, ISR size) of each partition, in partition order, when the
    // cluster did not become whole: a liveness failure, reported as such.
    let not_whole = whole.as_ref().err().map(|error| {
        clock.log(error);
        let state = format!(
            "partitions of {TOPIC} as (leader, in-sync replicas): {:?}",
            cluster.partitions()
        );
        clock.log(&state);
        state
    });
    std::thread::sleep(Duration::from_millis(SETTLE_MS));
    stop_writes.store(true, Ordering::Release);
    // Stopped beside the librdkafka producers (which finish their windows
    // meanwhile); its writes join theirs before the check.
    let python = python.stop(clock)?;
    history
        .writes
        .lock()
        .expect("history")
        .extend(python.writes.iter().cloned());
    for producer in producers {
        producer
            .join()
            .map_err(|_| "a producer panicked".to_string())?;
    }
    stop_reads.store(true, Ordering::Release);
    reader
        .join()
        .map_err(|_| "the reader panicked".to_string())?;
    let end_ms = clock.ms();
    clock.log("final read");
    let final_reads = final_read(&cluster.bootstrap, clock)?;
    let copy_history = copy.finish(&cluster.bootstrap, &final_reads, clock);
    let group_history = group.stop(clock)?;
    let admin_history = admin.finish(&cluster.bootstrap, clock);

    let writes = history.writes.lock().expect("history").clone();
    let reads = history.reads.lock().expect("history").reads().to_vec();
    let faults = history.faults.lock().expect("history").clone();
    let mut findings = check(&writes, &reads, &final_reads, &faults, end_ms);
    check_workloads(&mut findings, &final_reads, &group_history, &copy_history);
    sluice_compat::jepsen::admin::check_into(&mut findings, &admin_history);
    if let Some(state) = not_whole {
        findings.anomalies.push(Anomaly::NotRecovered {
            waited_ms: RECOVERY_WAIT_MS,
            state,
        });
    }
    let summary = summary(
        seed,
        setting,
        &faults,
        &findings,
        whole.is_ok(),
        &python.stats,
    );
    Ok((findings, summary, writes, faults))
}

/// How far the run got: its writes, the reader's records, and the harness's
/// own resident memory (from `/proc/self/status`).
fn status(history: &History) -> String {
    let (attempted, acked) = {
        let writes = history.writes.lock().expect("history");
        let acked = writes
            .iter()
            .filter(|w| {
                matches!(
                    w.outcome,
                    Outcome::Acked { .. } | Outcome::AckedByLeader { .. }
                )
            })
            .count();
        (writes.len(), acked)
    };
    let (records, repeats) = {
        let reads = history.reads.lock().expect("history");
        (reads.reads().len(), reads.repeats())
    };
    let rss_mib = std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|status| {
            status
                .lines()
                .find_map(|line| line.strip_prefix("VmRSS:"))
                .and_then(|kb| kb.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        })
        .map_or_else(|| "unknown".to_string(), |kb| format!("{} MiB", kb / 1024));
    format!(
        "status: {attempted} writes ({acked} acknowledged), {records} records read ({repeats} read again), harness resident memory {rss_mib}"
    )
}

/// Polls `done` until it holds or `limit_ms` passed.
fn wait_until(what: &str, limit_ms: u64, mut done: impl FnMut() -> bool) -> Result<(), String> {
    let deadline = Instant::now() + Duration::from_millis(limit_ms);
    while !done() {
        if Instant::now() > deadline {
            return Err(format!("not within {limit_ms} ms: {what}"));
        }
        std::thread::sleep(Duration::from_millis(250));
    }
    Ok(())
}

/// The run's text report.
fn summary(
    seed: u64,
    setting: &Setting,
    faults: &[FaultWindow],
    findings: &Findings,
    recovered: bool,
    python: &python_workload::PythonStats,
) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "seed: {seed}");
    let _ = writeln!(out, "setting: {}", setting.name);
    let _ = writeln!(out, "faults: {}", faults.len());
    for fault in faults {
        let _ = writeln!(
            out,
            "  {:>8} ms .. {:>8} ms  {:<15} {}",
            fault.start_ms, fault.end_ms, fault.kind, fault.target
        );
    }
    let _ = writeln!(
        out,
        "writes: {} attempted, {} acknowledged, {} failed or timed out; final read {} records",
        findings.attempted, findings.acked, findings.failed, findings.final_records
    );
    out.push_str(&python_workload::report(python, findings));
    let _ = writeln!(
        out,
        "recovered after the heal: {}",
        if recovered { "yes" } else { "no (see the log)" }
    );
    let _ = writeln!(
        out,
        "availability: longest stretch without an acknowledged write {} ms",
        findings.longest_gap_ms
    );
    for (kind, gap) in &findings.longest_gap_by_fault_ms {
        let _ = writeln!(out, "  during {kind}: {gap} ms");
    }
    let _ = writeln!(
        out,
        "timeline: timeline.png beside this report (writes and latency over the run, a lane per fault kind)"
    );
    out.push_str(&group_workload::report(&findings.group));
    out.push_str(&copy_workload::report(&findings.copy));
    out.push_str(&admin_workload::report(&findings.admin));
    let _ = writeln!(out, "anomalies: {}", findings.anomalies.len());
    for (kind, count) in findings.by_kind() {
        let _ = writeln!(out, "  {kind}: {count}");
    }
    for anomaly in findings.anomalies.iter().take(20) {
        let _ = writeln!(out, "  {anomaly}");
    }
    out
}

fn main() -> ExitCode {
    let args = Args::parse();
    if !(3..=5).contains(&args.nodes) {
        eprintln!("faults: --nodes is 3 to 5");
        return ExitCode::from(2);
    }
    let seed = args.seed.unwrap_or_else(|| {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as u64)
    });
    let setting = if args.self_test {
        Setting::deliberately_unsafe()
    } else {
        Setting::safe()
    };
    let (findings, report, writes, faults) = match run(&args, seed, &setting) {
        Ok(done) => done,
        Err(error) => {
            println!("faults: the run could not finish (seed {seed}): {error}");
            return ExitCode::FAILURE;
        }
    };
    let mode = if args.self_test { "self-test" } else { "run" };
    let dir = args.results.join(format!("{mode}-seed-{seed}"));
    if let Err(error) = std::fs::create_dir_all(&dir)
        .and_then(|()| std::fs::write(dir.join("summary.txt"), &report))
    {
        println!(
            "faults: cannot write the report to {}: {error}",
            dir.display()
        );
    }
    if let Err(error) = timeline::render(&writes, &faults, &dir.join("timeline.png")) {
        println!("faults: cannot draw the timeline: {error}");
    }
    print!("{report}");
    let counts = findings
        .by_kind()
        .iter()
        .map(|(kind, count)| format!("{kind} {count}"))
        .collect::<Vec<_>>()
        .join(", ");
    if args.self_test {
        if findings.found_loss() {
            println!(
                "faults self-test: found the unsafe setting's loss ({counts}; seed {seed}, report in {})",
                dir.display()
            );
            ExitCode::SUCCESS
        } else {
            println!("faults self-test FAILED: the unsafe setting lost nothing the checker saw (seed {seed})");
            ExitCode::FAILURE
        }
    } else if findings.anomalies.is_empty() {
        println!(
            "faults: no anomaly in {} acknowledged writes (seed {seed}, report in {})",
            findings.acked,
            dir.display()
        );
        ExitCode::SUCCESS
    } else {
        println!(
            "faults FAILED: {} anomalies ({counts}; seed {seed}, report in {})",
            findings.anomalies.len(),
            dir.display()
        );
        ExitCode::FAILURE
    }
}
