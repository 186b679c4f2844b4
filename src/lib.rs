//! Sluice: a Kafka-wire-compatible broker.
pub mod clock;
pub mod controller;
pub mod limits;
pub mod store;
pub mod types;
