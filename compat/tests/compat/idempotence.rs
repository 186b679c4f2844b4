//! The idempotent producer through librdkafka, with Produce responses lost on the
//! way back: the broker holds each lost batch, librdkafka retries it with the
//! same sequence numbers, and the log must end up with every record exactly once,
//! in the order it was sent.

use std::collections::BTreeMap;

use rdkafka::message::Message;
use rdkafka::producer::FutureRecord;
use sluice_compat::proxy::LossyProxy;
use sluice_compat::*;

const RECORDS: i32 = 3000;
const PARTITIONS: i32 = 3;
/// Every this many Produce responses, one is lost and its connection cut.
const LOSE_EVERY: usize = 5;
const LOSE_MAX: usize = 12;

#[test]
fn lost_produce_responses_are_retried_without_duplicates_or_reordering() {
    let dir = tempfile::tempdir().expect("temp dir");
    let proxy_port = free_port();
    let advertised = format!("127.0.0.1:{proxy_port}");
    let broker = BrokerProcess::start(dir.path(), &["--advertise", &advertised]);
    let upstream = broker.bootstrap().parse().expect("broker address");
    let proxy = LossyProxy::start(proxy_port, upstream, LOSE_EVERY, LOSE_MAX);
    create_topic(&advertised, "idempotent", PARTITIONS, &[]);

    let producer = producer(
        &advertised,
        &[
            ("enable.idempotence", "true"),
            ("linger.ms", "1"),
            ("batch.num.messages", "40"),
            // Reconnect at once after each cut, so the test spends its time on
            // retries rather than on backoff.
            ("reconnect.backoff.ms", "10"),
            ("reconnect.backoff.max.ms", "100"),
        ],
    );
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let futures: Vec<_> = (0..RECORDS)
        .map(|i| {
            let payload = i.to_string();
            producer
                .send_result(
                    FutureRecord::<(), str>::to("idempotent")
                        .partition(i % PARTITIONS)
                        .payload(&payload),
                )
                .map_err(|(error, _)| error)
                .expect("enqueue")
        })
        .collect();
    let mut delivered = BTreeMap::new();
    for (i, future) in futures.into_iter().enumerate() {
        let delivery = runtime
            .block_on(future)
            .expect("report")
            .unwrap_or_else(|(error, _)| panic!("record {i} not delivered: {error}"));
        let previous = delivered.insert((delivery.partition, delivery.offset), i.to_string());
        assert!(previous.is_none(), "two records acknowledged at one offset");
    }
    assert!(
        proxy.lost() > 0,
        "no response was lost ({} Produce responses seen): the test proved nothing",
        proxy.produce_responses()
    );

    // Each partition holds its records once, in the order they were sent, at the
    // offsets their delivery reports named.
    let read: BTreeMap<(i32, i64), String> =
        read_back(&advertised, "idempotent", PARTITIONS, RECORDS as usize)
            .iter()
            .map(|m| ((m.partition(), m.offset()), payload_text(m)))
            .collect();
    assert_eq!(read, delivered);
    for partition in 0..PARTITIONS {
        let sent: Vec<String> = (0..RECORDS)
            .filter(|i| i % PARTITIONS == partition)
            .map(|i| i.to_string())
            .collect();
        let stored: Vec<String> = read
            .range((partition, 0)..(partition + 1, 0))
            .map(|(_, payload)| payload.clone())
            .collect();
        assert_eq!(stored, sent, "partition {partition}");
        let (_, high) = watermarks(&advertised, "idempotent", partition);
        assert_eq!(
            high,
            sent.len() as i64,
            "partition {partition} holds extra records"
        );
    }
}
