//! The coordinator runtime (Kafka's coordinator-common `CoordinatorRuntime`).
//! (Module documentation is completed below in this file.)

pub mod actor;
pub mod group;
pub mod loader;
pub mod ownership;
pub mod txn;
pub mod writer;
