//! The Kafka protocol front end: request headers in, response frames out.
//!
//! `codec` turns a frame into a header and a body at the negotiated version and a
//! response back into a frame; `dispatch` holds the one `match` over `ApiKey` and
//! the version table that ApiVersions is built from; `handlers` has one file per
//! Kafka API; `context` holds `BrokerState` and its three narrow contexts, what a
//! handler may touch (built by the server, defined here so that the protocol
//! never imports the server);
//! `old_versions` reads the request versions Kafka 4 removed with the codec at
//! Kafka 3.9's schemas and bridges them to the oldest version the current codec
//! has, so they share the table, the `match` and the handlers;
//! `response_errors` counts the error codes of each response type for the
//! per-API error counter. What the connection does with a dispatched request
//! (`Outcome`, `Pending`) is defined here at the root, beside `RequestContext`,
//! so that dispatch and the handlers (Produce answers with an `Outcome`) never
//! import each other.
//!
//! Invariant: a request reaches a handler only at a version the table lists, so
//! handlers never see a version they do not implement.

pub mod authz;
pub mod broker_client;
pub mod codec;
pub mod context;
pub mod dispatch;
pub mod handlers;
pub mod old_versions;
pub mod peer_client;
pub mod replica_client;
pub mod response_errors;

use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;

use bytes::Bytes;
use kafka_protocol::messages::ApiKey;

use crate::security::acl::{Operation, ResourceType};

/// The listener a connection arrived on, and what the broker advertises there.
#[derive(Debug, Clone)]
pub struct ListenerInfo {
    pub name: String,
    /// The advertised (host, port); None when bound to a wildcard address, in
    /// which case each connection advertises its own local address.
    pub advertised: Option<(String, u16)>,
    /// Whether inter-broker requests are served here: the inter-broker listener,
    /// or the only listener.
    pub inter_broker: bool,
    /// A SASL listener's settings (SASL_PLAINTEXT, SASL_SSL); None otherwise.
    pub sasl: Option<Arc<crate::security::sasl::SaslSettings>>,
}

/// The connection facts dispatch needs to build a `RequestContext`, and the
/// connection's authentication state.
pub struct Connection {
    pub listener: Arc<ListenerInfo>,
    pub peer_addr: SocketAddr,
    pub local_addr: SocketAddr,
    /// Who the client is: ANONYMOUS, a client certificate's principal, or
    /// its SASL user once authenticated.
    pub principal: Arc<crate::security::Principal>,
    /// The SASL state of a SASL listener's connection; None elsewhere.
    pub sasl: Option<crate::security::sasl::SaslConnection>,
}

impl Connection {
    /// A connection on `listener` from `principal` (a certificate's, or
    /// ANONYMOUS), with a fresh SASL state on a SASL listener.
    pub fn new(
        listener: Arc<ListenerInfo>,
        peer_addr: SocketAddr,
        local_addr: SocketAddr,
        principal: crate::security::Principal,
    ) -> Connection {
        let sasl = listener
            .sasl
            .as_ref()
            .map(|settings| crate::security::sasl::SaslConnection::new(Arc::clone(settings)));
        Connection {
            listener,
            peer_addr,
            local_addr,
            principal: Arc::new(principal),
            sasl,
        }
    }
}

/// Per-request facts a handler may need besides the request body. Owned by the
/// connection task, borrowed by the handler.
#[derive(Debug, Clone)]
pub struct RequestContext {
    pub api_key: ApiKey,
    /// The version the handler serves: the version on the wire, or for a
    /// version the current codec lacks, the bridge version it was read at.
    pub api_version: i16,
    /// Set when the request arrived at a version the current codec lacks
    /// (`old_versions`): the version on the wire and its extra fields.
    pub old: Option<Arc<old_versions::OldRequest>>,
    pub correlation_id: i32,
    pub client_id: Option<String>,
    pub listener: Arc<ListenerInfo>,
    pub peer_addr: SocketAddr,
    pub local_addr: SocketAddr,
    /// Who sent it: the connection's principal (ANONYMOUS, a client
    /// certificate's, or the SASL user's).
    pub principal: Arc<crate::security::Principal>,
    /// The authorizer's decisions for this request (`authz`).
    pub access: authz::Access,
}

impl RequestContext {
    /// Kafka's CLUSTER_ACTION on the cluster (a follower's Fetch,
    /// WriteTxnMarkers): only on the listener that carries inter-broker
    /// traffic, so that where clients have a listener of their own none of
    /// them can pose as a follower (and move the high watermark past records
    /// a replica lacks) or end transactions; and with an authorizer, only for
    /// a principal it allows ClusterAction (the brokers' own, as super users).
    pub fn may_cluster_action(&self) -> bool {
        self.listener.inter_broker
            && self
                .access
                .authorize_cluster(self.api_key, Operation::ClusterAction)
    }

    /// Whether the principal may do `operation` on `(resource_type, name)`;
    /// the authorization table must list it for this API.
    pub fn authorize(&self, operation: Operation, resource_type: ResourceType, name: &str) -> bool {
        self.access
            .authorize(self.api_key, operation, resource_type, name)
    }

    /// Whether the principal may do `operation` on the cluster.
    pub fn authorize_cluster(&self, operation: Operation) -> bool {
        self.access.authorize_cluster(self.api_key, operation)
    }

    /// Whether the principal may do `operation` on `(resource_type, name)`,
    /// a denial not logged: for what a listing leaves out silently.
    pub fn authorize_quietly(
        &self,
        operation: Operation,
        resource_type: ResourceType,
        name: &str,
    ) -> bool {
        self.access
            .authorize_quietly(self.api_key, operation, resource_type, name)
    }

    /// The same, a denial not logged: for a check with a per-resource
    /// fallback (Create on the cluster, else on the topic).
    pub fn authorize_cluster_quietly(&self, operation: Operation) -> bool {
        self.access
            .authorize_cluster_quietly(self.api_key, operation)
    }

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

/// A response, or the work that will produce it (a produce waiting for its
/// fsync, a fetch waiting for data); the connection sends them in request order.
pub enum Pending {
    Ready(Bytes),
    Later(Pin<Box<dyn Future<Output = Option<Bytes>> + Send>>),
}

/// What the connection does with a request once dispatched.
pub enum Outcome {
    Respond(Pending),
    /// Produce with acks=0 that succeeded: Kafka sends nothing back.
    NoResponse,
    /// End the connection (malformed frame, unsupported API or version, or an
    /// acks=0 produce that failed, which is how Kafka tells such a client).
    Close(String),
    /// Send this answer, then end the connection (a failed SASL exchange).
    RespondAndClose(Pending, String),
}
