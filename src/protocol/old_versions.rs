//! The request versions Kafka 4.0 removed (KIP-896) and Kafka 3.9 still served,
//! for applications that still send them (sarama with its long-time default
//! `Version`, Java and Python clients from before 2019, older tools).
//!
//! The current codec (Kafka 4.1's schemas) no longer has these versions, so they
//! are read with the same crate at Kafka 3.9's schemas (`kafka_protocol_old`),
//! re-encoded at the oldest version the current codec has (the *bridge* version,
//! whose fields are a superset of the old one's) and decoded again with the
//! current codec. The handler serves the request at the bridge version and its
//! response takes the reverse path, back to the version on the wire. So old and
//! new versions share one dispatch table, one `match` and one handler per API,
//! and no bytes are shuffled by hand.
//!
//! What the bridge version lacks travels beside the request in `OldRequest`
//! (OffsetCommit v1's commit timestamps, ListOffsets v0's maximum number of
//! offsets), and what the old response has that the new one lacks is filled in
//! on the way back (ListOffsets v0's `old_style_offsets`, DescribeConfigs v0's
//! `is_default`).
//!
//! Invariant: a version is served here only when the handler's `VERSIONS`
//! includes it and the current codec does not; every such API has an arm in
//! both `decode` and `encode_response` (tested beside the table in `dispatch`).

use std::collections::HashMap;

use bytes::{Bytes, BytesMut};
use kafka_protocol::messages::{
    ApiKey, CreateAclsRequest, CreateTopicsRequest, DeleteAclsRequest, DeleteTopicsRequest,
    DescribeAclsRequest, DescribeConfigsRequest, ListOffsetsRequest, OffsetCommitRequest,
    OffsetFetchRequest, OffsetForLeaderEpochRequest, RequestKind,
};
use kafka_protocol::protocol::{Decodable, Encodable};
use kafka_protocol_old::messages as old;
use kafka_protocol_old::protocol::{Decodable as OldDecodable, Encodable as OldEncodable};

use super::codec::{self, FrameError};

/// `DescribeConfigs` config source DEFAULT_CONFIG, which v0 reports as `is_default`.
const CONFIG_SOURCE_DEFAULT: i8 = 5;
/// Kafka's "no commit timestamp given" (OffsetCommitRequest.DEFAULT_TIMESTAMP).
const COMMIT_TIMESTAMP_DEFAULT: i64 = -1;
/// ListOffsets v0's default `max_num_offsets`, reset before re-encoding.
const MAX_NUM_OFFSETS_DEFAULT: i32 = 1;
/// ListOffsets "unknown offset" and "no timestamp", which v0 does not carry.
const UNKNOWN_OFFSET: i64 = -1;
const NO_TIMESTAMP: i64 = -1;
const NO_LEADER_EPOCH: i32 = -1;
/// OffsetForLeaderEpoch answers with the leader epoch from v1.
const OFFSET_FOR_LEADER_EPOCH_EPOCH_VERSION_MIN: i16 = 1;
/// DescribeConfigs "config source unknown": the value v0 must leave unset.
const CONFIG_SOURCE_UNSET: i8 = -1;

/// A request that arrived at a version the current codec lacks: the version on
/// the wire, and the fields of that version the bridge version has no room for.
#[derive(Debug, Clone)]
pub struct OldRequest {
    /// The version the client sent, and the one the response is encoded at.
    pub wire_version: i16,
    /// Per (topic, partition): OffsetCommit v1's explicit commit timestamps.
    commit_timestamps_ms: HashMap<(String, i32), i64>,
    /// Per (topic, partition): ListOffsets v0's `max_num_offsets`.
    max_num_offsets: HashMap<(String, i32), i32>,
}

impl OldRequest {
    fn new(wire_version: i16) -> Self {
        OldRequest {
            wire_version,
            commit_timestamps_ms: HashMap::new(),
            max_num_offsets: HashMap::new(),
        }
    }

    /// OffsetCommit v1: the commit timestamp the client gave for a partition,
    /// which Kafka 3.9 stored in place of the broker's clock.
    pub fn commit_timestamp_ms(&self, topic: &str, partition: i32) -> Option<i64> {
        self.commit_timestamps_ms
            .get(&(topic.to_string(), partition))
            .copied()
    }
}

/// Whether `version` of `api_key` is one the current codec lacks and this
/// module serves.
pub fn is_old(api_key: ApiKey, version: i16) -> bool {
    version >= 0 && version < api_key.valid_versions().min && bridged(api_key)
}

