//! The partition side of transaction markers: the coordinator's
//! `TxnMarkerWriter`, appending control batches through `replica::Partition`.
//!
//! Until `attach`, or after the broker is gone, every call answers
//! COORDINATOR_NOT_AVAILABLE, which the coordinator retries.

use std::sync::{Arc, OnceLock, Weak};

use crate::error_code;
use crate::log::{LogError, TxnMarker};
use crate::protocol::context::BrokerState;
use crate::replica::PartitionError;
use crate::txn::TxnMarkerWriter;
use crate::types::TopicPartition;

pub struct PartitionMarkerWriter {
    /// Set once the broker state exists; weak so the writer, held by the
    /// coordinator task, does not keep the broker alive.
    broker: OnceLock<Weak<BrokerState>>,
}

impl PartitionMarkerWriter {
    pub fn new() -> Arc<PartitionMarkerWriter> {
        Arc::new(PartitionMarkerWriter {
            broker: OnceLock::new(),
        })
    }

    /// Connects the writer to the broker it writes for. Called once.
    pub fn attach(&self, state: &Arc<BrokerState>) {
        let attached = self.broker.set(Arc::downgrade(state));
        assert!(attached.is_ok(), "marker writer attached twice");
    }

    /// The partition, led here, in the current metadata image.
    fn partition(&self, tp: &TopicPartition) -> Result<Arc<crate::replica::Partition>, i16> {
        let state = self
            .broker
            .get()
            .and_then(Weak::upgrade)
            .ok_or(error_code::COORDINATOR_NOT_AVAILABLE)?;
        let image = state.controller.image();
        state
            .replicas
            .partition(&image, &tp.topic, tp.partition)
            .map_err(|e| partition_error_code(&e))
    }

    fn now_ms(&self) -> Result<i64, i16> {
        let state = self
            .broker
            .get()
            .and_then(Weak::upgrade)
            .ok_or(error_code::COORDINATOR_NOT_AVAILABLE)?;
        Ok(state.clock.now_ms())
    }
}

/// The error code the coordinator sees. It retries every code but
/// UNKNOWN_TOPIC_OR_PARTITION (the partition is gone, and its data with it)
/// and the two stale-marker refusals (see `txn::markers::write_markers`).
fn partition_error_code(error: &PartitionError) -> i16 {
    match error {
        PartitionError::UnknownTopicOrPartition => error_code::UNKNOWN_TOPIC_OR_PARTITION,
        PartitionError::Timeout => error_code::REQUEST_TIMED_OUT,
        PartitionError::Log(LogError::InvalidProducerEpoch(_)) => {
            error_code::INVALID_PRODUCER_EPOCH
        }
        PartitionError::Log(LogError::TransactionCoordinatorFenced(_)) => {
            error_code::TRANSACTION_COORDINATOR_FENCED
        }
        // Storage failures, and whatever else the log refuses, are retried.
        _ => error_code::KAFKA_STORAGE_ERROR,
    }
}

impl TxnMarkerWriter for PartitionMarkerWriter {
    fn write_marker(
        &self,
        tp: &TopicPartition,
        producer_id: i64,
        producer_epoch: i16,
        coordinator_epoch: i32,
        commit: bool,
    ) -> Result<(), i16> {
        let partition = self.partition(tp)?;
        let marker = TxnMarker {
            producer_id,
            producer_epoch,
            coordinator_epoch,
            commit,
        };
        partition
            .append_txn_marker(&marker, self.now_ms()?)
            .map(|_offset| ())
            .map_err(|e| partition_error_code(&e))
    }

    fn has_ongoing_txn(&self, tp: &TopicPartition, producer_id: i64) -> Result<bool, i16> {
        self.partition(tp)?
            .has_ongoing_txn(producer_id)
            .map_err(|e| partition_error_code(&e))
    }

    /// Runs on the coordinator's blocking thread; waits on the partition group commit.
    fn make_durable(&self, partitions: &[TopicPartition]) -> Result<(), i16> {
        let state = self
            .broker
            .get()
            .and_then(Weak::upgrade)
            .ok_or(error_code::COORDINATOR_NOT_AVAILABLE)?;
        let runtime = tokio::runtime::Handle::try_current()
            .map_err(|_| error_code::COORDINATOR_NOT_AVAILABLE)?;
        let mut waits = tokio::task::JoinSet::new();
        for tp in partitions {
            let partition = match self.partition(tp) {
                Ok(partition) => partition,
                // Gone, and its data with it: nothing left to make durable.
                Err(error_code::UNKNOWN_TOPIC_OR_PARTITION) => continue,
                Err(code) => return Err(code),
            };
            let flusher = state.replicas.flusher().clone();
            let end_offset = partition.high_watermark();
            waits.spawn_on(
                async move { flusher.wait_durable(&partition, end_offset).await },
                &runtime,
            );
        }
        drop(state);
        runtime.block_on(async move {
            while let Some(done) = waits.join_next().await {
                match done {
                    Ok(Ok(())) => {}
                    _ => return Err(error_code::KAFKA_STORAGE_ERROR),
                }
            }
            Ok(())
        })
    }
}
