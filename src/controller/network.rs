//! Raft's transport to the other controllers, over the inter-node `net` seam.
//!
//! One [`Peer`] per remote node, shared by raft's replication task to it and by
//! the controller's own calls (forwarded proposals, heartbeats): raft messages
//! on the peer's request connection, snapshot chunks on its bulk connection so a
//! heartbeat never waits behind one. Bodies are JSON (openraft's serde types).
//! A node that cannot be connected to, or that fails the handshake (another
//! cluster, another node at that address), is `Unreachable`, which makes raft
//! back off; any other failure is a network error raft retries.
//!
//! A node's address comes from raft membership (`ControllerNode::raft_addr`);
//! the voters' addresses are also known from the command line before any
//! membership exists. Invariant: no connection is opened before a call needs
//! it, and every call ends within raft's deadline for it.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use bytes::Bytes;
use openraft::error::{
    InstallSnapshotError, NetworkError, RPCError, RaftError, RemoteError, Unreachable,
};
use openraft::network::{RPCOption, RaftNetwork, RaftNetworkFactory};
use openraft::raft::{
    AppendEntriesRequest, AppendEntriesResponse, InstallSnapshotRequest, InstallSnapshotResponse,
    VoteRequest, VoteResponse,
};
use serde::de::DeserializeOwned;
use serde::Serialize;

use super::raft_types::{ControllerNode, NodeId, TypeConfig};
use super::rpc;
use crate::net::{ClientIdentity, NetConfig, NetError, Peer, Transport};

/// The node's peers, by node id; shared by raft's network and the controller.
pub struct Peers {
    transport: Arc<dyn Transport>,
    identity: ClientIdentity,
    config: NetConfig,
    /// Each peer with the address it was made for, replaced if membership moves
    /// the node. Held only to look up or insert, never across an `.await`.
    peers: Mutex<HashMap<NodeId, (String, Peer)>>,
}

impl Peers {
    pub fn new(
        transport: Arc<dyn Transport>,
        identity: ClientIdentity,
        config: NetConfig,
    ) -> Peers {
        Peers {
            transport,
            identity,
            config,
            peers: Mutex::new(HashMap::new()),
        }
    }

    /// The peer for `node` at `address`, made on first use.
    pub fn get(&self, node: NodeId, address: &str) -> Peer {
        let mut peers = self.peers.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some((known, peer)) = peers.get(&node) {
            if known == address {
                return peer.clone();
            }
        }
        let peer = Peer::new(
            Arc::clone(&self.transport),
            self.identity.clone(),
            node,
            address,
            self.config.clone(),
        );
        peers.insert(node, (address.to_string(), peer.clone()));
        peer
    }
}

/// Hands raft a client per target; owned by raft.
#[derive(Clone)]
pub struct NetworkFactory {
    peers: Option<Arc<Peers>>,
}

impl NetworkFactory {
    /// No transport: a single voter never sends a message.
    pub fn single_node() -> NetworkFactory {
        NetworkFactory { peers: None }
    }

    pub fn over(peers: Arc<Peers>) -> NetworkFactory {
        NetworkFactory { peers: Some(peers) }
    }
}

/// Raft's client for one target node.
pub struct RaftPeer {
    target: NodeId,
    peer: Option<Peer>,
}

impl RaftNetworkFactory<TypeConfig> for NetworkFactory {
    type Network = RaftPeer;

    async fn new_client(&mut self, target: NodeId, node: &ControllerNode) -> RaftPeer {
        let peer = self
            .peers
            .as_ref()
            .map(|peers| peers.get(target, &node.raft_addr));
        RaftPeer { target, peer }
    }
}

type RpcResult<T, E = RaftError<NodeId>> = Result<T, RPCError<NodeId, ControllerNode, E>>;

impl RaftPeer {
    async fn send<Req, Resp, E>(
        &self,
        kind: u8,
        request: &Req,
        option: &RPCOption,
        bulk: bool,
    ) -> RpcResult<Resp, E>
    where
        Req: Serialize,
        Resp: DeserializeOwned,
        E: std::error::Error + DeserializeOwned,
    {
        let Some(peer) = &self.peer else {
            return Err(unreachable(NetError::Unreachable(format!(
                "no transport to controller {}: single-node cluster",
                self.target
            ))));
        };
        let body = rpc::encode(request).map_err(|e| RPCError::Network(NetworkError::new(&e)))?;
        let timeout = Some(option.soft_ttl().max(Duration::from_millis(1)));
        let answer = if bulk {
            peer.call_bulk(kind, body, timeout).await
        } else {
            peer.call(kind, body, timeout).await
        };
        let answer: Bytes = answer.map_err(|e| match e {
            NetError::Unreachable(_) | NetError::Handshake(_) => unreachable(e),
            other => RPCError::Network(NetworkError::new(&other)),
        })?;
        let result: Result<Resp, E> =
            rpc::decode(&answer).map_err(|e| RPCError::Network(NetworkError::new(&e)))?;
        result.map_err(|e| RPCError::RemoteError(RemoteError::new(self.target, e)))
    }
}

fn unreachable<E: std::error::Error>(error: NetError) -> RPCError<NodeId, ControllerNode, E> {
    RPCError::Unreachable(Unreachable::new(&error))
}

impl RaftNetwork<TypeConfig> for RaftPeer {
    async fn append_entries(
        &mut self,
        rpc: AppendEntriesRequest<TypeConfig>,
        option: RPCOption,
    ) -> RpcResult<AppendEntriesResponse<NodeId>> {
        self.send(rpc::KIND_APPEND_ENTRIES, &rpc, &option, false)
            .await
    }

    async fn install_snapshot(
        &mut self,
        rpc: InstallSnapshotRequest<TypeConfig>,
        option: RPCOption,
    ) -> RpcResult<InstallSnapshotResponse<NodeId>, RaftError<NodeId, InstallSnapshotError>> {
        self.send(rpc::KIND_INSTALL_SNAPSHOT, &rpc, &option, true)
            .await
    }

    async fn vote(
        &mut self,
        rpc: VoteRequest<NodeId>,
        option: RPCOption,
    ) -> RpcResult<VoteResponse<NodeId>> {
        self.send(rpc::KIND_VOTE, &rpc, &option, false).await
    }
}
