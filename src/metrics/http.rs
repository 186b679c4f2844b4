//! A minimal HTTP/1.1 responder for Prometheus scrapes: `GET /metrics` answers
//! the text exposition, anything else a short error; every response closes its
//! connection. A scraper is the only client, so this is all of HTTP it needs.
//! Bounded everywhere: scrapes served at once, request head size, and the time
//! a client has to send it.

use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{watch, Semaphore};
use tokio::task::JoinSet;

use super::render::METRICS_GROUP_OFFSETS_MAX;
use crate::server::BrokerState;

/// Scrapes served at once; further connections wait to be accepted.
pub const METRICS_CONNECTIONS_MAX: usize = 8;

/// Largest request head read (request line and headers); a scraper sends a
/// few hundred bytes.
pub const METRICS_REQUEST_HEAD_BYTES_MAX: usize = 8 * 1024;

/// How long a client has to send its request head.
pub const METRICS_REQUEST_TIMEOUT_MS: u64 = 5_000;

const PROMETHEUS_TEXT: &str = "text/plain; version=0.0.4; charset=utf-8";

/// Serves scrapes on `listener` until `stopped` changes.
pub async fn serve(
    state: Arc<BrokerState>,
    listener: TcpListener,
    mut stopped: watch::Receiver<bool>,
) {
    let slots = Arc::new(Semaphore::new(METRICS_CONNECTIONS_MAX));
    let mut open = JoinSet::new();
    loop {
        let permit = tokio::select! {
            _ = stopped.changed() => break,
            permit = Arc::clone(&slots).acquire_owned() => match permit {
                Ok(permit) => permit,
                Err(_) => break,
            },
        };
        let accepted = tokio::select! {
            _ = stopped.changed() => break,
            accepted = listener.accept() => accepted,
        };
        match accepted {
            Ok((stream, _)) => {
                let state = Arc::clone(&state);
                open.spawn(async move {
                    answer(&state, stream).await;
                    drop(permit);
                });
            }
            Err(error) => {
                tracing::warn!(%error, "metrics: accept failed");
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        }
        while open.try_join_next().is_some() {}
    }
    open.shutdown().await;
}

async fn answer(state: &Arc<BrokerState>, mut stream: TcpStream) {
    let timeout = Duration::from_millis(METRICS_REQUEST_TIMEOUT_MS);
    let head = match tokio::time::timeout(timeout, read_head(&mut stream)).await {
        Ok(Some(head)) => head,
        Ok(None) | Err(_) => {
            let _ = respond(
                &mut stream,
                "400 Bad Request",
                "text/plain",
                b"bad request\n",
            )
            .await;
            return;
        }
    };
    let mut request_line = head.split_whitespace();
    let method = request_line.next().unwrap_or("");
    let path = request_line.next().unwrap_or("");
    let path = path.split('?').next().unwrap_or("");
    let (status, content_type, body) = match (method, path) {
        ("GET" | "HEAD", "/metrics") => {
            let listed = state
                .groups
                .committed_offsets(METRICS_GROUP_OFFSETS_MAX)
                .await
                .map_err(std::io::Error::other)
                .and_then(|listed| listed);
            let committed = match listed {
                Ok(rows) => Some(rows),
                Err(error) => {
                    tracing::warn!(%error, "metrics: cannot list committed offsets");
                    None
                }
            };
            let state = Arc::clone(state);
            match tokio::task::spawn_blocking(move || super::render(&state, committed)).await {
                Ok(text) => ("200 OK", PROMETHEUS_TEXT, text.into_bytes()),
                Err(_) => (
                    "500 Internal Server Error",
                    "text/plain",
                    b"rendering failed\n".to_vec(),
                ),
            }
        }
        ("GET" | "HEAD", _) => (
            "404 Not Found",
            "text/plain",
            b"metrics are at /metrics\n".to_vec(),
        ),
        _ => (
            "405 Method Not Allowed",
            "text/plain",
            b"only GET\n".to_vec(),
        ),
    };
    let body = if method == "HEAD" { &[][..] } else { &body[..] };
    let _ = respond(&mut stream, status, content_type, body).await;
}

/// The request head up to the blank line, or None if it is too long, not
/// UTF-8, or the client went away first.
async fn read_head(stream: &mut TcpStream) -> Option<String> {
    let mut head = Vec::with_capacity(512);
    let mut chunk = [0u8; 512];
    loop {
        let read = stream.read(&mut chunk).await.ok()?;
        if read == 0 {
            return None;
        }
        head.extend_from_slice(&chunk[..read]);
        if head.windows(4).any(|w| w == b"\r\n\r\n") || head.windows(2).any(|w| w == b"\n\n") {
            return String::from_utf8(head).ok();
        }
        if head.len() > METRICS_REQUEST_HEAD_BYTES_MAX {
            return None;
        }
    }
}

async fn respond(
    stream: &mut TcpStream,
    status: &str,
    content_type: &str,
    body: &[u8],
) -> std::io::Result<()> {
    let head = format!(
        "HTTP/1.1 {status}\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    stream.write_all(head.as_bytes()).await?;
    stream.write_all(body).await?;
    stream.shutdown().await
}
