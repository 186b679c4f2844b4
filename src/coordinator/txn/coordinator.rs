//! The transaction coordinator as a pure state machine (Kafka's
//! TransactionCoordinator and the in-memory half of TransactionStateManager):
//! plain values in, decisions out, the time an argument. It never waits: a
//! change that must be durable before it counts is returned as a
//! [`Transition`], kept pending (Kafka's pendingState) until the owner reports
//! it stored with [`TxnCoordinator::persisted`]. While a transition is pending,
//! other calls on the same transactional id answer CONCURRENT_TRANSACTIONS, as
//! in Kafka.
//!
//! Owned by one task (`service`); nothing here is shared except the per-id
//! counter of transactional offset writes in flight, which their guards
//! decrement from the handlers' tasks.

use std::collections::{BTreeSet, HashMap};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use super::metadata::{is_epoch_exhausted, TxnMetadata, TxnState};
use super::producer_ids::ProducerIdManager;
use crate::config::defaults::TRANSACTIONAL_ID_EXPIRATION_MS_DEFAULT;
use crate::config::defaults::TRANSACTION_MAX_TIMEOUT_MS_DEFAULT;
use crate::error_code;
use crate::types::{ProducerEpoch, TopicPartition};

/// The coordinator epoch written into markers. Kafka's is the leader epoch of
/// the transaction log partition; with one node and no transaction log
/// partition it never changes. The cluster work makes it that partition's
/// leader epoch.
pub const COORDINATOR_EPOCH: i32 = 0;

/// The broker settings that shape a transaction's life.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TxnConfig {
    /// `transaction.max.timeout.ms`.
    pub max_timeout_ms: i32,
    /// `transactional.id.expiration.ms`.
    pub id_expiration_ms: i64,
}

impl Default for TxnConfig {
    fn default() -> TxnConfig {
        TxnConfig {
            max_timeout_ms: TRANSACTION_MAX_TIMEOUT_MS_DEFAULT,
            id_expiration_ms: TRANSACTIONAL_ID_EXPIRATION_MS_DEFAULT,
        }
    }
}

/// Why a transition was made: what to answer once it is stored.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Purpose {
    /// Answer the producer id and epoch of the stored metadata.
    InitProducerId,
    /// InitProducerId found an Ongoing transaction and fenced it: answer
    /// CONCURRENT_TRANSACTIONS, so the producer retries once it is aborted.
    FenceForInit,
    AddPartitions,
    EndTxn,
    /// The periodic abort of a transaction past its timeout.
    TimeoutAbort,
    /// Every marker is written.
    Complete,
    /// The id expired; the stored record is a tombstone.
    Expire,
}

/// A change to store before it takes effect. `target.state == Dead` means
/// "remove the record".
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Transition {
    pub target: TxnMetadata,
    pub purpose: Purpose,
}

/// Markers to write for a transaction whose PrepareCommit or PrepareAbort is
/// stored (Kafka's TxnMarkerEntry per partition, plus our offsets).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MarkerJob {
    pub transactional_id: String,
    pub producer_id: i64,
    pub producer_epoch: ProducerEpoch,
    pub commit: bool,
    pub partitions: Vec<TopicPartition>,
    /// Loaded at start (or at an election): some markers may have been
    /// written before; writing them again ends nothing.
    pub recovery: bool,
    /// The coordinator epoch the markers carry: the leader epoch of the
    /// transactional id's transaction state partition when this coordinator was
    /// elected for it (`COORDINATOR_EPOCH` until the service sets it), so that
    /// a partition refuses the markers of a coordinator that was replaced.
    pub coordinator_epoch: i32,
    /// Names the job among every job this coordinator started: only the job
    /// its transaction waits for completes it (`markers_written`), so a job
    /// left over from an earlier load of the transaction (whose last attempt
    /// may still succeed after the partition was reloaded) cannot complete it
    /// while the job that replaced it still writes, and then write into the
    /// producer's next transaction.
    pub job_id: u64,
}

/// One row of ListTransactions.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListedTxn {
    pub transactional_id: String,
    pub producer_id: i64,
    pub state: TxnState,
}

/// Held while a TxnOffsetCommit stores pending offsets for a transaction; the
/// transaction cannot prepare to end until every guard is dropped, so no
/// pending offset can land after its transaction's markers.
#[derive(Debug)]
pub struct OffsetWriteGuard {
    in_flight: Arc<AtomicUsize>,
}

impl Drop for OffsetWriteGuard {
    fn drop(&mut self) {
        self.in_flight.fetch_sub(1, Ordering::AcqRel);
    }
}

