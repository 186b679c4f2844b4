//! The plain values the group coordinator takes and answers with: its settings,
//! requests, responses and descriptions. They mirror the fields of Kafka's
//! JoinGroup, SyncGroup and DescribeGroups messages without depending on the
//! protocol crate, so the coordinator stays a pure state machine that handlers
//! translate to and from.

use bytes::Bytes;

use crate::config::defaults::OFFSETS_RETENTION_CHECK_INTERVAL_MS_DEFAULT;
use crate::config::defaults::{
    GROUP_INITIAL_REBALANCE_DELAY_MS_DEFAULT, GROUP_MAX_SESSION_TIMEOUT_MS_DEFAULT,
    GROUP_MIN_SESSION_TIMEOUT_MS_DEFAULT,
};
use crate::error_code;
use crate::limits::GROUP_PERSIST_INTERVAL_MS;

/// The broker settings that shape a group's life, named as Kafka names them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GroupConfig {
    /// `group.initial.rebalance.delay.ms`: how long a new group waits for more
    /// members before its first generation, so they do not rebalance one by one.
    pub initial_rebalance_delay_ms: i64,
    /// `group.min.session.timeout.ms`.
    pub min_session_timeout_ms: i32,
    /// `group.max.session.timeout.ms`.
    pub max_session_timeout_ms: i32,
    /// `group.max.size`: members one group may hold.
    pub max_size: usize,
}

impl Default for GroupConfig {
    fn default() -> GroupConfig {
        GroupConfig {
            initial_rebalance_delay_ms: GROUP_INITIAL_REBALANCE_DELAY_MS_DEFAULT,
            min_session_timeout_ms: GROUP_MIN_SESSION_TIMEOUT_MS_DEFAULT,
            max_session_timeout_ms: GROUP_MAX_SESSION_TIMEOUT_MS_DEFAULT,
            // Kafka's default is Int.MaxValue, i.e. no limit.
            max_size: i32::MAX as usize,
        }
    }
}

/// Opaque id the caller attaches to a request whose answer may come later (join and sync).
pub type ReplyTo = u64;

#[derive(Debug, Clone, PartialEq)]
pub struct JoinRequest {
    pub group_id: String,
    /// Empty on a member's first join.
    pub member_id: String,
    /// Set by static members (KIP-345).
    pub group_instance_id: Option<String>,
    pub protocol_type: String,
    /// The protocols the member supports, most preferred first, with its metadata for each.
    pub protocols: Vec<(String, Bytes)>,
    pub session_timeout_ms: i32,
    pub rebalance_timeout_ms: i32,
    pub client_id: String,
    pub client_host: String,
    /// JoinGroup v4+ (KIP-394): a first join gets MEMBER_ID_REQUIRED and must rejoin.
    pub require_known_member_id: bool,
    /// JoinGroup v9+ (KIP-814): the client can be told to skip assignment. A
    /// static leader rejoining a Stable group without it is answered as a
    /// follower (the leader named is its old member id), as in Kafka.
    pub supports_skip_assignment: bool,
    pub reply_to: ReplyTo,
}

#[derive(Debug, Clone, PartialEq)]
pub struct JoinResponse {
    pub error: i16,
    pub generation_id: i32,
    pub protocol_type: Option<String>,
    pub protocol_name: Option<String>,
    pub leader: String,
    pub member_id: String,
    /// Every member's metadata for the chosen protocol; only for the leader.
    pub members: Vec<JoinedMember>,
    /// KIP-814: a static leader that rejoined a stable group must not assign again.
    pub skip_assignment: bool,
}

