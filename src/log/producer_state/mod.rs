//! Per-partition producer state, after Kafka's `ProducerStateManager`,
//! `ProducerStateEntry` and `ProducerAppendInfo`: for each producer id, its epoch, the
//! sequence and offset ranges of its last five batches (to answer a retried batch with
//! the offsets it was first written at), the epoch of the last transaction coordinator
//! that wrote a marker for it, and the first offset of its ongoing transaction.
//!
//! Owned by its `PartitionLog` and mutated only under the partition lock. Appends are
//! checked against a `ProducerAppendInfo` (a private copy of the producer's entry) and
//! the manager is updated with it only after the batches are written, so a rejected or
//! failed append leaves the state untouched. Invariant: `ongoing_txns` holds exactly
//! the `current_txn_first_offset` of every producer that has one.

mod snapshot;

use crate::types::VerificationGuard;
use std::collections::{BTreeMap, HashMap, VecDeque};

use super::batch::{BatchHeader, NO_SEQUENCE};
use super::{LogError, ProducerSummary};
use crate::types::{Offset, ProducerEpoch};

pub use snapshot::{decode as decode_snapshot, encode as encode_snapshot};

/// Kafka's `ProducerStateEntry.NUM_BATCHES_TO_RETAIN`: the batches per producer kept to
/// recognise a retry. Producers keep at most this many requests in flight
/// (`max.in.flight.requests.per.connection` <= 5 with idempotence).
pub const BATCHES_PER_PRODUCER_MAX: usize = 5;

/// Who is appending: the checks Kafka applies depend on it (`AppendOrigin`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AppendOrigin {
    /// A producer: epochs, sequences, duplicates and transaction state are checked.
    Client,
    /// The transaction coordinator's markers: epochs and coordinator epochs checked.
    Coordinator,
    /// Batches already in the log, replayed on load: nothing is refused.
    Replay,
}

/// One of the last batches a producer wrote (Kafka's `BatchMetadata`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BatchMetadata {
    pub first_seq: i32,
    pub last_seq: i32,
    pub first_offset: i64,
    pub last_offset: i64,
    /// The batch's maxTimestamp as stored.
    pub timestamp: i64,
}

/// What the log knows of one producer (Kafka's `ProducerStateEntry`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProducerEntry {
    pub producer_id: i64,
    pub producer_epoch: ProducerEpoch,
    /// Oldest first; at most `BATCHES_PER_PRODUCER_MAX`, all of `producer_epoch`.
    pub batches: VecDeque<BatchMetadata>,
    pub coordinator_epoch: i32,
    pub last_timestamp: i64,
    pub current_txn_first_offset: Option<i64>,
}

impl ProducerEntry {
    pub fn empty(producer_id: i64) -> ProducerEntry {
        ProducerEntry {
            producer_id,
            producer_epoch: ProducerEpoch::NONE,
            batches: VecDeque::new(),
            coordinator_epoch: -1,
            last_timestamp: super::batch::NO_TIMESTAMP,
            current_txn_first_offset: None,
        }
    }

    pub fn last_seq(&self) -> i32 {
        self.batches.back().map_or(NO_SEQUENCE, |b| b.last_seq)
    }

    /// The last offset of the producer's last data batch, or -1.
    pub fn last_data_offset(&self) -> i64 {
        self.batches.back().map_or(-1, |b| b.last_offset)
    }

    /// A new epoch forgets the batches of the old one.
    fn maybe_update_epoch(&mut self, producer_epoch: ProducerEpoch) {
        if self.producer_epoch != producer_epoch {
            self.batches.clear();
            self.producer_epoch = producer_epoch;
        }
    }

    fn add_batch(&mut self, producer_epoch: ProducerEpoch, batch: BatchMetadata) {
        self.maybe_update_epoch(producer_epoch);
        self.push_batch(batch);
        self.last_timestamp = batch.timestamp;
    }

    fn push_batch(&mut self, batch: BatchMetadata) {
        if self.batches.len() == BATCHES_PER_PRODUCER_MAX {
            self.batches.pop_front();
        }
        self.batches.push_back(batch);
    }

    /// Kafka's `ProducerStateEntry.update(nextEntry)`: folds an append's entry in.
    fn update(&mut self, next: ProducerEntry) {
        self.maybe_update_epoch(next.producer_epoch);
        for batch in next.batches {
            self.push_batch(batch);
        }
        self.coordinator_epoch = next.coordinator_epoch;
        self.current_txn_first_offset = next.current_txn_first_offset;
        self.last_timestamp = next.last_timestamp;
    }

