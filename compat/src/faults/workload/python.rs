//! The Python client's producer: `compat/python/faults_producer.py`, written
//! with aiokafka (a pure-Python Kafka client), writes into the run's topic
//! beside the librdkafka producers, idempotent with acks=all whatever the
//! run's setting, its values `<PRODUCER>-<seq>` round-robin over the
//! partitions. It records each write as JSON lines (its invocation before
//! the send, its outcome after), which become `Write`s of the run's history:
//! every check of `checker::check` covers a second client's batching,
//! retries and idempotence bookkeeping too.
//!
//! It runs under the virtualenv `scripts/install-test-deps.sh` makes
//! (`target/python-venv`), found beside the profile folder this binary was
//! built into, as the `sluice` binary is found beside it. The script is built
//! into this binary and written into the run's scratch folder, as the fsync
//! shim's source is. It is told to stop with a stop file, when the librdkafka
//! producers are; its output (`python-writes.jsonl`) and its log
//! (`python-producer.log`) stay in the report folder.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use crate::faults::checker::{Anomaly, Findings};
use crate::faults::history::{parse_value, Outcome, Write};
use serde_json::Value;

use super::{DELIVERY_TIMEOUT_MS, IN_FLIGHT, PARTITIONS, REQUEST_TIMEOUT_MS, TOPIC};
use crate::faults::schedule::RunClock;

/// The producer number of the Python client's values (`value_of`): far from
/// the librdkafka producers' 0..PRODUCERS, so that no value is both's.
pub const PRODUCER: u32 = 100;
/// The script, built in.
const SCRIPT: &str = include_str!("../../../python/faults_producer.py");
/// The virtualenv's interpreter, under the target folder.
const VENV_PYTHON: &str = "python-venv/bin/python";
/// How long the client has to exit once told to stop, in ms: more than its
/// own bounds (its open writes' drain, `STOP_DRAIN_S`, then the two steps
/// of closing its producer, `CLOSE_TIMEOUT_S` each, in the script). It is
/// killed after it.
const EXIT_WAIT_MS: u64 = 30_000;
/// How often the stop checks whether the client exited, in ms.
const EXIT_POLL_MS: u64 = 50;
/// The client's JSON lines and its log, in the report folder.
const OUTPUT_FILE: &str = "python-writes.jsonl";
const LOG_FILE: &str = "python-producer.log";
/// The script and its stop file, in the run's scratch folder.
const SCRIPT_FILE: &str = "faults_producer.py";
const STOP_FILE: &str = "python-producer.stop";

/// The interpreter the client runs under, found before the cluster starts.
pub struct Interpreter {
    python: PathBuf,
}

impl Interpreter {
    /// The virtualenv's interpreter beside this binary's profile folder
    /// (`<target>/<profile>/sluice-faults`), or what to do about its absence.
    pub fn find() -> Result<Interpreter, String> {
        let exe = std::env::current_exe().map_err(|e| format!("this binary's path: {e}"))?;
        let target = exe
            .parent()
            .and_then(Path::parent)
            .ok_or_else(|| format!("no target folder above {}", exe.display()))?;
        let python = target.join(VENV_PYTHON);
        if !python.is_file() {
            return Err(format!(
                "no Python virtualenv at {} (the aiokafka producer runs in it): run scripts/install-test-deps.sh",
                python.display()
            ));
        }
        Ok(Interpreter { python })
    }

    /// Starts the client against `bootstrap`; its script and stop file go
    /// into `scratch`, its output and log into `report`.
    pub fn start(
        self,
        bootstrap: &str,
        scratch: &Path,
        report: &Path,
        clock: RunClock,
    ) -> Result<PythonWorkload, String> {
        let script = scratch.join(SCRIPT_FILE);
        let stop_file = scratch.join(STOP_FILE);
        let output = report.join(OUTPUT_FILE);
        let log = report.join(LOG_FILE);
        std::fs::write(&script, SCRIPT).map_err(|e| format!("{}: {e}", script.display()))?;
        // A report folder is per seed: what an earlier run left goes.
        for stale in [&stop_file, &output] {
            let _ = std::fs::remove_file(stale);
        }
        let log_file = File::create(&log).map_err(|e| format!("{}: {e}", log.display()))?;
        let log_copy = log_file
            .try_clone()
            .map_err(|e| format!("{}: {e}", log.display()))?;
        // The run's start in wall time: the client stamps its records with
        // milliseconds since it, as `RunClock` does.
        let now_unix_ms = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_err(|e| format!("the system clock: {e}"))?
            .as_millis() as u64;
        let start_unix_ms = now_unix_ms.saturating_sub(clock.ms());
        let child = Command::new(&self.python)
            .arg(&script)
            .args(["--bootstrap", bootstrap, "--topic", TOPIC])
            .args(["--partitions", &PARTITIONS.to_string()])
            .args(["--producer", &PRODUCER.to_string()])
            .arg("--output")
            .arg(&output)
            .arg("--stop-file")
            .arg(&stop_file)
            .args(["--start-unix-ms", &start_unix_ms.to_string()])
            .args(["--in-flight", &IN_FLIGHT.to_string()])
            .args(["--request-timeout-ms", REQUEST_TIMEOUT_MS])
            .args(["--delivery-timeout-ms", DELIVERY_TIMEOUT_MS])
            .stdin(Stdio::null())
            .stdout(log_copy)
            .stderr(log_file)
            .spawn()
            .map_err(|e| format!("starting {}: {e}", self.python.display()))?;
        clock.log(&format!(
            "python client (aiokafka) producing as producer {PRODUCER}, log in {LOG_FILE}"
        ));
        Ok(PythonWorkload {
            child,
            stop_file,
            output,
        })
    }
}

