//! The follower side of replication, after Kafka's `ReplicaFetcherManager` and
//! `ReplicaFetcherThread`: one fetcher task per leader broker fetches every
//! partition this broker follows from it, with Kafka's Fetch (the replica id and
//! broker epoch, each partition's current leader epoch, fetch offset and last
//! fetched epoch), appends what comes back as the leader wrote it, truncates where
//! the leader answers DivergingEpoch (before any high watermark of that response
//! is applied: KAFKA-14704), and takes the leader's high watermark and log start
//! offset. The wire is not spoken here: a `LeaderConnector`, which the server
//! builds from the protocol layer, opens the links.
//!
//! Invariants: a partition is fetched by at most one fetcher, the one of the
//! leader its latest image names, and only while its leader epoch is that
//! image's; a response is applied only to the partition at the epoch it was asked
//! for; appends and truncations run on the blocking pool; no lock is held across
//! an `.await`.

use std::collections::{BTreeMap, HashMap};
use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use bytes::Bytes;
use tokio::sync::{watch, Notify};
use tokio::task::JoinHandle;
use tokio::time::Instant;

use super::partition::{EpochEndOffset, Partition, PartitionError};
use crate::controller::MetadataImage;
use crate::error_code;
use crate::limits::{
    REPLICA_CONNECT_TIMEOUT_MS, REPLICA_FETCH_BACKOFF_MS, REPLICA_FETCH_PARTITION_BYTES_MAX,
    REPLICA_FETCH_RESPONSE_BYTES_MAX, REPLICA_FETCH_RETRY_MIN_MS, REPLICA_FETCH_WAIT_MS,
    REPLICA_SOCKET_TIMEOUT_MS,
};
use crate::types::{BrokerEpoch, LeaderEpoch, Offset, TopicPartition};

pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// One partition of a follower's fetch.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FetchPartitionRequest {
    pub topic_id: uuid::Uuid,
    pub partition: i32,
    pub current_leader_epoch: LeaderEpoch,
    pub fetch_offset: Offset,
    /// None when the follower's log has no epoch yet.
    pub last_fetched_epoch: Option<LeaderEpoch>,
    pub log_start_offset: Offset,
    pub max_bytes: i32,
}

/// A follower's fetch (Kafka's Fetch with ReplicaState).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ReplicaFetch {
    pub replica_id: i32,
    pub broker_epoch: BrokerEpoch,
    pub max_wait_ms: i32,
    pub max_bytes: i32,
    pub partitions: Vec<FetchPartitionRequest>,
}

/// One partition of the leader's answer, its offsets as the leader sent them (-1
/// with some errors; OFFSET_OUT_OF_RANGE carries the leader's log end offset as
/// its high watermark).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FetchedPartition {
    pub topic_id: uuid::Uuid,
    pub partition: i32,
    pub error_code: i16,
    pub high_watermark: i64,
    pub log_start_offset: i64,
    pub diverging_epoch: Option<EpochEndOffset>,
    pub records: Bytes,
}

/// A link to one leader: fetches in turn, one at a time.
pub trait LeaderLink: Send {
    fn fetch<'a>(
        &'a mut self,
        request: &'a ReplicaFetch,
    ) -> BoxFuture<'a, io::Result<Vec<FetchedPartition>>>;
}

/// Opens links to leaders (the server's, over the inter-broker listener).
pub trait LeaderConnector: Send + Sync {
    fn connect(
        &self,
        host: String,
        port: u16,
    ) -> BoxFuture<'static, io::Result<Box<dyn LeaderLink>>>;
}

/// What the fetchers need of the broker.
#[derive(Clone)]
pub struct FetcherSettings {
    pub node_id: i32,
    /// The listener of the leader a follower connects to (`--inter-broker-listener`).
    pub listener: String,
}

/// A partition a fetcher follows, at the leader epoch it was told to.
#[derive(Clone)]
struct Followed {
    partition: Arc<Partition>,
    leader_epoch: LeaderEpoch,
    delayed_until: Option<Instant>,
    /// The pause after its last refusal, doubled at each refusal in a row.
    retry_ms: u64,
}