    /// Kafka's `findDuplicateBatch`: a retained batch of the same epoch with exactly
    /// the incoming batch's sequence range.
    pub fn find_duplicate(&self, header: &BatchHeader) -> Option<BatchMetadata> {
        if ProducerEpoch::new(header.producer_epoch) != self.producer_epoch {
            return None;
        }
        let (first_seq, last_seq) = (header.base_sequence, header.last_sequence());
        self.batches
            .iter()
            .find(|b| b.first_seq == first_seq && b.last_seq == last_seq)
            .copied()
    }

    pub fn summary(&self) -> ProducerSummary {
        ProducerSummary {
            producer_id: self.producer_id,
            producer_epoch: self.producer_epoch,
            last_sequence: self.last_seq(),
            last_timestamp: self.last_timestamp,
            coordinator_epoch: self.coordinator_epoch,
            current_txn_start_offset: self.current_txn_first_offset.map(Offset::new),
        }
    }
}

/// A transaction ended by a marker (Kafka's `CompletedTxn`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CompletedTxn {
    pub producer_id: i64,
    pub first_offset: i64,
    /// The marker's offset.
    pub last_offset: i64,
    pub aborted: bool,
}

/// The checks and changes of one append for one producer, applied to the manager
/// only once the append is written (Kafka's `ProducerAppendInfo`).
pub struct ProducerAppendInfo {
    producer_id: i64,
    origin: AppendOrigin,
    /// The producer's entry before this append.
    current: ProducerEntry,
    /// The entry this append leads to; its batches are only this append's.
    updated: ProducerEntry,
    started_txns: Vec<i64>,
}

impl ProducerAppendInfo {
    fn new(current: ProducerEntry, origin: AppendOrigin) -> ProducerAppendInfo {
        let mut updated = current.clone();
        updated.batches.clear();
        ProducerAppendInfo {
            producer_id: current.producer_id,
            origin,
            current,
            updated,
            started_txns: Vec::new(),
        }
    }

    pub fn producer_id(&self) -> i64 {
        self.producer_id
    }

    /// A data batch at `first_offset..=last_offset` whose stored maxTimestamp is
    /// `timestamp`. Kafka's `appendDataBatch`.
    pub fn append_data_batch(
        &mut self,
        header: &BatchHeader,
        first_offset: i64,
        timestamp: i64,
    ) -> Result<(), LogError> {
        let epoch = ProducerEpoch::new(header.producer_epoch);
        let last_offset = first_offset + i64::from(header.last_offset_delta);
        self.check_producer_epoch(epoch, first_offset)?;
        if self.origin == AppendOrigin::Client {
            self.check_sequence(epoch, header.base_sequence, first_offset)?;
        }
        self.updated.add_batch(
            epoch,
            BatchMetadata {
                first_seq: header.base_sequence,
                last_seq: header.last_sequence(),
                first_offset,
                last_offset,
                timestamp,
            },
        );
        match (
            self.updated.current_txn_first_offset,
            header.is_transactional(),
        ) {
            (Some(_), false) => Err(LogError::InvalidTxnState(format!(
                "Expected transactional write from producer {} at offset {first_offset}",
                self.producer_id
            ))),
            (None, true) => {
                self.updated.current_txn_first_offset = Some(first_offset);
                self.started_txns.push(first_offset);
                Ok(())
            }
            _ => Ok(()),
        }
    }

    /// A commit or abort marker at `offset`. Kafka's `appendEndTxnMarker` with the
    /// transaction version 0/1 epoch rule (a marker may carry the current epoch).
    pub fn append_end_txn_marker(
        &mut self,
        producer_epoch: ProducerEpoch,
        coordinator_epoch: i32,
        commit: bool,
        offset: i64,
        timestamp: i64,
    ) -> Result<Option<CompletedTxn>, LogError> {
        self.check_producer_epoch(producer_epoch, offset)?;
        if self.updated.coordinator_epoch > coordinator_epoch {
            let message = format!(
                "Invalid coordinator epoch for producerId {} at offset {offset}: {coordinator_epoch} (zombie), {} (current)",
                self.producer_id, self.updated.coordinator_epoch
            );
            if self.origin != AppendOrigin::Replay {
                return Err(LogError::TransactionCoordinatorFenced(message));
            }
            tracing::info!("{message}");
        }
        // Only a transaction with data is completed: an empty one moves no LSO and
        // leaves nothing in the transaction index.
        let completed = self
            .updated
            .current_txn_first_offset
            .map(|first_offset| CompletedTxn {
                producer_id: self.producer_id,
                first_offset,
                last_offset: offset,
                aborted: !commit,
            });
        self.updated.maybe_update_epoch(producer_epoch);
        self.updated.coordinator_epoch = coordinator_epoch;
        self.updated.current_txn_first_offset = None;
        self.updated.last_timestamp = timestamp;
        Ok(completed)
    }

