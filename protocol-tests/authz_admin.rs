//! Authorization refusals on the wire for the admin APIs (see `authz` for
//! the fixture): topics (CreateTopics, DeleteTopics, CreatePartitions,
//! DeleteRecords), configs (DescribeConfigs, AlterConfigs,
//! IncrementalAlterConfigs), the cluster's (ElectLeaders, partition
//! reassignments, UpdateFeatures, DescribeCluster) and SCRAM credentials.
//! Each shows Kafka's refusal with `alice` lacking the ACL, that nothing was
//! done, and that after `allow` the same request succeeds.

use kafka_protocol::messages::alter_configs_request::{
    AlterConfigsResource as LegacyResource, AlterableConfig as LegacyConfig,
};
use kafka_protocol::messages::alter_partition_reassignments_request::{
    ReassignablePartition, ReassignableTopic,
};
use kafka_protocol::messages::alter_user_scram_credentials_request::ScramCredentialDeletion;
use kafka_protocol::messages::create_partitions_request::CreatePartitionsTopic;
use kafka_protocol::messages::create_topics_request::CreatableTopic;
use kafka_protocol::messages::delete_records_request::{
    DeleteRecordsPartition, DeleteRecordsTopic,
};
use kafka_protocol::messages::delete_topics_request::DeleteTopicState;
use kafka_protocol::messages::describe_configs_request::DescribeConfigsResource;
use kafka_protocol::messages::describe_user_scram_credentials_request::UserName;
use kafka_protocol::messages::elect_leaders_request::TopicPartitions;
use kafka_protocol::messages::incremental_alter_configs_request::{
    AlterConfigsResource, AlterableConfig,
};
use kafka_protocol::messages::update_features_request::FeatureUpdateKey;
use kafka_protocol::messages::*;
use sluice::security::acl::{Operation, ResourceType};

use crate::authz::{
    allow, login, secured_broker, CLUSTER_AUTHORIZATION_FAILED, TOPIC_AUTHORIZATION_FAILED,
};
use crate::harness::{call, name, record_batch, text, Wire};

const METADATA: i16 = 3;
const CREATE_TOPICS: i16 = 19;
const DELETE_TOPICS: i16 = 20;
const DELETE_RECORDS: i16 = 21;
const DESCRIBE_CONFIGS: i16 = 32;
const ALTER_CONFIGS: i16 = 33;
const CREATE_PARTITIONS: i16 = 37;
const ELECT_LEADERS: i16 = 43;
const INCREMENTAL_ALTER_CONFIGS: i16 = 44;
const ALTER_PARTITION_REASSIGNMENTS: i16 = 45;
const LIST_PARTITION_REASSIGNMENTS: i16 = 46;
const DESCRIBE_USER_SCRAM_CREDENTIALS: i16 = 50;
const ALTER_USER_SCRAM_CREDENTIALS: i16 = 51;
const UPDATE_FEATURES: i16 = 57;
const DESCRIBE_CLUSTER: i16 = 60;

const UNKNOWN_TOPIC_OR_PARTITION: i16 = 3;
const ELECTION_NOT_NEEDED: i16 = 84;
const NO_REASSIGNMENT_IN_PROGRESS: i16 = 85;

/// Kafka's ConfigResource.Type codes.
const RESOURCE_TOPIC: i8 = 2;
const RESOURCE_BROKER: i8 = 4;

const CLUSTER: &str = "kafka-cluster";

fn allow_cluster(admin: &mut Wire, user: &str, operation: Operation) {
    allow(admin, user, operation, ResourceType::Cluster, CLUSTER);
}

/// CreateTopics v7 of one-partition topics.
fn create_topics(wire: &mut Wire, names: &[&str]) -> CreateTopicsResponse {
    let request = CreateTopicsRequest::default().with_topics(
        names
            .iter()
            .map(|topic| {
                CreatableTopic::default()
                    .with_name(name(topic))
                    .with_num_partitions(1)
                    .with_replication_factor(1)
            })
            .collect(),
    );
    call(wire, CREATE_TOPICS, 7, true, &request)
}

