//! Idempotent and transactional producers on the log, after Kafka's `UnifiedLog`:
//! the producer-state checks of an append, transaction markers and the transaction
//! index, the first unstable offset, aborted transactions for read_committed
//! fetches, and producer state snapshots with the replay that rebuilds the state.
//!
//! Snapshots (`<offset:020>.snapshot`) are taken when a segment rolls (at the new
//! base offset) and by `flush` (at the log end, so a clean shutdown restarts without
//! replay). Loading takes the newest readable snapshot at or below the recovery
//! start and replays batch headers from there to the log end; transaction index
//! entries of markers at or after the recovery start are rewritten by the replay.

use std::collections::BTreeSet;
use std::fs;
use std::io;
use std::sync::Arc;

use super::PartitionLog;
use crate::config::defaults::PRODUCER_ID_EXPIRATION_MS_DEFAULT;
use crate::log::batch::BatchHeader;
use crate::log::checkpoint::{sync_dir, write_atomically_unsynced};
use crate::log::control::{self, MarkerRecord};
use crate::log::files::{offset_file_name, parse_offset_file_name, SNAPSHOT_FILE_SUFFIX};
use crate::log::producer_state::{
    decode_snapshot, encode_snapshot, AppendOrigin, BatchMetadata, CompletedTxn,
    ProducerAppendInfo, ProducerStateManager,
};
use crate::log::validate::ValidatedRecords;
use crate::log::{
    batch, AbortedTxn, AppendInfo, LogError, ProducerSummary, TimestampType, TxnMarker,
};
use crate::types::{Offset, ProducerEpoch};

/// What the producer state says of an append.
pub(super) enum ProducerAnalysis {
    /// A retry of a batch already written: answer with it, write nothing.
    Duplicate(BatchMetadata),
    /// The changes to apply once the batches are written, one per producer.
    Updates(Vec<ProducerAppendInfo>),
}

impl PartitionLog {
    /// Kafka's `analyzeAndValidateProducerState` for a client append: each batch with
    /// a producer id is checked against the state as of the previous batch; a batch
    /// that repeats one of its producer's last five ends the analysis as a duplicate.
    pub(super) fn analyze_producers(
        &self,
        validated: &ValidatedRecords,
        first_offset: i64,
        now_ms: i64,
        origin: AppendOrigin,
    ) -> Result<ProducerAnalysis, LogError> {
        let log_append_time = self.config.timestamp_type == TimestampType::LogAppendTime;
        let mut updates: Vec<ProducerAppendInfo> = Vec::new();
        let mut offset = first_offset;
        for span in &validated.batches {
            let header = &span.header;
            let batch_first_offset = offset;
            offset += i64::from(header.last_offset_delta) + 1;
            if !header.has_producer_id() {
                continue;
            }
            if origin == AppendOrigin::Client {
                let existing = self.producers.last_entry(header.producer_id);
                if let Some(duplicate) = existing.and_then(|e| e.find_duplicate(header)) {
                    // A transactional batch repeating one whose transaction a
                    // marker has ended is no retry of the transaction under way
                    // (a client ends a transaction only once its batches are
                    // answered): the producer reused the sequence numbers of
                    // batches it dropped when it aborted, not knowing they were
                    // written. Answered as a duplicate, its records would count
                    // as written into a transaction that never holds them.
                    if header.is_transactional()
                        && !self.producers.has_ongoing_txn(header.producer_id)
                    {
                        return Err(LogError::OutOfOrderSequence(format!(
                            "producer {} repeats sequence numbers {}..{} of a batch of a transaction that has ended",
                            header.producer_id,
                            header.base_sequence,
                            header.last_sequence()
                        )));
                    }
                    return Ok(ProducerAnalysis::Duplicate(duplicate));
                }
            }
            let index = match updates
                .iter()
                .position(|u| u.producer_id() == header.producer_id)
            {
                Some(index) => index,
                None => {
                    updates.push(self.producers.prepare_update(header.producer_id, origin));
                    updates.len() - 1
                }
            };
            // The timestamp the batch will be stored with.
            let timestamp = if log_append_time {
                now_ms
            } else {
                header.max_timestamp
            };
            updates[index].append_data_batch(header, batch_first_offset, timestamp)?;
        }
        Ok(ProducerAnalysis::Updates(updates))
    }

