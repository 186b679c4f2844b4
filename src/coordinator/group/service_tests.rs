//! The service with real sled stores in a temp dir, a manual clock and seeded
//! member ids: joins and syncs through the task, and the offset APIs checked
//! and stored in one step per group. A gate in front of the store holds one
//! group's commit or deletion in flight, so that races are played out in a
//! chosen order instead of hoped for. A gate in front of a partition's load
//! holds an election's load between its read of the offsets log and its
//! rewrite of the cache, as `OffsetsTopic::load_partition` does them.

use std::io;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

use bytes::Bytes;

use super::tests::{assignment_for, config, join_request, sync_request, DELAY_MS, T0};
use super::*;
use crate::clock::ManualClock;
use crate::coordinator::actor::Stopped;
use crate::coordinator::ownership::{Leadership, LedInLatestImage};
use crate::error_code::*;
use crate::internal_topics::group_partition;
use crate::random::SeededIds;
use crate::store::{
    CommitFuture, CommittedOffset, GroupRecord, OffsetStore, PendingOffsets, SledOffsetStore,
    StoredGroup, TxnOffsetStore,
};

/// Holds back the store calls it guards until the test opens it.
struct Gate {
    open: Mutex<bool>,
    opened: Condvar,
    /// One permit per call that reached the gate.
    entered: tokio::sync::Semaphore,
}

impl Gate {
    fn closed() -> Arc<Gate> {
        Arc::new(Gate {
            open: Mutex::new(false),
            opened: Condvar::new(),
            entered: tokio::sync::Semaphore::new(0),
        })
    }

    /// Blocks the calling (blocking-pool) thread until the gate opens.
    fn pass(&self) {
        self.entered.add_permits(1);
        let mut open = self.open.lock().expect("gate lock");
        while !*open {
            open = self.opened.wait(open).expect("gate lock");
        }
    }

    fn open(&self) {
        *self.open.lock().expect("gate lock") = true;
        self.opened.notify_all();
    }

    /// Waits until a call has reached the gate.
    async fn entered(&self) {
        let permit = tokio::time::timeout(Duration::from_secs(10), self.entered.acquire()).await;
        permit
            .expect("a store call reached the gate")
            .expect("gate semaphore open")
            .forget();
    }
}

type GroupGate = Mutex<Option<(String, Arc<Gate>)>>;

/// What a load read from an offsets partition's log: the partition's groups and
/// the offsets of the transactions still open in it.
struct LoggedPartition {
    partition: i32,
    groups: Vec<StoredGroup>,
    pending: Vec<PendingOffsets>,
}

/// A gate in front of one partition's next load, with what its log read found.
type LoadGate = Mutex<Option<(LoggedPartition, Arc<Gate>)>>;

/// The sled store, with a gate a test may put in front of one group's commits
/// and one in front of its deletion.
struct GatedStore {
    inner: Arc<SledOffsetStore>,
    commits: GroupGate,
    deletions: GroupGate,
    saves: GroupGate,
    loads: LoadGate,
    /// Group records fail to store while set.
    saves_fail: AtomicBool,
}

fn gate_for(gate: &GroupGate, group_id: &str) -> Option<Arc<Gate>> {
    let gate = gate.lock().expect("gate lock");
    gate.as_ref()
        .filter(|(gated, _)| gated == group_id)
        .map(|(_, gate)| Arc::clone(gate))
}

impl OffsetStore for GatedStore {
    fn commit(&self, group_id: &str, offsets: Vec<(String, i32, CommittedOffset)>) -> CommitFuture {
        // The inner commit is queued only when first polled, after the gate.
        let commit = self.inner.commit(group_id, offsets);
        let Some(gate) = gate_for(&self.commits, group_id) else {
            return commit;
        };
        Box::pin(async move {
            tokio::task::spawn_blocking(move || gate.pass())
                .await
                .map_err(io::Error::other)?;
            commit.await
        })
    }

    fn fetch(
        &self,
        group_id: &str,
        topic: &str,
        partition: i32,
    ) -> io::Result<Option<CommittedOffset>> {
        self.inner.fetch(group_id, topic, partition)
    }

    fn fetch_group(&self, group_id: &str) -> io::Result<Vec<(String, i32, CommittedOffset)>> {
        self.inner.fetch_group(group_id)
    }

    fn delete_offsets(&self, group_id: &str, partitions: &[(String, i32)]) -> io::Result<()> {
        self.inner.delete_offsets(group_id, partitions)
    }

    fn delete_group(&self, group_id: &str) -> io::Result<()> {
        if let Some(gate) = gate_for(&self.deletions, group_id) {
            gate.pass();
        }
        self.inner.delete_group(group_id)
    }

    fn save_group(&self, group_id: &str, record: &GroupRecord) -> io::Result<()> {
        if let Some(gate) = gate_for(&self.saves, group_id) {
            gate.pass();
        }
        if self.saves_fail.load(Ordering::Acquire) {
            return Err(io::Error::other("the group's record could not be stored"));
        }
        self.inner.save_group(group_id, record)
    }

    fn load_groups(&self) -> io::Result<Vec<(String, GroupRecord)>> {
        self.inner.load_groups()
    }

    fn groups_with_offsets(&self) -> io::Result<Vec<String>> {
        self.inner.groups_with_offsets()
    }

