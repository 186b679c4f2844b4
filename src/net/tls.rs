//! Mutual TLS over any transport (`--controller-listener-security-protocol
//! SSL`): the connecting node shows its certificate and checks the server's
//! against the truststore and the host it dialled; the accepting node
//! requires a certificate the truststore vouches for. A peer without one is
//! turned away by the TLS handshake, before a byte of the transport's own
//! handshake is read.
//!
//! The accepting side runs the TLS handshake inside the connection's first
//! read, so it falls under the transport handshake's deadline and never
//! holds up the accept loop.

use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use rustls_pki_types::ServerName;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio_rustls::server::TlsStream;
use tokio_rustls::{Accept, TlsAcceptor, TlsConnector};

use super::transport::{BoxFuture, BoxStream, Listener, Transport};
use crate::security::tls::PeerTls;

/// `inner`'s streams, wrapped in mutual TLS.
pub struct TlsTransport {
    inner: Arc<dyn Transport>,
    tls: Arc<dyn PeerTls>,
}

impl TlsTransport {
    pub fn new(inner: Arc<dyn Transport>, tls: Arc<dyn PeerTls>) -> TlsTransport {
        TlsTransport { inner, tls }
    }
}

impl Transport for TlsTransport {
    fn bind<'a>(&'a self, address: &'a str) -> BoxFuture<'a, io::Result<Box<dyn Listener>>> {
        Box::pin(async move {
            let inner = self.inner.bind(address).await?;
            Ok(Box::new(TlsListener {
                inner,
                tls: Arc::clone(&self.tls),
            }) as Box<dyn Listener>)
        })
    }

    fn connect<'a>(&'a self, address: &'a str) -> BoxFuture<'a, io::Result<BoxStream>> {
        Box::pin(async move {
            let host = address
                .rsplit_once(':')
                .map_or(address, |(host, _)| host)
                .trim_start_matches('[')
                .trim_end_matches(']');
            let name = ServerName::try_from(host.to_string())
                .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, format!("{host}: {e}")))?;
            let stream = self.inner.connect(address).await?;
            let connector = TlsConnector::from(self.tls.client());
            let stream = connector.connect(name, stream).await?;
            Ok(Box::new(stream) as BoxStream)
        })
    }
}

struct TlsListener {
    inner: Box<dyn Listener>,
    tls: Arc<dyn PeerTls>,
}

impl Listener for TlsListener {
    fn accept(&mut self) -> BoxFuture<'_, io::Result<(BoxStream, SocketAddr)>> {
        Box::pin(async move {
            let (stream, from) = self.inner.accept().await?;
            let accept = TlsAcceptor::from(self.tls.server()).accept(stream);
            let stream = Accepting::Handshake {
                accept: Box::new(accept),
                tls: Arc::clone(&self.tls),
                from,
            };
            Ok((Box::new(stream) as BoxStream, from))
        })
    }

    fn local_addr(&self) -> io::Result<SocketAddr> {
        self.inner.local_addr()
    }
}

/// An accepted connection: its TLS handshake until it completes, then the
/// TLS stream.
enum Accepting {
    Handshake {
        accept: Box<Accept<BoxStream>>,
        tls: Arc<dyn PeerTls>,
        from: SocketAddr,
    },
    Ready(Box<TlsStream<BoxStream>>),
    Failed,
}

impl Accepting {
    /// Drives the handshake; Ready(Ok) once the TLS stream is there.
    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<&mut TlsStream<BoxStream>>> {
        if let Accepting::Handshake {
            accept, tls, from, ..
        } = self
        {
            match Pin::new(&mut **accept).poll(cx) {
                Poll::Pending => return Poll::Pending,
                Poll::Ready(Err(error)) => {
                    tracing::warn!(%from, %error, "inter-node TLS handshake refused");
                    *self = Accepting::Failed;
                    return Poll::Ready(Err(error));
                }
                Poll::Ready(Ok(stream)) => {
                    let principal = stream
                        .get_ref()
                        .1
                        .peer_certificates()
                        .and_then(|chain| chain.first())
                        .map(|certificate| tls.principal(certificate));
                    tracing::debug!(%from, ?principal, "inter-node TLS connection");
                    *self = Accepting::Ready(Box::new(stream));
                }
            }
        }
        match self {
            Accepting::Ready(stream) => Poll::Ready(Ok(stream)),
            _ => Poll::Ready(Err(io::Error::new(
                io::ErrorKind::ConnectionAborted,
                "the TLS handshake failed",
            ))),
        }
    }
}

