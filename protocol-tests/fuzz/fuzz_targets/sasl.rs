//! The authentication entry paths, with any input: a client certificate's
//! subject (DER), `ssl.principal.mapping.rules` text, and a SASL exchange
//! (the first byte picks the mechanism, OAUTHBEARER among them with signed
//! tokens and no key to sign them with, and the handshake version; the rest
//! is split into tokens at 0xff). Any input must give a principal, a
//! challenge or a refusal, never a panic; nothing but a stored credential
//! may authenticate.
#![no_main]

use libfuzzer_sys::fuzz_target;
use sluice::security::oauthbearer::OAuthBearerSettings;
use sluice::security::sasl::{Credentials, Mechanism, SaslConnection, SaslSettings, Step};
use sluice::security::scram::{ScramCredential, ScramMechanism};
use sluice::security::ssl_principal::{subject_dn, PrincipalMapper};
use std::sync::{Arc, OnceLock};
use std::time::Instant;

#[global_allocator]
static ALLOCATOR: sluice::alloc::LazyHugeAlloc = sluice::alloc::LazyHugeAlloc;

/// One user, alice, whose password the fuzzer would have to guess.
struct Users;

impl Credentials for Users {
    fn scram(&self, user: &str, mechanism: ScramMechanism) -> Option<ScramCredential> {
        static ALICE: OnceLock<[ScramCredential; 2]> = OnceLock::new();
        let alice = ALICE.get_or_init(|| {
            ScramMechanism::ALL.map(|m| ScramCredential::from_password(m, "a-long-unguessable-secret", 4096))
        });
        (user == "alice").then(|| alice[mechanism as usize].clone())
    }
}

fuzz_target!(|data: &[u8]| {
    let _ = subject_dn(data);
    if let Ok(rules) = std::str::from_utf8(data) {
        if let Ok(mapper) = PrincipalMapper::parse(rules) {
            let _ = mapper.map("CN=client,OU=eng,O=Acme\\, Inc.,C=US");
        }
    }
    let Some((&first, rest)) = data.split_first() else {
        return;
    };
    let runtime = tokio::runtime::Builder::new_current_thread()
        .build()
        .expect("runtime");
    runtime.block_on(async {
        let mechanisms = [
            Mechanism::ALL[0],
            Mechanism::ALL[1],
            Mechanism::ALL[2],
            Mechanism::OAuthBearer,
        ];
        let mut sasl = SaslConnection::new(Arc::new(SaslSettings {
            mechanisms: mechanisms.to_vec(),
            scram_legacy_nonce: first & 0x10 != 0,
            max_reauth: None,
            oauthbearer: Some(Arc::new(OAuthBearerSettings {
                unsecured: false,
                jwks: Arc::default(),
                expected_audience: Vec::new(),
                expected_issuer: None,
                sub_claim: "sub".to_string(),
                clock_skew_seconds: 30,
            })),
        }));
        let mechanism = mechanisms[usize::from(first & 0x3)];
        if sasl.handshake(mechanism.name(), i16::from(first & 0x4 != 0)).is_err() {
            return;
        }
        for token in rest.split(|b| *b == 0xff) {
            match sasl.authenticate(token, &Users, Instant::now(), 0).await {
                Step::Challenge(_) => {}
                Step::Complete { .. } => panic!("authenticated without the password"),
                Step::Failed(_) => return,
            }
        }
    });
});
