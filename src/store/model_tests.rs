//! Seeded model tests of the offsets store and the transaction store across restarts.
//!
//! Each test drives a store with random operations and mirrors every acknowledged write (one
//! whose future or call returned `Ok`) in a plain in-memory model. Between any two operations
//! it may restart the store; after every operation and every reopen it compares all that the
//! store answers with the model. The tests use only the public store traits, `open`, `close`
//! and [`wait_until_released`], so that they hold whatever way the stores flush and fsync.
//!
//! Three kinds of restart:
//!
//! - **clean**: `close().await`, then the same directory is opened again;
//! - **drop**: the store is dropped without `close` and the directory is opened again once
//!   sled has let go of it. sled flushes and syncs its log when it is dropped, so this shows
//!   that nothing acknowledged waits for `close`, but it is not a crash;
//! - **crash image**: the directory is copied while the store is still open, which is what a
//!   killed process leaves (whatever sled had not written to the kernel is lost), and the
//!   copy is opened. Sometimes one queued write has been started, unacknowledged, when the
//!   copy is taken: the copy must then hold all of it or none of it. The test then writes it
//!   again, so that the rest of the run does not depend on which it was.
//!
//! Replaying: every test prints `store model seed: N`; `SLUICE_MODEL_SEED=N` makes the same
//! operations again (the outcome of a write in flight at a crash image is timing, but the
//! operations that follow do not depend on it). `SLUICE_MODEL_OPS` sets how many operations
//! a test makes; the default keeps each test to a few seconds, and a large value is the long
//! run. Each operation costs more as a run goes on (sled's files grow, and every reopen reads
//! them), so a run of many thousands of operations is better split across seeds than left to
//! outgrow the test runner's time limit.

use std::collections::VecDeque;
use std::fmt::{self, Debug, Write as _};
use std::io;
use std::path::{Path, PathBuf};
use std::task::{Context, Poll, Waker};
use std::time::{SystemTime, UNIX_EPOCH};

use super::{wait_until_released, CommitFuture, SledOffsetStore, SledTxnStore};

mod offsets;

const SEED_ENV: &str = "SLUICE_MODEL_SEED";
const OPS_ENV: &str = "SLUICE_MODEL_OPS";
/// How many of the latest operations a failure shows.
const LOG_TAIL_LINES: usize = 40;
/// A value shown in a failure (an operation, a store's answer) is cut to this many bytes, so
/// that a large record neither floods the message nor costs its full formatting on every step.
const SHOWN_BYTES_MAX: usize = 600;

/// splitmix64: tiny, fast, and every seed (zero included) gives a good stream, which is all
/// a test needs to be replayable.
pub(crate) struct Rng {
    state: u64,
}

impl Rng {
    pub(crate) fn new(seed: u64) -> Rng {
        Rng { state: seed }
    }

    pub(crate) fn next_u64(&mut self) -> u64 {
        self.state = self.state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.state;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform enough in `0..n` for a test (the modulo bias is below 2^-50 for small `n`).
    pub(crate) fn below(&mut self, n: u64) -> u64 {
        assert!(n > 0, "below(0)");
        self.next_u64() % n
    }

    pub(crate) fn index(&mut self, len: usize) -> usize {
        self.below(len as u64) as usize
    }

    pub(crate) fn one_in(&mut self, n: u64) -> bool {
        self.below(n) == 0
    }

    pub(crate) fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.index(items.len())]
    }

    /// In `low..=high`; for small ranges only.
    pub(crate) fn between(&mut self, low: i64, high: i64) -> i64 {
        low + self.below((high - low + 1) as u64) as i64
    }

    /// The index of a weight, each chosen in proportion to its weight.
    pub(crate) fn weighted(&mut self, weights: &[u64]) -> usize {
        let mut draw = self.below(weights.iter().sum());
        for (i, weight) in weights.iter().enumerate() {
            if draw < *weight {
                return i;
            }
            draw -= weight;
        }
        unreachable!("the draw is below the sum of the weights")
    }
}

/// The run's seed: `SLUICE_MODEL_SEED`, or one drawn from the clock. Always printed, so that
/// any failure can be replayed.
pub(crate) fn seed() -> u64 {
    let seed = match std::env::var(SEED_ENV) {
        Ok(text) => text
            .trim()
            .parse()
            .unwrap_or_else(|_| panic!("{SEED_ENV} is not a u64: {text:?}")),
        Err(_) => {
            // Two tests started in the same nanosecond still differ by process id.
            let nanos = SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .map(|elapsed| elapsed.as_nanos() as u64)
                .unwrap_or(0);
            Rng::new(nanos ^ u64::from(std::process::id()).rotate_left(32)).next_u64()
        }
    };
    eprintln!("store model seed: {seed}");
    seed
}

