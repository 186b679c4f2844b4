//! Storage faults in the real broker: the shim of `compat/shims/fsync_fault.c`,
//! compiled with the system C compiler and loaded into the broker process with
//! `LD_PRELOAD`, makes fsync (and, if asked, writes) of chosen files fail with EIO
//! from the moment the test arms it.
//!
//! One shim can serve several brokers, each armed on its own: `env_for`,
//! `arm_for`, `disarm_for` and `injected_for` take a name (a node's, say) that
//! gives the broker its own trigger file and failure log.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicU32, Ordering};

/// The shim's source, carried in the test binary so it builds from any working
/// directory.
const SHIM_SOURCE: &str = include_str!("../../../shims/fsync_fault.c");

/// Which calls the shim fails once armed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FaultOps {
    /// fsync, fdatasync and sync_file_range.
    Sync,
    /// write, pwrite and pwrite64.
    Write,
    /// Both.
    SyncAndWrite,
}

impl FaultOps {
    fn env_value(self) -> &'static str {
        match self {
            FaultOps::Sync => "sync",
            FaultOps::Write => "write",
            FaultOps::SyncAndWrite => "sync,write",
        }
    }
}

/// How many matching calls fail once the shim is armed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FaultCount {
    /// Only the first `n`, then every call succeeds again: how Linux reports a
    /// writeback error to one fsync and then forgets it, although the data it
    /// could not write may be gone.
    First(u32),
    /// Every matching call while the trigger file exists: a disk that stays broken.
    Every,
}

/// A compiled shim in its own temporary directory, with its trigger file and the
/// log of the failures it injected.
pub struct FaultShim {
    dir: tempfile::TempDir,
    library: PathBuf,
    /// The last arming number given by `arm_for` (each gets a fresh budget).
    armings: AtomicU32,
}

impl FaultShim {
    /// Compiles the shim with `cc` into a fresh temporary directory.
    pub fn build() -> FaultShim {
        let (dir, library) = compile_shim(SHIM_SOURCE, "fsync_fault");
        FaultShim {
            dir,
            library,
            armings: AtomicU32::new(0),
        }
    }

    /// The environment that loads the shim into a broker and aims it at files
    /// whose path contains `path`. The path must be absolute and free of
    /// symlinks (it need not exist yet), since the shim compares it with the
    /// kernel's name for each file descriptor.
    pub fn env(&self, path: &Path, ops: FaultOps, count: FaultCount) -> Vec<(String, OsString)> {
        assert!(path.is_absolute(), "the faulted path must be absolute");
        let count = match count {
            FaultCount::First(n) => n.to_string(),
            FaultCount::Every => "0".to_string(),
        };
        vec![
            ("LD_PRELOAD".to_string(), self.library.clone().into()),
            ("SLUICE_FAULT_PATH".to_string(), path.into()),
            ("SLUICE_FAULT_TRIGGER".to_string(), self.trigger().into()),
            ("SLUICE_FAULT_OPS".to_string(), ops.env_value().into()),
            ("SLUICE_FAULT_COUNT".to_string(), count.into()),
            ("SLUICE_FAULT_LOG".to_string(), self.log().into()),
        ]
    }

    /// From now on, matching calls in a broker started with `env` fail.
    pub fn arm(&self) {
        std::fs::write(self.trigger(), b"").expect("create the fault trigger");
    }

    /// Matching calls succeed again.
    pub fn disarm(&self) {
        match std::fs::remove_file(self.trigger()) {
            Ok(()) => {}
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => {}
            Err(error) => panic!("remove the fault trigger: {error}"),
        }
    }

    /// One "<call> <path>" line per failure the shim injected so far.
    pub fn injected(&self) -> Vec<String> {
        match std::fs::read_to_string(self.log()) {
            Ok(text) => text.lines().map(str::to_string).collect(),
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => Vec::new(),
            Err(error) => panic!("read the fault log: {error}"),
        }
    }

