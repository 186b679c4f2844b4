//! The one place a request meets its handler: the version table (which is also
//! what ApiVersions advertises) and the `match` over `ApiKey`.
//!
//! Kafka's rules, kept here: an API key we do not know or implement, and an API at
//! a version outside our range, end the connection; the one exception is
//! ApiVersions, which at a too-new version is answered in v0 with
//! UNSUPPORTED_VERSION (KIP-511) so the client can retry with a version we know.

use std::sync::Arc;

use bytes::Bytes;
use kafka_protocol::messages::*;
use kafka_protocol::protocol::{Encodable, VersionRange};

use super::authz::Access;
use super::codec::{self, FrameError};
use super::context::BrokerState;
use super::handlers;
use super::old_versions::{self, OldRequest};
use super::response_errors::ResponseErrors;
use super::{Connection, Outcome, Pending, RequestContext};
use crate::security::sasl::SaslConnection;
use kafka_protocol::messages::{RequestHeader, RequestKind};

/// The table's rows from `ApiKey => handler module` pairs: each row's versions
/// are the handler's own `VERSIONS`, so the two cannot disagree.
macro_rules! served {
    ($($api_key:ident => $handler:ident,)+) => {
        &[$((ApiKey::$api_key, handlers::$handler::VERSIONS)),+]
    };
}

/// Every API this broker implements, with the versions it implements. The
/// ApiVersions response is built from this table and nothing else.
pub const SUPPORTED_APIS: &[(ApiKey, VersionRange)] = served![
    Produce => produce,
    Fetch => fetch,
    ListOffsets => list_offsets,
    Metadata => metadata,
    OffsetCommit => offset_commit,
    OffsetFetch => offset_fetch,
    FindCoordinator => find_coordinator,
    JoinGroup => join_group,
    Heartbeat => heartbeat,
    LeaveGroup => leave_group,
    SyncGroup => sync_group,
    DescribeGroups => describe_groups,
    ListGroups => list_groups,
    ApiVersions => api_versions,
    CreateTopics => create_topics,
    DeleteTopics => delete_topics,
    DeleteRecords => delete_records,
    InitProducerId => init_producer_id,
    OffsetForLeaderEpoch => offset_for_leader_epoch,
    AddPartitionsToTxn => add_partitions_to_txn,
    AddOffsetsToTxn => add_offsets_to_txn,
    EndTxn => end_txn,
    WriteTxnMarkers => write_txn_markers,
    TxnOffsetCommit => txn_offset_commit,
    DescribeConfigs => describe_configs,
    AlterConfigs => alter_configs,
    CreatePartitions => create_partitions,
    DeleteGroups => delete_groups,
    ElectLeaders => elect_leaders,
    IncrementalAlterConfigs => incremental_alter_configs,
    AlterPartitionReassignments => alter_partition_reassignments,
    ListPartitionReassignments => list_partition_reassignments,
    OffsetDelete => offset_delete,
    UpdateFeatures => update_features,
    DescribeCluster => describe_cluster,
    DescribeProducers => describe_producers,
    DescribeTransactions => describe_transactions,
    ListTransactions => list_transactions,
    SaslHandshake => sasl_handshake,
    CreateAcls => create_acls,
    DescribeAcls => describe_acls,
    DeleteAcls => delete_acls,
    SaslAuthenticate => sasl_authenticate,
    DescribeUserScramCredentials => describe_user_scram_credentials,
    AlterUserScramCredentials => alter_user_scram_credentials,
];

/// The versions of `api_key` we implement, if any.
pub fn supported_versions(api_key: ApiKey) -> Option<VersionRange> {
    SUPPORTED_APIS
        .iter()
        .find(|(key, _)| *key == api_key)
        .map(|(_, versions)| *versions)
}

fn respond<R: Encodable>(ctx: &RequestContext, response: &R) -> Outcome {
    let encoded = match &ctx.old {
        Some(old) => old_versions::encode_response(ctx.api_key, ctx.correlation_id, old, response),
        None => codec::encode_response(ctx.api_key, ctx.api_version, ctx.correlation_id, response),
    };
    match encoded {
        Ok(bytes) => Outcome::Respond(Pending::Ready(bytes)),
        Err(error) => Outcome::Close(error.to_string()),
    }
}

/// The response, counted in the request-error metrics, then encoded.
fn answered<R: Encodable + ResponseErrors>(
    state: &BrokerState,
    ctx: &RequestContext,
    response: &R,
) -> Outcome {
    state
        .metrics()
        .request_errors(ctx.api_key as i16, response.error_count());
    respond(ctx, response)
}