fn create_topic(admin: &mut Wire, topic: &str) -> uuid::Uuid {
    let created = create_topics(admin, &[topic]);
    assert_eq!(created.topics[0].error_code, 0, "{created:?}");
    created.topics[0].topic_id
}

/// Every topic's name and partition count, as the super user sees them.
fn topics(admin: &mut Wire) -> Vec<(String, usize)> {
    let response: MetadataResponse = call(
        admin,
        METADATA,
        12,
        true,
        &MetadataRequest::default().with_topics(None),
    );
    let mut topics: Vec<(String, usize)> = response
        .topics
        .iter()
        .filter_map(|t| Some((t.name.as_ref()?.to_string(), t.partitions.len())))
        .collect();
    topics.sort();
    topics
}

fn exists(admin: &mut Wire, topic: &str) -> bool {
    topics(admin).iter().any(|(name, _)| name == topic)
}

#[test]
fn create_topics_needs_create_and_returns_configs_only_with_describe_configs() {
    let broker = secured_broker();
    let mut admin = login(&broker, "admin");
    let mut alice = login(&broker, "alice");

    let refused = create_topics(&mut alice, &["mine", "theirs"]);
    for topic in &refused.topics {
        assert_eq!(topic.error_code, TOPIC_AUTHORIZATION_FAILED);
        assert_eq!(
            topic.error_message.as_deref(),
            Some("Authorization failed.")
        );
        assert_eq!((topic.num_partitions, topic.replication_factor), (-1, -1));
    }
    assert!(!exists(&mut admin, "mine"));

    // Create on the topic: created, but without DescribeConfigs Kafka
    // returns no counts and no configs, and the config error.
    allow(
        &mut admin,
        "alice",
        Operation::Create,
        ResourceType::Topic,
        "mine",
    );
    let created = create_topics(&mut alice, &["mine", "theirs"]);
    let mine = &created.topics[0];
    assert_eq!(mine.error_code, 0);
    assert!(!mine.topic_id.is_nil());
    assert_eq!(mine.topic_config_error_code, TOPIC_AUTHORIZATION_FAILED);
    assert_eq!((mine.num_partitions, mine.replication_factor), (-1, -1));
    assert!(mine.configs.as_ref().is_none_or(|c| c.is_empty()));
    assert_eq!(created.topics[1].error_code, TOPIC_AUTHORIZATION_FAILED);
    assert!(exists(&mut admin, "mine"));
    assert!(!exists(&mut admin, "theirs"));

    // Create on the cluster covers every topic; DescribeConfigs on one
    // returns its configs.
    allow_cluster(&mut admin, "alice", Operation::Create);
    allow(
        &mut admin,
        "alice",
        Operation::DescribeConfigs,
        ResourceType::Topic,
        "theirs",
    );
    let created = create_topics(&mut alice, &["theirs"]);
    let theirs = &created.topics[0];
    assert_eq!((theirs.error_code, theirs.topic_config_error_code), (0, 0));
    assert_eq!((theirs.num_partitions, theirs.replication_factor), (1, 1));
    assert!(theirs.configs.as_ref().is_some_and(|c| !c.is_empty()));
}

/// DeleteTopics v6, by name or by id: each result's (name, code).
fn delete_topics(
    wire: &mut Wire,
    topics: &[(Option<&str>, uuid::Uuid)],
) -> Vec<(Option<String>, i16)> {
    let request = DeleteTopicsRequest::default().with_topics(
        topics
            .iter()
            .map(|(topic, id)| {
                DeleteTopicState::default()
                    .with_name(topic.map(name))
                    .with_topic_id(*id)
            })
            .collect(),
    );
    let response: DeleteTopicsResponse = call(wire, DELETE_TOPICS, 6, true, &request);
    response
        .responses
        .iter()
        .map(|r| (r.name.as_ref().map(|n| n.0.to_string()), r.error_code))
        .collect()
}

