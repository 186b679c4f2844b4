//! The TLS entry path of an SSL listener, with any input as a client's first
//! flight: the broker's own acceptor (its keystore, a truststore, client
//! certificates requested, mapping rules) through `server::tls::accept`.
//! Any input must end in a refused handshake, never a panic or a hang; no
//! input can complete a handshake, so none may yield a principal.
#![no_main]

use libfuzzer_sys::fuzz_target;
use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, KeyPair};
use sluice::config::{SslClientAuth, SslConfig};
use sluice::server::tls::{accept, TlsServer};
use std::sync::{Arc, OnceLock};
use tokio::io::AsyncWriteExt;

#[global_allocator]
static ALLOCATOR: sluice::alloc::LazyHugeAlloc = sluice::alloc::LazyHugeAlloc;

/// The listener's TLS, from files a fresh CA made once per process.
fn server() -> &'static Arc<TlsServer> {
    static SERVER: OnceLock<Arc<TlsServer>> = OnceLock::new();
    SERVER.get_or_init(|| {
        let dir = tempfile::tempdir().expect("dir").keep();
        let ca_key = KeyPair::generate().expect("key");
        let mut params = CertificateParams::new(Vec::<String>::new()).expect("params");
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.distinguished_name.push(DnType::CommonName, "fuzz CA");
        let ca = params.self_signed(&ca_key).expect("ca");
        let key = KeyPair::generate().expect("key");
        let params = CertificateParams::new(vec!["localhost".to_string()]).expect("params");
        let cert = params.signed_by(&key, &ca, &ca_key).expect("cert");
        let keystore = dir.join("keystore.pem");
        let truststore = dir.join("ca.pem");
        std::fs::write(&keystore, format!("{}{}", cert.pem(), key.serialize_pem())).expect("write");
        std::fs::write(&truststore, ca.pem()).expect("write");
        TlsServer::new(&SslConfig {
            keystore,
            truststore: Some(truststore),
            client_auth: SslClientAuth::Requested,
            principal_mapping_rules: Some("RULE:^CN=(.*?),OU=.*$/$1/L,DEFAULT".to_string()),
        })
        .expect("the listener's TLS")
    })
}

fuzz_target!(|data: &[u8]| {
    let server = server();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .expect("runtime");
    runtime.block_on(async {
        let (mut client, broker) = tokio::io::duplex(64 * 1024);
        // The client sends its flight and goes: the handshake ends on what
        // it sent (a hang would be libFuzzer's timeout).
        let _ = client.write_all(data).await;
        let _ = client.shutdown().await;
        let sasl = data.first().is_some_and(|b| b & 1 == 1);
        let accepted = accept(server.acceptor(sasl), &server.principal_mapper(), sasl, broker).await;
        assert!(accepted.is_err(), "a handshake completed on one flight");
    });
});
