//! ListGroups, with the states filter (v4+) and the types filter (v5+; every
//! group here is a "classic" group).

use kafka_protocol::messages::list_groups_response::ListedGroup;
use kafka_protocol::messages::{ListGroupsRequest, ListGroupsResponse};
use kafka_protocol::protocol::{StrBytes, VersionRange};

use crate::error_code;
use crate::protocol::context::Coordinators;
use crate::protocol::RequestContext;
use crate::security::acl::{Operation, ResourceType};

pub const VERSIONS: VersionRange = VersionRange { min: 0, max: 5 };

/// Kafka's group type of the classic protocol.
const CLASSIC_GROUP_TYPE: &str = "classic";

pub async fn handle(
    coordinators: &Coordinators,
    ctx: &RequestContext,
    request: ListGroupsRequest,
) -> ListGroupsResponse {
    let type_wanted = request.types_filter.is_empty()
        || request
            .types_filter
            .iter()
            .any(|t| t.as_str().eq_ignore_ascii_case(CLASSIC_GROUP_TYPE));
    if !type_wanted {
        return ListGroupsResponse::default();
    }
    let states: Vec<String> = request
        .states_filter
        .iter()
        .map(|s| s.to_string())
        .collect();
    let Ok(listed) = coordinators.groups().list(states).await else {
        return ListGroupsResponse::default()
            .with_error_code(error_code::COORDINATOR_NOT_AVAILABLE);
    };
    // As Kafka: Describe on the cluster lists every group; else only those
    // the principal may Describe, the others left out without an error.
    let every_group = ctx.authorize_cluster_quietly(Operation::Describe);
    let groups = listed
        .into_iter()
        .filter(|group| {
            every_group
                || ctx.authorize_quietly(Operation::Describe, ResourceType::Group, &group.group_id)
        })
        .map(|group| {
            ListedGroup::default()
                .with_group_id(StrBytes::from_string(group.group_id).into())
                .with_protocol_type(StrBytes::from_string(group.protocol_type))
                .with_group_state(StrBytes::from_string(group.state))
                .with_group_type(StrBytes::from_static_str(CLASSIC_GROUP_TYPE))
        })
        .collect();
    ListGroupsResponse::default().with_groups(groups)
}
