//! Loading a partition dir, after Kafka's `LogLoader`. Segments that may hold offsets
//! at or above the recovery point after an unclean shutdown are re-validated batch by
//! batch; the first invalid batch ends the log (its segment is cut there and every
//! later segment deleted). All other segments are trusted, their indexes checked and
//! rebuilt only when missing or inconsistent.

use std::collections::BTreeSet;
use std::fs;
use std::io;
use std::path::Path;
use std::sync::Arc;

use uuid::Uuid;

use super::PartitionLog;
use crate::log::epoch::LeaderEpochCache;
use crate::log::files::{
    parse_offset_file_name, INDEX_FILE_SUFFIX, LOG_FILE_SUFFIX, STALE_FILE_SUFFIXES,
    TEMP_FILE_SUFFIX, TIME_INDEX_FILE_SUFFIX, TXN_INDEX_FILE_SUFFIX,
};
use crate::log::open_files::OpenFiles;
use crate::log::producer_state::ProducerStateManager;
use crate::log::segment::{self, LoadedSegment, Segment};
use crate::log::{LogConfig, LogError};
use crate::types::TopicPartition;

/// What the log dir knows about a partition before it is loaded.
pub struct LoadOptions {
    /// From `recovery-point-offset-checkpoint`; None means recover from the start.
    pub recovery_point: Option<i64>,
    /// From `log-start-offset-checkpoint`.
    pub log_start_offset: Option<i64>,
    /// From `replication-offset-checkpoint`; None is 0 (Kafka's), which the replica
    /// layer raises as the leader learns its followers' progress.
    pub high_watermark: Option<i64>,
    /// From `cleaner-offset-checkpoint`; None is the log start (all of it dirty).
    pub first_dirty_offset: Option<i64>,
    pub clean_shutdown: bool,
    pub now_ms: i64,
    /// The log dir's cache of idle segment files.
    pub open_files: Arc<OpenFiles>,
}

impl PartitionLog {
    pub(crate) fn load(
        dir: &Path,
        tp: TopicPartition,
        topic_id: Uuid,
        config: LogConfig,
        options: &LoadOptions,
    ) -> io::Result<PartitionLog> {
        crate::log::cleaner::recover(dir)?;
        let base_offsets = scan_dir(dir)?;
        let recovery_point = options.recovery_point.unwrap_or(0);
        let (mut segments, txn_index_rebuild_from) =
            load_segments(dir, &base_offsets, &config, recovery_point, options)?;
        let checkpointed_start = options.log_start_offset.unwrap_or(0);
        let log_end_offset = segments.last().map_or(-1, Segment::next_offset);
        // Kafka: a log that ends below its checkpointed start (its tail was lost) is
        // restarted empty at that start offset.
        if log_end_offset < checkpointed_start {
            for segment in segments.drain(..) {
                segment.delete()?;
            }
            segments.push(Segment::create(
                dir,
                checkpointed_start,
                options.now_ms,
                &options.open_files,
            )?);
        }
        let log_end_offset = segments.last().map_or(0, Segment::next_offset);
        let log_start_offset = checkpointed_start
            .max(segments[0].base_offset())
            .min(log_end_offset);
        let mut epochs = LeaderEpochCache::load(dir)?;
        epochs.truncate_from_end(log_end_offset)?;
        epochs.truncate_from_start(log_start_offset)?;
        let mut log = PartitionLog {
            tp,
            topic_id,
            dir: dir.to_path_buf(),
            config,
            segments,
            log_start_offset,
            log_end_offset,
            high_watermark: options
                .high_watermark
                .unwrap_or(0)
                .clamp(log_start_offset, log_end_offset),
            recovery_point: if options.clean_shutdown {
                log_end_offset
            } else {
                recovery_point.min(log_end_offset)
            },
            truncated_end: None,
            epochs,
            producers: ProducerStateManager::new(),
            snapshots: BTreeSet::new(),
            unsynced_snapshots: Vec::new(),
            first_dirty_offset: options
                .first_dirty_offset
                .unwrap_or(0)
                .clamp(log_start_offset, log_end_offset),
            producer_replay_start: None,
            open_files: Arc::clone(&options.open_files),
        };
        // Producer state: snapshot plus replay up to the point below which the log
        // (and its transaction indexes) was fsynced and is trusted as is.
        let recovery_start =
            txn_index_rebuild_from.map_or(log.recovery_point, |base| base.min(log.recovery_point));
        log.scan_snapshots()?;
        log.rebuild_producer_state(recovery_start, Some(options.now_ms))
            .map_err(log_error_to_io)?;
        log.check_invariants();
        Ok(log)
    }
}

