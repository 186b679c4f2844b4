//! Controller tests at its boundary: open, propose, restart (clean and crashed), plus
//! openraft's storage suite against the log store and state machine.

use std::collections::BTreeMap;
use std::io;
use std::path::Path;
use std::time::Instant;

use openraft::testing::{StoreBuilder, Suite};
use openraft::StorageIOError;

use super::*;
use crate::controller::raft_types::StorageError;
use crate::store::model_tests::copy_dir;

const NODE_ID: i32 = 1;

fn config(dir: &Path) -> ControllerConfig {
    ControllerConfig {
        dir: dir.to_path_buf(),
        node_id: NODE_ID,
        host: "localhost".to_string(),
        port: 9092,
        rack: None,
        listeners: Vec::new(),
        quorum: None,
        raft_store: None,
        previous_broker_epoch: BrokerEpoch::NONE,
        partition_budget: None,
    }
}

async fn open(dir: &Path) -> Controller {
    match Controller::open(config(dir)).await {
        Ok(controller) => controller,
        Err(e) => panic!("open {}: {e}", dir.display()),
    }
}

async fn propose(controller: &Controller, cmd: MetadataCommand) -> CommandOutcome {
    match controller.propose(cmd).await {
        Ok(outcome) => outcome,
        Err(e) => panic!("propose: {e}"),
    }
}

fn create_topic(name: &str, partitions: i32) -> MetadataCommand {
    MetadataCommand::CreateTopic {
        name: name.to_string(),
        topic_id: uuid::Uuid::new_v4(),
        partitions,
        replication_factor: 1,
        configs: BTreeMap::from([("retention.ms".to_string(), "60000".to_string())]),
        assignments: Vec::new(),
    }
}