#[test]
fn delete_topics_needs_delete_and_hides_what_the_principal_may_not_describe() {
    let broker = secured_broker();
    let mut admin = login(&broker, "admin");
    let mut alice = login(&broker, "alice");
    create_topic(&mut admin, "victim");
    let hidden_id = create_topic(&mut admin, "hidden");
    let nil = uuid::Uuid::nil();
    let owned = |n: &str| Some(n.to_string());

    // Without Describe, a topic and an absent one are refused alike; by id,
    // the name stays hidden.
    assert_eq!(
        delete_topics(
            &mut alice,
            &[
                (Some("victim"), nil),
                (Some("ghost"), nil),
                (None, hidden_id)
            ]
        ),
        vec![
            (owned("victim"), TOPIC_AUTHORIZATION_FAILED),
            (owned("ghost"), TOPIC_AUTHORIZATION_FAILED),
            (None, TOPIC_AUTHORIZATION_FAILED),
        ]
    );
    // With Describe: the absent topic is unknown, the others still refused
    // (no Delete), the one by id now named.
    for topic in ["victim", "ghost", "hidden"] {
        allow(
            &mut admin,
            "alice",
            Operation::Describe,
            ResourceType::Topic,
            topic,
        );
    }
    assert_eq!(
        delete_topics(
            &mut alice,
            &[
                (Some("victim"), nil),
                (Some("ghost"), nil),
                (None, hidden_id)
            ]
        ),
        vec![
            (owned("victim"), TOPIC_AUTHORIZATION_FAILED),
            (owned("ghost"), UNKNOWN_TOPIC_OR_PARTITION),
            (owned("hidden"), TOPIC_AUTHORIZATION_FAILED),
        ]
    );
    assert!(exists(&mut admin, "victim") && exists(&mut admin, "hidden"));

    allow(
        &mut admin,
        "alice",
        Operation::Delete,
        ResourceType::Topic,
        "victim",
    );
    allow(
        &mut admin,
        "alice",
        Operation::Delete,
        ResourceType::Topic,
        "hidden",
    );
    assert_eq!(
        delete_topics(&mut alice, &[(Some("victim"), nil), (None, hidden_id)]),
        vec![(owned("victim"), 0), (owned("hidden"), 0)]
    );
    assert!(!exists(&mut admin, "victim") && !exists(&mut admin, "hidden"));
}

#[test]
fn create_partitions_needs_alter_on_the_topic() {
    let broker = secured_broker();
    let mut admin = login(&broker, "admin");
    let mut alice = login(&broker, "alice");
    create_topic(&mut admin, "grow");
    let grow = |wire: &mut Wire| -> Vec<i16> {
        let request = CreatePartitionsRequest::default()
            .with_timeout_ms(5_000)
            .with_topics(
                ["grow", "nowhere"]
                    .iter()
                    .map(|topic| {
                        CreatePartitionsTopic::default()
                            .with_name(name(topic))
                            .with_count(2)
                            .with_assignments(None)
                    })
                    .collect(),
            );
        let response: CreatePartitionsResponse = call(wire, CREATE_PARTITIONS, 3, true, &request);
        response.results.iter().map(|r| r.error_code).collect()
    };
    // An absent topic is refused like a present one.
    assert_eq!(
        grow(&mut alice),
        vec![TOPIC_AUTHORIZATION_FAILED, TOPIC_AUTHORIZATION_FAILED]
    );
    assert!(topics(&mut admin).contains(&("grow".to_string(), 1)));

    allow(
        &mut admin,
        "alice",
        Operation::Alter,
        ResourceType::Topic,
        "grow",
    );
    assert_eq!(grow(&mut alice), vec![0, TOPIC_AUTHORIZATION_FAILED]);
    assert!(topics(&mut admin).contains(&("grow".to_string(), 2)));
}

