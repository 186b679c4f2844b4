//! Log compaction (`cleanup.policy=compact`), after Kafka's LogCleaner: keeps the
//! latest record of every key in the segments below the first uncleanable offset.
//!
//! A cleaning works from a `CleaningPlan` that the partition hands out under its
//! lock (the inactive segments' files, which only retention, truncation or a swap
//! ever change, and the offsets that bound the work), and does all of its reading
//! and writing without that lock:
//! 1. The offset map: key hash → latest offset, over the dirty records
//!    `[first dirty, first uncleanable)`, bounded by `dedupe_buffer_bytes`; when it
//!    fills, the cleaning ends where it stopped and the rest waits for the next.
//! 2. The segments below that end, in groups that fit one segment, each rewritten
//!    into a scratch dir beside the partition's files, keeping a record only when
//!    no later record of its key is in the map, dropping aborted transactions'
//!    batches, tombstones and spent transaction markers once they have survived
//!    a cleaning and `delete.retention.ms` (Kafka's rules); a batch that keeps
//!    every record is copied byte for byte, one that loses some is rewritten with
//!    its own header, offsets and codec, and a producer's last batch stays, empty
//!    if need be, so that its sequence survives. Then fsynced.
//! 3. `PartitionLog::swap_cleaned`, under the lock, checks that the group's
//!    segments are still the ones planned and swaps (`commit_swap`).
//!
//! Crash safety: the swap's commit point is the rename of the scratch dir
//! `cleaner-tmp` to `cleaner-swap`. Before it, `recover` deletes the scratch dir
//! and the old segments stand; after it, `recover` finishes the swap (old
//! segments of the range deleted, new files moved in, the segment's log last),
//! which is idempotent. No state mixes old and new segments of a range.
//!
//! Reads no clock (the caller passes `now_ms`) and no config but the plan's; the
//! caller throttles I/O through the `io` callback.

#[cfg(test)]
mod tests;

use std::collections::{HashMap, HashSet};
use std::fs::{self, File};
use std::hash::{Hash, Hasher};
use std::io;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::batch::{self, BatchHeader, BATCH_HEADER_SIZE_BYTES};
use super::checkpoint::{sync_dir, write_atomically};
use super::files::{
    offset_file_name, parse_offset_file_name, LOG_FILE_SUFFIX, SEGMENT_FILE_SUFFIXES,
};
use super::open_files::OpenFiles;
use super::segment::{self, Segment};
use super::{control, records, AbortedTxn, LogConfig};

/// The scratch dir a group is cleaned into, inside the partition dir.
pub const CLEANER_TMP_DIR: &str = "cleaner-tmp";
/// The scratch dir renamed: the swap is decided and `recover` finishes it.
pub const CLEANER_SWAP_DIR: &str = "cleaner-swap";
/// In the swap dir: the end of the offset range whose old segments it replaces,
/// and the names of the new segment's files.
const SWAP_RANGE_FILE: &str = "range";

/// Kafka's offset map: a 16-byte key hash and an 8-byte offset per entry.
pub const OFFSET_MAP_ENTRY_BYTES: u64 = 24;
/// Kafka's `log.cleaner.io.buffer.load.factor`: the share of the map's slots used.
pub const OFFSET_MAP_LOAD_FACTOR: f64 = 0.9;

/// What a cleaning needs of the partition, taken under its lock.
#[derive(Clone, Debug)]
pub struct CleaningPlan {
    pub dir: PathBuf,
    /// The log dir's cache of idle segment files, for the cleaned segment.
    pub open_files: Arc<OpenFiles>,
    pub config: LogConfig,
    /// The inactive segments from the log start up to the first uncleanable offset.
    pub segments: Vec<PlannedSegment>,
    pub first_dirty_offset: i64,
    pub first_uncleanable_offset: i64,
    /// Every aborted transaction of the log (its transaction indexes).
    pub aborted: Vec<AbortedTxn>,
    /// Each producer's last data batch's last offset: that batch is kept.
    pub producer_last_offsets: HashMap<i64, i64>,
}