/// The APIs with an arm below.
fn bridged(api_key: ApiKey) -> bool {
    matches!(
        api_key,
        ApiKey::ListOffsets
            | ApiKey::OffsetCommit
            | ApiKey::OffsetFetch
            | ApiKey::CreateTopics
            | ApiKey::DeleteTopics
            | ApiKey::OffsetForLeaderEpoch
            | ApiKey::DescribeConfigs
            | ApiKey::CreateAcls
            | ApiKey::DescribeAcls
            | ApiKey::DeleteAcls
    )
}

/// The version the handler serves an old request at.
pub fn bridge_version(api_key: ApiKey) -> i16 {
    api_key.valid_versions().min
}

/// Decodes the body of an old request and bridges it to the current codec.
pub fn decode(
    api_key: ApiKey,
    version: i16,
    body: &mut Bytes,
) -> Result<(RequestKind, OldRequest), FrameError> {
    let at = bridge_version(api_key);
    let mut facts = OldRequest::new(version);
    let kind = match api_key {
        ApiKey::ListOffsets => {
            let mut request: old::ListOffsetsRequest = decode_old(body, version)?;
            for topic in &mut request.topics {
                for p in &mut topic.partitions {
                    facts.max_num_offsets.insert(
                        (topic.name.to_string(), p.partition_index),
                        p.max_num_offsets,
                    );
                    p.max_num_offsets = MAX_NUM_OFFSETS_DEFAULT;
                }
            }
            RequestKind::ListOffsets(bridge::<_, ListOffsetsRequest>(&request, at)?)
        }
        ApiKey::OffsetCommit => {
            let mut request: old::OffsetCommitRequest = decode_old(body, version)?;
            for topic in &mut request.topics {
                for p in &mut topic.partitions {
                    if p.commit_timestamp != COMMIT_TIMESTAMP_DEFAULT {
                        facts.commit_timestamps_ms.insert(
                            (topic.name.to_string(), p.partition_index),
                            p.commit_timestamp,
                        );
                    }
                    p.commit_timestamp = COMMIT_TIMESTAMP_DEFAULT;
                }
            }
            RequestKind::OffsetCommit(bridge::<_, OffsetCommitRequest>(&request, at)?)
        }
        ApiKey::OffsetFetch => {
            let request: old::OffsetFetchRequest = decode_old(body, version)?;
            RequestKind::OffsetFetch(bridge::<_, OffsetFetchRequest>(&request, at)?)
        }
        ApiKey::CreateTopics => {
            let request: old::CreateTopicsRequest = decode_old(body, version)?;
            RequestKind::CreateTopics(bridge::<_, CreateTopicsRequest>(&request, at)?)
        }
        ApiKey::DeleteTopics => {
            let request: old::DeleteTopicsRequest = decode_old(body, version)?;
            RequestKind::DeleteTopics(bridge::<_, DeleteTopicsRequest>(&request, at)?)
        }
        ApiKey::OffsetForLeaderEpoch => {
            let request: old::OffsetForLeaderEpochRequest = decode_old(body, version)?;
            RequestKind::OffsetForLeaderEpoch(bridge::<_, OffsetForLeaderEpochRequest>(
                &request, at,
            )?)
        }
        ApiKey::DescribeConfigs => {
            let request: old::DescribeConfigsRequest = decode_old(body, version)?;
            RequestKind::DescribeConfigs(bridge::<_, DescribeConfigsRequest>(&request, at)?)
        }
        // v0 has no pattern type: its bindings and filters are LITERAL, the
        // default the bridge version reads them with.
        ApiKey::CreateAcls => {
            let request: old::CreateAclsRequest = decode_old(body, version)?;
            RequestKind::CreateAcls(bridge::<_, CreateAclsRequest>(&request, at)?)
        }
        ApiKey::DescribeAcls => {
            let request: old::DescribeAclsRequest = decode_old(body, version)?;
            RequestKind::DescribeAcls(bridge::<_, DescribeAclsRequest>(&request, at)?)
        }
        ApiKey::DeleteAcls => {
            let request: old::DeleteAclsRequest = decode_old(body, version)?;
            RequestKind::DeleteAcls(bridge::<_, DeleteAclsRequest>(&request, at)?)
        }
        _ => return Err(FrameError::UnsupportedVersion { api_key, version }),
    };
    Ok((kind, facts))
}

