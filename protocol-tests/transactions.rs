//! The transaction coordinator on the wire: InitProducerId (idempotent and
//! transactional, ids across a restart), the errors Kafka answers a wrong
//! epoch or an unknown transactional id with, transactional offsets from
//! TxnOffsetCommit to OffsetFetch, FindCoordinator for transactional ids,
//! and DescribeTransactions / ListTransactions.

use std::time::{Duration, Instant};

use kafka_protocol::messages::add_partitions_to_txn_request::AddPartitionsToTxnTopic;
use kafka_protocol::messages::offset_fetch_request::OffsetFetchRequestTopic;
use kafka_protocol::messages::txn_offset_commit_request::{
    TxnOffsetCommitRequestPartition, TxnOffsetCommitRequestTopic,
};
use kafka_protocol::messages::*;

use crate::harness::{
    call, find_group_coordinator, find_txn_coordinator, offsets_topic_records, text, TestBroker,
    Wire, ANSWER_TIMEOUT_MS,
};
use crate::produce_fetch::create_topic;

const NONE: i16 = 0;
const UNKNOWN_TOPIC_OR_PARTITION: i16 = 3;
const INVALID_REQUEST: i16 = 42;
const INVALID_PRODUCER_EPOCH: i16 = 47;
const INVALID_TXN_STATE: i16 = 48;
const INVALID_PRODUCER_ID_MAPPING: i16 = 49;
const INVALID_TRANSACTION_TIMEOUT: i16 = 50;
const CONCURRENT_TRANSACTIONS: i16 = 51;
const OPERATION_NOT_ATTEMPTED: i16 = 55;
const UNSTABLE_OFFSET_COMMIT: i16 = 88;
const PRODUCER_FENCED: i16 = 90;
const TRANSACTIONAL_ID_NOT_FOUND: i16 = 105;

const TIMEOUT_MS: i32 = 60_000;

/// InitProducerId v4 (flexible): (error, producer id, epoch).
fn init(wire: &mut Wire, transactional_id: Option<&str>, timeout_ms: i32) -> (i16, i64, i16) {
    if let Some(id) = transactional_id.filter(|id| !id.is_empty()) {
        find_txn_coordinator(wire, id);
    }
    let request = InitProducerIdRequest::default()
        .with_transactional_id(transactional_id.map(|id| TransactionalId(text(id))))
        .with_transaction_timeout_ms(timeout_ms)
        .with_producer_id(ProducerId(-1))
        .with_producer_epoch(-1);
    let response: InitProducerIdResponse = call(wire, 22, 4, true, &request);
    (
        response.error_code,
        response.producer_id.0,
        response.producer_epoch,
    )
}

/// AddPartitionsToTxn at `version`: the error of each partition, in order.
fn add_partitions(
    wire: &mut Wire,
    version: i16,
    transactional_id: &str,
    (producer_id, epoch): (i64, i16),
    topic: &str,
    partitions: &[i32],
) -> Vec<i16> {
    let request = AddPartitionsToTxnRequest::default()
        .with_v3_and_below_transactional_id(TransactionalId(text(transactional_id)))
        .with_v3_and_below_producer_id(ProducerId(producer_id))
        .with_v3_and_below_producer_epoch(epoch)
        .with_v3_and_below_topics(vec![AddPartitionsToTxnTopic::default()
            .with_name(TopicName(text(topic)))
            .with_partitions(partitions.to_vec())]);
    let response: AddPartitionsToTxnResponse = call(wire, 24, version, version >= 3, &request);
    response.results_by_topic_v3_and_below[0]
        .results_by_partition
        .iter()
        .map(|p| p.partition_error_code)
        .collect()
}

pub fn add_offsets(
    wire: &mut Wire,
    transactional_id: &str,
    (producer_id, epoch): (i64, i16),
    group: &str,
) -> i16 {
    let request = AddOffsetsToTxnRequest::default()
        .with_transactional_id(TransactionalId(text(transactional_id)))
        .with_producer_id(ProducerId(producer_id))
        .with_producer_epoch(epoch)
        .with_group_id(GroupId(text(group)));
    let response: AddOffsetsToTxnResponse = call(wire, 25, 3, true, &request);
    response.error_code
}

