//! The connecting side: [`Peer`], the client for one remote node.
//!
//! A peer keeps two connections, opened lazily on the first call that needs
//! one: one for requests ([`Peer::call`]) and one for bulk transfers
//! ([`Peer::call_bulk`]), so a heartbeat never waits behind a snapshot on the
//! wire. On each, calls are matched to answers by correlation id, answers may
//! come in any order, and at most the in-flight bound are outstanding; a caller
//! beyond it waits, within its deadline, for one to end. A connection that
//! fails or closes fails every call in flight on it with `Closed`, and the next
//! call opens a new one. A call that times out when nothing at all has arrived
//! on its connection since the call was sent closes that connection too: a
//! link that went silent (a host gone without a reset, bytes lost in a network
//! partition) is replaced on the next call instead of timing out every call
//! on it until the operating system gives up.

use std::collections::HashMap;
use std::sync::atomic::AtomicU64;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::sync::Mutex;
use std::sync::PoisonError;
use std::time::Duration;

use bytes::Bytes;
use tokio::io::ReadHalf;
use tokio::io::WriteHalf;
use tokio::sync::mpsc;
use tokio::sync::oneshot;
use tokio::sync::OnceCell;
use tokio::sync::Semaphore;

use super::frame::read_frame;
use super::frame::write_queued;
use super::frame::Frame;
use super::frame::FrameError;
use super::frame::BODY_BYTES_MAX;
use super::frame::KIND_ERROR;
use super::frame::KIND_RESPONSE;
use super::frame::REQUEST_KIND_MAX;
use super::handshake;
use super::handshake::ClientIdentity;
use super::transport::BoxStream;
use super::transport::Transport;
use super::NetConfig;
use super::NetError;
use super::NodeId;
use crate::limits::INTER_NODE_FRAME_BYTES_MAX;
use crate::limits::INTER_NODE_FRAME_TRANSFER_TIMEOUT_MS;

/// The client for one remote node; cheap to clone (clones share the
/// connections). The connections close once the last clone is dropped.
#[derive(Clone)]
pub struct Peer {
    inner: Arc<Inner>,
}

struct Inner {
    transport: Arc<dyn Transport>,
    config: NetConfig,
    node_id: NodeId,
    address: String,
    /// Our identity; its cluster id (shared with the whole node) is adopted
    /// from the first handshake that names one, so a reconnect insists on it.
    identity: ClientIdentity,
    requests: Link,
    bulk: Link,
}

/// One of the two connections, or the attempt to open it. Concurrent callers
/// share one attempt; a failed attempt, or a connection that has closed, is
/// replaced by the next caller.
#[derive(Default)]
struct Link {
    current: Mutex<Option<Arc<Attempt>>>,
}

type Attempt = OnceCell<Result<Arc<Connection>, NetError>>;

impl Peer {
    /// A client for node `node_id` at `address`, as `identity`. Opens nothing
    /// until the first call.
    pub fn new(
        transport: Arc<dyn Transport>,
        identity: ClientIdentity,
        node_id: NodeId,
        address: impl Into<String>,
        config: NetConfig,
    ) -> Peer {
        Peer {
            inner: Arc::new(Inner {
                transport,
                config,
                node_id,
                address: address.into(),
                identity,
                requests: Link::default(),
                bulk: Link::default(),
            }),
        }
    }

    /// The remote node's id.
    pub fn node_id(&self) -> NodeId {
        self.inner.node_id
    }

    /// The cluster id: the one given, or the one learnt from the first
    /// handshake if none was.
    pub fn cluster_id(&self) -> Option<String> {
        self.inner.identity.cluster_id.get()
    }

    /// Sends a request of `kind` (at most [`REQUEST_KIND_MAX`]) and waits for
    /// its answer, for at most `timeout` (the configured RPC timeout if
    /// `None`), opening the connection first if needed.
    pub async fn call(
        &self,
        kind: u8,
        body: Bytes,
        timeout: Option<Duration>,
    ) -> Result<Bytes, NetError> {
        let timeout = timeout.unwrap_or(self.inner.config.rpc_timeout);
        self.call_on(&self.inner.requests, kind, body, timeout)
            .await
    }

