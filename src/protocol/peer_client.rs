//! How this broker reaches another's inter-broker listener, in that
//! listener's security protocol (Kafka's `security.inter.broker.protocol`):
//! TCP, then TLS when it is SSL or SASL_SSL (this broker's own certificate
//! as client certificate, the server's checked against the truststore and
//! the host it dialled), then a SASL login when it is SASL_PLAINTEXT or
//! SASL_SSL (SaslHandshake v1 and SaslAuthenticate v2, with PLAIN or SCRAM
//! as `--inter-broker-sasl-mechanism` says). Followers, marker writers and
//! KIP-890's verification all connect through here, so every connection
//! between brokers carries this broker's principal.
//!
//! A login the other broker refuses is an error of the connection; a
//! session with a lifetime (KIP-368) tells the caller when to log in again
//! on the same connection (`authenticate`).

use std::io;
use std::sync::Arc;
use std::time::Duration;

use bytes::{BufMut, Bytes, BytesMut};
use kafka_protocol::messages::{
    ApiKey, RequestHeader, ResponseHeader, SaslAuthenticateRequest, SaslAuthenticateResponse,
    SaslHandshakeRequest, SaslHandshakeResponse,
};
use kafka_protocol::protocol::{Decodable, Encodable, StrBytes};
use rustls_pki_types::ServerName;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio_rustls::TlsConnector;

use crate::limits::BROKER_RESPONSE_FRAME_BYTES_MAX;
use crate::security::sasl::Mechanism;
use crate::security::scram_client::ScramClient;
use crate::security::tls::PeerTls;

/// The SaslHandshake version a broker logs in with (v1: the tokens then go
/// in SaslAuthenticate requests).
const SASL_HANDSHAKE_VERSION: i16 = 1;
/// The SaslAuthenticate version (v2: flexible, with the session lifetime).
const SASL_AUTHENTICATE_VERSION: i16 = 2;

/// A connection to another broker.
pub trait PeerIo: AsyncRead + AsyncWrite + Send + Unpin {}

impl<T: AsyncRead + AsyncWrite + Send + Unpin> PeerIo for T {}

pub type PeerStream = Box<dyn PeerIo>;

/// The SASL login a broker uses with the others.
#[derive(Clone)]
pub struct PeerSasl {
    pub mechanism: Mechanism,
    pub username: String,
    pub password: String,
}

impl std::fmt::Debug for PeerSasl {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PeerSasl")
            .field("mechanism", &self.mechanism)
            .field("username", &self.username)
            .finish_non_exhaustive()
    }
}

/// Opens connections to other brokers' inter-broker listeners.
pub struct PeerConnector {
    tls: Option<Arc<dyn PeerTls>>,
    sasl: Option<PeerSasl>,
}

impl PeerConnector {
    /// Plain TCP, as a PLAINTEXT inter-broker listener takes.
    pub fn plaintext() -> Arc<PeerConnector> {
        Arc::new(PeerConnector {
            tls: None,
            sasl: None,
        })
    }

    /// TLS when `tls` is given, SASL when `sasl` is.
    pub fn new(tls: Option<Arc<dyn PeerTls>>, sasl: Option<PeerSasl>) -> Arc<PeerConnector> {
        Arc::new(PeerConnector { tls, sasl })
    }

    /// A connection to `host:port`, logged in; with the session's lifetime
    /// when the other broker bounds it.
    pub async fn connect(
        &self,
        host: &str,
        port: u16,
        client_id: &str,
    ) -> io::Result<(PeerStream, Option<Duration>)> {
        let tcp = TcpStream::connect((host, port)).await?;
        tcp.set_nodelay(true)?;
        let mut stream: PeerStream = match &self.tls {
            None => Box::new(tcp),
            Some(tls) => {
                let name = ServerName::try_from(host.to_string()).map_err(|e| {
                    io::Error::new(io::ErrorKind::InvalidInput, format!("{host}: {e}"))
                })?;
                Box::new(TlsConnector::from(tls.client()).connect(name, tcp).await?)
            }
        };
        let lifetime = self.authenticate(&mut stream, client_id).await?;
        Ok((stream, lifetime))
    }

