//! The records of Kafka's internal topics, in Kafka's own formats, so that a
//! tool that reads `__consumer_offsets` or `__transaction_state` from Kafka
//! (its `OffsetsMessageFormatter`, `TransactionLogMessageFormatter`, or any
//! client decoding them) reads them from Sluice:
//!
//! - `__consumer_offsets`: a key starting with an int16 record type, 0 or 1 for
//!   `OffsetCommitKey` (group, topic, partition) and 2 for `GroupMetadataKey`
//!   (group); values `OffsetCommitValue` (written at v3, read at v0 to v3) and
//!   `GroupMetadataValue` (written at v3, read at v0 to v3). A null value is a
//!   tombstone.
//! - `__transaction_state`: `TransactionLogKey` v0 (transactional id) and
//!   `TransactionLogValue` (written at v0, or at the flexible v1 when it must
//!   carry the previous or next producer id of KIP-890; read at both).
//!
//! A leaf: pure functions over plain values, no I/O. Invariant: `decode` of
//! `encode` gives the value back, and every encoding is Kafka's byte for byte
//! (the tests hold it to bytes written out from Kafka's schemas).

use crate::types::TopicPartition;

/// Key type of an offset commit (Kafka writes 1; 0 is the older version).
pub const OFFSET_COMMIT_KEY_TYPE: i16 = 1;
/// Key type of group metadata.
pub const GROUP_METADATA_KEY_TYPE: i16 = 2;
/// The OffsetCommitValue version written (Kafka 2.1+ without an expiry).
pub const OFFSET_COMMIT_VALUE_VERSION: i16 = 3;
/// The GroupMetadataValue version written.
pub const GROUP_METADATA_VALUE_VERSION: i16 = 3;
/// TransactionLogKey's only version.
pub const TXN_LOG_KEY_VERSION: i16 = 0;

/// A record of `__consumer_offsets`, as its key says.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum OffsetsKey {
    Offset {
        group: String,
        topic: String,
        partition: i32,
    },
    Group {
        group: String,
    },
}

/// `OffsetCommitValue`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OffsetValue {
    pub offset: i64,
    /// -1 when unknown (v0 to v2 carry none).
    pub leader_epoch: i32,
    pub metadata: String,
    pub commit_timestamp_ms: i64,
    /// v1 only; -1 otherwise.
    pub expire_timestamp_ms: i64,
}

/// One member in `GroupMetadataValue`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MemberValue {
    pub member_id: String,
    pub group_instance_id: Option<String>,
    pub client_id: String,
    pub client_host: String,
    pub rebalance_timeout_ms: i32,
    pub session_timeout_ms: i32,
    pub subscription: Vec<u8>,
    pub assignment: Vec<u8>,
}

/// `GroupMetadataValue`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GroupValue {
    pub protocol_type: String,
    pub generation: i32,
    pub protocol: Option<String>,
    pub leader: Option<String>,
    /// -1 before v2.
    pub current_state_timestamp_ms: i64,
    pub members: Vec<MemberValue>,
}

/// `TransactionLogValue`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TxnLogValue {
    pub producer_id: i64,
    /// KIP-890's tagged fields (v1): -1 when none.
    pub previous_producer_id: i64,
    pub next_producer_id: i64,
    pub producer_epoch: i16,
    pub timeout_ms: i32,
    /// Kafka's TransactionState id (Empty 0 ... PrepareEpochFence 7).
    pub status: i8,
    pub partitions: Vec<TopicPartition>,
    pub last_update_timestamp_ms: i64,
    pub start_timestamp_ms: i64,
}

/// Why bytes are not one of these records.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RecordError(pub String);

impl std::fmt::Display for RecordError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for RecordError {}

type Result<T> = std::result::Result<T, RecordError>;

pub fn encode_offsets_key(key: &OffsetsKey) -> Vec<u8> {
    let mut out = Vec::new();
    match key {
        OffsetsKey::Offset {
            group,
            topic,
            partition,
        } => {
            put_i16(&mut out, OFFSET_COMMIT_KEY_TYPE);
            put_string(&mut out, group);
            put_string(&mut out, topic);
            out.extend_from_slice(&partition.to_be_bytes());
        }
        OffsetsKey::Group { group } => {
            put_i16(&mut out, GROUP_METADATA_KEY_TYPE);
            put_string(&mut out, group);
        }
    }
    out
}

