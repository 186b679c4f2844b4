//! The seam between the transport and the sockets: bind a listener, accept and
//! connect streams. [`Tcp`] uses tokio's TCP; a simulation implements the same
//! two traits over its own network.

use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::pin::Pin;

use tokio::io::AsyncRead;
use tokio::io::AsyncWrite;
use tokio::net::TcpListener;
use tokio::net::TcpStream;

/// A boxed future, so that the traits stay object safe.
pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// A byte stream between two nodes.
pub trait Stream: AsyncRead + AsyncWrite + Send + Unpin + 'static {}

impl<T: AsyncRead + AsyncWrite + Send + Unpin + 'static> Stream for T {}

/// A stream of any transport.
pub type BoxStream = Box<dyn Stream>;

/// Where connections to this node arrive.
pub trait Listener: Send + 'static {
    /// The next connection and the address it came from.
    fn accept(&mut self) -> BoxFuture<'_, io::Result<(BoxStream, SocketAddr)>>;

    /// The address this listener is bound to (with the port chosen, if port 0
    /// was asked for).
    fn local_addr(&self) -> io::Result<SocketAddr>;
}

/// Opens listeners and connections. `address` is `host:port`.
pub trait Transport: Send + Sync + 'static {
    fn bind<'a>(&'a self, address: &'a str) -> BoxFuture<'a, io::Result<Box<dyn Listener>>>;

    fn connect<'a>(&'a self, address: &'a str) -> BoxFuture<'a, io::Result<BoxStream>>;
}

/// TCP through tokio, with Nagle's algorithm off: requests are small and
/// latency-bound (heartbeats, votes).
#[derive(Clone, Copy, Debug, Default)]
pub struct Tcp;

struct TcpAcceptor(TcpListener);

impl Listener for TcpAcceptor {
    fn accept(&mut self) -> BoxFuture<'_, io::Result<(BoxStream, SocketAddr)>> {
        Box::pin(async move {
            let (stream, from) = self.0.accept().await?;
            stream.set_nodelay(true)?;
            Ok((Box::new(stream) as BoxStream, from))
        })
    }

    fn local_addr(&self) -> io::Result<SocketAddr> {
        self.0.local_addr()
    }
}

impl Transport for Tcp {
    fn bind<'a>(&'a self, address: &'a str) -> BoxFuture<'a, io::Result<Box<dyn Listener>>> {
        Box::pin(async move {
            let listener = TcpListener::bind(address).await?;
            Ok(Box::new(TcpAcceptor(listener)) as Box<dyn Listener>)
        })
    }

    fn connect<'a>(&'a self, address: &'a str) -> BoxFuture<'a, io::Result<BoxStream>> {
        Box::pin(async move {
            let stream = TcpStream::connect(address).await?;
            stream.set_nodelay(true)?;
            Ok(Box::new(stream) as BoxStream)
        })
    }
}
