//! The admin API through librdkafka: create, describe and alter configs, create
//! partitions, delete records, delete topics, with Kafka's errors.

use rdkafka::admin::{
    AdminClient, AdminOptions, AlterConfig, NewPartitions, NewTopic, ResourceSpecifier,
    TopicReplication,
};
use rdkafka::client::DefaultClientContext;
use rdkafka::config::ClientConfig;
use rdkafka::types::RDKafkaErrorCode;
use rdkafka::{Offset, TopicPartitionList};
use sluice_compat::*;

fn admin(bootstrap: &str) -> AdminClient<DefaultClientContext> {
    ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .create()
        .expect("admin client")
}

fn config_value(
    broker: &EmbeddedBroker,
    admin: &AdminClient<DefaultClientContext>,
    topic: &str,
    key: &str,
) -> Option<String> {
    let results = broker
        .block_on(admin.describe_configs([&ResourceSpecifier::Topic(topic)], &AdminOptions::new()))
        .expect("describe configs");
    let resource = results
        .into_iter()
        .next()
        .expect("one result")
        .expect("described");
    resource.get(key).and_then(|entry| entry.value.clone())
}

/// Each `(key, value)`: the topic's config `key` is described as `value`.
fn assert_configs(
    broker: &EmbeddedBroker,
    admin: &AdminClient<DefaultClientContext>,
    topic: &str,
    expected: &[(&str, &str)],
) {
    for &(key, value) in expected {
        assert_eq!(
            config_value(broker, admin, topic, key).as_deref(),
            Some(value),
            "{topic} {key}"
        );
    }
}

