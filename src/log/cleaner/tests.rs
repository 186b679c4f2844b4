//! Compaction on real log files: keys, tombstones, transactions, compression, a
//! producer's last batch, the dirty ratio, restarts, and a crash at every step of
//! a swap.

#![allow(clippy::unwrap_used)]

use std::collections::BTreeMap;

use bytes::Bytes;
use kafka_protocol::records::{Compression, Record, RecordBatchDecoder, TimestampType};

use super::{clean, CleaningPlan, CleaningStats, CRASH_AFTER_STEPS};
use crate::log::records::encode_batch;
use crate::log::tests::helpers::{txn_marker, Fixture, NOW_MS};
use crate::log::{CleanupPolicy, LogConfig, PartitionLog};

const DAY_MS: i64 = 86_400_000;
/// Room for every key of these tests.
const DEDUPE_BUFFER_BYTES: u64 = 1 << 20;

fn compacted(segment_bytes: u64) -> LogConfig {
    LogConfig {
        segment_bytes,
        cleanup: CleanupPolicy {
            delete: false,
            compact: true,
        },
        min_cleanable_dirty_ratio: 0.0,
        ..LogConfig::default()
    }
}

/// One batch of (key, value) records; a None value is a tombstone, a None key a
/// keyless record.
fn keyed(
    records: &[(Option<&str>, Option<&str>)],
    compression: Compression,
    producer: Option<(i64, i32, bool)>,
) -> Bytes {
    let (producer_id, base_sequence, transactional) = producer.unwrap_or((-1, -1, false));
    let records: Vec<Record> = records
        .iter()
        .enumerate()
        .map(|(i, (key, value))| Record {
            transactional,
            control: false,
            delete_horizon: false,
            partition_leader_epoch: 0,
            producer_id,
            producer_epoch: if producer_id < 0 { -1 } else { 0 },
            timestamp_type: TimestampType::Creation,
            offset: i as i64,
            // The encoder batches records whose offset minus sequence agree.
            sequence: base_sequence + i as i32,
            timestamp: NOW_MS,
            key: key.map(|k| Bytes::copy_from_slice(k.as_bytes())),
            value: value.map(|v| Bytes::copy_from_slice(v.as_bytes())),
            headers: Default::default(),
        })
        .collect();
    encode_batch(&records, compression).unwrap()
}

fn put(log: &mut PartitionLog, records: &[(&str, Option<&str>)]) -> i64 {
    let records: Vec<(Option<&str>, Option<&str>)> =
        records.iter().map(|(k, v)| (Some(*k), *v)).collect();
    let info = log
        .append(&keyed(&records, Compression::None, None), 0, NOW_MS)
        .unwrap();
    log.set_high_watermark(log.log_end_offset());
    info.first_offset.get()
}

/// `records` as one batch of a producer `(id, base sequence, transactional)`
/// with `compression`, at leader epoch 0.
fn put_by(
    log: &mut PartitionLog,
    records: &[(Option<&str>, Option<&str>)],
    compression: Compression,
    producer: (i64, i32, bool),
) {
    log.append(&keyed(records, compression, Some(producer)), 0, NOW_MS)
        .unwrap();
}

/// `put`, then a roll: the batch gets a segment of its own and is cleanable.
fn put_alone(log: &mut PartitionLog, records: &[(&str, Option<&str>)]) {
    put(log, records);
    log.roll(NOW_MS).unwrap();
}

/// A read at any offset starts with the first batch holding that offset or a
/// later one (compaction leaves gaps).
fn assert_reads_from_every_offset(log: &PartitionLog) {
    let batches = crate::log::tests::helpers::all_batches(log);
    for offset in log.log_start_offset()..log.log_end_offset() {
        let read = log.read(offset, 1, i64::MAX, true).unwrap();
        let Some(slice) = read.records else {
            assert!(batches.iter().all(|b| b.last_offset() < offset));
            continue;
        };
        let first = crate::log::tests::helpers::headers(&slice.read().unwrap())[0];
        let expected = batches.iter().find(|b| b.last_offset() >= offset).unwrap();
        assert_eq!(first, *expected, "a read at {offset}");
    }
}

/// The whole batches a fetch at `offset` returns.
fn fetch_at(log: &PartitionLog, offset: i64) -> Bytes {
    let read = log.read(offset, usize::MAX, i64::MAX, true).unwrap();
    read.records.unwrap().read().unwrap()
}