    /// A gated load has read the log already (what `loads` holds); at the gate
    /// it waits to write what it read into the cache, as `OffsetsTopic` does:
    /// the partition's groups and its pending offsets replaced.
    fn load_partition(&self, partition: i32, _leader_epoch: i32) -> io::Result<()> {
        let gated = {
            let mut loads = self.loads.lock().expect("gate lock");
            match loads.take() {
                Some((logged, gate)) if logged.partition == partition => Some((logged, gate)),
                other => {
                    *loads = other;
                    None
                }
            }
        };
        let Some((logged, gate)) = gated else {
            return Ok(());
        };
        gate.pass();
        self.inner.replace_groups(logged.groups)?;
        let placed = |group_id: &str| group_partition(group_id) == partition;
        self.inner.replace_pending(&placed, logged.pending)
    }

    fn expire_group(&self, group_id: &str, cutoff_ms: i64) -> io::Result<usize> {
        self.inner.expire_group(group_id, cutoff_ms)
    }
}

const SEED: u64 = 0x5eed_0ff5;

struct Harness {
    dir: tempfile::TempDir,
    clock: ManualClock,
}

struct Running {
    service: GroupService,
    store: Arc<GatedStore>,
    sled: Arc<SledOffsetStore>,
}

impl Harness {
    fn new() -> Harness {
        Harness {
            dir: tempfile::tempdir().expect("temp dir"),
            clock: ManualClock::new(T0),
        }
    }

    async fn start(&self) -> Running {
        self.start_with(GroupServiceConfig::new(config(DELAY_MS), 86_400_000))
            .await
    }

    async fn start_with(&self, config: GroupServiceConfig) -> Running {
        let sled = SledOffsetStore::open(&self.dir.path().join("offsets")).expect("offsets store");
        let sled = Arc::new(sled);
        let store = Arc::new(GatedStore {
            inner: Arc::clone(&sled),
            commits: Mutex::new(None),
            deletions: Mutex::new(None),
            saves: Mutex::new(None),
            loads: Mutex::new(None),
            saves_fail: AtomicBool::new(false),
        });
        let deps = GroupDeps {
            offsets: Arc::clone(&store) as _,
            pending: Arc::clone(&sled) as _,
            clock: Arc::new(self.clock.clone()),
            ids: Arc::new(SeededIds::new(SEED)),
            led_in_latest_image: LedInLatestImage::never(),
        };
        let service = GroupService::start(config, deps)
            .await
            .expect("service starts");
        Running {
            service,
            store,
            sled,
        }
    }
}

impl Running {
    /// Closes a gate in front of the group's commits.
    fn gate_commits(&self, group_id: &str) -> Arc<Gate> {
        let gate = Gate::closed();
        *self.store.commits.lock().expect("gate lock") =
            Some((group_id.to_string(), Arc::clone(&gate)));
        gate
    }

    /// Closes a gate in front of the group's deletion.
    fn gate_deletion(&self, group_id: &str) -> Arc<Gate> {
        let gate = Gate::closed();
        *self.store.deletions.lock().expect("gate lock") =
            Some((group_id.to_string(), Arc::clone(&gate)));
        gate
    }

    /// Closes a gate in front of the storing of the group's record.
    fn gate_saves(&self, group_id: &str) -> Arc<Gate> {
        let gate = Gate::closed();
        *self.store.saves.lock().expect("gate lock") =
            Some((group_id.to_string(), Arc::clone(&gate)));
        gate
    }

    /// Closes a gate in front of the next load of `logged.partition`, which
    /// finds what `logged` holds in the log.
    fn gate_load(&self, logged: LoggedPartition) -> Arc<Gate> {
        let gate = Gate::closed();
        *self.store.loads.lock().expect("gate lock") = Some((logged, Arc::clone(&gate)));
        gate
    }

    /// Returns once the task has taken every command sent before this call:
    /// List names no group, so it is answered at once, in channel order.
    async fn settle(&self) {
        self.service
            .list(Vec::new())
            .await
            .expect("service running");
    }

    /// The sync of `joined`, alone in group "g", while group records fail to
    /// store: answered with the store's error, and no assignment handed out.
    async fn sync_unstored(&self, joined: &JoinResponse) {
        self.store.saves_fail.store(true, Ordering::Release);
        let refused = self
            .service
            .sync(sync_request(joined, own_assignment(joined), 0))
            .await
            .expect("service running");
        assert_ne!(
            refused.error, NONE,
            "no assignment before the generation is stored"
        );
        assert!(refused.assignment.is_empty());
    }

    /// The sync of `joined`, alone in group "g", once group records store
    /// again: its assignment handed out, and generation 1 stored with it.
    async fn sync_stored(&self, joined: &JoinResponse) {
        self.store.saves_fail.store(false, Ordering::Release);
        let synced = self
            .service
            .sync(sync_request(joined, own_assignment(joined), 0))
            .await
            .expect("service running");
        assert_eq!(
            (synced.error, synced.assignment),
            (NONE, assignment_for(joined))
        );
        assert_eq!(
            stored_generations(&self.sled),
            vec![("g".to_string(), 1, own_assignment(joined))]
        );
    }

    /// The transaction coordinator commits `producer_id`'s offsets on
    /// `partition`, in a task of its own; returns once the service has taken
    /// the completion (and work wrongly let run beside a load has run).
    async fn spawn_commit_completion(
        &self,
        producer_id: i64,
        partition: i32,
    ) -> tokio::task::JoinHandle<io::Result<()>> {
        let service = self.service.clone();
        let completing = tokio::spawn(async move {
            service
                .complete_txn_offsets(producer_id, vec![partition], true)
                .await
        });
        self.settle().await;
        let_wrong_work_finish().await;
        self.settle().await;
        completing
    }