    /// What Kafka answers for a duplicate: the offsets and timestamp of the batch as
    /// first written (the timestamp is reported as the log append time whatever the
    /// topic's timestamp type, as Kafka's `UnifiedLog.append` does).
    pub(super) fn duplicate_append_info(
        &self,
        batch: BatchMetadata,
        validated: &ValidatedRecords,
    ) -> AppendInfo {
        AppendInfo {
            first_offset: Offset::new(batch.first_offset),
            last_offset: Offset::new(batch.last_offset),
            log_append_time: batch.timestamp,
            log_start_offset: Offset::new(self.log_start_offset),
            max_timestamp: batch.timestamp,
            record_count: validated.record_count,
            batch_count: validated.batches.len() as u32,
            duplicate: true,
        }
    }

    /// Writes a commit or abort marker for the transaction coordinator, as Kafka's
    /// `EndTransactionMarker` control batch, after Kafka's fencing checks (the
    /// producer epoch may not go back, nor the coordinator epoch). It ends the
    /// producer's ongoing transaction; an abort is recorded in the active segment's
    /// transaction index. A producer with no ongoing transaction still gets its
    /// marker written, as in Kafka. Returns the marker's offset.
    pub fn append_txn_marker(
        &mut self,
        marker: &TxnMarker,
        leader_epoch: i32,
        now_ms: i64,
    ) -> Result<Offset, LogError> {
        if marker.producer_id < 0 {
            return Err(LogError::InvalidRecord(format!(
                "transaction marker for producer id {}",
                marker.producer_id
            )));
        }
        let offset = self.log_end_offset;
        let mut update = self
            .producers
            .prepare_update(marker.producer_id, AppendOrigin::Coordinator);
        let completed = update.append_end_txn_marker(
            marker.producer_epoch,
            marker.coordinator_epoch,
            marker.commit,
            offset,
            now_ms,
        )?;
        let record = MarkerRecord {
            commit: marker.commit,
            coordinator_epoch: marker.coordinator_epoch,
        };
        let mut bytes = control::end_txn_marker_batch(
            offset,
            leader_epoch,
            marker.producer_id,
            marker.producer_epoch.get(),
            record,
            now_ms,
        );
        // As Kafka's validator, a LogAppendTime topic stamps every batch it appends.
        if self.config.timestamp_type == TimestampType::LogAppendTime {
            batch::set_log_append_time(&mut bytes, now_ms);
        }
        let header = BatchHeader::parse_prefix(&bytes).expect("a marker holds a whole header");
        self.write(&bytes, &[(0, header)], offset, leader_epoch, now_ms)?;
        if let Some(completed) = completed {
            self.complete_txn(&completed)?;
        }
        self.producers.update(update);
        // A verification taken before the marker vouched for the transaction
        // it ended.
        self.producers.end_verification(marker.producer_id);
        Ok(Offset::new(offset))
    }

    /// Records a transaction a marker just ended: an abort goes to the active segment's
    /// transaction index with the last stable offset it leaves.
    fn complete_txn(&mut self, completed: &CompletedTxn) -> Result<(), LogError> {
        if completed.aborted {
            let entry = AbortedTxn {
                producer_id: completed.producer_id,
                first_offset: completed.first_offset,
                last_offset: completed.last_offset,
                last_stable_offset: self.producers.last_stable_offset(completed),
            };
            self.active_mut().append_aborted_txn(entry)?;
        }
        self.producers.complete_txn(completed);
        Ok(())
    }

