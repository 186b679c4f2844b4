//! The offset requests `GroupService` takes and what it answers, as plain
//! values. The handler has already done the checks that need the metadata
//! image or the protocol crate (unknown partitions, metadata size); the
//! service does the group's checks and the store's work in one step, in the
//! group's order (see `order`).

use crate::types::TxnVerification;
use std::collections::HashSet;

use bytes::Bytes;

use crate::store::CommittedOffset;

/// Offsets of one group, by topic and partition, as the store keeps them.
pub type GroupOffsets = Vec<(String, i32, CommittedOffset)>;

/// An OffsetCommit: who commits, and the offsets that passed their own checks.
#[derive(Debug, Clone, PartialEq)]
pub struct OffsetCommit {
    pub group_id: String,
    pub member_id: String,
    pub group_instance_id: Option<String>,
    pub generation_id: i32,
    pub offsets: GroupOffsets,
}

/// What became of an OffsetCommit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CommitOutcome {
    /// The group refused it (Kafka's `validateOffsetCommit`): every partition of
    /// the request answers this code.
    Refused(i16),
    /// The group admitted it; the offsets given were stored (NONE) or the store
    /// failed (NOT_COORDINATOR, as Kafka maps a failed offsets-log write).
    Admitted(i16),
}

/// A TxnOffsetCommit the transaction coordinator has admitted.
pub struct TxnOffsetCommit {
    pub group_id: String,
    pub member_id: String,
    pub group_instance_id: Option<String>,
    pub generation_id: i32,
    pub producer_id: i64,
    pub producer_epoch: i16,
    pub offsets: GroupOffsets,
    /// Dropped once the offsets are stored or refused, whatever the caller does
    /// meanwhile: the transaction coordinator's guard, which keeps the
    /// transaction from ending while its offsets are being stored.
    pub hold: Box<dyn Send>,
    /// How the offsets partition admits their append: `Held` when the
    /// transaction coordinator is here (`hold`), else the guard taken before
    /// the coordinator on another broker was asked.
    pub verification: TxnVerification,
}

/// What OffsetFetch reads of one group.
#[derive(Debug, Clone, PartialEq)]
pub struct FetchedOffsets {
    /// Every committed offset of the group, sorted by topic then partition.
    pub committed: GroupOffsets,
    /// Partitions with offsets pending in an open transaction (asked for with
    /// `require_stable` only; empty otherwise).
    pub pending: Vec<(String, i32)>,
}

/// The topics a group's members subscribe to, from its protocol type and its
/// members' metadata: protocol knowledge the handler supplies, so that
/// OffsetDelete's check runs in the same step as the deletion.
pub type SubscribedTopics = fn(&str, &[Bytes]) -> HashSet<String>;

/// (group, topic, partition, committed offset), for the metrics scrape.
pub type CommittedRow = (String, String, i32, i64);

/// Committed offsets across groups, at most as many as asked for.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct CommittedRows {
    /// Sorted by group, topic and partition.
    pub rows: Vec<CommittedRow>,
    /// True if some were left out to stay within the bound.
    pub truncated: bool,
}

/// A store write refused with the Kafka error its request is to be answered
/// with (the offsets partition's leader moved, too few in-sync replicas, ...),
/// carried inside the `io::Error` of a store call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StoreRefused(pub i16);

impl std::fmt::Display for StoreRefused {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "the offsets log refused the write (error {})", self.0)
    }
}

impl std::error::Error for StoreRefused {}

impl StoreRefused {
    /// The refusal `error` carries, itself or as the source of what it holds
    /// (a refusal may come wrapped with its cause).
    pub fn of(error: &std::io::Error) -> Option<StoreRefused> {
        let mut inner: Option<&(dyn std::error::Error + 'static)> = error
            .get_ref()
            .map(|inner| inner as &(dyn std::error::Error + 'static));
        while let Some(error) = inner {
            if let Some(refused) = error.downcast_ref::<StoreRefused>() {
                return Some(*refused);
            }
            inner = error.source();
        }
        None
    }
}

/// The error a failed store call is answered with: the one it was refused
/// with, else NOT_COORDINATOR (Kafka maps a failed offsets-log append,
/// KAFKA_STORAGE_ERROR, to the retriable NOT_COORDINATOR).
pub fn store_error_code(error: &std::io::Error) -> i16 {
    StoreRefused::of(error).map_or(crate::error_code::NOT_COORDINATOR, |refused| refused.0)
}
