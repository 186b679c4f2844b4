//! Load generator for `scripts/bench.sh`, built on librdkafka (rdkafka), plus the
//! machine yardsticks the figures are compared with (loopback bandwidth, fsync
//! rate) and the broker's start-up time. Prints one `key=value` line per figure.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use clap::{Parser, Subcommand};
use hdrhistogram::Histogram;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::producer::{BaseRecord, Producer, ThreadedProducer};
use rdkafka::producer::{DeliveryResult, ProducerContext};
use rdkafka::{ClientContext, Offset, TopicPartitionList};
use sluice_compat::{consumer, free_port};

#[derive(Parser)]
#[command(about = "Sluice load generator and machine yardsticks")]
struct Cli {
    #[command(subcommand)]
    command: Mode,
}

/// The broker and the topic a mode works on.
#[derive(clap::Args)]
struct Target {
    #[arg(long)]
    bootstrap: String,
    #[arg(long)]
    topic: String,
}

#[derive(Subcommand)]
enum Mode {
    /// Produce as fast as the client can; prints msgs/s and MB/s.
    Produce {
        #[command(flatten)]
        to: Target,
        #[arg(long)]
        messages: u64,
        #[arg(long)]
        size: usize,
        #[arg(long, default_value = "1")]
        acks: String,
        #[arg(long, default_value = "5")]
        linger_ms: u32,
        /// enable.idempotence=true (librdkafka then uses acks=all).
        #[arg(long)]
        idempotent: bool,
        /// Key the records `key-<n % keys>` (0: no keys), as a compacted
        /// topic needs.
        #[arg(long, default_value = "0")]
        keys: u64,
    },
    /// Consume a topic from the beginning; prints msgs/s and MB/s.
    Consume {
        #[command(flatten)]
        to: Target,
        #[arg(long)]
        partitions: i32,
        #[arg(long)]
        messages: u64,
        /// isolation.level: read_committed (librdkafka's default) or read_uncommitted.
        #[arg(long, default_value = "read_committed")]
        isolation: String,
        /// client.rack: with a rack-aware broker, fetch from the replica there.
        #[arg(long, default_value = "")]
        client_rack: String,
    },
    /// Committed transactions one after another, each of `per_transaction` messages
    /// spread round-robin over `partitions`; prints transactions/s and msgs/s.
    Transactions {
        #[command(flatten)]
        to: Target,
        #[arg(long)]
        partitions: i32,
        #[arg(long)]
        transactions: u64,
        #[arg(long, default_value = "10")]
        per_transaction: u64,
        #[arg(long, default_value = "100")]
        size: usize,
    },
    /// Produce at a fixed rate with linger.ms=0; prints latency percentiles.
    Latency {
        #[command(flatten)]
        to: Target,
        #[arg(long)]
        rate: u64,
        #[arg(long)]
        seconds: u64,
        #[arg(long, default_value = "100")]
        size: usize,
        #[arg(long, default_value = "1")]
        acks: String,
    },
    /// Loopback TCP bandwidth with one sender and one receiver.
    Loopback {
        #[arg(long, default_value = "2048")]
        megabytes: u64,
    },
    /// The standard authorizer's decisions per second against N bindings
    /// (half literal, half prefixed, on other topics), for each N given.
    AclDecisions {
        #[arg(long, value_delimiter = ',', default_value = "0,100,1000,10000,100000")]
        bindings: Vec<usize>,
    },
    /// fdatasync rate of 4 KiB appends in a directory.
    Fsync {
        #[arg(long)]
        dir: std::path::PathBuf,
        #[arg(long, default_value = "2")]
        seconds: u64,
    },
    /// Joins a consumer group and polls until killed (a member tests can kill -9).
    GroupMember {
        #[command(flatten)]
        to: Target,
        #[arg(long)]
        group: String,
    },
    /// Time until N consumers subscribing to one topic all hold an assignment.
    GroupJoin {
        #[command(flatten)]
        to: Target,
        #[arg(long, default_value = "10")]
        consumers: usize,
    },
    /// Consume a topic through a consumer group (one member); prints msgs/s.
    GroupConsume {
        #[command(flatten)]
        to: Target,
        #[arg(long)]
        messages: u64,
    },
    /// Latency of synchronous OffsetCommits (each a durable write).
    CommitLatency {
        #[command(flatten)]
        to: Target,
        #[arg(long, default_value = "2000")]
        commits: u64,
    },
    /// Creates a topic with the given partition count and replication factor,
    /// and topic configs given as `key=value`.
    CreateTopic {
        #[command(flatten)]
        to: Target,
        #[arg(long)]
        partitions: i32,
        #[arg(long, default_value = "1")]
        replication: i32,
        #[arg(long = "config")]
        configs: Vec<String>,
    },
    /// Leader failover of a replicated partition: three voters, a topic with three
    /// replicas (min.insync.replicas 2); kill -9 of a partition's leader to the
    /// first acks=all produce acknowledged on it, over repeated kills (the killed
    /// node restarted and back in the ISR before the next), one in three of
    /// the node that also leads the metadata raft; then SIGSTOP of a
    /// partition's leader to a new leader in every live node's Metadata (the
    /// node resumed and back in the ISR before the next); and, before all
    /// that, as many kills of a follower to the next acks=all produce
    /// acknowledged.
    ReplicaFailover {
        #[arg(long)]
        sluice: std::path::PathBuf,
        #[arg(long, default_value = "5")]
        kills: usize,
        #[arg(long, default_value = "0")]
        pauses: usize,
    },
    /// Three nodes; a consumer group committing on a topic of three replicas;
    /// kill -9 of the group's coordinator (the leader of its
    /// `__consumer_offsets` partition) to the member's next successful
    /// OffsetCommit on the new coordinator (the group stable again); then kill
    /// -9 of a transactional producer's coordinator (the leader of its
    /// `__transaction_state` partition) to its next committed transaction;
    /// each over repeated kills (the killed node restarted and back in the
    /// ISR first), one in three of the node that also leads the metadata raft
    /// (a group and a transactional id chosen for it).
    CoordinatorFailover {
        #[arg(long)]
        sluice: std::path::PathBuf,
        #[arg(long, default_value = "3")]
        kills: usize,
    },
    /// The controller quorum: start time of three voters and of one restarted
    /// voter, CreateTopics latency on one node and on three (through the
    /// metadata leader and through a follower), and failover time (kill -9 of
    /// the metadata leader to the next committed CreateTopics).
    Cluster {
        #[arg(long)]
        sluice: std::path::PathBuf,
        #[arg(long, default_value = "3")]
        starts: usize,
        #[arg(long, default_value = "100")]
        creates: usize,
        #[arg(long, default_value = "10")]
        kills: usize,
    },
    /// Time from spawning the broker to its first answered request.
    Startup {
        #[arg(long)]
        sluice: std::path::PathBuf,
        #[arg(long, default_value = "10")]
        runs: usize,
    },
}

