//! Validation of a record set handed to `PartitionLog::append`: one or more
//! concatenated v2 batches, checked as a whole before a single byte is written.
//!
//! Invariant: `validate_record_set` either accepts every batch or reports the first
//! problem; it reads only batch headers and CRCs, never the records inside, but
//! for a CreateTime batch whose header cannot be trusted with its newest
//! timestamp (`max_timestamp` below `base_timestamp`, for example the -1 that
//! sarama 1.22 writes): there it takes the newest timestamp from the records, as
//! Kafka's LogValidator does for every batch, and the append rewrites the header.

use super::batch::{self, BatchError, BatchHeader, BATCH_HEADER_SIZE_BYTES, NO_TIMESTAMP};
use super::records::newest_record_timestamp;
use super::{LogConfig, LogError, TimestampType};

/// One accepted batch: where it sits in the record set and what its header says.
#[derive(Clone, Copy, Debug)]
pub struct BatchSpan {
    pub position: usize,
    /// The header as the batch will be stored: with `max_timestamp` taken from the
    /// records where the client's could not be trusted.
    pub header: BatchHeader,
    /// Whether `header.max_timestamp` differs from the bytes, which the append
    /// must then rewrite (with the CRC).
    pub max_timestamp_derived: bool,
}

/// What an accepted record set holds.
#[derive(Debug)]
pub struct ValidatedRecords {
    pub batches: Vec<BatchSpan>,
    pub record_count: u32,
    /// Offsets the set will take: the sum of (lastOffsetDelta + 1) over its batches.
    pub offset_count: i64,
}

/// Checks every batch of `records` against the format and the topic config.
pub fn validate_record_set(
    records: &[u8],
    config: &LogConfig,
    now_ms: i64,
) -> Result<ValidatedRecords, LogError> {
    if records.is_empty() {
        return Err(LogError::CorruptMessage("empty record set".to_string()));
    }
    let mut batches = Vec::new();
    let mut record_count: u64 = 0;
    let mut offset_count: i64 = 0;
    let mut position = 0;
    while position < records.len() {
        let (header, max_timestamp_derived) = validate_batch(&records[position..], config, now_ms)?;
        batches.push(BatchSpan {
            position,
            header,
            max_timestamp_derived,
        });
        record_count += header.records_count as u64;
        offset_count += i64::from(header.last_offset_delta) + 1;
        position += header.size_bytes();
    }
    assert_eq!(position, records.len(), "batches must tile the record set");
    // After the per-batch checks, as Kafka: a record set must fit in an empty segment.
    if records.len() as u64 > config.effective_segment_bytes() {
        return Err(LogError::RecordListTooLarge);
    }
    let record_count = u32::try_from(record_count)
        .map_err(|_| LogError::CorruptMessage("too many records in one append".to_string()))?;
    Ok(ValidatedRecords {
        batches,
        record_count,
        offset_count,
    })
}

/// Validates the batch at the start of `rest`, in Kafka's order: length, magic, size
/// limit, CRC, client-only rules, then timestamps. Returns the header as it is to
/// be stored, and whether its `max_timestamp` was taken from the records.
fn validate_batch(
    rest: &[u8],
    config: &LogConfig,
    now_ms: i64,
) -> Result<(BatchHeader, bool), LogError> {
    let header = BatchHeader::parse_prefix(rest).ok_or_else(|| {
        LogError::CorruptMessage(format!(
            "{} trailing bytes are shorter than a batch header ({BATCH_HEADER_SIZE_BYTES})",
            rest.len()
        ))
    })?;
    header.check().map_err(LogError::from)?;
    let size = header.size_bytes();
    if size > rest.len() {
        return Err(LogError::CorruptMessage(format!(
            "batch of {size} bytes is cut short: {} bytes left",
            rest.len()
        )));
    }
    if size as u64 > u64::from(config.max_message_bytes) {
        return Err(LogError::MessageTooLarge);
    }
    batch::check_crc(&rest[..size], &header).map_err(LogError::from)?;
    validate_client_batch(&header)?;
    if config.cleanup.compact {
        validate_keys(&rest[..size], &header)?;
    }
    let (header, derived) = with_trusted_max_timestamp(&rest[..size], header, config);
    validate_timestamps(&header, config, now_ms)?;
    Ok((header, derived))
}

