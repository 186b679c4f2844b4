//! Sluice: a Kafka-wire-compatible broker.
pub mod clock;
pub mod limits;
pub mod log;
pub mod types;
