//! Group commit. One task owns every fsync of partition logs: produces that must
//! be durable before they are acknowledged, and the flush.messages / flush.ms
//! policies, all queue here. The task drains whatever is queued, fsyncs each
//! partition named once (covering every append made before the fsync started),
//! then answers all the waiters it covered. The queue is bounded; a full queue
//! makes producers wait, which is the backpressure a slow disk should cause.

use std::collections::HashMap;
use std::io;
use std::sync::Arc;

use tokio::sync::{mpsc, oneshot};

use super::partition::Partition;
use crate::clock::Clock;
use crate::limits::FLUSH_WAITERS_MAX;

struct FlushRequest {
    partition: Arc<Partition>,
    /// Offsets below this must be durable before `done` is answered.
    end_offset: i64,
    done: Option<oneshot::Sender<io::Result<()>>>,
}

/// Handle to the flush task; cheap to clone.
#[derive(Clone)]
pub struct Flusher {
    requests: mpsc::Sender<FlushRequest>,
}

impl Flusher {
    pub fn start(clock: Arc<dyn Clock>) -> Flusher {
        let (requests, receiver) = mpsc::channel(FLUSH_WAITERS_MAX);
        tokio::spawn(run(receiver, clock));
        Flusher { requests }
    }

    /// Waits until every offset below `end_offset` of `partition` is fsynced.
    pub async fn wait_durable(
        &self,
        partition: &Arc<Partition>,
        end_offset: i64,
    ) -> io::Result<()> {
        if partition.flushed_offset() >= end_offset {
            return Ok(());
        }
        let (done, wait) = oneshot::channel();
        let request = FlushRequest {
            partition: Arc::clone(partition),
            end_offset,
            done: Some(done),
        };
        self.requests
            .send(request)
            .await
            .map_err(|_| io::Error::other("flusher stopped"))?;
        wait.await
            .map_err(|_| io::Error::other("flusher stopped"))?
    }

    /// Asks for an fsync without waiting (flush policies); dropped if the queue is
    /// full, since a flush already queued will cover it.
    pub fn request(&self, partition: &Arc<Partition>) {
        let request = FlushRequest {
            partition: Arc::clone(partition),
            end_offset: partition.high_watermark(),
            done: None,
        };
        let _ = self.requests.try_send(request);
    }
}

async fn run(mut receiver: mpsc::Receiver<FlushRequest>, clock: Arc<dyn Clock>) {
    let mut batch = Vec::new();
    while receiver.recv_many(&mut batch, FLUSH_WAITERS_MAX).await > 0 {
        flush_batch(std::mem::take(&mut batch), &clock).await;
    }
}

async fn flush_batch(batch: Vec<FlushRequest>, clock: &Arc<dyn Clock>) {
    let mut targets = HashMap::new();
    for request in &batch {
        let key = Arc::as_ptr(&request.partition) as usize;
        targets
            .entry(key)
            .or_insert_with(|| Arc::clone(&request.partition));
    }
    let partitions: Vec<Arc<Partition>> = targets.into_values().collect();
    let work = partitions.clone();
    let clock = Arc::clone(clock);
    let outcome = tokio::task::spawn_blocking(move || {
        work.iter()
            .map(|partition| {
                let target = partition.lock_log().as_ref().map(|log| log.flush_target());
                let Some(target) = target else {
                    return Ok(i64::MAX);
                };
                target.sync()?;
                partition.mark_flushed(target.end_offset, clock.now_ms());
                Ok(target.end_offset)
            })
            .collect::<Vec<io::Result<i64>>>()
    })
    .await;
    let results: HashMap<usize, io::Result<i64>> = match outcome {
        Ok(results) => partitions
            .iter()
            .map(|p| Arc::as_ptr(p) as usize)
            .zip(results)
            .collect(),
        Err(join_error) => {
            tracing::error!(%join_error, "flush task failed");
            HashMap::new()
        }
    };
    for request in batch {
        let key = Arc::as_ptr(&request.partition) as usize;
        let answer = match results.get(&key) {
            Some(Ok(flushed)) if *flushed >= request.end_offset => Ok(()),
            Some(Ok(_)) => Err(io::Error::other("fsync did not cover the append")),
            Some(Err(error)) => Err(io::Error::new(error.kind(), error.to_string())),
            None => Err(io::Error::other("flush failed")),
        };
        if let Some(done) = request.done {
            let _ = done.send(answer);
        }
    }
}
