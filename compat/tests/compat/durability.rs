//! `kill -9` against the real binary: every record acknowledged before the kill
//! is readable after the restart, at the same offset, and nothing else is
//! invented; a graceful stop keeps topics and configs.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rdkafka::consumer::Consumer;
use rdkafka::message::Message;
use rdkafka::producer::FutureRecord;
use sluice_compat::*;

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime")
}

/// (partition, offset) -> payload of every record read back.
fn read_all(
    bootstrap: &str,
    topic: &str,
    partitions: i32,
    count: usize,
) -> HashMap<(i32, i64), String> {
    read_back(bootstrap, topic, partitions, count)
        .iter()
        .map(|m| ((m.partition(), m.offset()), payload_text(m)))
        .collect()
}

#[test]
fn ten_thousand_keyed_records_survive_kill_9() {
    let dir = tempfile::tempdir().expect("temp dir");
    let mut broker = BrokerProcess::start(dir.path(), &[]);
    let bootstrap = broker.bootstrap();
    create_topic(&bootstrap, "durable", 3, &[]);
    let producer = producer(&bootstrap, &[]);
    let runtime = runtime();
    let mut acknowledged = HashMap::new();
    let futures: Vec<_> = (0..10_000)
        .map(|i| {
            let key = format!("k{}", i % 101);
            let payload = format!("v{i}");
            let future = producer
                .send_result(FutureRecord::to("durable").key(&key).payload(&payload))
                .map_err(|(e, _)| e)
                .expect("enqueue");
            (payload, future)
        })
        .collect();
    for (payload, future) in futures {
        let delivery = runtime
            .block_on(future)
            .expect("report")
            .expect("delivered");
        acknowledged.insert((delivery.partition, delivery.offset), payload);
    }
    assert_eq!(read_all(&bootstrap, "durable", 3, 10_000), acknowledged);

    broker.kill9();
    broker.restart();
    assert_eq!(read_all(&bootstrap, "durable", 3, 10_000), acknowledged);

    // Offsets continue where the log ended.
    let producer = sluice_compat::producer(&bootstrap, &[]);
    let future = producer
        .send_result(
            FutureRecord::<str, str>::to("durable")
                .partition(0)
                .payload("after"),
        )
        .map_err(|(e, _)| e)
        .expect("enqueue");
    let delivery = runtime
        .block_on(future)
        .expect("report")
        .expect("delivered");
    let before = acknowledged.keys().filter(|(p, _)| *p == 0).count() as i64;
    assert_eq!(delivery.offset, before);
}

#[test]
fn kill_9_during_a_produce_stream_loses_nothing_acknowledged() {
    let dir = tempfile::tempdir().expect("temp dir");
    let mut broker = BrokerProcess::start(dir.path(), &[]);
    let bootstrap = broker.bootstrap();
    create_topic(&bootstrap, "stream", 1, &[]);
    let acknowledged = Arc::new(Mutex::new(HashMap::new()));
    let stop = Arc::new(AtomicBool::new(false));
    let writer = {
        let acknowledged = Arc::clone(&acknowledged);
        let stop = Arc::clone(&stop);
        let bootstrap = bootstrap.clone();
        std::thread::spawn(move || {
            let producer = producer(
                &bootstrap,
                &[("message.timeout.ms", "3000"), ("linger.ms", "1")],
            );
            let runtime = runtime();
            let mut i = 0u64;
            while !stop.load(Ordering::Relaxed) {
                let batch: Vec<_> = (0..50)
                    .filter_map(|_| {
                        i += 1;
                        let payload = format!("s{i}");
                        producer
                            .send_result(FutureRecord::<str, str>::to("stream").payload(&payload))
                            .ok()
                            .map(|future| (payload, future))
                    })
                    .collect();
                for (payload, future) in batch {
                    if let Ok(Ok(delivery)) = runtime.block_on(future) {
                        acknowledged
                            .lock()
                            .expect("lock")
                            .insert(delivery.offset, payload);
                    }
                }
            }
        })
    };
    // Kill mid-stream once some records are acknowledged.
    while acknowledged.lock().expect("lock").len() < 2_000 {
        std::thread::sleep(Duration::from_millis(10));
    }
    broker.kill9();
    stop.store(true, Ordering::Relaxed);
    writer.join().expect("writer");
    let acknowledged = acknowledged.lock().expect("lock").clone();
    broker.restart();
    let (_, end) = watermarks(&bootstrap, "stream", 0);
    assert!(end as usize >= acknowledged.len());
    let stored: HashMap<i64, String> = read_back(&bootstrap, "stream", 1, end as usize)
        .iter()
        .map(|m| (m.offset(), payload_text(m)))
        .collect();
    for (offset, payload) in &acknowledged {
        assert_eq!(
            stored.get(offset),
            Some(payload),
            "acknowledged offset {offset} lost"
        );
    }
}

#[test]
fn graceful_restart_keeps_topics_and_configs() {
    let dir = tempfile::tempdir().expect("temp dir");
    let mut broker = BrokerProcess::start(dir.path(), &[]);
    let bootstrap = broker.bootstrap();
    create_topic(&bootstrap, "kept", 5, &[("retention.ms", "86400000")]);
    broker.terminate();
    assert!(dir
        .path()
        .join("logs")
        .join(".kafka_cleanshutdown")
        .exists());
    broker.restart();
    let metadata = consumer(&bootstrap, &[])
        .fetch_metadata(Some("kept"), Duration::from_secs(10))
        .expect("metadata");
    assert_eq!(metadata.topics()[0].partitions().len(), 5);
    assert_eq!(watermarks(&bootstrap, "kept", 4), (0, 0));
}
