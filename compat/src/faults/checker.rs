//! The checker: a run's history read against the cluster's final, healed
//! contents. Each anomaly is one of the ways Jepsen has caught brokers out:
//!
//! - **lost**: an acknowledged write that the final read does not hold;
//! - **moved**: an acknowledged write found at another offset than the one
//!   acknowledged;
//! - **two values at one offset**: two reads (during the run or the final one)
//!   of one offset that disagree;
//! - **duplicate**: a value at two offsets (producers here are idempotent);
//! - **out of order**: two acknowledged writes of one producer to one
//!   partition whose offsets are the other way round from their sends;
//! - **phantom**: a value no producer ever sent.
//!
//! The consumer-group workload (`check_group`) adds:
//!
//! - **commit went back**: an acknowledged commit of a partition's offset
//!   lower than one acknowledged before it was sent;
//! - **committed offset went back**: a group's committed offset, read from
//!   the cluster, lower than a read that finished before it started;
//! - **partition owned twice in a generation**: two members given one
//!   partition in the same generation of their group.
//!
//! The transactional copy (`check_copy`, consume-transform-produce with the
//! consumer's offsets in each transaction) adds, over the copies a
//! read_committed consumer sees:
//!
//! - **copy duplicate**: an input record copied more than once;
//! - **copy missing**: an input record below the copy's final committed
//!   offsets that no committed transaction copied and that is not there;
//! - **copy lost**: a committed transaction's copy that is not there;
//! - **aborted read (G1a)**: a copy written by an aborted transaction;
//! - **copy beyond committed offsets**: a copy of an input record at or past
//!   the final committed offset of its partition (data without its offsets);
//! - **copy mismatch**: a copy whose value is not the input's at its offset;
//! - **copy phantom**: a copy no transaction of the run wrote;
//! - **copy read incomplete**: the final offsets or the output could not be
//!   read to their end.
//!
//! The admin churn (topics created and grown during the faults) adds its own,
//! named and checked in `workload::admin::check` (`Anomaly::Admin`).
//!
//! Availability is reported beside them: the longest stretch without an
//! acknowledged write, overall and during each kind of fault.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::fmt;

use super::history::{
    parse_copy_value, parse_value, Assignment, Commit, CommitOutcome, CopyHistory, FaultWindow,
    GroupHistory, OffsetSample, Outcome, Read, TxnOutcome, Write,
};
use super::workload::admin::check::{AdminAnomaly, AdminStats};

/// One anomaly, with what shows it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Anomaly {
    Lost {
        value: String,
        partition: i32,
        offset: i64,
    },
    Moved {
        value: String,
        partition: i32,
        acked: i64,
        found: Vec<i64>,
    },
    TwoValues {
        partition: i32,
        offset: i64,
        values: Vec<String>,
    },
    Duplicate {
        value: String,
        partition: i32,
        offsets: Vec<i64>,
    },
    OutOfOrder {
        producer: u32,
        partition: i32,
        earlier: (u64, i64),
        later: (u64, i64),
    },
    Phantom {
        value: String,
        partition: i32,
        offset: i64,
    },
    /// A record a reader saw during the run (so below the high watermark:
    /// committed, whatever its producer's acks) that the final read does not
    /// hold at its offset, nor anywhere else in its partition.
    ReadLost {
        value: String,
        partition: i32,
        offset: i64,
        read_ms: u64,
    },
    /// `later` (member, offset, invoked ms) was acknowledged, though
    /// `earlier` (member, offset, completed ms) had been acknowledged higher
    /// before it was sent.
    CommitWentBack {
        group: String,
        partition: i32,
        earlier: (u32, i64, u64),
        later: (u32, i64, u64),
    },
    /// A read of the committed offset (`to`, started at `at_ms`) lower than
    /// one that had finished before (`from`, at `from_ms`).
    OffsetWentBack {
        group: String,
        partition: i32,
        from: i64,
        from_ms: u64,
        to: i64,
        at_ms: u64,
    },
    SharedPartition {
        group: String,
        generation: i32,
        partition: i32,
        members: Vec<String>,
    },
    /// Input record `partition`/`offset` copied by each of `attempts`.
    CopyDuplicate {
        partition: i32,
        offset: i64,
        attempts: Vec<u64>,
    },
    CopyMissing {
        partition: i32,
        offset: i64,
        committed: i64,
    },
    CopyLost {
        attempt: u64,
        partition: i32,
        offset: i64,
    },
    AbortedRead {
        attempt: u64,
        partition: i32,
        offset: i64,
    },
    CopyBeyondOffsets {
        partition: i32,
        offset: i64,
        committed: i64,
    },
    CopyMismatch {
        partition: i32,
        offset: i64,
        copied: String,
        input: Option<String>,
    },
    CopyPhantom {
        value: String,
        partition: i32,
        offset: i64,
    },
    CopyIncomplete {
        what: String,
    },
    /// One of the admin churn's (`workload::admin::check`).
    Admin(AdminAnomaly),
    /// A liveness failure: with every fault healed, the cluster was not whole
    /// again (every partition led, every replica in sync) within the wait.
    NotRecovered {
        waited_ms: u64,
        state: String,
    },
}

