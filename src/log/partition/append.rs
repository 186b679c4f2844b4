//! Appending and rolling. An append is all-or-nothing: the whole record set is
//! validated (batch headers, then producer state) before anything is written, offsets are assigned from the log end offset
//! on a private copy of the bytes, and one positional write puts it in the active
//! segment.

use bytes::Bytes;

use super::producers::ProducerAnalysis;
use super::PartitionLog;
use crate::log::batch::{self, BatchHeader, NO_TIMESTAMP};
use crate::log::producer_state::AppendOrigin;
use crate::log::segment::{Segment, RELATIVE_OFFSET_MAX};
use crate::log::validate::{validate_record_set, ValidatedRecords};
use crate::log::{AppendInfo, LogError, TimestampType};
use crate::types::{Offset, VerificationGuard};

/// A record set with offsets assigned, ready to be written.
struct AssignedRecords {
    bytes: Vec<u8>,
    /// Each batch's position in `bytes` and its header as rewritten.
    batches: Vec<(usize, BatchHeader)>,
    max_timestamp: i64,
}

impl PartitionLog {
    /// Validates every batch of `records` (lengths, magic, CRC32C, `max_message_bytes`,
    /// client-only rules, timestamps), checks the batches of idempotent and
    /// transactional producers against the producer state (epoch, sequence, transaction
    /// state), rolls the active segment if it is full or old, assigns offsets from the
    /// log end offset, stamps `leader_epoch` (and for LogAppendTime topics the append
    /// time, recomputing the CRC), writes the batches without fsync and indexes them,
    /// then updates the producer state. Nothing is written when any batch is invalid;
    /// a retried duplicate of one of a producer's last five batches writes nothing and
    /// answers with the offsets it was first written at. Records are decoded only
    /// where a batch header lacks its newest timestamp.
    pub fn append(
        &mut self,
        records: &Bytes,
        leader_epoch: i32,
        now_ms: i64,
    ) -> Result<AppendInfo, LogError> {
        self.append_from(records, leader_epoch, now_ms, AppendOrigin::Client, None)
    }

    /// `append` of a client's batches as KIP-890 verifies them: a transactional
    /// batch of a producer with no transaction open here (the first of its
    /// transaction) is refused with InvalidTxnState unless `guard` is the
    /// producer's verification still under way (`start_txn_verification`, taken
    /// before the coordinator was asked): a marker appended since then ended
    /// the transaction the coordinator vouched for, and the batch would open
    /// one that nobody ends.
    pub fn append_verified(
        &mut self,
        records: &Bytes,
        leader_epoch: i32,
        now_ms: i64,
        guard: Option<VerificationGuard>,
    ) -> Result<AppendInfo, LogError> {
        let origin = AppendOrigin::Client;
        self.append_from(records, leader_epoch, now_ms, origin, Some(guard))
    }

    /// `append_verified` of a coordinator's own transactional batches (a group
    /// coordinator's TxnOffsetCommit records).
    pub fn append_as_coordinator_verified(
        &mut self,
        records: &Bytes,
        leader_epoch: i32,
        now_ms: i64,
        guard: Option<VerificationGuard>,
    ) -> Result<AppendInfo, LogError> {
        let origin = AppendOrigin::Coordinator;
        self.append_from(records, leader_epoch, now_ms, origin, Some(guard))
    }

    /// The producer's verification guard for `append_verified`, to take before
    /// its transaction coordinator is asked; None when the producer's
    /// transaction is open here (its batches need no verification).
    pub fn start_txn_verification(
        &mut self,
        producer_id: i64,
        now_ms: i64,
    ) -> Option<VerificationGuard> {
        if self.producers.has_ongoing_txn(producer_id) {
            return None;
        }
        Some(self.producers.start_verification(producer_id, now_ms))
    }

    /// `append` of a coordinator's own batches (Kafka's `AppendOrigin.Coordinator`):
    /// a transactional batch's producer epoch is checked, its sequence is not, and
    /// it is never taken for a duplicate.
    pub fn append_as_coordinator(
        &mut self,
        records: &Bytes,
        leader_epoch: i32,
        now_ms: i64,
    ) -> Result<AppendInfo, LogError> {
        self.append_from(
            records,
            leader_epoch,
            now_ms,
            AppendOrigin::Coordinator,
            None,
        )
    }

