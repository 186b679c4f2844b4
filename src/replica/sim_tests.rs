//! A seeded simulation of one partition replicated on three of three to five
//! brokers: the real `Partition` (its log on disk, its replication state), the
//! real controller `apply` for the metadata (registrations, fencing, AlterPartition,
//! elections), and a schedule drawn from the seed that interleaves produces at
//! acks=1 and acks=all (to the leader clients believe in, or to a stale one),
//! follower fetch rounds, metadata deliveries, time passing (heartbeats, session
//! fencing, ISR shrinks), fences of live, reachable brokers (a false fence
//! must cost availability only), the controller's preferred-leader elections, crashes
//! and restarts (kill -9: the page cache survives), pauses, and links cut: a
//! node from the controller, or a leader from its followers but not from its
//! clients. AlterPartition is asynchronous, as on the network: a proposal waits
//! a random number of steps for the controller, waits while its leader is cut
//! from the controller (retried until `CONTROLLER_PROPOSE_TIMEOUT_MS` of the
//! clock, then answered lost), and its answer waits again on the way back, or
//! is lost when the leader is cut then (the retry finds its partition epoch
//! stale); so a leader sits with an ISR change pending as a real one does.
//!
//! Checked after every step: a replica's high watermark and leader epoch never
//! go back within one run of its process; no two replicas hold different
//! batches at one offset below both their high watermarks; every record
//! acknowledged at acks=all, and every batch a consumer could have read (below
//! some replica's high watermark at some step), is on every live member of the
//! ISR the controller holds and of its ELR. At the end every fault is healed
//! and the replicas must converge: the ISR whole, every log the same, every
//! acknowledged or once-readable batch in each.
//!
//! `SLUICE_SIM_SEED=<n>` replays one seed; `SLUICE_SIM_SEEDS=<n>` runs that many
//! (the long run, with longer schedules). Each seed is printed.

#![allow(clippy::unwrap_used)]

use std::future::Future;
use std::path::PathBuf;
use std::sync::Arc;
use std::task::{Context, Poll, Waker};

use uuid::Uuid;

use super::partition::{FollowerFetch, PartitionContext};
use super::replication::{LeaderAndIsr, PartitionView};
use super::{Partition, PartitionError};
use crate::clock::{Clock, ManualClock};
use crate::controller::{BrokerRegistration, CommandOutcome, MetadataCommand, MetadataImage};
use crate::durability::StorageHealth;
use crate::log::tests::helpers::{batch_with, headers, NOW_MS};
use crate::log::{LogConfig, LogDir};
use crate::random::sim::{long_run, seeds, SplitMix};
use crate::types::{BrokerEpoch, LeaderEpoch, Offset, TopicPartition};

const TOPIC: &str = "simulated";
const REPLICATION_FACTOR: usize = 3;
const MIN_INSYNC_REPLICAS: usize = 2;
const REPLICA_LAG_TIME_MAX_MS: i64 = 10_000;
const SESSION_TIMEOUT_MS: i64 = 9_000;
const STEPS_DEFAULT: usize = 1_500;
const STEPS_LONG: usize = 20_000;
const CONVERGENCE_ROUNDS_MAX: usize = 200;
/// How long a leader's AlterPartition is retried before it is answered lost
/// (the controller's propose timeout).
const ALTER_PARTITION_TIMEOUT_MS: i64 = crate::limits::CONTROLLER_PROPOSE_TIMEOUT_MS as i64;

/// One broker of the simulation.
struct Node {
    id: i32,
    dir: PathBuf,
    /// None while crashed, or for a broker that holds no replica.
    partition: Option<Arc<Partition>>,
    replica: bool,
    paused: bool,
    cut_from_controller: bool,
    cut_from_peers: bool,
    /// The image index this node has applied.
    applied_index: u64,
    last_heartbeat_ms: i64,
    /// Within this run of the process: the high watermark and leader epoch seen.
    seen_high_watermark: Offset,
    seen_leader_epoch: LeaderEpoch,
}