fn main() {
    match Cli::parse().command {
        Mode::Produce {
            to,
            messages,
            size,
            acks,
            linger_ms,
            idempotent,
            keys,
        } => {
            let settings = ProducerSettings {
                acks: &acks,
                linger_ms,
                idempotent,
            };
            produce(&to.bootstrap, &to.topic, messages, size, keys, &settings)
        }
        Mode::Consume {
            to,
            partitions,
            messages,
            isolation,
            client_rack,
        } => consume(
            &to.bootstrap,
            &to.topic,
            partitions,
            messages,
            &isolation,
            &client_rack,
        ),
        Mode::Transactions {
            to,
            partitions,
            transactions: count,
            per_transaction,
            size,
        } => transactions(
            &to.bootstrap,
            &to.topic,
            partitions,
            count,
            per_transaction,
            size,
        ),
        Mode::Latency {
            to,
            rate,
            seconds,
            size,
            acks,
        } => latency(&to.bootstrap, &to.topic, rate, seconds, size, &acks),
        Mode::Loopback { megabytes } => loopback(megabytes),
        Mode::Fsync { dir, seconds } => fsync(&dir, seconds),
        Mode::AclDecisions { bindings } => acl_decisions(&bindings),
        Mode::Startup { sluice, runs } => startup(&sluice, runs),
        Mode::Cluster {
            sluice,
            starts,
            creates,
            kills,
        } => cluster::run(&sluice, starts, creates, kills),
        Mode::GroupJoin { to, consumers } => group_join(&to.bootstrap, &to.topic, consumers),
        Mode::GroupConsume { to, messages } => group_consume(&to.bootstrap, &to.topic, messages),
        Mode::CommitLatency { to, commits } => commit_latency(&to.bootstrap, &to.topic, commits),
        Mode::GroupMember { to, group } => group_member(&to.bootstrap, &group, &to.topic),
        Mode::CreateTopic {
            to,
            partitions,
            replication,
            configs,
        } => {
            let configs: Vec<(&str, &str)> = configs
                .iter()
                .map(|c| c.split_once('=').expect("a config is key=value"))
                .collect();
            sluice_compat::create_replicated_topic(
                &to.bootstrap,
                &to.topic,
                partitions,
                replication,
                &configs,
            )
        }
        Mode::ReplicaFailover {
            sluice,
            kills,
            pauses,
        } => cluster::replica_failover(&sluice, kills, pauses),
        Mode::CoordinatorFailover { sluice, kills } => {
            cluster::coordinator_failover(&sluice, kills)
        }
    }
}

/// Counts delivery reports; failures are fatal for a benchmark.
struct Counting {
    delivered: Arc<AtomicU64>,
    failed: Arc<AtomicU64>,
    sent_at: Option<Arc<std::sync::Mutex<Histogram<u64>>>>,
}

impl ClientContext for Counting {}

/// librdkafka's log lines on stderr, stamped with the wall clock (to line up
/// with the brokers' logs); rdkafka hands them to the `log` crate otherwise.
struct StderrLog {
    /// Whether to print at all (asked for with `SLUICE_LOADGEN_CLIENT_DEBUG`).
    enabled: bool,
}

impl ClientContext for StderrLog {
    fn log(&self, level: rdkafka::config::RDKafkaLogLevel, fac: &str, message: &str) {
        if !self.enabled {
            return;
        }
        let since_epoch = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap_or_default();
        eprintln!(
            "{}.{:06} {level:?} {fac} {message}",
            since_epoch.as_secs(),
            since_epoch.subsec_micros()
        );
    }
}

impl ProducerContext for Counting {
    type DeliveryOpaque = Box<Instant>;

    fn delivery(&self, result: &DeliveryResult<'_>, sent: Self::DeliveryOpaque) {
        match result {
            Ok(_) => {
                self.delivered.fetch_add(1, Ordering::Relaxed);
                if let Some(histogram) = &self.sent_at {
                    let micros = sent.elapsed().as_micros() as u64;
                    let _ = histogram.lock().expect("histogram").record(micros.max(1));
                }
            }
            Err(_) => {
                self.failed.fetch_add(1, Ordering::Relaxed);
            }
        }
    }
}

/// How a benchmark producer is configured.
struct ProducerSettings<'a> {
    acks: &'a str,
    linger_ms: u32,
    idempotent: bool,
}

fn threaded_producer(
    bootstrap: &str,
    settings: &ProducerSettings<'_>,
    extra: &[(&str, &str)],
    histogram: Option<Arc<std::sync::Mutex<Histogram<u64>>>>,
) -> (ThreadedProducer<Counting>, Arc<AtomicU64>, Arc<AtomicU64>) {
    let delivered = Arc::new(AtomicU64::new(0));
    let failed = Arc::new(AtomicU64::new(0));
    let context = Counting {
        delivered: Arc::clone(&delivered),
        failed: Arc::clone(&failed),
        sent_at: histogram,
    };
    let mut config = rdkafka::ClientConfig::new();
    config
        .set("bootstrap.servers", bootstrap)
        .set("acks", settings.acks)
        .set("linger.ms", settings.linger_ms.to_string())
        .set("enable.idempotence", settings.idempotent.to_string())
        .set("queue.buffering.max.messages", "1000000")
        .set("queue.buffering.max.kbytes", "1048576");
    for (key, value) in extra {
        config.set(*key, *value);
    }
    let producer = config.create_with_context(context).expect("producer");
    (producer, delivered, failed)
}

fn produce(
    bootstrap: &str,
    topic: &str,
    messages: u64,
    size: usize,
    keys: u64,
    settings: &ProducerSettings<'_>,
) {
    let (producer, delivered, failed) = threaded_producer(bootstrap, settings, &[], None);
    let payload = vec![b'x'; size];
    let started = Instant::now();
    for n in 0..messages {
        let key = (keys > 0).then(|| format!("key-{}", n % keys));
        let mut record =
            BaseRecord::with_opaque_to(topic, Box::new(Instant::now())).payload(&payload[..]);
        if let Some(key) = &key {
            record = record.key(key.as_bytes());
        }
        loop {
            match producer.send::<[u8], [u8]>(record) {
                Ok(()) => break,
                Err((_, returned)) => {
                    record = returned;
                    std::thread::sleep(Duration::from_micros(200));
                }
            }
        }
    }
    producer.flush(Duration::from_secs(120)).expect("flush");
    let elapsed = started.elapsed().as_secs_f64();
    assert_eq!(failed.load(Ordering::Relaxed), 0, "deliveries failed");
    let done = delivered.load(Ordering::Relaxed) as f64;
    println!("msgs_per_s={:.0}", done / elapsed);
    println!("mb_per_s={:.1}", done * size as f64 / elapsed / 1e6);
}

