//! Restarts: clean (indexes trusted), after a crash (recovery above the recovery
//! point), with damaged files, and the log dir's own files.

use std::fs::{self, OpenOptions};
use std::io::Write;
use std::os::unix::fs::FileExt;

use uuid::Uuid;

use super::helpers::*;
use crate::log::{
    LogConfig, LogDir, PartitionLog, CLEAN_SHUTDOWN_FILE, RECOVERY_POINT_CHECKPOINT_FILE,
};
use crate::types::Offset;

/// Three segments of small batches with a dense index: 95-byte batches of two
/// records, eight to a segment, the active segment holding five.
fn three_segment_log() -> (Fixture, PartitionLog) {
    let (fixture, mut log) = Fixture::new(indexed(800, 100));
    for _ in 0..21 {
        log.append(&batch(2, NOW_MS), 0, NOW_MS).unwrap();
    }
    assert_eq!(log.segment_base_offsets(), vec![0, 16, 32]);
    (fixture, log)
}

/// (position in its segment file, base offset) of each batch of the segment at
/// `segment_base`.
fn batch_positions(log: &PartitionLog, segment_base: i64) -> Vec<(u64, i64)> {
    let bases = log.segment_base_offsets();
    let next_base = bases
        .iter()
        .find(|&&b| b > segment_base)
        .copied()
        .unwrap_or(i64::MAX);
    let mut out = Vec::new();
    let mut position = 0;
    for header in all_batches(log) {
        if (segment_base..next_base).contains(&header.base_offset) {
            out.push((position, header.base_offset));
            position += header.size_bytes() as u64;
        }
    }
    out
}

#[test]
fn a_clean_restart_loads_the_indexes_as_they_are() {
    let (mut fixture, log) = three_segment_log();
    let before = all_batches(&log);
    let bases = log.segment_base_offsets();
    let log = fixture.restart_clean(log);
    let index_files: Vec<Vec<u8>> = bases
        .iter()
        .map(|&b| fs::read(fixture.segment_file(b, ".index")).unwrap())
        .collect();
    assert!(index_files.iter().all(|bytes| !bytes.is_empty()));

    assert_eq!(log.segment_base_offsets(), bases);
    assert_eq!(all_batches(&log), before);
    assert_eq!(log.recovery_point(), log.log_end_offset());
    assert_every_offset_found(&log);
    assert!(
        !fixture.temp.path().join(CLEAN_SHUTDOWN_FILE).exists(),
        "open removes the marker"
    );

    let mut log = log;
    let next = log.log_end_offset();
    assert_eq!(
        log.append(&batch(1, NOW_MS), 0, NOW_MS)
            .unwrap()
            .first_offset,
        Offset::new(next)
    );
    // A second clean restart finds the index files it left, byte for byte.
    let log = fixture.restart_clean(log);
    for (base, bytes) in bases.iter().zip(&index_files).take(2) {
        assert_eq!(
            &fs::read(fixture.segment_file(*base, ".index")).unwrap(),
            bytes
        );
    }
    assert_every_offset_found(&log);
}

#[test]
fn a_crash_keeps_everything_written_to_the_os() {
    let (mut fixture, log) = three_segment_log();
    let before = all_batches(&log);
    let log = fixture.restart_after_crash(log);
    assert_eq!(all_batches(&log), before);
    assert_eq!(log.recovery_point(), 0, "nothing was checkpointed");
    assert_every_offset_found(&log);
}

#[test]
fn a_torn_last_batch_is_truncated() {
    let (mut fixture, log) = three_segment_log();
    let active = *log.segment_base_offsets().last().unwrap();
    let last = *batch_positions(&log, active).last().unwrap();
    let file = fixture.segment_file(active, ".log");
    let len = fs::metadata(&file).unwrap().len();
    OpenOptions::new()
        .write(true)
        .open(&file)
        .unwrap()
        .set_len(len - 5)
        .unwrap();

    let mut log = fixture.restart_after_crash(log);
    assert_eq!(log.log_end_offset(), last.1);
    assert_eq!(fs::metadata(&file).unwrap().len(), last.0);
    assert_every_offset_found(&log);
    assert_eq!(
        log.append(&batch(1, NOW_MS), 0, NOW_MS)
            .unwrap()
            .first_offset,
        Offset::new(last.1)
    );
}

