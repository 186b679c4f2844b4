//! Fetch: whole stored batches, served as they are on disk, with Kafka's long
//! poll (wait up to max_wait_ms until min_bytes are there, woken by appends).
//! A fetch that names no partition is answered at once, as Kafka answers it (the
//! Java consumer sends one when it closes).
//! read_committed fetches stop at the last stable offset and list the aborted
//! transactions of the batches served; every answer reports the last stable offset.
//! Fetch sessions (KIP-227) are declined with session id 0, which Kafka allows:
//! every fetch is a full fetch.
//! A fetch from a follower (a replica id, in ReplicaState from v15) reads up to
//! the log end offset instead, records the follower's position (which moves the
//! high watermark and the ISR), and answers DivergingEpoch when the follower's
//! last fetched epoch ends earlier here. An OFFSET_OUT_OF_RANGE to a follower
//! carries the leader's log start offset and, in place of the high watermark, its
//! log end offset, so the follower knows where to truncate to.
//! A partition refused with NOT_LEADER_OR_FOLLOWER names its current leader, and
//! the response that leader's address (KIP-951), as Produce does. From v11 a
//! consumer may be served by a follower (up to its high watermark), and with
//! `--replica-selector rack-aware` the leader sends a consumer that names its rack
//! to an in-sync replica there (KIP-392: PreferredReadReplica, no records).

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use kafka_protocol::messages::fetch_response::{
    AbortedTransaction, EpochEndOffset, FetchableTopicResponse, LeaderIdAndEpoch, NodeEndpoint,
    PartitionData,
};
use kafka_protocol::messages::{BrokerId, FetchRequest, FetchResponse, ProducerId};
use kafka_protocol::protocol::VersionRange;
use tokio::sync::Notify;
use tokio::time::Instant;

use super::common::{partition_error_code, resolve_partition, CurrentLeaders};
use crate::controller::MetadataImage;
use crate::error_code;
use crate::limits::FETCH_WAIT_MS_MAX;
use crate::log::{FileSlice, IsolationLevel, LogError};
use crate::protocol::context::Partitions;
use crate::protocol::RequestContext;
use crate::replica::{FetchWaiter, FollowerFetch, Partition, PartitionError};
use crate::security::acl::{Operation, ResourceType};
use crate::types::{BrokerEpoch, LeaderEpoch};

pub const VERSIONS: VersionRange = VersionRange { min: 4, max: 18 };

/// From v13 topics are named by id (KIP-516).
const TOPIC_ID_VERSION_MIN: i16 = 13;
/// isolation_level value for read_committed.
const READ_COMMITTED: i8 = 1;
/// From v11 a consumer's fetch carries client metadata (its rack): it may be served
/// by a follower, and the leader may send it to one (KIP-392).
const CLIENT_METADATA_VERSION_MIN: i16 = 11;
/// From v15 the replica id travels in ReplicaState, with the broker epoch (KIP-903).
const REPLICA_STATE_VERSION_MIN: i16 = 15;

/// The follower a fetch comes from, as its ReplicaState names it (from v15; the
/// request's replica id before).
#[derive(Clone, Copy, Debug)]
struct Follower {
    replica_id: i32,
    /// The follower's broker epoch; `NONE` before v15.
    replica_epoch: BrokerEpoch,
}

/// The follower a fetch comes from, or None for a consumer.
fn follower_of(request: &FetchRequest, version: i16) -> Option<Follower> {
    let follower = if version >= REPLICA_STATE_VERSION_MIN {
        Follower {
            replica_id: request.replica_state.replica_id.0,
            replica_epoch: BrokerEpoch::new(request.replica_state.replica_epoch),
        }
    } else {
        Follower {
            replica_id: request.replica_id.0,
            replica_epoch: BrokerEpoch::NONE,
        }
    };
    (follower.replica_id >= 0).then_some(follower)
}

