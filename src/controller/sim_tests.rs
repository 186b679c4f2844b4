//! The controller quorum in a seeded simulation: three or five voters over
//! turmoil's network, each with an in-memory disk that forgets unsynced writes
//! when its node crashes, under partitions, held and delayed messages, crashes
//! and restarts, while a client proposes topic creations and deletions and
//! producer id blocks through random nodes. After every step:
//!
//! - at most one leader per term;
//! - committed metadata is identical on every node that has applied it (the
//!   images of all nodes at one log index are equal);
//! - within one run of a node, broker epochs only grow and a topic leaves the
//!   image only through its deletion (its tombstone), so no log is deleted
//!   that was not deleted;
//! - producer id blocks handed out never overlap.
//!
//! At the end the network heals, every node restarts, and every node must
//! reach the same image, holding every acknowledged topic not deleted.
//!
//! The fault schedule and raft's election timeouts are seeded (raft draws
//! through `RaftRuntime`); each run prints its seed. `SLUICE_SIM_SEED=<n>`
//! replays one seed; `SLUICE_SIM_SEEDS=<n>` runs `n` seeds, each for longer.
//! The disk's syncs run on tokio's blocking pool, so a replay may differ in
//! the order of events inside one step.
#![allow(clippy::unwrap_used)]

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::mpsc as std_mpsc;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::mpsc;

use super::raft_types::seed_raft_rng;
use super::{
    CommandOutcome, Controller, ControllerConfig, MetadataCommand, MetadataImage, QuorumConfig,
    RaftStoreSource,
};
use crate::config::Voter;
use crate::net::sim::SimNet;
use crate::net::NetConfig;
use crate::random::sim::{long_run, seeds, SplitMix};
use crate::store::mem_raft_kv::MemDisk;
use crate::types::BrokerEpoch;

const CONTROLLER_PORT: u16 = 9093;
const TICK: Duration = Duration::from_millis(5);
/// How long the final heal may take to converge every node.
const HEAL_MS: u64 = 120_000;
/// The pause before a crashed node is started again, at most.
const DOWN_MS_MAX: u64 = 6_000;

fn host(node: i32) -> String {
    format!("n{node}")
}

struct Proposal {
    id: u64,
    command: MetadataCommand,
}

struct Answer {
    id: u64,
    result: Result<CommandOutcome, String>,
}

type Mailbox = Arc<Mutex<Option<mpsc::UnboundedSender<Proposal>>>>;
type Registry = Arc<Mutex<HashMap<i32, Controller>>>;

/// What one run of one node has shown, for the checks that hold within a run.
#[derive(Default)]
struct RunView {
    last: Option<Arc<MetadataImage>>,
}

struct Sim {
    seed: u64,
    sim: turmoil::Sim<'static>,
    nodes: Vec<i32>,
    disks: HashMap<i32, Arc<MemDisk>>,
    registry: Registry,
    mailboxes: HashMap<i32, Mailbox>,
    answers: std_mpsc::Receiver<Answer>,
    /// Nodes crashed, with the simulated time (ms) they start again.
    down: BTreeMap<i32, u64>,
    leaders: BTreeMap<u64, i32>,
    images_by_index: BTreeMap<u64, Arc<MetadataImage>>,
    runs: HashMap<i32, RunView>,
    next_id: u64,
    /// Proposals sent and not answered, with the node they went through.
    in_flight: BTreeMap<u64, (i32, MetadataCommand)>,
    created: BTreeMap<String, uuid::Uuid>,
    deleted: BTreeSet<uuid::Uuid>,
    maybe_deleted: BTreeSet<uuid::Uuid>,
    producer_blocks: Vec<(i64, i64)>,
    _dirs: Vec<tempfile::TempDir>,
}

