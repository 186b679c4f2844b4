//! The record batch v2 header (magic 2): parse, check and rewrite the 61 bytes that
//! precede a batch's records, never the records themselves.
//!
//! Invariant: the CRC32C of a batch covers the bytes from `attributes` to the end of
//! the batch, so `base_offset` and `partition_leader_epoch` may be rewritten without
//! touching it, while any change to `attributes` or `max_timestamp` must recompute it.

/// Bytes of a batch not counted by its `batchLength` field: baseOffset (8) + batchLength (4).
pub const LOG_OVERHEAD_BYTES: usize = 12;
/// Bytes of the v2 header, from baseOffset up to the first record.
pub const BATCH_HEADER_SIZE_BYTES: usize = 61;
/// The only batch format this log stores; older message sets are rejected.
pub const MAGIC_V2: i8 = 2;
/// The timestamp Kafka uses for "none", in batches from producers that do not set one.
pub const NO_TIMESTAMP: i64 = -1;
/// The leader epoch Kafka uses for "none".
pub const NO_PARTITION_LEADER_EPOCH: i32 = -1;
/// Kafka's `RecordBatch.NO_PRODUCER_ID`: a batch from a plain (non-idempotent) producer.
pub const NO_PRODUCER_ID: i64 = -1;
/// Kafka's `RecordBatch.NO_SEQUENCE`.
pub const NO_SEQUENCE: i32 = -1;
/// The smallest possible encoding of one uncompressed record: length, attributes,
/// timestamp delta, offset delta, key length, value length and header count, one byte
/// each. Bounds the record count an uncompressed batch may claim.
pub const RECORD_SIZE_BYTES_MIN: usize = 7;

const BASE_OFFSET_AT: usize = 0;
const BATCH_LENGTH_AT: usize = 8;
const PARTITION_LEADER_EPOCH_AT: usize = 12;
const MAGIC_AT: usize = 16;
const CRC_AT: usize = 17;
/// First byte covered by the CRC.
const ATTRIBUTES_AT: usize = 21;
const LAST_OFFSET_DELTA_AT: usize = 23;
const BASE_TIMESTAMP_AT: usize = 27;
const MAX_TIMESTAMP_AT: usize = 35;
const PRODUCER_ID_AT: usize = 43;
const PRODUCER_EPOCH_AT: usize = 51;
const BASE_SEQUENCE_AT: usize = 53;
const RECORDS_COUNT_AT: usize = 57;

const COMPRESSION_CODEC_MASK: i16 = 0x07;
/// Codecs 0..=4: none, gzip, snappy, lz4, zstd.
const COMPRESSION_CODEC_MAX: i16 = 4;
const TIMESTAMP_TYPE_MASK: i16 = 0x08;
/// Attribute bit of a batch written inside a transaction.
pub const TRANSACTIONAL_MASK: i16 = 0x10;
/// Attribute bit of a control batch (transaction markers).
pub const CONTROL_MASK: i16 = 0x20;

/// Why a batch header is not acceptable. Callers map it onto a Kafka error code
/// (append) or onto "truncate here" (recovery).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum BatchError {
    UnsupportedMagic(i8),
    Corrupt(String),
}

/// The decoded v2 header. `Copy` so scans can keep the previous one cheaply.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BatchHeader {
    pub base_offset: i64,
    pub batch_length: i32,
    pub partition_leader_epoch: i32,
    pub magic: i8,
    pub crc: u32,
    pub attributes: i16,
    pub last_offset_delta: i32,
    pub base_timestamp: i64,
    pub max_timestamp: i64,
    pub producer_id: i64,
    pub producer_epoch: i16,
    pub base_sequence: i32,
    pub records_count: i32,
}

