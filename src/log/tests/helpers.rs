//! Test fixtures: v2 batches built byte by byte (Kafka's varint record encoding), and
//! a log dir that can be restarted cleanly or after a simulated crash.

use std::path::PathBuf;

use bytes::Bytes;
use tempfile::TempDir;
use uuid::Uuid;

use crate::log::batch::{self, BatchHeader};
use crate::log::{LogConfig, LogDir, PartitionLog, TimestampType, TxnMarker};
use crate::types::{ProducerEpoch, TopicPartition};

pub const TOPIC: &str = "orders";
/// A fixed clock reading for tests that do not move time.
pub const NOW_MS: i64 = 1_700_000_000_000;
/// The idle segment files a fixture's log dir keeps open: so few that every
/// test of more than two segments reads through files the cache closed.
pub const FIXTURE_IDLE_SEGMENT_FILES: usize = 2;

pub fn tp() -> TopicPartition {
    TopicPartition::new(TOPIC, 0)
}

pub fn topic_id() -> Uuid {
    Uuid::from_u128(0x0123_4567_89ab_cdef_0123_4567_89ab_cdef)
}

/// A batch with one record per timestamp, each with a `value_len`-byte value.
pub fn batch_with(timestamps: &[i64], value_len: usize) -> Vec<u8> {
    assert!(!timestamps.is_empty());
    let base_timestamp = timestamps[0];
    let mut records = Vec::new();
    for (i, &timestamp) in timestamps.iter().enumerate() {
        let mut body = vec![0u8]; // attributes
        put_varlong(&mut body, timestamp - base_timestamp);
        put_varlong(&mut body, i as i64);
        put_varlong(&mut body, -1); // null key
        put_varlong(&mut body, value_len as i64);
        body.extend(std::iter::repeat_n(b'v', value_len));
        put_varlong(&mut body, 0); // no headers
        put_varlong(&mut records, body.len() as i64);
        records.extend(body);
    }
    let max_timestamp = *timestamps.iter().max().unwrap();
    let mut out = Vec::new();
    out.extend(0i64.to_be_bytes()); // baseOffset
    out.extend(((49 + records.len()) as i32).to_be_bytes()); // batchLength
    out.extend((-1i32).to_be_bytes()); // partitionLeaderEpoch
    out.push(2); // magic
    out.extend(0u32.to_be_bytes()); // crc, filled below
    out.extend(0i16.to_be_bytes()); // attributes
    out.extend(((timestamps.len() - 1) as i32).to_be_bytes());
    out.extend(base_timestamp.to_be_bytes());
    out.extend(max_timestamp.to_be_bytes());
    out.extend((-1i64).to_be_bytes()); // producerId
    out.extend((-1i16).to_be_bytes()); // producerEpoch
    out.extend((-1i32).to_be_bytes()); // baseSequence
    out.extend((timestamps.len() as i32).to_be_bytes());
    out.extend(records);
    let crc = batch::compute_crc(&out);
    out[17..21].copy_from_slice(&crc.to_be_bytes());
    out
}

/// `count` records all stamped `timestamp`, 10-byte values.
pub fn batch(count: usize, timestamp: i64) -> Bytes {
    Bytes::from(batch_with(&vec![timestamp; count], 10))
}

fn put_varlong(out: &mut Vec<u8>, value: i64) {
    let mut zigzag = ((value << 1) ^ (value >> 63)) as u64;
    while zigzag >= 0x80 {
        out.push((zigzag as u8) | 0x80);
        zigzag >>= 7;
    }
    out.push(zigzag as u8);
}

/// Headers of the batches in `bytes`, in order.
pub fn headers(bytes: &[u8]) -> Vec<BatchHeader> {
    let mut out = Vec::new();
    let mut at = 0;
    while at < bytes.len() {
        let header = BatchHeader::parse_prefix(&bytes[at..]).unwrap();
        header.check_stored().unwrap();
        batch::check_crc(&bytes[at..at + header.size_bytes()], &header).unwrap();
        at += header.size_bytes();
        out.push(header);
    }
    assert_eq!(at, bytes.len(), "a read returns whole batches");
    out
}

/// A log dir in a temp dir, restartable.
pub struct Fixture {
    pub temp: TempDir,
    pub config: LogConfig,
    pub log_dir: LogDir,
}

impl Fixture {
    pub fn new(config: LogConfig) -> (Fixture, PartitionLog) {
        let temp = TempDir::new().unwrap();
        let log_dir = LogDir::open_with(temp.path(), FIXTURE_IDLE_SEGMENT_FILES).unwrap();
        let log = log_dir
            .create_log(&tp(), topic_id(), config.clone(), NOW_MS)
            .unwrap();
        (
            Fixture {
                temp,
                config,
                log_dir,
            },
            log,
        )
    }

    pub fn partition_dir(&self) -> PathBuf {
        self.temp.path().join(tp().dir_name())
    }

    pub fn segment_file(&self, base_offset: i64, suffix: &str) -> PathBuf {
        self.partition_dir()
            .join(format!("{base_offset:020}{suffix}"))
    }

