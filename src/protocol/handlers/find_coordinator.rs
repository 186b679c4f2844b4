//! FindCoordinator: which broker coordinates a group. A group maps to a
//! partition of the offsets topic by Kafka's rule (Java hashCode of the group id
//! modulo the partition count); the coordinator is that partition's leader. On
//! one node that is always this broker; the cluster work assigns the leaders.
//! Transaction coordinators (key type 1) arrive with transactions.

use std::sync::Arc;

use kafka_protocol::messages::find_coordinator_response::Coordinator;
use kafka_protocol::messages::{BrokerId, FindCoordinatorRequest, FindCoordinatorResponse};
use kafka_protocol::protocol::{StrBytes, VersionRange};

use crate::protocol::{errors, RequestContext};
use crate::server::BrokerState;

pub const VERSIONS: VersionRange = VersionRange { min: 0, max: 6 };

/// From v4 several keys are asked in one request (KIP-699).
const BATCHED_VERSION_MIN: i16 = 4;
/// Kafka's CoordinatorType: GROUP.
const KEY_TYPE_GROUP: i8 = 0;

/// (error, message, node id, host, port) for one key.
fn coordinator_for(
    state: &BrokerState,
    ctx: &RequestContext,
    key: &str,
    key_type: i8,
) -> (i16, Option<String>, i32, String, i32) {
    if key_type != KEY_TYPE_GROUP {
        return (
            errors::COORDINATOR_NOT_AVAILABLE,
            Some("This broker has no transaction coordinator yet.".to_string()),
            -1,
            String::new(),
            -1,
        );
    }
    if key.is_empty() {
        return (
            errors::INVALID_REQUEST,
            Some("Group id must not be empty.".to_string()),
            -1,
            String::new(),
            -1,
        );
    }
    let _partition = crate::group::coordinator_partition(key);
    let (host, port) = ctx.advertised_endpoint();
    (errors::NONE, None, state.config.node_id, host, port)
}

pub async fn handle(
    state: &Arc<BrokerState>,
    ctx: &RequestContext,
    request: FindCoordinatorRequest,
) -> FindCoordinatorResponse {
    if ctx.api_version >= BATCHED_VERSION_MIN {
        let coordinators = request
            .coordinator_keys
            .iter()
            .map(|key| {
                let (error, text, node_id, host, port) =
                    coordinator_for(state, ctx, key, request.key_type);
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
        coordinator_for(state, ctx, &request.key, request.key_type);
    FindCoordinatorResponse::default()
        .with_error_code(error)
        .with_error_message(text.map(StrBytes::from_string))
        .with_node_id(BrokerId(node_id))
        .with_host(StrBytes::from_string(host))
        .with_port(port)
}
