//! Where the transaction coordinator's cache stands in its internal topic
//! partition: the log end offset it had replayed to at its last load, and the
//! leader epoch of the record just below it. Kept per partition in the store's
//! migration tree (a partition with a checkpoint is migrated), so a later load
//! reads only the log after it, when the log still holds that prefix: two logs
//! whose record at an offset has the same leader epoch are the same up to it
//! (Kafka's log matching, which follower truncation by leader epoch keeps).
//!
//! The group coordinator keeps none: its cache cannot stand for a prefix of
//! the offsets log, whose pending transactional offsets and committed ones are
//! ordered by the log offsets that wrote them (a later commit marker applies a
//! pending offset only over an older committed one), which the cache does not
//! keep. Its loads replay the whole partition, as Kafka's do; its store keeps
//! only which partitions are migrated, in a migration tree read and written
//! by the same functions.

use std::io;

use super::durable::sled_to_io;

/// The cache holds what the partition's log holds below `end_offset`, whose
/// record at `end_offset - 1` was written in `leader_epoch`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LoadCheckpoint {
    pub end_offset: i64,
    pub leader_epoch: i32,
}

/// Whether `partition` is in `tree`, the migration tree: with a checkpoint,
/// or empty where it was migrated before checkpoints were kept.
pub(crate) fn is_migrated(tree: &sled::Tree, partition: i32) -> io::Result<bool> {
    let migrated = tree.get(partition.to_be_bytes());
    Ok(migrated.map_err(sled_to_io)?.is_some())
}

/// Puts `partition` in the migration `tree`, with no checkpoint; the caller
/// fsyncs.
pub(crate) fn mark_migrated(tree: &sled::Tree, partition: i32) -> io::Result<()> {
    tree.insert(partition.to_be_bytes(), &[][..])
        .map_err(sled_to_io)?;
    Ok(())
}

/// The partition's checkpoint in `tree`, if it has one (a partition migrated
/// by an older load has an empty value).
pub(crate) fn read(tree: &sled::Tree, partition: i32) -> io::Result<Option<LoadCheckpoint>> {
    let Some(value) = tree.get(partition.to_be_bytes()).map_err(sled_to_io)? else {
        return Ok(None);
    };
    let Ok(bytes) = <[u8; 12]>::try_from(value.as_ref()) else {
        return Ok(None);
    };
    let (end, epoch) = bytes.split_at(8);
    Ok(Some(LoadCheckpoint {
        end_offset: i64::from_be_bytes(end.try_into().map_err(io::Error::other)?),
        leader_epoch: i32::from_be_bytes(epoch.try_into().map_err(io::Error::other)?),
    }))
}

/// Sets the partition's checkpoint in `tree` (not yet durable: the caller
/// fsyncs).
pub(crate) fn write(
    tree: &sled::Tree,
    partition: i32,
    checkpoint: LoadCheckpoint,
) -> io::Result<()> {
    let mut value = checkpoint.end_offset.to_be_bytes().to_vec();
    value.extend_from_slice(&checkpoint.leader_epoch.to_be_bytes());
    tree.insert(partition.to_be_bytes(), value)
        .map_err(sled_to_io)?;
    Ok(())
}
