//! TLS between nodes: the configurations a node connects to another with and
//! accepts another with, read from the same PEM keystore and truststore as
//! its SSL listeners (Kafka's `ssl.keystore.*` and `ssl.truststore.*` serve
//! a broker's inter-broker connections too).
//!
//! A connection between nodes is mutual TLS: the connecting node shows its
//! own certificate, and each side checks the other's against the truststore
//! (the connecting side also checks the host name it dialled, as Kafka's
//! default `ssl.endpoint.identification.algorithm=https` does).

use std::path::Path;
use std::sync::Arc;

use rustls::client::WebPkiServerVerifier;
use rustls::server::WebPkiClientVerifier;
use rustls::{ClientConfig, RootCertStore, ServerConfig};
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};

/// The TLS configurations between nodes as they are now (the files behind
/// them may be read again).
pub trait PeerTls: Send + Sync + 'static {
    /// For a connection to another node: this node's certificate as the
    /// client certificate, the truststore for the server's.
    fn client(&self) -> Arc<ClientConfig>;

    /// For a connection from another node: its certificate required and
    /// checked against the truststore.
    fn server(&self) -> Arc<ServerConfig>;

    /// The principal name of a peer certificate rustls verified.
    fn principal(&self, certificate: &CertificateDer<'_>) -> String;
}

/// The certificate chain of a PEM keystore.
pub fn read_chain(keystore: &Path) -> Result<Vec<CertificateDer<'static>>, String> {
    let name = keystore.display();
    let chain: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(keystore)
        .and_then(|certs| certs.collect::<Result<_, _>>())
        .map_err(|e| format!("keystore {name}: cannot read its certificates: {e}"))?;
    if chain.is_empty() {
        return Err(format!("keystore {name} holds no certificate"));
    }
    Ok(chain)
}

/// The private key of a PEM keystore.
pub fn read_key(keystore: &Path) -> Result<PrivateKeyDer<'static>, String> {
    PrivateKeyDer::from_pem_file(keystore).map_err(|e| {
        format!(
            "keystore {}: cannot read its private key: {e}",
            keystore.display()
        )
    })
}

/// The CA certificates of a PEM truststore.
pub fn read_roots(truststore: &Path) -> Result<Arc<RootCertStore>, String> {
    let name = truststore.display();
    let mut roots = RootCertStore::empty();
    let trusted = CertificateDer::pem_file_iter(truststore)
        .and_then(|certs| certs.collect::<Result<Vec<_>, _>>())
        .map_err(|e| format!("truststore {name}: {e}"))?;
    for cert in trusted {
        roots
            .add(cert)
            .map_err(|e| format!("truststore {name}: {e}"))?;
    }
    if roots.is_empty() {
        return Err(format!("truststore {name} holds no certificate"));
    }
    Ok(Arc::new(roots))
}

/// Why a keystore's key and certificate do not make a configuration.
pub fn key_mismatch(keystore: &Path, error: &rustls::Error) -> String {
    format!(
        "keystore {}: the key does not fit the certificate: {error}",
        keystore.display()
    )
}

fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::aws_lc_rs::default_provider())
}

/// A node's configuration for connecting to another: its keystore's chain
/// and key as client certificate, the truststore for the server.
pub fn client_config(keystore: &Path, truststore: &Path) -> Result<Arc<ClientConfig>, String> {
    let roots = read_roots(truststore)?;
    let verifier = WebPkiServerVerifier::builder_with_provider(roots, provider())
        .build()
        .map_err(|e| format!("truststore {}: {e}", truststore.display()))?;
    let config = ClientConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        .map_err(|e| format!("TLS versions: {e}"))?
        .with_webpki_verifier(verifier)
        .with_client_auth_cert(read_chain(keystore)?, read_key(keystore)?)
        .map_err(|e| key_mismatch(keystore, &e))?;
    Ok(Arc::new(config))
}

/// A node's configuration for accepting another: client certificates
/// required and checked against the truststore.
pub fn peer_server_config(keystore: &Path, truststore: &Path) -> Result<Arc<ServerConfig>, String> {
    let verifier = WebPkiClientVerifier::builder_with_provider(read_roots(truststore)?, provider())
        .build()
        .map_err(|e| format!("truststore {}: {e}", truststore.display()))?;
    let config = ServerConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        .map_err(|e| format!("TLS versions: {e}"))?
        .with_client_cert_verifier(verifier)
        .with_single_cert(read_chain(keystore)?, read_key(keystore)?)
        .map_err(|e| key_mismatch(keystore, &e))?;
    Ok(Arc::new(config))
}
