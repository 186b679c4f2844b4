//! The coordinator task's store work: each offset API as one step (the
//! group's check in the coordinator, then the store operation run as the
//! group's `store_op`, which holds the group's later commands until it is
//! done), and the work over every group: persist rounds and offset expiry.
//! Blocking store calls go to the blocking pool through `blocking`; none runs
//! on a runtime worker.

use std::collections::HashSet;
use std::io;
use std::sync::Arc;

use bytes::Bytes;

use super::{Task, Then};
use crate::coordinator::actor::Answer;
use crate::coordinator::group::api::{JoinResponse, Reply, SyncResponse};
use crate::coordinator::group::offsets::{store_error_code, StoreRefused};
use crate::coordinator::group::offsets::{
    CommitOutcome, CommittedRows, FetchedOffsets, OffsetCommit, SubscribedTopics, TxnOffsetCommit,
};
use crate::coordinator::group::order::Store;
use crate::error_code;
use crate::internal_topics::group_partition;
use crate::store::{GroupRecord, OffsetStore};

/// Runs a blocking store call on the blocking pool.
pub(super) async fn blocking<T: Send + 'static>(
    call: impl FnOnce() -> io::Result<T> + Send + 'static,
) -> io::Result<T> {
    tokio::task::spawn_blocking(call)
        .await
        .map_err(io::Error::other)?
}

/// NONE, or the error a failed store write is answered with
/// (`store_error_code`).
fn storage_error(group_id: &str, what: &str, result: io::Result<()>) -> i16 {
    match result {
        Ok(()) => error_code::NONE,
        Err(error) => {
            log_store_error(group_id, what, &error);
            store_error_code(&error)
        }
    }
}

/// A refusal (the partition moved, too few replicas) is part of a cluster's
/// life; any other store failure is an error.
fn log_store_error(group_id: &str, what: &str, error: &io::Error) {
    if StoreRefused::of(error).is_some() {
        tracing::info!(group = %group_id, %error, "{what} refused");
    } else {
        tracing::error!(group = %group_id, %error, "{what} failed");
    }
}

/// Stores each changed group's record (every save is a write of its own);
/// returns the groups whose record could not be stored, for the next round,
/// each with whether it was refused (the offsets partition moved, too few
/// replicas) rather than failed.
fn save_records(
    offsets: &dyn OffsetStore,
    changed: Vec<(String, GroupRecord)>,
) -> Vec<(String, bool)> {
    let mut failed = Vec::new();
    for changed in changed {
        let group_id = changed.0.clone();
        if let Err(error) = save_record(offsets, changed) {
            log_store_error(&group_id, "storing the group's record", &error);
            failed.push((group_id, StoreRefused::of(&error).is_some()));
        }
    }
    failed
}

/// Stores one group's record.
fn save_record(
    offsets: &dyn OffsetStore,
    (group_id, record): (String, GroupRecord),
) -> io::Result<()> {
    offsets.save_group(&group_id, &record)
}

/// Committed offsets of every group, in order, at most `rows_max`.
pub(super) fn committed_rows(
    offsets: &dyn OffsetStore,
    rows_max: usize,
    served: Option<&HashSet<i32>>,
) -> io::Result<CommittedRows> {
    let mut out = CommittedRows::default();
    let groups = offsets
        .groups_with_offsets()?
        .into_iter()
        .filter(|group_id| {
            served.is_none_or(|partitions| partitions.contains(&group_partition(group_id)))
        });
    'groups: for group_id in groups {
        let Ok(committed) = offsets.fetch_group(&group_id) else {
            continue;
        };
        for (topic, partition, offset) in committed {
            if out.rows.len() == rows_max {
                out.truncated = true;
                break 'groups;
            }
            out.rows
                .push((group_id.clone(), topic, partition, offset.offset));
        }
    }
    out.rows.sort();
    Ok(out)
}

impl Task {
    /// OffsetCommit: checked against the group, then stored while the group's
    /// later commands wait for the fsync.
    pub(super) fn commit(
        &mut self,
        now_ms: i64,
        commit: OffsetCommit,
        answer: Answer<CommitOutcome>,
    ) {
        let OffsetCommit {
            group_id,
            member_id,
            group_instance_id,
            generation_id,
            offsets,
        } = commit;
        let admitted = self.coordinator.validate_commit(
            now_ms,
            &group_id,
            &member_id,
            group_instance_id.as_deref(),
            generation_id,
        );
        if admitted != error_code::NONE {
            let _ = answer.send(CommitOutcome::Refused(admitted));
            return;
        }
        if offsets.is_empty() {
            let _ = answer.send(CommitOutcome::Admitted(error_code::NONE));
            return;
        }
        let stored = self.stores.offsets.commit(&group_id, offsets);
        let group = group_id.clone();
        self.store_op(group_id, Store::Offsets, async move {
            let error = storage_error(&group, "storing committed offsets", stored.await);
            let _ = answer.send(CommitOutcome::Admitted(error));
            Then::Nothing
        });
    }

