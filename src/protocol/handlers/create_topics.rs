//! CreateTopics: validated here (names, counts, replication factor, configs)
//! and committed through the controller, which rejects duplicates atomically.
//! Each topic needs Create on the cluster or on the topic (else
//! TOPIC_AUTHORIZATION_FAILED, nothing created); a created topic's configs
//! are returned only with DescribeConfigs on it, as Kafka's controller does.

use std::collections::BTreeMap;

use kafka_protocol::messages::create_topics_request::CreatableTopic;
use kafka_protocol::messages::create_topics_response::{
    CreatableTopicConfigs, CreatableTopicResult,
};
use kafka_protocol::messages::{CreateTopicsRequest, CreateTopicsResponse};
use kafka_protocol::protocol::{StrBytes, VersionRange};

use super::common::{message, propose, validate_topic_name, Rejection};
use crate::controller::{CommandOutcome, MetadataCommand};
use crate::error_code;
use crate::limits::PARTITIONS_PER_TOPIC_MAX;
use crate::protocol::context::Cluster;
use crate::protocol::RequestContext;
use crate::security::acl::{Operation, ResourceType};
use crate::topic_config;

/// The versions below the current codec's oldest are read by `old_versions` and
/// reach this handler at that oldest (bridge) version.
pub const VERSIONS: VersionRange = VersionRange { min: 0, max: 7 };

/// Commits a new topic; shared with Metadata's auto-creation. `assignments` empty:
/// the controller places the replicas.
pub async fn create(
    cluster: &Cluster,
    name: &str,
    partitions: i32,
    replication_factor: i16,
    configs: BTreeMap<String, String>,
    assignments: Vec<Vec<i32>>,
) -> Result<uuid::Uuid, Rejection> {
    let command = MetadataCommand::CreateTopic {
        name: name.to_string(),
        topic_id: cluster.next_id(),
        partitions,
        replication_factor,
        configs,
        assignments,
    };
    match propose(cluster, command).await? {
        CommandOutcome::TopicCreated { topic_id } => Ok(topic_id),
        other => Err((
            error_code::UNKNOWN_SERVER_ERROR,
            format!("unexpected outcome {other:?}"),
        )),
    }
}

/// What a valid request asks for, with defaults applied.
struct Plan {
    partitions: i32,
    replication_factor: i16,
    configs: BTreeMap<String, String>,
    /// The client's replica assignment, honoured as given (empty: none was given).
    assignments: Vec<Vec<i32>>,
}

fn plan(cluster: &Cluster, topic: &CreatableTopic) -> Result<Plan, Rejection> {
    let name = topic.name.0.as_str();
    validate_topic_name(name).map_err(|m| (error_code::INVALID_TOPIC_EXCEPTION, m))?;
    let broker_count = cluster.image().live_brokers().count().max(1);
    let (partitions, replication_factor) = if topic.assignments.is_empty() {
        let partitions = match topic.num_partitions {
            -1 => cluster.default_partitions(),
            n if n < 1 => {
                return Err((
                    error_code::INVALID_PARTITIONS,
                    "Number of partitions must be larger than 0.".to_string(),
                ))
            }
            n => n,
        };
        let replication_factor = match topic.replication_factor {
            -1 => cluster.default_replication_factor(),
            n if n < 1 => {
                return Err((
                    error_code::INVALID_REPLICATION_FACTOR,
                    "Replication factor must be larger than 0.".to_string(),
                ))
            }
            n => n,
        };
        (partitions, replication_factor)
    } else {
        if topic.num_partitions != -1 || topic.replication_factor != -1 {
            return Err((
                error_code::INVALID_REQUEST,
                "Both numPartitions or replicationFactor and replicasAssignments were set. Both cannot be used at the same time.".to_string(),
            ));
        }
        let image = cluster.image();
        let width = topic.assignments[0].broker_ids.len();
        for (index, assignment) in topic.assignments.iter().enumerate() {
            let in_order = assignment.partition_index == index as i32;
            let known = !assignment.broker_ids.is_empty()
                && assignment
                    .broker_ids
                    .iter()
                    .all(|id| image.brokers.contains_key(&id.0));
            let mut seen = std::collections::BTreeSet::new();
            let distinct = assignment.broker_ids.iter().all(|id| seen.insert(id.0));
            if !in_order || !known || !distinct || assignment.broker_ids.len() != width {
                return Err((
                    error_code::INVALID_REPLICA_ASSIGNMENT,
                    format!(
                        "Invalid replica assignment for partition {}",
                        assignment.partition_index
                    ),
                ));
            }
        }
        let replication_factor = topic.assignments[0].broker_ids.len() as i16;
        (topic.assignments.len() as i32, replication_factor)
    };
    if partitions > PARTITIONS_PER_TOPIC_MAX {
        return Err((
            error_code::INVALID_PARTITIONS,
            format!("Number of partitions must be at most {PARTITIONS_PER_TOPIC_MAX}."),
        ));
    }
    if replication_factor as usize > broker_count {
        return Err((
            error_code::INVALID_REPLICATION_FACTOR,
            format!(
                "Unable to replicate the partition {replication_factor} time(s): The target replication factor of {replication_factor} cannot be reached because only {broker_count} broker(s) are registered."
            ),
        ));
    }
    let mut configs = BTreeMap::new();
    for config in &topic.configs {
        if let Some(value) = &config.value {
            configs.insert(config.name.to_string(), value.to_string());
        }
    }
    topic_config::validate_topic_configs(configs.iter().map(|(k, v)| (k.as_str(), v.as_str())))
        .map_err(|m| (error_code::INVALID_CONFIG, m))?;
    let assignments = topic
        .assignments
        .iter()
        .map(|a| a.broker_ids.iter().map(|id| id.0).collect())
        .collect();
    Ok(Plan {
        partitions,
        replication_factor,
        configs,
        assignments,
    })
}