    /// As [`Peer::call`], on the bulk connection (the configured bulk timeout if
    /// `None`): for large bodies such as snapshots.
    pub async fn call_bulk(
        &self,
        kind: u8,
        body: Bytes,
        timeout: Option<Duration>,
    ) -> Result<Bytes, NetError> {
        let timeout = timeout.unwrap_or(self.inner.config.bulk_rpc_timeout);
        self.call_on(&self.inner.bulk, kind, body, timeout).await
    }

    /// Calls waiting for an answer on the request connection (not counting
    /// those waiting for a slot).
    pub fn in_flight(&self) -> usize {
        let current = self
            .inner
            .requests
            .current
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone();
        match current.as_deref().and_then(OnceCell::get) {
            Some(Ok(connection)) => connection.in_flight(),
            _ => 0,
        }
    }

    async fn call_on(
        &self,
        link: &Link,
        kind: u8,
        body: Bytes,
        timeout: Duration,
    ) -> Result<Bytes, NetError> {
        if kind > REQUEST_KIND_MAX {
            return Err(NetError::InvalidKind(kind));
        }
        if body.len() > BODY_BYTES_MAX {
            return Err(NetError::TooLarge {
                bytes: body.len(),
                max: BODY_BYTES_MAX,
            });
        }
        let call = async {
            let connection = self.connection(link).await?;
            connection.call(kind, body).await
        };
        tokio::time::timeout(timeout, call)
            .await
            .map_err(|_| NetError::Timeout)?
    }

    /// The link's open connection, opening one if there is none or the last
    /// one failed or closed.
    async fn connection(&self, link: &Link) -> Result<Arc<Connection>, NetError> {
        let attempt = {
            let mut current = link.current.lock().unwrap_or_else(PoisonError::into_inner);
            let usable = current.as_ref().filter(|attempt| match attempt.get() {
                None => true,
                Some(Ok(connection)) => !connection.is_closed(),
                Some(Err(_)) => false,
            });
            match usable {
                Some(attempt) => Arc::clone(attempt),
                None => {
                    let attempt = Arc::new(Attempt::new());
                    *current = Some(Arc::clone(&attempt));
                    attempt
                }
            }
        };
        attempt.get_or_init(|| self.open()).await.clone()
    }

    async fn open(&self) -> Result<Arc<Connection>, NetError> {
        let inner = &self.inner;
        let address = inner.address.as_str();
        let mut stream = match tokio::time::timeout(
            inner.config.connect_timeout,
            inner.transport.connect(address),
        )
        .await
        {
            Err(_) => {
                return Err(NetError::Unreachable(format!(
                    "{address}: not connected within {:?}",
                    inner.config.connect_timeout
                )))
            }
            Ok(Err(error)) => return Err(NetError::Unreachable(format!("{address}: {error}"))),
            Ok(Ok(stream)) => stream,
        };
        let identity = inner.identity.clone();
        handshake::connect(
            &mut stream,
            &identity,
            inner.node_id,
            inner.config.handshake_timeout,
        )
        .await
        .map_err(NetError::Handshake)?;
        // The handshake adopted the other side's cluster id, if ours was unknown.
        Ok(Connection::start(stream, inner.config.in_flight()))
    }
}

/// One open connection: the calls waiting on it, and the queue to its writer.
struct Connection {
    shared: Arc<Shared>,
    outgoing: mpsc::Sender<Frame>,
    slots: Arc<Semaphore>,
    next_correlation: AtomicU64,
}

struct Shared {
    state: Mutex<State>,
    /// Frames received on the connection so far.
    received: AtomicU64,
}

#[derive(Default)]
struct State {
    waiting: HashMap<u64, oneshot::Sender<Result<Bytes, NetError>>>,
    /// Set once the connection has closed; no call waits on it after that.
    closed: Option<NetError>,
}

impl Shared {
    fn close(&self, error: NetError) {
        let waiting = {
            let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
            if state.closed.is_none() {
                state.closed = Some(error.clone());
            }
            std::mem::take(&mut state.waiting)
        };
        for (_, answer) in waiting {
            let _ = answer.send(Err(error.clone()));
        }
    }

    fn forget(&self, correlation: u64) {
        self.state
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .waiting
            .remove(&correlation);
    }
}

/// Removes a call's entry when the call ends, answered or not (a timeout drops
/// the call's future). A call dropped unanswered after its request was queued,
/// with nothing received on the connection since, closes the connection.
struct Waiting<'a> {
    shared: &'a Shared,
    correlation: u64,
    /// Frames received when the request was queued; `None` before that.
    received_when_sent: Option<u64>,
    ended: bool,
}

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        self.shared.forget(self.correlation);
        let silent = self.received_when_sent == Some(self.shared.received.load(Ordering::Relaxed));
        if !self.ended && silent {
            self.shared.close(NetError::Closed(
                "nothing received within a call's deadline".to_string(),
            ));
        }
    }
}

