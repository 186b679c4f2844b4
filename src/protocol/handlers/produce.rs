//! Produce: each partition's record batches are validated (header and CRC only,
//! never decoded), checked against the partition's producer state when they come
//! from an idempotent or transactional producer (a retried duplicate is answered
//! with the offset it was first written at), and appended in the order the client
//! sent them. acks=1 is answered after the leader's append; acks=all is refused
//! with NOT_ENOUGH_REPLICAS while the ISR is below min.insync.replicas, and
//! otherwise answered once the high watermark passes the append (Kafka's delayed
//! produce), or with REQUEST_TIMED_OUT after the request's timeout, or
//! NOT_LEADER_OR_FOLLOWER if leadership moved meanwhile; with `fsync_before_ack`
//! every answer also waits for the group-commit fsync. A partition refused with
//! NOT_LEADER_OR_FOLLOWER names its current leader, and the response that
//! leader's address (KIP-951). acks=0 gets no response,
//! and a failure then closes the connection, as Kafka does. The waits are bounded
//! by the connection's queue of pending responses and the broker's request
//! memory budget, which keeps a waiting produce's bytes reserved until it is
//! answered.
//!
//! Authorization, as Kafka's `handleProduceRequest`: a request carrying
//! transactional batches needs Write on its transactional id, else every
//! partition answers TRANSACTIONAL_ID_AUTHORIZATION_FAILED; each topic needs
//! Write, else its partitions answer TOPIC_AUTHORIZATION_FAILED. A refused
//! partition is neither verified nor appended.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use kafka_protocol::messages::produce_request::TopicProduceData;
use kafka_protocol::messages::produce_response::{
    BatchIndexAndErrorMessage, LeaderIdAndEpoch, NodeEndpoint, PartitionProduceResponse,
    TopicProduceResponse,
};
use kafka_protocol::messages::BrokerId;
use kafka_protocol::messages::{ProduceRequest, ProduceResponse};
use kafka_protocol::protocol::VersionRange;

use super::common::{message, partition_error_code, CurrentLeaders};
use crate::controller::MetadataImage;
use crate::error_code;
use crate::limits::PRODUCE_TIMEOUT_MS_MAX;
use crate::log::batch::BatchHeader;
use crate::log::{AppendInfo, LogError};
use crate::metrics::Metrics;
use crate::protocol::context::{Coordinators, Partitions};
use crate::protocol::{codec, Outcome, Pending, RequestContext};
use crate::replica::{Partition, PartitionError};
use crate::security::acl::{Operation, ResourceType};
use crate::types::TopicPartition;
use crate::types::VerificationGuard;

pub const VERSIONS: VersionRange = VersionRange { min: 3, max: 13 };

/// Produce v13 names topics by id instead of by name (KIP-516).
const TOPIC_ID_VERSION_MIN: i16 = 13;

/// A partition appended and waiting (maybe) for its commit and fsync.
struct Appended {
    partition: Arc<Partition>,
    info: AppendInfo,
    /// The leadership the append was made under.
    generation: u64,
}

/// Takes the request metrics as well: errors are counted here, some only once
/// the fsync has been waited for.
pub async fn handle(
    partitions: &Arc<Partitions>,
    coordinators: &Coordinators,
    metrics: &Arc<Metrics>,
    ctx: &RequestContext,
    request: ProduceRequest,
) -> Outcome {
    let acks = request.acks;
    let timeout_ms = request.timeout_ms;
    let denied = authorize(partitions, ctx, &request);
    let verified = if denied.transactional_id {
        Verified::default()
    } else {
        verify_transactions(partitions, coordinators, &request, ctx.api_version, &denied).await
    };
    // Appends write to segment files (and a roll writes a producer snapshot), so they
    // run off the runtime worker (its other tasks move on meanwhile), in the client's
    // order.
    let Appends {
        topics,
        durable_waits,
        error_count,
    } = crate::replica::off_the_worker(|| {
        append_all(partitions, &request, ctx.api_version, &denied, &verified)
    });
    metrics.request_errors(ctx.api_key as i16, error_count);
    if acks == 0 {
        return if error_count > 0 {
            Outcome::Close("acks=0 produce failed".to_string())
        } else {
            Outcome::NoResponse
        };
    }
    let response = with_current_leaders(
        ProduceResponse::default().with_responses(topics),
        partitions,
        ctx,
    );
    let waits_for_commit = acks == -1;
    if (!partitions.flush_before_ack() && !waits_for_commit) || durable_waits.is_empty() {
        return encode(ctx, &response);
    }
    let flush_before_ack = partitions.flush_before_ack();
    let timeout_ms = i64::from(timeout_ms).clamp(0, PRODUCE_TIMEOUT_MS_MAX) as u64;
    let partitions = Arc::clone(partitions);
    let metrics = Arc::clone(metrics);
    let ctx = ctx.clone();
    Outcome::Respond(Pending::Later(Box::pin(async move {
        let mut response = response;
        let deadline = tokio::time::Instant::now() + Duration::from_millis(timeout_ms);
        for (topic_index, partition_index, appended) in durable_waits {
            let end_offset = appended.info.last_offset.next();
            let wait = async {
                if waits_for_commit {
                    appended
                        .partition
                        .wait_committed(end_offset, appended.generation)
                        .await?;
                }
                if flush_before_ack {
                    partitions
                        .wait_durable(&appended.partition, end_offset)
                        .await
                        .map_err(PartitionError::Storage)?;
                }
                Ok::<(), PartitionError>(())
            };
            let failure = match tokio::time::timeout_at(deadline, wait).await {
                Ok(Ok(())) => continue,
                Ok(Err(error)) => error,
                Err(_) => PartitionError::Timeout,
            };
            let code = partition_error_code(&failure);
            metrics.request_errors(ctx.api_key as i16, 1);
            let slot = &mut response.responses[topic_index].partition_responses[partition_index];
            slot.error_code = code;
            slot.error_message = message(error_text(code));
        }
        codec::encode_response(ctx.api_key, ctx.api_version, ctx.correlation_id, &response).ok()
    })))
}

