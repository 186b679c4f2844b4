//! The authorizer on the wire: the ACL APIs (CreateAcls, DescribeAcls,
//! DeleteAcls at v0 to v3, with Kafka's per-binding errors), and the shared
//! fixture the per-API refusal tests use: a broker with `--authorizer
//! standard` on a SASL_PLAINTEXT listener, `admin` a super user and `alice`
//! and `bob` ordinary users, each logged in with PLAIN on its own wire.

use std::sync::Arc;

use bytes::Bytes;
use kafka_protocol::messages::create_acls_request::AclCreation;
use kafka_protocol::messages::delete_acls_request::DeleteAclsFilter;
use kafka_protocol::messages::*;
use sluice::config::{SaslConfig, ScramUser, SecurityProtocol};
use sluice::security::acl::{Authorizer, Operation, PatternType, Permission, ResourceType};
use sluice::security::sasl::{Mechanism, SaslSettings};
use sluice::security::scram::ScramMechanism;

use crate::harness::{call, hex, split_v0, text, TestBroker, Wire};

const METADATA: i16 = 3;
const SASL_HANDSHAKE: i16 = 17;
const SASL_AUTHENTICATE: i16 = 36;
const DESCRIBE_ACLS: i16 = 29;
const CREATE_ACLS: i16 = 30;
const DELETE_ACLS: i16 = 31;

pub const TOPIC_AUTHORIZATION_FAILED: i16 = 29;
pub const GROUP_AUTHORIZATION_FAILED: i16 = 30;
pub const CLUSTER_AUTHORIZATION_FAILED: i16 = 31;
pub const INVALID_REQUEST: i16 = 42;
pub const TRANSACTIONAL_ID_AUTHORIZATION_FAILED: i16 = 53;
pub const SECURITY_DISABLED: i16 = 54;

/// A broker with the standard authorizer on one SASL_PLAINTEXT listener:
/// `admin` (a super user), `alice` and `bob`, each's password
/// `<name>-secret`. `adjust` may change the config further.
pub fn secured_broker_with(adjust: impl FnOnce(&mut sluice::Config)) -> TestBroker {
    TestBroker::start_with(|config| {
        config.listeners[0].name = "SASL_PLAINTEXT".to_string();
        config.listeners[0].protocol = SecurityProtocol::SaslPlaintext;
        let user = |name: &str| ScramUser {
            mechanism: ScramMechanism::Sha256,
            name: name.to_string(),
            password: format!("{name}-secret"),
            iterations: 4096,
        };
        config.sasl = SaslConfig {
            settings: Arc::new(SaslSettings {
                mechanisms: Mechanism::ALL.to_vec(),
                scram_legacy_nonce: false,
                max_reauth: None,
                oauthbearer: None,
            }),
            add_scram: vec![user("admin"), user("alice"), user("bob")],
            jwks: None,
        };
        config.authorizer = Arc::new(Authorizer::Standard {
            super_users: ["User:admin".to_string()].into(),
            allow_everyone_if_no_acl_found: false,
        });
        adjust(config);
    })
}

pub fn secured_broker() -> TestBroker {
    secured_broker_with(|_| {})
}

/// A wire to `broker` logged in as `user` with PLAIN.
pub fn login(broker: &TestBroker, user: &str) -> Wire {
    let mut wire = broker.wire();
    let handshake: SaslHandshakeResponse = call(
        &mut wire,
        SASL_HANDSHAKE,
        1,
        false,
        &SaslHandshakeRequest::default().with_mechanism(text("PLAIN")),
    );
    assert_eq!(handshake.error_code, 0);
    let token = format!("\0{user}\0{user}-secret");
    let authenticated: SaslAuthenticateResponse = call(
        &mut wire,
        SASL_AUTHENTICATE,
        2,
        true,
        &SaslAuthenticateRequest::default().with_auth_bytes(Bytes::from(token.into_bytes())),
    );
    assert_eq!(authenticated.error_code, 0, "{user} logs in");
    wire
}

