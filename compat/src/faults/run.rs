//! The runner (Jepsen's core): one run of the schedule. It starts the
//! cluster, starts every workload, lets the nemesis inject faults one after
//! another for the run's length, heals and waits for the cluster to be whole,
//! stops the workloads in order (writers first, then readers, then the final
//! read), checks the history and writes the report. The invariant it keeps:
//! a run's exit status says what the check found and nothing else (0 for no
//! anomaly, or with `self_test` for the unsafe setting's loss found), and
//! the same seed draws the same schedule.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use super::checker::{check, check_workloads, Anomaly, Findings};
use super::cluster::Cluster;
use super::history::{CopyHistory, FaultWindow, GroupHistory, History, Outcome, Read, Write};
use super::nemesis::{inject, FaultKind};
use super::schedule::{Rng, RunClock};
use super::timeline;
use super::workload::admin::check::AdminHistory;
use super::workload::produce::{
    final_read, spawn_producer, spawn_reader, LEADER_ACKED_PRODUCER, PRODUCERS,
};
use super::workload::{admin, copy, group, python, PARTITIONS, TOPIC};
use crate::create_replicated_topic;

/// The quiet between two faults, in ms.
const QUIET_MIN_MS: u64 = 2_000;
const QUIET_MAX_MS: u64 = 4_000;
/// After the heal: how long the cluster has to be whole again (every node
/// serving, every replica in sync), and how long the workload then runs on.
const RECOVERY_WAIT_MS: u64 = 90_000;
const SETTLE_MS: u64 = 5_000;
/// How often the run logs how far it got and how much memory the harness
/// holds, in ms.
const STATUS_EVERY_MS: u64 = 60_000;
/// How often `wait_until` asks again, in ms.
const WAIT_POLL_MS: u64 = 250;

/// What a run is asked to do (the `sluice-faults` flags, resolved).
pub struct Options {
    /// How long the nemesis runs, in seconds.
    pub seconds: u64,
    /// The schedule's seed.
    pub seed: u64,
    /// Run against the deliberately unsafe setting.
    pub self_test: bool,
    /// Nodes in the cluster (3 to 5).
    pub nodes: usize,
    /// Where the report goes (a folder per run inside).
    pub results: PathBuf,
    /// The sluice binary, if not the one built beside this one.
    pub sluice: Option<PathBuf>,
    /// Draw only these fault kinds (all when empty).
    pub only: Vec<FaultKind>,
}

impl Options {
    /// The folder of this run's report (the nodes' logs go there as the run
    /// goes).
    fn report_dir(&self) -> PathBuf {
        let mode = if self.self_test { "self-test" } else { "run" };
        self.results.join(format!("{mode}-seed-{}", self.seed))
    }
}

/// Runs the schedule, writes the report and says what it found: the exit
/// status of `sluice-faults`.
pub fn main(options: &Options) -> ExitCode {
    let seed = options.seed;
    let setting = if options.self_test {
        Setting::deliberately_unsafe()
    } else {
        Setting::safe()
    };
    let (findings, report, writes, faults) = match run(options, &setting) {
        Ok(done) => done,
        Err(error) => {
            println!("faults: the run could not finish (seed {seed}): {error}");
            return ExitCode::FAILURE;
        }
    };
    let dir = options.report_dir();
    write_report(&dir, &report, &writes, &faults);
    print!("{report}");
    verdict(options, &findings, &dir)
}

/// The report's files: `summary.txt` and `timeline.png` (a failure to write
/// them is said, and does not change the verdict).
fn write_report(dir: &Path, report: &str, writes: &[Write], faults: &[FaultWindow]) {
    if let Err(error) =
        std::fs::create_dir_all(dir).and_then(|()| std::fs::write(dir.join("summary.txt"), report))
    {
        println!(
            "faults: cannot write the report to {}: {error}",
            dir.display()
        );
    }
    if let Err(error) = timeline::render(writes, faults, &dir.join("timeline.png")) {
        println!("faults: cannot draw the timeline: {error}");
    }
}