/// Every data record (no control record) the log serves, one fetch at a time
/// from its start.
fn data_records(log: &PartitionLog) -> Vec<Record> {
    let mut out = Vec::new();
    let mut offset = log.log_start_offset();
    while offset < log.log_end_offset() {
        let read = log.read(offset, usize::MAX, i64::MAX, true).unwrap();
        let Some(slice) = read.records else { break };
        let mut bytes = slice.read().unwrap();
        let last = crate::log::tests::helpers::headers(&bytes)
            .last()
            .map_or(offset, |h| h.last_offset());
        for set in RecordBatchDecoder::decode_all(&mut bytes).unwrap() {
            out.extend(set.records.into_iter().filter(|r| !r.control));
        }
        offset = last + 1;
    }
    out
}

/// A record's (key, value) as text.
fn key_value(record: Record) -> (String, Option<String>) {
    let key = String::from_utf8(record.key.unwrap().to_vec()).unwrap();
    let value = record.value.map(|v| String::from_utf8(v.to_vec()).unwrap());
    (key, value)
}

/// offset → (key, value) of every data record the log serves.
fn contents(log: &PartitionLog) -> BTreeMap<i64, (String, Option<String>)> {
    data_records(log)
        .into_iter()
        .map(|record| (record.offset, key_value(record)))
        .collect()
}

/// Whether some key of the log's compacted view holds `value`.
fn holds_value(log: &PartitionLog, value: &str) -> bool {
    contents(log)
        .values()
        .any(|(_, v)| v.as_deref() == Some(value))
}

/// `plan` carried out on `log` as the broker does, without an I/O limit.
fn clean_by(
    log: &mut PartitionLog,
    plan: &CleaningPlan,
    now_ms: i64,
) -> std::io::Result<CleaningStats> {
    let mut swap = |group| log.swap_cleaned(&group, now_ms);
    clean(plan, DEDUPE_BUFFER_BYTES, now_ms, &mut |_| {}, &mut swap)
}

/// One cleaning of `log` as the broker runs it; None when it is not due.
fn clean_now(log: &mut PartitionLog, now_ms: i64) -> Option<CleaningStats> {
    let plan = log.cleaning_plan(now_ms).unwrap()?;
    let stats = clean_by(log, &plan, now_ms).unwrap();
    log.set_first_dirty_offset(stats.end_offset);
    Some(stats)
}

fn expect(entries: &[(i64, &str, Option<&str>)]) -> BTreeMap<i64, (String, Option<String>)> {
    entries
        .iter()
        .map(|(o, k, v)| (*o, (k.to_string(), v.map(str::to_string))))
        .collect()
}

#[test]
fn only_the_latest_record_of_each_key_is_kept_at_its_offset() {
    // Every batch its own segment (the smallest segment.bytes).
    let (mut fixture, mut log) = Fixture::new(compacted(1 << 20));
    put_alone(&mut log, &[("k1", Some("a")), ("k2", Some("b"))]);
    put_alone(&mut log, &[("k1", Some("c"))]);
    put_alone(&mut log, &[("k3", Some("d")), ("k2", None)]);
    put(&mut log, &[("k4", Some("active"))]);
    let stats = clean_now(&mut log, NOW_MS).expect("dirty");
    assert_eq!(stats.end_offset, 5, "up to the active segment");
    let cleaned = expect(&[
        (2, "k1", Some("c")),
        (3, "k3", Some("d")),
        (4, "k2", None),
        (5, "k4", Some("active")),
    ]);
    assert_eq!(contents(&log), cleaned);
    assert_eq!(log.log_start_offset(), 0);
    assert_eq!(log.log_end_offset(), 6);
    assert_reads_from_every_offset(&log);
    // Nothing dirty below the active segment: no cleaning is due.
    assert!(clean_now(&mut log, NOW_MS).is_none());
    // Both restarts read the same log, and the cleaner checkpoint survives.
    let log = fixture.restart_clean(log);
    assert_eq!(contents(&log), cleaned);
    assert_eq!(log.first_dirty_offset(), 5);
    let log = fixture.restart_after_crash(log);
    assert_eq!(contents(&log), cleaned);
}