impl Sim {
    fn new(seed: u64, voters: i32, duration: Duration) -> Sim {
        eprintln!("controller sim seed = {seed} voters = {voters}");
        // `SLUICE_SIM_LOG=<filter>` (e.g. `openraft=info`) prints the nodes' logs.
        if let Ok(filter) = std::env::var("SLUICE_SIM_LOG") {
            let _ = tracing_subscriber::fmt()
                .with_env_filter(tracing_subscriber::EnvFilter::new(filter))
                .with_test_writer()
                .try_init();
        }
        seed_raft_rng(seed);
        let mut builder = turmoil::Builder::new();
        builder
            .rng_seed(seed)
            .simulation_duration(duration)
            .tick_duration(TICK)
            .min_message_latency(Duration::from_millis(1))
            .max_message_latency(Duration::from_millis(10));
        let mut sim = builder.build();
        let nodes: Vec<i32> = (1..=voters).collect();
        let voter_list: Vec<Voter> = nodes
            .iter()
            .map(|id| Voter {
                id: *id,
                address: format!("{}:{CONTROLLER_PORT}", host(*id)),
            })
            .collect();
        let registry: Registry = Arc::default();
        let (report, answers) = std_mpsc::channel();
        let mut disks = HashMap::new();
        let mut mailboxes = HashMap::new();
        let mut dirs = Vec::new();
        for &node in &nodes {
            let disk = MemDisk::new();
            let dir = tempfile::tempdir().unwrap();
            let dir_path = dir.path().to_path_buf();
            dirs.push(dir);
            let mailbox: Mailbox = Arc::default();
            disks.insert(node, Arc::clone(&disk));
            mailboxes.insert(node, Arc::clone(&mailbox));
            let voters = voter_list.clone();
            let registry = Arc::clone(&registry);
            let report = report.clone();
            sim.host(host(node), move || {
                node_software(
                    node,
                    voters.clone(),
                    dir_path.clone(),
                    Arc::clone(&disk),
                    Arc::clone(&registry),
                    Arc::clone(&mailbox),
                    report.clone(),
                )
            });
        }
        let mut sim = Sim {
            seed,
            sim,
            nodes,
            disks,
            registry,
            mailboxes,
            answers,
            down: BTreeMap::new(),
            leaders: BTreeMap::new(),
            images_by_index: BTreeMap::new(),
            runs: HashMap::new(),
            next_id: 1,
            in_flight: BTreeMap::new(),
            created: BTreeMap::new(),
            deleted: BTreeSet::new(),
            maybe_deleted: BTreeSet::new(),
            producer_blocks: Vec::new(),
            _dirs: dirs,
        };
        let all = sim.nodes.clone();
        sim.until(Duration::from_secs(60), "every node serving", |s| {
            all.iter().all(|n| s.serving(*n))
        });
        sim
    }

    fn now_ms(&self) -> u64 {
        self.sim.elapsed().as_millis() as u64
    }

    fn serving(&self, node: i32) -> bool {
        self.mailboxes[&node]
            .lock()
            .unwrap()
            .as_ref()
            .is_some_and(|sender| !sender.is_closed())
    }

    /// Each node as the test sees it, for a failure's message.
    fn describe(&self) -> String {
        let mut out = format!(
            "in flight: {:?}\n",
            self.in_flight.keys().collect::<Vec<_>>()
        );
        for &node in &self.nodes {
            let serving = self.serving(node);
            match self.controller(node) {
                Some(c) => {
                    let image = c.image();
                    let brokers: Vec<String> = image
                        .brokers
                        .values()
                        .map(|b| {
                            format!(
                                "{}@{}{}",
                                b.node_id,
                                b.epoch,
                                if b.fenced { "F" } else { "" }
                            )
                        })
                        .collect();
                    out.push_str(&format!(
                        "node {node}: serving {serving}, role {:?}, index {}, brokers {brokers:?}\n",
                        c.raft_role(),
                        image.last_applied_index
                    ));
                }
                None => out.push_str(&format!(
                    "node {node}: not open (down: {:?})\n",
                    self.down.get(&node)
                )),
            }
        }
        out
    }

    fn controller(&self, node: i32) -> Option<Controller> {
        self.registry.lock().unwrap().get(&node).cloned()
    }

    /// One step of the simulation, then every invariant.
    fn step(&mut self) {
        if let Err(error) = self.sim.step() {
            panic!("seed {}: a node failed: {error}", self.seed);
        }
        while let Ok(answer) = self.answers.try_recv() {
            self.record(answer);
        }
        self.check();
    }

