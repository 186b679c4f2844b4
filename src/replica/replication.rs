//! The replication state of one partition on this broker, after Kafka's
//! `Partition`: whether it leads or follows, at which leader and partition epoch,
//! the ISR the controller committed and the one its leader has proposed, and on
//! the leader each follower's fetch position. Pure: it takes the time and the
//! leader's log end offset as arguments and never does I/O; `Partition` keeps it
//! behind its own mutex, taken after the log's when both are held.
//!
//! Invariants: the high watermark it computes never goes back; it is the least log
//! end offset over the maximal ISR (the committed ISR with a proposed one in flight,
//! so an uncommitted expansion only makes it more conservative) and over the
//! followers about to join it; it does not move while the *committed* ISR is below
//! `min.insync.replicas` (strict min ISR: a pending expansion does not count, as
//! Kafka's `isUnderMinIsr` reads the committed ISR, since the eligible leader
//! replicas hold only what was below the high watermark when they left), nor,
//! after this broker became leader, until every member of the ISR has fetched
//! from it in the new epoch. An image older than the state (a lower leader epoch)
//! changes nothing. On the leader the committed ISR holds the leader and is a
//! subset of the replicas (`check_isr`, in debug builds).

use std::collections::BTreeMap;

use crate::limits::ISR_CHANGE_REFUSED_BACKOFF_MS;
use crate::types::{BrokerEpoch, LeaderEpoch};

/// What this broker is for the partition.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    Leader,
    /// Following `leader_id` (-1: the partition has no leader now).
    Follower {
        leader_id: i32,
    },
}

/// A follower as its leader sees it (Kafka's `ReplicaState`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FollowerState {
    /// The follower's log end offset, as its last fetch said; -1 until it has
    /// fetched from this leader in this epoch.
    pub log_end_offset: i64,
    /// The last time it was caught up with the leader's log end offset.
    pub last_caught_up_ms: i64,
    last_fetch_ms: i64,
    last_fetch_leader_log_end_offset: i64,
    /// The broker epoch its last fetch carried (KIP-903); `NONE` when unknown.
    pub broker_epoch: BrokerEpoch,
}

impl FollowerState {
    fn reset(in_sync: bool, now_ms: i64) -> FollowerState {
        FollowerState {
            log_end_offset: -1,
            // An ISR member gets a full lag allowance from the new epoch on, so it is
            // not dropped before it could fetch.
            last_caught_up_ms: if in_sync { now_ms } else { 0 },
            last_fetch_ms: 0,
            last_fetch_leader_log_end_offset: -1,
            broker_epoch: BrokerEpoch::NONE,
        }
    }
}

/// An ISR change the leader wants the controller to make (Kafka's AlterPartition).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct IsrChange {
    pub leader_epoch: LeaderEpoch,
    pub partition_epoch: i32,
    /// (broker id, broker epoch) of each member of the proposed ISR; `NONE` for
    /// a member the image has no live registration of.
    pub new_isr: Vec<(i32, BrokerEpoch)>,
}

/// The controller's answer to an applied ISR change (Kafka's `LeaderAndIsr`, less
/// the leader, which an ISR change never moves): the partition as it now is.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LeaderAndIsr {
    pub leader_epoch: LeaderEpoch,
    pub partition_epoch: i32,
    pub isr: Vec<i32>,
}

/// The replication state of one partition. See the module doc.
#[derive(Clone, Debug)]
pub struct ReplicationState {
    pub node_id: i32,
    pub role: Role,
    pub leader_epoch: LeaderEpoch,
    pub partition_epoch: i32,
    pub replicas: Vec<i32>,
    /// The ISR as the controller committed it.
    pub isr: Vec<i32>,
    /// An ISR proposed and not yet answered, with the partition epoch it was
    /// proposed at.
    pub pending_isr: Option<(Vec<i32>, i32)>,
    pub followers: BTreeMap<i32, FollowerState>,
    /// The log end offset when this broker became leader in `leader_epoch`.
    pub epoch_start_offset: i64,
    pub min_insync_replicas: usize,
    /// The replicas the latest image lets join the ISR (registered, unfenced).
    /// Only they hold the high watermark while about to join: a replica fenced
    /// out of the ISR (its node died) must not hold it for
    /// `replica.lag.time.max.ms` with the offset it had reached.
    pub eligible: Vec<i32>,
    /// Grows at every change of role or leader epoch, so that a wait begun under
    /// one leadership ends when it does.
    pub generation: u64,
    /// After a refused or lost proposal: the partition epoch it was made at and
    /// the time before which no new change is proposed at that epoch (Kafka's
    /// AlterPartitionManager backs off too). A refusal means this leader's view
    /// is stale; the image with the news ends the wait as soon as it comes.
    refused: Option<(i32, i64)>,
}

