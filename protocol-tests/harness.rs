//! A raw Kafka client for tests: frames built by hand, answers read whole.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use bytes::{BufMut, Bytes, BytesMut};

/// How long a test waits for any one answer before failing.
pub const ANSWER_TIMEOUT_MS: u64 = 10_000;

/// A raw connection.
pub struct Wire {
    stream: TcpStream,
}

impl Wire {
    pub fn connect(addr: SocketAddr) -> Wire {
        let stream = TcpStream::connect(addr).expect("connect to the broker");
        stream
            .set_read_timeout(Some(Duration::from_millis(ANSWER_TIMEOUT_MS)))
            .expect("set timeout");
        stream.set_nodelay(true).expect("nodelay");
        Wire { stream }
    }

    /// Sends raw bytes as they are (no length prefix added).
    pub fn send_raw(&mut self, bytes: &[u8]) {
        self.stream.write_all(bytes).expect("write");
    }

    /// Sends `frame` with its 4-byte length prefix.
    pub fn send_frame(&mut self, frame: &[u8]) {
        let mut out = Vec::with_capacity(frame.len() + 4);
        out.extend_from_slice(&(frame.len() as i32).to_be_bytes());
        out.extend_from_slice(frame);
        self.send_raw(&out);
    }

    /// Reads one response frame (without its length prefix).
    pub fn recv_frame(&mut self) -> Vec<u8> {
        let mut prefix = [0u8; 4];
        self.stream
            .read_exact(&mut prefix)
            .expect("response length");
        let length = i32::from_be_bytes(prefix);
        assert!(length >= 4, "response length {length}");
        let mut frame = vec![0u8; length as usize];
        self.stream.read_exact(&mut frame).expect("response body");
        frame
    }

    /// Reads one frame of any length, 0 included (a raw SASL token).
    pub fn recv_frame_of_any_length(&mut self) -> Vec<u8> {
        let mut prefix = [0u8; 4];
        self.stream.read_exact(&mut prefix).expect("frame length");
        let length = i32::from_be_bytes(prefix);
        assert!(length >= 0, "frame length {length}");
        let mut frame = vec![0u8; length as usize];
        self.stream.read_exact(&mut frame).expect("frame body");
        frame
    }

    /// True when the broker has closed the connection (EOF before any byte).
    pub fn is_closed_by_broker(&mut self) -> bool {
        let mut byte = [0u8; 1];
        match self.stream.read(&mut byte) {
            Ok(0) => true,
            Ok(_) => false,
            Err(error) => matches!(
                error.kind(),
                std::io::ErrorKind::ConnectionReset | std::io::ErrorKind::BrokenPipe
            ),
        }
    }

    /// Sends a request (header v1 or v2 built here) and returns the response frame.
    pub fn request(
        &mut self,
        api_key: i16,
        version: i16,
        correlation_id: i32,
        flexible: bool,
        body: &[u8],
    ) -> Vec<u8> {
        self.send_frame(&request_frame(
            api_key,
            version,
            correlation_id,
            flexible,
            body,
        ));
        self.recv_frame()
    }
}

/// A request frame (no length prefix) with client id "t": header v1, or v2 with
/// an empty tagged-field section when `flexible`.
pub fn request_frame(
    api_key: i16,
    version: i16,
    correlation_id: i32,
    flexible: bool,
    body: &[u8],
) -> Vec<u8> {
    let mut frame = BytesMut::new();
    frame.put_i16(api_key);
    frame.put_i16(version);
    frame.put_i32(correlation_id);
    frame.put_i16(1);
    frame.put_slice(b"t");
    if flexible {
        frame.put_u8(0);
    }
    frame.put_slice(body);
    frame.to_vec()
}

/// Decodes a typed request body from a test's bytes with kafka-protocol, to
/// build bodies without hand-encoding every field.
pub fn encode<T: kafka_protocol::protocol::Encodable>(message: &T, version: i16) -> Vec<u8> {
    let mut buf = BytesMut::new();
    message.encode(&mut buf, version).expect("encode");
    buf.to_vec()
}

pub fn decode<T: kafka_protocol::protocol::Decodable>(bytes: &[u8], version: i16) -> T {
    let mut buf = Bytes::copy_from_slice(bytes);
    T::decode(&mut buf, version).expect("decode")
}

/// Splits a response frame into (correlation id, body), for header v0.
/// Milliseconds since the epoch, for record timestamps the broker accepts.
pub fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("clock")
        .as_millis() as i64
}

/// A topic name from text.
pub fn name(text: &str) -> kafka_protocol::messages::TopicName {
    kafka_protocol::messages::TopicName(text_bytes(text))
}

