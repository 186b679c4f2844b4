//! The transport over a seeded, simulated network: three nodes, each serving
//! and holding peers to the other two, under partitions, held and delayed
//! messages, and crashes. Every call's outcome is checked as it arrives: an
//! answer is the echo of its own request, and no call outlives its deadline by
//! more than a tick.
//!
//! Each test prints its seed. `SLUICE_SIM_SEED=<n>` replays one seed;
//! `SLUICE_SIM_SEEDS=<n>` runs the randomized schedule over `n` seeds, each
//! for longer.
#![allow(clippy::unwrap_used)]

use std::collections::BTreeMap;
use std::collections::HashMap;
use std::sync::mpsc as std_mpsc;
use std::sync::Arc;
use std::sync::Mutex;
use std::time::Duration;

use bytes::Bytes;
use tokio::sync::mpsc;
use tokio::time::Instant;

use super::sim::SimNet;
use super::transport::Transport;
use super::ClientIdentity;
use super::ClusterId;
use super::Handler;
use super::NetConfig;
use super::NetError;
use super::NodeId;
use super::Peer;
use super::ServerIdentity;
use crate::random::sim::{long_run, seeds, SplitMix};

const CLUSTER: &str = "cluster-sim";
const PORT: u16 = 7000;
const ECHO: u8 = 1;
const NODES: [NodeId; 3] = [1, 2, 3];

/// One simulated step.
const TICK: Duration = Duration::from_millis(1);
/// The deadline of every call unless a scenario says otherwise.
const RPC_TIMEOUT: Duration = Duration::from_millis(200);

fn config() -> NetConfig {
    NetConfig {
        connect_timeout: Duration::from_millis(100),
        handshake_timeout: Duration::from_millis(100),
        rpc_timeout: RPC_TIMEOUT,
        bulk_rpc_timeout: RPC_TIMEOUT,
        in_flight_max: 8,
    }
}

fn host(node: NodeId) -> String {
    format!("node{node}")
}

fn address(node: NodeId) -> String {
    format!("node{node}:{PORT}")
}

/// Who the calling side claims to be, and which node it expects to reach.
#[derive(Clone, Debug)]
enum Claim {
    /// The node's own peer, kept across calls.
    Own,
    /// A fresh peer, for this call only, with this cluster id and expecting
    /// this node id at the address.
    Fresh {
        cluster: Option<String>,
        expect: NodeId,
    },
}

struct Command {
    id: u64,
    to: NodeId,
    body: Bytes,
    timeout: Duration,
    claim: Claim,
}

#[derive(Debug)]
struct Outcome {
    id: u64,
    from: NodeId,
    to: NodeId,
    body: Bytes,
    timeout: Duration,
    result: Result<Bytes, NetError>,
    elapsed: Duration,
}

/// Where commands for a node's software go; replaced each time it starts.
type Mailbox = Arc<Mutex<Option<mpsc::UnboundedSender<Command>>>>;

/// Three simulated nodes, and the test's hand on them: commands in, outcomes
/// out, and the network between steps.
struct Cluster {
    seed: u64,
    sim: turmoil::Sim<'static>,
    mailboxes: HashMap<NodeId, Mailbox>,
    outcomes: std_mpsc::Receiver<Outcome>,
    next_id: u64,
    /// Calls sent and not yet ended, by id.
    pending: BTreeMap<u64, (NodeId, NodeId)>,
    duration: Duration,
}

impl Cluster {
    fn new(
        seed: u64,
        duration: Duration,
        configure: impl FnOnce(&mut turmoil::Builder),
    ) -> Cluster {
        eprintln!("seed = {seed}");
        let mut builder = turmoil::Builder::new();
        builder
            .rng_seed(seed)
            .simulation_duration(duration)
            .tick_duration(TICK)
            .min_message_latency(Duration::from_millis(1))
            .max_message_latency(Duration::from_millis(5));
        configure(&mut builder);
        let mut sim = builder.build();
        let (report, outcomes) = std_mpsc::channel();
        let mut mailboxes = HashMap::new();
        for node in NODES {
            let mailbox: Mailbox = Arc::new(Mutex::new(None));
            mailboxes.insert(node, Arc::clone(&mailbox));
            let report = report.clone();
            sim.host(host(node), move || {
                node_software(node, Arc::clone(&mailbox), report.clone())
            });
        }
        let mut cluster = Cluster {
            seed,
            sim,
            mailboxes,
            outcomes,
            next_id: 1,
            pending: BTreeMap::new(),
            duration,
        };
        cluster.until_started(&NODES);
        cluster
    }