#[test]
fn delete_records_needs_delete_on_the_topic() {
    let broker = secured_broker();
    let mut admin = login(&broker, "admin");
    let mut alice = login(&broker, "alice");
    create_topic(&mut admin, "trim");
    crate::produce_fetch::produce_for_tests(
        &mut admin,
        "trim",
        &record_batch(&[b"a", b"b", b"c"], 1),
    );
    let delete = |wire: &mut Wire, offset: i64| -> Vec<(i16, i64)> {
        let request = DeleteRecordsRequest::default()
            .with_timeout_ms(5_000)
            .with_topics(
                ["trim", "nowhere"]
                    .iter()
                    .map(|topic| {
                        DeleteRecordsTopic::default()
                            .with_name(name(topic))
                            .with_partitions(vec![DeleteRecordsPartition::default()
                                .with_partition_index(0)
                                .with_offset(offset)])
                    })
                    .collect(),
            );
        let response: DeleteRecordsResponse = call(wire, DELETE_RECORDS, 2, true, &request);
        response
            .topics
            .iter()
            .map(|t| (t.partitions[0].error_code, t.partitions[0].low_watermark))
            .collect()
    };
    // Up to the high watermark, refused: nothing deleted.
    assert_eq!(
        delete(&mut alice, -1),
        vec![
            (TOPIC_AUTHORIZATION_FAILED, -1),
            (TOPIC_AUTHORIZATION_FAILED, -1)
        ]
    );
    allow(
        &mut admin,
        "alice",
        Operation::Delete,
        ResourceType::Topic,
        "trim",
    );
    allow(
        &mut admin,
        "alice",
        Operation::Delete,
        ResourceType::Topic,
        "nowhere",
    );
    // The log start is still 0: advancing it to 1 takes effect.
    assert_eq!(
        delete(&mut alice, 1),
        vec![(0, 1), (UNKNOWN_TOPIC_OR_PARTITION, -1)]
    );
}

/// DescribeConfigs v4 of the topic "cfg", the absent topic "nowhere" and the
/// broker: each result's (code, whether configs came back).
fn describe_configs(wire: &mut Wire) -> Vec<(i16, bool)> {
    let request = DescribeConfigsRequest::default().with_resources(
        [
            (RESOURCE_TOPIC, "cfg"),
            (RESOURCE_TOPIC, "nowhere"),
            (RESOURCE_BROKER, ""),
        ]
        .iter()
        .map(|(resource_type, resource)| {
            DescribeConfigsResource::default()
                .with_resource_type(*resource_type)
                .with_resource_name(text(resource))
                .with_configuration_keys(None)
        })
        .collect(),
    );
    let response: DescribeConfigsResponse = call(wire, DESCRIBE_CONFIGS, 4, true, &request);
    response
        .results
        .iter()
        .map(|r| (r.error_code, !r.configs.is_empty()))
        .collect()
}

#[test]
fn describe_configs_needs_describe_configs_on_the_topic_or_the_cluster() {
    let broker = secured_broker();
    let mut admin = login(&broker, "admin");
    let mut alice = login(&broker, "alice");
    create_topic(&mut admin, "cfg");
    assert_eq!(
        describe_configs(&mut alice),
        vec![
            (TOPIC_AUTHORIZATION_FAILED, false),
            (TOPIC_AUTHORIZATION_FAILED, false),
            (CLUSTER_AUTHORIZATION_FAILED, false),
        ]
    );
    allow(
        &mut admin,
        "alice",
        Operation::DescribeConfigs,
        ResourceType::Topic,
        "cfg",
    );
    allow(
        &mut admin,
        "alice",
        Operation::DescribeConfigs,
        ResourceType::Topic,
        "nowhere",
    );
    allow_cluster(&mut admin, "alice", Operation::DescribeConfigs);
    assert_eq!(
        describe_configs(&mut alice),
        vec![(0, true), (UNKNOWN_TOPIC_OR_PARTITION, false), (0, true)]
    );
}

/// A config's value as the super user sees it.
fn config_value(admin: &mut Wire, resource_type: i8, resource: &str, key: &str) -> Option<String> {
    let request =
        DescribeConfigsRequest::default().with_resources(vec![DescribeConfigsResource::default()
            .with_resource_type(resource_type)
            .with_resource_name(text(resource))
            .with_configuration_keys(Some(vec![text(key)]))]);
    let response: DescribeConfigsResponse = call(admin, DESCRIBE_CONFIGS, 4, true, &request);
    assert_eq!(response.results[0].error_code, 0);
    response.results[0]
        .configs
        .first()
        .and_then(|c| c.value.as_ref().map(|v| v.to_string()))
}

