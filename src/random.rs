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

/// What every seeded simulation shares (the transport's, the controller's, the
/// replication's): their seeds (`SLUICE_SIM_SEED` for one, `SLUICE_SIM_SEEDS`
/// for a long run of that many) and the schedule's generator.
#[cfg(test)]
pub mod sim {
    pub fn env_u64(name: &str) -> Option<u64> {
        let value = std::env::var(name).ok()?;
        Some(
            value
                .parse()
                .unwrap_or_else(|_| panic!("{name}={value} is not a number")),
        )
    }

    /// The seeds to run: the one in `SLUICE_SIM_SEED`, or `count` fixed ones
    /// (`SLUICE_SIM_SEEDS` of them for the long run).
    pub fn seeds(default_seed: u64, count: u64) -> Vec<u64> {
        if let Some(seed) = env_u64("SLUICE_SIM_SEED") {
            return vec![seed];
        }
        let count = env_u64("SLUICE_SIM_SEEDS").unwrap_or(count).max(1);
        (0..count).map(|i| default_seed + i).collect()
    }

    /// Whether the long run was asked for.
    pub fn long_run() -> bool {
        env_u64("SLUICE_SIM_SEEDS").is_some()
    }

    /// The schedule's own generator (splitmix64), so the schedule depends on the
    /// seed alone.
    pub struct SplitMix(pub u64);

    impl SplitMix {
        pub fn next_u64(&mut self) -> u64 {
            self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
            let mut z = self.0;
            z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
            z ^ (z >> 31)
        }

        pub fn below(&mut self, range: std::ops::Range<u64>) -> u64 {
            range.start + self.next_u64() % (range.end - range.start)
        }
    }
}
