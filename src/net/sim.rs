//! The transport over turmoil's simulated network, for the seeded simulations
//! of this module and of the controller: `host:port` names a simulated host,
//! and every byte crosses the simulation's links, which the test can cut, hold
//! and delay. The seeds and the schedule's generator every simulation shares
//! are in `random::sim`.

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