/// A binding for `principal` on `(resource_type, name)`, from any host.
pub fn creation(
    resource_type: ResourceType,
    name: &str,
    pattern_type: PatternType,
    principal: &str,
    operation: Operation,
    permission: Permission,
) -> AclCreation {
    AclCreation::default()
        .with_resource_type(resource_type.code())
        .with_resource_name(text(name))
        .with_resource_pattern_type(pattern_type.code())
        .with_principal(text(principal))
        .with_host(text("*"))
        .with_operation(operation.code())
        .with_permission_type(permission.code())
}

/// Creates the bindings through `wire` (CreateAcls v3), each expected to
/// succeed.
pub fn create_acls(wire: &mut Wire, creations: Vec<AclCreation>) {
    let response: CreateAclsResponse = call(
        wire,
        CREATE_ACLS,
        3,
        true,
        &CreateAclsRequest::default().with_creations(creations),
    );
    for result in &response.results {
        assert_eq!(result.error_code, 0, "{:?}", result.error_message);
    }
}

/// Allows `user` `operation` on the literal resource `(resource_type, name)`.
pub fn allow(
    admin: &mut Wire,
    user: &str,
    operation: Operation,
    resource_type: ResourceType,
    name: &str,
) {
    create_acls(
        admin,
        vec![creation(
            resource_type,
            name,
            PatternType::Literal,
            &format!("User:{user}"),
            operation,
            Permission::Allow,
        )],
    );
}

/// A DescribeAcls filter matching everything but what is set after it
/// (clients send null for "any" strings).
fn describe_all() -> DescribeAclsRequest {
    DescribeAclsRequest::default()
        .with_resource_type_filter(ResourceType::Any.code())
        .with_resource_name_filter(None)
        .with_pattern_type_filter(PatternType::Any.code())
        .with_principal_filter(None)
        .with_host_filter(None)
        .with_operation(Operation::Any.code())
        .with_permission_type(Permission::Any.code())
}

/// A DeleteAcls filter matching everything but what is set after it.
fn delete_all() -> DeleteAclsFilter {
    DeleteAclsFilter::default()
        .with_resource_type_filter(ResourceType::Any.code())
        .with_resource_name_filter(None)
        .with_pattern_type_filter(PatternType::Any.code())
        .with_principal_filter(None)
        .with_host_filter(None)
        .with_operation(Operation::Any.code())
        .with_permission_type(Permission::Any.code())
}

fn describe_topic_acls(wire: &mut Wire, version: i16, name: &str) -> DescribeAclsResponse {
    let request = describe_all()
        .with_resource_type_filter(ResourceType::Topic.code())
        .with_resource_name_filter(Some(text(name)))
        .with_pattern_type_filter(PatternType::Match.code())
        .with_operation(Operation::Any.code())
        .with_permission_type(Permission::Any.code());
    call(wire, DESCRIBE_ACLS, version, version >= 2, &request)
}

fn metadata_topics(wire: &mut Wire) -> Vec<String> {
    let response: MetadataResponse = call(
        wire,
        METADATA,
        12,
        true,
        &MetadataRequest::default().with_topics(None),
    );
    response
        .topics
        .iter()
        .filter_map(|t| t.name.as_ref().map(|n| n.to_string()))
        .collect()
}

#[test]
fn without_an_authorizer_the_acl_apis_answer_security_disabled() {
    let broker = TestBroker::start();
    let mut wire = broker.wire();
    let created: CreateAclsResponse = call(
        &mut wire,
        CREATE_ACLS,
        3,
        true,
        &CreateAclsRequest::default().with_creations(vec![creation(
            ResourceType::Topic,
            "t",
            PatternType::Literal,
            "User:alice",
            Operation::Read,
            Permission::Allow,
        )]),
    );
    assert_eq!(created.results[0].error_code, SECURITY_DISABLED);
    assert_eq!(
        created.results[0].error_message.as_deref(),
        Some("No Authorizer is configured.")
    );
    let described = describe_topic_acls(&mut wire, 3, "t");
    assert_eq!(described.error_code, SECURITY_DISABLED);
    let deleted: DeleteAclsResponse = call(
        &mut wire,
        DELETE_ACLS,
        3,
        true,
        &DeleteAclsRequest::default().with_filters(vec![delete_all()]),
    );
    assert_eq!(deleted.filter_results[0].error_code, SECURITY_DISABLED);
}