/// The running client.
pub struct PythonWorkload {
    child: Child,
    stop_file: PathBuf,
    output: PathBuf,
}

/// What the client did, for the report.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PythonStats {
    pub attempted: usize,
    pub acked: usize,
    pub failed: usize,
    /// Of the failed: sent, but no outcome recorded (the client was killed).
    pub no_outcome: usize,
    /// Producer instances started: one more after each one given up.
    pub instances: usize,
    /// Lines that are not a record: a line cut off by a kill.
    pub malformed: usize,
    /// How the client ended.
    pub exit: String,
}

/// The client's writes and counts.
pub struct PythonRun {
    pub writes: Vec<Write>,
    pub stats: PythonStats,
}

impl PythonWorkload {
    /// Tells the client to stop, waits for it (killing it after
    /// `EXIT_WAIT_MS`), and reads what it recorded. Err when the client
    /// failed before it was told to stop, or wrote nothing: a run must not
    /// pass with the second client silently missing.
    pub fn stop(mut self, clock: RunClock) -> Result<PythonRun, String> {
        std::fs::write(&self.stop_file, b"stop")
            .map_err(|e| format!("{}: {e}", self.stop_file.display()))?;
        let exit = match wait_within(&mut self.child, EXIT_WAIT_MS)? {
            Some(status) if status.success() => "exited".to_string(),
            Some(status) => {
                return Err(format!(
                    "the python client failed ({status}); see {LOG_FILE} in the report folder"
                ))
            }
            None => {
                clock.log(&format!(
                    "the python client did not exit within {EXIT_WAIT_MS} ms of its stop; killed"
                ));
                let _ = self.child.kill();
                let _ = self.child.wait();
                format!("killed, not exited within {EXIT_WAIT_MS} ms")
            }
        };
        let text = std::fs::read_to_string(&self.output)
            .map_err(|e| format!("the python client's {}: {e}", self.output.display()))?;
        let mut run = parse(&text, clock.ms());
        run.stats.exit = exit;
        if run.stats.attempted == 0 {
            return Err(format!(
                "the python client wrote nothing; see {LOG_FILE} in the report folder"
            ));
        }
        clock.log(&format!(
            "python client stopped: {} writes, {} acknowledged",
            run.stats.attempted, run.stats.acked
        ));
        Ok(run)
    }
}