    /// Graceful shutdown then start: flush, checkpoint, marker, reload.
    pub fn restart_clean(&mut self, mut log: PartitionLog) -> PartitionLog {
        log.flush().unwrap();
        self.log_dir.write_checkpoints([&log]).unwrap();
        self.log_dir.mark_clean_shutdown(-1).unwrap();
        drop(log);
        self.reload(true)
    }

    /// A crash (kill -9): the log is dropped with whatever was last checkpointed.
    pub fn restart_after_crash(&mut self, log: PartitionLog) -> PartitionLog {
        drop(log);
        self.reload(false)
    }

    pub fn reload(&mut self, expect_clean: bool) -> PartitionLog {
        self.log_dir = LogDir::open_with(self.temp.path(), FIXTURE_IDLE_SEGMENT_FILES).unwrap();
        assert_eq!(self.log_dir.was_clean_shutdown(), expect_clean);
        let config = self.config.clone();
        let mut logs = self
            .log_dir
            .load_all(&|_| config.clone(), &|_, _| true, NOW_MS)
            .unwrap();
        assert_eq!(logs.len(), 1);
        logs.pop().unwrap()
    }
}

/// Asserts that `result` is an error matching `pattern`, and shows the error
/// when it is another.
macro_rules! assert_err {
    ($result:expr, $pattern:pat) => {{
        let error = $result.unwrap_err();
        assert!(matches!(error, $pattern), "{error:?}");
    }};
}
pub(crate) use assert_err;

/// A transaction marker of `producer_id` at `producer_epoch`, written by the
/// coordinator at `coordinator_epoch`.
pub fn txn_marker(
    producer_id: i64,
    producer_epoch: i16,
    coordinator_epoch: i32,
    commit: bool,
) -> TxnMarker {
    TxnMarker {
        producer_id,
        producer_epoch: ProducerEpoch::new(producer_epoch),
        coordinator_epoch,
        commit,
    }
}

/// The records of one unbounded fetch at `offset`, all committed data included.
pub fn read_from(log: &PartitionLog, offset: i64) -> Bytes {
    let read = log.read(offset, usize::MAX, i64::MAX, true).unwrap();
    read.records.unwrap().read().unwrap()
}

/// The default config with segments of `segment_bytes`.
pub fn segments_of(segment_bytes: u64) -> LogConfig {
    LogConfig {
        segment_bytes,
        ..LogConfig::default()
    }
}

/// The default config on a LogAppendTime topic.
pub fn log_append_time() -> LogConfig {
    LogConfig {
        timestamp_type: TimestampType::LogAppendTime,
        ..LogConfig::default()
    }
}

/// Segments of `segment_bytes` with an index entry every `index_interval_bytes`.
pub fn indexed(segment_bytes: u64, index_interval_bytes: u32) -> LogConfig {
    LogConfig {
        index_interval_bytes,
        ..segments_of(segment_bytes)
    }
}

/// Every batch the log serves, read one fetch at a time from the log start.
pub fn all_batches(log: &PartitionLog) -> Vec<BatchHeader> {
    let mut out = Vec::new();
    let mut offset = log.log_start_offset();
    while offset < log.log_end_offset() {
        let batch_headers = headers(&read_from(log, offset));
        offset = batch_headers.last().unwrap().last_offset() + 1;
        out.extend(batch_headers);
    }
    out
}

/// Asserts that a fetch at every offset returns, first, the batch holding it.
pub fn assert_every_offset_found(log: &PartitionLog) {
    for offset in log.log_start_offset()..log.log_end_offset() {
        let read = log.read(offset, 1, i64::MAX, true).unwrap();
        let bytes = read.records.unwrap().read().unwrap();
        let first = headers(&bytes)[0];
        assert!(
            first.base_offset <= offset && offset <= first.last_offset(),
            "offset {offset} answered with batch {}..={}",
            first.base_offset,
            first.last_offset()
        );
    }
}

/// A batch of `count` records from an idempotent producer (transactional when asked),
/// CRC recomputed over the changed header.
pub fn producer_batch(
    producer_id: i64,
    producer_epoch: i16,
    base_sequence: i32,
    count: usize,
    transactional: bool,
) -> Bytes {
    let mut bytes = batch_with(&vec![NOW_MS; count], 10);
    if transactional {
        bytes[21..23].copy_from_slice(&batch::TRANSACTIONAL_MASK.to_be_bytes());
    }
    bytes[43..51].copy_from_slice(&producer_id.to_be_bytes());
    bytes[51..53].copy_from_slice(&producer_epoch.to_be_bytes());
    bytes[53..57].copy_from_slice(&base_sequence.to_be_bytes());
    let crc = batch::compute_crc(&bytes);
    bytes[17..21].copy_from_slice(&crc.to_be_bytes());
    Bytes::from(bytes)
}

/// Everything the producer state of `log` answers, for comparing across restarts.
pub fn producer_view(
    log: &PartitionLog,
) -> (
    Vec<crate::log::ProducerSummary>,
    Option<i64>,
    Vec<crate::log::AbortedTxn>,
) {
    (
        log.producers(),
        log.first_unstable_offset(),
        log.aborted_transactions(log.log_start_offset(), log.log_end_offset()),
    )
}
