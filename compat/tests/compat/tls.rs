//! SSL listeners: a client that trusts the broker's CA speaks Kafka over TLS;
//! a plaintext client on the TLS port, and a client without a certificate
//! where one is required, are turned away at the handshake.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, KeyPair};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use rustls::{ClientConfig, ClientConnection, RootCertStore, StreamOwned};
use sluice::config::{SecurityProtocol, SslClientAuth, SslConfig};
use sluice_compat::EmbeddedBroker;

/// ApiVersions v0, correlation id 1, client id "t".
const API_VERSIONS_V0: [u8; 15] = [0, 0, 0, 11, 0, 18, 0, 0, 0, 0, 0, 1, 0, 1, b't'];

/// A CA, and a certificate it signed for `name` (its key beside it).
pub(crate) struct Pki {
    pub(crate) ca_pem: String,
    ca: rcgen::Certificate,
    ca_key: KeyPair,
}

impl Pki {
    pub(crate) fn new() -> Pki {
        let ca_key = KeyPair::generate().expect("CA key");
        let mut params = CertificateParams::new(Vec::<String>::new()).expect("CA params");
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params
            .distinguished_name
            .push(DnType::CommonName, "Sluice test CA");
        let ca = params.self_signed(&ca_key).expect("CA certificate");
        Pki {
            ca_pem: ca.pem(),
            ca,
            ca_key,
        }
    }

    /// A certificate for `name` as (certificate PEM, key PEM).
    pub(crate) fn issue(&self, name: &str) -> (String, String) {
        let key = KeyPair::generate().expect("key");
        let mut params = CertificateParams::new(vec![name.to_string()]).expect("params");
        params.distinguished_name.push(DnType::CommonName, name);
        let cert = params
            .signed_by(&key, &self.ca, &self.ca_key)
            .expect("certificate");
        (cert.pem(), key.serialize_pem())
    }
}

pub(crate) fn write(dir: &Path, name: &str, text: &str) -> std::path::PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, text).expect("write");
    path
}

/// A broker whose one listener is SSL, with its keystore made by `pki`.
fn ssl_broker(pki: &Pki, dir: &Path, client_auth: SslClientAuth) -> EmbeddedBroker {
    let (cert, key) = pki.issue("localhost");
    let keystore = write(dir, "broker.pem", &format!("{key}{cert}"));
    let truststore = write(dir, "ca.pem", &pki.ca_pem);
    EmbeddedBroker::start_with(|config| {
        config.listeners[0].name = "SSL".to_string();
        config.listeners[0].protocol = SecurityProtocol::Ssl;
        config.ssl = Some(SslConfig {
            keystore,
            truststore: Some(truststore),
            client_auth,
            principal_mapping_rules: None,
        });
    })
}

/// A TLS client trusting `pki`'s CA, with `identity` (certificate, key PEM) if given.
fn tls_client(
    pki: &Pki,
    address: &str,
    identity: Option<(String, String)>,
) -> StreamOwned<ClientConnection, TcpStream> {
    let mut roots = RootCertStore::empty();
    for cert in CertificateDer::pem_slice_iter(pki.ca_pem.as_bytes()) {
        roots.add(cert.expect("CA PEM")).expect("CA");
    }
    let builder = ClientConfig::builder().with_root_certificates(roots);
    let config = match identity {
        Some((cert, key)) => {
            let chain: Vec<CertificateDer<'static>> =
                CertificateDer::pem_slice_iter(cert.as_bytes())
                    .collect::<Result<_, _>>()
                    .expect("certificate PEM");
            let key = PrivateKeyDer::from_pem_slice(key.as_bytes()).expect("key PEM");
            builder
                .with_client_auth_cert(chain, key)
                .expect("client identity")
        }
        None => builder.with_no_client_auth(),
    };
    let name = ServerName::try_from("localhost").expect("name");
    let connection = ClientConnection::new(Arc::new(config), name).expect("client");
    let socket = TcpStream::connect(address).expect("connect");
    socket
        .set_read_timeout(Some(Duration::from_secs(10)))
        .expect("timeout");
    StreamOwned::new(connection, socket)
}

/// Sends ApiVersions v0 and reads the answer's correlation id and error code.
fn api_versions(stream: &mut impl ReadWrite) -> std::io::Result<(i32, i16)> {
    stream.write_all(&API_VERSIONS_V0)?;
    let mut length = [0u8; 4];
    stream.read_exact(&mut length)?;
    let mut body = vec![0u8; i32::from_be_bytes(length) as usize];
    stream.read_exact(&mut body)?;
    let correlation = i32::from_be_bytes([body[0], body[1], body[2], body[3]]);
    let error = i16::from_be_bytes([body[4], body[5]]);
    Ok((correlation, error))
}