struct Entry {
    metadata: TxnMetadata,
    /// The transition being stored (Kafka's pendingState).
    pending: Option<TxnMetadata>,
    offset_writes: Arc<AtomicUsize>,
    /// The marker job the transaction waits for while it prepares to end.
    markers: Option<u64>,
}

impl Entry {
    fn offset_writes_in_flight(&self) -> bool {
        self.offset_writes.load(Ordering::Acquire) > 0
    }
}

pub struct TxnCoordinator {
    config: TxnConfig,
    txns: HashMap<String, Entry>,
    /// The id of the last marker job started.
    last_job_id: u64,
}

impl TxnCoordinator {
    pub fn new(config: TxnConfig) -> TxnCoordinator {
        TxnCoordinator {
            config,
            txns: HashMap::new(),
            last_job_id: 0,
        }
    }

    /// Takes the stored metadata at start; transactions that were preparing to
    /// end get their markers written (again, where still needed).
    pub fn load(&mut self, records: Vec<TxnMetadata>) -> Vec<MarkerJob> {
        let mut jobs = Vec::new();
        for metadata in records {
            assert_ne!(metadata.state, TxnState::Dead, "tombstones are not stored");
            let job = self.marker_job(&metadata, true);
            self.txns.insert(
                metadata.transactional_id.clone(),
                Entry {
                    metadata,
                    pending: None,
                    offset_writes: Arc::new(AtomicUsize::new(0)),
                    markers: job.as_ref().map(|job| job.job_id),
                },
            );
            jobs.extend(job);
        }
        jobs
    }

    /// The transactional ids `unloaded` picks leave (their transaction state
    /// partition went to another coordinator); how many left. A transition in
    /// flight for one of them finds it gone and is dropped.
    pub fn unload(&mut self, unloaded: impl Fn(&str) -> bool) -> usize {
        let before = self.txns.len();
        self.txns
            .retain(|transactional_id, _| !unloaded(transactional_id));
        before - self.txns.len()
    }

    fn begin(
        &mut self,
        transactional_id: &str,
        target: TxnMetadata,
        purpose: Purpose,
    ) -> Transition {
        let entry = self
            .txns
            .get_mut(transactional_id)
            .unwrap_or_else(|| panic!("transition of unknown transactional id {transactional_id}"));
        assert!(entry.pending.is_none(), "two transitions at once");
        entry.pending = Some(target.clone());
        Transition { target, purpose }
    }

    /// Kafka's `handleInitProducerId` for a transactional id.
    pub fn init_producer_id(
        &mut self,
        now_ms: i64,
        transactional_id: &str,
        timeout_ms: i32,
        expected: Option<(i64, i16)>,
        ids: &mut ProducerIdManager,
    ) -> Result<Transition, i16> {
        if transactional_id.is_empty() {
            return Err(error_code::INVALID_REQUEST);
        }
        let expected =
            expected.map(|(producer_id, epoch)| (producer_id, ProducerEpoch::new(epoch)));
        if timeout_ms <= 0 || timeout_ms > self.config.max_timeout_ms {
            return Err(error_code::INVALID_TRANSACTION_TIMEOUT);
        }
        if !self.txns.contains_key(transactional_id) {
            let producer_id = ids.generate()?;
            self.txns.insert(
                transactional_id.to_string(),
                Entry {
                    metadata: TxnMetadata::new(transactional_id, producer_id, timeout_ms, now_ms),
                    pending: None,
                    offset_writes: Arc::new(AtomicUsize::new(0)),
                    markers: None,
                },
            );
        }
        let entry = &self.txns[transactional_id];
        let current = &entry.metadata;
        if entry.pending.is_some() {
            return Err(error_code::CONCURRENT_TRANSACTIONS);
        }
        // KIP-360: fence unless the metadata was just created, the producer id
        // is the current one (its epoch is checked below), or it is the
        // previous one with an exhausted epoch (a retry after a rotation).
        let valid = |(producer_id, epoch): (i64, ProducerEpoch)| {
            current.producer_epoch == ProducerEpoch::NONE
                || producer_id == current.producer_id
                || (producer_id == current.previous_producer_id && is_epoch_exhausted(epoch))
        };
        if !expected.is_none_or(valid) {
            return Err(error_code::PRODUCER_FENCED);
        }
        let (target, purpose) = match current.state {
            TxnState::PrepareCommit | TxnState::PrepareAbort => {
                return Err(error_code::CONCURRENT_TRANSACTIONS)
            }
            TxnState::Ongoing => {
                if entry.offset_writes_in_flight() {
                    return Err(error_code::CONCURRENT_TRANSACTIONS);
                }
                (
                    current.prepare_fence_and_abort(now_ms),
                    Purpose::FenceForInit,
                )
            }
            TxnState::Empty | TxnState::CompleteCommit | TxnState::CompleteAbort => {
                let target = if is_epoch_exhausted(current.producer_epoch)
                    && expected.is_none_or(|(_, epoch)| epoch == current.producer_epoch)
                {
                    let producer_id = ids.generate()?;
                    current.prepare_rotate_producer_id(
                        producer_id,
                        timeout_ms,
                        expected.is_some(),
                        now_ms,
                    )
                } else {
                    current.prepare_increment_epoch(
                        timeout_ms,
                        expected.map(|(_, epoch)| epoch),
                        now_ms,
                    )?
                };
                (target, Purpose::InitProducerId)
            }
            TxnState::Dead | TxnState::PrepareEpochFence => {
                panic!("transactional id {transactional_id} is {}", current.state)
            }
        };
        Ok(self.begin(transactional_id, target, purpose))
    }

