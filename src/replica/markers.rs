//! The partition side of transaction markers (Kafka's WriteTxnMarkers on the
//! leader): a commit or abort control batch appended to a partition this broker
//! hosts, whether a partition still holds a producer's transaction open, and
//! making what was written durable before the coordinator stores the transaction
//! complete. The coordinator reaches these through `txn::TxnMarkerWriter`, which
//! the server adapts onto them (replica may not import txn).

use std::sync::Arc;
use std::time::Duration;

use super::{off_the_worker, Partition, PartitionError, ReplicaManager};
use crate::limits::TXN_MARKER_COMMIT_WAIT_MS;
use crate::log::TxnMarker;
use crate::types::TopicPartition;

impl ReplicaManager {
    /// The partition in the latest metadata image, its log created if needed.
    /// Blocking: called from the coordinator's blocking thread.
    fn marker_partition(&self, tp: &TopicPartition) -> Result<Arc<Partition>, PartitionError> {
        self.led(tp)
    }

    /// The partition if this broker leads it in the latest metadata image
    /// (NotLeaderOrFollower otherwise), its log created if needed: where a
    /// coordinator appends its records. Blocking.
    pub fn led(&self, tp: &TopicPartition) -> Result<Arc<Partition>, PartitionError> {
        let image = Arc::clone(&self.images.borrow());
        self.partition(&image, &tp.topic, tp.partition)
    }

    /// Where a marker for `tp` goes: None when this broker leads it, else the
    /// leader's inter-broker endpoint; NotLeaderOrFollower while it has no leader.
    pub fn marker_leader(
        &self,
        tp: &TopicPartition,
    ) -> Result<Option<(String, u16)>, PartitionError> {
        let image = Arc::clone(&self.images.borrow());
        let leader = image
            .partition(&tp.topic, tp.partition)
            .map(|p| p.leader_id)
            .ok_or(PartitionError::UnknownTopicOrPartition)?;
        if leader == self.config.node_id {
            return Ok(None);
        }
        let broker = image
            .brokers
            .get(&leader)
            .ok_or(PartitionError::NotLeaderOrFollower)?;
        let (host, port) = broker.endpoint(self.config.inter_broker_listener());
        let port = u16::try_from(port).map_err(|_| PartitionError::NotLeaderOrFollower)?;
        Ok(Some((host.to_string(), port)))
    }

    /// Appends the marker; returns its offset. Blocking.
    pub fn write_txn_marker(
        &self,
        tp: &TopicPartition,
        marker: &TxnMarker,
    ) -> Result<i64, PartitionError> {
        let partition = self.marker_partition(tp)?;
        partition.append_txn_marker(marker, self.clock.now_ms())
    }

    /// Whether `tp` still holds an open transaction of `producer_id`. Blocking.
    pub fn has_ongoing_txn(
        &self,
        tp: &TopicPartition,
        producer_id: i64,
    ) -> Result<bool, PartitionError> {
        self.marker_partition(tp)?.has_ongoing_txn(producer_id)
    }

    /// Waits until everything written so far to these partitions is committed (the
    /// high watermark reached it: every in-sync replica has it, as Kafka writes
    /// markers with acks=all) and fsynced here, one group-commit round per
    /// partition, side by side; at most `TXN_MARKER_COMMIT_WAIT_MS`, after which the
    /// coordinator retries. A partition that is gone has nothing left to make
    /// durable. Blocking: it waits on the runtime from the caller's blocking thread.
    pub fn make_durable(&self, partitions: &[TopicPartition]) -> Result<(), PartitionError> {
        let runtime = tokio::runtime::Handle::try_current()
            .map_err(|e| PartitionError::Storage(std::io::Error::other(e)))?;
        let mut waits = tokio::task::JoinSet::new();
        for tp in partitions {
            let partition = match self.marker_partition(tp) {
                Ok(partition) => partition,
                Err(PartitionError::UnknownTopicOrPartition) => continue,
                Err(error) => return Err(error),
            };
            let flusher = self.flusher.clone();
            waits.spawn_on(
                async move {
                    let committed = partition.wait_replicated_to_end()?;
                    let wait = Duration::from_millis(TXN_MARKER_COMMIT_WAIT_MS);
                    tokio::time::timeout(wait, committed)
                        .await
                        .map_err(|_| PartitionError::Timeout)??;
                    let end_offset = partition.high_watermark();
                    flusher
                        .wait_durable(&partition, end_offset)
                        .await
                        .map_err(PartitionError::Storage)
                },
                &runtime,
            );
        }
        runtime.block_on(async move {
            while let Some(done) = waits.join_next().await {
                match done {
                    Ok(Ok(())) => {}
                    Ok(Err(error)) => return Err(error),
                    Err(error) => {
                        return Err(PartitionError::Storage(std::io::Error::other(error)))
                    }
                }
            }
            Ok(())
        })
    }
}

/// Ends the producer's transaction on `partition`, led here, as Kafka's
/// WriteTxnMarkers does on a leader: the marker is appended if the partition
/// still holds the transaction open (so a coordinator's retry never doubles
/// one), then waited for until committed (acks=all), at most
/// `TXN_MARKER_COMMIT_WAIT_MS`. A retry that finds the transaction ended here
/// waits the same way: the marker that ended it (perhaps the coordinator's own
/// attempt, which timed out) may not be committed yet, and a leader change
/// could still truncate it, while a coordinator told "done" never writes it
/// again.
pub async fn end_txn(
    partition: &Partition,
    marker: &TxnMarker,
    now_ms: i64,
) -> Result<(), PartitionError> {
    if off_the_worker(|| partition.has_ongoing_txn(marker.producer_id))? {
        off_the_worker(|| partition.append_txn_marker(marker, now_ms))?;
    }
    let committed = partition.wait_replicated_to_end()?;
    tokio::time::timeout(Duration::from_millis(TXN_MARKER_COMMIT_WAIT_MS), committed)
        .await
        .map_err(|_| PartitionError::Timeout)?
}
