//! The nemesis: one function per kind of fault (`FaultKind`), each applying
//! its fault to the cluster, holding it for the drawn duration and healing it
//! before it returns, so that faults never overlap and the cluster is whole
//! again between two of them. `inject` draws the duration and the node and
//! hands them to the kind's function; what it returns is the fault's window
//! in the history. The mechanisms behind the faults are its parts: `shim`
//! (the fsync fault shim's glue), `disk` (failing fsyncs and full disks,
//! one node at a time) and `clock` (wall-clock jumps).

pub mod clock;
pub mod disk;
pub mod shim;

use std::time::Duration;

use super::cluster::Cluster;
use super::history::FaultWindow;
use super::schedule::{Rng, RunClock};
use super::workload::{PARTITIONS, TOPIC};
use shim::FaultCount;

/// A fault lasts between these, in ms: longer than a broker session
/// (`--broker-session-timeout-ms` of `FAST_CLUSTER`), so a cut-off leader is
/// replaced.
const FAULT_MIN_MS: u64 = 4_000;
const FAULT_MAX_MS: u64 = 8_000;
/// The share of packets a lossy link drops, in percent.
const LOSSY_LINK_DROP_PERCENT: u32 = 30;

/// The kinds of fault the nemesis draws from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FaultKind {
    Kill,
    Pause,
    IsolateNode,
    IsolateLeader,
    IsolateController,
    Bridge,
    LossyLinks,
    /// A node's fsyncs of its data files fail with EIO (`disk`).
    FsyncFail,
    /// A node's data disk is full.
    DiskFull,
    /// A node's link to the bridge slowed (tc's token bucket), to the other
    /// nodes and to clients alike.
    SlowLink,
    /// Every node's wall clock jumps by an offset of its own, forward or back
    /// (`clock`), then back to the right time.
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
    pub fn name(self) -> &'static str {
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
    pub fn parse(name: &str) -> Result<FaultKind, String> {
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
    pub fn drawn(nodes: usize, only: &[FaultKind]) -> Result<Vec<FaultKind>, String> {
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

/// One fault: applied, held for its duration, healed; returns its window.
/// The duration and the node are drawn first, whatever the kind, so that one
/// seed gives one schedule.
pub fn inject(
    cluster: &mut Cluster,
    kind: FaultKind,
    rng: &mut Rng,
    clock: RunClock,
) -> FaultWindow {
    let duration = Duration::from_millis(rng.between(FAULT_MIN_MS, FAULT_MAX_MS));
    let host = rng.below(cluster.nodes.len() as u64) as usize;
    let start_ms = clock.ms();
    let target = match kind {
        FaultKind::Kill => kill(cluster, host, duration, clock),
        FaultKind::Pause => pause(cluster, host, duration, clock),
        FaultKind::IsolateNode | FaultKind::IsolateLeader | FaultKind::IsolateController => {
            isolate(cluster, kind, host, rng, duration, clock)
        }
        FaultKind::LossyLinks => lossy_links(cluster, host, duration, clock),
        FaultKind::FsyncFail => fsync_fail(cluster, host, rng, duration, clock),
        FaultKind::DiskFull => disk_full(cluster, host, duration, clock),
        FaultKind::SlowLink => slow_link(cluster, host, duration, clock),
        FaultKind::ClockJump => clock_jump(cluster, rng, duration, clock),
        FaultKind::LaggingBridge => lagging_bridge(cluster, rng, duration, clock),
        FaultKind::Bridge => bridge(cluster, duration, clock),
    };
    FaultWindow {
        kind: kind.name().to_string(),
        target,
        start_ms,
        end_ms: clock.ms(),
    }
}

/// `FaultKind::Kill`: SIGKILL, then a restart on the same data.
fn kill(cluster: &mut Cluster, host: usize, duration: Duration, clock: RunClock) -> String {
    let node = &mut cluster.nodes[host];
    let target = format!("node {}", node.node_id);
    clock.log(&format!("kill -9 {target}"));
    node.kill9();
    std::thread::sleep(duration);
    clock.log(&format!("restart {target}"));
    node.spawn();
    target
}

/// `FaultKind::Pause`: SIGSTOP, then SIGCONT.
fn pause(cluster: &mut Cluster, host: usize, duration: Duration, clock: RunClock) -> String {
    let node = &mut cluster.nodes[host];
    let target = format!("node {}", node.node_id);
    clock.log(&format!("SIGSTOP {target}"));
    node.signal(true);
    std::thread::sleep(duration);
    clock.log(&format!("SIGCONT {target}"));
    node.signal(false);
    target
}

/// `FaultKind::IsolateNode`, `IsolateLeader` and `IsolateController`: one
/// node (the drawn one, a partition's leader, or the metadata raft leader)
/// cut from every other node, not from clients.
fn isolate(
    cluster: &mut Cluster,
    kind: FaultKind,
    host: usize,
    rng: &mut Rng,
    duration: Duration,
    clock: RunClock,
) -> String {
    let (host, target) = isolated(cluster, kind, host, rng);
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

/// The node an isolation of `kind` cuts off, and how the log names it; the
/// drawn `host` where the cluster cannot say which node leads.
fn isolated(cluster: &Cluster, kind: FaultKind, host: usize, rng: &mut Rng) -> (usize, String) {
    match kind {
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
    }
}

/// `FaultKind::LossyLinks`: a share of one node's packets to and from the
/// others dropped.
fn lossy_links(cluster: &mut Cluster, host: usize, duration: Duration, clock: RunClock) -> String {
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

/// `FaultKind::FsyncFail`: one node's fsyncs fail with EIO, every one or
/// only the first (`FSYNC_FAIL_REPORTED_ONCE_ONE_IN`).
fn fsync_fail(
    cluster: &mut Cluster,
    host: usize,
    rng: &mut Rng,
    duration: Duration,
    clock: RunClock,
) -> String {
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

/// `FaultKind::DiskFull`: one node's data disk filled up.
fn disk_full(cluster: &mut Cluster, host: usize, duration: Duration, clock: RunClock) -> String {
    let node = &mut cluster.nodes[host];
    let log = |line: &str| clock.log(line);
    cluster.storage.disk_full(node, host, duration, &log)
}

/// `FaultKind::SlowLink`: one node's link slowed and queued.
fn slow_link(cluster: &mut Cluster, host: usize, duration: Duration, clock: RunClock) -> String {
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

/// `FaultKind::ClockJump`: every node's wall clock off by an offset of its
/// own, then right again.
fn clock_jump(cluster: &mut Cluster, rng: &mut Rng, duration: Duration, clock: RunClock) -> String {
    let count = cluster.nodes.len();
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

/// `FaultKind::Bridge` (five nodes): halves {0, 1} and {3, 4}, both joined
/// to host 2 only.
fn bridge(cluster: &mut Cluster, duration: Duration, clock: RunClock) -> String {
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
