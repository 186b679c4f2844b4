//! One transactional id's metadata, as Kafka's TransactionMetadata keeps it, and
//! the transitions between its states. Plain values: the coordinator owns them,
//! the transaction store persists them.

use std::collections::BTreeSet;
use std::fmt;

use crate::types::{ProducerEpoch, TopicPartition};

/// Kafka's `RecordBatch.NO_PRODUCER_ID`.
pub const NO_PRODUCER_ID: i64 = -1;
/// Kafka's `RecordBatch.NO_PRODUCER_EPOCH`, as the wire carries it.
pub const NO_PRODUCER_EPOCH: i16 = ProducerEpoch::NONE.get();
/// Kafka's "no transaction running" start timestamp.
pub const NO_TXN_START_TIMESTAMP_MS: i64 = -1;

/// Kafka's `TransactionMetadata.isEpochExhausted`: one epoch is kept in reserve
/// so that fencing an Ongoing transaction can always bump it once more.
pub fn is_epoch_exhausted(epoch: ProducerEpoch) -> bool {
    epoch.get() >= i16::MAX - 1
}

/// Kafka's TransactionState, with its names (ListTransactions filters on them).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum TxnState {
    Empty,
    Ongoing,
    PrepareCommit,
    PrepareAbort,
    CompleteCommit,
    CompleteAbort,
    /// Kafka's transient state while an Ongoing transaction is fenced; here the
    /// fence goes straight to PrepareAbort with the bumped epoch (what Kafka
    /// persists), so no transactional id is ever in this state. Kept for its name.
    PrepareEpochFence,
    /// Being expired (transactional.id.expiration.ms).
    Dead,
}

impl TxnState {
    pub const ALL: [TxnState; 8] = [
        TxnState::Empty,
        TxnState::Ongoing,
        TxnState::PrepareCommit,
        TxnState::PrepareAbort,
        TxnState::CompleteCommit,
        TxnState::CompleteAbort,
        TxnState::PrepareEpochFence,
        TxnState::Dead,
    ];

    pub fn name(self) -> &'static str {
        match self {
            TxnState::Empty => "Empty",
            TxnState::Ongoing => "Ongoing",
            TxnState::PrepareCommit => "PrepareCommit",
            TxnState::PrepareAbort => "PrepareAbort",
            TxnState::CompleteCommit => "CompleteCommit",
            TxnState::CompleteAbort => "CompleteAbort",
            TxnState::PrepareEpochFence => "PrepareEpochFence",
            TxnState::Dead => "Dead",
        }
    }

    pub fn from_name(name: &str) -> Option<TxnState> {
        TxnState::ALL.into_iter().find(|state| state.name() == name)
    }

    /// Kafka's state id, the byte the store writes.
    pub fn id(self) -> u8 {
        match self {
            TxnState::Empty => 0,
            TxnState::Ongoing => 1,
            TxnState::PrepareCommit => 2,
            TxnState::PrepareAbort => 3,
            TxnState::CompleteCommit => 4,
            TxnState::CompleteAbort => 5,
            TxnState::Dead => 6,
            TxnState::PrepareEpochFence => 7,
        }
    }

    pub fn from_id(id: u8) -> Option<TxnState> {
        TxnState::ALL.into_iter().find(|state| state.id() == id)
    }

    /// No transaction is running: a new one may start.
    pub fn is_idle(self) -> bool {
        matches!(
            self,
            TxnState::Empty | TxnState::CompleteCommit | TxnState::CompleteAbort
        )
    }

    /// Kafka's `validPreviousStates`.
    fn may_follow(self, previous: TxnState) -> bool {
        use TxnState::*;
        match self {
            Empty => matches!(previous, Empty | CompleteCommit | CompleteAbort),
            Ongoing => matches!(previous, Ongoing | Empty | CompleteCommit | CompleteAbort),
            PrepareCommit | PrepareAbort => previous == Ongoing,
            CompleteCommit => previous == PrepareCommit,
            CompleteAbort => previous == PrepareAbort,
            Dead => matches!(previous, Empty | CompleteCommit | CompleteAbort),
            PrepareEpochFence => previous == Ongoing,
        }
    }
}

impl fmt::Display for TxnState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// What is known of one transactional id (Kafka's TransactionMetadata without
/// its lock and pending state, which the coordinator keeps beside it).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TxnMetadata {
    pub transactional_id: String,
    pub producer_id: i64,
    /// The producer id before the last rotation (Kafka's previousProducerId), so
    /// a retried InitProducerId after an epoch exhaustion is recognised.
    pub previous_producer_id: i64,
    pub producer_epoch: ProducerEpoch,
    /// The epoch before the last bump from InitProducerId with an expected
    /// epoch (KIP-360), so a retry of that call is recognised.
    pub last_producer_epoch: ProducerEpoch,
    pub timeout_ms: i32,
    pub state: TxnState,
    /// The partitions of the running transaction, including the offsets
    /// topic's partition of every group added with AddOffsetsToTxn.
    pub partitions: BTreeSet<TopicPartition>,
    pub start_timestamp_ms: i64,
    pub last_update_timestamp_ms: i64,
}

impl TxnMetadata {
    /// A transactional id seen for the first time (Kafka creates it Empty with
    /// no epoch, then InitProducerId bumps the epoch to 0).
    pub fn new(transactional_id: &str, producer_id: i64, timeout_ms: i32, now_ms: i64) -> Self {
        TxnMetadata {
            transactional_id: transactional_id.to_string(),
            producer_id,
            previous_producer_id: NO_PRODUCER_ID,
            producer_epoch: ProducerEpoch::NONE,
            last_producer_epoch: ProducerEpoch::NONE,
            timeout_ms,
            state: TxnState::Empty,
            partitions: BTreeSet::new(),
            start_timestamp_ms: NO_TXN_START_TIMESTAMP_MS,
            last_update_timestamp_ms: now_ms,
        }
    }