    /// The stored metadata of an id that exists, matches the producer id, and
    /// is at exactly this epoch (Kafka's checks shared by AddPartitionsToTxn,
    /// AddOffsetsToTxn, their verification and EndTxn from a client).
    fn producer_entry(
        &self,
        transactional_id: &str,
        producer_id: i64,
        producer_epoch: i16,
    ) -> Result<&Entry, i16> {
        if transactional_id.is_empty() {
            return Err(error_code::INVALID_REQUEST);
        }
        let entry = self
            .txns
            .get(transactional_id)
            .ok_or(error_code::INVALID_PRODUCER_ID_MAPPING)?;
        if entry.metadata.producer_id != producer_id {
            return Err(error_code::INVALID_PRODUCER_ID_MAPPING);
        }
        if entry.metadata.producer_epoch != ProducerEpoch::new(producer_epoch) {
            return Err(error_code::PRODUCER_FENCED);
        }
        Ok(entry)
    }

    /// Kafka's `handleAddPartitionsToTransaction` (AddOffsetsToTxn is this with
    /// the group's offsets partition). `Ok(None)`: already in the transaction.
    pub fn add_partitions(
        &mut self,
        now_ms: i64,
        transactional_id: &str,
        producer_id: i64,
        producer_epoch: i16,
        partitions: &[TopicPartition],
    ) -> Result<Option<Transition>, i16> {
        let entry = self.producer_entry(transactional_id, producer_id, producer_epoch)?;
        let current = &entry.metadata;
        if entry.pending.is_some()
            || matches!(
                current.state,
                TxnState::PrepareCommit | TxnState::PrepareAbort
            )
        {
            return Err(error_code::CONCURRENT_TRANSACTIONS);
        }
        if current.state == TxnState::Ongoing
            && partitions.iter().all(|tp| current.partitions.contains(tp))
        {
            return Ok(None);
        }
        let target = current.prepare_add_partitions(partitions, now_ms);
        Ok(Some(self.begin(
            transactional_id,
            target,
            Purpose::AddPartitions,
        )))
    }

    /// Kafka's `handleVerifyPartitionsInTransaction` (AddPartitionsToTxn v4+
    /// with verify_only): each partition's error, or one error for all. A
    /// partition not in the transaction answers INVALID_TXN_STATE, what Kafka
    /// tells clients that predate TRANSACTION_ABORTABLE.
    pub fn verify_partitions(
        &self,
        transactional_id: &str,
        producer_id: i64,
        producer_epoch: i16,
        partitions: &[TopicPartition],
    ) -> Result<Vec<i16>, i16> {
        let entry = self.producer_entry(transactional_id, producer_id, producer_epoch)?;
        let current = &entry.metadata;
        if matches!(
            current.state,
            TxnState::PrepareCommit | TxnState::PrepareAbort
        ) {
            return Err(error_code::CONCURRENT_TRANSACTIONS);
        }
        Ok(partitions
            .iter()
            .map(|tp| {
                if current.partitions.contains(tp) {
                    error_code::NONE
                } else {
                    error_code::INVALID_TXN_STATE
                }
            })
            .collect())
    }

