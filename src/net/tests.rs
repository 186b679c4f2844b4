//! The transport over real loopback sockets. Nothing here waits for time to
//! pass for a result: deadlines are hang guards, and orderings are forced with
//! gates rather than sleeps.
#![allow(clippy::unwrap_used)]

use std::collections::BTreeSet;
use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::atomic::AtomicBool;
use std::sync::atomic::AtomicUsize;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::sync::Mutex;
use std::task::Context;
use std::task::Poll;
use std::task::Waker;
use std::time::Duration;

use bytes::Bytes;
use tokio::io::AsyncRead;
use tokio::io::AsyncReadExt;
use tokio::io::AsyncWrite;
use tokio::io::AsyncWriteExt;
use tokio::io::ReadBuf;
use tokio::net::TcpListener;
use tokio::net::TcpStream;
use tokio::sync::mpsc;
use tokio::sync::oneshot;
use tokio::sync::Notify;

use super::frame::read_frame;
use super::frame::write_frame;
use super::frame::KIND_HELLO;
use super::frame::KIND_RESPONSE;
use super::frame::KIND_WELCOME;
use super::handshake;
use super::handshake::Hello;
use super::handshake::Welcome;
use super::ClusterId;
use super::*;
use crate::limits::INTER_NODE_FRAME_BYTES_MAX;

/// Only a hang guard: every test ends long before it on any machine.
const GUARD: Duration = Duration::from_secs(30);

const CLUSTER: &str = "cluster-a";

const ECHO: u8 = 1;
const GATED: u8 = 2;
const NEVER: u8 = 3;
const LENGTH: u8 = 4;

fn server_identity(node_id: NodeId) -> ServerIdentity {
    ServerIdentity {
        cluster_id: ClusterId::known(CLUSTER),
        node_id,
    }
}

fn client_identity(cluster: Option<&str>, node_id: NodeId) -> ClientIdentity {
    ClientIdentity {
        cluster_id: cluster.map(ClusterId::known).unwrap_or_default(),
        node_id,
    }
}

/// Echoes ECHO, answers LENGTH with the body's length, never answers NEVER,
/// refuses the rest.
fn simple_handler() -> Arc<dyn Handler> {
    Arc::new(|kind: u8, body: Bytes| async move {
        match kind {
            ECHO => Ok(body),
            LENGTH => Ok(Bytes::from(body.len().to_string())),
            NEVER => std::future::pending().await,
            other => Err(format!("unknown kind {other}")),
        }
    })
}

async fn start(
    address: &str,
    identity: ServerIdentity,
    handler: Arc<dyn Handler>,
    config: NetConfig,
) -> Server {
    let listener = Tcp.bind(address).await.unwrap();
    serve(listener, identity, handler, config).unwrap()
}

/// Node 2 of `CLUSTER`, serving `handler` with default settings on a free port.
async fn start_node_2(handler: Arc<dyn Handler>) -> Server {
    start(
        "127.0.0.1:0",
        server_identity(2),
        handler,
        NetConfig::default(),
    )
    .await
}

async fn start_simple(node_id: NodeId) -> Server {
    start(
        "127.0.0.1:0",
        server_identity(node_id),
        simple_handler(),
        NetConfig::default(),
    )
    .await
}

/// A server as node 2 of `CLUSTER` with `handler`, and a peer to it from node 1,
/// both with the default settings: the setup most tests share.
async fn connected(handler: Arc<dyn Handler>) -> (Server, Peer) {
    let server = start_node_2(handler).await;
    let peer = node_1_to_2(server.local_addr());
    (server, peer)
}

fn peer_to(server: SocketAddr, to: NodeId, identity: ClientIdentity, config: NetConfig) -> Peer {
    Peer::new(Arc::new(Tcp), identity, to, server.to_string(), config)
}

/// A peer from node `from` (of `cluster`, if it knows one) to node `to` at
/// `server`, default settings.
fn peer_from(server: SocketAddr, to: NodeId, cluster: Option<&str>, from: NodeId) -> Peer {
    peer_to(
        server,
        to,
        client_identity(cluster, from),
        NetConfig::default(),
    )
}

/// A peer from node 1 of `CLUSTER` to node 2 at `server`, default settings.
fn node_1_to_2(server: SocketAddr) -> Peer {
    peer_from(server, 2, Some(CLUSTER), 1)
}