    /// The same transactional id in `state`, checked against Kafka's table of
    /// legal transitions (a broken invariant, not a client error, if illegal).
    fn transit(&self, state: TxnState, now_ms: i64) -> TxnMetadata {
        assert!(
            state.may_follow(self.state),
            "transactional id {}: illegal transition {} -> {}",
            self.transactional_id,
            self.state,
            state
        );
        TxnMetadata {
            state,
            last_update_timestamp_ms: now_ms,
            ..self.clone()
        }
    }

    /// Kafka's `prepareIncrementProducerEpoch`: InitProducerId on an idle id.
    /// `expected_epoch` is the KIP-360 epoch the producer sent, if any.
    pub fn prepare_increment_epoch(
        &self,
        timeout_ms: i32,
        expected_epoch: Option<ProducerEpoch>,
        now_ms: i64,
    ) -> Result<TxnMetadata, i16> {
        assert!(!is_epoch_exhausted(self.producer_epoch));
        let bumped = self.producer_epoch.next();
        let (epoch, last_epoch) = match expected_epoch {
            // A new producer, or one that lost its state: always bump.
            None => (bumped, ProducerEpoch::NONE),
            // The producer continues after an error and nobody else took over.
            Some(expected)
                if self.producer_epoch == ProducerEpoch::NONE
                    || expected == self.producer_epoch =>
            {
                (bumped, self.producer_epoch)
            }
            // A retry of a bump that succeeded: answer the same epoch again.
            Some(expected) if expected == self.last_producer_epoch => {
                (self.producer_epoch, self.last_producer_epoch)
            }
            Some(_) => return Err(crate::error_code::PRODUCER_FENCED),
        };
        let mut next = self.transit(TxnState::Empty, now_ms);
        next.producer_epoch = epoch;
        next.last_producer_epoch = last_epoch;
        next.timeout_ms = timeout_ms;
        next.partitions.clear();
        next.start_timestamp_ms = NO_TXN_START_TIMESTAMP_MS;
        Ok(next)
    }

    /// Kafka's `prepareProducerIdRotation`: the epoch is exhausted, so the id
    /// gets a new producer id at epoch 0.
    pub fn prepare_rotate_producer_id(
        &self,
        new_producer_id: i64,
        timeout_ms: i32,
        record_last_epoch: bool,
        now_ms: i64,
    ) -> TxnMetadata {
        let mut next = self.transit(TxnState::Empty, now_ms);
        next.previous_producer_id = self.producer_id;
        next.producer_id = new_producer_id;
        next.producer_epoch = ProducerEpoch::new(0);
        next.last_producer_epoch = if record_last_epoch {
            self.producer_epoch
        } else {
            ProducerEpoch::NONE
        };
        next.timeout_ms = timeout_ms;
        next.partitions.clear();
        next.start_timestamp_ms = NO_TXN_START_TIMESTAMP_MS;
        next
    }

    /// Kafka's `prepareAddPartitions`: the transaction starts (or grows).
    pub fn prepare_add_partitions(
        &self,
        partitions: &[TopicPartition],
        now_ms: i64,
    ) -> TxnMetadata {
        let mut next = self.transit(TxnState::Ongoing, now_ms);
        if self.state.is_idle() {
            next.start_timestamp_ms = now_ms;
        }
        next.partitions.extend(partitions.iter().cloned());
        next
    }

    /// Kafka's fence then abort of an Ongoing transaction (InitProducerId from a
    /// new instance, or the transaction timed out): the epoch is bumped so the
    /// old producer is fenced, and the transaction goes to PrepareAbort.
    pub fn prepare_fence_and_abort(&self, now_ms: i64) -> TxnMetadata {
        assert_eq!(self.state, TxnState::Ongoing);
        assert!(
            self.producer_epoch.get() < i16::MAX,
            "an Ongoing transaction at the last epoch cannot exist (the id rotates first)"
        );
        let mut next = self.transit(TxnState::PrepareAbort, now_ms);
        next.producer_epoch = self.producer_epoch.next();
        next.last_producer_epoch = ProducerEpoch::NONE;
        next
    }

    /// Kafka's `prepareAbortOrCommit`.
    pub fn prepare_end(&self, commit: bool, now_ms: i64) -> TxnMetadata {
        let state = if commit {
            TxnState::PrepareCommit
        } else {
            TxnState::PrepareAbort
        };
        self.transit(state, now_ms)
    }

    /// Kafka's `prepareComplete`: every marker is written.
    pub fn prepare_complete(&self, now_ms: i64) -> TxnMetadata {
        let state = match self.state {
            TxnState::PrepareCommit => TxnState::CompleteCommit,
            TxnState::PrepareAbort => TxnState::CompleteAbort,
            other => panic!(
                "transactional id {}: complete from {other}",
                self.transactional_id
            ),
        };
        let mut next = self.transit(state, now_ms);
        next.partitions.clear();
        next
    }

    /// Kafka's `prepareDead`: the id expired.
    pub fn prepare_dead(&self, now_ms: i64) -> TxnMetadata {
        let mut next = self.transit(TxnState::Dead, now_ms);
        next.partitions.clear();
        next
    }
}
