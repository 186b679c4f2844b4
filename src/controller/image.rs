//! The metadata image: the cluster metadata as of one applied raft log index.
//!
//! An image is immutable once published. The state machine owns the only mutable copy,
//! applies a batch of commands to it and publishes the result as a new `Arc<MetadataImage>`;
//! handlers and the broker hold those `Arc`s for as long as they like without blocking
//! anyone. Topics sit behind their own `Arc` so that publishing costs one pointer copy per
//! topic, not a deep copy. Invariants: `topic_names_by_id` is exactly the inverse of
//! `topics` (name -> topic_id); each partition keeps those of
//! `PartitionImage::check_invariants` (epochs only grow, the leader is in the ISR, the
//! ISR and ELR are disjoint subsets of the replicas) and each broker's epoch only grows,
//! checked after every change `apply` makes.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;

use serde::{Deserialize, Serialize};

use crate::security::acl::Acls;
use crate::types::{BrokerEpoch, LeaderEpoch};

/// Where a broker can be reached and in which state it is, as KRaft's
/// RegisterBrokerRecord and BrokerRegistrationChangeRecord keep it. The fields
/// after `rack` came with the cluster and default for registrations already in a
/// log: a single-node broker is one unfenced broker with epoch 0.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct BrokerRegistration {
    pub node_id: i32,
    /// The first listener's advertised address, kept for logs written before
    /// `listeners` existed.
    pub host: String,
    pub port: i32,
    pub rack: Option<String>,
    /// Every listener by name, so that a client is told each broker's address on
    /// the listener it came in on.
    #[serde(default)]
    pub listeners: Vec<BrokerEndpoint>,
    /// The feature levels the broker supports: (min, max) by name. Empty in a
    /// registration from before feature levels: such a broker supports
    /// `metadata.version` at its base only.
    #[serde(default)]
    pub supported_features: BTreeMap<String, (i16, i16)>,
    /// The partition replicas the broker's open file limit has room for (None:
    /// no limit known); the controller refuses to place more on it.
    #[serde(default)]
    pub partition_budget: Option<u32>,
    /// New at every start of the broker process (KRaft's incarnation id): a
    /// registration with a new one is a restart.
    #[serde(default)]
    pub incarnation_id: uuid::Uuid,
    /// The raft log index of this registration, set by `apply` (Kafka's broker
    /// epoch is the metadata offset of the RegisterBrokerRecord).
    #[serde(default = "single_node_broker_epoch")]
    pub epoch: BrokerEpoch,
    /// A fenced broker leads nothing and is left out of Metadata; a cluster
    /// broker registers fenced and is unfenced once it has caught up.
    #[serde(default)]
    pub fenced: bool,
    /// The broker epoch of the registration this start follows, if that process
    /// shut down cleanly (Kafka's PreviousBrokerEpoch, KIP-966); -1 otherwise.
    /// A restart after an unclean shutdown leaves every ISR and ELR.
    #[serde(default = "no_broker_epoch")]
    pub previous_broker_epoch: BrokerEpoch,
}

fn no_broker_epoch() -> BrokerEpoch {
    BrokerEpoch::NONE
}

fn single_node_broker_epoch() -> BrokerEpoch {
    BrokerEpoch::new(0)
}

/// One listener of a broker: its name and advertised address.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct BrokerEndpoint {
    pub name: String,
    pub host: String,
    pub port: i32,
}

impl BrokerRegistration {
    /// An unfenced broker with one unnamed listener at `host:port`, epoch 0.
    pub fn new(node_id: i32, host: &str, port: i32, rack: Option<String>) -> BrokerRegistration {
        BrokerRegistration {
            node_id,
            host: host.to_string(),
            port,
            rack,
            listeners: Vec::new(),
            supported_features: super::features::supported(),
            partition_budget: None,
            incarnation_id: uuid::Uuid::nil(),
            epoch: BrokerEpoch::new(0),
            fenced: false,
            previous_broker_epoch: BrokerEpoch::NONE,
        }
    }

