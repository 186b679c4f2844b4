//! The transaction coordinator's task: the one owner of the `TxnCoordinator`
//! and its `ProducerIdManager`, of the stores, marker jobs and producer-id
//! block fetches in flight (its `JoinSet`), and of the table of transaction
//! state partitions it serves. It takes `Command`s from `TxnService` and never
//! waits itself: background work comes back as an `Event`.
//!
//! Invariant: the coordinator is changed only by this task, between awaits,
//! and a transactional id never has two stores or marker jobs in flight.

use std::collections::HashMap;
use std::io;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::mpsc;
use tokio::task::{AbortHandle, JoinSet};
use tokio::time::MissedTickBehavior;

use super::coordinator::{MarkerJob, Purpose, Transition, TxnCoordinator};
use super::markers::{offsets_partition, split_partitions, write_markers};
use super::metadata::TxnMetadata;
use super::producer_ids::{ProducerIdBlock, ProducerIdManager};
use super::record;
use crate::coordinator::actor::Answer;
use crate::coordinator::ownership::Refusal;
use crate::coordinator::ownership::{FollowsLeadership, OwnedPartitions};
use crate::error_code;
use crate::internal_topics::txn_partition;
use crate::limits::TXN_LOAD_RETRY_BACKOFF_MS;
use crate::limits::TXN_RETRY_BACKOFF_MS;
use crate::types::ProducerEpoch;

use super::service::{Command, InitProducerIdResult, Reply, TxnDeps, TxnServiceConfig};

/// What the task's background work reports back.
pub(super) enum Event {
    Stored {
        transition: Transition,
        stored: bool,
        reply: Reply,
    },
    MarkersWritten {
        transactional_id: String,
        producer_epoch: ProducerEpoch,
        job_id: u64,
        /// The EndTxn waiting for its transaction to complete, if any.
        reply: Reply,
    },
    Block(Option<ProducerIdBlock>),
    /// A marker job stopped: this broker no longer coordinates its transaction.
    MarkersAbandoned,
    /// A partition's transactions were read from the store, for this epoch.
    Loaded {
        partition: i32,
        leader_epoch: i32,
        loaded: io::Result<Vec<TxnMetadata>>,
    },
}

pub(super) struct Task {
    pub(super) coordinator: TxnCoordinator,
    pub(super) ids: ProducerIdManager,
    pub(super) deps: TxnDeps,
    /// Stores, marker jobs and block fetches in flight. Bounded: at most one
    /// store or marker job per transactional id, and one block fetch.
    pub(super) work: JoinSet<Event>,
    /// The transaction state partitions served or loading, published to the
    /// service and to marker jobs (which check that they still write for this
    /// broker's coordinator, in the epoch they started in).
    pub(super) owned: OwnedPartitions,
    /// The marker jobs started for the transactions of each transaction state
    /// partition: stopped when it is unloaded, so that a job of an earlier
    /// load never writes beside the jobs of the next.
    pub(super) marker_jobs: HashMap<i32, Vec<AbortHandle>>,
}

fn interval(period_ms: u64) -> tokio::time::Interval {
    let mut ticker = tokio::time::interval(Duration::from_millis(period_ms.max(1)));
    ticker.set_missed_tick_behavior(MissedTickBehavior::Delay);
    ticker.reset();
    ticker
}

