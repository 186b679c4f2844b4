//! Small value types shared by every layer, named as Kafka names them.

use std::fmt;

/// A topic partition, the unit of a log. Cheap to clone only in the sense that a
/// topic name is short; hot paths borrow it.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct TopicPartition {
    pub topic: String,
    pub partition: i32,
}

impl TopicPartition {
    pub fn new(topic: impl Into<String>, partition: i32) -> TopicPartition {
        TopicPartition {
            topic: topic.into(),
            partition,
        }
    }

    /// The partition directory name, `topic-N`, as Kafka lays out a log dir.
    pub fn dir_name(&self) -> String {
        format!("{}-{}", self.topic, self.partition)
    }
}

impl fmt::Display for TopicPartition {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}-{}", self.topic, self.partition)
    }
}

/// KIP-890's verification guard (Kafka's `VerificationGuard`): taken on a
/// partition's leader before the transaction coordinator is asked whether the
/// partition is in the producer's transaction, and required by the append of
/// the transaction's first batch there. A marker for the producer (its
/// transaction ended meanwhile) or that first batch lets go of it, so an append
/// verified before the transaction ended cannot open a transaction after it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct VerificationGuard(u64);

impl VerificationGuard {
    /// The guard numbered `id` (unique among a partition's guards).
    pub fn new(id: u64) -> VerificationGuard {
        VerificationGuard(id)
    }
}

/// How a transactional append on a partition was admitted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TxnVerification {
    /// The transaction coordinator is on this broker and holds the
    /// transaction open until the append is done: nothing to check.
    Held,
    /// A coordinator on another broker vouched for the transaction after
    /// this guard was taken (None: none was, the transaction being open
    /// here): the append requires it still held.
    Guarded(Option<VerificationGuard>),
}