/// One segment as planned: its file, its range and its newest timestamp.
#[derive(Clone, Debug)]
pub struct PlannedSegment {
    pub base_offset: i64,
    /// The next segment's base offset.
    pub end_offset: i64,
    pub log: Arc<File>,
    /// The segment's incarnation (`Segment::file_id`).
    pub file_id: u64,
    pub size_bytes: u64,
    pub largest_timestamp_ms: i64,
}

/// A group of segments cleaned into the scratch dir, waiting for its swap.
#[derive(Debug)]
pub struct CleanedGroup {
    pub base_offset: i64,
    /// The base offset of the segment after the group.
    pub end_offset: i64,
    /// The segments replaced: base offset and file id, to check they still stand.
    pub replaced: Vec<(i64, u64)>,
}

/// What one cleaning did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CleaningStats {
    /// Where the next cleaning's dirty section starts.
    pub end_offset: i64,
    pub bytes_read: u64,
    pub bytes_written: u64,
    /// Records of the cleaned segments' data batches, and how many stayed.
    pub records_read: u64,
    pub records_kept: u64,
    pub groups_swapped: u64,
    /// Entries the offset map held at its fullest.
    pub map_entries: u64,
}

/// Cleans `plan` (steps 1 and 2 above), handing each cleaned group to `swap`,
/// which answers whether it was swapped in; a group that was not (the log
/// changed meanwhile) ends the cleaning. `io` is told of every byte read and
/// written, so that the caller can throttle. The stats' `end_offset` is the new
/// first dirty offset once every group was swapped.
pub fn clean(
    plan: &CleaningPlan,
    dedupe_buffer_bytes: u64,
    now_ms: i64,
    io: &mut dyn FnMut(u64),
    swap: &mut dyn FnMut(CleanedGroup) -> io::Result<bool>,
) -> io::Result<CleaningStats> {
    let mut stats = CleaningStats::default();
    let capacity = map_capacity(dedupe_buffer_bytes);
    let (map, end_offset) = build_offset_map(plan, capacity, &mut stats, io)?;
    stats.map_entries = map.len() as u64;
    stats.end_offset = end_offset;
    let cleanable: Vec<&PlannedSegment> = plan
        .segments
        .iter()
        .filter(|s| s.base_offset < end_offset)
        .collect();
    let mut txns = TxnTracker::new(&plan.aborted);
    for group in group_segments(&cleanable, plan.config.effective_segment_bytes()) {
        let cleaned = clean_group(plan, &group, &map, &mut txns, now_ms, &mut stats, io)?;
        if !swap(cleaned)? {
            return Ok(CleaningStats {
                end_offset: plan.first_dirty_offset,
                ..stats
            });
        }
        stats.groups_swapped += 1;
    }
    Ok(stats)
}

/// The most keys a dedupe buffer of `bytes` maps.
pub fn map_capacity(bytes: u64) -> usize {
    ((bytes / OFFSET_MAP_ENTRY_BYTES) as f64 * OFFSET_MAP_LOAD_FACTOR) as usize
}

/// A 128-bit hash of a key (two SipHash-1-3 digests under different prefixes):
/// two keys sharing one are treated as one, as Kafka treats an MD5 collision.
fn key_hash(key: &[u8]) -> u128 {
    let digest = |salt: u8| {
        let mut hasher = std::collections::hash_map::DefaultHasher::new();
        salt.hash(&mut hasher);
        key.hash(&mut hasher);
        hasher.finish()
    };
    (u128::from(digest(0)) << 64) | u128::from(digest(1))
}