fn consume(
    bootstrap: &str,
    topic: &str,
    partitions: i32,
    messages: u64,
    isolation: &str,
    client_rack: &str,
) {
    let mut settings = vec![
        ("fetch.max.bytes", "52428800"),
        ("max.partition.fetch.bytes", "10485760"),
        ("isolation.level", isolation),
    ];
    if !client_rack.is_empty() {
        settings.push(("client.rack", client_rack));
    }
    let consumer: BaseConsumer = consumer(bootstrap, &settings);
    let mut assignment = TopicPartitionList::new();
    for partition in 0..partitions {
        assignment
            .add_partition_offset(topic, partition, Offset::Beginning)
            .expect("tpl");
    }
    consumer.assign(&assignment).expect("assign");
    consume_timed(&consumer, messages);
}

fn transactions(
    bootstrap: &str,
    topic: &str,
    partitions: i32,
    count: u64,
    per_transaction: u64,
    size: usize,
) {
    let settings = ProducerSettings {
        acks: "all",
        linger_ms: 0,
        idempotent: true,
    };
    let id = format!("loadgen-{}", std::process::id());
    let (producer, delivered, failed) =
        threaded_producer(bootstrap, &settings, &[("transactional.id", &id)], None);
    let timeout = Duration::from_secs(60);
    producer
        .init_transactions(timeout)
        .expect("init_transactions");
    let payload = vec![b'x'; size];
    let started = Instant::now();
    for started_txns in 0..count {
        producer.begin_transaction().expect("begin");
        for i in 0..per_transaction {
            let partition = (i % partitions.max(1) as u64) as i32;
            let record = BaseRecord::with_opaque_to(topic, Box::new(Instant::now()))
                .partition(partition)
                .payload(&payload[..]);
            producer
                .send::<[u8], [u8]>(record)
                .map_err(|(error, _)| error)
                .expect("enqueue");
        }
        // Wait for the delivery reports here: rdkafka's commit_transaction flushes
        // by polling in steps of up to 100 ms, which would time the client's
        // wrapper rather than the broker.
        let sent = (started_txns + 1) * per_transaction;
        while delivered.load(Ordering::Relaxed) + failed.load(Ordering::Relaxed) < sent {
            std::thread::sleep(Duration::from_micros(20));
        }
        producer.commit_transaction(timeout).expect("commit");
    }
    let elapsed = started.elapsed().as_secs_f64();
    assert_eq!(failed.load(Ordering::Relaxed), 0, "deliveries failed");
    println!("transactions_per_s={:.0}", count as f64 / elapsed);
    println!(
        "msgs_per_s={:.0}",
        delivered.load(Ordering::Relaxed) as f64 / elapsed
    );
}

fn latency(bootstrap: &str, topic: &str, rate: u64, seconds: u64, size: usize, acks: &str) {
    let histogram = Arc::new(std::sync::Mutex::new(
        Histogram::<u64>::new(3).expect("histogram"),
    ));
    let settings = ProducerSettings {
        acks,
        linger_ms: 0,
        idempotent: false,
    };
    let (producer, _, failed) =
        threaded_producer(bootstrap, &settings, &[], Some(Arc::clone(&histogram)));
    let payload = vec![b'x'; size];
    let interval = Duration::from_nanos(1_000_000_000 / rate.max(1));
    let started = Instant::now();
    let mut next = started;
    for _ in 0..rate * seconds {
        let now = Instant::now();
        if next > now {
            std::thread::sleep(next - now);
        }
        next += interval;
        let record =
            BaseRecord::with_opaque_to(topic, Box::new(Instant::now())).payload(&payload[..]);
        producer
            .send::<[u8], [u8]>(record)
            .map_err(|(e, _)| e)
            .expect("send");
    }
    producer.flush(Duration::from_secs(60)).expect("flush");
    assert_eq!(failed.load(Ordering::Relaxed), 0, "deliveries failed");
    let histogram = histogram.lock().expect("histogram");
    println!("p50_us={}", histogram.value_at_quantile(0.50));
    println!("p99_us={}", histogram.value_at_quantile(0.99));
    println!("p999_us={}", histogram.value_at_quantile(0.999));
    println!("max_us={}", histogram.max());
}

fn loopback(megabytes: u64) {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    let addr = listener.local_addr().expect("addr");
    let total = megabytes * 1024 * 1024;
    let receiver = std::thread::spawn(move || {
        let (mut stream, _) = listener.accept().expect("accept");
        let mut buf = vec![0u8; 256 * 1024];
        let mut received = 0u64;
        while received < total {
            let n = stream.read(&mut buf).expect("read");
            assert!(n > 0, "sender closed early");
            received += n as u64;
        }
    });
    let mut stream = TcpStream::connect(addr).expect("connect");
    let chunk = vec![0u8; 256 * 1024];
    let started = Instant::now();
    let mut sent = 0u64;
    while sent < total {
        stream.write_all(&chunk).expect("write");
        sent += chunk.len() as u64;
    }
    receiver.join().expect("receiver");
    println!(
        "loopback_mb_per_s={:.0}",
        total as f64 / started.elapsed().as_secs_f64() / 1e6
    );
}

fn acl_decisions(counts: &[usize]) {
    use sluice::security::acl::{
        AclBinding, Acls, Authorizer, Operation, PatternType, Permission, ResourceType,
    };
    use sluice::security::Principal;
    let authorizer = Authorizer::Standard {
        super_users: Default::default(),
        allow_everyone_if_no_acl_found: false,
    };
    let principal = Principal::user("app");
    let host = std::net::IpAddr::from([10, 0, 0, 7]);
    for &count in counts {
        let mut acls = Acls::default();
        for i in 0..count {
            acls.insert(
                uuid::Uuid::new_v4(),
                AclBinding {
                    resource_type: ResourceType::Topic,
                    // Prefixes of 6 to 13 characters, so that a decision
                    // looks up several prefix lengths.
                    resource_name: format!("team-{}-{i}", i % 8),
                    pattern_type: if i % 2 == 0 {
                        PatternType::Literal
                    } else {
                        PatternType::Prefixed
                    },
                    principal: format!("User:user-{}", i % 100),
                    host: "*".to_string(),
                    operation: Operation::Write,
                    permission: Permission::Allow,
                },
            );
        }
        acls.insert(
            uuid::Uuid::new_v4(),
            AclBinding {
                resource_type: ResourceType::Topic,
                resource_name: "orders".to_string(),
                pattern_type: PatternType::Literal,
                principal: "User:app".to_string(),
                host: "*".to_string(),
                operation: Operation::Write,
                permission: Permission::Allow,
            },
        );
        let started = Instant::now();
        let mut decisions = 0u64;
        let mut allowed = 0u64;
        while started.elapsed() < Duration::from_millis(500) {
            for _ in 0..1000 {
                if authorizer.authorize(
                    &acls,
                    &principal,
                    host,
                    Operation::Write,
                    ResourceType::Topic,
                    "orders",
                ) {
                    allowed += 1;
                }
                decisions += 1;
            }
        }
        assert_eq!(allowed, decisions, "every decision allows");
        let seconds = started.elapsed().as_secs_f64();
        println!(
            "bindings={count} decisions_per_s={:.0} ns_per_decision={:.0}",
            decisions as f64 / seconds,
            seconds * 1e9 / decisions as f64
        );
    }
}

