//! Transaction markers: the control batch Kafka's `EndTransactionMarker` is written
//! as, built byte for byte, and the one field of it recovery needs read back.
//!
//! A marker batch has the transactional and control attribute bits, base sequence -1,
//! and exactly one record whose key is `version (i16) = 0, type (i16)` (0 abort,
//! 1 commit) and whose value is `version (i16) = 0, coordinator epoch (i32)`.
//! Invariant: markers are never compressed, so their one record sits right after the
//! batch header.

use super::batch::{
    self, BatchHeader, BATCH_HEADER_SIZE_BYTES, CONTROL_MASK, LOG_OVERHEAD_BYTES, MAGIC_V2,
    NO_SEQUENCE, TRANSACTIONAL_MASK,
};

/// Kafka's `ControlRecordType.ABORT` and `COMMIT` ids, the second i16 of the key.
const CONTROL_TYPE_ABORT: i16 = 0;
const CONTROL_TYPE_COMMIT: i16 = 1;
/// The only control record key version and end-marker value version Kafka writes.
const CONTROL_RECORD_KEY_VERSION: i16 = 0;
const END_TXN_MARKER_VALUE_VERSION: i16 = 0;
/// Key: version + type. Value: version + coordinator epoch.
const CONTROL_KEY_SIZE_BYTES: usize = 4;
const END_TXN_MARKER_VALUE_SIZE_BYTES: usize = 6;
/// The marker record's body: attributes, timestamp delta, offset delta, key length,
/// key, value length, value, header count (every varint here fits one byte).
const MARKER_RECORD_BODY_SIZE_BYTES: usize =
    1 + 1 + 1 + 1 + CONTROL_KEY_SIZE_BYTES + 1 + END_TXN_MARKER_VALUE_SIZE_BYTES + 1;
/// A whole marker batch: header, the record's length varint, its body.
pub const MARKER_BATCH_SIZE_BYTES: usize =
    BATCH_HEADER_SIZE_BYTES + 1 + MARKER_RECORD_BODY_SIZE_BYTES;

/// What a marker batch says, beyond its header.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MarkerRecord {
    pub commit: bool,
    pub coordinator_epoch: i32,
}

/// The marker batch Kafka's `MemoryRecords.withEndTransactionMarker` writes, at
/// `base_offset`, stamped with `leader_epoch` and timestamp `now_ms`, CRC32C included.
pub fn end_txn_marker_batch(
    base_offset: i64,
    leader_epoch: i32,
    producer_id: i64,
    producer_epoch: i16,
    marker: MarkerRecord,
    now_ms: i64,
) -> Vec<u8> {
    let mut out = Vec::with_capacity(MARKER_BATCH_SIZE_BYTES);
    out.extend(base_offset.to_be_bytes());
    out.extend(((MARKER_BATCH_SIZE_BYTES - LOG_OVERHEAD_BYTES) as i32).to_be_bytes());
    out.extend(leader_epoch.to_be_bytes());
    out.push(MAGIC_V2 as u8);
    out.extend(0u32.to_be_bytes()); // CRC, filled in below
    out.extend((TRANSACTIONAL_MASK | CONTROL_MASK).to_be_bytes());
    out.extend(0i32.to_be_bytes()); // lastOffsetDelta
    out.extend(now_ms.to_be_bytes()); // baseTimestamp
    out.extend(now_ms.to_be_bytes()); // maxTimestamp
    out.extend(producer_id.to_be_bytes());
    out.extend(producer_epoch.to_be_bytes());
    out.extend(NO_SEQUENCE.to_be_bytes());
    out.extend(1i32.to_be_bytes()); // records count
                                    // The record; zigzag varints of small non-negative values are the value doubled.
    out.push((MARKER_RECORD_BODY_SIZE_BYTES * 2) as u8);
    out.push(0); // attributes
    out.push(0); // timestamp delta
    out.push(0); // offset delta
    out.push((CONTROL_KEY_SIZE_BYTES * 2) as u8);
    out.extend(CONTROL_RECORD_KEY_VERSION.to_be_bytes());
    let control_type = if marker.commit {
        CONTROL_TYPE_COMMIT
    } else {
        CONTROL_TYPE_ABORT
    };
    out.extend(control_type.to_be_bytes());
    out.push((END_TXN_MARKER_VALUE_SIZE_BYTES * 2) as u8);
    out.extend(END_TXN_MARKER_VALUE_VERSION.to_be_bytes());
    out.extend(marker.coordinator_epoch.to_be_bytes());
    out.push(0); // header count
    assert_eq!(out.len(), MARKER_BATCH_SIZE_BYTES, "marker batch layout");
    let crc = batch::compute_crc(&out);
    out[17..21].copy_from_slice(&crc.to_be_bytes());
    out
}

/// The marker in a control batch read back from the log (header already checked),
/// or None when its first record is not a commit or abort marker Kafka could parse
/// (another control type, a compressed batch, or bytes that do not decode).
pub fn parse_end_txn_marker(batch: &[u8], header: &BatchHeader) -> Option<MarkerRecord> {
    if !header.is_control() || header.compression_codec() != 0 {
        return None;
    }
    let mut reader = Reader {
        bytes: batch.get(BATCH_HEADER_SIZE_BYTES..)?,
    };
    let _length = reader.varint()?;
    let _attributes = reader.take(1)?;
    let _timestamp_delta = reader.varint()?;
    let _offset_delta = reader.varint()?;
    let key_len = usize::try_from(reader.varint()?).ok()?;
    let key = reader.take(key_len)?;
    if key.len() < CONTROL_KEY_SIZE_BYTES {
        return None;
    }
    let commit = match i16::from_be_bytes([key[2], key[3]]) {
        CONTROL_TYPE_ABORT => false,
        CONTROL_TYPE_COMMIT => true,
        _ => return None,
    };
    let value_len = usize::try_from(reader.varint()?).ok()?;
    let value = reader.take(value_len)?;
    // Kafka: at least 6 bytes and a non-negative version; newer versions parse as 0.
    if value.len() < END_TXN_MARKER_VALUE_SIZE_BYTES || i16::from_be_bytes([value[0], value[1]]) < 0
    {
        return None;
    }
    let coordinator_epoch = i32::from_be_bytes([value[2], value[3], value[4], value[5]]);
    Some(MarkerRecord {
        commit,
        coordinator_epoch,
    })
}

/// Zigzag varints over a byte slice, as Kafka's record format encodes them.
struct Reader<'a> {
    bytes: &'a [u8],
}

impl<'a> Reader<'a> {
    fn take(&mut self, len: usize) -> Option<&'a [u8]> {
        if self.bytes.len() < len {
            return None;
        }
        let (taken, rest) = self.bytes.split_at(len);
        self.bytes = rest;
        Some(taken)
    }

    /// A zigzag varlong (a varint is the same encoding with a smaller range).
    fn varint(&mut self) -> Option<i64> {
        let mut raw: u64 = 0;
        for shift in (0..64).step_by(7) {
            let byte = *self.take(1)?.first()?;
            raw |= u64::from(byte & 0x7f) << shift;
            if byte & 0x80 == 0 {
                return Some((raw >> 1) as i64 ^ -((raw & 1) as i64));
            }
        }
        None
    }
}
