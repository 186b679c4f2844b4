//! The coordinator runtime (Kafka's coordinator-common `CoordinatorRuntime`),
//! and the coordinators that run on it: the consumer-group coordinator
//! (`group`) and the transaction coordinator (`txn`).
//!
//! A coordinator keeps its state in one of Kafka's internal topics
//! (`__consumer_offsets`, `__transaction_state`), and is a set of **shards**,
//! one per partition of that topic this broker leads. Its keys (group ids,
//! transactional ids) are placed on partitions by Kafka's rule
//! (`internal_topics`), so a key's coordinator is the leader of its partition
//! and moves with that leadership. The pieces, each in its own file:
//!
//! - `actor`: one task owns a coordinator's state and takes commands through
//!   a bounded `Mailbox`; nothing else changes that state, so it needs no lock.
//! - `ownership`: leadership in and out. The task keeps an `OwnedPartitions`
//!   table and implements `FollowsLeadership`: an election starts a load (the
//!   partition's keys are answered COORDINATOR_LOAD_IN_PROGRESS meanwhile), the
//!   load's end serves the partition, a resignation unloads it (its timers and
//!   pending work are dropped with it), and an epoch bump without another
//!   leader in between only raises the epoch the shard's writes are fenced by,
//!   without a reload.
//! - `writer`: `ShardLog::append` writes a shard's records to its partition
//!   with acks=all, fenced by the leader epoch the shard was loaded in, and
//!   answers once they are committed. Writes of one partition that arrive
//!   together share one append and one wait. What follows an append in the
//!   coordinator's cache goes through `ShardLog::unless_reloaded`, so a load
//!   that replayed the append is never overwritten by it.
//! - `loader`: `loader::load` reads the partition back to its log end (from
//!   its start, or from the cache's load checkpoint when the log still holds
//!   that prefix), hands every entry in order to the shard's `Replay::replay`,
//!   and has the coordinator's `ShardCache` materialise what the replay left
//!   into its sled cache, which serves the shard's reads.
//!
//! Writing a coordinator against it (the shape of `group::topic` and
//! `txn::topic`): its records and their replay, its cache, and its task.
//!
//! ```no_run
//! use std::collections::BTreeMap;
//! use std::io;
//!
//! use sluice::coordinator::loader::{LoadRead, Replay, ShardCache};
//! use sluice::log::{KeyedEntry, KeyedRecord};
//! use sluice::replica::PartitionError;
//! use sluice::store::LoadCheckpoint;
//!
//! /// A shard's state as its records leave it: the latest value of each key.
//! #[derive(Default)]
//! struct Latest(BTreeMap<Vec<u8>, Option<Vec<u8>>>);
//!
//! impl Replay for Latest {
//!     // The same replay serves a load, entry by entry from the log.
//!     fn replay(&mut self, entry: KeyedEntry) -> io::Result<()> {
//!         if let KeyedEntry::Record { key, value, .. } = entry {
//!             self.0.insert(key.to_vec(), value.map(|v| v.to_vec()));
//!         }
//!         Ok(())
//!     }
//! }
//!
//! /// The coordinator's cache of its partitions (in the broker: sled, in `store`).
//! struct Cache;
//!
//! impl ShardCache for Cache {
//!     type State = Latest;
//!     fn refused(&self, error: PartitionError) -> io::Error {
//!         io::Error::other(error.to_string())
//!     }
//!     fn checkpoint(&self, _partition: i32) -> io::Result<Option<LoadCheckpoint>> {
//!         Ok(None) // replay the whole partition at every load
//!     }
//!     fn is_migrated(&self, _partition: i32) -> io::Result<bool> {
//!         Ok(true) // nothing from before the topic
//!     }
//!     fn mark_migrated(&self, _partition: i32) -> io::Result<()> {
//!         Ok(())
//!     }
//!     fn cached_records(&self, _: i32, _: i64) -> io::Result<Vec<KeyedRecord>> {
//!         Ok(Vec::new())
//!     }
//!     fn materialise(&self, _partition: i32, state: Latest, _read: &LoadRead) -> io::Result<()> {
//!         let _ = state.0; // replace what the cache holds of the partition
//!         Ok(())
//!     }
//! }
//! ```
//!
//! Its task then calls `loader::load(&shard_log, &cache, partition, epoch)`
//! on the blocking pool from `FollowsLeadership::start_load`, and for each
//! request appends its records with `shard_log.append(partition,
//! records).await`, answering once that returns.
//!
//! Invariant: a shard's state changes only by what its partition's log holds:
//! a write is applied after its records are committed, and a load replays the
//! log it will be fenced by.

pub mod actor;
pub mod group;
pub mod loader;
pub mod ownership;
pub mod txn;
pub mod writer;