impl Node {
    fn up(&self) -> Option<&Arc<Partition>> {
        self.partition.as_ref().filter(|_| !self.paused)
    }
}

/// An acks=all produce waiting for its answer.
struct Waiting {
    node: i32,
    partition: Arc<Partition>,
    first_offset: i64,
    end_offset: Offset,
    generation: u64,
    timestamp: i64,
}

/// An AlterPartition on the network: sent by the process `leader` of node
/// `node`, taken by the controller later, answered later still.
struct Alter {
    node: i32,
    leader: Arc<Partition>,
    change: super::IsrChange,
    sent_ms: i64,
    /// The controller's answer on its way back, once it applied the proposal.
    answer: Option<Option<LeaderAndIsr>>,
}

/// What the run did, printed with its seed.
#[derive(Debug, Default)]
struct Stats {
    produced_one: u64,
    acked_all: u64,
    refused: u64,
    crashes: u64,
    clean_restarts: u64,
    elr_elections: u64,
    pauses: u64,
    cuts: u64,
    fences: u64,
    false_fences: u64,
    isr_changes: u64,
    alters_lost: u64,
    truncations: u64,
    leader_changes: u64,
    preferred_elections: u64,
}

struct Sim {
    rng: SplitMix,
    _root: tempfile::TempDir,
    clock: Arc<ManualClock>,
    image: MetadataImage,
    index: u64,
    nodes: Vec<Node>,
    topic_id: Uuid,
    next_value: i64,
    waiting: Vec<Waiting>,
    /// (first offset, base timestamp) of every batch acknowledged at acks=all.
    acked: Vec<(i64, i64)>,
    /// (first offset, base timestamp) of every batch that was below a live
    /// replica's high watermark at the end of some step: a consumer could have
    /// read it, so it must never disappear, whatever its producer's acks.
    exposed: std::collections::BTreeSet<(i64, i64)>,
    alters: Vec<Alter>,
    stats: Stats,
}

fn tp() -> TopicPartition {
    TopicPartition::new(TOPIC, 0)
}

impl Sim {
    fn new(seed: u64) -> Sim {
        let mut rng = SplitMix(seed);
        let root = tempfile::TempDir::new().unwrap();
        let count = 3 + rng.below(0..3) as i32;
        let clock = Arc::new(ManualClock::new(NOW_MS));
        let mut sim = Sim {
            rng,
            clock,
            image: MetadataImage::default(),
            index: 0,
            nodes: Vec::new(),
            topic_id: Uuid::from_u128(u128::from(seed) + 1),
            next_value: 0,
            waiting: Vec::new(),
            acked: Vec::new(),
            exposed: std::collections::BTreeSet::new(),
            alters: Vec::new(),
            stats: Stats::default(),
            _root: root,
        };
        for id in 1..=count {
            let dir = sim._root.path().join(format!("node-{id}"));
            std::fs::create_dir_all(&dir).unwrap();
            sim.propose(MetadataCommand::RegisterBroker(BrokerRegistration::new(
                id, "sim", 9092, None,
            )));
            sim.nodes.push(Node {
                id,
                dir,
                partition: None,
                replica: false,
                paused: false,
                cut_from_controller: false,
                cut_from_peers: false,
                applied_index: 0,
                last_heartbeat_ms: NOW_MS,
                seen_high_watermark: Offset::new(0),
                seen_leader_epoch: LeaderEpoch::NONE,
            });
        }
        // Three of the brokers, drawn by the seed, the first leading.
        let mut replicas: Vec<i32> = (1..=count).collect();
        for i in (1..replicas.len()).rev() {
            let j = sim.rng.below(0..(i as u64 + 1)) as usize;
            replicas.swap(i, j);
        }
        replicas.truncate(REPLICATION_FACTOR);
        let created = sim.propose(MetadataCommand::CreateTopic {
            name: TOPIC.to_string(),
            topic_id: sim.topic_id,
            partitions: 1,
            replication_factor: REPLICATION_FACTOR as i16,
            configs: [(
                "min.insync.replicas".to_string(),
                MIN_INSYNC_REPLICAS.to_string(),
            )]
            .into(),
            assignments: vec![replicas.clone()],
        });
        assert!(
            matches!(created, CommandOutcome::TopicCreated { .. }),
            "{created:?}"
        );
        for node in &mut sim.nodes {
            node.replica = replicas.contains(&node.id);
        }
        for i in 0..sim.nodes.len() {
            if sim.nodes[i].replica {
                sim.start(i, true);
            }
        }
        sim
    }