/// Bytes from hex digits; spaces are ignored.
pub fn hex(text: &str) -> Vec<u8> {
    let digits: Vec<u8> = text.bytes().filter(|b| !b.is_ascii_whitespace()).collect();
    digits
        .chunks(2)
        .map(|pair| u8::from_str_radix(std::str::from_utf8(pair).expect("ascii"), 16).expect("hex"))
        .collect()
}

fn text_bytes(value: &str) -> kafka_protocol::protocol::StrBytes {
    kafka_protocol::protocol::StrBytes::from_string(value.to_string())
}

/// A protocol string from text.
pub fn text(value: &str) -> kafka_protocol::protocol::StrBytes {
    text_bytes(value)
}

/// Correlation id of the requests `call` sends.
const CALL_CORRELATION_ID: i32 = 77;

/// Sends `request` at `version` and decodes the answer, checking its correlation id.
pub fn call<Req, Resp>(
    wire: &mut Wire,
    api_key: i16,
    version: i16,
    flexible: bool,
    request: &Req,
) -> Resp
where
    Req: kafka_protocol::protocol::Encodable,
    Resp: kafka_protocol::protocol::Decodable,
{
    let frame = wire.request(
        api_key,
        version,
        CALL_CORRELATION_ID,
        flexible,
        &encode(request, version),
    );
    let (correlation_id, body) = if flexible {
        split_v1(&frame)
    } else {
        split_v0(&frame)
    };
    assert_eq!(correlation_id, CALL_CORRELATION_ID);
    decode(body, version)
}

pub fn split_v0(frame: &[u8]) -> (i32, &[u8]) {
    let correlation_id = i32::from_be_bytes([frame[0], frame[1], frame[2], frame[3]]);
    (correlation_id, &frame[4..])
}

/// Splits a response frame with header v1 (empty tagged fields expected).
pub fn split_v1(frame: &[u8]) -> (i32, &[u8]) {
    let (correlation_id, rest) = split_v0(frame);
    assert_eq!(rest[0], 0, "no tagged fields in the response header");
    (correlation_id, &rest[1..])
}

/// An in-process broker with its own temporary data dir, on its own runtime so
/// synchronous tests can talk to it over real sockets.
pub struct TestBroker {
    pub runtime: tokio::runtime::Runtime,
    pub broker: Option<sluice::Broker>,
    /// Where the broker listens (a new port at each start).
    pub addr: SocketAddr,
    config: sluice::Config,
    data_dir: tempfile::TempDir,
}

impl TestBroker {
    pub fn start() -> TestBroker {
        TestBroker::start_with(|_| {})
    }

    /// A broker whose config `adjust` changes first (data dir and port are set).
    pub fn start_with(adjust: impl FnOnce(&mut sluice::Config)) -> TestBroker {
        let mut broker = TestBroker::unstarted();
        adjust(&mut broker.config);
        broker.start_again();
        broker
    }

    /// A broker not started yet: its data dir and runtime, for a test that
    /// writes into the dir first (`start_again` starts it).
    pub fn unstarted() -> TestBroker {
        let data_dir = tempfile::tempdir().expect("temp dir");
        let config = sluice::Config::ephemeral(data_dir.path());
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .expect("runtime");
        TestBroker {
            runtime,
            broker: None,
            addr: SocketAddr::from(([127, 0, 0, 1], 0)),
            config,
            data_dir,
        }
    }

    /// Starts the broker on its data dir, as it was left.
    pub fn start_again(&mut self) {
        assert!(self.broker.is_none(), "the broker is running");
        let broker = self
            .runtime
            .block_on(sluice::Broker::start(self.config.clone()))
            .expect("broker starts");
        self.addr = broker.local_addr();
        self.broker = Some(broker);
    }

    /// Stops the broker cleanly; its data dir stays.
    pub fn stop(&mut self) {
        let broker = self.broker.take().expect("the broker is running");
        self.runtime
            .block_on(broker.shutdown())
            .expect("clean stop");
    }

    pub fn data_dir(&self) -> &std::path::Path {
        self.data_dir.path()
    }

    /// The broker's configuration.
    pub fn config(&self) -> &sluice::Config {
        &self.config
    }

    pub fn wire(&self) -> Wire {
        Wire::connect(self.addr)
    }
}

impl Drop for TestBroker {
    fn drop(&mut self) {
        if let Some(broker) = self.broker.take() {
            let _ = self.runtime.block_on(broker.shutdown());
        }
    }
}

