//! LeaveGroup: one member (v0-v2) or a batch of members by member id or group
//! instance id (v3+, KIP-345); the group rebalances without them.

use kafka_protocol::messages::leave_group_response::MemberResponse;
use kafka_protocol::messages::{LeaveGroupRequest, LeaveGroupResponse};
use kafka_protocol::protocol::VersionRange;

use super::common::group_refusal;
use crate::error_code;
use crate::protocol::context::Coordinators;
use crate::protocol::RequestContext;
use crate::security::acl::Operation;

pub const VERSIONS: VersionRange = VersionRange { min: 0, max: 5 };

/// From v3 members leave in batches.
const BATCHED_VERSION_MIN: i16 = 3;

pub async fn handle(
    coordinators: &Coordinators,
    ctx: &RequestContext,
    request: LeaveGroupRequest,
) -> LeaveGroupResponse {
    // Kafka's Read on the group; refused, nobody leaves (and no member is
    // answered).
    if let Some(error) = group_refusal(ctx, Operation::Read, &request.group_id) {
        return LeaveGroupResponse::default().with_error_code(error);
    }
    let batched = ctx.api_version >= BATCHED_VERSION_MIN;
    tracing::debug!(group = %request.group_id.as_str(), members = ?request.members, member = %request.member_id.as_str(), "leave");
    let leaving: Vec<(String, Option<String>)> = if batched {
        request
            .members
            .iter()
            .map(|m| {
                (
                    m.member_id.to_string(),
                    m.group_instance_id.as_ref().map(|id| id.to_string()),
                )
            })
            .collect()
    } else {
        vec![(request.member_id.to_string(), None)]
    };
    let (error, member_errors) = coordinators
        .groups()
        .leave(request.group_id.to_string(), leaving)
        .await
        .unwrap_or((error_code::COORDINATOR_NOT_AVAILABLE, Vec::new()));
    if !batched {
        // One member: its error is the response's error.
        let error = if error != error_code::NONE {
            error
        } else {
            member_errors.first().copied().unwrap_or(error)
        };
        return LeaveGroupResponse::default().with_error_code(error);
    }
    let members = request
        .members
        .iter()
        .zip(
            member_errors
                .iter()
                .copied()
                .chain(std::iter::repeat(error)),
        )
        .map(|(m, member_error)| {
            MemberResponse::default()
                .with_member_id(m.member_id.clone())
                .with_group_instance_id(m.group_instance_id.clone())
                .with_error_code(member_error)
        })
        .collect();
    LeaveGroupResponse::default()
        .with_error_code(error)
        .with_members(members)
}