#[test]
fn a_segment_compaction_empties_is_read_past() {
    // Segments too small to merge: the first two are emptied.
    let (_fixture, mut log) = Fixture::new(compacted(100));
    put_alone(&mut log, &[("k1", Some("a"))]);
    put_alone(&mut log, &[("k2", Some("b"))]);
    put_alone(&mut log, &[("k1", Some("c"))]);
    put_alone(&mut log, &[("k2", Some("d"))]);
    put(&mut log, &[("k3", Some("active"))]);
    clean_now(&mut log, NOW_MS).expect("dirty");
    assert_eq!(log.segment_count(), 5);
    let first = crate::log::tests::helpers::headers(&fetch_at(&log, 0))[0];
    assert_eq!(first.base_offset, 2);
    assert_eq!(
        contents(&log),
        expect(&[
            (2, "k1", Some("c")),
            (3, "k2", Some("d")),
            (4, "k3", Some("active"))
        ])
    );
    assert_reads_from_every_offset(&log);
}

#[test]
fn a_tombstone_outlives_its_first_cleaning_by_delete_retention_ms() {
    let (_fixture, mut log) = Fixture::new(compacted(1 << 20));
    put_alone(&mut log, &[("k1", Some("a")), ("k2", Some("b"))]);
    put_alone(&mut log, &[("k1", None)]);
    put(&mut log, &[("k3", Some("c"))]);
    clean_now(&mut log, NOW_MS).expect("dirty");
    assert_eq!(
        contents(&log),
        expect(&[(1, "k2", Some("b")), (2, "k1", None), (3, "k3", Some("c"))])
    );
    // A day later the tombstone is still within delete.retention.ms of its
    // segment's newest record: kept.
    log.roll(NOW_MS).unwrap();
    put(&mut log, &[("k4", Some("d"))]);
    clean_now(&mut log, NOW_MS + DAY_MS / 2).expect("dirty");
    assert!(contents(&log).contains_key(&2));
    // Past it, the next cleaning removes it.
    log.roll(NOW_MS).unwrap();
    put(&mut log, &[("k5", Some("e"))]);
    clean_now(&mut log, NOW_MS + 2 * DAY_MS).expect("dirty");
    assert_eq!(
        contents(&log),
        expect(&[
            (1, "k2", Some("b")),
            (3, "k3", Some("c")),
            (4, "k4", Some("d")),
            (5, "k5", Some("e")),
        ])
    );
}

#[test]
fn segments_are_merged_and_a_compressed_batch_keeps_its_codec() {
    let (_fixture, mut log) = Fixture::new(compacted(1024));
    for codec in [
        Compression::Gzip,
        Compression::Zstd,
        Compression::Lz4,
        Compression::Snappy,
    ] {
        let batch = keyed(
            &[
                (Some("k1"), Some("old")),
                (Some("k2"), Some("kept")),
                (Some("k1"), Some("newer")),
            ],
            codec,
            None,
        );
        log.append(&batch, 0, NOW_MS).unwrap();
    }
    log.roll(NOW_MS).unwrap();
    log.set_high_watermark(log.log_end_offset());
    let before = log.segment_count();
    clean_now(&mut log, NOW_MS).expect("dirty");
    assert!(log.segment_count() <= before);
    assert_eq!(
        contents(&log),
        expect(&[(10, "k2", Some("kept")), (11, "k1", Some("newer"))])
    );
    // The last batch lost its first record: rewritten, still Snappy, with two
    // records and its original offset range.
    let headers = crate::log::tests::helpers::headers(&fetch_at(&log, 9));
    let last = headers.last().unwrap();
    assert_eq!(
        (last.base_offset, last.last_offset(), last.records_count),
        (9, 11, 2)
    );
    assert_eq!(last.compression_codec(), 2, "snappy");
    // Batches that lost every record are gone.
    assert_eq!(headers.len(), 1);
}

