//! FindCoordinator: which broker coordinates a group or a transactional id. A
//! group maps to a partition of the offsets topic by Kafka's rule (Java
//! hashCode of the group id modulo the partition count), a transactional id to
//! a partition of the transaction log the same way; the coordinator is that
//! partition's leader. On one node that is always this broker. In a cluster,
//! until the coordinators live on the replicated internal topics, every node
//! names the same one: the live (unfenced) broker with the lowest id, whose
//! coordinators hold their state on its own disk, so that all of a group's
//! members and all of a transaction's requests reach one coordinator.

use kafka_protocol::messages::find_coordinator_response::Coordinator;
use kafka_protocol::messages::{BrokerId, FindCoordinatorRequest, FindCoordinatorResponse};
use kafka_protocol::protocol::{StrBytes, VersionRange};

use crate::error_code;
use crate::protocol::context::Coordinators;
use crate::protocol::RequestContext;

pub const VERSIONS: VersionRange = VersionRange { min: 0, max: 6 };

/// From v4 several keys are asked in one request (KIP-699).
const BATCHED_VERSION_MIN: i16 = 4;
/// Kafka's CoordinatorType: GROUP.
const KEY_TYPE_GROUP: i8 = 0;
/// Kafka's CoordinatorType: TRANSACTION.
const KEY_TYPE_TRANSACTION: i8 = 1;

/// (error, message, node id, host, port) for one key.
fn coordinator_for(
    coordinators: &Coordinators,
    ctx: &RequestContext,
    key: &str,
    key_type: i8,
) -> (i16, Option<String>, i32, String, i32) {
    let what = match key_type {
        KEY_TYPE_GROUP => "Group id",
        KEY_TYPE_TRANSACTION => "Transactional id",
        _ => {
            return (
                error_code::INVALID_REQUEST,
                Some(format!("Unknown coordinator type {key_type}.")),
                -1,
                String::new(),
                -1,
            )
        }
    };
    if key.is_empty() {
        return (
            error_code::INVALID_REQUEST,
            Some(format!("{what} must not be empty.")),
            -1,
            String::new(),
            -1,
        );
    }
    let image = coordinators.image();
    let own = coordinators.node_id();
    let chosen = image
        .brokers
        .values()
        .filter(|b| !b.fenced)
        .map(|b| b.node_id)
        .min()
        .unwrap_or(own);
    match image.brokers.get(&chosen).filter(|_| chosen != own) {
        Some(broker) => {
            let (host, port) = broker.endpoint(&ctx.listener.name);
            (error_code::NONE, None, chosen, host.to_string(), port)
        }
        None => {
            let (host, port) = ctx.advertised_endpoint();
            (error_code::NONE, None, own, host, port)
        }
    }
}

pub async fn handle(
    coordinators: &Coordinators,
    ctx: &RequestContext,
    request: FindCoordinatorRequest,
) -> FindCoordinatorResponse {
    if ctx.api_version >= BATCHED_VERSION_MIN {
        let coordinators = request
            .coordinator_keys
            .iter()
            .map(|key| {
                let (error, text, node_id, host, port) =
                    coordinator_for(coordinators, ctx, key, request.key_type);
                Coordinator::default()
                    .with_key(key.clone())
                    .with_node_id(BrokerId(node_id))
                    .with_host(StrBytes::from_string(host))
                    .with_port(port)
                    .with_error_code(error)
                    .with_error_message(text.map(StrBytes::from_string))
            })
            .collect();
        return FindCoordinatorResponse::default().with_coordinators(coordinators);
    }
    let (error, text, node_id, host, port) =
        coordinator_for(coordinators, ctx, &request.key, request.key_type);
    FindCoordinatorResponse::default()
        .with_error_code(error)
        .with_error_message(text.map(StrBytes::from_string))
        .with_node_id(BrokerId(node_id))
        .with_host(StrBytes::from_string(host))
        .with_port(port)
}