/// None for a key of another record type (the consumer group records of
/// KIP-848, which Sluice neither writes nor reads).
pub fn decode_offsets_key(bytes: &[u8]) -> Result<Option<OffsetsKey>> {
    let mut reader = Reader::new(bytes);
    let key = match reader.i16()? {
        0 | OFFSET_COMMIT_KEY_TYPE => OffsetsKey::Offset {
            group: reader.string()?,
            topic: reader.string()?,
            partition: reader.i32()?,
        },
        GROUP_METADATA_KEY_TYPE => OffsetsKey::Group {
            group: reader.string()?,
        },
        _ => return Ok(None),
    };
    reader.end()?;
    Ok(Some(key))
}

pub fn encode_offset_value(value: &OffsetValue) -> Vec<u8> {
    let mut out = Vec::new();
    put_i16(&mut out, OFFSET_COMMIT_VALUE_VERSION);
    out.extend_from_slice(&value.offset.to_be_bytes());
    out.extend_from_slice(&value.leader_epoch.to_be_bytes());
    put_string(&mut out, &value.metadata);
    out.extend_from_slice(&value.commit_timestamp_ms.to_be_bytes());
    out
}

pub fn decode_offset_value(bytes: &[u8]) -> Result<OffsetValue> {
    let mut reader = Reader::new(bytes);
    let version = reader.i16()?;
    if !(0..=3).contains(&version) {
        return Err(RecordError(format!("OffsetCommitValue v{version}")));
    }
    let offset = reader.i64()?;
    let leader_epoch = if version >= 3 { reader.i32()? } else { -1 };
    let metadata = reader.string()?;
    let commit_timestamp_ms = reader.i64()?;
    let expire_timestamp_ms = if version == 1 { reader.i64()? } else { -1 };
    reader.end()?;
    Ok(OffsetValue {
        offset,
        leader_epoch,
        metadata,
        commit_timestamp_ms,
        expire_timestamp_ms,
    })
}

pub fn encode_group_value(value: &GroupValue) -> Vec<u8> {
    let mut out = Vec::new();
    put_i16(&mut out, GROUP_METADATA_VALUE_VERSION);
    put_string(&mut out, &value.protocol_type);
    out.extend_from_slice(&value.generation.to_be_bytes());
    put_nullable_string(&mut out, value.protocol.as_deref());
    put_nullable_string(&mut out, value.leader.as_deref());
    out.extend_from_slice(&value.current_state_timestamp_ms.to_be_bytes());
    put_len(&mut out, value.members.len());
    for member in &value.members {
        put_string(&mut out, &member.member_id);
        put_nullable_string(&mut out, member.group_instance_id.as_deref());
        put_string(&mut out, &member.client_id);
        put_string(&mut out, &member.client_host);
        out.extend_from_slice(&member.rebalance_timeout_ms.to_be_bytes());
        out.extend_from_slice(&member.session_timeout_ms.to_be_bytes());
        put_bytes(&mut out, &member.subscription);
        put_bytes(&mut out, &member.assignment);
    }
    out
}

pub fn decode_group_value(bytes: &[u8]) -> Result<GroupValue> {
    let mut reader = Reader::new(bytes);
    let version = reader.i16()?;
    if !(0..=3).contains(&version) {
        return Err(RecordError(format!("GroupMetadataValue v{version}")));
    }
    let protocol_type = reader.string()?;
    let generation = reader.i32()?;
    let protocol = reader.nullable_string()?;
    let leader = reader.nullable_string()?;
    let current_state_timestamp_ms = if version >= 2 { reader.i64()? } else { -1 };
    let count = reader.len()?;
    let mut members = Vec::with_capacity(count.min(reader.remaining()));
    for _ in 0..count {
        let member_id = reader.string()?;
        let group_instance_id = if version >= 3 {
            reader.nullable_string()?
        } else {
            None
        };
        let client_id = reader.string()?;
        let client_host = reader.string()?;
        let session_timeout_v0 = if version == 0 {
            Some(reader.i32()?)
        } else {
            None
        };
        let (rebalance_timeout_ms, session_timeout_ms) = match session_timeout_v0 {
            // v0 has one timeout, which Kafka takes for both.
            Some(timeout) => (timeout, timeout),
            None => (reader.i32()?, reader.i32()?),
        };
        members.push(MemberValue {
            member_id,
            group_instance_id,
            client_id,
            client_host,
            rebalance_timeout_ms,
            session_timeout_ms,
            subscription: reader.bytes()?,
            assignment: reader.bytes()?,
        });
    }
    reader.end()?;
    Ok(GroupValue {
        protocol_type,
        generation,
        protocol,
        leader,
        current_state_timestamp_ms,
        members,
    })
}

