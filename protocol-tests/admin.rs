//! Admin APIs on the wire.

pub use crate::harness::TestBroker;
