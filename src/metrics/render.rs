//! The Prometheus text exposition (format 0.0.4) of a broker's figures: the
//! event counters in `Metrics`, plus per-partition log figures and consumer
//! group lag gathered at scrape time from a `MetricsSource`, which the server
//! implements over the broker's state. Blocking (the source takes each
//! partition's lock for a moment and asks the group coordinator), so it runs off
//! the runtime. The bounds on a scrape, and every byte of the text, are decided
//! here; the source only answers questions.

use std::collections::BTreeMap;
use std::fmt::Write;
use std::io;

use super::{ApiSnapshot, Metrics, REQUEST_LATENCY_BUCKETS_US};
use crate::limits::METRICS_GROUP_OFFSETS_MAX;
use crate::limits::METRICS_PARTITIONS_MAX;

/// One partition's log figures, read under the partition's lock.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PartitionFigures {
    pub topic: String,
    pub partition: i32,
    pub log_start_offset: i64,
    pub log_end_offset: i64,
    pub high_watermark: i64,
    pub size_bytes: u64,
    pub segments: usize,
}

/// What a scrape reads besides the event counters, answered by whoever knows
/// where the figures are (the server, over the broker's state). Every call may
/// block; `render` runs on a blocking thread.
/// One committed offset as a scrape reports it: (group, topic, partition, offset).
pub type CommittedOffsetRow = (String, String, i32, i64);

/// Where the metadata raft stands, as this node sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ControllerFigures {
    /// The leader's node id, -1 while none is known.
    pub leader_id: i64,
    pub term: u64,
    pub applied_index: u64,
    /// The longest round trip of this broker's heartbeat to the metadata
    /// leader since start, in microseconds.
    pub heartbeat_rtt_max_us: u64,
}

pub trait MetricsSource: Send + Sync + 'static {
    /// The broker's event counters.
    fn metrics(&self) -> &Metrics;

    /// The APIs to report, as (API key, label), in the order they are rendered.
    fn apis(&self) -> Vec<(i16, String)>;

    /// The figures of the first `limit` partitions this broker hosts, sorted by
    /// (topic, partition), and whether any were left out beyond `limit`. A
    /// partition whose log cannot be read is skipped.
    fn partitions(&self, limit: usize) -> (Vec<PartitionFigures>, bool);

    /// At most `rows_max` committed offsets across groups, as (group, topic, partition,
    /// offset), and whether any were left out beyond `rows_max`.
    fn committed_offsets(&self, rows_max: usize) -> io::Result<(Vec<CommittedOffsetRow>, bool)>;

    /// The metadata raft's leader, term and applied index.
    fn controller(&self) -> ControllerFigures;
}

/// Renders every figure as Prometheus text.
pub fn render(source: &dyn MetricsSource) -> String {
    let mut out = String::with_capacity(16 * 1024);
    let mut truncated = false;
    render_requests(source, &mut out);
    render_broker(source.metrics(), &mut out);
    render_controller(source.controller(), &mut out);
    let partitions = gather_partitions(source, &mut truncated);
    render_partitions(&partitions, &mut out);
    render_groups(source, &partitions, &mut out, &mut truncated);
    header(
        &mut out,
        "sluice_metrics_truncated",
        "gauge",
        "1 if this scrape left series out to stay within its bounds.",
    );
    let _ = writeln!(out, "sluice_metrics_truncated {}", u8::from(truncated));
    out
}

fn header(out: &mut String, name: &str, kind: &str, help: &str) {
    let _ = writeln!(out, "# HELP {name} {help}");
    let _ = writeln!(out, "# TYPE {name} {kind}");
}

