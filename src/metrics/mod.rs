//! Operator figures, exposed as Prometheus text on their own port (`http`).
//!
//! Counters and histograms live in `Metrics`, one per broker, shared by every
//! connection task: plain atomics updated with relaxed ordering, no lock, no
//! allocation, so the request path pays a few uncontended-on-average
//! `fetch_add`s. Figures that describe state rather than events (per-partition
//! log end offset and size, segments, consumer group lag) are not kept here but
//! gathered when scraped (`render`), from a `MetricsSource` the server hands in.
//!
//! A leaf: it imports no other module of the broker, and knows nothing of the
//! protocol, the logs or the stores; the server gathers the figures and
//! `protocol::response_errors` counts a response's error codes.

mod http;
mod render;

pub use http::serve;
pub use render::{render, CommittedOffsetRow, ControllerFigures, MetricsSource, PartitionFigures};

use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::time::Duration;

/// Per-API counters are indexed by the API key. Kafka's keys are below 100
/// (4.x ends in the 90s); a key at or beyond this is counted only in bytes.
pub const API_KEY_SLOTS: usize = 128;

/// Upper bounds of the request latency histogram buckets, in microseconds
/// (rendered in seconds, Prometheus' unit). From 0.5 ms, where a produce to the
/// page cache answers, to 30 s, the longest a fetch may wait
/// (`FETCH_WAIT_MS_MAX`); slower requests land in +Inf.
pub const REQUEST_LATENCY_BUCKETS_US: [u64; 15] = [
    500, 1_000, 2_500, 5_000, 10_000, 25_000, 50_000, 100_000, 250_000, 500_000, 1_000_000,
    2_500_000, 5_000_000, 10_000_000, 30_000_000,
];

const BUCKET_COUNT: usize = REQUEST_LATENCY_BUCKETS_US.len() + 1;

/// One API's counters. Buckets are kept per bucket (not cumulative) and summed
/// when rendered; the last one is +Inf.
struct ApiStats {
    requests: AtomicU64,
    errors: AtomicU64,
    latency_buckets: [AtomicU64; BUCKET_COUNT],
    latency_sum_us: AtomicU64,
}

impl ApiStats {
    fn new() -> ApiStats {
        ApiStats {
            requests: AtomicU64::new(0),
            errors: AtomicU64::new(0),
            latency_buckets: std::array::from_fn(|_| AtomicU64::new(0)),
            latency_sum_us: AtomicU64::new(0),
        }
    }
}

/// A snapshot of one API's counters, for rendering.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiSnapshot {
    pub requests: u64,
    pub errors: u64,
    /// Cumulative counts per bucket of `REQUEST_LATENCY_BUCKETS_US`, then +Inf.
    pub latency_cumulative: [u64; BUCKET_COUNT],
    pub latency_sum_us: u64,
}

/// The broker's event counters. Owned by the broker state; shared by `Arc`.
pub struct Metrics {
    apis: Box<[ApiStats]>,
    received_bytes: AtomicU64,
    sent_bytes: AtomicU64,
    connections_open: AtomicI64,
    connections_accepted: AtomicU64,
}

impl Default for Metrics {
    fn default() -> Metrics {
        Metrics::new()
    }
}

impl Metrics {
    pub fn new() -> Metrics {
        Metrics {
            apis: (0..API_KEY_SLOTS).map(|_| ApiStats::new()).collect(),
            received_bytes: AtomicU64::new(0),
            sent_bytes: AtomicU64::new(0),
            connections_open: AtomicI64::new(0),
            connections_accepted: AtomicU64::new(0),
        }
    }

    fn api(&self, api_key: i16) -> Option<&ApiStats> {
        usize::try_from(api_key).ok().and_then(|i| self.apis.get(i))
    }

