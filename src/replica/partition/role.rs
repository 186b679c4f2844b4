//! Which part this broker plays in a partition: the image it follows (leader or
//! follower, at which leader epoch, with which ISR) and what the rest of the
//! partition asks of it (the leadership an append is made under, the ISR, the
//! followers' positions).
//!
//! Invariant: the leader epoch of a partition only grows, and the generation with
//! it; an image with an older epoch changes nothing.

use std::sync::atomic::Ordering;

use super::{FollowerPositions, Partition, PartitionError};
use crate::replica::replication::{PartitionView, Role, Transition};
use crate::types::{LeaderEpoch, Offset};

impl Partition {
    /// Follows an image of the partition: becomes leader (the new epoch starts at the
    /// log end offset, written to the epoch cache, fsynced) or follower, or takes a new
    /// ISR. Blocking when it becomes leader: call it off the runtime worker.
    pub fn apply_image(&self, view: &PartitionView<'_>) -> Result<Transition, PartitionError> {
        let now_ms = self.lag_clock_ms();
        let transition = self.with_log(|log| {
            let transition = {
                let mut state = self.lock_replication();
                let (epoch_before, generation_before) = (state.leader_epoch, state.generation);
                let transition = state.apply(view, log.log_end_offset(), now_ms);
                assert!(
                    state.leader_epoch >= epoch_before && state.generation >= generation_before,
                    "the leader epoch of {} only grows, and its generation with it: {epoch_before} (generation {generation_before}) became {} (generation {})",
                    self.tp,
                    state.leader_epoch,
                    state.generation
                );
                self.leader_epoch
                    .store(state.leader_epoch.get(), Ordering::Release);
                transition
            };
            if transition == Transition::BecameLeader {
                log.assign_leader_epoch_start(view.leader_epoch.get())?;
            }
            self.advance_high_watermark(log);
            self.publish_offsets(log);
            Ok(transition)
        })?;
        self.wake_fetchers();
        Ok(transition)
    }

    /// The leader epoch and generation of this broker's leadership, or
    /// NotLeaderOrFollower. Called under the log's lock, so an image applied meanwhile
    /// cannot change them before the append is done.
    pub(super) fn leadership(&self) -> Result<(LeaderEpoch, u64), PartitionError> {
        let state = self.lock_replication();
        if !state.is_leader() {
            return Err(PartitionError::NotLeaderOrFollower);
        }
        Ok((state.leader_epoch, state.generation))
    }

    /// The offset this broker's leadership began at, while it leads (KIP-207: until
    /// the high watermark reaches it, the latest offset is not known).
    pub fn epoch_start_offset(&self) -> Option<Offset> {
        let state = self.lock_replication();
        state
            .is_leader()
            .then_some(Offset::new(state.epoch_start_offset))
    }

    /// The leader this broker follows, or leads as (its own id); -1 for none.
    pub fn leader_id(&self) -> i32 {
        let state = self.lock_replication();
        match state.role {
            Role::Leader => state.node_id,
            Role::Follower { leader_id } => leader_id,
        }
    }

    /// On the leader: the committed ISR and each follower's log end offset (-1
    /// until it fetched in this epoch); None on a follower.
    pub fn follower_positions(&self) -> Option<FollowerPositions> {
        let state = self.lock_replication();
        if !state.is_leader() {
            return None;
        }
        let followers = state
            .followers
            .iter()
            .map(|(id, f)| (*id, f.log_end_offset))
            .collect();
        Some((state.isr.clone(), followers))
    }

    /// Whether this broker leads the partition now.
    pub fn is_leader(&self) -> bool {
        self.lock_replication().is_leader()
    }

    /// The committed ISR as this broker knows it.
    pub fn isr(&self) -> Vec<i32> {
        self.lock_replication().isr.clone()
    }
}
