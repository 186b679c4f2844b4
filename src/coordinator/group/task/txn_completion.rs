//! A transaction's end on partitions of the offsets topic: the producer's
//! pending offsets in every group placed there become committed offsets
//! (`commit`) or are dropped. The whole completion runs in the task: first a
//! read of the groups in which the producer has pending offsets, then each
//! group's completion as a store operation in the group's order (as any other
//! offset write of the group).
//!
//! A partition that is loading after an election is completed only once its
//! load is done, against what the load left, as Kafka's GroupMetadataManager
//! does. The load replays the partition's log into the cache from a read that
//! may have ended before the transaction's marker; a completion run beside it
//! either finds nothing pending yet (the load has still to write them) or is
//! overwritten by what the load writes. Either way the offsets stay pending
//! (the committed offset reads older) until the next load. Held until the
//! load is done, the completion meets the load's pending offsets and commits
//! them, or, when the load read the marker already, finds nothing pending and
//! is a no-op, so holding is always safe. A partition resigned while its
//! completions are held fails them (the callers retry, and the next leader's
//! load reads the marker from the log). Partitions loaded here or not led here
//! (and every partition with `Ownership::Every`) are completed at once.
//!
//! The caller gets one answer for the whole completion: Ok once every group's
//! completion is durable, else the first error met.
//!
//! Bounded: at most `TXN_COMPLETIONS_HELD_MAX` (completion, partition) pairs
//! are held; a completion that would pass it is answered with an error at
//! once, and its transaction coordinator retries it after its backoff (a
//! completion is idempotent). Completions running (not held) are bounded by
//! the commands the task takes: each is one caller's command, and its groups'
//! completions are store operations.

use std::collections::{BTreeSet, HashMap};
use std::io;
use std::sync::Arc;

use super::store_work::blocking;
use super::{Command, Task, Then};
use crate::coordinator::actor::Answer;
use crate::coordinator::group::order::Store;
use crate::internal_topics::group_partition;
use crate::limits::TXN_COMPLETIONS_HELD_MAX;

/// Names one completion among those in flight.
pub(super) type CompletionId = u64;

/// One transaction's end, until every part of it is done.
struct Completion {
    producer_id: i64,
    commit: bool,
    /// Parts not done yet: each partition held for its load, each read of
    /// the groups of some partitions, each group's completion.
    outstanding: usize,
    /// The first error a part met.
    failed: Option<io::Error>,
    answer: Answer<io::Result<()>>,
}

/// The completions in flight, and those held for loads.
#[derive(Default)]
pub(super) struct Completions {
    next_id: CompletionId,
    running: HashMap<CompletionId, Completion>,
    /// Offsets partition loading here → the completions waiting for its load.
    held: HashMap<i32, Vec<CompletionId>>,
    /// Entries of `held`, across partitions.
    held_count: usize,
}

impl Completions {
    fn start(&mut self, completion: Completion) -> CompletionId {
        self.next_id = self.next_id.wrapping_add(1);
        self.running.insert(self.next_id, completion);
        self.next_id
    }

    fn hold(&mut self, partition: i32, completion: CompletionId) {
        self.held.entry(partition).or_default().push(completion);
        self.held_count += 1;
    }

    /// The completions held for `partition`, no longer held.
    fn release(&mut self, partition: i32) -> Vec<CompletionId> {
        let released = self.held.remove(&partition).unwrap_or_default();
        self.held_count -= released.len();
        released
    }
}

impl Task {
    /// Whether `partition` is loading here (elected, its load not done).
    fn is_loading_here(&self, partition: i32) -> bool {
        self.owned
            .epoch(partition)
            .is_some_and(|leader_epoch| self.owned.is_loading(partition, leader_epoch))
    }

    /// A transaction ended on these offsets partitions: its producer's pending
    /// offsets there are completed now, or, for a partition loading here, once
    /// its load is done.
    pub(super) fn complete_txn_offsets(
        &mut self,
        producer_id: i64,
        offsets_partitions: Vec<i32>,
        commit: bool,
        answer: Answer<io::Result<()>>,
    ) {
        let partitions: BTreeSet<i32> = offsets_partitions.into_iter().collect();
        let (loading, ready): (Vec<i32>, Vec<i32>) = partitions
            .into_iter()
            .partition(|partition| self.is_loading_here(*partition));
        if self.completions.held_count + loading.len() > TXN_COMPLETIONS_HELD_MAX {
            // The caller may have gone away; its coordinator retries either way.
            let _ = answer.send(Err(io::Error::other(format!(
                "{TXN_COMPLETIONS_HELD_MAX} transaction completions already wait for loads"
            ))));
            return;
        }
        let outstanding = loading.len() + usize::from(!ready.is_empty());
        if outstanding == 0 {
            let _ = answer.send(Ok(()));
            return;
        }
        let completion = self.completions.start(Completion {
            producer_id,
            commit,
            outstanding,
            failed: None,
            answer,
        });
        for partition in loading {
            self.completions.hold(partition, completion);
        }
        if !ready.is_empty() {
            self.read_txn_groups(completion, ready);
        }
    }

