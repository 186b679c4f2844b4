//! DeleteGroups: an Empty group and its committed offsets go; a group with
//! members is NON_EMPTY_GROUP, an unknown one GROUP_ID_NOT_FOUND.

use std::sync::Arc;

use kafka_protocol::messages::delete_groups_response::DeletableGroupResult;
use kafka_protocol::messages::{DeleteGroupsRequest, DeleteGroupsResponse};
use kafka_protocol::protocol::VersionRange;

use super::offsets_common::with_store;
use crate::protocol::context::BrokerState;
use crate::protocol::{errors, RequestContext};

pub const VERSIONS: VersionRange = VersionRange { min: 0, max: 2 };

pub async fn handle(
    state: &Arc<BrokerState>,
    _ctx: &RequestContext,
    request: DeleteGroupsRequest,
) -> DeleteGroupsResponse {
    let mut results = Vec::with_capacity(request.groups_names.len());
    for group_id in &request.groups_names {
        let name = group_id.to_string();
        // A group known only by its committed offsets (restored Empty) is deletable too.
        let mut error = state
            .groups
            .delete(name.clone())
            .await
            .unwrap_or(errors::COORDINATOR_NOT_AVAILABLE);
        let group = name.clone();
        let has_offsets = with_store(state, move |store| store.fetch_group(&group))
            .await
            .is_ok_and(|offsets| !offsets.is_empty());
        if error == errors::GROUP_ID_NOT_FOUND && has_offsets {
            error = errors::NONE;
        }
        if error == errors::NONE {
            let group = name.clone();
            if let Err(io) = with_store(state, move |store| store.delete_group(&group)).await {
                tracing::error!(group = %name, error = %io, "deleting a group's offsets failed");
                // A storage failure, which Kafka answers with the retriable NOT_COORDINATOR.
                error = errors::NOT_COORDINATOR;
            }
        }
        results.push(
            DeletableGroupResult::default()
                .with_group_id(group_id.clone())
                .with_error_code(error),
        );
    }
    DeleteGroupsResponse::default().with_results(results)
}
