//! One client connection: length-prefixed frames in, responses out in request
//! order.
//!
//! The reader decodes and runs each request's ordered part (appends happen in the
//! order the client sent them, as Kafka's muted channel guarantees) and hands the
//! writer either a finished response or a future that completes it (a produce
//! waiting for fsync, a fetch waiting for data). The writer awaits them strictly
//! in order. The queue between the two is bounded, so a client that does not read
//! its responses stops being read from.
//!
//! Every connection shares one budget of request bytes in flight
//! (`queued_max_request_bytes`). Once a frame's length has been checked, and
//! before any of its body is allocated, the reader reserves that many bytes and
//! waits while the budget is spent: the broker stops reading instead of growing.
//! The reservation is given back once nothing can hold the request's bytes any
//! more: after dispatch for a request answered at once (or not at all), and for a
//! response still being worked on, when its future has completed. Waiting for the
//! budget is not the client's delay, so it neither counts toward the frame read
//! deadline nor ends the connection.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::{Bytes, BytesMut};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, BufWriter};
use tokio::net::TcpStream;
use tokio::sync::{mpsc, OwnedSemaphorePermit, Semaphore};

use crate::limits::FRAME_READ_CHUNK_BYTES;
use crate::limits::{
    CONNECTION_IDLE_MS_MAX, CONNECTION_IN_FLIGHT_REQUESTS_MAX, FRAME_READ_TIMEOUT_MS,
};
use crate::metrics::Metrics;
use crate::protocol::codec::{peek_api, FRAME_LENGTH_PREFIX_BYTES};
use crate::protocol::context::BrokerState;
use crate::protocol::dispatch::dispatch;
use crate::protocol::{ListenerInfo, Outcome, Pending};
use crate::security::Principal;

/// Which request a queued response answers and when it arrived, for the
/// per-API latency and byte counters.
struct Timing {
    api_key: i16,
    started: Instant,
}