/// How an image changed this broker's part in a partition.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Transition {
    /// Became leader (or leads in a newer epoch).
    BecameLeader,
    /// Became a follower of `leader_id` (or follows in a newer epoch): fetching
    /// restarts from the log end offset.
    BecameFollower { leader_id: i32 },
    /// Same role and epoch; the ISR or replicas may have changed.
    Unchanged,
}

/// The part of a `PartitionImage` the replication state follows.
#[derive(Clone, Debug)]
pub struct PartitionView<'a> {
    pub leader_id: i32,
    pub leader_epoch: LeaderEpoch,
    pub partition_epoch: i32,
    pub replicas: &'a [i32],
    pub isr: &'a [i32],
    /// The replicas that may join the ISR: registered and unfenced in the
    /// image (Kafka's `isReplicaIsrEligible`).
    pub eligible: &'a [i32],
    pub min_insync_replicas: usize,
}

impl ReplicationState {
    /// A partition this broker has just loaded or created, before any image says
    /// more: a follower of nobody.
    pub fn new(node_id: i32) -> ReplicationState {
        ReplicationState {
            node_id,
            role: Role::Follower { leader_id: -1 },
            leader_epoch: LeaderEpoch::NONE,
            partition_epoch: -1,
            replicas: Vec::new(),
            isr: Vec::new(),
            pending_isr: None,
            followers: BTreeMap::new(),
            epoch_start_offset: 0,
            min_insync_replicas: 1,
            eligible: Vec::new(),
            generation: 0,
            refused: None,
        }
    }

    pub fn is_leader(&self) -> bool {
        self.role == Role::Leader
    }

    /// The committed ISR together with a proposed one (Kafka's maximal ISR).
    pub fn maximal_isr(&self) -> Vec<i32> {
        let mut isr = self.isr.clone();
        if let Some((pending, _)) = &self.pending_isr {
            for id in pending {
                if !isr.contains(id) {
                    isr.push(*id);
                }
            }
        }
        isr
    }

    /// Follows the image: become leader or follower when the leader or its epoch
    /// changed (Kafka's makeLeader/makeFollower, which restart fetching only then),
    /// and take a newer ISR, replica set and partition epoch.
    pub fn apply(
        &mut self,
        view: &PartitionView<'_>,
        log_end_offset: i64,
        now_ms: i64,
    ) -> Transition {
        if view.leader_epoch < self.leader_epoch {
            // An older view than the one applied: following it could make this
            // broker leader again at an old epoch.
            return Transition::Unchanged;
        }
        self.min_insync_replicas = view.min_insync_replicas.max(1);
        self.eligible = view.eligible.to_vec();
        if view.partition_epoch >= self.partition_epoch || view.leader_epoch > self.leader_epoch {
            self.replicas = view.replicas.to_vec();
            self.isr = view.isr.to_vec();
            // The answer to a proposal is the image that carries its partition epoch
            // or a later one: either way the proposal is settled.
            if self
                .pending_isr
                .as_ref()
                .is_some_and(|(_, at)| view.partition_epoch > *at)
            {
                self.pending_isr = None;
            }
            self.partition_epoch = view.partition_epoch;
        }
        let leads = view.leader_id == self.node_id;
        let new_epoch = view.leader_epoch > self.leader_epoch;
        if leads && (new_epoch || !self.is_leader()) {
            self.leader_epoch = view.leader_epoch;
            self.role = Role::Leader;
            self.epoch_start_offset = log_end_offset;
            self.pending_isr = None;
            let others: Vec<i32> = self
                .replicas
                .iter()
                .copied()
                .filter(|id| *id != self.node_id)
                .collect();
            self.followers = others
                .into_iter()
                .map(|id| (id, FollowerState::reset(self.isr.contains(&id), now_ms)))
                .collect();
            self.generation += 1;
            self.check_isr();
            return Transition::BecameLeader;
        }
        if leads {
            // Replicas added by a reassignment get a follower state.
            for id in view
                .replicas
                .iter()
                .copied()
                .filter(|id| *id != self.node_id)
            {
                self.followers
                    .entry(id)
                    .or_insert_with(|| FollowerState::reset(false, now_ms));
            }
            self.followers.retain(|id, _| view.replicas.contains(id));
            self.check_isr();
            return Transition::Unchanged;
        }
        let leader_id = view.leader_id;
        let changed = self.is_leader() || new_epoch || self.role != (Role::Follower { leader_id });
        self.leader_epoch = self.leader_epoch.max(view.leader_epoch);
        if !changed {
            return Transition::Unchanged;
        }
        self.role = Role::Follower { leader_id };
        self.followers.clear();
        self.pending_isr = None;
        self.generation += 1;
        Transition::BecameFollower { leader_id }
    }