    fn step(&mut self) {
        self.sim.step().unwrap();
        assert!(
            self.sim.elapsed() <= self.duration,
            "seed {}: the scenario ran past its {:?}",
            self.seed,
            self.duration
        );
    }

    /// Steps until every node in `nodes` has its software running and taking
    /// commands.
    fn until_started(&mut self, nodes: &[NodeId]) {
        while !nodes.iter().all(|node| self.accepting(*node)) {
            self.step();
        }
    }

    fn accepting(&self, node: NodeId) -> bool {
        self.mailboxes[&node]
            .lock()
            .unwrap()
            .as_ref()
            .is_some_and(|sender| !sender.is_closed())
    }

    /// Starts a call from `from` to `to` with a unique body; returns its id.
    fn send(&mut self, from: NodeId, to: NodeId, timeout: Duration, claim: Claim) -> u64 {
        let id = self.next_id;
        self.next_id += 1;
        let body = Bytes::from(format!("seed {} call {id} from {from} to {to}", self.seed));
        let command = Command {
            id,
            to,
            body,
            timeout,
            claim,
        };
        let sender = self.mailboxes[&from].lock().unwrap().clone();
        let sent = sender.is_some_and(|sender| sender.send(command).is_ok());
        assert!(sent, "seed {}: node {from} is not running", self.seed);
        self.pending.insert(id, (from, to));
        id
    }

    fn call(&mut self, from: NodeId, to: NodeId) -> u64 {
        self.send(from, to, RPC_TIMEOUT, Claim::Own)
    }

    /// Steps until every call in `ids` has ended, checking each outcome as it
    /// arrives; returns them by id. Outcomes of other calls are checked too.
    fn wait(&mut self, ids: &[u64]) -> BTreeMap<u64, Outcome> {
        let mut ended = BTreeMap::new();
        loop {
            while let Ok(outcome) = self.outcomes.try_recv() {
                self.check(&outcome);
                self.pending.remove(&outcome.id);
                ended.insert(outcome.id, outcome);
            }
            if ids.iter().all(|id| ended.contains_key(id)) {
                return ended;
            }
            self.step();
        }
    }

    fn wait_one(&mut self, id: u64) -> Outcome {
        self.wait(&[id]).remove(&id).unwrap()
    }

    /// Steps `n` ticks, checking any outcomes that arrive.
    fn run_for(&mut self, ticks: u32) -> Vec<Outcome> {
        let mut ended = Vec::new();
        for _ in 0..ticks {
            self.step();
            while let Ok(outcome) = self.outcomes.try_recv() {
                self.check(&outcome);
                self.pending.remove(&outcome.id);
                ended.push(outcome);
            }
        }
        ended
    }

    /// The invariants every outcome keeps.
    fn check(&self, outcome: &Outcome) {
        let seed = self.seed;
        let Some(&(from, to)) = self.pending.get(&outcome.id) else {
            panic!("seed {seed}: outcome of a call never made or ended twice: {outcome:?}");
        };
        assert_eq!((outcome.from, outcome.to), (from, to), "seed {seed}");
        if let Ok(answer) = &outcome.result {
            assert_eq!(
                answer, &outcome.body,
                "seed {seed}: call {} got another call's answer",
                outcome.id
            );
        }
        assert!(
            outcome.elapsed <= outcome.timeout + TICK,
            "seed {seed}: call {} took {:?}, past its {:?} deadline by more than a tick: {outcome:?}",
            outcome.id,
            outcome.elapsed,
            outcome.timeout
        );
    }

    /// Crashes `node`: its calls end with it, unreported.
    fn crash(&mut self, node: NodeId) {
        while let Ok(outcome) = self.outcomes.try_recv() {
            self.check(&outcome);
            self.pending.remove(&outcome.id);
        }
        self.sim.crash(host(node));
        self.pending.retain(|_, (from, _)| *from != node);
    }

