//! The one authorization table: what each API may ask the authorizer, as
//! Kafka's "Operations and Resources on Protocols" lists it, and the
//! request's view of the authorizer (`Access`).
//!
//! Dispatch gives every request an `Access`: its principal and address, the
//! authorizer, and the ACLs of the image current when it arrived, so that
//! one request's decisions agree with one another. A handler asks it per
//! resource (`RequestContext::authorize`); a question the table does not
//! list for the API is a bug, refused (and a panic in a debug build), so
//! that the table is the whole truth of what each API checks. Invariant: a
//! denied decision is logged (rate-limited) with the principal, operation
//! and resource, and the handler writes nothing for that resource.

use std::net::IpAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::{SystemTime, UNIX_EPOCH};

use kafka_protocol::messages::ApiKey;

use crate::limits::AUTHORIZATION_DENIALS_LOGGED_PER_SECOND;
use crate::security::acl::{Acls, Authorizer, Operation, ResourceType, CLUSTER_NAME};
use crate::security::Principal;

use Operation::{
    Alter, AlterConfigs, ClusterAction, Create, Delete, Describe, DescribeConfigs, IdempotentWrite,
    Read, Write,
};
use ResourceType::{Cluster, Group, Topic, TransactionalId};

/// What each API may check: (operation, resource type) pairs. An API absent
/// here checks nothing (ApiVersions and SASL's, which run before a principal
/// exists). Where Kafka takes one of two permissions (CreateTopics: Create
/// on the cluster, else on the topic) both are listed.
pub const TABLE: &[(ApiKey, &[(Operation, ResourceType)])] = &[
    // Write the topic; a transactional batch also Write its transactional
    // id. (Idempotence is authorized where the producer id is handed out,
    // InitProducerId, as in Kafka since KIP-679.)
    (ApiKey::Produce, &[(Write, Topic), (Write, TransactionalId)]),
    // A consumer Reads the topic; a follower needs ClusterAction.
    (ApiKey::Fetch, &[(Read, Topic), (ClusterAction, Cluster)]),
    (ApiKey::ListOffsets, &[(Describe, Topic)]),
    // Topics the principal may not Describe are left out; auto-creation
    // needs Create on the cluster or on the topic.
    (
        ApiKey::Metadata,
        &[(Describe, Topic), (Create, Cluster), (Create, Topic)],
    ),
    (ApiKey::OffsetCommit, &[(Read, Group), (Read, Topic)]),
    (ApiKey::OffsetFetch, &[(Describe, Group), (Describe, Topic)]),
    (
        ApiKey::FindCoordinator,
        &[(Describe, Group), (Describe, TransactionalId)],
    ),
    (ApiKey::JoinGroup, &[(Read, Group)]),
    (ApiKey::Heartbeat, &[(Read, Group)]),
    (ApiKey::LeaveGroup, &[(Read, Group)]),
    (ApiKey::SyncGroup, &[(Read, Group)]),
    (ApiKey::DescribeGroups, &[(Describe, Group)]),
    // Describe on the cluster lists every group; else each group the
    // principal may Describe, the others left out.
    (
        ApiKey::ListGroups,
        &[(Describe, Cluster), (Describe, Group)],
    ),
    (
        ApiKey::CreateTopics,
        &[(Create, Cluster), (Create, Topic), (DescribeConfigs, Topic)],
    ),
    // Delete on the cluster deletes any topic (Kafka's controller); else
    // per topic, Describe decides whether a refused topic is
    // UNKNOWN_TOPIC_OR_PARTITION or TOPIC_AUTHORIZATION_FAILED, so existence
    // does not leak.
    (
        ApiKey::DeleteTopics,
        &[(Delete, Cluster), (Delete, Topic), (Describe, Topic)],
    ),
    (ApiKey::DeleteRecords, &[(Delete, Topic)]),
    // A transactional id needs Write on it; an idempotent producer
    // IdempotentWrite on the cluster, or Write on some topic.
    (
        ApiKey::InitProducerId,
        &[
            (Write, TransactionalId),
            (IdempotentWrite, Cluster),
            (Write, Topic),
        ],
    ),
    // A client Describes the topic; a follower needs ClusterAction.
    (
        ApiKey::OffsetForLeaderEpoch,
        &[(Describe, Topic), (ClusterAction, Cluster)],
    ),
    // A producer Writes its id and the topics; a broker verifying a
    // transaction (v4+) needs ClusterAction.
    (
        ApiKey::AddPartitionsToTxn,
        &[
            (Write, TransactionalId),
            (Write, Topic),
            (ClusterAction, Cluster),
        ],
    ),
    (
        ApiKey::AddOffsetsToTxn,
        &[(Write, TransactionalId), (Read, Group)],
    ),
    (ApiKey::EndTxn, &[(Write, TransactionalId)]),
    (ApiKey::WriteTxnMarkers, &[(ClusterAction, Cluster)]),
    (
        ApiKey::TxnOffsetCommit,
        &[(Write, TransactionalId), (Read, Group), (Read, Topic)],
    ),
    (
        ApiKey::DescribeConfigs,
        &[(DescribeConfigs, Cluster), (DescribeConfigs, Topic)],
    ),
    (
        ApiKey::AlterConfigs,
        &[(AlterConfigs, Cluster), (AlterConfigs, Topic)],
    ),
    (
        ApiKey::IncrementalAlterConfigs,
        &[(AlterConfigs, Cluster), (AlterConfigs, Topic)],
    ),
    (ApiKey::CreatePartitions, &[(Alter, Topic)]),
    (ApiKey::DeleteGroups, &[(Delete, Group)]),
    (ApiKey::ElectLeaders, &[(Alter, Cluster)]),
    (ApiKey::AlterPartitionReassignments, &[(Alter, Cluster)]),
    (ApiKey::ListPartitionReassignments, &[(Describe, Cluster)]),
    (ApiKey::OffsetDelete, &[(Delete, Group), (Read, Topic)]),
    (ApiKey::UpdateFeatures, &[(Alter, Cluster)]),
    (ApiKey::DescribeCluster, &[(Describe, Cluster)]),
    (ApiKey::DescribeProducers, &[(Read, Topic)]),
    (
        ApiKey::DescribeTransactions,
        &[(Describe, TransactionalId), (Describe, Topic)],
    ),
    (ApiKey::ListTransactions, &[(Describe, TransactionalId)]),
    (ApiKey::DescribeUserScramCredentials, &[(Describe, Cluster)]),
    (ApiKey::AlterUserScramCredentials, &[(Alter, Cluster)]),
    (ApiKey::CreateAcls, &[(Alter, Cluster)]),
    (ApiKey::DescribeAcls, &[(Describe, Cluster)]),
    (ApiKey::DeleteAcls, &[(Alter, Cluster)]),
];