    async fn stop(self) {
        self.service.shutdown().await.expect("shutdown");
        let Running { store, sled, .. } = self;
        drop(store);
        let sled = Arc::try_unwrap(sled).unwrap_or_else(|_| panic!("store still shared"));
        sled.close().await.expect("close");
    }
}

fn offset(value: i64) -> CommittedOffset {
    CommittedOffset {
        offset: value,
        leader_epoch: -1,
        metadata: String::new(),
        commit_timestamp_ms: T0,
    }
}

/// A simple commit (no member, generation -1), as a consumer using `assign()` makes.
fn simple_commit(group_id: &str, value: i64) -> OffsetCommit {
    OffsetCommit {
        group_id: group_id.to_string(),
        member_id: String::new(),
        group_instance_id: None,
        generation_id: -1,
        offsets: vec![("t".to_string(), 0, offset(value))],
    }
}

async fn committed(service: &GroupService, group_id: &str) -> Vec<(String, i32, i64)> {
    let fetched = service
        .fetch_offsets(group_id.to_string(), false)
        .await
        .expect("service running")
        .expect("read");
    fetched
        .committed
        .into_iter()
        .map(|(topic, partition, c)| (topic, partition, c.offset))
        .collect()
}

/// Polls `future` once: Some(output) if it is already done. Sending a command
/// happens in that first poll when the channel has room, so the command is
/// queued once this returns.
async fn poll_once<F: std::future::Future + Unpin>(future: &mut F) -> Option<F::Output> {
    tokio::select! {
        biased;
        output = future => Some(output),
        () = std::future::ready(()) => None,
    }
}

/// Time enough for store work that was wrongly let run beside its group's
/// store operation to finish (an fsync takes milliseconds), so that the check
/// after it sees such work rather than racing it. Waiting never makes a correct
/// run fail.
async fn let_wrong_work_finish() {
    tokio::time::sleep(Duration::from_millis(200)).await;
}

#[tokio::test]
async fn a_commit_in_flight_when_a_delete_arrives_is_deleted_with_the_group() {
    let harness = Harness::new();
    let running = harness.start().await;
    let service = &running.service;
    let gate = running.gate_commits("g");
    let mut commit = Box::pin(service.commit_offsets(simple_commit("g", 5)));
    assert_eq!(poll_once(&mut commit).await, None);
    // The commit was admitted and is waiting in the store for its fsync.
    gate.entered().await;
    let mut delete = Box::pin(service.delete("g".into()));
    assert_eq!(poll_once(&mut delete).await, None);
    running.settle().await;
    let_wrong_work_finish().await;
    assert_eq!(
        poll_once(&mut delete).await,
        None,
        "a deletion ran while a commit of its group was in flight"
    );

    gate.open();
    assert_eq!(commit.await, Ok(CommitOutcome::Admitted(NONE)));
    assert_eq!(delete.await, Ok(NONE));
    // Consistent: the group is gone, and so is every offset it had.
    assert!(committed(service, "g").await.is_empty());
    assert_eq!(running.sled.fetch("g", "t", 0).expect("read"), None);
    assert_eq!(
        service.describe("g".into()).await.map(|d| d.state),
        Ok("Dead".to_string())
    );
    running.stop().await;
}

#[tokio::test]
async fn a_commit_arriving_during_a_delete_meets_the_deleted_group_and_survives() {
    let harness = Harness::new();
    let running = harness.start().await;
    let service = &running.service;
    assert_eq!(
        service.commit_offsets(simple_commit("g", 5)).await,
        Ok(CommitOutcome::Admitted(NONE))
    );
    let gate = running.gate_deletion("g");
    let mut delete = Box::pin(service.delete("g".into()));
    assert_eq!(poll_once(&mut delete).await, None);
    // The group left the coordinator; its offsets are being deleted.
    gate.entered().await;
    let member_commit = OffsetCommit {
        member_id: "m".to_string(),
        generation_id: 0,
        ..simple_commit("g", 6)
    };
    let mut stale = Box::pin(service.commit_offsets(member_commit));
    let mut fresh = Box::pin(service.commit_offsets(simple_commit("g", 7)));
    assert_eq!(poll_once(&mut stale).await, None);
    assert_eq!(poll_once(&mut fresh).await, None);
    running.settle().await;
    let_wrong_work_finish().await;
    assert_eq!(
        poll_once(&mut fresh).await,
        None,
        "a commit ran while its group was being deleted"
    );

    gate.open();
    assert_eq!(delete.await, Ok(NONE));
    // Checked against the group as the deletion left it: a member of the old
    // group is refused, a simple commit starts the group afresh and is kept.
    assert_eq!(stale.await, Ok(CommitOutcome::Refused(ILLEGAL_GENERATION)));
    assert_eq!(fresh.await, Ok(CommitOutcome::Admitted(NONE)));
    assert_eq!(committed(service, "g").await, vec![("t".to_string(), 0, 7)]);
    assert_eq!(
        service.describe("g".into()).await.map(|d| d.state),
        Ok("Empty".to_string())
    );
    running.stop().await;
}

#[tokio::test]
async fn a_fetch_after_an_acknowledged_commit_always_sees_it() {
    let harness = Harness::new();
    let running = harness.start().await;
    let service = &running.service;
    for value in 1..=20 {
        assert_eq!(
            service.commit_offsets(simple_commit("g", value)).await,
            Ok(CommitOutcome::Admitted(NONE))
        );
        assert_eq!(
            committed(service, "g").await,
            vec![("t".to_string(), 0, value)]
        );
    }
    // A fetch sent while a commit of its group is in flight reads after it.
    let gate = running.gate_commits("g");
    let mut commit = Box::pin(service.commit_offsets(simple_commit("g", 100)));
    assert_eq!(poll_once(&mut commit).await, None);
    gate.entered().await;
    let mut fetch = Box::pin(committed(service, "g"));
    assert_eq!(poll_once(&mut fetch).await, None);
    running.settle().await;
    gate.open();
    assert_eq!(fetch.await, vec![("t".to_string(), 0, 100)]);
    assert_eq!(commit.await, Ok(CommitOutcome::Admitted(NONE)));
    running.stop().await;
}