/// Topics with ids, partitions and configs, plus broker configs and producer ids.
async fn populate(controller: &Controller) {
    for (name, partitions) in [("orders", 3), ("payments", 1), ("doomed", 2)] {
        let outcome = propose(controller, create_topic(name, partitions)).await;
        assert!(
            matches!(outcome, CommandOutcome::TopicCreated { .. }),
            "{outcome:?}"
        );
    }
    let doomed = controller.image().topics["doomed"].topic_id;
    let outcome = propose(
        controller,
        MetadataCommand::DeleteTopic { topic_id: doomed },
    )
    .await;
    assert_eq!(outcome, CommandOutcome::Done);
    let grow = MetadataCommand::CreatePartitions {
        name: "payments".to_string(),
        total_count: 4,
    };
    assert_eq!(propose(controller, grow).await, CommandOutcome::Done);
    let alter = MetadataCommand::AlterTopicConfigs {
        name: "orders".to_string(),
        ops: vec![
            ConfigOp::Set {
                key: "segment.bytes".to_string(),
                value: "1048576".to_string(),
            },
            ConfigOp::Append {
                key: "cleanup.policy".to_string(),
                value: "compact".to_string(),
            },
        ],
        replace: false,
    };
    assert_eq!(propose(controller, alter).await, CommandOutcome::Done);
    let broker = MetadataCommand::AlterBrokerConfigs {
        ops: vec![ConfigOp::Set {
            key: "log.retention.ms".to_string(),
            value: "1000".to_string(),
        }],
        replace: false,
    };
    assert_eq!(propose(controller, broker).await, CommandOutcome::Done);
    let ids = propose(
        controller,
        MetadataCommand::AllocateProducerIds { count: 1000 },
    )
    .await;
    assert!(
        matches!(ids, CommandOutcome::ProducerIds { count: 1000, .. }),
        "{ids:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn open_sets_cluster_id_and_registers_broker() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let controller = open(tmp.path()).await;
    let image = controller.image();
    assert_eq!(image.cluster_id.len(), 22);
    assert_eq!(image.controller_id, NODE_ID);
    let registration = BrokerRegistration {
        epoch: image.brokers[&NODE_ID].epoch,
        ..BrokerRegistration::new(NODE_ID, "localhost", 9092, None)
    };
    assert!(
        registration.epoch > BrokerEpoch::new(0),
        "the epoch is the registration's log index"
    );
    assert_eq!(image.brokers, BTreeMap::from([(NODE_ID, registration)]));
    controller.shutdown().await.expect("shutdown");

    // Same registration: nothing proposed, same cluster. A changed port re-registers.
    let again = open(tmp.path()).await;
    assert_eq!(again.image().cluster_id, image.cluster_id);
    assert_eq!(again.image().last_applied_index, image.last_applied_index);
    again.shutdown().await.expect("shutdown");
    let moved = Controller::open(ControllerConfig {
        port: 19092,
        ..config(tmp.path())
    })
    .await
    .expect("open with a new port");
    assert_eq!(moved.image().brokers[&NODE_ID].port, 19092);
    assert_eq!(moved.image().cluster_id, image.cluster_id);
    moved.shutdown().await.expect("shutdown");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn restart_keeps_every_topic_id_partition_and_config() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let controller = open(tmp.path()).await;
    populate(&controller).await;
    let before = controller.image();
    assert_eq!(before.topics.len(), 2);
    assert_eq!(before.topics["payments"].partitions.len(), 4);
    controller.shutdown().await.expect("shutdown");
    assert!(matches!(
        controller.propose(create_topic("late", 1)).await,
        Err(ControllerError::ShuttingDown)
    ));

    let reopened = open(tmp.path()).await;
    assert_eq!(*reopened.image(), *before);
    reopened.shutdown().await.expect("shutdown");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn crash_keeps_everything_propose_returned_ok_for() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let live = tmp.path().join("live");
    let crashed = tmp.path().join("crashed");
    let controller = open(&live).await;
    populate(&controller).await;
    let before = controller.image();
    // What a killed process leaves: the files as written so far, with no shutdown and no
    // flush on close. The copy is taken while the controller is still running.
    copy_dir(&live, &crashed).expect("copy");
    drop(controller);

    let recovered = open(&crashed).await;
    let after = recovered.image();
    assert_eq!(after.cluster_id, before.cluster_id);
    assert_eq!(after.brokers, before.brokers);
    assert_eq!(after.topics, before.topics);
    assert_eq!(after.topic_names_by_id, before.topic_names_by_id);
    assert_eq!(after.broker_configs, before.broker_configs);
    assert_eq!(after.next_producer_id, before.next_producer_id);
    assert!(after.last_applied_index >= before.last_applied_index);
    recovered.shutdown().await.expect("shutdown");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_creates_of_one_name_give_one_success() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let controller = open(tmp.path()).await;
    let tasks: Vec<_> = (0..2)
        .map(|_| {
            let controller = controller.clone();
            tokio::spawn(async move { controller.propose(create_topic("race", 2)).await })
        })
        .collect();
    let mut created = 0;
    let mut exists = 0;
    for task in tasks {
        match task.await.expect("join").expect("propose") {
            CommandOutcome::TopicCreated { .. } => created += 1,
            CommandOutcome::Rejected(MetadataError::TopicAlreadyExists(name)) => {
                assert_eq!(name, "race");
                exists += 1;
            }
            other => panic!("unexpected {other:?}"),
        }
    }
    assert_eq!((created, exists), (1, 1));
    controller.shutdown().await.expect("shutdown");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn producer_id_blocks_never_overlap_across_restart() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let mut blocks = Vec::new();
    for _ in 0..3 {
        let controller = open(tmp.path()).await;
        for _ in 0..2 {
            match propose(
                &controller,
                MetadataCommand::AllocateProducerIds { count: 1000 },
            )
            .await
            {
                CommandOutcome::ProducerIds { first, count } => blocks.push(first..first + count),
                other => panic!("unexpected {other:?}"),
            }
        }
        controller.shutdown().await.expect("shutdown");
    }
    for (i, a) in blocks.iter().enumerate() {
        for b in &blocks[i + 1..] {
            assert!(a.end <= b.start, "{a:?} overlaps {b:?}");
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn subscribers_see_every_applied_change() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let controller = open(tmp.path()).await;
    let mut rx = controller.subscribe();
    rx.borrow_and_update();
    propose(&controller, create_topic("watched", 1)).await;
    assert!(rx.has_changed().expect("sender alive"));
    assert!(rx.borrow_and_update().topics.contains_key("watched"));
    controller.shutdown().await.expect("shutdown");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn restart_from_snapshot_after_purge() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let controller = open(tmp.path()).await;
    populate(&controller).await;
    let raft = &controller.inner.raft;
    raft.trigger().snapshot().await.expect("trigger snapshot");
    // Raft answers a proposer before it updates its metrics: wait on the image's index.
    let applied = controller.image().last_applied_index;
    let wait = || raft.wait(Some(Duration::from_secs(10)));
    wait()
        .metrics(
            |m| m.snapshot.map(|id| id.index) >= Some(applied),
            "snapshot built",
        )
        .await
        .expect("snapshot");
    raft.trigger().purge_log(applied).await.expect("purge");
    wait()
        .metrics(|m| m.purged.map(|id| id.index) == Some(applied), "purged")
        .await
        .expect("purged");
    // One more change after the snapshot, so the restart replays the log on top of it.
    propose(&controller, create_topic("after-snapshot", 1)).await;
    let before = controller.image();
    controller.shutdown().await.expect("shutdown");

    let reopened = open(tmp.path()).await;
    assert_eq!(*reopened.image(), *before);
    reopened.shutdown().await.expect("shutdown");
}

/// Prints how long `open` takes; run with `--nocapture` to see it. Not asserted: timing
/// depends on the machine, and the disk's fsync latency dominates a first start.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn open_time() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let started = Instant::now();
    let controller = open(tmp.path()).await;
    let empty = started.elapsed();
    for i in 0..5 {
        propose(&controller, create_topic(&format!("topic-{i}"), 3)).await;
    }
    controller.shutdown().await.expect("shutdown");
    let started = Instant::now();
    let reopened = open(tmp.path()).await;
    let with_topics = started.elapsed();
    eprintln!("Controller::open: empty dir {empty:?}, restart with 5 topics {with_topics:?}");
    reopened.shutdown().await.expect("shutdown");
}

/// Builds a log store and state machine on a fresh database in a temporary directory,
/// which the guard removes.
struct TempStoreBuilder;

impl StoreBuilder<TypeConfig, LogStore, StateMachineStore, tempfile::TempDir> for TempStoreBuilder {
    async fn build(
        &self,
    ) -> Result<(tempfile::TempDir, LogStore, StateMachineStore), StorageError> {
        let io_err = |e: io::Error| StorageIOError::write(&e);
        let dir = tempfile::tempdir().map_err(io_err)?;
        let (kv, _closed) = KvHandle::open(dir.path()).map_err(io_err)?;
        let (state_machine, _images) = StateMachineStore::open(Arc::clone(&kv)).map_err(io_err)?;
        let log_store = LogStore::open(kv).map_err(io_err)?;
        Ok((dir, log_store, state_machine))
    }
}

#[test]
fn openraft_storage_suite() {
    if let Err(e) = Suite::test_all(TempStoreBuilder) {
        panic!("openraft storage suite: {e}");
    }
}

fn quorum_config(voters: &str) -> QuorumConfig {
    QuorumConfig {
        listen: "127.0.0.1:0".to_string(),
        voters: crate::config::parse_voters(voters).expect("voters"),
        transport: Arc::new(crate::net::Tcp),
        net: crate::net::NetConfig::default(),
        election_timeout_ms: 1_000,
        broker_heartbeat_interval_ms: 2_000,
        broker_session_timeout_ms: 9_000,
    }
}

#[test]
fn a_cluster_data_dir_is_pinned_to_its_node_and_voters() {
    const VOTERS: &str = "1@127.0.0.1:9093,2@127.0.0.1:9193,3@127.0.0.1:9293";
    let tmp = tempfile::tempdir().expect("tempdir");
    let quorum = quorum_config(VOTERS);
    // The first start writes meta.properties; the same start again is accepted.
    let first = check_data_dir(&config(tmp.path()), &quorum).expect("a new data dir");
    assert_eq!((first.node_id, first.cluster_id.clone()), (NODE_ID, None));
    assert_eq!(
        check_data_dir(&config(tmp.path()), &quorum).expect("same"),
        first
    );

    let other_node = ControllerConfig {
        node_id: 2,
        ..config(tmp.path())
    };
    let error = check_data_dir(&other_node, &quorum).expect_err("another node id");
    assert!(
        error.to_string().contains("belongs to node 1, not 2"),
        "{error}"
    );

    let moved = quorum_config("1@127.0.0.1:9093,2@127.0.0.1:9193,4@127.0.0.1:9393");
    let error = check_data_dir(&config(tmp.path()), &moved).expect_err("other voters");
    assert!(error.to_string().contains("voters changed"), "{error}");

    // A single-node broker's data dir cannot become a cluster node's.
    let single = tempfile::tempdir().expect("tempdir");
    std::fs::create_dir_all(single.path().join(RAFT_DIR_NAME)).expect("raft dir");
    let error = check_data_dir(&config(single.path()), &quorum).expect_err("single node");
    assert!(error.to_string().contains("single-node broker"), "{error}");
}

/// A record newer than this node understands (as a newer node writes it; here
/// written straight into raft) stops applying, with an error that names the
/// record and the metadata.version it needs: nothing after it is applied,
/// nothing is skipped, and the node does not crash.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_record_newer_than_this_node_stops_applying_and_names_what_it_needs() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let controller = open(tmp.path()).await;
    propose(&controller, create_topic("before", 1)).await;
    let newer = command::MetadataRecord::Newer(serde_json::json!({
        "SplitTheAtom": { "metadata_version": 99, "how": "carefully" }
    }));
    let written = controller.inner.raft.client_write(newer).await;
    let error = written.expect_err("a node that cannot apply a record must not answer it");
    let said = error.to_string();
    assert!(
        said.contains("SplitTheAtom") && said.contains("metadata.version 99"),
        "{said}"
    );
    let applied = controller.image().last_applied_index;
    assert!(controller.propose(create_topic("after", 1)).await.is_err());
    assert_eq!(controller.image().last_applied_index, applied);
    assert!(controller.image().topics.contains_key("before"));
    assert!(!controller.image().topics.contains_key("after"));
    let _ = controller.shutdown().await;

    // Started again, it stops at the same record, and says so.
    let reopened = Controller::open(config(tmp.path())).await;
    let said = reopened
        .err()
        .map(|error| error.to_string())
        .unwrap_or_default();
    assert!(said.contains("SplitTheAtom"), "{said}");
}