/// A label value with Prometheus' three escapes.
fn label(value: &str) -> String {
    value
        .replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

fn seconds(micros: u64) -> f64 {
    micros as f64 / 1_000_000.0
}

fn render_requests(source: &dyn MetricsSource, out: &mut String) {
    let metrics = source.metrics();
    let snapshots: Vec<(String, ApiSnapshot)> = source
        .apis()
        .into_iter()
        .filter_map(|(api_key, api)| Some((api, metrics.api_snapshot(api_key)?)))
        .collect();
    header(
        out,
        "sluice_requests_total",
        "counter",
        "Requests received, by Kafka API.",
    );
    for (api, s) in &snapshots {
        let _ = writeln!(out, "sluice_requests_total{{api=\"{api}\"}} {}", s.requests);
    }
    header(
        out,
        "sluice_request_errors_total",
        "counter",
        "Error codes other than NONE in responses (each partition's counts), plus requests that ended their connection, by Kafka API.",
    );
    for (api, s) in &snapshots {
        let _ = writeln!(
            out,
            "sluice_request_errors_total{{api=\"{api}\"}} {}",
            s.errors
        );
    }
    header(
        out,
        "sluice_request_duration_seconds",
        "histogram",
        "Time from a request's arrival to its response being written, including any wait (long-poll fetch, fsync before ack), by Kafka API.",
    );
    for (api, s) in &snapshots {
        for (bound, count) in REQUEST_LATENCY_BUCKETS_US.iter().zip(&s.latency_cumulative) {
            let _ = writeln!(
                out,
                "sluice_request_duration_seconds_bucket{{api=\"{api}\",le=\"{}\"}} {count}",
                seconds(*bound)
            );
        }
        let total = s.latency_cumulative[REQUEST_LATENCY_BUCKETS_US.len()];
        let _ = writeln!(
            out,
            "sluice_request_duration_seconds_bucket{{api=\"{api}\",le=\"+Inf\"}} {total}"
        );
        let _ = writeln!(
            out,
            "sluice_request_duration_seconds_sum{{api=\"{api}\"}} {}",
            seconds(s.latency_sum_us)
        );
        let _ = writeln!(
            out,
            "sluice_request_duration_seconds_count{{api=\"{api}\"}} {total}"
        );
    }
}

fn render_broker(metrics: &Metrics, out: &mut String) {
    let simple: [(&str, &str, &str, String); 5] = [
        (
            "sluice_received_bytes_total",
            "counter",
            "Bytes of request frames received, length prefixes included.",
            metrics.received_bytes().to_string(),
        ),
        (
            "sluice_sent_bytes_total",
            "counter",
            "Bytes of response frames sent, length prefixes included.",
            metrics.sent_bytes().to_string(),
        ),
        (
            "sluice_connections_open",
            "gauge",
            "Kafka client connections open now.",
            metrics.connections_open().to_string(),
        ),
        (
            "sluice_connections_accepted_total",
            "counter",
            "Kafka client connections accepted since start.",
            metrics.connections_accepted().to_string(),
        ),
        (
            "sluice_build_info",
            "gauge",
            "The running version, as a label.",
            "1".to_string(),
        ),
    ];
    for (name, kind, help, value) in simple {
        header(out, name, kind, help);
        if name == "sluice_build_info" {
            let version = env!("CARGO_PKG_VERSION");
            let _ = writeln!(out, "{name}{{version=\"{version}\"}} {value}");
        } else {
            let _ = writeln!(out, "{name} {value}");
        }
    }
}

/// (topic, partition) → figures, sorted, at most `METRICS_PARTITIONS_MAX`.
fn gather_partitions(
    source: &dyn MetricsSource,
    truncated: &mut bool,
) -> BTreeMap<(String, i32), PartitionFigures> {
    let (partitions, left_out) = source.partitions(METRICS_PARTITIONS_MAX);
    *truncated |= left_out;
    partitions
        .into_iter()
        .take(METRICS_PARTITIONS_MAX)
        .map(|figures| ((figures.topic.clone(), figures.partition), figures))
        .collect()
}

fn render_controller(figures: ControllerFigures, out: &mut String) {
    for (name, help, value) in [
        (
            "sluice_controller_leader",
            "The node id of the metadata raft leader this node knows, -1 for none.",
            figures.leader_id.to_string(),
        ),
        (
            "sluice_controller_term",
            "The metadata raft term this node is in.",
            figures.term.to_string(),
        ),
        (
            "sluice_controller_applied_index",
            "The metadata log index this node has applied.",
            figures.applied_index.to_string(),
        ),
        (
            "sluice_controller_heartbeat_rtt_max_seconds",
            "The longest round trip of this broker's heartbeat to the metadata leader since start.",
            format!(
                "{}.{:06}",
                figures.heartbeat_rtt_max_us / 1_000_000,
                figures.heartbeat_rtt_max_us % 1_000_000
            ),
        ),
    ] {
        header(out, name, "gauge", help);
        let _ = writeln!(out, "{name} {value}");
    }
}

fn render_partitions(partitions: &BTreeMap<(String, i32), PartitionFigures>, out: &mut String) {
    type Field = fn(&PartitionFigures) -> String;
    let series: [(&str, &str, Field); 5] = [
        (
            "sluice_log_start_offset",
            "First offset readable in the partition's log.",
            |f| f.log_start_offset.to_string(),
        ),
        (
            "sluice_log_end_offset",
            "Offset the next record appended to the partition will get.",
            |f| f.log_end_offset.to_string(),
        ),
        (
            "sluice_high_watermark",
            "Offset up to which consumers may read.",
            |f| f.high_watermark.to_string(),
        ),
        (
            "sluice_log_size_bytes",
            "Bytes of the partition's segment files.",
            |f| f.size_bytes.to_string(),
        ),
        (
            "sluice_log_segments",
            "Segments of the partition's log (each an open file).",
            |f| f.segments.to_string(),
        ),
    ];
    for (name, help, field) in series {
        header(out, name, "gauge", help);
        for ((topic, partition), figures) in partitions {
            let _ = writeln!(
                out,
                "{name}{{topic=\"{}\",partition=\"{partition}\"}} {}",
                label(topic),
                field(figures)
            );
        }
    }
    header(
        out,
        "sluice_open_segments",
        "gauge",
        "Segments of every partition log on this broker.",
    );
    let total: usize = partitions.values().map(|f| f.segments).sum();
    let _ = writeln!(out, "sluice_open_segments {total}");
    header(
        out,
        "sluice_partitions",
        "gauge",
        "Partitions hosted by this broker.",
    );
    let _ = writeln!(out, "sluice_partitions {}", partitions.len());
}

fn render_groups(
    source: &dyn MetricsSource,
    partitions: &BTreeMap<(String, i32), PartitionFigures>,
    out: &mut String,
    truncated: &mut bool,
) {
    let mut rows = match source.committed_offsets(METRICS_GROUP_OFFSETS_MAX) {
        Ok((rows, left_out)) => {
            *truncated |= left_out;
            rows
        }
        Err(error) => {
            tracing::warn!(%error, "metrics: cannot list committed offsets");
            Vec::new()
        }
    };
    rows.sort();
    header(
        out,
        "sluice_group_committed_offset",
        "gauge",
        "Offset a consumer group committed for a partition.",
    );
    for (group, topic, partition, offset) in &rows {
        let _ = writeln!(
            out,
            "sluice_group_committed_offset{{group=\"{}\",topic=\"{}\",partition=\"{partition}\"}} {offset}",
            label(group),
            label(topic)
        );
    }
    header(
        out,
        "sluice_group_lag",
        "gauge",
        "Records between a group's committed offset and the partition's high watermark.",
    );
    for (group, topic, partition, offset) in &rows {
        let Some(figures) = partitions.get(&(topic.clone(), *partition)) else {
            continue;
        };
        let lag = (figures.high_watermark - offset).max(0);
        let _ = writeln!(
            out,
            "sluice_group_lag{{group=\"{}\",topic=\"{}\",partition=\"{partition}\"}} {lag}",
            label(group),
            label(topic)
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A source with fixed figures: two partitions, one group, and more
    /// partitions than the scrape asked for.
    struct Fixed {
        metrics: Metrics,
    }

    impl MetricsSource for Fixed {
        fn metrics(&self) -> &Metrics {
            &self.metrics
        }

        fn apis(&self) -> Vec<(i16, String)> {
            vec![(0, "Produce".to_string())]
        }

        fn partitions(&self, limit: usize) -> (Vec<PartitionFigures>, bool) {
            let figures = |partition| PartitionFigures {
                topic: "or\"ders".to_string(),
                partition,
                log_start_offset: 0,
                log_end_offset: 10,
                high_watermark: 8,
                size_bytes: 100,
                segments: 1,
            };
            assert_eq!(limit, METRICS_PARTITIONS_MAX);
            (vec![figures(0), figures(1)], true)
        }

        fn committed_offsets(
            &self,
            rows_max: usize,
        ) -> io::Result<(Vec<CommittedOffsetRow>, bool)> {
            assert_eq!(rows_max, METRICS_GROUP_OFFSETS_MAX);
            Ok((vec![("g".to_string(), "or\"ders".to_string(), 1, 3)], false))
        }

        fn controller(&self) -> ControllerFigures {
            ControllerFigures {
                leader_id: 2,
                term: 7,
                applied_index: 41,
                heartbeat_rtt_max_us: 12_500,
            }
        }
    }

    #[test]
    fn figures_from_the_source_are_rendered_escaped_with_lag_and_truncation() {
        let source = Fixed {
            metrics: Metrics::new(),
        };
        source.metrics.request_received(0, 64);
        let text = render(&source);
        assert!(text.contains("sluice_requests_total{api=\"Produce\"} 1\n"));
        assert!(text.contains("sluice_controller_leader 2\n"));
        assert!(text.contains("sluice_controller_term 7\n"));
        assert!(text.contains("sluice_controller_applied_index 41\n"));
        assert!(text.contains("sluice_controller_heartbeat_rtt_max_seconds 0.012500\n"));
        assert!(text.contains("sluice_high_watermark{topic=\"or\\\"ders\",partition=\"1\"} 8\n"));
        assert!(text.contains("sluice_open_segments 2\n"));
        assert!(
            text.contains("sluice_group_lag{group=\"g\",topic=\"or\\\"ders\",partition=\"1\"} 5\n")
        );
        assert!(text.ends_with("sluice_metrics_truncated 1\n"));
    }
}