    /// Kafka's `updateFollowerFetchState`: a follower fetched at `fetch_offset`
    /// while this leader's log ended at `leader_log_end_offset`. Returns false for
    /// a broker that is not a replica.
    pub fn record_fetch(
        &mut self,
        replica_id: i32,
        broker_epoch: BrokerEpoch,
        fetch_offset: i64,
        leader_log_end_offset: i64,
        now_ms: i64,
    ) -> bool {
        let Some(follower) = self.followers.get_mut(&replica_id) else {
            return false;
        };
        if fetch_offset >= leader_log_end_offset {
            follower.last_caught_up_ms = follower.last_caught_up_ms.max(now_ms);
        } else if fetch_offset >= follower.last_fetch_leader_log_end_offset
            && follower.last_fetch_leader_log_end_offset >= 0
        {
            follower.last_caught_up_ms = follower.last_caught_up_ms.max(follower.last_fetch_ms);
        }
        follower.log_end_offset = fetch_offset;
        follower.last_fetch_leader_log_end_offset = leader_log_end_offset;
        follower.last_fetch_ms = now_ms;
        follower.broker_epoch = broker_epoch;
        true
    }

    /// The high watermark the ISR allows, if it is above `current` (it never goes
    /// back). See the module doc for the rules.
    pub fn next_high_watermark(
        &self,
        current: i64,
        leader_log_end_offset: i64,
        replica_lag_time_max_ms: i64,
        now_ms: i64,
    ) -> Option<i64> {
        if !self.is_leader() {
            return None;
        }
        // Below min ISR the committed ISR decides, never a pending expansion
        // (Kafka's isUnderMinIsr): the ELR holds what was committed when it left.
        if self.isr.len() < self.min_insync_replicas {
            return None;
        }
        let maximal = self.maximal_isr();
        let mut candidate = leader_log_end_offset;
        for (id, follower) in &self.followers {
            let in_isr = maximal.contains(id);
            // A caught-up follower about to join holds the high watermark too, so
            // that it does not run away from it (Kafka's shouldWaitForReplicaToJoinIsr).
            let joining = !in_isr
                && self.eligible.contains(id)
                && follower.log_end_offset >= current
                && now_ms.saturating_sub(follower.last_caught_up_ms) <= replica_lag_time_max_ms;
            if in_isr || joining {
                candidate = candidate.min(follower.log_end_offset);
            }
        }
        (candidate > current).then_some(candidate)
    }

    /// Kafka's `maybeExpandIsr`: a follower outside the ISR that has caught up with
    /// the high watermark and the start of this leader's epoch joins it. None while a
    /// proposal is in flight. `broker_epochs` is the image's registration epochs.
    pub fn isr_expansion(
        &self,
        replica_id: i32,
        high_watermark: i64,
        now_ms: i64,
        broker_epoch_of: impl Fn(i32) -> Option<BrokerEpoch>,
    ) -> Option<IsrChange> {
        if !self.may_propose(now_ms) || self.isr.contains(&replica_id) {
            return None;
        }
        let follower = self.followers.get(&replica_id)?;
        let eligible = follower.log_end_offset >= high_watermark
            && follower.log_end_offset >= self.epoch_start_offset
            && broker_epoch_of(replica_id).is_some_and(|epoch| epoch == follower.broker_epoch);
        if !eligible {
            return None;
        }
        let mut members = self.isr.clone();
        members.push(replica_id);
        Some(self.change_to(members, broker_epoch_of))
    }

    /// Kafka's `maybeShrinkIsr`: ISR members that have not caught up with the leader
    /// within `replica_lag_time_max_ms` leave it. None while a proposal is in flight.
    pub fn isr_shrink(
        &self,
        replica_lag_time_max_ms: i64,
        now_ms: i64,
        broker_epoch_of: impl Fn(i32) -> Option<BrokerEpoch>,
    ) -> Option<IsrChange> {
        if !self.may_propose(now_ms) {
            return None;
        }
        let members: Vec<i32> = self
            .isr
            .iter()
            .copied()
            .filter(|id| {
                *id == self.node_id
                    || self.followers.get(id).is_some_and(|f| {
                        now_ms.saturating_sub(f.last_caught_up_ms) <= replica_lag_time_max_ms
                    })
            })
            .collect();
        if members.len() == self.isr.len() {
            return None;
        }
        Some(self.change_to(members, broker_epoch_of))
    }