    fn propose(&mut self, command: MetadataCommand) -> CommandOutcome {
        self.index += 1;
        self.image.note_applied(self.index, 1);
        let before = self
            .image
            .topics
            .get(TOPIC)
            .map(|t| t.partitions[0].clone());
        let outcome = self.image.apply(&command);
        if let (Some(before), Some(after)) = (before, self.image.topics.get(TOPIC)) {
            let leader = after.partitions[0].leader_id;
            if leader != before.leader_id && before.elr.contains(&leader) {
                self.stats.elr_elections += 1;
            }
        }
        outcome
    }

    fn view(&self) -> (i32, i32, i32, Vec<i32>, Vec<i32>) {
        let p = &self.image.topics[TOPIC].partitions[0];
        (
            p.leader_id,
            p.leader_epoch.get(),
            p.partition_epoch,
            p.replicas.clone(),
            p.isr.clone(),
        )
    }

    fn node(&self, id: i32) -> usize {
        self.nodes.iter().position(|n| n.id == id).unwrap()
    }

    /// Starts node `i`'s process: its log created or loaded from its dir.
    fn start(&mut self, i: usize, create: bool) {
        let node_id = self.nodes[i].id;
        let log_dir = LogDir::open(&self.nodes[i].dir).unwrap();
        let now_ms = self.clock.now_ms();
        let log = if create {
            log_dir
                .create_log(&tp(), self.topic_id, LogConfig::default(), now_ms)
                .unwrap()
        } else {
            let mut logs = log_dir
                .load_all(&|_| LogConfig::default(), &|_, _| true, now_ms)
                .unwrap();
            assert_eq!(logs.len(), 1);
            logs.pop().unwrap()
        };
        let context = PartitionContext {
            health: StorageHealth::new("simulated log dir"),
            clock: Arc::clone(&self.clock) as Arc<dyn Clock>,
            node_id,
            replica_lag_time_max_ms: REPLICA_LAG_TIME_MAX_MS,
        };
        let node = &mut self.nodes[i];
        node.partition = Some(Arc::new(Partition::new(log, (None, None), &context)));
        node.paused = false;
        node.applied_index = 0;
        node.seen_high_watermark = Offset::new(0);
        node.seen_leader_epoch = LeaderEpoch::NONE;
        node.last_heartbeat_ms = now_ms;
        self.deliver(i);
    }

    /// Node `i` applies the controller's latest image, if it can hear it.
    fn deliver(&mut self, i: usize) {
        let (leader_id, leader_epoch, partition_epoch, replicas, isr) = self.view();
        let eligible: Vec<i32> = replicas
            .iter()
            .copied()
            .filter(|id| self.image.brokers.get(id).is_some_and(|b| !b.fenced))
            .collect();
        let node = &mut self.nodes[i];
        let Some(partition) = node.up().cloned() else {
            return;
        };
        if node.cut_from_controller {
            return;
        }
        let was_leader = partition.is_leader();
        partition
            .apply_image(&PartitionView {
                leader_id,
                leader_epoch: LeaderEpoch::new(leader_epoch),
                partition_epoch,
                replicas: &replicas,
                isr: &isr,
                eligible: &eligible,
                min_insync_replicas: MIN_INSYNC_REPLICAS,
            })
            .unwrap();
        node.applied_index = self.index;
        if partition.is_leader() != was_leader {
            self.stats.leader_changes += 1;
        }
    }

