//! AlterConfigs (the legacy, replacing form): the given set becomes the
//! resource's whole set of overrides. Each resource needs AlterConfigs
//! (`config_resources::refusal`), else its error and nothing changed.

use kafka_protocol::messages::alter_configs_response::AlterConfigsResourceResponse;
use kafka_protocol::messages::{AlterConfigsRequest, AlterConfigsResponse};
use kafka_protocol::protocol::VersionRange;

use super::config_resources::{self, altered};
use crate::controller::ConfigOp;
use crate::protocol::context::Cluster;
use crate::protocol::RequestContext;
use crate::security::acl::Operation;

pub const VERSIONS: VersionRange = VersionRange { min: 0, max: 2 };

pub async fn handle(
    cluster: &Cluster,
    ctx: &RequestContext,
    request: AlterConfigsRequest,
) -> AlterConfigsResponse {
    let mut responses = Vec::with_capacity(request.resources.len());
    for resource in &request.resources {
        if let Some(refused) = config_resources::refusal(
            ctx,
            Operation::AlterConfigs,
            resource.resource_type,
            &resource.resource_name,
        ) {
            responses.push(altered!(
                AlterConfigsResourceResponse,
                resource,
                Err::<(), _>(refused)
            ));
            continue;
        }
        let ops: Vec<ConfigOp> = resource
            .configs
            .iter()
            .filter_map(|c| {
                c.value.as_ref().map(|value| ConfigOp::Set {
                    key: c.name.to_string(),
                    value: value.to_string(),
                })
            })
            .collect();
        let outcome = config_resources::alter(
            cluster,
            resource.resource_type,
            &resource.resource_name,
            ops,
            true,
            request.validate_only,
        )
        .await;
        responses.push(altered!(AlterConfigsResourceResponse, resource, outcome));
    }
    AlterConfigsResponse::default().with_responses(responses)
}