/// The partition responses of a request's appends, and the appends that may still
/// wait for their fsync (by topic and partition index in `topics`).
struct Appends {
    topics: Vec<TopicProduceResponse>,
    durable_waits: Vec<(usize, usize, Appended)>,
    error_count: u64,
}

/// What the principal may not write.
struct Denied {
    /// The request's transactional batches may not be written: every
    /// partition is refused.
    transactional_id: bool,
    /// The topics it may not Write.
    topics: HashSet<String>,
}

/// Kafka's checks before any append: Write on the transactional id when a
/// batch is transactional (since KIP-679 an idempotent producer is
/// authorized at InitProducerId instead), then Write on each topic. A topic
/// named by an unknown id is left to answer UNKNOWN_TOPIC_ID.
fn authorize(partitions: &Partitions, ctx: &RequestContext, request: &ProduceRequest) -> Denied {
    if !ctx.access.enforced() {
        // Everything is allowed: spare the hot path the walk.
        return Denied {
            transactional_id: false,
            topics: HashSet::new(),
        };
    }
    let transactional = request
        .topic_data
        .iter()
        .flat_map(|topic| &topic.partition_data)
        .any(|data| data.records.as_deref().is_some_and(has_transactional_batch));
    if transactional {
        let allowed = match request.transactional_id.as_ref() {
            Some(id) => ctx.authorize(Operation::Write, ResourceType::TransactionalId, id.as_str()),
            // Kafka refuses transactional batches without a transactional
            // id (this broker only where an authorizer decides).
            None => false,
        };
        if !allowed {
            return Denied {
                transactional_id: true,
                topics: HashSet::new(),
            };
        }
    }
    let image = partitions.image();
    let mut decided: HashMap<String, bool> = HashMap::new();
    for topic in &request.topic_data {
        let Some(name) = topic_name(&image, topic, ctx.api_version) else {
            continue;
        };
        if let std::collections::hash_map::Entry::Vacant(entry) = decided.entry(name) {
            let allowed = ctx.authorize(Operation::Write, ResourceType::Topic, entry.key());
            entry.insert(allowed);
        }
    }
    Denied {
        transactional_id: false,
        topics: decided
            .into_iter()
            .filter_map(|(name, allowed)| (!allowed).then_some(name))
            .collect(),
    }
}

/// Whether any batch in `records` is transactional (Kafka's
/// `hasTransactionalRecords`). The walk ends at a truncated or malformed
/// header (the log refuses such records whole), so it takes at least a
/// header's bytes a step.
fn has_transactional_batch(records: &[u8]) -> bool {
    let mut at = 0;
    while let Some(header) = records.get(at..).and_then(BatchHeader::parse_prefix) {
        if header.check().is_err() {
            return false;
        }
        if header.is_transactional() {
            return true;
        }
        at += header.size_bytes();
    }
    false
}

/// KIP-890's verification of a transactional produce, by (topic, partition).
#[derive(Default)]
struct Verified {
    /// The partitions refused, with their error code (`verification_error`).
    refused: HashMap<(String, i32), i16>,
    /// The guard taken on each partition whose transaction was verified (those
    /// whose transaction is open there need none).
    guards: HashMap<(String, i32), VerificationGuard>,
}