/// Encodes the handler's response (built at the bridge version) at the
/// version on the wire, with its header, ready for the socket.
pub fn encode_response<R: Encodable>(
    api_key: ApiKey,
    correlation_id: i32,
    request: &OldRequest,
    response: &R,
) -> Result<Bytes, FrameError> {
    let at = bridge_version(api_key);
    let version = request.wire_version;
    let body = match api_key {
        ApiKey::ListOffsets => {
            let mut response: old::ListOffsetsResponse = unbridge(response, at)?;
            for topic in &mut response.topics {
                for p in &mut topic.partitions {
                    let max = request
                        .max_num_offsets
                        .get(&(topic.name.to_string(), p.partition_index))
                        .copied()
                        .unwrap_or(MAX_NUM_OFFSETS_DEFAULT);
                    // Kafka 3.9 answered v0 with a list of offsets; the one
                    // offset the lookup found is its first entry.
                    if p.error_code == 0 && p.offset != UNKNOWN_OFFSET && max > 0 {
                        p.old_style_offsets = vec![p.offset];
                    }
                    p.offset = UNKNOWN_OFFSET;
                    p.timestamp = NO_TIMESTAMP;
                    p.leader_epoch = NO_LEADER_EPOCH;
                }
            }
            encode_old(&response, version)?
        }
        ApiKey::OffsetCommit => encode_old(
            &unbridge::<_, old::OffsetCommitResponse>(response, at)?,
            version,
        )?,
        ApiKey::OffsetFetch => encode_old(
            &unbridge::<_, old::OffsetFetchResponse>(response, at)?,
            version,
        )?,
        ApiKey::CreateTopics => encode_old(
            &unbridge::<_, old::CreateTopicsResponse>(response, at)?,
            version,
        )?,
        ApiKey::DeleteTopics => encode_old(
            &unbridge::<_, old::DeleteTopicsResponse>(response, at)?,
            version,
        )?,
        ApiKey::OffsetForLeaderEpoch => {
            let mut response: old::OffsetForLeaderEpochResponse = unbridge(response, at)?;
            if version < OFFSET_FOR_LEADER_EPOCH_EPOCH_VERSION_MIN {
                for topic in &mut response.topics {
                    for p in &mut topic.partitions {
                        p.leader_epoch = NO_LEADER_EPOCH;
                    }
                }
            }
            encode_old(&response, version)?
        }
        ApiKey::DescribeConfigs => {
            let mut response: old::DescribeConfigsResponse = unbridge(response, at)?;
            for result in &mut response.results {
                for config in &mut result.configs {
                    config.is_default = config.config_source == CONFIG_SOURCE_DEFAULT;
                    config.config_source = CONFIG_SOURCE_UNSET;
                    config.synonyms.clear();
                }
            }
            encode_old(&response, version)?
        }
        ApiKey::CreateAcls => encode_old(
            &unbridge::<_, old::CreateAclsResponse>(response, at)?,
            version,
        )?,
        ApiKey::DescribeAcls => encode_old(
            &unbridge::<_, old::DescribeAclsResponse>(response, at)?,
            version,
        )?,
        ApiKey::DeleteAcls => encode_old(
            &unbridge::<_, old::DeleteAclsResponse>(response, at)?,
            version,
        )?,
        _ => {
            return Err(FrameError::UnsupportedVersion { api_key, version });
        }
    };
    codec::frame_encoded_body(
        api_key.response_header_version(version),
        correlation_id,
        &body,
    )
}

fn decode_old<T: OldDecodable>(body: &mut Bytes, version: i16) -> Result<T, FrameError> {
    T::decode(body, version).map_err(|e| FrameError::Malformed(e.to_string()))
}

fn encode_old<T: OldEncodable>(message: &T, version: i16) -> Result<Bytes, FrameError> {
    let mut buf = BytesMut::new();
    message
        .encode(&mut buf, version)
        .map_err(|e| FrameError::Malformed(format!("encoding at v{version}: {e}")))?;
    Ok(buf.freeze())
}

/// An old request, as the current codec reads it at the bridge version.
fn bridge<O: OldEncodable, N: Decodable>(request: &O, at: i16) -> Result<N, FrameError> {
    let mut bytes = encode_old(request, at)?;
    N::decode(&mut bytes, at).map_err(|e| FrameError::Malformed(e.to_string()))
}

/// A current response, as the old codec reads it at the bridge version.
fn unbridge<N: Encodable, O: OldDecodable>(response: &N, at: i16) -> Result<O, FrameError> {
    let mut buf = BytesMut::new();
    response
        .encode(&mut buf, at)
        .map_err(|e| FrameError::Malformed(format!("encoding at v{at}: {e}")))?;
    decode_old(&mut buf.freeze(), at)
}
