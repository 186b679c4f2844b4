//! Admin APIs on the wire, for what librdkafka's admin client does not reach:
//! IncrementalAlterConfigs, validate_only, deletion by topic id, describe with
//! synonyms, DescribeCluster, OffsetForLeaderEpoch.

use kafka_protocol::messages::create_topics_request::CreatableTopic;
use kafka_protocol::messages::delete_topics_request::DeleteTopicState;
use kafka_protocol::messages::describe_configs_request::DescribeConfigsResource;
use kafka_protocol::messages::incremental_alter_configs_request::{
    AlterConfigsResource, AlterableConfig,
};
use kafka_protocol::messages::offset_for_leader_epoch_request::{
    OffsetForLeaderPartition, OffsetForLeaderTopic,
};
use kafka_protocol::messages::*;

use crate::harness::{decode, encode, record_batch, split_v1, text, TestBroker, Wire};
use crate::produce_fetch::create_topic;

fn describe(wire: &mut Wire, resource_type: i8, name: &str) -> DescribeConfigsResponse {
    let request = DescribeConfigsRequest::default()
        .with_include_synonyms(true)
        .with_resources(vec![DescribeConfigsResource::default()
            .with_resource_type(resource_type)
            .with_resource_name(text(name))
            .with_configuration_keys(None)]);
    let frame = wire.request(32, 4, 2, true, &encode(&request, 4));
    decode(split_v1(&frame).1, 4)
}

fn value_of(response: &DescribeConfigsResponse, key: &str) -> Option<(String, i8)> {
    response.results[0]
        .configs
        .iter()
        .find(|c| c.name.as_str() == key)
        .map(|c| {
            (
                c.value.as_ref().map(|v| v.to_string()).unwrap_or_default(),
                c.config_source,
            )
        })
}

fn incremental(
    wire: &mut Wire,
    resource_type: i8,
    name: &str,
    ops: &[(&str, i8, Option<&str>)],
) -> i16 {
    let request = IncrementalAlterConfigsRequest::default().with_resources(vec![
        AlterConfigsResource::default()
            .with_resource_type(resource_type)
            .with_resource_name(text(name))
            .with_configs(
                ops.iter()
                    .map(|(key, op, value)| {
                        AlterableConfig::default()
                            .with_name(text(key))
                            .with_config_operation(*op)
                            .with_value(value.map(text))
                    })
                    .collect(),
            ),
    ]);
    let frame = wire.request(44, 1, 3, true, &encode(&request, 1));
    let response: IncrementalAlterConfigsResponse = decode(split_v1(&frame).1, 1);
    response.responses[0].error_code
}

#[test]
fn incremental_alter_configs_set_delete_append_subtract() {
    let broker = TestBroker::start();
    let mut wire = broker.wire();
    create_topic(&mut wire, "configs", 1, &[]);
    assert_eq!(
        incremental(
            &mut wire,
            2,
            "configs",
            &[("retention.ms", 0, Some("1000"))]
        ),
        0
    );
    assert_eq!(
        value_of(&describe(&mut wire, 2, "configs"), "retention.ms"),
        Some(("1000".into(), 1))
    );
    assert_eq!(
        incremental(
            &mut wire,
            2,
            "configs",
            &[("cleanup.policy", 2, Some("compact"))]
        ),
        0
    );
    assert_eq!(
        value_of(&describe(&mut wire, 2, "configs"), "cleanup.policy").map(|v| v.0),
        Some("delete,compact".into())
    );
    assert_eq!(
        incremental(
            &mut wire,
            2,
            "configs",
            &[("cleanup.policy", 3, Some("delete"))]
        ),
        0
    );
    assert_eq!(
        value_of(&describe(&mut wire, 2, "configs"), "cleanup.policy").map(|v| v.0),
        Some("compact".into())
    );
    assert_eq!(
        incremental(&mut wire, 2, "configs", &[("retention.ms", 1, None)]),
        0
    );
    assert_eq!(
        value_of(&describe(&mut wire, 2, "configs"), "retention.ms"),
        Some(("604800000".into(), 5))
    );
    // APPEND to a non-list key, an unknown key, a bad value: INVALID_CONFIG (40).
    assert_eq!(
        incremental(&mut wire, 2, "configs", &[("retention.ms", 2, Some("5"))]),
        40
    );
    assert_eq!(
        incremental(&mut wire, 2, "configs", &[("no.such.config", 0, Some("5"))]),
        40
    );
    assert_eq!(
        incremental(
            &mut wire,
            2,
            "configs",
            &[("segment.bytes", 0, Some("big"))]
        ),
        40
    );
    // Unknown topic: UNKNOWN_TOPIC_OR_PARTITION; a read-only broker config: INVALID_REQUEST.
    assert_eq!(
        incremental(&mut wire, 2, "missing", &[("retention.ms", 0, Some("5"))]),
        3
    );
    assert_eq!(
        incremental(&mut wire, 4, "1", &[("node.id", 0, Some("5"))]),
        42
    );
    assert_eq!(
        incremental(
            &mut wire,
            4,
            "",
            &[("log.retention.bytes", 0, Some("1000000"))]
        ),
        0
    );
    let broker_configs = describe(&mut wire, 4, "1");
    assert_eq!(
        value_of(&broker_configs, "log.retention.bytes"),
        Some(("1000000".into(), 3))
    );
    // The topic inherits the new broker default, reported as its source.
    assert_eq!(
        value_of(&describe(&mut wire, 2, "configs"), "retention.bytes"),
        Some(("1000000".into(), 3))
    );
}