/// A member's commit waits on its replication (an ISR member of the
/// offsets partition died: the high watermark stalls until it is fenced);
/// meanwhile the group's heartbeats, joins and describes are answered, as
/// Kafka holds the group's lock across the local append only. Members with
/// short sessions expired behind such a commit, and the group rebalanced.
#[tokio::test]
async fn a_groups_heartbeats_are_answered_while_its_commit_waits() {
    let harness = Harness::new();
    let running = harness.start().await;
    let service = running.service.clone();
    let joined = stable_alone(&harness, &service).await;
    let gate = running.gate_commits("g");
    let commit = OffsetCommit {
        member_id: joined.member_id.clone(),
        generation_id: 1,
        ..simple_commit("g", 7)
    };
    let mut commit = Box::pin(service.commit_offsets(commit));
    assert_eq!(poll_once(&mut commit).await, None);
    gate.entered().await;
    // Held behind the gated commit, the heartbeat would never be answered;
    // the bound only keeps the test from hanging, far above any machine's.
    let never = Duration::from_secs(60);
    let heartbeat = service.heartbeat("g".into(), joined.member_id.clone(), None, 1);
    assert_eq!(
        tokio::time::timeout(never, heartbeat).await,
        Ok(Ok(NONE)),
        "the heartbeat waited for the commit"
    );
    let described = tokio::time::timeout(never, service.describe("g".into()))
        .await
        .expect("the describe waited for the commit")
        .expect("running");
    assert_eq!(described.state, "Stable");
    gate.open();
    assert_eq!(commit.await, Ok(CommitOutcome::Admitted(NONE)));
    running.stop().await;
}

#[tokio::test]
async fn other_groups_are_not_held_behind_one_groups_fsync() {
    let harness = Harness::new();
    let running = harness.start().await;
    let service = &running.service;
    let gate = running.gate_commits("slow");
    let mut slow = Box::pin(service.commit_offsets(simple_commit("slow", 1)));
    assert_eq!(poll_once(&mut slow).await, None);
    gate.entered().await;
    assert_eq!(
        service.commit_offsets(simple_commit("fast", 2)).await,
        Ok(CommitOutcome::Admitted(NONE))
    );
    assert_eq!(
        committed(service, "fast").await,
        vec![("t".to_string(), 0, 2)]
    );
    assert_eq!(service.delete("fast".into()).await, Ok(NONE));
    assert_eq!(poll_once(&mut slow).await, None, "the gate is still closed");
    gate.open();
    assert_eq!(slow.await, Ok(CommitOutcome::Admitted(NONE)));
    running.stop().await;
}

#[tokio::test]
async fn offset_delete_keeps_subscribed_topics_and_needs_a_known_group() {
    fn subscribed(protocol_type: &str, _: &[Bytes]) -> std::collections::HashSet<String> {
        // Stands in for the handler's reading of consumer subscriptions.
        if protocol_type.is_empty() {
            ["kept".to_string()].into()
        } else {
            Default::default()
        }
    }
    let harness = Harness::new();
    let running = harness.start().await;
    let service = &running.service;
    let commit = OffsetCommit {
        offsets: vec![
            ("t".to_string(), 0, offset(1)),
            ("kept".to_string(), 0, offset(2)),
        ],
        ..simple_commit("g", 0)
    };
    assert_eq!(
        service.commit_offsets(commit).await,
        Ok(CommitOutcome::Admitted(NONE))
    );
    let topics = vec![("t".to_string(), vec![0]), ("kept".to_string(), vec![0])];
    let deleted = service
        .delete_offsets("g".into(), topics.clone(), subscribed)
        .await;
    assert_eq!(deleted, Ok(Ok(["kept".to_string()].into())));
    assert_eq!(
        committed(service, "g").await,
        vec![("kept".to_string(), 0, 2)]
    );
    assert_eq!(
        service
            .delete_offsets("unknown".into(), topics, subscribed)
            .await,
        Ok(Err(GROUP_ID_NOT_FOUND))
    );
    running.stop().await;
}

#[tokio::test]
async fn records_are_stored_at_shutdown_and_restored_at_start() {
    let harness = Harness::new();
    let running = harness.start().await;
    assert_eq!(
        running
            .service
            .commit_offsets(simple_commit("kept", 3))
            .await,
        Ok(CommitOutcome::Admitted(NONE))
    );
    assert_eq!(
        running
            .service
            .commit_offsets(simple_commit("gone", 4))
            .await,
        Ok(CommitOutcome::Admitted(NONE))
    );
    assert_eq!(running.service.delete("gone".into()).await, Ok(NONE));
    let service = running.service.clone();
    running.stop().await;
    assert_eq!(service.describe("kept".into()).await, Err(Stopped));

    let running = harness.start().await;
    let service = &running.service;
    let states = service.list(Vec::new()).await.expect("service running");
    assert_eq!(
        states,
        vec![ListedGroup {
            group_id: "kept".to_string(),
            protocol_type: String::new(),
            state: "Empty".to_string(),
        }]
    );
    assert_eq!(
        committed(service, "kept").await,
        vec![("t".to_string(), 0, 3)]
    );
    assert!(committed(service, "gone").await.is_empty());
    running.stop().await;
}

