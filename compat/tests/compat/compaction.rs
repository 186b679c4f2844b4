//! A compacted topic through librdkafka against the real binary: keyed records
//! are compacted to the latest value of each key at their offsets, tombstones
//! delete, the result survives kill -9 and a restart, and a keyless record is refused with
//! INVALID_RECORD (KIP-467's record errors).

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::message::Message;
use rdkafka::producer::FutureRecord;
use sluice_compat::*;

const KEYS: usize = 10;
const ROUNDS: usize = 30;

/// key → (offset, value) of the latest record of each key a full read sees, and
/// how many records it read.
fn read_latest(bootstrap: &str, topic: &str) -> (BTreeMap<String, (i64, Option<String>)>, usize) {
    let (_, high) = watermarks(bootstrap, topic, 0);
    let reader = consumer(bootstrap, &[]);
    assign_from_start(&reader, topic, 1);
    let mut latest = BTreeMap::new();
    let mut read = 0;
    let mut next = 0;
    let deadline = Instant::now() + Duration::from_millis(CLIENT_WAIT_MS);
    while next < high {
        assert!(Instant::now() < deadline, "read up to {next} of {high}");
        match reader.poll(Duration::from_millis(100)) {
            Some(Ok(message)) => {
                let key = String::from_utf8_lossy(message.key().unwrap_or_default()).into_owned();
                let value = message
                    .payload()
                    .map(|p| String::from_utf8_lossy(p).into_owned());
                latest.insert(key, (message.offset(), value));
                read += 1;
                next = message.offset() + 1;
            }
            Some(Err(error)) => panic!("consumer error: {error}"),
            None => {}
        }
    }
    (latest, read)
}

#[test]
fn a_compacted_topic_keeps_the_latest_value_of_every_key() {
    let dir = tempfile::tempdir().expect("temp dir");
    let mut broker = BrokerProcess::start(dir.path(), &["--log-cleaner-backoff-ms", "100"]);
    let bootstrap = broker.bootstrap();
    let topic = "compacted";
    create_topic(
        &bootstrap,
        topic,
        1,
        &[
            ("cleanup.policy", "compact"),
            ("segment.bytes", "2048"),
            ("min.cleanable.dirty.ratio", "0.01"),
        ],
    );
    let producer = producer(&bootstrap, &[("linger.ms", "0")]);
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let mut expected: BTreeMap<String, (i64, Option<String>)> = BTreeMap::new();
    for round in 0..ROUNDS {
        for key in 0..KEYS {
            let key = format!("key-{key}");
            let value = format!("value-{round}-{}", "x".repeat(40));
            let delivered = runtime
                .block_on(producer.send(
                    FutureRecord::to(topic).key(&key).payload(&value),
                    Duration::from_millis(CLIENT_WAIT_MS),
                ))
                .expect("delivered");
            expected.insert(key, (delivered.offset, Some(value)));
        }
    }
    // A tombstone deletes key-0 (it stays, as a null value, for
    // delete.retention.ms).
    let delivered = runtime
        .block_on(producer.send(
            FutureRecord::<str, str>::to(topic).key("key-0"),
            Duration::from_millis(CLIENT_WAIT_MS),
        ))
        .expect("tombstone delivered");
    expected.insert("key-0".to_string(), (delivered.offset, None));
    // A keyless record is refused, and names the record.
    let refused = runtime.block_on(producer.send(
        FutureRecord::<str, str>::to(topic).payload("no key"),
        Duration::from_millis(CLIENT_WAIT_MS),
    ));
    match refused {
        Err((KafkaError::MessageProduction(RDKafkaErrorCode::InvalidRecord), _)) => {}
        other => panic!("a keyless record on a compacted topic: {other:?}"),
    }
    let written = ROUNDS * KEYS + 1;
    let deadline = Instant::now() + Duration::from_millis(CLIENT_WAIT_MS * 2);
    loop {
        let (latest, read) = read_latest(&bootstrap, topic);
        assert_eq!(latest, expected, "every key's latest value, at its offset");
        if read < written / 2 {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "still {read} of {written} records: never compacted"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    broker.kill9();
    broker.restart();
    let bootstrap = broker.bootstrap();
    let (latest, read) = read_latest(&bootstrap, topic);
    assert_eq!(latest, expected);
    assert!(read < written / 2);
}
