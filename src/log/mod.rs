//! The partition log: each partition's record batches on disk, laid out exactly as
//! Apache Kafka lays out a log dir (file names, index entries, checkpoint formats).
//!
//! Role: validate, store, index, read, retain, truncate and recover Kafka record
//! batches (format v2, magic 2). The log knows nothing of requests, networking, raft or
//! sled, never decodes records on the append or fetch path, and never reads the
//! system clock: every time-dependent call takes `now_ms` from the caller.
//!
//! Ownership: a `PartitionLog` is owned by one mutex in the broker and is not shared
//! otherwise. The slow parts are designed to run outside that lock: a `FileSlice`
//! returned by `read` is read with `FileSlice::read`, and the files of a
//! `FlushTarget` are fsynced, both holding only an `Arc<File>` (a deleted segment's
//! open file stays readable until its last reader drops it).
//!
//! Invariants: `log_start_offset <= log_end_offset`; `recovery_point <=
//! log_end_offset`; segments are sorted by base offset, the last one is the active
//! segment and the only one appended to; offsets strictly increase through the log.
//!
//! Durability, point by point:
//! - `append` returning Ok: the batches were written to the OS with a plain write.
//!   They survive a crash of the process (kill -9: the page cache survives it) but
//!   not a power loss or kernel crash.
//! - Rolling a segment fsyncs nothing but the producer snapshot; the rolled segment
//!   stays in `flush_target` until a flush covers it (the replica layer asks for
//!   one at every roll) and keeps its file open until then (`open_files`).
//! - `mark_flushed(target)`, called after every file of `flush_target()` was
//!   fsynced: every offset below `end_offset` is on stable storage, and the recovery
//!   point advances to it. `flush` does both synchronously.
//! - `LogDir::write_checkpoints` returning Ok: the recovery point and log start offset
//!   of each log are on stable storage. Until then, a crash falls back to the previous
//!   checkpoint: more of the log is re-validated, and records deleted by
//!   `delete_records_before` or retention since may reappear (segment file deletions
//!   are not fsynced either, so after a power loss a deleted segment may return).
//! - `leader-epoch-checkpoint` and `partition.metadata` are replaced atomically and
//!   fsynced whenever they change, before the change is acted on.
//! - `truncate_to` returning Ok: the truncation is on stable storage (the dropped
//!   batches cannot come back), though appends before it may still be unflushed.
//! - After an unclean shutdown, every batch above the checkpointed recovery point is
//!   re-validated on load and the log is cut at the first invalid one (a torn write).
//! - `LogDir::mark_clean_shutdown` (after all logs are flushed and checkpointed): the
//!   next start trusts the indexes and skips recovery.
//! - Producer state snapshots are written atomically and fsynced when a segment
//!   rolls and by `flush`; the transaction index is written like the other indexes
//!   (no fsync of its own). On load, producer state is the newest readable snapshot
//!   at or below the recovery start plus a replay of the batch headers after it,
//!   which also rewrites the transaction index entries of markers at or after the
//!   recovery start.

pub mod batch;
mod checkpoint;
pub mod cleaner;
pub use checkpoint::write_atomically;
mod control;
mod dir;
mod epoch;
mod files;
mod index;
mod index_file;
mod open_files;
mod partition;
mod partition_metadata;
mod producer_state;
mod records;
mod segment;
mod time_index;
mod txn_index;
mod validate;

#[cfg(test)]
pub(crate) mod tests;

use std::fmt;
use std::fs::File;
use std::io;
use std::os::unix::fs::FileExt;
use std::path::PathBuf;
use std::sync::Arc;

use crate::config::defaults::{
    INDEX_INTERVAL_BYTES_DEFAULT, MESSAGE_BYTES_MAX_DEFAULT,
    MESSAGE_TIMESTAMP_AFTER_MAX_MS_DEFAULT, MESSAGE_TIMESTAMP_BEFORE_MAX_MS_DEFAULT,
    RETENTION_BYTES_DEFAULT, RETENTION_MS_DEFAULT, SEGMENT_BYTES_DEFAULT, SEGMENT_MS_DEFAULT,
};
use crate::types::{Offset, ProducerEpoch};

/// Kafka's `min.cleanable.dirty.ratio` default.
pub const MIN_CLEANABLE_DIRTY_RATIO_DEFAULT: f64 = 0.5;
/// Kafka's `delete.retention.ms` default: one day, in ms.
pub const DELETE_RETENTION_MS_DEFAULT: i64 = 86_400_000;