impl Task {
    pub(super) async fn run(
        mut self,
        config: TxnServiceConfig,
        mut commands: mpsc::Receiver<Command>,
    ) {
        let mut abort_ticker = interval(config.abort_check_interval_ms);
        let mut expire_ticker = interval(config.expiration_check_interval_ms);
        let mut stopped = None;
        while stopped.is_none() {
            tokio::select! {
                biased;
                Some(joined) = self.work.join_next() => match joined {
                    Ok(event) => self.on_event(event),
                    // A job panicked: a broken invariant, which must not pass silently.
                    Err(error) if error.is_panic() => std::panic::resume_unwind(error.into_panic()),
                    Err(_) => {}
                },
                command = commands.recv() => match command {
                    Some(Command::Stop(answer)) => stopped = Some(answer),
                    Some(command) => self.on_command(command),
                    None => break,
                },
                _ = abort_ticker.tick() => {
                    let now_ms = self.deps.clock.now_ms();
                    for transition in self.coordinator.abort_timed_out(now_ms) {
                        tracing::info!(transactional_id = %transition.target.transactional_id, "aborting a transaction past its timeout");
                        self.store(transition, Reply::Nobody);
                    }
                }
                _ = expire_ticker.tick() => {
                    let now_ms = self.deps.clock.now_ms();
                    for transition in self.coordinator.expire_ids(now_ms) {
                        self.store(transition, Reply::Nobody);
                    }
                }
            }
            self.maybe_fetch_block();
        }
        self.work.shutdown().await;
        drop(self);
        if let Some(answer) = stopped {
            let _ = answer.send(());
        }
    }

    fn on_command(&mut self, command: Command) {
        let now_ms = self.deps.clock.now_ms();
        if let Some(error) = self.refusal(&command) {
            return command.refuse(error);
        }
        match command {
            Command::Leadership(change, answer) => {
                self.follow(change);
                let _ = answer.send(());
            }
            Command::InitProducerId {
                transactional_id: None,
                answer,
                ..
            } => {
                let result = match self.ids.generate() {
                    Ok(producer_id) => InitProducerIdResult {
                        error: error_code::NONE,
                        producer_id,
                        producer_epoch: 0,
                    },
                    Err(error) => InitProducerIdResult::error(error),
                };
                let _ = answer.send(result);
            }
            Command::InitProducerId {
                transactional_id: Some(transactional_id),
                timeout_ms,
                expected,
                answer,
            } => {
                let decided = self.coordinator.init_producer_id(
                    now_ms,
                    &transactional_id,
                    timeout_ms,
                    expected,
                    &mut self.ids,
                );
                match decided {
                    Ok(transition) => self.store(transition, Reply::Init(answer)),
                    Err(error) => Reply::Init(answer).send_error(error),
                }
            }
            Command::AddPartitions {
                transactional_id,
                producer_id,
                producer_epoch,
                partitions,
                answer,
            } => {
                let decided = self.coordinator.add_partitions(
                    now_ms,
                    &transactional_id,
                    producer_id,
                    producer_epoch,
                    &partitions,
                );
                self.store_or_answer(decided, answer);
            }
            Command::EndTxn {
                transactional_id,
                producer_id,
                producer_epoch,
                commit,
                answer,
            } => {
                let decided = self.coordinator.end_txn(
                    now_ms,
                    &transactional_id,
                    producer_id,
                    producer_epoch,
                    commit,
                );
                self.store_or_answer(decided, answer);
            }
            command => self.on_read(command),
        }
    }

    /// Commands answered at once, changing nothing durable.
    fn on_read(&mut self, command: Command) {
        let now_ms = self.deps.clock.now_ms();
        let coordinator = &self.coordinator;
        // Every `send` below may find its caller gone; that is harmless.
        match command {
            Command::VerifyPartitions {
                transactional_id,
                producer_id,
                producer_epoch,
                partitions,
                answer,
            } => drop(answer.send(coordinator.verify_partitions(
                &transactional_id,
                producer_id,
                producer_epoch,
                &partitions,
            ))),
            Command::BeginOffsetWrite {
                transactional_id,
                producer_id,
                producer_epoch,
                group_id,
                answer,
            } => drop(answer.send(coordinator.begin_offset_write(
                &transactional_id,
                producer_id,
                producer_epoch,
                &offsets_partition(&group_id),
            ))),
            Command::Describe(transactional_id, answer) => {
                drop(answer.send(coordinator.describe(&transactional_id)))
            }
            Command::List {
                states,
                producer_ids,
                min_duration_ms,
                answer,
            } => {
                drop(answer.send(coordinator.list(now_ms, &states, &producer_ids, min_duration_ms)))
            }
            Command::InitProducerId { .. }
            | Command::AddPartitions { .. }
            | Command::EndTxn { .. }
            | Command::Leadership(..)
            | Command::Stop(_) => {
                unreachable!("changes and stops are handled by Task::run and Task::on_command")
            }
        }
    }

