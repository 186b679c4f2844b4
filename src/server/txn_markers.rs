//! The coordinator's `TxnMarkerWriter` over the partition side of markers, which
//! lives in `replica` (`ReplicaManager::end_txn`) for the partitions this broker
//! leads, and is a WriteTxnMarkers to the leader (`protocol::broker_client`) for
//! the others; here also the Kafka error codes the coordinator acts on.
//!
//! Until `attach`, or after the broker is gone, every call answers
//! COORDINATOR_NOT_AVAILABLE, which the coordinator retries.

use std::io;
use std::sync::{Arc, OnceLock, Weak};
use std::time::Duration;

use crate::coordinator::txn::{MarkerFuture, TxnMarkerWriter};
use crate::error_code;
use crate::internal_topics::OFFSETS_TOPIC_NAME;
use crate::limits::TXN_MARKER_REMOTE_WAIT_MS;
use crate::log::{LogError, TxnMarker};
use crate::protocol::broker_client;
use crate::protocol::peer_client::PeerConnector;
use crate::replica::{off_the_worker, PartitionError, ReplicaManager};
use crate::types::TopicPartition;

pub struct PartitionMarkerWriter {
    /// Set once the broker is built; weak so the writer, held by the
    /// coordinator task, does not keep the partitions alive.
    replicas: OnceLock<Weak<ReplicaManager>>,
    /// How markers reach a leader on another broker.
    peers: Arc<PeerConnector>,
}

impl PartitionMarkerWriter {
    pub fn new(peers: Arc<PeerConnector>) -> Arc<PartitionMarkerWriter> {
        Arc::new(PartitionMarkerWriter {
            replicas: OnceLock::new(),
            peers,
        })
    }

    /// Connects the writer to the partitions it writes to. Called once.
    pub fn attach(&self, replicas: &Arc<ReplicaManager>) {
        let attached = self.replicas.set(Arc::downgrade(replicas));
        assert!(attached.is_ok(), "marker writer attached twice");
    }

    fn replicas(&self) -> Result<Arc<ReplicaManager>, i16> {
        self.replicas
            .get()
            .and_then(Weak::upgrade)
            .ok_or(error_code::COORDINATOR_NOT_AVAILABLE)
    }
}

/// The error code the coordinator sees. It retries every code but
/// UNKNOWN_TOPIC_OR_PARTITION (the partition is gone, and its data with it)
/// and the two stale-marker refusals (see `txn::markers::write_markers`).
fn partition_error_code(error: &PartitionError) -> i16 {
    match error {
        PartitionError::UnknownTopicOrPartition => error_code::UNKNOWN_TOPIC_OR_PARTITION,
        PartitionError::Timeout => error_code::REQUEST_TIMED_OUT,
        PartitionError::NotLeaderOrFollower => error_code::NOT_LEADER_OR_FOLLOWER,
        PartitionError::NotEnoughReplicas => error_code::NOT_ENOUGH_REPLICAS,
        PartitionError::NotEnoughReplicasAfterAppend => {
            error_code::NOT_ENOUGH_REPLICAS_AFTER_APPEND
        }
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

/// `marker` for `tp`, sent to its leader at `host:port` as the coordinator on
/// broker `node_id`: the leader's error code, or None when it did not answer
/// within TXN_MARKER_REMOTE_WAIT_MS.
pub(super) async fn marker_to_leader(
    peers: &PeerConnector,
    node_id: i32,
    (host, port): (&str, u16),
    tp: &TopicPartition,
    marker: &TxnMarker,
) -> Option<io::Result<i16>> {
    let client_id = format!("sluice-txn-coordinator-{node_id}");
    let peer = broker_client::PeerTarget {
        connector: peers,
        host,
        port,
        client_id: &client_id,
    };
    let wait = Duration::from_millis(TXN_MARKER_REMOTE_WAIT_MS);
    tokio::time::timeout(wait, broker_client::write_txn_marker(peer, tp, marker))
        .await
        .ok()
}

impl TxnMarkerWriter for PartitionMarkerWriter {
    fn end_txn(&self, tp: &TopicPartition, marker: TxnMarker) -> MarkerFuture {
        let replicas = self.replicas();
        let tp = tp.clone();
        let peers = Arc::clone(&self.peers);
        Box::pin(async move {
            let replicas = replicas?;
            let leader = replicas
                .marker_leader(&tp)
                .map_err(|e| partition_error_code(&e))?;
            let Some((host, port)) = leader else {
                let partition =
                    off_the_worker(|| replicas.led(&tp)).map_err(|e| partition_error_code(&e))?;
                return replicas
                    .end_txn(&partition, &marker)
                    .await
                    .map_err(|e| partition_error_code(&e));
            };
            // The leader elsewhere skips a transaction it no longer holds open, so
            // a marker sent there is never doubled, and answers once its marker
            // is committed and fsynced there.
            let node_id = replicas.node_id();
            drop(replicas);
            match marker_to_leader(&peers, node_id, (&host, port), &tp, &marker).await {
                Some(Ok(error_code::NONE)) => Ok(()),
                Some(Ok(code)) => Err(code),
                Some(Err(error)) => {
                    tracing::warn!(partition = %tp, %host, port, %error, "WriteTxnMarkers to the leader failed; retrying");
                    Err(error_code::COORDINATOR_NOT_AVAILABLE)
                }
                None => Err(error_code::REQUEST_TIMED_OUT),
            }
        })
    }

    fn leads_all(&self, partitions: &[TopicPartition]) -> bool {
        // The offsets topic's partitions of a transaction get no marker here
        // (the group coordinator completes them), so they do not count.
        self.replicas().is_ok_and(|replicas| {
            partitions
                .iter()
                .filter(|tp| tp.topic != OFFSETS_TOPIC_NAME)
                .all(|tp| matches!(replicas.marker_leader(tp), Ok(None)))
        })
    }
}
