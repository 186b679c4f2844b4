//! Clock jumps in the real broker: the shim of `compat/shims/clock_jump.c`,
//! compiled with the system C compiler and loaded with `LD_PRELOAD`, adds an
//! offset to every wall-clock read of the process (`SystemTime::now()` among
//! them), which the test changes at any moment. The monotonic clock, which
//! timers read, is left alone, as a real clock step leaves it.
//!
//! One shim serves several brokers: each name (a node's, say) gets its own
//! offset file.

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use super::shim::compile_shim;

/// The shim's source, carried in the test binary so it builds from any working
/// directory.
const SHIM_SOURCE: &str = include_str!("../../../shims/clock_jump.c");

/// A compiled clock shim in its own temporary directory, with the offset
/// files of the brokers it serves.
pub struct ClockShim {
    dir: tempfile::TempDir,
    library: PathBuf,
}

impl ClockShim {
    /// Compiles the shim with `cc` into a fresh temporary directory.
    pub fn build() -> ClockShim {
        let (dir, library) = compile_shim(SHIM_SOURCE, "clock_jump");
        ClockShim { dir, library }
    }

    /// The library to preload.
    pub fn library(&self) -> &Path {
        &self.library
    }

    /// The environment (besides `LD_PRELOAD`) of a broker whose clock is
    /// `name`'s; its offset starts at zero. Call before the broker starts:
    /// the shim maps the file when it loads.
    pub fn env_for(&self, name: &str) -> Vec<(String, OsString)> {
        self.set_offset_ms(name, 0);
        vec![(
            "SLUICE_CLOCK_OFFSET_FILE".to_string(),
            self.offset_file(name).into(),
        )]
    }

    /// From now on, `name`'s broker reads the wall clock `offset_ms` ms off
    /// (negative: behind). Zero puts it right again.
    pub fn set_offset_ms(&self, name: &str, offset_ms: i64) {
        // One write of the whole 8 bytes at offset 0: the shim's mapping sees
        // the new value at once (a shared mapping of the same page).
        use std::os::unix::fs::FileExt;
        let file = std::fs::OpenOptions::new()
            .create(true)
            .write(true)
            .truncate(false)
            .open(self.offset_file(name))
            .expect("open a clock offset file");
        file.write_all_at(&offset_ms.to_le_bytes(), 0)
            .expect("write a clock offset file");
    }

    fn offset_file(&self, name: &str) -> PathBuf {
        self.dir.path().join(format!("clock-offset-{name}"))
    }
}

/// Adds `library` to the `LD_PRELOAD` of `env` (or sets it).
pub fn preload_too(env: &mut Vec<(String, OsString)>, library: &Path) {
    match env.iter_mut().find(|(key, _)| key == "LD_PRELOAD") {
        Some((_, value)) => {
            value.push(":");
            value.push(library);
        }
        None => env.push(("LD_PRELOAD".to_string(), library.into())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::process::Command;

    /// The seconds since the epoch that `date` prints under `env`.
    fn date_seconds(env: &[(String, OsString)]) -> i64 {
        let output = Command::new("date")
            .arg("+%s")
            .envs(env.iter().map(|(k, v)| (k, v)))
            .output()
            .expect("run date");
        assert!(output.status.success());
        String::from_utf8_lossy(&output.stdout)
            .trim()
            .parse()
            .expect("date prints seconds")
    }

    #[test]
    fn a_process_reads_the_wall_clock_off_by_the_offset_set_for_it() {
        let shim = ClockShim::build();
        let mut env = shim.env_for("node-a");
        preload_too(&mut env, shim.library());
        let now = || {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .expect("after the epoch")
                .as_secs() as i64
        };
        let day_s = 86_400;
        assert!((date_seconds(&env) - now()).abs() <= 2, "no offset yet");
        shim.set_offset_ms("node-a", day_s * 1000);
        assert!(
            (date_seconds(&env) - now() - day_s).abs() <= 2,
            "a day ahead"
        );
        shim.set_offset_ms("node-a", -day_s * 1000);
        assert!(
            (date_seconds(&env) - now() + day_s).abs() <= 2,
            "a day behind"
        );
        shim.set_offset_ms("node-a", 0);
        assert!((date_seconds(&env) - now()).abs() <= 2, "right again");
    }

    #[test]
    fn a_second_preload_joins_the_first() {
        let mut env = vec![("LD_PRELOAD".to_string(), OsString::from("/a.so"))];
        preload_too(&mut env, Path::new("/b.so"));
        assert_eq!(
            env,
            vec![("LD_PRELOAD".to_string(), OsString::from("/a.so:/b.so"))]
        );
    }
}