impl AsyncRead for Accepting {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        match self.get_mut().poll_ready(cx) {
            Poll::Ready(Ok(stream)) => Pin::new(stream).poll_read(cx, buf),
            Poll::Ready(Err(error)) => Poll::Ready(Err(error)),
            Poll::Pending => Poll::Pending,
        }
    }
}

impl AsyncWrite for Accepting {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        match self.get_mut().poll_ready(cx) {
            Poll::Ready(Ok(stream)) => Pin::new(stream).poll_write(cx, buf),
            Poll::Ready(Err(error)) => Poll::Ready(Err(error)),
            Poll::Pending => Poll::Pending,
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut().poll_ready(cx) {
            Poll::Ready(Ok(stream)) => Pin::new(stream).poll_flush(cx),
            Poll::Ready(Err(error)) => Poll::Ready(Err(error)),
            Poll::Pending => Poll::Pending,
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut().poll_ready(cx) {
            Poll::Ready(Ok(stream)) => Pin::new(stream).poll_shutdown(cx),
            Poll::Ready(Err(error)) => Poll::Ready(Err(error)),
            Poll::Pending => Poll::Pending,
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use std::path::Path;

    use rustls::{ClientConfig, ServerConfig};
    use rustls_pki_types::CertificateDer;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    use super::*;
    use crate::net::Tcp;
    use crate::security::test_certs::TestCa;
    use crate::security::tls::{client_config, peer_server_config};

    /// A node's TLS between nodes, from its files.
    struct Files {
        client: Arc<ClientConfig>,
        server: Arc<ServerConfig>,
    }

    impl PeerTls for Files {
        fn client(&self) -> Arc<ClientConfig> {
            Arc::clone(&self.client)
        }
        fn server(&self) -> Arc<ServerConfig> {
            Arc::clone(&self.server)
        }
        fn principal(&self, _: &CertificateDer<'_>) -> String {
            "User:node".to_string()
        }
    }

    /// A node whose certificate (for 127.0.0.1) a fresh CA signed, trusting
    /// only that CA.
    fn node(dir: &Path, name: &str) -> Arc<dyn PeerTls> {
        let ca = TestCa::new(name);
        let (key, cert) = ca.sign("127.0.0.1", Some(name));
        let keystore = dir.join(format!("{name}.pem"));
        let truststore = dir.join(format!("{name}-ca.pem"));
        std::fs::write(&keystore, format!("{}{}", cert.pem(), key.serialize_pem())).unwrap();
        std::fs::write(&truststore, ca.cert.pem()).unwrap();
        Arc::new(Files {
            client: client_config(&keystore, &truststore).unwrap(),
            server: peer_server_config(&keystore, &truststore).unwrap(),
        })
    }

    #[tokio::test]
    async fn a_peer_with_a_trusted_certificate_talks_and_any_other_is_turned_away() {
        let dir = tempfile::tempdir().unwrap();
        let trusted = node(dir.path(), "cluster");
        let stranger = node(dir.path(), "stranger");
        let server = TlsTransport::new(Arc::new(Tcp), Arc::clone(&trusted));
        let mut listener = server.bind("127.0.0.1:0").await.unwrap();
        let address = listener.local_addr().unwrap().to_string();
        let echo = tokio::spawn(async move {
            let mut outcomes = Vec::new();
            for _ in 0..2 {
                let (mut stream, _) = listener.accept().await.unwrap();
                let mut byte = [0u8];
                let read = stream.read_exact(&mut byte).await;
                if read.is_ok() {
                    stream.write_all(&byte).await.unwrap();
                }
                outcomes.push(read.is_ok());
            }
            outcomes
        });
        let mut stream = TlsTransport::new(Arc::new(Tcp), Arc::clone(&trusted))
            .connect(&address)
            .await
            .unwrap();
        stream.write_all(b"x").await.unwrap();
        let mut byte = [0u8];
        stream.read_exact(&mut byte).await.unwrap();
        assert_eq!(&byte, b"x");
        // The stranger's CA is not the cluster's, nor the other way round:
        // whichever side finds out first, nothing is read from it.
        let refused = TlsTransport::new(Arc::new(Tcp), stranger)
            .connect(&address)
            .await;
        if let Ok(mut stream) = refused {
            let _ = stream.write_all(b"y").await;
        }
        assert_eq!(echo.await.unwrap(), vec![true, false]);
    }
}
