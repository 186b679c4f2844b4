//! DescribeAcls (KIP-140; PREFIXED, ANY and MATCH filters from v1,
//! KIP-290), as `kafka-acls.sh --list` sends it: the bindings the filter
//! matches in this node's metadata image, grouped by resource pattern.
//! Needs Describe on the cluster; without an authorizer, SECURITY_DISABLED.

use std::collections::BTreeMap;

use kafka_protocol::messages::describe_acls_response::{AclDescription, DescribeAclsResource};
use kafka_protocol::messages::{DescribeAclsRequest, DescribeAclsResponse};
use kafka_protocol::protocol::{StrBytes, VersionRange};

use super::acls_common::{acl_api_refusal, filter};
use super::common::message;
use crate::error_code;
use crate::protocol::context::Cluster;
use crate::protocol::RequestContext;
use crate::security::acl::{Operation, PatternType, ResourceType};

/// v0 is read through `old_versions` (Kafka 4 removed it).
pub const VERSIONS: VersionRange = VersionRange { min: 0, max: 3 };

pub async fn handle(
    cluster: &Cluster,
    ctx: &RequestContext,
    request: DescribeAclsRequest,
) -> DescribeAclsResponse {
    let refuse = |code: i16, text: String| {
        DescribeAclsResponse::default()
            .with_error_code(code)
            .with_error_message(message(text))
    };
    if let Some((code, text)) = acl_api_refusal(ctx, Operation::Describe) {
        return refuse(code, text);
    }
    let filter = filter(
        request.resource_type_filter,
        request.resource_name_filter.as_deref(),
        request.pattern_type_filter,
        request.principal_filter.as_deref(),
        request.host_filter.as_deref(),
        request.operation,
        request.permission_type,
    );
    if let Some(why) = filter.invalid() {
        return refuse(error_code::INVALID_REQUEST, why);
    }
    let image = cluster.image();
    let mut resources: BTreeMap<(ResourceType, String, PatternType), Vec<AclDescription>> =
        BTreeMap::new();
    for (_, binding) in image.acls.matching(&filter) {
        resources
            .entry((
                binding.resource_type,
                binding.resource_name.clone(),
                binding.pattern_type,
            ))
            .or_default()
            .push(
                AclDescription::default()
                    .with_principal(StrBytes::from_string(binding.principal.clone()))
                    .with_host(StrBytes::from_string(binding.host.clone()))
                    .with_operation(binding.operation.code())
                    .with_permission_type(binding.permission.code()),
            );
    }
    DescribeAclsResponse::default()
        .with_error_message(None)
        .with_resources(
            resources
                .into_iter()
                .map(|((resource_type, name, pattern_type), acls)| {
                    DescribeAclsResource::default()
                        .with_resource_type(resource_type.code())
                        .with_resource_name(StrBytes::from_string(name))
                        .with_pattern_type(pattern_type.code())
                        .with_acls(acls)
                })
                .collect(),
        )
}
