//! Consumer groups with default-configured librdkafka consumers: assignment,
//! take-over on leave and on death, commits that survive restarts, static
//! membership, cooperative rebalancing, max.poll.interval, and the group admin
//! calls.

use std::collections::BTreeSet;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, CommitMode, Consumer, ConsumerContext, Rebalance};
use rdkafka::message::Message;
use rdkafka::producer::FutureRecord;
use rdkafka::{ClientContext, Offset, TopicPartitionList};
use sluice_compat::*;

/// Counts rebalances a consumer goes through.
#[derive(Clone, Default)]
struct Rebalances(Arc<AtomicUsize>);

impl ClientContext for Rebalances {}

impl ConsumerContext for Rebalances {
    fn pre_rebalance(&self, _consumer: &BaseConsumer<Self>, rebalance: &Rebalance<'_>) {
        if matches!(rebalance, Rebalance::Revoke(_)) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }
}

type Member = BaseConsumer<Rebalances>;

fn member(
    bootstrap: &str,
    group: &str,
    topic: &str,
    extra: &[(&str, &str)],
) -> (Member, Rebalances) {
    let context = Rebalances::default();
    let mut config = ClientConfig::new();
    config
        .set("bootstrap.servers", bootstrap)
        .set("group.id", group)
        .set("auto.offset.reset", "earliest")
        .set("enable.auto.commit", "false")
        .set("session.timeout.ms", "6000")
        .set("heartbeat.interval.ms", "500");
    for (key, value) in extra {
        config.set(*key, *value);
    }
    let consumer: Member = config
        .create_with_context(context.clone())
        .expect("consumer");
    consumer.subscribe(&[topic]).expect("subscribe");
    (consumer, context)
}

fn assigned(consumer: &Member) -> BTreeSet<i32> {
    consumer
        .assignment()
        .map(|list| list.elements().iter().map(|e| e.partition()).collect())
        .unwrap_or_default()
}

/// One round of polling every member, recording what each received.
fn poll_all(members: &[&Member], seen: &mut Vec<(usize, i32, i64)>) {
    for (index, consumer) in members.iter().enumerate() {
        while let Some(result) = consumer.poll(Duration::from_millis(20)) {
            let message = result.expect("consumer error");
            seen.push((index, message.partition(), message.offset()));
        }
    }
}

/// Polls every member until each holds partitions, together they hold each
/// partition exactly once, and that stays so for a few rounds. Records every
/// message seen per member.
fn settle(
    members: &[&Member],
    partitions: i32,
    seen: &mut Vec<(usize, i32, i64)>,
) -> Vec<BTreeSet<i32>> {
    let deadline = Instant::now() + Duration::from_millis(CLIENT_WAIT_MS);
    let mut stable_rounds = 0;
    loop {
        poll_all(members, seen);
        let assignments: Vec<BTreeSet<i32>> = members.iter().map(|c| assigned(c)).collect();
        let total: usize = assignments.iter().map(BTreeSet::len).sum();
        let union: BTreeSet<i32> = assignments.iter().flatten().copied().collect();
        let everyone_has_some = assignments.iter().all(|set| !set.is_empty());
        let settled =
            everyone_has_some && total == partitions as usize && union.len() == partitions as usize;
        stable_rounds = if settled { stable_rounds + 1 } else { 0 };
        if stable_rounds >= 5 {
            return assignments;
        }
        assert!(
            Instant::now() < deadline,
            "group did not settle: {assignments:?}"
        );
    }
}

fn produce_to_every_partition(bootstrap: &str, topic: &str, partitions: i32, per_partition: usize) {
    let producer = producer(bootstrap, &[]);
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let futures: Vec<_> = (0..partitions)
        .flat_map(|p| (0..per_partition).map(move |i| (p, i)))
        .map(|(p, i)| {
            let payload = format!("{p}-{i}");
            producer
                .send_result(
                    FutureRecord::<str, str>::to(topic)
                        .partition(p)
                        .payload(&payload),
                )
                .map_err(|(e, _)| e)
                .expect("enqueue")
        })
        .collect();
    for future in futures {
        runtime
            .block_on(future)
            .expect("report")
            .expect("delivered");
    }
}

