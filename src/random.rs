//! Injected randomness, as `clock` injects time: a pure state machine that needs
//! a fresh id (the group coordinator's member ids) takes it from an
//! [`IdSource`] handed to it, so a test can replay exactly the same ids.
//!
//! The broker uses [`RandomIds`] (random v4 UUIDs, as Kafka's
//! `UUID.randomUUID()`); tests use [`SeededIds`], a deterministic sequence.
//! The broker has one source, shared (an `Arc`) by everything that draws from
//! it: the group coordinator's member ids and the controller's topic ids, so a
//! test that seeds it replays both.

use std::sync::atomic::{AtomicU64, Ordering};

use uuid::Uuid;

/// Where fresh ids come from. Drawing takes `&self` so that one source can be
/// shared between tasks.
pub trait IdSource: Send + Sync + 'static {
    fn next_uuid(&self) -> Uuid;
}

/// Random v4 UUIDs from the operating system's generator.
#[derive(Debug, Default, Clone, Copy)]
pub struct RandomIds;

impl IdSource for RandomIds {
    fn next_uuid(&self) -> Uuid {
        Uuid::new_v4()
    }
}

/// A reproducible sequence of v4-shaped UUIDs: the same seed gives the same
/// ids in the same order (splitmix64, which is enough for ids that only have
/// to differ from each other). Drawers that share it get the sequence in the
/// order they draw.
#[derive(Debug)]
pub struct SeededIds {
    state: AtomicU64,
}

/// splitmix64's increment, the golden ratio in 64 bits.
const SPLITMIX_GAMMA: u64 = 0x9E37_79B9_7F4A_7C15;

impl SeededIds {
    pub fn new(seed: u64) -> SeededIds {
        SeededIds {
            state: AtomicU64::new(seed),
        }
    }

    fn next_u64(&self) -> u64 {
        // The step is an addition, so one atomic add hands each draw its own
        // state, in the same sequence as a single-threaded splitmix64.
        let mut z = self
            .state
            .fetch_add(SPLITMIX_GAMMA, Ordering::Relaxed)
            .wrapping_add(SPLITMIX_GAMMA);
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
}

impl IdSource for SeededIds {
    fn next_uuid(&self) -> Uuid {
        let mut bytes = [0u8; 16];
        bytes[..8].copy_from_slice(&self.next_u64().to_be_bytes());
        bytes[8..].copy_from_slice(&self.next_u64().to_be_bytes());
        uuid::Builder::from_random_bytes(bytes).into_uuid()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seeded_ids_repeat_per_seed_and_differ_within_a_sequence() {
        let draw = |seed| {
            let ids = SeededIds::new(seed);
            (0..4).map(|_| ids.next_uuid()).collect::<Vec<_>>()
        };
        let first = draw(7);
        assert_eq!(first, draw(7));
        assert_ne!(first, draw(8));
        for (i, a) in first.iter().enumerate() {
            assert_eq!(a.get_version_num(), 4);
            assert!(first[i + 1..].iter().all(|b| b != a));
        }
    }
}