/// How many operations a test makes: `SLUICE_MODEL_OPS`, or the test's default.
pub(crate) fn ops(default: usize) -> usize {
    match std::env::var(OPS_ENV) {
        Ok(text) => text
            .trim()
            .parse()
            .unwrap_or_else(|_| panic!("{OPS_ENV} is not a count: {text:?}")),
        Err(_) => default,
    }
}

/// How the store is restarted between two operations (see the module comment).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Restart {
    Clean,
    Drop,
    CrashImage,
}

impl Restart {
    /// A clean restart or a drop, one as likely as the other.
    pub(crate) fn clean_or_drop(rng: &mut Rng) -> Restart {
        if rng.one_in(2) {
            Restart::Clean
        } else {
            Restart::Drop
        }
    }
}

/// What a run did, printed at its end so that a passing run shows what it covered.
#[derive(Debug, Default)]
pub(crate) struct Stats {
    pub(crate) ops: usize,
    pub(crate) clean_restarts: usize,
    pub(crate) drop_restarts: usize,
    pub(crate) crash_images: usize,
    /// Writes in flight at a crash image that the copy held, and that it did not.
    pub(crate) in_flight_landed: usize,
    pub(crate) in_flight_lost: usize,
}

impl Stats {
    pub(crate) fn count_restart(&mut self, how: Restart) {
        match how {
            Restart::Clean => self.clean_restarts += 1,
            Restart::Drop => self.drop_restarts += 1,
            Restart::CrashImage => self.crash_images += 1,
        }
    }
}

/// The latest operations of a run, for the failure message.
pub(crate) struct OpLog {
    seed: u64,
    ops: usize,
    step: usize,
    next_step: usize,
    lines: VecDeque<String>,
}

impl OpLog {
    pub(crate) fn new(seed: u64, ops: usize) -> OpLog {
        OpLog {
            seed,
            ops,
            step: 0,
            next_step: 0,
            lines: VecDeque::new(),
        }
    }

    pub(crate) fn record(&mut self, step: usize, op: &dyn Debug) {
        self.step = step;
        self.next_step = step + 1;
        self.push(format!("{step}: {}", shown(op)));
    }

    /// Record an operation as the step after the latest one recorded.
    pub(crate) fn record_next(&mut self, op: &dyn Debug) {
        self.record(self.next_step, op);
    }

    /// Something learned while an operation ran, such as whether a write in flight landed.
    pub(crate) fn note(&mut self, note: String) {
        self.push(format!("   {note}"));
    }

    fn push(&mut self, line: String) {
        if self.lines.len() == LOG_TAIL_LINES {
            self.lines.pop_front();
        }
        self.lines.push_back(line);
    }

    /// The error of a failed step, with what is needed to replay it.
    pub(crate) fn failure(&self, error: io::Error) -> io::Error {
        let mut message = format!(
            "store model failed at step {} of {} (replay with {SEED_ENV}={} {OPS_ENV}={}): \
             {error}\nlatest operations:",
            self.step, self.ops, self.seed, self.ops
        );
        for line in &self.lines {
            message.push_str("\n  ");
            message.push_str(line);
        }
        io::Error::new(error.kind(), message)
    }
}

/// `Ok` when the store answers what the model holds, else an error naming the read.
pub(crate) fn same<T: PartialEq + Debug>(
    read: impl FnOnce() -> String,
    store: T,
    model: T,
) -> io::Result<()> {
    if store == model {
        return Ok(());
    }
    Err(io::Error::other(format!(
        "{}: the store has {}, the model {}",
        read(),
        shown(&store),
        shown(&model)
    )))
}

/// The value's debug form, cut to [`SHOWN_BYTES_MAX`].
pub(crate) fn shown(value: &dyn Debug) -> String {
    let mut capped = Capped(String::new());
    // Formatting stops with an error once the cap is reached, which is the point.
    let full = write!(capped, "{value:?}").is_ok();
    let mut text = capped.0;
    if !full {
        text.push_str(" …");
    }
    text
}

/// A string that takes writes until it holds [`SHOWN_BYTES_MAX`] bytes, then refuses them.
struct Capped(String);

impl fmt::Write for Capped {
    fn write_str(&mut self, piece: &str) -> fmt::Result {
        let room = SHOWN_BYTES_MAX - self.0.len();
        if piece.len() <= room {
            self.0.push_str(piece);
            return Ok(());
        }
        let mut cut = room;
        while !piece.is_char_boundary(cut) {
            cut -= 1;
        }
        self.0.push_str(&piece[..cut]);
        Err(fmt::Error)
    }
}

/// Whether a write in flight at a crash image landed: `Some(true)` when the copy holds what
/// the write leaves, `Some(false)` when it holds what was there before, `None` (a torn write)
/// when it holds neither.
pub(crate) fn landed<T: PartialEq>(stored: &T, before: &T, after: &T) -> Option<bool> {
    if stored == after {
        Some(true)
    } else if stored == before {
        Some(false)
    } else {
        None
    }
}

