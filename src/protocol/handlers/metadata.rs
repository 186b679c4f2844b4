//! Metadata: brokers, topics and partition leaders, answered from the in-memory
//! metadata image (never waiting on raft), with auto-creation of requested
//! topics when both the broker and the client allow it.
//!
//! Authorization as Kafka's: a listing of every topic leaves out those the
//! principal may not Describe; a topic asked for by name or id without
//! Describe is TOPIC_AUTHORIZATION_FAILED (whether or not it exists), and
//! auto-creation needs Create on the cluster or on the topic (else
//! TOPIC_AUTHORIZATION_FAILED). Authorized operations (KIP-430) are the
//! authorizer's answer for each operation that applies.

use kafka_protocol::messages::metadata_response::{
    MetadataResponseBroker, MetadataResponsePartition, MetadataResponseTopic,
};
use kafka_protocol::messages::{BrokerId, MetadataRequest, MetadataResponse, TopicName};
use kafka_protocol::protocol::{StrBytes, VersionRange};

use super::common::{advertised_brokers, validate_topic_name, AUTHORIZED_OPERATIONS_OMITTED};
use super::create_topics;
use crate::controller::{MetadataImage, TopicImage};
use crate::error_code;
use crate::internal_topics::is_internal_topic;
use crate::protocol::context::Cluster;
use crate::protocol::RequestContext;
use crate::security::acl::{Operation, ResourceType, CLUSTER_NAME};

pub const VERSIONS: VersionRange = VersionRange { min: 0, max: 13 };

pub async fn handle(
    cluster: &Cluster,
    ctx: &RequestContext,
    request: MetadataRequest,
) -> MetadataResponse {
    let version = ctx.api_version;
    // v0 has no null: an empty list means every topic.
    let requested = match request.topics {
        Some(topics) if version == 0 && topics.is_empty() => None,
        other => other,
    };
    let allow_auto_create =
        (version < 4 || request.allow_auto_topic_creation) && cluster.auto_create_topics();
    let mut topics = Vec::new();
    match requested {
        None => {
            let image = cluster.image();
            topics.extend(
                image
                    .topics
                    .values()
                    .filter(|t| {
                        ctx.authorize_quietly(Operation::Describe, ResourceType::Topic, &t.name)
                    })
                    .map(|t| topic_metadata(ctx, t, request.include_topic_authorized_operations)),
            );
        }
        Some(requested) => {
            for wanted in requested {
                topics.push(
                    requested_topic(
                        cluster,
                        ctx,
                        wanted,
                        allow_auto_create,
                        request.include_topic_authorized_operations,
                    )
                    .await,
                );
            }
        }
    }
    let image = cluster.image();
    let cluster_operations = if request.include_cluster_authorized_operations {
        ctx.access
            .authorized_operations(ctx.api_key, ResourceType::Cluster, CLUSTER_NAME)
    } else {
        AUTHORIZED_OPERATIONS_OMITTED
    };
    MetadataResponse::default()
        .with_brokers(brokers(&image, cluster.node_id(), ctx))
        .with_cluster_id(Some(StrBytes::from_string(image.cluster_id.clone())))
        .with_controller_id(BrokerId(cluster.node_id()))
        .with_topics(topics)
        .with_cluster_authorized_operations(cluster_operations)
}

async fn requested_topic(
    cluster: &Cluster,
    ctx: &RequestContext,
    wanted: kafka_protocol::messages::metadata_request::MetadataRequestTopic,
    allow_auto_create: bool,
    include_operations: bool,
) -> MetadataResponseTopic {
    let image = cluster.image();
    let may_describe = |name: &str| ctx.authorize(Operation::Describe, ResourceType::Topic, name);
    let Some(name) = wanted.name.as_ref().map(|n| n.0.to_string()) else {
        return match image
            .topic_names_by_id
            .get(&wanted.topic_id)
            .and_then(|n| image.topics.get(n))
        {
            Some(topic) if !may_describe(&topic.name) => MetadataResponseTopic::default()
                .with_error_code(error_code::TOPIC_AUTHORIZATION_FAILED)
                .with_topic_id(wanted.topic_id)
                .with_name(None),
            Some(topic) => topic_metadata(ctx, topic, include_operations),
            None => MetadataResponseTopic::default()
                .with_error_code(error_code::UNKNOWN_TOPIC_ID)
                .with_topic_id(wanted.topic_id)
                .with_name(None),
        };
    };
    let unknown = |code| {
        MetadataResponseTopic::default()
            .with_error_code(code)
            .with_name(Some(TopicName(StrBytes::from_string(name.clone()))))
    };
    if !may_describe(&name) {
        return unknown(error_code::TOPIC_AUTHORIZATION_FAILED);
    }
    if let Some(topic) = image.topics.get(&name) {
        return topic_metadata(ctx, topic, include_operations);
    }
    if validate_topic_name(&name).is_err() {
        return unknown(error_code::INVALID_TOPIC_EXCEPTION);
    }
    if !allow_auto_create {
        return unknown(error_code::UNKNOWN_TOPIC_OR_PARTITION);
    }
    if !ctx.authorize_cluster_quietly(Operation::Create)
        && !ctx.authorize(Operation::Create, ResourceType::Topic, &name)
    {
        return unknown(error_code::TOPIC_AUTHORIZATION_FAILED);
    }
    let partitions = cluster.default_partitions();
    match create_topics::create(
        cluster,
        &name,
        partitions,
        cluster.default_replication_factor(),
        Default::default(),
        Vec::new(),
    )
    .await
    {
        Ok(_) | Err((error_code::TOPIC_ALREADY_EXISTS, _)) => {
            match cluster.image().topics.get(&name) {
                Some(topic) => topic_metadata(ctx, topic, include_operations),
                None => unknown(error_code::LEADER_NOT_AVAILABLE),
            }
        }
        Err((code, message)) => {
            tracing::warn!(topic = %name, code, %message, "auto-creating a topic failed");
            unknown(error_code::LEADER_NOT_AVAILABLE)
        }
    }
}

fn brokers(
    image: &MetadataImage,
    own_node_id: i32,
    ctx: &RequestContext,
) -> Vec<MetadataResponseBroker> {
    advertised_brokers(image, own_node_id, ctx)
        .into_iter()
        .map(|broker| {
            MetadataResponseBroker::default()
                .with_node_id(BrokerId(broker.node_id))
                .with_host(broker.host)
                .with_port(broker.port)
                .with_rack(broker.rack)
        })
        .collect()
}

fn topic_metadata(
    ctx: &RequestContext,
    topic: &TopicImage,
    include_operations: bool,
) -> MetadataResponseTopic {
    let partitions = topic
        .partitions
        .iter()
        .map(|p| {
            MetadataResponsePartition::default()
                .with_partition_index(p.partition_index)
                .with_leader_id(BrokerId(p.leader_id))
                .with_leader_epoch(p.leader_epoch.get())
                .with_replica_nodes(p.replicas.iter().copied().map(BrokerId).collect())
                .with_isr_nodes(p.isr.iter().copied().map(BrokerId).collect())
        })
        .collect();
    MetadataResponseTopic::default()
        .with_name(Some(TopicName(StrBytes::from_string(topic.name.clone()))))
        .with_topic_id(topic.topic_id)
        .with_is_internal(is_internal_topic(&topic.name))
        .with_partitions(partitions)
        .with_topic_authorized_operations(if include_operations {
            ctx.access
                .authorized_operations(ctx.api_key, ResourceType::Topic, &topic.name)
        } else {
            AUTHORIZED_OPERATIONS_OMITTED
        })
}
