//! DescribeConfigs for topics and the broker: each value with its source,
//! synonyms (v1+), type and documentation (v3+). Each resource needs
//! DescribeConfigs (`config_resources::refusal`), else its error and no
//! configs.

use kafka_protocol::messages::describe_configs_response::{
    DescribeConfigsResourceResult, DescribeConfigsResult, DescribeConfigsSynonym,
};
use kafka_protocol::messages::{DescribeConfigsRequest, DescribeConfigsResponse};
use kafka_protocol::protocol::{StrBytes, VersionRange};

use super::common::message;
use super::config_resources::{self, Entry, Resource};
use crate::protocol::context::Cluster;
use crate::protocol::RequestContext;
use crate::security::acl::Operation;

/// The versions below the current codec's oldest are read by `old_versions` and
/// reach this handler at that oldest (bridge) version.
pub const VERSIONS: VersionRange = VersionRange { min: 0, max: 4 };

pub async fn handle(
    cluster: &Cluster,
    ctx: &RequestContext,
    request: DescribeConfigsRequest,
) -> DescribeConfigsResponse {
    let image = cluster.image();
    let results = request
        .resources
        .iter()
        .map(|wanted| {
            let result = DescribeConfigsResult::default()
                .with_resource_type(wanted.resource_type)
                .with_resource_name(wanted.resource_name.clone());
            let resource = match config_resources::refusal(
                ctx,
                Operation::DescribeConfigs,
                wanted.resource_type,
                &wanted.resource_name,
            ) {
                Some(refused) => Err(refused),
                None => config_resources::resource(
                    cluster.broker_config(),
                    &image,
                    wanted.resource_type,
                    &wanted.resource_name,
                ),
            };
            let entries = match resource {
                Ok(Resource::Topic(name)) => {
                    config_resources::describe_topic(cluster.broker_config(), &image, &name)
                }
                Ok(Resource::Broker) => {
                    config_resources::describe_broker(cluster.broker_config(), &image)
                }
                Err((code, text)) => {
                    return result
                        .with_error_code(code)
                        .with_error_message(message(text))
                }
            };
            let configs = entries
                .into_iter()
                .filter(|entry| {
                    wanted
                        .configuration_keys
                        .as_ref()
                        .is_none_or(|keys| keys.iter().any(|k| k.as_str() == entry.name))
                })
                .map(|entry| {
                    describe(
                        entry,
                        request.include_synonyms,
                        request.include_documentation,
                    )
                })
                .collect();
            result.with_configs(configs)
        })
        .collect();
    DescribeConfigsResponse::default().with_results(results)
}

fn describe(
    entry: Entry,
    include_synonyms: bool,
    include_documentation: bool,
) -> DescribeConfigsResourceResult {
    let synonyms = if include_synonyms {
        entry
            .synonyms
            .into_iter()
            .map(|(name, value, source)| {
                DescribeConfigsSynonym::default()
                    .with_name(StrBytes::from_string(name))
                    .with_value(Some(StrBytes::from_string(value)))
                    .with_source(source)
            })
            .collect()
    } else {
        Vec::new()
    };
    DescribeConfigsResourceResult::default()
        .with_name(StrBytes::from_string(entry.name))
        .with_value(entry.value.map(StrBytes::from_string))
        .with_read_only(entry.read_only)
        .with_config_source(entry.source)
        .with_is_sensitive(false)
        .with_synonyms(synonyms)
        .with_config_type(entry.kind as i8)
        .with_documentation(
            include_documentation.then(|| StrBytes::from_string(entry.documentation)),
        )
}
