//! AlterPartitionReassignments (KIP-455): move partitions to new replicas, or
//! cancel a move (null replicas), through the controller as one metadata
//! command; each partition answers on its own (INVALID_REPLICA_ASSIGNMENT for a
//! target that is empty, repeats a broker or names an unknown one,
//! NO_REASSIGNMENT_IN_PROGRESS for a cancel of a partition not moving, and from
//! v1 INVALID_REPLICATION_FACTOR for a target of another size when the request
//! does not allow it). The answer comes once the move has started: added
//! replicas then catch up, join the ISR, and the removed ones leave. Needs
//! Alter on the cluster: else, as Kafka's controller answers, the top-level
//! error and every partition's are CLUSTER_AUTHORIZATION_FAILED and nothing
//! moves.

use kafka_protocol::messages::alter_partition_reassignments_response::{
    ReassignablePartitionResponse, ReassignableTopicResponse,
};
use kafka_protocol::messages::{
    AlterPartitionReassignmentsRequest, AlterPartitionReassignmentsResponse, TopicName,
};
use kafka_protocol::protocol::{StrBytes, VersionRange};

use super::common::propose;
use crate::controller::{CommandOutcome, MetadataCommand};
use crate::error_code;
use crate::protocol::context::Cluster;
use crate::protocol::RequestContext;
use crate::security::acl::Operation;

pub const VERSIONS: VersionRange = VersionRange { min: 0, max: 1 };

/// From v1 a request may refuse a change of replication factor.
const REPLICATION_FACTOR_CHANGE_VERSION_MIN: i16 = 1;

pub async fn handle(
    cluster: &Cluster,
    ctx: &RequestContext,
    request: AlterPartitionReassignmentsRequest,
) -> AlterPartitionReassignmentsResponse {
    let reassignments: Vec<(String, i32, Option<Vec<i32>>)> = request
        .topics
        .iter()
        .flat_map(|topic| {
            topic.partitions.iter().map(|p| {
                let target = p
                    .replicas
                    .as_ref()
                    .map(|replicas| replicas.iter().map(|id| id.0).collect());
                (topic.name.0.to_string(), p.partition_index, target)
            })
        })
        .collect();
    let allow_replication_factor_change = ctx.api_version < REPLICATION_FACTOR_CHANGE_VERSION_MIN
        || request.allow_replication_factor_change;
    let wanted: Vec<(String, i32)> = reassignments
        .iter()
        .map(|(topic, partition, _)| (topic.clone(), *partition))
        .collect();
    let authorized = ctx.authorize_cluster(Operation::Alter);
    let command = MetadataCommand::AlterPartitionReassignments {
        reassignments,
        allow_replication_factor_change,
    };
    let outcome = if authorized {
        propose(cluster, command).await
    } else {
        Err((
            error_code::CLUSTER_AUTHORIZATION_FAILED,
            super::common::authorization_failed(error_code::CLUSTER_AUTHORIZATION_FAILED)
                .to_string(),
        ))
    };
    let results: Vec<(String, i32, i16, Option<String>)> = match outcome {
        Ok(CommandOutcome::Elected(results)) => results
            .into_iter()
            .map(|(topic, partition, code)| (topic, partition, code, None))
            .collect(),
        Ok(other) => {
            tracing::error!(?other, "a reassignment applied with an unexpected outcome");
            wanted
                .into_iter()
                .map(|(t, p)| (t, p, error_code::UNKNOWN_SERVER_ERROR, None))
                .collect()
        }
        Err((code, message)) => wanted
            .into_iter()
            .map(|(t, p)| (t, p, code, Some(message.clone())))
            .collect(),
    };
    let mut topics: Vec<ReassignableTopicResponse> = Vec::new();
    for (topic, partition, code, message) in results {
        let answer = ReassignablePartitionResponse::default()
            .with_partition_index(partition)
            .with_error_code(code)
            .with_error_message(message.map(StrBytes::from_string));
        match topics.iter_mut().find(|t| t.name.0.as_str() == topic) {
            Some(entry) => entry.partitions.push(answer),
            None => topics.push(
                ReassignableTopicResponse::default()
                    .with_name(TopicName(StrBytes::from_string(topic)))
                    .with_partitions(vec![answer]),
            ),
        }
    }
    let response = AlterPartitionReassignmentsResponse::default()
        .with_allow_replication_factor_change(allow_replication_factor_change)
        .with_responses(topics);
    if authorized {
        response
    } else {
        response
            .with_error_code(error_code::CLUSTER_AUTHORIZATION_FAILED)
            .with_error_message(Some(StrBytes::from_static_str(
                super::common::authorization_failed(error_code::CLUSTER_AUTHORIZATION_FAILED),
            )))
    }
}