    fn broker_epochs(&self) -> impl Fn(i32) -> Option<BrokerEpoch> + '_ {
        |id| {
            self.image
                .brokers
                .get(&id)
                .filter(|b| !b.fenced)
                .map(|b| b.epoch)
        }
    }

    /// A client's produce: mostly to the leader the latest metadata names,
    /// sometimes to a stale one.
    fn produce(&mut self) {
        let (leader_id, ..) = self.view();
        let target = if self.rng.below(0..5) == 0 || leader_id < 0 {
            let replicas: Vec<i32> = self
                .nodes
                .iter()
                .filter(|n| n.replica)
                .map(|n| n.id)
                .collect();
            replicas[self.rng.below(0..replicas.len() as u64) as usize]
        } else {
            leader_id
        };
        let i = self.node(target);
        let Some(partition) = self.nodes[i].up().cloned() else {
            return;
        };
        let acks_all = self.rng.below(0..3) != 0;
        if acks_all && partition.check_enough_replicas().is_err() {
            self.stats.refused += 1;
            return;
        }
        self.next_value += 1;
        let timestamp = NOW_MS + self.next_value;
        let count = 1 + self.rng.below(0..3) as usize;
        let records = bytes::Bytes::from(batch_with(&vec![timestamp; count], 8));
        let appended = match partition.append(&records, self.clock.now_ms()) {
            Ok(appended) => appended,
            Err(PartitionError::NotLeaderOrFollower) => return,
            Err(error) => panic!("append on node {target}: {error}"),
        };
        if !acks_all {
            self.stats.produced_one += 1;
            return;
        }
        self.waiting.push(Waiting {
            node: target,
            partition,
            first_offset: appended.info.first_offset.get(),
            end_offset: appended.info.last_offset.next(),
            generation: appended.generation,
            timestamp,
        });
    }

    /// Answers the acks=all produces that are settled.
    fn settle_waiting(&mut self) {
        let waker = Waker::noop();
        let mut context = Context::from_waker(waker);
        let mut still = Vec::new();
        for waiting in std::mem::take(&mut self.waiting) {
            let partition = Arc::clone(&waiting.partition);
            let mut wait =
                Box::pin(partition.wait_committed(waiting.end_offset, waiting.generation));
            let polled = wait.as_mut().poll(&mut context);
            drop(wait);
            match polled {
                Poll::Ready(Ok(())) => {
                    self.acked.push((waiting.first_offset, waiting.timestamp));
                    self.stats.acked_all += 1;
                }
                Poll::Ready(Err(_)) => {}
                Poll::Pending => still.push(waiting),
            }
        }
        self.waiting = still;
    }

    /// One fetch of follower `i` from the leader it believes in.
    fn fetch(&mut self, i: usize) {
        let Some(follower) = self.nodes[i].up().cloned() else {
            return;
        };
        let leader_id = follower.leader_id();
        if follower.is_leader() || leader_id < 0 {
            return;
        }
        let l = self.node(leader_id);
        let Some(leader) = self.nodes[l].up().cloned() else {
            return;
        };
        if self.nodes[i].cut_from_peers || self.nodes[l].cut_from_peers {
            return;
        }
        let follower_id = self.nodes[i].id;
        let position = follower.fetch_position().unwrap();
        let broker_epoch = self.image.brokers[&follower_id].epoch;
        let fetch = FollowerFetch {
            replica_id: follower_id,
            broker_epoch,
            current_leader_epoch: LeaderEpoch::known(position.leader_epoch.get()),
            fetch_offset: position.fetch_offset.get(),
            last_fetched_epoch: position.last_fetched_epoch,
            max_bytes: 1 + self.rng.below(0..4096) as usize,
        };
        let read = match leader.read_for_follower(&fetch, self.broker_epochs()) {
            Ok(read) => read,
            Err(PartitionError::Log(crate::log::LogError::OffsetOutOfRange {
                log_end_offset,
                ..
            })) => {
                if position.fetch_offset.get() > log_end_offset {
                    follower.truncate_to(log_end_offset).unwrap();
                    self.stats.truncations += 1;
                }
                return;
            }
            Err(_) => return,
        };
        if let Some(change) = read.isr_change.clone() {
            self.alter_partition(l, change);
        }
        if let Some(diverging) = read.diverging_epoch {
            let target = follower.truncation_offset(diverging).unwrap();
            follower.truncate_to(target).unwrap();
            self.stats.truncations += 1;
            return;
        }
        let records = read
            .records
            .as_ref()
            .map(|slice| slice.read().unwrap())
            .unwrap_or_default();
        match follower.append_as_follower(
            &records,
            read.high_watermark.get(),
            read.log_start_offset.get(),
        ) {
            Ok(()) | Err(PartitionError::NotLeaderOrFollower) => {}
            Err(error) => panic!("node {follower_id} appending as follower: {error}"),
        }
    }

    /// The leader on node `l` sends the controller an ISR change; it travels
    /// (see `alter_step`).
    fn alter_partition(&mut self, l: usize, change: super::IsrChange) {
        let Some(leader) = self.nodes[l].up().cloned() else {
            return;
        };
        self.alters.push(Alter {
            node: self.nodes[l].id,
            leader,
            change,
            sent_ms: self.clock.now_ms(),
            answer: None,
        });
    }

    /// One AlterPartition in flight moves on: the controller takes it (unless its
    /// leader is cut from the controller: it keeps being retried), or its answer
    /// reaches the leader (lost half the time while the leader is cut: the retry
    /// is taken again and found stale). A proposal of a process that died is
    /// gone with it.
    fn alter_step(&mut self, k: usize) {
        let alter = &self.alters[k];
        let i = self.node(alter.node);
        let alive = self.nodes[i]
            .partition
            .as_ref()
            .is_some_and(|p| Arc::ptr_eq(p, &alter.leader));
        if !alive {
            self.alters.swap_remove(k);
            return;
        }
        let cut = self.nodes[i].cut_from_controller;
        let paused = self.nodes[i].paused;
        match alter.answer.clone() {
            None if cut => {}
            None => {
                let change = alter.change.clone();
                let outcome = self.propose(MetadataCommand::AlterPartition {
                    topic_id: self.topic_id,
                    partition: 0,
                    leader_id: alter.node,
                    leader_epoch: change.leader_epoch,
                    partition_epoch: change.partition_epoch,
                    new_isr: change.new_isr,
                });
                let answer = match outcome {
                    CommandOutcome::PartitionChanged {
                        leader_epoch,
                        partition_epoch,
                        isr,
                    } => {
                        self.stats.isr_changes += 1;
                        Some(LeaderAndIsr {
                            leader_epoch,
                            partition_epoch,
                            isr,
                        })
                    }
                    _ => None,
                };
                self.alters[k].answer = Some(answer);
            }
            Some(_) if cut => {
                if self.rng.below(0..2) == 0 {
                    self.stats.alters_lost += 1;
                    self.alters[k].answer = None;
                }
            }
            Some(_) if paused => {}
            Some(answer) => {
                let alter = self.alters.swap_remove(k);
                alter
                    .leader
                    .settle_isr(alter.change.partition_epoch, answer);
            }
        }
    }

    /// Proposals retried past the controller's timeout are answered lost.
    fn time_out_alters(&mut self) {
        let now = self.clock.now_ms();
        let mut k = 0;
        while k < self.alters.len() {
            if now - self.alters[k].sent_ms > ALTER_PARTITION_TIMEOUT_MS {
                let alter = self.alters.swap_remove(k);
                alter.leader.settle_isr(alter.change.partition_epoch, None);
            } else {
                k += 1;
            }
        }
    }

    /// Time passes: heartbeats, fencing after the session timeout, unfencing of
    /// caught-up brokers, ISR shrinks on the leaders.
    fn tick(&mut self, ms: i64) {
        self.clock.advance_ms(ms);
        let now = self.clock.now_ms();
        for i in 0..self.nodes.len() {
            let node = &self.nodes[i];
            let id = node.id;
            let reachable = !node.paused
                && !node.cut_from_controller
                && (node.partition.is_some() || !node.replica);
            let Some(broker) = self.image.brokers.get(&id).cloned() else {
                continue;
            };
            if reachable {
                self.nodes[i].last_heartbeat_ms = now;
                if broker.fenced
                    && self.nodes[i].applied_index >= u64::try_from(broker.epoch.get()).unwrap()
                {
                    self.propose(MetadataCommand::UnfenceBroker {
                        node_id: id,
                        epoch: broker.epoch,
                    });
                }
            } else if !broker.fenced && now - self.nodes[i].last_heartbeat_ms > SESSION_TIMEOUT_MS {
                self.stats.fences += 1;
                self.propose(MetadataCommand::FenceBroker {
                    node_id: id,
                    epoch: broker.epoch,
                });
            }
        }
        self.time_out_alters();
        for l in 0..self.nodes.len() {
            let Some(leader) = self.nodes[l].up().cloned() else {
                continue;
            };
            let change = leader.isr_shrink(self.broker_epochs());
            if let Some(change) = change {
                self.alter_partition(l, change);
            }
        }
    }

    fn step(&mut self) {
        let i = self.rng.below(0..self.nodes.len() as u64) as usize;
        match self.rng.below(0..110) {
            100..=109 => {
                if !self.alters.is_empty() {
                    let k = self.rng.below(0..self.alters.len() as u64) as usize;
                    self.alter_step(k);
                }
            }
            0..=34 => self.produce(),
            35..=69 => self.fetch(i),
            70..=81 => self.deliver(i),
            82..=92 => {
                let ms = 100 + self.rng.below(0..3_000) as i64;
                self.tick(ms);
            }
            93 => self.elect_preferred(),
            94 => self.crash_or_restart(i),
            95 => {
                self.nodes[i].paused = !self.nodes[i].paused;
                self.stats.pauses += u64::from(self.nodes[i].paused);
            }
            96 => {
                self.nodes[i].cut_from_controller = !self.nodes[i].cut_from_controller;
                self.stats.cuts += u64::from(self.nodes[i].cut_from_controller);
            }
            97 => {
                // The leader cut off from its followers, not from its clients.
                let (leader_id, ..) = self.view();
                let l = if leader_id >= 0 {
                    self.node(leader_id)
                } else {
                    i
                };
                self.nodes[l].cut_from_peers = !self.nodes[l].cut_from_peers;
                self.stats.cuts += u64::from(self.nodes[l].cut_from_peers);
            }
            98 => self.false_fence(i),
            _ => self.heal(i),
        }
        self.settle_waiting();
        self.check();
    }

    /// The controller fences node `i` though it is up and reachable (a probe
    /// or a heartbeat misread, a clock that jumped): it costs availability
    /// only. Its next heartbeat (the next tick) unfences it.
    fn false_fence(&mut self, i: usize) {
        let node = &self.nodes[i];
        let reachable = !node.paused && !node.cut_from_controller && node.partition.is_some();
        let Some(broker) = self.image.brokers.get(&node.id).cloned() else {
            return;
        };
        if reachable && !broker.fenced {
            self.stats.false_fences += 1;
            self.propose(MetadataCommand::FenceBroker {
                node_id: broker.node_id,
                epoch: broker.epoch,
            });
        }
    }

    /// The controller's preferred-leader task: the partition back to its first
    /// replica when that one is in the ISR and is not leading it (the real
    /// controller does so once the imbalance passes a threshold; refused
    /// otherwise, which changes nothing).
    fn elect_preferred(&mut self) {
        let before = self.view().1;
        self.propose(MetadataCommand::ElectLeaders {
            unclean: false,
            partitions: Some(vec![(TOPIC.to_string(), 0)]),
        });
        self.stats.preferred_elections += u64::from(self.view().1 != before);
    }

    /// kill -9 of node `i`, or its start after one.
    fn crash_or_restart(&mut self, i: usize) {
        if !self.nodes[i].replica {
            return;
        }
        if self.nodes[i].partition.is_some() {
            self.stats.crashes += 1;
            self.nodes[i].partition = None;
            let id = self.nodes[i].id;
            self.waiting.retain(|w| w.node != id);
        } else {
            self.restart(i);
        }
    }

    /// A crashed node starts again: a new registration (fenced, a new incarnation),
    /// its log loaded from its dir. Half the time it says it shut down cleanly
    /// (the page cache survives a crash here, so either is true of its log), which
    /// keeps it in the ELR; otherwise it leaves the ISR and ELR.
    fn restart(&mut self, i: usize) {
        let id = self.nodes[i].id;
        let mut registration = BrokerRegistration::new(id, "sim", 9092, None);
        registration.fenced = true;
        registration.incarnation_id = Uuid::from_u64_pair(self.rng.next_u64(), 1);
        if self.rng.below(0..2) == 0 {
            self.stats.clean_restarts += 1;
            registration.previous_broker_epoch = self.image.brokers[&id].epoch;
        }
        self.propose(MetadataCommand::RegisterBroker(registration));
        self.start(i, false);
    }

    /// Every fault of node `i` ends.
    fn heal(&mut self, i: usize) {
        self.nodes[i].paused = false;
        self.nodes[i].cut_from_controller = false;
        self.nodes[i].cut_from_peers = false;
        if self.nodes[i].replica && self.nodes[i].partition.is_none() {
            self.restart(i);
        }
    }

    /// The batches of node `i`'s log: (base offset, last offset, base timestamp).
    fn batches(partition: &Partition) -> Vec<(i64, i64, i64)> {
        partition
            .with_log(|log| {
                let mut out = Vec::new();
                let mut offset = log.log_start_offset();
                while offset < log.log_end_offset() {
                    let read = log.read(offset, usize::MAX, i64::MAX, true)?;
                    let Some(slice) = read.records else { break };
                    let bytes = slice.read().map_err(PartitionError::Storage)?;
                    for header in headers(&bytes) {
                        out.push((
                            header.base_offset,
                            header.last_offset(),
                            header.base_timestamp,
                        ));
                        offset = header.last_offset() + 1;
                    }
                }
                Ok(out)
            })
            .unwrap()
    }

    fn check(&mut self) {
        let (_, _, _, _, isr) = self.view();
        // The ELR (KIP-966) must hold every committed record as the ISR does.
        let elr = self.image.topics[TOPIC].partitions[0].elr.clone();
        let mut live = Vec::new();
        for node in &mut self.nodes {
            let Some(partition) = node.partition.clone() else {
                continue;
            };
            let high_watermark = partition.high_watermark();
            let epoch = partition.leader_epoch();
            assert!(
                high_watermark >= node.seen_high_watermark,
                "node {}: high watermark went back from {} to {high_watermark}",
                node.id,
                node.seen_high_watermark
            );
            assert!(
                epoch >= node.seen_leader_epoch,
                "node {}: leader epoch went back",
                node.id
            );
            node.seen_high_watermark = high_watermark;
            node.seen_leader_epoch = epoch;
            let batches = Sim::batches(&partition);
            for (base, last, timestamp) in &batches {
                if *last < high_watermark.get() {
                    self.exposed.insert((*base, *timestamp));
                }
            }
            live.push((node.id, high_watermark, batches));
        }
        for (a, a_hw, a_batches) in &live {
            for (b, b_hw, b_batches) in &live {
                let below = (*a_hw).min(*b_hw);
                let committed = |batches: &Vec<(i64, i64, i64)>| -> Vec<(i64, i64, i64)> {
                    batches
                        .iter()
                        .copied()
                        .filter(|(_, last, _)| *last < below.get())
                        .collect()
                };
                assert_eq!(
                    committed(a_batches),
                    committed(b_batches),
                    "nodes {a} and {b} differ below offset {below}"
                );
            }
        }
        let eligible = |id: &i32| isr.contains(id) || elr.contains(id);
        for (id, _, batches) in live.iter().filter(|(id, ..)| eligible(id)) {
            let acked = self.acked.iter().map(|batch| ("acknowledged", batch));
            let exposed = self.exposed.iter().map(|batch| ("once-readable", batch));
            for (what, (first_offset, timestamp)) in acked.chain(exposed) {
                assert!(
                    batches
                        .iter()
                        .any(|(base, _, ts)| base == first_offset && ts == timestamp),
                    "node {id} of the ISR {isr:?} or ELR {elr:?} lacks the {what} batch at {first_offset}"
                );
            }
        }
    }

    /// Heals every fault and runs until the replicas agree.
    fn converge(&mut self) {
        for i in 0..self.nodes.len() {
            self.heal(i);
        }
        for _ in 0..CONVERGENCE_ROUNDS_MAX {
            self.tick(500);
            for i in 0..self.nodes.len() {
                self.deliver(i);
            }
            for i in 0..self.nodes.len() {
                self.fetch(i);
                self.fetch(i);
            }
            // Every proposal in flight reaches the controller, then its leader.
            for _ in 0..2 {
                for k in (0..self.alters.len()).rev() {
                    if k < self.alters.len() {
                        self.alter_step(k);
                    }
                }
            }
            self.settle_waiting();
            self.check();
            if self.converged() {
                return;
            }
        }
        panic!("no convergence: {:?} {:?}", self.view(), self.stats);
    }

    fn converged(&self) -> bool {
        let (leader_id, _, _, replicas, isr) = self.view();
        if leader_id < 0 || isr.len() != replicas.len() || !self.waiting.is_empty() {
            return false;
        }
        let ends: Vec<(Offset, Offset)> = self
            .nodes
            .iter()
            .filter_map(|n| n.partition.as_ref())
            .map(|p| (p.fetch_position().unwrap().fetch_offset, p.high_watermark()))
            .collect();
        ends.len() == REPLICATION_FACTOR
            && ends.windows(2).all(|w| w[0] == w[1])
            && ends[0].0 == ends[0].1
    }
}

