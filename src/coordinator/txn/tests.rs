//! The coordinator's behaviour as a producer sees it, driven with explicit
//! times: every state transition and every error Kafka answers with.

use super::coordinator::*;
use super::metadata::*;
use super::producer_ids::{ProducerIdBlock, ProducerIdManager};
use crate::error_code::*;
use crate::types::{ProducerEpoch, TopicPartition};

const T0: i64 = 1_000_000;
const TIMEOUT_MS: i32 = 60_000;
const ID: &str = "tx";

fn ids() -> ProducerIdManager {
    let mut ids = ProducerIdManager::new(1_000);
    ids.fetch_started();
    ids.block_arrived(Some(ProducerIdBlock {
        first: 4_000,
        count: 1_000,
    }));
    ids
}

fn coordinator() -> (TxnCoordinator, ProducerIdManager) {
    (TxnCoordinator::new(TxnConfig::default()), ids())
}

/// A coordinator loaded with `ID` initialised once and then stored at epoch `i16::MAX - 1`,
/// the last one a bump may reach.
fn at_the_last_epoch() -> (TxnCoordinator, ProducerIdManager) {
    let (mut c, mut ids) = coordinator();
    init(&mut c, &mut ids, T0);
    let mut stored = state(&c);
    stored.producer_epoch = ProducerEpoch::new(i16::MAX - 1);
    let mut c = TxnCoordinator::new(TxnConfig::default());
    c.load(vec![stored]);
    (c, ids)
}

fn tp(topic: &str, partition: i32) -> TopicPartition {
    TopicPartition::new(topic, partition)
}

/// InitProducerId stored: (producer id, epoch).
fn init(c: &mut TxnCoordinator, ids: &mut ProducerIdManager, now_ms: i64) -> (i64, i16) {
    let transition = c
        .init_producer_id(now_ms, ID, TIMEOUT_MS, None, ids)
        .expect("init accepted");
    assert_eq!(transition.purpose, Purpose::InitProducerId);
    assert_eq!(c.persisted(ID, true), None);
    (
        transition.target.producer_id,
        transition.target.producer_epoch.get(),
    )
}

fn begin(
    c: &mut TxnCoordinator,
    (pid, epoch): (i64, i16),
    partitions: &[TopicPartition],
    now_ms: i64,
) {
    let transition = c
        .add_partitions(now_ms, ID, pid, epoch, partitions)
        .expect("add accepted")
        .expect("a change to store");
    assert_eq!(transition.target.state, TxnState::Ongoing);
    assert_eq!(c.persisted(ID, true), None);
}

fn state(c: &TxnCoordinator) -> TxnMetadata {
    c.describe(ID).expect("known id")
}

#[test]
fn a_new_transactional_id_gets_a_producer_id_at_epoch_zero_then_bumps() {
    let (mut c, mut ids) = coordinator();
    assert_eq!(init(&mut c, &mut ids, T0), (4_000, 0));
    assert_eq!(init(&mut c, &mut ids, T0 + 1), (4_000, 1));
    let stored = state(&c);
    assert_eq!(stored.state, TxnState::Empty);
    assert_eq!(stored.timeout_ms, TIMEOUT_MS);
    assert_eq!(stored.last_update_timestamp_ms, T0 + 1);
}

#[test]
fn bad_init_requests_are_refused() {
    let (mut c, mut ids) = coordinator();
    let max = TxnConfig::default().max_timeout_ms;
    for (id, timeout, expected) in [
        ("", TIMEOUT_MS, INVALID_REQUEST),
        (ID, max + 1, INVALID_TRANSACTION_TIMEOUT),
        (ID, 0, INVALID_TRANSACTION_TIMEOUT),
        (ID, -5, INVALID_TRANSACTION_TIMEOUT),
    ] {
        assert_eq!(
            c.init_producer_id(T0, id, timeout, None, &mut ids),
            Err(expected)
        );
    }
    // The maximum itself is allowed.
    assert!(c.init_producer_id(T0, ID, max, None, &mut ids).is_ok());
}