fn end_txn(
    wire: &mut Wire,
    version: i16,
    transactional_id: &str,
    (producer_id, epoch): (i64, i16),
    commit: bool,
) -> i16 {
    let request = EndTxnRequest::default()
        .with_transactional_id(TransactionalId(text(transactional_id)))
        .with_producer_id(ProducerId(producer_id))
        .with_producer_epoch(epoch)
        .with_committed(commit);
    let response: EndTxnResponse = call(wire, 26, version, version >= 3, &request);
    response.error_code
}

fn txn_offset_commit(
    wire: &mut Wire,
    transactional_id: &str,
    (producer_id, epoch): (i64, i16),
    group: &str,
    topic: &str,
    offset: i64,
) -> i16 {
    let request = TxnOffsetCommitRequest::default()
        .with_transactional_id(TransactionalId(text(transactional_id)))
        .with_group_id(GroupId(text(group)))
        .with_producer_id(ProducerId(producer_id))
        .with_producer_epoch(epoch)
        .with_generation_id(-1)
        .with_topics(vec![TxnOffsetCommitRequestTopic::default()
            .with_name(TopicName(text(topic)))
            .with_partitions(vec![TxnOffsetCommitRequestPartition::default()
                .with_partition_index(0)
                .with_committed_offset(offset)
                .with_committed_leader_epoch(-1)
                .with_committed_metadata(Some(text("m")))])]);
    let response: TxnOffsetCommitResponse = call(wire, 28, 3, true, &request);
    response.topics[0].partitions[0].error_code
}

/// OffsetFetch v7 of partition 0: (error, committed offset).
fn fetch_offset(wire: &mut Wire, group: &str, topic: &str, require_stable: bool) -> (i16, i64) {
    let request = OffsetFetchRequest::default()
        .with_group_id(GroupId(text(group)))
        .with_topics(Some(vec![OffsetFetchRequestTopic::default()
            .with_name(TopicName(text(topic)))
            .with_partition_indexes(vec![0])]))
        .with_require_stable(require_stable);
    let response: OffsetFetchResponse = call(wire, 9, 7, true, &request);
    let partition = &response.topics[0].partitions[0];
    (partition.error_code, partition.committed_offset)
}

fn describe(
    wire: &mut Wire,
    transactional_id: &str,
) -> describe_transactions_response::TransactionState {
    let request = DescribeTransactionsRequest::default()
        .with_transactional_ids(vec![TransactionalId(text(transactional_id))]);
    let mut response: DescribeTransactionsResponse = call(wire, 65, 0, true, &request);
    response.transaction_states.remove(0)
}

