//! Tens of thousands of partitions on three real nodes, gated (it takes
//! minutes and gigabytes): `SLUICE_SCALE_PARTITIONS=30000` asks for that many
//! partitions with replication factor 3 in one CreateTopics, in topics of
//! `TOPIC_PARTITIONS`, with the nodes at the machine's hard open file limit.
//! The topics that fit every node's partition budget are created and the
//! rest refused with POLICY_VIOLATION (no node goes down, as all three once
//! did); every topic created then takes a record with acks=all and gives it
//! back, and a node killed with kill -9 comes back with all of its replicas
//! and serves them. It prints how long each step took and each node's
//! resident memory and descriptors. Without the variable it does nothing.

use std::process::Command;
use std::time::{Duration, Instant};

use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
use rdkafka::client::DefaultClientContext;
use rdkafka::config::ClientConfig;
use rdkafka::error::RDKafkaErrorCode;
use rdkafka::producer::FutureRecord;
use sluice_compat::cluster::{start_voters, ClusterNode};
use sluice_compat::{producer, read_back, CLIENT_WAIT_MS};

/// Partitions per topic.
const TOPIC_PARTITIONS: usize = 1_000;
/// How long the cluster may take to create, load or serve them all, in ms.
const SCALE_STEP_WAIT_MS: u64 = 1_800_000;

fn node_stats(node: &ClusterNode) -> (u64, usize) {
    let Some(pid) = node.pid() else {
        return (0, 0);
    };
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    let rss_kib = status
        .lines()
        .find_map(|line| line.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .unwrap_or(0);
    let descriptors = std::fs::read_dir(format!("/proc/{pid}/fd")).map_or(0, |d| d.count());
    (rss_kib / 1024, descriptors)
}

fn report(nodes: &[ClusterNode], step: &str, started: Instant) {
    let stats: Vec<String> = nodes
        .iter()
        .map(|node| {
            let (rss_mib, descriptors) = node_stats(node);
            format!("node {}: {rss_mib} MiB, {descriptors} fds", node.node_id)
        })
        .collect();
    eprintln!("{step}: {:?}; {}", started.elapsed(), stats.join("; "));
}

/// Waits until every node in `nodes` holds at least `descriptors` files.
fn wait_for_descriptors(nodes: &[ClusterNode], descriptors: usize, what: &str) {
    let deadline = Instant::now() + Duration::from_millis(SCALE_STEP_WAIT_MS);
    while nodes.iter().any(|node| node_stats(node).1 < descriptors) {
        assert!(
            Instant::now() < deadline,
            "{what}: never held {descriptors} files"
        );
        std::thread::sleep(Duration::from_millis(500));
    }
}

fn produce_to_every_topic(bootstrap: &str, topics: &[String], value: &str) {
    let producer = producer(bootstrap, &[("acks", "all")]);
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    for topic in topics {
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
            .unwrap_or_else(|error| panic!("{topic}: {error}"));
    }
}

#[test]
fn tens_of_thousands_of_partitions_on_three_nodes_are_created_served_and_reloaded() {
    let Some(partitions) = std::env::var("SLUICE_SCALE_PARTITIONS")
        .ok()
        .and_then(|v| v.parse::<usize>().ok())
    else {
        eprintln!("SLUICE_SCALE_PARTITIONS is not set: skipped");
        return;
    };
    // The nodes raise their soft limit to this hard one themselves.
    let hard = Command::new("prlimit")
        .args(["--nofile", "--output=HARD", "--noheadings"])
        .arg(format!("--pid={}", std::process::id()))
        .output()
        .expect("prlimit");
    eprintln!(
        "open file limit (hard): {}",
        String::from_utf8_lossy(&hard.stdout).trim()
    );
    let dir = tempfile::tempdir().expect("tempdir");
    let started = Instant::now();
    let mut nodes = start_voters(dir.path(), &[]);
    report(&nodes, "started", started);
    let bootstrap = nodes[0].bootstrap();
    let topics: Vec<String> = (0..partitions.div_ceil(TOPIC_PARTITIONS))
        .map(|i| format!("scale-{i}"))
        .collect();
    let admin: AdminClient<DefaultClientContext> = ClientConfig::new()
        .set("bootstrap.servers", &bootstrap)
        .create()
        .expect("admin client");
    let new: Vec<NewTopic> = topics
        .iter()
        .map(|t| NewTopic::new(t, TOPIC_PARTITIONS as i32, TopicReplication::Fixed(3)))
        .collect();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let options =
        AdminOptions::new().operation_timeout(Some(Duration::from_millis(SCALE_STEP_WAIT_MS)));
    let started = Instant::now();
    let mut created = Vec::new();
    for result in runtime
        .block_on(admin.create_topics(new.iter(), &options))
        .expect("create topics")
    {
        match result {
            Ok(topic) => created.push(topic),
            Err((topic, code)) => assert_eq!(
                code,
                RDKafkaErrorCode::PolicyViolation,
                "{topic}: refused otherwise than for the partition budget"
            ),
        }
    }
    report(&nodes, "CreateTopics answered", started);
    eprintln!(
        "{} of {} topics of {TOPIC_PARTITIONS} partitions created, the rest refused",
        created.len(),
        topics.len()
    );
    assert!(!created.is_empty(), "no topic fits the partition budget");
    let topics = created;
    let replicas = topics.len() * TOPIC_PARTITIONS;
    wait_for_descriptors(&nodes, replicas, "creating");
    report(&nodes, "every log created", started);

    let started = Instant::now();
    produce_to_every_topic(&bootstrap, &topics, "created");
    for topic in &topics {
        assert_eq!(read_back(&bootstrap, topic, 1, 1).len(), 1, "{topic}");
    }
    report(&nodes, "a record through every topic", started);

    let started = Instant::now();
    nodes[1].kill9();
    nodes[1].spawn();
    nodes[1].wait_serving();
    wait_for_descriptors(&nodes[1..2], replicas, "reloading");
    report(&nodes, "node 2 reloaded after kill -9", started);
    let started = Instant::now();
    produce_to_every_topic(&nodes[1].bootstrap(), &topics, "reloaded");
    report(&nodes, "a record to every topic after the reload", started);
}