/// `outcome`, followed by the end of the connection when `close`.
fn closing(outcome: Outcome, close: bool, reason: &str) -> Outcome {
    match outcome {
        Outcome::Respond(pending) if close => Outcome::RespondAndClose(pending, reason.to_string()),
        other => other,
    }
}

/// A frame, decoded as far as dispatch needs it.
pub enum Decoded {
    /// A request at a version we implement.
    Request {
        header: RequestHeader,
        api_key: ApiKey,
        /// Boxed: request kinds differ widely in size.
        body: Box<RequestKind>,
        /// Set for a version the current codec lacks: the body was read by
        /// `old_versions` and bridged to the version the handler serves.
        old: Option<Arc<OldRequest>>,
    },
    /// ApiVersions at a version newer than ours (answered per KIP-511).
    ApiVersionsTooNew { correlation_id: i32 },
    /// ApiVersions at a version we know whose body does not parse.
    ApiVersionsInvalid { header: RequestHeader },
}

/// Decodes a frame: header, version check against the table, body. This is the
/// whole decode path of every request (the fuzz target drives exactly this).
pub fn decode_request(frame: &mut Bytes) -> Result<Decoded, FrameError> {
    let (api_key, header) = codec::decode_header(frame)?;
    let version = header.request_api_version;
    let range = supported_versions(api_key).ok_or(FrameError::UnknownApiKey(api_key as i16))?;
    if version < range.min || version > range.max {
        if api_key == ApiKey::ApiVersions && version > range.max {
            return Ok(Decoded::ApiVersionsTooNew {
                correlation_id: header.correlation_id,
            });
        }
        return Err(FrameError::UnsupportedVersion { api_key, version });
    }
    if old_versions::is_old(api_key, version) {
        let (body, old) = old_versions::decode(api_key, version, frame)?;
        return Ok(Decoded::Request {
            header,
            api_key,
            body: Box::new(body),
            old: Some(Arc::new(old)),
        });
    }
    match RequestKind::decode(api_key, frame, version) {
        Ok(body) => Ok(Decoded::Request {
            header,
            api_key,
            body: Box::new(body),
            old: None,
        }),
        Err(_) if api_key == ApiKey::ApiVersions => Ok(Decoded::ApiVersionsInvalid { header }),
        Err(error) => Err(FrameError::Malformed(error.to_string())),
    }
}

/// A client sent an API or version we do not serve, and its connection is
/// closed: said at info level, once (the connection ends here), with what a user
/// needs to see why their client was turned away.
fn log_turned_away(connection: &Connection, frame: &Bytes, error: &FrameError) {
    let (api_key, api_version) = codec::peek_api(frame).unwrap_or((-1, -1));
    let client_id = codec::peek_client_id(frame).unwrap_or_default();
    tracing::info!(
        peer = %connection.peer_addr,
        client_id,
        api_key,
        api_version,
        "closing the connection: {error} (the versions served are in ApiVersions)"
    );
}

fn context(
    state: &BrokerState,
    connection: &Connection,
    api_key: ApiKey,
    header: &RequestHeader,
    old: Option<Arc<OldRequest>>,
) -> RequestContext {
    let cluster = state.cluster();
    let access = Access::new(
        Arc::clone(cluster.authorizer()),
        || Arc::clone(&cluster.image().acls),
        Arc::clone(&connection.principal),
        connection.peer_addr.ip(),
    );
    let api_version = match old {
        Some(_) => old_versions::bridge_version(api_key),
        None => header.request_api_version,
    };
    RequestContext {
        api_key,
        api_version,
        old,
        correlation_id: header.correlation_id,
        client_id: header.client_id.as_ref().map(|id| id.to_string()),
        listener: Arc::clone(&connection.listener),
        peer_addr: connection.peer_addr,
        local_addr: connection.local_addr,
        principal: Arc::clone(&connection.principal),
        access,
    }
}

