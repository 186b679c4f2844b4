//! The `partition.metadata` file of a partition dir: `version: 0\ntopic_id: <id>\n`,
//! which ties the dir to one incarnation of its topic so the dir of a deleted and
//! recreated topic is recognised and removed.
//!
//! The id is written as Kafka's `Uuid.toString()` writes it, URL-safe base64 without
//! padding (22 characters), as Kafka reads it; the hyphenated form is accepted
//! on read as well.

use std::fs;
use std::io;
use std::path::Path;

use uuid::Uuid;

use super::checkpoint;
use super::files::PARTITION_METADATA_FILE;

const PARTITION_METADATA_VERSION: u32 = 0;
const BASE64_URL_ALPHABET: &[u8; 64] =
    b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
/// 16 bytes of id in base64 without padding.
const TOPIC_ID_BASE64_LEN: usize = 22;

/// Writes the file atomically and durably, before any data is in the dir.
pub fn write(dir: &Path, topic_id: Uuid) -> io::Result<()> {
    let text = format!(
        "version: {PARTITION_METADATA_VERSION}\ntopic_id: {}\n",
        encode_topic_id(topic_id)
    );
    checkpoint::write_atomically(&dir.join(PARTITION_METADATA_FILE), text.as_bytes())
}

/// The topic id recorded in `dir`, or None when the file is missing or unreadable.
pub fn read(dir: &Path) -> io::Result<Option<Uuid>> {
    let text = match fs::read_to_string(dir.join(PARTITION_METADATA_FILE)) {
        Ok(text) => text,
        Err(error) if error.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(error) => return Err(error),
    };
    let topic_id = text
        .lines()
        .find_map(|line| line.strip_prefix("topic_id:"))
        .and_then(|id| decode_topic_id(id.trim()));
    Ok(topic_id)
}

pub fn encode_topic_id(topic_id: Uuid) -> String {
    let bytes = topic_id.as_bytes();
    let mut out = String::with_capacity(TOPIC_ID_BASE64_LEN);
    for chunk in bytes.chunks(3) {
        let mut group = [0u8; 3];
        group[..chunk.len()].copy_from_slice(chunk);
        let bits = u32::from(group[0]) << 16 | u32::from(group[1]) << 8 | u32::from(group[2]);
        // n input bytes give n + 1 output characters when unpadded.
        for i in 0..=chunk.len() {
            let sextet = (bits >> (18 - 6 * i)) & 0x3f;
            out.push(char::from(BASE64_URL_ALPHABET[sextet as usize]));
        }
    }
    out
}

pub fn decode_topic_id(text: &str) -> Option<Uuid> {
    if text.len() != TOPIC_ID_BASE64_LEN {
        return Uuid::parse_str(text).ok();
    }
    let mut bits: u32 = 0;
    let mut bit_count = 0;
    let mut bytes = Vec::with_capacity(16);
    for c in text.bytes() {
        let sextet = BASE64_URL_ALPHABET.iter().position(|&a| a == c)? as u32;
        bits = bits << 6 | sextet;
        bit_count += 6;
        if bit_count >= 8 {
            bit_count -= 8;
            bytes.push((bits >> bit_count) as u8);
            bits &= (1 << bit_count) - 1;
        }
    }
    Uuid::from_slice(&bytes).ok()
}