    fn append_from(
        &mut self,
        records: &Bytes,
        leader_epoch: i32,
        now_ms: i64,
        origin: AppendOrigin,
        verification: Option<Option<VerificationGuard>>,
    ) -> Result<AppendInfo, LogError> {
        let validated = validate_record_set(records, &self.config, now_ms)?;
        if let Some(guard) = verification {
            self.check_verified(&validated, guard)?;
        }
        if validated.offset_count - 1 > RELATIVE_OFFSET_MAX {
            return Err(LogError::CorruptMessage(
                "record set claims more offsets than a segment can hold".to_string(),
            ));
        }
        let first_offset = self.log_end_offset;
        let last_offset = first_offset + validated.offset_count - 1;
        // Batches of plain producers (no producer id) skip producer state entirely.
        let producer_updates = if validated.batches.iter().any(|b| b.header.has_producer_id()) {
            match self.analyze_producers(&validated, first_offset, now_ms, origin)? {
                ProducerAnalysis::Duplicate(batch) => {
                    return Ok(self.duplicate_append_info(batch, &validated))
                }
                ProducerAnalysis::Updates(updates) => updates,
            }
        } else {
            Vec::new()
        };
        let assigned = self.assign_offsets(records, &validated, leader_epoch, now_ms);
        self.write(
            &assigned.bytes,
            &assigned.batches,
            last_offset,
            leader_epoch,
            now_ms,
        )?;
        for update in producer_updates {
            self.producers.update(update);
        }
        Ok(AppendInfo {
            first_offset: Offset::new(first_offset),
            last_offset: Offset::new(last_offset),
            log_append_time: match self.config.timestamp_type {
                TimestampType::LogAppendTime => now_ms,
                TimestampType::CreateTime => NO_TIMESTAMP,
            },
            log_start_offset: Offset::new(self.log_start_offset),
            max_timestamp: assigned.max_timestamp,
            record_count: validated.record_count,
            batch_count: validated.batches.len() as u32,
            duplicate: false,
        })
    }

    /// KIP-890: every transactional batch of a producer whose transaction is not
    /// open here needs `guard` to be its verification under way.
    fn check_verified(
        &self,
        validated: &ValidatedRecords,
        guard: Option<VerificationGuard>,
    ) -> Result<(), LogError> {
        for span in &validated.batches {
            let header = &span.header;
            if !header.is_transactional()
                || header.is_control()
                || self.producers.has_ongoing_txn(header.producer_id)
            {
                continue;
            }
            let producer_id = header.producer_id;
            if !guard.is_some_and(|guard| self.producers.holds_verification(producer_id, guard)) {
                return Err(LogError::InvalidTxnState(format!(
                    "the transaction of producer {producer_id} was not verified here, or ended since it was"
                )));
            }
        }
        Ok(())
    }

    /// Writes batches whose offsets are assigned (from the log end offset on an
    /// append, as the leader wrote them on a follower) through `last_offset`: rolls
    /// first if the active segment is full or old, records `leader_epoch` at the
    /// first batch's base offset when it is newer than the cache's latest, appends
    /// without fsync and indexes.
    pub(super) fn write(
        &mut self,
        bytes: &[u8],
        batches: &[(usize, BatchHeader)],
        last_offset: i64,
        leader_epoch: i32,
        now_ms: i64,
    ) -> Result<(), LogError> {
        let first_offset = batches
            .first()
            .map_or(self.log_end_offset, |(_, header)| header.base_offset);
        if self.should_roll(bytes.len() as u64, last_offset, now_ms) {
            self.roll(now_ms)?;
        }
        self.maybe_assign_epoch(leader_epoch, first_offset)?;
        let index_interval_bytes = self.config.index_interval_bytes;
        self.active_mut()
            .append(bytes, batches, index_interval_bytes)?;
        self.log_end_offset = last_offset + 1;
        assert_eq!(
            self.log_end_offset,
            self.active().next_offset(),
            "append must end where the segment ends"
        );
        Ok(())
    }

