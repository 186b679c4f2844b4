//! `sluice healthcheck`: a broker is healthy when it answers Kafka requests, not
//! merely when its port is open. The check sends ApiVersions and then Metadata
//! (for no topics) over one connection, as a client's bootstrap does, then
//! ListGroups and ListTransactions, which only the group and transaction
//! coordinators answer; it succeeds only if all come back without error and
//! Metadata names at least one broker.
//!
//! Blocking std sockets with one overall deadline: the check runs once and exits,
//! so it needs no runtime, and it never waits longer than its timeout.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream, ToSocketAddrs};
use std::time::{Duration, Instant};

use bytes::{Buf, BufMut, Bytes, BytesMut};
use kafka_protocol::messages::{
    ApiKey, ApiVersionsRequest, ApiVersionsResponse, ListGroupsRequest, ListGroupsResponse,
    ListTransactionsRequest, ListTransactionsResponse, MetadataRequest, MetadataResponse,
    RequestHeader, ResponseHeader,
};
use kafka_protocol::protocol::{Decodable, Encodable, StrBytes};

/// How long the whole check may take by default (connect, both requests).
pub const HEALTHCHECK_TIMEOUT_MS_DEFAULT: u64 = 2_000;

/// Largest response the check reads. A Metadata answer for no topics is a few
/// hundred bytes; anything near this is not a healthy broker talking to us.
const HEALTHCHECK_RESPONSE_BYTES_MAX: usize = 1024 * 1024;

/// ApiVersions v3 (flexible, carries the client software name), which every
/// Kafka since 2.4 and every Sluice answers.
const API_VERSIONS_VERSION: i16 = 3;

/// The Metadata version asked for when the broker supports it; v1 is the first
/// where an empty topic list means "no topics" rather than "all topics".
const METADATA_VERSION_PREFERRED: i16 = 12;
const METADATA_VERSION_MIN: i16 = 1;

/// ListGroups v4 (flexible, with a states filter left empty: every group).
const LIST_GROUPS_VERSION: i16 = 4;
/// ListTransactions v0, the first.
const LIST_TRANSACTIONS_VERSION: i16 = 0;

/// What a healthy broker told the check.
#[derive(Debug, Clone)]
pub struct Health {
    pub address: SocketAddr,
    pub api_count: usize,
    pub brokers: Vec<(i32, String, i32)>,
    pub cluster_id: Option<String>,
    pub elapsed: Duration,
}

/// Checks the broker at `address` (`HOST:PORT`) within `timeout`.
pub fn check(address: &str, timeout: Duration) -> Result<Health, String> {
    let started = Instant::now();
    let deadline = started + timeout;
    let target = address
        .to_socket_addrs()
        .map_err(|e| format!("cannot resolve {address}: {e}"))?
        .next()
        .ok_or_else(|| format!("{address} resolves to no address"))?;
    let mut stream = TcpStream::connect_timeout(&target, remaining(deadline)?)
        .map_err(|e| format!("cannot connect to {target}: {e}"))?;
    let _ = stream.set_nodelay(true);

    let api_versions: ApiVersionsResponse = exchange(
        &mut stream,
        deadline,
        ApiKey::ApiVersions,
        API_VERSIONS_VERSION,
        1,
        &ApiVersionsRequest::default()
            .with_client_software_name(StrBytes::from_static_str("sluice-healthcheck"))
            .with_client_software_version(StrBytes::from_static_str(env!("CARGO_PKG_VERSION"))),
    )?;
    if api_versions.error_code != 0 {
        return Err(format!(
            "ApiVersions answered error code {}",
            api_versions.error_code
        ));
    }
    let metadata_range = api_versions
        .api_keys
        .iter()
        .find(|k| k.api_key == ApiKey::Metadata as i16)
        .ok_or("the broker does not offer Metadata")?;
    let metadata_version = METADATA_VERSION_PREFERRED.min(metadata_range.max_version);
    if metadata_version < METADATA_VERSION_MIN.max(metadata_range.min_version) {
        return Err(format!(
            "the broker offers Metadata only up to v{}",
            metadata_range.max_version
        ));
    }

    let metadata: MetadataResponse = exchange(
        &mut stream,
        deadline,
        ApiKey::Metadata,
        metadata_version,
        2,
        &MetadataRequest::default()
            .with_topics(Some(Vec::new()))
            .with_allow_auto_topic_creation(false),
    )?;
    if metadata.brokers.is_empty() {
        return Err("Metadata names no broker".to_string());
    }
    check_coordinators(&mut stream, deadline, &api_versions)?;
    Ok(Health {
        address: target,
        api_count: api_versions.api_keys.len(),
        brokers: metadata
            .brokers
            .iter()
            .map(|b| (b.node_id.0, b.host.to_string(), b.port))
            .collect(),
        cluster_id: metadata.cluster_id.map(|id| id.to_string()),
        elapsed: started.elapsed(),
    })
}