#[test]
fn a_transition_in_flight_makes_others_wait() {
    let (mut c, mut ids) = coordinator();
    c.init_producer_id(T0, ID, TIMEOUT_MS, None, &mut ids)
        .expect("accepted");
    assert_eq!(
        c.init_producer_id(T0, ID, TIMEOUT_MS, None, &mut ids),
        Err(CONCURRENT_TRANSACTIONS)
    );
    assert_eq!(
        c.add_partitions(T0, ID, 4_000, 0, &[tp("t", 0)]),
        Err(PRODUCER_FENCED),
        "the epoch is not 0 until the init is stored"
    );
    assert_eq!(c.persisted(ID, true), None);
    assert_eq!(state(&c).producer_epoch, ProducerEpoch::new(0));
}

#[test]
fn a_store_that_fails_leaves_the_state_as_it_was() {
    let (mut c, mut ids) = coordinator();
    let producer = init(&mut c, &mut ids, T0);
    let before = state(&c);
    c.add_partitions(T0 + 5, ID, producer.0, producer.1, &[tp("t", 0)])
        .expect("accepted");
    assert_eq!(c.persisted(ID, false), None);
    assert_eq!(state(&c), before);
    // And the id is free for the next call.
    begin(&mut c, producer, &[tp("t", 0)], T0 + 6);
}

#[test]
fn init_on_an_ongoing_transaction_fences_and_aborts_it_first() {
    let (mut c, mut ids) = coordinator();
    let producer = init(&mut c, &mut ids, T0);
    begin(&mut c, producer, &[tp("t", 0), tp("t", 1)], T0);
    let fence = c
        .init_producer_id(T0 + 10, ID, TIMEOUT_MS, None, &mut ids)
        .expect("fence");
    assert_eq!(fence.purpose, Purpose::FenceForInit);
    assert_eq!(fence.target.state, TxnState::PrepareAbort);
    assert_eq!(
        fence.target.producer_epoch,
        ProducerEpoch::new(producer.1 + 1)
    );
    let job = c.persisted(ID, true).expect("markers to write");
    assert_eq!(
        job,
        MarkerJob {
            transactional_id: ID.to_string(),
            producer_id: producer.0,
            producer_epoch: ProducerEpoch::new(producer.1 + 1),
            commit: false,
            partitions: vec![tp("t", 0), tp("t", 1)],
            recovery: false,
            coordinator_epoch: COORDINATOR_EPOCH,
            job_id: job.job_id,
        }
    );
    // The old producer is fenced everywhere.
    assert_eq!(
        c.end_txn(T0 + 11, ID, producer.0, producer.1, true),
        Err(PRODUCER_FENCED)
    );
    // The new one waits until the abort is complete.
    assert_eq!(
        c.init_producer_id(T0 + 11, ID, TIMEOUT_MS, None, &mut ids),
        Err(CONCURRENT_TRANSACTIONS)
    );
    let complete = c
        .markers_written(T0 + 12, ID, ProducerEpoch::new(producer.1 + 1), job.job_id)
        .expect("complete");
    assert_eq!(complete.target.state, TxnState::CompleteAbort);
    assert!(complete.target.partitions.is_empty());
    assert_eq!(c.persisted(ID, true), None);
    assert_eq!(
        init(&mut c, &mut ids, T0 + 13),
        (producer.0, producer.1 + 2)
    );
}

#[test]
fn an_exhausted_epoch_rotates_the_producer_id() {
    let (mut c, mut ids) = at_the_last_epoch();
    let (producer_id, epoch) = init(&mut c, &mut ids, T0 + 1);
    assert_eq!((producer_id, epoch), (4_001, 0));
    let rotated = state(&c);
    assert_eq!(rotated.previous_producer_id, 4_000);
    assert_eq!(rotated.last_producer_epoch, ProducerEpoch::NONE);
}