    fn until(&mut self, limit: Duration, what: &str, done: impl Fn(&Sim) -> bool) {
        let deadline = self.now_ms() + limit.as_millis() as u64;
        while !done(self) {
            assert!(
                self.now_ms() < deadline,
                "seed {}: never reached: {what}\n{}",
                self.seed,
                self.describe()
            );
            self.step();
        }
    }

    fn check(&mut self) {
        let seed = self.seed;
        for &node in &self.nodes {
            if self.down.contains_key(&node) {
                continue;
            }
            let Some(controller) = self.controller(node) else {
                continue;
            };
            let (term, leads) = controller.raft_role();
            if leads {
                let leader = *self.leaders.entry(term).or_insert(node);
                assert_eq!(
                    leader, node,
                    "seed {seed}: nodes {leader} and {node} both lead term {term}"
                );
            }
            let image = controller.image();
            let index = image.last_applied_index;
            match self.images_by_index.get(&index) {
                Some(known) => assert!(
                    **known == *image,
                    "seed {seed}: node {node} applied index {index} to another image:\n{known:?}\n{image:?}"
                ),
                None => {
                    self.images_by_index.insert(index, Arc::clone(&image));
                }
            }
            let run = self.runs.entry(node).or_default();
            if let Some(last) = &run.last {
                if !Arc::ptr_eq(last, &image) {
                    assert!(
                        image.last_applied_index >= last.last_applied_index,
                        "seed {seed}: node {node}'s image went back within one run"
                    );
                    for (id, broker) in &image.brokers {
                        if let Some(before) = last.brokers.get(id) {
                            assert!(
                                broker.epoch >= before.epoch,
                                "seed {seed}: node {node} saw broker {id}'s epoch go from {} to {}",
                                before.epoch,
                                broker.epoch
                            );
                        }
                    }
                    for (topic_id, name) in &last.topic_names_by_id {
                        if !image.topic_names_by_id.contains_key(topic_id) {
                            assert!(
                                image.deleted_topic_ids.contains(topic_id),
                                "seed {seed}: node {node} lost topic {name} without deleting it"
                            );
                        }
                    }
                }
            }
            run.last = Some(image);
        }
    }

    fn record(&mut self, answer: Answer) {
        let Some((_, command)) = self.in_flight.remove(&answer.id) else {
            // Sent through a node that crashed since: already given up on.
            return;
        };
        match (&command, &answer.result) {
            (
                MetadataCommand::CreateTopic { name, topic_id, .. },
                Ok(CommandOutcome::TopicCreated { topic_id: created }),
            ) => {
                assert_eq!(topic_id, created, "seed {}", self.seed);
                self.created.insert(name.clone(), *topic_id);
            }
            (MetadataCommand::DeleteTopic { topic_id }, Ok(CommandOutcome::Done)) => {
                self.deleted.insert(*topic_id);
            }
            // A failed delete may have applied; so may one answered "unknown
            // topic", since a proposal whose forwarding connection closed is
            // sent again and the second finds the topic gone.
            (MetadataCommand::DeleteTopic { topic_id }, _) => {
                self.maybe_deleted.insert(*topic_id);
            }
            (
                MetadataCommand::AllocateProducerIds { .. },
                Ok(CommandOutcome::ProducerIds { first, count }),
            ) => {
                let (first, end) = (*first, first + count);
                for (other_first, other_end) in &self.producer_blocks {
                    assert!(
                        end <= *other_first || first >= *other_end,
                        "seed {}: producer id blocks {first}..{end} and {other_first}..{other_end} overlap",
                        self.seed
                    );
                }
                self.producer_blocks.push((first, end));
            }
            _ => {}
        }
    }

    /// Sends a proposal through `node`.
    fn propose(&mut self, node: i32, command: MetadataCommand) {
        let id = self.next_id;
        self.next_id += 1;
        let sender = self.mailboxes[&node].lock().unwrap().clone();
        if let Some(sender) = sender {
            let proposal = Proposal {
                id,
                command: command.clone(),
            };
            if sender.send(proposal).is_ok() {
                self.in_flight.insert(id, (node, command));
            }
        }
    }

