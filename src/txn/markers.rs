//! Writing a transaction's end (Kafka's TransactionMarkerChannelManager): a
//! commit or abort marker to every data partition of the transaction, through
//! the partition side behind [`TxnMarkerWriter`], and, for the offsets topic's
//! partitions, the transaction's pending offsets committed or dropped by the
//! group coordinator behind [`TxnOffsetCompletion`] (what a marker on
//! `__consumer_offsets` does in Kafka), which orders it with the other offset
//! requests of each group.
//!
//! Blocking: the partition side appends to logs and fsyncs, so
//! `write_markers` runs on a blocking thread. It is idempotent per partition
//! as far as the caller keeps the list of partitions still to do: a
//! partition reported done is never written again, and on recovery a
//! partition is written only if it still holds the transaction open.
//! Completing pending offsets is idempotent too (groups without any are
//! skipped), so it is simply repeated until it succeeds.

use std::future::Future;
use std::io;
use std::pin::Pin;

use super::coordinator::MarkerJob;
use crate::error_code;
use crate::placement::{group_partition, OFFSETS_TOPIC_NAME};
use crate::types::TopicPartition;

/// The partition side, as the coordinator sees it.
pub trait TxnMarkerWriter: Send + Sync + 'static {
    /// Append a commit/abort marker for `producer_id` to `tp`; Err(kafka error code) if it could not.
    fn write_marker(
        &self,
        tp: &TopicPartition,
        producer_id: i64,
        producer_epoch: i16,
        coordinator_epoch: i32,
        commit: bool,
    ) -> Result<(), i16>;

    /// True when `tp` still holds an open transaction of `producer_id` (recovery uses it so markers are never doubled).
    fn has_ongoing_txn(&self, tp: &TopicPartition, producer_id: i64) -> Result<bool, i16>;

    /// Waits until everything written to these partitions so far (their markers among it)
    /// is fsynced: one group-commit round per partition, side by side. A transaction is
    /// stored complete only after this, so that a power cut can never leave the store
    /// saying Complete while a partition lost its marker and pins its last stable offset.
    fn make_durable(&self, partitions: &[TopicPartition]) -> Result<(), i16>;

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
        producer_epoch: i16,
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
/// `remaining`; returns the partitions still to do (each failed with a
/// retriable error). A partition that no longer exists is done: its data went
/// with it; so is one that refuses the marker as stale (a newer epoch wrote
/// there).
pub fn write_markers(
    job: &MarkerJob,
    remaining: &[TopicPartition],
    writer: &dyn TxnMarkerWriter,
) -> Vec<TopicPartition> {
    let mut left = Vec::new();
    let mut done = Vec::new();
    for tp in remaining {
        let outcome = if job.recovery {
            writer
                .has_ongoing_txn(tp, job.producer_id)
                .and_then(|open| write_if(open, writer, tp, job))
        } else {
            write_if(true, writer, tp, job)
        };
        match outcome {
            Ok(()) => done.push(tp.clone()),
            Err(error_code::UNKNOWN_TOPIC_OR_PARTITION) => {}
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
            Err(code) => {
                tracing::debug!(transactional_id = %job.transactional_id, partition = %tp, code, "transaction marker not written; will retry");
                left.push(tp.clone());
            }
        }
    }
    if !done.is_empty() {
        if let Err(code) = writer.make_durable(&done) {
            // Only a failed fsync does this, which takes the log dir offline: the marker
            // writes retried after it are refused too, and Complete is never stored.
            tracing::warn!(transactional_id = %job.transactional_id, code, "transaction markers not made durable; will retry");
            left.extend(done);
        }
    }
    left
}

fn write_if(
    open: bool,
    writer: &dyn TxnMarkerWriter,
    tp: &TopicPartition,
    job: &MarkerJob,
) -> Result<(), i16> {
    if !open {
        return Ok(());
    }
    writer.write_marker(
        tp,
        job.producer_id,
        job.producer_epoch,
        job.coordinator_epoch,
        job.commit,
    )
}