    /// Like `env`, for the broker called `name` (letters, digits, '-' and '_'):
    /// it has its own trigger and failure log, so that brokers sharing the
    /// shim are armed one at a time. `count` is the budget of an arming that
    /// does not give its own.
    pub fn env_for(
        &self,
        name: &str,
        path: &Path,
        ops: FaultOps,
        count: FaultCount,
    ) -> Vec<(String, OsString)> {
        let mut env = self.env(path, ops, count);
        for (key, value) in &mut env {
            match key.as_str() {
                "SLUICE_FAULT_TRIGGER" => *value = self.trigger_for(name).into(),
                "SLUICE_FAULT_LOG" => *value = self.log_for(name).into(),
                _ => {}
            }
        }
        env
    }

    /// From now on, matching calls in the broker started with `env_for(name,
    /// ..)` fail, `count` of them (counted from this arming, whatever earlier
    /// armings of the same process spent).
    pub fn arm_for(&self, name: &str, count: FaultCount) {
        let arming = self.armings.fetch_add(1, Ordering::Relaxed) + 1;
        let budget = match count {
            FaultCount::First(n) => n,
            FaultCount::Every => 0,
        };
        // Written aside and renamed, so the broker never reads a half-written
        // trigger.
        let trigger = self.trigger_for(name);
        let written = trigger.with_extension("new");
        std::fs::write(&written, format!("{budget} {arming}\n"))
            .and_then(|()| std::fs::rename(&written, &trigger))
            .expect("create the fault trigger");
    }

    /// Matching calls in the broker called `name` succeed again.
    pub fn disarm_for(&self, name: &str) {
        remove_if_there(&self.trigger_for(name)).expect("remove the fault trigger");
    }

    /// One "<call> <path>" line per failure the shim injected so far into the
    /// broker called `name`.
    pub fn injected_for(&self, name: &str) -> Vec<String> {
        read_lines(&self.log_for(name)).expect("read the fault log")
    }

    fn trigger(&self) -> PathBuf {
        self.dir.path().join("trigger")
    }

    fn log(&self) -> PathBuf {
        self.dir.path().join("injected.log")
    }

    fn trigger_for(&self, name: &str) -> PathBuf {
        assert!(
            !name.is_empty()
                && name
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_'),
            "a shim target's name is letters, digits, '-' and '_': {name:?}"
        );
        self.dir.path().join(format!("trigger-{name}"))
    }

    fn log_for(&self, name: &str) -> PathBuf {
        self.dir.path().join(format!("injected-{name}.log"))
    }
}

/// Compiles a shim's C `source` with `cc` into `lib<name>.so` in a fresh
/// temporary directory: the directory (removed when dropped) and the library.
pub(crate) fn compile_shim(source: &str, name: &str) -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().expect("temp dir for a fault shim");
    let source_file = dir.path().join(format!("{name}.c"));
    std::fs::write(&source_file, source).expect("write a fault shim's source");
    let library = dir.path().join(format!("lib{name}.so"));
    let status = Command::new("cc")
        .args(["-shared", "-fPIC", "-O2", "-Wall", "-o"])
        .arg(&library)
        .arg(&source_file)
        .arg("-ldl")
        .status()
        .expect("run cc (scripts/install-test-deps.sh installs a C compiler)");
    assert!(
        status.success(),
        "compiling the {name} shim failed: {status}"
    );
    (dir, library)
}

fn remove_if_there(path: &Path) -> std::io::Result<()> {
    match std::fs::remove_file(path) {
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => Ok(()),
        other => other,
    }
}

