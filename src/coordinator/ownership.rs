//! Which partitions of its internal topic a coordinator serves, as the group
//! coordinator and the transaction coordinator both keep it: each follows the
//! leadership of the partitions of its topic. An election starts a load (the
//! partition's keys are refused "loading" meanwhile), the load's end serves the
//! partition, a resignation drops it, and the keys of every other partition are
//! refused "not coordinator". With `Ownership::Every` every partition is served
//! from the start and elections change nothing.
//!
//! `OwnedPartitions` is the table, kept by the coordinator's task alone (no
//! lock); `ServedPartitions` is its published side, a watch of the loaded
//! partitions with their leader epochs, through which callers wait until a
//! partition is served and background work checks it still writes for the
//! epoch it started in. `FollowsLeadership::follow` turns a `Leadership`
//! change into loads and unloads; what a coordinator loads and unloads, and
//! the Kafka error codes of a refusal (this module imports no error codes),
//! stay with the coordinator.
//!
//! Invariant: the watch always holds the table's `Loaded` partitions (None
//! with `Ownership::Every`); it is updated in the same step as the table.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;

use crate::coordinator::actor::{Answer, Mailbox, Stopped};

/// Which keys a coordinator serves: a key belongs to a partition of its
/// internal topic (`internal_topics::group_partition`, `txn_partition`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ownership {
    /// Every key, from the start (a coordinator with no cluster around it).
    Every,
    /// The keys of the partitions it was elected for, once each is loaded;
    /// until then their requests are answered COORDINATOR_LOAD_IN_PROGRESS,
    /// and those of other partitions NOT_COORDINATOR.
    Elected,
}

/// Where an elected partition stands, with the leader epoch it was elected in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Load {
    Loading(i32),
    /// Loaded in epoch `since` and led without a break up to `epoch`.
    Loaded {
        since: i32,
        epoch: i32,
    },
}

/// Why a key's requests are not served here.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    /// Its partition is being loaded (Kafka's COORDINATOR_LOAD_IN_PROGRESS).
    Loading,
    /// Its partition is not led here (Kafka's NOT_COORDINATOR).
    NotLeader,
}

/// A change of this broker's leadership of a partition of the internal topic.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Leadership {
    /// This broker now leads the partition in this leader epoch: its keys are
    /// loaded, then served. `continued`: it led the partition without a break
    /// since the epoch its keys were loaded in (no other leader's epoch in its
    /// log in between, as when a reassignment's end bumps the epoch), so the
    /// keys it holds are current and only the epoch its writes are fenced by
    /// rises (Kafka's CoordinatorRuntime bumps an active shard's epoch without
    /// a reload).
    Elected {
        partition: i32,
        leader_epoch: i32,
        continued: bool,
    },
    /// This broker no longer leads the partition: its keys leave.
    Resigned { partition: i32 },
}

/// A command of a coordinator's task that hands it a change of leadership,
/// answered once the task has taken it.
pub trait LeadershipCommand: Sized {
    fn leadership(change: Leadership, answer: Answer<()>) -> Self;
}

impl<C: LeadershipCommand> Mailbox<C> {
    /// Hands `change` to the coordinator's task; returns once the task has
    /// taken it (an election's load goes on after).
    pub async fn follow(&self, change: Leadership) -> Result<(), Stopped> {
        self.call(|answer| C::leadership(change, answer)).await
    }
}

/// What an election asks of the coordinator.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Election {
    /// Nothing: every partition is served, or this epoch is already held.
    Held,
    /// Load the partition's keys.
    Load,
    /// Unload the keys an earlier epoch loaded, then load them again (another
    /// leader may have written in between).
    Reload,
    /// Keep the keys; their writes are fenced by the new epoch from now on.
    Raised,
}

/// The loaded partitions with (the epoch each was loaded in, the epoch it is
/// led in now); None: every partition.
type Loaded = Option<HashMap<i32, (i32, i32)>>;

/// Whether the latest metadata image this broker has names it the leader of a
/// partition of the coordinator's internal topic. Elections reach the table
/// only once the logs follow that image, which takes a while (a new internal
/// topic is fifty logs, each created with fsyncs): meanwhile a key of such a
/// partition is refused "loading", as it is about to be, rather than "not
/// leader", after which clients give up a commit or look for their
/// coordinator again.
#[derive(Clone)]
pub struct LedInLatestImage(Option<Arc<dyn Fn(i32) -> bool + Send + Sync>>);

