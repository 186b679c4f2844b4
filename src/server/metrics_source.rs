//! The broker's side of a metrics scrape: `MetricsSource` over `BrokerState`,
//! answering `metrics::render` with figures read from the replica manager, the
//! offset store and the dispatch table, so the metrics module needs none of
//! them. Blocking (partition locks, offset store reads); called only from the
//! scrape's blocking thread.

use std::io;

use crate::metrics::{Metrics, MetricsSource, PartitionFigures};
use crate::protocol::context::BrokerState;
use crate::protocol::dispatch::SUPPORTED_APIS;
use crate::store::OffsetStore;

impl MetricsSource for BrokerState {
    fn metrics(&self) -> &Metrics {
        &self.metrics
    }

    fn apis(&self) -> Vec<(i16, String)> {
        SUPPORTED_APIS
            .iter()
            .map(|(api_key, _)| (*api_key as i16, format!("{api_key:?}")))
            .collect()
    }

    fn partitions(&self, limit: usize) -> (Vec<PartitionFigures>, bool) {
        let mut partitions = self.replicas.all();
        partitions.retain(|p| !p.is_deleted());
        partitions.sort_by(|a, b| a.tp.cmp(&b.tp));
        let left_out = partitions.len() > limit;
        partitions.truncate(limit);
        let figures = partitions
            .iter()
            .filter_map(|partition| {
                let figures = partition
                    .with_log(|log| {
                        Ok(PartitionFigures {
                            topic: partition.tp.topic.clone(),
                            partition: partition.tp.partition,
                            log_start_offset: log.log_start_offset(),
                            log_end_offset: log.log_end_offset(),
                            high_watermark: 0,
                            size_bytes: log.size_bytes(),
                            segments: log.segment_count(),
                        })
                    })
                    .ok()?;
                // Read after the lock is given back, as the fetch path reads it.
                Some(PartitionFigures {
                    high_watermark: partition.high_watermark(),
                    ..figures
                })
            })
            .collect();
        (figures, left_out)
    }

    fn groups_with_offsets(&self) -> io::Result<Vec<String>> {
        self.offsets.groups_with_offsets()
    }

    fn committed_offsets(&self, group_id: &str) -> io::Result<Vec<(String, i32, i64)>> {
        Ok(self
            .offsets
            .fetch_group(group_id)?
            .into_iter()
            .map(|(topic, partition, committed)| (topic, partition, committed.offset))
            .collect())
    }
}
