//! The partition side of transaction markers (Kafka's WriteTxnMarkers on the
//! leader): a commit or abort control batch appended to a partition this broker
//! leads, waited for until committed and durable before the coordinator stores
//! the transaction complete. The coordinator reaches this through `txn::TxnMarkerWriter`, which
//! the server adapts onto it (replica may not import txn), and a coordinator on
//! another broker through WriteTxnMarkers.
//!
//! Invariant: a transaction is reported ended here only once its marker is
//! committed in the leadership it was appended in and fsynced on this broker;
//! a marker older than the partition's producer or coordinator epoch is
//! refused, never appended.

use std::sync::Arc;
use std::time::Duration;

use super::{off_the_worker, Flusher, Partition, PartitionError, ReplicaManager};
use crate::limits::TXN_MARKER_COMMIT_WAIT_MS;
use crate::log::TxnMarker;
use crate::types::TopicPartition;

impl ReplicaManager {
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

    /// Ends the producer's transaction on `partition`, led here: see `end_txn`.
    pub async fn end_txn(
        &self,
        partition: &Arc<Partition>,
        marker: &TxnMarker,
    ) -> Result<(), PartitionError> {
        end_txn(partition, &self.flusher, marker, self.clock.now_ms()).await
    }
}

/// Ends the producer's transaction on `partition`, led here, as Kafka's
/// WriteTxnMarkers does on a leader: the marker is appended
/// (`Partition::append_txn_marker`, whether or not the transaction is still
/// open here) as an acks=all append (NotEnoughReplicas below
/// min.insync.replicas), then waited for until committed in the leadership it
/// was appended in (`wait_committed`: NotLeaderOrFollower once that leadership
/// ends, NotEnoughReplicasAfterAppend if the ISR fell below min), at most
/// `TXN_MARKER_COMMIT_WAIT_MS`, then until fsynced here, so that the
/// coordinator stores the transaction complete only over durable markers.
pub(super) async fn end_txn(
    partition: &Arc<Partition>,
    flusher: &Flusher,
    marker: &TxnMarker,
    now_ms: i64,
) -> Result<(), PartitionError> {
    let (offset, generation) = off_the_worker(|| partition.append_txn_marker(marker, now_ms))?;
    let end_offset = offset.next();
    let committed = partition.wait_committed(end_offset, generation);
    tokio::time::timeout(Duration::from_millis(TXN_MARKER_COMMIT_WAIT_MS), committed)
        .await
        .map_err(|_| PartitionError::Timeout)??;
    flusher
        .wait_durable(partition, end_offset)
        .await
        .map_err(PartitionError::Storage)
}