/// The last line and the exit status: a run passes with no anomaly, a
/// self-test only when it found the unsafe setting's loss.
fn verdict(options: &Options, findings: &Findings, dir: &Path) -> ExitCode {
    let seed = options.seed;
    let counts = findings
        .by_kind()
        .iter()
        .map(|(kind, count)| format!("{kind} {count}"))
        .collect::<Vec<_>>()
        .join(", ");
    if options.self_test {
        if findings.found_loss() {
            println!(
                "faults self-test: found the unsafe setting's loss ({counts}; seed {seed}, report in {})",
                dir.display()
            );
            ExitCode::SUCCESS
        } else {
            println!("faults self-test FAILED: the unsafe setting lost nothing the checker saw (seed {seed})");
            ExitCode::FAILURE
        }
    } else if findings.anomalies.is_empty() {
        println!(
            "faults: no anomaly in {} acknowledged writes (seed {seed}, report in {})",
            findings.acked,
            dir.display()
        );
        ExitCode::SUCCESS
    } else {
        println!(
            "faults FAILED: {} anomalies ({counts}; seed {seed}, report in {})",
            findings.anomalies.len(),
            dir.display()
        );
        ExitCode::FAILURE
    }
}

/// The settings of a run: safe (what we promise) or the self-test's unsafe one.
struct Setting {
    name: &'static str,
    topic_configs: Vec<(&'static str, &'static str)>,
    producer: Vec<(&'static str, &'static str)>,
    /// Whether an acks=1 producer writes beside the others.
    leader_acked_producer: bool,
}

impl Setting {
    fn safe() -> Setting {
        Setting {
            name: "acks=all, idempotent, min.insync.replicas=2",
            topic_configs: vec![("min.insync.replicas", "2")],
            producer: vec![("acks", "all"), ("enable.idempotence", "true")],
            leader_acked_producer: true,
        }
    }

    /// The acks=1 producer beside the safe run's: no retries, so that a
    /// retried send cannot write a value twice (it is not idempotent).
    fn leader_acked() -> Vec<(&'static str, &'static str)> {
        vec![
            ("acks", "1"),
            ("enable.idempotence", "false"),
            ("message.send.max.retries", "0"),
        ]
    }

    fn deliberately_unsafe() -> Setting {
        Setting {
            name: "acks=1, min.insync.replicas=1, unclean leader election (unsafe)",
            topic_configs: vec![
                ("min.insync.replicas", "1"),
                ("unclean.leader.election.enable", "true"),
            ],
            producer: vec![("acks", "1"), ("enable.idempotence", "false")],
            leader_acked_producer: false,
        }
    }
}

/// One run of the schedule under `setting`: its findings and report, and
/// the writes and faults for the timeline.
fn run(
    options: &Options,
    setting: &Setting,
) -> Result<(Findings, String, Vec<Write>, Vec<FaultWindow>), String> {
    let clock = RunClock(Instant::now());
    let kinds = FaultKind::drawn(options.nodes, &options.only)?;
    // Before the cluster starts: a missing virtualenv fails the run at once.
    let python = python::Interpreter::find()?;
    let root = tempfile::tempdir().map_err(|e| e.to_string())?;
    println!(
        "faults: {} nodes, {} s of faults, seed {}, {}",
        options.nodes, options.seconds, options.seed, setting.name
    );
    let (mut cluster, kinds) = start_cluster(options, root.path(), kinds, clock)?;
    let replicas = options.nodes.min(3) as i32;
    create_topics(&cluster, setting, replicas)?;
    let running = Running::start(&cluster, options, setting, python, root.path(), clock)?;
    nemesis(&mut cluster, &kinds, options, &running.history, clock);
    let recovery = heal(&mut cluster, replicas, clock);
    let stopped = running.stop(&cluster.bootstrap, clock)?;
    let findings = check_all(&stopped, recovery.not_whole);
    let summary = summary(
        options.seed,
        setting,
        &stopped.faults,
        &findings,
        recovery.whole,
        &stopped.python.stats,
    );
    Ok((findings, summary, stopped.writes, stopped.faults))
}

