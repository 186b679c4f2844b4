//! The accepting side: an accept loop, one task per connection, and in each a
//! reader that hands every request to the handler as a task of its own and a
//! writer that sends the answers as they come, in any order.
//!
//! A connection reads a request only while it has fewer than the in-flight
//! bound being handled, so a peer that sends faster than it is answered is
//! slowed down, not buffered. Answers wait in a queue of that same size for the
//! writer. Shutting down closes the listener and every connection, and drops
//! the handlers' tasks.

use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use tokio::io::ReadHalf;
use tokio::io::WriteHalf;
use tokio::sync::mpsc;
use tokio::sync::watch;
use tokio::sync::Semaphore;
use tokio::task::JoinHandle;
use tokio::task::JoinSet;

use super::frame::read_frame;
use super::frame::write_queued;
use super::frame::Frame;
use super::frame::BODY_BYTES_MAX;
use super::frame::KIND_ERROR;
use super::frame::KIND_RESPONSE;
use super::frame::REQUEST_KIND_MAX;
use super::handshake;
use super::handshake::ServerIdentity;
use super::transport::BoxFuture;
use super::transport::BoxStream;
use super::transport::Listener;
use super::NetConfig;
use super::NodeId;
use crate::limits::INTER_NODE_ACCEPT_RETRY_MS;
use crate::limits::INTER_NODE_CONNECTIONS_MAX;
use crate::limits::INTER_NODE_CONNECTION_IDLE_MS_MAX;
use crate::limits::INTER_NODE_FRAME_BYTES_MAX;
use crate::limits::INTER_NODE_FRAME_TRANSFER_TIMEOUT_MS;

/// What answers requests: the request's kind and body in, the answer's body or
/// an error message out. Implemented for any `Fn(u8, Bytes) -> impl Future`.
pub trait Handler: Send + Sync + 'static {
    fn handle(&self, kind: u8, body: Bytes) -> BoxFuture<'static, Result<Bytes, String>>;

    /// The connection from `node` ended (closed, reset, or failed), other than
    /// by this server's stop: a hint that the node may be gone.
    fn closed(&self, _node: NodeId) {}
}

impl<F, Fut> Handler for F
where
    F: Fn(u8, Bytes) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<Bytes, String>> + Send + 'static,
{
    fn handle(&self, kind: u8, body: Bytes) -> BoxFuture<'static, Result<Bytes, String>> {
        Box::pin(self(kind, body))
    }
}

/// A running server. [`Server::shutdown`] stops it and waits; dropping it
/// stops it too, without waiting.
pub struct Server {
    local_addr: SocketAddr,
    stop: watch::Sender<bool>,
    task: JoinHandle<()>,
}

impl Server {
    /// The address the listener is bound to.
    pub fn local_addr(&self) -> SocketAddr {
        self.local_addr
    }

    /// Closes the listener and every connection (calls in flight on them fail
    /// with `Closed` at their callers), and waits until all are gone.
    pub async fn shutdown(self) {
        let _ = self.stop.send(true);
        let _ = self.task.await;
    }
}

/// Serves `listener`: each accepted connection must complete the handshake as
/// `identity`, then its requests go to `handler`.
pub fn serve(
    listener: Box<dyn Listener>,
    identity: ServerIdentity,
    handler: Arc<dyn Handler>,
    config: NetConfig,
) -> io::Result<Server> {
    let local_addr = listener.local_addr()?;
    let (stop, stopped) = watch::channel(false);
    let task = tokio::spawn(accept_loop(
        listener,
        Arc::new(identity),
        handler,
        config,
        stopped,
    ));
    Ok(Server {
        local_addr,
        stop,
        task,
    })
}

async fn accept_loop(
    mut listener: Box<dyn Listener>,
    identity: Arc<ServerIdentity>,
    handler: Arc<dyn Handler>,
    config: NetConfig,
    mut stopped: watch::Receiver<bool>,
) {
    let slots = Arc::new(Semaphore::new(INTER_NODE_CONNECTIONS_MAX));
    let mut connections = JoinSet::new();
    loop {
        while connections.try_join_next().is_some() {}
        let slot = tokio::select! {
            _ = stopped.wait_for(|stop| *stop) => break,
            slot = Arc::clone(&slots).acquire_owned() => slot,
        };
        let Ok(slot) = slot else { break };
        let accepted = tokio::select! {
            _ = stopped.wait_for(|stop| *stop) => break,
            accepted = listener.accept() => accepted,
        };
        let (stream, from) = match accepted {
            Ok(accepted) => accepted,
            Err(error) => {
                // A failed accept (a connection reset before it was taken, or
                // out of descriptors) is that connection's problem; pause
                // briefly so a persistent failure is not a busy loop.
                tracing::warn!(%error, "inter-node accept failed");
                tokio::time::sleep(Duration::from_millis(INTER_NODE_ACCEPT_RETRY_MS)).await;
                continue;
            }
        };
        let identity = Arc::clone(&identity);
        let handler = Arc::clone(&handler);
        let config = config.clone();
        let stopped = stopped.clone();
        connections.spawn(async move {
            let _slot = slot;
            connection(stream, from, &identity, handler, &config, stopped).await;
        });
    }
    drop(listener);
    // Every connection watches the same signal and ends on it.
    while connections.join_next().await.is_some() {}
}

