//! The order of one group's commands around its store work, kept by the
//! coordinator task (and only by it; not shared).
//!
//! A group is *storing offsets* while an offset operation of its own is in
//! flight (a commit until its append is committed and cached, a fetch until it
//! read, an offset deletion until it is durable), *storing its record* while a
//! join or sync waits for the group's record to be stored before it answers,
//! and *saving* while a persist round writes its record. Kafka holds the
//! group's lock across the check and the log append only; here the task plays
//! the lock: it starts a store operation and goes on, and holds back only the
//! commands of this group that conflict with it until it is answered. A
//! commit waiting seconds for its replication (an ISR member of the offsets
//! partition died) holds back the group's offset commands, never its
//! heartbeats, joins and syncs (their sessions would expire behind it).
//!
//! Invariant: a command of a group runs only when nothing it conflicts with is
//! in flight (`Access`) and no earlier command of that group that it must
//! follow is held: offset commands and DeleteGroups follow every earlier
//! command; membership commands (heartbeats, leaves, describes, joins,
//! syncs) follow earlier membership commands and deletions only. At most one
//! store operation of each kind is in flight per group. Groups without store
//! work or held commands have no entry.

use std::collections::{HashMap, VecDeque};

/// What a command needs of its group before it may run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Access {
    /// Heartbeat, LeaveGroup, DescribeGroups: never wait on store work.
    Member,
    /// JoinGroup and SyncGroup: wait for a persist round saving the group's
    /// record and for a record store of an earlier join or sync (they may
    /// start one).
    Record,
    /// The offset commands (commit, transactional commit, fetch, offset
    /// deletion, a transaction's completion): wait for the group's offset
    /// operation in flight.
    Offsets,
    /// DeleteGroups: waits for all of the group's store work.
    Delete,
}

impl Access {
    /// Whether a command of this access stays behind an earlier held command
    /// of `earlier`'s.
    fn follows(self, earlier: Access) -> bool {
        match self {
            Access::Offsets | Access::Delete => true,
            Access::Member | Access::Record => earlier != Access::Offsets,
        }
    }
}

/// A kind of store operation of one group.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Store {
    /// Offsets committed, fetched, deleted or completed; the group deleted.
    Offsets,
    /// The group's record, stored before a join or sync answers.
    Record,
}

/// Per-group store work and the commands held behind it.
pub struct GroupOrder<C> {
    groups: HashMap<String, Slot<C>>,
    /// Commands held across every group.
    held: usize,
}

struct Slot<C> {
    storing_offsets: bool,
    storing_record: bool,
    saving: bool,
    waiting: VecDeque<(Access, C)>,
}

impl<C> Slot<C> {
    fn new() -> Slot<C> {
        Slot {
            storing_offsets: false,
            storing_record: false,
            saving: false,
            waiting: VecDeque::new(),
        }
    }

    fn may_run(&self, access: Access) -> bool {
        match access {
            Access::Member => true,
            Access::Record => !self.saving && !self.storing_record,
            Access::Offsets => !self.storing_offsets,
            Access::Delete => !self.saving && !self.storing_record && !self.storing_offsets,
        }
    }

    /// Whether a command of `access` may run now, were it held at `position`.
    fn may_run_at(&self, access: Access, position: usize) -> bool {
        self.may_run(access)
            && !self
                .waiting
                .iter()
                .take(position)
                .any(|(earlier, _)| access.follows(*earlier))
    }

    fn storing(&mut self, store: Store) -> &mut bool {
        match store {
            Store::Offsets => &mut self.storing_offsets,
            Store::Record => &mut self.storing_record,
        }
    }

    fn is_idle(&self) -> bool {
        !self.storing_offsets && !self.storing_record && !self.saving && self.waiting.is_empty()
    }
}

impl<C> Default for GroupOrder<C> {
    fn default() -> GroupOrder<C> {
        GroupOrder {
            groups: HashMap::new(),
            held: 0,
        }
    }
}

impl<C> GroupOrder<C> {
    /// The command back if it may run now; otherwise it is held (and `None`).
    pub fn admit(&mut self, group_id: &str, access: Access, command: C) -> Option<C> {
        match self.groups.get_mut(group_id) {
            Some(slot) if !slot.may_run_at(access, slot.waiting.len()) => {
                slot.waiting.push_back((access, command));
                self.held += 1;
                None
            }
            _ => Some(command),
        }
    }

    /// The group's store operation of kind `store` starts; the later commands
    /// that conflict with it are held.
    pub fn begin_store(&mut self, group_id: &str, store: Store) {
        let storing = self.slot(group_id).storing(store);
        assert!(
            !*storing,
            "two {store:?} store operations in flight for one group"
        );
        *storing = true;
    }

    /// The group's store operation of kind `store` was answered. Follow with
    /// `next_ready`.
    pub fn end_store(&mut self, group_id: &str, store: Store) {
        let slot = self.groups.get_mut(group_id);
        let storing = slot.map(|slot| slot.storing(store));
        assert!(
            storing.as_ref().is_some_and(|storing| **storing),
            "a {store:?} store operation ended that never began"
        );
        if let Some(storing) = storing {
            *storing = false;
        }
    }

    /// A persist round starts writing the group's record.
    pub fn begin_saving(&mut self, group_id: &str) {
        let slot = self.slot(group_id);
        assert!(!slot.saving, "two persist rounds in flight for one group");
        slot.saving = true;
    }