/// The header with a `max_timestamp` that can be trusted: as the client sent it
/// when it is at least `base_timestamp` (the no-decode path), else the newest
/// record timestamp (decoding, and decompressing, only this batch). LogAppendTime
/// batches and batches without a base timestamp are left as they are.
fn with_trusted_max_timestamp(
    batch: &[u8],
    header: BatchHeader,
    config: &LogConfig,
) -> (BatchHeader, bool) {
    let untrusted = config.timestamp_type == TimestampType::CreateTime
        && !header.is_log_append_time()
        && header.base_timestamp != NO_TIMESTAMP
        && header.max_timestamp < header.base_timestamp;
    if !untrusted {
        return (header, false);
    }
    let max_timestamp = newest_record_timestamp(batch, &header)
        .unwrap_or(header.base_timestamp)
        .max(header.base_timestamp);
    (
        BatchHeader {
            max_timestamp,
            ..header
        },
        true,
    )
}

/// Kafka's `LogValidator.validateBatch` rules for batches from clients: control
/// batches are written only by the transaction coordinator, and an idempotent or
/// transactional batch carries a sequence.
fn validate_client_batch(header: &BatchHeader) -> Result<(), LogError> {
    if header.is_control() {
        return Err(LogError::InvalidRecord(
            "Clients are not allowed to write control records".to_string(),
        ));
    }
    if header.has_producer_id() && header.base_sequence < 0 {
        return Err(LogError::InvalidRecord(format!(
            "Invalid sequence number {} in record batch with producerId {}",
            header.base_sequence, header.producer_id
        )));
    }
    Ok(())
}

/// Kafka's `LogValidator.validateKey`: every record written to a compacted topic
/// has a key; the ones without are reported one by one (KIP-467), by their index
/// in the batch. The only check on the append path that reads records.
fn validate_keys(batch: &[u8], header: &BatchHeader) -> Result<(), LogError> {
    let split = super::records::split(batch, header).map_err(LogError::CorruptMessage)?;
    let record_errors: Vec<(i32, String)> = split
        .records
        .iter()
        .enumerate()
        .filter(|(_, record)| record.key.is_none())
        .map(|(index, _)| {
            (
                index as i32,
                "Compacted topic cannot accept message without key.".to_string(),
            )
        })
        .collect();
    if record_errors.is_empty() {
        return Ok(());
    }
    let shown: Vec<String> = record_errors
        .iter()
        .take(RECORD_ERRORS_SHOWN)
        .map(|(index, message)| format!("{index}: {message}"))
        .collect();
    Err(LogError::InvalidRecords {
        message: format!(
            "One or more records have been rejected due to {} record errors in total, and only showing the first {RECORD_ERRORS_SHOWN} errors at most: [{}]",
            record_errors.len(),
            shown.join(", ")
        ),
        record_errors,
    })
}

/// Kafka's ProduceResponse message names at most three record errors.
const RECORD_ERRORS_SHOWN: usize = 3;

/// CreateTime topics bound the producer's timestamps around `now_ms`; LogAppendTime
/// topics overwrite them, so nothing is checked there. Both baseTimestamp and
/// maxTimestamp are real record timestamps, so each is held to both bounds.
fn validate_timestamps(
    header: &BatchHeader,
    config: &LogConfig,
    now_ms: i64,
) -> Result<(), LogError> {
    if config.timestamp_type == TimestampType::LogAppendTime {
        return Ok(());
    }
    // Kafka: "Producer should not set timestamp type to LogAppendTime."
    if header.is_log_append_time() {
        return Err(LogError::InvalidTimestamp);
    }
    let latest_ms = now_ms.saturating_add(config.message_timestamp_after_max_ms);
    let earliest_ms = now_ms.saturating_sub(config.message_timestamp_before_max_ms);
    for timestamp in [header.base_timestamp, header.max_timestamp] {
        if timestamp != NO_TIMESTAMP && (timestamp > latest_ms || timestamp < earliest_ms) {
            return Err(LogError::InvalidTimestamp);
        }
    }
    Ok(())
}

impl From<BatchError> for LogError {
    fn from(error: BatchError) -> LogError {
        match error {
            BatchError::UnsupportedMagic(magic) => LogError::UnsupportedMagic(magic),
            BatchError::Corrupt(message) => LogError::CorruptMessage(message),
        }
    }
}