/// The APIs that report authorized operations (KIP-430), on which resource
/// type: every operation that applies to it is asked.
pub const AUTHORIZED_OPERATIONS: &[(ApiKey, ResourceType)] = &[
    (ApiKey::Metadata, Topic),
    (ApiKey::Metadata, Cluster),
    (ApiKey::DescribeCluster, Cluster),
    (ApiKey::DescribeGroups, Group),
];

/// The operations that apply to each resource type, for authorized
/// operations (Kafka's `AclEntry.supportedOperations`).
pub fn supported_operations(resource_type: ResourceType) -> &'static [Operation] {
    match resource_type {
        Topic => &[
            Read,
            Write,
            Create,
            Describe,
            Delete,
            Alter,
            DescribeConfigs,
            AlterConfigs,
        ],
        Group => &[Read, Describe, Delete, DescribeConfigs, AlterConfigs],
        Cluster => &[
            Create,
            ClusterAction,
            DescribeConfigs,
            AlterConfigs,
            IdempotentWrite,
            Alter,
            Describe,
        ],
        TransactionalId => &[Describe, Write],
        _ => &[],
    }
}

/// Whether the table lists `(operation, resource_type)` for `api_key`.
pub fn listed(api_key: ApiKey, operation: Operation, resource_type: ResourceType) -> bool {
    TABLE
        .iter()
        .any(|(api, checks)| *api == api_key && checks.contains(&(operation, resource_type)))
}

