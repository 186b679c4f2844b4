//! How a transactional id's metadata is kept in the transaction store (Kafka's
//! `__transaction_state` record): the key is the transactional id's UTF-8 bytes, the
//! value is the encoding below, and a Dead transaction is stored as no value (its key
//! removed). The store itself only sees bytes.
//!
//! Pure functions, no I/O, besides the two thin wrappers over a `TxnStore`.
//! Invariant: the bytes never change meaning. Data dirs written by earlier versions
//! are read with this code, so a new layout needs a new version byte, never an edit
//! of this one (`stored_bytes_are_pinned` holds the layout to its exact bytes).

use std::collections::BTreeSet;
use std::io;

use super::metadata::{TxnMetadata, TxnState};
use crate::store::codec::{invalid, put_len_prefixed, Reader};
use crate::store::{CommitFuture, TxnStore};
use crate::types::{ProducerEpoch, TopicPartition};

/// Version byte of the value encoding below.
const TXN_VALUE_VERSION: u8 = 1;
const WHAT: &str = "transaction record";

/// Stores `metadata` under its transactional id, replacing the earlier record; a Dead
/// transaction removes it. Resolves once fsynced.
pub fn save(store: &dyn TxnStore, metadata: &TxnMetadata) -> CommitFuture {
    let key = metadata.transactional_id.as_bytes().to_vec();
    let value = (metadata.state != TxnState::Dead).then(|| encode(metadata));
    store.save(key, value)
}

/// Every stored transaction, sorted by transactional id. Blocking.
pub fn load_all(store: &dyn TxnStore) -> io::Result<Vec<TxnMetadata>> {
    store
        .load_all()?
        .into_iter()
        .map(|(key, value)| {
            let transactional_id =
                String::from_utf8(key).map_err(|_| invalid(WHAT, "key is not UTF-8"))?;
            decode(&transactional_id, &value)
        })
        .collect()
}

/// `version | producer_id | previous_producer_id | epoch | last_epoch | timeout_ms | state |
/// start_ms | last_update_ms | partition count (u32) | (topic, partition)*`, big-endian, strings
/// length-prefixed.
pub fn encode(metadata: &TxnMetadata) -> Vec<u8> {
    let mut out = Vec::with_capacity(64);
    out.push(TXN_VALUE_VERSION);
    out.extend_from_slice(&metadata.producer_id.to_be_bytes());
    out.extend_from_slice(&metadata.previous_producer_id.to_be_bytes());
    out.extend_from_slice(&metadata.producer_epoch.get().to_be_bytes());
    out.extend_from_slice(&metadata.last_producer_epoch.get().to_be_bytes());
    out.extend_from_slice(&metadata.timeout_ms.to_be_bytes());
    out.push(metadata.state.id());
    out.extend_from_slice(&metadata.start_timestamp_ms.to_be_bytes());
    out.extend_from_slice(&metadata.last_update_timestamp_ms.to_be_bytes());
    let count = u32::try_from(metadata.partitions.len()).expect("fewer than 4G partitions");
    out.extend_from_slice(&count.to_be_bytes());
    for tp in &metadata.partitions {
        put_len_prefixed(&mut out, tp.topic.as_bytes());
        out.extend_from_slice(&tp.partition.to_be_bytes());
    }
    out
}

