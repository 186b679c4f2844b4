//! TLS on SSL listeners, with rustls on aws-lc-rs: TLS 1.2 and 1.3, the
//! broker's key and certificate chain from a PEM keystore, and client
//! certificates checked against a PEM truststore when `ssl.client.auth` asks
//! for them (Kafka's `ssl.keystore.type=PEM` and `ssl.truststore.type=PEM`).
//!
//! The files are read again when they change (checked every
//! `TLS_FILES_CHECK_MS`) or on SIGHUP, so a rotated certificate is served to
//! new connections without a restart; files that no longer make a valid
//! configuration leave the previous one in place, logged. Invariant: the
//! configuration handed to a new connection was built whole from the files.

use std::sync::{Arc, Mutex, PoisonError, RwLock};
use std::time::{Duration, SystemTime};

use tokio::io::{AsyncRead, AsyncWrite};
use tokio::sync::watch;

use crate::limits::{TLS_FILES_CHECK_MS, TLS_HANDSHAKE_TIMEOUT_MS};

use rustls::server::WebPkiClientVerifier;
use rustls::{ClientConfig, ServerConfig};
use rustls_pki_types::CertificateDer;
use tokio_rustls::server::TlsStream;
use tokio_rustls::TlsAcceptor;

use crate::config::{SslClientAuth, SslConfig};
use crate::security::ssl_principal::PrincipalMapper;
use crate::security::tls::{self, PeerTls};
use crate::security::Principal;

/// A connection's TLS entry: the handshake, within `TLS_HANDSHAKE_TIMEOUT_MS`,
/// then, on an SSL listener (not `sasl`), the principal its client
/// certificate maps to (none without one; SASL names a SASL_SSL client). A
/// failed or slow handshake (a plaintext client, an untrusted or missing
/// client certificate where one is required) or a certificate no mapping rule
/// matches is an error, and the connection is to be closed.
pub async fn accept<S>(
    acceptor: TlsAcceptor,
    mapper: &PrincipalMapper,
    sasl: bool,
    stream: S,
) -> Result<(TlsStream<S>, Option<Principal>), String>
where
    S: AsyncRead + AsyncWrite + Unpin,
{
    let session = tokio::time::timeout(
        Duration::from_millis(TLS_HANDSHAKE_TIMEOUT_MS),
        acceptor.accept(stream),
    )
    .await
    .map_err(|_| "the TLS handshake timed out".to_string())?
    .map_err(|e| format!("the TLS handshake failed: {e}"))?;
    if sasl {
        return Ok((session, None));
    }
    let certificate = session
        .get_ref()
        .1
        .peer_certificates()
        .and_then(|c| c.first());
    let principal = match certificate {
        Some(certificate) => Some(
            mapper
                .principal(certificate)
                .map_err(|e| format!("its certificate maps to no principal: {e}"))?,
        ),
        None => None,
    };
    Ok((session, principal))
}

/// SSL listeners' TLS configuration, kept up to date with its files.
pub struct TlsServer {
    ssl: SslConfig,
    /// `ssl.principal.mapping.rules`, for client certificates.
    mapper: Arc<PrincipalMapper>,
    /// SSL listeners' configuration (clients asked for certificates as
    /// `ssl.client.auth` says), and SASL_SSL listeners' (not asked: SASL
    /// names the client there, and Kafka applies `ssl.client.auth` to SSL
    /// listeners).
    current: RwLock<(Arc<ServerConfig>, Arc<ServerConfig>)>,
    /// Between nodes (with a truststore only): connecting to another node,
    /// and accepting one, both with mutual TLS.
    peers: RwLock<Option<(Arc<ClientConfig>, Arc<ServerConfig>)>>,
    /// The files' modification times when last read.
    read_at: Mutex<Vec<Option<SystemTime>>>,
}

impl TlsServer {
    /// Reads the files; an error names the file and what is wrong with it.
    pub fn new(ssl: &SslConfig) -> Result<Arc<TlsServer>, String> {
        let read_at = modified(ssl);
        let config = server_configs(ssl)?;
        let peers = peer_configs(ssl)?;
        let mapper = match &ssl.principal_mapping_rules {
            Some(rules) => PrincipalMapper::parse(rules)?,
            None => PrincipalMapper::default(),
        };
        Ok(Arc::new(TlsServer {
            ssl: ssl.clone(),
            mapper: Arc::new(mapper),
            current: RwLock::new(config),
            peers: RwLock::new(peers),
            read_at: Mutex::new(read_at),
        }))
    }

    /// The acceptor for a new connection, with the configuration as it is
    /// now: an SSL listener's, or with `sasl` a SASL_SSL listener's.
    pub fn acceptor(&self, sasl: bool) -> TlsAcceptor {
        let current = self.current.read().unwrap_or_else(PoisonError::into_inner);
        let config = if sasl { &current.1 } else { &current.0 };
        TlsAcceptor::from(Arc::clone(config))
    }

    /// Whether connections between nodes can run TLS: they need a truststore.
    pub fn has_peer_tls(&self) -> bool {
        self.peers
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .is_some()
    }

    /// How a client certificate becomes a principal.
    pub fn principal_mapper(&self) -> Arc<PrincipalMapper> {
        Arc::clone(&self.mapper)
    }

