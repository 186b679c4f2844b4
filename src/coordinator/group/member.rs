//! One member of a classic group, as Kafka's `MemberMetadata` keeps it: what it
//! supports, what it was assigned, which join or sync of it is still waiting for
//! an answer, and when its session ends. Owned by its `Group`; never shared.

use bytes::Bytes;

use super::api::{DescribedMember, JoinRequest, ReplyTo};
use crate::store::MemberValue;

/// Kafka's `GroupCoordinator.NewMemberJoinTimeoutMs`: a member that joined but has
/// not yet been through a completed join phase cannot heartbeat, so this bounds
/// how long its join may wait before it is dropped (it retries if still alive).
pub const NEW_MEMBER_JOIN_TIMEOUT_MS: i64 = 300_000;

#[derive(Debug, Clone)]
pub struct Member {
    pub member_id: String,
    pub group_instance_id: Option<String>,
    pub client_id: String,
    pub client_host: String,
    pub rebalance_timeout_ms: i32,
    pub session_timeout_ms: i32,
    pub protocol_type: String,
    /// Most preferred first, with this member's metadata for each.
    pub protocols: Vec<(String, Bytes)>,
    pub assignment: Bytes,
    pub awaiting_join: Option<ReplyTo>,
    pub awaiting_sync: Option<ReplyTo>,
    /// Joined, but no join phase has completed since.
    pub is_new: bool,
    /// When the session ends unless a heartbeat, join, sync or commit refreshes it.
    pub session_deadline_ms: i64,
}

impl Member {
    /// A member that has just joined with `request` and waits for the join phase to complete.
    pub fn joining(member_id: String, request: &JoinRequest, now_ms: i64) -> Member {
        Member {
            member_id,
            group_instance_id: request.group_instance_id.clone(),
            client_id: request.client_id.clone(),
            client_host: request.client_host.clone(),
            rebalance_timeout_ms: request.rebalance_timeout_ms,
            session_timeout_ms: request.session_timeout_ms,
            protocol_type: request.protocol_type.clone(),
            protocols: request.protocols.clone(),
            assignment: Bytes::new(),
            awaiting_join: Some(request.reply_to),
            awaiting_sync: None,
            is_new: true,
            session_deadline_ms: now_ms.saturating_add(NEW_MEMBER_JOIN_TIMEOUT_MS),
        }
    }

    /// A member of a group stored Stable (Kafka's `GroupMetadata.loadGroup`): it
    /// supports the group's protocol alone, with the metadata it was stored with,
    /// keeps its assignment, and its session starts afresh at `now_ms`.
    pub fn restored(
        value: MemberValue,
        protocol_type: &str,
        protocol: &str,
        now_ms: i64,
    ) -> Member {
        let mut member = Member {
            member_id: value.member_id,
            group_instance_id: value.group_instance_id,
            client_id: value.client_id,
            client_host: value.client_host,
            rebalance_timeout_ms: value.rebalance_timeout_ms,
            session_timeout_ms: value.session_timeout_ms,
            protocol_type: protocol_type.to_string(),
            protocols: vec![(protocol.to_string(), Bytes::from(value.subscription))],
            assignment: Bytes::from(value.assignment),
            awaiting_join: None,
            awaiting_sync: None,
            is_new: false,
            session_deadline_ms: 0,
        };
        member.refresh_session(now_ms);
        member
    }

    /// What the group's record keeps of this member, with its metadata for `protocol`.
    pub fn value(&self, protocol: &str) -> MemberValue {
        MemberValue {
            member_id: self.member_id.clone(),
            group_instance_id: self.group_instance_id.clone(),
            client_id: self.client_id.clone(),
            client_host: self.client_host.clone(),
            rebalance_timeout_ms: self.rebalance_timeout_ms,
            session_timeout_ms: self.session_timeout_ms,
            subscription: self.metadata(protocol).to_vec(),
            assignment: self.assignment.to_vec(),
        }
    }

    /// Whether `value` is what `value(protocol)` would give, without copying.
    pub fn is_stored_as(&self, protocol: &str, value: &MemberValue) -> bool {
        self.member_id == value.member_id
            && self.group_instance_id == value.group_instance_id
            && self.client_id == value.client_id
            && self.client_host == value.client_host
            && self.rebalance_timeout_ms == value.rebalance_timeout_ms
            && self.session_timeout_ms == value.session_timeout_ms
            && self.assignment.as_ref() == value.assignment.as_slice()
            && self.metadata(protocol).as_ref() == value.subscription.as_slice()
    }

    pub fn supports(&self, protocol: &str) -> bool {
        self.protocols.iter().any(|(name, _)| name == protocol)
    }

    /// Same protocols, in the same order, with the same metadata (Kafka's `matches`).
    pub fn matches(&self, protocols: &[(String, Bytes)]) -> bool {
        self.protocols == protocols
    }

    /// This member's most preferred protocol among `candidates`.
    pub fn vote<'a>(&'a self, candidates: &[String]) -> Option<&'a str> {
        self.protocols
            .iter()
            .map(|(name, _)| name.as_str())
            .find(|name| candidates.iter().any(|candidate| candidate == name))
    }

    pub fn metadata(&self, protocol: &str) -> Bytes {
        self.protocols
            .iter()
            .find(|(name, _)| name == protocol)
            .map(|(_, metadata)| metadata.clone())
            .unwrap_or_default()
    }

    pub fn refresh_session(&mut self, now_ms: i64) {
        self.session_deadline_ms = now_ms.saturating_add(i64::from(self.session_timeout_ms));
    }

    /// Kafka's `hasSatisfiedHeartbeat`, inverted: a member waiting on a join or
    /// sync is alive by definition, unless it is new (it may have gone away
    /// while its first join waited).
    pub fn session_expired(&self, now_ms: i64) -> bool {
        let waiting = self.awaiting_join.is_some() || self.awaiting_sync.is_some();
        self.session_deadline_ms <= now_ms && (self.is_new || !waiting)
    }

    /// DescribeGroups' view; metadata and assignment only when `protocol` is known.
    pub fn describe(&self, protocol: Option<&str>) -> DescribedMember {
        DescribedMember {
            member_id: self.member_id.clone(),
            group_instance_id: self.group_instance_id.clone(),
            client_id: self.client_id.clone(),
            client_host: self.client_host.clone(),
            metadata: protocol.map(|p| self.metadata(p)).unwrap_or_default(),
            assignment: match protocol {
                Some(_) => self.assignment.clone(),
                None => Bytes::new(),
            },
        }
    }
}