/// A group member in its own process, so it can die without leaving.
fn member_process(bootstrap: &str, group: &str, topic: &str) -> Child {
    Command::new(env!("CARGO_BIN_EXE_sluice-loadgen"))
        .args([
            "group-member",
            "--bootstrap",
            bootstrap,
            "--group",
            group,
            "--topic",
            topic,
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn group member")
}

#[test]
fn three_members_share_six_partitions_and_take_over_on_leave_and_death() {
    let broker = EmbeddedBroker::start();
    let bootstrap = broker.bootstrap();
    create_topic(&bootstrap, "shared", 6, &[]);
    produce_to_every_partition(&bootstrap, "shared", 6, 50);
    let (a, _) = member(&bootstrap, "g-share", "shared", &[]);
    let (b, _) = member(&bootstrap, "g-share", "shared", &[]);
    let (c, _) = member(&bootstrap, "g-share", "shared", &[]);
    let mut seen = Vec::new();
    let assignments = settle(&[&a, &b, &c], 6, &mut seen);
    assert!(
        assignments.iter().all(|set| set.len() == 2),
        "{assignments:?}"
    );

    // A clean leave: the other two take over at once (no session timeout).
    let left_at = Instant::now();
    drop(c);
    let assignments = settle(&[&a, &b], 6, &mut seen);
    println!("take-over after a clean leave: {:?}", left_at.elapsed());
    assert!(
        assignments.iter().all(|set| set.len() == 3),
        "{assignments:?}"
    );

    // A member that dies without leaving is removed after its session timeout.
    let mut doomed = member_process(&bootstrap, "g-share", "shared");
    let deadline = Instant::now() + Duration::from_millis(CLIENT_WAIT_MS);
    loop {
        poll_all(&[&a, &b], &mut seen);
        let (mine_a, mine_b) = (assigned(&a), assigned(&b));
        if !mine_a.is_empty() && !mine_b.is_empty() && mine_a.len() + mine_b.len() == 4 {
            break; // the process member holds the other two
        }
        assert!(
            Instant::now() < deadline,
            "the third member never got partitions"
        );
    }
    doomed.kill().expect("kill -9 the member");
    doomed.wait().expect("reap");
    let died_at = Instant::now();
    let assignments = settle(&[&a, &b], 6, &mut seen);
    println!("take-over after a member died: {:?}", died_at.elapsed());
    assert_eq!(assignments.iter().map(BTreeSet::len).sum::<usize>(), 6);

    // Every message was delivered to the group (no commits: replays are allowed,
    // losses are not).
    let delivered: BTreeSet<(i32, i64)> = seen.iter().map(|(_, p, o)| (*p, *o)).collect();
    assert_eq!(delivered.len(), 300);
}

#[test]
fn committed_offsets_resume_a_new_consumer_and_survive_kill_9() {
    let dir = tempfile::tempdir().expect("temp dir");
    let mut broker = BrokerProcess::start(dir.path(), &["--profile", "dev"]);
    let bootstrap = broker.bootstrap();
    create_topic(&bootstrap, "resume", 1, &[]);
    produce_to_every_partition(&bootstrap, "resume", 1, 100);
    {
        let (consumer, _) = member(&bootstrap, "g-resume", "resume", &[]);
        let mut read = 0;
        let deadline = Instant::now() + Duration::from_millis(CLIENT_WAIT_MS);
        while read < 40 {
            assert!(Instant::now() < deadline, "read only {read}");
            if let Some(result) = consumer.poll(Duration::from_millis(100)) {
                let message = result.expect("message");
                read += 1;
                if read == 40 {
                    let mut offsets = TopicPartitionList::new();
                    offsets
                        .add_partition_offset("resume", 0, Offset::Offset(message.offset() + 1))
                        .expect("tpl");
                    consumer.commit(&offsets, CommitMode::Sync).expect("commit");
                    let committed = consumer
                        .committed(Duration::from_secs(10))
                        .expect("committed");
                    let position = consumer.position().expect("position");
                    assert_eq!(
                        committed.find_partition("resume", 0).expect("p0").offset(),
                        position.find_partition("resume", 0).expect("p0").offset()
                    );
                }
            }
        }
    }
    broker.kill9();
    broker.restart();
    let (consumer, _) = member(&bootstrap, "g-resume", "resume", &[]);
    let first = loop {
        if let Some(result) = consumer.poll(Duration::from_millis(100)) {
            break result.expect("message").offset();
        }
    };
    assert_eq!(first, 40, "resumed after the committed offset");
}

#[test]
fn a_static_member_rejoins_without_a_rebalance() {
    let broker = EmbeddedBroker::start();
    let bootstrap = broker.bootstrap();
    create_topic(&bootstrap, "static", 4, &[]);
    let static_config = [
        ("group.instance.id", "static-a"),
        ("session.timeout.ms", "30000"),
    ];
    let (a, a_rebalances) = member(
        &bootstrap,
        "g-static",
        "static",
        &[("group.instance.id", "static-b")],
    );
    // `a` forms the group first, so it leads and `b` is a follower: a static
    // follower comes back without a rebalance (a static leader on a client
    // older than JoinGroup v9 makes one, as in Kafka).
    let mut seen = Vec::new();
    settle(&[&a], 4, &mut seen);
    let (b, _) = member(&bootstrap, "g-static", "static", &static_config);
    let before = settle(&[&a, &b], 4, &mut seen);
    let revokes_before = a_rebalances.0.load(Ordering::SeqCst);
    // A static member closes without leaving (librdkafka keeps static members in
    // the group) and comes back under the same instance id.
    drop(b);
    let (b, _) = member(&bootstrap, "g-static", "static", &static_config);
    let after = settle(&[&a, &b], 4, &mut seen);
    assert_eq!(before, after, "same assignment");
    std::thread::sleep(Duration::from_millis(1500));
    let _ = settle(&[&a, &b], 4, &mut seen);
    assert_eq!(
        a_rebalances.0.load(Ordering::SeqCst),
        revokes_before,
        "the other member saw no rebalance"
    );
}

#[test]
fn cooperative_sticky_members_converge_incrementally() {
    let broker = EmbeddedBroker::start();
    let bootstrap = broker.bootstrap();
    create_topic(&bootstrap, "coop", 6, &[]);
    let cooperative = [("partition.assignment.strategy", "cooperative-sticky")];
    let (a, _) = member(&bootstrap, "g-coop", "coop", &cooperative);
    let mut seen = Vec::new();
    let alone = settle(&[&a], 6, &mut seen);
    assert_eq!(alone[0].len(), 6);
    let (b, _) = member(&bootstrap, "g-coop", "coop", &cooperative);
    let shared = settle(&[&a, &b], 6, &mut seen);
    assert!(shared.iter().all(|set| set.len() == 3), "{shared:?}");
    // Sticky: what `a` kept is a subset of what it had.
    assert!(shared[0].is_subset(&alone[0]));
}

#[test]
fn a_member_that_stops_polling_is_removed_after_max_poll_interval() {
    let broker = EmbeddedBroker::start();
    let bootstrap = broker.bootstrap();
    create_topic(&bootstrap, "slow", 2, &[]);
    let poll_limit = [
        ("max.poll.interval.ms", "7000"),
        ("session.timeout.ms", "6000"),
    ];
    let (a, _) = member(&bootstrap, "g-slow", "slow", &poll_limit);
    let (b, _) = member(&bootstrap, "g-slow", "slow", &poll_limit);
    let mut seen = Vec::new();
    settle(&[&a, &b], 2, &mut seen);
    // `b` stops polling; `a` keeps going and ends up with both partitions.
    let deadline = Instant::now() + Duration::from_millis(CLIENT_WAIT_MS);
    while assigned(&a).len() < 2 {
        assert!(
            Instant::now() < deadline,
            "the stalled member was never removed"
        );
        let _ = a.poll(Duration::from_millis(100));
    }
    drop(b);
}

#[test]
fn groups_are_listed_described_and_deleted() {
    let broker = EmbeddedBroker::start();
    let bootstrap = broker.bootstrap();
    create_topic(&bootstrap, "admin-groups", 1, &[]);
    let (a, _) = member(&bootstrap, "g-admin", "admin-groups", &[]);
    let mut seen = Vec::new();
    settle(&[&a], 1, &mut seen);
    let groups = a
        .fetch_group_list(Some("g-admin"), Duration::from_secs(10))
        .expect("describe");
    let group = &groups.groups()[0];
    assert_eq!(group.name(), "g-admin");
    assert_eq!(group.state(), "Stable");
    assert_eq!(group.protocol_type(), "consumer");
    assert_eq!(group.members().len(), 1);
    let listed = a
        .fetch_group_list(None, Duration::from_secs(10))
        .expect("list");
    assert!(listed.groups().iter().any(|g| g.name() == "g-admin"));

    let admin: rdkafka::admin::AdminClient<rdkafka::client::DefaultClientContext> =
        ClientConfig::new()
            .set("bootstrap.servers", &bootstrap)
            .create()
            .expect("admin");
    let options = rdkafka::admin::AdminOptions::new();
    let busy = broker
        .block_on(admin.delete_groups(&["g-admin"], &options))
        .expect("delete");
    assert!(busy[0].is_err(), "a group with members is not deleted");
    drop(a);
    let deleted = broker
        .block_on(admin.delete_groups(&["g-admin"], &options))
        .expect("delete");
    assert_eq!(deleted[0], Ok("g-admin".to_string()));
}