    fn store_or_answer(&mut self, decided: Result<Option<Transition>, i16>, answer: Answer<i16>) {
        match decided {
            Ok(Some(transition)) => self.store(transition, Reply::Code(answer)),
            Ok(None) => drop(answer.send(error_code::NONE)),
            Err(error) => drop(answer.send(error)),
        }
    }

    /// Stores the transition in the background; `on_event` applies it.
    fn store(&mut self, transition: Transition, reply: Reply) {
        let saved = record::save(&*self.deps.store, &transition.target);
        self.work.spawn(async move {
            let stored = match saved.await {
                Ok(()) => true,
                Err(error) => {
                    tracing::error!(transactional_id = %transition.target.transactional_id, %error, "storing transaction state failed");
                    false
                }
            };
            Event::Stored {
                transition,
                stored,
                reply,
            }
        });
    }

    fn on_event(&mut self, event: Event) {
        match event {
            Event::Stored {
                transition,
                stored,
                reply,
            } => self.on_stored(transition, stored, reply),
            Event::MarkersWritten {
                transactional_id,
                producer_epoch,
                job_id,
                reply,
            } => {
                let now_ms = self.deps.clock.now_ms();
                match self.coordinator.markers_written(
                    now_ms,
                    &transactional_id,
                    producer_epoch,
                    job_id,
                ) {
                    Some(transition) => self.store(transition, reply),
                    None => reply.send_error(error_code::NONE),
                }
            }
            Event::Block(block) => self.ids.block_arrived(block),
            Event::MarkersAbandoned => {}
            Event::Loaded {
                partition,
                leader_epoch,
                loaded,
            } => self.loaded(partition, leader_epoch, loaded),
        }
    }

    /// None when the command's transactional id is served here, else the error
    /// to answer it with (Kafka's NOT_COORDINATOR and COORDINATOR_LOAD_IN_PROGRESS).
    fn refusal(&self, command: &Command) -> Option<i16> {
        let transactional_id = command.transactional_id()?;
        let refusal = self.owned.refusal(txn_partition(transactional_id))?;
        Some(match refusal {
            Refusal::Loading => error_code::COORDINATOR_LOAD_IN_PROGRESS,
            Refusal::NotLeader => error_code::NOT_COORDINATOR,
        })
    }

    /// A load finished: its transactions are served, and those left preparing
    /// to end are completed, unless the partition was resigned or re-elected
    /// meanwhile. A failed load is tried again.
    fn loaded(&mut self, partition: i32, leader_epoch: i32, loaded: io::Result<Vec<TxnMetadata>>) {
        if !self.owned.is_loading(partition, leader_epoch) {
            return;
        }
        match loaded {
            Ok(records) => {
                let count = records.len();
                let recovered = self.coordinator.load(records);
                self.owned.finish_load(partition, leader_epoch);
                tracing::info!(
                    partition,
                    leader_epoch,
                    transactions = count,
                    ending = recovered.len(),
                    "coordinating the transactions of a transaction state partition"
                );
                for job in recovered {
                    self.spawn_markers(job, Reply::Nobody);
                }
            }
            Err(error) => {
                tracing::warn!(partition, leader_epoch, %error, "loading a transaction state partition failed; retrying");
                let backoff = Duration::from_millis(TXN_LOAD_RETRY_BACKOFF_MS);
                self.start_load(partition, leader_epoch, backoff);
            }
        }
    }

