//! ListPartitionReassignments (KIP-455): the partitions moving now, with their
//! replicas and the replicas being added and removed, from the metadata image
//! (every topic when none is named; a named partition not moving is left out,
//! as Kafka does). Needs Describe on the cluster, else the top-level
//! CLUSTER_AUTHORIZATION_FAILED and no partitions.

use kafka_protocol::messages::list_partition_reassignments_response::{
    OngoingPartitionReassignment, OngoingTopicReassignment,
};
use kafka_protocol::messages::{
    BrokerId, ListPartitionReassignmentsRequest, ListPartitionReassignmentsResponse,
};
use kafka_protocol::protocol::{StrBytes, VersionRange};

use crate::error_code;
use crate::protocol::context::Cluster;
use crate::protocol::RequestContext;
use crate::security::acl::Operation;

pub const VERSIONS: VersionRange = VersionRange { min: 0, max: 0 };

pub async fn handle(
    cluster: &Cluster,
    ctx: &RequestContext,
    request: ListPartitionReassignmentsRequest,
) -> ListPartitionReassignmentsResponse {
    if !ctx.authorize_cluster(Operation::Describe) {
        return ListPartitionReassignmentsResponse::default()
            .with_error_code(error_code::CLUSTER_AUTHORIZATION_FAILED)
            .with_error_message(Some(StrBytes::from_static_str(
                super::common::authorization_failed(error_code::CLUSTER_AUTHORIZATION_FAILED),
            )));
    }
    let image = cluster.image();
    let wanted: Option<Vec<(String, Vec<i32>)>> = request.topics.as_ref().map(|topics| {
        topics
            .iter()
            .map(|t| (t.name.0.to_string(), t.partition_indexes.clone()))
            .collect()
    });
    let ids = |ids: &[i32]| ids.iter().map(|id| BrokerId(*id)).collect::<Vec<_>>();
    let mut topics = Vec::new();
    for (name, topic) in &image.topics {
        let partitions_asked = match &wanted {
            None => None,
            Some(wanted) => match wanted.iter().find(|(n, _)| n == name) {
                Some((_, partitions)) => Some(partitions),
                None => continue,
            },
        };
        let ongoing: Vec<OngoingPartitionReassignment> = topic
            .partitions
            .iter()
            .filter(|p| !p.adding_replicas.is_empty() || !p.removing_replicas.is_empty())
            .filter(|p| partitions_asked.is_none_or(|asked| asked.contains(&p.partition_index)))
            .map(|p| {
                OngoingPartitionReassignment::default()
                    .with_partition_index(p.partition_index)
                    .with_replicas(ids(&p.replicas))
                    .with_adding_replicas(ids(&p.adding_replicas))
                    .with_removing_replicas(ids(&p.removing_replicas))
            })
            .collect();
        if !ongoing.is_empty() {
            topics.push(
                OngoingTopicReassignment::default()
                    .with_name(kafka_protocol::messages::TopicName(StrBytes::from_string(
                        name.clone(),
                    )))
                    .with_partitions(ongoing),
            );
        }
    }
    ListPartitionReassignmentsResponse::default().with_topics(topics)
}
