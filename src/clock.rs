//! Injected time. Everything that expires, rolls or retains reads the time from a
//! `Clock` handed to it, so tests can drive it; nothing below `server` calls
//! `SystemTime::now()` itself. Two readings: the wall clock (`now_ms`: record
//! timestamps, retention, everything Kafka measures in epoch milliseconds) and a
//! monotonic one (`monotonic_ms`: intervals that must not jump with the wall
//! clock, such as a follower's replication lag).

use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::{Instant, SystemTime, UNIX_EPOCH};

/// Milliseconds since the Unix epoch, the unit of every Kafka timestamp.
pub trait Clock: Send + Sync + 'static {
    fn now_ms(&self) -> i64;

    /// Milliseconds on a clock that never goes back nor jumps with the wall
    /// clock; its origin is arbitrary, so only differences mean anything.
    fn monotonic_ms(&self) -> i64;
}

/// The origin of `SystemClock::monotonic_ms`: the first reading in the process.
fn monotonic_origin() -> Instant {
    static ORIGIN: OnceLock<Instant> = OnceLock::new();
    *ORIGIN.get_or_init(Instant::now)
}

/// The wall clock.
#[derive(Debug, Default, Clone, Copy)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now_ms(&self) -> i64 {
        let since_epoch = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap_or_default();
        i64::try_from(since_epoch.as_millis()).unwrap_or(i64::MAX)
    }

    fn monotonic_ms(&self) -> i64 {
        // Starts well above zero, so that "never" (0 or -1) stays far in the past.
        const ORIGIN_MS: i64 = 1 << 40;
        let elapsed = monotonic_origin().elapsed().as_millis();
        ORIGIN_MS.saturating_add(i64::try_from(elapsed).unwrap_or(i64::MAX - ORIGIN_MS))
    }
}

/// A clock that only moves when a test moves it. Shared across tasks through `Arc`.
/// Both readings move together, except by `jump_wall_ms`, a wall-clock jump.
#[derive(Debug, Default, Clone)]
pub struct ManualClock {
    now_ms: Arc<AtomicI64>,
    /// The wall clock's lead over the monotonic reading.
    wall_offset_ms: Arc<AtomicI64>,
}

impl ManualClock {
    pub fn new(start_ms: i64) -> ManualClock {
        ManualClock {
            now_ms: Arc::new(AtomicI64::new(start_ms)),
            wall_offset_ms: Arc::new(AtomicI64::new(0)),
        }
    }

    pub fn advance_ms(&self, delta_ms: i64) {
        self.now_ms.fetch_add(delta_ms, Ordering::SeqCst);
    }

    pub fn set_ms(&self, now_ms: i64) {
        let offset = self.wall_offset_ms.load(Ordering::SeqCst);
        self.now_ms.store(now_ms - offset, Ordering::SeqCst);
    }

    /// The wall clock jumps by `delta_ms` (back when negative); the monotonic
    /// reading does not move.
    pub fn jump_wall_ms(&self, delta_ms: i64) {
        self.wall_offset_ms.fetch_add(delta_ms, Ordering::SeqCst);
    }
}

impl Clock for ManualClock {
    fn now_ms(&self) -> i64 {
        self.now_ms.load(Ordering::SeqCst) + self.wall_offset_ms.load(Ordering::SeqCst)
    }

    fn monotonic_ms(&self) -> i64 {
        self.now_ms.load(Ordering::SeqCst)
    }
}
