//! A TCP proxy between clients and a broker that loses Produce responses on purpose.
//!
//! The broker advertises the proxy's address, so every connection a client opens goes
//! through it. Requests are forwarded untouched; every `lose_every`-th Produce
//! response is thrown away and both sides of its connection are cut, as when a
//! network path fails after the broker appended the batch but before the client
//! heard of it. The client must then retry a batch the broker already holds: an
//! idempotent producer's retries must not become duplicates.

use std::collections::HashMap;
use std::io::{self, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;

/// Kafka's Produce API key.
const PRODUCE_API_KEY: i16 = 0;
/// The largest frame the proxy forwards, in bytes; larger is treated as garbage.
const FRAME_BYTES_MAX: usize = 64 * 1024 * 1024;

/// What the proxy shares with its connection threads.
struct Shared {
    upstream: SocketAddr,
    lose_every: usize,
    lose_max: usize,
    produce_responses: AtomicUsize,
    lost: AtomicUsize,
    stop: AtomicBool,
}

/// A running proxy; dropping it stops accepting (open connections end with their peers).
pub struct LossyProxy {
    addr: SocketAddr,
    shared: Arc<Shared>,
}

impl LossyProxy {
    /// Listens on `127.0.0.1:port` and forwards to `upstream`, losing every
    /// `lose_every`-th Produce response, at most `lose_max` of them.
    pub fn start(
        port: u16,
        upstream: SocketAddr,
        lose_every: usize,
        lose_max: usize,
    ) -> LossyProxy {
        assert!(lose_every > 0, "lose_every counts responses from 1");
        let listener = TcpListener::bind(("127.0.0.1", port)).expect("proxy listens");
        let addr = listener.local_addr().expect("proxy address");
        let shared = Arc::new(Shared {
            upstream,
            lose_every,
            lose_max,
            produce_responses: AtomicUsize::new(0),
            lost: AtomicUsize::new(0),
            stop: AtomicBool::new(false),
        });
        let accept_shared = Arc::clone(&shared);
        thread::spawn(move || {
            for client in listener.incoming() {
                if accept_shared.stop.load(Ordering::Acquire) {
                    break;
                }
                let Ok(client) = client else { continue };
                let shared = Arc::clone(&accept_shared);
                thread::spawn(move || {
                    // A broker that went away ends the connection; nothing to report.
                    let _ = proxy_connection(client, &shared);
                });
            }
        });
        LossyProxy { addr, shared }
    }

    /// Produce responses thrown away so far.
    pub fn lost(&self) -> usize {
        self.shared.lost.load(Ordering::Acquire)
    }

    /// Produce responses seen so far, lost or forwarded.
    pub fn produce_responses(&self) -> usize {
        self.shared.produce_responses.load(Ordering::Acquire)
    }
}

impl Drop for LossyProxy {
    fn drop(&mut self) {
        self.shared.stop.store(true, Ordering::Release);
        // Wake the accept loop so it sees the flag.
        let _ = TcpStream::connect(self.addr);
    }
}

/// Reads one size-prefixed Kafka frame (size included).
fn read_frame(stream: &mut TcpStream) -> io::Result<Vec<u8>> {
    let mut size = [0u8; 4];
    stream.read_exact(&mut size)?;
    let length = i32::from_be_bytes(size);
    let length = usize::try_from(length)
        .ok()
        .filter(|&l| l <= FRAME_BYTES_MAX)
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidData, "bad frame size"))?;
    let mut frame = vec![0u8; 4 + length];
    frame[..4].copy_from_slice(&size);
    stream.read_exact(&mut frame[4..])?;
    Ok(frame)
}

fn proxy_connection(client: TcpStream, shared: &Arc<Shared>) -> io::Result<()> {
    let upstream = TcpStream::connect(shared.upstream)?;
    client.set_nodelay(true)?;
    upstream.set_nodelay(true)?;
    // correlation id -> api key of the requests in flight on this connection.
    let in_flight: Arc<Mutex<HashMap<i32, i16>>> = Arc::default();

    let mut requests_from = client.try_clone()?;
    let mut requests_to = upstream.try_clone()?;
    let requests_in_flight = Arc::clone(&in_flight);
    let forward_requests = thread::spawn(move || -> io::Result<()> {
        loop {
            let frame = read_frame(&mut requests_from)?;
            if frame.len() >= 12 {
                let api_key = i16::from_be_bytes([frame[4], frame[5]]);
                let correlation_id = i32::from_be_bytes([frame[8], frame[9], frame[10], frame[11]]);
                requests_in_flight
                    .lock()
                    .expect("in-flight map")
                    .insert(correlation_id, api_key);
            }
            requests_to.write_all(&frame)?;
        }
    });

    let mut responses_from = upstream.try_clone()?;
    let mut responses_to = client.try_clone()?;
    let result = loop {
        let frame = match read_frame(&mut responses_from) {
            Ok(frame) => frame,
            Err(error) => break Err(error),
        };
        let correlation_id = if frame.len() >= 8 {
            i32::from_be_bytes([frame[4], frame[5], frame[6], frame[7]])
        } else {
            -1
        };
        let api_key = in_flight
            .lock()
            .expect("in-flight map")
            .remove(&correlation_id);
        if api_key == Some(PRODUCE_API_KEY) {
            let seen = shared.produce_responses.fetch_add(1, Ordering::AcqRel) + 1;
            if seen.is_multiple_of(shared.lose_every)
                && shared.lost.load(Ordering::Acquire) < shared.lose_max
            {
                shared.lost.fetch_add(1, Ordering::AcqRel);
                break Ok(());
            }
        }
        if let Err(error) = responses_to.write_all(&frame) {
            break Err(error);
        }
    };
    let _ = client.shutdown(Shutdown::Both);
    let _ = upstream.shutdown(Shutdown::Both);
    let _ = forward_requests.join();
    result
}
