//! Record-level lookups, the only place the log decodes records: ListOffsets needs
//! the exact record for a timestamp, so one batch at a time is decoded (and
//! decompressed) here; and an append whose batch header lacks its records' newest
//! timestamp (`max_timestamp` below `base_timestamp`, as sarama 1.22 writes -1)
//! has it taken from the records here. Fetches never come through this module,
//! nor do appends of batches whose header is consistent.
//!
//! Records are not validated on append, so a batch may hold records that cannot be
//! decoded although its CRC is right. Such a batch is answered at batch granularity
//! (its first eligible offset and its maxTimestamp) rather than failing the request.

use bytes::Bytes;
use kafka_protocol::records::{Record, RecordBatchDecoder};

use super::batch::BatchHeader;
use super::time_index::TimestampOffset;

/// The first record of `batch` with offset >= `starting_offset` and timestamp >=
/// `target_ms`. Every record of a LogAppendTime batch has the batch maxTimestamp.
pub fn first_at_or_after(
    batch: Bytes,
    header: &BatchHeader,
    target_ms: i64,
    starting_offset: i64,
) -> Option<TimestampOffset> {
    let batch_answer = || {
        (header.max_timestamp >= target_ms).then(|| TimestampOffset {
            timestamp: header.max_timestamp,
            offset: header.base_offset.max(starting_offset),
        })
    };
    if header.is_log_append_time() {
        return batch_answer();
    }
    match decode(batch, header) {
        Some(records) => records
            .iter()
            .find(|r| r.offset >= starting_offset && r.timestamp >= target_ms)
            .map(|r| TimestampOffset {
                timestamp: r.timestamp,
                offset: r.offset,
            }),
        None => batch_answer(),
    }
}

/// The offset of the first record of `batch` whose timestamp is `timestamp`, as
/// Kafka's `RecordBatch.offsetOfMaxTimestamp`; the base offset for LogAppendTime.
pub fn offset_of_timestamp(batch: Bytes, header: &BatchHeader, timestamp: i64) -> i64 {
    if header.is_log_append_time() {
        return header.base_offset;
    }
    decode(batch, header)
        .and_then(|records| {
            records
                .iter()
                .find(|r| r.timestamp == timestamp)
                .map(|r| r.offset)
        })
        .unwrap_or(header.base_offset)
}

/// The newest record timestamp of a CreateTime `batch` (a whole batch, CRC
/// checked), from its records' timestamp deltas, decompressing a compressed
/// batch; None when its records cannot be decoded or it holds none.
pub fn newest_record_timestamp(batch: &[u8], header: &BatchHeader) -> Option<i64> {
    decode(Bytes::copy_from_slice(batch), header)?
        .iter()
        .map(|record| record.timestamp)
        .max()
}

fn decode(mut batch: Bytes, header: &BatchHeader) -> Option<Vec<Record>> {
    match RecordBatchDecoder::decode(&mut batch) {
        Ok(set) => Some(set.records),
        Err(error) => {
            tracing::warn!(%error, base_offset = header.base_offset, "cannot decode records; answering per batch");
            None
        }
    }
}
