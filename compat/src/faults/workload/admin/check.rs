//! The admin churn's history and its check. While the faults run, a client
//! creates topics (`churn-<n>`) and adds partitions to them through the admin
//! API, recording each operation and what it was told; after the heal the
//! cluster's topics are read back and one record is written to, and read from,
//! every partition of every churn topic. An operation that failed or timed out
//! is indeterminate: it may or may not have taken effect. The check names:
//!
//! - **acknowledged topic missing**: a topic whose creation was acknowledged
//!   is not in the healed cluster;
//! - **too few partitions**: a topic has fewer partitions than an
//!   acknowledged operation (its creation, or a CreatePartitions) gave it;
//! - **too many partitions**: a topic has more partitions than any operation
//!   asked for;
//! - **partition without a leader**: a churn topic's partition has no leader
//!   once the cluster is whole again;
//! - **topic never created**: a churn topic that no operation attempted;
//! - **partition unusable**: a partition the record could not be written to
//!   (acks=all) or read back from;
//! - **admin check incomplete**: the healed cluster's topics could not be
//!   read.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

use crate::faults::checker::{Anomaly, Findings};

/// The names of the churn's topics start so; no other topic does.
pub const CHURN_PREFIX: &str = "churn-";

/// What an operation asked for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AdminOpKind {
    /// CreateTopics of one topic with `count` partitions.
    CreateTopic,
    /// CreatePartitions of one topic, to `count` partitions in all.
    CreatePartitions,
}

/// What the client was told of an operation.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum AdminOutcome {
    Acked,
    /// Rejected or failed, with the error code's name: it may or may not have
    /// taken effect.
    Failed(String),
    /// No answer in time: it may or may not have taken effect.
    TimedOut(String),
}

/// One admin operation, from its start to its answer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AdminOp {
    pub kind: AdminOpKind,
    pub topic: String,
    /// The partitions asked for: a new topic's, or the total a CreatePartitions
    /// grows the topic to.
    pub count: i32,
    pub invoked_ms: u64,
    pub completed_ms: u64,
    pub outcome: AdminOutcome,
}

/// One record written to a partition after the heal and read back, or why
/// not.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Probe {
    pub topic: String,
    pub partition: i32,
    /// The offset the record was written at and read back from, or what went
    /// wrong.
    pub outcome: Result<i64, String>,
}

/// The partitions of a topic as (partition id, leader node; -1: none).
pub type TopicPartitions = Vec<(i32, i32)>;

/// What the churn recorded, and what the healed cluster held.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct AdminHistory {
    pub ops: Vec<AdminOp>,
    /// The churn topics in the healed cluster; None when they could not be
    /// read.
    pub final_topics: Option<BTreeMap<String, TopicPartitions>>,
    pub probes: Vec<Probe>,
    /// What the final reads could not finish, for the report.
    pub incomplete: Vec<String>,
}

/// One anomaly of the churn.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum AdminAnomaly {
    TopicMissing {
        topic: String,
        acked_ms: u64,
    },
    TooFewPartitions {
        topic: String,
        found: usize,
        acked: i32,
    },
    TooManyPartitions {
        topic: String,
        found: usize,
        attempted: i32,
    },
    Leaderless {
        topic: String,
        partition: i32,
    },
    NeverCreated {
        topic: String,
        partitions: usize,
    },
    Unusable {
        topic: String,
        partition: i32,
        error: String,
    },
    Incomplete {
        what: String,
    },
}

impl AdminAnomaly {
    /// The anomaly's kind, as the summary counts them.
    pub fn kind(&self) -> &'static str {
        match self {
            AdminAnomaly::TopicMissing { .. } => "acknowledged topic missing",
            AdminAnomaly::TooFewPartitions { .. } => "too few partitions",
            AdminAnomaly::TooManyPartitions { .. } => "too many partitions",
            AdminAnomaly::Leaderless { .. } => "partition without a leader",
            AdminAnomaly::NeverCreated { .. } => "topic never created",
            AdminAnomaly::Unusable { .. } => "partition unusable",
            AdminAnomaly::Incomplete { .. } => "admin check incomplete",
        }
    }
}