impl BatchHeader {
    /// Decodes the fixed fields; says nothing about whether they make sense (see `check`).
    pub fn parse(bytes: &[u8; BATCH_HEADER_SIZE_BYTES]) -> BatchHeader {
        BatchHeader {
            base_offset: i64_at(bytes, BASE_OFFSET_AT),
            batch_length: i32_at(bytes, BATCH_LENGTH_AT),
            partition_leader_epoch: i32_at(bytes, PARTITION_LEADER_EPOCH_AT),
            magic: bytes[MAGIC_AT] as i8,
            crc: u32_at(bytes, CRC_AT),
            attributes: i16_at(bytes, ATTRIBUTES_AT),
            last_offset_delta: i32_at(bytes, LAST_OFFSET_DELTA_AT),
            base_timestamp: i64_at(bytes, BASE_TIMESTAMP_AT),
            max_timestamp: i64_at(bytes, MAX_TIMESTAMP_AT),
            producer_id: i64_at(bytes, PRODUCER_ID_AT),
            producer_epoch: i16_at(bytes, PRODUCER_EPOCH_AT),
            base_sequence: i32_at(bytes, BASE_SEQUENCE_AT),
            records_count: i32_at(bytes, RECORDS_COUNT_AT),
        }
    }

    /// Parses the header at the start of `bytes`, or None when fewer than
    /// `BATCH_HEADER_SIZE_BYTES` remain.
    pub fn parse_prefix(bytes: &[u8]) -> Option<BatchHeader> {
        let header: &[u8; BATCH_HEADER_SIZE_BYTES] =
            bytes.get(..BATCH_HEADER_SIZE_BYTES)?.try_into().ok()?;
        Some(BatchHeader::parse(header))
    }

    /// Whole batch size in bytes, including the 12 bytes of log overhead. Only
    /// meaningful once `check` passed, which guarantees a non-negative length.
    pub fn size_bytes(&self) -> usize {
        LOG_OVERHEAD_BYTES + self.batch_length.max(0) as usize
    }

    /// Saturating: a base offset read from disk is not covered by the CRC and may be
    /// anything; range checks downstream reject it instead of overflowing here.
    pub fn last_offset(&self) -> i64 {
        self.base_offset
            .saturating_add(i64::from(self.last_offset_delta))
    }

    pub fn compression_codec(&self) -> i16 {
        self.attributes & COMPRESSION_CODEC_MASK
    }

    pub fn is_log_append_time(&self) -> bool {
        self.attributes & TIMESTAMP_TYPE_MASK != 0
    }

    pub fn is_transactional(&self) -> bool {
        self.attributes & TRANSACTIONAL_MASK != 0
    }

    pub fn is_control(&self) -> bool {
        self.attributes & CONTROL_MASK != 0
    }

    /// Kafka's `hasProducerId`: written by an idempotent or transactional producer.
    pub fn has_producer_id(&self) -> bool {
        self.producer_id > NO_PRODUCER_ID
    }

    /// Kafka's `DefaultRecordBatch.lastSequence`: the base sequence advanced by
    /// lastOffsetDelta, wrapping past `i32::MAX` to 0 as producers do.
    pub fn last_sequence(&self) -> i32 {
        if self.base_sequence == NO_SEQUENCE {
            return NO_SEQUENCE;
        }
        increment_sequence(self.base_sequence, self.last_offset_delta)
    }

    /// Structural checks that need no record bytes: magic, a length that covers the
    /// header, a known codec, and a record count that agrees with lastOffsetDelta.
    pub fn check(&self) -> Result<(), BatchError> {
        self.check_with(false)
    }

    fn check_with(&self, stored: bool) -> Result<(), BatchError> {
        if self.magic != MAGIC_V2 {
            return Err(BatchError::UnsupportedMagic(self.magic));
        }
        let length_min = (BATCH_HEADER_SIZE_BYTES - LOG_OVERHEAD_BYTES) as i32;
        if self.batch_length < length_min {
            return Err(corrupt(format!(
                "batch length {} is below the header size {length_min}",
                self.batch_length
            )));
        }
        if self.compression_codec() > COMPRESSION_CODEC_MAX {
            return Err(corrupt(format!(
                "unknown compression codec {}",
                self.compression_codec()
            )));
        }
        self.check_record_count(stored)
    }