impl JoinResponse {
    /// Kafka's `JoinGroupResult(memberId, error)`: no generation, no leader.
    pub fn error(member_id: &str, error: i16) -> JoinResponse {
        JoinResponse {
            error,
            generation_id: -1,
            protocol_type: None,
            protocol_name: None,
            leader: String::new(),
            member_id: member_id.to_string(),
            members: Vec::new(),
            skip_assignment: false,
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct JoinedMember {
    pub member_id: String,
    pub group_instance_id: Option<String>,
    pub metadata: Bytes,
}

#[derive(Debug, Clone, PartialEq)]
pub struct SyncRequest {
    pub group_id: String,
    pub generation_id: i32,
    pub member_id: String,
    pub group_instance_id: Option<String>,
    /// SyncGroup v5+; checked against the group's when present.
    pub protocol_type: Option<String>,
    /// SyncGroup v5+; checked against the group's when present.
    pub protocol_name: Option<String>,
    /// The leader's assignment for each member; empty from followers.
    pub assignments: Vec<(String, Bytes)>,
    pub reply_to: ReplyTo,
}

#[derive(Debug, Clone, PartialEq)]
pub struct SyncResponse {
    pub error: i16,
    pub protocol_type: Option<String>,
    pub protocol_name: Option<String>,
    pub assignment: Bytes,
}

impl SyncResponse {
    pub fn error(error: i16) -> SyncResponse {
        SyncResponse {
            error,
            protocol_type: None,
            protocol_name: None,
            assignment: Bytes::new(),
        }
    }
}

/// An answer to a join or sync, for the request that carried `ReplyTo`.
#[derive(Debug, Clone, PartialEq)]
pub enum Reply {
    Join(ReplyTo, JoinResponse),
    Sync(ReplyTo, SyncResponse),
}

/// What ListGroups reports for one group.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct ListedGroup {
    pub group_id: String,
    /// Empty for a group that has none (one that only commits offsets).
    pub protocol_type: String,
    /// The state's name as Kafka writes it ("Stable", "Empty", ...).
    pub state: String,
}

/// What DescribeGroups reports for one group (Kafka's `GroupSummary`).
#[derive(Debug, Clone, PartialEq)]
pub struct GroupDescription {
    pub error: i16,
    pub state: String,
    pub protocol_type: String,
    /// The chosen protocol; empty unless the group is Stable, as in Kafka.
    pub protocol_name: String,
    pub members: Vec<DescribedMember>,
}

impl GroupDescription {
    /// Kafka's answer for a group it does not know: Dead, no error.
    pub fn dead() -> GroupDescription {
        GroupDescription {
            error: error_code::NONE,
            state: "Dead".to_string(),
            protocol_type: String::new(),
            protocol_name: String::new(),
            members: Vec::new(),
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct DescribedMember {
    pub member_id: String,
    pub group_instance_id: Option<String>,
    pub client_id: String,
    pub client_host: String,
    /// Metadata for the chosen protocol; empty unless the group is Stable.
    pub metadata: Bytes,
    /// Empty unless the group is Stable.
    pub assignment: Bytes,
}

/// The service's settings besides the coordinator's own.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GroupServiceConfig {
    pub coordinator: GroupConfig,
    /// `offsets.retention.minutes`, in ms: how long an empty group's committed
    /// offsets outlive their last commit.
    pub offsets_retention_ms: i64,
    /// How often the records of changed groups are stored.
    pub persist_interval_ms: u64,
    /// `offsets.retention.check.interval.ms`.
    pub retention_check_interval_ms: u64,
    /// Which groups this coordinator serves.
    pub ownership: Ownership,
}

pub use crate::coordinator::ownership::Ownership;

impl GroupServiceConfig {
    /// The broker's settings: these group settings, the broker's intervals.
    pub fn new(coordinator: GroupConfig, offsets_retention_ms: i64) -> GroupServiceConfig {
        GroupServiceConfig {
            coordinator,
            offsets_retention_ms,
            persist_interval_ms: GROUP_PERSIST_INTERVAL_MS,
            retention_check_interval_ms: OFFSETS_RETENTION_CHECK_INTERVAL_MS_DEFAULT,
            ownership: Ownership::Every,
        }
    }
}