/// librdkafka's 0081 sequence: two bindings created, found by a MATCH
/// filter and by a LITERAL one for Write, then deleted by filter, each
/// deletion answered with the bindings it removed.
#[test]
fn acls_are_created_described_and_deleted_as_librdkafkas_0081_expects() {
    let broker = secured_broker();
    let mut admin = login(&broker, "admin");
    let topic = "rdkafkatest_acls";
    create_acls(
        &mut admin,
        vec![
            creation(
                ResourceType::Topic,
                &format!("{topic}_1"),
                PatternType::Prefixed,
                "User:test1",
                Operation::Read,
                Permission::Allow,
            ),
            creation(
                ResourceType::Topic,
                &format!("{topic}_2"),
                PatternType::Literal,
                "User:test2",
                Operation::Write,
                Permission::Allow,
            ),
        ],
    );
    // MATCH on a name the prefix covers finds the prefixed binding.
    let described = describe_topic_acls(&mut admin, 3, &format!("{topic}_1_more"));
    assert_eq!(described.error_code, 0);
    assert_eq!(described.resources.len(), 1);
    assert_eq!(
        described.resources[0].pattern_type,
        PatternType::Prefixed.code()
    );
    // LITERAL + Write: exactly test2's.
    let literal: DescribeAclsResponse = call(
        &mut admin,
        DESCRIBE_ACLS,
        1,
        false,
        &describe_all()
            .with_resource_type_filter(ResourceType::Topic.code())
            .with_resource_name_filter(Some(text(&format!("{topic}_2"))))
            .with_pattern_type_filter(PatternType::Literal.code())
            .with_operation(Operation::Write.code()),
    );
    assert_eq!(literal.resources.len(), 1);
    let acl = &literal.resources[0].acls[0];
    assert_eq!(acl.principal.as_str(), "User:test2");
    assert_eq!(acl.host.as_str(), "*");
    assert_eq!(acl.permission_type, Permission::Allow.code());

    let deleted: DeleteAclsResponse = call(
        &mut admin,
        DELETE_ACLS,
        2,
        true,
        &DeleteAclsRequest::default().with_filters(vec![
            delete_all()
                .with_resource_type_filter(ResourceType::Topic.code())
                .with_resource_name_filter(Some(text(&format!("{topic}_1"))))
                .with_pattern_type_filter(PatternType::Prefixed.code()),
            delete_all()
                .with_resource_type_filter(ResourceType::Topic.code())
                .with_resource_name_filter(Some(text(&format!("{topic}_2"))))
                .with_pattern_type_filter(PatternType::Match.code()),
        ]),
    );
    assert_eq!(deleted.filter_results.len(), 2);
    for (result, principal) in deleted
        .filter_results
        .iter()
        .zip(["User:test1", "User:test2"])
    {
        assert_eq!(result.error_code, 0);
        assert_eq!(result.matching_acls.len(), 1);
        assert_eq!(result.matching_acls[0].principal.as_str(), principal);
    }
    let all: DescribeAclsResponse = call(&mut admin, DESCRIBE_ACLS, 3, true, &describe_all());
    assert!(all.resources.is_empty(), "{all:?}");
}