/// Step 1: the latest offset of each key in the dirty section, and where the
/// mapped section ends (the first uncleanable offset, or the batch at which the
/// map was full).
fn build_offset_map(
    plan: &CleaningPlan,
    capacity: usize,
    stats: &mut CleaningStats,
    io: &mut dyn FnMut(u64),
) -> io::Result<(HashMap<u128, i64>, i64)> {
    let mut map = HashMap::new();
    let mut txns = TxnTracker::new(&plan.aborted);
    let (start, end) = (plan.first_dirty_offset, plan.first_uncleanable_offset);
    for segment in plan.segments.iter().filter(|s| s.end_offset > start) {
        let mut batches = BatchReader::new(segment);
        while let Some((header, bytes)) = batches.next_batch()? {
            io(bytes.len() as u64);
            stats.bytes_read += bytes.len() as u64;
            if header.last_offset() < start {
                continue;
            }
            if header.last_offset() >= end {
                return Ok((map, end));
            }
            if header.is_control() {
                txns.on_control(&header, &bytes);
                continue;
            }
            if txns.on_data(&header) {
                continue;
            }
            let count = usize::try_from(header.records_count).unwrap_or(0);
            if map.len() + count > capacity {
                return Ok((map, header.base_offset.max(start)));
            }
            let split = records::split(&bytes, &header).map_err(|why| corrupt(segment, why))?;
            for record in &split.records {
                if let Some(key) = &record.key {
                    map.insert(key_hash(&split.uncompressed[key.clone()]), record.offset);
                }
            }
        }
    }
    Ok((map, end))
}

/// Consecutive segments in groups whose bytes fit one segment and whose offsets
/// fit one segment's relative range (Kafka's `groupSegmentsBySize`).
fn group_segments<'a>(
    segments: &[&'a PlannedSegment],
    segment_bytes: u64,
) -> Vec<Vec<&'a PlannedSegment>> {
    let mut groups: Vec<Vec<&PlannedSegment>> = Vec::new();
    for &segment in segments {
        if let Some(group) = groups.last_mut() {
            let bytes: u64 = group.iter().map(|s| s.size_bytes).sum::<u64>() + segment.size_bytes;
            let span = segment.end_offset - 1 - group[0].base_offset;
            if bytes <= segment_bytes && span <= segment::RELATIVE_OFFSET_MAX {
                group.push(segment);
                continue;
            }
        }
        groups.push(vec![segment]);
    }
    groups
}

/// Step 2 for one group: its kept batches into a new segment in the scratch dir.
fn clean_group(
    plan: &CleaningPlan,
    group: &[&PlannedSegment],
    map: &HashMap<u128, i64>,
    txns: &mut TxnTracker,
    now_ms: i64,
    stats: &mut CleaningStats,
    io: &mut dyn FnMut(u64),
) -> io::Result<CleanedGroup> {
    let base_offset = group[0].base_offset;
    let end_offset = group[group.len() - 1].end_offset;
    let tmp = plan.dir.join(CLEANER_TMP_DIR);
    if tmp.exists() {
        fs::remove_dir_all(&tmp)?;
    }
    fs::create_dir(&tmp)?;
    let mut cleaned = Segment::create(&tmp, base_offset, now_ms, &plan.open_files)?;
    let interval = plan.config.index_interval_bytes;
    for segment in group {
        // Tombstones and spent markers go once they survived a cleaning (they lie
        // below the first dirty offset) and their segment is older than
        // delete.retention.ms.
        let past_horizon =
            now_ms.saturating_sub(segment.largest_timestamp_ms) > plan.config.delete_retention_ms;
        let mut batches = BatchReader::new(segment);
        while let Some((header, bytes)) = batches.next_batch()? {
            io(bytes.len() as u64);
            stats.bytes_read += bytes.len() as u64;
            let removable = past_horizon && header.last_offset() < plan.first_dirty_offset;
            let mut index_entry = None;
            let kept = if header.is_control() {
                let verdict = txns.on_control(&header, &bytes);
                if verdict.discardable && removable {
                    None
                } else {
                    index_entry = verdict.aborted_retained;
                    Some(bytes)
                }
            } else {
                let aborted = txns.on_data(&header);
                let last_of_producer = header.has_producer_id()
                    && plan.producer_last_offsets.get(&header.producer_id)
                        == Some(&header.last_offset());
                keep_records(
                    &header,
                    bytes,
                    map,
                    aborted,
                    removable,
                    last_of_producer,
                    segment,
                    stats,
                )?
            };
            if let Some(kept) = kept {
                let kept_header = BatchHeader::parse_prefix(&kept).expect("a whole batch");
                cleaned.append(&kept, &[(0, kept_header)], interval)?;
                // An aborted transaction's entry follows its marker.
                if let Some(entry) = index_entry {
                    cleaned.append_aborted_txn(entry)?;
                }
                stats.bytes_written += kept.len() as u64;
                io(kept.len() as u64);
            }
        }
    }
    cleaned.on_become_inactive();
    cleaned.sync_now()?;
    drop(cleaned);
    let mut names = Vec::new();
    for entry in fs::read_dir(&tmp)? {
        names.push(entry?.file_name().to_string_lossy().into_owned());
    }
    let manifest = format!("{end_offset}\n{}\n", names.join(" "));
    write_atomically(&tmp.join(SWAP_RANGE_FILE), manifest.as_bytes())?;
    sync_dir(&tmp)?;
    Ok(CleanedGroup {
        base_offset,
        end_offset,
        replaced: group.iter().map(|s| (s.base_offset, s.file_id)).collect(),
    })
}