    /// A call from `from` to `to` that must succeed.
    fn assert_succeeds(&mut self, from: NodeId, to: NodeId) {
        let id = self.call(from, to);
        let outcome = self.wait_one(id);
        assert!(
            outcome.result.is_ok(),
            "seed {}: {from} -> {to}: {outcome:?}",
            self.seed
        );
    }
}

/// A node's software: serves echo, and makes the calls it is sent through its
/// peers, reporting each outcome with the time it took.
async fn node_software(
    node: NodeId,
    mailbox: Mailbox,
    report: std_mpsc::Sender<Outcome>,
) -> turmoil::Result {
    let listener = SimNet.bind(&format!("0.0.0.0:{PORT}")).await?;
    let handler: Arc<dyn Handler> = Arc::new(|_kind: u8, body: Bytes| async move { Ok(body) });
    let server = super::serve(
        listener,
        ServerIdentity {
            cluster_id: ClusterId::known(CLUSTER),
            node_id: node,
        },
        handler,
        config(),
    )?;
    let identity = ClientIdentity {
        cluster_id: ClusterId::known(CLUSTER),
        node_id: node,
    };
    let peers: HashMap<NodeId, Peer> = NODES
        .iter()
        .filter(|other| **other != node)
        .map(|other| {
            let peer = Peer::new(
                Arc::new(SimNet),
                identity.clone(),
                *other,
                address(*other),
                config(),
            );
            (*other, peer)
        })
        .collect();
    let (commands, mut received) = mpsc::unbounded_channel();
    *mailbox.lock().unwrap() = Some(commands);
    while let Some(command) = received.recv().await {
        let peer = match &command.claim {
            Claim::Own => peers[&command.to].clone(),
            Claim::Fresh { cluster, expect } => Peer::new(
                Arc::new(SimNet),
                ClientIdentity {
                    cluster_id: cluster.clone().map(ClusterId::known).unwrap_or_default(),
                    node_id: node,
                },
                *expect,
                address(command.to),
                config(),
            ),
        };
        let report = report.clone();
        tokio::spawn(async move {
            let started = Instant::now();
            let result = peer
                .call(ECHO, command.body.clone(), Some(command.timeout))
                .await;
            let _ = report.send(Outcome {
                id: command.id,
                from: node,
                to: command.to,
                body: command.body,
                timeout: command.timeout,
                result,
                elapsed: started.elapsed(),
            });
        });
    }
    drop(server);
    Ok(())
}

fn pairs() -> Vec<(NodeId, NodeId)> {
    let mut pairs = Vec::new();
    for from in NODES {
        for to in NODES {
            if from != to {
                pairs.push((from, to));
            }
        }
    }
    pairs
}

fn is_cut(error: &NetError) -> bool {
    matches!(error, NetError::Timeout | NetError::Unreachable(_))
}

#[test]
fn net_sim_calls_between_all_pairs_succeed_and_a_wrong_identity_is_refused() {
    for seed in seeds(1, 3) {
        let mut cluster = Cluster::new(seed, Duration::from_secs(10), |_| {});
        for (from, to) in pairs() {
            cluster.assert_succeeds(from, to);
        }
        // All at once, several per pair.
        let ids: Vec<u64> = pairs()
            .into_iter()
            .flat_map(|(from, to)| [(from, to); 4])
            .map(|(from, to)| cluster.call(from, to))
            .collect();
        for (id, outcome) in cluster.wait(&ids) {
            assert!(
                outcome.result.is_ok(),
                "seed {seed}: call {id}: {outcome:?}"
            );
        }

        let wrong_cluster = Claim::Fresh {
            cluster: Some("another-cluster".to_string()),
            expect: 2,
        };
        let id = cluster.send(1, 2, RPC_TIMEOUT, wrong_cluster);
        let outcome = cluster.wait_one(id);
        assert!(
            matches!(outcome.result, Err(NetError::Handshake(_))),
            "seed {seed}: {outcome:?}"
        );
        // Expecting node 3 at node 2's address.
        let wrong_node = Claim::Fresh {
            cluster: Some(CLUSTER.to_string()),
            expect: 3,
        };
        let id = cluster.send(1, 2, RPC_TIMEOUT, wrong_node);
        let outcome = cluster.wait_one(id);
        assert!(
            matches!(outcome.result, Err(NetError::Handshake(_))),
            "seed {seed}: {outcome:?}"
        );
        // The refusals left the nodes' own peers alone.
        cluster.assert_succeeds(1, 2);
    }
}