    /// The levels of `feature` the broker supports, (min, max); None when it
    /// does not support it. A registration from before feature levels
    /// supports `metadata.version` at its base only.
    pub fn supports(&self, feature: &str) -> Option<(i16, i16)> {
        if self.supported_features.is_empty() {
            let base = super::features::METADATA_VERSION_BASE;
            return (feature == super::features::METADATA_VERSION).then_some((base, base));
        }
        self.supported_features.get(feature).copied()
    }

    /// The address of the listener called `name`, else the first one, as
    /// (host, port).
    pub fn endpoint(&self, name: &str) -> (&str, i32) {
        self.listeners
            .iter()
            .find(|listener| listener.name == name)
            .map_or((self.host.as_str(), self.port), |listener| {
                (listener.host.as_str(), listener.port)
            })
    }
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct MetadataImage {
    /// 22-char base64url of a random uuid, like Kafka's; empty until the first command.
    pub cluster_id: String,
    /// The broker whose leadership proposed the latest applied entry; -1 before any.
    pub controller_id: i32,
    pub brokers: BTreeMap<i32, BrokerRegistration>,
    pub topics: BTreeMap<String, Arc<TopicImage>>,
    pub topic_names_by_id: HashMap<uuid::Uuid, String>,
    /// Dynamic broker-level config overrides (AlterConfigs on the broker resource).
    pub broker_configs: BTreeMap<String, String>,
    /// The first producer id not yet handed out.
    pub next_producer_id: i64,
    /// The raft log index this image reflects, including blank and membership entries.
    pub last_applied_index: u64,
    /// The id of every topic ever deleted: a broker removes a partition log only when
    /// its topic id is here, so a node whose image lags behind its logs (replaying
    /// from an older point) never deletes data whose deletion it has not applied.
    /// Never purged (16 bytes per deleted topic); an id here is never reused. Sorted,
    /// so that every node serialises the same image the same way.
    #[serde(default)]
    pub deleted_topic_ids: BTreeSet<uuid::Uuid>,
    /// The finalized feature levels (Kafka's FinalizedFeatures); a feature
    /// absent is at its base (`features`).
    #[serde(default)]
    pub features: BTreeMap<String, i16>,
    /// The log index of the last change of `features` (Kafka's
    /// FinalizedFeaturesEpoch); 0 before any.
    #[serde(default)]
    pub features_epoch: u64,
    /// The request ids of the latest proposals that carried one, oldest first,
    /// with their outcomes (at most `CONTROLLER_REQUEST_IDS_KEPT`).
    #[serde(default)]
    pub applied_requests: std::collections::VecDeque<(uuid::Uuid, super::CommandOutcome)>,
    /// Every user's SCRAM credentials, by name and mechanism (Kafka's
    /// ScramMechanism type: 1 is SHA-256, 2 is SHA-512). Never a password.
    #[serde(default)]
    pub scram_credentials: BTreeMap<String, BTreeMap<i8, UserScramCredential>>,
    /// Every ACL binding, by id, indexed for decisions (shared between
    /// images until an ACL changes).
    #[serde(default)]
    pub acls: Arc<Acls>,
}

/// Kafka's UserScramCredentialRecord, less the name and mechanism it is
/// filed under (salt, StoredKey, ServerKey, iterations; never a password).
pub use crate::security::scram::ScramCredential as UserScramCredential;

impl Default for MetadataImage {
    fn default() -> MetadataImage {
        MetadataImage {
            cluster_id: String::new(),
            controller_id: -1,
            brokers: BTreeMap::new(),
            topics: BTreeMap::new(),
            topic_names_by_id: HashMap::new(),
            broker_configs: BTreeMap::new(),
            next_producer_id: 0,
            last_applied_index: 0,
            deleted_topic_ids: BTreeSet::new(),
            features: BTreeMap::new(),
            features_epoch: 0,
            applied_requests: std::collections::VecDeque::new(),
            scram_credentials: BTreeMap::new(),
            acls: Arc::default(),
        }
    }
}

impl MetadataImage {
    /// The finalized `metadata.version`.
    pub fn metadata_version(&self) -> i16 {
        self.features
            .get(super::features::METADATA_VERSION)
            .copied()
            .unwrap_or(super::features::METADATA_VERSION_BASE)
    }

    /// The finalized level of every feature, `metadata.version` always among them.
    pub fn finalized_features(&self) -> BTreeMap<String, i16> {
        let mut features = self.features.clone();
        features
            .entry(super::features::METADATA_VERSION.to_string())
            .or_insert(super::features::METADATA_VERSION_BASE);
        features
    }

