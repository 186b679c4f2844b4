//! What a fault run recorded: every write a producer attempted and what it was
//! told, every record a reader saw, and every fault the nemesis injected, each
//! with its time in milliseconds since the run started.

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