    /// Logs in on `stream` (again, for KIP-368), when the listener is a
    /// SASL one; the session's lifetime when the other broker bounds it.
    pub async fn authenticate(
        &self,
        stream: &mut PeerStream,
        client_id: &str,
    ) -> io::Result<Option<Duration>> {
        let Some(sasl) = &self.sasl else {
            return Ok(None);
        };
        let handshake: SaslHandshakeResponse = exchange(
            stream,
            client_id,
            ApiKey::SaslHandshake,
            SASL_HANDSHAKE_VERSION,
            &SaslHandshakeRequest::default()
                .with_mechanism(StrBytes::from_static_str(sasl.mechanism.name())),
        )
        .await?;
        if handshake.error_code != 0 {
            return Err(refused(format!(
                "the broker does not offer {} (error {}; it offers {:?})",
                sasl.mechanism.name(),
                handshake.error_code,
                handshake.mechanisms
            )));
        }
        let lifetime_ms = match sasl.mechanism {
            Mechanism::Plain => {
                let token = format!("\0{}\0{}", sasl.username, sasl.password);
                authenticate_step(stream, client_id, token.into_bytes())
                    .await?
                    .1
            }
            Mechanism::Scram(mechanism) => {
                let mut scram = ScramClient::new(mechanism, &sasl.username, &sasl.password);
                let (server_first, _) =
                    authenticate_step(stream, client_id, scram.client_first()).await?;
                let client_final = scram
                    .client_final(&server_first)
                    .map_err(|e| refused(format!("SCRAM: {e:?}")))?;
                let (server_final, lifetime) =
                    authenticate_step(stream, client_id, client_final).await?;
                scram
                    .server_final(&server_final)
                    .map_err(|e| refused(format!("SCRAM: the broker's proof: {e:?}")))?;
                lifetime
            }
            Mechanism::OAuthBearer => {
                return Err(refused(
                    "brokers log in to one another with PLAIN or SCRAM".to_string(),
                ))
            }
        };
        Ok(u64::try_from(lifetime_ms)
            .ok()
            .filter(|ms| *ms > 0)
            .map(Duration::from_millis))
    }
}

/// One SaslAuthenticate round: the server's bytes and the session lifetime.
async fn authenticate_step(
    stream: &mut PeerStream,
    client_id: &str,
    token: Vec<u8>,
) -> io::Result<(Bytes, i64)> {
    let response: SaslAuthenticateResponse = exchange(
        stream,
        client_id,
        ApiKey::SaslAuthenticate,
        SASL_AUTHENTICATE_VERSION,
        &SaslAuthenticateRequest::default().with_auth_bytes(Bytes::from(token)),
    )
    .await?;
    if response.error_code != 0 {
        return Err(refused(format!(
            "the broker refused the login (error {}): {}",
            response.error_code,
            response.error_message.as_deref().unwrap_or("")
        )));
    }
    Ok((response.auth_bytes, response.session_lifetime_ms))
}

fn refused(message: String) -> io::Error {
    io::Error::new(io::ErrorKind::PermissionDenied, message)
}

/// One request on `stream` and its response (one in flight at a time, so
/// the correlation id only has to match).
pub async fn exchange<S, Req, Resp>(
    stream: &mut S,
    client_id: &str,
    api_key: ApiKey,
    version: i16,
    request: &Req,
) -> io::Result<Resp>
where
    S: AsyncRead + AsyncWrite + Unpin + ?Sized,
    Req: Encodable,
    Resp: Decodable,
{
    const CORRELATION_ID: i32 = 1;
    let header = RequestHeader::default()
        .with_request_api_key(api_key as i16)
        .with_request_api_version(version)
        .with_correlation_id(CORRELATION_ID)
        .with_client_id(Some(StrBytes::from_string(client_id.to_string())));
    let mut body = BytesMut::new();
    header
        .encode(&mut body, api_key.request_header_version(version))
        .map_err(|e| invalid(e.to_string()))?;
    request
        .encode(&mut body, version)
        .map_err(|e| invalid(e.to_string()))?;
    let mut frame = BytesMut::with_capacity(4 + body.len());
    frame.put_i32(i32::try_from(body.len()).map_err(|_| invalid("request too large".into()))?);
    frame.put_slice(&body);
    stream.write_all(&frame).await?;
    let mut answer = read_frame(stream, BROKER_RESPONSE_FRAME_BYTES_MAX).await?;
    let header = ResponseHeader::decode(&mut answer, api_key.response_header_version(version))
        .map_err(|e| invalid(e.to_string()))?;
    if header.correlation_id != CORRELATION_ID {
        return Err(invalid(format!(
            "correlation id {} answering {CORRELATION_ID}",
            header.correlation_id
        )));
    }
    Resp::decode(&mut answer, version).map_err(|e| invalid(e.to_string()))
}

/// One length-prefixed response frame, at most `max_bytes` long (a longer one
/// is an error, before anything is allocated for it).
pub async fn read_frame<S: AsyncRead + Unpin + ?Sized>(
    stream: &mut S,
    max_bytes: usize,
) -> io::Result<Bytes> {
    let length = stream.read_i32().await?;
    let length = usize::try_from(length)
        .ok()
        .filter(|n| *n <= max_bytes)
        .ok_or_else(|| invalid(format!("a response frame of {length} bytes")))?;
    let mut body = vec![0u8; length];
    stream.read_exact(&mut body).await?;
    Ok(Bytes::from(body))
}

fn invalid(message: String) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, message)
}