#[test]
fn garbage_after_the_last_batch_is_truncated() {
    let (mut fixture, log) = three_segment_log();
    let log_end_offset = log.log_end_offset();
    let active = *log.segment_base_offsets().last().unwrap();
    let file = fixture.segment_file(active, ".log");
    let len = fs::metadata(&file).unwrap().len();
    let mut garbage = OpenOptions::new().append(true).open(&file).unwrap();
    garbage.write_all(&[0xAB; 100]).unwrap();

    let log = fixture.restart_after_crash(log);
    assert_eq!(log.log_end_offset(), log_end_offset);
    assert_eq!(fs::metadata(&file).unwrap().len(), len);
}

#[test]
fn a_bad_crc_in_the_active_segment_drops_it_and_everything_after() {
    let (mut fixture, log) = three_segment_log();
    let active = *log.segment_base_offsets().last().unwrap();
    let batches = batch_positions(&log, active);
    assert!(batches.len() >= 4);
    let (position, base_offset) = batches[2];
    let file = fixture.segment_file(active, ".log");
    flip_byte(&file, position + 70); // inside the records, covered by the CRC

    let log = fixture.restart_after_crash(log);
    assert_eq!(log.log_end_offset(), base_offset);
    assert_eq!(fs::metadata(&file).unwrap().len(), position);
    assert_every_offset_found(&log);
}

#[test]
fn a_flipped_base_offset_is_caught_although_the_crc_does_not_cover_it() {
    let (mut fixture, log) = three_segment_log();
    let active = *log.segment_base_offsets().last().unwrap();
    let (position, base_offset) = batch_positions(&log, active)[3];
    flip_byte(&fixture.segment_file(active, ".log"), position); // baseOffset's top byte

    let log = fixture.restart_after_crash(log);
    assert_eq!(log.log_end_offset(), base_offset);
    assert_every_offset_found(&log);
}

#[test]
fn a_bad_crc_in_an_older_segment_drops_the_later_segments() {
    let (mut fixture, log) = three_segment_log();
    let bases = log.segment_base_offsets();
    let (position, base_offset) = batch_positions(&log, bases[1])[1];
    flip_byte(&fixture.segment_file(bases[1], ".log"), position + 70);

    let log = fixture.restart_after_crash(log);
    assert_eq!(log.log_end_offset(), base_offset);
    assert_eq!(log.segment_base_offsets(), bases[..2].to_vec());
    assert!(!fixture.segment_file(bases[2], ".log").exists());
}

#[test]
fn the_recovery_point_checkpoint_bounds_recovery() {
    let (mut fixture, mut log) = three_segment_log();
    let bases = log.segment_base_offsets();
    log.flush().unwrap();
    fixture.log_dir.write_checkpoints([&log]).unwrap();
    let checkpoint =
        fs::read_to_string(fixture.temp.path().join(RECOVERY_POINT_CHECKPOINT_FILE)).unwrap();
    assert_eq!(
        checkpoint,
        format!("0\n1\n{TOPIC} 0 {}\n", log.log_end_offset())
    );
    // Rot in a flushed segment is not looked for (only the unflushed tail is).
    let (position, _) = batch_positions(&log, bases[0])[1];
    flip_byte(&fixture.segment_file(bases[0], ".log"), position + 70);
    log.append(&batch(2, NOW_MS), 0, NOW_MS).unwrap();
    let log_end_offset = log.log_end_offset();

    let log = fixture.restart_after_crash(log);
    assert_eq!(log.log_end_offset(), log_end_offset);
    assert_eq!(log.segment_base_offsets(), bases);
    assert_eq!(log.recovery_point(), log_end_offset - 2);
}