pub fn encode_txn_key(transactional_id: &str) -> Vec<u8> {
    let mut out = Vec::new();
    put_i16(&mut out, TXN_LOG_KEY_VERSION);
    put_string(&mut out, transactional_id);
    out
}

pub fn decode_txn_key(bytes: &[u8]) -> Result<String> {
    let mut reader = Reader::new(bytes);
    let version = reader.i16()?;
    if version != TXN_LOG_KEY_VERSION {
        return Err(RecordError(format!("TransactionLogKey v{version}")));
    }
    let id = reader.string()?;
    reader.end()?;
    Ok(id)
}

/// KIP-890's tags of TransactionLogValue v1.
const TAG_PREVIOUS_PRODUCER_ID: u32 = 0;
const TAG_NEXT_PRODUCER_ID: u32 = 1;

pub fn encode_txn_value(value: &TxnLogValue) -> Vec<u8> {
    let flexible = value.previous_producer_id >= 0 || value.next_producer_id >= 0;
    let mut out = Vec::new();
    put_i16(&mut out, i16::from(flexible));
    out.extend_from_slice(&value.producer_id.to_be_bytes());
    out.extend_from_slice(&value.producer_epoch.to_be_bytes());
    out.extend_from_slice(&value.timeout_ms.to_be_bytes());
    out.push(value.status as u8);
    // Grouped by topic, in first-seen order, as Kafka writes them.
    let mut topics: Vec<(&str, Vec<i32>)> = Vec::new();
    for tp in &value.partitions {
        match topics.iter_mut().find(|(t, _)| *t == tp.topic) {
            Some((_, partitions)) => partitions.push(tp.partition),
            None => topics.push((&tp.topic, vec![tp.partition])),
        }
    }
    if flexible {
        put_uvarint(&mut out, topics.len() as u64 + 1);
    } else {
        put_len(&mut out, topics.len());
    }
    for (topic, partitions) in &topics {
        if flexible {
            put_compact_string(&mut out, topic);
            put_uvarint(&mut out, partitions.len() as u64 + 1);
        } else {
            put_string(&mut out, topic);
            put_len(&mut out, partitions.len());
        }
        for partition in partitions {
            out.extend_from_slice(&partition.to_be_bytes());
        }
        if flexible {
            put_uvarint(&mut out, 0);
        }
    }
    out.extend_from_slice(&value.last_update_timestamp_ms.to_be_bytes());
    out.extend_from_slice(&value.start_timestamp_ms.to_be_bytes());
    if flexible {
        let mut tags = Vec::new();
        for (tag, id) in [
            (TAG_PREVIOUS_PRODUCER_ID, value.previous_producer_id),
            (TAG_NEXT_PRODUCER_ID, value.next_producer_id),
        ] {
            if id >= 0 {
                tags.push((tag, id));
            }
        }
        put_uvarint(&mut out, tags.len() as u64);
        for (tag, id) in tags {
            put_uvarint(&mut out, u64::from(tag));
            put_uvarint(&mut out, 8);
            out.extend_from_slice(&id.to_be_bytes());
        }
    }
    out
}

pub fn decode_txn_value(bytes: &[u8]) -> Result<TxnLogValue> {
    let mut reader = Reader::new(bytes);
    let version = reader.i16()?;
    if !(0..=1).contains(&version) {
        return Err(RecordError(format!("TransactionLogValue v{version}")));
    }
    let flexible = version == 1;
    let producer_id = reader.i64()?;
    let producer_epoch = reader.i16()?;
    let timeout_ms = reader.i32()?;
    let status = reader.i8()?;
    let topic_count = if flexible {
        reader.compact_len()?
    } else {
        reader.nullable_len()?
    };
    let mut partitions = Vec::new();
    for _ in 0..topic_count.unwrap_or(0) {
        let topic = if flexible {
            reader.compact_string()?
        } else {
            reader.string()?
        };
        let count = if flexible {
            reader.compact_len()?.unwrap_or(0)
        } else {
            reader.len()?
        };
        for _ in 0..count {
            partitions.push(TopicPartition::new(&topic, reader.i32()?));
        }
        if flexible {
            reader.skip_tags()?;
        }
    }
    let last_update_timestamp_ms = reader.i64()?;
    let start_timestamp_ms = reader.i64()?;
    let mut previous_producer_id = -1;
    let mut next_producer_id = -1;
    if flexible {
        let count = reader.uvarint()?;
        for _ in 0..count {
            let tag = reader.uvarint()?;
            let size = usize::try_from(reader.uvarint()?).map_err(|_| short())?;
            let field = reader.take(size)?;
            let id = || -> Result<i64> {
                Ok(i64::from_be_bytes(field.try_into().map_err(|_| short())?))
            };
            match u32::try_from(tag) {
                Ok(TAG_PREVIOUS_PRODUCER_ID) => previous_producer_id = id()?,
                Ok(TAG_NEXT_PRODUCER_ID) => next_producer_id = id()?,
                _ => {}
            }
        }
    }
    reader.end()?;
    Ok(TxnLogValue {
        producer_id,
        previous_producer_id,
        next_producer_id,
        producer_epoch,
        timeout_ms,
        status,
        partitions,
        last_update_timestamp_ms,
        start_timestamp_ms,
    })
}

