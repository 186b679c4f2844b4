//! One client connection: length-prefixed frames in, responses out in request
//! order.
//!
//! The reader decodes and runs each request's ordered part (appends happen in the
//! order the client sent them, as Kafka's muted channel guarantees) and hands the
//! writer either a finished response or a future that completes it (a produce
//! waiting for fsync, a fetch waiting for data). The writer awaits them strictly
//! in order. The queue between the two is bounded, so a client that does not read
//! its responses stops being read from.

use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::{Bytes, BytesMut};
use tokio::io::{AsyncReadExt, AsyncWriteExt, BufWriter};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::TcpStream;
use tokio::sync::mpsc;

use crate::limits::{
    CONNECTION_IDLE_MS_MAX, CONNECTION_IN_FLIGHT_REQUESTS_MAX, FRAME_READ_TIMEOUT_MS,
};
use crate::metrics::Metrics;
use crate::protocol::codec::{peek_api, FRAME_LENGTH_PREFIX_BYTES};
use crate::protocol::dispatch::{dispatch, Outcome};
use crate::protocol::ListenerInfo;
use crate::server::BrokerState;

/// Bytes read from the socket per read call while assembling a frame, so memory
/// follows the bytes that actually arrived, not the length a client announced.
const FRAME_READ_CHUNK_BYTES: usize = 64 * 1024;

/// A response, or the work that will produce it.
pub enum Pending {
    Ready(Bytes),
    Later(Pin<Box<dyn Future<Output = Option<Bytes>> + Send>>),
}

/// Which request a queued response answers and when it arrived, for the
/// per-API latency and byte counters.
struct Timing {
    api_key: i16,
    started: Instant,
}

/// Why a connection ended; logged at debug, since clients close all the time.
#[derive(Debug)]
#[allow(dead_code)] // the fields are read through Debug in the close log
enum Closed {
    ByPeer,
    Idle,
    Io(std::io::Error),
    Protocol(String),
}

pub async fn serve(state: Arc<BrokerState>, stream: TcpStream, listener: Arc<ListenerInfo>) {
    let peer_addr = stream
        .peer_addr()
        .unwrap_or_else(|_| SocketAddr::from(([0, 0, 0, 0], 0)));
    let local_addr = stream
        .local_addr()
        .unwrap_or_else(|_| SocketAddr::from(([0, 0, 0, 0], 0)));
    let _ = stream.set_nodelay(true);
    let _open = state.metrics.connection_opened();
    let (reader, writer) = stream.into_split();
    let (queue, responses) = mpsc::channel(CONNECTION_IN_FLIGHT_REQUESTS_MAX);
    let writer_task = tokio::spawn(write_responses(
        Arc::clone(&state.metrics),
        writer,
        responses,
    ));
    let ending = read_requests(&state, reader, &queue, listener, peer_addr, local_addr).await;
    drop(queue);
    let _ = writer_task.await;
    tracing::debug!(%peer_addr, ?ending, "connection closed");
}

async fn read_requests(
    state: &Arc<BrokerState>,
    mut reader: OwnedReadHalf,
    queue: &mpsc::Sender<(Pending, Timing)>,
    listener: Arc<ListenerInfo>,
    peer_addr: SocketAddr,
    local_addr: SocketAddr,
) -> Closed {
    let request_max_bytes = state.config.request_max_bytes;
    loop {
        let frame = match read_frame(&mut reader, request_max_bytes).await {
            Ok(frame) => frame,
            Err(closed) => return closed,
        };
        let timing = Timing {
            api_key: peek_api(&frame).map_or(-1, |(api_key, _)| api_key),
            started: Instant::now(),
        };
        let metrics = &state.metrics;
        metrics.request_received(timing.api_key, FRAME_LENGTH_PREFIX_BYTES + frame.len());
        let connection = crate::protocol::dispatch::Connection {
            listener: Arc::clone(&listener),
            peer_addr,
            local_addr,
        };
        match dispatch(state, &connection, frame).await {
            Outcome::Respond(pending) => {
                if queue.send((pending, timing)).await.is_err() {
                    return Closed::Protocol("writer ended".to_string());
                }
            }
            Outcome::NoResponse => {
                metrics.request_completed(timing.api_key, timing.started.elapsed(), 0);
            }
            Outcome::Close(reason) => {
                metrics.request_errors(timing.api_key, 1);
                metrics.request_completed(timing.api_key, timing.started.elapsed(), 0);
                return Closed::Protocol(reason);
            }
        }
    }
}

/// Reads one frame: a 4-byte length checked against the limit before anything is
/// allocated, then the body in chunks.
async fn read_frame(reader: &mut OwnedReadHalf, request_max_bytes: u32) -> Result<Bytes, Closed> {
    let mut prefix = [0u8; FRAME_LENGTH_PREFIX_BYTES];
    let idle = Duration::from_millis(CONNECTION_IDLE_MS_MAX);
    match tokio::time::timeout(idle, reader.read_exact(&mut prefix)).await {
        Err(_) => return Err(Closed::Idle),
        Ok(Err(error)) if error.kind() == std::io::ErrorKind::UnexpectedEof => {
            return Err(Closed::ByPeer)
        }
        Ok(Err(error)) => return Err(Closed::Io(error)),
        Ok(Ok(_)) => {}
    }
    let length = i32::from_be_bytes(prefix);
    if length < 0 || length as u32 > request_max_bytes {
        return Err(Closed::Protocol(format!(
            "frame length {length} outside 0..={request_max_bytes}"
        )));
    }
    let length = length as usize;
    let mut frame = BytesMut::with_capacity(length.min(FRAME_READ_CHUNK_BYTES));
    let deadline = Duration::from_millis(FRAME_READ_TIMEOUT_MS);
    let body = async {
        while frame.len() < length {
            frame.reserve((length - frame.len()).min(FRAME_READ_CHUNK_BYTES));
            let room = length - frame.len();
            let read = (&mut *reader)
                .take(room as u64)
                .read_buf(&mut frame)
                .await?;
            if read == 0 {
                return Err(std::io::Error::from(std::io::ErrorKind::UnexpectedEof));
            }
        }
        Ok(())
    };
    match tokio::time::timeout(deadline, body).await {
        Err(_) => Err(Closed::Protocol("frame not completed in time".to_string())),
        Ok(Err(error)) if error.kind() == std::io::ErrorKind::UnexpectedEof => Err(Closed::ByPeer),
        Ok(Err(error)) => Err(Closed::Io(error)),
        Ok(Ok(())) => Ok(frame.freeze()),
    }
}

async fn write_responses(
    metrics: Arc<Metrics>,
    writer: OwnedWriteHalf,
    mut responses: mpsc::Receiver<(Pending, Timing)>,
) {
    let mut writer = BufWriter::new(writer);
    while let Some((pending, timing)) = responses.recv().await {
        let bytes = match pending {
            Pending::Ready(bytes) => Some(bytes),
            Pending::Later(future) => future.await,
        };
        let Some(bytes) = bytes else {
            // A response that could not be built: the client's view of the
            // connection is now out of order, so end it.
            metrics.request_errors(timing.api_key, 1);
            break;
        };
        if writer.write_all(&bytes).await.is_err() {
            break;
        }
        // Counted once the bytes are with the socket's buffer; a flush still
        // pending for a pipelined batch is not waited for.
        metrics.request_completed(timing.api_key, timing.started.elapsed(), bytes.len());
        if responses.is_empty() && writer.flush().await.is_err() {
            break;
        }
    }
    let _ = writer.flush().await;
    let _ = writer.shutdown().await;
}