    /// A TxnOffsetCommit may store pending offsets in the transaction: the
    /// group's offsets partition is in it (AddOffsetsToTxn was answered) and it
    /// is not ending. The guard keeps the transaction from preparing to end
    /// until the offsets are stored.
    pub fn begin_offset_write(
        &self,
        transactional_id: &str,
        producer_id: i64,
        producer_epoch: i16,
        offsets_partition: &TopicPartition,
    ) -> Result<OffsetWriteGuard, i16> {
        let entry = self.producer_entry(transactional_id, producer_id, producer_epoch)?;
        // A transition that ends the transaction (or fences it) is being
        // stored: its markers may run any moment. Growing it is harmless.
        if entry
            .pending
            .as_ref()
            .is_some_and(|target| target.state != TxnState::Ongoing)
        {
            return Err(error_code::CONCURRENT_TRANSACTIONS);
        }
        let verified = self.verify_partitions(
            transactional_id,
            producer_id,
            producer_epoch,
            std::slice::from_ref(offsets_partition),
        )?;
        if verified[0] != error_code::NONE || entry.metadata.state != TxnState::Ongoing {
            return Err(error_code::INVALID_TXN_STATE);
        }
        entry.offset_writes.fetch_add(1, Ordering::AcqRel);
        Ok(OffsetWriteGuard {
            in_flight: Arc::clone(&entry.offset_writes),
        })
    }

    /// Kafka's `handleEndTransaction` from a client (the epoch must match
    /// exactly). `Ok(None)`: a retry of an end that already completed.
    pub fn end_txn(
        &mut self,
        now_ms: i64,
        transactional_id: &str,
        producer_id: i64,
        producer_epoch: i16,
        commit: bool,
    ) -> Result<Option<Transition>, i16> {
        let entry = self.producer_entry(transactional_id, producer_id, producer_epoch)?;
        let current = &entry.metadata;
        if entry.pending.is_some() {
            return Err(error_code::CONCURRENT_TRANSACTIONS);
        }
        match (current.state, commit) {
            (TxnState::Ongoing, _) => {
                if entry.offset_writes_in_flight() {
                    return Err(error_code::CONCURRENT_TRANSACTIONS);
                }
                let target = current.prepare_end(commit, now_ms);
                Ok(Some(self.begin(transactional_id, target, Purpose::EndTxn)))
            }
            (TxnState::CompleteCommit, true) | (TxnState::CompleteAbort, false) => Ok(None),
            (TxnState::PrepareCommit, true) | (TxnState::PrepareAbort, false) => {
                Err(error_code::CONCURRENT_TRANSACTIONS)
            }
            (TxnState::Dead | TxnState::PrepareEpochFence, _) => {
                panic!("transactional id {transactional_id} is {}", current.state)
            }
            _ => Err(error_code::INVALID_TXN_STATE),
        }
    }

    /// The stored transition took effect (`stored`), or could not be stored
    /// and is dropped. Returns the markers to write when the transaction is now
    /// preparing to end.
    pub fn persisted(&mut self, transactional_id: &str, stored: bool) -> Option<MarkerJob> {
        let entry = self.txns.get_mut(transactional_id)?;
        let target = entry.pending.take()?;
        if !stored {
            return None;
        }
        if target.state == TxnState::Dead {
            self.txns.remove(transactional_id);
            return None;
        }
        let job = self.marker_job(&target, false);
        let entry = self
            .txns
            .get_mut(transactional_id)
            .expect("the entry taken above");
        entry.metadata = target;
        entry.markers = job.as_ref().map(|job| job.job_id);
        job
    }

    /// The marker job `transactional_id` waits for, if it is preparing to end.
    pub fn live_marker_job(&self, transactional_id: &str) -> Option<u64> {
        self.txns.get(transactional_id)?.markers
    }

    /// The markers to write for a transaction preparing to end, as a new job.
    fn marker_job(&mut self, metadata: &TxnMetadata, recovery: bool) -> Option<MarkerJob> {
        let commit = match metadata.state {
            TxnState::PrepareCommit => true,
            TxnState::PrepareAbort => false,
            _ => return None,
        };
        self.last_job_id += 1;
        Some(MarkerJob {
            transactional_id: metadata.transactional_id.clone(),
            producer_id: metadata.producer_id,
            producer_epoch: metadata.producer_epoch,
            commit,
            partitions: metadata.partitions.iter().cloned().collect(),
            recovery,
            coordinator_epoch: COORDINATOR_EPOCH,
            job_id: self.last_job_id,
        })
    }

