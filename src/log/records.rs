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

/// Batch attribute codecs, as Kafka numbers them.
const CODEC_NONE: i16 = 0;
const CODEC_GZIP: i16 = 1;
const CODEC_SNAPPY: i16 = 2;
const CODEC_LZ4: i16 = 3;
const CODEC_ZSTD: i16 = 4;

/// One record of a batch as compaction sees it: where its bytes are in the
/// batch's uncompressed records, its offset and timestamp, its key's bytes and
/// whether its value is null (a tombstone).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RawRecord {
    pub span: std::ops::Range<usize>,
    pub offset: i64,
    pub timestamp: i64,
    pub key: Option<std::ops::Range<usize>>,
    pub tombstone: bool,
}

/// A batch's records, uncompressed, each one's bytes kept as written so that
/// the ones kept are copied, never re-encoded.
pub struct SplitRecords {
    pub uncompressed: Bytes,
    pub records: Vec<RawRecord>,
}

/// Splits a whole, CRC-checked batch into its records, decompressing it first
/// when its codec says so. Err says why the records cannot be read.
pub fn split(batch: &[u8], header: &BatchHeader) -> Result<SplitRecords, String> {
    use kafka_protocol::compression::{Decompressor, Gzip, Lz4, Snappy, Zstd};
    let mut compressed = Bytes::copy_from_slice(&batch[super::BATCH_HEADER_SIZE_BYTES..]);
    let take = |buf: &mut Bytes| Ok(buf.split_off(0));
    let uncompressed = match header.compression_codec() {
        CODEC_NONE => Ok(compressed),
        CODEC_GZIP => Gzip::decompress(&mut compressed, take),
        CODEC_SNAPPY => Snappy::decompress(&mut compressed, take),
        CODEC_LZ4 => Lz4::decompress(&mut compressed, take),
        CODEC_ZSTD => Zstd::decompress(&mut compressed, take),
        codec => return Err(format!("unknown compression codec {codec}")),
    }
    .map_err(|error| format!("cannot decompress: {error}"))?;
    let mut records = Vec::new();
    let mut at = 0;
    while at < uncompressed.len() {
        let record = parse_record(&uncompressed, at, header)
            .ok_or_else(|| format!("record {} cannot be read", records.len()))?;
        at = record.span.end;
        records.push(record);
    }
    if records.len() != usize::try_from(header.records_count).unwrap_or(usize::MAX) {
        return Err(format!(
            "{} records where the header counts {}",
            records.len(),
            header.records_count
        ));
    }
    Ok(SplitRecords {
        uncompressed,
        records,
    })
}

/// Compresses `records` (uncompressed record bytes) with `codec`, as a batch of
/// that codec holds them.
pub fn compress(codec: i16, records: &[u8]) -> Result<Vec<u8>, String> {
    use bytes::BufMut;
    use kafka_protocol::compression::{Compressor, Gzip, Lz4, Snappy, Zstd};
    let mut out = bytes::BytesMut::new();
    let fill = |buf: &mut bytes::BytesMut| {
        buf.put_slice(records);
        Ok(())
    };
    match codec {
        CODEC_NONE => return Ok(records.to_vec()),
        CODEC_GZIP => Gzip::compress(&mut out, fill),
        CODEC_SNAPPY => Snappy::compress(&mut out, fill),
        CODEC_LZ4 => Lz4::compress(&mut out, fill),
        CODEC_ZSTD => Zstd::compress(&mut out, fill),
        codec => return Err(format!("unknown compression codec {codec}")),
    }
    .map_err(|error| format!("cannot compress: {error}"))?;
    Ok(out.to_vec())
}

/// The record at `at`: length, attributes, timestamp delta, offset delta, key,
/// value (headers are inside the span and not looked at).
fn parse_record(bytes: &[u8], at: usize, header: &BatchHeader) -> Option<RawRecord> {
    let mut cursor = at;
    let length = usize::try_from(varint(bytes, &mut cursor)?).ok()?;
    let end = cursor.checked_add(length)?;
    let body = bytes.get(..end)?;
    cursor += 1; // attributes
    let timestamp_delta = varint(body, &mut cursor)?;
    let offset_delta = varint(body, &mut cursor)?;
    let key_length = varint(body, &mut cursor)?;
    let key = if key_length < 0 {
        None
    } else {
        let start = cursor;
        cursor = cursor.checked_add(usize::try_from(key_length).ok()?)?;
        (cursor <= end).then_some(start..cursor)?;
        Some(start..cursor)
    };
    let value_length = varint(body, &mut cursor)?;
    Some(RawRecord {
        span: at..end,
        offset: header.base_offset.checked_add(offset_delta)?,
        timestamp: if header.is_log_append_time() {
            header.max_timestamp
        } else {
            header.base_timestamp.checked_add(timestamp_delta)?
        },
        key,
        tombstone: value_length < 0,
    })
}

