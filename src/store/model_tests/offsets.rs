//! The offsets store against a model of committed offsets, group records and pending
//! transactional offsets.

use std::collections::{BTreeMap, BTreeSet};
use std::io;

use super::{check_model, join_in_order, landed, same, Harness, ModelRun, OpLog, Restart, Rng};
use crate::store::{
    CommitFuture, CommittedOffset, GroupRecord, OffsetStore, SledOffsetStore, TxnOffsetStore,
};

/// Each pair of ids would collide under a naive key layout ("a" and "ab" as a prefix, "a" and
/// "a\0" with a separator byte), and "" is a legal group id.
const GROUPS: [&str; 5] = ["", "a", "a\0", "ab", "グループ"];
const TOPICS: [&str; 3] = ["t", "t\0", "orders"];
/// Partitions `0..PARTITIONS` are written; the checks also read one past them.
const PARTITIONS: i32 = 4;
/// i64::MAX has its high bytes set, which a producer-id prefix must not confuse with others.
const PRODUCERS: [i64; 4] = [0, 7, 4_242, i64::MAX];
/// Kafka's default `offset.metadata.max.bytes`: the broker refuses longer metadata.
const METADATA_BYTES_MAX: usize = 4096;
/// A few seconds on a slow two-core machine, with some forty restarts.
const DEFAULT_OPS: usize = 400;

type Partition = (String, i32);
type Offsets = Vec<(String, i32, CommittedOffset)>;

/// What the store must hold: every acknowledged write, applied in order.
#[derive(Debug, Default, Clone)]
struct Model {
    /// Never holds an empty group: a group whose last offset went is removed.
    offsets: BTreeMap<String, BTreeMap<Partition, CommittedOffset>>,
    groups: BTreeMap<String, GroupRecord>,
    /// By group and producer id; never holds an empty entry.
    pending: BTreeMap<(String, i64), BTreeMap<Partition, CommittedOffset>>,
}

impl Model {
    fn apply(&mut self, write: &Write) {
        // An empty write stores nothing, not even an empty group.
        match write {
            Write::Commit { offsets, .. } | Write::Stage { offsets, .. } if offsets.is_empty() => {}
            Write::Commit { group, offsets } => {
                put(self.offsets.entry(group.clone()).or_default(), offsets);
            }
            Write::Stage {
                group,
                producer_id,
                offsets,
            } => {
                let key = (group.clone(), *producer_id);
                put(self.pending.entry(key).or_default(), offsets);
            }
        }
    }

    fn delete_offsets(&mut self, group: &str, partitions: &[Partition]) {
        if let Some(stored) = self.offsets.get_mut(group) {
            for partition in partitions {
                stored.remove(partition);
            }
            if stored.is_empty() {
                self.offsets.remove(group);
            }
        }
    }

    /// Pending offsets stay: they are the transaction's, and its end decides them.
    fn delete_group(&mut self, group: &str) {
        self.offsets.remove(group);
        self.groups.remove(group);
    }

    fn expire(&mut self, now_ms: i64, retention_ms: i64, empty: &BTreeSet<String>) -> usize {
        let cutoff_ms = now_ms.saturating_sub(retention_ms);
        let expired: Vec<String> = self
            .offsets
            .iter()
            .filter(|(group, stored)| {
                let newest_ms = stored.values().map(|value| value.commit_timestamp_ms).max();
                empty.contains(*group) && newest_ms.is_some_and(|newest| newest < cutoff_ms)
            })
            .map(|(group, _)| group.clone())
            .collect();
        expired
            .iter()
            .filter_map(|group| self.offsets.remove(group))
            .map(|stored| stored.len())
            .sum()
    }

    fn complete_pending(&mut self, producer_id: i64, groups: &[String], commit: bool) {
        for group in groups {
            let Some(staged) = self.pending.remove(&(group.clone(), producer_id)) else {
                continue;
            };
            if commit {
                self.offsets
                    .entry(group.clone())
                    .or_default()
                    .extend(staged);
            }
        }
    }

