//! Group commit and the one rule for a failed fsync, shared by every durable store of
//! the broker: the partition logs, the offsets and transaction stores, and the
//! controller's metadata log.
//!
//! A [`GroupCommit`] owns the fsyncs of one or more [`Durable`] targets. Callers queue a
//! write (possibly empty) for a target and wait; one task takes everything queued, and
//! for each target with waiters runs one round on the blocking pool: apply the queued
//! writes in order, fsync once, answer every waiter of the round. A target has at most one
//! round in flight; what arrives meanwhile waits for the next round, so one fsync covers
//! every write queued before it began. Rounds of different targets run side by side (up
//! to [`GROUP_COMMIT_SYNCS_CONCURRENT_MAX`]), so one slow partition does not delay the
//! fsync of another.
//!
//! The failure rule ([`StorageHealth`]): a failed fsync is never retried. Linux may drop
//! the dirty pages of a failed writeback, so a later fsync that succeeds proves nothing
//! (PostgreSQL panics, Kafka takes the log dir offline). The first failure marks the
//! storage offline: the waiters of that round get the error, every later request is
//! refused without touching the disk, and whoever watches the health (the broker) is
//! told, so that it can stop and let recovery run at the next start.
//!
//! Invariant: a waiter is answered `Ok` only by a round whose fsync began after its write
//! was applied and returned `Ok`, while the storage was online.

use std::collections::{HashMap, VecDeque};
use std::io;
use std::sync::{Arc, OnceLock};

use tokio::sync::{mpsc, oneshot, watch, Notify};
use tokio::task::JoinSet;
use tokio::time::{Duration, Instant};

use crate::limits::{GROUP_COMMIT_SYNCS_CONCURRENT_MAX, STORAGE_ROUND_STALL_MS};

/// Something whose writes become durable with one fsync.
pub trait Durable: Send + Sync + 'static {
    /// One queued change, applied before the round's fsync. `()` for targets whose
    /// writes happened before they were queued (a log append, a raft entry).
    type Write: Send + 'static;

    /// Applies one write (in queue order, on the blocking pool unless `blocks` says
    /// no). An error answers that
    /// write's waiter alone; the round goes on.
    fn apply(&self, write: Self::Write) -> io::Result<()>;

    /// Makes every write applied so far durable. Runs where `apply` does.
    fn sync(&self) -> io::Result<()>;

    /// Whether a round must leave the runtime's workers (a real disk). A target in
    /// memory answers false, and its rounds run in place, in step with the runtime.
    fn blocks(&self) -> bool {
        true
    }
}

/// Who is told of a round's outcome.
pub enum Waiter {
    Channel(oneshot::Sender<io::Result<()>>),
    /// For callers that need a callback rather than a channel (raft's log flush).
    Callback(Box<dyn FnOnce(io::Result<()>) + Send>),
}

impl Waiter {
    fn answer(self, result: io::Result<()>) {
        match self {
            // A waiter that went away no longer needs its answer.
            Waiter::Channel(done) => drop(done.send(result)),
            Waiter::Callback(callback) => callback(result),
        }
    }
}

/// Whether `error` says the process (EMFILE) or the system (ENFILE) has no
/// file descriptor left: not a failing disk. It comes from opening a file,
/// before anything is written, so the operation that met it fails and
/// nothing else; the storage stays online.
pub fn is_resource_exhaustion(error: &io::Error) -> bool {
    matches!(error.raw_os_error(), Some(code) if code == libc::EMFILE || code == libc::ENFILE)
}

/// Whether a storage area may still acknowledge writes. Shared by everything that writes
/// to it; once offline it stays offline until the process restarts.
pub struct StorageHealth {
    /// What the storage is, for messages ("log dir", "offsets store").
    name: String,
    failure: OnceLock<String>,
    offline: watch::Sender<bool>,
}

