//! sluice-faults: a Jepsen-style fault run against a real cluster. Three to
//! five `sluice` processes, each in its own network namespace, take writes
//! from idempotent acks=all producers (librdkafka) and reads from a consumer,
//! while a seeded nemesis kills and restarts nodes, pauses them, isolates one
//! (a minority), isolates a partition's leader from its followers but not
//! from clients, isolates the metadata raft leader, makes one node's links
//! lossy (iptables' random drop: this kernel may lack netem), slows one
//! node's link (tc's token bucket, where the kernel has it), makes one node's
//! fsyncs fail with EIO or fills its data disk (each node's data dir is a
//! small tmpfs of its own, and every node runs with the fsync fault shim
//! preloaded: `sluice_compat::faults::nemesis::disk`), jumps the nodes' wall
//! clocks, drives a partition leader through lagging followers into a bridge
//! cut from the metadata leader (a lagging bridge, `FaultKind::LaggingBridge`),
//! and, with five nodes, splits the cluster in halves joined by one node (a
//! bridge). Everything is healed at the end, the cluster read back whole, and
//! the history checked (`sluice_compat::faults::checker`).
//!
//! Beside the producers, three more workloads run and are checked: consumers
//! in a group committing their positions (`workload::group`), a transactional
//! consume-transform-produce copy of the topic (`workload::copy`), and an admin
//! client creating topics and adding partitions (`workload::admin`).
//!
//! Beside the acks=all producers, an acks=1 producer writes to the same
//! topic: its writes may be lost with their leader, but a record once read
//! below the high watermark must never disappear, whatever its producer's
//! acks (`Anomaly::ReadLost`).
//!
//! Beside librdkafka, a second client writes into the topic: a producer
//! written with aiokafka, a pure-Python client (`workload::python`), whose
//! writes join the history and go through the same checks.
//!
//! `--self-test` runs the same schedule against a deliberately unsafe setting
//! (acks=1 producers, `min.insync.replicas=1`, unclean leader election) and
//! succeeds only if the checker finds the writes that setting loses: a checker
//! that finds nothing there could find nothing anywhere.
//!
//! Exit status 0 when the run found no anomaly (with `--self-test`: when it
//! found the loss); the last line says what it found. Needs root (network
//! namespaces, iptables, mount) and a C compiler (the fsync fault shim).
//!
//! Each run leaves its report in a folder of `--results`: `summary.txt`, each
//! node's log (`node-<id>.log`, warnings and errors, across its restarts), and
//! `timeline.png`, the writes acknowledged and failed per second and their
//! latency over the run, with every fault window in a lane of its kind
//! (`sluice_compat::faults::timeline`).
//!
//! This file is the command line only: the harness is the library's
//! `sluice_compat::faults` (runner, cluster, nemesis, workloads, checker).

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Parser;
use sluice_compat::faults::nemesis::FaultKind;
use sluice_compat::faults::run::{self, Options};

#[derive(Parser)]
#[command(about = "A Jepsen-style fault run against a real sluice cluster")]
struct Args {
    /// How long the nemesis runs, in seconds.
    #[arg(long, default_value_t = 60)]
    seconds: u64,
    /// The schedule's seed (random when not given; printed either way).
    #[arg(long)]
    seed: Option<u64>,
    /// Run the schedule against an unsafe setting; succeed only if the loss is found.
    #[arg(long)]
    self_test: bool,
    /// Nodes in the cluster (3 to 5).
    #[arg(long, default_value_t = 3)]
    nodes: usize,
    /// Where the report goes (a folder per run inside).
    #[arg(long, default_value = "target/faults")]
    results: PathBuf,
    /// The sluice binary (default: the one built beside this one).
    #[arg(long)]
    sluice: Option<PathBuf>,
    /// Draw only these fault kinds (comma-separated names as the log shows
    /// them, e.g. `fsync-fail,disk-full`), to exercise a few; the schedule
    /// opens with the first of them unless isolate-leader is among them.
    #[arg(long, value_delimiter = ',', value_parser = FaultKind::parse)]
    only: Vec<FaultKind>,
}

fn main() -> ExitCode {
    let args = Args::parse();
    if !(3..=5).contains(&args.nodes) {
        eprintln!("faults: --nodes is 3 to 5");
        return ExitCode::from(2);
    }
    let seed = args.seed.unwrap_or_else(|| {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as u64)
    });
    run::main(&Options {
        seconds: args.seconds,
        seed,
        self_test: args.self_test,
        nodes: args.nodes,
        results: args.results,
        sluice: args.sluice,
        only: args.only,
    })
}