    /// The node that leads the latest term, if it is up.
    fn leader_now(&self) -> Option<i32> {
        self.nodes
            .iter()
            .copied()
            .filter(|n| !self.down.contains_key(n))
            .filter_map(|n| self.controller(n).map(|c| (c.raft_role(), n)))
            .filter(|((_, leads), _)| *leads)
            .max_by_key(|((term, _), _)| *term)
            .map(|(_, n)| n)
    }

    fn crash(&mut self, node: i32, now_ms: u64, rng: &mut SplitMix) {
        // Proposals through it get no answer: each may or may not have applied.
        let lost: Vec<u64> = self
            .in_flight
            .iter()
            .filter(|(_, (through, _))| *through == node)
            .map(|(id, _)| *id)
            .collect();
        for id in lost {
            if let Some((_, MetadataCommand::DeleteTopic { topic_id })) = self.in_flight.remove(&id)
            {
                self.maybe_deleted.insert(topic_id);
            }
        }
        self.registry.lock().unwrap().remove(&node);
        *self.mailboxes[&node].lock().unwrap() = None;
        self.sim.crash(host(node));
        // The unsynced tail of its disk is gone with it.
        self.disks[&node].crash();
        self.runs.remove(&node);
        self.down
            .insert(node, now_ms + 500 + rng.below(0..DOWN_MS_MAX));
    }

    fn restart(&mut self, node: i32) {
        self.down.remove(&node);
        self.sim.bounce(host(node));
    }

    /// Heals the network, starts every crashed node, and waits until every
    /// node serves and all hold one image.
    fn heal(&mut self) {
        for &a in &self.nodes {
            for &b in &self.nodes {
                if a != b {
                    self.sim.repair(host(a), host(b));
                    self.sim.release(host(a), host(b));
                }
            }
        }
        let down: Vec<i32> = self.down.keys().copied().collect();
        for node in down {
            self.restart(node);
        }
        let nodes = self.nodes.clone();
        self.until(
            Duration::from_millis(HEAL_MS),
            "one image on every node",
            |s| {
                if !s.in_flight.is_empty() || !nodes.iter().all(|n| s.serving(*n)) {
                    return false;
                }
                let images: Vec<Arc<MetadataImage>> = nodes
                    .iter()
                    .filter_map(|n| s.controller(*n).map(|c| c.image()))
                    .collect();
                images.len() == nodes.len()
                    && images.windows(2).all(|w| *w[0] == *w[1])
                    && images[0].brokers.values().all(|b| !b.fenced)
                    && images[0].brokers.len() == nodes.len()
            },
        );
        let image = self.controller(self.nodes[0]).unwrap().image();
        for (name, topic_id) in &self.created {
            if self.deleted.contains(topic_id) {
                assert!(
                    !image.topic_names_by_id.contains_key(topic_id),
                    "seed {}: deleted topic {name} is back",
                    self.seed
                );
            } else if !self.maybe_deleted.contains(topic_id) {
                assert_eq!(
                    image.topics.get(name).map(|t| t.topic_id),
                    Some(*topic_id),
                    "seed {}: acknowledged topic {name} was lost",
                    self.seed
                );
            }
        }
    }

