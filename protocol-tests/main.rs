//! Wire-level tests: raw frames in, exact frames out, and malformed or hostile
//! input. Each test starts its own broker (in-process, or the real binary where
//! the process itself is under test) on an ephemeral port.

#[global_allocator]
static ALLOCATOR: sluice::alloc::LazyHugeAlloc = sluice::alloc::LazyHugeAlloc;

mod harness;

mod admin;
mod api_versions;
mod authz;
mod authz_admin;
mod authz_groups;
mod authz_txn;
mod groups;
mod hostile;
// Reads the broker's memory from /proc.
#[cfg(target_os = "linux")]
mod memory;
mod metadata;
mod metrics;
mod old_versions;
mod produce_fetch;
mod producers;
mod sasl;
mod transactions;
