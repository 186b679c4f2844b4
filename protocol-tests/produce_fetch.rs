//! Produce and Fetch on the wire: offsets assigned by the broker, CRC checked,
//! batches served back byte for byte.

pub use crate::harness::TestBroker;