/// A store the model tests restart: opened on a directory, closed for a clean restart.
pub(crate) trait ModelStore: Sized {
    fn open(dir: &Path) -> io::Result<Self>;
    async fn close(self) -> io::Result<()>;
}

impl ModelStore for SledOffsetStore {
    fn open(dir: &Path) -> io::Result<Self> {
        SledOffsetStore::open(dir)
    }

    async fn close(self) -> io::Result<()> {
        SledOffsetStore::close(self).await
    }
}

impl ModelStore for SledTxnStore {
    fn open(dir: &Path) -> io::Result<Self> {
        SledTxnStore::open(dir)
    }

    async fn close(self) -> io::Result<()> {
        SledTxnStore::close(self).await
    }
}

/// One run of a store's model test: the store, reopened by every restart, its
/// directories, the model it must match, and what the run did.
pub(crate) struct Harness<S, M> {
    dirs: Dirs,
    store: Option<S>,
    pub(crate) model: M,
    pub(crate) stats: Stats,
}

impl<S: ModelStore, M: Default> Harness<S, M> {
    fn open() -> io::Result<Harness<S, M>> {
        let dirs = Dirs::new()?;
        let store = S::open(dirs.current())?;
        Ok(Harness {
            dirs,
            store: Some(store),
            model: M::default(),
            stats: Stats::default(),
        })
    }

    pub(crate) fn store(&self) -> io::Result<&S> {
        self.store
            .as_ref()
            .ok_or_else(|| io::Error::other("the store was not reopened"))
    }

    fn take_store(&mut self) -> io::Result<S> {
        self.store
            .take()
            .ok_or_else(|| io::Error::other("the store was not reopened"))
    }

    /// Restart the store `how`, and open it again. With a crash image, `in_flight` (if there
    /// is one) is begun by `start` on the store left behind, and then settled on the copy.
    pub(crate) async fn restart<W>(
        &mut self,
        how: Restart,
        in_flight: Option<&W>,
        start: impl FnOnce(&S, &W) -> CommitFuture,
        log: &mut OpLog,
    ) -> io::Result<()>
    where
        Self: ModelRun<Write = W>,
    {
        self.stats.count_restart(how);
        let store = self.take_store()?;
        match how {
            Restart::Clean => store.close().await?,
            Restart::Drop => {
                drop(store);
                wait_until_released(self.dirs.current())?;
            }
            Restart::CrashImage => {
                let started = in_flight.map(|write| start(&store, write));
                crash_image(&mut self.dirs, store, started).await?;
            }
        }
        self.store = Some(S::open(self.dirs.current())?);
        if let Some(write) = in_flight {
            self.settle_in_flight(write, log).await?;
        }
        Ok(())
    }

    /// After a crash image: note and count whether the write in flight (`what`) landed,
    /// await `again`, the same write made once more, and take `after`, the model with it.
    pub(crate) async fn settled(
        &mut self,
        what: &str,
        landed: bool,
        again: CommitFuture,
        after: M,
        log: &mut OpLog,
    ) -> io::Result<()> {
        log.note(format!(
            "the {what} in flight {}",
            if landed { "landed" } else { "was lost" }
        ));
        again.await?;
        if landed {
            self.stats.in_flight_landed += 1;
        } else {
            self.stats.in_flight_lost += 1;
        }
        self.model = after;
        Ok(())
    }
}

/// One store's model test, implemented on its [`Harness`]: its operations, how they change
/// the store and the model, and how the two are compared.
pub(crate) trait ModelRun {
    type Op: Debug;
    /// A write that may be in flight at a crash image.
    type Write;

    fn next_op(&self, rng: &mut Rng) -> Self::Op;
    async fn apply(&mut self, op: &Self::Op, log: &mut OpLog) -> io::Result<()>;
    /// Every read of the store against the model.
    fn check(&self) -> io::Result<()>;
    /// After a crash image with `write` in flight: the copy must hold all of it or none of
    /// it; then it is made again (see [`Harness::settled`]).
    async fn settle_in_flight(&mut self, write: &Self::Write, log: &mut OpLog) -> io::Result<()>;
    /// The steps after the random ones; they end with the store reopened and checked.
    async fn finish(&mut self, log: &mut OpLog) -> io::Result<()>;

    /// A step of `finish`: recorded after the latest, applied, then checked.
    async fn step(&mut self, op: Self::Op, log: &mut OpLog) -> io::Result<()> {
        log.record_next(&op);
        self.apply(&op, log).await?;
        self.check()
    }
}