/// What is kept of a data batch: all of it (the same bytes), some of its records
/// (rewritten), an empty batch (a producer's last), or nothing.
#[allow(clippy::too_many_arguments)]
fn keep_records(
    header: &BatchHeader,
    bytes: Vec<u8>,
    map: &HashMap<u128, i64>,
    aborted: bool,
    removable: bool,
    last_of_producer: bool,
    segment: &PlannedSegment,
    stats: &mut CleaningStats,
) -> io::Result<Option<Vec<u8>>> {
    if aborted {
        return Ok(
            last_of_producer.then(|| batch::with_records(&bytes, &[], 0, header.max_timestamp))
        );
    }
    let split = records::split(&bytes, header).map_err(|why| corrupt(segment, why))?;
    let keep: Vec<&records::RawRecord> = split
        .records
        .iter()
        .filter(|record| {
            let Some(key) = &record.key else {
                // Kafka drops keyless records from a compacted log.
                return false;
            };
            let latest = map
                .get(&key_hash(&split.uncompressed[key.clone()]))
                .is_none_or(|&latest| record.offset >= latest);
            latest && !(record.tombstone && removable)
        })
        .collect();
    stats.records_read += split.records.len() as u64;
    stats.records_kept += keep.len() as u64;
    if keep.len() == split.records.len() {
        return Ok(Some(bytes));
    }
    if keep.is_empty() {
        return Ok(
            last_of_producer.then(|| batch::with_records(&bytes, &[], 0, header.max_timestamp))
        );
    }
    let mut kept_records = Vec::new();
    for record in &keep {
        kept_records.extend_from_slice(&split.uncompressed[record.span.clone()]);
    }
    let compressed = records::compress(header.compression_codec(), &kept_records)
        .map_err(|why| corrupt(segment, why))?;
    let max_timestamp = if header.is_log_append_time() {
        header.max_timestamp
    } else {
        keep.iter()
            .map(|r| r.timestamp)
            .max()
            .unwrap_or(header.max_timestamp)
    };
    Ok(Some(batch::with_records(
        &bytes,
        &compressed,
        keep.len() as i32,
        max_timestamp,
    )))
}

/// Kafka's `CleanedTransactionMetadata`: which batches belong to aborted
/// transactions, and which markers have nothing left to mark.
struct TxnTracker {
    /// Aborted transactions not yet reached, by first offset.
    pending: Vec<AbortedTxn>,
    /// Aborted transactions under way: whether a batch of each was seen.
    ongoing_aborted: HashMap<i64, (AbortedTxn, bool)>,
    /// Producers with a committed (or committing) transaction batch seen.
    ongoing_committed: HashSet<i64>,
}

/// What to do with a control batch.
struct ControlVerdict {
    discardable: bool,
    /// The aborted transaction of a kept abort marker, for the new txn index.
    aborted_retained: Option<AbortedTxn>,
}