fn fsync(dir: &std::path::Path, seconds: u64) {
    let path = dir.join("fsync-probe");
    let mut file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&path)
        .expect("open");
    let block = vec![0u8; 4096];
    let started = Instant::now();
    let mut count = 0u64;
    while started.elapsed() < Duration::from_secs(seconds) {
        file.write_all(&block).expect("write");
        file.sync_data().expect("fdatasync");
        count += 1;
    }
    let _ = std::fs::remove_file(&path);
    println!(
        "fsyncs_per_s={:.0}",
        count as f64 / started.elapsed().as_secs_f64()
    );
}

fn startup(sluice: &std::path::Path, runs: usize) {
    let mut micros = Vec::with_capacity(runs);
    for _ in 0..runs {
        let dir = tempfile::tempdir().expect("temp dir");
        let port = free_port();
        let addr = format!("127.0.0.1:{port}");
        let started = Instant::now();
        let mut child = Command::new(sluice)
            .args(["serve", "--listen", &addr, "--data-dir"])
            .arg(dir.path())
            .env("SLUICE_LOG_LEVEL", "warn")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn");
        while !answers_api_versions(&addr) {
            assert!(
                started.elapsed() < Duration::from_secs(10),
                "broker did not start"
            );
            std::thread::sleep(Duration::from_micros(100));
        }
        micros.push(started.elapsed().as_micros() as u64);
        let _ = child.kill();
        let _ = child.wait();
    }
    micros.sort_unstable();
    println!(
        "startup_median_ms={:.2}",
        micros[micros.len() / 2] as f64 / 1000.0
    );
    println!("startup_min_ms={:.2}", micros[0] as f64 / 1000.0);
}

mod cluster {
    //! The controller quorum's figures and a replicated partition's failover, on
    //! real processes on loopback.

    use std::path::Path;
    use std::time::{Duration, Instant};

    use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
    use rdkafka::client::DefaultClientContext;
    use rdkafka::config::ClientConfig;
    use rdkafka::consumer::Consumer;
    use rdkafka::producer::{FutureProducer, FutureRecord};
    use sluice_compat::cluster::{start_together, ClusterNode};
    use sluice_compat::{free_port, BrokerProcess};

    /// How long one CreateTopics may take before the run is called broken.
    const CREATE_TIMEOUT_MS: u64 = 60_000;

    pub fn run(sluice: &Path, starts: usize, creates: usize, kills: usize) {
        let mut quorum_ms = Vec::new();
        let mut restart_ms = Vec::new();
        for _ in 0..starts.max(1) {
            let root = tempfile::tempdir().expect("temp dir");
            let started = Instant::now();
            let mut nodes = voters(sluice, root.path());
            quorum_ms.push(started.elapsed().as_secs_f64() * 1000.0);
            let follower = (0..3)
                .find(|i| leader_of(&nodes[*i]) != Some(nodes[*i].node_id))
                .expect("a follower");
            nodes[follower].kill9();
            let started = Instant::now();
            nodes[follower].spawn();
            nodes[follower].wait_serving();
            restart_ms.push(started.elapsed().as_secs_f64() * 1000.0);
        }
        println!("quorum_start_median_ms={:.0}", median(&mut quorum_ms));
        println!("voter_restart_median_ms={:.0}", median(&mut restart_ms));

        let single_root = tempfile::tempdir().expect("temp dir");
        let single = BrokerProcess::start(&single_root.path().join("single"), &[]);
        let mut one = create_latencies(&single.bootstrap(), "one", creates);
        println!(
            "create_topics_one_node_p50_ms={:.2}",
            percentile(&mut one, 0.5)
        );
        println!(
            "create_topics_one_node_p99_ms={:.2}",
            percentile(&mut one, 0.99)
        );
        drop(single);

        let root = tempfile::tempdir().expect("temp dir");
        let mut nodes = voters(sluice, root.path());
        let leader = leader_index(&nodes);
        let follower = (leader + 1) % 3;
        let mut via_leader = create_latencies(&nodes[leader].bootstrap(), "leader", creates);
        let mut via_follower = create_latencies(&nodes[follower].bootstrap(), "follower", creates);
        println!(
            "create_topics_three_nodes_leader_p50_ms={:.2}",
            percentile(&mut via_leader, 0.5)
        );
        println!(
            "create_topics_three_nodes_leader_p99_ms={:.2}",
            percentile(&mut via_leader, 0.99)
        );
        println!(
            "create_topics_three_nodes_follower_p50_ms={:.2}",
            percentile(&mut via_follower, 0.5)
        );
        println!(
            "create_topics_three_nodes_follower_p99_ms={:.2}",
            percentile(&mut via_follower, 0.99)
        );

        let mut failover_ms = Vec::new();
        for kill in 0..kills {
            let leader = leader_index(&nodes);
            let survivor = (leader + 1) % 3;
            let admin = admin(&nodes[survivor].bootstrap());
            let started = Instant::now();
            nodes[leader].kill9();
            create(&admin, &format!("after-kill-{kill}"));
            failover_ms.push(started.elapsed().as_secs_f64() * 1000.0);
            nodes[leader].spawn();
            nodes[leader].wait_serving();
        }
        print_ms("failover", &mut failover_ms, P50_P99_MAX);
    }

    /// The partitions of the replica failover topic: enough that one of them
    /// is led by the metadata leader and one by another node, whichever kill
    /// is next.
    const FAILOVER_PARTITIONS: i32 = 6;
    /// One kill in this many is of the node that also leads the metadata raft
    /// (three voters: a third of the nodes).
    const METADATA_LEADER_KILL_EVERY: usize = 3;
    /// How many group or transactional ids are tried for one whose coordinator
    /// is (or is not) the metadata leader.
    const COORDINATOR_ID_TRIES_MAX: usize = 500;