impl StorageHealth {
    pub fn new(name: impl Into<String>) -> Arc<StorageHealth> {
        Arc::new(StorageHealth {
            name: name.into(),
            failure: OnceLock::new(),
            offline: watch::Sender::new(false),
        })
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    pub fn is_offline(&self) -> bool {
        self.failure.get().is_some()
    }

    /// The first failure, once there was one.
    pub fn failure(&self) -> Option<&str> {
        self.failure.get().map(String::as_str)
    }

    /// Takes the storage offline for good, keeping the first error as the
    /// reason; unless the error says the process ran out of a resource
    /// (`is_resource_exhaustion`), which fails only the operation that met it.
    pub fn mark_failed(&self, error: &io::Error) {
        if is_resource_exhaustion(error) {
            tracing::warn!(storage = %self.name, %error, "out of file descriptors: the operation fails, the storage stays online");
            return;
        }
        let reason = format!("{error}");
        if self.failure.set(reason).is_ok() {
            tracing::error!(storage = %self.name, %error, "write or fsync failed; the storage is offline and acknowledges nothing more until a restart");
            self.offline.send_replace(true);
        }
    }

    /// The error every request gets once the storage is offline.
    pub fn offline_error(&self) -> io::Error {
        io::Error::other(format!(
            "{} is offline after a failed write or fsync ({}); restart the broker",
            self.name,
            self.failure().unwrap_or("unknown")
        ))
    }

    /// Fails when offline; otherwise runs `io` and takes the storage offline if it fails.
    /// Every durable write and fsync of the area goes through this, which is the one rule.
    pub fn guard<T>(&self, io: impl FnOnce() -> io::Result<T>) -> io::Result<T> {
        if self.is_offline() {
            return Err(self.offline_error());
        }
        let result = io();
        if let Err(error) = &result {
            self.mark_failed(error);
        }
        result
    }

    /// Resolves once the storage went offline (at once if it already is).
    pub async fn wait_offline(&self) {
        let mut offline = self.offline.subscribe();
        // The sender lives as long as `self`, so this only ends when offline.
        let _ = offline.wait_for(|offline| *offline).await;
    }
}

/// The handle callers queue on; cheap to clone.
pub struct GroupCommit<T: Durable> {
    requests: mpsc::Sender<Request<T>>,
    health: Arc<StorageHealth>,
    stop: Arc<Notify>,
}

impl<T: Durable> Clone for GroupCommit<T> {
    fn clone(&self) -> Self {
        GroupCommit {
            requests: self.requests.clone(),
            health: Arc::clone(&self.health),
            stop: Arc::clone(&self.stop),
        }
    }
}

struct Request<T: Durable> {
    target: Arc<T>,
    write: T::Write,
    waiter: Waiter,
}

impl<T: Durable> GroupCommit<T> {
    /// Starts the task on the current runtime; at most `queue_max` requests wait for it
    /// (beyond that, `submit` waits: the back-pressure a slow disk should cause). The
    /// task ends once every handle is dropped or `close` was called, and what was queued
    /// has been answered; the returned handle resolves then.
    pub fn start(
        queue_max: usize,
        health: Arc<StorageHealth>,
    ) -> (GroupCommit<T>, tokio::task::JoinHandle<()>) {
        let stall = Duration::from_millis(STORAGE_ROUND_STALL_MS);
        GroupCommit::start_watched(queue_max, health, stall)
    }

    /// `start`, with a round that runs longer than `stall` taking the storage
    /// offline (see `STORAGE_ROUND_STALL_MS`).
    fn start_watched(
        queue_max: usize,
        health: Arc<StorageHealth>,
        stall: Duration,
    ) -> (GroupCommit<T>, tokio::task::JoinHandle<()>) {
        let (requests, receiver) = mpsc::channel(queue_max);
        let stop = Arc::new(Notify::new());
        let task = tokio::spawn(run(
            receiver,
            Arc::clone(&health),
            Arc::clone(&stop),
            queue_max,
            stall,
        ));
        (
            GroupCommit {
                requests,
                health,
                stop,
            },
            task,
        )
    }

    /// Stops taking requests: what is queued is still answered, later requests fail,
    /// and the task ends (even while other handles live on in unpolled futures).
    pub fn close(&self) {
        self.stop.notify_one();
    }

    pub fn health(&self) -> &Arc<StorageHealth> {
        &self.health
    }

    /// Queues `write` for `target` and resolves once a round made it durable.
    pub async fn commit(&self, target: &Arc<T>, write: T::Write) -> io::Result<()> {
        let (done, wait) = oneshot::channel();
        self.submit(target, write, Waiter::Channel(done)).await;
        wait.await.map_err(|_| stopped())?
    }

