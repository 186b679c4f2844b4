//! The schedule's chance and time, shared by the nemesis and the workloads'
//! generators: `Rng`, a seeded SplitMix64, so that one seed gives one
//! schedule, and `RunClock`, the milliseconds since the run started that
//! stamp every record of the history and every line of the log.

use std::time::Instant;

/// SplitMix64: the schedule's random numbers, the same for the same seed.
pub struct Rng(pub u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }

    pub fn between(&mut self, low: u64, high: u64) -> u64 {
        low + self.below(high - low + 1)
    }
}

/// Milliseconds since the run started, for every record of the history.
#[derive(Clone, Copy)]
pub struct RunClock(pub Instant);

impl RunClock {
    pub fn ms(self) -> u64 {
        self.0.elapsed().as_millis() as u64
    }

    pub fn log(self, line: &str) {
        let ms = self.ms();
        println!("[{:>4}.{:03}s] {line}", ms / 1000, ms % 1000);
    }
}