    /// TxnOffsetCommit: checked against the group, then stored as pending; the
    /// transaction's guard is let go once the store has answered.
    pub(super) fn txn_commit(&mut self, commit: TxnOffsetCommit, answer: Answer<i16>) {
        let TxnOffsetCommit {
            group_id,
            member_id,
            group_instance_id,
            generation_id,
            producer_id,
            producer_epoch,
            offsets,
            hold,
            verification,
        } = commit;
        let admitted = self.coordinator.validate_txn_commit(
            &group_id,
            &member_id,
            group_instance_id.as_deref(),
            generation_id,
        );
        if admitted != error_code::NONE || offsets.is_empty() {
            drop(hold);
            let _ = answer.send(admitted);
            return;
        }
        tracing::debug!(
            group = %group_id,
            producer_id,
            producer_epoch,
            offsets = ?offsets.iter().map(|(topic, partition, offset)| (topic.as_str(), *partition, offset.offset)).collect::<Vec<_>>(),
            "staging transactional offsets"
        );
        let staged = self.stores.pending.stage_verified(
            &group_id,
            producer_id,
            producer_epoch,
            offsets,
            verification,
        );
        let group = group_id.clone();
        self.store_op(group_id, Store::Offsets, async move {
            let stored = staged.await;
            tracing::debug!(group = %group, producer_id, ok = stored.is_ok(), "transactional offsets staged");
            // The transaction may end from here on: its offsets are stored or refused.
            drop(hold);
            let _ = answer.send(storage_error(
                &group,
                "storing transactional offsets",
                stored,
            ));
            Then::Nothing
        });
    }

    /// OffsetFetch: a read of the store after every earlier write of the group.
    pub(super) fn fetch(
        &mut self,
        group_id: String,
        require_stable: bool,
        answer: Answer<Result<FetchedOffsets, i16>>,
    ) {
        let offsets = Arc::clone(&self.stores.offsets);
        let pending = Arc::clone(&self.stores.pending);
        let group = group_id.clone();
        let read = blocking(move || {
            let pending = if require_stable {
                pending.pending_partitions(&group)?
            } else {
                Vec::new()
            };
            Ok(FetchedOffsets {
                committed: offsets.fetch_group(&group)?,
                pending,
            })
        });
        let group = group_id.clone();
        self.store_op(group_id, Store::Offsets, async move {
            let fetched = read.await.map_err(|error| {
                tracing::error!(group = %group, %error, "reading committed offsets failed");
                error_code::UNKNOWN_SERVER_ERROR
            });
            if let Ok(fetched) = &fetched {
                tracing::debug!(
                    group = %group,
                    require_stable,
                    committed = ?fetched.committed.iter().map(|(topic, partition, offset)| (topic.as_str(), *partition, offset.offset)).collect::<Vec<_>>(),
                    pending = ?fetched.pending,
                    "offsets fetched"
                );
            }
            let _ = answer.send(fetched);
            Then::Nothing
        });
    }

    /// DeleteGroups for one group: it leaves the coordinator at once (so no
    /// persist round saves its record again), then its offsets and record leave
    /// the store while its later commands wait; if the store fails it is put
    /// back as it was.
    pub(super) fn delete(&mut self, group_id: String, answer: Answer<i16>) {
        let record = self.coordinator.record(&group_id);
        let known = match self.coordinator.delete(&group_id) {
            error_code::NONE => true,
            // A group known only by its committed offsets is deletable too.
            error_code::GROUP_ID_NOT_FOUND => false,
            error => {
                let _ = answer.send(error);
                return;
            }
        };
        let offsets = Arc::clone(&self.stores.offsets);
        let group = group_id.clone();
        let removed = blocking(move || {
            if !known && offsets.fetch_group(&group)?.is_empty() {
                return Ok(false);
            }
            offsets.delete_group(&group)?;
            Ok(true)
        });
        let group = group_id.clone();
        self.store_op(group_id, Store::Offsets, async move {
            Then::Deleted {
                group_id: group,
                record: record.filter(|_| known),
                outcome: removed.await,
                answer,
            }
        });
    }

    pub(super) fn deleted(
        &mut self,
        group_id: &str,
        record: Option<GroupRecord>,
        outcome: io::Result<bool>,
        answer: Answer<i16>,
    ) {
        let error = match outcome {
            Ok(true) => error_code::NONE,
            Ok(false) => error_code::GROUP_ID_NOT_FOUND,
            Err(error) => {
                log_store_error(group_id, "deleting a group's offsets", &error);
                // Its commands were held meanwhile, so it comes back as it was.
                if let Some(record) = record {
                    let now_ms = self.clock.now_ms();
                    self.coordinator.restore(group_id, record, now_ms);
                    // What it holds may not be stored yet (an Empty record
                    // waits for a round): the next round stores it.
                    self.coordinator.forget_persisted(group_id);
                }
                store_error_code(&error)
            }
        };
        let _ = answer.send(error);
    }

