//! Three real nodes whose every connection between them is secured:
//! followers, marker writers and KIP-890's verification over an inter-broker
//! listener of mutual TLS (SSL with client certificates required), or of
//! SASL_SSL with the brokers logging in to one another with SCRAM-SHA-512;
//! the metadata quorum over mutual TLS in both. Each cluster replicates an
//! acks=all topic with min.insync.replicas 2 (answered only once a follower
//! fetched over the secured listener), loses its partition leader to kill
//! -9, keeps taking transactional writes, takes the node back, and serves
//! every committed record. The SASL cluster's sessions last two seconds, and
//! the brokers renew theirs on their connections (KIP-368). (Clients use a PLAINTEXT listener here: the
//! librdkafka these tests link has no TLS; the Python clients' tests cover
//! clients over SSL and SASL.)

use std::path::Path;
use std::time::{Duration, Instant};

use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
use rdkafka::client::DefaultClientContext;
use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::producer::{FutureProducer, FutureRecord, Producer};
use sluice_compat::cluster::{start_together, voter_list, ClusterNode};
use sluice_compat::{assign_from_start, consume, free_port, payload_text, CLIENT_WAIT_MS};

use crate::tls::{write, Pki};

const TOPIC: &str = "secured";
const RECORDS_PER_PHASE: usize = 50;
/// `connections.max.reauth.ms` of the SASL cluster.
const SESSION_MS: u64 = 2_000;
/// The log filter that shows each SASL login and each connection's end.
const LOGINS_LOGGED: &str =
    "warn,sluice::protocol::handlers::sasl_authenticate=debug,sluice::server::connection=debug";

/// Short sessions, so that a killed node is fenced within the test's patience.
const FAST_SESSIONS: [&str; 4] = [
    "--broker-session-timeout-ms",
    "3000",
    "--broker-heartbeat-interval-ms",
    "500",
];

/// How the Kafka listeners are secured.
#[derive(Clone, Copy)]
enum Secured {
    MutualTls,
    SaslSsl,
}

/// Three nodes, each with its own certificate from one CA, and the client
/// settings that reach them.
fn secured_cluster(root: &Path, secured: Secured) -> (Vec<ClusterNode>, Vec<(String, String)>) {
    let pki = Pki::new();
    let ca = write(root, "ca.pem", &pki.ca_pem);
    let client: Vec<(String, String)> = Vec::new();
    let nodes: Vec<ClusterNode> = (1..=3)
        .map(|id| {
            let (cert, key) = pki.issue("127.0.0.1");
            let keystore = write(root, &format!("broker-{id}.pem"), &format!("{cert}{key}"));
            let mut args: Vec<String> = vec![
                "--inter-broker-listener".into(),
                "INTERNAL".into(),
                "--listener-security-protocol-map".into(),
                match secured {
                    Secured::MutualTls => "INTERNAL:SSL",
                    Secured::SaslSsl => "INTERNAL:SASL_SSL",
                }
                .into(),
                "--ssl-keystore-location".into(),
                path(&keystore),
                "--ssl-truststore-location".into(),
                path(&ca),
                "--controller-listener-security-protocol".into(),
                "SSL".into(),
            ];
            args.extend(FAST_SESSIONS.iter().map(|s| s.to_string()));
            match secured {
                Secured::MutualTls => {
                    args.extend(["--ssl-client-auth".into(), "required".into()]);
                }
                Secured::SaslSsl => args.extend([
                    // Sessions of two seconds: followers must log in again on
                    // their connections (KIP-368), or be cut off.
                    "--connections-max-reauth-ms".into(),
                    SESSION_MS.to_string(),
                    "--log-level".into(),
                    LOGINS_LOGGED.into(),
                    "--add-scram".into(),
                    "SCRAM-SHA-512=[name=broker,password=broker-secret]".into(),
                    "--inter-broker-sasl-mechanism".into(),
                    "SCRAM-SHA-512".into(),
                    "--inter-broker-sasl-username".into(),
                    "broker".into(),
                    "--inter-broker-sasl-password".into(),
                    "broker-secret".into(),
                ]),
            }
            let args: Vec<&str> = args.iter().map(String::as_str).collect();
            let mut node = ClusterNode::new(id, root, "", &args);
            node.extra_listeners = vec![format!("INTERNAL://127.0.0.1:{}", free_port())];
            node.log = Some(root.join(format!("node-{id}.log")));
            node
        })
        .collect();
    let nodes = start_together(nodes);
    assert!(!voter_list(&nodes).is_empty());
    (nodes, client)
}

fn path(path: &Path) -> String {
    path.display().to_string()
}

fn config(bootstrap: &str, settings: &[(String, String)]) -> ClientConfig {
    let mut config = ClientConfig::new();
    config.set("bootstrap.servers", bootstrap);
    for (key, value) in settings {
        config.set(key, value);
    }
    config
}

fn bootstraps(nodes: &[ClusterNode]) -> String {
    nodes
        .iter()
        .map(ClusterNode::bootstrap)
        .collect::<Vec<_>>()
        .join(",")
}