#[test]
fn aborted_transactions_go_and_their_markers_follow_once_past_the_horizon() {
    let (_fixture, mut log) = Fixture::new(compacted(1 << 20));
    let txn = |log: &mut PartitionLog, pid: i64, records: &[(&str, &str)], commit: bool| {
        let records: Vec<(Option<&str>, Option<&str>)> =
            records.iter().map(|(k, v)| (Some(*k), Some(*v))).collect();
        put_by(log, &records, Compression::None, (pid, 0, true));
        let marker = txn_marker(pid, 0, 1, commit);
        log.append_txn_marker(&marker, 0, NOW_MS).unwrap();
        log.set_high_watermark(log.log_end_offset());
        log.roll(NOW_MS).unwrap();
    };
    put_alone(&mut log, &[("k1", Some("plain"))]);
    txn(&mut log, 7, &[("k2", "aborted")], false);
    txn(&mut log, 8, &[("k3", "committed")], true);
    put(&mut log, &[("k4", Some("active"))]);
    let aborted_before = log.aborted_transactions(0, log.log_end_offset());
    assert_eq!(aborted_before.len(), 1);
    clean_now(&mut log, NOW_MS).expect("dirty");
    // The aborted record is gone, unless it is its producer's last batch: kept
    // empty, so that the producer's sequence survives.
    assert!(!holds_value(&log, "aborted"));
    assert!(holds_value(&log, "committed"));
    // The abort marker stays (its transaction's batch was only now emptied) and
    // read_committed still knows the transaction was aborted.
    assert_eq!(
        log.aborted_transactions(0, log.log_end_offset()),
        aborted_before
    );
    // Past delete.retention.ms both markers still mark something: the committed
    // record is live, and the aborted producer's last batch was kept, emptied.
    log.roll(NOW_MS).unwrap();
    put(&mut log, &[("k5", Some("later"))]);
    clean_now(&mut log, NOW_MS + 2 * DAY_MS).expect("dirty");
    assert!(holds_value(&log, "committed"));
    assert_eq!(
        log.aborted_transactions(0, log.log_end_offset()),
        aborted_before
    );
    assert!(log.producers().iter().any(|p| p.producer_id == 8));
}

#[test]
fn a_producers_last_batch_stays_empty_so_its_sequence_survives() {
    let (mut fixture, mut log) = Fixture::new(compacted(1 << 20));
    put_by(
        &mut log,
        &[(Some("k1"), Some("a"))],
        Compression::None,
        (5, 0, false),
    );
    log.roll(NOW_MS).unwrap();
    put_alone(&mut log, &[("k1", Some("b"))]);
    put(&mut log, &[("k2", Some("active"))]);
    clean_now(&mut log, NOW_MS).expect("dirty");
    assert_eq!(
        contents(&log),
        expect(&[(1, "k1", Some("b")), (2, "k2", Some("active"))])
    );
    let first = crate::log::tests::helpers::headers(&fetch_at(&log, 0))[0];
    assert_eq!(
        (
            first.base_offset,
            first.records_count,
            first.producer_id,
            first.last_sequence()
        ),
        (0, 0, 5, 0)
    );
    // The producer state rebuilt from the log alone still knows its sequence.
    let log = fixture.restart_after_crash(log);
    let producer = log.producers().into_iter().find(|p| p.producer_id == 5);
    assert_eq!(producer.map(|p| p.last_sequence), Some(0));
}

/// Found by the model test: an emptied batch that kept its codec had an empty
/// compressed stream, which no decoder reads. It is written uncompressed.
#[test]
fn an_emptied_compressed_batch_is_written_uncompressed() {
    let (_fixture, mut log) = Fixture::new(compacted(1 << 20));
    put_by(
        &mut log,
        &[(Some("k1"), Some("a"))],
        Compression::Zstd,
        (5, 0, true),
    );
    let marker = txn_marker(5, 0, 1, false);
    log.append_txn_marker(&marker, 0, NOW_MS).unwrap();
    log.roll(NOW_MS).unwrap();
    put(&mut log, &[("k2", Some("active"))]);
    clean_now(&mut log, NOW_MS).expect("dirty");
    let mut bytes = fetch_at(&log, 0);
    let first = crate::log::tests::helpers::headers(&bytes)[0];
    assert_eq!(
        (
            first.base_offset,
            first.records_count,
            first.compression_codec()
        ),
        (0, 0, 0)
    );
    assert!(RecordBatchDecoder::decode_all(&mut bytes).is_ok());
}

#[test]
fn a_log_below_its_dirty_ratio_waits() {
    let config = LogConfig {
        min_cleanable_dirty_ratio: 0.9,
        ..compacted(1 << 20)
    };
    let (_fixture, mut log) = Fixture::new(config);
    for i in 0..4 {
        put_alone(&mut log, &[("k", Some(&format!("v{i}")))]);
    }
    put(&mut log, &[("other", Some("active"))]);
    clean_now(&mut log, NOW_MS).expect("all of it is dirty");
    assert_eq!(contents(&log).len(), 2);
    // One dirty segment beside the clean ones: below 0.9, not due.
    log.roll(NOW_MS).unwrap();
    put_alone(&mut log, &[("k", Some("v9"))]);
    put(&mut log, &[("other", Some("active2"))]);
    assert!(log.cleanable(NOW_MS).is_none());
    // Unless max.compaction.lag.ms says the dirty records waited too long.
    let mut config = log.config().clone();
    config.max_compaction_lag_ms = 1000;
    log.set_config(config);
    assert!(log.cleanable(NOW_MS + 2000).is_some());
}