    /// OffsetDelete: the subscription check against the group as it is now, and
    /// the deletion while the group's later commands wait.
    pub(super) fn delete_offsets(
        &mut self,
        group_id: String,
        topics: Vec<(String, Vec<i32>)>,
        subscribed: SubscribedTopics,
        answer: Answer<Result<HashSet<String>, i16>>,
    ) {
        let known = self.coordinator.record(&group_id).is_some();
        let described = self.coordinator.describe(&group_id);
        let metadata: Vec<Bytes> = described
            .members
            .iter()
            .map(|m| m.metadata.clone())
            .collect();
        let kept = subscribed(&described.protocol_type, &metadata);
        let deletable: Vec<(String, i32)> = topics
            .into_iter()
            .filter(|(topic, _)| !kept.contains(topic))
            .flat_map(|(topic, partitions)| partitions.into_iter().map(move |p| (topic.clone(), p)))
            .collect();
        let offsets = Arc::clone(&self.stores.offsets);
        let group = group_id.clone();
        let deleted = blocking(move || {
            // A read failure counts as no offsets, as a group unknown here is.
            if !known && !offsets.fetch_group(&group).is_ok_and(|o| !o.is_empty()) {
                return Ok(Err(error_code::GROUP_ID_NOT_FOUND));
            }
            if !deletable.is_empty() {
                offsets.delete_offsets(&group, &deletable)?;
            }
            Ok(Ok(()))
        });
        let group = group_id.clone();
        self.store_op(group_id, Store::Offsets, async move {
            let outcome = match deleted.await {
                Ok(Ok(())) => Ok(kept),
                Ok(Err(error)) => Err(error),
                Err(error) => {
                    log_store_error(&group, "deleting committed offsets", &error);
                    Err(store_error_code(&error))
                }
            };
            let _ = answer.send(outcome);
            Then::Nothing
        });
    }

    /// Starts storing the records of groups that changed, unless a round is in
    /// flight. A DeleteGroups of one of them waits for the round.
    pub(super) fn start_persist(&mut self) {
        if self.persisting {
            return;
        }
        // A group whose record a sync or join is storing is left to the next
        // round, so that two writes of its record never race to land last.
        let (busy, changed): (Vec<_>, Vec<_>) = self
            .coordinator
            .take_changed()
            .into_iter()
            .partition(|(group_id, _)| self.storing_records.contains(group_id));
        for (group_id, _) in busy {
            self.coordinator.forget_persisted(&group_id);
        }
        if changed.is_empty() {
            return;
        }
        let groups: Vec<String> = changed.iter().map(|(g, _)| g.clone()).collect();
        for group_id in &groups {
            self.order.begin_saving(group_id);
        }
        self.persisting = true;
        let offsets = Arc::clone(&self.stores.offsets);
        self.background(async move {
            let outcome = blocking(move || {
                let failed = save_records(offsets.as_ref(), changed);
                Ok(failed.into_iter().map(|(group_id, _)| group_id).collect())
            })
            .await;
            Then::Persisted { groups, outcome }
        });
    }

    /// Join and sync answers that hand something out go out once the group's
    /// record is stored, as Kafka stores the group before it answers: a sync
    /// handing out a generation's assignment (a coordinator taking the group
    /// over after a crash then restores that generation with its members, and
    /// never hands the same generation out again), and a join giving a static
    /// member's place to its new member id (the old one stays fenced). The
    /// group's later commands wait for the store. A record a persist round
    /// took is stored by then: joins and syncs wait for the round
    /// (`Access::Record`), and a round that failed gives the record back to be
    /// taken here.
    pub(super) fn answer_once_stored(&mut self, group_id: String, replies: Vec<Reply>) {
        let hands_out = replies.iter().any(|reply| match reply {
            Reply::Join(_, response) => response.error == error_code::NONE,
            Reply::Sync(_, response) => response.error == error_code::NONE,
        });
        let record = if hands_out {
            self.coordinator.take_changed_group(&group_id)
        } else {
            None
        };
        let Some(record) = record else {
            return self.deliver(replies);
        };
        let offsets = Arc::clone(&self.stores.offsets);
        let group = group_id.clone();
        self.storing_records.insert(group_id.clone());
        self.store_op(group_id, Store::Record, async move {
            let stored = blocking(move || save_record(offsets.as_ref(), record)).await;
            Then::RecordStored {
                error: storage_error(&group, "storing the group's record", stored),
                group_id: group,
                replies,
            }
        });
    }