#[test]
fn a_missing_index_is_rebuilt() {
    let (mut fixture, log) = three_segment_log();
    let bases = log.segment_base_offsets();
    let log = fixture.restart_clean(log);
    let original = fs::read(fixture.segment_file(bases[1], ".index")).unwrap();
    drop(log);
    fs::remove_file(fixture.segment_file(bases[1], ".index")).unwrap();
    fs::remove_file(fixture.segment_file(bases[2], ".timeindex")).unwrap();
    fixture.log_dir.mark_clean_shutdown(-1).unwrap();

    let log = fixture.reload(true);
    assert_eq!(
        fs::read(fixture.segment_file(bases[1], ".index")).unwrap(),
        original
    );
    assert!(fixture.segment_file(bases[2], ".timeindex").exists());
    assert_every_offset_found(&log);
}

#[test]
fn a_missing_index_below_the_recovery_point_is_rebuilt_after_a_crash() {
    let (mut fixture, mut log) = three_segment_log();
    let bases = log.segment_base_offsets();
    log.flush().unwrap();
    fixture.log_dir.write_checkpoints([&log]).unwrap();
    let original = fs::read(fixture.segment_file(bases[0], ".index")).unwrap();
    fs::remove_file(fixture.segment_file(bases[0], ".index")).unwrap();

    let log = fixture.restart_after_crash(log);
    assert_eq!(
        fs::read(fixture.segment_file(bases[0], ".index")).unwrap(),
        original
    );
    assert_every_offset_found(&log);
}

#[test]
fn a_corrupt_index_is_rebuilt() {
    let (mut fixture, log) = three_segment_log();
    let bases = log.segment_base_offsets();
    let log = fixture.restart_clean(log);
    let index = fixture.segment_file(bases[0], ".index");
    let original = fs::read(&index).unwrap();
    assert!(original.len() >= 16);
    drop(log);
    // Entries that go backwards: a stale or scribbled index.
    let mut scribbled = original.clone();
    scribbled[8..16].copy_from_slice(&[0, 0, 0, 0, 0, 0, 0, 1]);
    fs::write(&index, &scribbled).unwrap();
    // And a time index that is not whole entries.
    let time_index = fixture.segment_file(bases[1], ".timeindex");
    OpenOptions::new()
        .append(true)
        .open(&time_index)
        .unwrap()
        .write_all(&[1, 2, 3])
        .unwrap();
    fixture.log_dir.mark_clean_shutdown(-1).unwrap();

    let log = fixture.reload(true);
    assert_eq!(fs::read(&index).unwrap(), original);
    assert_eq!(fs::metadata(&time_index).unwrap().len() % 12, 0);
    assert_every_offset_found(&log);
}

#[test]
fn an_index_pointing_past_the_log_is_rebuilt() {
    let (_fixture, _, log) = reload_with_first_index_edited(|entries| {
        entries.extend_from_slice(&[0, 0, 1, 0, 0, 1, 0, 0]); // position 65536
    });
    assert_every_offset_found(&log);
}

#[test]
fn an_index_in_kafka_3_layout_is_trusted() {
    // Kafka 3.x names the last offset of a whole multi-batch append at the position of
    // its first batch; such an entry is valid for lookups and is kept as it is.
    let mut written = Vec::new();
    let (_fixture, index, log) = reload_with_first_index_edited(|entries| {
        let last = entries.len() - 8;
        let relative = u32::from_be_bytes(entries[last..last + 4].try_into().unwrap());
        entries[last..last + 4].copy_from_slice(&(relative + 2).to_be_bytes());
        written = entries.clone();
    });
    assert_eq!(fs::read(&index).unwrap(), written, "not rebuilt");
    assert_every_offset_found(&log);
}

/// The three-segment log, stopped cleanly, its first offset index rewritten by `edit`, then
/// reopened trusting the clean shutdown: the fixture, the index file, and the log.
fn reload_with_first_index_edited(
    edit: impl FnOnce(&mut Vec<u8>),
) -> (Fixture, std::path::PathBuf, PartitionLog) {
    let (mut fixture, log) = three_segment_log();
    let bases = log.segment_base_offsets();
    let log = fixture.restart_clean(log);
    drop(log);
    let index = fixture.segment_file(bases[0], ".index");
    let mut entries = fs::read(&index).unwrap();
    edit(&mut entries);
    fs::write(&index, &entries).unwrap();
    fixture.log_dir.mark_clean_shutdown(-1).unwrap();
    let log = fixture.reload(true);
    (fixture, index, log)
}

