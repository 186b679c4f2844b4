//! ListOffsets through librdkafka: watermarks and offsets for times.

use std::time::Duration;

use rdkafka::consumer::Consumer;
use rdkafka::producer::FutureRecord;
use rdkafka::{Offset, TopicPartitionList};
use sluice_compat::*;

#[test]
fn watermarks_and_offsets_for_times() {
    let broker = EmbeddedBroker::start();
    let bootstrap = broker.bootstrap();
    create_topic(&bootstrap, "times", 2, &[]);
    let producer = producer(&bootstrap, &[("linger.ms", "0")]);
    // Partition 0 gets timestamps 1000, 2000, ..., 10000; partition 1 stays empty.
    for i in 1..=10i64 {
        let payload = format!("m{i}");
        let future = producer
            .send_result(
                FutureRecord::<str, str>::to("times")
                    .partition(0)
                    .payload(&payload)
                    .timestamp(i * 1000),
            )
            .map_err(|(e, _)| e)
            .expect("enqueue");
        broker.block_on(future).expect("report").expect("delivered");
    }
    assert_eq!(watermarks(&bootstrap, "times", 0), (0, 10));
    assert_eq!(watermarks(&bootstrap, "times", 1), (0, 0));

    let consumer = consumer(&bootstrap, &[]);
    let lookup = |timestamp: i64| -> (Offset, Offset) {
        let mut query = TopicPartitionList::new();
        query
            .add_partition_offset("times", 0, Offset::Offset(timestamp))
            .expect("tpl");
        query
            .add_partition_offset("times", 1, Offset::Offset(timestamp))
            .expect("tpl");
        let answer = consumer
            .offsets_for_times(query, Duration::from_secs(10))
            .expect("offsets for times");
        let offset = |p| {
            answer
                .find_partition("times", p)
                .expect("partition")
                .offset()
        };
        (offset(0), offset(1))
    };
    // Before everything: the first record; exact hit; between records: the next one.
    assert_eq!(lookup(0).0, Offset::Offset(0));
    assert_eq!(lookup(3000).0, Offset::Offset(2));
    assert_eq!(lookup(3500).0, Offset::Offset(3));
    // After everything, and on an empty partition: no offset (-1 is End).
    assert_eq!(lookup(20_000).0, Offset::End);
    assert_eq!(lookup(0).1, Offset::End);
}
