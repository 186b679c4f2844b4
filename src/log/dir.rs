//! `LogDir`: one directory of partition logs, laid out as a Kafka log dir, with its
//! checkpoint files and clean-shutdown marker.
//!
//! Invariant: the clean-shutdown marker exists only between a graceful shutdown and
//! the next `open`, which removes it durably before any log is touched, so a crash at
//! any later point leaves no marker and the next start recovers.

use std::collections::HashMap;
use std::fs;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use uuid::Uuid;

use super::checkpoint::{read_offsets, sync_dir, write_atomically, write_offsets};
use super::files::{
    deleted_dir_name, parse_partition_dir_name, CLEANER_OFFSET_CHECKPOINT_FILE,
    CLEAN_SHUTDOWN_FILE, DELETE_DIR_SUFFIX, LOG_START_OFFSET_CHECKPOINT_FILE,
    RECOVERY_POINT_CHECKPOINT_FILE, REPLICATION_OFFSET_CHECKPOINT_FILE,
};
use super::open_files::OpenFiles;
use super::partition::LoadOptions;
use super::{partition_metadata, CheckpointedOffsets, LogConfig, PartitionLog};
use crate::limits::IDLE_SEGMENT_FILES_MAX;
use crate::types::TopicPartition;

pub struct LogDir {
    path: PathBuf,
    clean_shutdown: bool,
    /// The cache of idle segment files every log of the dir shares.
    open_files: Arc<OpenFiles>,
}

impl LogDir {
    /// Opens (creating) the log dir, and reads and removes the clean-shutdown
    /// marker, with the largest cache of idle segment files.
    pub fn open(path: &Path) -> io::Result<LogDir> {
        LogDir::open_with(path, IDLE_SEGMENT_FILES_MAX)
    }

    /// `open`, keeping at most `idle_segment_files` files of idle segments open.
    pub fn open_with(path: &Path, idle_segment_files: usize) -> io::Result<LogDir> {
        fs::create_dir_all(path)?;
        let clean_shutdown = match fs::remove_file(path.join(CLEAN_SHUTDOWN_FILE)) {
            Ok(()) => true,
            Err(error) if error.kind() == io::ErrorKind::NotFound => false,
            Err(error) => return Err(error),
        };
        if clean_shutdown {
            sync_dir(path)?;
        }
        Ok(LogDir {
            path: path.to_path_buf(),
            clean_shutdown,
            open_files: OpenFiles::new(idle_segment_files),
        })
    }

    pub fn open_files(&self) -> &Arc<OpenFiles> {
        &self.open_files
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    pub fn was_clean_shutdown(&self) -> bool {
        self.clean_shutdown
    }

    /// Loads every partition dir, recovering above each recovery point after an
    /// unclean shutdown. Dirs for which `keep(tp, topic_id)` is false (topic deleted, or
    /// recreated under another id; a dir without `partition.metadata` has the nil id)
    /// are deleted instead, as are leftovers of interrupted deletions.
    pub fn load_all(
        &self,
        config_for: &dyn Fn(&TopicPartition) -> LogConfig,
        keep: &dyn Fn(&TopicPartition, Uuid) -> bool,
        now_ms: i64,
    ) -> io::Result<Vec<PartitionLog>> {
        let recovery_points = self.read_checkpoint(RECOVERY_POINT_CHECKPOINT_FILE);
        let log_start_offsets = self.read_checkpoint(LOG_START_OFFSET_CHECKPOINT_FILE);
        let high_watermarks = self.read_checkpoint(REPLICATION_OFFSET_CHECKPOINT_FILE);
        let first_dirty_offsets = self.read_checkpoint(CLEANER_OFFSET_CHECKPOINT_FILE);
        let mut logs = Vec::new();
        for (name, dir) in self.partition_dirs()? {
            if name.ends_with(DELETE_DIR_SUFFIX) {
                fs::remove_dir_all(&dir)?;
                continue;
            }
            let Some(tp) = parse_partition_dir_name(&name) else {
                tracing::warn!(dir = %dir.display(), "skipping a directory that is not a partition");
                continue;
            };
            let topic_id = partition_metadata::read(&dir)?.unwrap_or(Uuid::nil());
            if !keep(&tp, topic_id) {
                tracing::info!(%tp, %topic_id, "deleting the log of a deleted or recreated topic");
                fs::remove_dir_all(&dir)?;
                continue;
            }
            let options = LoadOptions {
                recovery_point: recovery_points.get(&tp).copied(),
                log_start_offset: log_start_offsets.get(&tp).copied(),
                high_watermark: high_watermarks.get(&tp).copied(),
                first_dirty_offset: first_dirty_offsets.get(&tp).copied(),
                clean_shutdown: self.clean_shutdown,
                now_ms,
                open_files: Arc::clone(&self.open_files),
            };
            let config = config_for(&tp);
            logs.push(PartitionLog::load(&dir, tp, topic_id, config, &options)?);
        }
        sync_dir(&self.path)?;
        Ok(logs)
    }

    /// Creates the dir and an empty log for a new partition, durably. Fails with
    /// `AlreadyExists` when the partition dir is present (load it instead).
    pub fn create_log(
        &self,
        tp: &TopicPartition,
        topic_id: Uuid,
        config: LogConfig,
        now_ms: i64,
    ) -> io::Result<PartitionLog> {
        let dir = self.path.join(tp.dir_name());
        fs::create_dir(&dir)?;
        // A creation that failed half-way (out of descriptors) leaves no dir
        // behind, so that it can be tried again.
        let created =
            PartitionLog::create(&dir, tp.clone(), topic_id, config, now_ms, &self.open_files)
                .and_then(|log| sync_dir(&self.path).map(|()| log));
        if created.is_err() {
            let _ = fs::remove_dir_all(&dir);
        }
        created
    }

    /// Deletes a log and its dir: renamed aside durably first, then removed.
    pub fn delete_log(&self, log: PartitionLog) -> io::Result<()> {
        let dir = log.dir().to_path_buf();
        let doomed = self
            .path
            .join(deleted_dir_name(log.topic_partition(), log.topic_id()));
        drop(log);
        if doomed.exists() {
            fs::remove_dir_all(&doomed)?;
        }
        fs::rename(&dir, &doomed)?;
        sync_dir(&self.path)?;
        fs::remove_dir_all(&doomed)
    }

    /// Writes the recovery point, log start offset and high watermark checkpoints, atomically and
    /// fsynced. `logs` must be every log of this dir: the files are replaced whole.
    pub fn write_checkpoints<'a>(
        &self,
        logs: impl IntoIterator<Item = &'a PartitionLog>,
    ) -> io::Result<()> {
        let offsets: Vec<CheckpointedOffsets> = logs
            .into_iter()
            .map(PartitionLog::checkpointed_offsets)
            .collect();
        self.write_checkpoint_offsets(&offsets)
    }

