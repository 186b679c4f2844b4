//! OAUTHBEARER's signing keys: the JWKS of
//! `--sasl-oauthbearer-jwks-endpoint-url`, a `file://` path or an `https://`
//! URL, read at start (a start whose JWKS cannot be read or parsed fails,
//! naming it) and again every `--sasl-oauthbearer-jwks-endpoint-refresh-ms`,
//! so that an identity provider's rotated keys are taken without a restart;
//! a read that fails keeps the keys already known, logged. Reads block (a
//! file, or an HTTP GET bounded by `JWKS_FETCH_TIMEOUT_MS` and
//! `JWKS_BYTES_MAX`), so they run on the blocking pool, never on a worker.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use jsonwebtoken::jwk::JwkSet;
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::CertificateDer;
use tokio::sync::watch;

use super::ticks::{every, next_tick};
use crate::config::{JwksLocation, JwksSource};
use crate::limits::{JWKS_BYTES_MAX, JWKS_FETCH_TIMEOUT_MS};

/// Reads the JWKS into its cache now (blocking); an error names its source.
pub fn load(source: &JwksSource) -> Result<(), String> {
    let location = &source.location;
    let bytes = match location {
        JwksLocation::File(path) => std::fs::read(path).map_err(|e| e.to_string()),
        JwksLocation::Https { url, truststore } => fetch(url, truststore.as_deref()),
    }
    .map_err(|e| format!("JWKS {location}: {e}"))?;
    let keys: JwkSet = serde_json::from_slice(&bytes)
        .map_err(|e| format!("JWKS {location}: not a JSON Web Key Set: {e}"))?;
    source.cache.set(keys);
    Ok(())
}

/// Reads the JWKS on the blocking pool.
pub async fn load_off_workers(source: JwksSource) -> Result<(), String> {
    tokio::task::spawn_blocking(move || load(&source))
        .await
        .unwrap_or_else(|e| Err(format!("the JWKS read stopped: {e}")))
}

/// Reads the JWKS again every refresh interval, until `stopped`.
pub async fn keep_current(source: JwksSource, mut stopped: watch::Receiver<bool>) {
    let mut ticks = every(Duration::from_millis(source.refresh_ms));
    while next_tick(&mut ticks, &mut stopped).await {
        match load_off_workers(source.clone()).await {
            Ok(()) => tracing::debug!(source = %source.location, "JWKS read again"),
            Err(error) => {
                tracing::error!(%error, "the JWKS cannot be read; the keys already known stay in use");
            }
        }
    }
}