fn run(seed: u64, steps: usize) {
    let mut sim = Sim::new(seed);
    for _ in 0..steps {
        sim.step();
    }
    sim.converge();
    // Every replica holds every acknowledged batch, and all hold the same log.
    let logs: Vec<Vec<(i64, i64, i64)>> = sim
        .nodes
        .iter()
        .filter_map(|n| n.partition.as_ref())
        .map(|p| Sim::batches(p))
        .collect();
    assert!(
        logs.windows(2).all(|w| w[0] == w[1]),
        "seed {seed}: the replicas differ"
    );
    for (first_offset, timestamp) in sim.acked.iter().chain(&sim.exposed) {
        assert!(
            logs[0]
                .iter()
                .any(|(base, _, ts)| base == first_offset && ts == timestamp),
            "seed {seed}: the batch at {first_offset} was acknowledged or readable and is gone"
        );
    }
    eprintln!(
        "replication simulation seed {seed}: {} nodes, {steps} steps, log end {}, {:?}",
        sim.nodes.len(),
        logs[0].last().map_or(0, |b| b.1 + 1),
        sim.stats
    );
}

#[test]
fn replication_sim_keeps_acknowledged_records_and_never_diverges_below_the_high_watermark() {
    let steps = if long_run() {
        STEPS_LONG
    } else {
        STEPS_DEFAULT
    };
    for seed in seeds(7_000, 8) {
        eprintln!("replication simulation seed {seed} (replay: SLUICE_SIM_SEED={seed})");
        run(seed, steps);
    }
}