/// ListGroups and ListTransactions, each answered by its coordinator's task: a
/// coordinator that cannot answer (stopped, stuck, its store offline) fails the check.
/// An API the broker does not offer is not asked (a plain Kafka broker may lack one).
fn check_coordinators(
    stream: &mut TcpStream,
    deadline: Instant,
    api_versions: &ApiVersionsResponse,
) -> Result<(), String> {
    let offered = |key: ApiKey| {
        api_versions
            .api_keys
            .iter()
            .find(|k| k.api_key == key as i16)
            .map(|k| k.max_version)
    };
    if let Some(max) = offered(ApiKey::ListGroups) {
        let groups: ListGroupsResponse = exchange(
            stream,
            deadline,
            ApiKey::ListGroups,
            max.min(LIST_GROUPS_VERSION),
            3,
            &ListGroupsRequest::default(),
        )?;
        if groups.error_code != 0 {
            return Err(format!(
                "the group coordinator answered error code {}",
                groups.error_code
            ));
        }
    }
    if let Some(max) = offered(ApiKey::ListTransactions) {
        let transactions: ListTransactionsResponse = exchange(
            stream,
            deadline,
            ApiKey::ListTransactions,
            max.min(LIST_TRANSACTIONS_VERSION),
            4,
            &ListTransactionsRequest::default(),
        )?;
        if transactions.error_code != 0 {
            return Err(format!(
                "the transaction coordinator answered error code {}",
                transactions.error_code
            ));
        }
    }
    Ok(())
}

fn remaining(deadline: Instant) -> Result<Duration, String> {
    let left = deadline.saturating_duration_since(Instant::now());
    if left.is_zero() {
        return Err("timed out".to_string());
    }
    Ok(left)
}

/// Sends one request and reads its response, both within the deadline.
fn exchange<Req: Encodable, Resp: Decodable>(
    stream: &mut TcpStream,
    deadline: Instant,
    api_key: ApiKey,
    version: i16,
    correlation_id: i32,
    request: &Req,
) -> Result<Resp, String> {
    let name = format!("{api_key:?} v{version}");
    let encode_error = |e: anyhow::Error| format!("encoding {name}: {e}");
    let header = RequestHeader::default()
        .with_request_api_key(api_key as i16)
        .with_request_api_version(version)
        .with_correlation_id(correlation_id)
        .with_client_id(Some(StrBytes::from_static_str("sluice-healthcheck")));
    let mut body = BytesMut::new();
    header
        .encode(&mut body, api_key.request_header_version(version))
        .map_err(encode_error)?;
    request.encode(&mut body, version).map_err(encode_error)?;
    let mut frame = BytesMut::with_capacity(4 + body.len());
    frame.put_u32(body.len() as u32);
    frame.extend_from_slice(&body);

    let io_error = |e: std::io::Error| format!("{name}: {e}");
    stream
        .set_write_timeout(Some(remaining(deadline)?))
        .map_err(io_error)?;
    stream.write_all(&frame).map_err(io_error)?;

    stream
        .set_read_timeout(Some(remaining(deadline)?))
        .map_err(io_error)?;
    let mut prefix = [0u8; 4];
    stream.read_exact(&mut prefix).map_err(io_error)?;
    let length = u32::from_be_bytes(prefix) as usize;
    if length > HEALTHCHECK_RESPONSE_BYTES_MAX {
        return Err(format!("{name}: response of {length} bytes is too large"));
    }
    let mut response = vec![0u8; length];
    stream
        .set_read_timeout(Some(remaining(deadline)?))
        .map_err(io_error)?;
    stream.read_exact(&mut response).map_err(io_error)?;

    let mut response = Bytes::from(response);
    let response_header =
        ResponseHeader::decode(&mut response, api_key.response_header_version(version))
            .map_err(|e| format!("{name}: response header: {e}"))?;
    if response_header.correlation_id != correlation_id {
        return Err(format!(
            "{name}: correlation id {} instead of {correlation_id}",
            response_header.correlation_id
        ));
    }
    let decoded = Resp::decode(&mut response, version).map_err(|e| format!("{name}: {e}"))?;
    if response.has_remaining() {
        return Err(format!(
            "{name}: {} bytes after the response",
            response.remaining()
        ));
    }
    Ok(decoded)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_running_broker_is_healthy_and_names_itself() {
        let broker = crate::Broker::start_ephemeral().await.expect("start");
        let address = broker.bootstrap_servers();
        let health = tokio::task::spawn_blocking(move || {
            check(
                &address,
                Duration::from_millis(HEALTHCHECK_TIMEOUT_MS_DEFAULT),
            )
        })
        .await
        .expect("join")
        .expect("healthy");
        assert_eq!(health.address, broker.local_addr());
        assert!(health.api_count >= 20, "{health:?}");
        assert_eq!(health.brokers.len(), 1);
        assert_eq!(health.brokers[0].2, i32::from(broker.local_addr().port()));
        assert!(health.cluster_id.is_some());
        broker.shutdown().await.expect("shutdown");
    }

    #[test]
    fn a_closed_port_is_unhealthy() {
        // Bind then drop, so the port is (almost certainly) closed.
        let address = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .expect("bind");
        let error =
            check(&address.to_string(), Duration::from_millis(500)).expect_err("nothing listens");
        assert!(error.contains("cannot connect"), "{error}");
    }

    #[test]
    fn an_open_port_that_does_not_speak_kafka_is_unhealthy() {
        // Accepts and reads, but never answers: the check must give up in time.
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        let address = listener.local_addr().expect("addr");
        let silent = std::thread::spawn(move || {
            let (mut socket, _) = listener.accept().expect("accept");
            let mut sink = [0u8; 256];
            while matches!(socket.read(&mut sink), Ok(n) if n > 0) {}
        });
        let started = Instant::now();
        let error = check(&address.to_string(), Duration::from_millis(300)).expect_err("no answer");
        assert!(started.elapsed() < Duration::from_secs(2), "{error}");
        assert!(error.contains("ApiVersions"), "{error}");
        silent
            .join()
            .expect("the silent peer ends when the check hangs up");
    }
}
