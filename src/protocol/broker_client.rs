//! Requests one broker sends another over the inter-broker listener, besides
//! a follower's Fetch (`replica_client`): the transaction coordinator's
//! WriteTxnMarkers to a partition's leader (Kafka's
//! TransactionMarkerChannelManager), and a leader's AddPartitionsToTxn
//! verify-only to the coordinator (KIP-890). One request per connection, answered or
//! failed within the caller's deadline; a frame longer than
//! `BROKER_RESPONSE_FRAME_BYTES_MAX` or one that does not decode is an error.

use std::io;

use kafka_protocol::messages::add_partitions_to_txn_request::{
    AddPartitionsToTxnTopic, AddPartitionsToTxnTransaction,
};
use kafka_protocol::messages::write_txn_markers_request::{
    WritableTxnMarker, WritableTxnMarkerTopic,
};
use kafka_protocol::messages::{
    AddPartitionsToTxnRequest, AddPartitionsToTxnResponse, ApiKey, ProducerId, TopicName,
    TransactionalId, WriteTxnMarkersRequest, WriteTxnMarkersResponse,
};
use kafka_protocol::protocol::{Decodable, Encodable, StrBytes};

use super::peer_client::{exchange, PeerConnector};
use crate::log::TxnMarker;
use crate::types::TopicPartition;

/// The WriteTxnMarkers version sent (the only one Kafka 4 answers).
pub const WRITE_TXN_MARKERS_VERSION: i16 = 1;

/// Asks the leader at `host:port` to write `marker` to `tp`; its answer's error
/// code for that partition.
pub async fn write_txn_marker(
    peer: PeerTarget<'_>,
    tp: &TopicPartition,
    marker: &TxnMarker,
) -> io::Result<i16> {
    let request =
        WriteTxnMarkersRequest::default().with_markers(vec![WritableTxnMarker::default()
            .with_producer_id(ProducerId(marker.producer_id))
            .with_producer_epoch(marker.producer_epoch.get())
            .with_transaction_result(marker.commit)
            .with_coordinator_epoch(marker.coordinator_epoch)
            .with_topics(vec![WritableTxnMarkerTopic::default()
                .with_name(TopicName(StrBytes::from_string(tp.topic.clone())))
                .with_partition_indexes(vec![tp.partition])])]);
    let response: WriteTxnMarkersResponse = call(
        peer,
        ApiKey::WriteTxnMarkers,
        WRITE_TXN_MARKERS_VERSION,
        &request,
    )
    .await?;
    response
        .markers
        .iter()
        .flat_map(|m| m.topics.iter())
        .filter(|t| t.name.as_str() == tp.topic)
        .flat_map(|t| t.partitions.iter())
        .find(|p| p.partition_index == tp.partition)
        .map(|p| p.error_code)
        .ok_or_else(|| invalid("a WriteTxnMarkers response without the partition".to_string()))
}

/// The AddPartitionsToTxn version a leader verifies with (KIP-890: the first
/// with `verify_only`, sent broker to broker).
pub const VERIFY_PARTITIONS_VERSION: i16 = 4;

/// Asks the transaction coordinator at `host:port` whether `partitions` are in
/// `transactional_id`'s ongoing transaction (KIP-890): one error code per
/// partition, in order (NONE when it is), or the request's own error.
pub async fn verify_txn_partitions(
    peer: PeerTarget<'_>,
    transactional_id: &str,
    producer_id: i64,
    producer_epoch: i16,
    partitions: &[TopicPartition],
) -> io::Result<Result<Vec<i16>, i16>> {
    let mut topics: Vec<AddPartitionsToTxnTopic> = Vec::new();
    for tp in partitions {
        match topics.iter_mut().find(|t| t.name.as_str() == tp.topic) {
            Some(topic) => topic.partitions.push(tp.partition),
            None => topics.push(
                AddPartitionsToTxnTopic::default()
                    .with_name(TopicName(StrBytes::from_string(tp.topic.clone())))
                    .with_partitions(vec![tp.partition]),
            ),
        }
    }
    let request = AddPartitionsToTxnRequest::default().with_transactions(vec![
        AddPartitionsToTxnTransaction::default()
            .with_transactional_id(TransactionalId(StrBytes::from_string(
                transactional_id.to_string(),
            )))
            .with_producer_id(ProducerId(producer_id))
            .with_producer_epoch(producer_epoch)
            .with_verify_only(true)
            .with_topics(topics),
    ]);
    let response: AddPartitionsToTxnResponse = call(
        peer,
        ApiKey::AddPartitionsToTxn,
        VERIFY_PARTITIONS_VERSION,
        &request,
    )
    .await?;
    if response.error_code != 0 {
        return Ok(Err(response.error_code));
    }
    let codes = partitions
        .iter()
        .map(|tp| {
            response
                .results_by_transaction
                .iter()
                .flat_map(|r| r.topic_results.iter())
                .filter(|t| t.name.as_str() == tp.topic)
                .flat_map(|t| t.results_by_partition.iter())
                .find(|p| p.partition_index == tp.partition)
                .map_or(crate::error_code::INVALID_TXN_STATE, |p| {
                    p.partition_error_code
                })
        })
        .collect();
    Ok(Ok(codes))
}

/// The broker a request goes to, and how this one reaches it.
#[derive(Clone, Copy)]
pub struct PeerTarget<'a> {
    pub connector: &'a PeerConnector,
    pub host: &'a str,
    pub port: u16,
    pub client_id: &'a str,
}

/// One request over a new connection to `peer`, and its response.
async fn call<Req: Encodable, Resp: Decodable>(
    peer: PeerTarget<'_>,
    api_key: ApiKey,
    version: i16,
    request: &Req,
) -> io::Result<Resp> {
    let (mut stream, _) = peer
        .connector
        .connect(peer.host, peer.port, peer.client_id)
        .await?;
    exchange(&mut stream, peer.client_id, api_key, version, request).await
}

fn invalid(message: String) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, message)
}