trait ReadWrite: Read + Write {}
impl<T: Read + Write> ReadWrite for T {}

#[test]
fn an_ssl_listener_speaks_kafka_over_tls_and_turns_away_plaintext() {
    let dir = tempfile::tempdir().expect("tempdir");
    let pki = Pki::new();
    let broker = ssl_broker(&pki, dir.path(), SslClientAuth::None);
    let address = broker.bootstrap();

    let mut client = tls_client(&pki, &address, None);
    assert_eq!(
        api_versions(&mut client).expect("answered over TLS"),
        (1, 0)
    );

    // Plaintext bytes on the TLS port: no Kafka answer, the connection closes.
    let mut plain = TcpStream::connect(&address).expect("connect");
    plain
        .set_read_timeout(Some(Duration::from_secs(10)))
        .expect("timeout");
    let answered = api_versions(&mut plain);
    assert!(answered.is_err(), "a plaintext client got {answered:?}");
}

#[test]
fn a_required_client_certificate_must_chain_to_the_truststore() {
    let dir = tempfile::tempdir().expect("tempdir");
    let pki = Pki::new();
    let broker = ssl_broker(&pki, dir.path(), SslClientAuth::Required);
    let address = broker.bootstrap();

    let mut with_certificate = tls_client(&pki, &address, Some(pki.issue("alice")));
    assert_eq!(
        api_versions(&mut with_certificate).expect("answered with a trusted certificate"),
        (1, 0)
    );

    let mut without = tls_client(&pki, &address, None);
    assert!(
        api_versions(&mut without).is_err(),
        "served without a certificate"
    );

    let stranger = Pki::new();
    let mut untrusted = tls_client(&pki, &address, Some(stranger.issue("mallory")));
    assert!(
        api_versions(&mut untrusted).is_err(),
        "served a certificate of another CA"
    );
}

#[test]
fn a_rotated_keystore_is_served_to_new_connections_without_a_restart() {
    let dir = tempfile::tempdir().expect("tempdir");
    let pki = Pki::new();
    let broker = ssl_broker(&pki, dir.path(), SslClientAuth::None);
    let address = broker.bootstrap();
    let mut before = tls_client(&pki, &address, None);
    assert_eq!(api_versions(&mut before).expect("answered"), (1, 0));

    // A new CA's certificate in the keystore's place (written beside it and
    // renamed over it, as a rotation does).
    let rotated = Pki::new();
    let (cert, key) = rotated.issue("localhost");
    let staged = write(dir.path(), "broker.pem.new", &format!("{key}{cert}"));
    std::fs::rename(&staged, dir.path().join("broker.pem")).expect("rotate");
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    loop {
        let mut after = tls_client(&rotated, &address, None);
        if api_versions(&mut after).is_ok_and(|answer| answer == (1, 0)) {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the rotated certificate was never served"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    // The connection made before the rotation still works.
    assert_eq!(api_versions(&mut before).expect("still answered"), (1, 0));
}

/// `ssl.client.auth` applies to SSL listeners: a SASL_SSL listener beside
/// one that requires certificates lets a client without one through TLS
/// (its SASL exchange names it), and before authentication serves it
/// ApiVersions alone.
#[test]
fn ssl_client_auth_applies_to_ssl_listeners_not_to_sasl_ssl() {
    use sluice::config::ListenerConfig;
    let dir = tempfile::tempdir().expect("tempdir");
    let pki = Pki::new();
    let (cert, key) = pki.issue("localhost");
    let keystore = write(dir.path(), "broker.pem", &format!("{key}{cert}"));
    let truststore = write(dir.path(), "ca.pem", &pki.ca_pem);
    let broker = EmbeddedBroker::start_with(|config| {
        config.listeners[0].name = "SSL".to_string();
        config.listeners[0].protocol = SecurityProtocol::Ssl;
        config.listeners.push(ListenerConfig {
            name: "SASL_SSL".to_string(),
            bind: "127.0.0.1:0".to_string(),
            advertised: None,
            protocol: SecurityProtocol::SaslSsl,
        });
        config.ssl = Some(SslConfig {
            keystore,
            truststore: Some(truststore),
            client_auth: SslClientAuth::Required,
            principal_mapping_rules: None,
        });
    });
    let addresses = broker.local_addrs();
    let (ssl, sasl_ssl) = (addresses[0].to_string(), addresses[1].to_string());
    let mut without = tls_client(&pki, &ssl, None);
    assert!(
        api_versions(&mut without).is_err(),
        "SSL requires a certificate"
    );
    let mut without = tls_client(&pki, &sasl_ssl, None);
    assert_eq!(
        api_versions(&mut without).expect("SASL_SSL asks for none"),
        (1, 0)
    );
}