    /// How the leader is taken away.
    #[derive(Clone, Copy, PartialEq, Eq)]
    enum Fault {
        /// kill -9: its sockets closed by the kernel.
        Kill,
        /// SIGSTOP: silent, its connections open and unanswered.
        Pause,
        /// kill -9 of one of the partition's followers, not its leader.
        KillFollower,
    }

    /// One fault's figure.
    struct Outage {
        ms: f64,
        /// The victim also led the metadata raft.
        metadata_leader: bool,
    }

    /// See `Mode::ReplicaFailover`.
    pub fn replica_failover(sluice: &Path, kills: usize, pauses: usize) {
        let root = tempfile::tempdir().expect("temp dir");
        let (mut nodes, bootstrap) =
            voters_with_topic(sluice, root.path(), "failover", FAILOVER_PARTITIONS);
        wait_for_full_isr(&bootstrap, "failover");
        let mut config = ClientConfig::new();
        config
            .set("bootstrap.servers", &bootstrap)
            .set("acks", "all")
            .set("linger.ms", "0")
            .set("message.timeout.ms", "120000")
            .set("request.timeout.ms", "5000");
        // SLUICE_LOADGEN_CLIENT_DEBUG=<contexts> (librdkafka's `debug`, e.g.
        // `metadata,broker,msg`) shows where the client spends a failover.
        let debug = std::env::var("SLUICE_LOADGEN_CLIENT_DEBUG").ok();
        if let Some(contexts) = &debug {
            config
                .set("debug", contexts)
                .set_log_level(rdkafka::config::RDKafkaLogLevel::Debug);
        }
        let producer: FutureProducer<crate::StderrLog> = config
            .create_with_context(crate::StderrLog {
                enabled: debug.is_some(),
            })
            .expect("producer");
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("runtime");
        let send = |partition: i32, value: &str| {
            runtime
                .block_on(
                    producer.send(
                        FutureRecord::<str, str>::to("failover")
                            .partition(partition)
                            .payload(value),
                        Duration::from_secs(120),
                    ),
                )
                .map_err(|(error, _)| error)
                .expect("acks=all produce")
        };
        for partition in 0..FAILOVER_PARTITIONS {
            send(partition, "warm-up");
        }
        let pick = |_: usize, wanted: &dyn Fn(i32) -> bool| {
            let chosen = (0..FAILOVER_PARTITIONS)
                .find(|p| wanted(leader_of_partition(&bootstrap, "failover", *p)))
                .unwrap_or(0);
            (("failover".to_string(), chosen), chosen)
        };
        // First, while leadership is spread as created: a dead follower
        // holds acks=all back until it leaves the ISR.
        let mut follower_failover = leader_faults(
            &mut nodes,
            &bootstrap,
            Fault::KillFollower,
            pauses,
            pick,
            |kill, partition| {
                send(*partition, &format!("after-follower-kill-{kill}"));
            },
        );
        let mut failover = leader_faults(
            &mut nodes,
            &bootstrap,
            Fault::Kill,
            kills,
            pick,
            |kill, partition| {
                send(*partition, &format!("after-kill-{kill}"));
            },
        );
        print_outages("replica_failover", &mut failover, P50_P99_MAX);
        if pauses == 0 {
            return;
        }
        print_outages("replica_follower_kill", &mut follower_failover, P50_P99_MAX);
        // SIGSTOP: until every live node's Metadata names a new leader.
        let mut paused = leader_faults(
            &mut nodes,
            &bootstrap,
            Fault::Pause,
            pauses,
            pick,
            |_, _| {},
        );
        print_outages("replica_pause_new_leader", &mut paused, P50_P99_MAX);
    }

    /// See `Mode::CoordinatorFailover`.
    pub fn coordinator_failover(sluice: &Path, kills: usize) {
        use rdkafka::consumer::{BaseConsumer, CommitMode};
        use rdkafka::producer::Producer;
        use rdkafka::{Offset, TopicPartitionList};
        use sluice::internal_topics::{
            group_partition, txn_partition, OFFSETS_TOPIC_NAME, TRANSACTION_STATE_TOPIC_NAME,
        };

        let root = tempfile::tempdir().expect("temp dir");
        let (mut nodes, bootstrap) = voters_with_topic(sluice, root.path(), "group-failover", 1);
        let next = std::cell::Cell::new(0);
        // Commits until one succeeds: the member is in a stable generation on
        // whichever broker coordinates the group. As an application commits
        // what it consumed, only a member holding its assignment commits: a
        // commit sent while librdkafka joins carries a member id or generation
        // the join is about to replace, and its UNKNOWN_MEMBER_ID (Kafka's
        // answer too) makes librdkafka drop the generation it has just joined.
        let commit_once = |member: &BaseConsumer| loop {
            let _ = member.poll(Duration::from_millis(50));
            let assigned = member
                .assignment()
                .is_ok_and(|partitions| partitions.count() > 0);
            if !assigned {
                continue;
            }
            next.set(next.get() + 1);
            let mut offsets = TopicPartitionList::new();
            offsets
                .add_partition_offset("group-failover", 0, Offset::Offset(next.get()))
                .expect("offsets");
            if member.commit(&offsets, CommitMode::Sync).is_ok() {
                return;
            }
        };
        let new_member = |group: &str| -> BaseConsumer {
            let member: BaseConsumer = ClientConfig::new()
                .set("bootstrap.servers", &bootstrap)
                .set("group.id", group)
                .set("enable.auto.commit", "false")
                .set("auto.offset.reset", "earliest")
                .create()
                .expect("consumer");
            member.subscribe(&["group-failover"]).expect("subscribe");
            member
        };
        commit_once(&new_member("warm-up"));
        wait_for_full_isr(&bootstrap, OFFSETS_TOPIC_NAME);
        // Each kill has its own group, one whose coordinator is (or is not)
        // the metadata leader, stable before the kill.
        let mut group_failover = leader_faults(
            &mut nodes,
            &bootstrap,
            Fault::Kill,
            kills,
            |kill, wanted| {
                let group = coordinated_id(
                    &bootstrap,
                    &format!("failover-group-{kill}"),
                    (OFFSETS_TOPIC_NAME, group_partition),
                    wanted,
                );
                let member = new_member(&group);
                commit_once(&member);
                (
                    (OFFSETS_TOPIC_NAME.to_string(), group_partition(&group)),
                    member,
                )
            },
            |_, member| commit_once(member),
        );
        print_outages(
            "group_coordinator_failover",
            &mut group_failover,
            P50_P99_MAX,
        );

        // The transaction coordinator: kill -9 of the leader of the id's
        // `__transaction_state` partition to the next committed transaction.
        let new_producer = |transactional_id: &str| -> FutureProducer {
            let producer: FutureProducer = ClientConfig::new()
                .set("bootstrap.servers", &bootstrap)
                .set("transactional.id", transactional_id)
                .set("transaction.timeout.ms", "60000")
                .create()
                .expect("transactional producer");
            producer
                .init_transactions(Duration::from_secs(120))
                .expect("init_transactions");
            producer
        };
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("runtime");
        let commit_one = |producer: &FutureProducer| -> bool {
            let wait = Duration::from_secs(30);
            if producer.begin_transaction().is_err() {
                return false;
            }
            let record = FutureRecord::<str, str>::to("group-failover")
                .partition(0)
                .payload("txn");
            if runtime.block_on(producer.send(record, wait)).is_err() {
                let _ = producer.abort_transaction(wait);
                return false;
            }
            match producer.commit_transaction(wait) {
                Ok(()) => true,
                Err(_) => {
                    let _ = producer.abort_transaction(wait);
                    false
                }
            }
        };
        assert!(
            commit_one(&new_producer("warm-up")),
            "the first transaction commits"
        );
        wait_for_full_isr(&bootstrap, TRANSACTION_STATE_TOPIC_NAME);
        let mut txn_failover = leader_faults(
            &mut nodes,
            &bootstrap,
            Fault::Kill,
            kills,
            |kill, wanted| {
                let id = coordinated_id(
                    &bootstrap,
                    &format!("failover-txn-{kill}"),
                    (TRANSACTION_STATE_TOPIC_NAME, txn_partition),
                    wanted,
                );
                let producer = new_producer(&id);
                assert!(commit_one(&producer), "a transaction before the kill");
                (
                    (TRANSACTION_STATE_TOPIC_NAME.to_string(), txn_partition(&id)),
                    (id, producer),
                )
            },
            |_, (id, producer)| {
                let mut failures = 0;
                while !commit_one(producer) {
                    failures += 1;
                    if failures % 3 == 0 {
                        // A fatal error on the old instance: a new one fences it.
                        *producer = new_producer(id);
                    }
                }
            },
        );
        print_outages("txn_coordinator_failover", &mut txn_failover, P50_P99_MAX);
    }