/// AlterConfigs v2 (legacy) or IncrementalAlterConfigs v1 (SET) of one key
/// on the topic "cfg" and on the broker: each result's code.
fn alter_configs(
    wire: &mut Wire,
    incremental: bool,
    topic_value: &str,
    broker_value: &str,
) -> Vec<i16> {
    let wanted = [
        (RESOURCE_TOPIC, "cfg", "retention.ms", topic_value),
        (RESOURCE_BROKER, "", "log.retention.ms", broker_value),
    ];
    if incremental {
        let request = IncrementalAlterConfigsRequest::default().with_resources(
            wanted
                .iter()
                .map(|(resource_type, resource, key, value)| {
                    AlterConfigsResource::default()
                        .with_resource_type(*resource_type)
                        .with_resource_name(text(resource))
                        .with_configs(vec![AlterableConfig::default()
                            .with_name(text(key))
                            .with_config_operation(0)
                            .with_value(Some(text(value)))])
                })
                .collect(),
        );
        let response: IncrementalAlterConfigsResponse =
            call(wire, INCREMENTAL_ALTER_CONFIGS, 1, true, &request);
        response.responses.iter().map(|r| r.error_code).collect()
    } else {
        let request = AlterConfigsRequest::default().with_resources(
            wanted
                .iter()
                .map(|(resource_type, resource, key, value)| {
                    LegacyResource::default()
                        .with_resource_type(*resource_type)
                        .with_resource_name(text(resource))
                        .with_configs(vec![LegacyConfig::default()
                            .with_name(text(key))
                            .with_value(Some(text(value)))])
                })
                .collect(),
        );
        let response: AlterConfigsResponse = call(wire, ALTER_CONFIGS, 2, true, &request);
        response.responses.iter().map(|r| r.error_code).collect()
    }
}

#[test]
fn alter_configs_and_incremental_alter_configs_need_alter_configs() {
    let broker = secured_broker();
    let mut admin = login(&broker, "admin");
    let mut alice = login(&broker, "alice");
    create_topic(&mut admin, "cfg");
    let topic_value = |admin: &mut Wire| config_value(admin, RESOURCE_TOPIC, "cfg", "retention.ms");
    let broker_value =
        |admin: &mut Wire| config_value(admin, RESOURCE_BROKER, "", "log.retention.ms");
    let (topic_before, broker_before) = (topic_value(&mut admin), broker_value(&mut admin));

    for incremental in [false, true] {
        assert_eq!(
            alter_configs(&mut alice, incremental, "1000", "2000"),
            vec![TOPIC_AUTHORIZATION_FAILED, CLUSTER_AUTHORIZATION_FAILED]
        );
    }
    assert_eq!(topic_value(&mut admin), topic_before);
    assert_eq!(broker_value(&mut admin), broker_before);

    allow(
        &mut admin,
        "alice",
        Operation::AlterConfigs,
        ResourceType::Topic,
        "cfg",
    );
    allow_cluster(&mut admin, "alice", Operation::AlterConfigs);
    assert_eq!(alter_configs(&mut alice, false, "1000", "2000"), vec![0, 0]);
    assert_eq!(topic_value(&mut admin).as_deref(), Some("1000"));
    assert_eq!(broker_value(&mut admin).as_deref(), Some("2000"));
    assert_eq!(alter_configs(&mut alice, true, "3000", "4000"), vec![0, 0]);
    assert_eq!(topic_value(&mut admin).as_deref(), Some("3000"));
    assert_eq!(broker_value(&mut admin).as_deref(), Some("4000"));
}

/// ElectLeaders (preferred) of "lead"'s partition 0: (top-level code, the
/// partition's code).
fn elect(wire: &mut Wire, version: i16) -> (i16, i16) {
    let request = ElectLeadersRequest::default()
        .with_election_type(0)
        .with_timeout_ms(5_000)
        .with_topic_partitions(Some(vec![TopicPartitions::default()
            .with_topic(name("lead"))
            .with_partitions(vec![0])]));
    let response: ElectLeadersResponse = call(wire, ELECT_LEADERS, version, version >= 2, &request);
    (
        response.error_code,
        response.replica_election_results[0].partition_result[0].error_code,
    )
}