impl fmt::Display for AdminAnomaly {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            AdminAnomaly::TopicMissing { topic, acked_ms } => write!(
                f,
                "acknowledged topic missing: {topic} (creation acknowledged at {acked_ms} ms) is not in the healed cluster"
            ),
            AdminAnomaly::TooFewPartitions {
                topic,
                found,
                acked,
            } => write!(
                f,
                "too few partitions: {topic} has {found}, an acknowledged operation gave it {acked}"
            ),
            AdminAnomaly::TooManyPartitions {
                topic,
                found,
                attempted,
            } => write!(
                f,
                "too many partitions: {topic} has {found}, no operation asked for more than {attempted}"
            ),
            AdminAnomaly::Leaderless { topic, partition } => write!(
                f,
                "partition without a leader: {topic}-{partition} after the heal"
            ),
            AdminAnomaly::NeverCreated { topic, partitions } => write!(
                f,
                "topic never created: {topic} ({partitions} partitions) exists, no operation attempted it"
            ),
            AdminAnomaly::Unusable {
                topic,
                partition,
                error,
            } => write!(f, "partition unusable: {topic}-{partition}: {error}"),
            AdminAnomaly::Incomplete { what } => write!(f, "admin check incomplete: {what}"),
        }
    }
}

/// What the churn did, for the report.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct AdminStats {
    /// Topic creations: acknowledged, failed, timed out.
    pub creates: (usize, usize, usize),
    /// Partition additions: acknowledged, failed, timed out.
    pub additions: (usize, usize, usize),
    /// Churn topics and their partitions in the healed cluster.
    pub final_topics: usize,
    pub final_partitions: usize,
    /// Partitions written to and read back after the heal.
    pub probed_ok: usize,
}

/// The anomalies of the healed cluster's churn topics (`topics`) against the
/// operations (`ops`): missing or unattempted topics, partition counts out of
/// what the operations allow, partitions without a leader. The churn waits on
/// this to come out empty before it takes the final state.
pub fn state_anomalies(
    ops: &[AdminOp],
    topics: &BTreeMap<String, TopicPartitions>,
) -> Vec<AdminAnomaly> {
    // Per topic: the first acknowledged creation, the highest count an
    // acknowledged operation gave it, and the highest any operation asked for.
    let mut created_ms: BTreeMap<&str, u64> = BTreeMap::new();
    let mut acked: BTreeMap<&str, i32> = BTreeMap::new();
    let mut attempted: BTreeMap<&str, i32> = BTreeMap::new();
    for op in ops {
        let topic = op.topic.as_str();
        let most = attempted.entry(topic).or_insert(op.count);
        *most = (*most).max(op.count);
        if op.outcome != AdminOutcome::Acked {
            continue;
        }
        let least = acked.entry(topic).or_insert(op.count);
        *least = (*least).max(op.count);
        if op.kind == AdminOpKind::CreateTopic {
            let at = created_ms.entry(topic).or_insert(op.completed_ms);
            *at = (*at).min(op.completed_ms);
        }
    }
    let mut anomalies = Vec::new();
    for (topic, acked_ms) in &created_ms {
        if !topics.contains_key(*topic) {
            anomalies.push(AdminAnomaly::TopicMissing {
                topic: topic.to_string(),
                acked_ms: *acked_ms,
            });
        }
    }
    for (topic, partitions) in topics {
        let found = partitions.len();
        let Some(&most) = attempted.get(topic.as_str()) else {
            anomalies.push(AdminAnomaly::NeverCreated {
                topic: topic.clone(),
                partitions: found,
            });
            continue;
        };
        if let Some(&least) = acked.get(topic.as_str()) {
            if found < least as usize {
                anomalies.push(AdminAnomaly::TooFewPartitions {
                    topic: topic.clone(),
                    found,
                    acked: least,
                });
            }
        }
        if found > most.max(0) as usize {
            anomalies.push(AdminAnomaly::TooManyPartitions {
                topic: topic.clone(),
                found,
                attempted: most,
            });
        }
        for &(partition, leader) in partitions {
            if leader < 0 {
                anomalies.push(AdminAnomaly::Leaderless {
                    topic: topic.clone(),
                    partition,
                });
            }
        }
    }
    anomalies
}