impl LedInLatestImage {
    /// Asks `leads` (cheap: it reads the latest image).
    pub fn new(leads: impl Fn(i32) -> bool + Send + Sync + 'static) -> LedInLatestImage {
        LedInLatestImage(Some(Arc::new(leads)))
    }

    /// No image to ask: only elections count.
    pub fn never() -> LedInLatestImage {
        LedInLatestImage(None)
    }

    fn leads(&self, partition: i32) -> bool {
        self.0.as_ref().is_some_and(|leads| leads(partition))
    }
}

/// The table of elected partitions, kept by the coordinator's task.
pub struct OwnedPartitions {
    ownership: Ownership,
    partitions: HashMap<i32, Load>,
    served: watch::Sender<Loaded>,
    latest: LedInLatestImage,
}

/// The served partitions as callers see them; cheap to clone.
#[derive(Clone)]
pub struct ServedPartitions {
    served: watch::Receiver<Loaded>,
}

impl OwnedPartitions {
    /// The table, serving nothing until elected (`Ownership::Elected`) or
    /// everything (`Ownership::Every`), and its published side.
    /// `latest` says which partitions the latest image has this broker lead
    /// before their elections arrive.
    pub fn new(
        ownership: Ownership,
        latest: LedInLatestImage,
    ) -> (OwnedPartitions, ServedPartitions) {
        let every = ownership == Ownership::Every;
        let (sender, served) = watch::channel(if every { None } else { Some(HashMap::new()) });
        let owned = OwnedPartitions {
            ownership,
            partitions: HashMap::new(),
            served: sender,
            latest,
        };
        (owned, ServedPartitions { served })
    }

    /// Another published side of the table.
    pub fn subscribe(&self) -> ServedPartitions {
        ServedPartitions {
            served: self.served.subscribe(),
        }
    }

    /// None when the keys of `partition` are served here, else why not.
    pub fn refusal(&self, partition: i32) -> Option<Refusal> {
        if self.ownership == Ownership::Every {
            return None;
        }
        match self.partitions.get(&partition) {
            Some(Load::Loaded { .. }) => None,
            Some(Load::Loading(_)) => Some(Refusal::Loading),
            None if self.latest.leads(partition) => Some(Refusal::Loading),
            None => Some(Refusal::NotLeader),
        }
    }

    /// The partitions served here; None when every partition is.
    pub fn served(&self) -> Option<HashSet<i32>> {
        self.loaded().map(|loaded| loaded.into_keys().collect())
    }

    /// The leader epoch `partition` was elected in, loaded or still loading.
    pub fn epoch(&self, partition: i32) -> Option<i32> {
        match self.partitions.get(&partition) {
            Some(Load::Loading(epoch) | Load::Loaded { epoch, .. }) => Some(*epoch),
            None => None,
        }
    }

    /// This broker leads `partition` in `leader_epoch`: unless that epoch is
    /// held already, or the partition is loaded and was led here without a
    /// break since (`continued`: its epoch only rises), the partition is
    /// loading from now on.
    fn elect(&mut self, partition: i32, leader_epoch: i32, continued: bool) -> Election {
        if self.ownership == Ownership::Every {
            return Election::Held;
        }
        let previous = self.epoch(partition);
        if previous == Some(leader_epoch) {
            return Election::Held;
        }
        if let Some(Load::Loaded { since, epoch }) = self.partitions.get(&partition).copied() {
            if continued && epoch < leader_epoch {
                self.partitions.insert(
                    partition,
                    Load::Loaded {
                        since,
                        epoch: leader_epoch,
                    },
                );
                self.publish();
                return Election::Raised;
            }
        }
        self.partitions
            .insert(partition, Load::Loading(leader_epoch));
        if previous.is_none() {
            return Election::Load;
        }
        self.publish();
        Election::Reload
    }

    /// Whether `partition` is still loading for `leader_epoch`: a load that
    /// ends after a resignation, or after an election in a later epoch, is
    /// dropped.
    pub fn is_loading(&self, partition: i32, leader_epoch: i32) -> bool {
        self.partitions.get(&partition) == Some(&Load::Loading(leader_epoch))
    }

    /// The load of `partition` for `leader_epoch` is done: its keys are served.
    pub fn finish_load(&mut self, partition: i32, leader_epoch: i32) {
        self.partitions.insert(
            partition,
            Load::Loaded {
                since: leader_epoch,
                epoch: leader_epoch,
            },
        );
        self.publish();
    }

    /// This broker no longer leads `partition`; whether it was elected for it
    /// (and so has keys to unload).
    fn resign(&mut self, partition: i32) -> bool {
        if self.partitions.remove(&partition).is_none() {
            return false;
        }
        self.publish();
        true
    }