type FollowedSet = Arc<Mutex<BTreeMap<TopicPartition, Followed>>>;

struct Fetcher {
    partitions: FollowedSet,
    wake: Arc<Notify>,
    task: JoinHandle<()>,
}

/// Every fetcher of this broker, by leader id. Owned by the `ReplicaManager`.
pub struct Fetchers {
    settings: FetcherSettings,
    connector: Arc<dyn LeaderConnector>,
    images: watch::Receiver<Arc<MetadataImage>>,
    runtime: tokio::runtime::Handle,
    fetchers: Mutex<HashMap<i32, Fetcher>>,
}

impl Fetchers {
    pub fn new(
        settings: FetcherSettings,
        connector: Arc<dyn LeaderConnector>,
        images: watch::Receiver<Arc<MetadataImage>>,
        runtime: tokio::runtime::Handle,
    ) -> Fetchers {
        Fetchers {
            settings,
            connector,
            images,
            runtime,
            fetchers: Mutex::new(HashMap::new()),
        }
    }

    /// Fetches `partition` from `leader_id` at `leader_epoch` from now on (from its log
    /// end offset), and from no other leader.
    pub fn follow(&self, partition: &Arc<Partition>, leader_id: i32, leader_epoch: LeaderEpoch) {
        let mut fetchers = self.fetchers.lock().unwrap_or_else(PoisonError::into_inner);
        for (id, fetcher) in fetchers.iter() {
            if *id != leader_id {
                lock(&fetcher.partitions).remove(&partition.tp);
            }
        }
        if leader_id < 0 {
            return;
        }
        let fetcher = fetchers
            .entry(leader_id)
            .or_insert_with(|| self.spawn(leader_id));
        if fetcher.task.is_finished() {
            *fetcher = self.spawn(leader_id);
        }
        lock(&fetcher.partitions).insert(
            partition.tp.clone(),
            Followed {
                partition: Arc::clone(partition),
                leader_epoch,
                delayed_until: None,
                retry_ms: 0,
            },
        );
        fetcher.wake.notify_one();
    }

    /// Stops fetching `tp` from anyone (it leads, or is no longer a replica here).
    pub fn unfollow(&self, tp: &TopicPartition) {
        let fetchers = self.fetchers.lock().unwrap_or_else(PoisonError::into_inner);
        for fetcher in fetchers.values() {
            lock(&fetcher.partitions).remove(tp);
        }
    }

    /// Ends every fetcher task.
    pub fn shutdown(&self) {
        let mut fetchers = self.fetchers.lock().unwrap_or_else(PoisonError::into_inner);
        for (_, fetcher) in fetchers.drain() {
            fetcher.task.abort();
        }
    }

    fn spawn(&self, leader_id: i32) -> Fetcher {
        let partitions: FollowedSet = Arc::new(Mutex::new(BTreeMap::new()));
        let wake = Arc::new(Notify::new());
        let task = self.runtime.spawn(run_fetcher(
            leader_id,
            self.settings.clone(),
            Arc::clone(&self.connector),
            self.images.clone(),
            Arc::clone(&partitions),
            Arc::clone(&wake),
        ));
        Fetcher {
            partitions,
            wake,
            task,
        }
    }
}

