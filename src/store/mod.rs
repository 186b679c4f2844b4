//! Everything the broker keeps in an embedded key-value database, behind traits that speak
//! plain bytes and integers.
//!
//! This is the only module that imports sled; callers see [`RaftKv`], [`OffsetStore`],
//! [`TxnOffsetStore`], [`TxnStore`] and [`DurableDb`], never a sled type, so the engine can be swapped without touching raft, the
//! group coordinator or the handlers. Its one durability rule: nothing is durable until
//! [`DurableDb::fsync`] (which [`RaftKv::sync`] and every durable write of
//! [`SledOffsetStore`] and [`SledTxnStore`] call) has returned, and sled's own `flush` is never trusted to be an
//! fsync.
//!
//! It imports no engine: a caller whose records are its own (the transaction coordinator's, in
//! `txn::record`) encodes them and hands over keyed bytes; `codec` holds the byte-level pieces
//! (length-prefixed strings, a bounds-checked reader) that every stored encoding shares.

pub mod codec;
pub mod durable;
pub mod load_checkpoint;
#[cfg(test)]
pub mod mem_raft_kv;
#[cfg(test)]
pub(crate) mod model_tests;
pub mod offsets;
pub mod raft_kv;
pub mod txn;

pub use durable::{wait_until_released, DurableDb};
pub use load_checkpoint::LoadCheckpoint;
pub use offsets::{
    CommitFuture, CommittedOffset, GroupRecord, MemberValue, OffsetStore, PendingOffsets,
    SledOffsetStore, StoredGroup, TxnOffsetStore,
};
pub use raft_kv::{RaftKv, SledRaftKv, SnapshotBlobs};
pub use txn::{KeyedRecord, SledTxnStore, TxnStore};
