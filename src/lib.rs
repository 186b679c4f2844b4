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
//! - `coordinator`: the coordinator runtime and the coordinators on it: the
//!   consumer-group coordinator (`coordinator::group`) and the transaction
//!   coordinator (`coordinator::txn`), pure state machines with an injected
//!   clock, each one task owning its state, their records appended to their
//!   internal topic and replayed when a broker takes a partition over.
//! - `store`: persistence on sled (the only user of sled): the raft log and
//!   state machine, and the coordinators' caches of their internal topics.
//! - `metrics`: request, byte and connection counters (atomics) and the
//!   Prometheus endpoint that also reports logs and group lag.
//! - `net`: the inter-node transport (framing, handshake, request/response by
//!   correlation id over a transport a simulation can replace), which the
//!   controller's quorum runs on.
//! - `healthcheck`: the client side of `sluice healthcheck` (ApiVersions, then
//!   Metadata, within one deadline).
//! - `config`, `topic_config`, `limits`, `clock`, `random`, `types`, `alloc`:
//!   settings, Kafka's topic configs, hard bounds, injected time, injected
//!   randomness, shared value types, and the allocator that keeps hostile
//!   lengths from aborting the process.
//! - `internal_topics`: Kafka's internal topics, which partition a key belongs
//!   to, and their record formats.
//! - `durability`: group commit of fsyncs and the one rule for a failed fsync,
//!   for every durable store.
//! - `error_code`: every Kafka error code the broker answers with, one table
//!   for the handlers and the coordinators.
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

pub mod alloc;
pub mod clock;
pub mod config;
pub mod controller;
pub mod coordinator;
pub mod durability;
pub mod error_code;
pub mod healthcheck;
pub mod internal_topics;
pub mod limits;
pub mod log;
pub mod metrics;
pub mod net;
pub mod protocol;
pub mod random;
pub mod replica;
pub mod security;
pub mod server;
pub mod store;
pub mod topic_config;
pub mod types;

pub use config::Config;
pub use server::Broker;