/// The body of a store's model test: a seeded run of `default_ops` operations (or
/// `SLUICE_MODEL_OPS`), which panics with the latest operations if the store and the model
/// part ways.
pub(crate) async fn check_model<S: ModelStore, M: Default>(default_ops: usize)
where
    Harness<S, M>: ModelRun,
{
    let seed = seed();
    match run::<S, M>(seed, ops(default_ops)).await {
        Ok(stats) => eprintln!("store model: {stats:?}"),
        // Displayed, not debug-printed, so that the operations come one a line.
        Err(e) => panic!("{e}"),
    }
}

async fn run<S: ModelStore, M: Default>(seed: u64, ops: usize) -> io::Result<Stats>
where
    Harness<S, M>: ModelRun,
{
    let mut rng = Rng::new(seed);
    let mut log = OpLog::new(seed, ops);
    let mut run = Harness::<S, M>::open()?;
    for step in 0..ops {
        let op = run.next_op(&mut rng);
        log.record(step, &op);
        let result = match run.apply(&op, &mut log).await {
            Ok(()) => run.check(),
            Err(e) => Err(e),
        };
        result.map_err(|e| log.failure(e))?;
        run.stats.ops += 1;
    }
    let finished: io::Result<()> = async {
        run.finish(&mut log).await?;
        run.take_store()?.close().await
    }
    .await;
    finished.map_err(|e| log.failure(e))?;
    Ok(run.stats)
}

/// Poll a write once, so that it is queued, without waiting for it.
pub(crate) fn start(future: &mut CommitFuture) -> Option<io::Result<()>> {
    match future
        .as_mut()
        .poll(&mut Context::from_waker(Waker::noop()))
    {
        Poll::Ready(result) => Some(result),
        Poll::Pending => None,
    }
}

/// A crash image with `started` (a write begun on `store`, or none) in flight: the write
/// is polled once so it is queued, the directory copied, then the write left to finish
/// on the abandoned store, which is dropped; only the copy is checked afterwards.
pub(crate) async fn crash_image<S>(
    dirs: &mut Dirs,
    store: S,
    mut started: Option<CommitFuture>,
) -> io::Result<()> {
    let early = started.as_mut().and_then(start);
    let abandoned = dirs.take_crash_image()?;
    if let Some(future) = started {
        match early {
            Some(result) => result?,
            None => future.await?,
        }
    }
    drop(store);
    remove_abandoned(&abandoned)
}

/// Await every write, first polling each in order, so that they are queued in that order and
/// may share one flush.
pub(crate) async fn join_in_order(mut futures: Vec<CommitFuture>) -> Vec<io::Result<()>> {
    let mut results: Vec<Option<io::Result<()>>> = futures.iter().map(|_| None).collect();
    std::future::poll_fn(|cx| {
        let mut done = true;
        for (future, result) in futures.iter_mut().zip(results.iter_mut()) {
            if result.is_none() {
                match future.as_mut().poll(cx) {
                    Poll::Ready(answer) => *result = Some(answer),
                    Poll::Pending => done = false,
                }
            }
        }
        if done {
            Poll::Ready(())
        } else {
            Poll::Pending
        }
    })
    .await;
    results.into_iter().flatten().collect()
}

/// The directories of one run: the store's current one, and a new one for each crash image.
pub(crate) struct Dirs {
    root: tempfile::TempDir,
    current: PathBuf,
    images: usize,
}

impl Dirs {
    pub(crate) fn new() -> io::Result<Dirs> {
        let root = tempfile::tempdir()?;
        let current = root.path().join("store");
        Ok(Dirs {
            root,
            current,
            images: 0,
        })
    }

    pub(crate) fn current(&self) -> &Path {
        &self.current
    }

    /// Copy the open store's directory, as a killed process would leave it, and make the
    /// copy current. The old directory is returned, to be removed once its store is gone.
    pub(crate) fn take_crash_image(&mut self) -> io::Result<PathBuf> {
        self.images += 1;
        let image = self.root.path().join(format!("image-{}", self.images));
        copy_dir(&self.current, &image)?;
        Ok(std::mem::replace(&mut self.current, image))
    }
}

/// Remove a directory abandoned for a crash image, once its dropped store let go of it.
pub(crate) fn remove_abandoned(dir: &Path) -> io::Result<()> {
    wait_until_released(dir)?;
    std::fs::remove_dir_all(dir)
}

/// Copy a directory that an open sled database may be writing to, as a killed process would
/// leave it.
pub(crate) fn copy_dir(from: &Path, to: &Path) -> io::Result<()> {
    std::fs::create_dir_all(to)?;
    for entry in std::fs::read_dir(from)? {
        let entry = entry?;
        let target = to.join(entry.file_name());
        if entry.file_type()?.is_dir() {
            copy_dir(&entry.path(), &target)?;
            continue;
        }
        match std::fs::copy(entry.path(), &target) {
            Ok(_) => {}
            // sled removed it (an old blob or snapshot) between the listing and the copy: a
            // crash at that moment would not have it either.
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}
