//! Storage faults in the real broker: the shim of `compat/faults/fsync_fault.c`,
//! compiled with the system C compiler and loaded into the broker process with
//! `LD_PRELOAD`, makes fsync (and, if asked, writes) of chosen files fail with EIO
//! from the moment the test arms it.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::Command;

/// The shim's source, carried in the test binary so it builds from any working
/// directory.
const SHIM_SOURCE: &str = include_str!("../faults/fsync_fault.c");

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
}

impl FaultShim {
    /// Compiles the shim with `cc` into a fresh temporary directory.
    pub fn build() -> FaultShim {
        let dir = tempfile::tempdir().expect("temp dir for the fault shim");
        let source = dir.path().join("fsync_fault.c");
        std::fs::write(&source, SHIM_SOURCE).expect("write the fault shim's source");
        let library = dir.path().join("libfsyncfault.so");
        let status = Command::new("cc")
            .args(["-shared", "-fPIC", "-O2", "-Wall", "-o"])
            .arg(&library)
            .arg(&source)
            .arg("-ldl")
            .status()
            .expect("run cc (scripts/install-test-deps.sh installs a C compiler)");
        assert!(
            status.success(),
            "compiling the fault shim failed: {status}"
        );
        FaultShim { dir, library }
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

    fn trigger(&self) -> PathBuf {
        self.dir.path().join("trigger")
    }

    fn log(&self) -> PathBuf {
        self.dir.path().join("injected.log")
    }
}