#[test]
fn invalid_bindings_fail_alone_and_v0_reads_literal_patterns() {
    let broker = secured_broker();
    let mut admin = login(&broker, "admin");
    let response: CreateAclsResponse = call(
        &mut admin,
        CREATE_ACLS,
        3,
        true,
        &CreateAclsRequest::default().with_creations(vec![
            creation(
                ResourceType::Topic,
                "good",
                PatternType::Literal,
                "User:alice",
                Operation::Read,
                Permission::Allow,
            ),
            creation(
                ResourceType::Any,
                "bad",
                PatternType::Literal,
                "User:alice",
                Operation::Read,
                Permission::Allow,
            ),
            creation(
                ResourceType::Topic,
                "bad",
                PatternType::Match,
                "User:alice",
                Operation::Read,
                Permission::Allow,
            ),
            creation(
                ResourceType::Cluster,
                "not-the-cluster",
                PatternType::Literal,
                "User:alice",
                Operation::Alter,
                Permission::Allow,
            ),
            creation(
                ResourceType::Topic,
                "bad",
                PatternType::Literal,
                "alice",
                Operation::Read,
                Permission::Allow,
            ),
        ]),
    );
    let codes: Vec<i16> = response.results.iter().map(|r| r.error_code).collect();
    assert_eq!(
        codes,
        vec![
            0,
            INVALID_REQUEST,
            INVALID_REQUEST,
            INVALID_REQUEST,
            INVALID_REQUEST
        ]
    );

    // v0 (Kafka 3.9's bytes) has no pattern type: a v0 creation is LITERAL.
    // One creation: Topic "old", User:bob, host *, Write, Deny.
    let frame = admin.request(
        CREATE_ACLS,
        0,
        41,
        false,
        &hex("00000001 02 0003 6f6c64 0008 557365723a626f62 0001 2a 04 02"),
    );
    let (correlation_id, body) = split_v0(&frame);
    assert_eq!(correlation_id, 41);
    // No throttle; one result, no error, null message.
    assert_eq!(body, hex("00000000 00000001 0000 ffff").as_slice());
    // DescribeAcls v0: Topic "old", any principal, host, operation and
    // permission; the binding comes back in v0's layout.
    let frame = admin.request(
        DESCRIBE_ACLS,
        0,
        42,
        false,
        &hex("02 0003 6f6c64 ffff ffff 01 01"),
    );
    let (_, body) = split_v0(&frame);
    assert_eq!(
        body,
        hex("00000000 0000 ffff 00000001 02 0003 6f6c64 00000001 0008 557365723a626f62 0001 2a 04 02")
            .as_slice()
    );
    let described = describe_topic_acls(&mut admin, 1, "old");
    assert_eq!(described.resources.len(), 1);
    assert_eq!(
        described.resources[0].pattern_type,
        PatternType::Literal.code()
    );
    assert_eq!(
        described.resources[0].acls[0].permission_type,
        Permission::Deny.code()
    );
}

#[test]
fn only_a_principal_allowed_alter_on_the_cluster_changes_acls() {
    let broker = secured_broker();
    let mut alice = login(&broker, "alice");
    let denied: CreateAclsResponse = call(
        &mut alice,
        CREATE_ACLS,
        3,
        true,
        &CreateAclsRequest::default().with_creations(vec![creation(
            ResourceType::Topic,
            "*",
            PatternType::Literal,
            "User:alice",
            Operation::All,
            Permission::Allow,
        )]),
    );
    assert_eq!(denied.results[0].error_code, CLUSTER_AUTHORIZATION_FAILED);
    let described = describe_topic_acls(&mut alice, 3, "t");
    assert_eq!(described.error_code, CLUSTER_AUTHORIZATION_FAILED);

    let mut admin = login(&broker, "admin");
    allow(
        &mut admin,
        "alice",
        Operation::Alter,
        ResourceType::Cluster,
        "kafka-cluster",
    );
    let allowed: CreateAclsResponse = call(
        &mut alice,
        CREATE_ACLS,
        3,
        true,
        &CreateAclsRequest::default().with_creations(vec![creation(
            ResourceType::Topic,
            "mine",
            PatternType::Prefixed,
            "User:alice",
            Operation::All,
            Permission::Allow,
        )]),
    );
    assert_eq!(allowed.results[0].error_code, 0);
    // Alter implies Describe (an ALLOW): alice may list ACLs now.
    assert_eq!(describe_topic_acls(&mut alice, 3, "mine-1").error_code, 0);
}

#[test]
fn acls_survive_a_restart_and_are_enforced_after_it() {
    let mut broker = secured_broker();
    {
        let mut admin = login(&broker, "admin");
        allow(
            &mut admin,
            "alice",
            Operation::Describe,
            ResourceType::Topic,
            "kept",
        );
        let mut wire = login(&broker, "admin");
        let _: CreateTopicsResponse = call(
            &mut wire,
            19,
            5,
            true,
            &CreateTopicsRequest::default().with_topics(vec![
                create_topics_request::CreatableTopic::default()
                    .with_name(crate::harness::name("kept"))
                    .with_num_partitions(1)
                    .with_replication_factor(1),
                create_topics_request::CreatableTopic::default()
                    .with_name(crate::harness::name("hidden"))
                    .with_num_partitions(1)
                    .with_replication_factor(1),
            ]),
        );
    }
    broker.stop();
    broker.start_again();
    let mut alice = login(&broker, "alice");
    // Metadata lists only what alice may Describe.
    assert_eq!(metadata_topics(&mut alice), vec!["kept".to_string()]);
    let mut admin = login(&broker, "admin");
    let mut all = metadata_topics(&mut admin);
    all.sort();
    assert_eq!(all, vec!["hidden".to_string(), "kept".to_string()]);
}

