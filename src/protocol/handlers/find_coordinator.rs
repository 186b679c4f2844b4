//! FindCoordinator: which broker coordinates a group or a transactional id. A
//! group maps to a partition of the offsets topic by Kafka's rule (Java
//! hashCode of the group id modulo the partition count), a transactional id to
//! a partition of the transaction log the same way; the coordinator is that
//! partition's leader, which loads the partition's groups or transactions when
//! elected. On one node that is always this broker.

use kafka_protocol::messages::find_coordinator_response::Coordinator;
use kafka_protocol::messages::{BrokerId, FindCoordinatorRequest, FindCoordinatorResponse};
use kafka_protocol::protocol::{StrBytes, VersionRange};

use std::collections::BTreeMap;

use super::common::Rejection;
use super::create_topics;
use crate::error_code;
use crate::internal_topics::{
    group_partition, txn_partition, OFFSETS_TOPIC_NAME, OFFSETS_TOPIC_PARTITIONS,
    TRANSACTION_STATE_TOPIC_NAME,
};
use crate::limits::FIND_COORDINATOR_LOAD_WAIT_MS;
use crate::protocol::context::{Cluster, Coordinators};
use crate::protocol::RequestContext;
use crate::security::acl::{Operation, ResourceType};

pub const VERSIONS: VersionRange = VersionRange { min: 0, max: 6 };

/// From v4 several keys are asked in one request (KIP-699).
const BATCHED_VERSION_MIN: i16 = 4;
/// Kafka's CoordinatorType: GROUP.
const KEY_TYPE_GROUP: i8 = 0;
/// Kafka's CoordinatorType: TRANSACTION.
const KEY_TYPE_TRANSACTION: i8 = 1;

/// (error, message, node id, host, port) for one key.
type Found = (i16, Option<String>, i32, String, i32);

/// A key answered `error` with `message` and no coordinator.
fn no_coordinator(error: i16, message: Option<String>) -> Found {
    (error, message, -1, String::new(), -1)
}

/// Kafka's check before anything else of a key: Describe on the group or
/// the transactional id, else that key's authorization error and no
/// coordinator (and the internal topic is not created for it).
fn refused(ctx: &RequestContext, key: &str, key_type: i8) -> Option<i16> {
    let (resource_type, refusal) = match key_type {
        KEY_TYPE_GROUP => (ResourceType::Group, error_code::GROUP_AUTHORIZATION_FAILED),
        KEY_TYPE_TRANSACTION => (
            ResourceType::TransactionalId,
            error_code::TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
        ),
        _ => return None,
    };
    (!ctx.authorize(Operation::Describe, resource_type, key)).then_some(refusal)
}

/// A refused key's answer: before v4 with Kafka's message of the error
/// (`Errors.message`), from v4 without one, as Kafka answers.
fn refusal(ctx: &RequestContext, code: i16) -> Found {
    let message = (ctx.api_version < BATCHED_VERSION_MIN)
        .then(|| super::common::authorization_failed(code).to_string());
    no_coordinator(code, message)
}

async fn coordinator_for(
    coordinators: &Coordinators,
    ctx: &RequestContext,
    key: &str,
    key_type: i8,
    load_deadline: tokio::time::Instant,
    just_created: bool,
) -> Found {
    let what = match key_type {
        KEY_TYPE_GROUP => "Group id",
        KEY_TYPE_TRANSACTION => "Transactional id",
        _ => {
            return no_coordinator(
                error_code::INVALID_REQUEST,
                Some(format!("Unknown coordinator type {key_type}.")),
            )
        }
    };
    if key.is_empty() {
        return no_coordinator(
            error_code::INVALID_REQUEST,
            Some(format!("{what} must not be empty.")),
        );
    }
    let image = coordinators.image();
    let own = coordinators.node_id();
    // The leader of the key's partition of its internal topic.
    let (topic, partition) = if key_type == KEY_TYPE_GROUP {
        (OFFSETS_TOPIC_NAME, group_partition(key))
    } else {
        (TRANSACTION_STATE_TOPIC_NAME, txn_partition(key))
    };
    let leader = image
        .partition(topic, partition)
        .map(|p| p.leader_id)
        .filter(|leader| *leader >= 0);
    let Some(chosen) = leader else {
        return no_coordinator(
            error_code::COORDINATOR_NOT_AVAILABLE,
            Some(format!("The coordinator of {key} has no leader yet.")),
        );
    };
    if chosen == own {
        // A client asks the coordinator right after: let it find the key's
        // partition loaded, as it is at once on a broker that led it already.
        let wait = load_deadline.saturating_duration_since(tokio::time::Instant::now());
        if key_type == KEY_TYPE_GROUP {
            coordinators.groups().wait_served(partition, wait).await;
        } else {
            coordinators.txns().wait_served(partition, wait).await;
        }
        let (host, port) = ctx.advertised_endpoint();
        return (error_code::NONE, None, own, host, port);
    }
    if just_created {
        // As Kafka answers the FindCoordinator that created the topic: the
        // other brokers may not have its image yet, and would refuse the
        // client's next request NOT_COORDINATOR; the client asks again.
        return no_coordinator(
            error_code::COORDINATOR_NOT_AVAILABLE,
            Some(format!("The coordinator of {key} was just created.")),
        );
    }
    match image.brokers.get(&chosen) {
        Some(broker) => {
            let (host, port) = broker.endpoint(&ctx.listener.name);
            (error_code::NONE, None, chosen, host.to_string(), port)
        }
        None => no_coordinator(
            error_code::COORDINATOR_NOT_AVAILABLE,
            Some(format!("Coordinator {chosen} is not registered.")),
        ),
    }
}

