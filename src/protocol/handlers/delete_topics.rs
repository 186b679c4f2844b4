//! DeleteTopics, by name (all versions) or by topic id (v6+). The controller
//! removes the topic from the image; the broker then deletes its logs. Each
//! topic needs Delete on it; as Kafka's controller answers, a topic the
//! principal may not Describe is TOPIC_AUTHORIZATION_FAILED whether or not it
//! exists (and one named by id keeps its name hidden), so that existence
//! does not leak.

use kafka_protocol::messages::delete_topics_response::DeletableTopicResult;
use kafka_protocol::messages::{DeleteTopicsRequest, DeleteTopicsResponse, TopicName};
use kafka_protocol::protocol::{StrBytes, VersionRange};

use super::common::{message, propose, Rejection};
use crate::controller::MetadataCommand;
use crate::error_code;
use crate::protocol::context::Cluster;
use crate::protocol::RequestContext;
use crate::security::acl::{Operation, ResourceType};

/// The versions below the current codec's oldest are read by `old_versions` and
/// reach this handler at that oldest (bridge) version.
pub const VERSIONS: VersionRange = VersionRange { min: 0, max: 6 };

/// From v6 topics may be named by id.
const TOPIC_STATE_VERSION_MIN: i16 = 6;

pub async fn handle(
    cluster: &Cluster,
    ctx: &RequestContext,
    request: DeleteTopicsRequest,
) -> DeleteTopicsResponse {
    let wanted: Vec<(Option<TopicName>, uuid::Uuid)> = if ctx.api_version >= TOPIC_STATE_VERSION_MIN
    {
        request
            .topics
            .iter()
            .map(|t| (t.name.clone(), t.topic_id))
            .collect()
    } else {
        request
            .topic_names
            .iter()
            .map(|n| (Some(n.clone()), uuid::Uuid::nil()))
            .collect()
    };
    let mut responses = Vec::with_capacity(wanted.len());
    for (index, (name, topic_id)) in wanted.iter().enumerate() {
        let result = DeletableTopicResult::default()
            .with_name(name.clone())
            .with_topic_id(*topic_id);
        let duplicate = wanted
            .iter()
            .enumerate()
            .any(|(other, w)| other != index && w == &wanted[index]);
        let outcome = if duplicate {
            Err(Refusal::Plain((
                error_code::INVALID_REQUEST,
                "Duplicate topic in request.".to_string(),
            )))
        } else {
            delete(cluster, ctx, name.as_ref(), *topic_id).await
        };
        responses.push(match outcome {
            Ok((name, topic_id)) => result
                .with_name(Some(TopicName(StrBytes::from_string(name))))
                .with_topic_id(topic_id),
            Err(Refusal::Shown(name, (code, text))) => result
                .with_name(Some(TopicName(StrBytes::from_string(name))))
                .with_error_code(code)
                .with_error_message(message(text)),
            Err(Refusal::Plain((code, text))) => result
                .with_error_code(code)
                .with_error_message(message(text)),
        });
    }
    DeleteTopicsResponse::default().with_responses(responses)
}

/// Why a topic was not deleted: the rejection alone, or with the topic's
/// name when it was named by id and the principal may Describe it.
enum Refusal {
    Plain(Rejection),
    Shown(String, Rejection),
}

fn unauthorized() -> Rejection {
    (
        error_code::TOPIC_AUTHORIZATION_FAILED,
        super::common::authorization_failed(error_code::TOPIC_AUTHORIZATION_FAILED).to_string(),
    )
}

async fn delete(
    cluster: &Cluster,
    ctx: &RequestContext,
    name: Option<&TopicName>,
    topic_id: uuid::Uuid,
) -> Result<(String, uuid::Uuid), Refusal> {
    let image = cluster.image();
    // Delete on the cluster allows every topic, as Kafka's controller has it.
    let cluster_wide = ctx.authorize_cluster_quietly(Operation::Delete);
    let may_describe =
        |name: &str| cluster_wide || ctx.authorize(Operation::Describe, ResourceType::Topic, name);
    let may_delete =
        |name: &str| cluster_wide || ctx.authorize(Operation::Delete, ResourceType::Topic, name);
    let topic = match (name, topic_id.is_nil()) {
        (Some(_), false) => {
            return Err(Refusal::Plain((
                error_code::INVALID_REQUEST,
                "Topic name and topic id cannot both be set.".to_string(),
            )))
        }
        (Some(name), true) => {
            // Describe first: an unknown topic the principal may not see is
            // refused like a known one.
            if !may_describe(&name.0) {
                return Err(Refusal::Plain(unauthorized()));
            }
            let topic = image.topics.get(name.0.as_str()).ok_or(Refusal::Plain((
                error_code::UNKNOWN_TOPIC_OR_PARTITION,
                "This server does not host this topic-partition.".to_string(),
            )))?;
            if !may_delete(&topic.name) {
                return Err(Refusal::Plain(unauthorized()));
            }
            topic
        }
        (None, false) => {
            let topic = image
                .topic_names_by_id
                .get(&topic_id)
                .and_then(|name| image.topics.get(name))
                .ok_or(Refusal::Plain((
                    error_code::UNKNOWN_TOPIC_ID,
                    "This server does not host this topic ID.".to_string(),
                )))?;
            if !may_delete(&topic.name) {
                return Err(if may_describe(&topic.name) {
                    Refusal::Shown(topic.name.clone(), unauthorized())
                } else {
                    Refusal::Plain(unauthorized())
                });
            }
            topic
        }
        (None, true) => {
            return Err(Refusal::Plain((
                error_code::INVALID_REQUEST,
                "Neither topic name nor id was set.".to_string(),
            )))
        }
    };
    let command = MetadataCommand::DeleteTopic {
        topic_id: topic.topic_id,
    };
    propose(cluster, command)
        .await
        .map(|_| (topic.name.clone(), topic.topic_id))
        .map_err(Refusal::Plain)
}
