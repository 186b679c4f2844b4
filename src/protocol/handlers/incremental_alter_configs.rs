//! IncrementalAlterConfigs: SET, DELETE, APPEND and SUBTRACT on single keys of a
//! topic or the broker. Validated against the current image here, applied
//! atomically by the controller.

use std::collections::BTreeMap;

use kafka_protocol::messages::incremental_alter_configs_response::AlterConfigsResourceResponse;
use kafka_protocol::messages::{IncrementalAlterConfigsRequest, IncrementalAlterConfigsResponse};
use kafka_protocol::protocol::VersionRange;

use super::common::{message, metadata_error};
use super::config_resources::{self, Rejection, Resource};
use super::create_topics::controller_error;
use crate::controller::{CommandOutcome, ConfigOp, MetadataCommand};
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
    _ctx: &RequestContext,
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
        let outcome = match ops {
            Ok(ops) => {
                apply(
                    cluster,
                    resource.resource_type,
                    &resource.resource_name,
                    ops,
                    false,
                    request.validate_only,
                )
                .await
            }
            Err(rejection) => Err(rejection),
        };
        let response = AlterConfigsResourceResponse::default()
            .with_resource_type(resource.resource_type)
            .with_resource_name(resource.resource_name.clone());
        responses.push(match outcome {
            Ok(()) => response,
            Err((code, text)) => response
                .with_error_code(code)
                .with_error_message(message(text)),
        });
    }
    IncrementalAlterConfigsResponse::default().with_responses(responses)
}

/// Validates `ops` on a resource and, unless `validate_only`, commits them;
/// `replace` makes the set of Sets the resource's whole set of overrides.
pub async fn apply(
    cluster: &Cluster,
    resource_type: i8,
    resource_name: &str,
    ops: Vec<ConfigOp>,
    replace: bool,
    validate_only: bool,
) -> Result<(), Rejection> {
    let image = cluster.image();
    let resource = config_resources::resource(
        cluster.broker_config(),
        &image,
        resource_type,
        resource_name,
    )?;
    let empty = BTreeMap::new();
    let current = match &resource {
        Resource::Topic(name) => image.topics.get(name).map_or(&empty, |t| &t.configs),
        Resource::Broker => &image.broker_configs,
    };
    let base = if replace { &empty } else { current };
    config_resources::validate_ops(&resource, base, &ops)?;
    if validate_only {
        return Ok(());
    }
    let command = match resource {
        Resource::Topic(name) => MetadataCommand::AlterTopicConfigs { name, ops, replace },
        Resource::Broker => MetadataCommand::AlterBrokerConfigs { ops, replace },
    };
    match cluster.propose(command).await {
        Ok(CommandOutcome::Rejected(error)) => Err(metadata_error(&error)),
        Ok(_) => Ok(()),
        Err(error) => Err(controller_error(&error)),
    }
}