    /// `write_checkpoints` from offsets copied out of the logs, so that the files are
    /// written with no partition lock held.
    pub fn write_checkpoint_offsets(&self, offsets: &[CheckpointedOffsets]) -> io::Result<()> {
        let recovery_points: Vec<(TopicPartition, i64)> = offsets
            .iter()
            .map(|o| (o.tp.clone(), o.recovery_point))
            .collect();
        let log_start_offsets: Vec<(TopicPartition, i64)> = offsets
            .iter()
            .map(|o| (o.tp.clone(), o.log_start_offset))
            .collect();
        write_offsets(
            &self.path.join(RECOVERY_POINT_CHECKPOINT_FILE),
            &recovery_points,
        )?;
        let high_watermarks: Vec<(TopicPartition, i64)> = offsets
            .iter()
            .map(|o| (o.tp.clone(), o.high_watermark))
            .collect();
        write_offsets(
            &self.path.join(LOG_START_OFFSET_CHECKPOINT_FILE),
            &log_start_offsets,
        )?;
        write_offsets(
            &self.path.join(REPLICATION_OFFSET_CHECKPOINT_FILE),
            &high_watermarks,
        )?;
        let first_dirty_offsets: Vec<(TopicPartition, i64)> = offsets
            .iter()
            .filter_map(|o| Some((o.tp.clone(), o.first_dirty_offset?)))
            .collect();
        write_offsets(
            &self.path.join(CLEANER_OFFSET_CHECKPOINT_FILE),
            &first_dirty_offsets,
        )
    }

    /// Graceful shutdown, once every log is flushed and checkpointed: writes the marker
    /// (fsynced) so the next start skips recovery. It holds, as Kafka's does, the
    /// broker epoch of the process that wrote it (-1 when it had none), which the
    /// next start hands to the controller as proof that it lost nothing.
    pub fn mark_clean_shutdown(&self, broker_epoch: i64) -> io::Result<()> {
        let marker = format!("{{\"version\":0,\"brokerEpoch\":{broker_epoch}}}");
        write_atomically(&self.path.join(CLEAN_SHUTDOWN_FILE), marker.as_bytes())
    }

    /// The broker epoch in the clean-shutdown marker of the log dir at `path`, read
    /// before `open` removes it; None without a marker, or with one that names no
    /// epoch (as an older version wrote it).
    pub fn clean_shutdown_broker_epoch(path: &Path) -> io::Result<Option<i64>> {
        let text = match fs::read_to_string(path.join(CLEAN_SHUTDOWN_FILE)) {
            Ok(text) => text,
            Err(error) if error.kind() == io::ErrorKind::NotFound => return Ok(None),
            Err(error) => return Err(error),
        };
        let epoch = serde_json::from_str::<serde_json::Value>(&text)
            .ok()
            .and_then(|marker| marker.get("brokerEpoch")?.as_i64())
            .filter(|epoch| *epoch >= 0);
        Ok(epoch)
    }

    /// A checkpoint that cannot be read falls back to none: recovery then starts from
    /// each log's beginning and log start offsets from the first segment, both safe.
    fn read_checkpoint(&self, name: &str) -> HashMap<TopicPartition, i64> {
        read_offsets(&self.path.join(name)).unwrap_or_else(|error| {
            tracing::warn!(file = name, %error, "ignoring unreadable checkpoint");
            HashMap::new()
        })
    }

    /// The subdirectories, sorted by name so loading is deterministic.
    fn partition_dirs(&self) -> io::Result<Vec<(String, PathBuf)>> {
        let mut dirs = Vec::new();
        for entry in fs::read_dir(&self.path)? {
            let entry = entry?;
            if entry.file_type()?.is_dir() {
                dirs.push((
                    entry.file_name().to_string_lossy().into_owned(),
                    entry.path(),
                ));
            }
        }
        dirs.sort();
        Ok(dirs)
    }
}