/// A zigzag varint (Kafka's varint and varlong alike, up to 64 bits).
fn varint(bytes: &[u8], cursor: &mut usize) -> Option<i64> {
    let mut raw: u64 = 0;
    for shift in (0..64).step_by(7) {
        let byte = *bytes.get(*cursor)?;
        *cursor += 1;
        raw |= u64::from(byte & 0x7f) << shift;
        if byte & 0x80 == 0 {
            return Some((raw >> 1) as i64 ^ -((raw & 1) as i64));
        }
    }
    None
}

/// A key and a value (None: a tombstone), as a coordinator writes records.
pub type KeyedRecord = (Bytes, Option<Bytes>);

/// The transaction a coordinator's batch belongs to: its producer id and
/// epoch (Kafka's group coordinator writes a TxnOffsetCommit this way).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TxnProducer {
    pub producer_id: i64,
    pub producer_epoch: i16,
}

/// One uncompressed batch of `records` without a producer, stamped `now_ms`:
/// how Kafka's coordinators write their internal topics.
pub fn keyed_batch(records: Vec<KeyedRecord>, now_ms: i64) -> Result<Bytes, String> {
    producer_keyed_batch(records, None, now_ms)
}

/// `keyed_batch`, transactional in `txn` when given (sequence 0, as Kafka's
/// group coordinator writes it: a coordinator's batches are not sequenced).
pub fn producer_keyed_batch(
    records: Vec<KeyedRecord>,
    txn: Option<TxnProducer>,
    now_ms: i64,
) -> Result<Bytes, String> {
    use kafka_protocol::records::{Compression, TimestampType};
    let (producer_id, producer_epoch) = txn.map_or((-1, -1), |t| (t.producer_id, t.producer_epoch));
    let records: Vec<Record> = (0..)
        .zip(records)
        .map(|(offset, (key, value))| Record {
            transactional: txn.is_some(),
            control: false,
            delete_horizon: false,
            partition_leader_epoch: -1,
            producer_id,
            producer_epoch,
            timestamp_type: TimestampType::Creation,
            offset,
            // One batch holds them all: the encoder starts a new batch where
            // `offset - sequence` changes. Without a producer the batch's base
            // sequence is -1, as Kafka writes it.
            sequence: if txn.is_some() {
                offset as i32
            } else {
                offset as i32 - 1
            },
            timestamp: now_ms,
            key: Some(key),
            value,
            headers: Default::default(),
        })
        .collect();
    encode_batch(&records, Compression::None)
}

/// `records` as one v2 batch (the encoder splits it where offsets minus
/// sequences disagree), compressed with `compression`.
pub fn encode_batch(
    records: &[Record],
    compression: kafka_protocol::records::Compression,
) -> Result<Bytes, String> {
    use kafka_protocol::records::{RecordBatchEncoder, RecordEncodeOptions};
    let mut out = bytes::BytesMut::new();
    let options = RecordEncodeOptions {
        version: 2,
        compression,
    };
    RecordBatchEncoder::encode(&mut out, records, &options)
        .map_err(|error| format!("cannot encode records: {error}"))?;
    Ok(out.freeze())
}

/// One entry of an internal topic read back in order: a keyed data record
/// (with the producer of its transaction, if transactional) or the end of a
/// transaction.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum KeyedEntry {
    Record {
        offset: i64,
        /// The producer id of the transaction this record belongs to.
        txn: Option<i64>,
        key: Bytes,
        value: Option<Bytes>,
    },
    TxnEnd {
        offset: i64,
        producer_id: i64,
        commit: bool,
    },
}

/// Every keyed data record and transaction marker in `batches`, in offset
/// order, and the offset after the last whole batch. Keyless data records and
/// control records other than commit and abort markers are left out.
pub fn keyed_entries(batches: Bytes) -> Result<(Vec<KeyedEntry>, Option<i64>), String> {
    let mut next = None;
    let mut at = 0;
    while let Some(header) = batches.get(at..).and_then(BatchHeader::parse_prefix) {
        if at + header.size_bytes() > batches.len() {
            break;
        }
        next = Some(header.last_offset() + 1);
        at += header.size_bytes();
    }
    let mut whole = batches.slice(..at);
    let sets = RecordBatchDecoder::decode_all(&mut whole)
        .map_err(|error| format!("cannot decode records: {error}"))?;
    let mut entries = Vec::new();
    for record in sets.into_iter().flat_map(|set| set.records) {
        if record.control {
            // The control key: version (int16), then type (int16: 0 abort, 1 commit).
            let kind = record
                .key
                .as_ref()
                .and_then(|key| key.get(2..4))
                .map(|kind| i16::from_be_bytes([kind[0], kind[1]]));
            if let Some(kind @ (0 | 1)) = kind {
                entries.push(KeyedEntry::TxnEnd {
                    offset: record.offset,
                    producer_id: record.producer_id,
                    commit: kind == 1,
                });
            }
            continue;
        }
        if let Some(key) = record.key {
            entries.push(KeyedEntry::Record {
                offset: record.offset,
                txn: record.transactional.then_some(record.producer_id),
                key,
                value: record.value,
            });
        }
    }
    Ok((entries, next))
}
