//! Storage faults for the fault runs (`sluice-faults`), one node at a time:
//!
//! - fsync failures: every node runs with the fault shim of [`super::shim`]
//!   preloaded, aimed at its own data dir and with its own trigger, so that the
//!   fsyncs (and fdatasyncs) of one node's data files can be made to fail with
//!   EIO while the others' go on;
//! - a full disk: every node's data dir is a small tmpfs of its own
//!   (at least [`NODE_DISK_BYTES`]), which a filler file fills up to ENOSPC.
//!
//! The broker's rule for both (`group_commit::StorageHealth` in the broker):
//! the first failed write or fsync of a store takes it offline, it
//! acknowledges nothing more, and the process exits with a failure status and
//! no clean-shutdown marker, so that the next start recovers. The heal is
//! therefore: stop failing, and start the node again if it stopped.
//!
//! Every tmpfs is unmounted when its [`DataDisk`] is dropped (a panic
//! included), and whatever a killed run left mounted is unmounted by the next
//! [`StorageFaults::prepare`]: each mount's source names the process that made
//! it (`DISK_NAME_PREFIX-<pid>-<node>`), as the test networks' names do.
//!
//! Needs root (mount) and a C compiler (the shim), which the test scripts
//! install.

use std::ffi::OsString;
use std::fs::OpenOptions;
use std::io;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use super::shim::{FaultCount, FaultOps, FaultShim};
use crate::cluster::ClusterNode;

/// The size of each node's data dir for a run of up to
/// [`NODE_DISK_RUN_SECONDS`], in bytes: a few times what such a run writes to
/// one node (the logs of every partition it replicates, its offsets and
/// metadata stores, about 4 MiB a minute), so only the filler fills it.
pub const NODE_DISK_BYTES: u64 = 256 * 1024 * 1024;

/// The run length, in seconds, that [`NODE_DISK_BYTES`] is sized for; a
/// longer run gets that much again for each such stretch (an hour: 1.5 GiB a
/// node, in memory, as every tmpfs is).
pub const NODE_DISK_RUN_SECONDS: u64 = 600;

/// The data dir size, in bytes, for a run of `seconds` of faults.
pub fn node_disk_bytes(seconds: u64) -> u64 {
    NODE_DISK_BYTES * seconds.div_ceil(NODE_DISK_RUN_SECONDS).max(1)
}

/// The start of every tmpfs source name a run makes; its process id and the
/// node follow.
const DISK_NAME_PREFIX: &str = "sluicedisk";

/// The file that fills a disk, in its root (beside the broker's directories).
const FILLER_FILE: &str = "disk-full-filler";

/// What one write to the filler writes, in bytes. A short write or ENOSPC
/// means the disk is full; the loop is bounded by the disk's size.
const FILL_CHUNK_BYTES: usize = 1024 * 1024;

/// While a disk is held full, the filler is topped up this often, in ms: the
/// broker may free a little (a deleted temporary file), which it must not get
/// to use.
const FILL_TOP_UP_INTERVAL_MS: u64 = 200;

/// How long a node whose storage failed has to exit by itself, in ms: the
/// broker exits as soon as a store goes offline, but the harness may look a
/// moment before it did.
const STORAGE_EXIT_GRACE_MS: u64 = 3_000;

/// A tmpfs of its own mounted on a directory, unmounted on drop.
pub struct DataDisk {
    mount_point: PathBuf,
    source: String,
    bytes: u64,
}

impl DataDisk {
    /// Mounts a tmpfs of `bytes` on `dir` (created if missing; it should be
    /// empty), its source naming this process and `name`.
    pub fn mount(dir: &Path, name: &str, bytes: u64) -> Result<DataDisk, String> {
        std::fs::create_dir_all(dir).map_err(|e| format!("create {}: {e}", dir.display()))?;
        let mount_point = std::fs::canonicalize(dir)
            .map_err(|e| format!("canonical path of {}: {e}", dir.display()))?;
        let source = format!("{DISK_NAME_PREFIX}-{}-{name}", std::process::id());
        let options = format!("size={bytes},mode=0755");
        let point = mount_point.to_string_lossy();
        run("mount", &["-t", "tmpfs", "-o", &options, &source, &point])?;
        Ok(DataDisk {
            mount_point,
            source,
            bytes,
        })
    }