fn metadata_for(wire: &mut Wire, topic: &str, auto_create: bool) -> i16 {
    let response: MetadataResponse = call(
        wire,
        METADATA,
        12,
        true,
        &MetadataRequest::default()
            .with_topics(Some(vec![metadata_request::MetadataRequestTopic::default(
            )
            .with_name(Some(crate::harness::name(topic)))]))
            .with_allow_auto_topic_creation(auto_create),
    );
    response.topics[0].error_code
}

/// A consumer needs Read on the topic to fetch (and Describe, which Read
/// implies, to list offsets and see it in Metadata); until then every one of
/// them is TOPIC_AUTHORIZATION_FAILED, and Metadata says the same of a topic
/// that does not exist, so existence does not leak.
#[test]
fn a_consumer_reads_only_the_topics_it_may_read() {
    let broker = secured_broker();
    let mut admin = login(&broker, "admin");
    crate::produce_fetch::create_topic(&mut admin, "orders", 1, &[]);
    crate::produce_fetch::produce_for_tests(
        &mut admin,
        "orders",
        &crate::harness::record_batch(&[b"secret"], crate::harness::now_ms()),
    );
    let mut alice = login(&broker, "alice");
    let fetched = crate::produce_fetch::fetch(&mut alice, 12, "orders", 0, 0);
    let partition = &fetched.responses[0].partitions[0];
    assert_eq!(partition.error_code, TOPIC_AUTHORIZATION_FAILED);
    assert!(partition.records.as_ref().is_none_or(|r| r.is_empty()));
    let (code, _, _) = crate::produce_fetch::list_offsets_at(&mut alice, "orders", -1);
    assert_eq!(code, TOPIC_AUTHORIZATION_FAILED);
    assert_eq!(
        metadata_for(&mut alice, "orders", false),
        TOPIC_AUTHORIZATION_FAILED
    );
    assert_eq!(
        metadata_for(&mut alice, "no-such-topic", false),
        TOPIC_AUTHORIZATION_FAILED
    );
    assert!(metadata_topics(&mut alice).is_empty());

    allow(
        &mut admin,
        "alice",
        Operation::Read,
        ResourceType::Topic,
        "orders",
    );
    let fetched = crate::produce_fetch::fetch(&mut alice, 12, "orders", 0, 0);
    let partition = &fetched.responses[0].partitions[0];
    assert_eq!(partition.error_code, 0);
    assert!(partition.records.as_ref().is_some_and(|r| !r.is_empty()));
    let (code, offset, _) = crate::produce_fetch::list_offsets_at(&mut alice, "orders", -1);
    assert_eq!((code, offset), (0, 1));
    assert_eq!(metadata_for(&mut alice, "orders", false), 0);
    assert_eq!(metadata_topics(&mut alice), vec!["orders".to_string()]);
}

/// Auto-creation through Metadata needs Create (on the cluster or the
/// topic) besides Describe.
#[test]
fn auto_creation_needs_create() {
    let broker = secured_broker();
    let mut admin = login(&broker, "admin");
    let mut alice = login(&broker, "alice");
    allow(
        &mut admin,
        "alice",
        Operation::Describe,
        ResourceType::Topic,
        "fresh",
    );
    assert_eq!(
        metadata_for(&mut alice, "fresh", true),
        TOPIC_AUTHORIZATION_FAILED
    );
    assert!(!metadata_topics(&mut admin).contains(&"fresh".to_string()));
    allow(
        &mut admin,
        "alice",
        Operation::Create,
        ResourceType::Topic,
        "fresh",
    );
    assert_eq!(metadata_for(&mut alice, "fresh", true), 0);
    assert!(metadata_topics(&mut admin).contains(&"fresh".to_string()));
}