    /// A group or transactional id starting with `prefix` whose coordinator
    /// (the leader of its `partition_of` partition of `topic`) passes
    /// `wanted`, among `COORDINATOR_ID_TRIES_MAX` tried; `prefix` itself if
    /// none does.
    fn coordinated_id(
        bootstrap: &str,
        prefix: &str,
        (topic, partition_of): (&str, fn(&str) -> i32),
        wanted: &dyn Fn(i32) -> bool,
    ) -> String {
        (0..COORDINATOR_ID_TRIES_MAX)
            .map(|i| format!("{prefix}-{i}"))
            .find(|id| wanted(leader_of_partition(bootstrap, topic, partition_of(id))))
            .unwrap_or_else(|| prefix.to_string())
    }

    /// `faults` times: `pick` chooses a partition (and prepares what `recover`
    /// needs) whose leader passes the filter it is given, which wants the node
    /// that also leads the metadata raft for one fault in
    /// `METADATA_LEADER_KILL_EVERY` and another node for the rest; that leader
    /// is killed (or paused), and the time until `recover` returns (or, for a
    /// pause, until every live node names a new leader) is its figure. The
    /// node is started again (or resumed) and the partition's ISR is full
    /// again before the next fault.
    fn leader_faults<S>(
        nodes: &mut [ClusterNode],
        bootstrap: &str,
        fault: Fault,
        faults: usize,
        mut pick: impl FnMut(usize, &dyn Fn(i32) -> bool) -> ((String, i32), S),
        mut recover: impl FnMut(usize, &mut S),
    ) -> Vec<Outage> {
        (0..faults)
            .map(|kill| {
                let metadata_leader = nodes[leader_index(nodes)].node_id;
                let want_metadata_leader = kill % METADATA_LEADER_KILL_EVERY == 0;
                let wanted = |node: i32| (node == metadata_leader) == want_metadata_leader;
                // A follower victim: the partition is chosen by its leader
                // being what the victim must not be, so that a follower is.
                let unwanted = |node: i32| !wanted(node);
                let by_leader: &dyn Fn(i32) -> bool = match fault {
                    Fault::Kill | Fault::Pause => &wanted,
                    Fault::KillFollower => &unwanted,
                };
                let ((topic, partition), mut state) = pick(kill, by_leader);
                let leader = leader_of_partition(bootstrap, &topic, partition);
                let target = match fault {
                    Fault::Kill | Fault::Pause => leader,
                    Fault::KillFollower => {
                        let followers: Vec<i32> = nodes
                            .iter()
                            .map(|n| n.node_id)
                            .filter(|id| *id != leader)
                            .collect();
                        followers
                            .iter()
                            .copied()
                            .find(|id| wanted(*id))
                            .unwrap_or(followers[0])
                    }
                };
                let victim = nodes
                    .iter()
                    .position(|n| n.node_id == target)
                    .expect("the victim is a node");
                let started = Instant::now();
                match fault {
                    Fault::Kill | Fault::KillFollower => {
                        nodes[victim].kill9();
                        recover(kill, &mut state);
                    }
                    Fault::Pause => {
                        nodes[victim].signal(true);
                        let live: Vec<String> = nodes
                            .iter()
                            .filter(|n| n.node_id != leader)
                            .map(ClusterNode::bootstrap)
                            .collect();
                        while !live.iter().all(|address| {
                            leader_seen_by(address, &topic, partition)
                                .is_some_and(|seen| seen >= 0 && seen != leader)
                        }) {
                            std::thread::sleep(Duration::from_millis(20));
                        }
                    }
                }
                let elapsed_ms = started.elapsed().as_secs_f64() * 1000.0;
                let metadata_leader = target == metadata_leader;
                let (what, role, done) = match fault {
                    Fault::Kill => ("kill", "leader", "killed"),
                    Fault::Pause => ("pause", "leader", "paused"),
                    Fault::KillFollower => ("follower kill", "follower", "killed"),
                };
                eprintln!(
                    "{what} {kill}: node {target} ({role} of {topic}-{partition}{}) {done}, recovered after {elapsed_ms:.0} ms",
                    if metadata_leader { " and leader of the metadata raft" } else { "" },
                );
                match fault {
                    Fault::Kill | Fault::KillFollower => {
                        nodes[victim].spawn();
                        nodes[victim].wait_serving();
                    }
                    Fault::Pause => nodes[victim].signal(false),
                }
                wait_for_full_isr(bootstrap, &topic);
                Outage {
                    ms: elapsed_ms,
                    metadata_leader,
                }
            })
            .collect()
    }