    fn on_stored(&mut self, transition: Transition, stored: bool, reply: Reply) {
        let target = &transition.target;
        tracing::debug!(
            transactional_id = %target.transactional_id,
            producer_id = target.producer_id,
            producer_epoch = %target.producer_epoch,
            state = %target.state,
            partitions = ?target.partitions,
            purpose = ?transition.purpose,
            stored,
            "transaction state stored"
        );
        let job = self.coordinator.persisted(&target.transactional_id, stored);
        if !stored {
            // Kafka answers a failed transaction-log write with a retriable error.
            reply.send_error(error_code::COORDINATOR_NOT_AVAILABLE);
            if transition.purpose == Purpose::Complete {
                self.retry_completion(target.transactional_id.clone(), target.producer_epoch);
            }
            return;
        }
        // EndTxn is answered at the Prepare state, as Kafka does, when a marker
        // goes to another broker: the client does not wait on other nodes, and a
        // call racing the markers meets CONCURRENT_TRANSACTIONS. When every
        // marker is a local append it is answered once the transaction is
        // complete (markers written, CompleteCommit/CompleteAbort stored): a
        // client's next AddPartitionsToTxn would otherwise meet
        // CONCURRENT_TRANSACTIONS and sleep through its retry backoff
        // (librdkafka: 100 ms per transaction) for markers that take far less.
        let local = job
            .as_ref()
            .is_some_and(|job| self.deps.markers.leads_all(&job.partitions));
        let waiting = match (transition.purpose, reply) {
            (Purpose::InitProducerId, Reply::Init(answer)) => {
                let _ = answer.send(InitProducerIdResult {
                    error: error_code::NONE,
                    producer_id: target.producer_id,
                    producer_epoch: target.producer_epoch.get(),
                });
                Reply::Nobody
            }
            (Purpose::FenceForInit, reply) => {
                reply.send_error(error_code::CONCURRENT_TRANSACTIONS);
                Reply::Nobody
            }
            (Purpose::EndTxn, reply) if local => reply,
            (_, reply) => {
                reply.send_error(error_code::NONE);
                Reply::Nobody
            }
        };
        if let Some(job) = job {
            self.spawn_markers(job, waiting);
        }
    }

    /// The completion could not be stored: try again after a pause.
    fn retry_completion(&mut self, transactional_id: String, producer_epoch: ProducerEpoch) {
        let Some(job_id) = self.coordinator.live_marker_job(&transactional_id) else {
            return;
        };
        self.work.spawn(async move {
            tokio::time::sleep(Duration::from_millis(TXN_RETRY_BACKOFF_MS)).await;
            Event::MarkersWritten {
                transactional_id,
                producer_epoch,
                job_id,
                reply: Reply::Nobody,
            }
        });
    }

    /// Writes the job's markers until every partition is done; `reply` is answered
    /// once the transaction's completion is stored.
    pub(super) fn spawn_markers(&mut self, mut job: MarkerJob, reply: Reply) {
        let partition = txn_partition(&job.transactional_id);
        if let Some(epoch) = self.owned.epoch(partition) {
            job.coordinator_epoch = epoch;
        }
        tracing::debug!(
            transactional_id = %job.transactional_id,
            producer_id = job.producer_id,
            producer_epoch = %job.producer_epoch,
            commit = job.commit,
            coordinator_epoch = job.coordinator_epoch,
            recovery = job.recovery,
            job_id = job.job_id,
            partitions = ?job.partitions,
            "writing transaction markers"
        );
        let writer = Arc::clone(&self.deps.markers);
        let offsets = Arc::clone(&self.deps.offsets);
        // Elected coordinators stop writing once they resigned (or were elected
        // again, with a new epoch): the partition's next coordinator completes
        // the transaction with its own epoch.
        let still_coordinator = {
            let served = self.owned.subscribe();
            let epoch = job.coordinator_epoch;
            move || served.serves_in(partition, epoch)
        };
        let handle = self.work.spawn(async move {
            let job = Arc::new(job);
            let (mut remaining, mut offsets_partitions) = split_partitions(&job);
            let mut attempts: u64 = 0;
            while !remaining.is_empty() || !offsets_partitions.is_empty() {
                if attempts > 0 {
                    tokio::time::sleep(Duration::from_millis(TXN_RETRY_BACKOFF_MS)).await;
                }
                attempts += 1;
                if !still_coordinator() {
                    tracing::info!(transactional_id = %job.transactional_id, "no longer its coordinator; leaving its markers to the next one");
                    return Event::MarkersAbandoned;
                }
                if !remaining.is_empty() {
                    remaining = write_markers(&job, &remaining, writer.as_ref()).await;
                }
                // Markers first, as Kafka's markers to the data partitions and to
                // the offsets topic go out together; the group side comes second.
                if !offsets_partitions.is_empty() {
                    let partitions = offsets_partitions.clone();
                    match offsets
                        .complete(
                            job.producer_id,
                            job.producer_epoch,
                            job.coordinator_epoch,
                            partitions,
                            job.commit,
                        )
                        .await {
                        Ok(()) => offsets_partitions.clear(),
                        Err(error) => {
                            tracing::warn!(transactional_id = %job.transactional_id, %error, "completing transactional offsets failed; will retry");
                        }
                    }
                }
                let left = remaining.len() + offsets_partitions.len();
                if attempts == 1 && left > 0 {
                    tracing::warn!(transactional_id = %job.transactional_id, partitions = left, "transaction markers not all written; retrying");
                }
            }
            Event::MarkersWritten {
                transactional_id: job.transactional_id.clone(),
                producer_epoch: job.producer_epoch,
                job_id: job.job_id,
                reply,
            }
        });
        let jobs = self.marker_jobs.entry(partition).or_default();
        jobs.retain(|running| !running.is_finished());
        jobs.push(handle);
    }