/// KIP-890's verification: the first transactional batch of a producer's
/// transaction on a partition (the partition holds none of its transaction open)
/// is appended only if the coordinator has the partition in that transaction,
/// so a late or stray produce cannot start a transaction nobody will end. The
/// partition's guard is taken before the coordinator is asked, and the append
/// requires it still held (`Partition::append_verified`): a marker that ended
/// the transaction meanwhile lets it go.
async fn verify_transactions(
    partitions: &Partitions,
    coordinators: &Coordinators,
    request: &ProduceRequest,
    api_version: i16,
    denied: &Denied,
) -> Verified {
    let mut verified = Verified::default();
    let Some(transactional_id) = request.transactional_id.as_ref() else {
        return verified;
    };
    let now_ms = partitions.now_ms();
    let image = partitions.image();
    let mut to_verify: HashMap<(i64, i16), Vec<TopicPartition>> = HashMap::new();
    for topic in &request.topic_data {
        let Some(name) = topic_name(&image, topic, api_version) else {
            continue;
        };
        if denied.topics.contains(&name) {
            continue;
        }
        for data in &topic.partition_data {
            let Some(header) = data
                .records
                .as_ref()
                .and_then(|records| BatchHeader::parse_prefix(records))
            else {
                continue;
            };
            if !header.is_transactional() || !header.has_producer_id() {
                continue;
            }
            let Ok(partition) = partitions.partition_on_worker(&image, &name, data.index) else {
                continue;
            };
            let Ok(Some(guard)) = partition.start_txn_verification(header.producer_id, now_ms)
            else {
                continue;
            };
            verified.guards.insert((name.clone(), data.index), guard);
            to_verify
                .entry((header.producer_id, header.producer_epoch))
                .or_default()
                .push(TopicPartition::new(&name, data.index));
        }
    }
    for ((producer_id, producer_epoch), tps) in to_verify {
        let codes = coordinators
            .verify_txn_partitions(
                transactional_id.as_str(),
                producer_id,
                producer_epoch,
                tps.clone(),
            )
            .await
            .unwrap_or_else(|code| vec![code; tps.len()]);
        for (tp, code) in tps.into_iter().zip(codes) {
            if let Some(code) = verification_error(code) {
                verified.refused.insert((tp.topic, tp.partition), code);
            }
        }
    }
    verified
}

/// What a produce answers for the coordinator's verdict on one partition,
/// as Kafka maps it (AddPartitionsToTxnManager, then ReplicaManager), whether
/// the coordinator is here or on another broker: None when verified;
/// PRODUCER_FENCED becomes INVALID_PRODUCER_EPOCH, which producers treat as
/// fatal on a produce (librdkafka's "fenced"; PRODUCER_FENCED there would be
/// abortable, and the zombie would never learn it is dead); the coordinator's
/// retriable states become NOT_ENOUGH_REPLICAS, which every client retries.
fn verification_error(code: i16) -> Option<i16> {
    match code {
        error_code::NONE => None,
        error_code::PRODUCER_FENCED => Some(error_code::INVALID_PRODUCER_EPOCH),
        error_code::NOT_COORDINATOR
        | error_code::COORDINATOR_NOT_AVAILABLE
        | error_code::COORDINATOR_LOAD_IN_PROGRESS
        | error_code::CONCURRENT_TRANSACTIONS
        | error_code::REQUEST_TIMED_OUT => Some(error_code::NOT_ENOUGH_REPLICAS),
        code => Some(code),
    }
}