/// A principal without ClusterAction cannot pose as a follower: its
/// follower Fetch is refused partition by partition and its
/// OffsetForLeaderEpoch as a broker is CLUSTER_AUTHORIZATION_FAILED, even
/// with every topic permission.
#[test]
fn a_forged_follower_is_refused() {
    use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
    use kafka_protocol::messages::offset_for_leader_epoch_request::{
        OffsetForLeaderPartition, OffsetForLeaderTopic,
    };
    let broker = secured_broker();
    let mut admin = login(&broker, "admin");
    crate::produce_fetch::create_topic(&mut admin, "replicated", 1, &[]);
    create_acls(
        &mut admin,
        vec![creation(
            ResourceType::Topic,
            "*",
            PatternType::Literal,
            "User:alice",
            Operation::All,
            Permission::Allow,
        )],
    );
    let mut alice = login(&broker, "alice");
    let follower_fetch = FetchRequest::default()
        .with_replica_id(BrokerId(1))
        .with_max_wait_ms(0)
        .with_max_bytes(1 << 20)
        .with_session_epoch(-1)
        .with_topics(vec![FetchTopic::default()
            .with_topic(crate::harness::name("replicated"))
            .with_partitions(vec![FetchPartition::default()
                .with_partition(0)
                .with_fetch_offset(0)
                .with_partition_max_bytes(1 << 20)])]);
    let fetched: FetchResponse = call(&mut alice, 1, 12, true, &follower_fetch);
    assert_eq!(
        fetched.responses[0].partitions[0].error_code,
        TOPIC_AUTHORIZATION_FAILED
    );
    let epochs: OffsetForLeaderEpochResponse = call(
        &mut alice,
        23,
        4,
        true,
        &OffsetForLeaderEpochRequest::default()
            .with_replica_id(BrokerId(1))
            .with_topics(vec![OffsetForLeaderTopic::default()
                .with_topic(crate::harness::name("replicated"))
                .with_partitions(vec![OffsetForLeaderPartition::default()
                    .with_partition(0)
                    .with_current_leader_epoch(-1)
                    .with_leader_epoch(0)])]),
    );
    assert_eq!(
        epochs.topics[0].partitions[0].error_code,
        CLUSTER_AUTHORIZATION_FAILED
    );
    // As a consumer, the same principal may ask.
    let epochs: OffsetForLeaderEpochResponse = call(
        &mut alice,
        23,
        4,
        true,
        &OffsetForLeaderEpochRequest::default()
            .with_replica_id(BrokerId(-1))
            .with_topics(vec![OffsetForLeaderTopic::default()
                .with_topic(crate::harness::name("replicated"))
                .with_partitions(vec![OffsetForLeaderPartition::default()
                    .with_partition(0)
                    .with_current_leader_epoch(-1)
                    .with_leader_epoch(0)])]),
    );
    assert_eq!(epochs.topics[0].partitions[0].error_code, 0);
}

/// KIP-430: Metadata's authorized operations are what the authorizer
/// allows, implied operations included (librdkafka's 0081 checks READ
/// brings DESCRIBE).
#[test]
fn metadata_reports_the_operations_the_principal_may_do() {
    let broker = secured_broker();
    let mut admin = login(&broker, "admin");
    crate::produce_fetch::create_topic(&mut admin, "ops", 1, &[]);
    allow(
        &mut admin,
        "alice",
        Operation::Read,
        ResourceType::Topic,
        "ops",
    );
    allow(
        &mut admin,
        "alice",
        Operation::Alter,
        ResourceType::Cluster,
        "kafka-cluster",
    );
    let mut alice = login(&broker, "alice");
    let response: MetadataResponse = call(
        &mut alice,
        METADATA,
        10,
        true,
        &MetadataRequest::default()
            .with_topics(Some(vec![metadata_request::MetadataRequestTopic::default(
            )
            .with_name(Some(crate::harness::name("ops")))]))
            .with_include_topic_authorized_operations(true)
            .with_include_cluster_authorized_operations(true),
    );
    let bit = |operation: Operation| 1 << operation.code();
    assert_eq!(
        response.topics[0].topic_authorized_operations,
        bit(Operation::Read) | bit(Operation::Describe)
    );
    assert_eq!(
        response.cluster_authorized_operations,
        bit(Operation::Alter) | bit(Operation::Describe)
    );
}
