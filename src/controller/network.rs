//! Raft's transport to peer controllers: none yet.
//!
//! With a single voter openraft never sends an RPC (it votes for itself and commits alone),
//! so every peer is reported unreachable. The multi-node cluster work replaces this file with
//! a real transport; nothing else in the controller depends on how peers are reached.

use std::io;

use openraft::error::{InstallSnapshotError, RPCError, RaftError, Unreachable};
use openraft::network::{RPCOption, RaftNetwork, RaftNetworkFactory};
use openraft::raft::{
    AppendEntriesRequest, AppendEntriesResponse, InstallSnapshotRequest, InstallSnapshotResponse,
    VoteRequest, VoteResponse,
};

use super::raft_types::{ControllerNode, NodeId, TypeConfig};

/// Hands out connections to peers; owned by raft.
#[derive(Clone, Debug, Default)]
pub struct NetworkFactory;

/// A connection to a peer that cannot be reached.
#[derive(Debug)]
pub struct UnreachablePeer {
    target: NodeId,
}

impl RaftNetworkFactory<TypeConfig> for NetworkFactory {
    type Network = UnreachablePeer;

    async fn new_client(&mut self, target: NodeId, _node: &ControllerNode) -> UnreachablePeer {
        UnreachablePeer { target }
    }
}

impl UnreachablePeer {
    fn unreachable<E: std::error::Error>(&self) -> RPCError<NodeId, ControllerNode, E> {
        let cause = io::Error::new(
            io::ErrorKind::Unsupported,
            format!(
                "no transport to controller {}: single-node cluster",
                self.target
            ),
        );
        RPCError::Unreachable(Unreachable::new(&cause))
    }
}

type RpcResult<T, E = RaftError<NodeId>> = Result<T, RPCError<NodeId, ControllerNode, E>>;

impl RaftNetwork<TypeConfig> for UnreachablePeer {
    async fn append_entries(
        &mut self,
        _rpc: AppendEntriesRequest<TypeConfig>,
        _option: RPCOption,
    ) -> RpcResult<AppendEntriesResponse<NodeId>> {
        Err(self.unreachable())
    }

    async fn install_snapshot(
        &mut self,
        _rpc: InstallSnapshotRequest<TypeConfig>,
        _option: RPCOption,
    ) -> RpcResult<InstallSnapshotResponse<NodeId>, RaftError<NodeId, InstallSnapshotError>> {
        Err(self.unreachable())
    }

    async fn vote(
        &mut self,
        _rpc: VoteRequest<NodeId>,
        _option: RPCOption,
    ) -> RpcResult<VoteResponse<NodeId>> {
        Err(self.unreachable())
    }
}
