//! Engine tests against real files in a temp dir, with restarts done the way the
//! broker will do them: drop every `PartitionLog`, reopen the `LogDir`, `load_all`.

#![allow(clippy::unwrap_used)]

mod append;
pub(crate) mod helpers;
mod open_files;
mod producer_recovery;
mod producers;
mod read;
mod recovery;
mod replication;
mod retention;
mod timestamps;
mod transactions;
mod units;
