//! Appending to and reading back a partition of one of Kafka's internal topics
//! (`__consumer_offsets`, `__transaction_state`) as its coordinator does: a
//! batch of keyed records appended on the leader with acks=all and waited for
//! until the high watermark passed it (with `--fsync-before-ack`, also until it
//! is fsynced here); and the whole partition read back, in order, to its log
//! end, when a coordinator loads it after an election.

use std::io;
use std::sync::Arc;
use std::time::Duration;

use crate::limits::{INTERNAL_LOG_LOAD_READ_BYTES, INTERNAL_LOG_WRITE_TIMEOUT_MS};
use crate::log::{keyed_batch, keyed_records, KeyedRecord};
use crate::replica::{off_the_worker, Partition, PartitionError, ReplicaManager};
use crate::types::TopicPartition;

#[derive(Clone)]
pub struct InternalLog {
    replicas: Arc<ReplicaManager>,
    topic: &'static str,
    fsync_before_ack: bool,
}

impl InternalLog {
    pub fn new(
        replicas: Arc<ReplicaManager>,
        topic: &'static str,
        fsync_before_ack: bool,
    ) -> InternalLog {
        InternalLog {
            replicas,
            topic,
            fsync_before_ack,
        }
    }

    pub fn now_ms(&self) -> i64 {
        self.replicas.clock().now_ms()
    }

    /// The partition, if this broker leads it. Blocking.
    pub fn led(&self, partition: i32) -> Result<Arc<Partition>, PartitionError> {
        self.replicas
            .led(&TopicPartition::new(self.topic, partition))
    }

    /// Appends `records` to `partition` with acks=all and waits until they are
    /// committed (at most `INTERNAL_LOG_WRITE_TIMEOUT_MS`, then Timeout).
    /// Blocking calls run off the worker.
    pub async fn append(
        &self,
        partition: i32,
        records: Vec<KeyedRecord>,
    ) -> Result<(), PartitionError> {
        if records.is_empty() {
            return Ok(());
        }
        let now_ms = self.now_ms();
        let batch = keyed_batch(records, now_ms)
            .map_err(|e| PartitionError::Storage(io::Error::other(e)))?;
        let led = off_the_worker(|| self.led(partition))?;
        led.check_enough_replicas()?;
        let appended = off_the_worker(|| led.append(&batch, now_ms))?;
        let end_offset = appended.info.last_offset + 1;
        let wait = Duration::from_millis(INTERNAL_LOG_WRITE_TIMEOUT_MS);
        tokio::time::timeout(wait, led.wait_committed(end_offset, appended.generation))
            .await
            .map_err(|_| PartitionError::Timeout)??;
        if self.fsync_before_ack {
            self.replicas
                .flusher()
                .wait_durable(&led, end_offset)
                .await
                .map_err(PartitionError::Storage)?;
        }
        Ok(())
    }

    /// `append` from a blocking thread (a coordinator's store calls).
    pub fn append_blocking(
        &self,
        partition: i32,
        records: Vec<KeyedRecord>,
    ) -> Result<(), PartitionError> {
        let runtime = tokio::runtime::Handle::try_current()
            .map_err(|e| PartitionError::Storage(io::Error::other(e)))?;
        runtime.block_on(self.append(partition, records))
    }

    /// Every data record of the partition, in order, from its log start to its
    /// log end (this broker leads it, so its end is what the followers will
    /// have). Blocking.
    pub fn read_all(&self, led: &Arc<Partition>) -> Result<Vec<KeyedRecord>, PartitionError> {
        let end = led.with_log(|log| Ok(log.log_end_offset()))?;
        let mut offset = led.log_start_offset();
        let mut out = Vec::new();
        while offset < end {
            let read = led.with_log(|log| {
                log.read(offset, INTERNAL_LOG_LOAD_READ_BYTES, end, true)
                    .map_err(PartitionError::Log)
            })?;
            let Some(slice) = read.records else { break };
            let bytes = slice.read().map_err(PartitionError::Storage)?;
            let (records, next) = keyed_records(bytes).map_err(|e| {
                PartitionError::Storage(io::Error::new(io::ErrorKind::InvalidData, e))
            })?;
            out.extend(records);
            // Past the last batch read, records or none (compaction may empty one).
            offset = next.unwrap_or(end).max(offset + 1);
        }
        Ok(out)
    }

    /// Whether the partition's log has never been written.
    pub fn is_empty(&self, led: &Arc<Partition>) -> Result<bool, PartitionError> {
        led.with_log(|log| Ok(log.log_end_offset() == 0))
    }
}