#[test]
fn create_validate_only_and_delete_by_id() {
    let broker = TestBroker::start();
    let mut wire = broker.wire();
    let create = |wire: &mut Wire, validate_only: bool, partitions: i32| {
        let request = CreateTopicsRequest::default()
            .with_validate_only(validate_only)
            .with_topics(vec![CreatableTopic::default()
                .with_name(TopicName(text("ids")))
                .with_num_partitions(partitions)
                .with_replication_factor(-1)]);
        let frame = wire.request(19, 7, 4, true, &encode(&request, 7));
        let response: CreateTopicsResponse = decode(split_v1(&frame).1, 7);
        response.topics[0].clone()
    };
    let checked = create(&mut wire, true, 3);
    assert_eq!((checked.error_code, checked.num_partitions), (0, 3));
    let created = create(&mut wire, false, -1);
    assert_eq!(
        (
            created.error_code,
            created.num_partitions,
            created.replication_factor
        ),
        (0, 1, 1)
    );
    assert!(!created.topic_id.is_nil());
    assert_eq!(
        create(&mut wire, false, 0).error_code,
        37,
        "INVALID_PARTITIONS"
    );
    assert_eq!(
        create(&mut wire, true, 2).error_code,
        36,
        "TOPIC_ALREADY_EXISTS"
    );

    let delete = |wire: &mut Wire, topic_id: uuid::Uuid| {
        let request = DeleteTopicsRequest::default().with_topics(vec![DeleteTopicState::default()
            .with_name(None)
            .with_topic_id(topic_id)]);
        let frame = wire.request(20, 6, 5, true, &encode(&request, 6));
        let response: DeleteTopicsResponse = decode(split_v1(&frame).1, 6);
        response.responses[0].clone()
    };
    let deleted = delete(&mut wire, created.topic_id);
    assert_eq!(deleted.error_code, 0);
    assert_eq!(
        deleted.name.map(|n| n.0.to_string()),
        Some("ids".to_string())
    );
    assert_eq!(
        delete(&mut wire, created.topic_id).error_code,
        100,
        "UNKNOWN_TOPIC_ID"
    );
    // Recreated under the same name, the topic gets a new id and an empty log.
    let recreated = create(&mut wire, false, 1);
    assert_ne!(recreated.topic_id, created.topic_id);
}

#[test]
fn describe_cluster_and_offset_for_leader_epoch() {
    let broker = TestBroker::start();
    let mut wire = broker.wire();
    let frame = wire.request(
        60,
        1,
        6,
        true,
        &encode(&DescribeClusterRequest::default().with_endpoint_type(1), 1),
    );
    let cluster: DescribeClusterResponse = decode(split_v1(&frame).1, 1);
    assert_eq!(cluster.error_code, 0);
    assert_eq!(cluster.controller_id.0, 1);
    assert_eq!(cluster.brokers.len(), 1);
    assert_eq!(cluster.brokers[0].port, i32::from(broker.addr.port()));

    create_topic(&mut wire, "epochs", 1, &[]);
    crate::produce_fetch::produce_for_tests(&mut wire, "epochs", &record_batch(&[b"a", b"b"], 1));
    let request = OffsetForLeaderEpochRequest::default()
        .with_replica_id(BrokerId(-1))
        .with_topics(vec![OffsetForLeaderTopic::default()
            .with_topic(TopicName(text("epochs")))
            .with_partitions(vec![
                OffsetForLeaderPartition::default()
                    .with_partition(0)
                    .with_current_leader_epoch(0)
                    .with_leader_epoch(0),
                OffsetForLeaderPartition::default()
                    .with_partition(0)
                    .with_current_leader_epoch(5)
                    .with_leader_epoch(0),
            ])]);
    let frame = wire.request(23, 4, 7, true, &encode(&request, 4));
    let response: OffsetForLeaderEpochResponse = decode(split_v1(&frame).1, 4);
    let answers = &response.topics[0].partitions;
    assert_eq!(
        (
            answers[0].error_code,
            answers[0].leader_epoch,
            answers[0].end_offset
        ),
        (0, 0, 2)
    );
    assert_eq!(answers[1].error_code, 75, "UNKNOWN_LEADER_EPOCH");
}