impl Anomaly {
    /// The anomaly's kind, as the summary counts them.
    pub fn kind(&self) -> &'static str {
        match self {
            Anomaly::Lost { .. } => "lost",
            Anomaly::Moved { .. } => "moved",
            Anomaly::TwoValues { .. } => "two values at one offset",
            Anomaly::Duplicate { .. } => "duplicate",
            Anomaly::OutOfOrder { .. } => "out of order",
            Anomaly::Phantom { .. } => "phantom",
            Anomaly::ReadLost { .. } => "read, then lost",
            Anomaly::CommitWentBack { .. } => "commit went back",
            Anomaly::OffsetWentBack { .. } => "committed offset went back",
            Anomaly::SharedPartition { .. } => "partition owned twice in a generation",
            Anomaly::CopyDuplicate { .. } => "copy duplicate",
            Anomaly::CopyMissing { .. } => "copy missing",
            Anomaly::CopyLost { .. } => "copy lost",
            Anomaly::AbortedRead { .. } => "aborted read (G1a)",
            Anomaly::CopyBeyondOffsets { .. } => "copy beyond committed offsets",
            Anomaly::CopyMismatch { .. } => "copy mismatch",
            Anomaly::CopyPhantom { .. } => "copy phantom",
            Anomaly::CopyIncomplete { .. } => "copy read incomplete",
            Anomaly::Admin(anomaly) => anomaly.kind(),
            Anomaly::NotRecovered { .. } => "not whole after the heal",
        }
    }
}

impl fmt::Display for Anomaly {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Anomaly::Lost {
                value,
                partition,
                offset,
            } => write!(
                f,
                "lost: {value} acknowledged at {partition}/{offset}, not in the final read"
            ),
            Anomaly::Moved {
                value,
                partition,
                acked,
                found,
            } => write!(
                f,
                "moved: {value} acknowledged at {partition}/{acked}, found at {found:?}"
            ),
            Anomaly::TwoValues {
                partition,
                offset,
                values,
            } => write!(f, "two values at {partition}/{offset}: {values:?}"),
            Anomaly::Duplicate {
                value,
                partition,
                offsets,
            } => write!(f, "duplicate: {value} at {partition}/{offsets:?}"),
            Anomaly::OutOfOrder {
                producer,
                partition,
                earlier,
                later,
            } => write!(
                f,
                "out of order: producer {producer} on partition {partition}: sequence {} at offset {}, sequence {} at offset {}",
                earlier.0, earlier.1, later.0, later.1
            ),
            Anomaly::Phantom {
                value,
                partition,
                offset,
            } => write!(f, "phantom: {value:?} at {partition}/{offset} was never sent"),
            Anomaly::ReadLost {
                value,
                partition,
                offset,
                read_ms,
            } => write!(
                f,
                "read, then lost: {value} read at {partition}/{offset} at {read_ms} ms, \
                 the final read holds nothing there"
            ),
            Anomaly::CommitWentBack {
                group,
                partition,
                earlier,
                later,
            } => write!(
                f,
                "commit went back: group {group} partition {partition}: member {} committed {} (acknowledged at {} ms), then member {} committed {} (sent at {} ms), acknowledged",
                earlier.0, earlier.1, earlier.2, later.0, later.1, later.2
            ),
            Anomaly::OffsetWentBack {
                group,
                partition,
                from,
                from_ms,
                to,
                at_ms,
            } => write!(
                f,
                "committed offset went back: group {group} partition {partition}: {from} read by {from_ms} ms, {to} read from {at_ms} ms"
            ),
            Anomaly::SharedPartition {
                group,
                generation,
                partition,
                members,
            } => write!(
                f,
                "partition {partition} owned twice in generation {generation} of group {group}: {members:?}"
            ),
            Anomaly::CopyDuplicate {
                partition,
                offset,
                attempts,
            } => write!(
                f,
                "copy duplicate: input {partition}/{offset} copied by transactions {attempts:?}"
            ),
            Anomaly::CopyMissing {
                partition,
                offset,
                committed,
            } => write!(
                f,
                "copy missing: input {partition}/{offset} is below the committed offset {committed}, no copy read"
            ),
            Anomaly::CopyLost {
                attempt,
                partition,
                offset,
            } => write!(
                f,
                "copy lost: transaction {attempt} committed its copy of input {partition}/{offset}, not read"
            ),
            Anomaly::AbortedRead {
                attempt,
                partition,
                offset,
            } => write!(
                f,
                "aborted read (G1a): the copy of input {partition}/{offset} by aborted transaction {attempt} read committed"
            ),
            Anomaly::CopyBeyondOffsets {
                partition,
                offset,
                committed,
            } => write!(
                f,
                "copy beyond committed offsets: input {partition}/{offset} copied, committed offset {committed}"
            ),
            Anomaly::CopyMismatch {
                partition,
                offset,
                copied,
                input,
            } => write!(
                f,
                "copy mismatch: input {partition}/{offset} copied as {copied:?}, the input holds {input:?}"
            ),
            Anomaly::CopyPhantom {
                value,
                partition,
                offset,
            } => write!(
                f,
                "copy phantom: {value:?} at output {partition}/{offset} was written by no transaction"
            ),
            Anomaly::CopyIncomplete { what } => write!(f, "copy read incomplete: {what}"),
            Anomaly::Admin(anomaly) => fmt::Display::fmt(anomaly, f),
            Anomaly::NotRecovered { waited_ms, state } => write!(
                f,
                "not whole after the heal: {waited_ms} ms after every fault healed, {state}"
            ),
        }
    }
}

/// What the checker found.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Findings {
    pub anomalies: Vec<Anomaly>,
    pub attempted: usize,
    pub acked: usize,
    pub failed: usize,
    /// Records in the final read.
    pub final_records: usize,
    /// The longest stretch without an acknowledged write, in ms.
    pub longest_gap_ms: u64,
    /// The same, during the faults of each kind.
    pub longest_gap_by_fault_ms: BTreeMap<String, u64>,
    /// The consumer-group workload's counts.
    pub group: GroupStats,
    /// The transactional copy's counts.
    pub copy: CopyStats,
    /// The admin churn's counts.
    pub admin: AdminStats,
}