    /// Where the disk is mounted (without symlinks).
    pub fn path(&self) -> &Path {
        &self.mount_point
    }

    fn filler(&self) -> PathBuf {
        self.mount_point.join(FILLER_FILE)
    }

    /// Writes to the filler until the disk is full; the bytes written.
    pub fn fill(&self) -> io::Result<u64> {
        let mut filler = OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.filler())?;
        fill_until_full(&mut filler, self.bytes)
    }

    /// Keeps the disk full for `duration`, topping the filler up; the bytes
    /// written in all.
    pub fn hold_full(&self, duration: Duration) -> io::Result<u64> {
        let end = Instant::now() + duration;
        let mut written = self.fill()?;
        while Instant::now() < end {
            let left = end.saturating_duration_since(Instant::now());
            std::thread::sleep(left.min(Duration::from_millis(FILL_TOP_UP_INTERVAL_MS)));
            written += self.fill()?;
        }
        Ok(written)
    }

    /// Removes the filler; the bytes it held.
    pub fn drain(&self) -> io::Result<u64> {
        let filler = self.filler();
        let bytes = match std::fs::metadata(&filler) {
            Ok(metadata) => metadata.len(),
            Err(error) if error.kind() == io::ErrorKind::NotFound => return Ok(0),
            Err(error) => return Err(error),
        };
        std::fs::remove_file(&filler)?;
        Ok(bytes)
    }

    /// What the files on the disk hold, in bytes (the filler included).
    pub fn used_bytes(&self) -> u64 {
        tree_bytes(&self.mount_point)
    }
}

impl Drop for DataDisk {
    fn drop(&mut self) {
        let point = self.mount_point.to_string_lossy().into_owned();
        if let Err(error) = unmount(&point) {
            eprintln!("diskfaults: {} ({}): {error}", point, self.source);
        }
    }
}

/// Appends to `file` until the file system says it is full (a short write,
/// nothing written, or ENOSPC), writing at most `limit` bytes and one chunk;
/// the bytes written.
fn fill_until_full(file: &mut impl io::Write, limit: u64) -> io::Result<u64> {
    let chunk = vec![0x5a_u8; FILL_CHUNK_BYTES];
    let mut written = 0u64;
    while written <= limit {
        match file.write(&chunk) {
            Ok(n) => {
                written += n as u64;
                if n < chunk.len() {
                    break;
                }
            }
            Err(error) if is_full(&error) => break,
            Err(error) if error.kind() == io::ErrorKind::Interrupted => {}
            Err(error) => return Err(error),
        }
    }
    Ok(written)
}

fn is_full(error: &io::Error) -> bool {
    // ENOSPC, EDQUOT and EFBIG, as std names them.
    matches!(
        error.kind(),
        io::ErrorKind::StorageFull | io::ErrorKind::QuotaExceeded | io::ErrorKind::FileTooLarge
    )
}

/// The bytes of every file under `dir` (what can be read of it).
fn tree_bytes(dir: &Path) -> u64 {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return 0;
    };
    entries
        .flatten()
        .map(|entry| match entry.file_type() {
            Ok(kind) if kind.is_dir() => tree_bytes(&entry.path()),
            Ok(_) => entry.metadata().map_or(0, |m| m.len()),
            Err(_) => 0,
        })
        .sum()
}

/// The storage faults of one run: the shim every node is started with, and a
/// disk per node, indexed like the nodes.
pub struct StorageFaults {
    shim: FaultShim,
    disks: Vec<DataDisk>,
}

impl StorageFaults {
    /// Unmounts what killed runs left, builds the shim and mounts a disk of
    /// `disk_bytes` on each of `data_dirs` (before the nodes start).
    pub fn prepare(data_dirs: &[PathBuf], disk_bytes: u64) -> Result<StorageFaults, String> {
        remove_leftovers();
        let shim = FaultShim::build();
        let mut disks = Vec::with_capacity(data_dirs.len());
        for (host, dir) in data_dirs.iter().enumerate() {
            disks.push(DataDisk::mount(dir, &host.to_string(), disk_bytes)?);
        }
        Ok(StorageFaults { shim, disks })
    }

