//! The fault harness, laid out as Jepsen lays out a test: a run (`run`, the
//! core) starts a real cluster (`cluster`, the db), drives workloads against
//! it (`workload`, each with its client, generator and check), while a
//! nemesis (`nemesis`) breaks it one fault at a time; everything the clients
//! were told and every fault go into a history (`history`), which the
//! checker (`checker`) reads against what the healed cluster holds, and
//! which the timeline (`timeline`) draws. `schedule` holds the run's seeded
//! random numbers and clock. The `sluice-faults` binary parses its flags and
//! calls `run::main`; the LD_PRELOAD shims the nemesis loads into the broker
//! are C sources in `compat/shims/`.

pub mod checker;
pub mod cluster;
pub mod history;
pub mod nemesis;
pub mod run;
pub mod schedule;
pub mod timeline;
pub mod workload;