    fn maybe_fetch_block(&mut self) {
        if !self.ids.wants_block() {
            return;
        }
        self.ids.fetch_started();
        let allocated = self.deps.blocks.allocate(self.ids.block_size());
        self.work.spawn(async move {
            match allocated.await {
                Ok(block) => Event::Block(Some(block)),
                Err(error) => {
                    tracing::warn!(%error, "allocating producer ids failed; will retry");
                    tokio::time::sleep(Duration::from_millis(TXN_RETRY_BACKOFF_MS)).await;
                    Event::Block(None)
                }
            }
        });
    }
}

/// Elections load the partition's transactions from the store (and complete
/// those left preparing to end); resignations (and the reload of a later
/// epoch) unload them.
impl FollowsLeadership for Task {
    fn owned(&mut self) -> &mut OwnedPartitions {
        &mut self.owned
    }

    /// Marker jobs begun in the earlier epoch go on (`serves_in`); new ones
    /// carry the new epoch as their coordinator epoch.
    fn raise_epoch(&mut self, partition: i32, leader_epoch: i32) {
        self.deps.store.raise_epoch(partition, leader_epoch);
        tracing::info!(
            partition,
            leader_epoch,
            "still coordinating the transactions of a partition, in a later epoch"
        );
    }

    fn start_load(&mut self, partition: i32, leader_epoch: i32, delay: Duration) {
        let store = Arc::clone(&self.deps.store);
        self.work.spawn(async move {
            tokio::time::sleep(delay).await;
            let loaded = tokio::task::spawn_blocking(move || {
                store.load_partition(partition, leader_epoch)?;
                let every = record::load_all(&*store)?;
                Ok(every
                    .into_iter()
                    .filter(|m| txn_partition(&m.transactional_id) == partition)
                    .collect())
            })
            .await
            .map_err(io::Error::other)
            .and_then(|loaded| loaded);
            Event::Loaded {
                partition,
                leader_epoch,
                loaded,
            }
        });
    }

    /// The transactions of `partition`, no longer led here, leave the
    /// coordinator (marker writes in flight finish; the next coordinator
    /// completes what they left).
    fn unload(&mut self, partition: i32) {
        for job in self.marker_jobs.remove(&partition).unwrap_or_default() {
            job.abort();
        }
        let count = self
            .coordinator
            .unload(|transactional_id| txn_partition(transactional_id) == partition);
        tracing::info!(
            partition,
            transactions = count,
            "no longer coordinating the transactions of a transaction state partition"
        );
    }
}