/// The records of `partition` of `__consumer_offsets` from offset 0, every
/// batch decoded (Fetch v4, read uncommitted).
pub fn offsets_topic_records(
    wire: &mut Wire,
    partition: i32,
) -> Vec<kafka_protocol::records::Record> {
    use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
    use kafka_protocol::messages::{BrokerId, FetchRequest, FetchResponse, TopicName};
    let fetch = FetchRequest::default()
        .with_replica_id(BrokerId(-1))
        .with_max_wait_ms(0)
        .with_min_bytes(1)
        .with_max_bytes(1 << 20)
        .with_topics(vec![FetchTopic::default()
            .with_topic(TopicName(text("__consumer_offsets")))
            .with_partitions(vec![FetchPartition::default()
                .with_partition(partition)
                .with_fetch_offset(0)
                .with_partition_max_bytes(1 << 20)])]);
    let fetched: FetchResponse = call(wire, 1, 4, false, &fetch);
    let answer = &fetched.responses[0].partitions[0];
    assert_eq!(answer.error_code, 0);
    let mut records = answer.records.clone().unwrap_or_default();
    kafka_protocol::records::RecordBatchDecoder::decode_all(&mut records)
        .expect("batches")
        .into_iter()
        .flat_map(|set| set.records)
        .collect()
}

/// The real `sluice` binary, started on a free port with a temporary data dir.
pub struct BinaryBroker {
    pub child: Child,
    pub addr: SocketAddr,
    /// Removed when the broker is dropped.
    _data_dir: tempfile::TempDir,
}

impl BinaryBroker {
    pub fn spawn() -> BinaryBroker {
        BinaryBroker::spawn_with(&[], &[])
    }

    /// The binary with `extra_args` after the listener and data dir, and `env`
    /// added to its environment.
    pub fn spawn_with(extra_args: &[&str], env: &[(&str, &str)]) -> BinaryBroker {
        let data_dir = tempfile::tempdir().expect("temp dir");
        let port = free_port();
        let child = Command::new(env!("CARGO_BIN_EXE_sluice"))
            .args([
                "serve",
                "--listen",
                &format!("127.0.0.1:{port}"),
                "--data-dir",
            ])
            .arg(data_dir.path())
            .args(extra_args)
            .envs(env.iter().copied())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn sluice");
        let addr: SocketAddr = format!("127.0.0.1:{port}").parse().expect("addr");
        let deadline = Instant::now() + Duration::from_millis(ANSWER_TIMEOUT_MS);
        while TcpStream::connect(addr).is_err() {
            assert!(Instant::now() < deadline, "sluice did not start listening");
            std::thread::sleep(Duration::from_millis(5));
        }
        BinaryBroker {
            child,
            addr,
            _data_dir: data_dir,
        }
    }

    /// True while the process runs.
    pub fn is_alive(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }
}

impl Drop for BinaryBroker {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn free_port() -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    listener.local_addr().expect("addr").port()
}

/// A record batch v2 built by hand, as a producer would send it: base offset 0,
/// partition leader epoch -1, no producer id, CreateTime, uncompressed.
pub fn record_batch(values: &[&[u8]], base_timestamp: i64) -> Vec<u8> {
    let mut records = Vec::new();
    for (delta, value) in values.iter().enumerate() {
        let mut record = Vec::new();
        record.push(0); // attributes
        put_varint(&mut record, 0); // timestamp delta
        put_varint(&mut record, delta as i64); // offset delta
        put_varint(&mut record, -1); // null key
        put_varint(&mut record, value.len() as i64);
        record.extend_from_slice(value);
        put_varint(&mut record, 0); // no headers
        put_varint(&mut records, record.len() as i64);
        records.extend_from_slice(&record);
    }
    let mut after_crc = Vec::new();
    after_crc.extend_from_slice(&0i16.to_be_bytes()); // attributes
    after_crc.extend_from_slice(&((values.len() as i32) - 1).to_be_bytes()); // last offset delta
    after_crc.extend_from_slice(&base_timestamp.to_be_bytes());
    after_crc.extend_from_slice(&base_timestamp.to_be_bytes()); // max timestamp
    after_crc.extend_from_slice(&(-1i64).to_be_bytes()); // producer id
    after_crc.extend_from_slice(&(-1i16).to_be_bytes()); // producer epoch
    after_crc.extend_from_slice(&(-1i32).to_be_bytes()); // base sequence
    after_crc.extend_from_slice(&(values.len() as i32).to_be_bytes());
    after_crc.extend_from_slice(&records);
    let mut batch = Vec::new();
    batch.extend_from_slice(&0i64.to_be_bytes()); // base offset
    batch.extend_from_slice(&((after_crc.len() + 9) as i32).to_be_bytes()); // batch length
    batch.extend_from_slice(&(-1i32).to_be_bytes()); // partition leader epoch
    batch.push(2); // magic
    batch.extend_from_slice(&crc32c::crc32c(&after_crc).to_be_bytes());
    batch.extend_from_slice(&after_crc);
    batch
}