    /// Kafka's `checkProducerEpoch` (transaction version 0/1): an epoch below the
    /// last seen one is fenced.
    fn check_producer_epoch(
        &self,
        producer_epoch: ProducerEpoch,
        offset: i64,
    ) -> Result<(), LogError> {
        let current = self.updated.producer_epoch;
        if producer_epoch >= current {
            return Ok(());
        }
        let message = format!(
            "Epoch of producer {} at offset {offset} is {producer_epoch}, which is smaller than the last seen epoch {current}",
            self.producer_id
        );
        if self.origin == AppendOrigin::Replay {
            tracing::warn!("{message}");
            return Ok(());
        }
        Err(LogError::InvalidProducerEpoch(message))
    }

    /// Kafka's `checkSequence`: a new epoch starts at sequence 0; within an epoch each
    /// batch continues the last (wrapping at `i32::MAX`); a producer the log does not
    /// know (its records deleted, or expired) may start anywhere.
    fn check_sequence(
        &self,
        producer_epoch: ProducerEpoch,
        first_seq: i32,
        offset: i64,
    ) -> Result<(), LogError> {
        if producer_epoch != self.updated.producer_epoch {
            if first_seq != 0 && self.updated.producer_epoch != ProducerEpoch::NONE {
                return Err(LogError::OutOfOrderSequence(format!(
                    "Invalid sequence number for new epoch of producer {} at offset {offset}: {producer_epoch} (request epoch), {first_seq} (seq. number), {} (current producer epoch)",
                    self.producer_id, self.updated.producer_epoch
                )));
            }
            return Ok(());
        }
        let current_last_seq = if !self.updated.batches.is_empty() {
            self.updated.last_seq()
        } else if producer_epoch == self.current.producer_epoch {
            self.current.last_seq()
        } else {
            NO_SEQUENCE
        };
        if self.current.producer_epoch == ProducerEpoch::NONE
            || in_sequence(current_last_seq, first_seq)
        {
            return Ok(());
        }
        Err(LogError::OutOfOrderSequence(format!(
            "Out of order sequence number for producer {} at offset {offset}: {first_seq} (incoming seq. number), {current_last_seq} (current end sequence number)",
            self.producer_id
        )))
    }
}

fn in_sequence(last_seq: i32, next_seq: i32) -> bool {
    i64::from(next_seq) == i64::from(last_seq) + 1 || (next_seq == 0 && last_seq == i32::MAX)
}

/// Every producer of one partition, its ongoing transactions, and the
/// verifications under way.
#[derive(Debug, Default)]
pub struct ProducerStateManager {
    producers: HashMap<i64, ProducerEntry>,
    /// First offset of each ongoing transaction → its producer id, sorted.
    ongoing_txns: BTreeMap<i64, i64>,
    /// Producer id → the guard of its verification under way and when it was
    /// taken (ms); in memory only, as in Kafka. Bounded as the producers are:
    /// an entry leaves with a marker, a first batch, or the producer's expiry.
    verifications: HashMap<i64, (VerificationGuard, i64)>,
    /// The last guard handed out.
    last_guard: u64,
}

impl ProducerStateManager {
    pub fn new() -> ProducerStateManager {
        ProducerStateManager::default()
    }

    /// Rebuilds the manager from snapshot entries (the ongoing transactions follow).
    pub fn from_entries(entries: Vec<ProducerEntry>) -> ProducerStateManager {
        let mut manager = ProducerStateManager::new();
        for entry in entries {
            if let Some(first_offset) = entry.current_txn_first_offset {
                manager.ongoing_txns.insert(first_offset, entry.producer_id);
            }
            manager.producers.insert(entry.producer_id, entry);
        }
        manager
    }

    pub fn last_entry(&self, producer_id: i64) -> Option<&ProducerEntry> {
        self.producers.get(&producer_id)
    }