fn put_i16(out: &mut Vec<u8>, value: i16) {
    out.extend_from_slice(&value.to_be_bytes());
}

fn put_string(out: &mut Vec<u8>, text: &str) {
    let len = i16::try_from(text.len()).expect("strings of Kafka's records fit an int16 length");
    put_i16(out, len);
    out.extend_from_slice(text.as_bytes());
}

fn put_nullable_string(out: &mut Vec<u8>, text: Option<&str>) {
    match text {
        Some(text) => put_string(out, text),
        None => put_i16(out, -1),
    }
}

fn put_len(out: &mut Vec<u8>, len: usize) {
    let len = i32::try_from(len).expect("fewer than 2^31 elements");
    out.extend_from_slice(&len.to_be_bytes());
}

fn put_bytes(out: &mut Vec<u8>, bytes: &[u8]) {
    put_len(out, bytes.len());
    out.extend_from_slice(bytes);
}

fn put_uvarint(out: &mut Vec<u8>, mut value: u64) {
    while value >= 0x80 {
        out.push((value as u8) | 0x80);
        value >>= 7;
    }
    out.push(value as u8);
}

fn put_compact_string(out: &mut Vec<u8>, text: &str) {
    put_uvarint(out, text.len() as u64 + 1);
    out.extend_from_slice(text.as_bytes());
}

fn short() -> RecordError {
    RecordError("record cut short or malformed".to_string())
}

/// Reads Kafka's primitive types, refusing to read past the end.
struct Reader<'a> {
    bytes: &'a [u8],
}

impl<'a> Reader<'a> {
    fn new(bytes: &'a [u8]) -> Reader<'a> {
        Reader { bytes }
    }

    fn remaining(&self) -> usize {
        self.bytes.len()
    }

    fn take(&mut self, n: usize) -> Result<&'a [u8]> {
        if self.bytes.len() < n {
            return Err(short());
        }
        let (head, rest) = self.bytes.split_at(n);
        self.bytes = rest;
        Ok(head)
    }

    fn i8(&mut self) -> Result<i8> {
        Ok(self.take(1)?[0] as i8)
    }

    fn i16(&mut self) -> Result<i16> {
        Ok(i16::from_be_bytes(
            self.take(2)?.try_into().map_err(|_| short())?,
        ))
    }

    fn i32(&mut self) -> Result<i32> {
        Ok(i32::from_be_bytes(
            self.take(4)?.try_into().map_err(|_| short())?,
        ))
    }

    fn i64(&mut self) -> Result<i64> {
        Ok(i64::from_be_bytes(
            self.take(8)?.try_into().map_err(|_| short())?,
        ))
    }

    fn len(&mut self) -> Result<usize> {
        usize::try_from(self.i32()?).map_err(|_| short())
    }

    fn nullable_len(&mut self) -> Result<Option<usize>> {
        let len = self.i32()?;
        if len < 0 {
            return Ok(None);
        }
        Ok(Some(len as usize))
    }

    fn string(&mut self) -> Result<String> {
        self.nullable_string()?.ok_or_else(short)
    }

    fn nullable_string(&mut self) -> Result<Option<String>> {
        let len = self.i16()?;
        if len < 0 {
            return Ok(None);
        }
        let bytes = self.take(len as usize)?;
        String::from_utf8(bytes.to_vec())
            .map(Some)
            .map_err(|_| RecordError("a string that is not UTF-8".to_string()))
    }

