//! Transactions holding only consumer offsets: librdkafka's
//! send_offsets_to_transaction, committed and aborted, as OffsetFetch sees them.

use std::time::{Duration, Instant};

use rdkafka::consumer::Consumer;
use rdkafka::producer::Producer;
use rdkafka::{Offset, TopicPartitionList};
use sluice_compat::*;

const WAIT: Duration = Duration::from_secs(10);

fn offsets(offset: i64) -> TopicPartitionList {
    let mut list = TopicPartitionList::new();
    list.add_partition_offset("source", 0, Offset::Offset(offset))
        .expect("tpl");
    list
}

#[test]
fn offsets_commit_and_abort_inside_transactions() {
    let broker = EmbeddedBroker::start();
    let bootstrap = broker.bootstrap();
    create_topic(&bootstrap, "source", 1, &[]);
    let consumer = consumer(&bootstrap, &[("group.id", "compat-txn-group")]);
    let group = consumer.group_metadata().expect("group metadata");
    let committed = |consumer: &rdkafka::consumer::BaseConsumer| {
        let mut wanted = TopicPartitionList::new();
        wanted.add_partition("source", 0);
        consumer
            .committed_offsets(wanted, WAIT)
            .expect("committed offsets")
            .find_partition("source", 0)
            .expect("partition")
            .offset()
    };

    let producer = producer(&bootstrap, &[("transactional.id", "compat-txn")]);
    producer.init_transactions(WAIT).expect("init_transactions");
    producer.begin_transaction().expect("begin");
    producer
        .send_offsets_to_transaction(&offsets(7), &group, WAIT)
        .expect("send offsets");
    producer.commit_transaction(WAIT).expect("commit");
    let deadline = Instant::now() + WAIT;
    while committed(&consumer) != Offset::Offset(7) {
        assert!(
            Instant::now() < deadline,
            "the committed offset never appeared"
        );
        std::thread::sleep(Duration::from_millis(50));
    }

    producer.begin_transaction().expect("begin");
    producer
        .send_offsets_to_transaction(&offsets(99), &group, WAIT)
        .expect("send offsets");
    producer.abort_transaction(WAIT).expect("abort");
    // A new instance with the same transactional id starts once the abort is
    // complete; the aborted offset never shows.
    let successor = sluice_compat::producer(&bootstrap, &[("transactional.id", "compat-txn")]);
    successor.init_transactions(WAIT).expect("successor init");
    assert_eq!(committed(&consumer), Offset::Offset(7));
}
