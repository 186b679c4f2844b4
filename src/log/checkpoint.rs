//! Kafka's small text files, written atomically: a temp file is written, fsynced and
//! renamed over the old one, then the directory is fsynced, so a reader sees either the
//! old contents or the new, never a mix, and the new ones survive power loss once the
//! write returns.
//!
//! Offset checkpoints (`recovery-point-offset-checkpoint`, `log-start-offset-checkpoint`)
//! hold `0\n<count>\n<topic> <partition> <offset>\n...`.

use std::collections::HashMap;
use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::path::Path;

use super::files::TEMP_FILE_SUFFIX;
use crate::types::TopicPartition;

/// The only checkpoint file version Kafka writes.
pub const CHECKPOINT_VERSION: u32 = 0;

/// Replaces `path` with `contents` atomically and durably.
pub fn write_atomically(path: &Path, contents: &[u8]) -> io::Result<()> {
    replace_through_temp(path, contents, true)?;
    match path.parent() {
        Some(dir) => sync_dir(dir),
        None => Ok(()),
    }
}

/// Like `write_atomically` but without any fsync: the file is whole or absent after a
/// crash only once the caller has synced the returned file and then `path`'s directory.
/// For files whose loss a reader survives (a producer snapshot is checked by its CRC and
/// only trusted below the recovery point), so that writing them never waits on a disk.
pub fn write_atomically_unsynced(path: &Path, contents: &[u8]) -> io::Result<File> {
    replace_through_temp(path, contents, false)
}

/// Writes `contents` to `path`'s temp file (fsynced when `sync`) and renames it over
/// `path`; returns the open file.
fn replace_through_temp(path: &Path, contents: &[u8], sync: bool) -> io::Result<File> {
    let mut temp_name = path.as_os_str().to_owned();
    temp_name.push(TEMP_FILE_SUFFIX);
    let temp = Path::new(&temp_name);
    let mut file = OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .open(temp)?;
    file.write_all(contents)?;
    if sync {
        file.sync_all()?;
    }
    fs::rename(temp, path)?;
    Ok(file)
}

/// Makes file creations, renames and removals in `dir` durable.
pub fn sync_dir(dir: &Path) -> io::Result<()> {
    File::open(dir)?.sync_all()
}

/// Writes an offset checkpoint for `entries`.
pub fn write_offsets(path: &Path, entries: &[(TopicPartition, i64)]) -> io::Result<()> {
    let mut text = format!("{CHECKPOINT_VERSION}\n{}\n", entries.len());
    for (tp, offset) in entries {
        text.push_str(&format!("{} {} {offset}\n", tp.topic, tp.partition));
    }
    write_atomically(path, text.as_bytes())
}

/// Reads an offset checkpoint; a missing file is an empty one. A malformed file is an
/// `InvalidData` error for the caller to decide on.
pub fn read_offsets(path: &Path) -> io::Result<HashMap<TopicPartition, i64>> {
    let text = match fs::read_to_string(path) {
        Ok(text) => text,
        Err(error) if error.kind() == io::ErrorKind::NotFound => return Ok(HashMap::new()),
        Err(error) => return Err(error),
    };
    let lines = read_lines(&text, 3)?;
    let mut offsets = HashMap::with_capacity(lines.len());
    for fields in lines {
        let partition = parse_field(fields[1])?;
        let offset = parse_field(fields[2])?;
        offsets.insert(TopicPartition::new(fields[0], partition), offset);
    }
    Ok(offsets)
}

/// Checks the version and count header lines and splits each entry line into
/// `fields_per_line` whitespace-separated fields.
pub fn read_lines(text: &str, fields_per_line: usize) -> io::Result<Vec<Vec<&str>>> {
    let mut lines = text.lines();
    let version: u32 = parse_field(lines.next().unwrap_or_default())?;
    if version != CHECKPOINT_VERSION {
        return Err(invalid(format!("unsupported checkpoint version {version}")));
    }
    let count: usize = parse_field(lines.next().unwrap_or_default())?;
    let entries: Vec<Vec<&str>> = lines
        .filter(|line| !line.trim().is_empty())
        .map(|line| line.split_whitespace().collect())
        .collect();
    if entries.len() != count || entries.iter().any(|f| f.len() != fields_per_line) {
        return Err(invalid(format!(
            "expected {count} lines of {fields_per_line} fields"
        )));
    }
    Ok(entries)
}

pub fn parse_field<T: std::str::FromStr>(field: &str) -> io::Result<T> {
    field
        .trim()
        .parse()
        .map_err(|_| invalid(format!("bad checkpoint field {field:?}")))
}

fn invalid(message: String) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, message)
}