impl Connection {
    fn start(stream: BoxStream, in_flight: usize) -> Arc<Connection> {
        let shared = Arc::new(Shared {
            state: Mutex::new(State::default()),
            received: AtomicU64::new(0),
        });
        // Each queued frame holds a slot, so the queue never holds more.
        let (outgoing, queued) = mpsc::channel(in_flight);
        let (reader, writer) = tokio::io::split(stream);
        let task_shared = Arc::clone(&shared);
        tokio::spawn(async move {
            let error = tokio::select! {
                read = read_answers(reader, &task_shared) => read,
                written = write_requests(writer, queued) => written,
            };
            task_shared.close(error);
        });
        Arc::new(Connection {
            shared,
            outgoing,
            slots: Arc::new(Semaphore::new(in_flight)),
            next_correlation: AtomicU64::new(1),
        })
    }

    fn is_closed(&self) -> bool {
        self.shared
            .state
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .closed
            .is_some()
            || self.outgoing.is_closed()
    }

    fn in_flight(&self) -> usize {
        self.shared
            .state
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .waiting
            .len()
    }

    async fn call(&self, kind: u8, body: Bytes) -> Result<Bytes, NetError> {
        // The semaphore is never closed.
        let _slot = self
            .slots
            .acquire()
            .await
            .map_err(|_| NetError::Closed("in-flight bound closed".to_string()))?;
        let correlation = self.next_correlation.fetch_add(1, Ordering::Relaxed);
        let (answer, answered) = oneshot::channel();
        {
            let mut state = self
                .shared
                .state
                .lock()
                .unwrap_or_else(PoisonError::into_inner);
            if let Some(error) = &state.closed {
                return Err(error.clone());
            }
            state.waiting.insert(correlation, answer);
        }
        let mut waiting = Waiting {
            shared: &self.shared,
            correlation,
            received_when_sent: None,
            ended: false,
        };
        let frame = Frame {
            kind,
            correlation,
            body,
        };
        if self.outgoing.send(frame).await.is_err() {
            waiting.ended = true;
            return Err(self.closed_error());
        }
        waiting.received_when_sent = Some(self.shared.received.load(Ordering::Relaxed));
        let result = match answered.await {
            Ok(result) => result,
            Err(_) => Err(self.closed_error()),
        };
        waiting.ended = true;
        result
    }

    fn closed_error(&self) -> NetError {
        self.shared
            .state
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .closed
            .clone()
            .unwrap_or_else(|| NetError::Closed("connection closed".to_string()))
    }
}

/// Hands each answer to its call until the connection ends; returns why.
async fn read_answers(mut reader: ReadHalf<BoxStream>, shared: &Shared) -> NetError {
    let transfer = Duration::from_millis(INTER_NODE_FRAME_TRANSFER_TIMEOUT_MS);
    loop {
        let frame = match read_frame(&mut reader, INTER_NODE_FRAME_BYTES_MAX, None, transfer).await
        {
            Ok(frame) => frame,
            Err(FrameError::Eof) => return NetError::Closed("closed by the peer".to_string()),
            Err(error) => return NetError::Closed(error.to_string()),
        };
        shared.received.fetch_add(1, Ordering::Relaxed);
        let result = match frame.kind {
            KIND_RESPONSE => Ok(frame.body),
            KIND_ERROR => Err(NetError::Remote(
                String::from_utf8_lossy(&frame.body).into_owned(),
            )),
            kind => return NetError::Closed(format!("frame kind {kind} is not an answer")),
        };
        let waiting = shared
            .state
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .waiting
            .remove(&frame.correlation);
        // No one waiting: the call timed out, and its answer is dropped.
        if let Some(answer) = waiting {
            let _ = answer.send(result);
        }
    }
}

/// Writes queued requests until the connection is dropped or fails.
async fn write_requests(writer: WriteHalf<BoxStream>, queued: mpsc::Receiver<Frame>) -> NetError {
    match write_queued(writer, queued).await {
        Ok(()) => NetError::Closed("peer dropped".to_string()),
        Err(reason) => NetError::Closed(reason),
    }
}