    fn loaded(&self) -> Loaded {
        if self.ownership == Ownership::Every {
            return None;
        }
        let loaded = self
            .partitions
            .iter()
            .filter_map(|(partition, load)| match load {
                Load::Loaded { since, epoch } => Some((*partition, (*since, *epoch))),
                Load::Loading(_) => None,
            });
        Some(loaded.collect())
    }

    fn publish(&self) {
        self.served.send_replace(self.loaded());
    }
}

/// A coordinator whose keys follow this broker's leadership of the partitions
/// of its internal topic: what it reads and drops is its own, when it does is
/// decided here.
pub trait FollowsLeadership {
    /// The coordinator's table of partitions.
    fn owned(&mut self) -> &mut OwnedPartitions;

    /// Starts reading the keys of `partition` for `leader_epoch`, after
    /// `delay`; when the read is done and the partition `is_loading` still,
    /// the coordinator takes the keys and calls `finish_load`.
    fn start_load(&mut self, partition: i32, leader_epoch: i32, delay: Duration);

    /// Drops the keys of `partition`, which is no longer led here.
    fn unload(&mut self, partition: i32);

    /// The keys of `partition` stay; its writes are fenced by `leader_epoch`
    /// from now on (see `Leadership::Elected`).
    fn raise_epoch(&mut self, partition: i32, leader_epoch: i32);

    /// Follows a change of leadership: an election loads the partition's keys,
    /// and a later epoch of a leadership already held loads them again (after
    /// dropping them), as another leader may have written in between; a
    /// resignation drops them.
    fn follow(&mut self, change: Leadership) {
        match change {
            Leadership::Elected {
                partition,
                leader_epoch,
                continued,
            } => {
                match self.owned().elect(partition, leader_epoch, continued) {
                    Election::Held => return,
                    Election::Raised => return self.raise_epoch(partition, leader_epoch),
                    Election::Reload => self.unload(partition),
                    Election::Load => {}
                }
                self.start_load(partition, leader_epoch, Duration::ZERO);
            }
            Leadership::Resigned { partition } => {
                if self.owned().resign(partition) {
                    self.unload(partition);
                }
            }
        }
    }
}

impl ServedPartitions {
    /// Waits, at most `wait`, until the keys of `partition` are served here
    /// (loaded after an election); whether they are.
    pub async fn wait(&self, partition: i32, wait: Duration) -> bool {
        let mut served = self.served.clone();
        let loaded = async move {
            served
                .wait_for(|served| {
                    served
                        .as_ref()
                        .is_none_or(|partitions| partitions.contains_key(&partition))
                })
                .await
                .is_ok()
        };
        tokio::time::timeout(wait, loaded).await.unwrap_or(false)
    }

