//! Consumer groups with default-configured librdkafka consumers: assignment,
//! take-over on leave and on death, commits that survive restarts, static
//! membership, cooperative rebalancing, max.poll.interval, and the group admin
//! calls.

use std::collections::BTreeSet;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, CommitMode, Consumer, ConsumerContext, Rebalance};
use rdkafka::message::Message;
use rdkafka::producer::FutureRecord;
use rdkafka::{ClientContext, Offset, TopicPartitionList};
use sluice_compat::*;

/// One rebalance callback a consumer got: assigned or revoked partitions, or
/// a rebalance error.
#[derive(Clone, Debug, PartialEq)]
enum RebalanceEvent {
    Assign(BTreeSet<i32>),
    Revoke(BTreeSet<i32>),
    Error(String),
}

/// Records every rebalance a consumer goes through, in order.
#[derive(Clone, Default)]
struct Rebalances(Arc<Mutex<Vec<RebalanceEvent>>>);

impl Rebalances {
    fn events(&self) -> Vec<RebalanceEvent> {
        self.0.lock().expect("rebalance events").clone()
    }
}

fn partitions_of(list: &TopicPartitionList) -> BTreeSet<i32> {
    list.elements().iter().map(|e| e.partition()).collect()
}

impl ClientContext for Rebalances {}

impl ConsumerContext for Rebalances {
    fn pre_rebalance(&self, _consumer: &BaseConsumer<Self>, rebalance: &Rebalance<'_>) {
        let event = match rebalance {
            Rebalance::Assign(list) => RebalanceEvent::Assign(partitions_of(list)),
            Rebalance::Revoke(list) => RebalanceEvent::Revoke(partitions_of(list)),
            Rebalance::Error(error) => RebalanceEvent::Error(error.to_string()),
        };
        self.0.lock().expect("rebalance events").push(event);
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

/// Polls every member until each has received a message from every partition
/// it holds that was produced with `round` in its payload, and no member got
/// one from a partition it does not hold.
fn consume_round(members: &[&Member], round: &str, holdings: &[BTreeSet<i32>]) {
    let deadline = Instant::now() + Duration::from_millis(CLIENT_WAIT_MS);
    let mut got: Vec<BTreeSet<i32>> = vec![BTreeSet::new(); members.len()];
    while got.as_slice() != holdings {
        assert!(
            Instant::now() < deadline,
            "round {round}: got {got:?}, expected {holdings:?}"
        );
        for (index, consumer) in members.iter().enumerate() {
            while let Some(result) = consumer.poll(Duration::from_millis(20)) {
                let message = result.expect("consumer error");
                let payload = message.payload().unwrap_or_default();
                if String::from_utf8_lossy(payload).starts_with(round) {
                    got[index].insert(message.partition());
                }
            }
        }
        for (index, partitions) in got.iter().enumerate() {
            assert!(
                partitions.is_subset(&holdings[index]),
                "round {round}: member {index} read {partitions:?} holding {:?}",
                holdings[index]
            );
        }
    }
}

fn produce_round(bootstrap: &str, topic: &str, partitions: i32, round: &str) {
    let producer = producer(bootstrap, &[]);
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    for partition in 0..partitions {
        let payload = format!("{round}-{partition}");
        let record = FutureRecord::<str, str>::to(topic)
            .partition(partition)
            .payload(&payload);
        let delivery = producer
            .send_result(record)
            .map_err(|(e, _)| e)
            .expect("enqueue");
        runtime
            .block_on(delivery)
            .expect("report")
            .expect("delivered");
    }
}

#[test]
fn static_members_restart_in_turn_without_a_rebalance() {
    let dir = tempfile::tempdir().expect("temp dir");
    let broker = BrokerProcess::start(dir.path(), &["--profile", "dev"]);
    let bootstrap = broker.bootstrap();
    create_topic(&bootstrap, "static", 4, &[]);
    let static_config = |instance: &'static str| {
        [
            ("group.instance.id", instance),
            ("session.timeout.ms", "30000"),
        ]
    };
    let instances = ["static-a", "static-b"];
    let start = |index: usize| {
        member(
            &bootstrap,
            "g-static",
            "static",
            &static_config(instances[index]),
        )
    };
    // `a` forms the group alone, so it leads; `b` joins as a follower. Each
    // restarts in turn below, so the leader and a follower both come back.
    let mut members = vec![start(0)];
    let mut seen = Vec::new();
    settle(&[&members[0].0], 4, &mut seen);
    members.push(start(1));
    let holdings = settle(&[&members[0].0, &members[1].0], 4, &mut seen);
    produce_round(&bootstrap, "static", 4, "before");
    consume_round(&[&members[0].0, &members[1].0], "before", &holdings);

    for (restarted, round) in [(0, "leader-back"), (1, "follower-back")] {
        let other = 1 - restarted;
        let other_events = members[other].1.events();
        // A static member closes without leaving (librdkafka keeps static
        // members in the group) and comes back under the same instance id.
        drop(members.remove(restarted));
        members.insert(restarted, start(restarted));
        let after = settle(&[&members[0].0, &members[1].0], 4, &mut seen);
        assert_eq!(after, holdings, "{round}: same assignment");
        produce_round(&bootstrap, "static", 4, round);
        consume_round(&[&members[0].0, &members[1].0], round, &holdings);
        assert_eq!(
            members[other].1.events(),
            other_events,
            "{round}: the other member saw no revoke or assign"
        );
        assert_eq!(
            members[restarted].1.events(),
            vec![RebalanceEvent::Assign(holdings[restarted].clone())],
            "{round}: the restarted member got its partitions back once"
        );
    }
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