#[test]
fn a_delete_and_compact_log_is_also_retained_by_time_and_a_compact_only_one_is_not() {
    let (_fixture, mut log) = Fixture::new(compacted(1 << 20));
    put_alone(&mut log, &[("k1", Some("a"))]);
    put_alone(&mut log, &[("k2", Some("b"))]);
    put(&mut log, &[("k3", Some("c"))]);
    let later = NOW_MS + 30 * DAY_MS;
    assert_eq!(log.apply_retention(later).unwrap(), 0);
    let mut config = log.config().clone();
    config.cleanup.delete = true;
    log.set_config(config);
    assert_eq!(log.apply_retention(later).unwrap(), 2);
}

#[test]
fn a_crash_at_any_step_of_a_swap_leaves_the_old_or_the_new_segments() {
    let mut outcomes = Vec::new();
    for steps in 0.. {
        let (mut fixture, mut log) = Fixture::new(compacted(1024));
        // Three segments to merge, with a keyless-free mix of kept and dropped.
        for (i, records) in [
            [("k1", Some("a")), ("k2", Some("b"))],
            [("k1", Some("c")), ("k3", Some("d"))],
            [("k2", Some("e")), ("k4", None)],
        ]
        .iter()
        .enumerate()
        {
            put(&mut log, records);
            log.roll(NOW_MS + i as i64).unwrap();
        }
        put(&mut log, &[("k5", Some("active"))]);
        log.flush().unwrap();
        let old = contents(&log);
        let plan = log.cleaning_plan(NOW_MS).unwrap().expect("dirty");
        CRASH_AFTER_STEPS.with(|s| s.set(Some(steps)));
        let result = clean_by(&mut log, &plan, NOW_MS);
        CRASH_AFTER_STEPS.with(|s| s.set(None));
        let crashed = result.is_err();
        let new = expect(&[
            (2, "k1", Some("c")),
            (3, "k3", Some("d")),
            (4, "k2", Some("e")),
            (5, "k4", None),
            (6, "k5", Some("active")),
        ]);
        if !crashed {
            assert_eq!(contents(&log), new);
        }
        let log = fixture.restart_after_crash(log);
        let after = contents(&log);
        assert!(
            after == old || after == new,
            "crash after {steps} steps left {after:?}"
        );
        assert_reads_from_every_offset(&log);
        assert!(!fixture
            .partition_dir()
            .join(super::CLEANER_TMP_DIR)
            .exists());
        assert!(!fixture
            .partition_dir()
            .join(super::CLEANER_SWAP_DIR)
            .exists());
        outcomes.push(after == new);
        if !crashed {
            break;
        }
    }
    // Some crashes fell before the commit and some after it.
    assert!(
        outcomes.contains(&false) && outcomes.contains(&true),
        "{outcomes:?}"
    );
}

