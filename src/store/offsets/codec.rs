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
use crate::internal_topics::records::{decode_group_value, encode_group_value, GroupValue};
use crate::store::codec::{invalid, put_len_prefixed, Reader};

/// Version byte of the committed-offset value encoding below.
const OFFSET_VALUE_VERSION: u8 = 1;
/// version, offset, leader_epoch, commit_timestamp_ms, metadata length.
const OFFSET_VALUE_HEADER_BYTES: usize = 1 + 8 + 4 + 8 + 4;
/// Version byte of the group record value encoding below: the version, the
/// protocol type's present flag, then Kafka's `GroupMetadataValue`.
const GROUP_VALUE_VERSION: u8 = 2;
/// The earlier group record value, read still: version, generation_id,
/// protocol_type present flag, protocol_type (length-prefixed); no members.
const GROUP_VALUE_VERSION_WITHOUT_MEMBERS: u8 = 1;

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
    let value = GroupValue {
        protocol_type: record.protocol_type.clone().unwrap_or_default(),
        generation: record.generation_id,
        protocol: record.protocol.clone(),
        leader: record.leader.clone(),
        current_state_timestamp_ms: -1,
        members: record.members.clone(),
    };
    let mut out = vec![
        GROUP_VALUE_VERSION,
        u8::from(record.protocol_type.is_some()),
    ];
    out.extend_from_slice(&encode_group_value(&value));
    out
}

pub fn decode_group(bytes: &[u8]) -> io::Result<GroupRecord> {
    let what = "group record";
    match bytes.first() {
        Some(&GROUP_VALUE_VERSION_WITHOUT_MEMBERS) => decode_group_without_members(bytes),
        Some(&GROUP_VALUE_VERSION) => {
            let (present, value) = match bytes.get(1..) {
                Some([present, value @ ..]) => (*present, value),
                _ => return Err(invalid(what, "no protocol type flag")),
            };
            let value = decode_group_value(value).map_err(|e| invalid(what, &e.0))?;
            let protocol_type = match present {
                0 if value.protocol_type.is_empty() => None,
                1 => Some(value.protocol_type),
                _ => return Err(invalid(what, "bad protocol type flag")),
            };
            Ok(GroupRecord {
                protocol_type,
                generation_id: value.generation,
                protocol: value.protocol,
                leader: value.leader,
                members: value.members,
            })
        }
        _ => Err(invalid(what, "unknown version")),
    }
}

/// A record written before members were kept: the group comes back Empty.
fn decode_group_without_members(bytes: &[u8]) -> io::Result<GroupRecord> {
    let mut reader = Reader::new(bytes, "group record");
    reader.version(GROUP_VALUE_VERSION_WITHOUT_MEMBERS)?;
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
        ..GroupRecord::default()
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::MemberValue;

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
                ..GroupRecord::default()
            };
            assert_eq!(decode_group(&encode_group(&record))?, record);
        }
        let stable = GroupRecord {
            protocol_type: Some("consumer".to_string()),
            generation_id: 9,
            protocol: Some("range".to_string()),
            leader: Some("c-1".to_string()),
            members: vec![MemberValue {
                member_id: "c-1".to_string(),
                group_instance_id: Some("i-1".to_string()),
                client_id: "c".to_string(),
                client_host: "/10.0.0.1".to_string(),
                rebalance_timeout_ms: 300_000,
                session_timeout_ms: 45_000,
                subscription: vec![0, 1, 2],
                assignment: vec![3, 4],
            }],
        };
        let bytes = encode_group(&stable);
        assert_eq!(decode_group(&bytes)?, stable);
        assert!(decode_group(&bytes[..bytes.len() - 1]).is_err());
        assert!(decode_group(&[GROUP_VALUE_VERSION]).is_err());
        assert!(decode_group(&[9, 1]).is_err());
        Ok(())
    }

    #[test]
    fn a_group_record_written_before_members_were_kept_comes_back_without_members() -> io::Result<()>
    {
        // Version 1: generation 7, protocol type present, "consumer".
        let mut bytes = vec![1, 0, 0, 0, 7, 1, 0, 0, 0, 8];
        bytes.extend_from_slice(b"consumer");
        let expected = GroupRecord {
            protocol_type: Some("consumer".to_string()),
            generation_id: 7,
            ..GroupRecord::default()
        };
        assert_eq!(decode_group(&bytes)?, expected);
        assert!(decode_group(&bytes[..bytes.len() - 1]).is_err());
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