pub fn decode(transactional_id: &str, bytes: &[u8]) -> io::Result<TxnMetadata> {
    let mut reader = Reader::new(bytes, WHAT);
    reader.version(TXN_VALUE_VERSION)?;
    let producer_id = i64::from_be_bytes(reader.array()?);
    let previous_producer_id = i64::from_be_bytes(reader.array()?);
    let producer_epoch = ProducerEpoch::new(i16::from_be_bytes(reader.array()?));
    let last_producer_epoch = ProducerEpoch::new(i16::from_be_bytes(reader.array()?));
    let timeout_ms = i32::from_be_bytes(reader.array()?);
    let [state] = reader.array::<1>()?;
    let state = TxnState::from_id(state)
        .filter(|state| !matches!(state, TxnState::Dead | TxnState::PrepareEpochFence))
        .ok_or_else(|| invalid(WHAT, "bad state"))?;
    let start_timestamp_ms = i64::from_be_bytes(reader.array()?);
    let last_update_timestamp_ms = i64::from_be_bytes(reader.array()?);
    let count = u32::from_be_bytes(reader.array()?);
    let mut partitions = BTreeSet::new();
    for _ in 0..count {
        let topic = reader.len_prefixed_str()?;
        let partition = i32::from_be_bytes(reader.array()?);
        partitions.insert(TopicPartition::new(topic, partition));
    }
    reader.finish()?;
    Ok(TxnMetadata {
        transactional_id: transactional_id.to_string(),
        producer_id,
        previous_producer_id,
        producer_epoch,
        last_producer_epoch,
        timeout_ms,
        state,
        partitions,
        start_timestamp_ms,
        last_update_timestamp_ms,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::SledTxnStore;

    fn ongoing(id: &str, producer_id: i64) -> TxnMetadata {
        let mut metadata = TxnMetadata::new(id, producer_id, 60_000, 1_000);
        metadata.producer_epoch = ProducerEpoch::new(3);
        metadata.last_producer_epoch = ProducerEpoch::new(2);
        metadata.state = TxnState::Ongoing;
        metadata.start_timestamp_ms = 1_500;
        metadata.partitions.insert(TopicPartition::new("orders", 2));
        metadata
            .partitions
            .insert(TopicPartition::new("__consumer_offsets", 17));
        metadata
    }

    fn hex(bytes: &[u8]) -> String {
        bytes.iter().map(|b| format!("{b:02x}")).collect()
    }

    #[test]
    fn records_round_trip_and_damage_is_reported() -> io::Result<()> {
        let metadata = ongoing("tx", 42);
        let bytes = encode(&metadata);
        assert_eq!(decode("tx", &bytes)?, metadata);
        assert!(decode("tx", &bytes[..bytes.len() - 1]).is_err());
        let mut bad_state = bytes.clone();
        bad_state[1 + 8 + 8 + 2 + 2 + 4] = 200;
        assert!(decode("tx", &bad_state).is_err());
        Ok(())
    }

    /// The bytes this encoding wrote when it lived in the store: data dirs written then
    /// must load now, so this is never edited to make a change pass.
    #[test]
    fn stored_bytes_are_pinned() {
        let mut metadata = ongoing("tx", 42);
        metadata.previous_producer_id = 41;
        let golden = concat!(
            "01",                                   // version
            "000000000000002a",                     // producer id 42
            "0000000000000029",                     // previous producer id 41
            "0003",                                 // producer epoch 3
            "0002",                                 // last producer epoch 2
            "0000ea60",                             // timeout 60 000 ms
            "01",                                   // Ongoing
            "00000000000005dc",                     // start 1 500 ms
            "00000000000003e8",                     // last update 1 000 ms
            "00000002",                             // two partitions, sorted
            "00000012",                             // topic length 18
            "5f5f636f6e73756d65725f6f666673657473", // __consumer_offsets
            "00000011",                             // partition 17
            "00000006",                             // topic length 6
            "6f7264657273",                         // orders
            "00000002",                             // partition 2
        );
        assert_eq!(hex(&encode(&metadata)), golden);
    }

    #[tokio::test]
    async fn saves_survive_reopen_and_dead_records_are_removed() -> io::Result<()> {
        let dir = tempfile::tempdir()?;
        let path = dir.path().join("txn");
        let store = SledTxnStore::open(&path)?;
        let first = ongoing("a", 1);
        let mut second = ongoing("b", 2);
        let saves: Vec<_> = [&first, &second].iter().map(|m| save(&store, m)).collect();
        for saved in saves {
            saved.await?;
        }
        second.state = TxnState::Dead;
        save(&store, &second).await?;
        store.close().await?;

        let store = SledTxnStore::open(&path)?;
        assert_eq!(load_all(&store)?, vec![first]);
        store.close().await
    }
}