    fn bytes(&mut self) -> Result<Vec<u8>> {
        let len = self.len()?;
        Ok(self.take(len)?.to_vec())
    }

    fn uvarint(&mut self) -> Result<u64> {
        let mut value = 0u64;
        for shift in (0..64).step_by(7) {
            let byte = self.take(1)?[0];
            value |= u64::from(byte & 0x7f) << shift;
            if byte & 0x80 == 0 {
                return Ok(value);
            }
        }
        Err(short())
    }

    fn compact_len(&mut self) -> Result<Option<usize>> {
        let raw = self.uvarint()?;
        if raw == 0 {
            return Ok(None);
        }
        usize::try_from(raw - 1).map(Some).map_err(|_| short())
    }

    fn compact_string(&mut self) -> Result<String> {
        let len = self.compact_len()?.ok_or_else(short)?;
        let bytes = self.take(len)?;
        String::from_utf8(bytes.to_vec())
            .map_err(|_| RecordError("a string that is not UTF-8".to_string()))
    }

    fn skip_tags(&mut self) -> Result<()> {
        let count = self.uvarint()?;
        for _ in 0..count {
            self.uvarint()?;
            let size = usize::try_from(self.uvarint()?).map_err(|_| short())?;
            self.take(size)?;
        }
        Ok(())
    }

