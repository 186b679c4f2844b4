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

pub const VERSIONS: VersionRange = VersionRange { min: 0, max: 2 };

pub async fn handle(
    cluster: &Cluster,
    ctx: &RequestContext,
    request: AlterConfigsRequest,
) -> AlterConfigsResponse {
    let mut responses = Vec::with_capacity(request.resources.len());
    for resource in &request.resources {
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
        let named = (resource.resource_type, resource.resource_name.as_str());
        let validate_only = request.validate_only;
        let outcome =
            config_resources::alter(cluster, ctx, named, Ok(ops), true, validate_only).await;
        responses.push(altered!(AlterConfigsResourceResponse, resource, outcome));
    }
    AlterConfigsResponse::default().with_responses(responses)
}
