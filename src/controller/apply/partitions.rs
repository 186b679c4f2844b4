//! One partition's state changes: leader and ISR transitions, the ELR,
//! reassignment steps, and the election rules a topic's configs give.

use super::*;

impl PartitionImage {
    pub(super) fn new(
        partition_index: i32,
        replicas: Vec<i32>,
        leader: i32,
        isr: Vec<i32>,
    ) -> PartitionImage {
        let partition = PartitionImage {
            partition_index,
            leader_id: leader,
            leader_epoch: LeaderEpoch::new(0),
            partition_epoch: 0,
            isr,
            replicas,
            elr: Vec::new(),
            last_known_elr: Vec::new(),
            adding_replicas: Vec::new(),
            removing_replicas: Vec::new(),
        };
        partition.check_invariants(None);
        partition
    }

    /// Starts moving from `original` to `target` replicas: the replica set is the
    /// target followed by the replicas leaving, those joining are added, and the
    /// reassignment completes at once if they are all in the ISR already.
    pub(super) fn start_reassignment(
        &mut self,
        original: Vec<i32>,
        target: &[i32],
        electorate: &Electorate,
    ) {
        let adding: Vec<i32> = target
            .iter()
            .copied()
            .filter(|id| !original.contains(id))
            .collect();
        let removing: Vec<i32> = original
            .iter()
            .copied()
            .filter(|id| !target.contains(id))
            .collect();
        let mut replicas = target.to_vec();
        replicas.extend(removing.iter().copied());
        self.replicas = replicas;
        // A replica added by an earlier target and not in this one leaves the ISR.
        let isr = self.isr_of_replicas();
        self.adding_replicas = adding;
        self.removing_replicas = removing;
        self.partition_epoch += 1;
        self.transition(isr, electorate, None);
        self.maybe_complete_reassignment(electorate);
    }

    /// Cancels a reassignment in progress: back to the original replicas, the
    /// added ones out of the ISR (and of the leadership).
    pub(super) fn cancel_reassignment(&mut self, electorate: &Electorate) -> i16 {
        if self.adding_replicas.is_empty() && self.removing_replicas.is_empty() {
            return error_code::NO_REASSIGNMENT_IN_PROGRESS;
        }
        let adding = std::mem::take(&mut self.adding_replicas);
        self.removing_replicas.clear();
        self.replicas.retain(|id| !adding.contains(id));
        self.finish_replica_change(electorate);
        error_code::NONE
    }

    /// Kafka's `PartitionReassignmentReplicas.maybeCompleteReassignment`: once every
    /// added replica is in the ISR, the replicas leaving go (from the ISR and the
    /// leadership too, with a new leader epoch), unless that would empty the ISR.
    pub(super) fn maybe_complete_reassignment(&mut self, electorate: &Electorate) {
        if self.adding_replicas.is_empty() && self.removing_replicas.is_empty() {
            return;
        }
        if !self.adding_replicas.iter().all(|id| self.isr.contains(id)) {
            return;
        }
        let removing = self.removing_replicas.clone();
        if self.isr.iter().all(|id| removing.contains(id)) {
            return;
        }
        self.replicas.retain(|id| !removing.contains(id));
        self.adding_replicas.clear();
        self.removing_replicas.clear();
        self.finish_replica_change(electorate);
    }

    /// After replicas left: the ISR and ELR keep only replicas, a leader that left
    /// is replaced by election, and the leader epoch moves either way (Kafka bumps
    /// it when replicas are removed, so that the leaving ones are fenced).
    pub(super) fn finish_replica_change(&mut self, electorate: &Electorate) {
        let isr = self.isr_of_replicas();
        let (leader_epoch, partition_epoch) = (self.leader_epoch, self.partition_epoch);
        self.transition(isr, electorate, None);
        if self.leader_epoch == leader_epoch {
            self.leader_epoch = self.leader_epoch.next();
        }
        if self.partition_epoch == partition_epoch {
            self.partition_epoch += 1;
        }
    }

    /// The members of the ISR that are still replicas, after the replicas changed.
    fn isr_of_replicas(&self) -> Vec<i32> {
        self.isr
            .iter()
            .copied()
            .filter(|id| self.replicas.contains(id))
            .collect()
    }

    /// Moves to `isr`. The leader stays if it is a live member of it; otherwise
    /// `elect` names one, and a leader from outside the ISR is the ISR alone. The
    /// ELR follows KIP-966: below min.insync.replicas, replicas leaving the ISR
    /// join it (they hold every committed record, as the high watermark cannot
    /// move meanwhile), except `unclean_shutdown`, a broker that restarted
    /// without a clean shutdown and may have lost what it had not flushed.
    pub(super) fn transition(
        &mut self,
        isr: Vec<i32>,
        electorate: &Electorate,
        unclean_shutdown: Option<i32>,
    ) {
        let (elr, last_known_elr) = self.next_elr(&isr, electorate.min_isr, unclean_shutdown);
        let leader =
            if isr.contains(&self.leader_id) && electorate.unfenced.contains(&self.leader_id) {
                self.leader_id
            } else {
                elect(&self.replicas, &isr, &elr, &last_known_elr, electorate)
            };
        if leader < 0 || isr.contains(&leader) {
            self.set(leader, isr, elr, last_known_elr);
            return;
        }
        let staged = PartitionImage {
            isr,
            elr,
            last_known_elr,
            ..self.clone()
        };
        let (elr, last_known_elr) = staged.next_elr(&[leader], electorate.min_isr, None);
        self.set(leader, vec![leader], elr, last_known_elr);
    }

