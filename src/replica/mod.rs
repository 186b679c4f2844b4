//! The broker's partitions: which partition logs exist here, appends with their
//! durability wait, reads, and the wake-ups that end a Fetch long poll.
//!
//! Invariant: the set of served logs follows the controller's metadata image, and a
//! log is deleted only when its topic's deletion is in the image (its topic id is
//! among the image's tombstones). A log is created the first time a partition of the
//! image is touched (or when the image watcher sees it). A log on disk that the image
//! neither has nor has deleted (the image lags behind the logs, as after a replay
//! from an older point) is kept aside: loaded and recovered, flushed and
//! checkpointed with the others, but never served nor aged by retention, until an
//! image serves it as it is or deletes it. Every `PartitionLog` sits behind one std
//! `Mutex`, held only for in-memory work and page-cache writes, never across an
//! `.await`; fsyncs and file reads happen outside it.

mod fetcher;
mod flusher;
mod partition;
mod replication;
#[cfg(test)]
mod sim_tests;
#[cfg(test)]
pub(crate) mod test_support;
#[cfg(test)]
mod tests;
mod txn_marker_append;

use std::collections::BTreeMap;
use std::io;
use std::sync::{Arc, Mutex, OnceLock};

use dashmap::DashMap;
use tokio::sync::watch;

use crate::clock::Clock;
use crate::config::Config;
use crate::controller::{MetadataImage, TopicImage};
use crate::durability::StorageHealth;
use crate::log::{CheckpointedOffsets, LogConfig, LogDir};
use crate::topic_config;
use crate::types::{BrokerEpoch, LeaderEpoch, TopicPartition};

use fetcher::Fetchers;
pub use fetcher::{
    BoxFuture, FetchPartitionRequest, FetchedPartition, FetcherSettings, LeaderConnector,
    LeaderLink, ReplicaFetch,
};
pub use flusher::Flusher;
use partition::PartitionContext;
pub use partition::{
    EpochEndOffset, FetchWaiter, FollowerFetch, FollowerRead, LeaderAppend, Partition,
    PartitionError,
};
pub use replication::{IsrChange, LeaderAndIsr};
use replication::{PartitionView, Transition};

/// Proposes a leader's ISR change to the controller (Kafka's AlterPartition); the
/// server adapts it onto the controller's proposals. Resolves to the partition's
/// leader epoch, partition epoch and ISR when the change applied, None when it was
/// refused or lost.
pub trait IsrProposer: Send + Sync {
    fn alter_partition(
        &self,
        topic_id: uuid::Uuid,
        partition: i32,
        leader_id: i32,
        change: IsrChange,
    ) -> BoxFuture<'static, Option<LeaderAndIsr>>;
}

/// Owns every partition log of this broker. Shared by `Arc` between the server,
/// which opens it and runs its background work, and the handlers' `Partitions`
/// context.
pub struct ReplicaManager {
    config: Config,
    clock: Arc<dyn Clock>,
    log_dir: LogDir,
    partitions: DashMap<TopicPartition, Arc<Partition>>,
    /// Logs kept aside: neither served nor deleted by the latest image. At most one
    /// log per partition dir, so never a key of `partitions` at the same time.
    aside: DashMap<TopicPartition, Arc<Partition>>,
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
    /// The followers' fetchers, one per leader this broker follows.
    fetchers: Fetchers,
    /// Where leaders send their ISR changes; set once by the server.
    isr_proposer: OnceLock<Arc<dyn IsrProposer>>,
}