#[tokio::test]
async fn offsets_of_empty_groups_expire_and_active_groups_keep_theirs() {
    let harness = Harness::new();
    let config = GroupServiceConfig {
        retention_check_interval_ms: 20,
        ..GroupServiceConfig::new(config(0), 1_000)
    };
    let running = harness.start_with(config).await;
    let service = &running.service;
    assert_eq!(
        service.commit_offsets(simple_commit("idle", 1)).await,
        Ok(CommitOutcome::Admitted(NONE))
    );
    let joined = service
        .join(JoinRequest {
            group_id: "active".to_string(),
            ..join_request("c0", "", 0)
        })
        .await
        .expect("service running");
    assert_eq!(joined.error, NONE);
    let member_commit = OffsetCommit {
        member_id: joined.member_id.clone(),
        generation_id: joined.generation_id,
        ..simple_commit("active", 2)
    };
    let synced = service
        .sync(SyncRequest {
            group_id: "active".to_string(),
            ..sync_request(&joined, vec![(joined.member_id.clone(), Bytes::new())], 0)
        })
        .await
        .expect("service running");
    assert_eq!(synced.error, NONE);
    assert_eq!(
        service.commit_offsets(member_commit).await,
        Ok(CommitOutcome::Admitted(NONE))
    );

    harness.clock.advance_ms(2_000);
    let mut expired = false;
    for _ in 0..500 {
        if committed(service, "idle").await.is_empty() {
            expired = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert!(expired, "the idle group's offsets never expired");
    assert_eq!(
        committed(service, "active").await,
        vec![("t".to_string(), 0, 2)]
    );
    running.stop().await;
}

#[tokio::test(start_paused = true)]
async fn service_completes_concurrent_joins_and_syncs() {
    let harness = Harness::new();
    let running = harness.start().await;
    let service = running.service.clone();
    let clock = harness.clock.clone();
    let joins: Vec<_> = (0..3)
        .map(|i| {
            let service = service.clone();
            tokio::spawn(async move { service.join(join_request(&format!("c{i}"), "", 0)).await })
        })
        .collect();
    // Let the joins arrive, then run the initial delay out on the manual clock.
    tokio::time::sleep(Duration::from_millis(10)).await;
    let waiting = service
        .describe("g".into())
        .await
        .map(|d| (d.state, d.members.len()));
    assert_eq!(waiting, Ok(("PreparingRebalance".to_string(), 3)));
    // The delay is extended once (two members arrived after the first), so it
    // takes two ticks a delay apart.
    for _ in 0..2 {
        clock.advance_ms(DELAY_MS);
        tokio::time::sleep(Duration::from_millis(
            2 * crate::limits::GROUP_TICK_INTERVAL_MS,
        ))
        .await;
    }
    let mut answers = Vec::new();
    for join in joins {
        // Paused time runs ahead when idle, so a join that never completes fails here instead of hanging.
        let answer = tokio::time::timeout(Duration::from_secs(60), join).await;
        answers.push(
            answer
                .expect("join answered")
                .expect("join task")
                .expect("service running"),
        );
    }
    assert!(answers
        .iter()
        .all(|a| a.error == NONE && a.generation_id == 1));
    let leader = answers
        .iter()
        .find(|a| a.leader == a.member_id)
        .expect("a leader")
        .clone();
    assert_eq!(leader.members.len(), 3);

    let follower = answers
        .iter()
        .find(|a| a.leader != a.member_id)
        .expect("a follower")
        .clone();
    let waiting = {
        let service = service.clone();
        let request = sync_request(&follower, Vec::new(), 0);
        tokio::spawn(async move { service.sync(request).await })
    };
    tokio::time::sleep(Duration::from_millis(10)).await;
    let assignments = answers
        .iter()
        .map(|a| (a.member_id.clone(), assignment_for(a)))
        .collect();
    let synced = service.sync(sync_request(&leader, assignments, 0)).await;
    assert_eq!(synced.map(|s| s.assignment), Ok(assignment_for(&leader)));
    let follower_sync = waiting.await.expect("sync task").expect("service running");
    assert_eq!(follower_sync.assignment, assignment_for(&follower));
    let hb = service
        .heartbeat("g".into(), follower.member_id.clone(), None, 1)
        .await;
    assert_eq!(hb, Ok(NONE));
    assert_eq!(service.list(vec![]).await.map(|l| l.len()), Ok(1));
    // The group's record holds its generation, members and assignments.
    running.stop().await;
    let reopened = SledOffsetStore::open(&harness.dir.path().join("offsets")).expect("reopen");
    let mut assigned: Vec<(String, Bytes)> = answers
        .iter()
        .map(|a| (a.member_id.clone(), assignment_for(a)))
        .collect();
    assigned.sort();
    assert_eq!(
        stored_generations(&reopened),
        vec![("g".to_string(), 1, assigned)]
    );
    reopened.close().await.expect("close");
}

/// A sync hands out a generation's assignment only once the group's record
/// with that generation is stored, as Kafka stores the group before it answers
/// SyncGroup; a failed store answers the sync with the store's error, and the
/// next sync stores it. Found by the fault harness: a coordinator that took
/// over a group whose record was not stored yet handed its generation out a
/// second time.
#[tokio::test(start_paused = true)]
async fn a_sync_answers_once_the_groups_generation_is_stored() {
    let harness = Harness::new();
    let running = harness.start().await;
    let service = running.service.clone();
    let joined = join_alone(&harness, &service).await;
    running.sync_unstored(&joined).await;
    running.sync_stored(&joined).await;
    running.stop().await;
}

/// A sync that hands out a generation's assignment while a persist round is
/// storing the group's record with that generation (a sync before failed to
/// store it) waits for the round: if the round fails, the generation is not
/// stored, and the sync stores it itself (or answers with the store's error). Found by the fault harness: a
/// persist round took the new generation's record, then the leader's sync,
/// finding the record taken, handed the assignment out at once; the round's
/// write was refused (the coordinator had lost its partition), and the next
/// coordinator, loading the older generation, handed the same generation out
/// a second time.
#[tokio::test(start_paused = true)]
async fn a_sync_waits_for_the_persist_round_storing_its_generation() {
    let harness = Harness::new();
    let running = harness.start().await;
    let service = running.service.clone();
    let joined = join_alone(&harness, &service).await;
    // The leader's sync cannot store the generation: it is answered with the
    // store's error, and the record is left to a persist round.
    running.sync_unstored(&joined).await;
    // A persist round takes generation 1's record and is held storing it.
    running.store.saves_fail.store(false, Ordering::Release);
    let gate = running.gate_saves("g");
    // (Time runs on to the next persist tick.)
    gate.entered().await;
    running.store.saves_fail.store(true, Ordering::Release);
    let syncing = {
        let service = service.clone();
        let request = sync_request(&joined, own_assignment(&joined), 0);
        tokio::spawn(async move { service.sync(request).await })
    };
    running.settle().await;
    let answered_meanwhile = syncing.is_finished();
    // The round's write fails: the generation is not stored.
    gate.open();
    assert!(
        !answered_meanwhile,
        "no assignment while the generation's record is being stored"
    );
    let refused = tokio::time::timeout(Duration::from_secs(60), syncing)
        .await
        .expect("sync answered")
        .expect("sync task")
        .expect("service running");
    assert_ne!(
        refused.error, NONE,
        "no assignment of a generation that is not stored"
    );
    assert!(refused.assignment.is_empty());
    assert!(running.sled.load_groups().expect("read").is_empty());

    running.sync_stored(&joined).await;
    running.stop().await;
}

#[tokio::test(start_paused = true)]
async fn service_survives_callers_that_go_away() {
    let harness = Harness::new();
    let running = harness.start().await;
    let service = &running.service;
    let abandoned = spawn_join(service, "gone");
    tokio::time::sleep(Duration::from_millis(10)).await;
    abandoned.abort();
    harness.clock.advance_ms(DELAY_MS);
    tokio::time::sleep(Duration::from_millis(
        2 * crate::limits::GROUP_TICK_INTERVAL_MS,
    ))
    .await;
    let description = service.describe("g".into()).await.expect("service running");
    assert_eq!(description.state, "CompletingRebalance");
    assert_eq!(service.delete("g".into()).await, Ok(NON_EMPTY_GROUP));
    let nothing_to_store = OffsetCommit {
        offsets: Vec::new(),
        ..simple_commit("s", 0)
    };
    assert_eq!(
        service.commit_offsets(nothing_to_store).await,
        Ok(CommitOutcome::Admitted(NONE))
    );
    assert_eq!(
        service.describe("s".into()).await.map(|d| d.state),
        Ok("Empty".to_string())
    );
    assert_eq!(
        service.leave("g".into(), vec![("x".into(), None)]).await,
        Ok((NONE, vec![UNKNOWN_MEMBER_ID]))
    );
    running.stop().await;
}

/// An elected coordinator serves only the groups of the offsets partitions it
/// leads: NOT_COORDINATOR before its election and after its resignation, whose
/// waiting joins are answered NOT_COORDINATOR too; elected again, it finds what
/// its store holds.
#[tokio::test]
async fn an_elected_coordinator_serves_only_the_groups_of_its_partitions() {
    let harness = Harness::new();
    let running = start_elected(&harness).await;
    let service = running.service.clone();
    let partition = crate::internal_topics::group_partition("g");
    assert_eq!(
        service.commit_offsets(simple_commit("g", 5)).await,
        Ok(CommitOutcome::Refused(NOT_COORDINATOR))
    );

    elect_and_serve(&service, partition, 1).await;
    assert_eq!(
        service.commit_offsets(simple_commit("g", 5)).await,
        Ok(CommitOutcome::Admitted(NONE))
    );
    assert_eq!(
        committed(&service, "g").await,
        vec![("t".to_string(), 0, 5)]
    );
    // A join waits out the initial rebalance delay, then its coordinator goes.
    let joining = spawn_join(&service, "c0");
    until_state(&service, "PreparingRebalance").await;
    resign(&service, partition).await;
    let answered = joining.await.expect("join task").expect("service running");
    assert_eq!(answered.error, NOT_COORDINATOR);
    assert_eq!(
        service
            .fetch_offsets("g".to_string(), false)
            .await
            .expect("service running"),
        Err(NOT_COORDINATOR)
    );

    elect_and_serve(&service, partition, 2).await;
    assert_eq!(
        committed(&service, "g").await,
        vec![("t".to_string(), 0, 5)]
    );
    running.stop().await;
}

/// The leader epoch of an offsets partition rises without a change of
/// leader (as when a reassignment ends): the groups stay loaded, a join in
/// progress completes instead of being answered NOT_COORDINATOR (a rebalance
/// restarted), and commits are taken in the new epoch.
#[tokio::test]
async fn an_epoch_bump_without_a_leader_change_keeps_the_groups() {
    let harness = Harness::new();
    let running = start_elected(&harness).await;
    let service = running.service.clone();
    let partition = crate::internal_topics::group_partition("g");
    elect_and_serve(&service, partition, 1).await;
    let joining = spawn_join(&service, "c0");
    until_state(&service, "PreparingRebalance").await;
    elect(&service, partition, 2, true).await;
    harness.clock.advance_ms(DELAY_MS);
    let answered = tokio::time::timeout(Duration::from_secs(60), joining)
        .await
        .expect("join answered")
        .expect("join task")
        .expect("service running");
    assert_eq!(
        answered.error, NONE,
        "the join completes in the later epoch"
    );
    assert_eq!(answered.generation_id, 1);
    assert_eq!(
        service
            .heartbeat("g".into(), answered.member_id.clone(), None, 1)
            .await,
        Ok(NONE),
        "the member is known in the later epoch"
    );
    running.stop().await;
}

/// A Stable group's members go on in their generation after their
/// coordinator moves (its partition resigned, then elected again in a later
/// epoch, as on another broker): the group comes back Stable with them and
/// their assignments, as Kafka loads it, instead of Empty. Found by the
/// failover benchmark: a group that came back Empty made its consumers join
/// again, and a commit librdkafka sent with the old member id, answered
/// UNKNOWN_MEMBER_ID right after the new join, left the group waiting out a
/// whole session for a member that never synced.
#[tokio::test(start_paused = true)]
async fn a_stable_group_moves_with_its_members_and_generation() {
    let harness = Harness::new();
    let running = start_elected(&harness).await;
    let service = running.service.clone();
    let partition = crate::internal_topics::group_partition("g");
    elect_and_serve(&service, partition, 1).await;
    let joined = stable_alone(&harness, &service).await;

    resign(&service, partition).await;
    let member = joined.member_id.clone();
    assert_eq!(
        service.heartbeat("g".into(), member.clone(), None, 1).await,
        Ok(NOT_COORDINATOR)
    );
    elect_and_serve(&service, partition, 2).await;
    let described = service.describe("g".into()).await.expect("running");
    assert_eq!(described.state, "Stable");
    assert_eq!(described.members.len(), 1);
    assert_eq!(described.members[0].member_id, member);
    assert_eq!(described.members[0].assignment, assignment_for(&joined));
    assert_eq!(
        service.heartbeat("g".into(), member.clone(), None, 1).await,
        Ok(NONE)
    );
    let commit = OffsetCommit {
        member_id: member.clone(),
        generation_id: 1,
        ..simple_commit("g", 7)
    };
    assert_eq!(
        service.commit_offsets(commit).await,
        Ok(CommitOutcome::Admitted(NONE))
    );
    assert_eq!(
        committed(&service, "g").await,
        vec![("t".to_string(), 0, 7)]
    );
    running.stop().await;
}

/// Tells the service this broker leads `partition` in `leader_epoch`
/// (`continued`, see `Leadership::Elected`).
async fn elect(service: &GroupService, partition: i32, leader_epoch: i32, continued: bool) {
    let elected = Leadership::Elected {
        partition,
        leader_epoch,
        continued,
    };
    service.follow(elected).await.expect("service running");
}

/// Elects the service for `partition` in `leader_epoch`, after another
/// leader, and waits until the partition's groups are served.
async fn elect_and_serve(service: &GroupService, partition: i32, leader_epoch: i32) {
    elect(service, partition, leader_epoch, false).await;
    assert!(
        service
            .wait_served(partition, Duration::from_secs(10))
            .await
    );
}

/// Tells the service this broker no longer leads `partition`.
async fn resign(service: &GroupService, partition: i32) {
    let resigned = Leadership::Resigned { partition };
    service.follow(resigned).await.expect("service running");
}

/// `client` joins group "g" (JoinGroup v0-v3), in a task of its own.
fn spawn_join(
    service: &GroupService,
    client: &str,
) -> tokio::task::JoinHandle<Result<JoinResponse, Stopped>> {
    let service = service.clone();
    let request = join_request(client, "", 0);
    tokio::spawn(async move { service.join(request).await })
}

/// Waits (five seconds at most) until group "g" is in `state`.
async fn until_state(service: &GroupService, state: &str) {
    for _ in 0..1000 {
        let described = service.describe("g".to_string()).await.expect("running");
        if described.state == state {
            break;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

/// Member "c0" joins group "g" alone: answered generation 1 once the initial
/// rebalance delay has passed on the harness's clock.
async fn join_alone(harness: &Harness, service: &GroupService) -> JoinResponse {
    let joining = spawn_join(service, "c0");
    tokio::time::sleep(Duration::from_millis(10)).await;
    harness.clock.advance_ms(DELAY_MS);
    let joined = tokio::time::timeout(Duration::from_secs(60), joining)
        .await
        .expect("join answered")
        .expect("join task")
        .expect("service running");
    assert_eq!((joined.error, joined.generation_id), (NONE, 1));
    joined
}

/// Member "c0" joins group "g" alone (`join_alone`) and syncs: the group is
/// Stable in generation 1.
async fn stable_alone(harness: &Harness, service: &GroupService) -> JoinResponse {
    let joined = join_alone(harness, service).await;
    let synced = service
        .sync(sync_request(&joined, own_assignment(&joined), 0))
        .await
        .expect("service running");
    assert_eq!(synced.error, NONE);
    joined
}

/// The assignment of a member alone in its group: its own.
fn own_assignment(member: &JoinResponse) -> Vec<(String, Bytes)> {
    vec![(member.member_id.clone(), assignment_for(member))]
}

/// Starts a coordinator that serves only the partitions it is elected for.
async fn start_elected(harness: &Harness) -> Running {
    let config = GroupServiceConfig {
        ownership: Ownership::Elected,
        ..GroupServiceConfig::new(config(DELAY_MS), 86_400_000)
    };
    harness.start_with(config).await
}

/// A transaction that ends while its offsets partition loads after an
/// election has its offsets completed once the load is done, against what the
/// load left: the load's log read ended before the transaction's marker, so
/// the load leaves the offsets pending, and a completion run beside it either
/// found nothing pending yet (group "h": the cache never had its pending
/// offsets) or was overwritten by the load (group "g"). Either way the offsets
/// stayed pending and the committed offset read older until the next load, and
/// a consume-transform-produce application copied its records again.
#[tokio::test]
async fn a_transaction_completed_while_its_partition_loads_commits_its_offsets_after_the_load() {
    const PRODUCER_ID: i64 = 42;
    let harness = Harness::new();
    let running = start_elected(&harness).await;
    let service = running.service.clone();
    let partition = group_partition("g");
    let h = (0..)
        .map(|i| format!("h{i}"))
        .find(|group_id| group_partition(group_id) == partition)
        .expect("a group placed with g");
    let before = vec![("t".to_string(), 0, offset(3))];
    let in_txn = vec![("t".to_string(), 0, offset(7))];
    // The cache as this broker last led the partition: both groups at 3, and
    // g's offsets pending in the transaction (h's came after it had moved).
    for group_id in ["g", h.as_str()] {
        running
            .sled
            .commit(group_id, before.clone())
            .await
            .expect("commit");
    }
    running
        .sled
        .stage("g", PRODUCER_ID, 0, in_txn.clone())
        .await
        .expect("stage");
    // The log as the election's load reads it, before the transaction's
    // marker: both groups at 3, with the transaction's offsets pending.
    let logged = LoggedPartition {
        partition,
        groups: ["g", h.as_str()]
            .map(|group_id| StoredGroup {
                group_id: group_id.to_string(),
                record: None,
                offsets: before.clone(),
            })
            .into(),
        pending: ["g", h.as_str()]
            .map(|group_id| PendingOffsets {
                group_id: group_id.to_string(),
                producer_id: PRODUCER_ID,
                offsets: in_txn.clone(),
            })
            .into(),
    };
    let gate = running.gate_load(logged);
    elect(&service, partition, 1, false).await;
    gate.entered().await;

    // The marker is in the partition now; the transaction coordinator completes
    // the offsets while the load is still to write what it read.
    let completing = running
        .spawn_commit_completion(PRODUCER_ID, partition)
        .await;
    let answered_during_the_load = completing.is_finished();
    gate.open();
    let completed = tokio::time::timeout(Duration::from_secs(10), completing)
        .await
        .expect("completion answered")
        .expect("completion task");
    assert!(completed.is_ok(), "completion failed: {completed:?}");
    assert!(
        service
            .wait_served(partition, Duration::from_secs(10))
            .await
    );
    for group_id in ["g", h.as_str()] {
        assert_eq!(
            committed(&service, group_id).await,
            vec![("t".to_string(), 0, 7)],
            "the transaction's offset of {group_id} is committed"
        );
        let stable = service
            .fetch_offsets(group_id.to_string(), true)
            .await
            .expect("service running")
            .expect("read");
        assert!(
            stable.pending.is_empty(),
            "{group_id} still has pending offsets"
        );
    }
    assert!(
        !answered_during_the_load,
        "a completion is durable on its answer, which comes after the load"
    );
    running.stop().await;
}

/// A completion held for its partition's load fails if the partition is
/// resigned before the load is done: the next leader's load reads the marker
/// from the log, and the transaction coordinator retries meanwhile.
#[tokio::test]
async fn a_transaction_completion_held_for_a_load_fails_once_its_partition_is_resigned() {
    const PRODUCER_ID: i64 = 42;
    let harness = Harness::new();
    let running = start_elected(&harness).await;
    let service = running.service.clone();
    let partition = group_partition("g");
    let gate = running.gate_load(LoggedPartition {
        partition,
        groups: Vec::new(),
        pending: Vec::new(),
    });
    elect(&service, partition, 1, false).await;
    gate.entered().await;
    let completing = running
        .spawn_commit_completion(PRODUCER_ID, partition)
        .await;
    let waited_for_the_load = !completing.is_finished();
    resign(&service, partition).await;
    // The load, dropped now, ends before anything can fail and leave it blocked.
    gate.open();
    let completed = tokio::time::timeout(Duration::from_secs(10), completing)
        .await
        .expect("completion answered")
        .expect("completion task");
    assert!(
        waited_for_the_load,
        "a completion of a loading partition waits for its load"
    );
    assert!(
        completed.is_err(),
        "a resigned partition's completion fails"
    );
    running.stop().await;
}

/// A stored group record: the group, its generation, and each member's id and
/// assignment.
type StoredGeneration = (String, i32, Vec<(String, Bytes)>);

/// Every stored group record, as `StoredGeneration`.
fn stored_generations(store: &SledOffsetStore) -> Vec<StoredGeneration> {
    store
        .load_groups()
        .expect("read")
        .into_iter()
        .map(|(group_id, record)| {
            let members = record
                .members
                .into_iter()
                .map(|m| (m.member_id, Bytes::from(m.assignment)))
                .collect();
            (group_id, record.generation_id, members)
        })
        .collect()
}
