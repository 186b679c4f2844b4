//! DeleteGroups: an Empty group and its committed offsets go, checked and
//! deleted by the group coordinator in one step (a group known only by its
//! committed offsets goes too); a group with members is NON_EMPTY_GROUP, an
//! unknown one GROUP_ID_NOT_FOUND, a storage failure NOT_COORDINATOR.

use kafka_protocol::messages::delete_groups_response::DeletableGroupResult;
use kafka_protocol::messages::{DeleteGroupsRequest, DeleteGroupsResponse};
use kafka_protocol::protocol::VersionRange;

use crate::error_code;
use crate::protocol::context::Coordinators;
use crate::protocol::RequestContext;
use crate::security::acl::{Operation, ResourceType};

pub const VERSIONS: VersionRange = VersionRange { min: 0, max: 2 };

pub async fn handle(
    coordinators: &Coordinators,
    ctx: &RequestContext,
    request: DeleteGroupsRequest,
) -> DeleteGroupsResponse {
    let mut results = Vec::with_capacity(request.groups_names.len());
    for group_id in &request.groups_names {
        // Kafka's Delete on each group; a refused one is left as it is.
        if !ctx.authorize(Operation::Delete, ResourceType::Group, group_id) {
            results.push(
                DeletableGroupResult::default()
                    .with_group_id(group_id.clone())
                    .with_error_code(error_code::GROUP_AUTHORIZATION_FAILED),
            );
            continue;
        }
        let error = coordinators
            .groups()
            .delete(group_id.to_string())
            .await
            .unwrap_or(error_code::COORDINATOR_NOT_AVAILABLE);
        results.push(
            DeletableGroupResult::default()
                .with_group_id(group_id.clone())
                .with_error_code(error),
        );
    }
    DeleteGroupsResponse::default().with_results(results)
}
