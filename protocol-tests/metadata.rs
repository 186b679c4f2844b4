//! Metadata: brokers advertise the listener address, auto-creation, unknown and
//! invalid topics, topic ids.

use kafka_protocol::messages::metadata_request::MetadataRequestTopic;
use kafka_protocol::messages::{MetadataRequest, MetadataResponse, TopicName};
use kafka_protocol::protocol::StrBytes;

use crate::harness::{decode, encode, split_v0, split_v1, TestBroker};

fn topic(name: &str) -> MetadataRequestTopic {
    MetadataRequestTopic::default()
        .with_name(Some(TopicName(StrBytes::from_string(name.to_string()))))
}

fn metadata(broker: &TestBroker, version: i16, request: &MetadataRequest) -> MetadataResponse {
    let mut wire = broker.wire();
    let flexible = version >= 9;
    let frame = wire.request(3, version, 11, flexible, &encode(request, version));
    let (correlation_id, body) = if flexible {
        split_v1(&frame)
    } else {
        split_v0(&frame)
    };
    assert_eq!(correlation_id, 11);
    decode(body, version)
}

#[test]
fn empty_cluster_advertises_the_listener_it_was_reached_on() {
    let broker = TestBroker::start();
    for version in [0, 1, 4, 9, 12, 13] {
        let request =
            MetadataRequest::default().with_topics(if version == 0 { Some(vec![]) } else { None });
        let response = metadata(&broker, version, &request);
        assert_eq!(response.brokers.len(), 1, "v{version}");
        assert_eq!(response.brokers[0].host.as_str(), "127.0.0.1");
        assert_eq!(response.brokers[0].port, i32::from(broker.addr.port()));
        assert!(response.topics.is_empty());
        if version >= 2 {
            assert_eq!(
                response.cluster_id.as_ref().map(|c| c.len()),
                Some(22),
                "v{version}"
            );
        }
    }
}

#[test]
fn requested_topics_are_auto_created_with_an_id() {
    let broker = TestBroker::start();
    let request = MetadataRequest::default()
        .with_topics(Some(vec![topic("orders")]))
        .with_allow_auto_topic_creation(true);
    let response = metadata(&broker, 12, &request);
    assert_eq!(response.topics.len(), 1);
    let created = &response.topics[0];
    assert_eq!(created.error_code, 0);
    assert!(!created.topic_id.is_nil());
    assert_eq!(created.partitions.len(), 1);
    assert_eq!(created.partitions[0].leader_id.0, 1);
    // Asked again by id (v12+), the same topic comes back.
    let by_id = MetadataRequest::default().with_topics(Some(vec![MetadataRequestTopic::default()
        .with_topic_id(created.topic_id)
        .with_name(None)]));
    let response = metadata(&broker, 12, &by_id);
    assert_eq!(
        response.topics[0].name.as_ref().map(|n| n.0.to_string()),
        Some("orders".to_string())
    );
}

#[test]
fn unknown_and_invalid_topics_get_kafka_errors() {
    let broker = TestBroker::start();
    let request = MetadataRequest::default()
        .with_topics(Some(vec![topic("missing"), topic("bad/name")]))
        .with_allow_auto_topic_creation(false);
    let response = metadata(&broker, 9, &request);
    assert_eq!(
        response.topics[0].error_code, 3,
        "UNKNOWN_TOPIC_OR_PARTITION"
    );
    assert_eq!(response.topics[1].error_code, 17, "INVALID_TOPIC_EXCEPTION");
    let by_unknown_id =
        MetadataRequest::default().with_topics(Some(vec![MetadataRequestTopic::default()
            .with_topic_id(uuid::Uuid::from_u128(7))
            .with_name(None)]));
    let response = metadata(&broker, 12, &by_unknown_id);
    assert_eq!(response.topics[0].error_code, 100, "UNKNOWN_TOPIC_ID");
}