    /// Whether the producer has a transaction with data in this log that no marker
    /// has ended yet.
    pub fn has_ongoing_txn(&self, producer_id: i64) -> bool {
        self.producers.has_ongoing_txn(producer_id)
    }

    /// The first offset of the earliest ongoing transaction, never below the log start
    /// offset (Kafka's `firstUnstableOffset`).
    pub fn first_unstable_offset(&self) -> Option<i64> {
        self.producers
            .first_undecided_offset()
            .map(|offset| offset.max(self.log_start_offset))
    }

    /// The last stable offset under `high_watermark`: the first unstable offset
    /// capped by it.
    pub fn last_stable_offset(&self, high_watermark: i64) -> i64 {
        self.first_unstable_offset()
            .map_or(high_watermark, |offset| offset.min(high_watermark))
    }

    /// Kafka's `collectAbortedTransactions`: the aborted transactions overlapping
    /// `[fetch_offset, upper_bound_offset)`, from the segment holding `fetch_offset`
    /// on, stopping at the first entry whose last stable offset reaches the bound
    /// (no later abort can overlap the range).
    pub fn aborted_transactions(
        &self,
        fetch_offset: i64,
        upper_bound_offset: i64,
    ) -> Vec<AbortedTxn> {
        let mut found = Vec::new();
        for segment in &self.segments[self.segment_index_for(fetch_offset)..] {
            for entry in segment.aborted_txns() {
                if entry.last_offset >= fetch_offset && entry.first_offset < upper_bound_offset {
                    found.push(*entry);
                }
                if entry.last_stable_offset >= upper_bound_offset {
                    return found;
                }
            }
        }
        found
    }

    /// Every producer the log knows, ordered by producer id (DescribeProducers).
    pub fn producers(&self) -> Vec<ProducerSummary> {
        self.producers
            .entries()
            .into_iter()
            .map(|entry| entry.summary())
            .collect()
    }

    /// Forgets producers idle for `expiration_ms` (Kafka's
    /// `producer.id.expiration.ms`) that have no ongoing transaction. Returns how many.
    pub fn remove_expired_producers(&mut self, now_ms: i64, expiration_ms: i64) -> usize {
        self.producers.remove_expired(now_ms, expiration_ms)
    }

    /// Writes a snapshot of the producer state at the log end offset, atomically (temp
    /// file, rename) but without fsync: the next flush target syncs it and the directory,
    /// outside the partition lock. Until then a crash may lose it or leave it torn, which
    /// loading survives (its CRC is checked, and only snapshots at or below the recovery
    /// point are trusted, which a flush that covered it had to pass). One already there is replaced: the state
    /// at an offset changes without appends when producers expire or the log start
    /// offset moves.
    pub(super) fn take_producer_snapshot(&mut self) -> io::Result<()> {
        let offset = self.log_end_offset;
        let bytes = encode_snapshot(&self.producers.entries());
        let file = write_atomically_unsynced(
            &self
                .dir
                .join(offset_file_name(offset, SNAPSHOT_FILE_SUFFIX)),
            &bytes,
        )?;
        // Synced by the next flush, outside the partition lock (see `flush_target`).
        self.unsynced_snapshots.push(Arc::new(file));
        self.snapshots.insert(offset);
        Ok(())
    }

    /// After the log start offset moved: producers whose batches all fell below it
    /// are forgotten (Kafka's `truncateHead`), and so are the snapshots below it.
    /// Producers with no batch left (only markers) stay until they expire: they
    /// carry the coordinator epoch that fences a zombie coordinator's markers.
    pub(super) fn on_log_start_offset_moved(&mut self) -> io::Result<()> {
        self.producers.truncate_head(self.log_start_offset);
        let below: Vec<i64> = self
            .snapshots
            .range(..self.log_start_offset)
            .copied()
            .collect();
        self.delete_snapshots(&below)
    }

