//! Feature levels (Kafka's KIP-584 and KIP-778): which record formats and
//! behaviours the cluster has switched on, finalized in the metadata image,
//! raised by a command, and checked against what every broker supports, so
//! that new records roll out one release at a time.
//!
//! `metadata.version` uses Kafka's numbering (`MetadataVersion`'s feature
//! levels: 7 is 3.3-IV3, 25 is 4.0-IV3), so that `kafka-features.sh` names
//! each level. A log without a feature record is at `METADATA_VERSION_BASE`:
//! every record written before feature levels existed is valid there. A new
//! cluster starts at `METADATA_VERSION_LATEST`.
//!
//! Invariants: a record a level gates is proposed only once the image has
//! finalized that level, and `apply` refuses it below; a node that meets a
//! record it does not understand, or a level above what it supports, stops
//! applying there with an error that names the record and the level it needs
//! (`command::MetadataRecord`), never skipping it and never crashing; a level is
//! raised only to one every registered broker supports, and
//! `metadata.version` never goes down.

use std::collections::BTreeMap;

/// The name of the metadata format's feature.
pub const METADATA_VERSION: &str = "metadata.version";

/// Kafka's 3.3-IV3: the level of a log with no feature record (every record
/// Sluice wrote before feature levels), and the oldest level Kafka 4 takes.
pub const METADATA_VERSION_BASE: i16 = 7;

/// Kafka's 4.1-IV1: the newest level this node understands and the level a
/// new cluster starts at.
pub const METADATA_VERSION_LATEST: i16 = 27;

/// The level `FenceBrokers` (every expired broker in one command) needs.
pub const METADATA_VERSION_FENCE_BROKERS: i16 = 25;

/// The level a proposal's request id (`MetadataCommand::Request`) needs.
pub const METADATA_VERSION_REQUEST_IDS: i16 = 25;

/// The level SCRAM credentials in the metadata log need. Kafka has them
/// from 3.5-IV2; here they are the first level Sluice nodes without them do
/// not support, so that a cluster cannot write them while such a node runs.
pub const METADATA_VERSION_SCRAM: i16 = 26;

/// The level ACL bindings in the metadata log need (Kafka has them in every
/// KRaft level; here they came after SCRAM, so a cluster cannot write them
/// while a node that would not enforce them runs).
pub const METADATA_VERSION_ACLS: i16 = 27;

/// Kafka's release name of each `metadata.version` level this node supports,
/// for messages.
const METADATA_VERSION_NAMES: [(i16, &str); 21] = [
    (7, "3.3-IV3"),
    (8, "3.4-IV0"),
    (9, "3.5-IV0"),
    (10, "3.5-IV1"),
    (11, "3.5-IV2"),
    (12, "3.6-IV0"),
    (13, "3.6-IV1"),
    (14, "3.6-IV2"),
    (15, "3.7-IV0"),
    (16, "3.7-IV1"),
    (17, "3.7-IV2"),
    (18, "3.7-IV3"),
    (19, "3.7-IV4"),
    (20, "3.8-IV0"),
    (21, "3.9-IV0"),
    (22, "4.0-IV0"),
    (23, "4.0-IV1"),
    (24, "4.0-IV2"),
    (25, "4.0-IV3"),
    (26, "4.1-IV0"),
    (27, "4.1-IV1"),
];

/// `metadata.version` level `level` as Kafka names it, or the bare number.
pub fn metadata_version_name(level: i16) -> String {
    METADATA_VERSION_NAMES
        .iter()
        .find(|(known, _)| *known == level)
        .map_or_else(|| level.to_string(), |(_, name)| (*name).to_string())
}

/// The levels this node supports, by feature: (min, max).
pub fn supported() -> BTreeMap<String, (i16, i16)> {
    BTreeMap::from([(
        METADATA_VERSION.to_string(),
        (METADATA_VERSION_BASE, METADATA_VERSION_LATEST),
    )])
}

/// The levels a new cluster starts at.
pub fn bootstrap() -> BTreeMap<String, i16> {
    BTreeMap::from([(METADATA_VERSION.to_string(), METADATA_VERSION_LATEST)])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn levels_are_named_as_kafka_names_them() {
        assert_eq!(metadata_version_name(25), "4.0-IV3");
        assert_eq!(metadata_version_name(7), "3.3-IV3");
        assert_eq!(metadata_version_name(99), "99");
    }
}