impl ReplicaManager {
    /// Opens the log directory and loads (recovering after a crash) every log; the
    /// logs of topics `image` has deleted are removed instead, and those it neither
    /// has nor has deleted are kept aside. At most `idle_segment_files` files of
    /// idle segments are kept open. Must run on a tokio runtime (the flusher is
    /// a task); blocking.
    pub fn open(
        config: &Config,
        clock: Arc<dyn Clock>,
        images: watch::Receiver<Arc<MetadataImage>>,
        links: Arc<dyn LeaderConnector>,
        idle_segment_files: usize,
    ) -> io::Result<ReplicaManager> {
        let image = Arc::clone(&images.borrow());
        let image = image.as_ref();
        let log_dir_path = log_dir_path(config);
        let log_dir = LogDir::open_with(&log_dir_path, idle_segment_files)?;
        let health = StorageHealth::new(format!("log dir {}", log_dir_path.display()));
        let context = PartitionContext {
            health: Arc::clone(&health),
            clock: Arc::clone(&clock),
            node_id: config.node_id,
            replica_lag_time_max_ms: i64::try_from(config.replica_lag_time_max_ms)
                .unwrap_or(i64::MAX),
        };
        let config_for = |tp: &TopicPartition| log_config_for(config, image, &tp.topic);
        // A log kept aside is loaded too, so that it is recovered now, after the crash
        // it may have seen: a later clean-shutdown marker covers every dir of the log
        // dir, and would otherwise vouch for one that was never recovered.
        let keep = |tp: &TopicPartition, topic_id: uuid::Uuid| {
            disposition(image, tp, topic_id) != Disposition::Delete
        };
        let logs = log_dir.load_all(&config_for, &keep, clock.now_ms())?;
        let flusher = Flusher::start(health);
        let partitions = DashMap::new();
        let aside = DashMap::new();
        for log in logs {
            let tp = log.topic_partition().clone();
            if disposition(image, &tp, log.topic_id()) == Disposition::KeepAside {
                warn_kept_aside(image, &tp, log.topic_id());
                let partition = Partition::new(log, (None, None), &context);
                aside.insert(tp, Arc::new(partition));
                continue;
            }
            let topic = image.topics.get(&tp.topic);
            let flush = topic.map_or((None, None), |t| flush_policy_for(config, image, t));
            partitions.insert(tp, Arc::new(Partition::new(log, flush, &context)));
        }
        let fetchers = Fetchers::new(
            FetcherSettings {
                node_id: config.node_id,
                listener: config.inter_broker_listener().to_string(),
            },
            links,
            images.clone(),
            tokio::runtime::Handle::current(),
        );
        let manager = ReplicaManager {
            config: config.clone(),
            clock,
            log_dir,
            partitions,
            aside,
            lifecycle: Mutex::new(()),
            flusher,
            context,
            images,
            fetchers,
            isr_proposer: OnceLock::new(),
        };
        for partition in manager.all() {
            manager.follow_image(image, &partition);
        }
        Ok(manager)
    }

    /// Where this broker's leaders send ISR changes from now on.
    pub fn set_isr_proposer(&self, proposer: Arc<dyn IsrProposer>) {
        let _ = self.isr_proposer.set(proposer);
    }

    /// Brings a partition's role in line with `image`: leader, or follower fetching
    /// from the image's leader (restarted only when the leader or its epoch changed).
    /// Blocking when it becomes leader (the epoch cache is written).
    fn follow_image(&self, image: &MetadataImage, partition: &Arc<Partition>) {
        let Some(partition_image) = image
            .topics
            .get(&partition.tp.topic)
            .filter(|t| t.topic_id == partition.topic_id)
            .and_then(|t| {
                t.partitions
                    .get(usize::try_from(partition.tp.partition).ok()?)
            })
        else {
            return;
        };
        let node_id = self.config.node_id;
        let replica = partition_image.replicas.contains(&node_id);
        let min_insync_replicas = topic_config::min_insync_replicas(
            &image.topics[&partition.tp.topic].configs,
            &image.broker_configs,
            &self.config,
        );
        let live = live_broker_epochs(image);
        let eligible: Vec<i32> = partition_image
            .replicas
            .iter()
            .copied()
            .filter(|id| live(*id).is_some())
            .collect();
        let view = PartitionView {
            leader_id: partition_image.leader_id,
            leader_epoch: partition_image.leader_epoch,
            partition_epoch: partition_image.partition_epoch,
            replicas: &partition_image.replicas,
            isr: &partition_image.isr,
            eligible: &eligible,
            min_insync_replicas,
        };
        match partition.apply_image(&view) {
            Ok(Transition::BecameLeader) => {
                tracing::debug!(partition = %partition.tp, epoch = view.leader_epoch.get(), "leading");
                self.fetchers.unfollow(&partition.tp);
            }
            // Moved off this broker by a reassignment: it steps down (its waits
            // end) and fetches no more; its log stays on disk.
            Ok(_) if !replica => self.fetchers.unfollow(&partition.tp),
            Ok(Transition::BecameFollower { leader_id }) => {
                tracing::debug!(partition = %partition.tp, leader = leader_id, epoch = view.leader_epoch.get(), "following");
                self.fetchers
                    .follow(partition, leader_id, view.leader_epoch);
            }
            Ok(Transition::Unchanged) => {}
            Err(error) => {
                tracing::error!(partition = %partition.tp, %error, "applying the partition's metadata failed")
            }
        }
    }