async fn echo(peer: &Peer, body: &'static str) -> Result<Bytes, NetError> {
    guard(peer.call(ECHO, Bytes::from_static(body.as_bytes()), None)).await
}

/// An echo through `peer` after its server restarted: tried again once when
/// the old connection's close was seen only by the first try.
async fn echo_after_restart(peer: &Peer, body: &'static str) -> Result<Bytes, NetError> {
    let result = echo(peer, body).await;
    if matches!(result, Err(NetError::Closed(_))) {
        return echo(peer, body).await;
    }
    result
}

/// Whether an echo through `peer` finds nothing listening at its address.
async fn unreachable(peer: &Peer) -> bool {
    matches!(echo(peer, "x").await, Err(NetError::Unreachable(_)))
}

async fn guard<T>(future: impl std::future::Future<Output = T>) -> T {
    tokio::time::timeout(GUARD, future)
        .await
        .expect("hang guard passed")
}

/// A raw connection that has completed the handshake with node `to`.
async fn raw_handshaken(server: SocketAddr, to: NodeId) -> TcpStream {
    let mut stream = TcpStream::connect(server).await.unwrap();
    handshake::connect(&mut stream, &client_identity(Some(CLUSTER), 9), to, GUARD)
        .await
        .unwrap();
    stream
}

/// Waits until the other side has closed `stream` (end of stream or reset).
async fn assert_closed(stream: &mut TcpStream) {
    let mut buffer = [0u8; 1024];
    guard(async {
        loop {
            match stream.read(&mut buffer).await {
                Ok(0) | Err(_) => return,
                Ok(_) => {}
            }
        }
    })
    .await;
}

