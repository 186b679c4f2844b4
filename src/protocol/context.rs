//! `BrokerState`: everything a request handler may touch, one per broker. The
//! server builds it at start, once every engine is open, and shares it by `Arc`
//! with the connections, which hand it to dispatch and the handlers.
//!
//! It is defined here, beside the handlers it serves, and not in the server
//! that builds it, so that the import direction holds: the server imports the
//! protocol, the protocol imports the engines, and nothing below imports the
//! server. It only holds the engines; starting and stopping them is the
//! server's. Narrower contexts per group of handlers are to replace it.

use std::sync::Arc;

use crate::clock::Clock;
use crate::config::Config;
use crate::controller::Controller;
use crate::group::GroupService;
use crate::metrics::Metrics;
use crate::random::IdSource;
use crate::replica::ReplicaManager;
use crate::store::SledTxnStore;
use crate::txn::TxnService;

/// Everything a request handler may touch. One per broker, shared by `Arc`.
pub struct BrokerState {
    pub config: Config,
    pub clock: Arc<dyn Clock>,
    pub controller: Controller,
    pub replicas: ReplicaManager,
    /// The group coordinator, which owns the committed offsets, group records and
    /// pending transactional offsets; handlers reach them only through it.
    pub groups: GroupService,
    pub txns: TxnService,
    pub txn_store: Arc<SledTxnStore>,
    /// Where topic ids come from; the group coordinator draws member ids from
    /// the same source.
    pub ids: Arc<dyn IdSource>,
    /// Shared on its own with connection writers, which must not keep the
    /// whole state alive past shutdown.
    pub metrics: Arc<Metrics>,
}