/// Kafka's `offsets.topic.segment.bytes` and `transaction.state.log.segment.bytes`.
const INTERNAL_TOPIC_SEGMENT_BYTES: &str = "104857600";

/// Creates the internal topic that keys of `key_type` live in, if it is not
/// there yet, as Kafka does on the first FindCoordinator that needs it:
/// compacted, with `offsets.topic.replication.factor` (or the transaction log's)
/// replicas, taken down to the live brokers on a single node or with the dev
/// profile, refused with COORDINATOR_NOT_AVAILABLE while too few are live;
/// whether this call created it.
async fn ensure_internal_topic(cluster: &Cluster, key_type: i8) -> Result<bool, Rejection> {
    let name = match key_type {
        KEY_TYPE_GROUP => OFFSETS_TOPIC_NAME,
        KEY_TYPE_TRANSACTION => TRANSACTION_STATE_TOPIC_NAME,
        _ => return Ok(false),
    };
    let image = cluster.image();
    if image.topics.contains_key(name) {
        return Ok(false);
    }
    let settings = &cluster.broker_config().internal_topics;
    let live = image.live_brokers().count();
    let live = i16::try_from(live).unwrap_or(i16::MAX);
    let wanted = if key_type == KEY_TYPE_GROUP {
        settings.offsets_replication_factor
    } else {
        settings.txn_replication_factor
    };
    let replication_factor = if settings.fit_to_live_brokers {
        wanted.min(live.max(1))
    } else {
        wanted
    };
    if live < replication_factor {
        return Err((
            error_code::COORDINATOR_NOT_AVAILABLE,
            format!(
                "{name} needs {replication_factor} live brokers to be created; {live} are live"
            ),
        ));
    }
    let mut configs = BTreeMap::from([
        ("cleanup.policy".to_string(), "compact".to_string()),
        (
            "segment.bytes".to_string(),
            INTERNAL_TOPIC_SEGMENT_BYTES.to_string(),
        ),
    ]);
    if key_type == KEY_TYPE_TRANSACTION {
        let min_isr = settings.txn_min_isr.min(replication_factor);
        configs.insert("min.insync.replicas".to_string(), min_isr.to_string());
    }
    match create_topics::create(
        cluster,
        name,
        OFFSETS_TOPIC_PARTITIONS,
        replication_factor,
        configs,
        Vec::new(),
    )
    .await
    {
        Ok(_) => {
            tracing::info!(
                topic = name,
                replication_factor,
                "created an internal topic"
            );
            Ok(true)
        }
        Err((error_code::TOPIC_ALREADY_EXISTS, _)) => Ok(false),
        Err((code, message)) => {
            tracing::warn!(topic = name, code, %message, "creating an internal topic failed");
            Err((error_code::COORDINATOR_NOT_AVAILABLE, message))
        }
    }
}

pub async fn handle(
    coordinators: &Coordinators,
    cluster: &Cluster,
    ctx: &RequestContext,
    request: FindCoordinatorRequest,
) -> FindCoordinatorResponse {
    let keys: Vec<&StrBytes> = if ctx.api_version >= BATCHED_VERSION_MIN {
        request.coordinator_keys.iter().collect()
    } else {
        vec![&request.key]
    };
    // Each key's authorization first, as Kafka's `getCoordinator`: a refused
    // key is answered without a coordinator.
    let refusals: Vec<Option<i16>> = keys
        .iter()
        .map(|key| refused(ctx, key, request.key_type))
        .collect();
    let needed = keys
        .iter()
        .zip(&refusals)
        .any(|(key, refused)| !key.is_empty() && refused.is_none());
    let mut just_created = false;
    let mut found = Vec::with_capacity(keys.len());
    if needed {
        match ensure_internal_topic(cluster, request.key_type).await {
            Ok(created) => just_created = created,
            // Every authorized key answered `code` (COORDINATOR_NOT_AVAILABLE:
            // the client retries).
            Err((code, message)) => {
                for refused in &refusals {
                    found.push(match refused {
                        Some(refused) => refusal(ctx, *refused),
                        None => no_coordinator(code, Some(message.clone())),
                    });
                }
            }
        }
    }
    if found.is_empty() {
        // One wait for the whole request, however many keys it names.
        let load_deadline = tokio::time::Instant::now()
            + std::time::Duration::from_millis(FIND_COORDINATOR_LOAD_WAIT_MS);
        for (key, refused) in keys.iter().zip(&refusals) {
            found.push(match refused {
                Some(refused) => refusal(ctx, *refused),
                None => {
                    coordinator_for(
                        coordinators,
                        ctx,
                        key,
                        request.key_type,
                        load_deadline,
                        just_created,
                    )
                    .await
                }
            });
        }
    }
    if ctx.api_version >= BATCHED_VERSION_MIN {
        let found = keys
            .iter()
            .zip(found)
            .map(|(key, (error, text, node_id, host, port))| {
                Coordinator::default()
                    .with_key((*key).clone())
                    .with_node_id(BrokerId(node_id))
                    .with_host(StrBytes::from_string(host))
                    .with_port(port)
                    .with_error_code(error)
                    .with_error_message(text.map(StrBytes::from_string))
            })
            .collect();
        return FindCoordinatorResponse::default().with_coordinators(found);
    }
    let (error, text, node_id, host, port) = found
        .pop()
        .unwrap_or_else(|| no_coordinator(error_code::INVALID_REQUEST, None));
    FindCoordinatorResponse::default()
        .with_error_code(error)
        .with_error_message(text.map(StrBytes::from_string))
        .with_node_id(BrokerId(node_id))
        .with_host(StrBytes::from_string(host))
        .with_port(port)
}