    /// Queues `write` for `target`; `waiter` is answered by the round that covers it (or
    /// at once with an error if the storage is offline or the task has stopped).
    pub async fn submit(&self, target: &Arc<T>, write: T::Write, waiter: Waiter) {
        if self.health.is_offline() {
            waiter.answer(Err(self.health.offline_error()));
            return;
        }
        let request = Request {
            target: Arc::clone(target),
            write,
            waiter,
        };
        if let Err(mpsc::error::SendError(request)) = self.requests.send(request).await {
            request.waiter.answer(Err(stopped()));
        }
    }

    /// Queues an fsync without waiting (a flush policy); dropped when the queue is full,
    /// since a round already queued will cover it.
    pub fn request(&self, target: &Arc<T>, write: T::Write) {
        let (done, _) = oneshot::channel();
        let _ = self.requests.try_send(Request {
            target: Arc::clone(target),
            write,
            waiter: Waiter::Channel(done),
        });
    }
}

fn stopped() -> io::Error {
    io::Error::other("the group-commit task has stopped")
}

/// What one target has queued, and whether a round of it is running. The target is
/// held only while requests wait for it: an idle group commit keeps nothing alive, so a
/// store dropped without `close` (as a crash leaves it) lets go of its files at once.
struct Queue<T: Durable> {
    target: Option<Arc<T>>,
    requests: Vec<(T::Write, Waiter)>,
    in_flight: bool,
}

/// Key of a target: its address, stable while the `Arc` in the queue holds it.
fn key_of<T>(target: &Arc<T>) -> usize {
    Arc::as_ptr(target) as *const () as usize
}

async fn run<T: Durable>(
    mut receiver: mpsc::Receiver<Request<T>>,
    health: Arc<StorageHealth>,
    stop: Arc<Notify>,
    queue_max: usize,
    stall: Duration,
) {
    let mut queues: HashMap<usize, Queue<T>> = HashMap::new();
    // When each running round started, by target.
    let mut started: HashMap<usize, Instant> = HashMap::new();
    // Targets with requests and no round running, in the order they became ready.
    let mut ready: VecDeque<usize> = VecDeque::new();
    let mut rounds: JoinSet<usize> = JoinSet::new();
    let mut batch = Vec::new();
    let mut open = true;
    loop {
        while rounds.len() < GROUP_COMMIT_SYNCS_CONCURRENT_MAX {
            let Some(key) = ready.pop_front() else { break };
            let Some(queue) = queues.get_mut(&key) else {
                continue;
            };
            let Some(target) = queue.target.take() else {
                continue;
            };
            queue.in_flight = true;
            started.insert(key, Instant::now());
            let requests = std::mem::take(&mut queue.requests);
            let health = Arc::clone(&health);
            if target.blocks() {
                rounds.spawn_blocking(move || {
                    round(target, requests, &health);
                    key
                });
            } else {
                rounds.spawn(async move {
                    round(target, requests, &health);
                    key
                });
            }
        }
        if !open && rounds.is_empty() && ready.is_empty() {
            return;
        }
        tokio::select! {
            received = receiver.recv_many(&mut batch, queue_max), if open => {
                if received == 0 {
                    open = false;
                    continue;
                }
                for request in batch.drain(..) {
                    let key = key_of(&request.target);
                    let queue = queues.entry(key).or_insert_with(|| Queue {
                        target: None,
                        requests: Vec::new(),
                        in_flight: false,
                    });
                    if queue.requests.is_empty() && !queue.in_flight {
                        ready.push_back(key);
                    }
                    if queue.target.is_none() {
                        queue.target = Some(request.target);
                    }
                    queue.requests.push((request.write, request.waiter));
                }
            }
            () = stalled(&started, stall), if !started.is_empty() && !health.is_offline() => {
                health.mark_failed(&io::Error::other(format!(
                    "a round of writes and fsync has not returned within {} ms",
                    stall.as_millis()
                )));
            }
            () = stop.notified(), if open => {
                // Requests already in the channel are still received, then `recv_many`
                // answers 0 and the loop ends once the rounds are done.
                receiver.close();
            }
            Some(finished) = rounds.join_next() => {
                // A round that panicked has already ended the process (panics abort).
                let Ok(key) = finished else { continue };
                started.remove(&key);
                let Some(queue) = queues.get_mut(&key) else { continue };
                queue.in_flight = false;
                if queue.requests.is_empty() {
                    queues.remove(&key);
                } else {
                    ready.push_back(key);
                }
            }
        }
    }
}

/// Resolves once the oldest running round has run for `stall`.
async fn stalled(started: &HashMap<usize, Instant>, stall: Duration) {
    match started.values().min() {
        Some(oldest) => tokio::time::sleep_until(*oldest + stall).await,
        None => std::future::pending().await,
    }
}

/// One round of one target: apply, fsync once, let go of the target, answer. Blocking.
fn round<T: Durable>(target: Arc<T>, requests: Vec<(T::Write, Waiter)>, health: &StorageHealth) {
    let mut waiters = Vec::with_capacity(requests.len());
    for (write, waiter) in requests {
        if health.is_offline() {
            waiter.answer(Err(health.offline_error()));
            continue;
        }
        match health.guard(|| target.apply(write)) {
            Ok(()) => waiters.push(waiter),
            Err(error) => waiter.answer(Err(error)),
        }
    }
    if waiters.is_empty() {
        return;
    }
    let result = health.guard(|| target.sync());
    // Before the answers: a waiter that then closes its store must find it released.
    drop(target);
    for waiter in waiters {
        waiter.answer(match &result {
            Ok(()) => Ok(()),
            Err(error) => Err(io::Error::new(error.kind(), error.to_string())),
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
    use std::sync::Mutex;

    /// Running out of descriptors is not a disk failure: the operation fails
    /// and the storage stays online (a CreateTopics past the limit took the
    /// log dir offline, and the broker stopped).
    #[test]
    fn running_out_of_descriptors_does_not_take_the_storage_offline() {
        let health = StorageHealth::new("test storage");
        let emfile = io::Error::from_raw_os_error(libc::EMFILE);
        assert!(health.guard(|| Err::<(), _>(emfile)).is_err());
        assert!(!health.is_offline());
        let enfile = io::Error::from_raw_os_error(libc::ENFILE);
        health.mark_failed(&enfile);
        assert!(!health.is_offline());
        health.mark_failed(&io::Error::from_raw_os_error(libc::EIO));
        assert!(health.is_offline());
    }

    /// A target that records applied writes and counts fsyncs; `fail` makes the next
    /// fsync fail.
    #[derive(Default)]
    struct Recorder {
        applied: Mutex<Vec<u32>>,
        durable: Mutex<Vec<u32>>,
        syncs: AtomicUsize,
        fail: AtomicBool,
    }

    impl Durable for Recorder {
        type Write = u32;
        fn apply(&self, write: u32) -> io::Result<()> {
            self.applied.lock().map_err(|_| stopped())?.push(write);
            Ok(())
        }
        fn sync(&self) -> io::Result<()> {
            self.syncs.fetch_add(1, Ordering::SeqCst);
            if self.fail.swap(false, Ordering::SeqCst) {
                return Err(io::Error::other("injected fsync failure"));
            }
            let applied = self.applied.lock().map_err(|_| stopped())?.clone();
            *self.durable.lock().map_err(|_| stopped())? = applied;
            Ok(())
        }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn every_acknowledged_write_was_applied_before_a_successful_fsync() {
        let health = StorageHealth::new("test store");
        let (commit, _task) = GroupCommit::start(64, Arc::clone(&health));
        let target = Arc::new(Recorder::default());
        let mut waits = Vec::new();
        for write in 0..200u32 {
            let commit = commit.clone();
            let target = Arc::clone(&target);
            waits.push(tokio::spawn(async move {
                commit.commit(&target, write).await.map(|()| write)
            }));
        }
        for wait in waits {
            let write = wait.await.expect("join").expect("commit");
            let durable = target.durable.lock().expect("lock").clone();
            assert!(
                durable.contains(&write),
                "write {write} acknowledged before its fsync"
            );
        }
        let syncs = target.syncs.load(Ordering::SeqCst);
        assert!((1..=200).contains(&syncs), "{syncs} fsyncs for 200 writes");
    }

    /// A target whose fsync blocks until the test lets it go, as sled's flush did
    /// after losing the wake-up of a failed log write.
    struct Stuck {
        release: Mutex<std::sync::mpsc::Receiver<()>>,
    }

    impl Durable for Stuck {
        type Write = ();
        fn apply(&self, (): ()) -> io::Result<()> {
            Ok(())
        }
        fn sync(&self) -> io::Result<()> {
            let release = self.release.lock().map_err(|_| stopped())?;
            let _ = release.recv();
            Ok(())
        }
    }

    /// What a fault run found: one failed fsync in sled's background flusher left a
    /// node's offsets store flush waiting for good; its group-commit round never
    /// returned, nothing noticed, and the node stayed up with its metadata stuck
    /// behind it. A round that runs past the stall limit takes the storage offline
    /// (the broker then stops, and its restart recovers), and nothing is acknowledged
    /// after that.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_round_that_never_returns_takes_the_storage_offline() {
        let health = StorageHealth::new("test store");
        let stall = Duration::from_millis(200);
        let (commit, _task) = GroupCommit::start_watched(64, Arc::clone(&health), stall);
        let (release, released) = std::sync::mpsc::channel();
        let target = Arc::new(Stuck {
            release: Mutex::new(released),
        });
        let waiting = {
            let (commit, target) = (commit.clone(), Arc::clone(&target));
            tokio::spawn(async move { commit.commit(&target, ()).await })
        };
        // Generous: it can only run out if the stall is never noticed.
        tokio::time::timeout(Duration::from_secs(60), health.wait_offline())
            .await
            .expect("a stuck round did not take the storage offline");
        assert!(health
            .failure()
            .is_some_and(|f| f.contains("has not returned")));
        let refused = commit
            .commit(&target, ())
            .await
            .expect_err("acknowledged after the storage went offline");
        assert!(refused.to_string().contains("offline"), "{refused}");
        // Were the stuck fsync to return after all, its own writes are durable.
        release.send(()).expect("release the round");
        waiting
            .await
            .expect("join")
            .expect("the stuck round's fsync succeeded");
    }

    #[tokio::test]
    async fn a_failed_fsync_is_never_retried_and_nothing_is_acknowledged_after_it() {
        let health = StorageHealth::new("test store");
        let (commit, _task) = GroupCommit::start(64, Arc::clone(&health));
        let target = Arc::new(Recorder::default());
        commit.commit(&target, 1).await.expect("first commit");
        target.fail.store(true, Ordering::SeqCst);
        assert!(
            commit.commit(&target, 2).await.is_err(),
            "the failed round answered Ok"
        );
        assert!(health.is_offline());
        let syncs = target.syncs.load(Ordering::SeqCst);
        // The next fsync would succeed, but it must not even be tried.
        let refused = commit
            .commit(&target, 3)
            .await
            .expect_err("acknowledged after a failure");
        assert!(refused.to_string().contains("offline"), "{refused}");
        assert_eq!(
            target.syncs.load(Ordering::SeqCst),
            syncs,
            "a failed fsync was retried"
        );
        assert_eq!(*target.durable.lock().expect("lock"), vec![1]);
        tokio::time::timeout(std::time::Duration::from_secs(5), health.wait_offline())
            .await
            .expect("offline is observable");
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_slow_target_does_not_hold_up_another() {
        struct Gate {
            open: Mutex<bool>,
            opened: std::sync::Condvar,
        }
        impl Durable for Gate {
            type Write = ();
            fn apply(&self, (): ()) -> io::Result<()> {
                Ok(())
            }
            fn sync(&self) -> io::Result<()> {
                let mut open = self.open.lock().map_err(|_| stopped())?;
                while !*open {
                    open = self.opened.wait(open).map_err(|_| stopped())?;
                }
                Ok(())
            }
        }
        let health = StorageHealth::new("test store");
        let (commit, _task) = GroupCommit::start(64, health);
        let slow = Arc::new(Gate {
            open: Mutex::new(false),
            opened: std::sync::Condvar::new(),
        });
        let fast = Arc::new(Gate {
            open: Mutex::new(true),
            opened: std::sync::Condvar::new(),
        });
        let slow_wait = {
            let commit = commit.clone();
            let slow = Arc::clone(&slow);
            tokio::spawn(async move { commit.commit(&slow, ()).await })
        };
        // The fast target's round completes while the slow one is still blocked.
        commit.commit(&fast, ()).await.expect("fast commit");
        assert!(!slow_wait.is_finished());
        *slow.open.lock().expect("lock") = true;
        slow.opened.notify_all();
        slow_wait.await.expect("join").expect("slow commit");
    }
}