    /// A follower's fetch of a partition this broker leads: read for it, and propose
    /// the ISR expansion the fetch made due. Refused with StaleBrokerEpoch unless the
    /// fetch carries the broker epoch of the follower's registration in the image
    /// (fenced or not: a restarted broker catches up before it is unfenced), so
    /// that neither an earlier incarnation nor a client posing as a follower can
    /// move the high watermark.
    pub fn read_for_follower(
        &self,
        partition: &Arc<Partition>,
        fetch: &FollowerFetch,
    ) -> Result<FollowerRead, PartitionError> {
        let image = Arc::clone(&self.images.borrow());
        let registered = image.brokers.get(&fetch.replica_id).map(|b| b.epoch);
        if registered != Some(fetch.broker_epoch) {
            return Err(PartitionError::StaleBrokerEpoch);
        }
        let epochs = live_broker_epochs(&image);
        let mut read = partition.read_for_follower(fetch, epochs)?;
        if let Some(change) = read.isr_change.take() {
            self.propose_isr(partition, change);
        }
        Ok(read)
    }

    /// Whether this broker led `tp` without a break from `from_epoch` to
    /// `to_epoch`, as its log's leader-epoch cache tells: no epoch in between
    /// started in the log (another leader that wrote, or a leadership of this
    /// broker's own that the caller never saw). False when the log is not here.
    /// In-memory: the cache is read under the log's lock, no I/O.
    pub fn led_without_a_break(
        &self,
        tp: &TopicPartition,
        from_epoch: LeaderEpoch,
        to_epoch: LeaderEpoch,
    ) -> bool {
        let Some(partition) = self.lookup(tp) else {
            return false;
        };
        partition
            .with_log(|log| {
                Ok(log
                    .leader_epoch_entries()
                    .iter()
                    .all(|entry| entry.epoch <= from_epoch.get() || entry.epoch >= to_epoch.get()))
            })
            .unwrap_or(false)
    }

    /// Leaders drop ISR members that fell behind by more than
    /// `replica.lag.time.max.ms`; run periodically.
    pub fn shrink_isrs(&self) {
        let image = Arc::clone(&self.images.borrow());
        let epochs = live_broker_epochs(&image);
        for partition in self.all() {
            if let Some(change) = partition.isr_shrink(&epochs) {
                tracing::info!(partition = %partition.tp, isr = ?change.new_isr, "shrinking the ISR");
                self.propose_isr(&partition, change);
            }
        }
    }

    /// Sends an ISR change to the controller and settles it with the answer; without a
    /// proposer (an embedded broker with no cluster), settles it refused.
    fn propose_isr(&self, partition: &Arc<Partition>, change: IsrChange) {
        let proposed_at = change.partition_epoch;
        let Some(proposer) = self.isr_proposer.get() else {
            partition.settle_isr(proposed_at, None);
            return;
        };
        let answer = proposer.alter_partition(
            partition.topic_id,
            partition.tp.partition,
            self.config.node_id,
            change,
        );
        let partition = Arc::clone(partition);
        let spawned = tokio::runtime::Handle::try_current().map(|runtime| {
            runtime.spawn(async move {
                let applied = answer.await;
                partition.settle_isr(proposed_at, applied);
            })
        });
        if spawned.is_err() {
            tracing::warn!("no runtime to propose an ISR change on");
        }
    }

    /// Stops the followers' fetchers.
    pub fn stop_fetchers(&self) {
        self.fetchers.shutdown();
    }

