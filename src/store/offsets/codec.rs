//! How committed offsets and group records are laid out as sled keys and values.
//!
//! Pure functions, no I/O. Offset keys are `group_len (u32 be) | group | topic_len (u32 be) |
//! topic | partition (i32 be)`: the length prefixes make every byte legal in a group id or
//! topic (a separator inside a name cannot make two keys collide), and `group_len | group`
//! is a prefix that selects exactly one group's offsets. Values start with a format version
//! byte, and every decode checks the exact length, so a torn or foreign value is reported as
//! `InvalidData` instead of being misread.

use std::io;

use super::{CommittedOffset, GroupRecord};
use crate::store::codec::{invalid, put_len_prefixed, Reader};

/// Version byte of the committed-offset value encoding below.
const OFFSET_VALUE_VERSION: u8 = 1;
/// version, offset, leader_epoch, commit_timestamp_ms, metadata length.
const OFFSET_VALUE_HEADER_BYTES: usize = 1 + 8 + 4 + 8 + 4;
/// Version byte of the group record value encoding below.
const GROUP_VALUE_VERSION: u8 = 1;
/// version, generation_id, protocol_type present flag, protocol_type length.
const GROUP_VALUE_HEADER_BYTES: usize = 1 + 4 + 1 + 4;

/// The key prefix under which every offset of `group_id` is stored.
pub fn group_prefix(group_id: &str) -> Vec<u8> {
    let mut key = Vec::with_capacity(4 + group_id.len());
    put_len_prefixed(&mut key, group_id.as_bytes());
    key
}

pub fn offset_key(group_id: &str, topic: &str, partition: i32) -> Vec<u8> {
    let mut key = group_prefix(group_id);
    put_len_prefixed(&mut key, topic.as_bytes());
    key.extend_from_slice(&partition.to_be_bytes());
    key
}

/// The group id, topic and partition of an offset key.
pub fn decode_offset_key(key: &[u8]) -> io::Result<(String, String, i32)> {
    let mut reader = Reader::new(key, "offset key");
    let group = reader.len_prefixed_str()?;
    let topic = reader.len_prefixed_str()?;
    let partition = i32::from_be_bytes(reader.array()?);
    reader.finish()?;
    Ok((group, topic, partition))
}

/// The group id of an offset key, and the length of its group prefix.
pub fn decode_group_of_key(key: &[u8]) -> io::Result<(String, usize)> {
    let mut reader = Reader::new(key, "offset key");
    let group = reader.len_prefixed_str()?;
    Ok((group, reader.position()))
}

/// The smallest key greater than every key starting with `prefix`, or `None` when no such
/// key exists (the prefix is all 0xFF).
pub fn prefix_successor(prefix: &[u8]) -> Option<Vec<u8>> {
    let mut next = prefix.to_vec();
    while let Some(last) = next.pop() {
        if last < u8::MAX {
            next.push(last + 1);
            return Some(next);
        }
    }
    None
}

pub fn encode_offset(value: &CommittedOffset) -> Vec<u8> {
    let metadata = value.metadata.as_bytes();
    let mut out = Vec::with_capacity(OFFSET_VALUE_HEADER_BYTES + metadata.len());
    out.push(OFFSET_VALUE_VERSION);
    out.extend_from_slice(&value.offset.to_be_bytes());
    out.extend_from_slice(&value.leader_epoch.to_be_bytes());
    out.extend_from_slice(&value.commit_timestamp_ms.to_be_bytes());
    put_len_prefixed(&mut out, metadata);
    out
}

pub fn decode_offset(bytes: &[u8]) -> io::Result<CommittedOffset> {
    let mut reader = Reader::new(bytes, "committed offset");
    reader.version(OFFSET_VALUE_VERSION)?;
    let offset = i64::from_be_bytes(reader.array()?);
    let leader_epoch = i32::from_be_bytes(reader.array()?);
    let commit_timestamp_ms = i64::from_be_bytes(reader.array()?);
    let metadata = reader.len_prefixed_str()?;
    reader.finish()?;
    Ok(CommittedOffset {
        offset,
        leader_epoch,
        metadata,
        commit_timestamp_ms,
    })
}

pub fn encode_group(record: &GroupRecord) -> Vec<u8> {
    let protocol_type = record.protocol_type.as_deref().unwrap_or("");
    let mut out = Vec::with_capacity(GROUP_VALUE_HEADER_BYTES + protocol_type.len());
    out.push(GROUP_VALUE_VERSION);
    out.extend_from_slice(&record.generation_id.to_be_bytes());
    out.push(u8::from(record.protocol_type.is_some()));
    put_len_prefixed(&mut out, protocol_type.as_bytes());
    out
}

pub fn decode_group(bytes: &[u8]) -> io::Result<GroupRecord> {
    let mut reader = Reader::new(bytes, "group record");
    reader.version(GROUP_VALUE_VERSION)?;
    let generation_id = i32::from_be_bytes(reader.array()?);
    let [present] = reader.array::<1>()?;
    let protocol_type = reader.len_prefixed_str()?;
    reader.finish()?;
    let protocol_type = match present {
        0 if protocol_type.is_empty() => None,
        1 => Some(protocol_type),
        _ => return Err(invalid("group record", "bad protocol type flag")),
    };
    Ok(GroupRecord {
        protocol_type,
        generation_id,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_round_trip_and_reject_damage() -> io::Result<()> {
        let offset = CommittedOffset {
            offset: 42,
            leader_epoch: -1,
            metadata: "meta\0data ✓".to_string(),
            commit_timestamp_ms: 1_700_000_000_000,
        };
        let bytes = encode_offset(&offset);
        assert_eq!(decode_offset(&bytes)?, offset);
        assert!(decode_offset(&bytes[..bytes.len() - 1]).is_err());
        let mut longer = bytes.clone();
        longer.push(0);
        assert!(decode_offset(&longer).is_err());

        for protocol_type in [None, Some(String::new()), Some("consumer".to_string())] {
            let record = GroupRecord {
                protocol_type,
                generation_id: 7,
            };
            assert_eq!(decode_group(&encode_group(&record))?, record);
        }
        Ok(())
    }

    #[test]
    fn keys_round_trip_and_prefixes_select_one_group() -> io::Result<()> {
        let key = offset_key("g\0x", "t\0p", 3);
        assert_eq!(
            decode_offset_key(&key)?,
            ("g\0x".to_string(), "t\0p".to_string(), 3)
        );
        assert!(key.starts_with(&group_prefix("g\0x")));
        // Neither a shorter group id nor one ending in the separator shares its prefix.
        assert!(!offset_key("g", "\0x", 3).starts_with(&group_prefix("g\0x")));
        assert!(!key.starts_with(&group_prefix("g")));
        assert!(!key.starts_with(&group_prefix("")));
        assert_eq!(prefix_successor(&[1, 0xFF]), Some(vec![2]));
        assert_eq!(prefix_successor(&[0xFF, 0xFF]), None);
        Ok(())
    }
}
