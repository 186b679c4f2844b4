//! The broker's partitions: which partition logs exist here, appends with their
//! durability wait, reads, and the wake-ups that end a Fetch long poll.
//!
//! Invariant: the set of logs follows the controller's metadata image. A log is
//! created the first time a partition of the image is touched (or when the image
//! watcher sees it) and deleted when its topic leaves the image or is recreated
//! with another id. Every `PartitionLog` sits behind one std `Mutex`, held only
//! for in-memory work and page-cache writes, never across an `.await`; fsyncs and
//! file reads happen outside it.

mod flusher;
mod markers;
mod partition;
#[cfg(test)]
mod tests;

use std::collections::BTreeMap;
use std::io;
use std::sync::{Arc, Mutex};

use dashmap::DashMap;
use tokio::sync::watch;

use crate::clock::Clock;
use crate::config::Config;
use crate::controller::{MetadataImage, TopicImage};
use crate::group_commit::StorageHealth;
use crate::log::{CheckpointedOffsets, LogConfig, LogDir};
use crate::topic_config;
use crate::types::TopicPartition;

pub use flusher::Flusher;
use partition::PartitionContext;
pub use partition::{FetchWaiter, Partition, PartitionError};

/// Owns every partition log of this broker. Shared by `Arc` between the server,
/// which opens it and runs its background work, and the handlers' `Partitions`
/// context.
pub struct ReplicaManager {
    config: Config,
    clock: Arc<dyn Clock>,
    log_dir: LogDir,
    partitions: DashMap<TopicPartition, Arc<Partition>>,
    /// Serialises log creation and deletion so two requests for a new partition
    /// do not both create it. Held for file-system calls only, never across await.
    lifecycle: Mutex<()>,
    flusher: Flusher,
    /// The log dir's health and clock, shared by every partition.
    context: PartitionContext,
    /// The controller's latest image, re-read under `lifecycle` before a log is
    /// created, so that a request holding an older image cannot recreate the log of
    /// a topic deleted since.
    images: watch::Receiver<Arc<MetadataImage>>,
}

impl ReplicaManager {
    /// Opens the log directory and loads (recovering after a crash) every log
    /// that belongs to a topic of `image`; logs of deleted topics are removed.
    /// Must run on a tokio runtime (the flusher is a task); blocking.
    pub fn open(
        config: &Config,
        clock: Arc<dyn Clock>,
        images: watch::Receiver<Arc<MetadataImage>>,
    ) -> io::Result<ReplicaManager> {
        let image = Arc::clone(&images.borrow());
        let image = image.as_ref();
        let log_dir_path = config.data_dir.join("logs");
        let log_dir = LogDir::open(&log_dir_path)?;
        let health = StorageHealth::new(format!("log dir {}", log_dir_path.display()));
        let context = PartitionContext {
            health: Arc::clone(&health),
            clock: Arc::clone(&clock),
        };
        let config_for = |tp: &TopicPartition| log_config_for(config, image, &tp.topic);
        let keep = |tp: &TopicPartition, topic_id: uuid::Uuid| {
            image.topics.get(&tp.topic).is_some_and(|t| {
                t.topic_id == topic_id && (tp.partition as usize) < t.partitions.len()
            })
        };
        let logs = log_dir.load_all(&config_for, &keep, clock.now_ms())?;
        let flusher = Flusher::start(health);
        let partitions = DashMap::new();
        for log in logs {
            let tp = log.topic_partition().clone();
            let topic = image.topics.get(&tp.topic);
            let leader_epoch = topic
                .and_then(|t| t.partitions.get(tp.partition as usize))
                .map_or(0, |p| p.leader_epoch);
            let flush = topic.map_or((None, None), |t| flush_policy_for(config, image, t));
            partitions.insert(
                tp,
                Arc::new(Partition::new(log, leader_epoch, flush, &context)),
            );
        }
        Ok(ReplicaManager {
            config: config.clone(),
            clock,
            log_dir,
            partitions,
            lifecycle: Mutex::new(()),
            flusher,
            context,
            images,
        })
    }

    /// The log directory's health: offline after a failed write or fsync.
    pub fn health(&self) -> &Arc<StorageHealth> {
        &self.context.health
    }

    pub fn was_clean_shutdown(&self) -> bool {
        self.log_dir.was_clean_shutdown()
    }

    pub fn flusher(&self) -> &Flusher {
        &self.flusher
    }

    pub fn clock(&self) -> &Arc<dyn Clock> {
        &self.clock
    }

    /// The partition if `image` has it, creating its log on first use.
    pub fn partition(
        &self,
        image: &MetadataImage,
        topic: &str,
        partition: i32,
    ) -> Result<Arc<Partition>, PartitionError> {
        self.check_leader(image, topic, partition)?;
        self.replica(image, topic, partition)
    }