/// What the consumer-group workload did, for the report.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct GroupStats {
    /// Partition offsets committed, and of those acknowledged.
    pub commits: usize,
    pub acked_commits: usize,
    pub assignments: usize,
    /// Distinct generations seen, and assignments whose generation the
    /// client could not tell (not checked for shared partitions).
    pub generations: usize,
    pub unknown_generation: usize,
    pub samples: usize,
}

/// What the transactional copy did, for the report.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CopyStats {
    pub committed: usize,
    pub aborted: usize,
    pub unknown: usize,
    /// Input records below the final committed offsets.
    pub covered: usize,
    /// Copies read committed from the output.
    pub output_records: usize,
}

impl Findings {
    /// Anomalies counted by kind.
    pub fn by_kind(&self) -> BTreeMap<&'static str, usize> {
        let mut counts = BTreeMap::new();
        for anomaly in &self.anomalies {
            *counts.entry(anomaly.kind()).or_default() += 1;
        }
        counts
    }

    pub fn found_loss(&self) -> bool {
        self.anomalies.iter().any(|a| {
            matches!(
                a,
                Anomaly::Lost { .. } | Anomaly::Moved { .. } | Anomaly::ReadLost { .. }
            )
        })
    }
}

/// Checks `writes` and the reads made during the run (`observed`) against the
/// final read of the healed cluster (`final_read`); `faults` and the run's end
/// (`end_ms`) for availability.
pub fn check(
    writes: &[Write],
    observed: &[Read],
    final_read: &[Read],
    faults: &[FaultWindow],
    end_ms: u64,
) -> Findings {
    let mut findings = Findings {
        attempted: writes.len(),
        final_records: final_read.len(),
        ..Findings::default()
    };
    let sent: BTreeSet<(u32, u64)> = writes.iter().map(|w| (w.producer, w.seq)).collect();

    // Every value seen at each offset, by any read.
    let mut at_offset: BTreeMap<(i32, i64), BTreeSet<&str>> = BTreeMap::new();
    for read in observed.iter().chain(final_read) {
        at_offset
            .entry((read.partition, read.offset))
            .or_default()
            .insert(read.value.as_str());
    }
    for ((partition, offset), values) in &at_offset {
        if values.len() > 1 {
            findings.anomalies.push(Anomaly::TwoValues {
                partition: *partition,
                offset: *offset,
                values: values.iter().map(|v| v.to_string()).collect(),
            });
        }
    }

    // The final read: what is where, and where each value is.
    let mut final_at: HashMap<(i32, i64), &str> = HashMap::new();
    let mut offsets_of: BTreeMap<(&str, i32), Vec<i64>> = BTreeMap::new();
    for read in final_read {
        final_at.insert((read.partition, read.offset), read.value.as_str());
        offsets_of
            .entry((read.value.as_str(), read.partition))
            .or_default()
            .push(read.offset);
        let known = parse_value(&read.value).is_some_and(|key| sent.contains(&key));
        if !known {
            findings.anomalies.push(Anomaly::Phantom {
                value: read.value.clone(),
                partition: read.partition,
                offset: read.offset,
            });
        }
    }
    for ((value, partition), offsets) in &offsets_of {
        if offsets.len() > 1 {
            findings.anomalies.push(Anomaly::Duplicate {
                value: value.to_string(),
                partition: *partition,
                offsets: offsets.clone(),
            });
        }
    }

    // Each record read during the run was below its high watermark then:
    // committed, so it must still be where it was read.
    for read in observed {
        if !final_at.contains_key(&(read.partition, read.offset)) {
            findings.anomalies.push(Anomaly::ReadLost {
                value: read.value.clone(),
                partition: read.partition,
                offset: read.offset,
                read_ms: read.at_ms,
            });
        }
    }

    // Each acknowledged write, where it was acknowledged.
    let mut acked_by: BTreeMap<(u32, i32), Vec<(u64, i64)>> = BTreeMap::new();
    let mut ack_times: Vec<u64> = Vec::new();
    for write in writes {
        let offset = match &write.outcome {
            Outcome::Acked { offset } => *offset,
            Outcome::AckedByLeader { .. } => {
                // Promised nothing beyond its leader: checked only if read.
                findings.acked += 1;
                ack_times.push(write.completed_ms);
                continue;
            }
            Outcome::Failed(_) => {
                findings.failed += 1;
                continue;
            }
        };
        findings.acked += 1;
        ack_times.push(write.completed_ms);
        acked_by
            .entry((write.producer, write.partition))
            .or_default()
            .push((write.seq, offset));
        let value = write.value();
        if final_at.get(&(write.partition, offset)) == Some(&value.as_str()) {
            continue;
        }
        let found = offsets_of.get(&(value.as_str(), write.partition)).cloned();
        match found {
            Some(found) => findings.anomalies.push(Anomaly::Moved {
                value,
                partition: write.partition,
                acked: offset,
                found,
            }),
            None => findings.anomalies.push(Anomaly::Lost {
                value,
                partition: write.partition,
                offset,
            }),
        }
    }

    // A producer's acknowledged writes to one partition, in send order.
    for ((producer, partition), mut acked) in acked_by {
        acked.sort_unstable();
        for pair in acked.windows(2) {
            if pair[1].1 <= pair[0].1 {
                findings.anomalies.push(Anomaly::OutOfOrder {
                    producer,
                    partition,
                    earlier: pair[0],
                    later: pair[1],
                });
            }
        }
    }

    // Availability: the gaps between acknowledgements, from the run's start
    // to its end.
    ack_times.sort_unstable();
    let mut bounds = vec![0];
    bounds.extend(ack_times);
    bounds.push(end_ms);
    for gap in bounds.windows(2) {
        let (from, to) = (gap[0], gap[1].max(gap[0]));
        let length = to - from;
        findings.longest_gap_ms = findings.longest_gap_ms.max(length);
        for fault in faults {
            if fault.start_ms < to && from < fault.end_ms {
                let longest = findings
                    .longest_gap_by_fault_ms
                    .entry(fault.kind.clone())
                    .or_default();
                *longest = (*longest).max(length);
            }
        }
    }
    findings
}

