//! What a fault run recorded: every write a producer attempted and what it was
//! told, every record a reader saw, and every fault the nemesis injected, each
//! with its time in milliseconds since the run started.

use std::collections::{HashMap, HashSet};
use std::sync::Mutex;

/// One producer's write of a value: `<producer>-<sequence>`, sent to one
/// partition.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Write {
    pub producer: u32,
    pub seq: u64,
    pub partition: i32,
    pub invoked_ms: u64,
    pub completed_ms: u64,
    pub outcome: Outcome,
}

impl Write {
    pub fn value(&self) -> String {
        value_of(self.producer, self.seq)
    }
}

/// What the client was told of a write.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// Acknowledged at this offset of its partition.
    Acked { offset: i64 },
    /// Acknowledged at this offset by the partition's leader alone (acks=1):
    /// the leader had it, nothing more is promised. It may be lost with its
    /// leader, but once a consumer read it (below the high watermark) it is
    /// committed and must stay, as every record read must.
    AckedByLeader { offset: i64 },
    /// Failed or timed out: it may or may not have been written.
    Failed(String),
}

/// A record seen by a reader.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Read {
    pub partition: i32,
    pub offset: i64,
    pub value: String,
    pub at_ms: u64,
}

/// The records a reader saw during the run, each (partition, offset, value)
/// once: a reader sent back (to the start, after an out-of-range answer, say)
/// sees the same records again, and over an hour-long run keeping every
/// sighting ran the harness out of memory. Only a value other than the one
/// already seen at an offset tells the checker anything, and every such value
/// is kept.
#[derive(Debug, Default)]
pub struct ObservedReads {
    reads: Vec<Read>,
    /// (partition, offset) → the index in `reads` of the first value seen there.
    first: HashMap<(i32, i64), usize>,
    /// Every other value seen at an offset (rare: each is an anomaly).
    others: HashSet<(i32, i64, String)>,
    /// Sightings of a record already kept.
    repeats: u64,
}

impl ObservedReads {
    /// Records one sighting; true when it was new.
    pub fn record(&mut self, read: Read) -> bool {
        let key = (read.partition, read.offset);
        let new = match self.first.get(&key) {
            None => {
                self.first.insert(key, self.reads.len());
                true
            }
            Some(&i) if self.reads[i].value == read.value => false,
            Some(_) => self
                .others
                .insert((read.partition, read.offset, read.value.clone())),
        };
        if new {
            self.reads.push(read);
        } else {
            self.repeats += 1;
        }
        new
    }

    /// The records kept, in the order first seen.
    pub fn reads(&self) -> &[Read] {
        &self.reads
    }

    /// How many sightings repeated a record already kept.
    pub fn repeats(&self) -> u64 {
        self.repeats
    }
}

/// A fault the nemesis injected, from its start to its heal.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FaultWindow {
    /// What kind: "kill", "pause", "isolate-node", "isolate-leader", ...
    pub kind: String,
    /// What it hit, for the log: "node 2", "node 1 (leader of faults-0)".
    pub target: String,
    pub start_ms: u64,
    pub end_ms: u64,
}

/// The value producer `producer` writes as its `seq`th record.
pub fn value_of(producer: u32, seq: u64) -> String {
    format!("{producer}-{seq}")
}

/// (producer, sequence) of a value written by `value_of`.
pub fn parse_value(value: &str) -> Option<(u32, u64)> {
    let (producer, seq) = value.split_once('-')?;
    Some((producer.parse().ok()?, seq.parse().ok()?))
}

/// One partition's offset in a consumer group's synchronous commit, and what
/// the member was told. A commit of several partitions is recorded once per
/// partition, all with the commit's outcome.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Commit {
    pub group: String,
    /// The committing member, by its index in the workload.
    pub member: u32,
    pub partition: i32,
    /// The offset committed: the next record the group is to read.
    pub offset: i64,
    pub invoked_ms: u64,
    pub completed_ms: u64,
    pub outcome: CommitOutcome,
}

/// What a member was told of a commit.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CommitOutcome {
    Acked,
    /// Rejected, failed or timed out: it may or may not have been stored.
    Failed(String),
}

/// A group's committed offset of one partition, read from the cluster by a
/// client outside the group (OffsetFetch), between `invoked_ms` and `at_ms`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OffsetSample {
    pub group: String,
    pub partition: i32,
    /// -1: the group had no committed offset for the partition.
    pub offset: i64,
    pub invoked_ms: u64,
    pub at_ms: u64,
}