#[test]
fn elect_leaders_needs_alter_on_the_cluster() {
    let broker = secured_broker();
    let mut admin = login(&broker, "admin");
    let mut alice = login(&broker, "alice");
    create_topic(&mut admin, "lead");
    assert_eq!(
        elect(&mut alice, 2),
        (CLUSTER_AUTHORIZATION_FAILED, CLUSTER_AUTHORIZATION_FAILED)
    );
    // v0 has no top-level code: the partition carries it.
    assert_eq!(elect(&mut alice, 0).1, CLUSTER_AUTHORIZATION_FAILED);

    allow_cluster(&mut admin, "alice", Operation::Alter);
    assert_eq!(elect(&mut alice, 2), (0, ELECTION_NOT_NEEDED));
    assert_eq!(elect(&mut alice, 0).1, ELECTION_NOT_NEEDED);
}

#[test]
fn partition_reassignments_need_alter_or_describe_on_the_cluster() {
    let broker = secured_broker();
    let mut admin = login(&broker, "admin");
    let mut alice = login(&broker, "alice");
    create_topic(&mut admin, "moved");
    let list = |wire: &mut Wire| -> i16 {
        let response: ListPartitionReassignmentsResponse = call(
            wire,
            LIST_PARTITION_REASSIGNMENTS,
            0,
            true,
            &ListPartitionReassignmentsRequest::default()
                .with_timeout_ms(5_000)
                .with_topics(None),
        );
        response.error_code
    };
    // Cancelling a move that is not happening: (top-level, partition).
    let cancel = |wire: &mut Wire| -> (i16, i16) {
        let request = AlterPartitionReassignmentsRequest::default()
            .with_timeout_ms(5_000)
            .with_topics(vec![ReassignableTopic::default()
                .with_name(name("moved"))
                .with_partitions(vec![ReassignablePartition::default()
                    .with_partition_index(0)
                    .with_replicas(None)])]);
        let response: AlterPartitionReassignmentsResponse =
            call(wire, ALTER_PARTITION_REASSIGNMENTS, 0, true, &request);
        (
            response.error_code,
            response.responses[0].partitions[0].error_code,
        )
    };
    assert_eq!(list(&mut alice), CLUSTER_AUTHORIZATION_FAILED);
    assert_eq!(
        cancel(&mut alice),
        (CLUSTER_AUTHORIZATION_FAILED, CLUSTER_AUTHORIZATION_FAILED)
    );

    allow_cluster(&mut admin, "alice", Operation::Describe);
    assert_eq!(list(&mut alice), 0);
    assert_eq!(
        cancel(&mut alice),
        (CLUSTER_AUTHORIZATION_FAILED, CLUSTER_AUTHORIZATION_FAILED)
    );
    allow_cluster(&mut admin, "alice", Operation::Alter);
    assert_eq!(cancel(&mut alice), (0, NO_REASSIGNMENT_IN_PROGRESS));
}

#[test]
fn update_features_needs_alter_on_the_cluster() {
    let broker = secured_broker();
    let mut admin = login(&broker, "admin");
    let mut alice = login(&broker, "alice");
    let update = |wire: &mut Wire| -> (i16, usize) {
        let request = UpdateFeaturesRequest::default()
            .with_timeout_ms(5_000)
            .with_validate_only(true)
            .with_feature_updates(vec![FeatureUpdateKey::default()
                .with_feature(text("metadata.version"))
                .with_max_version_level(sluice::controller::features::METADATA_VERSION_LATEST)
                .with_upgrade_type(1)]);
        let response: UpdateFeaturesResponse = call(wire, UPDATE_FEATURES, 1, true, &request);
        (response.error_code, response.results.len())
    };
    // Kafka's error response: the top-level code, no per-feature results.
    assert_eq!(update(&mut alice), (CLUSTER_AUTHORIZATION_FAILED, 0));
    allow_cluster(&mut admin, "alice", Operation::Alter);
    assert_eq!(update(&mut alice), (0, 1));
}