/// For operations that each took effect at some moment between their start
/// and their end, `(invoked_ms, completed_ms, value)`, on a register that may
/// only grow (a committed offset): the pairs `(i, j)` where `j` started after
/// `i` had finished, yet holds a lower value than `i`, `i` being the highest
/// value finished before `j` started. Operations that overlap in time are not
/// ordered (either may have taken effect first), nor two whose end and start
/// fall in the same millisecond. Each `i` is named once, with the first `j`
/// (in start order) below it, so that one step back is not counted again by
/// every later operation that stays below it.
pub fn regressions(ops: &[(u64, u64, i64)]) -> Vec<(usize, usize)> {
    let mut by_end: Vec<usize> = (0..ops.len()).collect();
    by_end.sort_by_key(|&i| (ops[i].1, ops[i].0, i));
    // highest[k]: the operation with the highest value among by_end[..=k].
    let mut highest: Vec<usize> = Vec::with_capacity(ops.len());
    for &i in &by_end {
        let best = match highest.last() {
            Some(&b) if ops[b].2 >= ops[i].2 => b,
            _ => i,
        };
        highest.push(best);
    }
    let mut by_start: Vec<usize> = (0..ops.len()).collect();
    by_start.sort_by_key(|&j| (ops[j].0, ops[j].1, j));
    let mut named = BTreeSet::new();
    let mut out = Vec::new();
    for j in by_start {
        let finished_before = by_end.partition_point(|&i| ops[i].1 < ops[j].0);
        let Some(&i) = finished_before
            .checked_sub(1)
            .and_then(|last| highest.get(last))
        else {
            continue;
        };
        if ops[j].2 < ops[i].2 && named.insert(i) {
            out.push((i, j));
        }
    }
    out
}

/// Acknowledged commits of each partition of each group that went back (see
/// `regressions`: a commit is compared with those acknowledged before it was
/// sent). A commit that failed may be lower: a fenced member's commit is
/// rejected, and is not an anomaly unless the cluster stored it, which the
/// samples (`offsets_went_back`) show.
pub fn commits_went_back(commits: &[Commit]) -> Vec<Anomaly> {
    let mut acked: BTreeMap<(&str, i32), Vec<&Commit>> = BTreeMap::new();
    for commit in commits {
        if commit.outcome == CommitOutcome::Acked {
            acked
                .entry((commit.group.as_str(), commit.partition))
                .or_default()
                .push(commit);
        }
    }
    let mut anomalies = Vec::new();
    for ((group, partition), commits) in acked {
        let ops: Vec<_> = commits
            .iter()
            .map(|c| (c.invoked_ms, c.completed_ms, c.offset))
            .collect();
        for (i, j) in regressions(&ops) {
            let (earlier, later) = (commits[i], commits[j]);
            anomalies.push(Anomaly::CommitWentBack {
                group: group.to_string(),
                partition,
                earlier: (earlier.member, earlier.offset, earlier.completed_ms),
                later: (later.member, later.offset, later.invoked_ms),
            });
        }
    }
    anomalies
}

/// Reads of each group's committed offsets (OffsetFetch from a client outside
/// the group) that went back (see `regressions`). No offset (-1) after one is
/// a step back too: the group's offsets are never deleted during a run.
pub fn offsets_went_back(samples: &[OffsetSample]) -> Vec<Anomaly> {
    let mut by_partition: BTreeMap<(&str, i32), Vec<&OffsetSample>> = BTreeMap::new();
    for sample in samples {
        by_partition
            .entry((sample.group.as_str(), sample.partition))
            .or_default()
            .push(sample);
    }
    let mut anomalies = Vec::new();
    for ((group, partition), samples) in by_partition {
        let ops: Vec<_> = samples
            .iter()
            .map(|s| (s.invoked_ms, s.at_ms, s.offset))
            .collect();
        for (i, j) in regressions(&ops) {
            anomalies.push(Anomaly::OffsetWentBack {
                group: group.to_string(),
                partition,
                from: samples[i].offset,
                from_ms: samples[i].at_ms,
                to: samples[j].offset,
                at_ms: samples[j].invoked_ms,
            });
        }
    }
    anomalies
}