/// The partitions a member was given in one generation of its group, as its
/// rebalance callback saw them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Assignment {
    pub group: String,
    /// The member, by its index in the workload.
    pub member: u32,
    /// The id the coordinator gave the member.
    pub member_id: String,
    /// The generation the assignment belongs to; -1 when the client could
    /// not tell (it was not in a generation when asked).
    pub generation: i32,
    pub partitions: Vec<i32>,
    pub at_ms: u64,
}

/// One transaction of the consume-transform-produce copy: the input records
/// it copied and the consumer offsets it sent, with its outcome.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CopyTxn {
    /// Unique in the run; every copy the transaction wrote carries it.
    pub attempt: u64,
    /// Which producer instance (of the one transactional id) ran it.
    pub instance: u32,
    /// (input partition, input offset, input value) of each record copied.
    pub records: Vec<(i32, i64, String)>,
    /// (input partition, next offset) sent with `send_offsets_to_transaction`.
    pub offsets: Vec<(i32, i64)>,
    pub started_ms: u64,
    pub completed_ms: u64,
    pub outcome: TxnOutcome,
}

/// What the transactional producer was told of a transaction.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TxnOutcome {
    /// `commit_transaction` succeeded.
    Committed,
    /// `abort_transaction` succeeded: nothing of it may ever be read committed.
    Aborted,
    /// Neither is known (a commit or an abort failed, or the instance was
    /// fenced): it may have committed or aborted.
    Unknown(String),
}

/// The value of the copy of input record `partition`/`offset` (whose value is
/// `value`) written by transaction `attempt`.
pub fn copy_value_of(partition: i32, offset: i64, attempt: u64, value: &str) -> String {
    format!("{partition}:{offset}:{attempt}:{value}")
}

/// (input partition, input offset, attempt, input value) of a copy's value.
pub fn parse_copy_value(value: &str) -> Option<(i32, i64, u64, &str)> {
    let mut parts = value.splitn(4, ':');
    let partition = parts.next()?.parse().ok()?;
    let offset = parts.next()?.parse().ok()?;
    let attempt = parts.next()?.parse().ok()?;
    Some((partition, offset, attempt, parts.next()?))
}

/// What the consumer-group workload recorded: commits, assignments, and the
/// committed offsets sampled from outside the group.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct GroupHistory {
    pub commits: Vec<Commit>,
    pub samples: Vec<OffsetSample>,
    pub assignments: Vec<Assignment>,
}

/// What the transactional copy recorded, and what the healed cluster held.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CopyHistory {
    pub txns: Vec<CopyTxn>,
    /// The copy group's committed offset of each input partition at the end
    /// (-1: none); None when it could not be read.
    pub final_offsets: Option<Vec<(i32, i64)>>,
    /// The output topic, read with read_committed from its start.
    pub output: Vec<Read>,
    /// What the final reads could not finish, for the report.
    pub incomplete: Vec<String>,
}

/// What the run recorded, as it goes: the producers' writes, the reader's
/// records and the nemesis's faults, each shared by the threads that add to it.
#[derive(Default)]
pub struct History {
    pub writes: Mutex<Vec<Write>>,
    pub reads: Mutex<ObservedReads>,
    pub faults: Mutex<Vec<FaultWindow>>,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(partition: i32, offset: i64, value: &str, at_ms: u64) -> Read {
        Read {
            partition,
            offset,
            value: value.to_string(),
            at_ms,
        }
    }

    #[test]
    fn a_record_seen_again_is_kept_once_and_another_value_at_its_offset_always() {
        let mut observed = ObservedReads::default();
        assert!(observed.record(read(0, 0, "0-0", 1)));
        assert!(observed.record(read(0, 1, "0-1", 2)));
        // Read again from the start: nothing new.
        assert!(!observed.record(read(0, 0, "0-0", 3)));
        assert!(!observed.record(read(0, 1, "0-1", 4)));
        // The same offset of another partition is another record.
        assert!(observed.record(read(1, 0, "0-0", 5)));
        // Another value at a seen offset is kept, once, beside the first.
        assert!(observed.record(read(0, 1, "1-7", 6)));
        assert!(!observed.record(read(0, 1, "1-7", 7)));
        assert!(observed.record(read(0, 1, "2-9", 8)));
        assert_eq!(
            observed
                .reads()
                .iter()
                .map(|r| (r.partition, r.offset, r.value.as_str()))
                .collect::<Vec<_>>(),
            [
                (0, 0, "0-0"),
                (0, 1, "0-1"),
                (1, 0, "0-0"),
                (0, 1, "1-7"),
                (0, 1, "2-9")
            ]
        );
        assert_eq!(observed.repeats(), 3);
    }
}
