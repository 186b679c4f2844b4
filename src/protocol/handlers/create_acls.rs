//! CreateAcls (KIP-140; PREFIXED patterns from v1, KIP-290), as
//! `kafka-acls.sh --add` and every admin client send it: each binding is
//! checked as Kafka checks it (`AclBinding::invalid`: INVALID_REQUEST for
//! that binding alone), and the valid ones are written to the metadata log
//! together, each under a fresh id; a binding that exists already counts as
//! created. Needs Alter on the cluster; without an authorizer every binding
//! gets SECURITY_DISABLED, as Kafka answers.

use kafka_protocol::messages::create_acls_response::AclCreationResult;
use kafka_protocol::messages::{CreateAclsRequest, CreateAclsResponse};
use kafka_protocol::protocol::VersionRange;

use super::acls_common::{acl_api_refusal, acls_need_level};
use super::common::{message, propose};
use crate::controller::features::METADATA_VERSION_ACLS;
use crate::controller::MetadataCommand;
use crate::error_code;
use crate::limits::ACL_CHANGES_PER_REQUEST_MAX;
use crate::protocol::context::Cluster;
use crate::protocol::RequestContext;
use crate::security::acl::{AclBinding, Operation, PatternType, Permission, ResourceType};

/// v0 is read through `old_versions` (Kafka 4 removed it).
pub const VERSIONS: VersionRange = VersionRange { min: 0, max: 3 };

pub async fn handle(
    cluster: &Cluster,
    ctx: &RequestContext,
    request: CreateAclsRequest,
) -> CreateAclsResponse {
    let count = request.creations.len();
    let every = |code: i16, text: String| {
        CreateAclsResponse::default().with_results(
            (0..count)
                .map(|_| result(code, Some(text.clone())))
                .collect(),
        )
    };
    if let Some((code, text)) = acl_api_refusal(ctx, Operation::Alter) {
        return every(code, text);
    }
    if count > ACL_CHANGES_PER_REQUEST_MAX {
        return every(
            error_code::INVALID_REQUEST,
            format!("a request may create at most {ACL_CHANGES_PER_REQUEST_MAX} ACLs"),
        );
    }
    let mut verdicts: Vec<Option<(i16, String)>> = Vec::with_capacity(count);
    let mut bindings = Vec::new();
    for creation in &request.creations {
        let binding = AclBinding {
            resource_type: ResourceType::from_wire(creation.resource_type),
            resource_name: creation.resource_name.to_string(),
            pattern_type: PatternType::from_wire(creation.resource_pattern_type),
            principal: creation.principal.to_string(),
            host: creation.host.to_string(),
            operation: Operation::from_wire(creation.operation),
            permission: Permission::from_wire(creation.permission_type),
        };
        match binding.invalid() {
            Some(why) => verdicts.push(Some((error_code::INVALID_REQUEST, why))),
            None => {
                verdicts.push(None);
                bindings.push((cluster.next_id(), binding));
            }
        }
    }
    if !bindings.is_empty() {
        let written = match acls_need_level(cluster) {
            Err(refusal) => Err(refusal),
            Ok(()) => propose(
                cluster,
                MetadataCommand::CreateAcls {
                    metadata_version: METADATA_VERSION_ACLS,
                    bindings,
                },
            )
            .await
            .map(|_| ()),
        };
        if let Err((code, text)) = written {
            for verdict in verdicts.iter_mut().filter(|v| v.is_none()) {
                *verdict = Some((code, text.clone()));
            }
        }
    }
    CreateAclsResponse::default().with_results(
        verdicts
            .into_iter()
            .map(|verdict| match verdict {
                None => result(error_code::NONE, None),
                Some((code, text)) => result(code, Some(text)),
            })
            .collect(),
    )
}

fn result(code: i16, text: Option<String>) -> AclCreationResult {
    AclCreationResult::default()
        .with_error_code(code)
        .with_error_message(text.and_then(message))
}
