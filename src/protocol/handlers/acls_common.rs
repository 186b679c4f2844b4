//! What CreateAcls, DescribeAcls and DeleteAcls share: their refusals
//! before anything is read or written, and the filters on the wire.

use crate::controller::features::{metadata_version_name, METADATA_VERSION_ACLS};
use crate::error_code;
use crate::protocol::context::Cluster;
use crate::protocol::RequestContext;
use crate::security::acl::{AclFilter, Operation, PatternType, Permission, ResourceType};

/// Kafka's answer to an ACL API before any binding is looked at: no
/// authorizer (SECURITY_DISABLED), or the principal lacks `operation` on the
/// cluster (Alter to change ACLs, Describe to list them).
pub fn acl_api_refusal(ctx: &RequestContext, operation: Operation) -> Option<(i16, String)> {
    if !ctx.access.enforced() {
        return Some((
            error_code::SECURITY_DISABLED,
            "No Authorizer is configured.".to_string(),
        ));
    }
    if !ctx.authorize_cluster(operation) {
        return Some((
            error_code::CLUSTER_AUTHORIZATION_FAILED,
            super::common::authorization_failed(error_code::CLUSTER_AUTHORIZATION_FAILED)
                .to_string(),
        ));
    }
    None
}

/// ACL records need `METADATA_VERSION_ACLS`.
pub fn acls_need_level(cluster: &Cluster) -> Result<(), (i16, String)> {
    let level = cluster.image().metadata_version();
    if level < METADATA_VERSION_ACLS {
        return Err((
            error_code::UNSUPPORTED_VERSION,
            format!(
                "ACLs need metadata.version {} (the cluster is at {}): raise it with \
                 kafka-features.sh upgrade",
                metadata_version_name(METADATA_VERSION_ACLS),
                metadata_version_name(level)
            ),
        ));
    }
    Ok(())
}

/// A filter as DescribeAcls and DeleteAcls carry it.
pub fn filter(
    resource_type: i8,
    resource_name: Option<&str>,
    pattern_type: i8,
    principal: Option<&str>,
    host: Option<&str>,
    operation: i8,
    permission: i8,
) -> AclFilter {
    AclFilter {
        resource_type: ResourceType::from_wire(resource_type),
        resource_name: resource_name.map(str::to_string),
        pattern_type: PatternType::from_wire(pattern_type),
        principal: principal.map(str::to_string),
        host: host.map(str::to_string),
        operation: Operation::from_wire(operation),
        permission: Permission::from_wire(permission),
    }
}