impl Drop for Fetchers {
    fn drop(&mut self) {
        self.shutdown();
    }
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

/// One leader's fetcher: fetch, apply, repeat, while it has partitions to follow.
async fn run_fetcher(
    leader_id: i32,
    settings: FetcherSettings,
    connector: Arc<dyn LeaderConnector>,
    images: watch::Receiver<Arc<MetadataImage>>,
    partitions: FollowedSet,
    wake: Arc<Notify>,
) {
    let backoff = Duration::from_millis(REPLICA_FETCH_BACKOFF_MS);
    let mut link: Option<Box<dyn LeaderLink>> = None;
    loop {
        let now = Instant::now();
        let due: Vec<(TopicPartition, Followed)> = lock(&partitions)
            .iter()
            .filter(|(_, f)| f.delayed_until.is_none_or(|until| until <= now))
            .map(|(tp, f)| (tp.clone(), f.clone()))
            .collect();
        if due.is_empty() {
            let _ = tokio::time::timeout(backoff, wake.notified()).await;
            continue;
        }
        let image = Arc::clone(&images.borrow());
        if link.is_none() {
            match connect(&*connector, &image, leader_id, &settings.listener).await {
                Ok(opened) => link = Some(opened),
                Err(error) => {
                    tracing::debug!(leader = leader_id, %error, "connecting to the leader failed");
                    tokio::time::sleep(backoff).await;
                    continue;
                }
            }
        }
        let Some(request) = build_request(&settings, &image, &due) else {
            tokio::time::sleep(backoff).await;
            continue;
        };
        let Some(open) = link.as_mut() else { continue };
        let deadline = Duration::from_millis(
            u64::try_from(request.max_wait_ms).unwrap_or(0) + REPLICA_SOCKET_TIMEOUT_MS,
        );
        // A partition added meanwhile (a leader moved here) is not left to wait
        // out this fetch's long poll: the fetch is dropped with its connection
        // (its answer would come on it) and sent again with the partition.
        let fetched = tokio::select! {
            answer = tokio::time::timeout(deadline, open.fetch(&request)) => Some(answer),
            () = newly_followed(&wake, &partitions, &due) => None,
        };
        let Some(fetched) = fetched else {
            link = None;
            continue;
        };
        let answer = match fetched {
            Ok(Ok(answer)) => answer,
            Ok(Err(error)) => {
                tracing::debug!(leader = leader_id, %error, "fetching from the leader failed");
                link = None;
                tokio::time::sleep(backoff).await;
                continue;
            }
            Err(_) => {
                tracing::debug!(leader = leader_id, "fetch from the leader timed out");
                link = None;
                continue;
            }
        };
        let fetched_tps: Vec<TopicPartition> = due.iter().map(|(tp, _)| tp.clone()).collect();
        let due_by_id: Vec<(uuid::Uuid, Followed)> = due
            .into_iter()
            .map(|(_, f)| (f.partition.topic_id, f))
            .collect();
        let applied = tokio::task::spawn_blocking(move || apply(answer, &due_by_id)).await;
        let delayed = applied.unwrap_or_default();
        back_off(&partitions, &fetched_tps, &delayed, Instant::now());
    }
}

/// Resolves once `wake` is notified while a partition is followed that `due`
/// (the fetch in flight) does not hold.
async fn newly_followed(
    wake: &Notify,
    partitions: &FollowedSet,
    due: &[(TopicPartition, Followed)],
) {
    loop {
        wake.notified().await;
        let added = lock(partitions)
            .keys()
            .any(|tp| !due.iter().any(|(fetching, _)| fetching == tp));
        if added {
            return;
        }
    }
}

/// After a fetch of `fetched`: each partition of `delayed` (its leader refused
/// it: an image here or there not caught up yet) waits before it is fetched
/// again, from `REPLICA_FETCH_RETRY_MIN_MS` doubling to
/// `REPLICA_FETCH_BACKOFF_MS`; the others fetch again at once.
fn back_off(
    partitions: &FollowedSet,
    fetched: &[TopicPartition],
    delayed: &[TopicPartition],
    now: Instant,
) {
    let mut followed = lock(partitions);
    for tp in fetched {
        let Some(f) = followed.get_mut(tp) else {
            continue;
        };
        if delayed.contains(tp) {
            f.retry_ms =
                (f.retry_ms * 2).clamp(REPLICA_FETCH_RETRY_MIN_MS, REPLICA_FETCH_BACKOFF_MS);
            f.delayed_until = Some(now + Duration::from_millis(f.retry_ms));
        } else {
            f.retry_ms = 0;
        }
    }
}

async fn connect(
    connector: &dyn LeaderConnector,
    image: &MetadataImage,
    leader_id: i32,
    listener: &str,
) -> io::Result<Box<dyn LeaderLink>> {
    let broker = image
        .brokers
        .get(&leader_id)
        .ok_or_else(|| io::Error::other(format!("broker {leader_id} is not registered")))?;
    let (host, port) = broker.endpoint(listener);
    let port = u16::try_from(port).map_err(io::Error::other)?;
    tokio::time::timeout(
        Duration::from_millis(REPLICA_CONNECT_TIMEOUT_MS),
        connector.connect(host.to_string(), port),
    )
    .await
    .map_err(|_| io::Error::new(io::ErrorKind::TimedOut, "connecting timed out"))?
}

/// The fetch of every due partition, each from its log end offset; None when this
/// broker is not registered (it has no broker epoch to fetch with).
fn build_request(
    settings: &FetcherSettings,
    image: &MetadataImage,
    due: &[(TopicPartition, Followed)],
) -> Option<ReplicaFetch> {
    let broker_epoch = image.brokers.get(&settings.node_id)?.epoch;
    let partitions = due
        .iter()
        .filter_map(|(tp, followed)| {
            let position = followed.partition.fetch_position().ok()?;
            Some(FetchPartitionRequest {
                topic_id: followed.partition.topic_id,
                partition: tp.partition,
                current_leader_epoch: followed.leader_epoch,
                fetch_offset: position.fetch_offset,
                last_fetched_epoch: position.last_fetched_epoch,
                log_start_offset: position.log_start_offset,
                max_bytes: REPLICA_FETCH_PARTITION_BYTES_MAX,
            })
        })
        .collect();
    Some(ReplicaFetch {
        replica_id: settings.node_id,
        broker_epoch,
        max_wait_ms: REPLICA_FETCH_WAIT_MS,
        max_bytes: REPLICA_FETCH_RESPONSE_BYTES_MAX,
        partitions,
    })
}

/// Applies a leader's answer to the partitions asked for; returns the partitions to
/// back off from. Blocking.
fn apply(answer: Vec<FetchedPartition>, due: &[(uuid::Uuid, Followed)]) -> Vec<TopicPartition> {
    let mut delayed = Vec::new();
    for fetched in answer {
        let Some((_, followed)) = due.iter().find(|(id, f)| {
            *id == fetched.topic_id && f.partition.tp.partition == fetched.partition
        }) else {
            continue;
        };
        let partition = &followed.partition;
        // Fetched at an epoch the partition has left: a newer image moved it.
        if partition.leader_epoch() != followed.leader_epoch {
            continue;
        }
        if let Err(error) = apply_partition(partition, &fetched) {
            tracing::debug!(partition = %partition.tp, %error, code = fetched.error_code, "backing off a partition");
            delayed.push(partition.tp.clone());
        }
    }
    delayed
}

fn apply_partition(
    partition: &Partition,
    fetched: &FetchedPartition,
) -> Result<(), PartitionError> {
    match fetched.error_code {
        error_code::NONE => {
            if let Some(diverging) = fetched.diverging_epoch {
                // Truncate, and take no high watermark from this response.
                let target = partition.truncation_offset(diverging)?;
                return partition.truncate_to(target);
            }
            partition.append_as_follower(
                &fetched.records,
                fetched.high_watermark,
                fetched.log_start_offset,
            )
        }
        error_code::OFFSET_OUT_OF_RANGE => {
            // Kafka's handleOutOfRangeError: the leader's log start moved past this
            // log's end (retention, DeleteRecords), or its log ends before this one's
            // (only after an unclean election). The leader answers with its log start
            // offset and, for a follower, its log end offset in place of the high
            // watermark.
            let fetch_offset = partition.fetch_position()?.fetch_offset.get();
            if fetch_offset < fetched.log_start_offset {
                partition.truncate_fully_and_restart_at(fetched.log_start_offset)
            } else if fetched.high_watermark >= 0 && fetch_offset > fetched.high_watermark {
                partition.truncate_to(fetched.high_watermark)
            } else {
                Err(PartitionError::Log(
                    crate::log::LogError::OffsetOutOfRange {
                        log_start_offset: fetched.log_start_offset,
                        log_end_offset: fetched.high_watermark,
                    },
                ))
            }
        }
        // NOT_LEADER_OR_FOLLOWER, FENCED_LEADER_EPOCH, UNKNOWN_LEADER_EPOCH, unknown
        // topics and the rest: the image is about to move the partition.
        _ => Err(PartitionError::NotLeaderOrFollower),
    }
}
