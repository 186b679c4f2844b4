//! The leader epoch cache of one partition and its `leader-epoch-checkpoint` file,
//! after Kafka's `LeaderEpochFileCache`: for each leader epoch, the first offset
//! written in it.
//!
//! Invariant: epochs strictly increase and start offsets never decrease. Every change
//! is written to the checkpoint (atomically, fsynced) before the call returns; changes
//! are rare (a new leader, a truncation, a log start offset move).

use std::fs;
use std::io;
use std::path::{Path, PathBuf};

use super::checkpoint::{self, parse_field, CHECKPOINT_VERSION};
use super::files::LEADER_EPOCH_CHECKPOINT_FILE;

/// Kafka's UNDEFINED_EPOCH and UNDEFINED_EPOCH_OFFSET.
pub const UNDEFINED_EPOCH: i32 = -1;
pub const UNDEFINED_EPOCH_OFFSET: i64 = -1;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EpochEntry {
    pub epoch: i32,
    pub start_offset: i64,
}

pub struct LeaderEpochCache {
    path: PathBuf,
    entries: Vec<EpochEntry>,
}

impl LeaderEpochCache {
    /// Loads the checkpoint in `dir`; a missing file is an empty cache.
    pub fn load(dir: &Path) -> io::Result<LeaderEpochCache> {
        let path = dir.join(LEADER_EPOCH_CHECKPOINT_FILE);
        let entries = match fs::read_to_string(&path) {
            Ok(text) => parse(&text)?,
            Err(error) if error.kind() == io::ErrorKind::NotFound => Vec::new(),
            Err(error) => return Err(error),
        };
        Ok(LeaderEpochCache { path, entries })
    }

    pub fn entries(&self) -> &[EpochEntry] {
        &self.entries
    }

    pub fn latest_epoch(&self) -> Option<i32> {
        self.entries.last().map(|e| e.epoch)
    }

    /// Kafka's `assign`: records that `epoch` starts at `start_offset`, dropping any
    /// entry it contradicts (an epoch as new, or a start offset as late).
    pub fn assign(&mut self, epoch: i32, start_offset: i64) -> io::Result<()> {
        assert!(
            epoch >= 0 && start_offset >= 0,
            "epochs and offsets assigned are non-negative"
        );
        let needed = self
            .entries
            .last()
            .is_none_or(|last| epoch != last.epoch || start_offset < last.start_offset);
        if !needed {
            return Ok(());
        }
        self.entries
            .retain(|e| e.epoch < epoch && e.start_offset < start_offset);
        self.entries.push(EpochEntry {
            epoch,
            start_offset,
        });
        self.write()
    }

    /// Kafka's `endOffsetFor`: the largest epoch <= `requested` and the start offset of
    /// the epoch after it, or `log_end_offset` for the latest epoch. A request below
    /// every known epoch answers (requested, start of the first epoch), as Kafka does,
    /// so a follower truncates to where this log's history begins; an unknown newer
    /// epoch or an empty cache answers (-1, -1).
    pub fn end_offset_for(&self, requested: i32, log_end_offset: i64) -> (i32, i64) {
        let undefined = (UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET);
        if requested == UNDEFINED_EPOCH {
            return undefined;
        }
        if self.latest_epoch() == Some(requested) {
            return (requested, log_end_offset);
        }
        let higher = self.entries.partition_point(|e| e.epoch <= requested);
        let Some(next) = self.entries.get(higher) else {
            return undefined;
        };
        match higher.checked_sub(1) {
            Some(floor) => (self.entries[floor].epoch, next.start_offset),
            None => (requested, next.start_offset),
        }
    }

    /// Kafka's `epochForOffset`: the epoch whose range holds `offset` (the latest
    /// starting at or before it), or None before the first.
    pub fn epoch_for_offset(&self, offset: i64) -> Option<i32> {
        let after = self.entries.partition_point(|e| e.start_offset <= offset);
        after.checked_sub(1).map(|i| self.entries[i].epoch)
    }

    /// Kafka's `truncateFromEnd`: forgets epochs starting at or after `end_offset`.
    pub fn truncate_from_end(&mut self, end_offset: i64) -> io::Result<()> {
        let keep = self
            .entries
            .partition_point(|e| e.start_offset < end_offset);
        if keep == self.entries.len() {
            return Ok(());
        }
        self.entries.truncate(keep);
        self.write()
    }

    /// Kafka's `truncateFromStart`: drops epochs wholly below `start_offset`, moving the
    /// start of the epoch that holds it up to `start_offset`.
    pub fn truncate_from_start(&mut self, start_offset: i64) -> io::Result<()> {
        let below = self
            .entries
            .partition_point(|e| e.start_offset <= start_offset);
        let Some(holding) = below.checked_sub(1) else {
            return Ok(());
        };
        if self.entries[holding].start_offset == start_offset && holding == 0 {
            return Ok(());
        }
        self.entries.drain(..holding);
        self.entries[0].start_offset = start_offset;
        self.write()
    }

    /// Forgets every epoch, as when a log is truncated fully.
    pub fn clear(&mut self) -> io::Result<()> {
        if self.entries.is_empty() {
            return Ok(());
        }
        self.entries.clear();
        self.write()
    }

    fn write(&self) -> io::Result<()> {
        let mut text = format!("{CHECKPOINT_VERSION}\n{}\n", self.entries.len());
        for entry in &self.entries {
            text.push_str(&format!("{} {}\n", entry.epoch, entry.start_offset));
        }
        checkpoint::write_atomically(&self.path, text.as_bytes())
    }
}

fn parse(text: &str) -> io::Result<Vec<EpochEntry>> {
    let mut entries: Vec<EpochEntry> = Vec::new();
    for fields in checkpoint::read_lines(text, 2)? {
        let entry = EpochEntry {
            epoch: parse_field(fields[0])?,
            start_offset: parse_field(fields[1])?,
        };
        if let Some(last) = entries.last() {
            if entry.epoch <= last.epoch || entry.start_offset < last.start_offset {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidData,
                    format!("leader epoch entries out of order: {last:?} then {entry:?}"),
                ));
            }
        }
        entries.push(entry);
    }
    Ok(entries)
}