    /// This broker's id.
    pub fn node_id(&self) -> i32 {
        self.config.node_id
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

    /// A client may read and write a partition only on its leader (the partition's
    /// own state, which follows the image, is checked again under its lock).
    fn check_leader(
        &self,
        image: &MetadataImage,
        topic: &str,
        partition: i32,
    ) -> Result<(), PartitionError> {
        let leader = image
            .partition(topic, partition)
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
        if let Some(existing) = self.served(&tp, topic_image.topic_id) {
            return Ok(existing);
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
            let tp = TopicPartition::new(topic, partition);
            if let Some(existing) = self.served(&tp, topic_image.topic_id) {
                return Ok(existing);
            }
        }
        off_the_worker(|| self.partition(image, topic, partition))
    }

    /// A partition a consumer may read here: led here, or (KIP-392, a fetch that
    /// carries client metadata) any replica here, which serves up to its own high
    /// watermark.
    pub fn readable_on_worker(
        &self,
        image: &MetadataImage,
        topic: &str,
        partition: i32,
        from_follower: bool,
    ) -> Result<Arc<Partition>, PartitionError> {
        match self.partition_on_worker(image, topic, partition) {
            Err(PartitionError::NotLeaderOrFollower) if from_follower => {
                let topic_image = image
                    .topics
                    .get(topic)
                    .ok_or(PartitionError::UnknownTopicOrPartition)?;
                let existing = self
                    .lookup(&TopicPartition::new(topic, partition))
                    .filter(|p| p.topic_id == topic_image.topic_id && !p.is_deleted());
                let replica = topic_image
                    .partitions
                    .get(usize::try_from(partition).unwrap_or(usize::MAX))
                    .is_some_and(|p| p.replicas.contains(&self.config.node_id));
                match existing {
                    Some(existing) if replica => Ok(existing),
                    _ => Err(PartitionError::NotLeaderOrFollower),
                }
            }
            other => other,
        }
    }

    /// KIP-392, on the leader: the replica a consumer in `client_rack` should fetch
    /// `fetch_offset` from instead of this leader, as Kafka's
    /// RackAwareReplicaSelector picks it (the leader if it is in that rack, else the
    /// most caught-up in-sync replica there that holds the offset); None to serve
    /// the fetch here.
    pub fn preferred_read_replica(
        &self,
        partition: &Partition,
        fetch_offset: i64,
        client_rack: &str,
    ) -> Option<i32> {
        if self.config.replica_selector != crate::config::ReplicaSelector::RackAware
            || client_rack.is_empty()
        {
            return None;
        }
        let image = Arc::clone(&self.images.borrow());
        let rack_of = |id: i32| image.brokers.get(&id).and_then(|b| b.rack.clone());
        if rack_of(self.config.node_id).as_deref() == Some(client_rack) {
            return None;
        }
        let (isr, followers) = partition.follower_positions()?;
        followers
            .into_iter()
            .filter(|(id, log_end_offset)| {
                isr.contains(id)
                    && *log_end_offset >= fetch_offset
                    && image.brokers.get(id).is_some_and(|b| !b.fenced)
                    && rack_of(*id).as_deref() == Some(client_rack)
            })
            .max_by_key(|(id, log_end_offset)| (*log_end_offset, -id))
            .map(|(id, _)| id)
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

    /// The log served for `tp` if it is of the topic incarnation `topic_id` and
    /// not deleted meanwhile.
    fn served(&self, tp: &TopicPartition, topic_id: uuid::Uuid) -> Option<Arc<Partition>> {
        self.lookup(tp)
            .filter(|existing| existing.topic_id == topic_id && !existing.is_deleted())
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
        let latest = Arc::clone(&self.images.borrow());
        if disposition(&latest, &tp, topic.topic_id) != Disposition::Serve {
            return Err(PartitionError::UnknownTopicOrPartition);
        }
        let config = log_config_for(&self.config, image, &tp.topic);
        let flush = flush_policy_for(&self.config, image, topic);
        if let Some(existing) = self.served(&tp, topic.topic_id) {
            return Ok(existing);
        }
        let occupant = self
            .lookup(&tp)
            .or_else(|| self.aside.get(&tp).map(|entry| Arc::clone(entry.value())));
        if let Some(occupant) = occupant.filter(|o| !o.is_deleted()) {
            if occupant.topic_id == topic.topic_id {
                // Kept aside until this image: served as it is, never recreated empty.
                tracing::info!(partition = %tp, topic_id = %topic.topic_id, "serving a log kept aside");
                self.aside.remove(&tp);
                occupant.update(&config, flush);
                // Its role first: a request that finds it in the map finds it leading.
                self.follow_image(image, &occupant);
                self.partitions.insert(tp, Arc::clone(&occupant));
                return Ok(occupant);
            }
            if !latest.deleted_topic_ids.contains(&occupant.topic_id) {
                // A later incarnation than the image's, which this node has not
                // caught up with: its records are kept, and the image's topic waits.
                // A log already aside was warned about when it was set aside; requests
                // for the topic must not log once each.
                if self.partitions.contains_key(&tp) {
                    warn_kept_aside(&latest, &tp, occupant.topic_id);
                    self.move_aside(&occupant);
                }
                return Err(PartitionError::UnknownTopicOrPartition);
            }
            // An older incarnation of the topic, deleted: its files go before the new ones.
            self.partitions.remove(&tp);
            self.aside.remove(&tp);
            self.health()
                .guard(|| occupant.delete(&self.log_dir))
                .map_err(PartitionError::Storage)?;
        } else {
            // Nothing there, or a log deleted meanwhile whose files are gone.
            self.partitions.remove(&tp);
            self.aside.remove(&tp);
        }
        let now_ms = self.clock.now_ms();
        let log = self
            .health()
            .guard(|| self.log_dir.create_log(&tp, topic.topic_id, config, now_ms))
            .map_err(PartitionError::Storage)?;
        let partition = Arc::new(Partition::new(log, flush, &self.context));
        // Its role first: a request that finds the new log in the map (outside
        // `lifecycle`) must find it leading, not NOT_LEADER_OR_FOLLOWER.
        self.follow_image(image, &partition);
        self.partitions.insert(tp, Arc::clone(&partition));
        Ok(partition)
    }

    /// Brings the logs in line with a new image: deletes the logs of topics it has
    /// deleted (removed, or recreated under another id), keeps aside served logs it
    /// does not serve, serves logs kept aside that it serves, creates logs of new
    /// partitions and applies config changes.
    pub fn sync_with(&self, image: &MetadataImage) {
        let aside: Vec<Arc<Partition>> = self
            .aside
            .iter()
            .map(|entry| Arc::clone(entry.value()))
            .collect();
        for partition in self.all().into_iter().chain(aside) {
            match disposition(image, &partition.tp, partition.topic_id) {
                Disposition::Serve => {}
                Disposition::Delete => {
                    let _lifecycle = self
                        .lifecycle
                        .lock()
                        .unwrap_or_else(|poisoned| poisoned.into_inner());
                    self.partitions
                        .remove_if(&partition.tp, |_, current| Arc::ptr_eq(current, &partition));
                    self.aside
                        .remove_if(&partition.tp, |_, current| Arc::ptr_eq(current, &partition));
                    if let Err(error) = self.health().guard(|| partition.delete(&self.log_dir)) {
                        tracing::error!(partition = %partition.tp, %error, "deleting the log of a deleted topic failed");
                    }
                }
                // Images only move forward, partitions only grow and an id is never
                // reused, so a served log drops out of the image only by its deletion;
                // should one drop out otherwise, it is kept rather than served or lost.
                Disposition::KeepAside => {
                    let _lifecycle = self
                        .lifecycle
                        .lock()
                        .unwrap_or_else(|poisoned| poisoned.into_inner());
                    if self
                        .lookup(&partition.tp)
                        .is_some_and(|p| Arc::ptr_eq(&p, &partition))
                    {
                        warn_kept_aside(image, &partition.tp, partition.topic_id);
                        self.move_aside(&partition);
                    }
                }
            }
        }
        for (name, topic) in &image.topics {
            let log_config = log_config_for(&self.config, image, name);
            let flush = flush_policy_for(&self.config, image, topic);
            for (index, partition_image) in topic.partitions.iter().enumerate() {
                let index = index as i32;
                if !partition_image.replicas.contains(&self.config.node_id) {
                    // Moved off this broker by a reassignment: no longer fetched.
                    if let Some(partition) = self.lookup(&TopicPartition::new(name, index)) {
                        self.follow_image(image, &partition);
                    }
                    continue;
                }
                match self.replica(image, name, index) {
                    Ok(partition) => {
                        partition.update(&log_config, flush);
                        self.follow_image(image, &partition);
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

    /// Takes a served partition out of service, keeping its log. The caller holds
    /// `lifecycle`.
    fn move_aside(&self, partition: &Arc<Partition>) {
        if self
            .partitions
            .remove_if(&partition.tp, |_, current| Arc::ptr_eq(current, partition))
            .is_some()
        {
            self.aside
                .insert(partition.tp.clone(), Arc::clone(partition));
        }
    }

    /// Served partitions and the ones kept aside: every log this broker has loaded.
    fn every_log(&self) -> Vec<Arc<Partition>> {
        let mut every = self.all();
        every.extend(self.aside.iter().map(|entry| Arc::clone(entry.value())));
        every
    }

    /// Periodic housekeeping: time-based roll and retention of every served log.
    pub fn run_retention(&self) {
        let now_ms = self.clock.now_ms();
        for partition in self.all() {
            if let Err(error) = partition.housekeep(now_ms) {
                tracing::error!(partition = %partition.tp, %error, "retention failed");
            }
        }
    }

    /// The log cleaner's round: cleans each compacted log due for it that no other
    /// cleaner thread holds (`busy`), dirtiest first, once. Blocking: run it on a
    /// thread of its own. `io` paces the cleaner's reads and writes
    /// (`log.cleaner.io.max.bytes.per.second`).
    pub fn run_cleaner(
        &self,
        dedupe_buffer_bytes: u64,
        busy: &Mutex<std::collections::HashSet<TopicPartition>>,
        io: &mut dyn FnMut(u64),
    ) {
        let now_ms = self.clock.now_ms();
        let mut due: Vec<(f64, Arc<Partition>)> = self
            .all()
            .into_iter()
            .filter_map(|p| Some((p.dirty_ratio(now_ms)?, p)))
            .collect();
        due.sort_by(|a, b| b.0.total_cmp(&a.0));
        for (_, partition) in due {
            if !busy
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .insert(partition.tp.clone())
            {
                continue;
            }
            let started = std::time::Instant::now();
            let result = partition.clean(dedupe_buffer_bytes, self.clock.now_ms(), io);
            let elapsed = started.elapsed();
            busy.lock()
                .unwrap_or_else(|p| p.into_inner())
                .remove(&partition.tp);
            match result {
                // As Kafka's cleaner reports each run: what it read, kept and
                // wrote, how fast, and its key map's size.
                Ok(Some(stats)) => tracing::info!(
                    partition = %partition.tp,
                    bytes_read = stats.bytes_read,
                    bytes_written = stats.bytes_written,
                    records_read = stats.records_read,
                    records_kept = stats.records_kept,
                    map_entries = stats.map_entries,
                    elapsed_us = elapsed.as_micros() as u64,
                    "log cleaned"
                ),
                Ok(None) => {}
                Err(error) => {
                    tracing::error!(partition = %partition.tp, %error, "compaction swap failed");
                    return;
                }
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

    /// Writes the recovery point and log start checkpoints of every loaded log (the
    /// files are replaced whole, so the logs kept aside are in them too): the offsets
    /// are copied out under each partition's lock in turn, and the files written with
    /// none held. Blocking: call it off the runtime.
    pub fn checkpoint(&self) -> io::Result<()> {
        let offsets: Vec<CheckpointedOffsets> = self
            .every_log()
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
        self.fetchers.shutdown();
        for partition in self.every_log() {
            partition.flush_now()?;
        }
        self.checkpoint()?;
        let broker_epoch = self
            .images
            .borrow()
            .brokers
            .get(&self.config.node_id)
            .map_or(-1, |broker| broker.epoch.get());
        self.health()
            .guard(|| self.log_dir.mark_clean_shutdown(broker_epoch))
    }
}

/// The log dir under the data dir.
pub fn log_dir_path(config: &Config) -> std::path::PathBuf {
    config.data_dir.join("logs")
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

/// The broker epoch of each live (unfenced) broker in `image`, for the ISR's
/// KIP-903 check.
fn live_broker_epochs(image: &MetadataImage) -> impl Fn(i32) -> Option<BrokerEpoch> + '_ {
    |id| {
        image
            .brokers
            .get(&id)
            .filter(|b| !b.fenced)
            .map(|b| b.epoch)
    }
}

/// What a broker does with a partition log under an image.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Disposition {
    /// The image has the partition, under the log's topic id.
    Serve,
    /// The image neither has the partition under that id nor has deleted the topic:
    /// it lags behind the log, and a later image will do one or the other.
    KeepAside,
    /// The image has applied the topic's deletion, or the dir has no topic id (it was
    /// written before `partition.metadata`, so it holds no records).
    Delete,
}

fn disposition(image: &MetadataImage, tp: &TopicPartition, topic_id: uuid::Uuid) -> Disposition {
    if topic_id.is_nil() || image.deleted_topic_ids.contains(&topic_id) {
        return Disposition::Delete;
    }
    let served = image.topics.get(&tp.topic).is_some_and(|t| {
        t.topic_id == topic_id
            && usize::try_from(tp.partition).is_ok_and(|i| i < t.partitions.len())
    });
    if served {
        Disposition::Serve
    } else {
        Disposition::KeepAside
    }
}

fn warn_kept_aside(image: &MetadataImage, tp: &TopicPartition, topic_id: uuid::Uuid) {
    match image.topics.get(&tp.topic) {
        Some(topic) if topic.topic_id != topic_id => tracing::warn!(
            partition = %tp, %topic_id, image_topic_id = %topic.topic_id,
            "keeping aside, unserved, a log of another incarnation of the topic than the metadata image's, which has not deleted it"
        ),
        _ => tracing::warn!(
            partition = %tp, %topic_id,
            "keeping aside, unserved, a log of a partition the metadata image does not have yet"
        ),
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
