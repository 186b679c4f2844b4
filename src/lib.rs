//! Sluice: a Kafka-wire-compatible broker, also embeddable in a test.
//!
//! Module map (see ARCHITECTURE.md for the invariants):
//! - `server`: listeners, connections (framing, pipelining, ordered responses),
//!   start and graceful shutdown; `Broker` is the embeddable handle.
//! - `protocol`: the codec, the one dispatch `match` and version table, and one
//!   handler file per Kafka API.
//! - `replica`: which partition logs this broker has, appends with their
//!   durability wait (group commit), reads and long-poll wake-ups.
//! - `log`: the partition log engine (segments, indexes, recovery, retention);
//!   knows nothing of requests or raft.
//! - `controller`: cluster metadata on openraft (the only user of openraft).
//! - `group`: the consumer-group coordinator (pure state machine, injected clock).
//! - `txn`: the transaction coordinator (pure state machine, injected clock),
//!   producer-id blocks and transaction markers.
//! - `store`: persistence on sled (the only user of sled).
//! - `metrics`: request, byte and connection counters (atomics) and the
//!   Prometheus endpoint that also reports logs and group lag.
//! - `net`: the inter-node transport (framing, handshake, request/response by
//!   correlation id over a transport a simulation can replace); nothing uses it
//!   yet.
//! - `healthcheck`: the client side of `sluice healthcheck` (ApiVersions, then
//!   Metadata, within one deadline).
//! - `config`, `topic_config`, `limits`, `clock`, `random`, `types`, `placement`,
//!   `alloc`: settings, Kafka's topic configs, hard bounds, injected time,
//!   injected randomness, shared value types, which internal-topic partition a
//!   group belongs to, and the allocator that keeps hostile lengths from aborting
//!   the process.
//! - `error_code`: every Kafka error code the broker answers with, one table
//!   for the handlers and the coordinators.
//! - `actor`: the bounded command channel and request helper of the tasks that
//!   own the group and transaction coordinators.
//!
//! Embedding:
//! ```no_run
//! # async fn example() -> Result<(), Box<dyn std::error::Error>> {
//! let broker = sluice::Broker::start_ephemeral().await?;
//! let bootstrap = broker.bootstrap_servers(); // point a Kafka client here
//! # let _ = bootstrap;
//! broker.shutdown().await?;
//! # Ok(()) }
//! ```

pub mod actor;
pub mod alloc;
pub mod clock;
pub mod config;
pub mod controller;
pub mod coordinator_records;
pub mod error_code;
pub mod group;
pub mod group_commit;
pub mod healthcheck;
pub mod limits;
pub mod log;
pub mod metrics;
pub mod net;
pub mod placement;
pub mod protocol;
pub mod random;
pub mod replica;
pub mod security;
pub mod server;
pub mod store;
pub mod topic_config;
pub mod txn;
pub mod types;

pub use config::Config;
pub use server::Broker;