    /// A client may read and write a partition only on its leader; until data
    /// replication exists no other replica has its records.
    fn check_leader(
        &self,
        image: &MetadataImage,
        topic: &str,
        partition: i32,
    ) -> Result<(), PartitionError> {
        let leader = image
            .topics
            .get(topic)
            .and_then(|t| t.partitions.get(usize::try_from(partition).ok()?))
            .map(|p| p.leader_id)
            .ok_or(PartitionError::UnknownTopicOrPartition)?;
        if leader != self.config.node_id {
            return Err(PartitionError::NotLeaderOrFollower);
        }
        Ok(())
    }

    /// The log of a partition `image` places a replica of here, whoever leads
    /// it, creating it on first use.
    fn replica(
        &self,
        image: &MetadataImage,
        topic: &str,
        partition: i32,
    ) -> Result<Arc<Partition>, PartitionError> {
        let topic_image = image
            .topics
            .get(topic)
            .ok_or(PartitionError::UnknownTopicOrPartition)?;
        if partition < 0 || partition as usize >= topic_image.partitions.len() {
            return Err(PartitionError::UnknownTopicOrPartition);
        }
        if !topic_image.partitions[partition as usize]
            .replicas
            .contains(&self.config.node_id)
        {
            return Err(PartitionError::NotLeaderOrFollower);
        }
        let tp = TopicPartition::new(topic, partition);
        if let Some(existing) = self.lookup(&tp) {
            if existing.topic_id == topic_image.topic_id && !existing.is_deleted() {
                return Ok(existing);
            }
        }
        self.create(image, topic_image, tp)
    }

    /// `partition`, for callers on a runtime worker: a log that must be created first
    /// (directory, `partition.metadata`, fsyncs) is created `off_the_worker`.
    pub fn partition_on_worker(
        &self,
        image: &MetadataImage,
        topic: &str,
        partition: i32,
    ) -> Result<Arc<Partition>, PartitionError> {
        self.check_leader(image, topic, partition)?;
        if let Some(topic_image) = image.topics.get(topic) {
            if let Some(existing) = self.lookup(&TopicPartition::new(topic, partition)) {
                if existing.topic_id == topic_image.topic_id && !existing.is_deleted() {
                    return Ok(existing);
                }
            }
        }
        off_the_worker(|| self.partition(image, topic, partition))
    }

    /// Every live partition, for periodic work and metrics.
    pub fn all(&self) -> Vec<Arc<Partition>> {
        self.partitions
            .iter()
            .map(|entry| Arc::clone(entry.value()))
            .collect()
    }

    fn lookup(&self, tp: &TopicPartition) -> Option<Arc<Partition>> {
        self.partitions
            .get(tp)
            .map(|entry| Arc::clone(entry.value()))
    }

    fn create(
        &self,
        image: &MetadataImage,
        topic: &TopicImage,
        tp: TopicPartition,
    ) -> Result<Arc<Partition>, PartitionError> {
        let _lifecycle = self
            .lifecycle
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        if self.health().is_offline() {
            return Err(PartitionError::Storage(self.health().offline_error()));
        }
        // The caller's image may predate a DeleteTopics: only a topic the latest image
        // still has, with the same id, gets a log.
        let still_there = self
            .images
            .borrow()
            .topics
            .get(&tp.topic)
            .is_some_and(|latest| {
                latest.topic_id == topic.topic_id
                    && (tp.partition as usize) < latest.partitions.len()
            });
        if !still_there {
            return Err(PartitionError::UnknownTopicOrPartition);
        }
        if let Some(existing) = self.lookup(&tp) {
            if existing.topic_id == topic.topic_id && !existing.is_deleted() {
                return Ok(existing);
            }
            // An older incarnation of the topic: its files go before the new ones.
            self.partitions.remove(&tp);
            self.health()
                .guard(|| existing.delete(&self.log_dir))
                .map_err(PartitionError::Storage)?;
        }
        let config = log_config_for(&self.config, image, &tp.topic);
        let now_ms = self.clock.now_ms();
        let log = self
            .health()
            .guard(|| self.log_dir.create_log(&tp, topic.topic_id, config, now_ms))
            .map_err(PartitionError::Storage)?;
        let leader_epoch = topic
            .partitions
            .get(tp.partition as usize)
            .map_or(0, |p| p.leader_epoch);
        let flush = flush_policy_for(&self.config, image, topic);
        let partition = Arc::new(Partition::new(log, leader_epoch, flush, &self.context));
        self.partitions.insert(tp, Arc::clone(&partition));
        Ok(partition)
    }

