//! A fault-injection test in the manner of Jepsen: a history of what clients
//! were told (`history`), recorded while a nemesis breaks a real cluster, and
//! a checker (`checker`) that reads the history against what the cluster holds
//! once healed and names every anomaly, and a timeline (`timeline`) that
//! draws a run's writes, latency and faults as a picture. The run itself
//! (cluster, nemesis, workloads, report) is the `sluice-faults` binary.
//! The admin churn's history and check are in `admin`.

pub mod admin;
pub mod checker;
pub mod history;
pub mod timeline;