    /// `check` for a batch already in a log, or a leader's copy of one: compaction
    /// (`log::cleaner`) keeps a batch's offsets and lastOffsetDelta while removing
    /// records from it, so it may hold fewer records than its offsets span, or none.
    pub fn check_stored(&self) -> Result<(), BatchError> {
        self.check_with(true)
    }

    fn check_record_count(&self, stored: bool) -> Result<(), BatchError> {
        // Kafka: count from offsets must be positive and equal the stored count (for
        // a stored batch: no more than it, as compaction leaves it).
        let count_from_offsets = i64::from(self.last_offset_delta) + 1;
        let count = i64::from(self.records_count);
        let consistent = if stored {
            (0..=count_from_offsets).contains(&count)
        } else {
            count_from_offsets == count
        };
        if count_from_offsets <= 0 || !consistent {
            return Err(corrupt(format!(
                "records count {} does not match lastOffsetDelta {}",
                self.records_count, self.last_offset_delta
            )));
        }
        // An uncompressed batch must have room for its records; a compressed one can
        // only be checked by decompressing, which the append path never does.
        let records_bytes = self.size_bytes() - BATCH_HEADER_SIZE_BYTES;
        let records_count = self.records_count as usize;
        if self.compression_codec() == 0
            && records_count.saturating_mul(RECORD_SIZE_BYTES_MIN) > records_bytes
        {
            return Err(corrupt(format!(
                "{records_count} records cannot fit in {records_bytes} bytes"
            )));
        }
        Ok(())
    }
}

/// CRC32C of a whole batch as stored in its header: over everything from `attributes` on.
pub fn compute_crc(batch: &[u8]) -> u32 {
    assert!(
        batch.len() >= BATCH_HEADER_SIZE_BYTES,
        "batch shorter than its header"
    );
    crc32c::crc32c(&batch[ATTRIBUTES_AT..])
}

/// The CRC of the bytes before `attributes` is not part of the batch CRC; this is where
/// a streaming check starts.
pub const CRC_COVERAGE_START_BYTES: usize = ATTRIBUTES_AT;

/// Checks the stored CRC against the bytes of one whole batch.
pub fn check_crc(batch: &[u8], header: &BatchHeader) -> Result<(), BatchError> {
    let computed = compute_crc(batch);
    if computed != header.crc {
        return Err(corrupt(format!(
            "CRC mismatch at base offset {}: stored {:#010x}, computed {computed:#010x}",
            header.base_offset, header.crc
        )));
    }
    Ok(())
}

/// Rewrites baseOffset. Outside the CRC, so the CRC stays valid.
pub fn set_base_offset(batch: &mut [u8], base_offset: i64) {
    batch[BASE_OFFSET_AT..BASE_OFFSET_AT + 8].copy_from_slice(&base_offset.to_be_bytes());
}

/// Rewrites partitionLeaderEpoch. Outside the CRC, so the CRC stays valid.
pub fn set_partition_leader_epoch(batch: &mut [u8], leader_epoch: i32) {
    batch[PARTITION_LEADER_EPOCH_AT..PARTITION_LEADER_EPOCH_AT + 4]
        .copy_from_slice(&leader_epoch.to_be_bytes());
}

/// Marks the batch LogAppendTime with `now_ms` as its maxTimestamp, as Kafka's
/// `setMaxTimestamp(LOG_APPEND_TIME, now)` does, and recomputes the CRC. Every record of
/// such a batch is read back with the batch maxTimestamp, so records stay untouched.
pub fn set_log_append_time(batch: &mut [u8], now_ms: i64) {
    let attributes = i16_at(batch, ATTRIBUTES_AT) | TIMESTAMP_TYPE_MASK;
    batch[ATTRIBUTES_AT..ATTRIBUTES_AT + 2].copy_from_slice(&attributes.to_be_bytes());
    set_max_timestamp(batch, now_ms);
}

