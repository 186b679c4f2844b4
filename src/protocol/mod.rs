//! The Kafka protocol front end: request headers in, response frames out.
//!
//! `codec` turns a frame into a header and a body at the negotiated version and a
//! response back into a frame; `dispatch` holds the one `match` over `ApiKey` and
//! the version table that ApiVersions is built from; `handlers` has one file per
//! Kafka API; `response_errors` counts the error codes of each response type
//! for the per-API error counter. Invariant: a request reaches a handler only at
//! a version the table lists, so handlers never see a version they do not
//! implement.

pub mod codec;
pub mod dispatch;
pub mod errors;
pub mod handlers;
pub mod response_errors;

use std::net::SocketAddr;
use std::sync::Arc;

use kafka_protocol::messages::ApiKey;

/// The listener a connection arrived on, and what the broker advertises there.
#[derive(Debug, Clone)]
pub struct ListenerInfo {
    pub name: String,
    /// The advertised (host, port); None when bound to a wildcard address, in
    /// which case each connection advertises its own local address.
    pub advertised: Option<(String, u16)>,
}

/// Per-request facts a handler may need besides the request body. Owned by the
/// connection task, borrowed by the handler.
#[derive(Debug, Clone)]
pub struct RequestContext {
    pub api_key: ApiKey,
    pub api_version: i16,
    pub correlation_id: i32,
    pub client_id: Option<String>,
    pub listener: Arc<ListenerInfo>,
    pub peer_addr: SocketAddr,
    pub local_addr: SocketAddr,
}

impl RequestContext {
    /// The (host, port) this broker advertises to the client on this connection.
    pub fn advertised_endpoint(&self) -> (String, i32) {
        match &self.listener.advertised {
            Some((host, port)) => (host.clone(), i32::from(*port)),
            None => (
                self.local_addr.ip().to_string(),
                i32::from(self.local_addr.port()),
            ),
        }
    }
}
