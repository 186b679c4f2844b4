//! The broker-wide request budget (`--queued-max-request-bytes`) on the real
//! binary: a thousand connections each sending a frame of the largest size keep
//! the process's resident memory near the budget, not near a thousand frames;
//! every frame is still answered, and the broker serves normally afterwards.

use std::sync::Arc;
use std::time::Duration;

use kafka_protocol::messages::ProduceResponse;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpSocket, TcpStream};
use tokio::task::JoinSet;

use crate::harness::{decode, encode, request_frame, split_v0, BinaryBroker, Wire};
use crate::produce_fetch::produce_request;

/// Connections that each send one frame of the largest size at once.
const CONNECTIONS: usize = 1_000;

/// The broker's frame limit, and the size of every frame sent.
const REQUEST_MAX_BYTES: usize = 8 * 1024 * 1024;

/// The broker's budget: eight frames of the largest size. Without it the broker
/// would read all thousand frames at once, about 8 GiB.
const BUDGET_BYTES: u64 = 64 * 1024 * 1024;

/// Worker threads the broker runs with here (tokio's `TOKIO_WORKER_THREADS`),
/// as on the smallest host, so that the allowance for the allocator below is
/// the same on every machine that runs the test.
const BROKER_WORKER_THREADS: u64 = 2;

/// glibc arenas the broker may use here (`MALLOC_ARENA_MAX`), one per worker.
/// Without a limit glibc makes up to eight per core as threads come and go (a
/// produce runs in `block_in_place`, which hands the worker's place to another
/// thread), and each arena can keep a budget of freed frames: on a loaded
/// machine the allowance below would then depend on how many threads ran.
const MALLOC_ARENAS_MAX: u64 = BROKER_WORKER_THREADS;

/// What the process holds with no request in flight: code, the runtime, the
/// controller's and the stores' caches. Measured at 42 MiB for a debug build;
/// the rest is room for a different libc or a larger build.
const IDLE_RSS_BYTES_ALLOWANCE: u64 = 64 * 1024 * 1024;

/// What one open, idle connection costs: its two tasks, its response queue and
/// the writer's buffer. Measured at about 12 KiB (1,000 connections added
/// 12 MiB); the rest is room for a different libc.
const CONNECTION_RSS_BYTES_ALLOWANCE: u64 = 32 * 1024;

/// Memory the allocator keeps beyond what is live. glibc gives each thread that
/// allocates its own arena and takes a freed buffer back into the arena it came
/// from, where only that arena's threads reuse it; and once the first 8 MiB
/// frame is freed, glibc raises its threshold for giving an allocation a
/// mapping of its own past that size, so later frames all come from the arenas.
/// Each arena can then stay as large as the most frames it ever held at once,
/// up to the whole budget. Measured at 60 to 75 MiB with two workers.
const ALLOCATOR_SLACK_BYTES: u64 = MALLOC_ARENAS_MAX * BUDGET_BYTES;

/// The most resident memory the broker may reach in this test.
const RSS_BYTES_CEILING: u64 = BUDGET_BYTES
    + IDLE_RSS_BYTES_ALLOWANCE
    + CONNECTIONS as u64 * CONNECTION_RSS_BYTES_ALLOWANCE
    + ALLOCATOR_SLACK_BYTES;

/// Open files this test needs in its own process and in the broker, which
/// inherits the limit: a thousand sockets each, plus the broker's data files.
const OPEN_FILES_MIN: libc::rlim_t = 4_096;

/// Only so that a broken broker fails the test instead of hanging it; the load
/// takes seconds, and nothing asserts how long.
const LOAD_DEADLINE_MS: u64 = 150_000;

/// The kernel send buffer of each test connection. With the kernel's own sizing
/// each socket the broker is not reading would queue megabytes of the frame,
/// about 2 GiB over a thousand connections, which puts every socket on the host
/// under memory pressure; this keeps it to a few hundred MiB. Much smaller, a
/// buffer holds a single loopback segment, and each one then waits for the
/// broker's delayed acknowledgement.
const CLIENT_SEND_BUFFER_BYTES: u32 = 128 * 1024;

/// How often the broker's resident memory is read while the load runs.
const RSS_SAMPLE_INTERVAL_MS: u64 = 10;

/// Correlation id of each big frame.
const PRODUCE_CORRELATION_ID: i32 = 5;

/// Produce v3 asks for no flexible header, which keeps the frame simple.
const PRODUCE_VERSION: i16 = 3;