fn described_configs(
    cluster: &Cluster,
    overrides: &BTreeMap<String, String>,
) -> Vec<CreatableTopicConfigs> {
    let image = cluster.image();
    topic_config::resolve_all(overrides, &image.broker_configs, cluster.broker_config())
        .into_iter()
        .map(|(def, resolved)| {
            CreatableTopicConfigs::default()
                .with_name(StrBytes::from_static_str(def.name))
                .with_value(Some(StrBytes::from_string(resolved.value)))
                .with_read_only(false)
                .with_config_source(resolved.source)
                .with_is_sensitive(false)
        })
        .collect()
}

pub async fn handle(
    cluster: &Cluster,
    ctx: &RequestContext,
    request: CreateTopicsRequest,
) -> CreateTopicsResponse {
    // Create on the cluster covers every topic (asked once, as Kafka does).
    let may_create_any = ctx.authorize_cluster_quietly(Operation::Create);
    let mut results = Vec::with_capacity(request.topics.len());
    for (index, topic) in request.topics.iter().enumerate() {
        let name = topic.name.clone();
        let result = CreatableTopicResult::default().with_name(name.clone());
        let duplicate = request
            .topics
            .iter()
            .enumerate()
            .any(|(other, t)| other != index && t.name == name);
        if duplicate {
            results.push(
                result
                    .with_error_code(error_code::INVALID_REQUEST)
                    .with_error_message(message(format!(
                        "Create topics request from client contains a duplicate topic name: {}",
                        name.0
                    )))
                    .with_num_partitions(-1)
                    .with_replication_factor(-1),
            );
            continue;
        }
        if !may_create_any && !ctx.authorize(Operation::Create, ResourceType::Topic, &name.0) {
            results.push(
                result
                    .with_error_code(error_code::TOPIC_AUTHORIZATION_FAILED)
                    .with_error_message(message("Authorization failed."))
                    .with_num_partitions(-1)
                    .with_replication_factor(-1),
            );
            continue;
        }
        let outcome = match plan(cluster, topic) {
            Err(rejection) => Err(rejection),
            Ok(plan) if request.validate_only => {
                if cluster.image().topics.contains_key(name.0.as_str()) {
                    Err((
                        error_code::TOPIC_ALREADY_EXISTS,
                        format!("Topic '{}' already exists.", name.0),
                    ))
                } else {
                    Ok((uuid::Uuid::nil(), plan))
                }
            }
            Ok(plan) => create(
                cluster,
                &name.0,
                plan.partitions,
                plan.replication_factor,
                plan.configs.clone(),
                plan.assignments.clone(),
            )
            .await
            .map(|topic_id| (topic_id, plan)),
        };
        results.push(match outcome {
            // Without DescribeConfigs on the topic Kafka returns its id alone:
            // no counts, no configs, and the config error.
            Ok((topic_id, _))
                if !ctx.authorize(Operation::DescribeConfigs, ResourceType::Topic, &name.0) =>
            {
                result
                    .with_topic_id(topic_id)
                    .with_num_partitions(-1)
                    .with_replication_factor(-1)
                    .with_configs(Some(Vec::new()))
                    .with_topic_config_error_code(error_code::TOPIC_AUTHORIZATION_FAILED)
            }
            Ok((topic_id, plan)) => result
                .with_topic_id(topic_id)
                .with_num_partitions(plan.partitions)
                .with_replication_factor(plan.replication_factor)
                .with_configs(Some(described_configs(cluster, &plan.configs))),
            Err((code, text)) => result
                .with_error_code(code)
                .with_error_message(message(text))
                .with_num_partitions(-1)
                .with_replication_factor(-1),
        });
    }
    CreateTopicsResponse::default().with_topics(results)
}