fn leader_of(bootstrap: &str, settings: &[(String, String)]) -> i32 {
    let consumer: BaseConsumer = config(bootstrap, settings).create().expect("consumer");
    let metadata = consumer
        .fetch_metadata(Some(TOPIC), Duration::from_millis(CLIENT_WAIT_MS))
        .expect("metadata");
    metadata.topics()[0].partitions()[0].leader()
}

/// `count` records acknowledged with acks=all, numbered from `first`.
fn produce(producer: &FutureProducer, first: usize, count: usize) {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    for i in first..first + count {
        let payload = format!("record-{i}");
        runtime
            .block_on(
                producer.send(
                    FutureRecord::<(), str>::to(TOPIC)
                        .partition(0)
                        .payload(&payload),
                    Duration::from_millis(CLIENT_WAIT_MS),
                ),
            )
            .map_err(|(error, _)| error)
            .unwrap_or_else(|error| panic!("{payload}: {error}"));
    }
}

fn replicates_and_survives_kill_9_of_the_leader(secured: Secured) {
    let dir = tempfile::tempdir().expect("tempdir");
    let (mut nodes, client) = secured_cluster(dir.path(), secured);
    let bootstrap = bootstraps(&nodes);
    let admin: AdminClient<DefaultClientContext> =
        config(&bootstrap, &client).create().expect("admin");
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let topic = NewTopic::new(TOPIC, 1, TopicReplication::Fixed(3)).set("min.insync.replicas", "2");
    let created = runtime
        .block_on(admin.create_topics(
            [&topic],
            &AdminOptions::new().operation_timeout(Some(Duration::from_millis(CLIENT_WAIT_MS))),
        ))
        .expect("create topics");
    assert!(created[0].is_ok(), "{created:?}");

    let mut producer_config = config(&bootstrap, &client);
    producer_config
        .set("acks", "all")
        .set("enable.idempotence", "true")
        .set("transactional.id", "secured-txn")
        .set("message.timeout.ms", "60000");
    let producer: FutureProducer = producer_config.create().expect("producer");
    let wait = Duration::from_millis(CLIENT_WAIT_MS);
    producer.init_transactions(wait).expect("init transactions");
    // Followers fetch over the secured inter-broker listener, or acks=all
    // with min.insync.replicas 2 would never be answered.
    producer.begin_transaction().expect("begin");
    produce(&producer, 0, RECORDS_PER_PHASE);
    producer.commit_transaction(wait).expect("commit");

    let leader = leader_of(&bootstrap, &client);
    let killed = nodes
        .iter()
        .position(|n| n.node_id == leader)
        .expect("the leader is a node");
    nodes[killed].kill9();
    let deadline = Instant::now() + Duration::from_millis(CLIENT_WAIT_MS * 2);
    let survivors: Vec<&ClusterNode> = nodes.iter().filter(|n| n.node_id != leader).collect();
    let survivors = survivors
        .iter()
        .map(|n| n.bootstrap())
        .collect::<Vec<_>>()
        .join(",");
    while leader_of(&survivors, &client) == leader {
        assert!(
            Instant::now() < deadline,
            "the partition never got a new leader"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    producer.begin_transaction().expect("begin");
    produce(&producer, RECORDS_PER_PHASE, RECORDS_PER_PHASE);
    producer.commit_transaction(wait).expect("commit");

    nodes[killed].spawn();
    nodes[killed].wait_serving();
    let mut consumer_config = config(&bootstrap, &client);
    consumer_config
        .set("group.id", "secured-reader")
        .set("enable.auto.commit", "false")
        .set("isolation.level", "read_committed");
    let consumer: BaseConsumer = consumer_config.create().expect("consumer");
    assign_from_start(&consumer, TOPIC, 1);
    let read = consume(&consumer, 2 * RECORDS_PER_PHASE);
    let payloads: Vec<String> = read.iter().map(payload_text).collect();
    let expected: Vec<String> = (0..2 * RECORDS_PER_PHASE)
        .map(|i| format!("record-{i}"))
        .collect();
    assert_eq!(payloads, expected);
    producer.flush(wait).expect("flush");
    if let Secured::SaslSsl = secured {
        // The brokers logged in as `broker`, and renewed sessions on their
        // connections rather than being cut off when they ended.
        let logs: String = (1..=3)
            .map(|id| {
                std::fs::read_to_string(dir.path().join(format!("node-{id}.log")))
                    .unwrap_or_default()
            })
            .collect();
        assert!(
            !logs.contains("expired without re-authentication"),
            "a broker's session ended without a renewal"
        );
        let mut logins: Vec<&str> = logs
            .lines()
            .filter(|l| l.contains("SASL authentication succeeded") && l.contains("User:broker"))
            .filter_map(|l| l.split("peer=").nth(1)?.split_whitespace().next())
            .collect();
        let total = logins.len();
        logins.sort_unstable();
        logins.dedup();
        assert!(
            total > logins.len(),
            "no connection between brokers logged in twice ({total} logins)"
        );
    }
}

#[test]
fn a_cluster_over_mutual_tls_replicates_and_survives_kill_9_of_the_leader() {
    replicates_and_survives_kill_9_of_the_leader(Secured::MutualTls);
}

#[test]
fn a_cluster_over_sasl_ssl_with_scram_between_brokers_survives_kill_9_of_the_leader() {
    replicates_and_survives_kill_9_of_the_leader(Secured::SaslSsl);
}