/// A request's view of the authorizer.
#[derive(Clone)]
pub struct Access {
    authorizer: Arc<Authorizer>,
    acls: Arc<Acls>,
    principal: Arc<Principal>,
    host: IpAddr,
}

impl std::fmt::Debug for Access {
    /// The principal and address; never the bindings.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Access")
            .field("principal", &self.principal)
            .field("host", &self.host)
            .field("enforced", &self.enforced())
            .finish()
    }
}

impl Access {
    /// A request's access; `acls` is asked only when an authorizer decides,
    /// so that without one no request reads the metadata image for it.
    pub fn new(
        authorizer: Arc<Authorizer>,
        acls: impl FnOnce() -> Arc<Acls>,
        principal: Arc<Principal>,
        host: IpAddr,
    ) -> Access {
        let acls = if authorizer.enabled() {
            acls()
        } else {
            static NONE: OnceLock<Arc<Acls>> = OnceLock::new();
            Arc::clone(NONE.get_or_init(Arc::default))
        };
        Access {
            authorizer,
            acls,
            principal,
            host,
        }
    }

    /// Whether an authorizer decides (else everything is allowed).
    pub fn enforced(&self) -> bool {
        self.authorizer.enabled()
    }

    /// The decision for `api_key`'s `operation` on `(resource_type, name)`,
    /// which the table must list; a denial is logged.
    pub fn authorize(
        &self,
        api_key: ApiKey,
        operation: Operation,
        resource_type: ResourceType,
        name: &str,
    ) -> bool {
        let allowed = self.authorize_quietly(api_key, operation, resource_type, name);
        if !allowed {
            log_denial(&self.principal, self.host, operation, resource_type, name);
        }
        allowed
    }

    /// Whether the cluster allows `operation`, a denial not logged: for a
    /// check with a per-resource fallback (Kafka's `logIfDenied = false`:
    /// Create on the cluster, else on the topic).
    pub fn authorize_cluster_quietly(&self, api_key: ApiKey, operation: Operation) -> bool {
        self.authorize_quietly(api_key, operation, Cluster, CLUSTER_NAME)
    }

    /// A decision whose denial is not logged: what a listing leaves out
    /// silently (Metadata of every topic, ListGroups, ListTransactions).
    pub fn authorize_quietly(
        &self,
        api_key: ApiKey,
        operation: Operation,
        resource_type: ResourceType,
        name: &str,
    ) -> bool {
        checked_by_table(api_key, operation, resource_type)
            && self.allows(operation, resource_type, name)
    }

    /// Whether the cluster allows `operation` (the resource `kafka-cluster`).
    pub fn authorize_cluster(&self, api_key: ApiKey, operation: Operation) -> bool {
        self.authorize(api_key, operation, Cluster, CLUSTER_NAME)
    }

    /// Whether `operation` is allowed on some resource of `resource_type`
    /// (Kafka's `authorizeByResourceType`, for an idempotent producer's
    /// Write on any topic); not logged, since its caller falls back on
    /// another check.
    pub fn authorize_any(
        &self,
        api_key: ApiKey,
        operation: Operation,
        resource_type: ResourceType,
    ) -> bool {
        checked_by_table(api_key, operation, resource_type)
            && self.authorizer.authorize_any(
                &self.acls,
                &self.principal,
                self.host,
                operation,
                resource_type,
            )
    }

