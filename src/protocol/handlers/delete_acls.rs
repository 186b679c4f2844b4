//! DeleteAcls (KIP-140; PREFIXED, ANY and MATCH filters from v1, KIP-290),
//! as `kafka-acls.sh --remove` sends it: every binding each filter matches
//! is removed in one metadata record, matched where that record lands in
//! the log (so a binding created just before is matched too); each filter's
//! answer lists the bindings it removed. A filter with an unknown field is
//! refused alone (INVALID_REQUEST). Needs Alter on the cluster; without an
//! authorizer, SECURITY_DISABLED.

use kafka_protocol::messages::delete_acls_response::{
    DeleteAclsFilterResult, DeleteAclsMatchingAcl,
};
use kafka_protocol::messages::{DeleteAclsRequest, DeleteAclsResponse};
use kafka_protocol::protocol::{StrBytes, VersionRange};

use super::acls_common::{acl_api_refusal, acls_need_level, filter};
use super::common::{message, propose};
use crate::controller::features::METADATA_VERSION_ACLS;
use crate::controller::{CommandOutcome, MetadataCommand};
use crate::error_code;
use crate::protocol::context::Cluster;
use crate::protocol::RequestContext;
use crate::security::acl::{AclBinding, Operation};

/// v0 is read through `old_versions` (Kafka 4 removed it).
pub const VERSIONS: VersionRange = VersionRange { min: 0, max: 3 };

pub async fn handle(
    cluster: &Cluster,
    ctx: &RequestContext,
    request: DeleteAclsRequest,
) -> DeleteAclsResponse {
    let failed = |code: i16, text: &str| {
        DeleteAclsFilterResult::default()
            .with_error_code(code)
            .with_error_message(message(text))
    };
    if let Some((code, text)) = acl_api_refusal(ctx, Operation::Alter) {
        return DeleteAclsResponse::default().with_filter_results(
            request
                .filters
                .iter()
                .map(|_| failed(code, &text))
                .collect(),
        );
    }
    let filters: Vec<_> = request
        .filters
        .iter()
        .map(|f| {
            filter(
                f.resource_type_filter,
                f.resource_name_filter.as_deref(),
                f.pattern_type_filter,
                f.principal_filter.as_deref(),
                f.host_filter.as_deref(),
                f.operation,
                f.permission_type,
            )
        })
        .collect();
    let mut results: Vec<Option<DeleteAclsFilterResult>> = filters
        .iter()
        .map(|f| {
            f.invalid()
                .map(|why| failed(error_code::INVALID_REQUEST, &why))
        })
        .collect();
    let valid: Vec<_> = filters
        .iter()
        .zip(&results)
        .filter(|(_, result)| result.is_none())
        .map(|(f, _)| f.clone())
        .collect();
    if !valid.is_empty() {
        let deleted = match acls_need_level(cluster) {
            Err(refusal) => Err(refusal),
            Ok(()) => match propose(
                cluster,
                MetadataCommand::DeleteAcls {
                    metadata_version: METADATA_VERSION_ACLS,
                    filters: valid,
                },
            )
            .await
            {
                Ok(CommandOutcome::AclsDeleted(Ok(removed))) => Ok(removed),
                Ok(CommandOutcome::AclsDeleted(Err(why))) => {
                    Err((error_code::INVALID_REQUEST, why))
                }
                Ok(other) => Err((
                    error_code::UNKNOWN_SERVER_ERROR,
                    format!("DeleteAcls applied with an unexpected outcome: {other:?}"),
                )),
                Err(rejection) => Err(rejection),
            },
        };
        // One answer per valid filter, in order: the bindings it removed, or
        // the whole request's failure.
        let unanswered = results.iter_mut().filter(|r| r.is_none());
        match &deleted {
            Ok(removed) => {
                for (result, bindings) in unanswered.zip(removed) {
                    *result = Some(
                        DeleteAclsFilterResult::default()
                            .with_error_message(None)
                            .with_matching_acls(bindings.iter().map(matching).collect()),
                    );
                }
            }
            Err((code, text)) => {
                for result in unanswered {
                    *result = Some(failed(*code, text));
                }
            }
        }
    }
    DeleteAclsResponse::default().with_filter_results(results.into_iter().flatten().collect())
}

fn matching(binding: &AclBinding) -> DeleteAclsMatchingAcl {
    DeleteAclsMatchingAcl::default()
        .with_error_message(None)
        .with_resource_type(binding.resource_type.code())
        .with_resource_name(StrBytes::from_string(binding.resource_name.clone()))
        .with_pattern_type(binding.pattern_type.code())
        .with_principal(StrBytes::from_string(binding.principal.clone()))
        .with_host(StrBytes::from_string(binding.host.clone()))
        .with_operation(binding.operation.code())
        .with_permission_type(binding.permission.code())
}
