//! Real clients against Sluice: librdkafka (through rdkafka) and Debian's kcat
//! (librdkafka 2.0), over real sockets, against real data directories.

#[global_allocator]
static ALLOCATOR: sluice::alloc::LazyHugeAlloc = sluice::alloc::LazyHugeAlloc;

mod admin;
mod durability;
mod groups;
mod idempotence;
mod kcat;
mod offsets;
mod produce_consume;
mod storage_faults;
mod transactions;
mod txn_offsets;