    fn fetch(&self, group: &str, topic: &str, partition: i32) -> Option<CommittedOffset> {
        let stored = self.offsets.get(group)?;
        stored.get(&(topic.to_string(), partition)).cloned()
    }

    fn fetch_group(&self, group: &str) -> Offsets {
        let Some(stored) = self.offsets.get(group) else {
            return Vec::new();
        };
        stored
            .iter()
            .map(|((topic, partition), value)| (topic.clone(), *partition, value.clone()))
            .collect()
    }

    fn pending_groups(&self, producer_id: i64) -> Vec<String> {
        // Keys are sorted by group first, so the filtered groups come out sorted.
        self.pending
            .keys()
            .filter(|(_, producer)| *producer == producer_id)
            .map(|(group, _)| group.clone())
            .collect()
    }

    fn pending_partitions(&self, group: &str) -> Vec<Partition> {
        let partitions: BTreeSet<Partition> = self
            .pending
            .iter()
            .filter(|((pending_group, _), _)| pending_group == group)
            .flat_map(|(_, staged)| staged.keys().cloned())
            .collect();
        partitions.into_iter().collect()
    }

    fn load_groups(&self) -> Vec<(String, GroupRecord)> {
        self.groups
            .iter()
            .map(|(group, record)| (group.clone(), record.clone()))
            .collect()
    }

    fn groups_with_offsets(&self) -> Vec<String> {
        self.offsets.keys().cloned().collect()
    }
}

fn put(stored: &mut BTreeMap<Partition, CommittedOffset>, offsets: &Offsets) {
    for (topic, partition, value) in offsets {
        stored.insert((topic.clone(), *partition), value.clone());
    }
}

/// A write that goes through the store's queue and resolves once fsynced.
#[derive(Debug, Clone)]
enum Write {
    Commit {
        group: String,
        offsets: Offsets,
    },
    Stage {
        group: String,
        producer_id: i64,
        offsets: Offsets,
    },
}

impl Write {
    fn start(&self, store: &SledOffsetStore) -> CommitFuture {
        match self {
            Write::Commit { group, offsets } => store.commit(group, offsets.clone()),
            Write::Stage {
                group,
                producer_id,
                offsets,
            } => store.stage(group, *producer_id, 0, offsets.clone()),
        }
    }
}

#[derive(Debug)]
enum Op {
    Write(Write),
    /// Queued together (distinct groups for commits, distinct group and producer pairs for
    /// stages), so that one flush may take them all; their order among each other is not
    /// part of the contract.
    Together(Vec<Write>),
    DeleteOffsets {
        group: String,
        partitions: Vec<Partition>,
    },
    DeleteGroup {
        group: String,
    },
    SaveGroup {
        group: String,
        record: GroupRecord,
    },
    Expire {
        now_ms: i64,
        retention_ms: i64,
        empty: BTreeSet<String>,
    },
    CompletePending {
        producer_id: i64,
        groups: Vec<String>,
        commit: bool,
    },
    Restart {
        how: Restart,
        /// Only with a crash image: started, not awaited, when the copy is taken.
        in_flight: Option<Write>,
    },
}

fn committed_offset(rng: &mut Rng) -> CommittedOffset {
    let offset = match rng.below(20) {
        0 => -1,
        1 => i64::MAX,
        _ => rng.between(0, 1_000),
    };
    let leader_epoch = if rng.one_in(3) {
        -1
    } else {
        rng.between(0, 10) as i32
    };
    let metadata = match rng.below(10) {
        0 => String::new(),
        1 => "ü\0 with a NUL".to_string(),
        2 if rng.one_in(10) => "m".repeat(METADATA_BYTES_MAX),
        _ => format!("m{}", rng.below(1_000)),
    };
    // Mostly within the span that expiry looks at, sometimes at the ends of the range.
    let commit_timestamp_ms = match rng.below(30) {
        0 => -1,
        1 => i64::MIN,
        2 => i64::MAX,
        _ => rng.between(0, 20_000),
    };
    CommittedOffset {
        offset,
        leader_epoch,
        metadata,
        commit_timestamp_ms,
    }
}