pub async fn handle(
    partitions: &Partitions,
    ctx: &RequestContext,
    request: FetchRequest,
) -> FetchResponse {
    if request.session_id != 0 {
        return FetchResponse::default().with_error_code(error_code::FETCH_SESSION_ID_NOT_FOUND);
    }
    if request.session_epoch > 0 {
        return FetchResponse::default().with_error_code(error_code::INVALID_FETCH_SESSION_EPOCH);
    }
    let max_wait_ms = i64::from(request.max_wait_ms).clamp(0, FETCH_WAIT_MS_MAX) as u64;
    let deadline = Instant::now() + Duration::from_millis(max_wait_ms);
    let min_bytes = request.min_bytes.max(0) as usize;
    let names_a_partition = request.topics.iter().any(|t| !t.partitions.is_empty());
    let waiter: FetchWaiter = Arc::new(Notify::new());
    let follower = follower_of(&request, ctx.api_version);
    // A follower's fetch is a cluster action, as in Kafka's KafkaApis: refused
    // partition by partition with TOPIC_AUTHORIZATION_FAILED.
    let refused = (follower.is_some() && !ctx.may_cluster_action())
        .then_some(error_code::TOPIC_AUTHORIZATION_FAILED);
    // A consumer needs Read on each topic: the others' partitions are
    // refused with TOPIC_AUTHORIZATION_FAILED and never read.
    let may_read = |name: &str| {
        follower.is_some() || ctx.authorize(Operation::Read, ResourceType::Topic, name)
    };
    loop {
        let image = partitions.image();
        let plan = resolve(
            partitions,
            &image,
            &request,
            ctx.api_version,
            follower.is_none(),
            refused,
            &may_read,
        );
        for partition in plan
            .iter()
            .flat_map(|topic| topic.1.iter())
            .filter_map(|p| p.partition.as_ref())
        {
            partition.add_waiter(&waiter);
        }
        let (response, bytes, errored) = read(partitions, plan, &request, follower).await;
        let now = Instant::now();
        if bytes >= min_bytes || errored || now >= deadline || !names_a_partition {
            return with_current_leaders(response, partitions, ctx);
        }
        if tokio::time::timeout(deadline - now, waiter.notified())
            .await
            .is_err()
        {
            // Timed out: one last read so data that arrived meanwhile is served.
            let plan = resolve(
                partitions,
                &partitions.image(),
                &request,
                ctx.api_version,
                follower.is_none(),
                refused,
                &may_read,
            );
            let response = read(partitions, plan, &request, follower).await.0;
            return with_current_leaders(response, partitions, ctx);
        }
    }
}

/// One requested partition, resolved against the image.
struct Wanted {
    index: i32,
    fetch_offset: i64,
    current_leader_epoch: i32,
    last_fetched_epoch: i32,
    partition_max_bytes: i32,
    partition: Option<Arc<Partition>>,
    error: i16,
}

type Plan = Vec<(
    kafka_protocol::messages::fetch_request::FetchTopic,
    Vec<Wanted>,
)>;

fn resolve(
    partitions: &Partitions,
    image: &MetadataImage,
    request: &FetchRequest,
    version: i16,
    from_consumer: bool,
    refused: Option<i16>,
    may_read: &dyn Fn(&str) -> bool,
) -> Plan {
    let from_follower_allowed = from_consumer && version >= CLIENT_METADATA_VERSION_MIN;
    request
        .topics
        .iter()
        .map(|topic| {
            let name = if version >= TOPIC_ID_VERSION_MIN {
                image.topic_names_by_id.get(&topic.topic_id).cloned()
            } else {
                Some(topic.topic.0.to_string())
            };
            let unknown = if version >= TOPIC_ID_VERSION_MIN {
                error_code::UNKNOWN_TOPIC_ID
            } else {
                error_code::UNKNOWN_TOPIC_OR_PARTITION
            };
            let refused = refused.or_else(|| {
                name.as_deref()
                    .is_some_and(|name| !may_read(name))
                    .then_some(error_code::TOPIC_AUTHORIZATION_FAILED)
            });
            let wanted = topic
                .partitions
                .iter()
                .map(|p| {
                    let found = match (&name, refused) {
                        (_, Some(code)) => Err(code),
                        (Some(name), None) => resolve_partition(
                            partitions,
                            image,
                            name,
                            p.partition,
                            p.current_leader_epoch,
                            from_follower_allowed,
                        ),
                        (None, None) => Err(unknown),
                    };
                    let (partition, error) = match found {
                        Ok(partition) => (Some(partition), error_code::NONE),
                        Err(code) => (None, code),
                    };
                    Wanted {
                        index: p.partition,
                        fetch_offset: p.fetch_offset,
                        current_leader_epoch: p.current_leader_epoch,
                        last_fetched_epoch: p.last_fetched_epoch,
                        partition_max_bytes: p.partition_max_bytes,
                        partition,
                        error,
                    }
                })
                .collect();
            (topic.clone(), wanted)
        })
        .collect()
}