/// Decodes the frame, runs the handler and returns what to send back.
pub async fn dispatch(
    state: &Arc<BrokerState>,
    connection: &mut Connection,
    mut frame: Bytes,
) -> Outcome {
    // After SaslHandshake v0 a frame is a raw SASL token, not a request.
    if connection
        .sasl
        .as_ref()
        .is_some_and(SaslConnection::expects_raw_token)
    {
        return handlers::sasl_authenticate::raw(state.cluster(), connection, frame).await;
    }
    let whole = frame.clone();
    let (header, api_key, body, old) = match decode_request(&mut frame) {
        Ok(Decoded::Request {
            header,
            api_key,
            body,
            old,
        }) => (header, api_key, body, old),
        Ok(Decoded::ApiVersionsTooNew { correlation_id }) => {
            return match handlers::api_versions::unsupported_version(correlation_id) {
                Ok(bytes) => Outcome::Respond(Pending::Ready(bytes)),
                Err(error) => Outcome::Close(error.to_string()),
            };
        }
        Ok(Decoded::ApiVersionsInvalid { header }) => {
            let ctx = context(state, connection, ApiKey::ApiVersions, &header, None);
            return respond(&ctx, &handlers::api_versions::invalid_request());
        }
        Err(error) => {
            if let FrameError::UnknownApiKey(_) | FrameError::UnsupportedVersion { .. } = error {
                log_turned_away(connection, &whole, &error);
            }
            return Outcome::Close(error.to_string());
        }
    };
    // A SASL listener serves only the handshake before authentication, and
    // nothing once a session expired.
    if let Some(sasl) = &connection.sasl {
        if let Err(reason) = sasl.admits(api_key as i16, std::time::Instant::now()) {
            return Outcome::Close(reason);
        }
    }
    let ctx = context(state, connection, api_key, &header, old);

    // Each handler is handed only the context it declares.
    let partitions = state.partitions();
    let coordinators = state.coordinators();
    let cluster = state.cluster();

    // The handlers that answer more than a response, or from more than one
    // context, first; every other request goes by the routing table below.
    let body = match *body {
        RequestKind::ApiVersions(request) => {
            let image = cluster.image();
            let response =
                handlers::api_versions::handle(SUPPORTED_APIS, &image, &request, ctx.api_version);
            return respond(&ctx, &response);
        }
        RequestKind::Produce(request) => {
            let metrics = state.metrics();
            return handlers::produce::handle(partitions, coordinators, metrics, &ctx, request)
                .await;
        }
        RequestKind::WriteTxnMarkers(request) => {
            let response =
                handlers::write_txn_markers::handle(partitions, coordinators, &ctx, request).await;
            return answered(state, &ctx, &response);
        }
        RequestKind::TxnOffsetCommit(request) => {
            let response =
                handlers::txn_offset_commit::handle(partitions, coordinators, &ctx, request).await;
            return answered(state, &ctx, &response);
        }
        RequestKind::FindCoordinator(request) => {
            let response =
                handlers::find_coordinator::handle(coordinators, cluster, &ctx, request).await;
            return answered(state, &ctx, &response);
        }
        RequestKind::SaslHandshake(request) => {
            let (response, close) =
                handlers::sasl_handshake::handle(connection.sasl.as_mut(), &ctx, &request);
            let reason = "unsupported SASL mechanism";
            return closing(answered(state, &ctx, &response), close, reason);
        }
        RequestKind::SaslAuthenticate(request) => {
            let (response, close) =
                handlers::sasl_authenticate::handle(cluster, connection, request).await;
            let reason = "SASL authentication failed";
            return closing(answered(state, &ctx, &response), close, reason);
        }
        other => other,
    };

    /// One arm per `RequestKind => handler(context)`: the handler's response
    /// is counted in the metrics and encoded.
    macro_rules! route {
        ($body:expr; $($kind:ident => $handler:ident($context:expr),)+) => {
            match $body {
                $(RequestKind::$kind(request) => {
                    let response = handlers::$handler::handle($context, &ctx, request).await;
                    answered(state, &ctx, &response)
                })+
                _ => Outcome::Close(format!(
                    "{api_key:?} is in the version table but has no handler"
                )),
            }
        };
    }
    route! {
        body;
        Fetch => fetch(partitions),
        ListOffsets => list_offsets(partitions),
        Metadata => metadata(cluster),
        CreateTopics => create_topics(cluster),
        DeleteTopics => delete_topics(cluster),
        ElectLeaders => elect_leaders(cluster),
        AlterPartitionReassignments => alter_partition_reassignments(cluster),
        ListPartitionReassignments => list_partition_reassignments(cluster),
        DeleteRecords => delete_records(partitions),
        OffsetForLeaderEpoch => offset_for_leader_epoch(partitions),
        DescribeConfigs => describe_configs(cluster),
        AlterConfigs => alter_configs(cluster),
        CreatePartitions => create_partitions(cluster),
        IncrementalAlterConfigs => incremental_alter_configs(cluster),
        DescribeCluster => describe_cluster(cluster),
        UpdateFeatures => update_features(cluster),
        DescribeProducers => describe_producers(partitions),
        JoinGroup => join_group(coordinators),
        SyncGroup => sync_group(coordinators),
        Heartbeat => heartbeat(coordinators),
        LeaveGroup => leave_group(coordinators),
        DescribeGroups => describe_groups(coordinators),
        ListGroups => list_groups(coordinators),
        DeleteGroups => delete_groups(coordinators),
        OffsetCommit => offset_commit(coordinators),
        OffsetFetch => offset_fetch(coordinators),
        OffsetDelete => offset_delete(coordinators),
        InitProducerId => init_producer_id(coordinators),
        AddPartitionsToTxn => add_partitions_to_txn(coordinators),
        AddOffsetsToTxn => add_offsets_to_txn(coordinators),
        EndTxn => end_txn(coordinators),
        DescribeTransactions => describe_transactions(coordinators),
        ListTransactions => list_transactions(coordinators),
        CreateAcls => create_acls(cluster),
        DescribeAcls => describe_acls(cluster),
        DeleteAcls => delete_acls(cluster),
        DescribeUserScramCredentials => describe_user_scram_credentials(cluster),
        AlterUserScramCredentials => alter_user_scram_credentials(cluster),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_advertised_range_is_within_what_the_codec_offers() {
        for (api_key, range) in SUPPORTED_APIS {
            let codec = api_key.valid_versions();
            assert!(
                range.min >= codec.min || old_versions::is_old(*api_key, range.min),
                "{api_key:?}"
            );
            assert!(range.max <= codec.max, "{api_key:?}");
            assert!(range.min <= range.max, "{api_key:?}");
        }
    }

    /// Every API served has its row (or is one of those that run before a
    /// principal exists), so none is unchecked by omission.
    #[test]
    fn every_served_api_has_a_row_or_needs_none() {
        let unchecked = [
            ApiKey::ApiVersions,
            ApiKey::SaslHandshake,
            ApiKey::SaslAuthenticate,
        ];
        for (api_key, _) in SUPPORTED_APIS {
            let rows = super::super::authz::TABLE
                .iter()
                .filter(|(api, _)| api == api_key)
                .count();
            if unchecked.contains(api_key) {
                assert_eq!(rows, 0, "{api_key:?}");
            } else {
                assert_eq!(rows, 1, "{api_key:?} needs one row");
            }
        }
        for (api_key, _) in super::super::authz::TABLE {
            assert!(
                SUPPORTED_APIS.iter().any(|(served, _)| served == api_key),
                "{api_key:?} has a row but is not served"
            );
        }
    }

    #[test]
    fn no_api_is_listed_twice() {
        for (index, (api_key, _)) in SUPPORTED_APIS.iter().enumerate() {
            assert!(SUPPORTED_APIS[index + 1..]
                .iter()
                .all(|(other, _)| other != api_key));
        }
    }

    #[test]
    fn every_advertised_version_the_codec_lacks_is_bridged() {
        for (api_key, range) in SUPPORTED_APIS {
            for version in range.min..api_key.valid_versions().min {
                assert!(
                    old_versions::is_old(*api_key, version),
                    "{api_key:?} v{version}"
                );
                assert!(
                    version >= old_codec_min(*api_key),
                    "{api_key:?} v{version} is older than Kafka 3.9 served"
                );
            }
        }
    }

    /// The oldest version Kafka 3.9's schemas have.
    fn old_codec_min(api_key: ApiKey) -> i16 {
        kafka_protocol_old::messages::ApiKey::try_from(api_key as i16)
            .expect("every current api key is in Kafka 3.9's schemas")
            .valid_versions()
            .min
    }

    #[test]
    fn every_version_kafka_3_9_served_is_served_but_message_formats_0_and_1() {
        for (api_key, range) in SUPPORTED_APIS {
            let expected = match api_key {
                // Below these, requests carry message formats v0 and v1.
                ApiKey::Produce => 3,
                ApiKey::Fetch => 4,
                // Broker to broker only: its senders are Sluice brokers, at v1
                // (no Kafka broker joins a Sluice cluster to send v0).
                ApiKey::WriteTxnMarkers => 1,
                other => old_codec_min(*other).min(other.valid_versions().min),
            };
            assert_eq!(range.min, expected, "{api_key:?}");
        }
    }
}
