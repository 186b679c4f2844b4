//! Three real nodes on loopback forming one cluster: topics created through any
//! node are seen by every node; the cluster keeps creating and describing
//! topics through the loss (kill -9) of any one node, the metadata leader among
//! them; a restarted node catches up; a fourth, non-voting node joins and is
//! listed; a node whose data dir belongs to another cluster is refused.

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
use rdkafka::client::DefaultClientContext;
use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::metadata::Metadata;
use sluice_compat::cluster::{start_voters, voter_list, ClusterNode};
use sluice_compat::CLIENT_WAIT_MS;

/// Short sessions, so that a killed node is fenced within the test's patience;
/// the timing of fencing itself is never asserted.
const FAST_SESSIONS: &[&str] = &[
    "--broker-session-timeout-ms",
    "3000",
    "--broker-heartbeat-interval-ms",
    "500",
];

fn metadata(bootstrap: &str) -> Metadata {
    let consumer: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .create()
        .expect("consumer");
    consumer
        .fetch_metadata(None, Duration::from_millis(CLIENT_WAIT_MS))
        .expect("metadata")
}

/// Waits until `check` holds of the metadata `bootstrap` answers.
fn eventually(bootstrap: &str, what: &str, check: impl Fn(&Metadata) -> bool) -> Metadata {
    let deadline = Instant::now() + Duration::from_millis(CLIENT_WAIT_MS * 2);
    loop {
        let metadata = metadata(bootstrap);
        if check(&metadata) {
            return metadata;
        }
        assert!(Instant::now() < deadline, "{bootstrap}: never saw {what}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn broker_ids(metadata: &Metadata) -> BTreeSet<i32> {
    metadata.brokers().iter().map(|b| b.id()).collect()
}

fn topic_names(metadata: &Metadata) -> BTreeSet<String> {
    metadata
        .topics()
        .iter()
        .filter(|t| t.error().is_none())
        .map(|t| t.name().to_string())
        .collect()
}

fn create(bootstrap: &str, topic: &str, partitions: i32, replication: i32) {
    let admin: AdminClient<DefaultClientContext> = ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .create()
        .expect("admin client");
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let topic = NewTopic::new(topic, partitions, TopicReplication::Fixed(replication));
    let options =
        AdminOptions::new().operation_timeout(Some(Duration::from_millis(CLIENT_WAIT_MS)));
    let results = runtime
        .block_on(admin.create_topics([&topic], &options))
        .expect("create topics");
    for result in results {
        result.unwrap_or_else(|(name, code)| panic!("creating {name} through {bootstrap}: {code}"));
    }
}

#[test]
fn cluster_three_nodes_serve_metadata_and_admin_through_the_loss_of_any_one() {
    let root = tempfile::tempdir().expect("tempdir");
    let mut nodes = start_voters(root.path(), FAST_SESSIONS);
    let all: BTreeSet<i32> = [1, 2, 3].into();

    // Every node names every broker.
    for node in &nodes {
        eventually(&node.bootstrap(), "all three brokers", |m| {
            broker_ids(m) == all
        });
    }

    // Topics created through each node are seen by every node, RF 3 placed on
    // three brokers with every replica in the ISR.
    for node in &nodes {
        create(
            &node.bootstrap(),
            &format!("through-{}", node.node_id),
            3,
            3,
        );
    }
    let created: BTreeSet<String> = (1..=3).map(|id| format!("through-{id}")).collect();
    for node in &nodes {
        let metadata = eventually(&node.bootstrap(), "the created topics", |m| {
            created.is_subset(&topic_names(m))
        });
        for topic in metadata
            .topics()
            .iter()
            .filter(|t| created.contains(t.name()))
        {
            assert_eq!(topic.partitions().len(), 3);
            let mut leaders = BTreeSet::new();
            for partition in topic.partitions() {
                let replicas: BTreeSet<i32> = partition.replicas().iter().copied().collect();
                assert_eq!(replicas, all, "{} {}", topic.name(), partition.id());
                let isr: BTreeSet<i32> = partition.isr().iter().copied().collect();
                assert_eq!(isr, all, "{} {}", topic.name(), partition.id());
                leaders.insert(partition.leader());
            }
            assert_eq!(leaders, all, "leadership of {} is spread", topic.name());
        }
    }

    // Kill each node in turn (so the metadata leader among them): the other two
    // fence it, keep creating and describing topics, and it catches up when back.
    for victim in 0..3 {
        let victim_id = nodes[victim].node_id;
        nodes[victim].kill9();
        let survivors: Vec<usize> = (0..3).filter(|i| *i != victim).collect();
        let alive: BTreeSet<i32> = all.iter().copied().filter(|id| *id != victim_id).collect();
        for &i in &survivors {
            let topic = format!("while-{victim_id}-down-via-{}", nodes[i].node_id);
            create(&nodes[i].bootstrap(), &topic, 2, 1);
        }
        for &i in &survivors {
            let metadata = eventually(&nodes[i].bootstrap(), "the dead node fenced", |m| {
                broker_ids(m) == alive
            });
            // Its partitions have no leader: their ISR is it alone.
            for topic in metadata
                .topics()
                .iter()
                .filter(|t| created.contains(t.name()))
            {
                for partition in topic.partitions() {
                    assert_ne!(partition.leader(), victim_id);
                }
            }
        }
        nodes[victim].spawn();
        nodes[victim].wait_serving();
        for node in &nodes {
            eventually(&node.bootstrap(), "every topic and broker", |m| {
                let names = topic_names(m);
                broker_ids(m) == all
                    && (1..=3)
                        .filter(|id| *id <= victim_id as usize as i32)
                        .all(|down| {
                            (1..=3)
                                .filter(|via| *via != down)
                                .all(|via| names.contains(&format!("while-{down}-down-via-{via}")))
                        })
            });
        }
    }

    // A fourth node, not a voter, joins as a broker and is listed everywhere.
    let voters = voter_list(&nodes);
    let mut fourth = ClusterNode::new(4, root.path(), &voters, FAST_SESSIONS);
    fourth.spawn();
    fourth.wait_serving();
    let four: BTreeSet<i32> = [1, 2, 3, 4].into();
    for node in nodes.iter().chain(std::iter::once(&fourth)) {
        eventually(&node.bootstrap(), "four brokers", |m| broker_ids(m) == four);
    }
    create(&fourth.bootstrap(), "through-4", 4, 4);
    eventually(
        &nodes[0].bootstrap(),
        "the topic made through node 4",
        |m| topic_names(m).contains("through-4"),
    );

    // A node whose data dir belongs to another cluster is refused at start.
    nodes[2].kill9();
    let meta = nodes[2].data_dir.join("controller").join("meta.properties");
    let original = std::fs::read_to_string(&meta).expect("meta.properties");
    let foreign: String = original
        .lines()
        .map(|line| {
            if line.starts_with("cluster.id=") {
                "cluster.id=AnotherClusterIdAAAAAAA".to_string()
            } else {
                line.to_string()
            }
        })
        .collect::<Vec<_>>()
        .join("\n");
    assert_ne!(foreign, original.trim_end());
    std::fs::write(&meta, foreign).expect("write meta.properties");
    nodes[2].spawn();
    let status = nodes[2].wait_for_exit().expect("a foreign node must stop");
    assert!(!status.success());
    // With its own data dir back it rejoins.
    std::fs::write(&meta, original).expect("restore meta.properties");
    nodes[2].spawn();
    nodes[2].wait_serving();
    eventually(&nodes[2].bootstrap(), "four brokers", |m| {
        broker_ids(m) == four
    });
}

/// Sessions far longer than the test's patience: a node fenced here was fenced
/// on evidence that its process is gone, never by its session.
const ENDLESS_SESSIONS: &[&str] = &[
    "--broker-session-timeout-ms",
    "600000",
    "--broker-heartbeat-interval-ms",
    "500",
];

/// Failover: a node killed with kill -9 is fenced on hard
/// evidence, its connections closed and its controller listener refusing,
/// not after its session: whether it followed or led the metadata raft (a
/// new leader acts on the hint it kept). Sessions here are ten minutes long.
#[test]
fn cluster_a_killed_node_is_fenced_without_waiting_out_its_session() {
    let root = tempfile::tempdir().expect("tempdir");
    let mut nodes = start_voters(root.path(), ENDLESS_SESSIONS);
    let all: BTreeSet<i32> = [1, 2, 3].into();
    for node in &nodes {
        eventually(&node.bootstrap(), "all three brokers", |m| {
            broker_ids(m) == all
        });
    }
    create(&nodes[0].bootstrap(), "fenced-fast", 3, 3);
    for victim in 0..3 {
        let victim_id = nodes[victim].node_id;
        nodes[victim].kill9();
        let alive: BTreeSet<i32> = all.iter().copied().filter(|id| *id != victim_id).collect();
        for i in (0..3).filter(|i| *i != victim) {
            let metadata = eventually(&nodes[i].bootstrap(), "the dead node fenced", |m| {
                broker_ids(m) == alive
            });
            let topic = metadata
                .topics()
                .iter()
                .find(|t| t.name() == "fenced-fast")
                .expect("the topic");
            for partition in topic.partitions() {
                assert_ne!(partition.leader(), victim_id);
                assert!(!partition.isr().contains(&victim_id));
            }
        }
        nodes[victim].spawn();
        nodes[victim].wait_serving();
        for node in &nodes {
            eventually(&node.bootstrap(), "every broker back", |m| {
                broker_ids(m) == all
            });
        }
    }
}