impl Drop for PythonWorkload {
    /// A run that ends early (an error between start and stop) leaves no
    /// client writing behind it; after `stop` the child is reaped already.
    fn drop(&mut self) {
        if matches!(self.child.try_wait(), Ok(None)) {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// The child's exit status, or None if it is still running after `limit_ms`.
fn wait_within(child: &mut Child, limit_ms: u64) -> Result<Option<ExitStatus>, String> {
    let deadline = Instant::now() + Duration::from_millis(limit_ms);
    loop {
        match child.try_wait() {
            Ok(Some(status)) => return Ok(Some(status)),
            Ok(None) if Instant::now() > deadline => return Ok(None),
            Ok(None) => std::thread::sleep(Duration::from_millis(EXIT_POLL_MS)),
            Err(error) => return Err(format!("waiting for the python client: {error}")),
        }
    }
}

/// The writes of the client's JSON lines. A write invoked without an outcome
/// recorded is failed, completed at `stopped_ms`: it may have been written.
fn parse(text: &str, stopped_ms: u64) -> PythonRun {
    let mut stats = PythonStats::default();
    let mut writes: BTreeMap<u64, Write> = BTreeMap::new();
    for line in text.lines().filter(|line| !line.trim().is_empty()) {
        let Ok(record) = serde_json::from_str::<Value>(line) else {
            stats.malformed += 1;
            continue;
        };
        let number = |field: &str| record.get(field).and_then(Value::as_i64);
        let event = record.get("event").and_then(Value::as_str);
        let write = match (
            event,
            number("seq"),
            number("partition"),
            number("invoked_ms"),
        ) {
            (Some("invoke" | "complete"), Some(seq), Some(partition), Some(invoked_ms)) => Write {
                producer: PRODUCER,
                seq: seq as u64,
                partition: partition as i32,
                invoked_ms: invoked_ms as u64,
                completed_ms: stopped_ms,
                outcome: Outcome::Failed(
                    "no outcome recorded: the python client was stopped or killed".to_string(),
                ),
            },
            (Some("instance"), ..) => {
                stats.instances += 1;
                continue;
            }
            (Some("retire"), ..) => continue,
            _ => {
                stats.malformed += 1;
                continue;
            }
        };
        let seq = write.seq;
        if event == Some("invoke") {
            writes.entry(seq).or_insert(write);
            continue;
        }
        let outcome = match (
            number("offset"),
            record.get("error").and_then(Value::as_str),
        ) {
            (Some(offset), _) => Outcome::Acked { offset },
            (None, Some(error)) => Outcome::Failed(error.to_string()),
            (None, None) => {
                stats.malformed += 1;
                continue;
            }
        };
        let completed_ms = number("completed_ms").map_or(stopped_ms, |ms| ms as u64);
        writes.insert(
            seq,
            Write {
                completed_ms,
                outcome,
                ..write
            },
        );
    }
    let writes: Vec<Write> = writes.into_values().collect();
    stats.attempted = writes.len();
    for write in &writes {
        match &write.outcome {
            Outcome::Acked { .. } | Outcome::AckedByLeader { .. } => stats.acked += 1,
            Outcome::Failed(error) => {
                stats.failed += 1;
                if error.starts_with("no outcome recorded") {
                    stats.no_outcome += 1;
                }
            }
        }
    }
    PythonRun { writes, stats }
}

/// Whether `anomaly` names one of the Python client's writes.
fn concerns_python(anomaly: &Anomaly) -> bool {
    let ours = |value: &str| parse_value(value).is_some_and(|(producer, _)| producer == PRODUCER);
    match anomaly {
        Anomaly::Lost { value, .. }
        | Anomaly::Moved { value, .. }
        | Anomaly::Duplicate { value, .. }
        | Anomaly::Phantom { value, .. } => ours(value),
        Anomaly::TwoValues { values, .. } => values.iter().any(|v| ours(v)),
        Anomaly::OutOfOrder { producer, .. } => *producer == PRODUCER,
        _ => false,
    }
}

/// The client's part of the report.
pub fn report(stats: &PythonStats, findings: &Findings) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "python client (aiokafka, idempotent, acks=all, values {PRODUCER}-<seq>; counted in the writes above): {} attempted, {} acknowledged, {} failed or timed out ({} without an outcome recorded); {} producer instances; {}",
        stats.attempted, stats.acked, stats.failed, stats.no_outcome, stats.instances, stats.exit
    );
    if stats.malformed > 0 {
        let _ = writeln!(
            out,
            "  {} lines of {OUTPUT_FILE} unreadable",
            stats.malformed
        );
    }
    let ours = findings
        .anomalies
        .iter()
        .filter(|a| concerns_python(a))
        .count();
    let _ = writeln!(out, "  anomalies naming its writes: {ours}");
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_become_writes_and_an_open_write_fails() {
        let text = r#"{"event": "instance", "instance": 1, "at_ms": 5}
{"event": "invoke", "seq": 0, "partition": 0, "invoked_ms": 10}
{"event": "invoke", "seq": 1, "partition": 1, "invoked_ms": 11}
{"event": "invoke", "seq": 2, "partition": 2, "invoked_ms": 12}
{"event": "complete", "seq": 0, "partition": 0, "invoked_ms": 10, "completed_ms": 20, "offset": 7}
{"event": "complete", "seq": 1, "partition": 1, "invoked_ms": 11, "completed_ms": 30, "error": "KafkaTimeoutError"}
{"event": "retire", "instance": 1, "at_ms": 31, "reason": "write 1"}
{"event": "invoke", "seq": 3, "part"#;
        let run = parse(text, 99);
        assert_eq!(
            run.writes[0],
            Write {
                producer: PRODUCER,
                seq: 0,
                partition: 0,
                invoked_ms: 10,
                completed_ms: 20,
                outcome: Outcome::Acked { offset: 7 },
            }
        );
        assert_eq!(
            run.writes[1].outcome,
            Outcome::Failed("KafkaTimeoutError".to_string())
        );
        assert_eq!(run.writes[2].completed_ms, 99);
        assert_eq!(
            (
                run.stats.attempted,
                run.stats.acked,
                run.stats.failed,
                run.stats.no_outcome
            ),
            (3, 1, 2, 1)
        );
        assert_eq!((run.stats.instances, run.stats.malformed), (1, 1));
    }
}