/// Checks the churn's history: the final state (`state_anomalies`), every
/// partition written to and read back, and what could not be read.
pub fn check(history: &AdminHistory) -> (Vec<AdminAnomaly>, AdminStats) {
    let mut stats = AdminStats::default();
    for op in &history.ops {
        let counts = match op.kind {
            AdminOpKind::CreateTopic => &mut stats.creates,
            AdminOpKind::CreatePartitions => &mut stats.additions,
        };
        match op.outcome {
            AdminOutcome::Acked => counts.0 += 1,
            AdminOutcome::Failed(_) => counts.1 += 1,
            AdminOutcome::TimedOut(_) => counts.2 += 1,
        }
    }
    let mut anomalies = Vec::new();
    match &history.final_topics {
        Some(topics) => {
            stats.final_topics = topics.len();
            stats.final_partitions = topics.values().map(Vec::len).sum();
            anomalies.extend(state_anomalies(&history.ops, topics));
        }
        None => anomalies.push(AdminAnomaly::Incomplete {
            what: "the healed cluster's topics could not be read".to_string(),
        }),
    }
    let mut probed = BTreeSet::new();
    for probe in &history.probes {
        probed.insert((probe.topic.as_str(), probe.partition));
        match &probe.outcome {
            Ok(_) => stats.probed_ok += 1,
            Err(error) => anomalies.push(AdminAnomaly::Unusable {
                topic: probe.topic.clone(),
                partition: probe.partition,
                error: error.clone(),
            }),
        }
    }
    // Every partition of the final state is probed, or it is unusable.
    for (topic, partitions) in history.final_topics.iter().flatten() {
        for &(partition, _) in partitions {
            if !probed.contains(&(topic.as_str(), partition)) {
                anomalies.push(AdminAnomaly::Unusable {
                    topic: topic.clone(),
                    partition,
                    error: "not probed".to_string(),
                });
            }
        }
    }
    anomalies.extend(
        history
            .incomplete
            .iter()
            .map(|what| AdminAnomaly::Incomplete { what: what.clone() }),
    );
    (anomalies, stats)
}

/// Adds the churn's anomalies and counts to `findings`.
pub fn check_into(findings: &mut Findings, history: &AdminHistory) {
    let (anomalies, stats) = check(history);
    findings
        .anomalies
        .extend(anomalies.into_iter().map(Anomaly::Admin));
    findings.admin = stats;
}

#[cfg(test)]
mod tests {
    use super::*;

    fn op(kind: AdminOpKind, topic: &str, count: i32, at: u64, outcome: AdminOutcome) -> AdminOp {
        AdminOp {
            kind,
            topic: topic.to_string(),
            count,
            invoked_ms: at,
            completed_ms: at + 5,
            outcome,
        }
    }

    fn create(topic: &str, count: i32, at: u64, outcome: AdminOutcome) -> AdminOp {
        op(AdminOpKind::CreateTopic, topic, count, at, outcome)
    }

    fn grow(topic: &str, count: i32, at: u64, outcome: AdminOutcome) -> AdminOp {
        op(AdminOpKind::CreatePartitions, topic, count, at, outcome)
    }

    fn timed_out() -> AdminOutcome {
        AdminOutcome::TimedOut("OperationTimedOut".to_string())
    }

    fn failed() -> AdminOutcome {
        AdminOutcome::Failed("RequestTimedOut".to_string())
    }

    /// `count` partitions, each led by node 1.
    fn led(count: i32) -> TopicPartitions {
        (0..count).map(|p| (p, 1)).collect()
    }

    fn topics(list: &[(&str, TopicPartitions)]) -> BTreeMap<String, TopicPartitions> {
        list.iter()
            .map(|(name, partitions)| (name.to_string(), partitions.clone()))
            .collect()
    }

    fn probes_of(topics: &BTreeMap<String, TopicPartitions>) -> Vec<Probe> {
        topics
            .iter()
            .flat_map(|(topic, partitions)| {
                partitions.iter().map(|&(partition, _)| Probe {
                    topic: topic.clone(),
                    partition,
                    outcome: Ok(0),
                })
            })
            .collect()
    }

    /// churn-0 created with 2 and grown to 3, churn-1's creation timed out
    /// (absent), churn-2's failed (present after all), churn-3 grown once
    /// acknowledged and once timed out.
    fn clean() -> AdminHistory {
        let ops = vec![
            create("churn-0", 2, 0, AdminOutcome::Acked),
            create("churn-1", 1, 10, timed_out()),
            create("churn-2", 1, 20, failed()),
            grow("churn-0", 3, 30, AdminOutcome::Acked),
            create("churn-3", 1, 40, AdminOutcome::Acked),
            grow("churn-3", 2, 50, AdminOutcome::Acked),
            grow("churn-3", 3, 60, timed_out()),
        ];
        let final_topics = topics(&[
            ("churn-0", led(3)),
            ("churn-2", led(1)),
            ("churn-3", led(2)),
        ]);
        AdminHistory {
            ops,
            probes: probes_of(&final_topics),
            final_topics: Some(final_topics),
            incomplete: vec![],
        }
    }