/// Polls `condition` until it holds (a hang guard, not a timing).
async fn eventually(mut condition: impl FnMut() -> bool) {
    guard(async {
        while !condition() {
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
    })
    .await;
}

#[tokio::test]
async fn net_handshake_succeeds_and_a_call_is_answered() {
    let server = start_simple(2).await;
    let peer = node_1_to_2(server.local_addr());
    assert_eq!(echo(&peer, "hello").await.unwrap(), Bytes::from("hello"));
    // The handler's error comes back as such, and the connection stays usable.
    assert_eq!(
        guard(peer.call(9, Bytes::new(), None)).await,
        Err(NetError::Remote("unknown kind 9".to_string()))
    );
    assert_eq!(echo(&peer, "again").await.unwrap(), Bytes::from("again"));
    assert_eq!(
        guard(peer.call(REQUEST_KIND_MAX + 1, Bytes::new(), None)).await,
        Err(NetError::InvalidKind(REQUEST_KIND_MAX + 1))
    );
    server.shutdown().await;
}

#[tokio::test]
async fn net_an_unknown_cluster_id_is_learnt_and_then_insisted_on() {
    let server = start_simple(2).await;
    let address = server.local_addr();
    let peer = peer_from(address, 2, None, 1);
    assert_eq!(peer.cluster_id(), None);
    assert_eq!(echo(&peer, "hi").await.unwrap(), Bytes::from("hi"));
    assert_eq!(peer.cluster_id(), Some(CLUSTER.to_string()));
    server.shutdown().await;

    // The same address now answers for another cluster: the learnt id refuses it.
    let other = start(
        &address.to_string(),
        ServerIdentity {
            cluster_id: ClusterId::known("cluster-b"),
            node_id: 2,
        },
        simple_handler(),
        NetConfig::default(),
    )
    .await;
    let result = echo_after_restart(&peer, "hi").await;
    assert_eq!(
        result,
        Err(NetError::Handshake(HandshakeError::WrongCluster {
            expected: CLUSTER.to_string(),
            got: "cluster-b".to_string(),
        }))
    );
    other.shutdown().await;
}

#[tokio::test]
async fn net_a_server_without_a_cluster_id_adopts_the_first_one_named_and_then_insists_on_it() {
    let cluster = ClusterId::unknown();
    let identity = ServerIdentity {
        cluster_id: cluster.clone(),
        node_id: 2,
    };
    let server = start(
        "127.0.0.1:0",
        identity,
        simple_handler(),
        NetConfig::default(),
    )
    .await;
    let address = server.local_addr();

    // Two nodes that know no cluster yet may talk, and neither learns one.
    let pristine = peer_from(address, 2, None, 1);
    assert_eq!(echo(&pristine, "a").await.unwrap(), Bytes::from("a"));
    assert_eq!((cluster.get(), pristine.cluster_id()), (None, None));

    // A hello meant for another node adopts nothing.
    let misdirected = peer_from(address, 9, Some("cluster-z"), 1);
    assert!(matches!(
        echo(&misdirected, "b").await,
        Err(NetError::Handshake(HandshakeError::WrongNode { .. }))
    ));
    assert_eq!(cluster.get(), None);

    // The first cluster id named is adopted by the server...
    assert_eq!(
        echo(&node_1_to_2(address), "c").await.unwrap(),
        Bytes::from("c")
    );
    assert_eq!(cluster.get(), Some(CLUSTER.to_string()));
    // ...which then refuses another, and teaches it to a node that knows none.
    let other = peer_from(address, 2, Some("cluster-b"), 3);
    assert!(matches!(
        echo(&other, "d").await,
        Err(NetError::Handshake(HandshakeError::WrongCluster { .. }))
    ));
    let learner = peer_from(address, 2, None, 4);
    assert_eq!(echo(&learner, "e").await.unwrap(), Bytes::from("e"));
    assert_eq!(learner.cluster_id(), Some(CLUSTER.to_string()));
    server.shutdown().await;
}

#[tokio::test]
async fn net_a_wrong_cluster_id_is_refused_by_the_accepting_side() {
    let server = start_simple(2).await;
    let peer = peer_from(server.local_addr(), 2, Some("cluster-b"), 1);
    assert_eq!(
        echo(&peer, "x").await,
        Err(NetError::Handshake(HandshakeError::WrongCluster {
            expected: "cluster-b".to_string(),
            got: CLUSTER.to_string(),
        }))
    );
    // The server goes on serving the right cluster.
    let good = node_1_to_2(server.local_addr());
    assert_eq!(echo(&good, "y").await.unwrap(), Bytes::from("y"));
    server.shutdown().await;
}

/// A listener that answers every hello with `welcome`, whatever it says.
async fn fake_acceptor(welcome: Welcome) -> (SocketAddr, tokio::task::JoinHandle<Hello>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    let task = tokio::spawn(async move {
        let (mut stream, _) = listener.accept().await.unwrap();
        let frame = read_frame(&mut stream, 4096, None, GUARD).await.unwrap();
        assert_eq!(frame.kind, KIND_HELLO);
        let hello: Hello = serde_json::from_slice(&frame.body).unwrap();
        let body = serde_json::to_vec(&welcome).unwrap();
        write_frame(&mut stream, KIND_WELCOME, 0, &body)
            .await
            .unwrap();
        stream.flush().await.unwrap();
        // Whatever the client does next, it must close.
        assert_closed(&mut stream).await;
        hello
    });
    (address, task)
}

#[tokio::test]
async fn net_a_wrong_cluster_or_node_in_the_answer_is_refused_by_the_connecting_side() {
    // (the acceptor's cluster and node, what the connecting side answers)
    let cases = [
        (
            "cluster-x",
            2,
            HandshakeError::WrongCluster {
                expected: CLUSTER.to_string(),
                got: "cluster-x".to_string(),
            },
        ),
        (
            CLUSTER,
            7,
            HandshakeError::WrongNode {
                expected: 2,
                got: 7,
            },
        ),
    ];
    for (cluster_id, node_id, refusal) in cases {
        let (address, acceptor) = fake_acceptor(Welcome {
            version: PROTOCOL_VERSION,
            cluster_id: Some(cluster_id.to_string()),
            node_id,
        })
        .await;
        let peer = node_1_to_2(address);
        assert_eq!(echo(&peer, "x").await, Err(NetError::Handshake(refusal)));
        let hello = guard(acceptor).await.unwrap();
        assert_eq!(hello.version, PROTOCOL_VERSION);
        assert_eq!(hello.cluster_id.as_deref(), Some(CLUSTER));
        assert_eq!((hello.from, hello.to), (1, 2));
    }
}

#[tokio::test]
async fn net_a_wrong_node_id_is_refused() {
    let server = start_simple(2).await;
    let peer = peer_from(server.local_addr(), 3, Some(CLUSTER), 1);
    assert_eq!(
        echo(&peer, "x").await,
        Err(NetError::Handshake(HandshakeError::WrongNode {
            expected: 3,
            got: 2
        }))
    );
    server.shutdown().await;
}

#[tokio::test]
async fn net_a_connection_that_never_handshakes_is_closed_after_the_timeout() {
    let config = NetConfig {
        handshake_timeout: Duration::from_millis(100),
        ..NetConfig::default()
    };
    let server = start("127.0.0.1:0", server_identity(2), simple_handler(), config).await;
    let mut silent = TcpStream::connect(server.local_addr()).await.unwrap();
    // Half a hello, then nothing: still closed.
    let mut partial = TcpStream::connect(server.local_addr()).await.unwrap();
    partial.write_all(&[0, 0, 0, 40, KIND_HELLO]).await.unwrap();
    assert_closed(&mut silent).await;
    assert_closed(&mut partial).await;
    let peer = node_1_to_2(server.local_addr());
    assert_eq!(echo(&peer, "ok").await.unwrap(), Bytes::from("ok"));
    server.shutdown().await;
}

/// A handler whose GATED requests each wait until the test releases them;
/// each tells the test it has started, with its body.
struct Gates {
    started: mpsc::Receiver<(Bytes, oneshot::Sender<()>)>,
    running: Arc<AtomicUsize>,
    most: Arc<AtomicUsize>,
}

fn gated_handler() -> (Arc<dyn Handler>, Gates) {
    let (tell, started) = mpsc::channel(1024);
    let running = Arc::new(AtomicUsize::new(0));
    let most = Arc::new(AtomicUsize::new(0));
    let gates = Gates {
        started,
        running: Arc::clone(&running),
        most: Arc::clone(&most),
    };
    let handler = move |kind: u8, body: Bytes| {
        let tell = tell.clone();
        let running = Arc::clone(&running);
        let most = Arc::clone(&most);
        async move {
            if kind != GATED {
                return Ok(body);
            }
            let now = running.fetch_add(1, Ordering::SeqCst) + 1;
            most.fetch_max(now, Ordering::SeqCst);
            let (release, released) = oneshot::channel();
            tell.send((body.clone(), release)).await.unwrap();
            let _ = released.await;
            running.fetch_sub(1, Ordering::SeqCst);
            let mut answer = b"answer-".to_vec();
            answer.extend_from_slice(&body);
            Ok(Bytes::from(answer))
        }
    };
    (Arc::new(handler), gates)
}

/// `count` GATED calls through `peer`, each on its own task, with bodies "0",
/// "1", ...
fn gated_calls(peer: &Peer, count: usize) -> Vec<tokio::task::JoinHandle<Result<Bytes, NetError>>> {
    (0..count)
        .map(|i| {
            let peer = peer.clone();
            tokio::spawn(async move {
                peer.call(GATED, Bytes::from(format!("{i}")), Some(GUARD))
                    .await
            })
        })
        .collect()
}

#[tokio::test]
async fn net_concurrent_calls_answered_out_of_order_are_matched() {
    let (handler, mut gates) = gated_handler();
    let (server, peer) = connected(handler).await;
    let mut calls = gated_calls(&peer, 10);
    let mut releases = std::collections::BTreeMap::new();
    for _ in 0..10 {
        let (body, release) = guard(gates.started.recv()).await.unwrap();
        let index: usize = std::str::from_utf8(&body).unwrap().parse().unwrap();
        releases.insert(index, release);
    }
    // Answer the last first, and each before the next is released, so the
    // answers cross the wire in reverse order.
    for (index, release) in releases.into_iter().rev() {
        release.send(()).unwrap();
        let answer = guard(calls.pop().unwrap()).await.unwrap().unwrap();
        assert_eq!(answer, Bytes::from(format!("answer-{index}")));
    }
    assert!(calls.is_empty());
    server.shutdown().await;
}

#[tokio::test]
async fn net_an_oversized_length_closes_the_connection_and_others_are_served() {
    let server = start_simple(2).await;
    let peer = node_1_to_2(server.local_addr());
    assert_eq!(echo(&peer, "before").await.unwrap(), Bytes::from("before"));

    let mut raw = raw_handshaken(server.local_addr(), 2).await;
    raw.write_all(&(INTER_NODE_FRAME_BYTES_MAX + 1).to_be_bytes())
        .await
        .unwrap();
    raw.write_all(&[ECHO]).await.unwrap();
    assert_closed(&mut raw).await;

    // Before the handshake the bound is the handshake's, far smaller.
    let mut raw = TcpStream::connect(server.local_addr()).await.unwrap();
    raw.write_all(&u32::MAX.to_be_bytes()).await.unwrap();
    assert_closed(&mut raw).await;

    // A length too short for a header is refused too.
    let mut raw = raw_handshaken(server.local_addr(), 2).await;
    raw.write_all(&[0, 0, 0, 3, ECHO, 0, 0]).await.unwrap();
    assert_closed(&mut raw).await;

    assert_eq!(echo(&peer, "after").await.unwrap(), Bytes::from("after"));
    server.shutdown().await;
}

#[tokio::test]
async fn net_a_truncated_frame_or_an_unknown_kind_closes_the_connection() {
    let server = start_simple(2).await;
    let peer = node_1_to_2(server.local_addr());

    // A frame announcing 100 bytes, 20 sent, then the end of the stream.
    let mut raw = raw_handshaken(server.local_addr(), 2).await;
    raw.write_all(&100u32.to_be_bytes()).await.unwrap();
    raw.write_all(&[ECHO; 20]).await.unwrap();
    raw.shutdown().await.unwrap();
    assert_closed(&mut raw).await;

    // A kind that is no request (an answer's, and one nobody defines).
    for kind in [KIND_RESPONSE, 0xff] {
        let mut raw = raw_handshaken(server.local_addr(), 2).await;
        write_frame(&mut raw, kind, 1, b"body").await.unwrap();
        assert_closed(&mut raw).await;
    }

    // A request before the handshake.
    let mut raw = TcpStream::connect(server.local_addr()).await.unwrap();
    write_frame(&mut raw, ECHO, 1, b"body").await.unwrap();
    assert_closed(&mut raw).await;

    assert_eq!(echo(&peer, "fine").await.unwrap(), Bytes::from("fine"));
    server.shutdown().await;
}

#[tokio::test]
async fn net_a_bad_frame_from_the_server_fails_the_call_with_closed() {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    let acceptor = tokio::spawn(async move {
        let (mut stream, _) = listener.accept().await.unwrap();
        handshake::accept(&mut stream, &server_identity(2), GUARD)
            .await
            .unwrap();
        let request = read_frame(&mut stream, INTER_NODE_FRAME_BYTES_MAX, None, GUARD)
            .await
            .unwrap();
        // An answer whose length is over the bound.
        stream
            .write_all(&(INTER_NODE_FRAME_BYTES_MAX + 1).to_be_bytes())
            .await
            .unwrap();
        stream.flush().await.unwrap();
        assert_closed(&mut stream).await;
        request.correlation
    });
    let peer = node_1_to_2(address);
    assert!(matches!(echo(&peer, "x").await, Err(NetError::Closed(_))));
    guard(acceptor).await.unwrap();
}

#[tokio::test]
async fn net_a_server_that_vanishes_mid_call_fails_it_with_closed() {
    let (handler, mut gates) = gated_handler();
    let (server, peer) = connected(handler).await;
    let call = {
        let peer = peer.clone();
        tokio::spawn(async move { peer.call(GATED, Bytes::from("1"), Some(GUARD)).await })
    };
    let (_, _release) = guard(gates.started.recv()).await.unwrap();
    server.shutdown().await;
    assert!(matches!(
        guard(call).await.unwrap(),
        Err(NetError::Closed(_))
    ));
}

#[tokio::test]
async fn net_nothing_listening_is_unreachable() {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    drop(listener);
    let peer = node_1_to_2(address);
    assert!(unreachable(&peer).await);
    // And again: a failed attempt is not kept.
    assert!(unreachable(&peer).await);
}

#[tokio::test]
async fn net_a_server_that_never_answers_times_out() {
    let server = start_simple(2).await;
    let peer = node_1_to_2(server.local_addr());
    assert_eq!(
        guard(peer.call(NEVER, Bytes::new(), Some(Duration::from_millis(50)))).await,
        Err(NetError::Timeout)
    );
    // The peer still works (on a new connection, since nothing came back on
    // the old one), and the timed-out call left no waiter.
    assert_eq!(echo(&peer, "still").await.unwrap(), Bytes::from("still"));
    assert_eq!(peer.in_flight(), 0);
    server.shutdown().await;
}

#[tokio::test]
async fn net_a_peer_reconnects_after_the_server_restarts() {
    let server = start_simple(2).await;
    let address = server.local_addr();
    let peer = node_1_to_2(address);
    assert_eq!(echo(&peer, "one").await.unwrap(), Bytes::from("one"));
    server.shutdown().await;
    // While it is down, a call fails (the old connection closed, or nothing
    // listens).
    let down = echo(&peer, "down").await;
    assert!(
        matches!(
            down,
            Err(NetError::Closed(_)) | Err(NetError::Unreachable(_))
        ),
        "{down:?}"
    );

    let server = start(
        &address.to_string(),
        server_identity(2),
        simple_handler(),
        NetConfig::default(),
    )
    .await;
    let result = echo_after_restart(&peer, "two").await;
    assert_eq!(result.unwrap(), Bytes::from("two"));
    server.shutdown().await;
}

/// Lets every connection write `STALL_AFTER_BYTES`, then stalls writes on it
/// until the gate opens, and says when a connection first stalled.
#[derive(Default)]
struct Gate {
    open: AtomicBool,
    wakers: Mutex<Vec<Waker>>,
    stalled: Notify,
}

const STALL_AFTER_BYTES: usize = 1024 * 1024;

impl Gate {
    fn open(&self) {
        self.open.store(true, Ordering::SeqCst);
        for waker in std::mem::take(&mut *self.wakers.lock().unwrap()) {
            waker.wake();
        }
    }
}

struct GatedStream {
    inner: TcpStream,
    gate: Arc<Gate>,
    written: usize,
}

impl AsyncRead for GatedStream {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_read(cx, buf)
    }
}

