//! SyncGroup: the leader hands in the assignment; every member gets its own
//! share once the leader has synced.

use kafka_protocol::messages::{SyncGroupRequest, SyncGroupResponse};
use kafka_protocol::protocol::{StrBytes, VersionRange};

use super::common::group_refusal;
use crate::coordinator::group::SyncRequest;
use crate::error_code;
use crate::protocol::context::Coordinators;
use crate::protocol::RequestContext;
use crate::security::acl::Operation;

pub const VERSIONS: VersionRange = VersionRange { min: 0, max: 5 };

pub async fn handle(
    coordinators: &Coordinators,
    ctx: &RequestContext,
    request: SyncGroupRequest,
) -> SyncGroupResponse {
    // Kafka's Read on the group; refused, the group is left as it was.
    if let Some(error) = group_refusal(ctx, Operation::Read, &request.group_id) {
        return SyncGroupResponse::default().with_error_code(error);
    }
    let sync = SyncRequest {
        group_id: request.group_id.to_string(),
        generation_id: request.generation_id,
        member_id: request.member_id.to_string(),
        group_instance_id: request.group_instance_id.as_ref().map(|id| id.to_string()),
        protocol_type: request.protocol_type.as_ref().map(|t| t.to_string()),
        protocol_name: request.protocol_name.as_ref().map(|n| n.to_string()),
        assignments: request
            .assignments
            .iter()
            .map(|a| (a.member_id.to_string(), a.assignment.clone()))
            .collect(),
        reply_to: 0,
    };
    let synced = coordinators.groups().sync(sync).await.unwrap_or_else(|_| {
        crate::coordinator::group::SyncResponse::error(error_code::COORDINATOR_NOT_AVAILABLE)
    });
    tracing::debug!(group = %request.group_id.as_str(), member = %request.member_id.as_str(), generation = request.generation_id, error = synced.error, assignment = synced.assignment.len(), "sync answered");
    SyncGroupResponse::default()
        .with_error_code(synced.error)
        .with_protocol_type(synced.protocol_type.map(StrBytes::from_string))
        .with_protocol_name(synced.protocol_name.map(StrBytes::from_string))
        .with_assignment(synced.assignment)
}