/// Kafka's UNKNOWN_TOPIC_OR_PARTITION, what a produce to a missing topic gets.
const UNKNOWN_TOPIC_OR_PARTITION: i16 = 3;

#[test]
fn a_thousand_largest_frames_stay_within_the_request_budget() {
    raise_open_files_limit(OPEN_FILES_MIN);
    let mut broker = BinaryBroker::spawn_with(
        &[
            "--request-max-bytes",
            &REQUEST_MAX_BYTES.to_string(),
            "--queued-max-request-bytes",
            &BUDGET_BYTES.to_string(),
        ],
        &[
            ("TOKIO_WORKER_THREADS", &BROKER_WORKER_THREADS.to_string()),
            ("MALLOC_ARENA_MAX", &MALLOC_ARENAS_MAX.to_string()),
        ],
    );
    let pid = broker.child.id();
    let addr = broker.addr;
    api_versions_answers(&mut Wire::connect(addr));
    std::thread::sleep(Duration::from_millis(200));
    let idle = resident_bytes(pid, "VmRSS");

    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let (connected, sampled_peak, answers) = runtime.block_on(async move {
        // Every connection is accepted and served once before the load, so that
        // what it costs is counted apart from the frames.
        let mut streams = Vec::with_capacity(CONNECTIONS);
        for _ in 0..CONNECTIONS {
            let socket = TcpSocket::new_v4().expect("socket");
            socket
                .set_send_buffer_size(CLIENT_SEND_BUFFER_BYTES)
                .expect("send buffer");
            let mut stream = socket.connect(addr).await.expect("connect");
            stream
                .write_all(&api_versions_frame())
                .await
                .expect("write");
            let answer = read_answer(&mut stream).await.expect("ApiVersions answer");
            assert_eq!(&answer[..6], &[0, 0, 0, 42, 0, 0]);
            streams.push(stream);
        }
        let connected = resident_bytes(pid, "VmRSS");

        let frame = Arc::new(largest_produce_frame());
        let mut load = JoinSet::new();
        for (index, mut stream) in streams.into_iter().enumerate() {
            let frame = Arc::clone(&frame);
            load.spawn(async move {
                stream.write_all(&frame).await?;
                let answer = read_answer(&mut stream).await?;
                Ok::<_, std::io::Error>((index, answer, stream))
            });
        }
        let deadline = tokio::time::sleep(Duration::from_millis(LOAD_DEADLINE_MS));
        tokio::pin!(deadline);
        let mut sample = tokio::time::interval(Duration::from_millis(RSS_SAMPLE_INTERVAL_MS));
        let mut sampled_peak = 0;
        let mut answers = vec![Vec::new(); CONNECTIONS];
        // Answered connections stay open, so that every connection is counted
        // until the last frame is answered.
        let mut streams = Vec::with_capacity(CONNECTIONS);
        let mut answered = 0;
        while answered < CONNECTIONS {
            tokio::select! {
                _ = &mut deadline => panic!("only {answered} of {CONNECTIONS} frames answered"),
                _ = sample.tick() => {
                    let resident = resident_bytes(pid, "VmRSS");
                    sampled_peak = sampled_peak.max(resident);
                    // Checked as it happens, so a broker without a budget fails
                    // here long before it has taken gigabytes from the host.
                    assert!(
                        resident < RSS_BYTES_CEILING,
                        "broker resident memory {} MiB above the ceiling of {} MiB",
                        resident >> 20,
                        RSS_BYTES_CEILING >> 20
                    );
                }
                Some(joined) = load.join_next() => {
                    let (index, answer, stream) = joined
                        .expect("connection task")
                        .unwrap_or_else(|error| panic!("a connection failed: {error}"));
                    answers[index] = answer;
                    streams.push(stream);
                    answered += 1;
                }
            }
        }
        // A connection that sent a frame of the largest size goes on as usual.
        let stream = streams.first_mut().expect("a connection");
        stream
            .write_all(&api_versions_frame())
            .await
            .expect("write");
        let answer = read_answer(stream).await.expect("ApiVersions answer");
        assert_eq!(&answer[..6], &[0, 0, 0, 42, 0, 0]);
        (connected, sampled_peak, answers)
    });
    let peak = resident_bytes(pid, "VmHWM");
    eprintln!(
        "broker resident memory: idle {} MiB, with {CONNECTIONS} connections {} MiB, \
         peak under load {} MiB (sampled {} MiB); budget {} MiB, ceiling {} MiB",
        idle >> 20,
        connected >> 20,
        peak >> 20,
        sampled_peak >> 20,
        BUDGET_BYTES >> 20,
        RSS_BYTES_CEILING >> 20
    );
    assert!(
        peak < RSS_BYTES_CEILING,
        "broker peak resident memory {} MiB above the ceiling of {} MiB",
        peak >> 20,
        RSS_BYTES_CEILING >> 20
    );

    for (index, answer) in answers.iter().enumerate() {
        let (correlation_id, body) = split_v0(answer);
        assert_eq!(correlation_id, PRODUCE_CORRELATION_ID, "connection {index}");
        let response: ProduceResponse = decode(body, PRODUCE_VERSION);
        let partition = &response.responses[0].partition_responses[0];
        assert_eq!(partition.error_code, UNKNOWN_TOPIC_OR_PARTITION);
    }
    drop(runtime);
    api_versions_answers(&mut Wire::connect(addr));
    assert!(broker.is_alive(), "the broker process died");
}