/// Starts the cluster and keeps of `kinds` the faults it can be given (no
/// slow links where the kernel cannot slow one).
fn start_cluster(
    options: &Options,
    root: &Path,
    mut kinds: Vec<FaultKind>,
    clock: RunClock,
) -> Result<(Cluster, Vec<FaultKind>), String> {
    let cluster = Cluster::start(
        options.nodes,
        root,
        options.sluice.as_ref(),
        &options.report_dir(),
        options.seconds,
    )?;
    clock.log(&format!("cluster serving at {}", cluster.bootstrap));
    if kinds.contains(&FaultKind::SlowLink) && !cluster.can_slow {
        clock.log("this kernel has no tc token bucket (tbf): no slow-link faults");
        kinds.retain(|kind| *kind != FaultKind::SlowLink);
        if kinds.is_empty() {
            return Err("no fault kind left to draw".to_string());
        }
    }
    Ok((cluster, kinds))
}

/// The run's topic and the copy's output, and a leader for every partition.
fn create_topics(cluster: &Cluster, setting: &Setting, replicas: i32) -> Result<(), String> {
    create_replicated_topic(
        &cluster.bootstrap,
        TOPIC,
        PARTITIONS,
        replicas,
        &setting.topic_configs,
    );
    copy::create_output(&cluster.bootstrap, replicas);
    wait_until("every partition has a leader", RECOVERY_WAIT_MS, || {
        cluster
            .partitions()
            .is_some_and(|ps| ps.iter().all(|(leader, _)| *leader >= 0))
    })
}

/// The nemesis's schedule: faults one after another, a quiet between two,
/// until the run's length has passed.
fn nemesis(
    cluster: &mut Cluster,
    kinds: &[FaultKind],
    options: &Options,
    history: &History,
    clock: RunClock,
) {
    let mut rng = Rng(options.seed);
    let nemesis_end = Duration::from_secs(options.seconds);
    // Every schedule opens with a leader cut off from its followers, the
    // fault an unsafe setting loses writes to (unless `--only` leaves it
    // out), then draws at random.
    let mut next_kind = if kinds.contains(&FaultKind::IsolateLeader) {
        FaultKind::IsolateLeader
    } else {
        kinds[0]
    };
    let mut status_due_ms = STATUS_EVERY_MS;
    while clock.0.elapsed() < nemesis_end {
        std::thread::sleep(Duration::from_millis(
            rng.between(QUIET_MIN_MS, QUIET_MAX_MS),
        ));
        let window = inject(cluster, next_kind, &mut rng, clock);
        history.faults.lock().expect("history").push(window);
        next_kind = kinds[rng.below(kinds.len() as u64) as usize];
        if clock.ms() >= status_due_ms {
            status_due_ms = clock.ms() + STATUS_EVERY_MS;
            clock.log(&status(history));
        }
    }
}

/// Whether the cluster became whole after the heal, and if not, the state
/// it was left in.
struct Recovery {
    whole: bool,
    /// (leader, ISR size) of each partition, in partition order, when the
    /// cluster did not become whole: a liveness failure, reported as such.
    not_whole: Option<String>,
}

/// Waits for every node to serve and every replica to be in sync again.
fn heal(cluster: &mut Cluster, replicas: i32, clock: RunClock) -> Recovery {
    clock.log("every fault healed; waiting for the cluster to be whole");
    cluster.wait_whole();
    let whole = wait_until("every replica back in sync", RECOVERY_WAIT_MS, || {
        cluster.partitions().is_some_and(|ps| {
            ps.iter()
                .all(|(leader, isr)| *leader >= 0 && *isr == replicas as usize)
        })
    });
    let not_whole = whole.as_ref().err().map(|error| {
        clock.log(error);
        let state = format!(
            "partitions of {TOPIC} as (leader, in-sync replicas): {:?}",
            cluster.partitions()
        );
        clock.log(&state);
        state
    });
    Recovery {
        whole: whole.is_ok(),
        not_whole,
    }
}