#[test]
fn net_sim_a_partition_fails_calls_across_it_in_time_and_repair_heals_it() {
    for seed in seeds(11, 3) {
        let mut cluster = Cluster::new(seed, Duration::from_secs(30), |_| {});
        for (from, to) in pairs() {
            cluster.assert_succeeds(from, to);
        }
        cluster.sim.partition(host(1), host(2));
        // Across the cut, both ways, on connections already open and on new
        // ones; other links keep working meanwhile.
        for _ in 0..3 {
            let across = [cluster.call(1, 2), cluster.call(2, 1)];
            let others: Vec<u64> = [(1, 3), (3, 1), (2, 3), (3, 2)]
                .into_iter()
                .map(|(from, to)| cluster.call(from, to))
                .collect();
            let ended = cluster.wait(&[across.as_slice(), others.as_slice()].concat());
            for id in across {
                let outcome = &ended[&id];
                assert!(
                    matches!(&outcome.result, Err(error) if is_cut(error)),
                    "seed {seed}: across the cut: {outcome:?}"
                );
            }
            for id in others {
                assert!(ended[&id].result.is_ok(), "seed {seed}: {:?}", ended[&id]);
            }
        }
        cluster.sim.repair(host(1), host(2));
        for (from, to) in pairs() {
            cluster.assert_succeeds(from, to);
        }
    }
}

#[test]
fn net_sim_held_and_delayed_messages_are_answered_late_to_their_own_callers() {
    for seed in seeds(21, 3) {
        let mut cluster = Cluster::new(seed, Duration::from_secs(30), |_| {});
        for (from, to) in pairs() {
            cluster.assert_succeeds(from, to);
        }
        // Held: calls wait, then complete once released, each with its own
        // answer.
        cluster.sim.hold(host(1), host(2));
        let long = Duration::from_millis(2_000);
        let held: Vec<u64> = (0..6)
            .map(|i| {
                if i % 2 == 0 {
                    cluster.send(1, 2, long, Claim::Own)
                } else {
                    cluster.send(2, 1, long, Claim::Own)
                }
            })
            .collect();
        let early = cluster.run_for(300);
        assert!(
            early.iter().all(|outcome| !held.contains(&outcome.id)),
            "seed {seed}: a held call ended before the release: {early:?}"
        );
        cluster.sim.release(host(1), host(2));
        for (id, outcome) in cluster.wait(&held) {
            assert!(
                outcome.result.is_ok(),
                "seed {seed}: call {id}: {outcome:?}"
            );
            assert!(
                outcome.elapsed >= Duration::from_millis(300),
                "seed {seed}: {outcome:?}"
            );
        }

        // Delayed: a slow link, many calls in flight on it at once; each is
        // answered late, and with its own body.
        cluster
            .sim
            .set_link_latency(host(1), host(3), Duration::from_millis(40));
        let slow: Vec<u64> = (0..16).map(|_| cluster.call(1, 3)).collect();
        for (id, outcome) in cluster.wait(&slow) {
            assert!(
                outcome.result.is_ok(),
                "seed {seed}: call {id}: {outcome:?}"
            );
            assert!(
                outcome.elapsed >= Duration::from_millis(80),
                "seed {seed}: {outcome:?}"
            );
        }
        // Slower than the deadline: every call ends at its deadline (the first
        // to time out closes the silent connection, failing the others with
        // it), and the late answers go to no one.
        cluster
            .sim
            .set_link_latency(host(1), host(3), Duration::from_millis(150));
        let late: Vec<u64> = (0..8).map(|_| cluster.call(1, 3)).collect();
        for (id, outcome) in cluster.wait(&late) {
            assert!(
                matches!(
                    &outcome.result,
                    Err(NetError::Timeout | NetError::Closed(_))
                ),
                "seed {seed}: call {id}: {outcome:?}"
            );
        }
        cluster
            .sim
            .set_link_latency(host(1), host(3), Duration::from_millis(5));
        let _ = cluster.run_for(400);
        for (from, to) in pairs() {
            cluster.assert_succeeds(from, to);
        }
    }
}