/// Up to `max` distinct partitions.
fn partitions(rng: &mut Rng, max: usize) -> Vec<Partition> {
    let count = 1 + rng.index(max);
    let mut chosen = BTreeSet::new();
    for _ in 0..count {
        chosen.insert((
            rng.pick(&TOPICS).to_string(),
            rng.between(0, i64::from(PARTITIONS) - 1) as i32,
        ));
    }
    // Shuffled out of key order, as a client may send them.
    let mut chosen: Vec<Partition> = chosen.into_iter().collect();
    for i in (1..chosen.len()).rev() {
        chosen.swap(i, rng.index(i + 1));
    }
    chosen
}

fn offsets(rng: &mut Rng) -> Offsets {
    // An empty commit is legal and changes nothing.
    if rng.one_in(25) {
        return Vec::new();
    }
    partitions(rng, 4)
        .into_iter()
        .map(|(topic, partition)| (topic, partition, committed_offset(rng)))
        .collect()
}

fn group(rng: &mut Rng) -> String {
    rng.pick(&GROUPS).to_string()
}

fn write(rng: &mut Rng) -> Write {
    if rng.one_in(3) {
        Write::Stage {
            group: group(rng),
            producer_id: *rng.pick(&PRODUCERS),
            offsets: offsets(rng),
        }
    } else {
        Write::Commit {
            group: group(rng),
            offsets: offsets(rng),
        }
    }
}

fn next_op(rng: &mut Rng, model: &Model) -> Op {
    // In the order of the arms below: commit, stage, writes together, complete pending,
    // delete offsets, delete group, save group, expire, clean or drop restart, crash image.
    const WEIGHTS: [u64; 10] = [24, 12, 6, 12, 8, 5, 10, 8, 5, 10];
    match rng.weighted(&WEIGHTS) {
        0 => Op::Write(Write::Commit {
            group: group(rng),
            offsets: offsets(rng),
        }),
        1 => Op::Write(Write::Stage {
            group: group(rng),
            producer_id: *rng.pick(&PRODUCERS),
            offsets: offsets(rng),
        }),
        2 => {
            let mut commit_groups = BTreeSet::new();
            let mut stage_targets = BTreeSet::new();
            let mut writes = Vec::new();
            for _ in 0..2 + rng.index(4) {
                let candidate = write(rng);
                let fresh = match &candidate {
                    Write::Commit { group, .. } => commit_groups.insert(group.clone()),
                    Write::Stage {
                        group, producer_id, ..
                    } => stage_targets.insert((group.clone(), *producer_id)),
                };
                if fresh {
                    writes.push(candidate);
                }
            }
            Op::Together(writes)
        }
        3 => {
            // Mostly pending offsets that exist, sometimes a producer with none.
            let (producer_id, mut groups) = match model
                .pending
                .keys()
                .nth(rng.index(model.pending.len().max(1)))
            {
                Some((_, producer_id)) if !rng.one_in(5) => {
                    (*producer_id, model.pending_groups(*producer_id))
                }
                _ => (*rng.pick(&PRODUCERS), Vec::new()),
            };
            // Not always all of its groups, and sometimes one it has nothing in.
            groups.retain(|_| !rng.one_in(4));
            if rng.one_in(3) {
                let extra = group(rng);
                if !groups.contains(&extra) {
                    groups.push(extra);
                }
            }
            Op::CompletePending {
                producer_id,
                groups,
                commit: !rng.one_in(3),
            }
        }
        4 => {
            let group = group(rng);
            let mut partitions = partitions(rng, 3);
            // Usually some of the group's own, so that something goes.
            if let Some(stored) = model.offsets.get(&group) {
                let existing: Vec<&Partition> = stored.keys().collect();
                let partition = (*rng.pick(&existing)).clone();
                if !partitions.contains(&partition) {
                    partitions.push(partition);
                }
            }
            Op::DeleteOffsets { group, partitions }
        }
        5 => Op::DeleteGroup { group: group(rng) },
        6 => {
            let protocol_type = match rng.below(4) {
                0 => None,
                1 => Some(String::new()),
                2 => Some("connect".to_string()),
                _ => Some("consumer".to_string()),
            };
            let generation_id = match rng.below(10) {
                0 => -1,
                1 => i32::MAX,
                _ => rng.between(0, 50) as i32,
            };
            Op::SaveGroup {
                group: group(rng),
                record: GroupRecord {
                    protocol_type,
                    generation_id,
                    ..GroupRecord::default()
                },
            }
        }
        7 => {
            let retention_ms = match rng.below(10) {
                0 => 0,
                1 => i64::MAX,
                _ => rng.between(1, 15_000),
            };
            let newest_ms: Vec<i64> = model
                .offsets
                .values()
                .filter_map(|stored| stored.values().map(|v| v.commit_timestamp_ms).max())
                .collect();
            let now_ms = match rng.below(20) {
                0 => i64::MIN,
                1 => i64::MAX,
                // A group's newest commit right at the cutoff, or one millisecond either side
                // of it: the boundary is where an off-by-one would show.
                2..=11 if !newest_ms.is_empty() => rng
                    .pick(&newest_ms)
                    .saturating_add(retention_ms)
                    .saturating_add(rng.between(-1, 1)),
                _ => rng.between(0, 25_000),
            };
            let empty = GROUPS
                .iter()
                .filter(|_| !rng.one_in(3))
                .map(|group| group.to_string())
                .collect();
            Op::Expire {
                now_ms,
                retention_ms,
                empty,
            }
        }
        8 => Op::Restart {
            how: Restart::clean_or_drop(rng),
            in_flight: None,
        },
        _ => Op::Restart {
            how: Restart::CrashImage,
            in_flight: rng.one_in(2).then(|| write(rng)),
        },
    }
}