    /// Kafka's auto leader rebalance: for every live broker whose share of
    /// partitions it prefers (is the first replica of) but does not lead is above
    /// `imbalance_percentage`, those partitions where it is in the ISR, to give back
    /// to it with a preferred-leader election.
    pub fn imbalanced_preferred_leaders(&self, imbalance_percentage: u32) -> Vec<(String, i32)> {
        let mut by_broker: BTreeMap<i32, (usize, Vec<(String, i32)>)> = BTreeMap::new();
        for (name, topic) in &self.topics {
            for (index, partition) in topic.partitions.iter().enumerate() {
                let Some(&preferred) = partition.replicas.first() else {
                    continue;
                };
                let entry = by_broker.entry(preferred).or_default();
                entry.0 += 1;
                if partition.leader_id != preferred && partition.isr.contains(&preferred) {
                    entry.1.push((name.clone(), index as i32));
                }
            }
        }
        by_broker
            .into_iter()
            .filter(|(id, _)| self.brokers.get(id).is_some_and(|b| !b.fenced))
            .filter(|(_, (preferred, movable))| {
                movable.len() * 100 > *preferred * imbalance_percentage as usize
            })
            .flat_map(|(_, (_, movable))| movable)
            .collect()
    }

    /// The brokers that serve: registered and not fenced.
    pub fn live_brokers(&self) -> impl Iterator<Item = &BrokerRegistration> {
        self.brokers.values().filter(|b| !b.fenced)
    }

    /// Partition `index` of the topic named `topic`, if the image has both.
    pub fn partition(&self, topic: &str, index: i32) -> Option<&PartitionImage> {
        self.topics
            .get(topic)?
            .partitions
            .get(usize::try_from(index).ok()?)
    }

    pub fn topic_by_id(&self, topic_id: &uuid::Uuid) -> Option<&Arc<TopicImage>> {
        self.topic_names_by_id
            .get(topic_id)
            .and_then(|name| self.topics.get(name))
    }
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TopicImage {
    pub name: String,
    pub topic_id: uuid::Uuid,
    /// Indexed by partition index: `partitions[i].partition_index == i`.
    pub partitions: Vec<PartitionImage>,
    /// Topic-level overrides only; defaults come from the broker config.
    pub configs: BTreeMap<String, String>,
}

/// One partition as KRaft's PartitionRecord keeps it. Every change bumps
/// `partition_epoch`; a change of leader also bumps `leader_epoch` (Kafka's
/// PartitionChangeRecord arithmetic, in `apply`). `leader_id` is -1 while no
/// member of the ISR can lead.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PartitionImage {
    pub partition_index: i32,
    pub leader_id: i32,
    pub leader_epoch: LeaderEpoch,
    pub partition_epoch: i32,
    pub replicas: Vec<i32>,
    pub isr: Vec<i32>,
    /// Eligible leader replicas (KIP-966): replicas that left the ISR while it
    /// was below min.insync.replicas and so still hold every committed record
    /// (the high watermark cannot move meanwhile). They may lead once the ISR is
    /// empty; an unclean restart takes a broker out.
    #[serde(default)]
    pub elr: Vec<i32>,
    /// Who was in the ISR or ELR when both became empty (Kafka's LastKnownElr):
    /// with nobody eligible left, one of them may lead again.
    #[serde(default)]
    pub last_known_elr: Vec<i32>,
    /// A reassignment in progress (KIP-455): replicas being added, which follow
    /// the leader until they are in the ISR, and replicas to remove once they all
    /// are. `replicas` holds both meanwhile.
    #[serde(default)]
    pub adding_replicas: Vec<i32>,
    #[serde(default)]
    pub removing_replicas: Vec<i32>,
}

/// What a change to a partition must not take back, read before the change
/// and checked after it by [`PartitionImage::check_invariants`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct PartitionEpochs {
    leader_id: i32,
    leader_epoch: LeaderEpoch,
    partition_epoch: i32,
}