    /// The group's record was stored: its answers go out; if it was not, each
    /// join and sync answer that handed something out carries the store's
    /// error instead (the members join again, as after Kafka's failed group
    /// store) and the record is stored by a later round. Unlike Kafka, a static
    /// member's replacement is not undone: its old member id stays fenced, and
    /// the instance's next join takes the place again.
    pub(super) fn record_stored(&mut self, group_id: &str, replies: Vec<Reply>, error: i16) {
        if error == error_code::NONE {
            return self.deliver(replies);
        }
        self.coordinator.forget_persisted(group_id);
        let failed = replies
            .into_iter()
            .map(|reply| match reply {
                Reply::Join(reply_to, response) if response.error == error_code::NONE => {
                    Reply::Join(reply_to, JoinResponse::error(&response.member_id, error))
                }
                Reply::Sync(reply_to, response) if response.error == error_code::NONE => {
                    Reply::Sync(reply_to, SyncResponse::error(error))
                }
                refusal => refusal,
            })
            .collect();
        self.deliver(failed);
    }

    /// Stores the records of groups that changed; with nothing in flight.
    pub(super) async fn persist_now(&mut self) -> io::Result<()> {
        let changed = self.coordinator.take_changed();
        if changed.is_empty() {
            return Ok(());
        }
        let offsets = Arc::clone(&self.stores.offsets);
        let failed = blocking(move || Ok(save_records(offsets.as_ref(), changed))).await?;
        // A record refused at shutdown (its partition already went to another
        // broker in the controlled shutdown) is the new coordinator's to keep,
        // as after a crash: only a store that failed makes the stop unclean.
        let failed = failed.iter().filter(|(_, refused)| !refused).count();
        if failed == 0 {
            Ok(())
        } else {
            Err(io::Error::other(format!(
                "the records of {failed} groups could not be stored"
            )))
        }
    }

    /// Starts expiring the committed offsets of empty groups past retention,
    /// unless an expiry is in flight. First, without holding anything, it reads
    /// which groups have no commit newer than the retention; then
    /// (`expire_candidates`) it holds those of them that are Empty and idle,
    /// and removes their offsets, checking the times again, so that no commit
    /// of theirs lands between what the store read and what it removes (Kafka
    /// expires each group under the group's lock).
    pub(super) fn start_expiry(&mut self) {
        if self.expiring {
            return;
        }
        let served = self.owned.served();
        let cutoff_ms = self
            .clock
            .now_ms()
            .saturating_sub(self.config.offsets_retention_ms);
        let offsets = Arc::clone(&self.stores.offsets);
        self.expiring = true;
        self.background(async move {
            let candidates = blocking(move || {
                let mut due = Vec::new();
                for group_id in offsets.groups_with_offsets()? {
                    let here = served
                        .as_ref()
                        .is_none_or(|p| p.contains(&group_partition(&group_id)));
                    if !here {
                        continue;
                    }
                    let newest = offsets
                        .fetch_group(&group_id)?
                        .iter()
                        .map(|(_, _, value)| value.commit_timestamp_ms)
                        .max();
                    if newest.is_some_and(|newest| newest < cutoff_ms) {
                        due.push(group_id);
                    }
                }
                Ok(due)
            });
            Then::ExpiryCandidates(candidates.await)
        });
    }

    /// The second step of an expiry: the candidates that are Empty and idle
    /// are held while their offsets past retention are removed.
    pub(super) fn expire_candidates(&mut self, candidates: io::Result<Vec<String>>) {
        let candidates = match candidates {
            Ok(candidates) => candidates,
            Err(error) => {
                tracing::error!(%error, "reading offsets to expire failed");
                self.expiring = false;
                return;
            }
        };
        let storing: HashSet<String> = self.order.storing().map(str::to_string).collect();
        let held: HashSet<String> = candidates
            .into_iter()
            .filter(|group_id| !storing.contains(group_id))
            .filter(|group_id| self.refusal_of(group_id).is_none())
            .filter(|group_id| self.coordinator.is_empty_or_unknown(group_id))
            .collect();
        if held.is_empty() {
            self.expiring = false;
            return;
        }
        for group_id in &held {
            self.order.begin_store(group_id, Store::Offsets);
        }
        let now_ms = self.clock.now_ms();
        let retention_ms = self.config.offsets_retention_ms;
        let offsets = Arc::clone(&self.stores.offsets);
        self.background(async move {
            let groups: Vec<String> = held.iter().cloned().collect();
            let expired = blocking(move || {
                offsets.expire(now_ms, retention_ms, &|group_id| held.contains(group_id))
            });
            Then::Expired {
                groups,
                outcome: expired.await,
            }
        });
    }
}
