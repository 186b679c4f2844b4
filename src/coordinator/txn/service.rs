//! `TxnService`, the cheap handle handlers call to reach the transaction
//! coordinator's task (`task`): each call sends a command on a bounded channel
//! with a oneshot for its answer (`actor::Mailbox`), and the task, the only
//! place the coordinator changes, answers it.
//!
//! InitProducerId and AddPartitionsToTxn are answered once their transition is
//! fsynced. EndTxn is answered at Prepare when a marker goes to another broker,
//! as Kafka answers, and otherwise once the whole transaction is complete: Prepare
//! fsynced, markers written, Complete fsynced (see
//! `on_stored` for why). Other calls on an ending transaction get
//! CONCURRENT_TRANSACTIONS until it is complete.

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use tokio::task::JoinSet;

use super::coordinator::{ListedTxn, OffsetWriteGuard, TxnConfig, TxnCoordinator};
use super::markers::{offsets_partition, TxnMarkerWriter, TxnOffsetCompletion};
use super::metadata::{TxnMetadata, NO_PRODUCER_EPOCH, NO_PRODUCER_ID};
use super::producer_ids::{ProducerIdBlock, ProducerIdManager};
use super::record;
use super::task::Task;
use crate::clock::Clock;
use crate::coordinator::actor::{self, Answer, Mailbox, Stopped};
use crate::coordinator::ownership::{Leadership, LeadershipCommand, OwnedPartitions};
use crate::coordinator::ownership::{LedInLatestImage, Ownership, ServedPartitions};
use crate::error_code;
use crate::limits::TXN_COMMAND_QUEUE_MAX;
use crate::store::TxnStore;
use crate::types::TopicPartition;

/// The coordinator task has stopped; handlers answer COORDINATOR_NOT_AVAILABLE.
pub type TxnServiceStopped = Stopped;

/// Why no producer-id block could be had: the source's own error (on a broker,
/// the controller's), kept whole for the log; the service retries either way.
pub type ProducerIdBlockError = Box<dyn std::error::Error + Send + Sync + 'static>;

/// Where producer-id blocks come from (the controller, on a broker).
pub trait ProducerIdBlockSource: Send + Sync + 'static {
    fn allocate(
        &self,
        count: i64,
    ) -> Pin<Box<dyn Future<Output = Result<ProducerIdBlock, ProducerIdBlockError>> + Send + 'static>>;
}

/// Settings of the service besides the coordinator's own.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TxnServiceConfig {
    pub coordinator: TxnConfig,
    /// `producer.id.block.size`.
    pub producer_id_block_size: i64,
    /// `transaction.abort.timed.out.transaction.cleanup.interval.ms`.
    pub abort_check_interval_ms: u64,
    /// `transaction.remove.expired.transaction.cleanup.interval.ms`.
    pub expiration_check_interval_ms: u64,
    /// Which transactional ids this coordinator serves.
    pub ownership: Ownership,
}

/// What the service needs from the rest of the broker.
pub struct TxnDeps {
    pub store: Arc<dyn TxnStore>,
    /// The group side: pending offsets completed when a transaction ends.
    pub offsets: Arc<dyn TxnOffsetCompletion>,
    pub markers: Arc<dyn TxnMarkerWriter>,
    pub blocks: Arc<dyn ProducerIdBlockSource>,
    pub clock: Arc<dyn Clock>,
    /// The transaction state partitions the latest image has this broker lead.
    pub led_in_latest_image: LedInLatestImage,
}

/// Kafka's InitProducerIdResult.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct InitProducerIdResult {
    pub error: i16,
    pub producer_id: i64,
    pub producer_epoch: i16,
}

impl InitProducerIdResult {
    pub(super) fn error(error: i16) -> InitProducerIdResult {
        InitProducerIdResult {
            error,
            producer_id: NO_PRODUCER_ID,
            producer_epoch: NO_PRODUCER_EPOCH,
        }
    }
}

/// Who waits for a transition to be stored, and what they are owed.
pub(super) enum Reply {
    Nobody,
    Code(Answer<i16>),
    Init(Answer<InitProducerIdResult>),
}

impl Reply {
    pub(super) fn send_error(self, error: i16) {
        // Every caller may have gone away; nothing depends on it hearing back.
        match self {
            Reply::Nobody => {}
            Reply::Code(answer) => drop(answer.send(error)),
            Reply::Init(answer) => {
                let _ = answer.send(InitProducerIdResult::error(error));
            }
        }
    }
}

