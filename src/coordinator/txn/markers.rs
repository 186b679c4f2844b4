//! Writing a transaction's end (Kafka's TransactionMarkerChannelManager): a
//! commit or abort marker to every data partition of the transaction, through
//! the partition side behind [`TxnMarkerWriter`], and, for the offsets topic's
//! partitions, the transaction's pending offsets committed or dropped by the
//! group coordinator behind [`TxnOffsetCompletion`] (what a marker on
//! `__consumer_offsets` does in Kafka), which orders it with the other offset
//! requests of each group.
//!
//! The partitions of one attempt are ended side by side, each a future that
//! holds no thread while it waits. A partition reported done is never written
//! again; a retry's second marker ends nothing. Completing pending offsets is
//! idempotent (groups without any are skipped), so it is simply repeated
//! until it succeeds.

use std::future::Future;
use std::io;
use std::pin::Pin;

use super::coordinator::MarkerJob;
use crate::error_code;
use crate::internal_topics::{group_partition, OFFSETS_TOPIC_NAME};
use crate::log::TxnMarker;
use crate::types::{ProducerEpoch, TopicPartition};

/// A marker's end of the transaction on one partition, on its way.
pub type MarkerFuture = Pin<Box<dyn Future<Output = Result<(), i16>> + Send + 'static>>;

/// The partition side, as the coordinator sees it.
pub trait TxnMarkerWriter: Send + Sync + 'static {
    /// Ends the producer's transaction on `tp` as its leader does for
    /// WriteTxnMarkers: the marker appended (whether or not the transaction is
    /// still open there, so that the partition learns the coordinator epoch),
    /// as an acks=all append (refused below
    /// min.insync.replicas), then waited for until committed in the leadership
    /// it was appended in and durable on the leader. A transaction is stored
    /// complete only after this, so that a leader change or a power cut can never
    /// leave the store saying Complete while a partition lost its marker and
    /// pins its last stable offset. Resolves Err(kafka error code) if it could
    /// not. Holds no thread while it waits.
    fn end_txn(&self, tp: &TopicPartition, marker: TxnMarker) -> MarkerFuture;

    /// Whether every one of these partitions is led here, so that their markers
    /// are local appends (EndTxn then waits for them; see the service).
    fn leads_all(&self, _partitions: &[TopicPartition]) -> bool {
        true
    }
}

/// The group side of a transaction's end, as the coordinator sees it.
pub trait TxnOffsetCompletion: Send + Sync + 'static {
    /// Commit (`commit`) or drop the producer's pending offsets in every group
    /// placed on these partitions of the offsets topic: each partition gets the
    /// transaction's marker (with the coordinator's epoch), then its group
    /// coordinator completes the offsets. Resolves once durable.
    fn complete(
        &self,
        producer_id: i64,
        producer_epoch: ProducerEpoch,
        coordinator_epoch: i32,
        offsets_partitions: Vec<i32>,
        commit: bool,
    ) -> Pin<Box<dyn Future<Output = io::Result<()>> + Send + 'static>>;
}

/// The offsets topic partition that holds `group_id`'s offsets (where Kafka's
/// group coordinator places the group). Its partitions in a transaction stand
/// for the groups whose offsets the transaction commits.
pub fn offsets_partition(group_id: &str) -> TopicPartition {
    TopicPartition::new(OFFSETS_TOPIC_NAME, group_partition(group_id))
}

/// The job's partitions split in two: data partitions, which get markers, and
/// offsets topic partitions, whose groups get their pending offsets completed.
pub fn split_partitions(job: &MarkerJob) -> (Vec<TopicPartition>, Vec<i32>) {
    let (offsets, data): (Vec<_>, Vec<_>) = job
        .partitions
        .iter()
        .cloned()
        .partition(|tp| tp.topic == OFFSETS_TOPIC_NAME);
    (data, offsets.into_iter().map(|tp| tp.partition).collect())
}

/// One attempt at the markers of `job` for the data partitions in
/// `remaining`, all side by side; returns the partitions still to do (each
/// failed with a retriable error). A partition that no longer exists is done:
/// its data went with it; so is one that refuses the marker as stale (a newer
/// epoch wrote there).
pub async fn write_markers(
    job: &MarkerJob,
    remaining: &[TopicPartition],
    writer: &dyn TxnMarkerWriter,
) -> Vec<TopicPartition> {
    let marker = TxnMarker {
        producer_id: job.producer_id,
        producer_epoch: job.producer_epoch,
        coordinator_epoch: job.coordinator_epoch,
        commit: job.commit,
    };
    let mut attempts = tokio::task::JoinSet::new();
    for tp in remaining {
        let ending = writer.end_txn(tp, marker);
        let tp = tp.clone();
        attempts.spawn(async move { (tp, ending.await) });
    }
    let mut left = Vec::new();
    while let Some(done) = attempts.join_next().await {
        let (tp, outcome) = match done {
            Ok(done) => done,
            Err(error) => std::panic::resume_unwind(error.into_panic()),
        };
        match outcome {
            Ok(()) | Err(error_code::UNKNOWN_TOPIC_OR_PARTITION) => {}
            // The partition has seen a newer producer or coordinator epoch: this
            // transaction can no longer be open there, and Kafka stops sending
            // its marker. On one node nobody else will complete it, so the
            // partition counts as done.
            Err(
                code @ (error_code::INVALID_PRODUCER_EPOCH
                | error_code::TRANSACTION_COORDINATOR_FENCED),
            ) => {
                tracing::warn!(transactional_id = %job.transactional_id, partition = %tp, code, "transaction marker refused as stale; not retried");
            }
            // A timeout, a leadership change, min ISR, a failed fsync: retried.
            Err(code) => {
                tracing::debug!(transactional_id = %job.transactional_id, partition = %tp, code, "transaction marker not committed; will retry");
                left.push(tp);
            }
        }
    }
    left.sort_by(|a, b| (&a.topic, a.partition).cmp(&(&b.topic, b.partition)));
    left
}