    /// KIP-430's bitfield of what the principal may do on the resource:
    /// bit `code` set for each operation allowed, implied ones included.
    /// Undecided (no authorizer): every operation that applies.
    pub fn authorized_operations(
        &self,
        api_key: ApiKey,
        resource_type: ResourceType,
        name: &str,
    ) -> i32 {
        if !AUTHORIZED_OPERATIONS.contains(&(api_key, resource_type)) {
            debug_assert!(false, "{api_key:?} reports operations on {resource_type}");
            return 0;
        }
        supported_operations(resource_type)
            .iter()
            .filter(|operation| self.allows(**operation, resource_type, name))
            .fold(0, |bits, operation| bits | (1 << operation.code()))
    }

    /// The authorizer's decision on `(resource_type, name)` for this
    /// request's principal and address.
    fn allows(&self, operation: Operation, resource_type: ResourceType, name: &str) -> bool {
        self.authorizer.authorize(
            &self.acls,
            &self.principal,
            self.host,
            operation,
            resource_type,
            name,
        )
    }
}

/// Whether the table lists `(operation, resource_type)` for `api_key`; a
/// question it does not list is a bug, refused (a panic in a debug build).
fn checked_by_table(api_key: ApiKey, operation: Operation, resource_type: ResourceType) -> bool {
    if listed(api_key, operation, resource_type) {
        return true;
    }
    debug_assert!(
        false,
        "{api_key:?} asked {operation} on {resource_type}, which the table does not list"
    );
    tracing::error!(
        ?api_key,
        %operation,
        %resource_type,
        "an authorization the table does not list: refused"
    );
    false
}

/// The second the last denial was logged in, and how many were logged in it.
static DENIALS_LOGGED: AtomicU64 = AtomicU64::new(0);

/// Logs a denial at info, at most `AUTHORIZATION_DENIALS_LOGGED_PER_SECOND`
/// a second (a client retrying a refused request would flood the log).
fn log_denial(
    principal: &Principal,
    host: IpAddr,
    operation: Operation,
    resource_type: ResourceType,
    name: &str,
) {
    let second = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |elapsed| elapsed.as_secs());
    // The high 44 bits hold the second, the low 20 the count within it.
    let admitted = DENIALS_LOGGED
        .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |word| {
            let (at, count) = (word >> 20, word & 0xF_FFFF);
            if at != second & 0xFFF_FFFF_FFFF {
                Some(((second & 0xFFF_FFFF_FFFF) << 20) | 1)
            } else if count < AUTHORIZATION_DENIALS_LOGGED_PER_SECOND {
                Some(word + 1)
            } else {
                None
            }
        })
        .is_ok();
    if admitted {
        tracing::info!(
            %principal,
            %host,
            %operation,
            %resource_type,
            resource = name,
            "authorization denied"
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn authorized_operations_are_kafkas_bits_with_implications() {
        use crate::security::acl::{AclBinding, PatternType, Permission};
        let mut acls = Acls::default();
        acls.insert(
            uuid::Uuid::new_v4(),
            AclBinding {
                resource_type: Topic,
                resource_name: "t".to_string(),
                pattern_type: PatternType::Literal,
                principal: "User:alice".to_string(),
                host: "*".to_string(),
                operation: Read,
                permission: Permission::Allow,
            },
        );
        let access = |authorizer| {
            Access::new(
                Arc::new(authorizer),
                || Arc::new(acls.clone()),
                Arc::new(Principal::user("alice")),
                IpAddr::from([127, 0, 0, 1]),
            )
        };
        let standard = Authorizer::Standard {
            super_users: Default::default(),
            allow_everyone_if_no_acl_found: false,
        };
        // READ (3) and the DESCRIBE (8) it implies.
        assert_eq!(
            access(standard).authorized_operations(ApiKey::Metadata, Topic, "t"),
            (1 << 3) | (1 << 8)
        );
        // No authorizer: the topic's eight operations, as librdkafka's
        // 0081 counts them.
        let all = access(Authorizer::None).authorized_operations(ApiKey::Metadata, Topic, "t");
        assert_eq!(all.count_ones(), 8);
    }
}
