//! The coordinator task with real stores, the group coordinator completing
//! pending offsets, a recording marker writer and a manual clock: markers written once per partition, recovery after a stop in
//! PrepareCommit, and the abort of a transaction past its timeout.

use std::collections::HashSet;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use super::markers::offsets_partition;
use super::*;
use crate::clock::ManualClock;
use crate::coordinator::group::{GroupConfig, GroupDeps, GroupService, GroupServiceConfig};
use crate::coordinator::ownership::{Leadership, LedInLatestImage};
use crate::error_code;
use crate::internal_topics::OFFSETS_TOPIC_NAME;
use crate::log::TxnMarker;
use crate::random::SeededIds;
use crate::store::{CommittedOffset, OffsetStore, SledOffsetStore, SledTxnStore, TxnOffsetStore};
use crate::types::{ProducerEpoch, TopicPartition};

const T0: i64 = 1_000_000;
const TIMEOUT_MS: i32 = 60_000;

/// Every marker written, as partitions would take them: a partition whose
/// transaction a marker already ended gets no second one.
#[derive(Default)]
struct RecordingWriter {
    written: Mutex<Vec<(TopicPartition, i64, i16, bool)>>,
    /// (partition, producer id) whose transaction a marker ended.
    ended: Mutex<HashSet<(TopicPartition, i64)>>,
    /// How many markers had been written when the last end resolved durable.
    durable_through: Mutex<usize>,
    /// Set, an end fails after its marker is written, as a failed fsync would.
    fail_durable: std::sync::atomic::AtomicBool,
    /// Set, the partitions are led by other brokers.
    remote: std::sync::atomic::AtomicBool,
    /// The coordinator epoch of every marker written.
    coordinator_epochs: Mutex<Vec<i32>>,
}

impl RecordingWriter {
    fn end_now(&self, tp: &TopicPartition, marker: TxnMarker) -> Result<(), i16> {
        let newly_ended = self
            .ended
            .lock()
            .expect("lock")
            .insert((tp.clone(), marker.producer_id));
        if newly_ended {
            self.coordinator_epochs
                .lock()
                .expect("lock")
                .push(marker.coordinator_epoch);
            self.written.lock().expect("lock").push((
                tp.clone(),
                marker.producer_id,
                marker.producer_epoch.get(),
                marker.commit,
            ));
        }
        if self.fail_durable.load(Ordering::SeqCst) {
            return Err(error_code::KAFKA_STORAGE_ERROR);
        }
        *self.durable_through.lock().expect("lock") = self.written.lock().expect("lock").len();
        Ok(())
    }
}

impl TxnMarkerWriter for RecordingWriter {
    fn end_txn(&self, tp: &TopicPartition, marker: TxnMarker) -> MarkerFuture {
        let outcome = self.end_now(tp, marker);
        Box::pin(async move { outcome })
    }

    fn leads_all(&self, _: &[TopicPartition]) -> bool {
        !self.remote.load(Ordering::SeqCst)
    }
}

/// Blocks of ten ids, in order, as the controller hands them out.
#[derive(Default)]
struct Blocks {
    next: AtomicI64,
}

impl ProducerIdBlockSource for Blocks {
    fn allocate(
        &self,
        count: i64,
    ) -> Pin<Box<dyn Future<Output = Result<ProducerIdBlock, ProducerIdBlockError>> + Send + 'static>>
    {
        let first = self.next.fetch_add(count, Ordering::SeqCst);
        Box::pin(async move { Ok(ProducerIdBlock { first, count }) })
    }
}

struct Harness {
    ownership: crate::coordinator::ownership::Ownership,
    dir: tempfile::TempDir,
    clock: ManualClock,
    writer: Arc<RecordingWriter>,
    blocks: Arc<Blocks>,
}

struct Running {
    service: TxnService,
    store: Arc<SledTxnStore>,
    /// The group coordinator, which owns `offsets` on a broker; tests read and
    /// stage through the store directly.
    groups: GroupService,
    offsets: Arc<SledOffsetStore>,
}