impl TxnTracker {
    fn new(aborted: &[AbortedTxn]) -> TxnTracker {
        let mut pending = aborted.to_vec();
        // Popped from the back, earliest first.
        pending.sort_by_key(|a| std::cmp::Reverse(a.first_offset));
        TxnTracker {
            pending,
            ongoing_aborted: HashMap::new(),
            ongoing_committed: HashSet::new(),
        }
    }

    fn reach(&mut self, offset: i64) {
        while self
            .pending
            .last()
            .is_some_and(|a| a.first_offset <= offset)
        {
            let aborted = self.pending.pop().expect("checked");
            self.ongoing_aborted
                .insert(aborted.producer_id, (aborted, false));
        }
    }

    /// Whether a data batch belongs to an aborted transaction.
    fn on_data(&mut self, header: &BatchHeader) -> bool {
        self.reach(header.last_offset());
        if !header.is_transactional() {
            return false;
        }
        match self.ongoing_aborted.get_mut(&header.producer_id) {
            Some((_, seen)) => {
                *seen = true;
                true
            }
            None => {
                self.ongoing_committed.insert(header.producer_id);
                false
            }
        }
    }

    fn on_control(&mut self, header: &BatchHeader, bytes: &[u8]) -> ControlVerdict {
        self.reach(header.last_offset());
        if header.records_count == 0 {
            // Emptied by an earlier cleaning.
            return ControlVerdict {
                discardable: true,
                aborted_retained: None,
            };
        }
        match control::parse_end_txn_marker(bytes, header) {
            Some(marker) if !marker.commit => {
                match self.ongoing_aborted.remove(&header.producer_id) {
                    // Kept until every batch of the transaction is gone.
                    Some((aborted, true)) => ControlVerdict {
                        discardable: false,
                        aborted_retained: Some(aborted),
                    },
                    Some((aborted, false)) => ControlVerdict {
                        discardable: true,
                        aborted_retained: Some(aborted),
                    },
                    None => ControlVerdict {
                        discardable: true,
                        aborted_retained: None,
                    },
                }
            }
            Some(_) => ControlVerdict {
                discardable: !self.ongoing_committed.remove(&header.producer_id),
                aborted_retained: None,
            },
            None => ControlVerdict {
                discardable: false,
                aborted_retained: None,
            },
        }
    }
}

/// The batches of one planned segment, whole and CRC-checked, one at a time.
struct BatchReader<'a> {
    segment: &'a PlannedSegment,
    position: u64,
}