/// The store under test, its directories, and the model it must match.
type Run = Harness<SledOffsetStore, Model>;

impl ModelRun for Run {
    type Op = Op;
    type Write = Write;

    fn next_op(&self, rng: &mut Rng) -> Op {
        next_op(rng, &self.model)
    }

    async fn apply(&mut self, op: &Op, log: &mut OpLog) -> io::Result<()> {
        match op {
            Op::Write(write) => {
                write.start(self.store()?).await?;
                self.model.apply(write);
            }
            Op::Together(writes) => {
                let store = self.store()?;
                let futures = writes.iter().map(|write| write.start(store)).collect();
                for (write, result) in writes.iter().zip(join_in_order(futures).await) {
                    result.map_err(|e| io::Error::new(e.kind(), format!("{write:?}: {e}")))?;
                    self.model.apply(write);
                }
            }
            Op::DeleteOffsets { group, partitions } => {
                self.store()?.delete_offsets(group, partitions)?;
                self.model.delete_offsets(group, partitions);
            }
            Op::DeleteGroup { group } => {
                self.store()?.delete_group(group)?;
                self.model.delete_group(group);
            }
            Op::SaveGroup { group, record } => {
                self.store()?.save_group(group, record)?;
                self.model.groups.insert(group.clone(), record.clone());
            }
            Op::Expire {
                now_ms,
                retention_ms,
                empty,
            } => {
                let is_empty = |group: &str| empty.contains(group);
                let removed = self.store()?.expire(*now_ms, *retention_ms, &is_empty)?;
                let expected = self.model.expire(*now_ms, *retention_ms, empty);
                same(
                    || "offsets removed by expire".to_string(),
                    removed,
                    expected,
                )?;
            }
            Op::CompletePending {
                producer_id,
                groups,
                commit,
            } => {
                self.store()?
                    .complete_pending(*producer_id, groups, *commit)?;
                self.model.complete_pending(*producer_id, groups, *commit);
            }
            Op::Restart { how, in_flight } => {
                self.restart(
                    *how,
                    in_flight.as_ref(),
                    |store, write| write.start(store),
                    log,
                )
                .await?;
            }
        }
        Ok(())
    }