    /// Reads the groups placed on `partitions` in which the completion's
    /// producer has pending offsets; `txn_groups` takes them.
    fn read_txn_groups(&mut self, completion: CompletionId, partitions: Vec<i32>) {
        let Some(producer_id) = self
            .completions
            .running
            .get(&completion)
            .map(|c| c.producer_id)
        else {
            return;
        };
        let pending = Arc::clone(&self.stores.pending);
        self.background(async move {
            let groups = blocking(move || {
                let groups = pending.pending_groups(producer_id)?;
                Ok(groups
                    .into_iter()
                    .filter(|group_id| partitions.contains(&group_partition(group_id)))
                    .collect())
            })
            .await;
            Then::TxnGroups { completion, groups }
        });
    }

    /// The groups a completion's read found: each is completed in its own
    /// order.
    pub(super) fn txn_groups(&mut self, completion: CompletionId, groups: io::Result<Vec<String>>) {
        let groups = match groups {
            Ok(groups) => groups,
            Err(error) => return self.txn_part_done(completion, Err(error)),
        };
        let Some(running) = self.completions.running.get_mut(&completion) else {
            return;
        };
        // The read's part gives way to one part per group, counted before any
        // can finish.
        running.outstanding += groups.len();
        let (producer_id, commit) = (running.producer_id, running.commit);
        for group_id in groups {
            self.admit(Command::CompleteGroupTxn {
                group_id,
                producer_id,
                commit,
                completion,
            });
        }
        self.txn_part_done(completion, Ok(()));
    }

    /// A producer's pending offsets in one group committed or dropped, as the
    /// group's store operation.
    pub(super) fn complete_group_txn(
        &mut self,
        group_id: String,
        producer_id: i64,
        commit: bool,
        completion: CompletionId,
    ) {
        let pending = Arc::clone(&self.stores.pending);
        let group = group_id.clone();
        let completed = blocking(move || pending.complete_pending(producer_id, &[group], commit));
        let group = group_id.clone();
        self.store_op(group_id, Store::Offsets, async move {
            let outcome = completed.await;
            tracing::debug!(group = %group, producer_id, commit, ok = outcome.is_ok(), "transactional offsets completed");
            Then::TxnGroupCompleted {
                completion,
                outcome,
            }
        });
    }

    /// One part of a completion is done; the last one answers the caller.
    pub(super) fn txn_part_done(&mut self, completion: CompletionId, outcome: io::Result<()>) {
        let Some(running) = self.completions.running.get_mut(&completion) else {
            return;
        };
        if let Err(error) = outcome {
            running.failed.get_or_insert(error);
        }
        running.outstanding -= 1;
        if running.outstanding > 0 {
            return;
        }
        if let Some(done) = self.completions.running.remove(&completion) {
            // The caller may have gone away; its coordinator retries either way.
            let _ = done.answer.send(done.failed.map_or(Ok(()), Err));
        }
    }

    /// After a load ends or leadership changes: the completions held for a
    /// partition that is loaded now run against what the load left; those
    /// held for a partition no longer led here fail (its next leader's load
    /// reads the marker from the log). A partition still loading (in this or
    /// a later leader epoch) keeps them.
    pub(super) fn settle_held_completions(&mut self) {
        let partitions: Vec<i32> = self.completions.held.keys().copied().collect();
        for partition in partitions {
            if self.is_loading_here(partition) {
                continue;
            }
            let loaded = self.owned.refusal(partition).is_none();
            for completion in self.completions.release(partition) {
                if loaded {
                    self.read_txn_groups(completion, vec![partition]);
                } else {
                    let resigned = io::Error::other(format!(
                        "offsets partition {partition} was resigned while it loaded"
                    ));
                    self.txn_part_done(completion, Err(resigned));
                }
            }
        }
    }
}
