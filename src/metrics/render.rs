//! The Prometheus text exposition (format 0.0.4) of a broker's figures: the
//! event counters in `Metrics`, plus per-partition log figures and consumer
//! group lag gathered at scrape time. Blocking (it takes each partition's lock
//! for a moment), so it runs off the runtime; the committed offsets come from
//! the group coordinator, read before.

use std::collections::BTreeMap;
use std::fmt::Write;

use crate::group::CommittedRows;
use crate::protocol::dispatch::SUPPORTED_APIS;
use crate::server::BrokerState;

use super::REQUEST_LATENCY_BUCKETS_US;

/// Partitions described per scrape at most (five series each); beyond it the
/// rest are left out and `sluice_metrics_truncated` says so. A client can create
/// many partitions; a scrape must stay small enough to answer.
pub const METRICS_PARTITIONS_MAX: usize = 10_000;

/// Committed offsets (group, topic, partition) described per scrape at most,
/// for the same reason.
pub const METRICS_GROUP_OFFSETS_MAX: usize = 10_000;

/// Per-partition log figures read under the partition's lock.
struct PartitionFigures {
    log_start_offset: i64,
    log_end_offset: i64,
    high_watermark: i64,
    size_bytes: u64,
    segments: usize,
}

/// Renders every figure as Prometheus text, with these committed offsets
/// (None when the group coordinator could not list them).
pub fn render(state: &BrokerState, committed: Option<CommittedRows>) -> String {
    let mut out = String::with_capacity(16 * 1024);
    let mut truncated = false;
    render_requests(state, &mut out);
    render_broker(state, &mut out);
    let partitions = gather_partitions(state, &mut truncated);
    render_partitions(&partitions, &mut out);
    render_groups(committed, &partitions, &mut out, &mut truncated);
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

fn render_requests(state: &BrokerState, out: &mut String) {
    let metrics = &state.metrics;
    let snapshots: Vec<(String, super::ApiSnapshot)> = SUPPORTED_APIS
        .iter()
        .filter_map(|(api_key, _)| {
            let snapshot = metrics.api_snapshot(*api_key as i16)?;
            Some((format!("{api_key:?}"), snapshot))
        })
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

fn render_broker(state: &BrokerState, out: &mut String) {
    let metrics = &state.metrics;
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
    state: &BrokerState,
    truncated: &mut bool,
) -> BTreeMap<(String, i32), PartitionFigures> {
    let mut partitions = state.replicas.all();
    partitions.retain(|p| !p.is_deleted());
    partitions.sort_by(|a, b| a.tp.cmp(&b.tp));
    if partitions.len() > METRICS_PARTITIONS_MAX {
        partitions.truncate(METRICS_PARTITIONS_MAX);
        *truncated = true;
    }
    partitions
        .iter()
        .filter_map(|partition| {
            let figures = partition
                .with_log(|log| {
                    Ok(PartitionFigures {
                        log_start_offset: log.log_start_offset(),
                        log_end_offset: log.log_end_offset(),
                        high_watermark: 0,
                        size_bytes: log.size_bytes(),
                        segments: log.segment_count(),
                    })
                })
                .ok()?;
            let figures = PartitionFigures {
                high_watermark: partition.high_watermark(),
                ..figures
            };
            Some((
                (partition.tp.topic.clone(), partition.tp.partition),
                figures,
            ))
        })
        .collect()
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
    committed: Option<CommittedRows>,
    partitions: &BTreeMap<(String, i32), PartitionFigures>,
    out: &mut String,
    truncated: &mut bool,
) {
    let committed = committed.unwrap_or_default();
    *truncated |= committed.truncated;
    let rows = committed.rows;
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