    /// Deletes the snapshot files at `offsets`.
    pub(super) fn delete_snapshots(&mut self, offsets: &[i64]) -> io::Result<()> {
        for &offset in offsets {
            self.snapshots.remove(&offset);
            match fs::remove_file(
                self.dir
                    .join(offset_file_name(offset, SNAPSHOT_FILE_SUFFIX)),
            ) {
                Err(error) if error.kind() != io::ErrorKind::NotFound => return Err(error),
                _ => {}
            }
        }
        Ok(())
    }

    /// Rebuilds the producer state after a load or a truncation: the newest readable
    /// snapshot at or below `recovery_start` (unreadable ones are deleted), else an
    /// empty state at the log start offset, then a replay of every batch header from
    /// there to the log end. Transaction index entries of markers at or after
    /// `recovery_start` are dropped and rewritten by the replay. With `now_ms`,
    /// expired producers are dropped as they are loaded.
    pub(super) fn rebuild_producer_state(
        &mut self,
        recovery_start: i64,
        now_ms: Option<i64>,
    ) -> Result<(), LogError> {
        let stale: Vec<i64> = self
            .snapshots
            .iter()
            .copied()
            .filter(|&o| o > self.log_end_offset || o < self.log_start_offset)
            .collect();
        self.delete_snapshots(&stale)?;
        let (start, mut producers) = self.newest_snapshot_at_or_below(recovery_start)?;
        producers.truncate_head(self.log_start_offset);
        if let Some(now_ms) = now_ms {
            producers.remove_expired(now_ms, PRODUCER_ID_EXPIRATION_MS_DEFAULT);
        }
        self.producers = producers;
        let index_rebuild_from = recovery_start.max(self.log_start_offset);
        for segment in &mut self.segments {
            segment.truncate_txn_index(index_rebuild_from)?;
        }
        self.replay_producers(start, index_rebuild_from)
    }

    fn newest_snapshot_at_or_below(
        &mut self,
        limit: i64,
    ) -> Result<(i64, ProducerStateManager), LogError> {
        let candidates: Vec<i64> = self.snapshots.range(..=limit).rev().copied().collect();
        for offset in candidates {
            let path = self
                .dir
                .join(offset_file_name(offset, SNAPSHOT_FILE_SUFFIX));
            let decoded = match fs::read(&path) {
                Ok(bytes) => decode_snapshot(&bytes),
                Err(error) if error.kind() == io::ErrorKind::NotFound => {
                    Err("file is missing".to_string())
                }
                Err(error) => return Err(error.into()),
            };
            match decoded {
                Ok(entries) => return Ok((offset, ProducerStateManager::from_entries(entries))),
                Err(reason) => {
                    tracing::warn!(tp = %self.tp, offset, %reason, "deleting unreadable producer snapshot");
                    self.delete_snapshots(&[offset])?;
                }
            }
        }
        Ok((self.log_start_offset, ProducerStateManager::new()))
    }

    /// Replays the batch headers from `from` (the batch holding it) to the log end
    /// into the producer state, never refusing a batch; aborts whose markers are at or
    /// after `index_rebuild_from` are appended to their segment's transaction index.
    fn replay_producers(&mut self, from: i64, index_rebuild_from: i64) -> Result<(), LogError> {
        self.producer_replay_start = (from < self.log_end_offset).then_some(from);
        if from >= self.log_end_offset {
            return Ok(());
        }
        tracing::info!(tp = %self.tp, from, to = self.log_end_offset, "replaying producer state");
        let first = self.segment_index_for(from);
        for i in first..self.segments.len() {
            let segment = &self.segments[i];
            let producers = &mut self.producers;
            let mut aborted = Vec::new();
            segment.scan_batches(from, |position, header| {
                if !header.has_producer_id() {
                    return Ok(());
                }
                let marker = if header.is_control() {
                    Some(segment.read_batch(position, header)?)
                } else {
                    None
                };
                if let Some(entry) = replay_batch(producers, header, marker.as_deref())? {
                    if entry.last_offset >= index_rebuild_from {
                        aborted.push(entry);
                    }
                }
                Ok(())
            })?;
            for entry in aborted {
                self.segments[i].append_aborted_txn(entry)?;
            }
        }
        Ok(())
    }