/// One answer frame, without its length prefix.
async fn read_answer(stream: &mut TcpStream) -> std::io::Result<Vec<u8>> {
    let mut prefix = [0u8; 4];
    stream.read_exact(&mut prefix).await?;
    let mut answer = vec![0u8; i32::from_be_bytes(prefix).max(0) as usize];
    stream.read_exact(&mut answer).await?;
    Ok(answer)
}

/// A Produce to a topic that does not exist, exactly `REQUEST_MAX_BYTES` long,
/// with its length prefix. The broker answers it without looking at the
/// records, so all its memory is the frame's.
fn largest_produce_frame() -> Vec<u8> {
    let frame_with = |records_bytes: usize| {
        let request = produce_request("absent", 0, 1, &vec![0u8; records_bytes]);
        request_frame(
            0,
            PRODUCE_VERSION,
            PRODUCE_CORRELATION_ID,
            false,
            &encode(&request, PRODUCE_VERSION),
        )
    };
    let framing_bytes = frame_with(0).len();
    let frame = frame_with(REQUEST_MAX_BYTES - framing_bytes);
    assert_eq!(frame.len(), REQUEST_MAX_BYTES);
    let mut out = Vec::with_capacity(4 + frame.len());
    out.extend_from_slice(&(frame.len() as i32).to_be_bytes());
    out.extend_from_slice(&frame);
    out
}

fn api_versions_answers(wire: &mut Wire) {
    let frame = wire.request(18, 0, 42, false, &[]);
    assert_eq!(&frame[..6], &[0, 0, 0, 42, 0, 0]);
}

/// ApiVersions v0 with correlation id 42, with its length prefix.
fn api_versions_frame() -> Vec<u8> {
    let frame = request_frame(18, 0, 42, false, &[]);
    let mut out = (frame.len() as i32).to_be_bytes().to_vec();
    out.extend_from_slice(&frame);
    out
}

/// A `/proc/<pid>/status` field given in kB (`VmRSS`, `VmHWM`), in bytes.
fn resident_bytes(pid: u32, field: &str) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("status");
    let kilobytes: u64 = status
        .lines()
        .find_map(|line| line.strip_prefix(field)?.strip_prefix(':'))
        .and_then(|rest| rest.trim().strip_suffix("kB"))
        .and_then(|number| number.trim().parse().ok())
        .unwrap_or_else(|| panic!("no {field} in /proc/{pid}/status"));
    kilobytes * 1024
}

/// Raises this process's soft limit on open files to at least `wanted`, within
/// its hard limit, for the test's sockets and for the broker, which inherits it.
// std has no safe way to change a resource limit; the two calls only read and
// write a struct this function owns.
#[allow(unsafe_code)]
fn raise_open_files_limit(wanted: libc::rlim_t) {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes the current limits into `limit`, which is valid.
    let read = unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) };
    assert_eq!(read, 0, "getrlimit failed");
    if limit.rlim_cur >= wanted {
        return;
    }
    assert!(
        limit.rlim_max >= wanted,
        "the hard limit on open files ({}) is below the {wanted} this test needs",
        limit.rlim_max
    );
    limit.rlim_cur = wanted;
    // SAFETY: setrlimit only reads `limit`, which is valid.
    let set = unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &limit) };
    assert_eq!(set, 0, "setrlimit failed");
}