pub use batch::{BATCH_HEADER_SIZE_BYTES, LOG_OVERHEAD_BYTES};
pub use dir::LogDir;
pub use epoch::EpochEntry;
pub use files::{
    CLEAN_SHUTDOWN_FILE, LOG_START_OFFSET_CHECKPOINT_FILE, RECOVERY_POINT_CHECKPOINT_FILE,
    TXN_INDEX_FILE_SUFFIX,
};
pub use index::OFFSET_INDEX_ENTRY_SIZE_BYTES;
pub use open_files::{OpenFiles, OpenFilesStats};
pub use partition::PartitionLog;
pub use producer_state::BATCHES_PER_PRODUCER_MAX;
pub use records::{
    keyed_batch, keyed_entries, producer_keyed_batch, KeyedEntry, KeyedRecord, TxnProducer,
};
pub use time_index::TIME_INDEX_ENTRY_SIZE_BYTES;
pub use txn_index::ABORTED_TXN_SIZE_BYTES;

/// The largest segment the indexes can address: positions are u32 and Kafka keeps
/// `segment.bytes` an int, so segments never pass `i32::MAX` bytes.
pub const SEGMENT_BYTES_MAX: u64 = i32::MAX as u64;

/// `message.timestamp.type`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum TimestampType {
    #[default]
    CreateTime,
    LogAppendTime,
}

/// The per-topic settings the log obeys, named after Kafka's topic configs.
#[derive(Clone, Debug, PartialEq)]
pub struct LogConfig {
    /// `segment.bytes`; values above `SEGMENT_BYTES_MAX` act as that maximum.
    pub segment_bytes: u64,
    /// `segment.ms`: roll a segment whose first batch is older than this.
    pub segment_ms: i64,
    /// `index.interval.bytes`: log bytes between two offset index entries.
    pub index_interval_bytes: u32,
    /// `retention.bytes`; -1 means unlimited.
    pub retention_bytes: i64,
    /// `retention.ms`; -1 means unlimited.
    pub retention_ms: i64,
    /// `max.message.bytes`: the largest batch accepted, in bytes.
    pub max_message_bytes: u32,
    /// `message.timestamp.type`.
    pub timestamp_type: TimestampType,
    /// `message.timestamp.after.max.ms`: how far ahead of `now_ms` a timestamp may be.
    pub message_timestamp_after_max_ms: i64,
    /// `message.timestamp.before.max.ms`: how far behind `now_ms` a timestamp may be.
    pub message_timestamp_before_max_ms: i64,
    /// What `cleanup.policy` asks of old segments.
    pub cleanup: CleanupPolicy,
    /// `min.cleanable.dirty.ratio`: the share of a log's cleanable bytes not yet
    /// compacted above which the cleaner takes it.
    pub min_cleanable_dirty_ratio: f64,
    /// `min.compaction.lag.ms`: records younger than this stay uncompacted.
    pub min_compaction_lag_ms: i64,
    /// `max.compaction.lag.ms`: a dirty record older than this makes the log
    /// cleanable whatever its dirty ratio.
    pub max_compaction_lag_ms: i64,
    /// `delete.retention.ms`: how long a tombstone (and a transaction marker with
    /// nothing left to mark) outlives the cleaning that first saw it.
    pub delete_retention_ms: i64,
}

/// `cleanup.policy`: `delete` (retention by time and size), `compact` (the latest
/// record of each key kept, nothing deleted by age or size) or both.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CleanupPolicy {
    pub delete: bool,
    pub compact: bool,
}

impl CleanupPolicy {
    /// Kafka's parsing of the list: any order, either or both.
    pub fn parse(value: &str) -> CleanupPolicy {
        let has = |name: &str| value.split(',').any(|p| p.trim() == name);
        CleanupPolicy {
            delete: has("delete"),
            compact: has("compact"),
        }
    }
}

impl Default for LogConfig {
    fn default() -> LogConfig {
        LogConfig {
            segment_bytes: SEGMENT_BYTES_DEFAULT,
            segment_ms: SEGMENT_MS_DEFAULT,
            index_interval_bytes: INDEX_INTERVAL_BYTES_DEFAULT,
            retention_bytes: RETENTION_BYTES_DEFAULT,
            retention_ms: RETENTION_MS_DEFAULT,
            max_message_bytes: MESSAGE_BYTES_MAX_DEFAULT,
            timestamp_type: TimestampType::CreateTime,
            message_timestamp_after_max_ms: MESSAGE_TIMESTAMP_AFTER_MAX_MS_DEFAULT,
            message_timestamp_before_max_ms: MESSAGE_TIMESTAMP_BEFORE_MAX_MS_DEFAULT,
            cleanup: CleanupPolicy {
                delete: true,
                compact: false,
            },
            min_cleanable_dirty_ratio: MIN_CLEANABLE_DIRTY_RATIO_DEFAULT,
            min_compaction_lag_ms: 0,
            max_compaction_lag_ms: i64::MAX,
            delete_retention_ms: DELETE_RETENTION_MS_DEFAULT,
        }
    }
}