#[test]
fn net_sim_a_crashed_node_fails_calls_in_flight_and_is_reached_again_after_restart() {
    for seed in seeds(31, 3) {
        let mut cluster = Cluster::new(seed, Duration::from_secs(30), |_| {});
        for (from, to) in pairs() {
            cluster.assert_succeeds(from, to);
        }
        // Calls in flight to node 2 as it crashes.
        cluster
            .sim
            .set_link_latency(host(1), host(2), Duration::from_millis(20));
        let in_flight: Vec<u64> = (0..4).map(|_| cluster.call(1, 2)).collect();
        let _ = cluster.run_for(10);
        cluster.crash(2);
        for (id, outcome) in cluster.wait(&in_flight) {
            assert!(
                matches!(
                    &outcome.result,
                    Err(NetError::Closed(_) | NetError::Timeout)
                ),
                "seed {seed}: call {id}: {outcome:?}"
            );
        }
        // While it is down: refused or unanswered, never hanging.
        let id = cluster.call(1, 2);
        let outcome = cluster.wait_one(id);
        assert!(
            matches!(&outcome.result, Err(error) if is_cut(error)),
            "seed {seed}: {outcome:?}"
        );
        cluster.assert_succeeds(1, 3);
        cluster.sim.bounce(host(2));
        cluster.until_started(&[2]);
        for (from, to) in pairs() {
            cluster.assert_succeeds(from, to);
        }
    }
}

/// A randomized schedule: calls between random pairs with random deadlines,
/// interleaved with partitions, repairs, holds, releases, latency changes and
/// restarts, every outcome checked as it arrives.
#[test]
fn net_sim_a_random_schedule_keeps_every_answer_matched_and_in_time() {
    let (count, steps) = if long_run() { (1, 4_000) } else { (4, 600) };
    for seed in seeds(41, count) {
        let mut rng = SplitMix(seed);
        let duration = Duration::from_secs(600);
        let mut cluster = Cluster::new(seed, duration, |builder| {
            builder.max_message_latency(Duration::from_millis(20));
        });
        let mut down: Option<NodeId> = None;
        let mut made = 0u64;
        let mut answered = 0u64;
        for _ in 0..steps {
            let a = NODES[rng.below(0..3) as usize];
            let b = NODES[rng.below(0..3) as usize];
            match rng.below(0..100) {
                0..=69 if a != b && down != Some(a) => {
                    let timeout = Duration::from_millis(rng.below(20..400));
                    cluster.send(a, b, timeout, Claim::Own);
                    made += 1;
                }
                70..=74 if a != b => cluster.sim.partition(host(a), host(b)),
                75..=79 if a != b => cluster.sim.repair(host(a), host(b)),
                80..=82 if a != b => cluster.sim.hold(host(a), host(b)),
                83..=86 if a != b => cluster.sim.release(host(a), host(b)),
                87..=89 if a != b => {
                    let latency = Duration::from_millis(rng.below(1..100));
                    cluster.sim.set_link_latency(host(a), host(b), latency);
                }
                90 if down.is_none() => {
                    cluster.crash(a);
                    down = Some(a);
                }
                91..=93 => {
                    if let Some(node) = down.take() {
                        cluster.sim.bounce(host(node));
                        cluster.until_started(&[node]);
                    }
                }
                _ => {}
            }
            let ticks = rng.below(1..20) as u32;
            answered += cluster
                .run_for(ticks)
                .iter()
                .filter(|outcome| outcome.result.is_ok())
                .count() as u64;
        }
        // Heal everything: each pending call still ends in time, and every
        // pair is reachable again.
        if let Some(node) = down.take() {
            cluster.sim.bounce(host(node));
            cluster.until_started(&[node]);
        }
        for (a, b) in pairs() {
            cluster.sim.repair(host(a), host(b));
            cluster.sim.release(host(a), host(b));
            cluster
                .sim
                .set_link_latency(host(a), host(b), Duration::from_millis(5));
        }
        let pending: Vec<u64> = cluster.pending.keys().copied().collect();
        let _ = cluster.wait(&pending);
        let _ = cluster.run_for(500);
        for (from, to) in pairs() {
            cluster.assert_succeeds(from, to);
        }
        eprintln!("seed = {seed}: {made} calls, {answered} answered");
        assert!(answered > 0, "seed {seed}: no call was ever answered");
    }
}