    /// A random schedule of faults and proposals for `duration`.
    fn run_schedule(&mut self, duration: Duration) {
        let mut rng = SplitMix(self.seed ^ 0x5eed);
        let end = self.now_ms() + duration.as_millis() as u64;
        let mut topic = 0u64;
        let quorum_loss_max = (self.nodes.len() as u64 - 1) / 2;
        while self.now_ms() < end {
            let now = self.now_ms();
            let due: Vec<i32> = self
                .down
                .iter()
                .filter(|(_, at)| **at <= now)
                .map(|(node, _)| *node)
                .collect();
            for node in due {
                self.restart(node);
            }
            let n = self.nodes.len() as u64;
            let a = self.nodes[rng.below(0..n) as usize];
            let b = self.nodes[rng.below(0..n) as usize];
            match rng.below(0..1000) {
                0..=9 if a != b => self.sim.partition(host(a), host(b)),
                10..=24 if a != b => self.sim.repair(host(a), host(b)),
                25..=29 if a != b => self.sim.hold(host(a), host(b)),
                30..=39 if a != b => self.sim.release(host(a), host(b)),
                40..=42
                    if (self.down.len() as u64) < quorum_loss_max
                        && !self.down.contains_key(&a) =>
                {
                    self.crash(a, now, &mut rng)
                }
                43..=46 if (self.down.len() as u64) < quorum_loss_max => {
                    if let Some(leader) = self.leader_now() {
                        self.crash(leader, now, &mut rng);
                    }
                }
                47..=49 => {
                    // The leader cut off from every other node, not crashed.
                    if let Some(leader) = self.leader_now() {
                        for &other in &self.nodes {
                            if other != leader {
                                self.sim.partition(host(leader), host(other));
                            }
                        }
                    }
                }
                50..=80 if self.serving(a) => {
                    topic += 1;
                    let command = MetadataCommand::CreateTopic {
                        name: format!("t{topic}"),
                        topic_id: uuid::Uuid::from_u64_pair(self.seed, topic),
                        partitions: 1 + rng.below(0..3) as i32,
                        replication_factor: 1 + rng.below(0..n.min(3)) as i16,
                        configs: BTreeMap::new(),
                        assignments: Vec::new(),
                    };
                    self.propose(a, command);
                }
                81..=90 if self.serving(a) && !self.created.is_empty() => {
                    let pick = rng.below(0..self.created.len() as u64) as usize;
                    if let Some(topic_id) = self.created.values().nth(pick).copied() {
                        self.propose(a, MetadataCommand::DeleteTopic { topic_id });
                    }
                }
                91..=99 if self.serving(a) => {
                    self.propose(a, MetadataCommand::AllocateProducerIds { count: 1000 })
                }
                _ => {}
            }
            self.step();
        }
    }
}

async fn node_software(
    node: i32,
    voters: Vec<Voter>,
    dir: std::path::PathBuf,
    disk: Arc<MemDisk>,
    registry: Registry,
    mailbox: Mailbox,
    report: std_mpsc::Sender<Answer>,
) -> turmoil::Result {
    let config = ControllerConfig {
        dir,
        node_id: node,
        host: host(node),
        port: 9092,
        rack: None,
        listeners: Vec::new(),
        quorum: Some(QuorumConfig {
            listen: format!("0.0.0.0:{CONTROLLER_PORT}"),
            voters,
            transport: Arc::new(SimNet),
            net: NetConfig::default(),
            election_timeout_ms: 1_000,
            broker_heartbeat_interval_ms: 500,
            broker_session_timeout_ms: 3_000,
        }),
        raft_store: Some(RaftStoreSource(Arc::new(move || disk.open()))),
        previous_broker_epoch: BrokerEpoch::NONE,
        partition_budget: None,
    };
    let controller = Controller::open(config)
        .await
        .map_err(|e| format!("node {node}: {e}"))?;
    registry.lock().unwrap().insert(node, controller.clone());
    let (proposals, mut received) = mpsc::unbounded_channel();
    *mailbox.lock().unwrap() = Some(proposals);
    while let Some(proposal) = received.recv().await {
        let controller = controller.clone();
        let report = report.clone();
        tokio::spawn(async move {
            let result = controller
                .propose(proposal.command)
                .await
                .map_err(|e| e.to_string());
            let _ = report.send(Answer {
                id: proposal.id,
                result,
            });
        });
    }
    Ok(())
}

