//! Small value types shared by every layer, named as Kafka names them.

use std::fmt;

use serde::{Deserialize, Serialize};

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

/// The constructor, the accessor and Display of a newtype over Kafka's integer:
/// shown as the bare number, as Kafka logs it.
macro_rules! kafka_integer {
    ($name:ident, $int:ty) => {
        impl $name {
            /// The value Kafka carries; the caller vouches for the invariant.
            pub const fn new(value: $int) -> $name {
                $name(value)
            }

            /// The integer Kafka's protocol and files carry.
            pub const fn get(self) -> $int {
                self.0
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                fmt::Display::fmt(&self.0, f)
            }
        }
    };
}

/// A position in a partition's log (Kafka's offset): the offset of a record, or a
/// bound of the log (its start offset, its end offset, the high watermark, the
/// last stable offset), which names the next record to be written or read.
///
/// Invariant: never negative where it names a record or a bound of the log.
/// Kafka's protocol says "no offset" with -1; inside Sluice that is
/// `Option<Offset>`, and -1 is written only at the protocol edge.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Offset(i64);

kafka_integer!(Offset, i64);

impl Offset {
    /// The offset right after this one: the end offset of a log whose last record
    /// is here.
    pub const fn next(self) -> Offset {
        Offset(self.0 + 1)
    }
}

/// The generation of a partition's leadership (Kafka's leader epoch): the
/// controller bumps it at every change of leader, and the leader stamps it on
/// every batch it appends, so a log's leader-epoch cache says who wrote what.
///
/// Invariant: only grows for a partition, and is never negative for a leadership
/// the controller made. Kafka's protocol says "no epoch" with -1
/// (`NO_PARTITION_LEADER_EPOCH`); inside Sluice that is `Option<LeaderEpoch>`,
/// except for `NONE`, the epoch of a partition replica no metadata image has
/// reached yet.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct LeaderEpoch(i32);

kafka_integer!(LeaderEpoch, i32);

impl LeaderEpoch {
    /// Kafka's `NO_PARTITION_LEADER_EPOCH`: before any leadership is known.
    pub const NONE: LeaderEpoch = LeaderEpoch(-1);

    /// The epoch a wire field carries, None for Kafka's "no epoch" (any negative
    /// value, as Sluice has always read it).
    pub const fn known(epoch: i32) -> Option<LeaderEpoch> {
        if epoch >= 0 {
            Some(LeaderEpoch(epoch))
        } else {
            None
        }
    }

    /// The epoch after this one: the controller's bump at a change of leader.
    pub const fn next(self) -> LeaderEpoch {
        LeaderEpoch(self.0 + 1)
    }
}

/// A producer's generation under its producer id (Kafka's producer epoch):
/// InitProducerId bumps it, and so does the transaction coordinator when it
/// fences a producer; a partition refuses batches and markers from an epoch older
/// than the last it saw of that producer.
///
/// Invariant: only grows for a producer id. -1 is Kafka's `NO_PRODUCER_EPOCH`
/// (`NONE`): a transactional id that no InitProducerId has reached, or an epoch
/// a transaction record does not keep.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ProducerEpoch(i16);

kafka_integer!(ProducerEpoch, i16);

impl ProducerEpoch {
    /// Kafka's `RecordBatch.NO_PRODUCER_EPOCH`.
    pub const NONE: ProducerEpoch = ProducerEpoch(-1);

    /// The epoch after this one (from `NONE`, the first epoch, 0). The caller
    /// checks that this one is not exhausted (`i16::MAX`).
    pub const fn next(self) -> ProducerEpoch {
        ProducerEpoch(self.0 + 1)
    }
}

/// A broker's registration generation (Kafka's broker epoch): the metadata
/// offset of its latest registration, here the raft log index of the
/// RegisterBroker entry, new at every start of the broker. An ISR member is
/// named with it (KIP-903), so that a restarted broker is told apart from the
/// process that was in sync.
///
/// Invariant: only grows for a broker, and is never negative for a
/// registration. Kafka's protocol says "none" with -1 (a fetch before v15,
/// PreviousBrokerEpoch after an unclean shutdown, an ISR member whose epoch is
/// not known): `NONE` where Sluice keeps Kafka's field as it is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct BrokerEpoch(i64);

kafka_integer!(BrokerEpoch, i64);

impl BrokerEpoch {
    /// Kafka's -1: no broker epoch known.
    pub const NONE: BrokerEpoch = BrokerEpoch(-1);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_next_offset_follows_and_orders_after() {
        let offset = Offset::new(41);
        assert_eq!(offset.next(), Offset::new(42));
        assert!(offset < offset.next());
        assert_eq!(Offset::new(0).next().get(), 1);
    }

    #[test]
    fn a_leader_epoch_from_the_wire_is_known_only_when_not_negative() {
        assert_eq!(LeaderEpoch::known(-1), None);
        assert_eq!(LeaderEpoch::known(i32::MIN), None);
        assert_eq!(LeaderEpoch::known(0), Some(LeaderEpoch::new(0)));
        assert_eq!(
            LeaderEpoch::known(7).map(LeaderEpoch::next),
            Some(LeaderEpoch::new(8))
        );
        assert!(LeaderEpoch::NONE < LeaderEpoch::new(0));
    }

    #[test]
    fn a_producer_epoch_after_none_is_the_first() {
        assert_eq!(ProducerEpoch::NONE.next(), ProducerEpoch::new(0));
        assert!(ProducerEpoch::new(3).next() > ProducerEpoch::new(3));
    }

    #[test]
    fn epochs_display_and_serialise_as_bare_numbers() {
        assert_eq!(Offset::new(12).to_string(), "12");
        assert_eq!(LeaderEpoch::NONE.to_string(), "-1");
        assert_eq!(ProducerEpoch::new(5).to_string(), "5");
        // The controller's image and commands are stored as JSON: a typed epoch
        // must keep the integer they were written with.
        assert_eq!(
            serde_json::to_string(&BrokerEpoch::new(77)).expect("json"),
            "77"
        );
        let epoch: LeaderEpoch = serde_json::from_str("3").expect("json");
        assert_eq!(epoch, LeaderEpoch::new(3));
    }
}
