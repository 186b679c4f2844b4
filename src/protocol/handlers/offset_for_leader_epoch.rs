//! OffsetForLeaderEpoch: the end offset of a leader epoch, from the partition's
//! leader-epoch cache, which consumers use to detect log truncation (KIP-320).

use kafka_protocol::messages::offset_for_leader_epoch_response::{
    EpochEndOffset, OffsetForLeaderTopicResult,
};
use kafka_protocol::messages::{OffsetForLeaderEpochRequest, OffsetForLeaderEpochResponse};
use kafka_protocol::protocol::VersionRange;

use super::common::{on_leader_partition, per_partition};
use crate::protocol::context::Partitions;
use crate::protocol::RequestContext;

/// The versions below the current codec's oldest are read by `old_versions` and
/// reach this handler at that oldest (bridge) version.
pub const VERSIONS: VersionRange = VersionRange { min: 0, max: 4 };

pub async fn handle(
    partitions: &Partitions,
    _ctx: &RequestContext,
    request: OffsetForLeaderEpochRequest,
) -> OffsetForLeaderEpochResponse {
    let image = partitions.image();
    let topics = per_partition(
        &request.topics,
        |topic| &topic.partitions,
        |topic, p| {
            let result = EpochEndOffset::default().with_partition(p.partition);
            let found = on_leader_partition(
                partitions,
                &image,
                &topic.topic.0,
                p.partition,
                p.current_leader_epoch,
                |partition| partition.with_log(|log| Ok(log.end_offset_for_epoch(p.leader_epoch))),
            );
            match found {
                Ok((epoch, end_offset)) => {
                    result.with_leader_epoch(epoch).with_end_offset(end_offset)
                }
                Err(code) => result
                    .with_error_code(code)
                    .with_leader_epoch(-1)
                    .with_end_offset(-1),
            }
        },
        |topic, results| {
            OffsetForLeaderTopicResult::default()
                .with_topic(topic.topic.clone())
                .with_partitions(results)
        },
    );
    OffsetForLeaderEpochResponse::default().with_topics(topics)
}
