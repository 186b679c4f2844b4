//! The handshake, before any request. The connecting side sends `Hello`
//! (protocol version, cluster id, its node id, the node id it expects to reach);
//! the accepting side checks the version, the cluster id and that it is the
//! node expected, and answers `Welcome` (its cluster id and node id) or
//! `Refused` with the reason; the connecting side checks the answer too. Both
//! are JSON bodies in frames of their own kinds, of at most
//! `INTER_NODE_HANDSHAKE_FRAME_BYTES_MAX` bytes.
//!
//! A node that does not know its cluster id yet (a voter before the quorum has
//! formed, a broker joining an existing cluster) holds an empty [`ClusterId`]:
//! any cluster is accepted, the node id is still checked, and the first cluster
//! id the other side names, in either direction, is adopted for good, so every
//! later connection insists on it. Two nodes that both know none may talk (the
//! voters probing each other before the first one initialises the quorum).

use std::fmt;
use std::sync::Arc;
use std::sync::Mutex;
use std::sync::PoisonError;
use std::time::Duration;

use serde::Deserialize;
use serde::Serialize;
use tokio::io::AsyncRead;
use tokio::io::AsyncWrite;
use tokio::io::AsyncWriteExt;

use super::frame::read_frame;
use super::frame::write_frame;
use super::frame::KIND_HELLO;
use super::frame::KIND_REFUSED;
use super::frame::KIND_WELCOME;
use super::NodeId;
use crate::limits::INTER_NODE_HANDSHAKE_FRAME_BYTES_MAX;

/// The version of this protocol; both sides must speak the same.
pub const PROTOCOL_VERSION: u16 = 1;

/// A node's cluster id, shared by its server and every peer it calls: empty
/// until the node knows it, then fixed. Cheap to clone; clones share the value.
#[derive(Clone, Debug, Default)]
pub struct ClusterId(Arc<Mutex<Option<String>>>);

impl ClusterId {
    /// A cluster id already known (read from the data dir, or generated).
    pub fn known(id: impl Into<String>) -> ClusterId {
        ClusterId(Arc::new(Mutex::new(Some(id.into()))))
    }

    /// No cluster id yet: the first one a handshake names is adopted.
    pub fn unknown() -> ClusterId {
        ClusterId::default()
    }

    pub fn get(&self) -> Option<String> {
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// Takes `id` if none is known yet; `Err` with the known one if it differs.
    pub fn adopt(&self, id: &str) -> Result<(), String> {
        let mut current = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        match current.as_deref() {
            None => {
                *current = Some(id.to_string());
                Ok(())
            }
            Some(known) if known == id => Ok(()),
            Some(known) => Err(known.to_string()),
        }
    }
}

/// Who a connecting node is.
#[derive(Clone, Debug)]
pub struct ClientIdentity {
    /// The cluster it belongs to, or none yet.
    pub cluster_id: ClusterId,
    /// Its own node id.
    pub node_id: NodeId,
}

/// Who an accepting node is.
#[derive(Clone, Debug)]
pub struct ServerIdentity {
    pub cluster_id: ClusterId,
    pub node_id: NodeId,
}

/// Why a handshake failed, from the point of view of the side reporting it
/// (`expected` is what it expected, `got` what the other side is), whether it
/// found the mismatch itself or the other side refused for it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum HandshakeError {
    /// The two nodes belong to different clusters.
    WrongCluster { expected: String, got: String },
    /// The connecting side reached another node than the one it expected.
    WrongNode { expected: NodeId, got: NodeId },
    /// The two sides speak different protocol versions.
    UnsupportedVersion { ours: u16, theirs: u16 },
    /// The handshake did not complete in time.
    Timeout,
    /// The connection closed or failed during the handshake.
    Closed(String),
    /// The other side sent something that is not a handshake.
    Malformed(String),
}

impl fmt::Display for HandshakeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            HandshakeError::WrongCluster { expected, got } => {
                write!(
                    f,
                    "expected cluster {expected:?}, the other side is in {got:?}"
                )
            }
            HandshakeError::WrongNode { expected, got } => {
                write!(f, "expected node {expected}, reached node {got}")
            }
            HandshakeError::UnsupportedVersion { ours, theirs } => {
                write!(f, "protocol version {theirs} is not ours ({ours})")
            }
            HandshakeError::Timeout => f.write_str("handshake not completed in time"),
            HandshakeError::Closed(why) => write!(f, "closed during the handshake: {why}"),
            HandshakeError::Malformed(why) => write!(f, "malformed handshake: {why}"),
        }
    }
}

impl std::error::Error for HandshakeError {}

#[derive(Debug, Serialize, Deserialize)]
pub(super) struct Hello {
    pub version: u16,
    pub cluster_id: Option<String>,
    pub from: NodeId,
    pub to: NodeId,
}

#[derive(Debug, Serialize, Deserialize)]
pub(super) struct Welcome {
    pub version: u16,
    pub cluster_id: Option<String>,
    pub node_id: NodeId,
}

/// A refusal, from the accepting side's point of view.
#[derive(Debug, Serialize, Deserialize)]
pub(super) struct Refused {
    pub reason: HandshakeError,
}