impl LogConfig {
    /// `segment_bytes` as the log applies it: at least one header, at most what the
    /// indexes can address.
    pub fn effective_segment_bytes(&self) -> u64 {
        self.segment_bytes
            .clamp(BATCH_HEADER_SIZE_BYTES as u64, SEGMENT_BYTES_MAX)
    }
}

/// Why an append, read or admin call failed. Each variant but `Io` maps onto one
/// Kafka error code; `Io` (including on-disk corruption, `ErrorKind::InvalidData`) is
/// KAFKA_STORAGE_ERROR.
#[derive(Debug)]
pub enum LogError {
    /// CORRUPT_MESSAGE: bad length, magic, CRC, record count or lastOffsetDelta.
    CorruptMessage(String),
    /// MESSAGE_TOO_LARGE: a batch larger than `max_message_bytes`.
    MessageTooLarge,
    /// RECORD_LIST_TOO_LARGE: a whole record set larger than a segment.
    RecordListTooLarge,
    /// INVALID_TIMESTAMP.
    InvalidTimestamp,
    /// OFFSET_OUT_OF_RANGE, with the range the log holds.
    OffsetOutOfRange {
        log_start_offset: i64,
        log_end_offset: i64,
    },
    /// UNSUPPORTED_FOR_MESSAGE_FORMAT: magic other than 2.
    UnsupportedMagic(i8),
    /// INVALID_RECORD: a batch a client may not write (a control batch, or a producer
    /// id without a base sequence).
    InvalidRecord(String),
    /// INVALID_RECORD naming the records at fault (KIP-467): index in their batch
    /// and why, with the message Kafka's response carries.
    InvalidRecords {
        message: String,
        record_errors: Vec<(i32, String)>,
    },
    /// INVALID_PRODUCER_EPOCH: a batch or marker from an epoch older than the last seen.
    InvalidProducerEpoch(String),
    /// OUT_OF_ORDER_SEQUENCE_NUMBER: a sequence that does not continue the producer's.
    OutOfOrderSequence(String),
    /// INVALID_TXN_STATE: a non-transactional batch while the producer's transaction
    /// is ongoing.
    InvalidTxnState(String),
    /// TRANSACTION_COORDINATOR_FENCED: a marker from an older coordinator epoch.
    TransactionCoordinatorFenced(String),
    /// KAFKA_STORAGE_ERROR.
    Io(io::Error),
}

impl fmt::Display for LogError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            LogError::CorruptMessage(why) => write!(f, "corrupt record batch: {why}"),
            LogError::MessageTooLarge => write!(f, "record batch larger than max.message.bytes"),
            LogError::RecordListTooLarge => write!(f, "record set larger than segment.bytes"),
            LogError::InvalidTimestamp => write!(f, "record timestamp out of the accepted range"),
            LogError::OffsetOutOfRange {
                log_start_offset,
                log_end_offset,
            } => write!(
                f,
                "offset out of range [{log_start_offset}, {log_end_offset}]"
            ),
            LogError::UnsupportedMagic(magic) => {
                write!(f, "unsupported record batch magic {magic}")
            }
            LogError::InvalidRecord(why)
            | LogError::InvalidProducerEpoch(why)
            | LogError::OutOfOrderSequence(why)
            | LogError::InvalidTxnState(why)
            | LogError::TransactionCoordinatorFenced(why) => f.write_str(why),
            LogError::InvalidRecords { message, .. } => f.write_str(message),
            LogError::Io(error) => write!(f, "log storage error: {error}"),
        }
    }
}

impl std::error::Error for LogError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            LogError::Io(error) => Some(error),
            _ => None,
        }
    }
}

impl From<io::Error> for LogError {
    fn from(error: io::Error) -> LogError {
        LogError::Io(error)
    }
}

/// Bytes on disk that were valid when written and no longer are.
pub(crate) fn storage_corruption(message: String) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, message)
}