/// Appends every partition's records in the order the client sent them, but for
/// the `denied` and `refused` ones. Blocking.
fn append_all(
    partitions: &Partitions,
    request: &ProduceRequest,
    api_version: i16,
    denied: &Denied,
    verified: &Verified,
) -> Appends {
    let transactional = request.transactional_id.is_some();
    let acks = request.acks;
    let image = partitions.image();
    let mut topics = Vec::with_capacity(request.topic_data.len());
    let mut durable_waits = Vec::new();
    let mut error_count = 0u64;
    for topic in &request.topic_data {
        let name = topic_name(&image, topic, api_version);
        let mut responses = Vec::with_capacity(topic.partition_data.len());
        for data in &topic.partition_data {
            let key = name.as_ref().map(|name| (name.clone(), data.index));
            let verification = key.as_ref().and_then(|key| verified.refused.get(key));
            let guard = key
                .as_ref()
                .and_then(|key| verified.guards.get(key))
                .copied();
            let result = if denied.transactional_id {
                Err(Refused::from(
                    error_code::TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
                ))
            } else if name
                .as_ref()
                .is_some_and(|name| denied.topics.contains(name))
            {
                Err(Refused::from(error_code::TOPIC_AUTHORIZATION_FAILED))
            } else if !matches!(acks, -1..=1) {
                Err(Refused::from(error_code::INVALID_REQUIRED_ACKS))
            } else if let Some(code) = verification {
                Err(Refused::from(*code))
            } else {
                append(
                    partitions,
                    &image,
                    name.as_deref(),
                    data.index,
                    data.records.as_ref(),
                    acks,
                    transactional.then_some(guard),
                )
            };
            let response = PartitionProduceResponse::default().with_index(data.index);
            responses.push(match result {
                Ok(appended) => {
                    let response = response
                        .with_base_offset(appended.info.first_offset.get())
                        .with_log_append_time_ms(appended.info.log_append_time)
                        .with_log_start_offset(appended.info.log_start_offset.get());
                    durable_waits.push((topics.len(), responses.len(), appended));
                    response
                }
                Err(refused) => {
                    error_count += 1;
                    let code = refused.code;
                    response
                        .with_error_code(code)
                        .with_base_offset(-1)
                        .with_log_append_time_ms(-1)
                        .with_log_start_offset(-1)
                        .with_error_message(message(
                            refused.message.unwrap_or_else(|| error_text(code)),
                        ))
                        .with_record_errors(
                            refused
                                .record_errors
                                .into_iter()
                                .map(|(index, why)| {
                                    BatchIndexAndErrorMessage::default()
                                        .with_batch_index(index)
                                        .with_batch_index_error_message(message(why))
                                })
                                .collect(),
                        )
                }
            });
        }
        topics.push(
            TopicProduceResponse::default()
                .with_name(topic.name.clone())
                .with_topic_id(topic.topic_id)
                .with_partition_responses(responses),
        );
    }
    Appends {
        topics,
        durable_waits,
        error_count,
    }
}

/// KIP-951: each partition refused with NOT_LEADER_OR_FOLLOWER (or
/// FENCED_LEADER_EPOCH) names its current leader, and the response carries those
/// leaders' addresses, so a client moves on without a Metadata round trip.
fn with_current_leaders(
    mut response: ProduceResponse,
    partitions: &Partitions,
    ctx: &RequestContext,
) -> ProduceResponse {
    let mut leaders = CurrentLeaders::new(partitions, ctx.api_version >= TOPIC_ID_VERSION_MIN);
    for topic in &mut response.responses {
        let Some(name) = leaders.topic_name(topic.topic_id, &topic.name) else {
            continue;
        };
        for p in &mut topic.partition_responses {
            if let Some((leader, epoch)) = leaders.leader(&name, p.index, p.error_code) {
                p.current_leader = LeaderIdAndEpoch::default()
                    .with_leader_id(leader)
                    .with_leader_epoch(epoch);
            }
        }
    }
    response.node_endpoints = leaders
        .endpoints(partitions, ctx)
        .into_iter()
        .map(|b| {
            NodeEndpoint::default()
                .with_node_id(BrokerId(b.node_id))
                .with_host(b.host)
                .with_port(b.port)
                .with_rack(b.rack)
        })
        .collect();
    response
}

fn encode(ctx: &RequestContext, response: &ProduceResponse) -> Outcome {
    match codec::encode_response(ctx.api_key, ctx.api_version, ctx.correlation_id, response) {
        Ok(bytes) => Outcome::Respond(Pending::Ready(bytes)),
        Err(error) => Outcome::Close(error.to_string()),
    }
}

/// The topic's name: given by the client before v13, looked up by id from v13.
fn topic_name(image: &MetadataImage, topic: &TopicProduceData, version: i16) -> Option<String> {
    if version >= TOPIC_ID_VERSION_MIN {
        image.topic_names_by_id.get(&topic.topic_id).cloned()
    } else {
        Some(topic.name.0.to_string())
    }
}

/// Why a partition's produce was refused: Kafka's error code, and for records
/// refused one by one (KIP-467) the response's message and record errors.
struct Refused {
    code: i16,
    message: Option<String>,
    record_errors: Vec<(i32, String)>,
}

impl From<i16> for Refused {
    fn from(code: i16) -> Refused {
        Refused {
            code,
            message: None,
            record_errors: Vec::new(),
        }
    }
}

impl From<PartitionError> for Refused {
    fn from(error: PartitionError) -> Refused {
        let code = partition_error_code(&error);
        match error {
            PartitionError::Log(LogError::InvalidRecords {
                message,
                record_errors,
            }) => Refused {
                code,
                message: Some(message),
                record_errors,
            },
            _ => Refused::from(code),
        }
    }
}