    /// Whether `partition` is served here in `leader_epoch`, or was loaded in
    /// it and led here without a break since (always, when every partition
    /// is): work begun in that epoch goes on.
    pub fn serves_in(&self, partition: i32, leader_epoch: i32) -> bool {
        self.served.borrow().as_ref().is_none_or(|loaded| {
            loaded
                .get(&partition)
                .is_some_and(|(since, epoch)| (*since..=*epoch).contains(&leader_epoch))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn elected_partitions_load_then_serve() {
        let (mut owned, served) =
            OwnedPartitions::new(Ownership::Elected, LedInLatestImage::never());
        assert_eq!(owned.refusal(3), Some(Refusal::NotLeader));
        assert_eq!(owned.elect(3, 7, false), Election::Load);
        assert_eq!(owned.elect(3, 7, false), Election::Held);
        assert_eq!(owned.refusal(3), Some(Refusal::Loading));
        assert!(owned.is_loading(3, 7) && !owned.is_loading(3, 8));
        owned.finish_load(3, 7);
        assert_eq!(owned.refusal(3), None);
        assert_eq!(owned.served(), Some(HashSet::from([3])));
        assert!(served.serves_in(3, 7) && !served.serves_in(3, 6));
        assert_eq!(owned.elect(3, 8, false), Election::Reload);
        assert_eq!(owned.epoch(3), Some(8));
        assert!(!served.serves_in(3, 7) && !served.serves_in(3, 8));
        assert!(owned.resign(3) && !owned.resign(3));
        assert_eq!(owned.served(), Some(HashSet::new()));
    }

    #[test]
    fn a_partition_the_latest_image_has_led_here_is_loading_before_its_election() {
        let latest = LedInLatestImage::new(|partition| partition == 5);
        let (mut owned, _served) = OwnedPartitions::new(Ownership::Elected, latest);
        assert_eq!(owned.refusal(5), Some(Refusal::Loading));
        assert_eq!(owned.refusal(6), Some(Refusal::NotLeader));
        assert_eq!(owned.elect(5, 1, false), Election::Load);
        owned.finish_load(5, 1);
        assert_eq!(owned.refusal(5), None);
    }

    #[test]
    fn every_partition_is_served_from_the_start() {
        let (mut owned, served) = OwnedPartitions::new(Ownership::Every, LedInLatestImage::never());
        assert_eq!(owned.elect(1, 1, false), Election::Held);
        assert_eq!(owned.refusal(1), None);
        assert_eq!(owned.served(), None);
        assert!(served.serves_in(1, 0));
        assert!(!owned.resign(1));
    }

    /// What a coordinator was asked to do.
    #[derive(Debug, PartialEq)]
    enum Step {
        Load(i32, i32),
        Unload(i32),
        Raise(i32, i32),
    }

    /// A coordinator that writes down what it is asked to do.
    struct Steps {
        owned: OwnedPartitions,
        steps: Vec<Step>,
    }

    impl FollowsLeadership for Steps {
        fn owned(&mut self) -> &mut OwnedPartitions {
            &mut self.owned
        }

        fn start_load(&mut self, partition: i32, leader_epoch: i32, delay: Duration) {
            assert_eq!(delay, Duration::ZERO);
            self.steps.push(Step::Load(partition, leader_epoch));
        }

        fn unload(&mut self, partition: i32) {
            self.steps.push(Step::Unload(partition));
        }

        fn raise_epoch(&mut self, partition: i32, leader_epoch: i32) {
            self.steps.push(Step::Raise(partition, leader_epoch));
        }
    }

    #[test]
    fn following_leadership_loads_reloads_and_unloads() {
        for ownership in [Ownership::Elected, Ownership::Every] {
            let (owned, _served) = OwnedPartitions::new(ownership, LedInLatestImage::never());
            let mut coordinator = Steps {
                owned,
                steps: Vec::new(),
            };
            for leader_epoch in [1, 1, 2] {
                coordinator.follow(Leadership::Elected {
                    partition: 4,
                    leader_epoch,
                    continued: false,
                });
            }
            coordinator.follow(Leadership::Resigned { partition: 4 });
            coordinator.follow(Leadership::Resigned { partition: 4 });
            let expected = match ownership {
                Ownership::Elected => vec![
                    Step::Load(4, 1),
                    Step::Unload(4),
                    Step::Load(4, 2),
                    Step::Unload(4),
                ],
                Ownership::Every => Vec::new(),
            };
            assert_eq!(coordinator.steps, expected);
        }
    }

    /// A leader epoch bumped without a change of leader (a reassignment's
    /// end) keeps the loaded keys and raises the epoch their writes are fenced
    /// by; work begun in the earlier epoch goes on. A bump with another
    /// leader's epoch in between reloads.
    #[test]
    fn an_epoch_bump_without_another_leader_raises_the_epoch_without_a_reload() {
        let (owned, served) = OwnedPartitions::new(Ownership::Elected, LedInLatestImage::never());
        let mut coordinator = Steps {
            owned,
            steps: Vec::new(),
        };
        let elect = |leader_epoch, continued| Leadership::Elected {
            partition: 4,
            leader_epoch,
            continued,
        };
        coordinator.follow(elect(1, false));
        coordinator.owned.finish_load(4, 1);
        coordinator.follow(elect(2, true));
        assert_eq!(coordinator.owned.refusal(4), None, "still served");
        assert!(served.serves_in(4, 1) && served.serves_in(4, 2));
        assert!(!served.serves_in(4, 3));
        coordinator.follow(elect(5, false));
        assert_eq!(
            coordinator.steps,
            vec![
                Step::Load(4, 1),
                Step::Raise(4, 2),
                Step::Unload(4),
                Step::Load(4, 5)
            ]
        );
        assert!(!served.serves_in(4, 2), "reloading");
    }

    #[tokio::test(start_paused = true)]
    async fn waits_until_served_or_the_time_is_up() {
        let (mut owned, served) =
            OwnedPartitions::new(Ownership::Elected, LedInLatestImage::never());
        let wait = Duration::from_millis(100);
        assert!(!served.wait(2, wait).await);
        owned.elect(2, 1, false);
        let waiting = tokio::spawn({
            let served = served.clone();
            async move { served.wait(2, wait).await }
        });
        tokio::task::yield_now().await;
        owned.finish_load(2, 1);
        assert!(waiting.await.is_ok_and(|loaded| loaded));
    }
}