impl Harness {
    fn new() -> Harness {
        Harness {
            ownership: crate::coordinator::ownership::Ownership::Every,
            dir: tempfile::tempdir().expect("temp dir"),
            clock: ManualClock::new(T0),
            writer: Arc::new(RecordingWriter::default()),
            blocks: Arc::new(Blocks::default()),
        }
    }

    async fn start(&self) -> Running {
        let store = Arc::new(SledTxnStore::open(&self.dir.path().join("txn")).expect("txn store"));
        let offsets =
            Arc::new(SledOffsetStore::open(&self.dir.path().join("offsets")).expect("offsets"));
        let config = TxnServiceConfig {
            coordinator: TxnConfig::default(),
            producer_id_block_size: 10,
            abort_check_interval_ms: 10,
            ownership: self.ownership,
            expiration_check_interval_ms: 3_600_000,
        };
        let groups = GroupService::start(
            GroupServiceConfig::new(GroupConfig::default(), 86_400_000),
            GroupDeps {
                offsets: Arc::clone(&offsets) as _,
                pending: Arc::clone(&offsets) as _,
                clock: Arc::new(self.clock.clone()),
                ids: Arc::new(SeededIds::new(1)),
                led_in_latest_image: LedInLatestImage::never(),
            },
        )
        .await
        .expect("group service starts");
        let deps = TxnDeps {
            store: Arc::clone(&store) as _,
            offsets: Arc::new(groups.clone()),
            markers: Arc::clone(&self.writer) as _,
            blocks: Arc::clone(&self.blocks) as _,
            clock: Arc::new(self.clock.clone()),
            led_in_latest_image: LedInLatestImage::never(),
        };
        let service = TxnService::start(config, deps)
            .await
            .expect("service starts");
        Running {
            service,
            store,
            groups,
            offsets,
        }
    }

    fn written(&self) -> Vec<(TopicPartition, i64, i16, bool)> {
        self.writer.written.lock().expect("lock").clone()
    }
}

impl Running {
    async fn stop(self) {
        self.service.shutdown().await;
        self.groups.shutdown().await.expect("group service stops");
        let Running { store, offsets, .. } = self;
        if let Ok(store) = Arc::try_unwrap(store) {
            store.close().await.expect("close");
        }
        if let Ok(offsets) = Arc::try_unwrap(offsets) {
            offsets.close().await.expect("close");
        }
    }

    /// A producer id and epoch for "tx", whose transaction then holds `partitions`.
    async fn begin_txn(&self, partitions: Vec<TopicPartition>) -> (i64, i16) {
        let init = self
            .service
            .init_producer_id(Some("tx".into()), TIMEOUT_MS, None)
            .await;
        let (pid, epoch) = (init.producer_id, init.producer_epoch);
        assert_eq!(
            self.service
                .add_partitions("tx".into(), pid, epoch, partitions)
                .await,
            error_code::NONE
        );
        (pid, epoch)
    }

