//! A broker under a low open file limit: the common shell default of
//! `ulimit -n 1024`, hard too, so that the broker cannot raise it. Running out
//! of descriptors is not a disk failure: partitions past what the limit has
//! room for are refused up front with POLICY_VIOLATION, and the broker keeps
//! serving, restarted too; and a partition costs one descriptor, not four.
//! (A CreateTopics of 300 partitions used to be answered with success, after
//! which the broker took its log dir offline on EMFILE and exited; restarted,
//! it had no descriptor left for clients.)

use std::time::Duration;

use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
use rdkafka::client::DefaultClientContext;
use rdkafka::config::ClientConfig;
use rdkafka::consumer::Consumer;
use rdkafka::error::RDKafkaErrorCode;
use rdkafka::producer::FutureRecord;
use sluice_compat::{consumer, create_topic, producer, BrokerProcess, CLIENT_WAIT_MS};

/// The open file limit the broker starts under.
const OPEN_FILE_LIMIT: u64 = 1024;

/// Each topic's result of one CreateTopics.
fn create_topics(bootstrap: &str, topics: &[(&str, i32)]) -> Vec<Result<String, RDKafkaErrorCode>> {
    let admin: AdminClient<DefaultClientContext> = ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .create()
        .expect("admin client");
    let new: Vec<NewTopic> = topics
        .iter()
        .map(|(name, partitions)| NewTopic::new(name, *partitions, TopicReplication::Fixed(1)))
        .collect();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let options =
        AdminOptions::new().operation_timeout(Some(Duration::from_millis(CLIENT_WAIT_MS)));
    runtime
        .block_on(admin.create_topics(new.iter(), &options))
        .expect("create topics")
        .into_iter()
        .map(|result| result.map_err(|(_, code)| code))
        .collect()
}

/// A record through and back, so the broker is shown serving.
fn round_trip(bootstrap: &str, topic: &str, value: &str) {
    let producer = producer(bootstrap, &[]);
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    runtime
        .block_on(
            producer.send(
                FutureRecord::<(), str>::to(topic)
                    .partition(0)
                    .payload(value),
                Duration::from_millis(CLIENT_WAIT_MS),
            ),
        )
        .map_err(|(error, _)| error)
        .expect("produced");
    let consumer = consumer(bootstrap, &[]);
    let (_, high) = consumer
        .fetch_watermarks(topic, 0, Duration::from_millis(CLIENT_WAIT_MS))
        .expect("watermarks");
    assert!(high >= 1);
}

#[test]
fn a_broker_under_a_low_open_file_limit_refuses_partitions_past_it_and_keeps_serving() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut broker = BrokerProcess::start_with_open_file_limit(dir.path(), &[], OPEN_FILE_LIMIT);
    let bootstrap = broker.bootstrap();
    let created = create_topics(
        &bootstrap,
        &[
            ("wide-1", 100),
            ("wide-2", 100),
            ("wide-3", 100),
            ("wide-4", 100),
        ],
    );
    assert_eq!(created[0], Ok("wide-1".to_string()));
    assert_eq!(created[1], Ok("wide-2".to_string()));
    assert_eq!(created[2], Ok("wide-3".to_string()));
    assert_eq!(created[3], Err(RDKafkaErrorCode::PolicyViolation));
    round_trip(&bootstrap, "wide-1", "after the refusal");
    create_topic(&bootstrap, "narrow", 8, &[]);
    round_trip(&bootstrap, "narrow", "still room");
    // 308 partitions hold one descriptor each (their logs are created as the
    // broker applies the metadata, so it is waited for), and fewer than two
    // each with everything else included.
    let pid = broker.pid().expect("running");
    let open = || {
        std::fs::read_dir(format!("/proc/{pid}/fd"))
            .expect("the broker's descriptors")
            .count()
    };
    let deadline = std::time::Instant::now() + Duration::from_millis(CLIENT_WAIT_MS);
    while open() < 308 && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    let open = open();
    eprintln!("{open} descriptors open for 308 partitions");
    assert!(
        (308..2 * 308).contains(&open),
        "{open} descriptors open for 308 partitions"
    );

    broker.terminate();
    broker.restart();
    let bootstrap = broker.bootstrap();
    // Restarted with what it holds, it has room for clients.
    let clients: Vec<_> = (0..50).map(|_| producer(&bootstrap, &[])).collect();
    round_trip(&bootstrap, "wide-1", "after the restart");
    drop(clients);
    assert_eq!(
        create_topics(&bootstrap, &[("wide-5", 100)]),
        vec![Err(RDKafkaErrorCode::PolicyViolation)]
    );
}