    fn kinds(history: &AdminHistory) -> Vec<&'static str> {
        let (anomalies, _) = check(history);
        anomalies.iter().map(AdminAnomaly::kind).collect()
    }

    #[test]
    fn a_clean_churn_has_no_anomaly() {
        let (anomalies, stats) = check(&clean());
        assert_eq!(anomalies, vec![]);
        assert_eq!(stats.creates, (2, 1, 1));
        assert_eq!(stats.additions, (2, 0, 1));
        assert_eq!((stats.final_topics, stats.final_partitions), (3, 6));
        assert_eq!(stats.probed_ok, 6);
    }

    #[test]
    fn an_indeterminate_operation_may_have_taken_effect() {
        // churn-3's timed-out growth to 3 happened, and churn-1's timed-out
        // creation too.
        let mut history = clean();
        let final_topics = history.final_topics.as_mut().expect("topics");
        final_topics.insert("churn-3".to_string(), led(3));
        final_topics.insert("churn-1".to_string(), led(1));
        history.probes = probes_of(final_topics);
        assert_eq!(kinds(&history), Vec::<&str>::new());
    }

    #[test]
    fn an_acknowledged_topic_missing_is_named() {
        let mut history = clean();
        history
            .final_topics
            .as_mut()
            .expect("topics")
            .remove("churn-0");
        history.probes.retain(|p| p.topic != "churn-0");
        let (anomalies, _) = check(&history);
        assert_eq!(
            anomalies,
            vec![AdminAnomaly::TopicMissing {
                topic: "churn-0".to_string(),
                acked_ms: 5,
            }]
        );
    }

    #[test]
    fn every_kind_of_admin_anomaly_is_named() {
        // Fewer partitions than the acknowledged growth to 3.
        let mut few = clean();
        few.final_topics
            .as_mut()
            .expect("topics")
            .insert("churn-0".to_string(), led(2));
        few.probes = probes_of(few.final_topics.as_ref().expect("topics"));
        assert_eq!(kinds(&few), vec!["too few partitions"]);
        // More than the 3 churn-3 was ever asked for.
        let mut many = clean();
        many.final_topics
            .as_mut()
            .expect("topics")
            .insert("churn-3".to_string(), led(4));
        many.probes = probes_of(many.final_topics.as_ref().expect("topics"));
        assert_eq!(kinds(&many), vec!["too many partitions"]);
        // A partition without a leader.
        let mut leaderless = clean();
        leaderless
            .final_topics
            .as_mut()
            .expect("topics")
            .insert("churn-0".to_string(), vec![(0, 1), (1, -1), (2, 3)]);
        assert_eq!(kinds(&leaderless), vec!["partition without a leader"]);
        // A churn topic no operation attempted.
        let mut unattempted = clean();
        unattempted
            .final_topics
            .as_mut()
            .expect("topics")
            .insert("churn-9".to_string(), led(1));
        unattempted.probes = probes_of(unattempted.final_topics.as_ref().expect("topics"));
        assert_eq!(kinds(&unattempted), vec!["topic never created"]);
        // A partition the record could not be written to, one not probed.
        let mut unusable = clean();
        unusable.probes[0].outcome = Err("NotEnoughReplicas".to_string());
        unusable.probes.pop();
        assert_eq!(kinds(&unusable), vec!["partition unusable"; 2]);
        // The healed cluster's topics unread.
        let mut unread = clean();
        unread.final_topics = None;
        unread
            .incomplete
            .push("the probe did not finish".to_string());
        assert_eq!(kinds(&unread), vec!["admin check incomplete"; 2]);
    }

    #[test]
    fn check_into_adds_to_the_findings() {
        let mut findings = Findings::default();
        let mut history = clean();
        history.final_topics = None;
        check_into(&mut findings, &history);
        assert_eq!(
            findings.by_kind().get("admin check incomplete"),
            Some(&1),
            "{:?}",
            findings.anomalies
        );
        assert_eq!(findings.admin.creates, (2, 1, 1));
    }
}