fn append(
    partitions: &Partitions,
    image: &MetadataImage,
    name: Option<&str>,
    index: i32,
    records: Option<&bytes::Bytes>,
    acks: i16,
    // Some for a transactional produce: the partition's verification guard, if one was taken.
    verification: Option<Option<VerificationGuard>>,
) -> Result<Appended, Refused> {
    let Some(name) = name else {
        return Err(Refused::from(error_code::UNKNOWN_TOPIC_ID));
    };
    let partition = partitions.partition(image, name, index)?;
    let Some(records) = records else {
        return Err(Refused::from(error_code::CORRUPT_MESSAGE));
    };
    if acks == -1 {
        partition.check_enough_replicas()?;
    }
    let now_ms = partitions.now_ms();
    let appended = match verification {
        Some(guard) => partition.append_verified(records, now_ms, guard),
        None => partition.append(records, now_ms),
    };
    let appended = appended.inspect_err(|error| {
        if let PartitionError::Storage(io) = error {
            tracing::error!(partition = %partition.tp, error = %io, "append failed");
        }
    })?;
    if partition.flush_due_after_append() {
        partitions.request_flush(&partition);
    }
    Ok(Appended {
        partition,
        info: appended.info,
        generation: appended.generation,
    })
}

fn error_text(code: i16) -> String {
    match code {
        error_code::CORRUPT_MESSAGE => "This message has failed its CRC checksum, exceeds the valid size, has a null key for a compacted topic, or is otherwise corrupt.",
        error_code::MESSAGE_TOO_LARGE => "The request included a message larger than the max message size the server will accept.",
        error_code::UNKNOWN_TOPIC_OR_PARTITION => "This server does not host this topic-partition.",
        error_code::UNKNOWN_TOPIC_ID => "This server does not host this topic ID.",
        error_code::INVALID_TIMESTAMP => "The timestamp of the message is out of acceptable range.",
        error_code::INVALID_REQUIRED_ACKS => "Produce request specified an invalid value for required acks.",
        error_code::INVALID_RECORD => "This record has failed the validation on broker and hence will be rejected.",
        error_code::INVALID_PRODUCER_EPOCH => "Producer attempted to produce with an old epoch.",
        error_code::OUT_OF_ORDER_SEQUENCE_NUMBER => "The broker received an out of order sequence number.",
        error_code::INVALID_TXN_STATE => "The producer attempted a transactional operation in an invalid state.",
        error_code::REQUEST_TIMED_OUT => "The request timed out.",
        error_code::NOT_LEADER_OR_FOLLOWER => "For requests intended only for the leader, this error indicates that the broker is not the current leader.",
        error_code::NOT_ENOUGH_REPLICAS => "Messages are rejected since there are fewer in-sync replicas than required.",
        error_code::NOT_ENOUGH_REPLICAS_AFTER_APPEND => "Messages are written to the log, but to fewer in-sync replicas than required.",
        error_code::KAFKA_STORAGE_ERROR => "Disk error when trying to access log file on the disk.",
        error_code::TOPIC_AUTHORIZATION_FAILED
        | error_code::TRANSACTIONAL_ID_AUTHORIZATION_FAILED => super::common::authorization_failed(code),
        _ => "The produce failed.",
    }
    .to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A zombie producer fenced by a newer instance must learn it is dead from
    /// its produce: Kafka answers INVALID_PRODUCER_EPOCH there, never
    /// PRODUCER_FENCED (which librdkafka takes as abortable on a produce).
    #[test]
    fn verification_verdicts_map_to_what_a_produce_answers_in_kafka() {
        assert_eq!(verification_error(error_code::NONE), None);
        assert_eq!(
            verification_error(error_code::PRODUCER_FENCED),
            Some(error_code::INVALID_PRODUCER_EPOCH)
        );
        for retriable in [
            error_code::NOT_COORDINATOR,
            error_code::COORDINATOR_NOT_AVAILABLE,
            error_code::COORDINATOR_LOAD_IN_PROGRESS,
            error_code::CONCURRENT_TRANSACTIONS,
            error_code::REQUEST_TIMED_OUT,
        ] {
            assert_eq!(
                verification_error(retriable),
                Some(error_code::NOT_ENOUGH_REPLICAS)
            );
        }
        for kept in [
            error_code::INVALID_TXN_STATE,
            error_code::INVALID_PRODUCER_EPOCH,
            error_code::INVALID_PRODUCER_ID_MAPPING,
        ] {
            assert_eq!(verification_error(kept), Some(kept));
        }
    }
}