    fn end(&self) -> Result<()> {
        if self.bytes.is_empty() {
            Ok(())
        } else {
            Err(RecordError(format!(
                "{} bytes after the record",
                self.bytes.len()
            )))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Bytes written out field by field from Kafka's schemas
    /// (group-coordinator/src/main/resources/common/message/*.json).
    #[test]
    fn offset_commit_key_and_value_are_kafkas_bytes() {
        let key = OffsetsKey::Offset {
            group: "g".to_string(),
            topic: "t".to_string(),
            partition: 3,
        };
        let bytes = encode_offsets_key(&key);
        assert_eq!(bytes, [0, 1, 0, 1, b'g', 0, 1, b't', 0, 0, 0, 3]);
        assert_eq!(decode_offsets_key(&bytes), Ok(Some(key)));
        let value = OffsetValue {
            offset: 42,
            leader_epoch: 7,
            metadata: "m".to_string(),
            commit_timestamp_ms: 1000,
            expire_timestamp_ms: -1,
        };
        let bytes = encode_offset_value(&value);
        let mut expected = vec![0, 3];
        expected.extend(42i64.to_be_bytes());
        expected.extend(7i32.to_be_bytes());
        expected.extend([0, 1, b'm']);
        expected.extend(1000i64.to_be_bytes());
        assert_eq!(bytes, expected);
        assert_eq!(decode_offset_value(&bytes), Ok(value));
        // v1, with its expiry, as Kafka wrote it before 2.1.
        let mut v1 = vec![0, 1];
        v1.extend(42i64.to_be_bytes());
        v1.extend([0, 0]);
        v1.extend(1000i64.to_be_bytes());
        v1.extend(2000i64.to_be_bytes());
        let old = decode_offset_value(&v1).expect("v1 decodes");
        assert_eq!(
            (old.offset, old.leader_epoch, old.expire_timestamp_ms),
            (42, -1, 2000)
        );
    }

    #[test]
    fn group_metadata_is_kafkas_v3_and_reads_older_versions() {
        let value = GroupValue {
            protocol_type: "consumer".to_string(),
            generation: 5,
            protocol: Some("range".to_string()),
            leader: Some("m1".to_string()),
            current_state_timestamp_ms: 99,
            members: vec![MemberValue {
                member_id: "m1".to_string(),
                group_instance_id: None,
                client_id: "c".to_string(),
                client_host: "/h".to_string(),
                rebalance_timeout_ms: 300,
                session_timeout_ms: 100,
                subscription: vec![1, 2],
                assignment: vec![3],
            }],
        };
        let bytes = encode_group_value(&value);
        let mut expected = vec![0, 3, 0, 8];
        expected.extend(b"consumer");
        expected.extend(5i32.to_be_bytes());
        expected.extend([0, 5]);
        expected.extend(b"range");
        expected.extend([0, 2, b'm', b'1']);
        expected.extend(99i64.to_be_bytes());
        expected.extend(1i32.to_be_bytes());
        expected.extend([0, 2, b'm', b'1', 0xff, 0xff, 0, 1, b'c', 0, 2, b'/', b'h']);
        expected.extend(300i32.to_be_bytes());
        expected.extend(100i32.to_be_bytes());
        expected.extend([0, 0, 0, 2, 1, 2, 0, 0, 0, 1, 3]);
        assert_eq!(bytes, expected);
        assert_eq!(decode_group_value(&bytes), Ok(value));
        let key = OffsetsKey::Group {
            group: "g".to_string(),
        };
        assert_eq!(encode_offsets_key(&key), [0, 2, 0, 1, b'g']);
        // v0: no state timestamp, one timeout, no instance id.
        let mut v0 = vec![0, 0, 0, 0, 0, 0, 0, 1, 0xff, 0xff, 0xff, 0xff];
        v0.extend(1i32.to_be_bytes());
        v0.extend([0, 1, b'm', 0, 1, b'c', 0, 1, b'h']);
        v0.extend(10i32.to_be_bytes());
        v0.extend([0, 0, 0, 0, 0, 0, 0, 0]);
        let old = decode_group_value(&v0).expect("v0 decodes");
        assert_eq!(old.members[0].session_timeout_ms, 10);
        assert_eq!(old.members[0].rebalance_timeout_ms, 10);
        assert_eq!(old.current_state_timestamp_ms, -1);
        // A KIP-848 record type is not ours to read.
        assert_eq!(decode_offsets_key(&[0, 3, 0, 1, b'g']), Ok(None));
    }

    #[test]
    fn transaction_log_records_are_kafkas_v0_and_v1() {
        assert_eq!(encode_txn_key("tx"), [0, 0, 0, 2, b't', b'x']);
        assert_eq!(decode_txn_key(&encode_txn_key("tx")), Ok("tx".to_string()));
        let value = TxnLogValue {
            producer_id: 9,
            previous_producer_id: -1,
            next_producer_id: -1,
            producer_epoch: 2,
            timeout_ms: 60_000,
            status: 1,
            partitions: vec![TopicPartition::new("a", 0), TopicPartition::new("a", 2)],
            last_update_timestamp_ms: 5,
            start_timestamp_ms: 4,
        };
        let bytes = encode_txn_value(&value);
        let mut expected = vec![0, 0];
        expected.extend(9i64.to_be_bytes());
        expected.extend(2i16.to_be_bytes());
        expected.extend(60_000i32.to_be_bytes());
        expected.push(1);
        expected.extend(1i32.to_be_bytes());
        expected.extend([0, 1, b'a']);
        expected.extend(2i32.to_be_bytes());
        expected.extend(0i32.to_be_bytes());
        expected.extend(2i32.to_be_bytes());
        expected.extend(5i64.to_be_bytes());
        expected.extend(4i64.to_be_bytes());
        assert_eq!(bytes, expected);
        assert_eq!(decode_txn_value(&bytes), Ok(value.clone()));
        // With a previous producer id: v1, compact and tagged.
        let fenced = TxnLogValue {
            previous_producer_id: 8,
            partitions: vec![TopicPartition::new("a", 1)],
            ..value
        };
        let bytes = encode_txn_value(&fenced);
        let mut expected = vec![0, 1];
        expected.extend(9i64.to_be_bytes());
        expected.extend(2i16.to_be_bytes());
        expected.extend(60_000i32.to_be_bytes());
        expected.push(1);
        expected.extend([2, 2, b'a', 2]);
        expected.extend(1i32.to_be_bytes());
        expected.push(0);
        expected.extend(5i64.to_be_bytes());
        expected.extend(4i64.to_be_bytes());
        expected.extend([1, 0, 8]);
        expected.extend(8i64.to_be_bytes());
        assert_eq!(bytes, expected);
        assert_eq!(decode_txn_value(&bytes), Ok(fenced));
    }

    #[test]
    fn damaged_records_are_errors_not_panics() {
        for cut in 0..12 {
            let bytes = encode_offsets_key(&OffsetsKey::Offset {
                group: "g".to_string(),
                topic: "t".to_string(),
                partition: 3,
            });
            if cut < bytes.len() {
                assert!(decode_offsets_key(&bytes[..cut]).is_err());
            }
        }
        assert!(decode_offset_value(&[0, 9]).is_err());
        assert!(decode_group_value(&[0, 3, 0, 1]).is_err());
        assert!(decode_txn_value(&[0, 1, 0]).is_err());
        let mut huge = vec![0, 0, 0, 0, 0, 0, 0, 1, 0xff, 0xff, 0xff, 0xff];
        huge.extend(i32::MAX.to_be_bytes());
        assert!(decode_group_value(&huge).is_err());
    }
}