async fn connection(
    mut stream: BoxStream,
    from: SocketAddr,
    identity: &ServerIdentity,
    handler: Arc<dyn Handler>,
    config: &NetConfig,
    mut stopped: watch::Receiver<bool>,
) {
    let shaken = tokio::select! {
        _ = stopped.wait_for(|stop| *stop) => return,
        shaken = handshake::accept(&mut stream, identity, config.handshake_timeout) => shaken,
    };
    let node = match shaken {
        Ok(node) => node,
        Err(error) => {
            tracing::warn!(%from, %error, "inter-node handshake refused");
            return;
        }
    };
    tracing::debug!(%from, node, "inter-node connection open");
    let told = Arc::clone(&handler);
    let (reader, writer) = tokio::io::split(stream);
    let in_flight = config.in_flight();
    let (answers, queued) = mpsc::channel(in_flight);
    let outcome = tokio::select! {
        _ = stopped.wait_for(|stop| *stop) => Ok(()),
        read = read_requests(reader, handler, answers, in_flight) => read,
        written = write_answers(writer, queued) => written,
    };
    match outcome {
        Ok(()) => tracing::debug!(%from, node, "inter-node connection closed"),
        Err(error) => tracing::warn!(%from, node, %error, "inter-node connection closed"),
    }
    if !*stopped.borrow() {
        told.closed(node);
    }
}

/// Reads requests until the peer closes or sends something wrong; each is
/// handled in a task of its own, at most `in_flight` at once.
async fn read_requests(
    mut reader: ReadHalf<BoxStream>,
    handler: Arc<dyn Handler>,
    answers: mpsc::Sender<Frame>,
    in_flight: usize,
) -> Result<(), String> {
    let permits = Arc::new(Semaphore::new(in_flight));
    // Dropped with this future, which aborts the handlers still running.
    let mut handlers = JoinSet::new();
    let idle = Duration::from_millis(INTER_NODE_CONNECTION_IDLE_MS_MAX);
    let transfer = Duration::from_millis(INTER_NODE_FRAME_TRANSFER_TIMEOUT_MS);
    loop {
        while handlers.try_join_next().is_some() {}
        // The semaphore is never closed.
        let permit = Arc::clone(&permits)
            .acquire_owned()
            .await
            .map_err(|_| "in-flight bound closed".to_string())?;
        let frame = match read_frame(
            &mut reader,
            INTER_NODE_FRAME_BYTES_MAX,
            Some(idle),
            transfer,
        )
        .await
        {
            Ok(frame) => frame,
            Err(super::frame::FrameError::Eof) => return Ok(()),
            Err(error) => return Err(error.to_string()),
        };
        if frame.kind > REQUEST_KIND_MAX {
            return Err(format!("frame kind {} is not a request", frame.kind));
        }
        let handler = Arc::clone(&handler);
        let answers = answers.clone();
        handlers.spawn(async move {
            let answer = match handler.handle(frame.kind, frame.body).await {
                Ok(body) if body.len() <= BODY_BYTES_MAX => Frame {
                    kind: KIND_RESPONSE,
                    correlation: frame.correlation,
                    body,
                },
                Ok(body) => Frame {
                    kind: KIND_ERROR,
                    correlation: frame.correlation,
                    body: Bytes::from(format!(
                        "answer of {} bytes is over the {BODY_BYTES_MAX} a frame holds",
                        body.len()
                    )),
                },
                Err(message) => {
                    let mut message = message.into_bytes();
                    message.truncate(BODY_BYTES_MAX);
                    Frame {
                        kind: KIND_ERROR,
                        correlation: frame.correlation,
                        body: Bytes::from(message),
                    }
                }
            };
            // The writer has gone only if the connection is closing.
            let _ = answers.send(answer).await;
            drop(permit);
        });
    }
}

/// Writes the connection's answers until it closes or a write fails.
async fn write_answers(
    writer: WriteHalf<BoxStream>,
    queued: mpsc::Receiver<Frame>,
) -> Result<(), String> {
    write_queued(writer, queued).await
}
