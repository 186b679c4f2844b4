//! The follower's wire to its leader: Kafka's Fetch, spoken over a connection
//! to the leader's inter-broker listener in its security protocol
//! (`peer_client`; a SASL session with a lifetime is renewed on the same
//! connection before it ends, as KIP-368 asks), as a Kafka replica fetcher
//! speaks it (Fetch v15: the replica id and broker epoch in ReplicaState, topics by
//! id, each partition's current leader epoch, fetch offset and last fetched epoch).
//! The replica module drives it through its `LeaderConnector` and never sees a
//! Kafka message.
//!
//! Invariants: one request at a time per link, answered by the response with its
//! correlation id; a response frame longer than `REPLICA_FETCH_FRAME_BYTES_MAX` or
//! one that does not decode ends the link (the fetcher reconnects).

use std::io;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::{BufMut, Bytes, BytesMut};
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic, ReplicaState};
use kafka_protocol::messages::{
    ApiKey, BrokerId, FetchRequest, FetchResponse, RequestHeader, ResponseHeader,
};
use kafka_protocol::protocol::{Decodable, Encodable, StrBytes};
use tokio::io::AsyncWriteExt;

use super::peer_client::{read_frame, PeerConnector, PeerStream};
use crate::limits::REPLICA_FETCH_FRAME_BYTES_MAX;
use crate::replica::{
    BoxFuture, EpochEndOffset, FetchedPartition, LeaderConnector, LeaderLink, ReplicaFetch,
};
use crate::types::{LeaderEpoch, Offset};

/// The Fetch version followers send: the first with ReplicaState (KIP-903).
pub const FOLLOWER_FETCH_VERSION: i16 = 15;

/// Opens links through the broker's `PeerConnector`.
pub struct TcpLeaderConnector {
    client_id: String,
    peers: Arc<PeerConnector>,
}

impl TcpLeaderConnector {
    pub fn new(node_id: i32, peers: Arc<PeerConnector>) -> TcpLeaderConnector {
        TcpLeaderConnector {
            client_id: format!("sluice-replica-fetcher-{node_id}"),
            peers,
        }
    }
}

/// When a session with `lifetime` is logged into again: at this share of
/// it, as Kafka's clients do between 85% and 95%. A lifetime past what an
/// Instant holds (the other broker's to choose) is never renewed.
fn renew_at(lifetime: Option<Duration>) -> Option<Instant> {
    lifetime
        .and_then(|lifetime| Instant::now().checked_add(lifetime.mul_f64(SASL_SESSION_RENEW_SHARE)))
}

/// The share of a SASL session's lifetime after which a follower logs in
/// again on its connection.
const SASL_SESSION_RENEW_SHARE: f64 = 0.85;

impl LeaderConnector for TcpLeaderConnector {
    fn connect(
        &self,
        host: String,
        port: u16,
    ) -> BoxFuture<'static, io::Result<Box<dyn LeaderLink>>> {
        let client_id = self.client_id.clone();
        let peers = Arc::clone(&self.peers);
        Box::pin(async move {
            let (stream, lifetime) = peers.connect(&host, port, &client_id).await?;
            let link: Box<dyn LeaderLink> = Box::new(TcpLeaderLink {
                stream,
                client_id: StrBytes::from_string(client_id),
                correlation_id: 0,
                peers,
                renew_at: renew_at(lifetime),
            });
            Ok(link)
        })
    }
}

struct TcpLeaderLink {
    stream: PeerStream,
    client_id: StrBytes,
    correlation_id: i32,
    peers: Arc<PeerConnector>,
    /// When the SASL session must be renewed, if it ends.
    renew_at: Option<Instant>,
}

impl LeaderLink for TcpLeaderLink {
    fn fetch<'a>(
        &'a mut self,
        request: &'a ReplicaFetch,
    ) -> BoxFuture<'a, io::Result<Vec<FetchedPartition>>> {
        Box::pin(async move {
            if self.renew_at.is_some_and(|at| Instant::now() >= at) {
                let lifetime = self
                    .peers
                    .authenticate(&mut self.stream, self.client_id.as_str())
                    .await?;
                self.renew_at = renew_at(lifetime);
            }
            self.correlation_id = self.correlation_id.wrapping_add(1);
            let frame = encode_fetch(request, &self.client_id, self.correlation_id)?;
            self.stream.write_all(&frame).await?;
            let body = read_frame(&mut self.stream, REPLICA_FETCH_FRAME_BYTES_MAX).await?;
            decode_fetch(body, self.correlation_id)
        })
    }
}

fn invalid(message: String) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, message)
}