#[test]
fn kip_360_producer_id_and_epoch_in_the_request() {
    let (mut c, mut ids) = coordinator();
    let (pid, epoch) = init(&mut c, &mut ids, T0);
    // The producer resumes at its current epoch: bumped, the old one remembered.
    let resumed = c
        .init_producer_id(T0, ID, TIMEOUT_MS, Some((pid, epoch)), &mut ids)
        .expect("resume");
    assert_eq!(resumed.target.producer_epoch, ProducerEpoch::new(epoch + 1));
    assert_eq!(
        resumed.target.last_producer_epoch,
        ProducerEpoch::new(epoch)
    );
    c.persisted(ID, true);
    // The response was lost; the retry with the same epoch gets the same answer.
    let retried = c
        .init_producer_id(T0, ID, TIMEOUT_MS, Some((pid, epoch)), &mut ids)
        .expect("retry");
    assert_eq!(retried.target.producer_epoch, ProducerEpoch::new(epoch + 1));
    c.persisted(ID, true);
    // An epoch that is neither current nor last is a zombie.
    assert_eq!(
        c.init_producer_id(T0, ID, TIMEOUT_MS, Some((pid, epoch + 7)), &mut ids),
        Err(PRODUCER_FENCED)
    );
    // As is a producer id that is not this transactional id's.
    assert_eq!(
        c.init_producer_id(T0, ID, TIMEOUT_MS, Some((pid + 100, 0)), &mut ids),
        Err(PRODUCER_FENCED)
    );
}

#[test]
fn kip_360_a_retry_after_a_rotation_is_recognised() {
    let (mut c, mut ids) = at_the_last_epoch();
    let rotated = c
        .init_producer_id(T0, ID, TIMEOUT_MS, Some((4_000, i16::MAX - 1)), &mut ids)
        .expect("rotation");
    assert_eq!(rotated.target.producer_id, 4_001);
    assert_eq!(
        rotated.target.last_producer_epoch,
        ProducerEpoch::new(i16::MAX - 1)
    );
    c.persisted(ID, true);
    // The same request again (its answer was lost): the old id with an
    // exhausted epoch is not fenced; it is the "last epoch" retry.
    assert!(c
        .init_producer_id(T0, ID, TIMEOUT_MS, Some((4_000, i16::MAX - 1)), &mut ids)
        .is_ok());
}

#[test]
fn add_partitions_checks_the_producer_then_starts_the_transaction() {
    let (mut c, mut ids) = coordinator();
    assert_eq!(
        c.add_partitions(T0, ID, 1, 0, &[tp("t", 0)]),
        Err(INVALID_PRODUCER_ID_MAPPING)
    );
    let (pid, epoch) = init(&mut c, &mut ids, T0);
    assert_eq!(
        c.add_partitions(T0, ID, pid + 1, epoch, &[tp("t", 0)]),
        Err(INVALID_PRODUCER_ID_MAPPING)
    );
    assert_eq!(
        c.add_partitions(T0, ID, pid, epoch + 1, &[tp("t", 0)]),
        Err(PRODUCER_FENCED)
    );
    assert_eq!(
        c.add_partitions(T0, "", pid, epoch, &[]),
        Err(INVALID_REQUEST)
    );
    begin(&mut c, (pid, epoch), &[tp("t", 0)], T0 + 100);
    let ongoing = state(&c);
    assert_eq!(ongoing.start_timestamp_ms, T0 + 100);
    // Already in: answered at once, nothing to store.
    assert_eq!(
        c.add_partitions(T0 + 200, ID, pid, epoch, &[tp("t", 0)]),
        Ok(None)
    );
    // A new partition extends it; the start time stays.
    begin(&mut c, (pid, epoch), &[tp("u", 3)], T0 + 300);
    let grown = state(&c);
    assert_eq!(grown.start_timestamp_ms, T0 + 100);
    assert_eq!(grown.partitions.len(), 2);
}

