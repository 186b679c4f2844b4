//! Real clients against Sluice: librdkafka (through rdkafka), Debian's kcat
//! (librdkafka 2.0) and Debian's sarama (1.22, Go), over real sockets, against
//! real data directories.

#[global_allocator]
static ALLOCATOR: sluice::alloc::LazyHugeAlloc = sluice::alloc::LazyHugeAlloc;

mod admin;
mod cluster;
mod cluster_security;
mod compaction;
mod coordinators;
mod durability;
mod groups;
mod idempotence;
mod isolation;
mod kcat;
mod offsets;
mod produce_consume;
mod replication;
mod resources;
mod sarama;
mod scale;
mod storage_faults;
mod tls;
mod transactions;
mod txn_offsets;
