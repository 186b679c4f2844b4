//! The produce workload, the one every run has: librdkafka producers writing
//! `<producer>-<seq>` values round-robin over the run's topic (idempotent
//! with acks=all in a safe run, beside one acks=1 producer; acks=1 alone in
//! the self-test), a reader recording every record it sees while the faults
//! run, and, after the heal, the final read of every partition to its high
//! watermark. `checker::check` reads the writes and reads against the final
//! read.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use rdkafka::consumer::Consumer;
use rdkafka::message::Message;
use rdkafka::producer::FutureRecord;

use super::{DELIVERY_TIMEOUT_MS, IN_FLIGHT, PARTITIONS, REQUEST_TIMEOUT_MS, TOPIC};
use crate::faults::history::{value_of, History, Outcome, Read, Write};
use crate::faults::schedule::RunClock;
use crate::{assign_from_start, consumer, producer};

/// Concurrent producers, each its own librdkafka client.
pub const PRODUCERS: u32 = 3;
/// The id of the safe run's acks=1 producer (after the others): its writes
/// promise nothing beyond their leader, but what a consumer read of them
/// was committed and must survive.
pub const LEADER_ACKED_PRODUCER: u32 = PRODUCERS;
/// How long the final read may take, in ms.
const FINAL_READ_WAIT_MS: u64 = 60_000;

/// One producer writing `<producer>-<seq>` to partition `seq % PARTITIONS`
/// until stopped, a window of sends at a time, with `config`; `by_leader`:
/// its acknowledgements promise only that the leader had the write (acks=1
/// beside a safe run's producers).
pub fn spawn_producer(
    id: u32,
    bootstrap: &str,
    mut config: Vec<(&'static str, &'static str)>,
    by_leader: bool,
    history: &Arc<History>,
    stop: &Arc<AtomicBool>,
    clock: RunClock,
) -> JoinHandle<()> {
    config.extend([
        ("request.timeout.ms", REQUEST_TIMEOUT_MS),
        ("socket.timeout.ms", REQUEST_TIMEOUT_MS),
        ("message.timeout.ms", DELIVERY_TIMEOUT_MS),
        ("linger.ms", "2"),
    ]);
    let producer = producer(bootstrap, &config);
    let (history, stop) = (Arc::clone(history), Arc::clone(stop));
    std::thread::spawn(move || {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("runtime");
        let mut seq = 0u64;
        while !stop.load(Ordering::Acquire) {
            let window: Vec<_> = (0..IN_FLIGHT)
                .map(|_| {
                    let (this, value) = (seq, value_of(id, seq));
                    seq += 1;
                    let partition = (this % PARTITIONS as u64) as i32;
                    let key = this.to_string();
                    let invoked_ms = clock.ms();
                    let sent = producer.send_result(
                        FutureRecord::to(TOPIC)
                            .partition(partition)
                            .key(&key)
                            .payload(&value),
                    );
                    (this, partition, invoked_ms, sent.map_err(|(e, _)| e))
                })
                .collect();
            for (this, partition, invoked_ms, sent) in window {
                let outcome = match sent {
                    Err(error) => Outcome::Failed(error.to_string()),
                    Ok(delivery) => match runtime.block_on(delivery) {
                        Ok(Ok(delivered)) if by_leader => Outcome::AckedByLeader {
                            offset: delivered.offset,
                        },
                        Ok(Ok(delivered)) => Outcome::Acked {
                            offset: delivered.offset,
                        },
                        Ok(Err((error, _))) => Outcome::Failed(error.to_string()),
                        Err(_) => Outcome::Failed("delivery report dropped".to_string()),
                    },
                };
                history.writes.lock().expect("history").push(Write {
                    producer: id,
                    seq: this,
                    partition,
                    invoked_ms,
                    completed_ms: clock.ms(),
                    outcome,
                });
            }
        }
    })
}

/// A consumer reading every partition from the start while the run goes on,
/// recording what it sees (so that a value later truncated away is caught),
/// each record once; it logs each time a partition's position goes back.
pub fn spawn_reader(
    bootstrap: &str,
    history: &Arc<History>,
    stop: &Arc<AtomicBool>,
    clock: RunClock,
) -> JoinHandle<()> {
    let reader = consumer(
        bootstrap,
        &[
            ("request.timeout.ms", REQUEST_TIMEOUT_MS),
            ("socket.timeout.ms", REQUEST_TIMEOUT_MS),
        ],
    );
    assign_from_start(&reader, TOPIC, PARTITIONS);
    let (history, stop) = (Arc::clone(history), Arc::clone(stop));
    std::thread::spawn(move || {
        let mut next = vec![0i64; PARTITIONS as usize];
        while !stop.load(Ordering::Acquire) {
            if let Some(Ok(message)) = reader.poll(Duration::from_millis(100)) {
                let (partition, offset) = (message.partition(), message.offset());
                if let Some(next) = next.get_mut(partition as usize) {
                    if offset < *next {
                        clock.log(&format!(
                            "reader: partition {partition} went back from offset {} to {offset}",
                            *next
                        ));
                    }
                    *next = offset + 1;
                }
                let value = String::from_utf8_lossy(message.payload().unwrap_or_default());
                history.reads.lock().expect("history").record(Read {
                    partition,
                    offset,
                    value: value.into_owned(),
                    at_ms: clock.ms(),
                });
            }
        }
    })
}

/// Reads every partition from its start to its high watermark.
pub fn final_read(bootstrap: &str, clock: RunClock) -> Result<Vec<Read>, String> {
    let reader = consumer(bootstrap, &[("isolation.level", "read_uncommitted")]);
    let deadline = Instant::now() + Duration::from_millis(FINAL_READ_WAIT_MS);
    let mut ends = Vec::new();
    for partition in 0..PARTITIONS {
        // A new leader answers OFFSET_NOT_AVAILABLE until its high watermark
        // caught up (KIP-207), as a client is told to retry.
        let high = loop {
            match reader.fetch_watermarks(TOPIC, partition, Duration::from_millis(10_000)) {
                Ok((_, high)) => break high,
                Err(error) if Instant::now() > deadline => {
                    return Err(format!("watermarks of {TOPIC}-{partition}: {error}"))
                }
                Err(_) => std::thread::sleep(Duration::from_millis(250)),
            }
        };
        ends.push(high);
    }
    assign_from_start(&reader, TOPIC, PARTITIONS);
    let mut next: Vec<i64> = vec![0; PARTITIONS as usize];
    let mut reads = Vec::new();
    while next.iter().zip(&ends).any(|(n, end)| n < end) {
        if Instant::now() > deadline {
            return Err(format!("the final read reached {next:?} of {ends:?}"));
        }
        if let Some(Ok(message)) = reader.poll(Duration::from_millis(100)) {
            let partition = message.partition();
            next[partition as usize] = message.offset() + 1;
            reads.push(Read {
                partition,
                offset: message.offset(),
                value: String::from_utf8_lossy(message.payload().unwrap_or_default()).into_owned(),
                at_ms: clock.ms(),
            });
        }
    }
    Ok(reads)
}