    /// Prints `print_ms` of every outage, then of those of the metadata leader
    /// (`{name}_metadata_leader_...`), and how many those were.
    fn print_outages(name: &str, outages: &mut [Outage], percentiles: &[(&str, f64)]) {
        let mut all: Vec<f64> = outages.iter().map(|o| o.ms).collect();
        print_ms(name, &mut all, percentiles);
        let mut of_leader: Vec<f64> = outages
            .iter()
            .filter(|o| o.metadata_leader)
            .map(|o| o.ms)
            .collect();
        println!("{name}_metadata_leader_count={}", of_leader.len());
        if !of_leader.is_empty() {
            print_ms(&format!("{name}_metadata_leader"), &mut of_leader, P50_MAX);
        }
    }

    /// The leader of `topic`'s `partition` in the Metadata answer of the node
    /// at `address` alone (none when it does not answer within a second),
    /// over a raw request: a client would ask whichever node it likes.
    fn leader_seen_by(address: &str, topic: &str, partition: i32) -> Option<i32> {
        use bytes::BufMut;
        use kafka_protocol::messages::metadata_request::MetadataRequestTopic;
        use kafka_protocol::messages::{
            ApiKey, MetadataRequest, MetadataResponse, RequestHeader, ResponseHeader, TopicName,
        };
        use kafka_protocol::protocol::{Decodable, Encodable, StrBytes};
        use std::io::{Read, Write};
        use std::net::TcpStream;
        const VERSION: i16 = 9;
        let header = RequestHeader::default()
            .with_request_api_key(ApiKey::Metadata as i16)
            .with_request_api_version(VERSION)
            .with_correlation_id(1)
            .with_client_id(Some(StrBytes::from_static_str("loadgen")));
        let request =
            MetadataRequest::default().with_topics(Some(vec![MetadataRequestTopic::default()
                .with_name(Some(TopicName(StrBytes::from_string(topic.to_string()))))]));
        let mut body = bytes::BytesMut::new();
        header
            .encode(&mut body, ApiKey::Metadata.request_header_version(VERSION))
            .ok()?;
        request.encode(&mut body, VERSION).ok()?;
        let mut frame = bytes::BytesMut::new();
        frame.put_i32(i32::try_from(body.len()).ok()?);
        frame.put_slice(&body);
        let wait = Duration::from_secs(1);
        let address = address.parse().ok()?;
        let mut stream = TcpStream::connect_timeout(&address, wait).ok()?;
        stream.set_read_timeout(Some(wait)).ok()?;
        stream.write_all(&frame).ok()?;
        let mut length = [0u8; 4];
        stream.read_exact(&mut length).ok()?;
        let mut answer = vec![0u8; usize::try_from(i32::from_be_bytes(length)).ok()?];
        stream.read_exact(&mut answer).ok()?;
        let mut answer = bytes::Bytes::from(answer);
        ResponseHeader::decode(
            &mut answer,
            ApiKey::Metadata.response_header_version(VERSION),
        )
        .ok()?;
        let response = MetadataResponse::decode(&mut answer, VERSION).ok()?;
        response
            .topics
            .iter()
            .flat_map(|t| t.partitions.iter())
            .find(|p| p.partition_index == partition)
            .map(|p| p.leader_id.0)
    }

    /// The median and the largest of a run's figures.
    const P50_MAX: &[(&str, f64)] = &[("p50", 0.5), ("max", 1.0)];
    /// The median, the 99th percentile and the largest of a run's figures.
    const P50_P99_MAX: &[(&str, f64)] = &[("p50", 0.5), ("p99", 0.99), ("max", 1.0)];

    /// Prints `{name}_{label}_ms=` each percentile of `values_ms`, in whole ms,
    /// one a line (scripts/bench.sh reads these lines).
    fn print_ms(name: &str, values_ms: &mut [f64], percentiles: &[(&str, f64)]) {
        for (label, p) in percentiles {
            println!("{name}_{label}_ms={:.0}", percentile(values_ms, *p));
        }
    }

    fn leader_of_partition(bootstrap: &str, topic: &str, partition: i32) -> i32 {
        let metadata = sluice_compat::consumer(bootstrap, &[])
            .fetch_metadata(Some(topic), Duration::from_millis(CREATE_TIMEOUT_MS))
            .expect("metadata");
        metadata.topics()[0]
            .partitions()
            .iter()
            .find(|p| p.id() == partition)
            .map_or(-1, |p| p.leader())
    }

