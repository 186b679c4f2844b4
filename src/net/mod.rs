//! The inter-node transport: every socket between nodes goes through here, so
//! that a deterministic simulation can replace them.
//!
//! - `transport`: the seam, [`Transport`] (bind a [`Listener`], connect a
//!   stream) with its TCP implementation [`Tcp`].
//! - `frame`: length-prefixed frames `{kind: u8, correlation id: u64, body}`,
//!   the length checked against [`INTER_NODE_FRAME_BYTES_MAX`] before a byte is
//!   allocated.
//! - `handshake`: both sides prove they are the node, in the cluster, the other
//!   expects before any request ([`HandshakeError`]).
//! - `peer`: the client for one remote node ([`Peer::call`], matched by
//!   correlation id on one long-lived connection, and [`Peer::call_bulk`] on a
//!   second one so small requests never queue behind a large body).
//! - `serve`: the server ([`serve`]), each connection its own task, answers in
//!   any order.
//! - `sim_tests` (tests only): the transport over a seeded simulated network,
//!   three nodes under partitions, delays and crashes.
//!
//! Invariants: a malformed, oversized or truncated frame, or a kind that has no
//! place where it arrives, closes that connection with an error and never
//! panics; every queue is bounded (`INTER_NODE_IN_FLIGHT_REQUESTS_MAX` per
//! connection, `INTER_NODE_CONNECTIONS_MAX` accepted); no lock is held across an
//! `.await`; a call always ends, with its answer or a [`NetError`].
//!
//! Request kinds are the caller's, `0..=REQUEST_KIND_MAX`; the kinds above are
//! the transport's own (handshake and responses). Bodies are opaque bytes.
//!
//! [`INTER_NODE_FRAME_BYTES_MAX`]: crate::limits::INTER_NODE_FRAME_BYTES_MAX

mod frame;
mod handshake;
mod peer;
mod serve;
mod tls;
mod transport;

#[cfg(test)]
pub mod sim;
#[cfg(test)]
mod sim_tests;
#[cfg(test)]
mod tests;

use std::fmt;
use std::time::Duration;

use crate::limits::INTER_NODE_BULK_RPC_TIMEOUT_MS;
use crate::limits::INTER_NODE_CONNECT_TIMEOUT_MS;
use crate::limits::INTER_NODE_HANDSHAKE_TIMEOUT_MS;
use crate::limits::INTER_NODE_IN_FLIGHT_REQUESTS_MAX;
use crate::limits::INTER_NODE_RPC_TIMEOUT_MS;

pub use frame::REQUEST_KIND_MAX;
pub use handshake::ClientIdentity;
pub use handshake::ClusterId;
pub use handshake::HandshakeError;
pub use handshake::ServerIdentity;
pub use handshake::PROTOCOL_VERSION;
pub use peer::Peer;
pub use serve::serve;
pub use serve::Handler;
pub use serve::Server;
pub use tls::TlsTransport;
pub use transport::BoxFuture;
pub use transport::BoxStream;
pub use transport::Listener;
pub use transport::Stream;
pub use transport::Tcp;
pub use transport::Transport;

/// A node's id, as the controller's raft names it.
pub type NodeId = u64;

/// The transport's timeouts and bounds. `Default` gives the values in `limits`;
/// tests shorten them.
#[derive(Clone, Debug)]
pub struct NetConfig {
    /// Opening a connection; past it the node is [`NetError::Unreachable`].
    pub connect_timeout: Duration,
    /// Completing the handshake, on either side.
    pub handshake_timeout: Duration,
    /// The deadline of a [`Peer::call`] given none.
    pub rpc_timeout: Duration,
    /// The deadline of a [`Peer::call_bulk`] given none.
    pub bulk_rpc_timeout: Duration,
    /// Requests in flight on one connection, on either side.
    pub in_flight_max: usize,
}

impl Default for NetConfig {
    fn default() -> NetConfig {
        NetConfig {
            connect_timeout: Duration::from_millis(INTER_NODE_CONNECT_TIMEOUT_MS),
            handshake_timeout: Duration::from_millis(INTER_NODE_HANDSHAKE_TIMEOUT_MS),
            rpc_timeout: Duration::from_millis(INTER_NODE_RPC_TIMEOUT_MS),
            bulk_rpc_timeout: Duration::from_millis(INTER_NODE_BULK_RPC_TIMEOUT_MS),
            in_flight_max: INTER_NODE_IN_FLIGHT_REQUESTS_MAX,
        }
    }
}

impl NetConfig {
    /// The in-flight bound actually used: at least one, at most the ceiling.
    fn in_flight(&self) -> usize {
        self.in_flight_max
            .clamp(1, INTER_NODE_IN_FLIGHT_REQUESTS_MAX)
    }
}

/// Why a call got no answer. Cloneable, since a closed connection fails every
/// call in flight on it with the same error.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum NetError {
    /// No connection could be opened (refused, no route, name not resolved,
    /// or the connect timeout passed): raft's `Unreachable`.
    Unreachable(String),
    /// The connection opened, but the handshake failed.
    Handshake(HandshakeError),
    /// No answer within the call's deadline; a late answer is dropped. The
    /// connection stays open unless nothing at all arrived on it since the
    /// call was sent, in which case it is closed and the next call opens a
    /// new one.
    Timeout,
    /// The connection closed (or failed) before the answer came; the next call
    /// opens a new one.
    Closed(String),
    /// The remote handler answered with an error.
    Remote(String),
    /// The request kind is not a request kind (above [`REQUEST_KIND_MAX`]).
    InvalidKind(u8),
    /// The body does not fit in a frame; nothing was sent.
    TooLarge { bytes: usize, max: usize },
}

impl fmt::Display for NetError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            NetError::Unreachable(why) => write!(f, "node unreachable: {why}"),
            NetError::Handshake(error) => write!(f, "handshake failed: {error}"),
            NetError::Timeout => f.write_str("no answer in time"),
            NetError::Closed(why) => write!(f, "connection closed: {why}"),
            NetError::Remote(message) => write!(f, "remote error: {message}"),
            NetError::InvalidKind(kind) => write!(f, "{kind} is not a request kind"),
            NetError::TooLarge { bytes, max } => {
                write!(f, "body of {bytes} bytes is over the {max} a frame holds")
            }
        }
    }
}

impl std::error::Error for NetError {}