/// What an append did, for the Produce response.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AppendInfo {
    pub first_offset: Offset,
    pub last_offset: Offset,
    /// The time stamped on the batches, or -1 unless the topic uses LogAppendTime.
    pub log_append_time: i64,
    pub log_start_offset: Offset,
    pub max_timestamp: i64,
    pub record_count: u32,
    pub batch_count: u32,
    /// The batch was a retry of one already written: `first_offset` and `last_offset`
    /// are where it was first written (`log_append_time` its stored timestamp, as
    /// Kafka answers), and nothing was written now.
    pub duplicate: bool,
}

/// A commit or abort marker the transaction coordinator writes to a partition.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TxnMarker {
    pub producer_id: i64,
    pub producer_epoch: ProducerEpoch,
    pub coordinator_epoch: i32,
    pub commit: bool,
}

/// An aborted transaction: its producer, its first data offset, its abort marker's
/// offset, and the partition's last stable offset when it was aborted (Kafka's
/// `AbortedTxn`, one transaction index entry).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AbortedTxn {
    pub producer_id: i64,
    pub first_offset: i64,
    pub last_offset: i64,
    pub last_stable_offset: i64,
}

/// One active producer, as DescribeProducers reports it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ProducerSummary {
    pub producer_id: i64,
    pub producer_epoch: ProducerEpoch,
    pub last_sequence: i32,
    pub last_timestamp: i64,
    pub coordinator_epoch: i32,
    /// The first offset of its ongoing transaction, if it has one.
    pub current_txn_start_offset: Option<Offset>,
}

/// Kafka's `FetchIsolation` for consumers: how far a fetch may read.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum IsolationLevel {
    /// Up to the high watermark.
    #[default]
    ReadUncommitted,
    /// Up to the last stable offset, with the aborted transactions of the range read.
    ReadCommitted,
}

/// Whole batches in a segment file, to be read outside the partition lock.
#[derive(Clone, Debug)]
pub struct FileSlice {
    pub file: Arc<File>,
    pub position: u64,
    pub len: usize,
}

impl FileSlice {
    /// Reads exactly `len` bytes at `position` (positional read; no shared cursor).
    /// Fails with `UnexpectedEof` if the log was truncated under the slice since.
    pub fn read(&self) -> io::Result<bytes::Bytes> {
        let mut bytes = vec![0u8; self.len];
        self.file.read_exact_at(&mut bytes, self.position)?;
        Ok(bytes::Bytes::from(bytes))
    }
}

/// The answer to a fetch.
#[derive(Clone, Debug)]
pub struct LogRead {
    /// Whole batches, starting with the one holding the fetch offset; None when there
    /// is nothing to return.
    pub records: Option<FileSlice>,
    pub log_start_offset: Offset,
    pub log_end_offset: Offset,
    /// For read_committed: the aborted transactions overlapping the batches read
    /// (empty when none were read). None for read_uncommitted.
    pub aborted_transactions: Option<Vec<AbortedTxn>>,
}

/// One log's entry in the recovery-point and log-start checkpoints.
#[derive(Clone, Debug)]
pub struct CheckpointedOffsets {
    pub tp: crate::types::TopicPartition,
    pub recovery_point: i64,
    pub log_start_offset: i64,
    pub high_watermark: i64,
    /// The cleaner checkpoint, for a compacted log.
    pub first_dirty_offset: Option<i64>,
}

/// The offsets a follower's append wrote: the leader's, unchanged.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ReplicatedAppend {
    pub first_offset: Offset,
    pub last_offset: Offset,
}

/// What to fsync, outside the partition lock, to make every offset below
/// `end_offset` durable; then pass it to `PartitionLog::mark_flushed`.
#[derive(Clone, Debug)]
pub struct FlushTarget {
    /// Open files to fsync.
    pub files: Vec<Arc<File>>,
    /// Index files to write and fsync (opened and closed again).
    pub index_writes: Vec<index_file::IndexWrite>,
    /// The partition directory, when a file was created in it since the last
    /// flush (its directory entry must be durable too).
    pub dir: Option<PathBuf>,
    pub end_offset: i64,
}

impl FlushTarget {
    /// Writes the indexes and fsyncs every file (data and metadata, so new
    /// segment files keep their size), then the directory.
    pub fn sync(&self) -> io::Result<()> {
        for write in &self.index_writes {
            write.apply()?;
        }
        for file in &self.files {
            file.sync_all()?;
        }
        if let Some(dir) = &self.dir {
            checkpoint::sync_dir(dir)?;
        }
        Ok(())
    }

    /// Whether there is nothing to sync.
    pub fn is_empty(&self) -> bool {
        self.files.is_empty() && self.index_writes.is_empty() && self.dir.is_none()
    }
}