/// GETs an `https://` JWKS: TLS 1.2 or 1.3 on rustls, the server's
/// certificate checked against the platform's CA certificates and those of
/// `truststore`; no plain-HTTP redirect is followed; the body is bounded.
fn fetch(url: &str, truststore: Option<&Path>) -> Result<Vec<u8>, String> {
    use ureq::tls::{Certificate, RootCerts, TlsConfig, TlsProvider};

    let mut roots: Vec<Certificate<'static>> = Vec::new();
    // The platform's bundle; certificates it cannot parse are skipped (a
    // machine without one still trusts the truststore's).
    let native = rustls_native_certs::load_native_certs();
    roots.extend(
        native
            .certs
            .iter()
            .map(|cert| Certificate::from_der(cert.as_ref()).to_owned()),
    );
    if let Some(path) = truststore {
        let certs = CertificateDer::pem_file_iter(path)
            .and_then(|certs| certs.collect::<Result<Vec<_>, _>>())
            .map_err(|e| format!("truststore {}: {e}", path.display()))?;
        roots.extend(
            certs
                .iter()
                .map(|cert| Certificate::from_der(cert.as_ref()).to_owned()),
        );
    }
    if roots.is_empty() {
        return Err(
            "no CA certificate to check the server's against: the platform has none and --ssl-truststore-location is not set"
                .to_string(),
        );
    }
    let tls = TlsConfig::builder()
        .provider(TlsProvider::Rustls)
        .root_certs(RootCerts::Specific(Arc::new(roots)))
        .unversioned_rustls_crypto_provider(Arc::new(rustls::crypto::aws_lc_rs::default_provider()))
        .build();
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .tls_config(tls)
        .https_only(true)
        .timeout_global(Some(Duration::from_millis(JWKS_FETCH_TIMEOUT_MS)))
        .build()
        .into();
    let mut response = agent
        .get(url)
        .header("Accept", "application/json")
        .call()
        .map_err(|e| e.to_string())?;
    response
        .body_mut()
        .with_config()
        .limit(JWKS_BYTES_MAX)
        .read_to_vec()
        .map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use std::path::{Path, PathBuf};

    use rustls_pki_types::PrivateKeyDer;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    use super::*;
    use crate::security::test_certs::TestCa;

    const JWKS: &str = r#"{"keys":[{"kty":"EC","crv":"P-256","kid":"issuer-1","alg":"ES256","use":"sig","x":"f83OJ3D2xF1Bg8vub9tLe1gHMzV76e8Tus9uPHvRVEU","y":"x_FEzRu9m36HLN_tue659LNpXW6pCyStikYjKIWI5a0"}]}"#;

    fn source(location: JwksLocation) -> JwksSource {
        JwksSource {
            location,
            refresh_ms: 1_000,
            cache: Arc::default(),
        }
    }

    fn kids(source: &JwksSource) -> Vec<String> {
        source
            .cache
            .keys()
            .keys
            .iter()
            .filter_map(|key| key.common.key_id.clone())
            .collect()
    }

    /// A CA named `name` and, signed by it, a server certificate for
    /// localhost; (truststore path, server's TLS configuration).
    fn ca_and_server(dir: &Path, name: &str) -> (PathBuf, Arc<rustls::ServerConfig>) {
        let ca = TestCa::new(name);
        let (key, cert) = ca.sign("localhost", None);
        let truststore = dir.join(format!("{name}.pem"));
        std::fs::write(&truststore, ca.cert.pem()).unwrap();
        let server = rustls::ServerConfig::builder_with_provider(Arc::new(
            rustls::crypto::aws_lc_rs::default_provider(),
        ))
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(
            vec![cert.der().clone()],
            PrivateKeyDer::try_from(key.serialize_der()).unwrap(),
        )
        .unwrap();
        (truststore, Arc::new(server))
    }

    /// An HTTPS server answering every connection's request with `body`;
    /// its `https://localhost:PORT/jwks` URL.
    async fn serve(server: Arc<rustls::ServerConfig>, body: Vec<u8>) -> String {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let acceptor = tokio_rustls::TlsAcceptor::from(server);
        tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                let acceptor = acceptor.clone();
                let body = body.clone();
                tokio::spawn(async move {
                    let Ok(mut tls) = acceptor.accept(stream).await else {
                        return;
                    };
                    let mut request = Vec::new();
                    let mut chunk = [0u8; 1024];
                    while !request.ends_with(b"\r\n\r\n") {
                        match tls.read(&mut chunk).await {
                            Ok(0) | Err(_) => return,
                            Ok(n) => request.extend_from_slice(&chunk[..n]),
                        }
                    }
                    let head = format!(
                        "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
                        body.len()
                    );
                    let _ = tls.write_all(head.as_bytes()).await;
                    let _ = tls.write_all(&body).await;
                    let _ = tls.shutdown().await;
                });
            }
        });
        format!("https://localhost:{port}/jwks")
    }

    #[test]
    fn a_file_is_read_and_a_broken_one_keeps_the_keys_already_known() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("jwks.json");
        std::fs::write(&path, JWKS).unwrap();
        let source = source(JwksLocation::File(path.clone()));
        load(&source).unwrap();
        assert_eq!(kids(&source), vec!["issuer-1".to_string()]);
        std::fs::write(&path, "{\"keys\": 7}").unwrap();
        let error = load(&source).unwrap_err();
        assert!(error.contains("not a JSON Web Key Set"), "{error}");
        assert!(error.contains(&path.display().to_string()), "{error}");
        assert_eq!(kids(&source), vec!["issuer-1".to_string()]);
    }

    #[tokio::test]
    async fn an_https_jwks_is_read_only_from_a_server_the_truststore_vouches_for() {
        let dir = tempfile::tempdir().unwrap();
        let (trusted_ca, server) = ca_and_server(dir.path(), "idp-ca");
        let (stranger_ca, _) = ca_and_server(dir.path(), "other-ca");
        let url = serve(server, JWKS.as_bytes().to_vec()).await;

        let trusted = source(JwksLocation::Https {
            url: url.clone(),
            truststore: Some(trusted_ca),
        });
        load_off_workers(trusted.clone()).await.unwrap();
        assert_eq!(kids(&trusted), vec!["issuer-1".to_string()]);

        // A CA that did not sign the server's certificate: no keys read.
        let stranger = source(JwksLocation::Https {
            url,
            truststore: Some(stranger_ca),
        });
        let error = load_off_workers(stranger.clone()).await.unwrap_err();
        assert!(
            error.contains("certificate") || error.contains("Certificate"),
            "{error}"
        );
        assert!(kids(&stranger).is_empty());
    }

    #[tokio::test]
    async fn an_https_body_over_the_bound_is_refused_and_the_keys_stay() {
        let dir = tempfile::tempdir().unwrap();
        let (ca, server) = ca_and_server(dir.path(), "idp-ca");
        let huge = vec![b' '; usize::try_from(JWKS_BYTES_MAX).unwrap() + 1];
        let url = serve(server, huge).await;
        let source = source(JwksLocation::Https {
            url,
            truststore: Some(ca),
        });
        source.cache.set(serde_json::from_str(JWKS).unwrap());
        let error = load_off_workers(source.clone()).await.unwrap_err();
        assert!(
            error.contains("limit") || error.contains("large"),
            "{error}"
        );
        assert_eq!(kids(&source), vec!["issuer-1".to_string()]);
    }
}
