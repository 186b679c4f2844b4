//! TLS on SSL listeners, with rustls on ring's cryptography: TLS 1.2 and 1.3,
//! the broker's key and certificate chain from a PEM keystore, and client
//! certificates checked against a PEM truststore when `ssl.client.auth` asks
//! for them (Kafka's `ssl.keystore.type=PEM` and `ssl.truststore.type=PEM`).

use std::sync::Arc;

use rustls::server::WebPkiClientVerifier;
use rustls::{RootCertStore, ServerConfig};
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};
use tokio_rustls::TlsAcceptor;

use crate::config::{SslClientAuth, SslConfig};

/// The acceptor SSL listeners hand each new connection to; an error names
/// the file and what is wrong with it.
pub fn acceptor(config: &SslConfig) -> Result<TlsAcceptor, String> {
    let keystore = config.keystore.display();
    let chain: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(&config.keystore)
        .and_then(|certs| certs.collect::<Result<_, _>>())
        .map_err(|e| format!("keystore {keystore}: cannot read its certificates: {e}"))?;
    if chain.is_empty() {
        return Err(format!("keystore {keystore} holds no certificate"));
    }
    let key = PrivateKeyDer::from_pem_file(&config.keystore)
        .map_err(|e| format!("keystore {keystore}: cannot read its private key: {e}"))?;
    let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
    let builder = ServerConfig::builder_with_provider(Arc::clone(&provider))
        .with_safe_default_protocol_versions()
        .map_err(|e| format!("TLS versions: {e}"))?;
    let builder = match (&config.truststore, config.client_auth) {
        (_, SslClientAuth::None) | (None, _) => builder.with_no_client_auth(),
        (Some(truststore), client_auth) => {
            let mut roots = RootCertStore::empty();
            let trusted = CertificateDer::pem_file_iter(truststore)
                .and_then(|certs| certs.collect::<Result<Vec<_>, _>>())
                .map_err(|e| format!("truststore {}: {e}", truststore.display()))?;
            for cert in trusted {
                roots
                    .add(cert)
                    .map_err(|e| format!("truststore {}: {e}", truststore.display()))?;
            }
            let verifier = WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider);
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
        .map_err(|e| format!("keystore {keystore}: the key does not fit the certificate: {e}"))?;
    Ok(TlsAcceptor::from(Arc::new(server)))
}
