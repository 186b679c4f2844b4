//! ElectLeaders (KIP-460): preferred-leader election, or unclean election of
//! leaderless partitions, forwarded to the controller as one metadata command;
//! each partition answers on its own (ELECTION_NOT_NEEDED when it already has
//! the leader asked for, PREFERRED_LEADER_NOT_AVAILABLE when the preferred
//! replica is not a live ISR member, ELIGIBLE_LEADERS_NOT_AVAILABLE when no
//! live replica can lead). Null partitions means every partition. Needs
//! Alter on the cluster: else, as Kafka's controller answers, the top-level
//! error and every named partition's are CLUSTER_AUTHORIZATION_FAILED (v0
//! has no top-level code, so its partitions carry it).

use kafka_protocol::messages::elect_leaders_response::{PartitionResult, ReplicaElectionResult};
use kafka_protocol::messages::{ElectLeadersRequest, ElectLeadersResponse, TopicName};
use kafka_protocol::protocol::{StrBytes, VersionRange};

use super::common::propose;
use crate::controller::{CommandOutcome, MetadataCommand};
use crate::error_code;
use crate::protocol::context::Cluster;
use crate::protocol::RequestContext;
use crate::security::acl::Operation;

pub const VERSIONS: VersionRange = VersionRange { min: 0, max: 2 };

/// Kafka's ElectionType: PREFERRED (0) and UNCLEAN (1).
const ELECTION_PREFERRED: i8 = 0;
const ELECTION_UNCLEAN: i8 = 1;

/// From v1 the response has a top-level error code.
const TOP_LEVEL_ERROR_VERSION_MIN: i16 = 1;

pub async fn handle(
    cluster: &Cluster,
    ctx: &RequestContext,
    request: ElectLeadersRequest,
) -> ElectLeadersResponse {
    let response = elect(cluster, ctx, request).await;
    // v0 cannot carry a top-level code (the codec refuses one): every
    // partition carries the error already.
    if ctx.api_version < TOP_LEVEL_ERROR_VERSION_MIN {
        response.with_error_code(error_code::NONE)
    } else {
        response
    }
}

async fn elect(
    cluster: &Cluster,
    ctx: &RequestContext,
    request: ElectLeadersRequest,
) -> ElectLeadersResponse {
    let partitions: Option<Vec<(String, i32)>> = request.topic_partitions.as_ref().map(|topics| {
        topics
            .iter()
            .flat_map(|t| t.partitions.iter().map(|p| (t.topic.0.to_string(), *p)))
            .collect()
    });
    if !ctx.authorize_cluster(Operation::Alter) {
        return ElectLeadersResponse::default()
            .with_error_code(error_code::CLUSTER_AUTHORIZATION_FAILED)
            .with_replica_election_results(answer_all(
                partitions.unwrap_or_default(),
                error_code::CLUSTER_AUTHORIZATION_FAILED,
                Some(
                    super::common::authorization_failed(error_code::CLUSTER_AUTHORIZATION_FAILED)
                        .to_string(),
                ),
            ));
    }
    let unclean = match request.election_type {
        ELECTION_PREFERRED => false,
        ELECTION_UNCLEAN => true,
        other => {
            return ElectLeadersResponse::default()
                .with_error_code(error_code::INVALID_REQUEST)
                .with_replica_election_results(answer_all(
                    partitions.unwrap_or_default(),
                    error_code::INVALID_REQUEST,
                    Some(format!("Unknown election type {other}.")),
                ));
        }
    };
    let command = MetadataCommand::ElectLeaders {
        unclean,
        partitions: partitions.clone(),
    };
    match propose(cluster, command).await {
        Ok(CommandOutcome::Elected(results)) => ElectLeadersResponse::default()
            .with_replica_election_results(group_by_topic(
                results
                    .into_iter()
                    .map(|(topic, partition, code)| (topic, partition, code, None))
                    .collect(),
            )),
        Ok(other) => {
            tracing::error!(?other, "ElectLeaders applied with an unexpected outcome");
            ElectLeadersResponse::default().with_error_code(error_code::UNKNOWN_SERVER_ERROR)
        }
        Err((code, message)) => ElectLeadersResponse::default()
            .with_error_code(code)
            .with_replica_election_results(answer_all(
                partitions.unwrap_or_default(),
                code,
                Some(message),
            )),
    }
}

fn answer_all(
    partitions: Vec<(String, i32)>,
    code: i16,
    message: Option<String>,
) -> Vec<ReplicaElectionResult> {
    group_by_topic(
        partitions
            .into_iter()
            .map(|(topic, partition)| (topic, partition, code, message.clone()))
            .collect(),
    )
}

/// The response's per-topic results, topics in the order first named.
fn group_by_topic(results: Vec<(String, i32, i16, Option<String>)>) -> Vec<ReplicaElectionResult> {
    let mut topics: Vec<ReplicaElectionResult> = Vec::new();
    for (topic, partition, code, message) in results {
        let result = PartitionResult::default()
            .with_partition_id(partition)
            .with_error_code(code)
            .with_error_message(message.map(StrBytes::from_string));
        match topics.iter_mut().find(|t| t.topic.0.as_str() == topic) {
            Some(entry) => entry.partition_result.push(result),
            None => topics.push(
                ReplicaElectionResult::default()
                    .with_topic(TopicName(StrBytes::from_string(topic)))
                    .with_partition_result(vec![result]),
            ),
        }
    }
    topics
}