#[test]
fn end_txn_prepares_writes_markers_and_completes() {
    let (mut c, mut ids) = coordinator();
    let (pid, epoch) = init(&mut c, &mut ids, T0);
    assert_eq!(
        c.end_txn(T0, ID, pid, epoch, true),
        Err(INVALID_TXN_STATE),
        "Empty"
    );
    begin(&mut c, (pid, epoch), &[tp("t", 0)], T0);
    assert_eq!(
        c.end_txn(T0, ID, pid, epoch + 1, true),
        Err(PRODUCER_FENCED)
    );
    assert_eq!(
        c.end_txn(T0, ID, pid - 1, epoch, true),
        Err(INVALID_PRODUCER_ID_MAPPING)
    );
    assert_eq!(
        c.end_txn(T0, "nope", pid, epoch, true),
        Err(INVALID_PRODUCER_ID_MAPPING)
    );
    let prepare = c
        .end_txn(T0 + 1, ID, pid, epoch, true)
        .expect("accepted")
        .expect("a change");
    assert_eq!(prepare.purpose, Purpose::EndTxn);
    assert_eq!(prepare.target.state, TxnState::PrepareCommit);
    let job = c.persisted(ID, true).expect("markers");
    assert!(job.commit);
    // Until the markers are written: a retry waits, the opposite is invalid,
    // and the producer cannot start the next transaction.
    assert_eq!(
        c.end_txn(T0 + 2, ID, pid, epoch, true),
        Err(CONCURRENT_TRANSACTIONS)
    );
    assert_eq!(
        c.end_txn(T0 + 2, ID, pid, epoch, false),
        Err(INVALID_TXN_STATE)
    );
    assert_eq!(
        c.add_partitions(T0 + 2, ID, pid, epoch, &[tp("t", 0)]),
        Err(CONCURRENT_TRANSACTIONS)
    );
    // Markers of another epoch, or of another job, complete nothing.
    let other_epoch = ProducerEpoch::new(epoch + 1);
    assert_eq!(c.markers_written(T0 + 3, ID, other_epoch, job.job_id), None);
    let typed = ProducerEpoch::new(epoch);
    assert_eq!(c.markers_written(T0 + 3, ID, typed, job.job_id + 1), None);
    let complete = c
        .markers_written(T0 + 3, ID, typed, job.job_id)
        .expect("complete");
    assert_eq!(complete.target.state, TxnState::CompleteCommit);
    assert_eq!(c.persisted(ID, true), None);
    // A retried EndTxn after completion succeeds; the opposite does not.
    assert_eq!(c.end_txn(T0 + 4, ID, pid, epoch, true), Ok(None));
    assert_eq!(
        c.end_txn(T0 + 4, ID, pid, epoch, false),
        Err(INVALID_TXN_STATE)
    );
    // The next transaction starts afresh.
    begin(&mut c, (pid, epoch), &[tp("t", 1)], T0 + 5);
    assert_eq!(state(&c).start_timestamp_ms, T0 + 5);
}

#[test]
fn abort_after_prepare_abort_is_retried_and_commit_is_invalid() {
    let (mut c, mut ids) = coordinator();
    let (pid, epoch) = init(&mut c, &mut ids, T0);
    begin(&mut c, (pid, epoch), &[tp("t", 0)], T0);
    c.end_txn(T0, ID, pid, epoch, false).expect("accepted");
    let job = c.persisted(ID, true).expect("markers");
    assert_eq!(
        c.end_txn(T0, ID, pid, epoch, false),
        Err(CONCURRENT_TRANSACTIONS)
    );
    assert_eq!(c.end_txn(T0, ID, pid, epoch, true), Err(INVALID_TXN_STATE));
    c.markers_written(T0, ID, ProducerEpoch::new(epoch), job.job_id)
        .expect("complete");
    c.persisted(ID, true);
    assert_eq!(c.end_txn(T0, ID, pid, epoch, false), Ok(None));
    assert_eq!(c.end_txn(T0, ID, pid, epoch, true), Err(INVALID_TXN_STATE));
}

#[test]
fn transactions_past_their_timeout_are_fenced_and_aborted() {
    let (mut c, mut ids) = coordinator();
    let (pid, epoch) = init(&mut c, &mut ids, T0);
    begin(&mut c, (pid, epoch), &[tp("t", 0)], T0);
    assert!(
        c.abort_timed_out(T0 + i64::from(TIMEOUT_MS)).is_empty(),
        "not yet"
    );
    let aborts = c.abort_timed_out(T0 + i64::from(TIMEOUT_MS) + 1);
    assert_eq!(aborts.len(), 1);
    assert_eq!(aborts[0].purpose, Purpose::TimeoutAbort);
    assert_eq!(aborts[0].target.state, TxnState::PrepareAbort);
    assert_eq!(
        aborts[0].target.producer_epoch,
        ProducerEpoch::new(epoch + 1)
    );
    // In flight: not aborted twice.
    assert!(c
        .abort_timed_out(T0 + 10 * i64::from(TIMEOUT_MS))
        .is_empty());
    let job = c.persisted(ID, true).expect("markers");
    assert_eq!(job.producer_epoch, ProducerEpoch::new(epoch + 1));
    assert!(!job.commit);
    // The zombie's commit is refused.
    assert_eq!(c.end_txn(T0, ID, pid, epoch, true), Err(PRODUCER_FENCED));
}