    fn name(host: usize) -> String {
        format!("host-{host}")
    }

    /// The environment node `host` runs with: the shim, aimed at its data dir
    /// and armed by its own trigger.
    pub fn node_env(&self, host: usize) -> Vec<(String, OsString)> {
        self.shim.env_for(
            &Self::name(host),
            self.disks[host].path(),
            FaultOps::Sync,
            FaultCount::Every,
        )
    }

    /// From now on, `count` fsyncs (and fdatasyncs, sync_file_ranges) of node
    /// `host`'s data files fail with EIO.
    pub fn fail_fsyncs(&self, host: usize, count: FaultCount) {
        self.shim.arm_for(&Self::name(host), count);
    }

    /// Node `host`'s fsyncs succeed again.
    pub fn stop_failing_fsyncs(&self, host: usize) {
        self.shim.disarm_for(&Self::name(host));
    }

    /// The fsync failures injected into node `host` so far, as "<call> <path>".
    pub fn fsync_failures(&self, host: usize) -> Vec<String> {
        self.shim.injected_for(&Self::name(host))
    }

    /// Node `host`'s disk.
    pub fn disk(&self, host: usize) -> &DataDisk {
        &self.disks[host]
    }

    /// The fsync-fail fault: `count` fsyncs of the data files of `node` (on
    /// host `host`) fail for `hold`, then succeed again, and the node is
    /// started again if it stopped. Says what it does with `log`; returns the
    /// fault's target, for the history.
    pub fn fsync_fail(
        &self,
        node: &mut ClusterNode,
        host: usize,
        count: FaultCount,
        hold: Duration,
        log: &dyn Fn(&str),
    ) -> String {
        let which = match count {
            FaultCount::Every => "every fsync".to_string(),
            FaultCount::First(1) => "the first fsync (reported once)".to_string(),
            FaultCount::First(n) => format!("the first {n} fsyncs"),
        };
        let target = format!(
            "node {}: {which} of its data files fails with EIO",
            node.node_id
        );
        let before = self.fsync_failures(host).len();
        log(&format!("fsync-fail: {target}"));
        self.fail_fsyncs(host, count);
        std::thread::sleep(hold);
        self.stop_failing_fsyncs(host);
        let failures = self.fsync_failures(host);
        let injected = failures.get(before..).unwrap_or_default();
        log(&format!(
            "heal node {}'s fsyncs: {} failed{}",
            node.node_id,
            injected.len(),
            injected
                .first()
                .map(|first| format!(", the first: {first}"))
                .unwrap_or_default()
        ));
        restart_logged(node, !injected.is_empty(), log);
        target
    }

    /// The disk-full fault: the data disk of `node` (on host `host`) is kept
    /// full for `hold`, then the filler is removed, and the node is started
    /// again if it stopped. Says what it does with `log`; returns the fault's
    /// target, for the history.
    pub fn disk_full(
        &self,
        node: &mut ClusterNode,
        host: usize,
        hold: Duration,
        log: &dyn Fn(&str),
    ) -> String {
        let disk = self.disk(host);
        let target = format!(
            "node {}: its data disk ({} MiB) full",
            node.node_id,
            disk.bytes / MIB
        );
        log(&format!(
            "disk-full: {target} (it held {:.1} MiB)",
            disk.used_bytes() as f64 / MIB as f64
        ));
        if let Err(error) = disk.hold_full(hold) {
            log(&format!(
                "filling node {}'s disk failed: {error}",
                node.node_id
            ));
        }
        match disk.drain() {
            Ok(bytes) => log(&format!(
                "heal node {}'s disk: the filler ({:.1} MiB) removed",
                node.node_id,
                bytes as f64 / MIB as f64
            )),
            Err(error) => log(&format!(
                "heal node {}'s disk: removing the filler failed: {error}",
                node.node_id
            )),
        }
        restart_logged(node, true, log);
        target
    }
}

