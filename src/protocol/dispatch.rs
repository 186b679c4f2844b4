//! The one place a request meets its handler: the version table (which is also
//! what ApiVersions advertises) and the `match` over `ApiKey`.
//!
//! Kafka's rules, kept here: an API key we do not know or implement, and an API at
//! a version outside our range, end the connection; the one exception is
//! ApiVersions, which at a too-new version is answered in v0 with
//! UNSUPPORTED_VERSION (KIP-511) so the client can retry with a version we know.

use std::net::SocketAddr;
use std::sync::Arc;

use bytes::Bytes;
use kafka_protocol::messages::*;
use kafka_protocol::protocol::{Encodable, VersionRange};

use super::codec::{self, FrameError};
use super::handlers;
use super::{ListenerInfo, RequestContext};
use crate::server::{BrokerState, Pending};

/// What the connection does with a request once dispatched.
pub enum Outcome {
    Respond(Pending),
    /// Produce with acks=0 that succeeded: Kafka sends nothing back.
    NoResponse,
    /// End the connection (malformed frame, unsupported API or version, or an
    /// acks=0 produce that failed, which is how Kafka tells such a client).
    Close(String),
}

/// The connection facts dispatch needs to build a `RequestContext`.
pub struct Connection {
    pub listener: Arc<ListenerInfo>,
    pub peer_addr: SocketAddr,
    pub local_addr: SocketAddr,
}

/// Every API this broker implements, with the versions it implements. The
/// ApiVersions response is built from this table and nothing else.
pub const SUPPORTED_APIS: &[(ApiKey, VersionRange)] = &[
    (ApiKey::Produce, handlers::produce::VERSIONS),
    (ApiKey::Fetch, handlers::fetch::VERSIONS),
    (ApiKey::ListOffsets, handlers::list_offsets::VERSIONS),
    (ApiKey::Metadata, handlers::metadata::VERSIONS),
    (ApiKey::ApiVersions, handlers::api_versions::VERSIONS),
    (ApiKey::CreateTopics, handlers::create_topics::VERSIONS),
    (ApiKey::DeleteTopics, handlers::delete_topics::VERSIONS),
    (ApiKey::DeleteRecords, handlers::delete_records::VERSIONS),
    (ApiKey::OffsetForLeaderEpoch, handlers::offset_for_leader_epoch::VERSIONS),
    (ApiKey::DescribeConfigs, handlers::describe_configs::VERSIONS),
    (ApiKey::AlterConfigs, handlers::alter_configs::VERSIONS),
    (ApiKey::CreatePartitions, handlers::create_partitions::VERSIONS),
    (ApiKey::IncrementalAlterConfigs, handlers::incremental_alter_configs::VERSIONS),
    (ApiKey::DescribeCluster, handlers::describe_cluster::VERSIONS),
];

/// The versions of `api_key` we implement, if any.
pub fn supported_versions(api_key: ApiKey) -> Option<VersionRange> {
    SUPPORTED_APIS
        .iter()
        .find(|(key, _)| *key == api_key)
        .map(|(_, versions)| *versions)
}

fn respond<R: Encodable>(ctx: &RequestContext, response: &R) -> Outcome {
    match codec::encode_response(ctx.api_key, ctx.api_version, ctx.correlation_id, response) {
        Ok(bytes) => Outcome::Respond(Pending::Ready(bytes)),
        Err(error) => Outcome::Close(error.to_string()),
    }
}

/// Decodes the frame, runs the handler and returns what to send back.
pub async fn dispatch(state: &Arc<BrokerState>, connection: &Connection, mut frame: Bytes) -> Outcome {
    let (api_key, header) = match codec::decode_header(&mut frame) {
        Ok(decoded) => decoded,
        Err(error) => return Outcome::Close(error.to_string()),
    };
    let version = header.request_api_version;
    let ctx = RequestContext {
        api_key,
        api_version: version,
        correlation_id: header.correlation_id,
        client_id: header.client_id.as_ref().map(|id| id.to_string()),
        listener: Arc::clone(&connection.listener),
        peer_addr: connection.peer_addr,
        local_addr: connection.local_addr,
    };
    let Some(range) = supported_versions(api_key) else {
        return Outcome::Close(format!("{api_key:?} is not implemented"));
    };
    if version < range.min || version > range.max {
        if api_key == ApiKey::ApiVersions {
            return match handlers::api_versions::unsupported_version(ctx.correlation_id) {
                Ok(bytes) => Outcome::Respond(Pending::Ready(bytes)),
                Err(error) => Outcome::Close(error.to_string()),
            };
        }
        return Outcome::Close(FrameError::UnsupportedVersion { api_key, version }.to_string());
    }

    macro_rules! handle {
        ($request:ty, $handler:ident) => {{
            let request: $request = match codec::decode_body(&mut frame, version) {
                Ok(request) => request,
                Err(error) => return Outcome::Close(error.to_string()),
            };
            let response = handlers::$handler::handle(state, &ctx, request).await;
            respond(&ctx, &response)
        }};
    }

    match api_key {
        ApiKey::ApiVersions => match codec::decode_body::<ApiVersionsRequest>(&mut frame, version) {
            Ok(request) => respond(&ctx, &handlers::api_versions::handle(&request, version)),
            Err(_) => respond(&ctx, &handlers::api_versions::invalid_request()),
        },
        ApiKey::Produce => {
            let request: ProduceRequest = match codec::decode_body(&mut frame, version) {
                Ok(request) => request,
                Err(error) => return Outcome::Close(error.to_string()),
            };
            handlers::produce::handle(state, &ctx, request).await
        }
        ApiKey::Fetch => handle!(FetchRequest, fetch),
        ApiKey::ListOffsets => handle!(ListOffsetsRequest, list_offsets),
        ApiKey::Metadata => handle!(MetadataRequest, metadata),
        ApiKey::CreateTopics => handle!(CreateTopicsRequest, create_topics),
        ApiKey::DeleteTopics => handle!(DeleteTopicsRequest, delete_topics),
        ApiKey::DeleteRecords => handle!(DeleteRecordsRequest, delete_records),
        ApiKey::OffsetForLeaderEpoch => handle!(OffsetForLeaderEpochRequest, offset_for_leader_epoch),
        ApiKey::DescribeConfigs => handle!(DescribeConfigsRequest, describe_configs),
        ApiKey::AlterConfigs => handle!(AlterConfigsRequest, alter_configs),
        ApiKey::CreatePartitions => handle!(CreatePartitionsRequest, create_partitions),
        ApiKey::IncrementalAlterConfigs => handle!(IncrementalAlterConfigsRequest, incremental_alter_configs),
        ApiKey::DescribeCluster => handle!(DescribeClusterRequest, describe_cluster),
        other => Outcome::Close(format!("{other:?} is in the version table but has no handler")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_advertised_range_is_within_what_the_codec_offers() {
        for (api_key, range) in SUPPORTED_APIS {
            let codec = api_key.valid_versions();
            assert!(range.min >= codec.min && range.max <= codec.max, "{api_key:?}");
            assert!(range.min <= range.max, "{api_key:?}");
        }
    }

    #[test]
    fn no_api_is_listed_twice() {
        for (index, (api_key, _)) in SUPPORTED_APIS.iter().enumerate() {
            assert!(SUPPORTED_APIS[index + 1..].iter().all(|(other, _)| other != api_key));
        }
    }
}