    /// Brings the logs in line with a new image: deletes logs of removed or
    /// recreated topics, creates logs of new partitions, applies config changes.
    pub fn sync_with(&self, image: &MetadataImage) {
        let stale: Vec<Arc<Partition>> = self
            .all()
            .into_iter()
            .filter(|p| {
                image.topics.get(&p.tp.topic).is_none_or(|t| {
                    t.topic_id != p.topic_id || p.tp.partition as usize >= t.partitions.len()
                })
            })
            .collect();
        for partition in stale {
            let _lifecycle = self
                .lifecycle
                .lock()
                .unwrap_or_else(|poisoned| poisoned.into_inner());
            self.partitions
                .remove_if(&partition.tp, |_, current| Arc::ptr_eq(current, &partition));
            if let Err(error) = self.health().guard(|| partition.delete(&self.log_dir)) {
                tracing::error!(partition = %partition.tp, %error, "deleting the log of a deleted topic failed");
            }
        }
        for (name, topic) in &image.topics {
            let log_config = log_config_for(&self.config, image, name);
            let flush = flush_policy_for(&self.config, image, topic);
            for (index, partition_image) in topic.partitions.iter().enumerate() {
                let index = index as i32;
                if !partition_image.replicas.contains(&self.config.node_id) {
                    continue;
                }
                match self.replica(image, name, index) {
                    Ok(partition) => {
                        partition.update(&log_config, partition_image.leader_epoch, flush)
                    }
                    // The topic was deleted after this image: a newer image
                    // is on its way and removes it; nothing failed.
                    Err(PartitionError::UnknownTopicOrPartition) => {
                        tracing::debug!(topic = %name, partition = index, "topic deleted before its log was created")
                    }
                    Err(error) => {
                        tracing::error!(topic = %name, partition = index, %error, "creating a partition log failed")
                    }
                }
            }
        }
    }

    /// Periodic housekeeping: time-based roll and retention of every log.
    pub fn run_retention(&self) {
        let now_ms = self.clock.now_ms();
        for partition in self.all() {
            if let Err(error) = partition.housekeep(now_ms) {
                tracing::error!(partition = %partition.tp, %error, "retention failed");
            }
        }
    }

    /// Requests an fsync of every partition whose flush.ms has passed.
    pub fn run_flush_policy(&self) {
        let now_ms = self.clock.now_ms();
        for partition in self.all() {
            if partition.flush_due(now_ms) {
                self.flusher.request(&partition);
            }
        }
    }

    /// Writes the recovery point and log start checkpoints: the offsets are copied out
    /// under each partition's lock in turn, and the files written with none held.
    /// Blocking: call it off the runtime.
    pub fn checkpoint(&self) -> io::Result<()> {
        let offsets: Vec<CheckpointedOffsets> = self
            .all()
            .iter()
            .filter_map(|p| p.lock_log().as_ref().map(|log| log.checkpointed_offsets()))
            .collect();
        self.health()
            .guard(|| self.log_dir.write_checkpoint_offsets(&offsets))
    }

    /// Graceful stop: fsync every log, write checkpoints, mark the clean shutdown so
    /// the next start skips recovery.
    /// Refused once the log dir is offline: a directory whose writes failed must be
    /// recovered at the next start, never marked clean.
    pub fn shutdown(&self) -> io::Result<()> {
        for partition in self.all() {
            partition.flush_now()?;
        }
        self.checkpoint()?;
        self.health().guard(|| self.log_dir.mark_clean_shutdown())
    }
}

/// Runs `work`, which writes files under partition locks, without stalling a runtime
/// worker: on the multi-threaded runtime the worker's other tasks are handed to
/// another thread while `work` runs here (`block_in_place`), so the request's bytes
/// stay on the thread that read them; a current-thread runtime (embedded tests) runs
/// it inline.
pub fn off_the_worker<T>(work: impl FnOnce() -> T) -> T {
    let multi_thread = tokio::runtime::Handle::try_current().is_ok_and(|runtime| {
        runtime.runtime_flavor() == tokio::runtime::RuntimeFlavor::MultiThread
    });
    if multi_thread {
        tokio::task::block_in_place(work)
    } else {
        work()
    }
}

/// The effective log config of a topic under `image`.
pub fn log_config_for(config: &Config, image: &MetadataImage, topic: &str) -> LogConfig {
    let empty = BTreeMap::new();
    let overrides = image.topics.get(topic).map_or(&empty, |t| &t.configs);
    topic_config::log_config(overrides, &image.broker_configs, config)
}

fn flush_policy_for(
    config: &Config,
    image: &MetadataImage,
    topic: &TopicImage,
) -> (Option<i64>, Option<i64>) {
    topic_config::flush_policy(&topic.configs, &image.broker_configs, config)
}