fn read_lines(path: &Path) -> std::io::Result<Vec<String>> {
    match std::fs::read_to_string(path) {
        Ok(text) => Ok(text.lines().map(str::to_string).collect()),
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => Ok(Vec::new()),
        Err(error) => Err(error),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Whether `sync FILE` (one fsync of the file) succeeds under the shim
    /// armed for `name`.
    fn fsync_succeeds(env: &[(String, OsString)], file: &Path) -> bool {
        Command::new("sync")
            .arg(file)
            .envs(env.iter().map(|(key, value)| (key, value)))
            .stderr(std::process::Stdio::null())
            .status()
            .expect("run sync")
            .success()
    }

    #[test]
    fn each_named_broker_is_armed_on_its_own_with_a_budget_per_arming() {
        let shim = FaultShim::build();
        let dir = tempfile::tempdir().expect("temp dir");
        let data = std::fs::canonicalize(dir.path()).expect("canonical dir");
        let file = data.join("segment");
        std::fs::write(&file, b"data").expect("write the file");
        let one = shim.env_for("node-1", &data, FaultOps::Sync, FaultCount::Every);
        let two = shim.env_for("node-2", &data, FaultOps::Sync, FaultCount::Every);
        assert!(fsync_succeeds(&one, &file), "not armed yet");

        shim.arm_for("node-1", FaultCount::Every);
        assert!(!fsync_succeeds(&one, &file), "node-1 armed");
        assert!(fsync_succeeds(&two, &file), "node-2 is not");
        shim.disarm_for("node-1");
        assert!(fsync_succeeds(&one, &file), "node-1 disarmed");
        assert_eq!(shim.injected_for("node-1").len(), 1);
        assert!(shim.injected_for("node-2").is_empty());

        // Each `sync` is a process of its own, so its one fsync is always the
        // first of the arming: the budget is what it sees.
        shim.arm_for("node-2", FaultCount::First(1));
        assert!(
            !fsync_succeeds(&two, &file),
            "the first fsync of the arming fails"
        );
        shim.disarm_for("node-2");
        assert!(shim.injected_for("node-2")[0].starts_with("fsync "));
    }

    /// A process that fsyncs FILE (its first argument) for every line it reads,
    /// and answers "ok" or "failed" to each.
    const FSYNC_LOOP: &str = r#"
#include <fcntl.h>
#include <stdio.h>
#include <unistd.h>
int main(int argc, char **argv) {
    if (argc != 2) return 2;
    int fd = open(argv[1], O_WRONLY);
    char line[16];
    if (fd < 0) return 2;
    while (fgets(line, sizeof line, stdin) != NULL) {
        printf("%s\n", fsync(fd) == 0 ? "ok" : "failed");
        fflush(stdout);
    }
    return 0;
}
"#;

    #[test]
    fn a_new_arming_of_one_process_gets_a_fresh_budget() {
        use std::io::{BufRead, BufReader, Write};
        let shim = FaultShim::build();
        let dir = tempfile::tempdir().expect("temp dir");
        let data = std::fs::canonicalize(dir.path()).expect("canonical dir");
        let source = data.join("fsync_loop.c");
        let program = data.join("fsync_loop");
        std::fs::write(&source, FSYNC_LOOP).expect("write the program");
        let built = Command::new("cc")
            .arg("-o")
            .arg(&program)
            .arg(&source)
            .status()
            .expect("run cc");
        assert!(built.success(), "cc failed: {built}");
        let file = data.join("segment");
        std::fs::write(&file, b"data").expect("write the file");
        let env = shim.env_for("node-1", &data, FaultOps::Sync, FaultCount::Every);
        let mut child = Command::new(&program)
            .arg(&file)
            .envs(env.iter().map(|(key, value)| (key, value)))
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::null())
            .spawn()
            .expect("start the fsync loop");
        let mut input = child.stdin.take().expect("stdin");
        let mut output = BufReader::new(child.stdout.take().expect("stdout"));
        let mut fsync = || {
            writeln!(input, "fsync").expect("ask for an fsync");
            let mut answer = String::new();
            output.read_line(&mut answer).expect("read the answer");
            answer.trim() == "ok"
        };
        assert!(fsync());
        shim.arm_for("node-1", FaultCount::First(1));
        assert!(!fsync(), "the first fsync of the arming fails");
        assert!(fsync(), "and only the first");
        shim.disarm_for("node-1");
        shim.arm_for("node-1", FaultCount::First(1));
        assert!(!fsync(), "a new arming fails the first again");
        assert!(fsync());
        shim.arm_for("node-1", FaultCount::Every);
        assert!(!fsync() && !fsync(), "every fsync fails");
        shim.disarm_for("node-1");
        assert!(fsync());
        assert_eq!(shim.injected_for("node-1").len(), 4);
        child.kill().expect("stop the fsync loop");
        child.wait().expect("reap the fsync loop");
    }
}