impl PartitionImage {
    /// The leader and epochs now, to check a change against.
    pub(crate) fn epochs(&self) -> PartitionEpochs {
        PartitionEpochs {
            leader_id: self.leader_id,
            leader_epoch: self.leader_epoch,
            partition_epoch: self.partition_epoch,
        }
    }

    /// `change` made to this partition, then its invariants checked against
    /// the epochs it had before.
    pub(crate) fn update<R>(&mut self, change: impl FnOnce(&mut PartitionImage) -> R) -> R {
        let before = self.epochs();
        let result = change(self);
        self.check_invariants(Some(before));
        result
    }

    /// The invariants of a partition, after it is made (`before` None, Kafka's
    /// PartitionRecord) or changed from `before` (a PartitionChangeRecord): its
    /// epochs never go back and a new leader comes with a new leader epoch, which
    /// comes with a new partition epoch; the ISR is a subset of the replicas and
    /// holds the leader, if there is one; the ELR is a subset of the replicas
    /// disjoint from the ISR (`next_elr` leaves the new ISR out and draws on the
    /// replicas only); a reassignment's adding and removing replicas are replicas,
    /// never both. Each check is over a handful of replicas, so all are on in
    /// release builds.
    pub(crate) fn check_invariants(&self, before: Option<PartitionEpochs>) {
        let index = self.partition_index;
        if let Some(before) = before {
            assert!(
                self.leader_epoch >= before.leader_epoch,
                "partition {index}: the leader epoch only grows, and went from {} to {}",
                before.leader_epoch,
                self.leader_epoch
            );
            assert!(
                self.partition_epoch >= before.partition_epoch,
                "partition {index}: the partition epoch only grows, and went from {} to {}",
                before.partition_epoch,
                self.partition_epoch
            );
            assert!(
                self.leader_id == before.leader_id || self.leader_epoch > before.leader_epoch,
                "partition {index}: a new leader has a new leader epoch, and leader {} \
                 became {} at leader epoch {}",
                before.leader_id,
                self.leader_id,
                self.leader_epoch
            );
            assert!(
                self.leader_epoch == before.leader_epoch
                    || self.partition_epoch > before.partition_epoch,
                "partition {index}: a new leader epoch has a new partition epoch, and leader \
                 epoch {} became {} at partition epoch {}",
                before.leader_epoch,
                self.leader_epoch,
                self.partition_epoch
            );
        }
        for (set, ids) in [("ISR", &self.isr), ("ELR", &self.elr)] {
            assert!(
                ids.iter().all(|id| self.replicas.contains(id)),
                "partition {index}: the {set} is a subset of the replicas, and {set} {ids:?} is \
                 not of replicas {:?}",
                self.replicas
            );
        }
        assert!(
            self.leader_id < 0 || self.isr.contains(&self.leader_id),
            "partition {index}: the leader is in the ISR, and leader {} is not in ISR {:?}",
            self.leader_id,
            self.isr
        );
        assert!(
            !self.elr.iter().any(|id| self.isr.contains(id)),
            "partition {index}: the ELR and the ISR are disjoint, and ELR {:?} meets ISR {:?}",
            self.elr,
            self.isr
        );
        assert!(
            self.adding_replicas
                .iter()
                .chain(&self.removing_replicas)
                .all(|id| self.replicas.contains(id))
                && !self
                    .adding_replicas
                    .iter()
                    .any(|id| self.removing_replicas.contains(id)),
            "partition {index}: replicas being added {:?} and removed {:?} are distinct \
             replicas of {:?}",
            self.adding_replicas,
            self.removing_replicas,
            self.replicas
        );
    }
}

impl BrokerRegistration {
    /// The invariants of a registration that replaced `previous` (None: the
    /// broker's first): the broker epoch, the log index of the registration,
    /// only grows for a broker, and a registration is filed under its node id.
    pub(crate) fn check_invariants(&self, previous: Option<&BrokerRegistration>) {
        if let Some(previous) = previous {
            assert_eq!(
                previous.node_id, self.node_id,
                "a registration replaces one of the same broker"
            );
            assert!(
                self.epoch >= previous.epoch,
                "broker {}: the broker epoch only grows, and went from {} to {}",
                self.node_id,
                previous.epoch,
                self.epoch
            );
        }
    }
}