/// Partitions given to two members in one generation of a group. The
/// generation is the one the member's client was in when its rebalance
/// callback ran (librdkafka does not rejoin before the application has taken
/// the assignment, so it is the assignment's); an assignment whose generation
/// the client could not tell (-1) is not checked. Ownership across
/// generations is not checked: a member of an old generation may still hold
/// its partitions while the next one forms (its commits are then fenced).
pub fn shared_partitions(assignments: &[Assignment]) -> Vec<Anomaly> {
    let mut owners: BTreeMap<(&str, i32, i32), BTreeSet<String>> = BTreeMap::new();
    for assignment in assignments {
        if assignment.generation < 0 {
            continue;
        }
        let member = if assignment.member_id.is_empty() {
            format!("member {}", assignment.member)
        } else {
            assignment.member_id.clone()
        };
        for &partition in &assignment.partitions {
            owners
                .entry((assignment.group.as_str(), assignment.generation, partition))
                .or_default()
                .insert(member.clone());
        }
    }
    owners
        .into_iter()
        .filter(|(_, members)| members.len() > 1)
        .map(
            |((group, generation, partition), members)| Anomaly::SharedPartition {
                group: group.to_string(),
                generation,
                partition,
                members: members.into_iter().collect(),
            },
        )
        .collect()
}

/// Checks the consumer-group workload's history.
pub fn check_group(history: &GroupHistory) -> (Vec<Anomaly>, GroupStats) {
    let mut anomalies = commits_went_back(&history.commits);
    anomalies.extend(offsets_went_back(&history.samples));
    anomalies.extend(shared_partitions(&history.assignments));
    let generations: BTreeSet<(&str, i32)> = history
        .assignments
        .iter()
        .filter(|a| a.generation >= 0)
        .map(|a| (a.group.as_str(), a.generation))
        .collect();
    let stats = GroupStats {
        commits: history.commits.len(),
        acked_commits: history
            .commits
            .iter()
            .filter(|c| c.outcome == CommitOutcome::Acked)
            .count(),
        assignments: history.assignments.len(),
        generations: generations.len(),
        unknown_generation: history
            .assignments
            .iter()
            .filter(|a| a.generation < 0)
            .count(),
        samples: history.samples.len(),
    };
    (anomalies, stats)
}

/// Checks the transactional copy against the input as the final read found
/// it (`input`): every copy read committed from the output must come from a
/// transaction of the run that copied that record and did not abort, hold the
/// input's value, lie below the final committed offset of its partition and
/// be the only copy of its input record; every committed transaction's copies
/// must be read; every input record below the final committed offsets must
/// have been copied. A transaction whose outcome is unknown may be read or
/// not.
pub fn check_copy(input: &[Read], history: &CopyHistory) -> (Vec<Anomaly>, CopyStats) {
    let mut anomalies: Vec<Anomaly> = history
        .incomplete
        .iter()
        .map(|what| Anomaly::CopyIncomplete { what: what.clone() })
        .collect();
    let mut stats = CopyStats {
        output_records: history.output.len(),
        ..CopyStats::default()
    };
    // Each transaction's outcome and the input records it copied.
    type Copied<'a> = (&'a TxnOutcome, BTreeSet<(i32, i64)>);
    let mut txns: HashMap<u64, Copied<'_>> = HashMap::new();
    for txn in &history.txns {
        match txn.outcome {
            TxnOutcome::Committed => stats.committed += 1,
            TxnOutcome::Aborted => stats.aborted += 1,
            TxnOutcome::Unknown(_) => stats.unknown += 1,
        }
        let records = txn.records.iter().map(|(p, o, _)| (*p, *o)).collect();
        txns.insert(txn.attempt, (&txn.outcome, records));
    }
    let input_at: HashMap<(i32, i64), &str> = input
        .iter()
        .map(|r| ((r.partition, r.offset), r.value.as_str()))
        .collect();

    // The copies read, by input record.
    let mut copies: BTreeMap<(i32, i64), Vec<u64>> = BTreeMap::new();
    let mut mismatched = BTreeSet::new();
    for read in &history.output {
        let phantom = || Anomaly::CopyPhantom {
            value: read.value.clone(),
            partition: read.partition,
            offset: read.offset,
        };
        let Some((partition, offset, attempt, value)) = parse_copy_value(&read.value) else {
            anomalies.push(phantom());
            continue;
        };
        let Some((outcome, records)) = txns.get(&attempt) else {
            anomalies.push(phantom());
            continue;
        };
        if !records.contains(&(partition, offset)) {
            anomalies.push(phantom());
            continue;
        }
        if **outcome == TxnOutcome::Aborted {
            anomalies.push(Anomaly::AbortedRead {
                attempt,
                partition,
                offset,
            });
        }
        let input_value = input_at.get(&(partition, offset)).copied();
        if input_value != Some(value) && mismatched.insert((partition, offset)) {
            anomalies.push(Anomaly::CopyMismatch {
                partition,
                offset,
                copied: value.to_string(),
                input: input_value.map(str::to_string),
            });
        }
        copies.entry((partition, offset)).or_default().push(attempt);
    }
    for ((partition, offset), attempts) in &copies {
        if attempts.len() > 1 {
            anomalies.push(Anomaly::CopyDuplicate {
                partition: *partition,
                offset: *offset,
                attempts: attempts.clone(),
            });
        }
    }

    // Every committed transaction's copies are read.
    let mut committed_copies = BTreeSet::new();
    for txn in &history.txns {
        if txn.outcome != TxnOutcome::Committed {
            continue;
        }
        for (partition, offset, _) in &txn.records {
            committed_copies.insert((*partition, *offset));
            let read = copies
                .get(&(*partition, *offset))
                .is_some_and(|attempts| attempts.contains(&txn.attempt));
            if !read {
                anomalies.push(Anomaly::CopyLost {
                    attempt: txn.attempt,
                    partition: *partition,
                    offset: *offset,
                });
            }
        }
    }

    // The final committed offsets: every input record below them copied,
    // nothing at or past them.
    if let Some(final_offsets) = &history.final_offsets {
        let committed: HashMap<i32, i64> = final_offsets.iter().copied().collect();
        let committed_of = |partition: i32| committed.get(&partition).copied().unwrap_or(-1);
        for (partition, offset) in copies.keys() {
            if *offset >= committed_of(*partition) {
                anomalies.push(Anomaly::CopyBeyondOffsets {
                    partition: *partition,
                    offset: *offset,
                    committed: committed_of(*partition),
                });
            }
        }
        let mut covered: Vec<(i32, i64)> = input
            .iter()
            .map(|r| (r.partition, r.offset))
            .filter(|(partition, offset)| *offset < committed_of(*partition))
            .collect();
        covered.sort_unstable();
        covered.dedup();
        stats.covered = covered.len();
        for (partition, offset) in covered {
            let key = (partition, offset);
            if !copies.contains_key(&key) && !committed_copies.contains(&key) {
                anomalies.push(Anomaly::CopyMissing {
                    partition,
                    offset,
                    committed: committed_of(partition),
                });
            }
        }
    }
    (anomalies, stats)
}