    fn wait_for_full_isr(bootstrap: &str, topic: &str) {
        let deadline = Instant::now() + Duration::from_millis(CREATE_TIMEOUT_MS * 2);
        loop {
            let metadata = sluice_compat::consumer(bootstrap, &[])
                .fetch_metadata(Some(topic), Duration::from_millis(CREATE_TIMEOUT_MS))
                .expect("metadata");
            let full = metadata.topics()[0]
                .partitions()
                .iter()
                .all(|p| p.leader() >= 0 && p.isr().len() == 3);
            if full {
                return;
            }
            assert!(Instant::now() < deadline, "the ISR of {topic} never healed");
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// Three voters with a metrics endpoint each, serving.
    fn voters(sluice: &Path, root: &Path) -> Vec<ClusterNode> {
        let nodes: Vec<ClusterNode> = (1..=3)
            .map(|id| {
                let metrics = format!("127.0.0.1:{}", free_port());
                let mut node = ClusterNode::new(id, root, "", &["--metrics-listen", &metrics]);
                node.binary = sluice.to_path_buf();
                // SLUICE_LOADGEN_NODE_LOGS=<dir> keeps each node's log there, for a
                // figure that needs explaining (its level: SLUICE_TEST_NODE_LOG).
                if let Some(dir) = std::env::var_os("SLUICE_LOADGEN_NODE_LOGS") {
                    node.log = Some(std::path::PathBuf::from(dir).join(format!("node-{id}.log")));
                }
                node
            })
            .collect();
        start_together(nodes)
    }

    /// Three voters serving, their bootstrap list, and `topic` created on them
    /// with `partitions` partitions on all three (min.insync.replicas=2).
    fn voters_with_topic(
        sluice: &Path,
        root: &Path,
        topic: &str,
        partitions: i32,
    ) -> (Vec<ClusterNode>, String) {
        let nodes = voters(sluice, root);
        let bootstrap: String = nodes
            .iter()
            .map(ClusterNode::bootstrap)
            .collect::<Vec<_>>()
            .join(",");
        sluice_compat::create_replicated_topic(
            &bootstrap,
            topic,
            partitions,
            3,
            &[("min.insync.replicas", "2")],
        );
        (nodes, bootstrap)
    }

    /// The metadata leader `node` knows, from its metrics endpoint.
    fn leader_of(node: &ClusterNode) -> Option<i32> {
        let args = node.extra_args();
        let address = args
            .iter()
            .position(|a| a == "--metrics-listen")
            .map(|i| args[i + 1].clone())?;
        sluice_compat::cluster::controller_leader_at(&address)
    }

    /// The index in `nodes` of the node every live node agrees leads.
    fn leader_index(nodes: &[ClusterNode]) -> usize {
        let deadline = Instant::now() + Duration::from_millis(CREATE_TIMEOUT_MS);
        loop {
            let seen: Vec<Option<i32>> = nodes.iter().map(leader_of).collect();
            if let Some(Some(leader)) = seen.first() {
                if seen.iter().all(|s| *s == Some(*leader)) {
                    if let Some(index) = nodes.iter().position(|n| n.node_id == *leader) {
                        return index;
                    }
                }
            }
            assert!(
                Instant::now() < deadline,
                "no agreed metadata leader: {seen:?}"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    fn admin(bootstrap: &str) -> AdminClient<DefaultClientContext> {
        ClientConfig::new()
            .set("bootstrap.servers", bootstrap)
            .create()
            .expect("admin client")
    }

    fn create(admin: &AdminClient<DefaultClientContext>, topic: &str) {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("runtime");
        let options = AdminOptions::new()
            .operation_timeout(Some(Duration::from_millis(CREATE_TIMEOUT_MS)))
            .request_timeout(Some(Duration::from_millis(CREATE_TIMEOUT_MS)));
        let new_topic = NewTopic::new(topic, 1, TopicReplication::Fixed(1));
        let results = runtime
            .block_on(admin.create_topics([&new_topic], &options))
            .expect("create topics");
        for result in results {
            result.unwrap_or_else(|(name, code)| panic!("creating {name}: {code}"));
        }
    }

    /// The latency of `count` CreateTopics one after another, in ms.
    fn create_latencies(bootstrap: &str, prefix: &str, count: usize) -> Vec<f64> {
        let admin = admin(bootstrap);
        create(&admin, &format!("{prefix}-warm-up"));
        (0..count)
            .map(|i| {
                let started = Instant::now();
                create(&admin, &format!("{prefix}-{i}"));
                started.elapsed().as_secs_f64() * 1000.0
            })
            .collect()
    }

    fn median(values: &mut [f64]) -> f64 {
        percentile(values, 0.5)
    }

    fn percentile(values: &mut [f64], p: f64) -> f64 {
        values.sort_by(f64::total_cmp);
        if values.is_empty() {
            return 0.0;
        }
        let rank = ((values.len() as f64 * p).ceil() as usize).clamp(1, values.len());
        values[rank - 1]
    }
}

/// True when `addr` accepts a connection and answers an ApiVersions v0 request.
fn answers_api_versions(addr: &str) -> bool {
    let Ok(mut stream) = TcpStream::connect(addr) else {
        return false;
    };
    // frame length 11: api key 18, version 0, correlation id 1, client id "b"
    let request = [0, 0, 0, 11, 0, 18, 0, 0, 0, 0, 0, 1, 0, 1, b'b'];
    let mut prefix = [0u8; 4];
    stream.write_all(&request).is_ok() && stream.read_exact(&mut prefix).is_ok()
}

fn group_member(bootstrap: &str, group: &str, topic: &str) {
    let consumer: BaseConsumer = consumer(
        bootstrap,
        &[
            ("group.id", group),
            ("session.timeout.ms", "6000"),
            ("heartbeat.interval.ms", "500"),
        ],
    );
    consumer.subscribe(&[topic]).expect("subscribe");
    loop {
        let _ = consumer.poll(Duration::from_millis(100));
    }
}

fn group_join(bootstrap: &str, topic: &str, count: usize) {
    let group = format!("join-{}", std::process::id());
    let started = Instant::now();
    let members: Vec<BaseConsumer> = (0..count)
        .map(|_| {
            let member: BaseConsumer = consumer(bootstrap, &[("group.id", &group)]);
            member.subscribe(&[topic]).expect("subscribe");
            member
        })
        .collect();
    loop {
        for member in &members {
            let _ = member.poll(Duration::from_millis(5));
        }
        let all_assigned = members
            .iter()
            .all(|m| m.assignment().map(|a| a.count() > 0).unwrap_or(false));
        if all_assigned {
            break;
        }
        assert!(
            started.elapsed() < Duration::from_secs(120),
            "group never settled"
        );
    }
    println!("all_assigned_ms={}", started.elapsed().as_millis());
}

fn group_consume(bootstrap: &str, topic: &str, messages: u64) {
    let group = format!("consume-{}", std::process::id());
    let member: BaseConsumer = consumer(
        bootstrap,
        &[
            ("group.id", &group),
            ("fetch.max.bytes", "52428800"),
            ("max.partition.fetch.bytes", "10485760"),
        ],
    );
    member.subscribe(&[topic]).expect("subscribe");
    consume_timed(&member, messages);
}

fn commit_latency(bootstrap: &str, topic: &str, commits: u64) {
    let group = format!("commit-{}", std::process::id());
    let member: BaseConsumer = consumer(bootstrap, &[("group.id", &group)]);
    let mut histogram = Histogram::<u64>::new(3).expect("histogram");
    for i in 0..commits {
        let mut offsets = TopicPartitionList::new();
        offsets
            .add_partition_offset(topic, 0, Offset::Offset(i as i64))
            .expect("tpl");
        let started = Instant::now();
        member
            .commit(&offsets, rdkafka::consumer::CommitMode::Sync)
            .expect("commit");
        histogram
            .record(started.elapsed().as_micros() as u64)
            .expect("record");
    }
    println!("p50_us={}", histogram.value_at_quantile(0.50));
    println!("p99_us={}", histogram.value_at_quantile(0.99));
}

/// Polls until `messages` arrived and prints the rate, timed from the first
/// message: getting partitions (assignment, a group join) is measured elsewhere.
fn consume_timed(consumer: &BaseConsumer, messages: u64) {
    let polling = Instant::now();
    let mut started = None;
    let (mut count, mut bytes) = (0u64, 0u64);
    while count < messages {
        if let Some(Ok(message)) = consumer.poll(Duration::from_millis(100)) {
            started.get_or_insert_with(Instant::now);
            count += 1;
            bytes += message.payload_len() as u64;
        }
        assert!(
            polling.elapsed() < Duration::from_secs(300),
            "consume stalled at {count}"
        );
    }
    let elapsed = started.unwrap_or(polling).elapsed().as_secs_f64();
    println!("msgs_per_s={:.0}", count as f64 / elapsed);
    println!("mb_per_s={:.1}", bytes as f64 / elapsed / 1e6);
}
