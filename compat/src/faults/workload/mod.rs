//! The workloads, each with its client (what talks to the cluster), its
//! generator (what it does, and when) and its part of the check: `produce`
//! (the librdkafka producers, the reader during the run and the final read;
//! the write check is `checker::check`), `python` (a second client's
//! producer, whose writes join the same history), `group` (consumers
//! committing in a group), `copy` (a transactional consume-transform-produce)
//! and `admin` (topics created and grown during the faults). All of them
//! read or write the run's topic, `TOPIC`.

pub mod admin;
pub mod copy;
pub mod group;
pub mod produce;
pub mod python;

use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// The topic the workload writes.
pub const TOPIC: &str = "faults";
pub const PARTITIONS: i32 = 3;
/// Sends a producer keeps in flight.
pub const IN_FLIGHT: usize = 10;
/// librdkafka's request and delivery bounds for the workload, in ms: a write
/// not acknowledged by then is recorded as failed (it may still be written).
pub const REQUEST_TIMEOUT_MS: &str = "5000";
pub const DELIVERY_TIMEOUT_MS: &str = "30000";
/// How often a stop checks whether the threads finished, in ms.
const JOIN_POLL_MS: u64 = 50;

/// Joins the threads that finish within `limit_ms`: how many did not, or
/// Err if one panicked.
pub(crate) fn join_within(threads: Vec<JoinHandle<()>>, limit_ms: u64) -> Result<usize, ()> {
    let deadline = Instant::now() + Duration::from_millis(limit_ms);
    let mut waiting = threads;
    while !waiting.is_empty() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(JOIN_POLL_MS));
        let (finished, running): (Vec<_>, Vec<_>) =
            waiting.into_iter().partition(JoinHandle::is_finished);
        for thread in finished {
            thread.join().map_err(|_| ())?;
        }
        waiting = running;
    }
    Ok(waiting.len())
}
