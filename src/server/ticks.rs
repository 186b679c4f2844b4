//! The clock of the broker's periodic tasks: ticks one period apart, the
//! first one period from now, a late tick delaying the next instead of
//! bursting; and the wait for the next tick that ends when the broker stops.

use std::time::Duration;

use tokio::sync::watch;
use tokio::time::{Interval, MissedTickBehavior};

/// Ticks every `period`, the first one period from now.
pub fn every(period: Duration) -> Interval {
    let mut ticks = tokio::time::interval(period);
    ticks.set_missed_tick_behavior(MissedTickBehavior::Delay);
    ticks.reset();
    ticks
}

/// Waits for the next tick: true then, false once `stopped` changes.
pub async fn next_tick(ticks: &mut Interval, stopped: &mut watch::Receiver<bool>) -> bool {
    tokio::select! {
        _ = stopped.changed() => false,
        _ = ticks.tick() => true,
    }
}