    async fn wait_for_state(&self, id: &str, state: TxnState) -> TxnMetadata {
        for _ in 0..500 {
            if let Ok(metadata) = self.service.describe(id.to_string()).await {
                if metadata.state == state {
                    return metadata;
                }
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        panic!("{id} never reached {state}");
    }
}

fn tp(topic: &str, partition: i32) -> TopicPartition {
    TopicPartition::new(topic, partition)
}

#[tokio::test]
async fn a_commit_writes_each_marker_once_and_commits_the_offsets() {
    let harness = Harness::new();
    let running = harness.start().await;
    let service = &running.service;
    let idempotent = service.init_producer_id(None, TIMEOUT_MS, None).await;
    assert_eq!(
        (idempotent.error, idempotent.producer_epoch),
        (error_code::NONE, 0)
    );
    let init = service
        .init_producer_id(Some("tx".into()), TIMEOUT_MS, None)
        .await;
    assert_eq!(init.error, error_code::NONE);
    assert_ne!(init.producer_id, idempotent.producer_id);
    let (pid, epoch) = (init.producer_id, init.producer_epoch);
    let partitions = vec![tp("t", 0), tp("t", 1)];
    assert_eq!(
        service
            .add_partitions("tx".into(), pid, epoch, partitions)
            .await,
        error_code::NONE
    );
    assert_eq!(
        service.add_offsets("tx".into(), pid, epoch, "g").await,
        error_code::NONE
    );
    let guard = service
        .begin_offset_write("tx".into(), pid, epoch, "g".into())
        .await
        .expect("admitted");
    let offset = CommittedOffset {
        offset: 5,
        leader_epoch: -1,
        metadata: String::new(),
        commit_timestamp_ms: T0,
    };
    running
        .offsets
        .stage("g", pid, 0, vec![("t".into(), 0, offset.clone())])
        .await
        .expect("staged");
    drop(guard);
    assert_eq!(
        service.end_txn("tx".into(), pid, epoch, true).await,
        error_code::NONE
    );
    running.wait_for_state("tx", TxnState::CompleteCommit).await;
    assert_eq!(
        harness.written(),
        vec![
            (tp("t", 0), pid, epoch, true),
            (tp("t", 1), pid, epoch, true)
        ]
    );
    assert_eq!(
        *harness.writer.durable_through.lock().expect("lock"),
        2,
        "Complete stored before both markers were made durable"
    );
    assert_eq!(
        running.offsets.fetch("g", "t", 0).expect("read"),
        Some(offset)
    );
    assert_eq!(offsets_partition("g").topic, OFFSETS_TOPIC_NAME);
    running.stop().await;

    // Nothing is written again after a restart: the transaction is complete.
    let running = harness.start().await;
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert_eq!(harness.written().len(), 2);
    running.stop().await;
}

/// Markers before Complete: while the markers cannot be made durable, the transaction
/// stays PrepareCommit in the store, so a power cut cannot leave it Complete with a
/// marker lost.
#[tokio::test]
async fn a_commit_is_not_stored_complete_until_its_markers_are_durable() {
    let harness = Harness::new();
    harness.writer.fail_durable.store(true, Ordering::SeqCst);
    let running = harness.start().await;
    let (pid, epoch) = running.begin_txn(vec![tp("t", 0)]).await;
    let service = running.service.clone();
    let ending = tokio::spawn(async move { service.end_txn("tx".into(), pid, epoch, true).await });
    running.wait_for_state("tx", TxnState::PrepareCommit).await;
    // Several marker retries pass meanwhile; none may complete it.
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(
        !harness.written().is_empty(),
        "the marker was never attempted"
    );
    let stored = record::load_all(&*running.store).expect("load");
    assert_eq!(stored[0].state, TxnState::PrepareCommit);
    assert!(
        !ending.is_finished(),
        "EndTxn answered before its markers were durable"
    );
    harness.writer.fail_durable.store(false, Ordering::SeqCst);
    assert_eq!(ending.await.expect("join"), error_code::NONE);
    running.wait_for_state("tx", TxnState::CompleteCommit).await;
    running.stop().await;
}

/// Markers to other brokers: EndTxn is answered at PrepareCommit, as Kafka
/// answers it; the markers complete in the background, and a call racing them
/// meets CONCURRENT_TRANSACTIONS.
#[tokio::test]
async fn end_txn_is_answered_at_prepare_when_markers_go_to_other_brokers() {
    let harness = Harness::new();
    harness.writer.remote.store(true, Ordering::SeqCst);
    harness.writer.fail_durable.store(true, Ordering::SeqCst);
    let running = harness.start().await;
    let (pid, epoch) = running.begin_txn(vec![tp("t", 0)]).await;
    assert_eq!(
        running.service.end_txn("tx".into(), pid, epoch, true).await,
        error_code::NONE
    );
    let stored = record::load_all(&*running.store).expect("load");
    assert_eq!(stored[0].state, TxnState::PrepareCommit);
    assert_eq!(
        running
            .service
            .add_partitions("tx".into(), pid, epoch, vec![tp("t", 1)])
            .await,
        error_code::CONCURRENT_TRANSACTIONS
    );
    harness.writer.fail_durable.store(false, Ordering::SeqCst);
    running.wait_for_state("tx", TxnState::CompleteCommit).await;
    // (Retried while durability failed; a leader skips a closed transaction.)
    assert!(harness
        .written()
        .iter()
        .all(|w| *w == (tp("t", 0), pid, epoch, true)));
    running.stop().await;
}

#[tokio::test]
async fn recovery_completes_a_prepared_commit_writing_only_missing_markers() {
    let harness = Harness::new();
    // A broker stopped after storing PrepareCommit and writing one of two markers.
    let store = SledTxnStore::open(&harness.dir.path().join("txn")).expect("store");
    let mut prepared = TxnMetadata::new("tx", 3, TIMEOUT_MS, T0);
    prepared.producer_epoch = ProducerEpoch::new(4);
    prepared.state = TxnState::PrepareCommit;
    prepared.start_timestamp_ms = T0;
    prepared.partitions.extend([tp("t", 0), tp("t", 1)]);
    record::save(&store, &prepared).await.expect("saved");
    store.close().await.expect("closed");
    // The marker of t-0 was written before the stop.
    harness
        .writer
        .ended
        .lock()
        .expect("lock")
        .insert((tp("t", 0), 3));

    let running = harness.start().await;
    running.wait_for_state("tx", TxnState::CompleteCommit).await;
    assert_eq!(harness.written(), vec![(tp("t", 1), 3, 4, true)]);
    running.stop().await;
    let store = SledTxnStore::open(&harness.dir.path().join("txn")).expect("store");
    let loaded = record::load_all(&store).expect("load");
    assert_eq!(loaded[0].state, TxnState::CompleteCommit);
    assert!(loaded[0].partitions.is_empty());
    store.close().await.expect("closed");
}

#[tokio::test]
async fn a_transaction_past_its_timeout_is_aborted_and_its_producer_fenced() {
    let harness = Harness::new();
    let running = harness.start().await;
    let (pid, epoch) = running.begin_txn(vec![tp("t", 0)]).await;
    let service = &running.service;
    harness.clock.advance_ms(i64::from(TIMEOUT_MS) + 1);
    let aborted = running.wait_for_state("tx", TxnState::CompleteAbort).await;
    assert_eq!(aborted.producer_epoch, ProducerEpoch::new(epoch + 1));
    assert_eq!(harness.written(), vec![(tp("t", 0), pid, epoch + 1, false)]);
    assert_eq!(
        service.end_txn("tx".into(), pid, epoch, true).await,
        error_code::PRODUCER_FENCED
    );
    // The producer's next instance continues after the fence.
    let next = service
        .init_producer_id(Some("tx".into()), TIMEOUT_MS, None)
        .await;
    assert_eq!(
        (next.error, next.producer_id, next.producer_epoch),
        (error_code::NONE, pid, epoch + 2)
    );
    running.stop().await;
}

#[tokio::test]
async fn producer_ids_come_from_successive_blocks() {
    let harness = Harness::new();
    let running = harness.start().await;
    let mut seen = HashSet::new();
    for _ in 0..35 {
        let mut result = running
            .service
            .init_producer_id(None, TIMEOUT_MS, None)
            .await;
        // A block fetch may be in flight; the client retries, as here.
        while result.error == error_code::COORDINATOR_LOAD_IN_PROGRESS {
            tokio::time::sleep(Duration::from_millis(5)).await;
            result = running
                .service
                .init_producer_id(None, TIMEOUT_MS, None)
                .await;
        }
        assert_eq!(result.error, error_code::NONE);
        assert!(
            seen.insert(result.producer_id),
            "{} twice",
            result.producer_id
        );
    }
    assert!(harness.blocks.next.load(Ordering::SeqCst) >= 40);
    running.stop().await;
}

/// A partition that refuses every marker with one error.
struct RefusingWriter(i16);

impl TxnMarkerWriter for RefusingWriter {
    fn end_txn(&self, _: &TopicPartition, _: TxnMarker) -> MarkerFuture {
        let code = self.0;
        Box::pin(async move { Err(code) })
    }
}

#[tokio::test]
async fn stale_and_vanished_partitions_count_as_done_and_others_are_retried() {
    let job = MarkerJob {
        transactional_id: "tx".into(),
        producer_id: 1,
        producer_epoch: ProducerEpoch::new(0),
        commit: true,
        partitions: vec![tp("t", 0)],
        recovery: false,
        coordinator_epoch: COORDINATOR_EPOCH,
        job_id: 1,
    };
    let attempt = |code: i16| {
        let job = &job;
        async move { super::markers::write_markers(job, &job.partitions, &RefusingWriter(code)).await }
    };
    for done in [
        error_code::INVALID_PRODUCER_EPOCH,
        error_code::TRANSACTION_COORDINATOR_FENCED,
        error_code::UNKNOWN_TOPIC_OR_PARTITION,
    ] {
        assert!(attempt(done).await.is_empty(), "{done}");
    }
    for retried in [
        error_code::KAFKA_STORAGE_ERROR,
        error_code::COORDINATOR_NOT_AVAILABLE,
        error_code::NOT_ENOUGH_REPLICAS,
        error_code::NOT_LEADER_OR_FOLLOWER,
        error_code::REQUEST_TIMED_OUT,
    ] {
        assert_eq!(attempt(retried).await, job.partitions, "{retried}");
    }
}

/// Elects the service for `partition` in `leader_epoch`, after another
/// leader, and waits until the partition's transactions are served.
async fn elect_and_serve(service: &TxnService, partition: i32, leader_epoch: i32) {
    let elected = Leadership::Elected {
        partition,
        leader_epoch,
        continued: false,
    };
    service.follow(elected).await.expect("running");
    assert!(
        service
            .wait_served(partition, Duration::from_secs(10))
            .await
    );
}

/// An elected coordinator serves only the transactional ids of the partitions
/// it leads (NOT_COORDINATOR for the others, and for its own once resigned),
/// marks with the partition's leader epoch as its coordinator epoch, and finds
/// what it stored when elected again.
#[tokio::test]
async fn an_elected_coordinator_serves_its_partitions_and_marks_with_their_leader_epoch() {
    let harness = Harness {
        ownership: crate::coordinator::ownership::Ownership::Elected,
        ..Harness::new()
    };
    let running = harness.start().await;
    let service = &running.service;
    let partition = crate::internal_topics::txn_partition("tx");
    let refused = service
        .init_producer_id(Some("tx".into()), TIMEOUT_MS, None)
        .await;
    assert_eq!(refused.error, error_code::NOT_COORDINATOR);
    let idempotent = service.init_producer_id(None, TIMEOUT_MS, None).await;
    assert_eq!(
        idempotent.error,
        error_code::NONE,
        "idempotent producers go anywhere"
    );

    elect_and_serve(service, partition, 7).await;
    let (pid, epoch) = running.begin_txn(vec![tp("t", 0)]).await;
    assert_eq!(
        service.end_txn("tx".into(), pid, epoch, true).await,
        error_code::NONE
    );
    running.wait_for_state("tx", TxnState::CompleteCommit).await;
    assert_eq!(
        *harness.writer.coordinator_epochs.lock().expect("lock"),
        vec![7],
        "the marker carries the partition's leader epoch"
    );

    let resigned = Leadership::Resigned { partition };
    service.follow(resigned).await.expect("running");
    assert_eq!(
        service.describe("tx".into()).await.map(|m| m.state),
        Err(error_code::NOT_COORDINATOR)
    );
    elect_and_serve(service, partition, 9).await;
    let loaded = service.describe("tx".into()).await.expect("loaded again");
    assert_eq!(
        (loaded.state, loaded.producer_id),
        (TxnState::CompleteCommit, pid)
    );
    running.stop().await;
}