    /// A request frame of `frame_bytes` (length prefix included) arrived.
    pub fn request_received(&self, api_key: i16, frame_bytes: usize) {
        self.received_bytes
            .fetch_add(frame_bytes as u64, Ordering::Relaxed);
        if let Some(api) = self.api(api_key) {
            api.requests.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// A request was answered (or, for acks=0, finished) after `elapsed`,
    /// with `response_bytes` sent.
    pub fn request_completed(&self, api_key: i16, elapsed: Duration, response_bytes: usize) {
        self.sent_bytes
            .fetch_add(response_bytes as u64, Ordering::Relaxed);
        let Some(api) = self.api(api_key) else {
            return;
        };
        let micros = u64::try_from(elapsed.as_micros()).unwrap_or(u64::MAX);
        let bucket = REQUEST_LATENCY_BUCKETS_US
            .iter()
            .position(|bound| micros <= *bound)
            .unwrap_or(REQUEST_LATENCY_BUCKETS_US.len());
        api.latency_buckets[bucket].fetch_add(1, Ordering::Relaxed);
        api.latency_sum_us.fetch_add(micros, Ordering::Relaxed);
    }

    /// `count` error codes other than NONE went back in a response, or (with
    /// `count` 1) the request ended the connection.
    pub fn request_errors(&self, api_key: i16, count: u64) {
        if count == 0 {
            return;
        }
        if let Some(api) = self.api(api_key) {
            api.errors.fetch_add(count, Ordering::Relaxed);
        }
    }

    /// A connection was accepted; the guard counts it closed when dropped.
    pub fn connection_opened(&self) -> ConnectionGuard<'_> {
        self.connections_accepted.fetch_add(1, Ordering::Relaxed);
        self.connections_open.fetch_add(1, Ordering::Relaxed);
        ConnectionGuard { metrics: self }
    }

    pub fn api_snapshot(&self, api_key: i16) -> Option<ApiSnapshot> {
        let api = self.api(api_key)?;
        let mut latency_cumulative = [0u64; BUCKET_COUNT];
        let mut running = 0u64;
        for (slot, bucket) in latency_cumulative.iter_mut().zip(&api.latency_buckets) {
            running += bucket.load(Ordering::Relaxed);
            *slot = running;
        }
        Some(ApiSnapshot {
            requests: api.requests.load(Ordering::Relaxed),
            errors: api.errors.load(Ordering::Relaxed),
            latency_cumulative,
            latency_sum_us: api.latency_sum_us.load(Ordering::Relaxed),
        })
    }

    pub fn received_bytes(&self) -> u64 {
        self.received_bytes.load(Ordering::Relaxed)
    }

    pub fn sent_bytes(&self) -> u64 {
        self.sent_bytes.load(Ordering::Relaxed)
    }

    pub fn connections_open(&self) -> i64 {
        self.connections_open.load(Ordering::Relaxed)
    }

    pub fn connections_accepted(&self) -> u64 {
        self.connections_accepted.load(Ordering::Relaxed)
    }
}

/// Counts a connection closed when the connection task ends, however it ends.
pub struct ConnectionGuard<'a> {
    metrics: &'a Metrics,
}

impl Drop for ConnectionGuard<'_> {
    fn drop(&mut self) {
        self.metrics
            .connections_open
            .fetch_sub(1, Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn latencies_land_in_their_bucket_and_accumulate() {
        let metrics = Metrics::new();
        metrics.request_received(0, 100);
        metrics.request_received(0, 50);
        metrics.request_completed(0, Duration::from_micros(400), 10);
        metrics.request_completed(0, Duration::from_millis(7), 20);
        metrics.request_completed(0, Duration::from_secs(60), 0);
        let snapshot = metrics.api_snapshot(0).expect("produce slot");
        assert_eq!(snapshot.requests, 2);
        assert_eq!(snapshot.latency_cumulative[0], 1, "0.5 ms bucket");
        assert_eq!(snapshot.latency_cumulative[3], 1, "5 ms bucket");
        assert_eq!(snapshot.latency_cumulative[4], 2, "10 ms bucket");
        assert_eq!(snapshot.latency_cumulative[BUCKET_COUNT - 2], 2, "30 s");
        assert_eq!(snapshot.latency_cumulative[BUCKET_COUNT - 1], 3, "+Inf");
        assert_eq!(snapshot.latency_sum_us, 400 + 7_000 + 60_000_000);
        assert_eq!((metrics.received_bytes(), metrics.sent_bytes()), (150, 30));
    }

    #[test]
    fn unknown_api_keys_count_only_bytes_and_connections_close_on_drop() {
        let metrics = Metrics::new();
        metrics.request_received(-1, 8);
        metrics.request_received(API_KEY_SLOTS as i16, 8);
        metrics.request_errors(-1, 1);
        assert_eq!(metrics.received_bytes(), 16);
        assert!(metrics.api_snapshot(-1).is_none());
        let guard = metrics.connection_opened();
        assert_eq!(metrics.connections_open(), 1);
        drop(guard);
        assert_eq!(
            (metrics.connections_open(), metrics.connections_accepted()),
            (0, 1)
        );
    }
}