#[test]
fn idle_transactional_ids_expire() {
    let (mut c, mut ids) = coordinator();
    let expiration = TxnConfig::default().id_expiration_ms;
    init(&mut c, &mut ids, T0);
    assert!(c.expire_ids(T0 + expiration - 1).is_empty());
    let expired = c.expire_ids(T0 + expiration);
    assert_eq!(expired.len(), 1);
    assert_eq!(expired[0].target.state, TxnState::Dead);
    assert_eq!(expired[0].purpose, Purpose::Expire);
    assert_eq!(c.persisted(ID, true), None);
    assert_eq!(c.describe(ID), Err(TRANSACTIONAL_ID_NOT_FOUND));
    // An Ongoing id does not expire.
    let (pid, epoch) = init(&mut c, &mut ids, T0);
    begin(&mut c, (pid, epoch), &[tp("t", 0)], T0);
    assert!(c.expire_ids(T0 + 2 * expiration).is_empty());
}

#[test]
fn offset_writes_need_the_group_in_the_transaction_and_hold_its_end() {
    let (mut c, mut ids) = coordinator();
    let (pid, epoch) = init(&mut c, &mut ids, T0);
    let group = super::markers::offsets_partition("g");
    assert_eq!(
        c.begin_offset_write(ID, pid, epoch, &group).map(|_| ()),
        Err(INVALID_TXN_STATE)
    );
    begin(&mut c, (pid, epoch), std::slice::from_ref(&group), T0);
    assert_eq!(
        c.begin_offset_write(ID, pid, epoch + 1, &group).map(|_| ()),
        Err(PRODUCER_FENCED)
    );
    // A transition that grows the transaction does not hold offsets back.
    c.add_partitions(T0, ID, pid, epoch, &[tp("t", 0)])
        .expect("accepted")
        .expect("a change");
    let growing = c
        .begin_offset_write(ID, pid, epoch, &group)
        .expect("admitted");
    assert_eq!(c.persisted(ID, true), None);
    drop(growing);
    let guard = c
        .begin_offset_write(ID, pid, epoch, &group)
        .expect("admitted");
    assert_eq!(
        c.end_txn(T0, ID, pid, epoch, true),
        Err(CONCURRENT_TRANSACTIONS)
    );
    assert!(c
        .abort_timed_out(T0 + 10 * i64::from(TIMEOUT_MS))
        .is_empty());
    assert_eq!(
        c.init_producer_id(T0, ID, TIMEOUT_MS, None, &mut ids),
        Err(CONCURRENT_TRANSACTIONS)
    );
    drop(guard);
    assert!(c
        .end_txn(T0, ID, pid, epoch, true)
        .expect("accepted")
        .is_some());
    // While the end is being stored, and after, no offsets may join.
    assert_eq!(
        c.begin_offset_write(ID, pid, epoch, &group).map(|_| ()),
        Err(CONCURRENT_TRANSACTIONS)
    );
    c.persisted(ID, true);
    assert_eq!(
        c.begin_offset_write(ID, pid, epoch, &group).map(|_| ()),
        Err(CONCURRENT_TRANSACTIONS)
    );
}

#[test]
fn verify_only_reports_each_partition() {
    let (mut c, mut ids) = coordinator();
    let (pid, epoch) = init(&mut c, &mut ids, T0);
    begin(&mut c, (pid, epoch), &[tp("t", 0)], T0);
    assert_eq!(
        c.verify_partitions(ID, pid, epoch, &[tp("t", 0), tp("t", 1)]),
        Ok(vec![NONE, INVALID_TXN_STATE])
    );
    assert_eq!(
        c.verify_partitions(ID, pid, epoch - 1, &[tp("t", 0)]),
        Err(PRODUCER_FENCED)
    );
    assert_eq!(
        c.verify_partitions("other", pid, epoch, &[tp("t", 0)]),
        Err(INVALID_PRODUCER_ID_MAPPING)
    );
}