pub(super) enum Command {
    InitProducerId {
        transactional_id: Option<String>,
        timeout_ms: i32,
        expected: Option<(i64, i16)>,
        answer: Answer<InitProducerIdResult>,
    },
    AddPartitions {
        transactional_id: String,
        producer_id: i64,
        producer_epoch: i16,
        partitions: Vec<TopicPartition>,
        answer: Answer<i16>,
    },
    VerifyPartitions {
        transactional_id: String,
        producer_id: i64,
        producer_epoch: i16,
        partitions: Vec<TopicPartition>,
        answer: Answer<Result<Vec<i16>, i16>>,
    },
    EndTxn {
        transactional_id: String,
        producer_id: i64,
        producer_epoch: i16,
        commit: bool,
        answer: Answer<i16>,
    },
    BeginOffsetWrite {
        transactional_id: String,
        producer_id: i64,
        producer_epoch: i16,
        group_id: String,
        answer: Answer<Result<OffsetWriteGuard, i16>>,
    },
    Describe(String, Answer<Result<TxnMetadata, i16>>),
    List {
        states: Vec<String>,
        producer_ids: Vec<i64>,
        min_duration_ms: i64,
        answer: Answer<(Vec<ListedTxn>, Vec<String>)>,
    },
    /// This broker now leads, or no longer leads, a partition of the
    /// transaction state topic: its transactions are loaded and then served,
    /// or leave.
    Leadership(Leadership, Answer<()>),
    /// End the task; answered once it has let go of its stores.
    Stop(Answer<()>),
}

impl LeadershipCommand for Command {
    fn leadership(change: Leadership, answer: Answer<()>) -> Command {
        Command::Leadership(change, answer)
    }
}

impl Command {
    /// The transactional id the command is about; None for idempotent
    /// producers and for commands over every id.
    pub(super) fn transactional_id(&self) -> Option<&str> {
        match self {
            Command::InitProducerId {
                transactional_id, ..
            } => transactional_id.as_deref(),
            Command::AddPartitions {
                transactional_id, ..
            }
            | Command::VerifyPartitions {
                transactional_id, ..
            }
            | Command::EndTxn {
                transactional_id, ..
            }
            | Command::BeginOffsetWrite {
                transactional_id, ..
            }
            | Command::Describe(transactional_id, _) => Some(transactional_id),
            Command::List { .. } | Command::Leadership(..) | Command::Stop(_) => None,
        }
    }

    /// Answers the command with `error`: its transactional id is not served here.
    pub(super) fn refuse(self, error: i16) {
        // Every caller may have gone away; nothing depends on it hearing back.
        match self {
            Command::InitProducerId { answer, .. } => {
                let _ = answer.send(InitProducerIdResult::error(error));
            }
            Command::AddPartitions { answer, .. } | Command::EndTxn { answer, .. } => {
                let _ = answer.send(error);
            }
            Command::VerifyPartitions { answer, .. } => {
                let _ = answer.send(Err(error));
            }
            Command::BeginOffsetWrite { answer, .. } => {
                let _ = answer.send(Err(error));
            }
            Command::Describe(_, answer) => {
                let _ = answer.send(Err(error));
            }
            Command::List { answer, .. } => {
                let _ = answer.send((Vec::new(), Vec::new()));
            }
            Command::Leadership(_, answer) => {
                let _ = answer.send(());
            }
            Command::Stop(answer) => {
                let _ = answer.send(());
            }
        }
    }
}

/// Handle to the transaction coordinator task; cheap to clone. The task ends
/// when the last handle is dropped.
#[derive(Clone)]
pub struct TxnService {
    mailbox: Mailbox<Command>,
    /// The transaction state partitions whose ids are served.
    served: ServedPartitions,
    /// `transaction.max.timeout.ms`: a request past it is refused before
    /// the coordinator's state is consulted, as Kafka checks it.
    max_timeout_ms: i32,
}

impl TxnService {
    /// Loads every stored transaction, starts writing the markers of those that
    /// were preparing to end, fetches the first block of producer ids, and
    /// starts the task.
    pub async fn start(config: TxnServiceConfig, deps: TxnDeps) -> io::Result<TxnService> {
        let every = config.ownership == Ownership::Every;
        let max_timeout_ms = config.coordinator.max_timeout_ms;
        let store = Arc::clone(&deps.store);
        let records = if every {
            tokio::task::spawn_blocking(move || record::load_all(&*store))
                .await
                .map_err(io::Error::other)??
        } else {
            Vec::new()
        };
        let mut ids = ProducerIdManager::new(config.producer_id_block_size);
        ids.fetch_started();
        let first = deps
            .blocks
            .allocate(config.producer_id_block_size)
            .await
            .map_err(|e| io::Error::other(format!("allocating producer ids: {e}")))?;
        ids.block_arrived(Some(first));
        let mut coordinator = TxnCoordinator::new(config.coordinator);
        let recovered = coordinator.load(records);
        let (mailbox, receiver) = actor::mailbox(TXN_COMMAND_QUEUE_MAX);
        let (owned, served) =
            OwnedPartitions::new(config.ownership, deps.led_in_latest_image.clone());
        let mut task = Task {
            coordinator,
            ids,
            deps,
            work: JoinSet::new(),
            owned,
            marker_jobs: std::collections::HashMap::new(),
        };
        if !recovered.is_empty() {
            tracing::info!(
                count = recovered.len(),
                "completing transactions that were ending"
            );
        }
        for job in recovered {
            task.spawn_markers(job, Reply::Nobody);
        }
        tokio::spawn(task.run(config, receiver));
        Ok(TxnService {
            mailbox,
            served,
            max_timeout_ms,
        })
    }