/// Rewrites maxTimestamp, as Kafka's `setMaxTimestamp(CREATE_TIME, max)` does for a
/// batch whose header did not carry its records' newest timestamp, and recomputes
/// the CRC.
pub fn set_max_timestamp(batch: &mut [u8], max_timestamp: i64) {
    batch[MAX_TIMESTAMP_AT..MAX_TIMESTAMP_AT + 8].copy_from_slice(&max_timestamp.to_be_bytes());
    let crc = compute_crc(batch);
    batch[CRC_AT..CRC_AT + 4].copy_from_slice(&crc.to_be_bytes());
}

/// A batch with the header of `original` (offsets, lastOffsetDelta, producer,
/// attributes and timestamps) and `records` (already compressed as its codec
/// says) in place of its own, `records_count` of them, the newest stamped
/// `max_timestamp`; length and CRC are recomputed (and with no records, the
/// codec cleared). What compaction writes for a
/// batch it removed records from (Kafka keeps the original last offset, so the
/// producer's last sequence survives).
pub fn with_records(
    original: &[u8],
    records: &[u8],
    records_count: i32,
    max_timestamp: i64,
) -> Vec<u8> {
    let mut batch = Vec::with_capacity(BATCH_HEADER_SIZE_BYTES + records.len());
    batch.extend_from_slice(&original[..BATCH_HEADER_SIZE_BYTES]);
    batch.extend_from_slice(records);
    let batch_length = (batch.len() - LOG_OVERHEAD_BYTES) as i32;
    batch[BATCH_LENGTH_AT..BATCH_LENGTH_AT + 4].copy_from_slice(&batch_length.to_be_bytes());
    batch[RECORDS_COUNT_AT..RECORDS_COUNT_AT + 4].copy_from_slice(&records_count.to_be_bytes());
    if records_count == 0 {
        // No records, nothing compressed: Kafka writes an empty batch uncompressed
        // (a decoder would choke on an empty compressed stream).
        let attributes = i16_at(&batch, ATTRIBUTES_AT) & !COMPRESSION_CODEC_MASK;
        batch[ATTRIBUTES_AT..ATTRIBUTES_AT + 2].copy_from_slice(&attributes.to_be_bytes());
    }
    set_max_timestamp(&mut batch, max_timestamp);
    batch
}

/// Kafka's `DefaultRecordBatch.incrementSequence`: `sequence + increment`, wrapping
/// past `i32::MAX` to 0.
pub fn increment_sequence(sequence: i32, increment: i32) -> i32 {
    if sequence > i32::MAX - increment {
        increment - (i32::MAX - sequence) - 1
    } else {
        sequence + increment
    }
}

fn corrupt(message: String) -> BatchError {
    BatchError::Corrupt(message)
}

// The readers below index fixed positions inside a slice whose length the caller has
// already checked against BATCH_HEADER_SIZE_BYTES; the copies cannot fail.
fn i16_at(bytes: &[u8], at: usize) -> i16 {
    let mut raw = [0u8; 2];
    raw.copy_from_slice(&bytes[at..at + 2]);
    i16::from_be_bytes(raw)
}

fn i32_at(bytes: &[u8], at: usize) -> i32 {
    let mut raw = [0u8; 4];
    raw.copy_from_slice(&bytes[at..at + 4]);
    i32::from_be_bytes(raw)
}

fn u32_at(bytes: &[u8], at: usize) -> u32 {
    let mut raw = [0u8; 4];
    raw.copy_from_slice(&bytes[at..at + 4]);
    u32::from_be_bytes(raw)
}

fn i64_at(bytes: &[u8], at: usize) -> i64 {
    let mut raw = [0u8; 8];
    raw.copy_from_slice(&bytes[at..at + 8]);
    i64::from_be_bytes(raw)
}