impl MetadataImage {
    /// The invariants of the whole image, after each command in debug builds
    /// only, as it walks every topic, partition and broker: `topic_names_by_id`
    /// is exactly the inverse of `topics`; a deleted topic id is not in use;
    /// `partitions[i]` is partition `i` and keeps the invariants of
    /// [`PartitionImage::check_invariants`]; a broker is filed under its node id
    /// and its epoch, a log index, is not beyond the index applied.
    pub(crate) fn check_invariants(&self) {
        if !cfg!(debug_assertions) {
            return;
        }
        debug_assert_eq!(
            self.topic_names_by_id.len(),
            self.topics.len(),
            "topic_names_by_id is the inverse of topics: as many ids as names"
        );
        for (name, topic) in &self.topics {
            debug_assert!(
                &topic.name == name && self.topic_names_by_id.get(&topic.topic_id) == Some(name),
                "topic_names_by_id is the inverse of topics, and topic {name} (named {}) has \
                 id {} filed under {:?}",
                topic.name,
                topic.topic_id,
                self.topic_names_by_id.get(&topic.topic_id)
            );
            debug_assert!(
                !self.deleted_topic_ids.contains(&topic.topic_id),
                "a deleted topic id is never reused, and topic {name} has deleted id {}",
                topic.topic_id
            );
            for (index, partition) in (0..).zip(&topic.partitions) {
                debug_assert_eq!(
                    partition.partition_index, index,
                    "topic {name}: partitions[i] is partition i"
                );
                partition.check_invariants(None);
            }
        }
        for (id, broker) in &self.brokers {
            debug_assert_eq!(*id, broker.node_id, "a broker is filed under its node id");
            debug_assert!(
                u64::try_from(broker.epoch.get())
                    .is_ok_and(|epoch| epoch <= self.last_applied_index),
                "broker {id}: the broker epoch is the index of an applied registration, and {} \
                 is beyond {}",
                broker.epoch,
                self.last_applied_index
            );
        }
    }
}

/// A new cluster id as Kafka makes one: a random (v4) uuid in unpadded base64url, 22 chars.
pub fn new_cluster_id() -> String {
    base64url_16(uuid::Uuid::new_v4().as_bytes())
}

const BASE64URL_ALPHABET: &[u8; 64] =
    b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

/// Unpadded base64url of 16 bytes. Written out rather than pulling in a crate for 22 chars.
fn base64url_16(bytes: &[u8; 16]) -> String {
    let mut out = String::with_capacity(22);
    for chunk in bytes.chunks(3) {
        let b = [
            chunk[0],
            *chunk.get(1).unwrap_or(&0),
            *chunk.get(2).unwrap_or(&0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        let sextets = chunk.len() + 1;
        for i in 0..sextets {
            let index = (n >> (18 - 6 * i)) & 0x3f;
            out.push(char::from(BASE64URL_ALPHABET[index as usize]));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A registration from a log written before broker epochs: the fields it
    /// lacks take their defaults, and the typed epochs read and write the same
    /// integers as before.
    #[test]
    fn a_registration_without_epochs_decodes_as_a_single_node_broker() {
        let old = r#"{"node_id":1,"host":"localhost","port":9092,"rack":null}"#;
        let registration: BrokerRegistration = serde_json::from_str(old).expect("json");
        assert_eq!(registration.epoch, BrokerEpoch::new(0));
        assert_eq!(registration.previous_broker_epoch, BrokerEpoch::NONE);
        let mut registration = BrokerRegistration::new(1, "localhost", 9092, None);
        registration.epoch = BrokerEpoch::new(17);
        let json = serde_json::to_value(&registration).expect("json");
        assert_eq!(json["epoch"], 17);
        assert_eq!(json["previous_broker_epoch"], -1);
    }

    #[test]
    fn cluster_id_is_22_chars_of_base64url() {
        let id = new_cluster_id();
        assert_eq!(id.len(), 22);
        assert!(id
            .bytes()
            .all(|c| c.is_ascii_alphanumeric() || c == b'-' || c == b'_'));
        // Known vector: sixteen 0xff bytes.
        assert_eq!(base64url_16(&[0xff; 16]), "_____________________w");
        assert_eq!(base64url_16(&[0; 16]), "AAAAAAAAAAAAAAAAAAAAAA");
    }
}