    /// This broker now leads a partition of the transaction state topic, or
    /// no longer does: an election loads the partition's transactions, then
    /// serves them (those left preparing to end are completed; `continued`,
    /// see `Leadership::Elected`), and a resignation lets them go. Returns
    /// once the task has taken the change.
    pub async fn follow(&self, change: Leadership) -> Result<(), Stopped> {
        self.mailbox.follow(change).await
    }

    /// Waits, at most `wait`, until the transactions of `partition` are served
    /// here (loaded after an election); whether they are.
    pub async fn wait_served(&self, partition: i32, wait: Duration) -> bool {
        self.served.wait(partition, wait).await
    }

    /// InitProducerId; `transactional_id` None for an idempotent producer.
    pub async fn init_producer_id(
        &self,
        transactional_id: Option<String>,
        timeout_ms: i32,
        expected: Option<(i64, i16)>,
    ) -> InitProducerIdResult {
        // Kafka's handleInitProducerId checks the request itself before it
        // looks for the transaction (which may still be loading).
        if let Some(id) = &transactional_id {
            if id.is_empty() {
                return InitProducerIdResult::error(error_code::INVALID_REQUEST);
            }
            if timeout_ms <= 0 || timeout_ms > self.max_timeout_ms {
                return InitProducerIdResult::error(error_code::INVALID_TRANSACTION_TIMEOUT);
            }
        }
        self.mailbox
            .call(|answer| Command::InitProducerId {
                transactional_id,
                timeout_ms,
                expected,
                answer,
            })
            .await
            .unwrap_or_else(|_| InitProducerIdResult::error(error_code::COORDINATOR_NOT_AVAILABLE))
    }

    /// AddPartitionsToTxn (the client form): one error for every partition.
    pub async fn add_partitions(
        &self,
        transactional_id: String,
        producer_id: i64,
        producer_epoch: i16,
        partitions: Vec<TopicPartition>,
    ) -> i16 {
        self.mailbox
            .call(|answer| Command::AddPartitions {
                transactional_id,
                producer_id,
                producer_epoch,
                partitions,
                answer,
            })
            .await
            .unwrap_or(error_code::COORDINATOR_NOT_AVAILABLE)
    }

    /// AddPartitionsToTxn with verify_only: each partition's error, or one for all.
    pub async fn verify_partitions(
        &self,
        transactional_id: String,
        producer_id: i64,
        producer_epoch: i16,
        partitions: Vec<TopicPartition>,
    ) -> Result<Vec<i16>, i16> {
        self.mailbox
            .call(|answer| Command::VerifyPartitions {
                transactional_id,
                producer_id,
                producer_epoch,
                partitions,
                answer,
            })
            .await
            .unwrap_or(Err(error_code::COORDINATOR_NOT_AVAILABLE))
    }

    /// AddOffsetsToTxn: the group's offsets partition joins the transaction.
    pub async fn add_offsets(
        &self,
        transactional_id: String,
        producer_id: i64,
        producer_epoch: i16,
        group_id: &str,
    ) -> i16 {
        let partitions = vec![offsets_partition(group_id)];
        self.add_partitions(transactional_id, producer_id, producer_epoch, partitions)
            .await
    }

    pub async fn end_txn(
        &self,
        transactional_id: String,
        producer_id: i64,
        producer_epoch: i16,
        commit: bool,
    ) -> i16 {
        self.mailbox
            .call(|answer| Command::EndTxn {
                transactional_id,
                producer_id,
                producer_epoch,
                commit,
                answer,
            })
            .await
            .unwrap_or(error_code::COORDINATOR_NOT_AVAILABLE)
    }

    /// TxnOffsetCommit's check with the coordinator: the group's offsets
    /// partition is in the producer's Ongoing transaction. Keep the guard until
    /// the pending offsets are stored.
    pub async fn begin_offset_write(
        &self,
        transactional_id: String,
        producer_id: i64,
        producer_epoch: i16,
        group_id: String,
    ) -> Result<OffsetWriteGuard, i16> {
        self.mailbox
            .call(|answer| Command::BeginOffsetWrite {
                transactional_id,
                producer_id,
                producer_epoch,
                group_id,
                answer,
            })
            .await
            .unwrap_or(Err(error_code::COORDINATOR_NOT_AVAILABLE))
    }

    /// Stops the task: work in flight is abandoned (a transaction that was
    /// ending is completed at the next start) and the stores are released.
    pub async fn shutdown(&self) {
        let _ = self.mailbox.call(Command::Stop).await;
    }

    pub async fn describe(&self, transactional_id: String) -> Result<TxnMetadata, i16> {
        self.mailbox
            .call(|answer| Command::Describe(transactional_id, answer))
            .await
            .unwrap_or(Err(error_code::COORDINATOR_NOT_AVAILABLE))
    }

    /// ListTransactions: matching transactions and the unknown state names.
    pub async fn list(
        &self,
        states: Vec<String>,
        producer_ids: Vec<i64>,
        min_duration_ms: i64,
    ) -> Result<(Vec<ListedTxn>, Vec<String>), TxnServiceStopped> {
        self.mailbox
            .call(|answer| Command::List {
                states,
                producer_ids,
                min_duration_ms,
                answer,
            })
            .await
    }
}