    /// The copy holds the write whole or not at all; then it is written again, so that the
    /// store and the model agree whichever it was.
    async fn settle_in_flight(&mut self, write: &Write, log: &mut OpLog) -> io::Result<()> {
        let mut after = self.model.clone();
        after.apply(write);
        let store = self.store()?;
        let landed = match write {
            Write::Commit { group, .. } => {
                let stored = store.fetch_group(group)?;
                let before = self.model.fetch_group(group);
                let Some(landed) = landed(&stored, &before, &after.fetch_group(group)) else {
                    return Err(io::Error::other(format!(
                        "a commit in flight at the crash landed in part: group {group:?} \
                         has {stored:?}, before it {:?}, after it {:?}",
                        before,
                        after.fetch_group(group)
                    )));
                };
                landed
            }
            Write::Stage {
                group, producer_id, ..
            } => {
                let stored = (
                    store.pending_partitions(group)?,
                    store.pending_groups(*producer_id)?,
                );
                let view = |model: &Model| {
                    (
                        model.pending_partitions(group),
                        model.pending_groups(*producer_id),
                    )
                };
                let Some(landed) = landed(&stored, &view(&self.model), &view(&after)) else {
                    return Err(io::Error::other(format!(
                        "a stage in flight at the crash landed in part: (pending partitions \
                         of {group:?}, pending groups of {producer_id}) are {stored:?}, before \
                         it {:?}, after it {:?}",
                        view(&self.model),
                        view(&after)
                    )));
                };
                landed
            }
        };
        let again = write.start(store);
        self.settled("write", landed, again, after, log).await?;
        Ok(())
    }

    /// Every read of the store against the model.
    fn check(&self) -> io::Result<()> {
        let store = self.store()?;
        let model = &self.model;
        same(
            || "groups_with_offsets()".to_string(),
            store.groups_with_offsets()?,
            model.groups_with_offsets(),
        )?;
        same(
            || "load_groups()".to_string(),
            store.load_groups()?,
            model.load_groups(),
        )?;
        for group in GROUPS {
            same(
                || format!("fetch_group({group:?})"),
                store.fetch_group(group)?,
                model.fetch_group(group),
            )?;
            same(
                || format!("pending_partitions({group:?})"),
                store.pending_partitions(group)?,
                model.pending_partitions(group),
            )?;
            for topic in TOPICS {
                for partition in 0..=PARTITIONS {
                    same(
                        || format!("fetch({group:?}, {topic:?}, {partition})"),
                        store.fetch(group, topic, partition)?,
                        model.fetch(group, topic, partition),
                    )?;
                }
            }
        }
        for producer_id in PRODUCERS {
            same(
                || format!("pending_groups({producer_id})"),
                store.pending_groups(producer_id)?,
                model.pending_groups(producer_id),
            )?;
        }
        Ok(())
    }

    /// Commit every pending offset, which shows their values (no read returns them), then
    /// check once more after a clean restart.
    async fn finish(&mut self, log: &mut OpLog) -> io::Result<()> {
        let all_groups: Vec<String> = GROUPS.iter().map(|group| group.to_string()).collect();
        for producer_id in PRODUCERS {
            let op = Op::CompletePending {
                producer_id,
                groups: all_groups.clone(),
                commit: true,
            };
            self.step(op, log).await?;
        }
        let op = Op::Restart {
            how: Restart::Clean,
            in_flight: None,
        };
        self.step(op, log).await
    }
}

/// Pins, for any seed: after any sequence of commits, queued commits and stages sharing a
/// flush, offset and group deletes, group saves, expiry with any emptiness predicate, and
/// pending transactional offsets staged then committed or aborted, every read of the offsets
/// store (fetch, fetch_group, groups_with_offsets, load_groups, pending_groups,
/// pending_partitions, and the count expire returns) answers what the acknowledged writes
/// imply, and still does after a clean restart, a drop without close, or a crash image; a
/// write in flight at a crash image is there whole or not at all; and committing every
/// pending offset at the end yields exactly the values that were staged.
#[tokio::test]
async fn offsets_store_matches_its_model_across_restarts() {
    check_model::<SledOffsetStore, Model>(DEFAULT_OPS).await;
}
