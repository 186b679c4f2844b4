//! The order of one group's commands around its store work, kept by the
//! coordinator task (and only by it; not shared).
//!
//! A group is *storing* while a store operation of its own is in flight (an
//! offset commit until its fsync answered, a fetch until it read, a deletion
//! until it is durable), and *saving* while a persist round writes its record.
//! Kafka holds the group's lock across the check and the log append; here the
//! task plays the lock: it starts a store operation and goes on with other
//! groups, and holds back the commands of this group until the operation is
//! answered.
//!
//! Invariant: a command of a group runs only when no earlier command of that
//! group is held and the group is not storing; a DeleteGroups, a JoinGroup and
//! a SyncGroup also wait while the group is saving: a record saved after the
//! deletion would bring the group back, and a sync (or a static member's join)
//! hands something out only once the record holding it is stored, which a
//! round in flight may still fail to do (nothing else conflicts with saving a
//! record). Held
//! commands run in the order they arrived. Groups without store work have no
//! entry.

use std::collections::{HashMap, VecDeque};

/// What a command needs of its group before it may run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Access {
    /// Any command of the group: waits for the group's store operation.
    Group,
    /// DeleteGroups, JoinGroup and SyncGroup: also wait for a persist round
    /// saving the group's record.
    Record,
}

/// Per-group store work and the commands held behind it.
pub struct GroupOrder<C> {
    groups: HashMap<String, Slot<C>>,
    /// Commands held across every group.
    held: usize,
}

struct Slot<C> {
    storing: bool,
    saving: bool,
    waiting: VecDeque<(Access, C)>,
}

impl<C> Slot<C> {
    fn new() -> Slot<C> {
        Slot {
            storing: false,
            saving: false,
            waiting: VecDeque::new(),
        }
    }

    fn may_run(&self, access: Access) -> bool {
        !self.storing && (access != Access::Record || !self.saving)
    }

    fn is_idle(&self) -> bool {
        !self.storing && !self.saving && self.waiting.is_empty()
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
            Some(slot) if !slot.waiting.is_empty() || !slot.may_run(access) => {
                slot.waiting.push_back((access, command));
                self.held += 1;
                None
            }
            _ => Some(command),
        }
    }

    /// The group's store operation starts; its later commands are held.
    pub fn begin_store(&mut self, group_id: &str) {
        let slot = self.slot(group_id);
        assert!(
            !slot.storing,
            "two store operations in flight for one group"
        );
        slot.storing = true;
    }

    /// The group's store operation was answered. Follow with `next_ready`.
    pub fn end_store(&mut self, group_id: &str) {
        let slot = self.groups.get_mut(group_id);
        assert!(
            slot.as_ref().is_some_and(|s| s.storing),
            "a store operation ended that never began"
        );
        if let Some(slot) = slot {
            slot.storing = false;
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

    /// The group's oldest held command, if it may run now. The caller runs each
    /// one before asking again, since running it may start store work.
    pub fn next_ready(&mut self, group_id: &str) -> Option<C> {
        let slot = self.groups.get_mut(group_id)?;
        let ready = slot
            .waiting
            .front()
            .is_some_and(|(access, _)| slot.may_run(*access));
        let next = if ready {
            slot.waiting.pop_front().map(|(_, command)| command)
        } else {
            None
        };
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

    /// Groups with a store operation in flight.
    pub fn storing(&self) -> impl Iterator<Item = &str> {
        self.groups
            .iter()
            .filter(|(_, slot)| slot.storing)
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
    fn a_storing_group_holds_its_commands_in_order_and_others_run() {
        let mut order = GroupOrder::default();
        assert_eq!(order.admit("g", Access::Group, 1), Some(1));
        order.begin_store("g");
        assert_eq!(order.admit("g", Access::Group, 2), None);
        assert_eq!(order.admit("g", Access::Record, 3), None);
        assert_eq!(order.admit("h", Access::Group, 4), Some(4));
        assert_eq!(order.held(), 2);
        assert_eq!(order.storing().collect::<Vec<_>>(), ["g"]);
        assert_eq!(order.next_ready("g"), None, "still storing");

        order.end_store("g");
        assert_eq!(order.next_ready("g"), Some(2));
        // Command 2 started store work of its own: 3 waits for that too.
        order.begin_store("g");
        assert_eq!(order.next_ready("g"), None);
        assert_eq!(order.admit("g", Access::Group, 5), None, "behind 3");
        order.end_store("g");
        assert_eq!(order.next_ready("g"), Some(3));
        assert_eq!(order.next_ready("g"), Some(5));
        assert_eq!(order.next_ready("g"), None);
        assert_eq!(order.held(), 0);
        assert!(order.groups.is_empty(), "idle groups leave no entry");
    }

    #[test]
    fn saving_holds_back_only_deletes_and_syncs_and_what_follows_them() {
        let mut order = GroupOrder::default();
        order.begin_saving("g");
        assert_eq!(order.admit("g", Access::Group, 1), Some(1));
        assert_eq!(order.admit("g", Access::Record, 2), None);
        assert_eq!(
            order.admit("g", Access::Group, 3),
            None,
            "behind the delete or sync"
        );
        assert_eq!(order.next_ready("g"), None);
        order.end_saving("g");
        assert_eq!(order.next_ready("g"), Some(2));
        assert_eq!(order.next_ready("g"), Some(3));
        assert!(order.groups.is_empty());
    }
}