#[test]
fn list_filters_by_state_producer_id_and_duration() {
    let mut c = TxnCoordinator::new(TxnConfig::default());
    let mut ids = ids();
    for (id, ongoing_since) in [("a", Some(T0)), ("b", None), ("c", Some(T0 + 50_000))] {
        let t = c
            .init_producer_id(T0, id, TIMEOUT_MS, None, &mut ids)
            .expect("init");
        c.persisted(id, true);
        if let Some(start) = ongoing_since {
            c.add_partitions(start, id, t.target.producer_id, 0, &[tp("t", 0)])
                .expect("add");
            c.persisted(id, true);
        }
    }
    let names = |(listed, _): (Vec<ListedTxn>, Vec<String>)| {
        listed
            .into_iter()
            .map(|l| l.transactional_id)
            .collect::<Vec<_>>()
    };
    let now = T0 + 60_000;
    assert_eq!(names(c.list(now, &[], &[], -1)), ["a", "b", "c"]);
    assert_eq!(names(c.list(now, &["Ongoing".into()], &[], -1)), ["a", "c"]);
    assert_eq!(names(c.list(now, &[], &[4_001], -1)), ["b"]);
    assert_eq!(names(c.list(now, &["Ongoing".into()], &[], 30_000)), ["a"]);
    let (listed, unknown) = c.list(now, &["Nope".into()], &[], -1);
    assert!(listed.is_empty());
    assert_eq!(unknown, ["Nope"]);
}

#[test]
fn loading_resumes_transactions_that_were_ending() {
    let mut prepared = TxnMetadata::new(ID, 7, TIMEOUT_MS, T0);
    prepared.producer_epoch = ProducerEpoch::new(2);
    prepared.state = TxnState::PrepareCommit;
    prepared.partitions.insert(tp("t", 0));
    let mut idle = TxnMetadata::new("other", 8, TIMEOUT_MS, T0);
    idle.producer_epoch = ProducerEpoch::new(0);
    let mut c = TxnCoordinator::new(TxnConfig::default());
    let jobs = c.load(vec![prepared, idle]);
    assert_eq!(jobs.len(), 1);
    assert!(jobs[0].recovery && jobs[0].commit);
    assert_eq!(jobs[0].partitions, vec![tp("t", 0)]);
    let complete = c
        .markers_written(T0, ID, ProducerEpoch::new(2), jobs[0].job_id)
        .expect("complete");
    assert_eq!(complete.target.state, TxnState::CompleteCommit);
}

/// A partition unloaded and loaded again while a transaction prepares to end:
/// the job of the first load may still report its markers written after the
/// second load started its own. Only the second job completes the
/// transaction; had the first, the producer could begin its next transaction
/// while the second job still retried a marker, and that marker (of the same
/// producer epoch) would end the next transaction where it wrote.
#[test]
fn only_the_job_of_the_latest_load_completes_a_transaction() {
    let mut prepared = TxnMetadata::new(ID, 7, TIMEOUT_MS, T0);
    prepared.producer_epoch = ProducerEpoch::new(2);
    prepared.state = TxnState::PrepareAbort;
    prepared.partitions.insert(tp("t", 0));
    let mut c = TxnCoordinator::new(TxnConfig::default());
    let first = c.load(vec![prepared.clone()]);
    assert_eq!(c.unload(|id| id == ID), 1);
    let second = c.load(vec![prepared]);
    assert_ne!(first[0].job_id, second[0].job_id);
    assert_eq!(c.live_marker_job(ID), Some(second[0].job_id));
    assert_eq!(
        c.markers_written(T0, ID, ProducerEpoch::new(2), first[0].job_id),
        None
    );
    assert_eq!(
        c.add_partitions(T0, ID, 7, 2, &[tp("t", 0)]),
        Err(CONCURRENT_TRANSACTIONS),
        "the transaction still waits for the second job"
    );
    let complete = c
        .markers_written(T0, ID, ProducerEpoch::new(2), second[0].job_id)
        .expect("complete");
    assert_eq!(complete.target.state, TxnState::CompleteAbort);
    assert_eq!(c.persisted(ID, true), None);
    assert_eq!(c.live_marker_job(ID), None);
}