impl AsyncWrite for GatedStream {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        if self.written >= STALL_AFTER_BYTES && !self.gate.open.load(Ordering::SeqCst) {
            self.gate.wakers.lock().unwrap().push(cx.waker().clone());
            // Opened between the check and the registration: go on.
            if !self.gate.open.load(Ordering::SeqCst) {
                self.gate.stalled.notify_one();
                return Poll::Pending;
            }
        }
        let room = if self.gate.open.load(Ordering::SeqCst) {
            buf.len()
        } else {
            buf.len().min(STALL_AFTER_BYTES - self.written)
        };
        let this = &mut *self;
        let poll = Pin::new(&mut this.inner).poll_write(cx, &buf[..room]);
        if let Poll::Ready(Ok(written)) = poll {
            this.written += written;
        }
        poll
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

/// TCP whose connections are gated.
struct GatedTcp {
    gate: Arc<Gate>,
}

impl Transport for GatedTcp {
    fn bind<'a>(&'a self, address: &'a str) -> BoxFuture<'a, io::Result<Box<dyn Listener>>> {
        Tcp.bind(address)
    }

    fn connect<'a>(&'a self, address: &'a str) -> BoxFuture<'a, io::Result<BoxStream>> {
        Box::pin(async move {
            let inner = TcpStream::connect(address).await?;
            inner.set_nodelay(true)?;
            Ok(Box::new(GatedStream {
                inner,
                gate: Arc::clone(&self.gate),
                written: 0,
            }) as BoxStream)
        })
    }
}

#[tokio::test]
async fn net_a_bulk_call_does_not_delay_a_small_call_after_it() {
    let server = start_simple(2).await;
    let gate = Arc::new(Gate::default());
    let peer = Peer::new(
        Arc::new(GatedTcp {
            gate: Arc::clone(&gate),
        }),
        client_identity(Some(CLUSTER), 1),
        2,
        server.local_addr().to_string(),
        NetConfig::default(),
    );
    let body = Bytes::from(vec![7u8; 8 * 1024 * 1024]);
    let bulk = {
        let peer = peer.clone();
        let body = body.clone();
        tokio::spawn(async move { peer.call_bulk(LENGTH, body, Some(GUARD)).await })
    };
    // The bulk body is on the wire, its connection stalled mid-frame.
    guard(gate.stalled.notified()).await;
    assert_eq!(echo(&peer, "small").await.unwrap(), Bytes::from("small"));
    assert!(!bulk.is_finished(), "the bulk call is still being sent");
    gate.open();
    assert_eq!(
        guard(bulk).await.unwrap().unwrap(),
        Bytes::from(body.len().to_string())
    );
    server.shutdown().await;
}

#[tokio::test]
async fn net_a_peer_keeps_at_most_the_bound_in_flight() {
    let (handler, mut gates) = gated_handler();
    let server = start_node_2(handler).await;
    let config = NetConfig {
        in_flight_max: 4,
        ..NetConfig::default()
    };
    let peer = peer_to(
        server.local_addr(),
        2,
        client_identity(Some(CLUSTER), 1),
        config,
    );
    let calls = gated_calls(&peer, 10);
    let mut started = Vec::new();
    for _ in 0..4 {
        started.push(guard(gates.started.recv()).await.unwrap());
    }
    eventually(|| peer.in_flight() == 4).await;
    assert_eq!(gates.running.load(Ordering::SeqCst), 4);
    // Each answer lets one more in, never more than the bound.
    let mut answered = 0;
    while let Some((_, release)) = started.pop() {
        release.send(()).unwrap();
        answered += 1;
        if answered + started.len() < 10 {
            started.push(guard(gates.started.recv()).await.unwrap());
        }
        assert!(peer.in_flight() <= 4);
    }
    for call in calls {
        guard(call).await.unwrap().unwrap();
    }
    assert_eq!(answered, 10);
    assert_eq!(gates.most.load(Ordering::SeqCst), 4);
    server.shutdown().await;
}

#[tokio::test]
async fn net_a_server_handles_at_most_the_bound_per_connection() {
    let (handler, mut gates) = gated_handler();
    let config = NetConfig {
        in_flight_max: 3,
        ..NetConfig::default()
    };
    let server = start("127.0.0.1:0", server_identity(2), handler, config).await;
    // A raw client that pipelines ten requests without waiting.
    let mut raw = raw_handshaken(server.local_addr(), 2).await;
    for correlation in 0..10u64 {
        write_frame(
            &mut raw,
            GATED,
            correlation,
            correlation.to_string().as_bytes(),
        )
        .await
        .unwrap();
    }
    raw.flush().await.unwrap();
    let mut released = 0;
    let mut answers = BTreeSet::new();
    while released < 10 {
        let (_, release) = guard(gates.started.recv()).await.unwrap();
        assert!(gates.running.load(Ordering::SeqCst) <= 3);
        release.send(()).unwrap();
        released += 1;
    }
    while answers.len() < 10 {
        let frame = guard(read_frame(
            &mut raw,
            INTER_NODE_FRAME_BYTES_MAX,
            None,
            GUARD,
        ))
        .await
        .unwrap();
        assert_eq!(frame.kind, KIND_RESPONSE);
        assert_eq!(
            frame.body,
            Bytes::from(format!("answer-{}", frame.correlation))
        );
        answers.insert(frame.correlation);
    }
    assert_eq!(answers, (0..10).collect());
    assert!(gates.most.load(Ordering::SeqCst) <= 3);
    server.shutdown().await;
}

#[tokio::test]
async fn net_shutdown_closes_idle_connections_and_the_listener() {
    let server = start_simple(2).await;
    let address = server.local_addr();
    let mut raw = raw_handshaken(address, 2).await;
    let mut silent = TcpStream::connect(address).await.unwrap();
    guard(server.shutdown()).await;
    assert_closed(&mut raw).await;
    assert_closed(&mut silent).await;
    let peer = node_1_to_2(address);
    assert!(unreachable(&peer).await);
}

/// Many calls sharing the connection each get their own answer.
#[tokio::test]
async fn net_many_concurrent_calls_each_get_their_own_answer() {
    let server = start_simple(2).await;
    let peer = node_1_to_2(server.local_addr());
    let mut calls = Vec::new();
    for i in 0..500 {
        let peer = peer.clone();
        calls.push(tokio::spawn(async move {
            let body = Bytes::from(format!("body-{i}"));
            let answer = peer.call(ECHO, body.clone(), Some(GUARD)).await;
            (body, answer)
        }));
    }
    for call in calls {
        let (body, answer) = guard(call).await.unwrap();
        assert_eq!(answer.unwrap(), body);
    }
    server.shutdown().await;
}