    /// Rolls the active segment when it is older than `segment.ms`, even without
    /// appends; called periodically. An empty segment is never rolled.
    pub fn maybe_roll(&mut self, now_ms: i64) -> Result<bool, LogError> {
        let active = self.active();
        if active.is_empty() || active.rolling_age_ms(now_ms) <= self.config.segment_ms {
            return Ok(false);
        }
        self.roll(now_ms)?;
        Ok(true)
    }

    /// Kafka's `shouldRoll`, minus index fullness (indexes here grow as needed): the
    /// incoming bytes would pass `segment.bytes`, the segment is older than
    /// `segment.ms`, or the new offsets would not fit the segment's relative range.
    fn should_roll(&self, incoming_bytes: u64, last_offset: i64, now_ms: i64) -> bool {
        let active = self.active();
        !active.is_empty()
            && (active.size_bytes() + incoming_bytes > self.config.effective_segment_bytes()
                || active.rolling_age_ms(now_ms) > self.config.segment_ms
                || !active.can_hold_offset(last_offset))
    }

    /// Starts a new active segment at the log end offset. The rolled segment's data
    /// is not fsynced here: it stays in `flush_target` until a flush covers it, as
    /// Kafka flushes rolled segments asynchronously. The producer state at the new
    /// base offset is snapshotted first (written and fsynced, as Kafka does on roll).
    pub fn roll(&mut self, now_ms: i64) -> Result<(), LogError> {
        let base_offset = self.log_end_offset;
        assert!(
            base_offset > self.active().base_offset(),
            "only a non-empty segment is rolled"
        );
        self.take_producer_snapshot()?;
        self.active_mut().on_become_inactive();
        let segment = Segment::create(&self.dir, base_offset, now_ms, &self.open_files)?;
        self.segments.push(segment);
        self.bound_unsynced_files();
        tracing::debug!(tp = %self.tp, base_offset, "rolled segment");
        Ok(())
    }

    /// Rewrites baseOffset and partitionLeaderEpoch of every batch, for
    /// LogAppendTime topics the timestamp type and maxTimestamp, and for a batch
    /// whose maxTimestamp validation took from its records that maxTimestamp (both
    /// recomputing the CRC).
    fn assign_offsets(
        &self,
        records: &[u8],
        validated: &ValidatedRecords,
        leader_epoch: i32,
        now_ms: i64,
    ) -> AssignedRecords {
        let log_append_time = self.config.timestamp_type == TimestampType::LogAppendTime;
        let mut bytes = records.to_vec();
        let mut batches = Vec::with_capacity(validated.batches.len());
        let mut next_offset = self.log_end_offset;
        let mut max_timestamp = NO_TIMESTAMP;
        for span in &validated.batches {
            let batch = &mut bytes[span.position..span.position + span.header.size_bytes()];
            batch::set_base_offset(batch, next_offset);
            batch::set_partition_leader_epoch(batch, leader_epoch);
            if log_append_time {
                batch::set_log_append_time(batch, now_ms);
            } else if span.max_timestamp_derived {
                batch::set_max_timestamp(batch, span.header.max_timestamp);
            }
            let header =
                BatchHeader::parse_prefix(batch).expect("a validated batch holds a whole header");
            assert_eq!(
                header.size_bytes(),
                span.header.size_bytes(),
                "rewriting must not change a batch's length"
            );
            max_timestamp = max_timestamp.max(header.max_timestamp);
            next_offset = header.last_offset() + 1;
            batches.push((span.position, header));
        }
        AssignedRecords {
            bytes,
            batches,
            max_timestamp,
        }
    }

    /// Records a newer leader epoch starting at `first_offset`. Written before the data:
    /// if the data write then fails, the entry names the log end offset, which the next
    /// append in this epoch starts at anyway.
    pub(super) fn maybe_assign_epoch(
        &mut self,
        leader_epoch: i32,
        first_offset: i64,
    ) -> Result<(), LogError> {
        let newer = self
            .epochs
            .latest_epoch()
            .is_none_or(|latest| leader_epoch > latest);
        if leader_epoch >= 0 && newer {
            self.epochs.assign(leader_epoch, first_offset)?;
        }
        Ok(())
    }
}