/// Reads every partition of the plan within the byte limits; returns the
/// response, the record bytes in it, and whether any partition failed.
async fn read(
    partitions_context: &Partitions,
    plan: Plan,
    request: &FetchRequest,
    follower: Option<Follower>,
) -> (FetchResponse, usize, bool) {
    let mut remaining = request.max_bytes.max(0) as usize;
    let isolation = if request.isolation_level == READ_COMMITTED {
        IsolationLevel::ReadCommitted
    } else {
        IsolationLevel::ReadUncommitted
    };
    let mut first_data = true;
    let mut errored = false;
    let mut slices: Vec<(usize, usize, FileSlice)> = Vec::new();
    let mut topics = Vec::with_capacity(plan.len());
    for (topic_index, (topic, wanted)) in plan.into_iter().enumerate() {
        let mut partitions = Vec::with_capacity(wanted.len());
        for (partition_index, wanted) in wanted.into_iter().enumerate() {
            let data = PartitionData::default()
                .with_partition_index(wanted.index)
                .with_preferred_read_replica(BrokerId(-1))
                .with_records(Some(Bytes::new()))
                .with_aborted_transactions(
                    (request.isolation_level == READ_COMMITTED).then(Vec::new),
                );
            let Some(partition) = wanted.partition else {
                errored = true;
                partitions.push(failed(data, wanted.error));
                continue;
            };
            let limit = (wanted.partition_max_bytes.max(0) as usize).min(remaining);
            if let Some(follower) = follower {
                let fetch = FollowerFetch {
                    replica_id: follower.replica_id,
                    broker_epoch: follower.replica_epoch,
                    current_leader_epoch: LeaderEpoch::known(wanted.current_leader_epoch),
                    fetch_offset: wanted.fetch_offset,
                    last_fetched_epoch: LeaderEpoch::known(wanted.last_fetched_epoch),
                    max_bytes: limit,
                };
                match partitions_context.read_for_follower(&partition, &fetch) {
                    Ok(read) => {
                        if let Some(slice) = read.records {
                            remaining = remaining.saturating_sub(slice.len);
                            slices.push((topic_index, partition_index, slice));
                        }
                        let diverging = read.diverging_epoch.map_or_else(
                            EpochEndOffset::default,
                            |diverging| {
                                EpochEndOffset::default()
                                    .with_epoch(diverging.epoch.get())
                                    .with_end_offset(diverging.end_offset.get())
                            },
                        );
                        partitions.push(
                            data.with_high_watermark(read.high_watermark.get())
                                .with_last_stable_offset(read.last_stable_offset.get())
                                .with_log_start_offset(read.log_start_offset.get())
                                .with_diverging_epoch(diverging),
                        );
                    }
                    Err(PartitionError::Log(LogError::OffsetOutOfRange {
                        log_start_offset,
                        log_end_offset,
                    })) => {
                        errored = true;
                        partitions.push(
                            failed(data, error_code::OFFSET_OUT_OF_RANGE)
                                .with_log_start_offset(log_start_offset)
                                .with_high_watermark(log_end_offset),
                        );
                    }
                    Err(error) => {
                        errored = true;
                        partitions.push(failed(data, partition_error_code(&error)));
                    }
                }
                continue;
            }
            let rack = request.rack_id.as_str();
            if let Some(replica) =
                partitions_context.preferred_read_replica(&partition, wanted.fetch_offset, rack)
            {
                // KIP-392: no records, the replica to fetch from instead, answered
                // at once (as an error is) rather than after a long poll.
                errored = true;
                partitions.push(
                    data.with_preferred_read_replica(BrokerId(replica))
                        .with_high_watermark(partition.high_watermark().get())
                        .with_last_stable_offset(partition.last_stable_offset().get())
                        .with_log_start_offset(partition.log_start_offset().get()),
                );
                continue;
            }
            match partition.read(wanted.fetch_offset, limit, first_data, isolation) {
                Ok(read) => {
                    if let Some(slice) = read.records {
                        first_data = false;
                        remaining = remaining.saturating_sub(slice.len);
                        slices.push((topic_index, partition_index, slice));
                    }
                    let aborted = read.aborted_transactions.map(|aborted| {
                        aborted
                            .iter()
                            .map(|txn| {
                                AbortedTransaction::default()
                                    .with_producer_id(ProducerId(txn.producer_id))
                                    .with_first_offset(txn.first_offset)
                            })
                            .collect()
                    });
                    partitions.push(
                        data.with_high_watermark(read.high_watermark.get())
                            .with_last_stable_offset(read.last_stable_offset.get())
                            .with_log_start_offset(read.log_start_offset.get())
                            .with_aborted_transactions(aborted),
                    );
                }
                Err(error) => {
                    errored = true;
                    partitions.push(failed(data, partition_error_code(&error)));
                }
            }
        }
        topics.push(
            FetchableTopicResponse::default()
                .with_topic(topic.topic)
                .with_topic_id(topic.topic_id)
                .with_partitions(partitions),
        );
    }
    let mut response = FetchResponse::default()
        .with_session_id(0)
        .with_responses(topics);
    let mut bytes = 0;
    let places: Vec<(usize, usize)> = slices.iter().map(|(t, p, _)| (*t, *p)).collect();
    let reads = match tokio::task::spawn_blocking(move || {
        slices
            .into_iter()
            .map(|(t, p, slice)| (t, p, slice.read()))
            .collect::<Vec<_>>()
    })
    .await
    {
        Ok(reads) => reads,
        // The blocking pool refused or lost the reads (the runtime is shutting
        // down): every partition they were for says so, none answers empty.
        Err(error) => places
            .into_iter()
            .map(|(t, p)| (t, p, Err(std::io::Error::other(error.to_string()))))
            .collect(),
    };
    for (topic_index, partition_index, result) in reads {
        let slot = &mut response.responses[topic_index].partitions[partition_index];
        match result {
            Ok(records) => {
                bytes += records.len();
                slot.records = Some(records);
            }
            Err(error) => {
                tracing::error!(%error, "reading a log segment failed");
                errored = true;
                *slot = failed(slot.clone(), error_code::KAFKA_STORAGE_ERROR);
            }
        }
    }
    (response, bytes, errored)
}

/// KIP-951: each partition refused with NOT_LEADER_OR_FOLLOWER (or
/// FENCED_LEADER_EPOCH) names its current leader (v12+), and the response carries
/// those leaders' addresses (v16+).
fn with_current_leaders(
    mut response: FetchResponse,
    partitions: &Partitions,
    ctx: &RequestContext,
) -> FetchResponse {
    let mut leaders = CurrentLeaders::new(partitions, ctx.api_version >= TOPIC_ID_VERSION_MIN);
    for topic in &mut response.responses {
        let Some(name) = leaders.topic_name(topic.topic_id, &topic.topic) else {
            continue;
        };
        for p in &mut topic.partitions {
            if let Some((leader, epoch)) = leaders.leader(&name, p.partition_index, p.error_code) {
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

fn failed(data: PartitionData, code: i16) -> PartitionData {
    data.with_error_code(code)
        .with_high_watermark(-1)
        .with_last_stable_offset(-1)
        .with_log_start_offset(-1)
        .with_records(Some(Bytes::new()))
}