    /// The persist round is done with the group's record. Follow with `next_ready`.
    pub fn end_saving(&mut self, group_id: &str) {
        let slot = self.groups.get_mut(group_id);
        assert!(
            slot.as_ref().is_some_and(|s| s.saving),
            "a persist round ended that never began"
        );
        if let Some(slot) = slot {
            slot.saving = false;
        }
    }

    /// The group's oldest held command that may run now. The caller runs each
    /// one before asking again, since running it may start store work.
    pub fn next_ready(&mut self, group_id: &str) -> Option<C> {
        let slot = self.groups.get_mut(group_id)?;
        let ready = (0..slot.waiting.len()).find(|&position| {
            let (access, _) = &slot.waiting[position];
            slot.may_run_at(*access, position)
        });
        let next = ready
            .and_then(|position| slot.waiting.remove(position))
            .map(|(_, command)| command);
        if next.is_some() {
            self.held -= 1;
        }
        if slot.is_idle() {
            self.groups.remove(group_id);
        }
        next
    }

    /// Commands held across every group.
    pub fn held(&self) -> usize {
        self.held
    }

    /// Groups with an offset operation in flight.
    pub fn storing(&self) -> impl Iterator<Item = &str> {
        self.groups
            .iter()
            .filter(|(_, slot)| slot.storing_offsets)
            .map(|(group_id, _)| group_id.as_str())
    }

    fn slot(&mut self, group_id: &str) -> &mut Slot<C> {
        self.groups
            .entry(group_id.to_string())
            .or_insert_with(Slot::new)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_group_storing_offsets_holds_its_offset_commands_in_order_and_others_run() {
        let mut order = GroupOrder::default();
        assert_eq!(order.admit("g", Access::Offsets, 1), Some(1));
        order.begin_store("g", Store::Offsets);
        assert_eq!(order.admit("g", Access::Offsets, 2), None);
        assert_eq!(order.admit("g", Access::Delete, 3), None);
        assert_eq!(order.admit("h", Access::Offsets, 4), Some(4));
        assert_eq!(order.held(), 2);
        assert_eq!(order.storing().collect::<Vec<_>>(), ["g"]);
        assert_eq!(order.next_ready("g"), None, "still storing");

        order.end_store("g", Store::Offsets);
        assert_eq!(order.next_ready("g"), Some(2));
        // Command 2 started store work of its own: 3 waits for that too.
        order.begin_store("g", Store::Offsets);
        assert_eq!(order.next_ready("g"), None);
        assert_eq!(order.admit("g", Access::Offsets, 5), None, "behind 3");
        order.end_store("g", Store::Offsets);
        assert_eq!(order.next_ready("g"), Some(3));
        assert_eq!(order.next_ready("g"), Some(5));
        assert_eq!(order.next_ready("g"), None);
        assert_eq!(order.held(), 0);
        assert!(order.groups.is_empty(), "idle groups leave no entry");
    }

    /// A commit waiting on its replication holds back the group's offset
    /// commands only: heartbeats, joins and syncs go on (members with short
    /// sessions expired behind a commit that waited seconds).
    #[test]
    fn a_commit_in_flight_holds_back_no_heartbeat_join_or_sync() {
        let mut order = GroupOrder::default();
        order.begin_store("g", Store::Offsets);
        assert_eq!(order.admit("g", Access::Offsets, 1), None);
        assert_eq!(order.admit("g", Access::Member, 2), Some(2));
        assert_eq!(order.admit("g", Access::Record, 3), Some(3));
        // The join stores the group's record before it answers.
        order.begin_store("g", Store::Record);
        assert_eq!(
            order.admit("g", Access::Record, 4),
            None,
            "behind 3's store"
        );
        assert_eq!(order.admit("g", Access::Member, 5), None, "behind the sync");
        assert_eq!(order.admit("g", Access::Offsets, 6), None);
        order.end_store("g", Store::Record);
        assert_eq!(order.next_ready("g"), Some(4));
        assert_eq!(order.next_ready("g"), Some(5));
        assert_eq!(order.next_ready("g"), None, "1 and 6 wait for the commit");
        order.end_store("g", Store::Offsets);
        assert_eq!(order.next_ready("g"), Some(1));
        assert_eq!(order.next_ready("g"), Some(6));
        assert!(order.groups.is_empty());
    }

    #[test]
    fn saving_holds_back_only_deletes_joins_and_syncs_and_what_follows_them() {
        let mut order = GroupOrder::default();
        order.begin_saving("g");
        assert_eq!(order.admit("g", Access::Offsets, 1), Some(1));
        assert_eq!(order.admit("g", Access::Member, 2), Some(2));
        assert_eq!(order.admit("g", Access::Record, 3), None);
        assert_eq!(
            order.admit("g", Access::Member, 4),
            None,
            "behind the join or sync"
        );
        assert_eq!(
            order.admit("g", Access::Offsets, 5),
            None,
            "behind the join or sync"
        );
        assert_eq!(order.next_ready("g"), None);
        order.end_saving("g");
        assert_eq!(order.next_ready("g"), Some(3));
        assert_eq!(order.next_ready("g"), Some(4));
        assert_eq!(order.next_ready("g"), Some(5));
        assert!(order.groups.is_empty());
    }
}