    /// A batch a leader sent, just written: the producer state follows it as a replay
    /// would, and an abort it ends goes to the active segment's transaction index.
    pub(super) fn replay_replicated_batch(
        &mut self,
        batch: &[u8],
        header: &BatchHeader,
    ) -> Result<(), LogError> {
        if !header.has_producer_id() {
            return Ok(());
        }
        let marker = header.is_control().then_some(batch);
        if let Some(entry) = replay_batch(&mut self.producers, header, marker)? {
            self.active_mut().append_aborted_txn(entry)?;
        }
        Ok(())
    }

    /// Where the last rebuild of the producer state started its replay (None: the
    /// snapshot was at the log end).
    #[cfg(test)]
    pub(crate) fn producer_replay_start(&self) -> Option<i64> {
        self.producer_replay_start
    }

    /// The snapshot offsets in the partition dir.
    pub(super) fn scan_snapshots(&mut self) -> io::Result<()> {
        let mut snapshots = BTreeSet::new();
        for entry in fs::read_dir(&self.dir)? {
            let name = entry?.file_name().to_string_lossy().into_owned();
            if let Some(offset) = parse_offset_file_name(&name, SNAPSHOT_FILE_SUFFIX) {
                snapshots.insert(offset);
            }
        }
        self.snapshots = snapshots;
        Ok(())
    }

    /// Forgets every producer and deletes every snapshot (the log restarts empty).
    pub(super) fn clear_producer_state(&mut self) -> io::Result<()> {
        self.producers = ProducerStateManager::new();
        let all: Vec<i64> = self.snapshots.iter().copied().collect();
        self.delete_snapshots(&all)?;
        sync_dir(&self.dir)
    }
}

/// One batch of a producer, already in the log, into the producer state without
/// refusing it (a replay on load, or a follower's append); `control` is the whole
/// batch when it is a control batch. Returns the aborted transaction a marker ended,
/// for the transaction index.
fn replay_batch(
    producers: &mut ProducerStateManager,
    header: &BatchHeader,
    control: Option<&[u8]>,
) -> Result<Option<AbortedTxn>, LogError> {
    let Some(bytes) = control else {
        let mut update = producers.prepare_update(header.producer_id, AppendOrigin::Replay);
        match update.append_data_batch(header, header.base_offset, header.max_timestamp) {
            Ok(()) => producers.update(update),
            Err(error) => {
                tracing::warn!(offset = header.base_offset, %error, "skipping a batch the producer state refuses")
            }
        }
        return Ok(None);
    };
    let Some(marker) = control::parse_end_txn_marker(bytes, header) else {
        tracing::warn!(
            offset = header.base_offset,
            "skipping a control batch that is not a transaction marker"
        );
        return Ok(None);
    };
    let mut update = producers.prepare_update(header.producer_id, AppendOrigin::Replay);
    let completed = update.append_end_txn_marker(
        ProducerEpoch::new(header.producer_epoch),
        marker.coordinator_epoch,
        marker.commit,
        header.base_offset,
        header.max_timestamp,
    )?;
    let mut aborted = None;
    if let Some(completed) = completed {
        if completed.aborted {
            aborted = Some(AbortedTxn {
                producer_id: completed.producer_id,
                first_offset: completed.first_offset,
                last_offset: completed.last_offset,
                last_stable_offset: producers.last_stable_offset(&completed),
            });
        }
        producers.complete_txn(&completed);
    }
    producers.update(update);
    Ok(aborted)
}