    /// Every marker of job `job_id` is written: complete its transaction
    /// (Kafka's `prepareComplete`), unless it already moved on or waits for
    /// another job.
    pub fn markers_written(
        &mut self,
        now_ms: i64,
        transactional_id: &str,
        producer_epoch: ProducerEpoch,
        job_id: u64,
    ) -> Option<Transition> {
        let entry = self.txns.get(transactional_id)?;
        let current = &entry.metadata;
        if entry.markers != Some(job_id) {
            tracing::debug!(transactional_id, job_id, live = ?entry.markers, "markers of a job the transaction no longer waits for");
            return None;
        }
        if entry.pending.is_some()
            || current.producer_epoch != producer_epoch
            || !matches!(
                current.state,
                TxnState::PrepareCommit | TxnState::PrepareAbort
            )
        {
            return None;
        }
        let target = current.prepare_complete(now_ms);
        Some(self.begin(transactional_id, target, Purpose::Complete))
    }

    /// Kafka's `abortTimedOutTransactions`: every Ongoing transaction older
    /// than its timeout is fenced (epoch bump) and aborted. One with a
    /// transition or an offset write in flight is left for the next round.
    pub fn abort_timed_out(&mut self, now_ms: i64) -> Vec<Transition> {
        let timed_out = |entry: &Entry| {
            let m = &entry.metadata;
            m.state == TxnState::Ongoing
                && entry.pending.is_none()
                && !entry.offset_writes_in_flight()
                && m.start_timestamp_ms.saturating_add(i64::from(m.timeout_ms)) < now_ms
        };
        self.begin_where(timed_out, Purpose::TimeoutAbort, |metadata| {
            metadata.prepare_fence_and_abort(now_ms)
        })
    }

    /// Kafka's `removeExpiredTransactionalIds`: ids idle for longer than
    /// `transactional.id.expiration.ms` are removed.
    pub fn expire_ids(&mut self, now_ms: i64) -> Vec<Transition> {
        let cutoff_ms = now_ms.saturating_sub(self.config.id_expiration_ms);
        let expired = |entry: &Entry| {
            entry.pending.is_none()
                && entry.metadata.state.is_idle()
                && entry.metadata.last_update_timestamp_ms <= cutoff_ms
        };
        self.begin_where(expired, Purpose::Expire, |metadata| {
            metadata.prepare_dead(now_ms)
        })
    }

    /// Begin, for each transaction that is `selected`, the transition to what `target` makes
    /// of its metadata.
    fn begin_where(
        &mut self,
        selected: impl Fn(&Entry) -> bool,
        purpose: Purpose,
        target: impl Fn(&TxnMetadata) -> TxnMetadata,
    ) -> Vec<Transition> {
        let ids: Vec<String> = self
            .txns
            .values()
            .filter(|entry| selected(entry))
            .map(|entry| entry.metadata.transactional_id.clone())
            .collect();
        ids.into_iter()
            .map(|id| {
                let target = target(&self.txns[&id].metadata);
                self.begin(&id, target, purpose)
            })
            .collect()
    }

    /// Kafka's `handleDescribeTransactions` for one id.
    pub fn describe(&self, transactional_id: &str) -> Result<TxnMetadata, i16> {
        if transactional_id.is_empty() {
            return Err(error_code::INVALID_REQUEST);
        }
        self.txns
            .get(transactional_id)
            .map(|entry| entry.metadata.clone())
            .ok_or(error_code::TRANSACTIONAL_ID_NOT_FOUND)
    }

    /// Kafka's `listTransactionStates`: the transactions matching every filter
    /// given (an empty filter, or a negative duration, matches all), and the
    /// state names that are not states. Sorted by transactional id.
    pub fn list(
        &self,
        now_ms: i64,
        state_names: &[String],
        producer_ids: &[i64],
        min_duration_ms: i64,
    ) -> (Vec<ListedTxn>, Vec<String>) {
        let mut states = BTreeSet::new();
        let mut unknown = Vec::new();
        for name in state_names {
            match TxnState::from_name(name) {
                Some(state) => {
                    states.insert(state);
                }
                None => unknown.push(name.clone()),
            }
        }
        let mut listed: Vec<ListedTxn> = self
            .txns
            .values()
            .map(|entry| &entry.metadata)
            .filter(|m| {
                m.state != TxnState::Dead
                    && (producer_ids.is_empty() || producer_ids.contains(&m.producer_id))
                    && (state_names.is_empty() || states.contains(&m.state))
                    && (min_duration_ms < 0
                        || now_ms.saturating_sub(m.start_timestamp_ms) > min_duration_ms)
            })
            .map(|m| ListedTxn {
                transactional_id: m.transactional_id.clone(),
                producer_id: m.producer_id,
                state: m.state,
            })
            .collect();
        listed.sort_by(|a, b| a.transactional_id.cmp(&b.transactional_id));
        (listed, unknown)
    }
}
