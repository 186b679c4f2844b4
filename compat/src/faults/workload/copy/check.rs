//! The transactional copy's check, over what a read_committed consumer of
//! the output sees: every copy comes from a transaction of the run that
//! copied that input record and did not abort, holds the input's value, lies
//! below its partition's final committed offset and is the only copy of its
//! record; every committed transaction's copies are there; every input record
//! below the final committed offsets was copied. The anomalies are the
//! `Anomaly::Copy*` and `AbortedRead` variants.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use crate::faults::checker::Anomaly;
use crate::faults::history::{parse_copy_value, CopyHistory, Read, TxnOutcome};

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
    let txns = transactions(history, &mut stats);
    let copies = read_copies(input, history, &txns, &mut anomalies);
    anomalies.extend(duplicates(&copies));
    let committed_copies = lost_copies(history, &copies, &mut anomalies);
    if let Some(final_offsets) = &history.final_offsets {
        let committed: HashMap<i32, i64> = final_offsets.iter().copied().collect();
        let offsets = FinalOffsets(committed);
        anomalies.extend(offsets.beyond(&copies));
        let (covered, missing) = offsets.missing(input, &copies, &committed_copies);
        stats.covered = covered;
        anomalies.extend(missing);
    }
    (anomalies, stats)
}

/// A transaction's outcome and the input records it copied.
type Copied<'a> = (&'a TxnOutcome, BTreeSet<(i32, i64)>);

/// Each transaction by attempt, counted by outcome into `stats`.
fn transactions<'h>(history: &'h CopyHistory, stats: &mut CopyStats) -> HashMap<u64, Copied<'h>> {
    let mut txns = HashMap::new();
    for txn in &history.txns {
        match txn.outcome {
            TxnOutcome::Committed => stats.committed += 1,
            TxnOutcome::Aborted => stats.aborted += 1,
            TxnOutcome::Unknown(_) => stats.unknown += 1,
        }
        let records = txn.records.iter().map(|(p, o, _)| (*p, *o)).collect();
        txns.insert(txn.attempt, (&txn.outcome, records));
    }
    txns
}

/// The copies read, by input record (each with the attempts that copied it);
/// a copy no transaction wrote, one an aborted transaction wrote, and one
/// whose value is not the input's are named in `anomalies`.
fn read_copies(
    input: &[Read],
    history: &CopyHistory,
    txns: &HashMap<u64, Copied<'_>>,
    anomalies: &mut Vec<Anomaly>,
) -> BTreeMap<(i32, i64), Vec<u64>> {
    let input_at: HashMap<(i32, i64), &str> = input
        .iter()
        .map(|r| ((r.partition, r.offset), r.value.as_str()))
        .collect();
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
    copies
}

/// Input records copied more than once.
fn duplicates(copies: &BTreeMap<(i32, i64), Vec<u64>>) -> Vec<Anomaly> {
    copies
        .iter()
        .filter(|(_, attempts)| attempts.len() > 1)
        .map(|((partition, offset), attempts)| Anomaly::CopyDuplicate {
            partition: *partition,
            offset: *offset,
            attempts: attempts.clone(),
        })
        .collect()
}

/// Every committed transaction's copies are read: the ones that are not are
/// named in `anomalies`; returns every input record a committed transaction
/// copied.
fn lost_copies(
    history: &CopyHistory,
    copies: &BTreeMap<(i32, i64), Vec<u64>>,
    anomalies: &mut Vec<Anomaly>,
) -> BTreeSet<(i32, i64)> {
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
    committed_copies
}

/// The copy group's final committed offsets, by partition: every input
/// record below them copied, nothing at or past them.
struct FinalOffsets(HashMap<i32, i64>);

impl FinalOffsets {
    /// A partition's committed offset (-1 with none).
    fn of(&self, partition: i32) -> i64 {
        self.0.get(&partition).copied().unwrap_or(-1)
    }

    /// Copies of input records at or past their partition's offset.
    fn beyond(&self, copies: &BTreeMap<(i32, i64), Vec<u64>>) -> Vec<Anomaly> {
        copies
            .keys()
            .filter(|(partition, offset)| *offset >= self.of(*partition))
            .map(|(partition, offset)| Anomaly::CopyBeyondOffsets {
                partition: *partition,
                offset: *offset,
                committed: self.of(*partition),
            })
            .collect()
    }

    /// How many input records lie below the offsets, and those of them that
    /// were neither read as a copy nor copied by a committed transaction.
    fn missing(
        &self,
        input: &[Read],
        copies: &BTreeMap<(i32, i64), Vec<u64>>,
        committed_copies: &BTreeSet<(i32, i64)>,
    ) -> (usize, Vec<Anomaly>) {
        let mut covered: Vec<(i32, i64)> = input
            .iter()
            .map(|r| (r.partition, r.offset))
            .filter(|(partition, offset)| *offset < self.of(*partition))
            .collect();
        covered.sort_unstable();
        covered.dedup();
        let missing = covered
            .iter()
            .filter(|key| !copies.contains_key(key) && !committed_copies.contains(key))
            .map(|&(partition, offset)| Anomaly::CopyMissing {
                partition,
                offset,
                committed: self.of(partition),
            })
            .collect();
        (covered.len(), missing)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::faults::history::{copy_value_of, CopyTxn};

    fn read(partition: i32, offset: i64, value: &str) -> Read {
        Read {
            partition,
            offset,
            value: value.to_string(),
            at_ms: 0,
        }
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