#[test]
fn the_leader_epoch_cache_survives_restarts() {
    let (mut fixture, mut log) = Fixture::new(LogConfig::default());
    log.append(&batch(2, NOW_MS), 1, NOW_MS).unwrap(); // 0..=1
    log.append(&batch(2, NOW_MS), 1, NOW_MS).unwrap(); // 2..=3
    log.append(&batch(2, NOW_MS), 3, NOW_MS).unwrap(); // 4..=5
    log.append(&batch(1, NOW_MS), 5, NOW_MS).unwrap(); // 6
    let text = fs::read_to_string(fixture.partition_dir().join("leader-epoch-checkpoint")).unwrap();
    assert_eq!(text, "0\n3\n1 0\n3 4\n5 6\n");

    let log = fixture.restart_clean(log);
    assert_eq!(log.latest_epoch(), Some(5));
    assert_eq!(log.end_offset_for_epoch(1), (1, 4));
    assert_eq!(
        log.end_offset_for_epoch(2),
        (1, 4),
        "an unknown epoch answers with the one below"
    );
    assert_eq!(log.end_offset_for_epoch(3), (3, 6));
    assert_eq!(
        log.end_offset_for_epoch(5),
        (5, 7),
        "the latest epoch ends at the log end"
    );
    assert_eq!(
        log.end_offset_for_epoch(0),
        (0, 0),
        "below the first epoch: its start, as Kafka"
    );
    assert_eq!(log.end_offset_for_epoch(6), (-1, -1));
    assert_eq!(log.end_offset_for_epoch(-1), (-1, -1));

    // A torn tail takes the epochs that started in it with it.
    let mut log = log;
    log.truncate_to(6).unwrap();
    assert_eq!(log.latest_epoch(), Some(3));
    let log = fixture.restart_after_crash(log);
    assert_eq!(log.latest_epoch(), Some(3));
    assert_eq!(log.end_offset_for_epoch(3), (3, 6));
}

#[test]
fn epochs_lost_with_a_torn_tail_are_dropped_on_load() {
    let (mut fixture, mut log) = Fixture::new(LogConfig::default());
    log.append(&batch(2, NOW_MS), 1, NOW_MS).unwrap();
    log.append(&batch(2, NOW_MS), 2, NOW_MS).unwrap(); // epoch 2 starts at 2
    let file = fixture.segment_file(0, ".log");
    let len = fs::metadata(&file).unwrap().len();
    OpenOptions::new()
        .write(true)
        .open(&file)
        .unwrap()
        .set_len(len - 1)
        .unwrap();
    let log = fixture.restart_after_crash(log);
    assert_eq!(log.log_end_offset(), 2);
    assert_eq!(log.latest_epoch(), Some(1));
}

#[test]
fn the_log_start_offset_survives_restarts() {
    let (mut fixture, mut log) = three_segment_log();
    log.delete_records_before(3).unwrap();
    let log = fixture.restart_clean(log);
    assert_eq!(log.log_start_offset(), 3);
    let log = fixture.restart_after_crash(log);
    assert_eq!(log.log_start_offset(), 3);
}

#[test]
fn a_recreated_topic_has_its_old_partition_dir_deleted() {
    let (fixture, log) = three_segment_log();
    fixture.log_dir.write_checkpoints([&log]).unwrap();
    let metadata = fs::read_to_string(fixture.partition_dir().join("partition.metadata")).unwrap();
    assert_eq!(metadata, "version: 0\ntopic_id: ASNFZ4mrze8BI0VniavN7w\n");
    drop(log);

    let log_dir = LogDir::open(fixture.temp.path()).unwrap();
    let recreated_id = Uuid::from_u128(7);
    let logs = log_dir
        .load_all(
            &|_| LogConfig::default(),
            &|_, id| id == recreated_id,
            NOW_MS,
        )
        .unwrap();
    assert!(logs.is_empty());
    assert!(!fixture.partition_dir().exists());
}