#[test]
fn create_describe_alter_grow_delete() {
    let broker = EmbeddedBroker::start();
    let bootstrap = broker.bootstrap();
    let admin = admin(&bootstrap);
    let options = AdminOptions::new();

    let topic =
        NewTopic::new("admin-topic", 2, TopicReplication::Fixed(1)).set("retention.ms", "123456");
    let created = broker
        .block_on(admin.create_topics([&topic], &options))
        .expect("create");
    assert_eq!(created[0], Ok("admin-topic".to_string()));

    // Again: TOPIC_ALREADY_EXISTS. Zero partitions: INVALID_PARTITIONS. Bad config: INVALID_CONFIG.
    let again = broker
        .block_on(admin.create_topics([&topic], &options))
        .expect("create");
    assert_eq!(
        again[0],
        Err((
            "admin-topic".to_string(),
            RDKafkaErrorCode::TopicAlreadyExists
        ))
    );
    let bad_config =
        NewTopic::new("bad-config", 1, TopicReplication::Fixed(1)).set("retention.ms", "soon");
    let result = broker
        .block_on(admin.create_topics([&bad_config], &options))
        .expect("create");
    assert_eq!(
        result[0],
        Err(("bad-config".to_string(), RDKafkaErrorCode::InvalidConfig))
    );
    let too_many_replicas = NewTopic::new("rf3", 1, TopicReplication::Fixed(3));
    let result = broker
        .block_on(admin.create_topics([&too_many_replicas], &options))
        .expect("create");
    assert_eq!(
        result[0],
        Err((
            "rf3".to_string(),
            RDKafkaErrorCode::InvalidReplicationFactor
        ))
    );

    // Describe shows the override and Kafka's defaults.
    assert_configs(
        &broker,
        &admin,
        "admin-topic",
        &[("retention.ms", "123456"), ("cleanup.policy", "delete")],
    );

    // Alter (replacing) and describe again.
    let alter =
        AlterConfig::new(ResourceSpecifier::Topic("admin-topic")).set("segment.bytes", "1048576");
    let altered = broker
        .block_on(admin.alter_configs([&alter], &options))
        .expect("alter");
    assert!(altered[0].is_ok(), "{:?}", altered[0]);
    // AlterConfigs replaces the whole set: retention.ms is back to its default.
    assert_configs(
        &broker,
        &admin,
        "admin-topic",
        &[("segment.bytes", "1048576"), ("retention.ms", "604800000")],
    );

    // Grow to 4 partitions; shrinking is refused.
    let grow = NewPartitions::new("admin-topic", 4);
    let grown = broker
        .block_on(admin.create_partitions([&grow], &options))
        .expect("grow");
    assert_eq!(grown[0], Ok("admin-topic".to_string()));
    let shrink = NewPartitions::new("admin-topic", 3);
    let shrunk = broker
        .block_on(admin.create_partitions([&shrink], &options))
        .expect("shrink");
    assert_eq!(
        shrunk[0],
        Err((
            "admin-topic".to_string(),
            RDKafkaErrorCode::InvalidPartitions
        ))
    );
    assert_eq!(watermarks(&bootstrap, "admin-topic", 3), (0, 0));

    // Delete records below offset 5 of partition 0.
    let producer = producer(&bootstrap, &[]);
    for i in 0..10 {
        let payload = format!("r{i}");
        let future = producer
            .send_result(
                rdkafka::producer::FutureRecord::<str, str>::to("admin-topic")
                    .partition(0)
                    .payload(&payload),
            )
            .map_err(|(e, _)| e)
            .expect("enqueue");
        broker.block_on(future).expect("report").expect("delivered");
    }
    let mut below = TopicPartitionList::new();
    below
        .add_partition_offset("admin-topic", 0, Offset::Offset(5))
        .expect("tpl");
    let deleted = broker
        .block_on(admin.delete_records(&below, &options))
        .expect("delete records");
    assert_eq!(
        deleted
            .find_partition("admin-topic", 0)
            .expect("p0")
            .offset(),
        Offset::Offset(5)
    );
    assert_eq!(watermarks(&bootstrap, "admin-topic", 0), (5, 10));
    let messages = read_back(&bootstrap, "admin-topic", 1, 5);
    assert_eq!(payload_text(&messages[0]), "r5");

    // Delete the topic; deleting it again is UNKNOWN_TOPIC_OR_PARTITION.
    let deleted = broker
        .block_on(admin.delete_topics(&["admin-topic"], &options))
        .expect("delete");
    assert_eq!(deleted[0], Ok("admin-topic".to_string()));
    let again = broker
        .block_on(admin.delete_topics(&["admin-topic"], &options))
        .expect("delete");
    assert_eq!(
        again[0],
        Err((
            "admin-topic".to_string(),
            RDKafkaErrorCode::UnknownTopicOrPartition
        ))
    );
}

#[test]
fn broker_configs_describe_and_alter() {
    let broker = EmbeddedBroker::start();
    let bootstrap = broker.bootstrap();
    let admin = admin(&bootstrap);
    let options = AdminOptions::new();
    let describe = |admin: &AdminClient<DefaultClientContext>| {
        let results = broker
            .block_on(admin.describe_configs([&ResourceSpecifier::Broker(1)], &options))
            .expect("describe");
        results.into_iter().next().expect("one").expect("described")
    };
    let described = describe(&admin);
    assert_eq!(
        described
            .get("log.retention.ms")
            .and_then(|e| e.value.clone())
            .as_deref(),
        Some("604800000")
    );
    assert!(described.get("node.id").expect("node.id").is_read_only);

    let alter = AlterConfig::new(ResourceSpecifier::Broker(1)).set("log.retention.ms", "3600000");
    let altered = broker
        .block_on(admin.alter_configs([&alter], &options))
        .expect("alter");
    assert!(altered[0].is_ok(), "{:?}", altered[0]);
    let described = describe(&admin);
    assert_eq!(
        described
            .get("log.retention.ms")
            .and_then(|e| e.value.clone())
            .as_deref(),
        Some("3600000")
    );
    // A topic without an override now inherits the new default.
    create_topic(&bootstrap, "inherits", 1, &[]);
    assert_configs(&broker, &admin, "inherits", &[("retention.ms", "3600000")]);
}
