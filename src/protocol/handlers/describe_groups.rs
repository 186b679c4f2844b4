//! DescribeGroups: coordinators, protocol and members (with their metadata and
//! assignment) of each group asked for.

use kafka_protocol::messages::describe_groups_response::{DescribedGroup, DescribedGroupMember};
use kafka_protocol::messages::{DescribeGroupsRequest, DescribeGroupsResponse};
use kafka_protocol::protocol::{StrBytes, VersionRange};

use super::common::AUTHORIZED_OPERATIONS_OMITTED;
use crate::coordinator::group::GroupDescription;
use crate::error_code;
use crate::protocol::context::Coordinators;
use crate::protocol::RequestContext;
use crate::security::acl::{Operation, ResourceType};

pub const VERSIONS: VersionRange = VersionRange { min: 0, max: 6 };

/// From v6 an unknown group is GROUP_ID_NOT_FOUND (KIP-1043); before, a Dead
/// group without error, as older brokers answered.
const NOT_FOUND_VERSION_MIN: i16 = 6;
pub async fn handle(
    coordinators: &Coordinators,
    ctx: &RequestContext,
    request: DescribeGroupsRequest,
) -> DescribeGroupsResponse {
    let mut groups = Vec::with_capacity(request.groups.len());
    for group_id in &request.groups {
        // Kafka's Describe on each group: a refused one is only its error,
        // with no state, protocol, members or message.
        if !ctx.authorize(Operation::Describe, ResourceType::Group, group_id) {
            groups.push(
                DescribedGroup::default()
                    .with_group_id(group_id.clone())
                    .with_error_code(error_code::GROUP_AUTHORIZATION_FAILED)
                    .with_authorized_operations(AUTHORIZED_OPERATIONS_OMITTED),
            );
            continue;
        }
        let described = coordinators
            .groups()
            .describe(group_id.to_string())
            .await
            .unwrap_or_else(|_| {
                let mut unavailable = GroupDescription::dead();
                unavailable.error = error_code::COORDINATOR_NOT_AVAILABLE;
                unavailable
            });
        let mut group = DescribedGroup::default()
            .with_group_id(group_id.clone())
            .with_group_state(StrBytes::from_string(described.state.clone()))
            .with_protocol_type(StrBytes::from_string(described.protocol_type.clone()))
            .with_protocol_data(StrBytes::from_string(described.protocol_name.clone()))
            .with_authorized_operations(AUTHORIZED_OPERATIONS_OMITTED);
        if described.error != error_code::NONE {
            group = group.with_error_code(described.error);
        } else if described.state == "Dead" && ctx.api_version >= NOT_FOUND_VERSION_MIN {
            group = group
                .with_error_code(error_code::GROUP_ID_NOT_FOUND)
                .with_error_message(Some(StrBytes::from_string(format!(
                    "Group {} not found.",
                    group_id.as_str()
                ))));
        } else if request.include_authorized_operations {
            // As Kafka: only a group answered without error reports them.
            group = group.with_authorized_operations(ctx.access.authorized_operations(
                ctx.api_key,
                ResourceType::Group,
                group_id,
            ));
        }
        let members = described
            .members
            .into_iter()
            .map(|m| {
                DescribedGroupMember::default()
                    .with_member_id(StrBytes::from_string(m.member_id))
                    .with_group_instance_id(m.group_instance_id.map(StrBytes::from_string))
                    .with_client_id(StrBytes::from_string(m.client_id))
                    .with_client_host(StrBytes::from_string(m.client_host))
                    .with_member_metadata(m.metadata)
                    .with_member_assignment(m.assignment)
            })
            .collect();
        groups.push(group.with_members(members));
    }
    DescribeGroupsResponse::default().with_groups(groups)
}
