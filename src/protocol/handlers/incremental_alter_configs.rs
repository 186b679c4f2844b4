//! IncrementalAlterConfigs: SET, DELETE, APPEND and SUBTRACT on single keys of a
//! topic or the broker. Validated against the current image here, applied
//! atomically by the controller. Each resource needs AlterConfigs
//! (`config_resources::refusal`), else its error and nothing changed.

use kafka_protocol::messages::incremental_alter_configs_response::AlterConfigsResourceResponse;
use kafka_protocol::messages::{IncrementalAlterConfigsRequest, IncrementalAlterConfigsResponse};
use kafka_protocol::protocol::VersionRange;

use super::common::Rejection;
use super::config_resources::{self, altered};
use crate::controller::ConfigOp;
use crate::error_code;
use crate::protocol::context::Cluster;
use crate::protocol::RequestContext;

pub const VERSIONS: VersionRange = VersionRange { min: 0, max: 1 };

/// Kafka's AlterConfigOp.OpType codes.
const OP_SET: i8 = 0;
const OP_DELETE: i8 = 1;
const OP_APPEND: i8 = 2;
const OP_SUBTRACT: i8 = 3;

pub async fn handle(
    cluster: &Cluster,
    ctx: &RequestContext,
    request: IncrementalAlterConfigsRequest,
) -> IncrementalAlterConfigsResponse {
    let mut responses = Vec::with_capacity(request.resources.len());
    for resource in &request.resources {
        let ops: Result<Vec<ConfigOp>, Rejection> = resource
            .configs
            .iter()
            .map(|c| {
                let key = c.name.to_string();
                let value = c.value.as_ref().map(|v| v.to_string());
                match (c.config_operation, value) {
                    (OP_DELETE, _) => Ok(ConfigOp::Delete { key }),
                    (OP_SET, Some(value)) => Ok(ConfigOp::Set { key, value }),
                    (OP_APPEND, Some(value)) => Ok(ConfigOp::Append { key, value }),
                    (OP_SUBTRACT, Some(value)) => Ok(ConfigOp::Subtract { key, value }),
                    (OP_SET | OP_APPEND | OP_SUBTRACT, None) => Err((
                        error_code::INVALID_REQUEST,
                        format!("Null value not supported for: {key}"),
                    )),
                    (other, _) => Err((
                        error_code::INVALID_REQUEST,
                        format!("Unknown config operation {other}"),
                    )),
                }
            })
            .collect();
        let named = (resource.resource_type, resource.resource_name.as_str());
        let validate_only = request.validate_only;
        let outcome = config_resources::alter(cluster, ctx, named, ops, false, validate_only).await;
        responses.push(altered!(AlterConfigsResourceResponse, resource, outcome));
    }
    IncrementalAlterConfigsResponse::default().with_responses(responses)
}