/// The workloads while the faults run.
struct Running {
    history: Arc<History>,
    stop_writes: Arc<AtomicBool>,
    stop_reads: Arc<AtomicBool>,
    producers: Vec<JoinHandle<()>>,
    python: python::PythonWorkload,
    reader: JoinHandle<()>,
    group: group::GroupWorkload,
    copy: copy::CopyWorkload,
    admin: admin::AdminWorkload,
}

/// What the workloads recorded, once stopped.
struct Stopped {
    writes: Vec<Write>,
    reads: Vec<Read>,
    faults: Vec<FaultWindow>,
    final_reads: Vec<Read>,
    /// When the writers and the reader had stopped, in ms of the run.
    end_ms: u64,
    python: python::PythonRun,
    group: GroupHistory,
    copy: CopyHistory,
    admin: AdminHistory,
}

impl Running {
    /// Starts every workload against the cluster: the producers (and the
    /// safe run's acks=1 one), the Python client, the reader, the group, the
    /// copy and the admin churn.
    fn start(
        cluster: &Cluster,
        options: &Options,
        setting: &Setting,
        python: python::Interpreter,
        scratch: &Path,
        clock: RunClock,
    ) -> Result<Running, String> {
        let bootstrap = &cluster.bootstrap;
        let history = Arc::new(History::default());
        let stop_writes = Arc::new(AtomicBool::new(false));
        let stop_reads = Arc::new(AtomicBool::new(false));
        let mut producers: Vec<_> = (0..PRODUCERS)
            .map(|id| {
                spawn_producer(
                    id,
                    bootstrap,
                    setting.producer.clone(),
                    false,
                    &history,
                    &stop_writes,
                    clock,
                )
            })
            .collect();
        if setting.leader_acked_producer {
            producers.push(spawn_producer(
                LEADER_ACKED_PRODUCER,
                bootstrap,
                Setting::leader_acked(),
                true,
                &history,
                &stop_writes,
                clock,
            ));
        }
        let python = python.start(bootstrap, scratch, &options.report_dir(), clock)?;
        let reader = spawn_reader(bootstrap, &history, &stop_reads, clock);
        let group = group::GroupWorkload::start(bootstrap, &[group::GROUP, copy::GROUP], clock);
        let copy = copy::CopyWorkload::start(bootstrap, group.history(), clock);
        let replicas = options.nodes.min(3) as i32;
        let admin = admin::AdminWorkload::start(bootstrap, replicas, options.seed, clock);
        Ok(Running {
            history,
            stop_writes,
            stop_reads,
            producers,
            python,
            reader,
            group,
            copy,
            admin,
        })
    }

    /// Lets the workload run on for `SETTLE_MS`, then stops the writers, the
    /// reader, reads the cluster back whole and stops the group, copy and
    /// admin workloads, each reading back what it needs.
    fn stop(self, bootstrap: &str, clock: RunClock) -> Result<Stopped, String> {
        std::thread::sleep(Duration::from_millis(SETTLE_MS));
        self.stop_writes.store(true, Ordering::Release);
        // Stopped beside the librdkafka producers (which finish their windows
        // meanwhile); its writes join theirs before the check.
        let python = self.python.stop(clock)?;
        self.history
            .writes
            .lock()
            .expect("history")
            .extend(python.writes.iter().cloned());
        for producer in self.producers {
            producer
                .join()
                .map_err(|_| "a producer panicked".to_string())?;
        }
        self.stop_reads.store(true, Ordering::Release);
        self.reader
            .join()
            .map_err(|_| "the reader panicked".to_string())?;
        let end_ms = clock.ms();
        clock.log("final read");
        let final_reads = final_read(bootstrap, clock)?;
        let copy = self.copy.finish(bootstrap, &final_reads, clock);
        let group = self.group.stop(clock)?;
        let admin = self.admin.finish(bootstrap, clock);
        let history = &self.history;
        Ok(Stopped {
            writes: history.writes.lock().expect("history").clone(),
            reads: history.reads.lock().expect("history").reads().to_vec(),
            faults: history.faults.lock().expect("history").clone(),
            final_reads,
            end_ms,
            python,
            group,
            copy,
            admin,
        })
    }
}

