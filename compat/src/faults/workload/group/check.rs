//! The consumer-group workload's check: acknowledged commits and sampled
//! committed offsets that went back, and partitions owned twice in one
//! generation (`Anomaly::CommitWentBack`, `OffsetWentBack`,
//! `SharedPartition`), with the counts for the report. A commit or a sample
//! is an operation that took effect at some moment between its start and its
//! end; only operations one after the other are ordered (`regressions`).

use std::collections::{BTreeMap, BTreeSet};

use crate::faults::checker::Anomaly;
use crate::faults::history::{Assignment, Commit, CommitOutcome, GroupHistory, OffsetSample};

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

#[cfg(test)]
mod tests {
    use super::*;

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
}