fn log_error_to_io(error: LogError) -> io::Error {
    match error {
        LogError::Io(error) => error,
        other => io::Error::new(io::ErrorKind::InvalidData, other.to_string()),
    }
}

/// Opens each segment in offset order, recovering the ones that need it. With them,
/// the base offset of the first segment whose transaction index must be rebuilt.
fn load_segments(
    dir: &Path,
    base_offsets: &[i64],
    config: &LogConfig,
    recovery_point: i64,
    options: &LoadOptions,
) -> io::Result<(Vec<Segment>, Option<i64>)> {
    let mut segments: Vec<Segment> = Vec::with_capacity(base_offsets.len());
    let mut txn_index_rebuild_from = None;
    for (i, &base_offset) in base_offsets.iter().enumerate() {
        let overlaps = segments
            .last()
            .is_some_and(|p| p.next_offset() > base_offset);
        // A segment may hold unflushed offsets when the next one starts above the
        // recovery point (or it is the last).
        let unflushed = !options.clean_shutdown
            && base_offsets
                .get(i + 1)
                .is_none_or(|&next| next > recovery_point);
        if overlaps {
            delete_later_segments(dir, &base_offsets[i..])?;
            break;
        }
        let loaded = open_segment(dir, base_offset, config, unflushed, options)?;
        if loaded.txn_index_rebuild {
            txn_index_rebuild_from.get_or_insert(base_offset);
        }
        // Every segment but the last is idle, and its data is on disk (trusted,
        // or recovered and fsynced): its file goes to the cache, so a log of
        // many segments loads within the cache's descriptors.
        if let Some(previous) = segments.last_mut() {
            previous.unpin();
        }
        segments.push(loaded.segment);
        if unflushed && loaded.truncated_bytes > 0 {
            delete_later_segments(dir, &base_offsets[i + 1..])?;
            break;
        }
    }
    Ok((segments, txn_index_rebuild_from))
}

fn open_segment(
    dir: &Path,
    base_offset: i64,
    config: &LogConfig,
    unflushed: bool,
    options: &LoadOptions,
) -> io::Result<LoadedSegment> {
    let interval = config.index_interval_bytes;
    let (now_ms, open_files) = (options.now_ms, &options.open_files);
    if unflushed {
        Segment::open_and_recover(dir, base_offset, interval, now_ms, open_files)
    } else {
        Segment::open_trusted(dir, base_offset, interval, now_ms, open_files)
    }
}

/// Nothing after the first invalid batch is kept, nor a segment overlapping the
/// offsets before it.
fn delete_later_segments(dir: &Path, base_offsets: &[i64]) -> io::Result<()> {
    for &base_offset in base_offsets {
        tracing::warn!(dir = %dir.display(), base_offset, "deleting segment after the end of the recovered log");
        segment::delete_files(dir, base_offset)?;
    }
    Ok(())
}

/// The base offsets of the segments in `dir`, sorted; deletes what a crash left behind
/// (temp files, index files without a log, Kafka's interrupted-operation files).
fn scan_dir(dir: &Path) -> io::Result<Vec<i64>> {
    let mut logs = BTreeSet::new();
    let mut indexes = Vec::new();
    for entry in fs::read_dir(dir)? {
        let entry = entry?;
        let name = entry.file_name().to_string_lossy().into_owned();
        if name.ends_with(TEMP_FILE_SUFFIX) || STALE_FILE_SUFFIXES.iter().any(|s| name.ends_with(s))
        {
            tracing::warn!(file = %name, "deleting leftover file");
            fs::remove_file(entry.path())?;
        } else if let Some(base_offset) = parse_offset_file_name(&name, LOG_FILE_SUFFIX) {
            logs.insert(base_offset);
        } else if let Some(base_offset) = parse_offset_file_name(&name, INDEX_FILE_SUFFIX)
            .or_else(|| parse_offset_file_name(&name, TIME_INDEX_FILE_SUFFIX))
            .or_else(|| parse_offset_file_name(&name, TXN_INDEX_FILE_SUFFIX))
        {
            indexes.push((base_offset, entry.path()));
        }
    }
    for (base_offset, path) in indexes {
        if !logs.contains(&base_offset) {
            tracing::warn!(file = %path.display(), "deleting index without a log");
            fs::remove_file(path)?;
        }
    }
    Ok(logs.into_iter().collect())
}