fn put_varint(out: &mut Vec<u8>, value: i64) {
    let mut zigzag = ((value << 1) ^ (value >> 63)) as u64;
    while zigzag >= 0x80 {
        out.push((zigzag as u8) | 0x80);
        zigzag >>= 7;
    }
    out.push(zigzag as u8);
}

/// How long `find_group_coordinator` and `find_txn_coordinator` wait for a
/// key's coordinator to load it.
const COORDINATOR_WAIT: std::time::Duration = std::time::Duration::from_secs(60);

/// What a Kafka client does before it speaks to a group: FindCoordinator (the
/// first one creates the offsets topic), then, as a client retries, until the
/// coordinator has loaded the group's partition (no COORDINATOR_LOAD_IN_PROGRESS
/// or NOT_COORDINATOR from DescribeGroups).
pub fn find_group_coordinator(wire: &mut Wire, group: &str) {
    find_coordinator(wire, CoordinatorKey::Group, group);
}

/// What a transactional Kafka client does first: FindCoordinator for its
/// transactional id (the first one creates the transaction state topic), until
/// the coordinator has loaded the id's partition (DescribeTransactions no longer
/// answers COORDINATOR_LOAD_IN_PROGRESS or NOT_COORDINATOR).
pub fn find_txn_coordinator(wire: &mut Wire, transactional_id: &str) {
    find_coordinator(wire, CoordinatorKey::Transaction, transactional_id);
}

/// The two kinds of key a client finds a coordinator for.
#[derive(Clone, Copy)]
enum CoordinatorKey {
    Group,
    Transaction,
}

impl CoordinatorKey {
    /// FindCoordinator's `key_type`.
    fn key_type(self) -> i8 {
        match self {
            CoordinatorKey::Group => 0,
            CoordinatorKey::Transaction => 1,
        }
    }

    /// What the key is called, and the API that describes it, for a failure.
    fn names(self) -> (&'static str, &'static str) {
        match self {
            CoordinatorKey::Group => ("group", "DescribeGroups"),
            CoordinatorKey::Transaction => ("transactional id", "DescribeTransactions"),
        }
    }

    /// The coordinator's error for `key` in its describe API (-1: none given).
    fn described_error(self, wire: &mut Wire, key: &str) -> i16 {
        use kafka_protocol::messages::{
            DescribeGroupsRequest, DescribeGroupsResponse, DescribeTransactionsRequest,
            DescribeTransactionsResponse, GroupId, TransactionalId,
        };
        match self {
            CoordinatorKey::Group => {
                let described: DescribeGroupsResponse = call(
                    wire,
                    15,
                    0,
                    false,
                    &DescribeGroupsRequest::default().with_groups(vec![GroupId(text(key))]),
                );
                described.groups.first().map_or(-1, |g| g.error_code)
            }
            CoordinatorKey::Transaction => {
                let described: DescribeTransactionsResponse = call(
                    wire,
                    65,
                    0,
                    true,
                    &DescribeTransactionsRequest::default()
                        .with_transactional_ids(vec![TransactionalId(text(key))]),
                );
                described
                    .transaction_states
                    .first()
                    .map_or(-1, |t| t.error_code)
            }
        }
    }

    /// Whether the describe error says the key's partition is loaded: a group
    /// is described without error; a transactional id that is not known is
    /// loaded too, unless the answer is COORDINATOR_LOAD_IN_PROGRESS (14) or
    /// NOT_COORDINATOR (16).
    fn loaded(self, error: i16) -> bool {
        match self {
            CoordinatorKey::Group => error == 0,
            CoordinatorKey::Transaction => error != 14 && error != 16,
        }
    }
}

/// FindCoordinator for `key`, then its describe API, again until both answer
/// that the coordinator serves it; fails after `COORDINATOR_WAIT`.
fn find_coordinator(wire: &mut Wire, kind: CoordinatorKey, key: &str) {
    use kafka_protocol::messages::{FindCoordinatorRequest, FindCoordinatorResponse};
    let deadline = std::time::Instant::now() + COORDINATOR_WAIT;
    loop {
        let found: FindCoordinatorResponse = call(
            wire,
            10,
            1,
            false,
            &FindCoordinatorRequest::default()
                .with_key(text(key))
                .with_key_type(kind.key_type()),
        );
        let error = kind.described_error(wire, key);
        if found.error_code == 0 && kind.loaded(error) {
            return;
        }
        let (key_name, describe) = kind.names();
        assert!(
            std::time::Instant::now() < deadline,
            "{key_name} {key} has no coordinator (FindCoordinator {}, {describe} {error})",
            found.error_code
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}