/// Polls until `done` holds (markers are written after EndTxn is answered).
fn eventually(what: &str, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_millis(ANSWER_TIMEOUT_MS);
    while !done() {
        assert!(Instant::now() < deadline, "{what} did not happen in time");
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn init_producer_id_for_idempotent_and_transactional_producers() {
    let broker = TestBroker::start();
    let mut wire = broker.wire();
    let (error, first, epoch) = init(&mut wire, None, TIMEOUT_MS);
    assert_eq!((error, epoch), (NONE, 0));
    let (_, second, epoch) = init(&mut wire, None, TIMEOUT_MS);
    assert_eq!(epoch, 0);
    assert_ne!(first, second, "every idempotent producer gets its own id");

    let (error, txn_id, epoch) = init(&mut wire, Some("tx"), TIMEOUT_MS);
    assert_eq!((error, epoch), (NONE, 0));
    assert!(txn_id != first && txn_id != second);
    // A new instance of the same transactional id bumps the epoch.
    assert_eq!(init(&mut wire, Some("tx"), TIMEOUT_MS), (NONE, txn_id, 1));

    // v0 (not flexible) answers the same way.
    let request = InitProducerIdRequest::default()
        .with_transactional_id(Some(TransactionalId(text("tx"))))
        .with_transaction_timeout_ms(TIMEOUT_MS);
    let response: InitProducerIdResponse = call(&mut wire, 22, 0, false, &request);
    assert_eq!(
        (
            response.error_code,
            response.producer_id.0,
            response.producer_epoch
        ),
        (NONE, txn_id, 2)
    );
}

#[test]
fn init_producer_id_refuses_bad_timeouts_and_half_a_producer() {
    let broker = TestBroker::start();
    let mut wire = broker.wire();
    assert_eq!(
        init(&mut wire, Some("tx"), 900_001).0,
        INVALID_TRANSACTION_TIMEOUT
    );
    assert_eq!(
        init(&mut wire, Some("tx"), 0).0,
        INVALID_TRANSACTION_TIMEOUT
    );
    assert_eq!(init(&mut wire, Some("tx"), 900_000).0, NONE);
    assert_eq!(init(&mut wire, Some(""), TIMEOUT_MS).0, INVALID_REQUEST);
    let half = InitProducerIdRequest::default()
        .with_transactional_id(Some(TransactionalId(text("tx"))))
        .with_transaction_timeout_ms(TIMEOUT_MS)
        .with_producer_id(ProducerId(5))
        .with_producer_epoch(-1);
    let response: InitProducerIdResponse = call(&mut wire, 22, 3, true, &half);
    assert_eq!(response.error_code, INVALID_REQUEST);
    assert_eq!(response.producer_id.0, -1);
}

#[test]
fn producer_ids_are_never_reused_across_a_restart() {
    let data_dir = tempfile::tempdir().expect("temp dir");
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    let mut seen = Vec::new();
    let mut transactional = Vec::new();
    for _ in 0..2 {
        let broker = runtime
            .block_on(sluice::Broker::start(sluice::Config::ephemeral(
                data_dir.path(),
            )))
            .expect("broker starts");
        let mut wire = Wire::connect(broker.local_addr());
        for _ in 0..3 {
            let (error, producer_id, _) = init(&mut wire, None, TIMEOUT_MS);
            assert_eq!(error, NONE);
            assert!(
                !seen.contains(&producer_id),
                "{producer_id} handed out twice"
            );
            seen.push(producer_id);
        }
        let (error, producer_id, epoch) = init(&mut wire, Some("survivor"), TIMEOUT_MS);
        assert_eq!(error, NONE);
        transactional.push((producer_id, epoch));
        drop(wire);
        runtime.block_on(broker.shutdown()).expect("clean shutdown");
    }
    // The transactional id kept its producer id and its epoch moved on.
    assert_eq!(transactional[1].0, transactional[0].0);
    assert_eq!(transactional[1].1, transactional[0].1 + 1);
}

#[test]
fn wrong_epochs_and_unknown_ids_get_kafkas_errors() {
    let broker = TestBroker::start();
    let mut wire = broker.wire();
    create_topic(&mut wire, "t", 2, &[]);
    find_txn_coordinator(&mut wire, "nobody");
    assert_eq!(
        add_partitions(&mut wire, 3, "nobody", (1, 0), "t", &[0]),
        [INVALID_PRODUCER_ID_MAPPING]
    );
    assert_eq!(
        end_txn(&mut wire, 3, "nobody", (1, 0), true),
        INVALID_PRODUCER_ID_MAPPING
    );
    let (_, producer_id, epoch) = init(&mut wire, Some("tx"), TIMEOUT_MS);
    let producer = (producer_id, epoch);
    assert_eq!(
        end_txn(&mut wire, 3, "tx", producer, true),
        INVALID_TXN_STATE,
        "nothing to end"
    );
    let stale = (producer_id, epoch + 1);
    assert_eq!(
        add_partitions(&mut wire, 3, "tx", stale, "t", &[0]),
        [PRODUCER_FENCED]
    );
    assert_eq!(
        add_partitions(&mut wire, 1, "tx", stale, "t", &[0]),
        [INVALID_PRODUCER_EPOCH]
    );
    assert_eq!(end_txn(&mut wire, 3, "tx", stale, true), PRODUCER_FENCED);
    assert_eq!(
        end_txn(&mut wire, 1, "tx", stale, true),
        INVALID_PRODUCER_EPOCH
    );
    assert_eq!(
        add_partitions(&mut wire, 3, "tx", (producer_id + 1, epoch), "t", &[0]),
        [INVALID_PRODUCER_ID_MAPPING]
    );
    // A partition that does not exist: nothing is added.
    assert_eq!(
        add_partitions(&mut wire, 3, "tx", producer, "t", &[0, 7]),
        [OPERATION_NOT_ATTEMPTED, UNKNOWN_TOPIC_OR_PARTITION]
    );
    assert_eq!(
        describe(&mut wire, "tx").transaction_state.as_str(),
        "Empty"
    );
    assert_eq!(
        add_partitions(&mut wire, 3, "tx", producer, "t", &[0, 1]),
        [NONE, NONE]
    );
    let ongoing = describe(&mut wire, "tx");
    assert_eq!(ongoing.transaction_state.as_str(), "Ongoing");
    assert_eq!(ongoing.topics[0].partitions, [0, 1]);
    // A new instance fences the Ongoing transaction: it is aborted with a
    // bumped epoch, and the new instance is told to retry.
    assert_eq!(
        init(&mut wire, Some("tx"), TIMEOUT_MS).0,
        CONCURRENT_TRANSACTIONS
    );
    let fenced = describe(&mut wire, "tx");
    // The abort's markers may already be written.
    assert!(
        ["PrepareAbort", "CompleteAbort"].contains(&fenced.transaction_state.as_str()),
        "{:?}",
        fenced.transaction_state
    );
    assert_eq!(fenced.producer_epoch, epoch + 1);
    assert_eq!(end_txn(&mut wire, 3, "tx", producer, true), PRODUCER_FENCED);
}

#[test]
fn transactional_offsets_are_pending_until_the_transaction_ends() {
    let broker = TestBroker::start();
    let mut wire = broker.wire();
    create_topic(&mut wire, "in", 1, &[]);
    find_group_coordinator(&mut wire, "g");
    let (_, producer_id, epoch) = init(&mut wire, Some("tx"), TIMEOUT_MS);
    let producer = (producer_id, epoch);
    // Without AddOffsetsToTxn the group is not in the transaction.
    assert_eq!(
        add_partitions(&mut wire, 3, "tx", producer, "in", &[0]),
        [NONE]
    );
    assert_eq!(
        txn_offset_commit(&mut wire, "tx", producer, "g", "in", 42),
        INVALID_TXN_STATE
    );
    // The data partition would need a marker; start over with offsets only.
    let (_, producer_id, epoch) = init(&mut wire, Some("offsets-only"), TIMEOUT_MS);
    let producer = (producer_id, epoch);
    assert_eq!(add_offsets(&mut wire, "offsets-only", producer, "g"), NONE);
    assert_eq!(
        txn_offset_commit(
            &mut wire,
            "offsets-only",
            (producer_id, epoch + 1),
            "g",
            "in",
            42
        ),
        INVALID_PRODUCER_EPOCH
    );
    assert_eq!(
        txn_offset_commit(&mut wire, "offsets-only", producer, "g", "in", 42),
        NONE
    );
    assert_eq!(fetch_offset(&mut wire, "g", "in", false), (NONE, -1));
    assert_eq!(
        fetch_offset(&mut wire, "g", "in", true),
        (UNSTABLE_OFFSET_COMMIT, -1)
    );

    assert_eq!(end_txn(&mut wire, 3, "offsets-only", producer, true), NONE);
    eventually("the commit", || {
        fetch_offset(&mut wire, "g", "in", true) == (NONE, 42)
    });
    eventually("completion", || {
        describe(&mut wire, "offsets-only")
            .transaction_state
            .as_str()
            == "CompleteCommit"
    });
    // A retried commit is answered as done.
    assert_eq!(end_txn(&mut wire, 3, "offsets-only", producer, true), NONE);

    // An aborted transaction's offsets are dropped.
    assert_eq!(add_offsets(&mut wire, "offsets-only", producer, "g"), NONE);
    assert_eq!(
        txn_offset_commit(&mut wire, "offsets-only", producer, "g", "in", 99),
        NONE
    );
    assert_eq!(end_txn(&mut wire, 3, "offsets-only", producer, false), NONE);
    eventually("the abort", || {
        fetch_offset(&mut wire, "g", "in", true) == (NONE, 42)
    });
}

/// KIP-890: the first transactional batch of a transaction on a partition is
/// appended only if the coordinator has the partition in the transaction; a
/// stray one is refused with INVALID_TXN_STATE and writes nothing, so it cannot
/// start a transaction nobody ends.
#[test]
fn a_transactional_produce_to_a_partition_outside_the_transaction_is_refused() {
    let broker = TestBroker::start();
    let mut wire = broker.wire();
    create_topic(&mut wire, "verified", 2, &[]);
    let (error, producer_id, epoch) = init(&mut wire, Some("verifier"), TIMEOUT_MS);
    assert_eq!(error, NONE);
    assert_eq!(
        add_partitions(
            &mut wire,
            3,
            "verifier",
            (producer_id, epoch),
            "verified",
            &[0]
        ),
        vec![NONE]
    );
    let produce = |wire: &mut Wire, partition: i32, seq: i32| -> i16 {
        let batch = crate::producers::producer_batch(producer_id, epoch, seq, &[b"t"], true);
        let request = crate::produce_fetch::produce_request("verified", partition, -1, &batch)
            .with_transactional_id(Some(TransactionalId(text("verifier"))));
        let response: ProduceResponse = call(wire, 0, 9, true, &request);
        response.responses[0].partition_responses[0].error_code
    };
    assert_eq!(
        produce(&mut wire, 0, 0),
        NONE,
        "a partition in the transaction"
    );
    assert_eq!(produce(&mut wire, 0, 1), NONE, "a later batch on it");
    assert_eq!(
        produce(&mut wire, 1, 0),
        INVALID_TXN_STATE,
        "a partition never added"
    );
    assert_eq!(
        add_partitions(
            &mut wire,
            3,
            "verifier",
            (producer_id, epoch),
            "verified",
            &[1]
        ),
        vec![NONE]
    );
    assert_eq!(produce(&mut wire, 1, 0), NONE, "once added");
}

#[test]
fn find_coordinator_names_this_broker_for_transactional_ids() {
    let broker = TestBroker::start();
    let mut wire = broker.wire();
    let single: FindCoordinatorResponse = call(
        &mut wire,
        10,
        3,
        true,
        &FindCoordinatorRequest::default()
            .with_key(text("tx"))
            .with_key_type(1),
    );
    assert_eq!(single.error_code, NONE);
    assert_eq!(single.node_id.0, 1);
    assert_eq!(single.port, i32::from(broker.addr.port()));
    let batched: FindCoordinatorResponse = call(
        &mut wire,
        10,
        4,
        true,
        &FindCoordinatorRequest::default()
            .with_key_type(1)
            .with_coordinator_keys(vec![text("a"), text("")]),
    );
    assert_eq!(batched.coordinators[0].error_code, NONE);
    assert_eq!(batched.coordinators[0].node_id.0, 1);
    assert_eq!(batched.coordinators[1].error_code, INVALID_REQUEST);
    let unknown_type: FindCoordinatorResponse = call(
        &mut wire,
        10,
        3,
        true,
        &FindCoordinatorRequest::default()
            .with_key(text("x"))
            .with_key_type(9),
    );
    assert_eq!(unknown_type.error_code, INVALID_REQUEST);
}

#[test]
fn list_and_describe_transactions() {
    let broker = TestBroker::start();
    let mut wire = broker.wire();
    create_topic(&mut wire, "t", 1, &[]);
    let (_, idle_id, _) = init(&mut wire, Some("idle"), TIMEOUT_MS);
    let (_, busy_id, busy_epoch) = init(&mut wire, Some("busy"), TIMEOUT_MS);
    assert_eq!(
        add_partitions(&mut wire, 3, "busy", (busy_id, busy_epoch), "t", &[0]),
        [NONE]
    );

    let list =
        |wire: &mut Wire, version: i16, states: &[&str], producer_ids: &[i64], duration: i64| {
            let request = ListTransactionsRequest::default()
                .with_state_filters(states.iter().map(|s| text(s)).collect())
                .with_producer_id_filters(producer_ids.iter().map(|id| ProducerId(*id)).collect())
                .with_duration_filter(duration);
            let response: ListTransactionsResponse = call(wire, 66, version, true, &request);
            assert_eq!(response.error_code, NONE);
            let names: Vec<String> = response
                .transaction_states
                .iter()
                .map(|t| {
                    format!(
                        "{}:{}:{}",
                        t.transactional_id.as_str(),
                        t.producer_id.0,
                        t.transaction_state.as_str()
                    )
                })
                .collect();
            (
                names,
                response
                    .unknown_state_filters
                    .iter()
                    .map(|s| s.to_string())
                    .collect::<Vec<_>>(),
            )
        };
    let (all, _) = list(&mut wire, 0, &[], &[], -1);
    assert_eq!(
        all,
        [
            format!("busy:{busy_id}:Ongoing"),
            format!("idle:{idle_id}:Empty")
        ]
    );
    let (ongoing, unknown) = list(&mut wire, 1, &["Ongoing", "Bogus"], &[], -1);
    assert_eq!(ongoing, [format!("busy:{busy_id}:Ongoing")]);
    assert_eq!(unknown, ["Bogus"]);
    let (by_id, _) = list(&mut wire, 1, &[], &[idle_id], -1);
    assert_eq!(by_id, [format!("idle:{idle_id}:Empty")]);
    // Nothing has run for an hour yet (KIP-994).
    let (long_running, _) = list(&mut wire, 1, &["Ongoing"], &[], 3_600_000);
    assert!(long_running.is_empty());

    let busy = describe(&mut wire, "busy");
    assert_eq!(busy.error_code, NONE);
    assert_eq!(busy.producer_id.0, busy_id);
    assert_eq!(busy.producer_epoch, busy_epoch);
    assert_eq!(busy.transaction_timeout_ms, TIMEOUT_MS);
    assert!(busy.transaction_start_time_ms > 0);
    assert_eq!(busy.topics.len(), 1);
    assert_eq!(busy.topics[0].topic.as_str(), "t");
    assert_eq!(
        describe(&mut wire, "nobody").error_code,
        TRANSACTIONAL_ID_NOT_FOUND
    );
    assert_eq!(describe(&mut wire, "").error_code, INVALID_REQUEST);
}

/// A data dir from a version that kept transaction state only in its sled
/// store: the first load of the id's partition writes it into
/// `__transaction_state`, once; with the store gone it comes back from the
/// topic, and the producer's next InitProducerId moves its epoch on.
#[test]
fn transactions_stored_before_the_transaction_log_are_written_into_it_once() {
    use sluice::coordinator::txn::{record, TxnMetadata, TxnState};
    use sluice::store::SledTxnStore;
    use sluice::types::ProducerEpoch;

    let mut broker = TestBroker::unstarted();
    let id = "stored-before";
    let store_dir = broker.data_dir().join("transactions");
    broker.runtime.block_on(async {
        let old = SledTxnStore::open(&store_dir).expect("old store");
        let metadata = TxnMetadata {
            producer_epoch: ProducerEpoch::new(3),
            state: TxnState::CompleteCommit,
            ..TxnMetadata::new(id, 4_242, 60_000, crate::harness::now_ms())
        };
        record::save(&old, &metadata).await.expect("old record");
        old.close().await.expect("old store closed");
    });

    broker.start_again();
    let mut wire = broker.wire();
    find_txn_coordinator(&mut wire, id);
    let described = describe(&mut wire, id);
    assert_eq!(
        (
            described.error_code,
            described.transaction_state.as_str(),
            described.producer_id.0,
            described.producer_epoch
        ),
        (NONE, "CompleteCommit", 4_242, 3),
        "the old record is served"
    );
    broker.stop();

    // The sled store is only a cache now: without it, the topic has it all.
    std::fs::remove_dir_all(&store_dir).expect("store removed");
    broker.start_again();
    let (error, producer_id, epoch) = init(&mut broker.wire(), Some(id), TIMEOUT_MS);
    assert_eq!(
        (error, producer_id, epoch),
        (NONE, 4_242, 4),
        "the id came back from the topic"
    );
}

/// A TxnOffsetCommit is a transactional batch of the producer in the group's
/// partition of `__consumer_offsets`, and the transaction's end a commit
/// marker there, as Kafka writes them; so the pending offsets of an open
/// transaction, and then its commit, come back from the topic alone (the
/// coordinator's sled store deleted before each start), as they do on a
/// coordinator that takes the partition over.
#[test]
fn transactional_offsets_are_records_of_their_transaction_in_the_offsets_topic() {
    let mut broker = TestBroker::start();
    let offsets_dir = broker.data_dir().join("offsets");
    let (group, id) = ("logged-group", "logged-offsets");
    let partition = sluice::internal_topics::group_partition(group);
    // A start with nothing but the topics: the coordinator's store deleted.
    let restart_without_store = |broker: &mut TestBroker| -> Wire {
        broker.stop();
        std::fs::remove_dir_all(&offsets_dir).expect("store removed");
        broker.start_again();
        let mut wire = broker.wire();
        find_group_coordinator(&mut wire, group);
        wire
    };

    let mut wire = broker.wire();
    create_topic(&mut wire, "in", 1, &[]);
    find_group_coordinator(&mut wire, group);
    let (_, producer_id, epoch) = init(&mut wire, Some(id), TIMEOUT_MS);
    let producer = (producer_id, epoch);
    assert_eq!(add_offsets(&mut wire, id, producer, group), NONE);
    assert_eq!(
        txn_offset_commit(&mut wire, id, producer, group, "in", 42),
        NONE
    );
    let records = offsets_topic_records(&mut wire, partition);
    let staged = records
        .iter()
        .find(|record| record.transactional)
        .expect("a transactional batch in the offsets topic");
    assert_eq!(
        (staged.producer_id, staged.producer_epoch, staged.control),
        (producer_id, epoch, false)
    );
    assert!(
        staged.value.is_some(),
        "the pending OffsetCommitValue: {staged:?}"
    );
    // Only the topic knows of the open transaction now.
    let mut wire = restart_without_store(&mut broker);
    assert_eq!(
        fetch_offset(&mut wire, group, "in", true),
        (UNSTABLE_OFFSET_COMMIT, -1),
        "the open transaction's offset is pending again"
    );
    assert_eq!(fetch_offset(&mut wire, group, "in", false), (NONE, -1));
    find_txn_coordinator(&mut wire, id);
    assert_eq!(end_txn(&mut wire, 3, id, producer, true), NONE);
    eventually("the commit", || {
        fetch_offset(&mut wire, group, "in", true) == (NONE, 42)
    });
    let records = offsets_topic_records(&mut wire, partition);
    let marker = records
        .iter()
        .find(|record| record.control)
        .expect("the transaction's marker in the offsets topic");
    assert_eq!(marker.producer_id, producer_id);
    assert_eq!(
        marker.key.as_deref(),
        Some(&[0u8, 0, 0, 1][..]),
        "a commit marker (version 0, type 1)"
    );
    let mut wire = restart_without_store(&mut broker);
    assert_eq!(
        fetch_offset(&mut wire, group, "in", true),
        (NONE, 42),
        "the committed transaction's offset came back from the topic"
    );
}