/// The connecting side's handshake on an open stream.
pub(super) async fn connect<S: AsyncRead + AsyncWrite + Unpin>(
    stream: &mut S,
    identity: &ClientIdentity,
    to: NodeId,
    timeout: Duration,
) -> Result<(), HandshakeError> {
    let exchange = async {
        let hello = Hello {
            version: PROTOCOL_VERSION,
            cluster_id: identity.cluster_id.get(),
            from: identity.node_id,
            to,
        };
        send(stream, KIND_HELLO, &hello).await?;
        let frame = read_frame(stream, INTER_NODE_HANDSHAKE_FRAME_BYTES_MAX, None, timeout)
            .await
            .map_err(|error| HandshakeError::Closed(error.to_string()))?;
        match frame.kind {
            KIND_WELCOME => {
                let welcome: Welcome = decode(&frame.body)?;
                if welcome.version != PROTOCOL_VERSION {
                    return Err(HandshakeError::UnsupportedVersion {
                        ours: PROTOCOL_VERSION,
                        theirs: welcome.version,
                    });
                }
                if welcome.node_id != to {
                    return Err(HandshakeError::WrongNode {
                        expected: to,
                        got: welcome.node_id,
                    });
                }
                if let Some(theirs) = &welcome.cluster_id {
                    identity.cluster_id.adopt(theirs).map_err(|expected| {
                        HandshakeError::WrongCluster {
                            expected,
                            got: theirs.clone(),
                        }
                    })?;
                }
                Ok(())
            }
            KIND_REFUSED => {
                let refused: Refused = decode(&frame.body)?;
                // The accepting side's view, turned to ours.
                Err(match refused.reason {
                    HandshakeError::WrongCluster { expected, got } => {
                        HandshakeError::WrongCluster {
                            expected: got,
                            got: expected,
                        }
                    }
                    HandshakeError::UnsupportedVersion { ours, theirs } => {
                        HandshakeError::UnsupportedVersion {
                            ours: theirs,
                            theirs: ours,
                        }
                    }
                    other => other,
                })
            }
            kind => Err(HandshakeError::Malformed(format!(
                "frame kind {kind} in answer to a hello"
            ))),
        }
    };
    tokio::time::timeout(timeout, exchange)
        .await
        .map_err(|_| HandshakeError::Timeout)?
}

/// The accepting side's handshake on an accepted stream: the node id of the
/// peer, or why it was refused (the refusal has been sent, when it could be).
pub(super) async fn accept<S: AsyncRead + AsyncWrite + Unpin>(
    stream: &mut S,
    identity: &ServerIdentity,
    timeout: Duration,
) -> Result<NodeId, HandshakeError> {
    let exchange = async {
        let frame = read_frame(stream, INTER_NODE_HANDSHAKE_FRAME_BYTES_MAX, None, timeout)
            .await
            .map_err(|error| HandshakeError::Closed(error.to_string()))?;
        if frame.kind != KIND_HELLO {
            return Err(HandshakeError::Malformed(format!(
                "frame kind {} before a hello",
                frame.kind
            )));
        }
        let hello: Hello = decode(&frame.body)?;
        let refusal = if hello.version != PROTOCOL_VERSION {
            Some(HandshakeError::UnsupportedVersion {
                ours: PROTOCOL_VERSION,
                theirs: hello.version,
            })
        } else if hello.to != identity.node_id {
            Some(HandshakeError::WrongNode {
                expected: hello.to,
                got: identity.node_id,
            })
        } else if let Some(Err(expected)) = hello
            .cluster_id
            .as_deref()
            .map(|theirs| identity.cluster_id.adopt(theirs))
        {
            // Checked after the node id, so that a hello meant for another
            // node never makes this one adopt a cluster id.
            Some(HandshakeError::WrongCluster {
                expected,
                got: hello.cluster_id.clone().unwrap_or_default(),
            })
        } else {
            None
        };
        match refusal {
            Some(reason) => {
                let refused = Refused {
                    reason: reason.clone(),
                };
                // The refusal is a courtesy: the connection closes either way.
                let _ = send(stream, KIND_REFUSED, &refused).await;
                Err(reason)
            }
            None => {
                let welcome = Welcome {
                    version: PROTOCOL_VERSION,
                    cluster_id: identity.cluster_id.get(),
                    node_id: identity.node_id,
                };
                send(stream, KIND_WELCOME, &welcome).await?;
                Ok(hello.from)
            }
        }
    };
    tokio::time::timeout(timeout, exchange)
        .await
        .map_err(|_| HandshakeError::Timeout)?
}

async fn send<S: AsyncWrite + Unpin, T: Serialize>(
    stream: &mut S,
    kind: u8,
    message: &T,
) -> Result<(), HandshakeError> {
    let body = serde_json::to_vec(message)
        .map_err(|error| HandshakeError::Malformed(error.to_string()))?;
    if body.len() > INTER_NODE_HANDSHAKE_FRAME_BYTES_MAX as usize - super::frame::FRAME_HEADER_BYTES
    {
        return Err(HandshakeError::Malformed(format!(
            "handshake of {} bytes is over the bound",
            body.len()
        )));
    }
    let written = async {
        write_frame(stream, kind, 0, &body).await?;
        stream.flush().await
    };
    written
        .await
        .map_err(|error| HandshakeError::Closed(error.to_string()))
}

fn decode<'a, T: Deserialize<'a>>(body: &'a [u8]) -> Result<T, HandshakeError> {
    serde_json::from_slice(body).map_err(|error| HandshakeError::Malformed(error.to_string()))
}