    /// Every producer, ordered by id.
    pub fn entries(&self) -> Vec<&ProducerEntry> {
        let mut entries: Vec<&ProducerEntry> = self.producers.values().collect();
        entries.sort_by_key(|e| e.producer_id);
        entries
    }

    pub fn prepare_update(&self, producer_id: i64, origin: AppendOrigin) -> ProducerAppendInfo {
        let current = self
            .producers
            .get(&producer_id)
            .cloned()
            .unwrap_or_else(|| ProducerEntry::empty(producer_id));
        ProducerAppendInfo::new(current, origin)
    }

    /// Applies an append's changes, once its batches are written.
    pub fn update(&mut self, info: ProducerAppendInfo) {
        for first_offset in &info.started_txns {
            self.ongoing_txns.insert(*first_offset, info.producer_id);
        }
        if !info.started_txns.is_empty() {
            self.verifications.remove(&info.producer_id);
        }
        match self.producers.get_mut(&info.producer_id) {
            Some(entry) => entry.update(info.updated),
            None => {
                self.producers.insert(info.producer_id, info.updated);
            }
        }
    }

    pub fn has_ongoing_txn(&self, producer_id: i64) -> bool {
        self.producers
            .get(&producer_id)
            .is_some_and(|e| e.current_txn_first_offset.is_some())
    }

    /// The smallest first offset of an ongoing transaction.
    pub fn first_undecided_offset(&self) -> Option<i64> {
        self.ongoing_txns.keys().next().copied()
    }

    /// Kafka's `lastStableOffset(completedTxn)`, recorded in the transaction index: the
    /// first offset of the earliest transaction of another producer still ongoing, or
    /// one past the marker.
    pub fn last_stable_offset(&self, completed: &CompletedTxn) -> i64 {
        self.ongoing_txns
            .iter()
            .find(|(_, producer_id)| **producer_id != completed.producer_id)
            .map_or(completed.last_offset + 1, |(first_offset, _)| *first_offset)
    }

    /// Forgets a transaction its marker ended.
    pub fn complete_txn(&mut self, completed: &CompletedTxn) {
        let removed = self.ongoing_txns.remove(&completed.first_offset);
        assert_eq!(
            removed,
            Some(completed.producer_id),
            "a completed transaction must have been ongoing"
        );
    }

    /// The producer's verification guard: the one under way, or a new one.
    pub fn start_verification(&mut self, producer_id: i64, now_ms: i64) -> VerificationGuard {
        if let Some((guard, _)) = self.verifications.get(&producer_id) {
            return *guard;
        }
        self.last_guard += 1;
        let guard = VerificationGuard::new(self.last_guard);
        self.verifications.insert(producer_id, (guard, now_ms));
        guard
    }

    /// Whether `guard` is the producer's verification under way.
    pub fn holds_verification(&self, producer_id: i64, guard: VerificationGuard) -> bool {
        self.verifications
            .get(&producer_id)
            .is_some_and(|(held, _)| *held == guard)
    }

    /// The producer's transaction ended here: a verification under way is void.
    pub fn end_verification(&mut self, producer_id: i64) {
        self.verifications.remove(&producer_id);
    }

    /// Kafka's `removeExpiredProducers`: producers idle `expiration_ms` or more, and in
    /// no transaction, are forgotten, as are verifications as old.
    pub fn remove_expired(&mut self, now_ms: i64, expiration_ms: i64) -> usize {
        self.verifications
            .retain(|_, (_, started_ms)| now_ms.saturating_sub(*started_ms) < expiration_ms);
        let before = self.producers.len();
        self.producers.retain(|_, entry| {
            entry.current_txn_first_offset.is_some()
                || now_ms.saturating_sub(entry.last_timestamp) < expiration_ms
        });
        before - self.producers.len()
    }

    /// Kafka's `truncateHead`: producers with no batch at or above the new log start
    /// offset are forgotten, with their ongoing transactions.
    pub fn truncate_head(&mut self, log_start_offset: i64) {
        let evicted: Vec<i64> = self
            .producers
            .values()
            .filter(|e| e.batches.is_empty() || e.last_data_offset() < log_start_offset)
            .map(|e| e.producer_id)
            .collect();
        for producer_id in evicted {
            if let Some(entry) = self.producers.remove(&producer_id) {
                if let Some(first_offset) = entry.current_txn_first_offset {
                    self.ongoing_txns.remove(&first_offset);
                }
            }
        }
    }
}