/// Bytes in a MiB, for the log.
const MIB: u64 = 1024 * 1024;

/// `restart_if_stopped`, saying what happened with `log`.
fn restart_logged(node: &mut ClusterNode, expect_exit: bool, log: &dyn Fn(&str)) {
    match restart_if_stopped(node, expect_exit) {
        Ok(done) => log(&done),
        Err(error) => log(&format!("node {} did not come back: {error}", node.node_id)),
    }
}

/// After a storage fault was healed: node `node` started again if it stopped
/// (or stops within [`STORAGE_EXIT_GRACE_MS`], as it does once its storage
/// went offline), then waited for until it serves. What happened, for the
/// log; an error if it did not come back.
pub fn restart_if_stopped(node: &mut ClusterNode, expect_exit: bool) -> Result<String, String> {
    let grace = if expect_exit {
        STORAGE_EXIT_GRACE_MS
    } else {
        0
    };
    let deadline = Instant::now() + Duration::from_millis(grace);
    let status = loop {
        if let Some(status) = node.exited() {
            break Some(status);
        }
        if Instant::now() >= deadline {
            break None;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let Some(status) = status else {
        return Ok(format!("node {} still running", node.node_id));
    };
    // As the kill fault does; the process is gone already.
    node.kill9();
    node.spawn();
    node.try_wait_serving()?;
    Ok(format!(
        "node {} had stopped ({status}); restarted, serving",
        node.node_id
    ))
}

/// Unmounts the disks of runs whose process is gone.
pub fn remove_leftovers() {
    let Ok(table) = std::fs::read_to_string("/proc/self/mountinfo") else {
        return;
    };
    // Innermost first, should a disk hold another.
    let mut points: Vec<String> = table
        .lines()
        .filter_map(parse_mount)
        .filter(|mount| mount.fstype == "tmpfs")
        .filter_map(|mount| {
            let pid = leftover_pid(&mount.source)?;
            (!Path::new(&format!("/proc/{pid}")).exists()).then_some(mount.point)
        })
        .collect();
    points.sort_by_key(|point| std::cmp::Reverse(point.len()));
    for point in points {
        match unmount(&point) {
            Ok(()) => {
                let _ = std::fs::remove_dir(&point);
                eprintln!("diskfaults: unmounted {point}, left by a run that is gone");
            }
            Err(error) => eprintln!("diskfaults: {point}: {error}"),
        }
    }
}

/// The process id in a disk's source name (`sluicedisk-<pid>-<node>`), if it
/// is one.
fn leftover_pid(source: &str) -> Option<u32> {
    let rest = source.strip_prefix(DISK_NAME_PREFIX)?.strip_prefix('-')?;
    let (pid, node) = rest.split_once('-')?;
    (!node.is_empty()).then_some(())?;
    pid.parse().ok()
}

/// One line of /proc/self/mountinfo, the fields used here.
#[derive(Debug, PartialEq, Eq)]
struct Mount {
    point: String,
    fstype: String,
    source: String,
}

/// "36 35 98:0 /root /point opts [optional...] - fstype source superopts".
fn parse_mount(line: &str) -> Option<Mount> {
    let fields: Vec<&str> = line.split(' ').collect();
    let point = *fields.get(4)?;
    let separator = fields.iter().skip(6).position(|f| *f == "-")? + 6;
    Some(Mount {
        point: unescape(point),
        fstype: unescape(fields.get(separator + 1)?),
        source: unescape(fields.get(separator + 2)?),
    })
}

/// mountinfo writes space, tab, newline and backslash as `\ooo` (octal).
fn unescape(field: &str) -> String {
    let bytes = field.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let octal = bytes
            .get(i + 1..i + 4)
            .filter(|digits| bytes[i] == b'\\' && digits.iter().all(|d| (b'0'..=b'7').contains(d)));
        match octal.and_then(|d| u8::from_str_radix(std::str::from_utf8(d).ok()?, 8).ok()) {
            Some(byte) => {
                out.push(byte);
                i += 4;
            }
            None => {
                out.push(bytes[i]);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Unmounts `point`; if it is busy, detaches it (it goes once unused).
fn unmount(point: &str) -> Result<(), String> {
    run("umount", &[point]).or_else(|_| run("umount", &["-l", point]))
}

/// Runs a command that must succeed.
fn run(program: &str, args: &[&str]) -> Result<(), String> {
    let output = Command::new(program)
        .args(args)
        .output()
        .map_err(|error| format!("{program}: {error} (the test scripts install it)"))?;
    if output.status.success() {
        Ok(())
    } else {
        Err(format!(
            "{program} {}: {}",
            args.join(" "),
            String::from_utf8_lossy(&output.stderr).trim()
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mountinfo_lines_give_point_type_and_source() {
        let line = "46 27 0:40 / /tmp/.tmpA\\040b/node-1 rw,relatime shared:1 - tmpfs sluicedisk-123-0 rw,size=4096k";
        assert_eq!(
            parse_mount(line),
            Some(Mount {
                point: "/tmp/.tmpA b/node-1".to_string(),
                fstype: "tmpfs".to_string(),
                source: "sluicedisk-123-0".to_string(),
            })
        );
        let no_optional = "22 1 8:1 / / rw - ext4 /dev/sda1 rw";
        assert_eq!(
            parse_mount(no_optional).map(|m| (m.point, m.fstype)),
            Some(("/".to_string(), "ext4".to_string()))
        );
        assert_eq!(parse_mount("garbage"), None);
    }

    #[test]
    fn escapes_are_undone_and_other_backslashes_kept() {
        assert_eq!(unescape("a\\011b\\012c\\134d"), "a\tb\nc\\d");
        assert_eq!(unescape("a\\9b\\"), "a\\9b\\");
    }

    #[test]
    fn only_this_harness_names_are_leftovers() {
        assert_eq!(leftover_pid("sluicedisk-4242-3"), Some(4242));
        assert_eq!(leftover_pid("sluicedisk-4242-"), None);
        assert_eq!(leftover_pid("sluicedisk-x-3"), None);
        assert_eq!(leftover_pid("tmpfs"), None);
        assert_eq!(leftover_pid("sluicediskette-1-2"), None);
    }

    /// A writer that takes `room` bytes and then answers as a full disk does.
    struct Room {
        room: u64,
        taken: u64,
        error: io::ErrorKind,
    }

    impl io::Write for Room {
        fn write(&mut self, buffer: &[u8]) -> io::Result<usize> {
            let left = self.room - self.taken;
            if left == 0 {
                return Err(io::Error::from(self.error));
            }
            let n = (buffer.len() as u64).min(left);
            self.taken += n;
            Ok(n as usize)
        }

        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn filling_stops_at_a_full_disk_and_at_the_limit() {
        let room = 3 * FILL_CHUNK_BYTES as u64 + 17;
        let mut full = Room {
            room,
            taken: 0,
            error: io::ErrorKind::StorageFull,
        };
        assert_eq!(fill_until_full(&mut full, u64::MAX).expect("fill"), room);
        // A second fill of a full disk writes nothing.
        assert_eq!(fill_until_full(&mut full, u64::MAX).expect("fill"), 0);
        let mut endless = Room {
            room: u64::MAX,
            taken: 0,
            error: io::ErrorKind::StorageFull,
        };
        let limit = 2 * FILL_CHUNK_BYTES as u64;
        let written = fill_until_full(&mut endless, limit).expect("fill");
        assert!(written <= limit + FILL_CHUNK_BYTES as u64, "{written}");
        let mut broken = Room {
            room: 1,
            taken: 1,
            error: io::ErrorKind::PermissionDenied,
        };
        assert!(fill_until_full(&mut broken, u64::MAX).is_err());
    }

    #[test]
    fn a_tree_counts_its_files_bytes() {
        let dir = tempfile::tempdir().expect("temp dir");
        std::fs::create_dir_all(dir.path().join("a/b")).expect("dirs");
        std::fs::write(dir.path().join("a/b/one"), [0u8; 10]).expect("file");
        std::fs::write(dir.path().join("two"), [0u8; 5]).expect("file");
        assert_eq!(tree_bytes(dir.path()), 15);
    }
}