/// A follower's fetch as a framed Kafka request.
pub fn encode_fetch(
    request: &ReplicaFetch,
    client_id: &StrBytes,
    correlation_id: i32,
) -> io::Result<Bytes> {
    let mut topics: Vec<FetchTopic> = Vec::new();
    for p in &request.partitions {
        let partition = FetchPartition::default()
            .with_partition(p.partition)
            .with_current_leader_epoch(p.current_leader_epoch.get())
            .with_fetch_offset(p.fetch_offset.get())
            .with_last_fetched_epoch(p.last_fetched_epoch.map_or(-1, LeaderEpoch::get))
            .with_log_start_offset(p.log_start_offset.get())
            .with_partition_max_bytes(p.max_bytes);
        match topics.iter_mut().find(|t| t.topic_id == p.topic_id) {
            Some(topic) => topic.partitions.push(partition),
            None => topics.push(
                FetchTopic::default()
                    .with_topic_id(p.topic_id)
                    .with_partitions(vec![partition]),
            ),
        }
    }
    let body = FetchRequest::default()
        .with_replica_state(
            ReplicaState::default()
                .with_replica_id(BrokerId(request.replica_id))
                .with_replica_epoch(request.broker_epoch.get()),
        )
        .with_max_wait_ms(request.max_wait_ms)
        .with_min_bytes(1)
        .with_max_bytes(request.max_bytes)
        .with_isolation_level(0)
        .with_session_id(0)
        .with_session_epoch(-1)
        .with_topics(topics);
    let header = RequestHeader::default()
        .with_request_api_key(ApiKey::Fetch as i16)
        .with_request_api_version(FOLLOWER_FETCH_VERSION)
        .with_correlation_id(correlation_id)
        .with_client_id(Some(client_id.clone()));
    let header_version = ApiKey::Fetch.request_header_version(FOLLOWER_FETCH_VERSION);
    let encode_error = |e: anyhow::Error| invalid(format!("encoding a fetch: {e}"));
    let size = header.compute_size(header_version).map_err(encode_error)?
        + body
            .compute_size(FOLLOWER_FETCH_VERSION)
            .map_err(encode_error)?;
    let mut buf = BytesMut::with_capacity(4 + size);
    buf.put_i32(i32::try_from(size).map_err(|e| invalid(e.to_string()))?);
    header
        .encode(&mut buf, header_version)
        .map_err(encode_error)?;
    body.encode(&mut buf, FOLLOWER_FETCH_VERSION)
        .map_err(encode_error)?;
    Ok(buf.freeze())
}

/// The leader's answer, partition by partition.
pub fn decode_fetch(mut frame: Bytes, correlation_id: i32) -> io::Result<Vec<FetchedPartition>> {
    let header_version = ApiKey::Fetch.response_header_version(FOLLOWER_FETCH_VERSION);
    let header = ResponseHeader::decode(&mut frame, header_version)
        .map_err(|e| invalid(format!("a fetch response header: {e}")))?;
    if header.correlation_id != correlation_id {
        return Err(invalid(format!(
            "a fetch response for request {} where {correlation_id} was sent",
            header.correlation_id
        )));
    }
    let response = FetchResponse::decode(&mut frame, FOLLOWER_FETCH_VERSION)
        .map_err(|e| invalid(format!("a fetch response: {e}")))?;
    if response.error_code != 0 {
        return Err(io::Error::other(format!(
            "the leader refused the fetch with error {}",
            response.error_code
        )));
    }
    let mut fetched = Vec::new();
    for topic in response.responses {
        for p in topic.partitions {
            let diverging = (p.diverging_epoch.epoch >= 0 && p.diverging_epoch.end_offset >= 0)
                .then_some(EpochEndOffset {
                    epoch: LeaderEpoch::new(p.diverging_epoch.epoch),
                    end_offset: Offset::new(p.diverging_epoch.end_offset),
                });
            fetched.push(FetchedPartition {
                topic_id: topic.topic_id,
                partition: p.partition_index,
                error_code: p.error_code,
                high_watermark: p.high_watermark,
                log_start_offset: p.log_start_offset,
                diverging_epoch: diverging,
                records: p.records.unwrap_or_default(),
            });
        }
    }
    Ok(fetched)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::replica::FetchPartitionRequest;
    use crate::types::BrokerEpoch;

    #[test]
    fn a_session_lifetime_past_what_an_instant_holds_is_never_renewed() {
        assert!(renew_at(None).is_none());
        assert!(renew_at(Some(Duration::from_secs(10))).is_some());
        // The largest lifetime the wire carries, and one past any Instant.
        let _ = renew_at(Some(Duration::from_millis(i64::MAX as u64)));
        assert!(renew_at(Some(Duration::MAX)).is_none());
    }

    #[test]
    fn a_follower_fetch_round_trips_through_the_codec() {
        let request = ReplicaFetch {
            replica_id: 2,
            broker_epoch: BrokerEpoch::new(41),
            max_wait_ms: 500,
            max_bytes: 1024,
            partitions: vec![FetchPartitionRequest {
                topic_id: uuid::Uuid::from_u128(7),
                partition: 3,
                current_leader_epoch: LeaderEpoch::new(5),
                fetch_offset: Offset::new(100),
                last_fetched_epoch: Some(LeaderEpoch::new(4)),
                log_start_offset: Offset::new(0),
                max_bytes: 512,
            }],
        };
        let mut frame = encode_fetch(&request, &StrBytes::from_static_str("f"), 9).expect("encode");
        let length = frame.split_to(4);
        assert_eq!(
            usize::try_from(i32::from_be_bytes(length[..].try_into().expect("4 bytes"))).ok(),
            Some(frame.len())
        );
        let (api_key, header) = crate::protocol::codec::decode_header(&mut frame).expect("header");
        assert_eq!(api_key, ApiKey::Fetch);
        assert_eq!(header.request_api_version, FOLLOWER_FETCH_VERSION);
        assert_eq!(header.correlation_id, 9);
        let decoded = FetchRequest::decode(&mut frame, FOLLOWER_FETCH_VERSION).expect("body");
        assert_eq!(decoded.replica_state.replica_id, BrokerId(2));
        assert_eq!(decoded.replica_state.replica_epoch, 41);
        let partition = &decoded.topics[0].partitions[0];
        assert_eq!(decoded.topics[0].topic_id, uuid::Uuid::from_u128(7));
        assert_eq!(
            (
                partition.partition,
                partition.current_leader_epoch,
                partition.fetch_offset,
                partition.last_fetched_epoch
            ),
            (3, 5, 100, 4)
        );
    }
}
