//! JoinGroup: hands the request to the group coordinator and waits for the
//! join phase to complete (the answer may come only when every member has
//! rejoined, or the rebalance timeout expires).

use kafka_protocol::messages::join_group_response::JoinGroupResponseMember;
use kafka_protocol::messages::{JoinGroupRequest, JoinGroupResponse};
use kafka_protocol::protocol::{StrBytes, VersionRange};

use crate::coordinator::group::{self, JoinRequest};
use crate::error_code;
use crate::protocol::context::Coordinators;
use crate::protocol::RequestContext;
use crate::security::acl::{Operation, ResourceType};

pub const VERSIONS: VersionRange = VersionRange { min: 0, max: 9 };

/// From v4 a first join without a member id gets MEMBER_ID_REQUIRED (KIP-394).
const KNOWN_MEMBER_ID_VERSION_MIN: i16 = 4;
/// From v9 a static leader can be told to skip assignment (KIP-814).
const SKIP_ASSIGNMENT_VERSION_MIN: i16 = 9;
/// From v7 the protocol name is nullable; before it, "" stands for none.
const NULLABLE_PROTOCOL_NAME_VERSION_MIN: i16 = 7;

pub async fn handle(
    coordinators: &Coordinators,
    ctx: &RequestContext,
    request: JoinGroupRequest,
) -> JoinGroupResponse {
    let version = ctx.api_version;
    // Kafka checks Read on the group before anything else; a refused join
    // leaves the group as it was and names no member.
    if !ctx.authorize(Operation::Read, ResourceType::Group, &request.group_id) {
        return failed(
            error_code::GROUP_AUTHORIZATION_FAILED,
            &StrBytes::default(),
            version,
        );
    }
    if request.group_id.is_empty() {
        return failed(error_code::INVALID_GROUP_ID, &request.member_id, version);
    }
    // v0 has no rebalance timeout: the session timeout serves for both, as in Kafka.
    let rebalance_timeout_ms = if version == 0 {
        request.session_timeout_ms
    } else {
        request.rebalance_timeout_ms
    };
    let join = JoinRequest {
        group_id: request.group_id.to_string(),
        member_id: request.member_id.to_string(),
        group_instance_id: request.group_instance_id.as_ref().map(|id| id.to_string()),
        protocol_type: request.protocol_type.to_string(),
        protocols: request
            .protocols
            .iter()
            .map(|p| (p.name.to_string(), p.metadata.clone()))
            .collect(),
        session_timeout_ms: request.session_timeout_ms,
        rebalance_timeout_ms,
        client_id: ctx.client_id.clone().unwrap_or_default(),
        client_host: format!("/{}", ctx.peer_addr.ip()),
        require_known_member_id: version >= KNOWN_MEMBER_ID_VERSION_MIN,
        supports_skip_assignment: version >= SKIP_ASSIGNMENT_VERSION_MIN,
        reply_to: 0,
    };
    let member_id = join.member_id.clone();
    let joined = coordinators.groups().join(join).await.unwrap_or_else(|_| {
        group::JoinResponse::error(&member_id, error_code::COORDINATOR_NOT_AVAILABLE)
    });
    tracing::debug!(
        group = %request.group_id.as_str(),
        member = %joined.member_id,
        generation = joined.generation_id,
        error = joined.error,
        "join answered"
    );
    let protocol_name = match joined.protocol_name {
        Some(name) => Some(StrBytes::from_string(name)),
        None if version < NULLABLE_PROTOCOL_NAME_VERSION_MIN => Some(StrBytes::default()),
        None => None,
    };
    JoinGroupResponse::default()
        .with_error_code(joined.error)
        .with_generation_id(joined.generation_id)
        .with_protocol_type(joined.protocol_type.map(StrBytes::from_string))
        .with_protocol_name(protocol_name)
        .with_leader(StrBytes::from_string(joined.leader))
        .with_skip_assignment(joined.skip_assignment)
        .with_member_id(StrBytes::from_string(joined.member_id))
        .with_members(joined.members.into_iter().map(member).collect())
}

fn member(joined: group::JoinedMember) -> JoinGroupResponseMember {
    JoinGroupResponseMember::default()
        .with_member_id(StrBytes::from_string(joined.member_id))
        .with_group_instance_id(joined.group_instance_id.map(StrBytes::from_string))
        .with_metadata(joined.metadata)
}

fn failed(error: i16, member_id: &StrBytes, version: i16) -> JoinGroupResponse {
    let protocol_name = (version < NULLABLE_PROTOCOL_NAME_VERSION_MIN).then(StrBytes::default);
    JoinGroupResponse::default()
        .with_error_code(error)
        .with_generation_id(-1)
        .with_protocol_name(protocol_name)
        .with_member_id(member_id.clone())
}