    /// A leader with no proposal in flight and none refused lately at this
    /// partition epoch.
    fn may_propose(&self, now_ms: i64) -> bool {
        let backing_off = self
            .refused
            .is_some_and(|(epoch, until_ms)| epoch == self.partition_epoch && now_ms < until_ms);
        self.is_leader() && self.pending_isr.is_none() && !backing_off
    }

    fn change_to(
        &self,
        members: Vec<i32>,
        broker_epoch_of: impl Fn(i32) -> Option<BrokerEpoch>,
    ) -> IsrChange {
        IsrChange {
            leader_epoch: self.leader_epoch,
            partition_epoch: self.partition_epoch,
            new_isr: members
                .into_iter()
                .map(|id| (id, broker_epoch_of(id).unwrap_or(BrokerEpoch::NONE)))
                .collect(),
        }
    }

    /// Marks `change` as in flight (used for the high watermark until answered).
    pub fn propose(&mut self, change: &IsrChange) {
        let members = change.new_isr.iter().map(|(id, _)| *id).collect();
        self.pending_isr = Some((members, change.partition_epoch));
    }

    /// The controller answered a proposal: applied, the ISR and partition epoch are
    /// the answer's (if still this epoch's); refused or lost, the proposal is dropped,
    /// the image will say what is true, and no change is proposed at this partition
    /// epoch for `ISR_CHANGE_REFUSED_BACKOFF_MS` (a leader re-proposed on every
    /// follower fetch, one raft write each).
    pub fn settle(&mut self, proposed_at: i32, applied: Option<LeaderAndIsr>, now_ms: i64) {
        if self
            .pending_isr
            .as_ref()
            .is_none_or(|(_, at)| *at != proposed_at)
        {
            return;
        }
        self.pending_isr = None;
        self.refused = applied.is_none().then_some((
            proposed_at,
            now_ms.saturating_add(ISR_CHANGE_REFUSED_BACKOFF_MS),
        ));
        if let Some(applied) = applied {
            if applied.leader_epoch == self.leader_epoch
                && applied.partition_epoch > self.partition_epoch
            {
                self.partition_epoch = applied.partition_epoch;
                self.isr = applied.isr;
                self.check_isr();
            }
        }
    }