    /// Reads the files again if they changed since they were last read, or
    /// when `forced`. Blocking: file I/O, run off the runtime's workers.
    fn reload(&self, forced: bool) {
        let stamps = modified(&self.ssl);
        {
            let mut read_at = self.read_at.lock().unwrap_or_else(PoisonError::into_inner);
            if !forced && *read_at == stamps {
                return;
            }
            *read_at = stamps;
        }
        match server_configs(&self.ssl).and_then(|c| Ok((c, peer_configs(&self.ssl)?))) {
            Ok((config, peers)) => {
                *self.current.write().unwrap_or_else(PoisonError::into_inner) = config;
                *self.peers.write().unwrap_or_else(PoisonError::into_inner) = peers;
                tracing::info!(
                    keystore = %self.ssl.keystore.display(),
                    "TLS keystore and truststore read again; new connections use them"
                );
            }
            Err(error) => tracing::error!(
                %error,
                "TLS files changed but cannot be used; new connections keep the previous ones"
            ),
        }
    }
}

/// Reads `server`'s files again when they change, and on SIGHUP, until `stopped`.
pub async fn keep_current(server: Arc<TlsServer>, mut stopped: watch::Receiver<bool>) {
    let mut hangups = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::hangup()).ok();
    let mut ticks = tokio::time::interval(Duration::from_millis(TLS_FILES_CHECK_MS));
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        let hangup = async {
            match hangups.as_mut() {
                Some(signals) => signals.recv().await,
                None => std::future::pending().await,
            }
        };
        let forced = tokio::select! {
            _ = stopped.changed() => return,
            _ = ticks.tick() => false,
            _ = hangup => true,
        };
        let server = Arc::clone(&server);
        let _ = tokio::task::spawn_blocking(move || server.reload(forced)).await;
    }
}

impl PeerTls for TlsServer {
    fn client(&self) -> Arc<ClientConfig> {
        let peers = self.peers.read().unwrap_or_else(PoisonError::into_inner);
        Arc::clone(&peers.as_ref().expect("peer TLS needs a truststore").0)
    }

    fn server(&self) -> Arc<ServerConfig> {
        let peers = self.peers.read().unwrap_or_else(PoisonError::into_inner);
        Arc::clone(&peers.as_ref().expect("peer TLS needs a truststore").1)
    }

    fn principal(&self, certificate: &CertificateDer<'_>) -> String {
        match self.mapper.principal(certificate.as_ref()) {
            Ok(principal) => principal.to_string(),
            Err(error) => format!("unmapped certificate ({error})"),
        }
    }
}

/// The configurations between nodes, when there is a truststore to check
/// peers with.
type PeerConfigs = Option<(Arc<ClientConfig>, Arc<ServerConfig>)>;

fn peer_configs(ssl: &SslConfig) -> Result<PeerConfigs, String> {
    let Some(truststore) = &ssl.truststore else {
        return Ok(None);
    };
    Ok(Some((
        tls::client_config(&ssl.keystore, truststore)?,
        tls::peer_server_config(&ssl.keystore, truststore)?,
    )))
}

/// The modification times of the keystore and truststore (None: unreadable).
fn modified(ssl: &SslConfig) -> Vec<Option<SystemTime>> {
    std::iter::once(&ssl.keystore)
        .chain(ssl.truststore.iter())
        .map(|path| std::fs::metadata(path).and_then(|m| m.modified()).ok())
        .collect()
}

/// The configurations of SSL and SASL_SSL listeners from `config`'s files.
fn server_configs(config: &SslConfig) -> Result<(Arc<ServerConfig>, Arc<ServerConfig>), String> {
    let ssl = server_config(config, config.client_auth)?;
    let sasl = server_config(config, SslClientAuth::None)?;
    Ok((ssl, sasl))
}

/// The configuration of `config`'s files with `client_auth`; an error names
/// the file and what is wrong with it.
fn server_config(
    config: &SslConfig,
    client_auth: SslClientAuth,
) -> Result<Arc<ServerConfig>, String> {
    let chain = tls::read_chain(&config.keystore)?;
    let key = tls::read_key(&config.keystore)?;
    let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
    let builder = ServerConfig::builder_with_provider(Arc::clone(&provider))
        .with_safe_default_protocol_versions()
        .map_err(|e| format!("TLS versions: {e}"))?;
    let builder = match (&config.truststore, client_auth) {
        (_, SslClientAuth::None) | (None, _) => builder.with_no_client_auth(),
        (Some(truststore), client_auth) => {
            let roots = tls::read_roots(truststore)?;
            let verifier = WebPkiClientVerifier::builder_with_provider(roots, provider);
            let verifier = match client_auth {
                SslClientAuth::Requested => verifier.allow_unauthenticated(),
                SslClientAuth::Required | SslClientAuth::None => verifier,
            }
            .build()
            .map_err(|e| format!("truststore {}: {e}", truststore.display()))?;
            builder.with_client_cert_verifier(verifier)
        }
    };
    let server = builder
        .with_single_cert(chain, key)
        .map_err(|e| tls::key_mismatch(&config.keystore, &e))?;
    Ok(Arc::new(server))
}
