//! Heartbeat: keeps a member's session alive and tells it when to rejoin.

use kafka_protocol::messages::{HeartbeatRequest, HeartbeatResponse};
use kafka_protocol::protocol::VersionRange;

use super::common::group_refusal;
use crate::error_code;
use crate::protocol::context::Coordinators;
use crate::protocol::RequestContext;
use crate::security::acl::Operation;

pub const VERSIONS: VersionRange = VersionRange { min: 0, max: 4 };

pub async fn handle(
    coordinators: &Coordinators,
    ctx: &RequestContext,
    request: HeartbeatRequest,
) -> HeartbeatResponse {
    // Kafka's Read on the group; refused, the member's session is not kept.
    if let Some(error) = group_refusal(ctx, Operation::Read, &request.group_id) {
        return HeartbeatResponse::default().with_error_code(error);
    }
    let error = coordinators
        .groups()
        .heartbeat(
            request.group_id.to_string(),
            request.member_id.to_string(),
            request.group_instance_id.as_ref().map(|id| id.to_string()),
            request.generation_id,
        )
        .await
        .unwrap_or(error_code::COORDINATOR_NOT_AVAILABLE);
    tracing::debug!(group = %request.group_id.as_str(), member = %request.member_id.as_str(), error, "heartbeat answered");
    HeartbeatResponse::default().with_error_code(error)
}