    /// The ELR and last known ELR after the ISR becomes `isr`. At or above min
    /// ISR both are empty. Below it, the ELR is every replica that was in the ISR
    /// or ELR and is not in the new ISR (nor `unclean_shutdown`). When the ISR and
    /// ELR both end empty, the last known ELR keeps who was in them last (Kafka's
    /// LastKnownElr), the replicas most likely to hold every committed record.
    pub(super) fn next_elr(
        &self,
        isr: &[i32],
        min_isr: usize,
        unclean_shutdown: Option<i32>,
    ) -> (Vec<i32>, Vec<i32>) {
        if isr.len() >= min_isr {
            return (Vec::new(), Vec::new());
        }
        let was_eligible = |id: &i32| self.isr.contains(id) || self.elr.contains(id);
        let elr: Vec<i32> = self
            .replicas
            .iter()
            .copied()
            .filter(|id| was_eligible(id) && !isr.contains(id) && Some(*id) != unclean_shutdown)
            .collect();
        if !isr.is_empty() || !elr.is_empty() {
            return (elr, Vec::new());
        }
        let last: Vec<i32> = self
            .replicas
            .iter()
            .copied()
            .filter(|id| was_eligible(id))
            .collect();
        let last_known_elr = if last.is_empty() {
            self.last_known_elr.clone()
        } else {
            last
        };
        (elr, last_known_elr)
    }

    /// A preferred-leader election: `leader`, a live ISR member, leads.
    pub(super) fn change(&mut self, leader: i32, isr: Vec<i32>) {
        let (elr, last_known_elr) = (self.elr.clone(), self.last_known_elr.clone());
        self.set(leader, isr, elr, last_known_elr);
    }

    /// Kafka's PartitionChangeRecord replay: a new leader bumps the leader epoch,
    /// and any change bumps the partition epoch (the compare-and-set token of
    /// AlterPartition). No change, no bump.
    pub(super) fn set(
        &mut self,
        leader: i32,
        isr: Vec<i32>,
        elr: Vec<i32>,
        last_known_elr: Vec<i32>,
    ) {
        let leader_changed = leader != self.leader_id;
        if !leader_changed
            && isr == self.isr
            && elr == self.elr
            && last_known_elr == self.last_known_elr
        {
            return;
        }
        if leader_changed {
            self.leader_id = leader;
            self.leader_epoch = self.leader_epoch.next();
        }
        self.isr = isr;
        self.elr = elr;
        self.last_known_elr = last_known_elr;
        self.partition_epoch += 1;
    }
}

/// What an election of one topic's partitions may draw on: the live brokers,
/// whether unclean election is on, and min.insync.replicas.
pub(super) struct Electorate<'a> {
    pub(super) unfenced: &'a std::collections::BTreeSet<i32>,
    pub(super) unclean: bool,
    pub(super) min_isr: usize,
}

/// A topic's election settings as the log knows them: its own overrides, else
/// the dynamic broker defaults, else Kafka's defaults. A node's static config is
/// not in the log, so it cannot decide what every node applies: a static
/// `min.insync.replicas` above 1 is enforced by the brokers (the high watermark
/// and acks=all) but the controller counts the ELR with 1, which only keeps it
/// smaller, never wrong.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct TopicRules {
    pub(super) unclean: bool,
    pub(super) min_isr: usize,
}

impl TopicRules {
    pub(super) fn broker_defaults(configs: &BTreeMap<String, String>) -> TopicRules {
        TopicRules {
            unclean: topic_unclean(configs, false),
            min_isr: topic_min_isr(configs, 1),
        }
    }

    pub(super) fn for_topic(self, configs: &BTreeMap<String, String>) -> TopicRules {
        TopicRules {
            unclean: topic_unclean(configs, self.unclean),
            min_isr: topic_min_isr(configs, self.min_isr),
        }
    }

    pub(super) fn electorate(self, unfenced: &std::collections::BTreeSet<i32>) -> Electorate<'_> {
        Electorate {
            unfenced,
            unclean: self.unclean,
            min_isr: self.min_isr,
        }
    }
}

/// Kafka's election order with ELR (KIP-966), each in replica order and only
/// among unfenced brokers: an ISR member; with the ISR empty, an ELR member;
/// with both empty, a member of the last known ELR (Kafka's balanced recovery:
/// it was in the ISR or ELR last, so it is the best hope for the committed
/// records); then, with unclean election on, any replica, the last known ELR
/// first. -1: none can lead.
pub(super) fn elect(
    replicas: &[i32],
    isr: &[i32],
    elr: &[i32],
    last_known_elr: &[i32],
    electorate: &Electorate,
) -> i32 {
    let live_in = |ids: &[i32]| {
        replicas
            .iter()
            .copied()
            .find(|id| ids.contains(id) && electorate.unfenced.contains(id))
    };
    live_in(isr)
        .or_else(|| isr.is_empty().then(|| live_in(elr)).flatten())
        .or_else(|| {
            (isr.is_empty() && elr.is_empty())
                .then(|| live_in(last_known_elr))
                .flatten()
        })
        .or_else(|| {
            electorate
                .unclean
                .then(|| live_in(last_known_elr).or_else(|| live_in(replicas)))
                .flatten()
        })
        .unwrap_or(-1)
}
