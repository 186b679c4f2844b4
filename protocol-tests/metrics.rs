//! The metrics endpoint over real HTTP: per-API requests, errors and latency,
//! bytes, per-partition log figures and consumer group lag, after real traffic.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

use kafka_protocol::messages::offset_commit_request::{
    OffsetCommitRequestPartition, OffsetCommitRequestTopic,
};
use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;

use crate::harness::{decode, encode, find_group_coordinator, record_batch, split_v1, TestBroker};
use crate::produce_fetch::{create_topic, produce, produce_for_tests};

/// (status line, body) of one HTTP/1.1 request.
fn http_get(address: SocketAddr, path: &str) -> (String, String) {
    let mut stream = TcpStream::connect(address).expect("connect to metrics");
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .expect("timeout");
    write!(stream, "GET {path} HTTP/1.1\r\nHost: test\r\n\r\n").expect("send");
    let mut response = String::new();
    stream.read_to_string(&mut response).expect("read");
    let (head, body) = response.split_once("\r\n\r\n").expect("a head and a body");
    let status = head.lines().next().unwrap_or("").to_string();
    let length: usize = head
        .lines()
        .find_map(|l| l.strip_prefix("Content-Length: "))
        .and_then(|v| v.parse().ok())
        .expect("a content length");
    assert_eq!(length, body.len(), "Content-Length matches the body");
    (status, body.to_string())
}

fn value(metrics: &str, series: &str) -> Option<String> {
    metrics
        .lines()
        .find_map(|line| line.strip_prefix(series)?.strip_prefix(' '))
        .map(str::to_string)
}

#[test]
fn the_endpoint_reports_requests_logs_and_group_lag() {
    let broker = TestBroker::start_with(|config| {
        config.metrics_listen = Some("127.0.0.1:0".to_string());
    });
    let metrics_addr = broker
        .broker
        .as_ref()
        .and_then(|b| b.metrics_addr())
        .expect("metrics listen");
    let mut wire = broker.wire();
    create_topic(&mut wire, "watched", 1, &[]);
    find_group_coordinator(&mut wire, "watchers");
    produce_for_tests(
        &mut wire,
        "watched",
        &record_batch(&[b"a", b"b", b"c"], 1_700_000_000_000),
    );
    let missing =
        produce(&mut wire, 8, "watched", 5, 1, &record_batch(&[b"x"], 0)).expect("an answer");
    assert_eq!(missing.responses[0].partition_responses[0].error_code, 3);

    let commit = OffsetCommitRequest::default()
        .with_group_id(GroupId(StrBytes::from_static_str("watchers")))
        .with_generation_id_or_member_epoch(-1)
        .with_member_id(StrBytes::from_static_str(""))
        .with_topics(vec![OffsetCommitRequestTopic::default()
            .with_name(TopicName(StrBytes::from_static_str("watched")))
            .with_partitions(vec![OffsetCommitRequestPartition::default()
                .with_partition_index(0)
                .with_committed_offset(1)])]);
    let frame = wire.request(8, 8, 5, true, &encode(&commit, 8));
    let committed: OffsetCommitResponse = decode(split_v1(&frame).1, 8);
    assert_eq!(committed.topics[0].partitions[0].error_code, 0);

    let (status, text) = http_get(metrics_addr, "/metrics");
    assert_eq!(status, "HTTP/1.1 200 OK");
    let expect = |series: &str, wanted: &str| {
        assert_eq!(
            value(&text, series).as_deref(),
            Some(wanted),
            "{series} in\n{text}"
        );
    };
    expect("sluice_requests_total{api=\"Produce\"}", "2");
    expect("sluice_request_errors_total{api=\"Produce\"}", "1");
    expect("sluice_request_errors_total{api=\"OffsetCommit\"}", "0");
    expect(
        "sluice_request_duration_seconds_count{api=\"Produce\"}",
        "2",
    );
    expect(
        "sluice_request_duration_seconds_bucket{api=\"Produce\",le=\"+Inf\"}",
        "2",
    );
    expect("sluice_requests_total{api=\"Fetch\"}", "0");
    expect(
        "sluice_log_end_offset{topic=\"watched\",partition=\"0\"}",
        "3",
    );
    expect(
        "sluice_log_start_offset{topic=\"watched\",partition=\"0\"}",
        "0",
    );
    expect(
        "sluice_log_segments{topic=\"watched\",partition=\"0\"}",
        "1",
    );
    expect(
        "sluice_group_committed_offset{group=\"watchers\",topic=\"watched\",partition=\"0\"}",
        "1",
    );
    expect(
        "sluice_group_lag{group=\"watchers\",topic=\"watched\",partition=\"0\"}",
        "2",
    );
    expect("sluice_connections_open", "1");
    expect("sluice_metrics_truncated", "0");
    let size: u64 = value(
        &text,
        "sluice_log_size_bytes{topic=\"watched\",partition=\"0\"}",
    )
    .and_then(|v| v.parse().ok())
    .expect("a log size");
    assert!(size > 0);
    let received: u64 = value(&text, "sluice_received_bytes_total")
        .and_then(|v| v.parse().ok())
        .expect("bytes in");
    assert!(received > 100, "{received}");

    let (status, _) = http_get(metrics_addr, "/elsewhere");
    assert_eq!(status, "HTTP/1.1 404 Not Found");
}
