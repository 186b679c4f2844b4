//! DescribeCluster: the cluster id, the controller and the live brokers, from
//! the metadata image. The controller named is this broker, which forwards
//! every admin request to the metadata leader, as KRaft names a live broker so
//! that clients never need the quorum; asking for controllers (endpoint type 2)
//! lists the same nodes. As Kafka's broker answers (`AuthHelper.
//! computeDescribeClusterResponse`), anyone may ask: Describe on the cluster
//! only decides the authorized operations reported (none without it).

use kafka_protocol::messages::describe_cluster_response::DescribeClusterBroker;
use kafka_protocol::messages::{BrokerId, DescribeClusterRequest, DescribeClusterResponse};
use kafka_protocol::protocol::{StrBytes, VersionRange};

use super::common::{advertised_brokers, AUTHORIZED_OPERATIONS_OMITTED};
use crate::protocol::context::Cluster;
use crate::protocol::RequestContext;
use crate::security::acl::{Operation, ResourceType, CLUSTER_NAME};

pub const VERSIONS: VersionRange = VersionRange { min: 0, max: 2 };

pub async fn handle(
    cluster: &Cluster,
    ctx: &RequestContext,
    request: DescribeClusterRequest,
) -> DescribeClusterResponse {
    let image = cluster.image();
    let brokers = advertised_brokers(&image, cluster.node_id(), ctx)
        .into_iter()
        .map(|broker| {
            DescribeClusterBroker::default()
                .with_broker_id(BrokerId(broker.node_id))
                .with_host(broker.host)
                .with_port(broker.port)
                .with_rack(broker.rack)
        })
        .collect();
    DescribeClusterResponse::default()
        .with_endpoint_type(request.endpoint_type)
        .with_cluster_id(StrBytes::from_string(image.cluster_id.clone()))
        .with_controller_id(BrokerId(cluster.node_id()))
        .with_brokers(brokers)
        .with_cluster_authorized_operations(cluster_operations(
            ctx,
            request.include_cluster_authorized_operations,
        ))
}

/// KIP-430's bits for the cluster when asked for: 0 without Describe on it.
fn cluster_operations(ctx: &RequestContext, include: bool) -> i32 {
    if !include {
        AUTHORIZED_OPERATIONS_OMITTED
    } else if ctx.authorize_cluster(Operation::Describe) {
        ctx.access
            .authorized_operations(ctx.api_key, ResourceType::Cluster, CLUSTER_NAME)
    } else {
        0
    }
}