/// A response on its way to the writer.
struct Queued {
    pending: Pending,
    timing: Timing,
    /// The request's share of the budget while its response is still being
    /// worked on, since the future may hold the request's bytes until it
    /// completes; none for a response that is already finished.
    reservation: Option<OwnedSemaphorePermit>,
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

/// Serves a plaintext connection.
pub async fn serve(
    state: Arc<BrokerState>,
    request_max_bytes: u32,
    stream: TcpStream,
    listener: Arc<ListenerInfo>,
    request_budget: Arc<Semaphore>,
) {
    let ends = Ends::accepted(&stream, listener);
    serve_halves(
        state,
        request_max_bytes,
        stream.into_split(),
        ends,
        request_budget,
    )
    .await;
}

/// Who a connection is with and where it came in.
pub struct Ends {
    pub peer_addr: SocketAddr,
    pub local_addr: SocketAddr,
    pub listener: Arc<ListenerInfo>,
    /// ANONYMOUS, or the principal of the client's certificate.
    pub principal: Principal,
}

impl Ends {
    /// The ends of a socket just accepted on `listener`, set to send at once
    /// (no Nagle delay).
    pub fn accepted(stream: &TcpStream, listener: Arc<ListenerInfo>) -> Ends {
        let unknown = || SocketAddr::from(([0, 0, 0, 0], 0));
        let _ = stream.set_nodelay(true);
        Ends {
            peer_addr: stream.peer_addr().unwrap_or_else(|_| unknown()),
            local_addr: stream.local_addr().unwrap_or_else(|_| unknown()),
            listener,
            principal: Principal::anonymous(),
        }
    }
}

/// Serves a connection over any byte stream (a TLS session), split in two.
pub async fn serve_stream<S>(
    state: Arc<BrokerState>,
    request_max_bytes: u32,
    stream: S,
    ends: Ends,
    request_budget: Arc<Semaphore>,
) where
    S: AsyncRead + AsyncWrite + Send + 'static,
{
    let halves = tokio::io::split(stream);
    serve_halves(state, request_max_bytes, halves, ends, request_budget).await;
}

async fn serve_halves<R, W>(
    state: Arc<BrokerState>,
    request_max_bytes: u32,
    (reader, writer): (R, W),
    Ends {
        peer_addr,
        local_addr,
        listener,
        principal,
    }: Ends,
    request_budget: Arc<Semaphore>,
) where
    R: AsyncRead + Unpin + Send,
    W: AsyncWrite + Unpin + Send + 'static,
{
    let _open = state.metrics().connection_opened();
    let (queue, responses) = mpsc::channel(CONNECTION_IN_FLIGHT_REQUESTS_MAX);
    let writer_task = tokio::spawn(write_responses(
        Arc::clone(state.metrics()),
        writer,
        responses,
    ));
    let mut connection =
        crate::protocol::Connection::new(listener, peer_addr, local_addr, principal);
    let ending = read_requests(
        &state,
        request_max_bytes,
        reader,
        &queue,
        &mut connection,
        &request_budget,
    )
    .await;
    drop(queue);
    let _ = writer_task.await;
    tracing::debug!(%peer_addr, ?ending, "connection closed");
}

async fn read_requests<R: AsyncRead + Unpin>(
    state: &Arc<BrokerState>,
    request_max_bytes: u32,
    mut reader: R,
    queue: &mpsc::Sender<Queued>,
    connection: &mut crate::protocol::Connection,
    request_budget: &Arc<Semaphore>,
) -> Closed {
    loop {
        let (frame, reservation) =
            match read_frame(&mut reader, request_max_bytes, request_budget).await {
                Ok(read) => read,
                Err(closed) => return closed,
            };
        let timing = Timing {
            api_key: peek_api(&frame).map_or(-1, |(api_key, _)| api_key),
            started: Instant::now(),
        };
        let metrics = state.metrics();
        metrics.request_received(timing.api_key, FRAME_LENGTH_PREFIX_BYTES + frame.len());
        let outcome = dispatch(state, connection, frame).await;
        // Dispatch has consumed the frame; only a response still being worked on
        // can hold its bytes now, so every other request gives its share back
        // here, before waiting for room in the queue.
        let reservation = matches!(
            outcome,
            Outcome::Respond(Pending::Later(_)) | Outcome::RespondAndClose(Pending::Later(_), _)
        )
        .then_some(reservation);
        match outcome {
            Outcome::Respond(pending) => {
                let queued = Queued {
                    pending,
                    timing,
                    reservation,
                };
                if queue.send(queued).await.is_err() {
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
            Outcome::RespondAndClose(pending, reason) => {
                let queued = Queued {
                    pending,
                    timing,
                    reservation: None,
                };
                // The writer sends what is queued, this last answer included,
                // before it closes.
                let _ = queue.send(queued).await;
                return Closed::Protocol(reason);
            }
        }
    }
}

/// Reads one frame: a 4-byte length checked against the limit, then that many
/// bytes reserved from the budget (waiting while it is spent) before anything is
/// allocated, then the body in chunks. The frame comes back with its reservation.
async fn read_frame<R: AsyncRead + Unpin>(
    reader: &mut R,
    request_max_bytes: u32,
    request_budget: &Arc<Semaphore>,
) -> Result<(Bytes, OwnedSemaphorePermit), Closed> {
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
    // The wait is back-pressure, not the client being slow, so it has no
    // deadline of its own; the body's deadline starts once the bytes are granted.
    // The budget is never closed, so an error here is only a defensive exit.
    let reservation = Arc::clone(request_budget)
        .acquire_many_owned(length as u32)
        .await
        .map_err(|_| Closed::Protocol("request budget closed".to_string()))?;
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
        Ok(Ok(())) => Ok((frame.freeze(), reservation)),
    }
}

async fn write_responses<W: AsyncWrite + Unpin>(
    metrics: Arc<Metrics>,
    writer: W,
    mut responses: mpsc::Receiver<Queued>,
) {
    let mut writer = BufWriter::new(writer);
    while let Some(queued) = responses.recv().await {
        let Queued {
            pending,
            timing,
            reservation,
        } = queued;
        let bytes = match pending {
            Pending::Ready(bytes) => Some(bytes),
            Pending::Later(future) => future.await,
        };
        // The future has completed and is gone, and with it anything that held
        // the request's bytes; the response is not request memory, so the share
        // goes back before waiting on the client's socket.
        drop(reservation);
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

#[cfg(test)]
mod tests {
    use super::*;

    use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
    use tokio::net::TcpListener;
    use tokio::sync::oneshot;
    use tokio::sync::OwnedSemaphorePermit;

    /// A loopback connection: (client, the broker's reading and writing halves).
    async fn connected() -> (TcpStream, OwnedReadHalf, OwnedWriteHalf) {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let address = listener.local_addr().expect("address");
        let client = TcpStream::connect(address).await.expect("connect");
        let (served, _) = listener.accept().await.expect("accept");
        let (reader, writer) = served.into_split();
        (client, reader, writer)
    }

    /// A request budget of 1024 bytes, and a reservation of `held` of them.
    async fn budget_holding(held: u32) -> (Arc<Semaphore>, OwnedSemaphorePermit) {
        let budget = Arc::new(Semaphore::new(1024));
        let reservation = Arc::clone(&budget)
            .acquire_many_owned(held)
            .await
            .expect("budget");
        (budget, reservation)
    }

    fn framed(body: &[u8]) -> Vec<u8> {
        let mut out = (body.len() as i32).to_be_bytes().to_vec();
        out.extend_from_slice(body);
        out
    }

    #[tokio::test(start_paused = true)]
    async fn a_frame_waits_for_budget_without_a_deadline_and_then_is_read() {
        let (mut client, mut reader, _writer) = connected().await;
        let (budget, held) = budget_holding(1024).await;
        client.write_all(&framed(&[7; 100])).await.expect("write");
        let read = tokio::spawn(async move {
            let read = read_frame(&mut reader, 1024, &budget).await;
            read.map(|(frame, reservation)| (frame, reservation.num_permits()))
        });
        // Far longer than the frame read deadline: waiting for budget is not the
        // client's delay.
        tokio::time::sleep(Duration::from_millis(10 * FRAME_READ_TIMEOUT_MS)).await;
        assert!(!read.is_finished(), "the frame was read without budget");
        drop(held);
        let (frame, reserved) = read.await.expect("task").expect("frame");
        assert_eq!(frame.as_ref(), &[7; 100]);
        assert_eq!(reserved, 100);
    }

    #[tokio::test(start_paused = true)]
    async fn the_body_deadline_starts_when_the_budget_is_granted() {
        let (mut client, mut reader, _writer) = connected().await;
        let (budget, held) = budget_holding(1024).await;
        // A length promising 100 bytes and only 10 of them.
        let mut partial = framed(&[7; 100]);
        partial.truncate(14);
        client.write_all(&partial).await.expect("write");
        let waiting_budget = Arc::clone(&budget);
        let read =
            tokio::spawn(async move { read_frame(&mut reader, 1024, &waiting_budget).await });
        tokio::time::sleep(Duration::from_millis(2 * FRAME_READ_TIMEOUT_MS)).await;
        assert!(!read.is_finished(), "closed while waiting for budget");
        drop(held);
        tokio::time::sleep(Duration::from_millis(FRAME_READ_TIMEOUT_MS - 1_000)).await;
        assert!(!read.is_finished(), "closed before its own deadline");
        tokio::time::sleep(Duration::from_millis(2_000)).await;
        let closed = read.await.expect("task");
        assert!(matches!(closed, Err(Closed::Protocol(_))));
        // The incomplete frame's reservation went back with it.
        assert_eq!(budget.available_permits(), 1024);
    }

    #[tokio::test]
    async fn a_later_response_keeps_its_reservation_until_its_future_completes() {
        let (mut client, _reader, writer) = connected().await;
        let (budget, reservation) = budget_holding(1000).await;
        let (finish, finished) = oneshot::channel::<Bytes>();
        let (queue, responses) = mpsc::channel(CONNECTION_IN_FLIGHT_REQUESTS_MAX);
        let writer_task =
            tokio::spawn(write_responses(Arc::new(Metrics::new()), writer, responses));
        let (polled, writer_awaits) = oneshot::channel::<()>();
        let later = Pending::Later(Box::pin(async move {
            let _ = polled.send(());
            finished.await.ok()
        }));
        let timing = Timing {
            api_key: 0,
            started: Instant::now(),
        };
        let queued = Queued {
            pending: later,
            timing,
            reservation: Some(reservation),
        };
        assert!(queue.send(queued).await.is_ok());
        writer_awaits.await.expect("the writer polls the future");
        assert_eq!(budget.available_permits(), 24, "given back too early");
        finish
            .send(Bytes::from_static(&[0, 0, 0, 1, 9]))
            .expect("writer waits");
        let mut answer = [0u8; 5];
        client.read_exact(&mut answer).await.expect("answer");
        assert_eq!(answer, [0, 0, 0, 1, 9]);
        assert_eq!(budget.available_permits(), 1024);
        drop(queue);
        writer_task.await.expect("writer");
    }
}
