//! The transport over turmoil's simulated network, for the seeded simulations
//! of this module and of the controller: `host:port` names a simulated host,
//! and every byte crosses the simulation's links, which the test can cut, hold
//! and delay. Also what both simulations share: their seeds
//! (`SLUICE_SIM_SEED`, `SLUICE_SIM_SEEDS`) and the schedule's generator.

use std::io;
use std::net::SocketAddr;

use super::transport::BoxFuture;
use super::transport::BoxStream;
use super::transport::Listener;
use super::transport::Transport;

/// The transport over the simulated network: `host:port` names a simulated
/// host, and every byte crosses the simulation's links.
#[derive(Clone, Copy, Debug, Default)]
pub struct SimNet;

struct SimAcceptor(turmoil::net::TcpListener);

impl Listener for SimAcceptor {
    fn accept(&mut self) -> BoxFuture<'_, io::Result<(BoxStream, SocketAddr)>> {
        Box::pin(async move {
            let (stream, from) = self.0.accept().await?;
            Ok((Box::new(stream) as BoxStream, from))
        })
    }

    fn local_addr(&self) -> io::Result<SocketAddr> {
        self.0.local_addr()
    }
}

impl Transport for SimNet {
    fn bind<'a>(&'a self, address: &'a str) -> BoxFuture<'a, io::Result<Box<dyn Listener>>> {
        Box::pin(async move {
            let listener = turmoil::net::TcpListener::bind(address).await?;
            Ok(Box::new(SimAcceptor(listener)) as Box<dyn Listener>)
        })
    }

    fn connect<'a>(&'a self, address: &'a str) -> BoxFuture<'a, io::Result<BoxStream>> {
        Box::pin(async move {
            let stream = turmoil::net::TcpStream::connect(address).await?;
            Ok(Box::new(stream) as BoxStream)
        })
    }
}

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