#[test]
fn a_log_dir_holds_many_partitions() {
    let temp = tempfile::TempDir::new().unwrap();
    let log_dir = LogDir::open(temp.path()).unwrap();
    let dashed = crate::types::TopicPartition::new("a-b", 0);
    let plain = crate::types::TopicPartition::new("a", 1);
    let mut first = log_dir
        .create_log(&dashed, Uuid::from_u128(1), LogConfig::default(), NOW_MS)
        .unwrap();
    let second = log_dir
        .create_log(&plain, Uuid::from_u128(2), LogConfig::default(), NOW_MS)
        .unwrap();
    first.append(&batch(3, NOW_MS), 0, NOW_MS).unwrap();
    assert!(log_dir
        .create_log(&plain, Uuid::from_u128(2), LogConfig::default(), NOW_MS)
        .is_err());
    first.flush().unwrap();
    log_dir.write_checkpoints([&first, &second]).unwrap();
    log_dir.mark_clean_shutdown(-1).unwrap();
    drop((first, second, log_dir));

    let log_dir = LogDir::open(temp.path()).unwrap();
    assert!(log_dir.was_clean_shutdown());
    let logs = log_dir
        .load_all(&|_| LogConfig::default(), &|_, _| true, NOW_MS)
        .unwrap();
    let found: Vec<_> = logs
        .iter()
        .map(|l| {
            (
                l.topic_partition().clone(),
                l.topic_id(),
                l.log_end_offset(),
            )
        })
        .collect();
    assert_eq!(
        found,
        vec![
            (plain, Uuid::from_u128(2), 0),
            (dashed, Uuid::from_u128(1), 3)
        ]
    );
}

#[test]
fn deleting_a_log_removes_its_dir() {
    let (fixture, log) = three_segment_log();
    fixture.log_dir.delete_log(log).unwrap();
    assert!(!fixture.partition_dir().exists());
    let leftovers: Vec<_> = fs::read_dir(fixture.temp.path()).unwrap().collect();
    assert!(leftovers.is_empty(), "{leftovers:?}");
}

fn flip_byte(file: &std::path::Path, position: u64) {
    let file = OpenOptions::new()
        .read(true)
        .write(true)
        .open(file)
        .unwrap();
    let mut byte = [0u8];
    file.read_exact_at(&mut byte, position).unwrap();
    file.write_all_at(&[byte[0] ^ 0xFF], position).unwrap();
}

/// The clean-shutdown marker carries the broker epoch (Kafka's format), readable
/// before the log dir is opened; an unclean stop, an old empty marker or a -1
/// vouch for none.
#[test]
fn the_clean_shutdown_marker_names_the_broker_epoch() {
    let temp = tempfile::TempDir::new().unwrap();
    assert_eq!(
        LogDir::clean_shutdown_broker_epoch(temp.path()).unwrap(),
        None
    );
    let log_dir = LogDir::open(temp.path()).unwrap();
    log_dir.mark_clean_shutdown(42).unwrap();
    let marker = std::fs::read_to_string(temp.path().join(CLEAN_SHUTDOWN_FILE)).unwrap();
    assert_eq!(marker, r#"{"version":0,"brokerEpoch":42}"#);
    assert_eq!(
        LogDir::clean_shutdown_broker_epoch(temp.path()).unwrap(),
        Some(42)
    );
    // Opening consumes the marker: the next crash leaves none.
    assert!(LogDir::open(temp.path()).unwrap().was_clean_shutdown());
    assert_eq!(
        LogDir::clean_shutdown_broker_epoch(temp.path()).unwrap(),
        None
    );
    for old in ["", "{\"version\":0,\"brokerEpoch\":-1}", "garbage"] {
        std::fs::write(temp.path().join(CLEAN_SHUTDOWN_FILE), old).unwrap();
        assert_eq!(
            LogDir::clean_shutdown_broker_epoch(temp.path()).unwrap(),
            None,
            "{old:?}"
        );
    }
}
