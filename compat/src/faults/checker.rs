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
//! The consumer-group workload (checked in `workload::group::check`) adds:
//!
//! - **commit went back**: an acknowledged commit of a partition's offset
//!   lower than one acknowledged before it was sent;
//! - **committed offset went back**: a group's committed offset, read from
//!   the cluster, lower than a read that finished before it started;
//! - **partition owned twice in a generation**: two members given one
//!   partition in the same generation of their group.
//!
//! The transactional copy (consume-transform-produce with the consumer's
//! offsets in each transaction, checked in `workload::copy::check`) adds,
//! over the copies a read_committed consumer sees:
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

use super::history::{parse_value, CopyHistory, FaultWindow, GroupHistory, Outcome, Read, Write};
use super::workload::admin::check::{AdminAnomaly, AdminStats};
use super::workload::copy::check::{check_copy, CopyStats};
use super::workload::group::check::{check_group, GroupStats};

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
/// (`end_ms`) for availability. The anomalies come in the order of the steps:
/// two values at an offset, phantoms, duplicates, reads lost, acknowledged
/// writes lost or moved, writes out of order.
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
    findings.anomalies = two_values(observed, final_read);
    let healed = Healed::index(final_read);
    findings.anomalies.extend(phantoms(final_read, &sent));
    findings.anomalies.extend(healed.duplicates());
    findings.anomalies.extend(healed.reads_lost(observed));
    let ack_times = check_acknowledged(writes, &healed, &mut findings);
    availability(&mut findings, ack_times, faults, end_ms);
    findings
}

/// Two reads (during the run or the final one) of one offset that disagree.
fn two_values(observed: &[Read], final_read: &[Read]) -> Vec<Anomaly> {
    // Every value seen at each offset, by any read.
    let mut at_offset: BTreeMap<(i32, i64), BTreeSet<&str>> = BTreeMap::new();
    for read in observed.iter().chain(final_read) {
        at_offset
            .entry((read.partition, read.offset))
            .or_default()
            .insert(read.value.as_str());
    }
    at_offset
        .into_iter()
        .filter(|(_, values)| values.len() > 1)
        .map(|((partition, offset), values)| Anomaly::TwoValues {
            partition,
            offset,
            values: values.iter().map(|v| v.to_string()).collect(),
        })
        .collect()
}

/// Values in the final read that no producer sent.
fn phantoms(final_read: &[Read], sent: &BTreeSet<(u32, u64)>) -> Vec<Anomaly> {
    final_read
        .iter()
        .filter(|read| !parse_value(&read.value).is_some_and(|key| sent.contains(&key)))
        .map(|read| Anomaly::Phantom {
            value: read.value.clone(),
            partition: read.partition,
            offset: read.offset,
        })
        .collect()
}

/// The final read of the healed cluster: what is where, and where each value
/// is.
struct Healed<'r> {
    at: HashMap<(i32, i64), &'r str>,
    offsets_of: BTreeMap<(&'r str, i32), Vec<i64>>,
}

impl<'r> Healed<'r> {
    fn index(final_read: &'r [Read]) -> Healed<'r> {
        let mut at = HashMap::new();
        let mut offsets_of: BTreeMap<(&str, i32), Vec<i64>> = BTreeMap::new();
        for read in final_read {
            at.insert((read.partition, read.offset), read.value.as_str());
            offsets_of
                .entry((read.value.as_str(), read.partition))
                .or_default()
                .push(read.offset);
        }
        Healed { at, offsets_of }
    }

    /// A value at two offsets of its partition (producers here are
    /// idempotent).
    fn duplicates(&self) -> Vec<Anomaly> {
        self.offsets_of
            .iter()
            .filter(|(_, offsets)| offsets.len() > 1)
            .map(|((value, partition), offsets)| Anomaly::Duplicate {
                value: value.to_string(),
                partition: *partition,
                offsets: offsets.clone(),
            })
            .collect()
    }

    /// Each record read during the run was below its high watermark then:
    /// committed, so it must still be where it was read.
    fn reads_lost(&self, observed: &[Read]) -> Vec<Anomaly> {
        observed
            .iter()
            .filter(|read| !self.at.contains_key(&(read.partition, read.offset)))
            .map(|read| Anomaly::ReadLost {
                value: read.value.clone(),
                partition: read.partition,
                offset: read.offset,
                read_ms: read.at_ms,
            })
            .collect()
    }

    /// An acknowledged write that is not where it was acknowledged: moved
    /// if its value is elsewhere in its partition, lost if nowhere.
    fn misplaced(&self, write: &Write, offset: i64) -> Option<Anomaly> {
        let value = write.value();
        if self.at.get(&(write.partition, offset)) == Some(&value.as_str()) {
            return None;
        }
        let found = self
            .offsets_of
            .get(&(value.as_str(), write.partition))
            .cloned();
        Some(match found {
            Some(found) => Anomaly::Moved {
                value,
                partition: write.partition,
                acked: offset,
                found,
            },
            None => Anomaly::Lost {
                value,
                partition: write.partition,
                offset,
            },
        })
    }
}

/// Counts the writes acknowledged and failed, checks each acknowledged write
/// where it was acknowledged and each producer's order within a partition;
/// returns when each acknowledgement came.
fn check_acknowledged(writes: &[Write], healed: &Healed<'_>, findings: &mut Findings) -> Vec<u64> {
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
        findings.anomalies.extend(healed.misplaced(write, offset));
    }
    findings.anomalies.extend(out_of_order(acked_by));
    ack_times
}

/// A producer's acknowledged writes to one partition whose offsets are the
/// other way round from their sends.
fn out_of_order(acked_by: BTreeMap<(u32, i32), Vec<(u64, i64)>>) -> Vec<Anomaly> {
    let mut anomalies = Vec::new();
    for ((producer, partition), mut acked) in acked_by {
        acked.sort_unstable();
        for pair in acked.windows(2) {
            if pair[1].1 <= pair[0].1 {
                anomalies.push(Anomaly::OutOfOrder {
                    producer,
                    partition,
                    earlier: pair[0],
                    later: pair[1],
                });
            }
        }
    }
    anomalies
}

/// Availability: the gaps between acknowledgements, from the run's start to
/// its end, overall and during each kind of fault.
fn availability(
    findings: &mut Findings,
    mut ack_times: Vec<u64>,
    faults: &[FaultWindow],
    end_ms: u64,
) {
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
}