/// Adds the consumer-group workload's and the transactional copy's anomalies
/// and counts to `findings`; `input` is the final read of the copy's input.
pub fn check_workloads(
    findings: &mut Findings,
    input: &[Read],
    group: &GroupHistory,
    copy: &CopyHistory,
) {
    let (anomalies, stats) = check_group(group);
    findings.anomalies.extend(anomalies);
    findings.group = stats;
    let (anomalies, stats) = check_copy(input, copy);
    findings.anomalies.extend(anomalies);
    findings.copy = stats;
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::faults::history::{copy_value_of, CopyTxn};

    fn acked(producer: u32, seq: u64, partition: i32, offset: i64, at: u64) -> Write {
        Write {
            producer,
            seq,
            partition,
            invoked_ms: at.saturating_sub(1),
            completed_ms: at,
            outcome: Outcome::Acked { offset },
        }
    }

    fn read(partition: i32, offset: i64, value: &str) -> Read {
        Read {
            partition,
            offset,
            value: value.to_string(),
            at_ms: 0,
        }
    }

    #[test]
    fn a_clean_history_has_no_anomaly() {
        let writes = vec![
            acked(0, 0, 0, 0, 10),
            acked(0, 1, 0, 1, 20),
            acked(1, 0, 1, 0, 15),
        ];
        let final_read = vec![read(0, 0, "0-0"), read(0, 1, "0-1"), read(1, 0, "1-0")];
        let findings = check(&writes, &final_read, &final_read, &[], 30);
        assert_eq!(findings.anomalies, vec![]);
        assert_eq!((findings.attempted, findings.acked), (3, 3));
        assert_eq!(findings.longest_gap_ms, 10);
    }

    #[test]
    fn every_kind_of_anomaly_is_named() {
        let writes = vec![
            acked(0, 0, 0, 0, 10),
            acked(0, 1, 0, 1, 20),
            acked(0, 2, 0, 2, 30),
            acked(0, 3, 0, 4, 40),
            acked(0, 4, 0, 3, 50),
        ];
        let observed = vec![read(0, 0, "0-0"), read(0, 1, "0-9")];
        let final_read = vec![
            read(0, 0, "0-0"),
            // 0-1 is gone: lost.
            read(0, 1, "7-7"),
            read(0, 3, "0-4"),
            read(0, 4, "0-3"),
            read(0, 5, "0-2"),
            read(0, 6, "0-2"),
        ];
        let findings = check(&writes, &observed, &final_read, &[], 60);
        let kinds = findings.by_kind();
        assert_eq!(kinds.get("lost"), Some(&1), "{:?}", findings.anomalies);
        assert_eq!(
            kinds.get("moved"),
            Some(&1),
            "0-2 acked at 2, found at 5 and 6"
        );
        assert_eq!(kinds.get("duplicate"), Some(&1), "0-2 twice");
        assert_eq!(
            kinds.get("two values at one offset"),
            Some(&1),
            "0-9 then 7-7"
        );
        assert_eq!(kinds.get("phantom"), Some(&1), "7-7 was never sent");
        assert_eq!(kinds.get("out of order"), Some(&1), "seq 3 after seq 4");
        assert!(findings.found_loss());
    }

    #[test]
    fn a_leader_acknowledged_write_may_go_unless_it_was_read() {
        let by_leader = |seq: u64, offset: i64| Write {
            outcome: Outcome::AckedByLeader { offset },
            ..acked(5, seq, 0, offset, 10 + seq)
        };
        // 5-0 and 5-1 were acknowledged by the leader alone; the leader died
        // with them and the next leader wrote 5-2 at offset 0. Nobody read
        // them: no anomaly, though an acks=all write would be lost.
        let writes = vec![by_leader(0, 0), by_leader(1, 1), by_leader(2, 0)];
        let final_read = vec![read(0, 0, "5-2")];
        let findings = check(&writes, &[], &final_read, &[], 30);
        assert_eq!(findings.anomalies, vec![]);
        assert_eq!(findings.acked, 3);

        // The same history after a reader saw 5-1 at offset 1: it was below
        // the high watermark then, so its loss is an anomaly.
        let observed = vec![read(0, 1, "5-1")];
        let findings = check(&writes, &observed, &final_read, &[], 30);
        assert_eq!(
            findings.by_kind().get("read, then lost"),
            Some(&1),
            "{:?}",
            findings.anomalies
        );
        assert!(findings.found_loss());
    }

    #[test]
    fn failed_writes_may_be_absent_or_present() {
        let writes = vec![
            Write {
                outcome: Outcome::Failed("timed out".to_string()),
                ..acked(0, 0, 0, -1, 10)
            },
            Write {
                outcome: Outcome::Failed("timed out".to_string()),
                ..acked(0, 1, 0, -1, 10)
            },
        ];
        let final_read = vec![read(0, 0, "0-1")];
        let findings = check(&writes, &[], &final_read, &[], 30);
        assert_eq!(findings.anomalies, vec![]);
        assert_eq!(findings.failed, 2);
    }

    #[test]
    fn availability_is_the_longest_gap_overall_and_per_fault_kind() {
        let writes = vec![
            acked(0, 0, 0, 0, 100),
            acked(0, 1, 0, 1, 900),
            acked(0, 2, 0, 2, 1_000),
        ];
        let final_read = vec![read(0, 0, "0-0"), read(0, 1, "0-1"), read(0, 2, "0-2")];
        let faults = vec![
            FaultWindow {
                kind: "kill".to_string(),
                target: "node 1".to_string(),
                start_ms: 200,
                end_ms: 400,
            },
            FaultWindow {
                kind: "pause".to_string(),
                target: "node 2".to_string(),
                start_ms: 950,
                end_ms: 980,
            },
        ];
        let findings = check(&writes, &[], &final_read, &faults, 1_100);
        assert_eq!(findings.longest_gap_ms, 800);
        assert_eq!(findings.longest_gap_by_fault_ms.get("kill"), Some(&800));
        assert_eq!(findings.longest_gap_by_fault_ms.get("pause"), Some(&100));
    }

    fn commit(member: u32, offset: i64, invoked: u64, completed: u64, acked: bool) -> Commit {
        Commit {
            group: "g".to_string(),
            member,
            partition: 0,
            offset,
            invoked_ms: invoked,
            completed_ms: completed,
            outcome: if acked {
                CommitOutcome::Acked
            } else {
                CommitOutcome::Failed("ILLEGAL_GENERATION".to_string())
            },
        }
    }

    fn sample(offset: i64, invoked: u64, at: u64) -> OffsetSample {
        OffsetSample {
            group: "g".to_string(),
            partition: 0,
            offset,
            invoked_ms: invoked,
            at_ms: at,
        }
    }

    fn assignment(member: u32, generation: i32, partitions: &[i32]) -> Assignment {
        Assignment {
            group: "g".to_string(),
            member,
            member_id: format!("m-{member}"),
            generation,
            partitions: partitions.to_vec(),
            at_ms: 0,
        }
    }

    #[test]
    fn regressions_order_only_operations_one_after_the_other() {
        // 5 then 3, one after the other: back. 7 overlaps 6: not ordered.
        let ops = [(0, 10, 5), (20, 30, 3), (40, 60, 7), (50, 55, 6)];
        assert_eq!(regressions(&ops), vec![(0, 1)]);
        // Ending and starting in one millisecond: not ordered.
        assert_eq!(regressions(&[(0, 10, 5), (10, 12, 3)]), vec![]);
        // Staying below names the step back once.
        let ops = [(0, 1, 9), (2, 3, 4), (4, 5, 4), (6, 7, 5)];
        assert_eq!(regressions(&ops), vec![(0, 1)]);
        // Growing or equal is fine.
        assert_eq!(regressions(&[(0, 1, 1), (2, 3, 1), (4, 5, 2)]), vec![]);
    }

    #[test]
    fn acknowledged_commits_must_not_go_back_rejected_ones_may() {
        let fine = vec![
            commit(0, 10, 0, 5, true),
            // A fenced member's lower commit, rejected.
            commit(1, 4, 6, 8, false),
            commit(0, 12, 9, 11, true),
            // Overlapping the one before: not ordered with it.
            commit(1, 11, 10, 13, true),
        ];
        assert_eq!(commits_went_back(&fine), vec![]);
        let mut back = fine.clone();
        back.push(commit(1, 8, 20, 21, true));
        back.push(commit(1, 9, 22, 23, true));
        assert_eq!(
            commits_went_back(&back),
            vec![Anomaly::CommitWentBack {
                group: "g".to_string(),
                partition: 0,
                earlier: (0, 12, 11),
                later: (1, 8, 20),
            }]
        );
        // Another partition is another register.
        let mut other = commit(1, 1, 30, 31, true);
        other.partition = 1;
        back.push(other);
        assert_eq!(commits_went_back(&back).len(), 1);
    }

    #[test]
    fn sampled_offsets_must_not_go_back() {
        let fine = vec![
            sample(-1, 0, 1),
            sample(5, 2, 3),
            sample(5, 4, 5),
            sample(9, 6, 7),
        ];
        assert_eq!(offsets_went_back(&fine), vec![]);
        let mut back = fine.clone();
        back.push(sample(7, 8, 9));
        assert_eq!(
            offsets_went_back(&back),
            vec![Anomaly::OffsetWentBack {
                group: "g".to_string(),
                partition: 0,
                from: 9,
                from_ms: 7,
                to: 7,
                at_ms: 8,
            }]
        );
        // Losing the offset altogether is going back too.
        let lost = vec![sample(5, 0, 1), sample(-1, 2, 3)];
        assert_eq!(offsets_went_back(&lost).len(), 1);
    }

    #[test]
    fn a_partition_owned_twice_in_one_generation_is_named() {
        let fine = vec![
            assignment(0, 1, &[0, 1, 2]),
            assignment(0, 2, &[0, 1]),
            assignment(1, 2, &[2]),
            // A zombie of generation 2 while 3 forms: other generations.
            assignment(1, 3, &[0, 1, 2]),
            // Generation unknown: not checked.
            assignment(2, -1, &[0, 1, 2]),
        ];
        assert_eq!(shared_partitions(&fine), vec![]);
        let mut twice = fine.clone();
        twice.push(assignment(2, 2, &[1]));
        assert_eq!(
            shared_partitions(&twice),
            vec![Anomaly::SharedPartition {
                group: "g".to_string(),
                generation: 2,
                partition: 1,
                members: vec!["m-0".to_string(), "m-2".to_string()],
            }]
        );
        let (anomalies, stats) = check_group(&GroupHistory {
            commits: vec![commit(0, 1, 0, 1, true), commit(0, 0, 2, 3, false)],
            samples: vec![sample(1, 4, 5)],
            assignments: twice,
        });
        assert_eq!(anomalies.len(), 1);
        assert_eq!(
            (stats.commits, stats.acked_commits, stats.samples),
            (2, 1, 1)
        );
        assert_eq!(
            (
                stats.assignments,
                stats.generations,
                stats.unknown_generation
            ),
            (6, 3, 1)
        );
    }

    fn txn(attempt: u64, records: &[(i32, i64)], outcome: TxnOutcome) -> CopyTxn {
        CopyTxn {
            attempt,
            instance: 0,
            records: records
                .iter()
                .map(|&(p, o)| (p, o, format!("0-{o}")))
                .collect(),
            offsets: vec![],
            started_ms: 0,
            completed_ms: 0,
            outcome,
        }
    }

    fn copy(output_offset: i64, partition: i32, offset: i64, attempt: u64) -> Read {
        read(
            partition,
            output_offset,
            &copy_value_of(partition, offset, attempt, &format!("0-{offset}")),
        )
    }

    fn input(count: i64) -> Vec<Read> {
        (0..count).map(|o| read(0, o, &format!("0-{o}"))).collect()
    }

    /// Input 0..4 copied: 0 and 1 by committed 1, 2 by aborted 2 then
    /// committed 3 (with 3), 4 by a transaction of unknown outcome; the final
    /// committed offset 4.
    fn clean_copy() -> CopyHistory {
        CopyHistory {
            txns: vec![
                txn(1, &[(0, 0), (0, 1)], TxnOutcome::Committed),
                txn(2, &[(0, 2)], TxnOutcome::Aborted),
                txn(3, &[(0, 2), (0, 3)], TxnOutcome::Committed),
                txn(4, &[(0, 4)], TxnOutcome::Unknown("fenced".to_string())),
            ],
            final_offsets: Some(vec![(0, 4)]),
            output: vec![
                copy(0, 0, 0, 1),
                copy(1, 0, 1, 1),
                copy(5, 0, 2, 3),
                copy(6, 0, 3, 3),
            ],
            incomplete: vec![],
        }
    }

    #[test]
    fn a_clean_copy_has_no_anomaly() {
        let (anomalies, stats) = check_copy(&input(5), &clean_copy());
        assert_eq!(anomalies, vec![]);
        assert_eq!((stats.committed, stats.aborted, stats.unknown), (2, 1, 1));
        assert_eq!((stats.covered, stats.output_records), (4, 4));
    }

    #[test]
    fn every_kind_of_copy_anomaly_is_named() {
        let kinds = |history: &CopyHistory| {
            let (anomalies, _) = check_copy(&input(5), history);
            anomalies.iter().map(Anomaly::kind).collect::<Vec<_>>()
        };
        // Aborted transaction 2's copy read: G1a, and 2 is copied twice.
        let mut g1a = clean_copy();
        g1a.output.push(copy(3, 0, 2, 2));
        assert_eq!(kinds(&g1a), vec!["aborted read (G1a)", "copy duplicate"]);
        // Committed 3's copy of 3 not read: lost (not missing: it was copied).
        let mut lost = clean_copy();
        lost.output.pop();
        assert_eq!(kinds(&lost), vec!["copy lost"]);
        // The offsets cover 4, which no committed transaction copied.
        let mut missing = clean_copy();
        missing.final_offsets = Some(vec![(0, 5)]);
        assert_eq!(kinds(&missing), vec!["copy missing"]);
        // Transaction 4 committed after all, but the offsets stayed at 4.
        let mut beyond = clean_copy();
        beyond.output.push(copy(8, 0, 4, 4));
        assert_eq!(kinds(&beyond), vec!["copy beyond committed offsets"]);
        // A copy no transaction wrote, or not of that record.
        let mut phantom = clean_copy();
        phantom.output.push(read(0, 9, "garbage"));
        phantom.output.push(copy(10, 0, 1, 99));
        phantom.output.push(copy(11, 0, 3, 1));
        assert_eq!(kinds(&phantom), vec!["copy phantom"; 3]);
        // The input holds another value at 1 than the one copied.
        let mut changed = input(5);
        changed[1].value = "1-1".to_string();
        let (anomalies, _) = check_copy(&changed, &clean_copy());
        assert_eq!(
            anomalies.iter().map(Anomaly::kind).collect::<Vec<_>>(),
            vec!["copy mismatch"]
        );
        let mut incomplete = clean_copy();
        incomplete
            .incomplete
            .push("output partition 0 read to 3 of 7".to_string());
        assert_eq!(kinds(&incomplete), vec!["copy read incomplete"]);
        // Without the final offsets, only what needs no offsets is checked.
        let mut unknown_offsets = clean_copy();
        unknown_offsets.final_offsets = None;
        unknown_offsets.output.push(copy(8, 0, 4, 4));
        assert_eq!(kinds(&unknown_offsets), Vec::<&str>::new());
    }
}
