//! The broker's side of a metrics scrape: `MetricsSource` over the engines the
//! server opened, answering `metrics::render` with figures read from the replica
//! manager, the group coordinator and the dispatch table, so the metrics module
//! needs none of them. Blocking (partition locks, a wait on the group coordinator); called only
//! from the scrape's blocking thread.

use std::io;
use std::sync::Arc;

use crate::controller::Controller;
use crate::coordinator::group::GroupService;
use crate::metrics::{
    CommittedOffsetRow, ControllerFigures, Metrics, MetricsSource, PartitionFigures,
};
use crate::protocol::dispatch::SUPPORTED_APIS;
use crate::replica::ReplicaManager;

/// What a scrape reads: the counters, the partitions and the group coordinator.
pub struct BrokerMetrics {
    pub metrics: Arc<Metrics>,
    pub replicas: Arc<ReplicaManager>,
    pub groups: GroupService,
    pub controller: Controller,
}

impl MetricsSource for BrokerMetrics {
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
                    high_watermark: partition.high_watermark().get(),
                    ..figures
                })
            })
            .collect();
        (figures, left_out)
    }

    /// Asked of the group coordinator, which owns the offsets; this runs on the scrape's
    /// blocking thread, so it may wait for the coordinator's answer.
    fn committed_offsets(&self, rows_max: usize) -> io::Result<(Vec<CommittedOffsetRow>, bool)> {
        let runtime = tokio::runtime::Handle::try_current().map_err(io::Error::other)?;
        let listed = runtime
            .block_on(self.groups.committed_offsets(rows_max))
            .map_err(io::Error::other)??;
        Ok((listed.rows, listed.truncated))
    }

    fn controller(&self) -> ControllerFigures {
        let status = self.controller.raft_status();
        ControllerFigures {
            leader_id: status.leader_id,
            term: status.term,
            heartbeat_rtt_max_us: u64::try_from(status.heartbeat_rtt_max.as_micros())
                .unwrap_or(u64::MAX),
            applied_index: self.controller.image().last_applied_index,
        }
    }
}