/// DescribeConfigs of the broker lists every setting Sluice has under Kafka's
/// name, once each, the static ones read-only: tools read them (librdkafka's
/// fetch-from-follower test skipped itself, unable to see `broker.rack`).
#[test]
fn describe_configs_of_the_broker_lists_every_setting_under_kafkas_names() {
    let broker = TestBroker::start_with(|config| config.rack = Some("rack-a".to_string()));
    let mut wire = broker.wire();
    let described = describe(&mut wire, 4, "1");
    assert_eq!(described.results[0].error_code, 0);
    let configs = &described.results[0].configs;
    let mut names: Vec<&str> = configs.iter().map(|c| c.name.as_str()).collect();
    names.sort_unstable();
    let count = names.len();
    names.dedup();
    assert_eq!(names.len(), count, "a setting is listed twice");
    assert_eq!(
        value_of(&described, "broker.rack"),
        Some(("rack-a".to_string(), 4))
    );
    for name in [
        "replica.selector.class",
        "offsets.topic.replication.factor",
        "offsets.topic.num.partitions",
        "transaction.state.log.replication.factor",
        "transaction.state.log.min.isr",
        "transaction.state.log.num.partitions",
        "group.initial.rebalance.delay.ms",
        "group.min.session.timeout.ms",
        "replica.lag.time.max.ms",
        "listener.security.protocol.map",
        "inter.broker.listener.name",
        "default.replication.factor",
        "log.cleaner.threads",
        "log.retention.ms",
        "min.insync.replicas",
    ] {
        let config = configs
            .iter()
            .find(|c| c.name.as_str() == name)
            .unwrap_or_else(|| panic!("{name} is not described"));
        let is_static = !name.starts_with("log.retention") && name != "min.insync.replicas";
        assert_eq!(config.read_only, is_static, "{name}");
    }
    assert_eq!(
        value_of(&described, "group.initial.rebalance.delay.ms").map(|(v, _)| v),
        Some(broker_config_value(&broker, |c| c
            .groups
            .initial_rebalance_delay_ms
            .to_string()))
    );
}

fn broker_config_value(broker: &TestBroker, value: impl Fn(&sluice::Config) -> String) -> String {
    value(broker.config())
}

/// UpdateFeatures v1 of one feature: (top-level error code, message, the
/// feature's result code).
fn update_feature(
    wire: &mut Wire,
    feature: &str,
    level: i16,
    upgrade_type: i8,
    validate_only: bool,
) -> (i16, String, i16) {
    use kafka_protocol::messages::update_features_request::FeatureUpdateKey;
    use kafka_protocol::messages::{UpdateFeaturesRequest, UpdateFeaturesResponse};
    let request = UpdateFeaturesRequest::default()
        .with_timeout_ms(5_000)
        .with_validate_only(validate_only)
        .with_feature_updates(vec![FeatureUpdateKey::default()
            .with_feature(text(feature))
            .with_max_version_level(level)
            .with_upgrade_type(upgrade_type)]);
    let frame = wire.request(57, 1, 3, true, &encode(&request, 1));
    let response: UpdateFeaturesResponse = decode(split_v1(&frame).1, 1);
    (
        response.error_code,
        response
            .error_message
            .map(|m| m.to_string())
            .unwrap_or_default(),
        response.results[0].error_code,
    )
}

/// UpdateFeatures as `kafka-features.sh` sends it: a new cluster is at the
/// latest metadata.version this node supports; a level outside what it (and
/// every broker) supports, a downgrade without a downgrade type, any
/// metadata.version downgrade and an unknown feature are refused with
/// INVALID_UPDATE_VERSION and Kafka's messages; the level it is at is taken.
#[test]
fn update_features_checks_levels_as_kafkas_controller_does() {
    const INVALID_UPDATE_VERSION: i16 = 95;
    const UPGRADE: i8 = 1;
    const SAFE_DOWNGRADE: i8 = 2;
    let broker = TestBroker::start();
    let mut wire = broker.wire();
    let refused = |answer: (i16, String, i16), says: &str| {
        assert_eq!(answer.0, INVALID_UPDATE_VERSION, "{}", answer.1);
        assert_eq!(answer.2, INVALID_UPDATE_VERSION);
        assert!(answer.1.contains(says), "{}", answer.1);
    };
    refused(
        update_feature(&mut wire, "metadata.version", 28, UPGRADE, false),
        "Valid versions are from 7 to 27",
    );
    refused(
        update_feature(&mut wire, "metadata.version", 21, UPGRADE, false),
        "without setting the upgrade type",
    );
    refused(
        update_feature(&mut wire, "metadata.version", 21, SAFE_DOWNGRADE, false),
        "Unsupported metadata.version downgrade from 4.1-IV1 to 3.9-IV0",
    );
    refused(
        update_feature(&mut wire, "group.version", 1, UPGRADE, false),
        "does not support this feature",
    );
    assert_eq!(
        update_feature(&mut wire, "metadata.version", 27, UPGRADE, true),
        (0, String::new(), 0)
    );
    assert_eq!(
        update_feature(&mut wire, "metadata.version", 27, UPGRADE, false),
        (0, String::new(), 0)
    );
}