/// Every workload's check over what it recorded, and the liveness failure
/// if the cluster did not become whole.
fn check_all(stopped: &Stopped, not_whole: Option<String>) -> Findings {
    let mut findings = check(
        &stopped.writes,
        &stopped.reads,
        &stopped.final_reads,
        &stopped.faults,
        stopped.end_ms,
    );
    check_workloads(
        &mut findings,
        &stopped.final_reads,
        &stopped.group,
        &stopped.copy,
    );
    admin::check::check_into(&mut findings, &stopped.admin);
    if let Some(state) = not_whole {
        findings.anomalies.push(Anomaly::NotRecovered {
            waited_ms: RECOVERY_WAIT_MS,
            state,
        });
    }
    findings
}

/// How far the run got: its writes, the reader's records, and the harness's
/// own resident memory (from `/proc/self/status`).
fn status(history: &History) -> String {
    let (attempted, acked) = {
        let writes = history.writes.lock().expect("history");
        let acked = writes
            .iter()
            .filter(|w| {
                matches!(
                    w.outcome,
                    Outcome::Acked { .. } | Outcome::AckedByLeader { .. }
                )
            })
            .count();
        (writes.len(), acked)
    };
    let (records, repeats) = {
        let reads = history.reads.lock().expect("history");
        (reads.reads().len(), reads.repeats())
    };
    let rss_mib = std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|status| {
            status
                .lines()
                .find_map(|line| line.strip_prefix("VmRSS:"))
                .and_then(|kb| kb.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        })
        .map_or_else(|| "unknown".to_string(), |kb| format!("{} MiB", kb / 1024));
    format!(
        "status: {attempted} writes ({acked} acknowledged), {records} records read ({repeats} read again), harness resident memory {rss_mib}"
    )
}

/// Polls `done` until it holds or `limit_ms` passed.
fn wait_until(what: &str, limit_ms: u64, mut done: impl FnMut() -> bool) -> Result<(), String> {
    let deadline = Instant::now() + Duration::from_millis(limit_ms);
    while !done() {
        if Instant::now() > deadline {
            return Err(format!("not within {limit_ms} ms: {what}"));
        }
        std::thread::sleep(Duration::from_millis(WAIT_POLL_MS));
    }
    Ok(())
}

/// The run's text report.
fn summary(
    seed: u64,
    setting: &Setting,
    faults: &[FaultWindow],
    findings: &Findings,
    recovered: bool,
    python: &python::PythonStats,
) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "seed: {seed}");
    let _ = writeln!(out, "setting: {}", setting.name);
    let _ = writeln!(out, "faults: {}", faults.len());
    for fault in faults {
        let _ = writeln!(
            out,
            "  {:>8} ms .. {:>8} ms  {:<15} {}",
            fault.start_ms, fault.end_ms, fault.kind, fault.target
        );
    }
    let _ = writeln!(
        out,
        "writes: {} attempted, {} acknowledged, {} failed or timed out; final read {} records",
        findings.attempted, findings.acked, findings.failed, findings.final_records
    );
    out.push_str(&python::report(python, findings));
    let _ = writeln!(
        out,
        "recovered after the heal: {}",
        if recovered { "yes" } else { "no (see the log)" }
    );
    let _ = writeln!(
        out,
        "availability: longest stretch without an acknowledged write {} ms",
        findings.longest_gap_ms
    );
    for (kind, gap) in &findings.longest_gap_by_fault_ms {
        let _ = writeln!(out, "  during {kind}: {gap} ms");
    }
    let _ = writeln!(
        out,
        "timeline: timeline.png beside this report (writes and latency over the run, a lane per fault kind)"
    );
    out.push_str(&group::report(&findings.group));
    out.push_str(&copy::report(&findings.copy));
    out.push_str(&admin::report(&findings.admin));
    let _ = writeln!(out, "anomalies: {}", findings.anomalies.len());
    for (kind, count) in findings.by_kind() {
        let _ = writeln!(out, "  {kind}: {count}");
    }
    for anomaly in findings.anomalies.iter().take(20) {
        let _ = writeln!(out, "  {anomaly}");
    }
    out
}