impl<'a> BatchReader<'a> {
    fn new(segment: &'a PlannedSegment) -> BatchReader<'a> {
        BatchReader {
            segment,
            position: 0,
        }
    }

    fn next_batch(&mut self) -> io::Result<Option<(BatchHeader, Vec<u8>)>> {
        let size_bytes = self.segment.size_bytes;
        if self.position >= size_bytes {
            return Ok(None);
        }
        let mut raw = [0u8; BATCH_HEADER_SIZE_BYTES];
        if size_bytes - self.position < raw.len() as u64 {
            return Err(corrupt(self.segment, "a torn batch header".to_string()));
        }
        self.segment.log.read_exact_at(&mut raw, self.position)?;
        let header = BatchHeader::parse(&raw);
        header
            .check_stored()
            .map_err(|error| corrupt(self.segment, format!("{error:?}")))?;
        let size = header.size_bytes() as u64;
        if self.position + size > size_bytes {
            return Err(corrupt(
                self.segment,
                "a batch runs past the segment".to_string(),
            ));
        }
        let mut bytes = vec![0u8; size as usize];
        self.segment.log.read_exact_at(&mut bytes, self.position)?;
        batch::check_crc(&bytes, &header)
            .map_err(|error| corrupt(self.segment, format!("{error:?}")))?;
        self.position += size;
        Ok(Some((header, bytes)))
    }
}

fn corrupt(segment: &PlannedSegment, why: String) -> io::Error {
    super::storage_corruption(format!(
        "cannot clean the segment at {}: {why}",
        segment.base_offset
    ))
}

/// Step 3's file work, under the partition's lock once the group's segments were
/// found unchanged: the commit rename, then the finish `recover` would do.
pub fn commit_swap(dir: &Path) -> io::Result<()> {
    crash_point()?;
    fs::rename(dir.join(CLEANER_TMP_DIR), dir.join(CLEANER_SWAP_DIR))?;
    crash_point()?;
    sync_dir(dir)?;
    finish_swap(dir)
}

#[cfg(test)]
thread_local! {
    /// Tests stop a swap after this many steps, as a crash would.
    pub(crate) static CRASH_AFTER_STEPS: std::cell::Cell<Option<usize>> =
        const { std::cell::Cell::new(None) };
}

/// Where a test may cut a swap short; nothing outside tests.
fn crash_point() -> io::Result<()> {
    #[cfg(test)]
    {
        let crash = CRASH_AFTER_STEPS.with(|steps| match steps.get() {
            Some(0) => true,
            Some(n) => {
                steps.set(Some(n - 1));
                false
            }
            None => false,
        });
        if crash {
            return Err(io::Error::other("a crash in the middle of a swap"));
        }
    }
    Ok(())
}

/// Drops a cleaned group that will not be swapped.
pub fn abandon(dir: &Path) -> io::Result<()> {
    let tmp = dir.join(CLEANER_TMP_DIR);
    if tmp.exists() {
        fs::remove_dir_all(tmp)?;
    }
    Ok(())
}

/// Run before a partition dir is loaded: a cleaning cut short before its commit
/// is dropped, one cut short after it is finished.
pub fn recover(dir: &Path) -> io::Result<()> {
    abandon(dir)?;
    if dir.join(CLEANER_SWAP_DIR).exists() {
        tracing::info!(dir = %dir.display(), "finishing a compaction swap cut short");
        finish_swap(dir)?;
    }
    Ok(())
}

/// Deletes the old segments of the swap's range above its base, then puts each
/// file of the new segment (named in the range file) in place of the old one of
/// the same name, and deletes the old segment's files the new one lacks. Every
/// step is a rename over, or a delete of, a name the manifest decides, so it can
/// be rerun from any point; the segment's log is never missing.
fn finish_swap(dir: &Path) -> io::Result<()> {
    let swap = dir.join(CLEANER_SWAP_DIR);
    if !swap.join(SWAP_RANGE_FILE).exists() {
        // Its last step was cut short: every file is in place.
        fs::remove_dir(&swap)?;
        return sync_dir(dir);
    }
    let manifest = fs::read_to_string(swap.join(SWAP_RANGE_FILE))?;
    let bad = || super::storage_corruption(format!("{}: bad manifest", swap.display()));
    let mut lines = manifest.lines();
    let end_offset: i64 = lines.next().and_then(|l| l.parse().ok()).ok_or_else(bad)?;
    let names: Vec<&str> = lines
        .next()
        .unwrap_or_default()
        .split_whitespace()
        .collect();
    let base_offset = names
        .iter()
        .find_map(|name| parse_offset_file_name(name, LOG_FILE_SUFFIX))
        .ok_or_else(bad)?;
    for entry in fs::read_dir(dir)? {
        let name = entry?.file_name().to_string_lossy().into_owned();
        if let Some(old) = parse_offset_file_name(&name, LOG_FILE_SUFFIX) {
            if old > base_offset && old < end_offset {
                segment::delete_files(dir, old)?;
                crash_point()?;
            }
        }
    }
    for suffix in SEGMENT_FILE_SUFFIXES.iter().rev() {
        let name = offset_file_name(base_offset, suffix);
        if names.contains(&name.as_str()) {
            if swap.join(&name).exists() {
                fs::rename(swap.join(&name), dir.join(&name))?;
            }
        } else {
            match fs::remove_file(dir.join(&name)) {
                Err(error) if error.kind() != io::ErrorKind::NotFound => return Err(error),
                _ => {}
            }
        }
        crash_point()?;
    }
    sync_dir(dir)?;
    fs::remove_file(swap.join(SWAP_RANGE_FILE))?;
    crash_point()?;
    fs::remove_dir(&swap)?;
    sync_dir(dir)
}