/// The open file limit of the broker holding many segments.
const SEGMENTED_OPEN_FILE_LIMIT: u64 = 512;
/// Records each in a segment of its own: more segments than the limit has
/// descriptors (each roll fsyncs a producer snapshot, so not many more).
const SEGMENTED_RECORDS: usize = 700;

#[test]
fn a_partition_of_more_segments_than_descriptors_is_written_and_read_whole_across_restarts() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut broker =
        BrokerProcess::start_with_open_file_limit(dir.path(), &[], SEGMENTED_OPEN_FILE_LIMIT);
    let bootstrap = broker.bootstrap();
    // A 900-byte record is a batch of more than half a segment: one per segment.
    create_topic(&bootstrap, "segmented", 1, &[("segment.bytes", "1500")]);
    let producer = producer(&bootstrap, &[("linger.ms", "0")]);
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let value = |i: usize| format!("{i:06}{}", "v".repeat(894));
    for i in 0..SEGMENTED_RECORDS {
        runtime
            .block_on(
                producer.send(
                    FutureRecord::<(), str>::to("segmented")
                        .partition(0)
                        .payload(&value(i)),
                    Duration::from_millis(CLIENT_WAIT_MS),
                ),
            )
            .map_err(|(error, _)| error)
            .unwrap_or_else(|error| panic!("record {i}: {error}"));
    }
    drop(producer);
    let partition_dir = dir.path().join("logs").join("segmented-0");
    let segments = std::fs::read_dir(&partition_dir)
        .expect("partition dir")
        .filter(|entry| {
            entry
                .as_ref()
                .is_ok_and(|e| e.file_name().to_string_lossy().ends_with(".log"))
        })
        .count();
    assert!(segments >= SEGMENTED_RECORDS, "{segments} segments");
    let read_all = |bootstrap: &str, when: &str| {
        let messages = sluice_compat::read_back(bootstrap, "segmented", 1, SEGMENTED_RECORDS);
        for (i, message) in messages.iter().enumerate() {
            assert_eq!(
                sluice_compat::payload_text(message),
                value(i),
                "record {i} {when}"
            );
        }
    };
    read_all(&bootstrap, "as written");
    // Rolled segments are fsynced and their files handed to the cache of
    // idle files soon after the roll, leaving the broker far from its limit.
    let pid = broker.pid().expect("running");
    let open = || {
        std::fs::read_dir(format!("/proc/{pid}/fd"))
            .expect("the broker's descriptors")
            .count()
    };
    let bound = SEGMENTED_OPEN_FILE_LIMIT as usize / 2;
    let deadline = std::time::Instant::now() + Duration::from_millis(CLIENT_WAIT_MS);
    while open() >= bound && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    let open = open();
    eprintln!("{open} descriptors open for a partition of {segments} segments");
    assert!(open < bound, "{open} descriptors open");

    broker.terminate();
    broker.restart();
    read_all(&broker.bootstrap(), "after a clean restart");
    broker.kill9();
    broker.restart();
    read_all(&broker.bootstrap(), "after kill -9");
    round_trip(&broker.bootstrap(), "segmented", "still appending");
}