/// A seeded schedule of keyed writes (plain and transactional, committed and
/// aborted, in every codec), rolls, cleanings at moving times (some past
/// `delete.retention.ms`) and restarts, clean or after a crash, checked after
/// every step against a model of the log: every key's latest committed value is
/// read back at its offset (a deleted key's tombstone, or nothing once it is past
/// its retention), and every record read is one that was written at that offset.
/// `SLUICE_SIM_SEED` replays a seed; `SLUICE_SIM_SEEDS` runs more.
#[test]
fn compaction_matches_a_model_of_the_log_across_cleanings_and_restarts() {
    use crate::random::sim::{seeds, SplitMix};
    const KEYS: u64 = 12;
    const STEPS: usize = 300;
    for seed in seeds(4200, 4) {
        eprintln!("compaction model seed {seed}");
        let mut rng = SplitMix(seed);
        let config = LogConfig {
            min_cleanable_dirty_ratio: 0.2,
            ..compacted(600)
        };
        let (mut fixture, mut log) = Fixture::new(config);
        // offset -> (key, value, visible: not aborted)
        let mut written: BTreeMap<i64, (String, Option<String>, bool)> = BTreeMap::new();
        let mut now = NOW_MS;
        let mut next_pid = 100;
        let mut groups_swapped = 0;
        let mut records_dropped = 0;
        for step in 0..STEPS {
            match rng.below(0..20) {
                0..=9 => {
                    let count = rng.below(1..4) as usize;
                    let records: Vec<(String, Option<String>)> = (0..count)
                        .map(|i| {
                            let key = format!("k{}", rng.below(0..KEYS));
                            let value = (rng.below(0..6) != 0).then(|| format!("v{step}-{i}"));
                            (key, value)
                        })
                        .collect();
                    let codec = [
                        Compression::None,
                        Compression::Gzip,
                        Compression::Zstd,
                        Compression::Lz4,
                        Compression::Snappy,
                    ][rng.below(0..5) as usize];
                    let transactional = rng.below(0..4) == 0;
                    let commit = rng.below(0..2) == 0;
                    let pid = next_pid;
                    next_pid += 1;
                    let as_refs: Vec<(Option<&str>, Option<&str>)> = records
                        .iter()
                        .map(|(k, v)| (Some(k.as_str()), v.as_deref()))
                        .collect();
                    let producer = transactional.then_some((pid, 0, true));
                    let info = log
                        .append(&keyed(&as_refs, codec, producer), 0, now)
                        .unwrap();
                    for (i, (key, value)) in records.into_iter().enumerate() {
                        let visible = !transactional || commit;
                        written.insert(info.first_offset.get() + i as i64, (key, value, visible));
                    }
                    if transactional {
                        let marker = txn_marker(pid, 0, 1, commit);
                        log.append_txn_marker(&marker, 0, now).unwrap();
                    }
                    log.set_high_watermark(log.log_end_offset());
                }
                10..=11 => {
                    let active_base = log.segment_base_offsets().last().copied();
                    if active_base < Some(log.log_end_offset()) {
                        log.roll(now).unwrap();
                    }
                }
                12..=16 => {
                    now += rng.below(0..3) as i64 * DAY_MS / 2;
                    if let Some(stats) = clean_now(&mut log, now) {
                        groups_swapped += stats.groups_swapped;
                        records_dropped += stats.records_read - stats.records_kept;
                    }
                }
                17 => log = fixture.restart_clean(log),
                18 => log = fixture.restart_after_crash(log),
                _ => now += 1000,
            }
            check_against_model(&log, &written, seed, step);
        }
        eprintln!(
            "seed {seed}: {groups_swapped} cleaned groups swapped in, {records_dropped} records dropped, {} written",
            written.len()
        );
        assert!(
            groups_swapped > 0 && records_dropped > 0,
            "seed {seed} never compacted"
        );
    }
}

/// The log's committed records, latest per key, against what was written.
fn check_against_model(
    log: &PartitionLog,
    written: &BTreeMap<i64, (String, Option<String>, bool)>,
    seed: u64,
    step: usize,
) {
    let aborted = log.aborted_transactions(0, log.log_end_offset());
    let read: BTreeMap<i64, (String, Option<String>)> = data_records(log)
        .into_iter()
        .filter(|record| {
            !(record.transactional
                && aborted.iter().any(|a| {
                    a.producer_id == record.producer_id
                        && a.first_offset <= record.offset
                        && record.offset <= a.last_offset
                }))
        })
        .map(|record| (record.offset, key_value(record)))
        .collect();
    let context = format!("seed {seed}, step {step}");
    for (offset, (key, value)) in &read {
        let Some((wrote_key, wrote_value, visible)) = written.get(offset) else {
            panic!("{context}: a record at {offset} nobody wrote");
        };
        assert_eq!(
            (key, value),
            (wrote_key, wrote_value),
            "{context}: offset {offset}"
        );
        assert!(visible, "{context}: an aborted record at {offset} is read");
    }
    let mut latest: BTreeMap<&str, (i64, &Option<String>)> = BTreeMap::new();
    for (offset, (key, value, visible)) in written {
        if *visible {
            latest.insert(key, (*offset, value));
        }
    }
    for (key, (offset, value)) in latest {
        match (read.get(&offset), value) {
            (Some((k, v)), _) => assert_eq!((k.as_str(), v), (key, value), "{context}"),
            // A tombstone may be gone once past its retention.
            (None, None) => {}
            (None, Some(value)) => {
                panic!("{context}: the latest value of {key} ({value} at {offset}) is lost")
            }
        }
    }
}
