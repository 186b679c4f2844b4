//! Producer state snapshots: `<offset as 20 digits>.snapshot` beside the segments, as
//! Kafka names them, holding the state of every producer after all offsets below
//! `offset`. The format is Sluice's own (Kafka keeps only each producer's last batch;
//! keeping all five lets a retry be recognised across a restart), big-endian:
//!
//! ```text
//! version            u16  = SNAPSHOT_VERSION
//! crc                u32  CRC32C of every byte after this field
//! producer_count     i32
//! producer_count times, ordered by producer id:
//!   producer_id               i64
//!   producer_epoch            i16
//!   coordinator_epoch         i32
//!   last_timestamp            i64
//!   current_txn_first_offset  i64  (-1: none)
//!   batch_count               u8   (0..=BATCHES_PER_PRODUCER_MAX), oldest first:
//!     first_seq i32, last_seq i32, first_offset i64, last_offset i64, timestamp i64
//! ```
//!
//! A file that fails any check (version, CRC, counts, length) is corrupt and ignored.
//! Files are written whole to a temp file, fsynced and renamed (see `checkpoint`).

use std::collections::VecDeque;

use super::{BatchMetadata, ProducerEntry, BATCHES_PER_PRODUCER_MAX};
use crate::types::ProducerEpoch;

/// "SL": distinct from Kafka's own snapshot version (1), which this format is not.
const SNAPSHOT_VERSION: u16 = 0x534c;
const HEADER_SIZE_BYTES: usize = 2 + 4 + 4;
const PRODUCER_SIZE_BYTES: usize = 8 + 2 + 4 + 8 + 8 + 1;
const BATCH_SIZE_BYTES: usize = 4 + 4 + 8 + 8 + 8;

/// The snapshot bytes of `entries`.
pub fn encode(entries: &[&ProducerEntry]) -> Vec<u8> {
    let mut out = Vec::with_capacity(
        HEADER_SIZE_BYTES
            + entries.len() * (PRODUCER_SIZE_BYTES + BATCHES_PER_PRODUCER_MAX * BATCH_SIZE_BYTES),
    );
    out.extend(SNAPSHOT_VERSION.to_be_bytes());
    out.extend(0u32.to_be_bytes()); // CRC, filled in below
    out.extend((entries.len() as i32).to_be_bytes());
    for entry in entries {
        assert!(entry.batches.len() <= BATCHES_PER_PRODUCER_MAX);
        out.extend(entry.producer_id.to_be_bytes());
        out.extend(entry.producer_epoch.get().to_be_bytes());
        out.extend(entry.coordinator_epoch.to_be_bytes());
        out.extend(entry.last_timestamp.to_be_bytes());
        out.extend(entry.current_txn_first_offset.unwrap_or(-1).to_be_bytes());
        out.push(entry.batches.len() as u8);
        for batch in &entry.batches {
            out.extend(batch.first_seq.to_be_bytes());
            out.extend(batch.last_seq.to_be_bytes());
            out.extend(batch.first_offset.to_be_bytes());
            out.extend(batch.last_offset.to_be_bytes());
            out.extend(batch.timestamp.to_be_bytes());
        }
    }
    let crc = crc32c::crc32c(&out[6..]);
    out[2..6].copy_from_slice(&crc.to_be_bytes());
    out
}

/// The entries of a snapshot, or why it is corrupt.
pub fn decode(bytes: &[u8]) -> Result<Vec<ProducerEntry>, String> {
    let mut reader = Reader { bytes };
    let version = u16::from_be_bytes(reader.array()?);
    if version != SNAPSHOT_VERSION {
        return Err(format!("unknown snapshot version {version:#06x}"));
    }
    let stored_crc = u32::from_be_bytes(reader.array()?);
    let computed_crc = crc32c::crc32c(reader.bytes);
    if stored_crc != computed_crc {
        return Err(format!(
            "CRC mismatch: stored {stored_crc:#010x}, computed {computed_crc:#010x}"
        ));
    }
    let count = i32::from_be_bytes(reader.array()?);
    let count = usize::try_from(count).map_err(|_| format!("negative producer count {count}"))?;
    if count > reader.bytes.len() / PRODUCER_SIZE_BYTES {
        return Err(format!("{count} producers cannot fit in the file"));
    }
    let mut entries = Vec::with_capacity(count);
    for _ in 0..count {
        entries.push(decode_entry(&mut reader)?);
    }
    if !reader.bytes.is_empty() {
        return Err(format!("{} trailing bytes", reader.bytes.len()));
    }
    Ok(entries)
}

fn decode_entry(reader: &mut Reader) -> Result<ProducerEntry, String> {
    let producer_id = i64::from_be_bytes(reader.array()?);
    let producer_epoch = ProducerEpoch::new(i16::from_be_bytes(reader.array()?));
    let coordinator_epoch = i32::from_be_bytes(reader.array()?);
    let last_timestamp = i64::from_be_bytes(reader.array()?);
    let current_txn_first_offset = i64::from_be_bytes(reader.array()?);
    let [batch_count] = reader.array::<1>()?;
    let batch_count = usize::from(batch_count);
    if batch_count > BATCHES_PER_PRODUCER_MAX {
        return Err(format!("producer {producer_id} has {batch_count} batches"));
    }
    let mut batches = VecDeque::with_capacity(batch_count);
    for _ in 0..batch_count {
        batches.push_back(BatchMetadata {
            first_seq: i32::from_be_bytes(reader.array()?),
            last_seq: i32::from_be_bytes(reader.array()?),
            first_offset: i64::from_be_bytes(reader.array()?),
            last_offset: i64::from_be_bytes(reader.array()?),
            timestamp: i64::from_be_bytes(reader.array()?),
        });
    }
    Ok(ProducerEntry {
        producer_id,
        producer_epoch,
        batches,
        coordinator_epoch,
        last_timestamp,
        current_txn_first_offset: (current_txn_first_offset >= 0)
            .then_some(current_txn_first_offset),
    })
}

struct Reader<'a> {
    bytes: &'a [u8],
}

impl Reader<'_> {
    fn array<const N: usize>(&mut self) -> Result<[u8; N], String> {
        if self.bytes.len() < N {
            return Err("snapshot cut short".to_string());
        }
        let (head, rest) = self.bytes.split_at(N);
        self.bytes = rest;
        let mut out = [0u8; N];
        out.copy_from_slice(head);
        Ok(out)
    }
}