    /// On the leader, the committed ISR holds the leader and is a subset of the
    /// replicas: the controller elects a leader from the ISR (or, unclean or from
    /// the eligible leaders, makes it the ISR alone), and the leader's proposals
    /// keep itself in. Checked in debug builds only: the ISR is the controller's
    /// word, and a broker that goes on serving beats one that stops on it.
    fn check_isr(&self) {
        debug_assert!(
            !self.is_leader()
                || (self.isr.contains(&self.node_id)
                    && self.isr.iter().all(|id| self.replicas.contains(id))),
            "the ISR {:?} of leader {} (leader epoch {}, partition epoch {}) must hold the leader and be a subset of the replicas {:?}",
            self.isr,
            self.node_id,
            self.leader_epoch,
            self.partition_epoch,
            self.replicas
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const LAG_MS: i64 = 30_000;

    fn view<'a>(leader: i32, epoch: i32, replicas: &'a [i32], isr: &'a [i32]) -> PartitionView<'a> {
        PartitionView {
            leader_id: leader,
            leader_epoch: LeaderEpoch::new(epoch),
            partition_epoch: epoch,
            replicas,
            isr,
            eligible: replicas,
            min_insync_replicas: 1,
        }
    }

    /// The controller's answer to an applied ISR change.
    fn applied(leader_epoch: i32, partition_epoch: i32, isr: &[i32]) -> Option<LeaderAndIsr> {
        Some(LeaderAndIsr {
            leader_epoch: LeaderEpoch::new(leader_epoch),
            partition_epoch,
            isr: isr.to_vec(),
        })
    }

    #[test]
    fn a_new_leader_holds_its_high_watermark_until_every_isr_member_fetched() {
        let mut state = ReplicationState::new(1);
        assert_eq!(
            state.apply(&view(1, 1, &[1, 2, 3], &[1, 2, 3]), 10, 0),
            Transition::BecameLeader
        );
        assert_eq!(state.next_high_watermark(5, 10, LAG_MS, 0), None);
        state.record_fetch(2, BrokerEpoch::new(7), 10, 10, 1);
        assert_eq!(
            state.next_high_watermark(5, 10, LAG_MS, 1),
            None,
            "3 has not fetched"
        );
        state.record_fetch(3, BrokerEpoch::new(7), 8, 10, 1);
        assert_eq!(state.next_high_watermark(5, 10, LAG_MS, 1), Some(8));
        assert_eq!(
            state.next_high_watermark(8, 10, LAG_MS, 1),
            None,
            "never goes back"
        );
    }

    /// A follower that had caught up dies: the controller fences its node and
    /// takes it out of the ISR. It must not hold the high watermark as a
    /// replica about to join again for `replica.lag.time.max.ms` (acks=all
    /// writes and the coordinators' writes stalled 30 s after a kill -9).
    #[test]
    fn a_follower_fenced_out_of_the_isr_does_not_hold_the_high_watermark() {
        let mut state = ReplicationState::new(1);
        state.apply(&view(1, 1, &[1, 2, 3], &[1, 2, 3]), 10, 0);
        state.record_fetch(2, BrokerEpoch::new(7), 10, 10, 1);
        state.record_fetch(3, BrokerEpoch::new(7), 10, 10, 1);
        assert_eq!(state.next_high_watermark(5, 10, LAG_MS, 1), Some(10));
        // 3 dies at offset 10; the leader appends up to 20, 2 follows.
        state.record_fetch(2, BrokerEpoch::new(7), 20, 20, 2);
        let mut fenced = view(1, 1, &[1, 2, 3], &[1, 2]);
        fenced.partition_epoch = 2;
        fenced.eligible = &[1, 2];
        state.apply(&fenced, 20, 3);
        assert_eq!(
            state.next_high_watermark(10, 20, LAG_MS, 3),
            Some(20),
            "3 is fenced: not about to join"
        );
        // Unfenced but out of the ISR, a caught-up 3 holds it again (Kafka's
        // shouldWaitForReplicaToJoinIsr).
        let mut back = view(1, 1, &[1, 2, 3], &[1, 2]);
        back.partition_epoch = 2;
        state.apply(&back, 30, 4);
        state.record_fetch(3, BrokerEpoch::new(8), 20, 20, 4);
        state.record_fetch(2, BrokerEpoch::new(7), 30, 30, 4);
        assert_eq!(state.next_high_watermark(20, 30, LAG_MS, 4), None);
    }

    #[test]
    fn a_lone_leader_commits_its_log_end_at_once() {
        let mut state = ReplicationState::new(1);
        state.apply(&view(1, 0, &[1], &[1]), 0, 0);
        assert_eq!(state.next_high_watermark(0, 3, LAG_MS, 0), Some(3));
    }

    #[test]
    fn strict_min_isr_freezes_the_high_watermark() {
        let mut state = ReplicationState::new(1);
        let mut v = view(1, 1, &[1, 2, 3], &[1]);
        v.min_insync_replicas = 2;
        state.apply(&v, 0, 0);
        assert_eq!(state.next_high_watermark(0, 5, LAG_MS, 0), None);
    }

    /// The leader alone in the committed ISR, min ISR 2, proposes to add a
    /// caught-up 3; until the controller commits it the high watermark stays
    /// frozen (the maximal ISR counted it and exposed records the ELR lacked).
    #[test]
    fn a_pending_expansion_does_not_lift_the_min_isr_freeze() {
        let mut state = ReplicationState::new(1);
        let mut v = view(1, 1, &[1, 2, 3], &[1]);
        v.min_insync_replicas = 2;
        state.apply(&v, 5, 0);
        let epochs = |id: i32| Some(BrokerEpoch::new(i64::from(id) * 10));
        state.record_fetch(3, BrokerEpoch::new(30), 10, 10, 1);
        let expand = state.isr_expansion(3, 5, 1, epochs).expect("3 caught up");
        state.propose(&expand);
        assert_eq!(state.maximal_isr(), vec![1, 3]);
        assert_eq!(state.next_high_watermark(5, 10, LAG_MS, 1), None);
        state.settle(expand.partition_epoch, applied(1, 2, &[1, 3]), 1);
        assert_eq!(state.next_high_watermark(5, 10, LAG_MS, 1), Some(10));
    }

    /// A view with an older leader epoch than the one applied changes
    /// nothing (it could make a follower leader again at an old epoch).
    #[test]
    fn an_older_view_does_not_make_a_follower_leader_again() {
        let mut state = ReplicationState::new(1);
        state.apply(&view(1, 1, &[1, 2], &[1, 2]), 0, 0);
        state.apply(&view(2, 2, &[1, 2], &[1, 2]), 0, 0);
        let generation = state.generation;
        assert_eq!(
            state.apply(&view(1, 1, &[1, 2], &[1, 2]), 0, 0),
            Transition::Unchanged
        );
        assert_eq!(state.role, Role::Follower { leader_id: 2 });
        assert_eq!(state.leader_epoch, LeaderEpoch::new(2));
        assert_eq!(state.generation, generation);
    }

    #[test]
    fn a_lagging_member_is_shrunk_and_a_caught_up_one_joins() {
        let mut state = ReplicationState::new(1);
        state.apply(&view(1, 1, &[1, 2, 3], &[1, 2, 3]), 0, 0);
        state.record_fetch(2, BrokerEpoch::new(7), 0, 0, 10);
        let epochs = |id: i32| Some(BrokerEpoch::new(i64::from(id) * 10));
        let shrink = state
            .isr_shrink(LAG_MS, LAG_MS + 5, epochs)
            .expect("3 lags");
        assert_eq!(
            shrink.new_isr,
            vec![(1, BrokerEpoch::new(10)), (2, BrokerEpoch::new(20))]
        );
        state.propose(&shrink);
        assert_eq!(state.maximal_isr(), vec![1, 2, 3]);
        state.settle(shrink.partition_epoch, applied(1, 2, &[1, 2]), LAG_MS + 5);
        assert_eq!(state.isr, vec![1, 2]);
        // 3 comes back, caught up, with the broker epoch of its registration.
        state.record_fetch(3, BrokerEpoch::new(30), 0, 0, LAG_MS + 10);
        let expand = state
            .isr_expansion(3, 0, LAG_MS + 10, epochs)
            .expect("3 joins");
        assert_eq!(
            expand.new_isr,
            vec![
                (1, BrokerEpoch::new(10)),
                (2, BrokerEpoch::new(20)),
                (3, BrokerEpoch::new(30))
            ]
        );
        // With a stale broker epoch it does not (KIP-903).
        state.record_fetch(3, BrokerEpoch::new(29), 0, 0, LAG_MS + 11);
        assert_eq!(state.isr_expansion(3, 0, LAG_MS + 11, epochs), None);
    }

    /// A refused proposal is not made again on the next fetch (one raft
    /// write per follower fetch) but after a backoff, or at once when the
    /// image brings a newer partition epoch.
    #[test]
    fn a_refused_change_backs_off_until_the_image_moves_or_time_passes() {
        let mut state = ReplicationState::new(1);
        state.apply(&view(1, 1, &[1, 2], &[1]), 0, 0);
        let epochs = |id: i32| Some(BrokerEpoch::new(i64::from(id) * 10));
        state.record_fetch(2, BrokerEpoch::new(20), 0, 0, 1);
        let expand = state.isr_expansion(2, 0, 1, epochs).expect("2 joins");
        state.propose(&expand);
        state.settle(expand.partition_epoch, None, 2);
        state.record_fetch(2, BrokerEpoch::new(20), 0, 0, 3);
        assert_eq!(state.isr_expansion(2, 0, 3, epochs), None, "backing off");
        assert_eq!(state.isr_shrink(LAG_MS, 3, epochs), None, "backing off");
        let later = 2 + ISR_CHANGE_REFUSED_BACKOFF_MS;
        assert!(state.isr_expansion(2, 0, later, epochs).is_some());
        let mut newer = view(1, 1, &[1, 2], &[1]);
        newer.partition_epoch = 2;
        state.apply(&newer, 0, 4);
        assert!(
            state.isr_expansion(2, 0, 4, epochs).is_some(),
            "a newer partition epoch ends the backoff"
        );
    }

    #[test]
    fn losing_leadership_bumps_the_generation() {
        let mut state = ReplicationState::new(1);
        state.apply(&view(1, 1, &[1, 2], &[1, 2]), 0, 0);
        let generation = state.generation;
        assert_eq!(
            state.apply(&view(2, 2, &[1, 2], &[2]), 0, 0),
            Transition::BecameFollower { leader_id: 2 }
        );
        assert!(state.generation > generation);
        assert_eq!(
            state.apply(&view(2, 2, &[1, 2], &[2]), 0, 0),
            Transition::Unchanged
        );
    }
}