/// As Kafka's broker answers, anyone may describe the cluster; Describe on
/// it decides only the authorized operations reported.
#[test]
fn describe_cluster_reports_the_operations_the_principal_may_do() {
    let broker = secured_broker();
    let mut admin = login(&broker, "admin");
    let mut alice = login(&broker, "alice");
    let describe = |wire: &mut Wire, include: bool| -> DescribeClusterResponse {
        call(
            wire,
            DESCRIBE_CLUSTER,
            1,
            true,
            &DescribeClusterRequest::default()
                .with_include_cluster_authorized_operations(include)
                .with_endpoint_type(1),
        )
    };
    let bit = |operation: Operation| 1i32 << operation.code();

    let described = describe(&mut alice, true);
    assert_eq!(described.error_code, 0);
    assert_eq!(described.brokers.len(), 1);
    assert_eq!(described.cluster_authorized_operations, 0);
    assert_eq!(
        describe(&mut alice, false).cluster_authorized_operations,
        i32::MIN
    );

    allow_cluster(&mut admin, "alice", Operation::Describe);
    assert_eq!(
        describe(&mut alice, true).cluster_authorized_operations,
        bit(Operation::Describe)
    );
    allow_cluster(&mut admin, "alice", Operation::Alter);
    assert_eq!(
        describe(&mut alice, true).cluster_authorized_operations,
        bit(Operation::Describe) | bit(Operation::Alter)
    );
    // The super user may do every cluster operation.
    assert_eq!(
        describe(&mut admin, true)
            .cluster_authorized_operations
            .count_ones(),
        7
    );
}

/// DescribeUserScramCredentials of "bob": (top-level code, bob's code, his
/// mechanisms).
fn describe_bob(wire: &mut Wire) -> (i16, i16, Vec<i8>) {
    let request = DescribeUserScramCredentialsRequest::default()
        .with_users(Some(vec![UserName::default().with_name(text("bob"))]));
    let response: DescribeUserScramCredentialsResponse =
        call(wire, DESCRIBE_USER_SCRAM_CREDENTIALS, 0, true, &request);
    let bob = &response.results[0];
    (
        response.error_code,
        bob.error_code,
        bob.credential_infos.iter().map(|c| c.mechanism).collect(),
    )
}

#[test]
fn scram_credentials_need_describe_or_alter_on_the_cluster() {
    const SCRAM_SHA_256: i8 = 1;
    const RESOURCE_NOT_FOUND: i16 = 91;
    let broker = secured_broker();
    let mut admin = login(&broker, "admin");
    let mut alice = login(&broker, "alice");
    let delete_bobs = |wire: &mut Wire| -> Vec<(String, i16)> {
        let request = AlterUserScramCredentialsRequest::default().with_deletions(vec![
            ScramCredentialDeletion::default()
                .with_name(text("bob"))
                .with_mechanism(SCRAM_SHA_256),
        ]);
        let response: AlterUserScramCredentialsResponse =
            call(wire, ALTER_USER_SCRAM_CREDENTIALS, 0, true, &request);
        response
            .results
            .iter()
            .map(|r| (r.user.to_string(), r.error_code))
            .collect()
    };

    assert_eq!(
        describe_bob(&mut alice),
        (
            CLUSTER_AUTHORIZATION_FAILED,
            CLUSTER_AUTHORIZATION_FAILED,
            vec![]
        )
    );
    assert_eq!(
        delete_bobs(&mut alice),
        vec![("bob".to_string(), CLUSTER_AUTHORIZATION_FAILED)]
    );
    // Nothing changed: bob still logs in.
    login(&broker, "bob");

    allow_cluster(&mut admin, "alice", Operation::Describe);
    assert_eq!(describe_bob(&mut alice), (0, 0, vec![SCRAM_SHA_256]));
    allow_cluster(&mut admin, "alice", Operation::Alter);
    assert_eq!(delete_bobs(&mut alice), vec![("bob".to_string(), 0)]);
    assert_eq!(describe_bob(&mut admin).1, RESOURCE_NOT_FOUND);
}