#[test]
fn controller_sim_three_voters_form_one_quorum_and_agree() {
    for seed in seeds(11, 1) {
        let mut sim = Sim::new(seed, 3, Duration::from_secs(600));
        // Quiet network: proposals through each node apply everywhere.
        for node in [1, 2, 3] {
            let command = MetadataCommand::CreateTopic {
                name: format!("quiet-{node}"),
                topic_id: uuid::Uuid::from_u64_pair(seed, 1_000 + node as u64),
                partitions: 3,
                replication_factor: 3,
                configs: BTreeMap::new(),
                assignments: Vec::new(),
            };
            sim.propose(node, command);
        }
        sim.until(
            Duration::from_secs(30),
            "the quiet proposals answered",
            |s| s.in_flight.is_empty(),
        );
        assert_eq!(sim.created.len(), 3, "seed {seed}");
        sim.heal();
        let image = sim.controller(1).unwrap().image();
        assert_eq!(image.topics.len(), 3, "seed {seed}");
        eprintln!(
            "seed {seed}: quorum formed and agreed at index {} after {:?} simulated",
            image.last_applied_index,
            sim.sim.elapsed()
        );
    }
}

#[test]
fn controller_sim_a_random_fault_schedule_keeps_every_invariant() {
    let (count, duration) = if long_run() {
        (1, Duration::from_secs(300))
    } else {
        (2, Duration::from_secs(40))
    };
    for seed in seeds(41, count) {
        let voters = if seed % 2 == 0 { 5 } else { 3 };
        let mut sim = Sim::new(seed, voters, duration + Duration::from_secs(600));
        sim.run_schedule(duration);
        sim.heal();
        eprintln!(
            "seed {seed}: {} topics acknowledged, {} deleted, {} producer id blocks, {} terms led, last index {}",
            sim.created.len(),
            sim.deleted.len(),
            sim.producer_blocks.len(),
            sim.leaders.len(),
            sim.images_by_index.keys().last().copied().unwrap_or(0)
        );
    }
}

/// A broker that falls silent (a pause: its messages held, no connection
/// closed) shortly before the metadata leader dies is fenced by the next
/// leader from when it was last heard, not a whole session after the
/// election: every voter keeps the brokers' sessions on its own clock.
#[test]
fn controller_sim_a_new_leader_keeps_the_sessions_of_the_old() {
    // The sessions of `node_software`.
    const SESSION_MS: u64 = 3_000;
    for seed in seeds(61, 1) {
        // Five voters: the three left after the crash and the pause elect.
        let mut sim = Sim::new(seed, 5, Duration::from_secs(600));
        let nodes = sim.nodes.clone();
        sim.until(
            Duration::from_secs(60),
            "every broker registered and unfenced on every node",
            |s| {
                nodes.iter().all(|n| {
                    s.controller(*n).is_some_and(|c| {
                        let image = c.image();
                        image.brokers.len() == 5 && image.brokers.values().all(|b| !b.fenced)
                    })
                })
            },
        );
        let leader = sim.leader_now().unwrap();
        let silent = *nodes.iter().find(|n| **n != leader).unwrap();
        for &other in nodes.iter().filter(|n| **n != silent) {
            sim.sim.hold(host(silent), host(other));
        }
        let silent_at = sim.now_ms();
        let crash_at = silent_at + SESSION_MS / 2;
        while sim.now_ms() < crash_at {
            sim.step();
        }
        let fenced_on = |s: &Sim, node: i32| {
            s.controller(node)
                .is_some_and(|c| c.image().brokers.get(&silent).is_some_and(|b| b.fenced))
        };
        assert!(
            !fenced_on(&sim, leader),
            "seed {seed}: node {silent} fenced within half a session"
        );
        let mut rng = SplitMix(seed);
        sim.crash(leader, crash_at, &mut rng);
        sim.until(Duration::from_secs(30), "a new metadata leader", |s| {
            s.leader_now().is_some_and(|n| n != silent)
        });
        let survivor = sim.leader_now().unwrap();
        let elected_at = sim.now_ms();
        sim.until(
            Duration::from_secs(30),
            "the silent broker fenced by the new leader",
            |s| fenced_on(s, survivor),
        );
        let fenced_at = sim.now_ms();
        eprintln!(
            "seed {seed}: node {silent} silent at {silent_at} ms, leader {leader} crashed at {crash_at} ms, node {survivor} elected at {elected_at} ms, fenced node {silent} at {fenced_at} ms"
        );
        assert!(
            fenced_at - elected_at < SESSION_MS,
            "seed {seed}: the new leader gave node {silent} a whole new session"
        );
    }
}
