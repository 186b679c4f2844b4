//! The log cleaner's threads: each wakes every `log.cleaner.backoff.ms`, and on
//! the blocking pool cleans the compacted logs due for it (`ReplicaManager::
//! run_cleaner`), with its share of the dedupe buffer and of the I/O rate.

use std::collections::HashSet;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::sync::watch;

use crate::config::CleanerSettings;
use crate::replica::ReplicaManager;
use crate::types::TopicPartition;

/// Paces a cleaner to `bytes_per_second`: after each read or write it sleeps
/// until its bytes so far fit the rate since it started.
struct IoThrottle {
    bytes_per_second: Option<f64>,
    started: Instant,
    bytes: u64,
}

impl IoThrottle {
    fn account(&mut self, bytes: u64) {
        let Some(rate) = self.bytes_per_second else {
            return;
        };
        self.bytes += bytes;
        let due = Duration::from_secs_f64(self.bytes as f64 / rate);
        let elapsed = self.started.elapsed();
        if due > elapsed {
            std::thread::sleep(due - elapsed);
        }
    }
}

/// Starts `settings.threads` cleaners; they end when `stopped` turns true.
pub fn spawn(
    tasks: &mut tokio::task::JoinSet<()>,
    replicas: &Arc<ReplicaManager>,
    settings: &CleanerSettings,
    stopped: &watch::Receiver<bool>,
) {
    if !settings.enable {
        return;
    }
    let busy: Arc<Mutex<HashSet<TopicPartition>>> = Arc::default();
    let threads = settings.threads as u64;
    for _ in 0..threads {
        let replicas = Arc::clone(replicas);
        let busy = Arc::clone(&busy);
        let mut stopped = stopped.clone();
        let dedupe_buffer_bytes = settings.dedupe_buffer_bytes / threads;
        let rate = settings.io_max_bytes_per_second.map(|r| r / threads as f64);
        let backoff = Duration::from_millis(settings.backoff_ms);
        tasks.spawn(async move {
            loop {
                tokio::select! {
                    _ = stopped.changed() => return,
                    _ = tokio::time::sleep(backoff) => {}
                }
                let replicas = Arc::clone(&replicas);
                let busy = Arc::clone(&busy);
                let _ = tokio::task::spawn_blocking(move || {
                    let mut throttle = IoThrottle {
                        bytes_per_second: rate,
                        started: Instant::now(),
                        bytes: 0,
                    };
                    replicas.run_cleaner(dedupe_buffer_bytes, &busy, &mut |bytes| {
                        throttle.account(bytes)
                    });
                })
                .await;
            }
        });
    }
}
