//! ListOffsets: earliest, latest, by timestamp and max timestamp (KIP-734),
//! plus the KIP-405/1005 special timestamps answered as Kafka answers them for a
//! topic without tiered storage. Each offset found comes with the leader epoch of
//! the batch holding it (KIP-320); the latest offset with the current leader
//! epoch, or OFFSET_NOT_AVAILABLE while a new leader's high watermark is still
//! below the start of its epoch (KIP-207), as is a lookup by time that finds
//! nothing then.

use kafka_protocol::messages::list_offsets_response::{
    ListOffsetsPartitionResponse, ListOffsetsTopicResponse,
};
use kafka_protocol::messages::{ListOffsetsRequest, ListOffsetsResponse};
use kafka_protocol::protocol::VersionRange;

use super::common::{on_leader_partition, per_partition};
use crate::error_code;
use crate::log::IsolationLevel;
use crate::protocol::context::Partitions;
use crate::protocol::RequestContext;
use crate::replica::{Partition, PartitionError};
use crate::security::acl::{Operation, ResourceType};
use crate::types::{LeaderEpoch, Offset};

/// The versions below the current codec's oldest are read by `old_versions` and
/// reach this handler at that oldest (bridge) version.
pub const VERSIONS: VersionRange = VersionRange { min: 0, max: 10 };

/// Kafka's special timestamps (ListOffsetsRequest constants).
const LATEST_TIMESTAMP: i64 = -1;
const EARLIEST_TIMESTAMP: i64 = -2;
const MAX_TIMESTAMP: i64 = -3;
const EARLIEST_LOCAL_TIMESTAMP: i64 = -4;
const LATEST_TIERED_TIMESTAMP: i64 = -5;
/// Kafka's "no timestamp" and "unknown offset".
const NO_TIMESTAMP: i64 = -1;
const UNKNOWN_OFFSET: i64 = -1;
/// The response carries a leader epoch from v4; below, the field must stay unset.
const LEADER_EPOCH_VERSION_MIN: i16 = 4;
/// isolation_level value for read_committed.
const READ_COMMITTED: i8 = 1;

pub async fn handle(
    partitions: &Partitions,
    ctx: &RequestContext,
    request: ListOffsetsRequest,
) -> ListOffsetsResponse {
    let with_epoch = ctx.api_version >= LEADER_EPOCH_VERSION_MIN;
    let image = partitions.image();
    let isolation = if request.isolation_level == READ_COMMITTED {
        IsolationLevel::ReadCommitted
    } else {
        IsolationLevel::ReadUncommitted
    };
    // Describe on each topic, else its partitions are refused.
    let denied: std::collections::HashSet<&str> = request
        .topics
        .iter()
        .map(|topic| topic.name.0.as_str())
        .filter(|name| !ctx.authorize(Operation::Describe, ResourceType::Topic, name))
        .collect();
    let topics = per_partition(
        &request.topics,
        |topic| &topic.partitions,
        |topic, p| {
            let response =
                ListOffsetsPartitionResponse::default().with_partition_index(p.partition_index);
            let result = if denied.contains(topic.name.0.as_str()) {
                Err(error_code::TOPIC_AUTHORIZATION_FAILED)
            } else {
                on_leader_partition(
                    partitions,
                    &image,
                    &topic.name.0,
                    p.partition_index,
                    p.current_leader_epoch,
                    |partition| lookup(partition, p.timestamp, isolation),
                )
            };
            match result.and_then(|found| found.ok_or(error_code::OFFSET_NOT_AVAILABLE)) {
                Ok(found) => response
                    .with_timestamp(found.timestamp)
                    .with_offset(found.offset.map_or(UNKNOWN_OFFSET, Offset::get))
                    .with_leader_epoch(match found.leader_epoch {
                        Some(epoch) if with_epoch => epoch.get(),
                        _ => -1,
                    }),
                Err(code) => response
                    .with_error_code(code)
                    .with_timestamp(NO_TIMESTAMP)
                    .with_offset(UNKNOWN_OFFSET)
                    .with_leader_epoch(-1),
            }
        },
        |topic, results| {
            ListOffsetsTopicResponse::default()
                .with_name(topic.name.clone())
                .with_partitions(results)
        },
    );
    ListOffsetsResponse::default().with_topics(topics)
}

/// What one partition answers (Kafka's `TimestampAndOffset`): the timestamp of
/// the record found (`NO_TIMESTAMP` for the special timestamps), its offset and
/// the leader epoch of the batch holding it; None where Kafka answers -1.
struct TimestampAndOffset {
    timestamp: i64,
    offset: Option<Offset>,
    leader_epoch: Option<LeaderEpoch>,
}

impl TimestampAndOffset {
    /// Nothing to point at: no timestamp, offset or epoch.
    const UNKNOWN: TimestampAndOffset = TimestampAndOffset {
        timestamp: NO_TIMESTAMP,
        offset: None,
        leader_epoch: None,
    };
}

/// What one partition answers, or None for OFFSET_NOT_AVAILABLE. As Kafka, the
/// latest offset and the bound on timestamp lookups are the last stable offset
/// under read_committed, the high watermark otherwise.
fn lookup(
    partition: &Partition,
    timestamp: i64,
    isolation: IsolationLevel,
) -> Result<Option<TimestampAndOffset>, PartitionError> {
    let leader_epoch = partition.leader_epoch();
    let high_watermark = partition.high_watermark();
    let visible_end = match isolation {
        IsolationLevel::ReadCommitted => partition.last_stable_offset(),
        IsolationLevel::ReadUncommitted => high_watermark,
    };
    let not_available = partition
        .epoch_start_offset()
        .is_some_and(|start| start > high_watermark);
    // The offset found, with the epoch of the batch holding it.
    let found_at = |timestamp: i64, offset: Offset| -> Result<_, PartitionError> {
        let epoch = partition.with_log(|log| Ok(log.epoch_for_offset(offset.get())))?;
        Ok(TimestampAndOffset {
            timestamp,
            offset: Some(offset),
            leader_epoch: epoch.map(LeaderEpoch::new),
        })
    };
    match timestamp {
        LATEST_TIMESTAMP if not_available => Ok(None),
        LATEST_TIMESTAMP => Ok(Some(TimestampAndOffset {
            timestamp: NO_TIMESTAMP,
            offset: Some(visible_end),
            leader_epoch: Some(leader_epoch),
        })),
        EARLIEST_TIMESTAMP | EARLIEST_LOCAL_TIMESTAMP => {
            found_at(NO_TIMESTAMP, partition.log_start_offset()).map(Some)
        }
        MAX_TIMESTAMP => {
            let found = partition.with_log(|log| Ok(log.max_timestamp_offset()?))?;
            match found {
                Some((offset, timestamp)) => found_at(timestamp, Offset::new(offset)).map(Some),
                None => Ok(Some(TimestampAndOffset::UNKNOWN)),
            }
        }
        LATEST_TIERED_TIMESTAMP => Ok(Some(TimestampAndOffset::UNKNOWN)),
        target => {
            let found = partition.with_log(|log| Ok(log.offset_for_timestamp(target)?))?;
            match found {
                Some((offset, timestamp)) if offset < visible_end.get() => {
                    found_at(timestamp, Offset::new(offset)).map(Some)
                }
                _ if not_available => Ok(None),
                _ => Ok(Some(TimestampAndOffset::UNKNOWN)),
            }
        }
    }
}
