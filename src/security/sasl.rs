//! One connection's SASL state, as Kafka's SaslServerAuthenticator keeps it.
//!
//! Before authentication only ApiVersions and SaslHandshake are served;
//! anything else ends the connection. SaslHandshake v0 makes the following
//! frames raw tokens (no Kafka header); v1 makes them SaslAuthenticate
//! requests. Once an exchange completes the connection serves every API as
//! its principal until its session expires (`connections.max.reauth.ms`,
//! KIP-368), when the next request other than SaslHandshake ends it. A
//! SaslHandshake on an authenticated connection starts a re-authentication,
//! which must use the same mechanism and end with the same principal.
//!
//! Invariant: `principal()` is None until an exchange has checked a
//! credential, and after a failed one the connection is ended.

use std::sync::Arc;
use std::time::{Duration, Instant};

use super::oauthbearer::{self, OAuthBearerSettings};
use super::scram::{ScramCredential, ScramError, ScramMechanism, ScramServer};
use super::{plain, Principal};

/// Kafka's API keys of the requests a SASL exchange involves.
pub const API_VERSIONS: i16 = 18;
pub const SASL_HANDSHAKE: i16 = 17;
pub const SASL_AUTHENTICATE: i16 = 36;

/// The SASL mechanisms this broker offers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mechanism {
    Plain,
    Scram(ScramMechanism),
    /// Offered only when configured: it checks tokens, not the user store.
    OAuthBearer,
}

impl Mechanism {
    /// The mechanisms checked against the user store, offered by default.
    pub const ALL: [Mechanism; 3] = [
        Mechanism::Plain,
        Mechanism::Scram(ScramMechanism::Sha256),
        Mechanism::Scram(ScramMechanism::Sha512),
    ];

    pub fn name(self) -> &'static str {
        match self {
            Mechanism::Plain => "PLAIN",
            Mechanism::Scram(scram) => scram.name(),
            Mechanism::OAuthBearer => "OAUTHBEARER",
        }
    }

    pub fn from_name(name: &str) -> Option<Mechanism> {
        Mechanism::ALL
            .into_iter()
            .chain([Mechanism::OAuthBearer])
            .find(|m| m.name() == name)
    }
}

/// The SASL settings every connection of a SASL listener shares.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SaslSettings {
    /// `sasl.enabled.mechanisms`, in the order the handshake lists them.
    pub mechanisms: Vec<Mechanism>,
    /// Take the client-final nonce of librdkafka before 2.6.1.
    pub scram_legacy_nonce: bool,
    /// `connections.max.reauth.ms`: a session's lifetime (None: unbounded).
    pub max_reauth: Option<Duration>,
    /// How OAUTHBEARER tokens are checked, when it is offered.
    pub oauthbearer: Option<Arc<OAuthBearerSettings>>,
}

/// What the user store answers: a user's SCRAM credential for a mechanism.
pub trait Credentials: Sync {
    fn scram(&self, user: &str, mechanism: ScramMechanism) -> Option<ScramCredential>;
}

/// Why a SaslHandshake was refused.
#[derive(Debug, PartialEq, Eq)]
pub enum HandshakeError {
    /// UNSUPPORTED_SASL_MECHANISM: the connection is ended after the answer.
    UnsupportedMechanism,
    /// ILLEGAL_SASL_STATE: a handshake in the middle of an exchange.
    IllegalState,
}

/// The answer to one token.
#[derive(Debug, PartialEq, Eq)]
pub enum Step {
    /// The exchange goes on: send this challenge.
    Challenge(Vec<u8>),
    /// The exchange is done: send this last token; the session lasts
    /// `session_lifetime_ms` (0: unbounded).
    Complete {
        token: Vec<u8>,
        session_lifetime_ms: i64,
    },
    /// SASL_AUTHENTICATION_FAILED with this message; the connection ends.
    Failed(String),
}

enum State {
    /// Waiting for SaslHandshake (ApiVersions allowed).
    Handshake,
    /// A handshake chose `mechanism`; tokens follow, raw after v0.
    Exchange {
        mechanism: Mechanism,
        raw: bool,
        scram: Option<ScramServer>,
    },
    /// A re-authentication asked for a mechanism other than the session's:
    /// the next token fails with this message (Kafka's REAUTH_BAD_MECHANISM).
    BadReauthMechanism(String),
    /// An OAUTHBEARER token was refused with the error challenge: the
    /// client's next token (a lone `\x01`) ends the exchange with this
    /// message (RFC 7628 §3.2.2).
    TokenRefused(String),
    Authenticated,
    /// An exchange failed: nothing more is served.
    Failed,
}

struct Session {
    principal: Principal,
    mechanism: Mechanism,
    expires_at: Option<Instant>,
}

/// One connection's SASL state.
pub struct SaslConnection {
    settings: Arc<SaslSettings>,
    state: State,
    /// The last completed exchange (kept while a re-authentication runs).
    session: Option<Session>,
}

impl SaslConnection {
    pub fn new(settings: Arc<SaslSettings>) -> SaslConnection {
        SaslConnection {
            settings,
            state: State::Handshake,
            session: None,
        }
    }

    /// The mechanisms a handshake answer lists.
    pub fn mechanism_names(&self) -> Vec<&'static str> {
        self.settings.mechanisms.iter().map(|m| m.name()).collect()
    }

    /// The authenticated principal, while the session is valid and no
    /// re-authentication is running.
    pub fn principal(&self) -> Option<&Principal> {
        match self.state {
            State::Authenticated => self.session.as_ref().map(|s| &s.principal),
            _ => None,
        }
    }

    /// Whether an exchange is running (a SaslAuthenticate is its next step).
    pub fn in_exchange(&self) -> bool {
        matches!(
            self.state,
            State::Exchange { .. } | State::BadReauthMechanism(_) | State::TokenRefused(_)
        )
    }

    /// Whether the next frame is a raw token (after SaslHandshake v0).
    pub fn expects_raw_token(&self) -> bool {
        matches!(self.state, State::Exchange { raw: true, .. })
    }

    /// Whether a request of `api_key` may be served now; Err says why the
    /// connection ends instead.
    pub fn admits(&self, api_key: i16, now: Instant) -> Result<(), String> {
        match &self.state {
            State::Handshake if matches!(api_key, API_VERSIONS | SASL_HANDSHAKE) => Ok(()),
            State::Handshake => Err(format!(
                "unexpected Kafka request of API key {api_key} during SASL handshake"
            )),
            State::Exchange { raw: false, .. }
            | State::BadReauthMechanism(_)
            | State::TokenRefused(_)
                if api_key == SASL_AUTHENTICATE =>
            {
                Ok(())
            }
            State::Exchange { .. } | State::BadReauthMechanism(_) | State::TokenRefused(_) => Err(
                format!("unexpected Kafka request of API key {api_key} during SASL authentication"),
            ),
            State::Authenticated => {
                let expired = self
                    .session
                    .as_ref()
                    .and_then(|s| s.expires_at)
                    .is_some_and(|at| now >= at);
                if expired && api_key != SASL_HANDSHAKE {
                    return Err("the SASL session expired without re-authentication".to_string());
                }
                Ok(())
            }
            State::Failed => Err("SASL authentication failed".to_string()),
        }
    }

    /// A SaslHandshake for `mechanism` at `version`: starts an exchange (or
    /// a re-authentication on an authenticated connection).
    pub fn handshake(&mut self, mechanism: &str, version: i16) -> Result<(), HandshakeError> {
        match self.state {
            State::Handshake | State::Authenticated => {}
            _ => return Err(HandshakeError::IllegalState),
        }
        let Some(chosen) =
            Mechanism::from_name(mechanism).filter(|m| self.settings.mechanisms.contains(m))
        else {
            self.state = State::Failed;
            return Err(HandshakeError::UnsupportedMechanism);
        };
        if let Some(session) = &self.session {
            if session.mechanism != chosen {
                self.state = State::BadReauthMechanism(format!(
                    "SASL mechanism '{mechanism}' requested by client is not supported for \
                     re-authentication of mechanism '{}'",
                    session.mechanism.name()
                ));
                return Ok(());
            }
        }
        self.state = State::Exchange {
            mechanism: chosen,
            raw: version == 0,
            scram: match chosen {
                Mechanism::Plain | Mechanism::OAuthBearer => None,
                Mechanism::Scram(scram) => {
                    Some(ScramServer::new(scram, self.settings.scram_legacy_nonce))
                }
            },
        };
        Ok(())
    }

    /// One client token of the exchange, at `now` (`unix_now_ms` on the
    /// wall clock, for token expiry). PLAIN's password check (PBKDF2) runs
    /// off the runtime's workers.
    pub async fn authenticate(
        &mut self,
        token: &[u8],
        credentials: &dyn Credentials,
        now: Instant,
        unix_now_ms: i64,
    ) -> Step {
        let state = std::mem::replace(&mut self.state, State::Failed);
        let (mechanism, raw, scram) = match state {
            State::Exchange {
                mechanism,
                raw,
                scram,
            } => (mechanism, raw, scram),
            State::BadReauthMechanism(message) | State::TokenRefused(message) => {
                return Step::Failed(message)
            }
            other => {
                self.state = other;
                return Step::Failed(
                    "SaslAuthenticate request received outside a SASL exchange".to_string(),
                );
            }
        };
        let mut token_expires_at_ms = None;
        let proven = match (mechanism, scram) {
            (Mechanism::Plain, _) => plain_login(token, credentials).await,
            (Mechanism::OAuthBearer, _) => {
                let checked = self
                    .settings
                    .oauthbearer
                    .as_ref()
                    .ok_or_else(|| "OAUTHBEARER is not configured".to_string())
                    .and_then(|settings| {
                        oauthbearer::validate(settings, oauthbearer::token_of(token)?, unix_now_ms)
                    });
                match checked {
                    Ok(valid) => {
                        token_expires_at_ms = Some(valid.expires_at_ms);
                        Ok((valid.principal, Vec::new()))
                    }
                    Err(why) => {
                        self.state = State::TokenRefused(format!("Authentication failed: {why}"));
                        return Step::Challenge(oauthbearer::INVALID_TOKEN_CHALLENGE.to_vec());
                    }
                }
            }
            (Mechanism::Scram(kind), Some(mut server)) if server.awaits_client_first() => {
                match server.client_first(token, |user| credentials.scram(user, kind)) {
                    Ok((_, server_first)) => {
                        self.state = State::Exchange {
                            mechanism,
                            raw,
                            scram: Some(server),
                        };
                        return Step::Challenge(server_first);
                    }
                    Err(error) => Err(scram_failure(error, mechanism)),
                }
            }
            (Mechanism::Scram(_), Some(mut server)) => server
                .client_final(token)
                .map_err(|error| scram_failure(error, mechanism)),
            (Mechanism::Scram(_), None) => Err(failed_message(mechanism)),
        };
        let (user, last_token) = match proven {
            Ok(proven) => proven,
            Err(message) => return Step::Failed(message),
        };
        let principal = Principal::user(user);
        if let Some(previous) = &self.session {
            if previous.principal != principal {
                return Step::Failed(format!(
                    "Cannot change principals during re-authentication from {}.{}: {}.{}",
                    previous.principal.principal_type,
                    previous.principal.name,
                    principal.principal_type,
                    principal.name
                ));
            }
        }
        // A token's expiry bounds its session (KIP-368), as does
        // connections.max.reauth.ms.
        let token_lifetime = token_expires_at_ms.map(|at| {
            Duration::from_millis(u64::try_from(at.saturating_sub(unix_now_ms)).unwrap_or(0))
        });
        let lifetime = match (self.settings.max_reauth, token_lifetime) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        self.session = Some(Session {
            principal,
            mechanism,
            // A lifetime past what an Instant holds (a token expiring in
            // a million years) never ends.
            expires_at: lifetime.and_then(|lifetime| now.checked_add(lifetime)),
        });
        self.state = State::Authenticated;
        Step::Complete {
            token: last_token,
            session_lifetime_ms: lifetime.map_or(0, |l| l.as_millis() as i64),
        }
    }
}

/// Kafka's message for a failed exchange: it never says whether the user
/// exists or what was wrong with the credential.
pub fn failed_message(mechanism: Mechanism) -> String {
    format!(
        "Authentication failed during authentication due to invalid credentials with SASL mechanism {}",
        mechanism.name()
    )
}

fn scram_failure(error: ScramError, mechanism: Mechanism) -> String {
    match error {
        ScramError::Malformed(what) => format!("Authentication failed: {what}"),
        ScramError::BadCredentials | ScramError::TooFewIterations => failed_message(mechanism),
    }
}

/// A PLAIN token checked against the user's SCRAM credential (SHA-512 if
/// the user has one, else SHA-256). An unknown user costs the same PBKDF2
/// work as a known one, so timing does not tell them apart.
async fn plain_login(
    token: &[u8],
    credentials: &dyn Credentials,
) -> Result<(String, Vec<u8>), String> {
    let token = plain::parse(token).map_err(|what| format!("Authentication failed: {what}"))?;
    let stored = [ScramMechanism::Sha512, ScramMechanism::Sha256]
        .into_iter()
        .find_map(|kind| credentials.scram(&token.username, kind).map(|c| (kind, c)));
    let known = stored.is_some();
    let (kind, credential) = stored.unwrap_or_else(|| {
        let kind = ScramMechanism::Sha512;
        let decoy = ScramCredential::from_salted_password(
            kind,
            &[0; 64],
            vec![0; super::scram::SCRAM_SALT_BYTES],
            super::scram::SCRAM_ITERATIONS_MIN,
        );
        (kind, decoy)
    });
    let password = token.password;
    let verified = tokio::task::spawn_blocking(move || {
        credential.iterations >= super::scram::SCRAM_ITERATIONS_MIN
            && credential.verifies_password(kind, &password)
    })
    .await
    .unwrap_or(false);
    if known && verified {
        // PLAIN's exchange ends with an empty token.
        Ok((token.username, Vec::new()))
    } else {
        Err(failed_message(Mechanism::Plain))
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use super::*;
    use base64::engine::general_purpose::STANDARD as BASE64;
    use base64::Engine as _;

    /// The API keys the tests ask about.
    #[allow(non_snake_case, non_upper_case_globals)]
    mod ApiKey {
        pub const ApiVersions: i16 = super::API_VERSIONS;
        pub const SaslHandshake: i16 = super::SASL_HANDSHAKE;
        pub const SaslAuthenticate: i16 = super::SASL_AUTHENTICATE;
        pub const Metadata: i16 = 3;
    }

    struct Users(HashMap<(String, ScramMechanism), ScramCredential>);

    impl Credentials for Users {
        fn scram(&self, user: &str, mechanism: ScramMechanism) -> Option<ScramCredential> {
            self.0.get(&(user.to_string(), mechanism)).cloned()
        }
    }

    fn users() -> Users {
        let mut users = HashMap::new();
        for kind in ScramMechanism::ALL {
            users.insert(
                ("alice".to_string(), kind),
                ScramCredential::from_password(kind, "alice-secret", 4096),
            );
        }
        users.insert(
            ("bob".to_string(), ScramMechanism::Sha256),
            ScramCredential::from_password(ScramMechanism::Sha256, "bob-secret", 4096),
        );
        Users(users)
    }

    fn connection(max_reauth: Option<Duration>) -> SaslConnection {
        SaslConnection::new(Arc::new(SaslSettings {
            mechanisms: Mechanism::ALL.to_vec(),
            scram_legacy_nonce: false,
            max_reauth,
            oauthbearer: None,
        }))
    }

    /// An unsigned token for `sub` expiring at `exp_ms`, in an initial response.
    fn oauth_response(sub: &str, exp_ms: i64) -> Vec<u8> {
        use base64::engine::general_purpose::URL_SAFE_NO_PAD;
        use base64::Engine as _;
        let claims = format!(r#"{{"sub":"{sub}","exp":{}}}"#, exp_ms / 1000);
        let token = format!(
            "{}.{}.",
            URL_SAFE_NO_PAD.encode(br#"{"alg":"none"}"#),
            URL_SAFE_NO_PAD.encode(claims)
        );
        format!("n,,\x01auth=Bearer {token}\x01\x01").into_bytes()
    }

    #[tokio::test]
    async fn an_oauthbearer_token_bounds_its_session_and_a_bad_one_fails_after_the_error_challenge()
    {
        let unix_now_ms = 1_800_000_000_000;
        let now = Instant::now();
        let settings = Arc::new(SaslSettings {
            mechanisms: vec![Mechanism::OAuthBearer],
            scram_legacy_nonce: false,
            max_reauth: Some(Duration::from_secs(3_600)),
            oauthbearer: Some(Arc::new(OAuthBearerSettings {
                unsecured: true,
                jwks: Arc::default(),
                expected_audience: Vec::new(),
                expected_issuer: None,
                sub_claim: "sub".to_string(),
                clock_skew_seconds: 0,
            })),
        });
        let mut sasl = SaslConnection::new(Arc::clone(&settings));
        sasl.handshake("OAUTHBEARER", 1).expect("handshake");
        let token = oauth_response("svc", unix_now_ms + 60_000);
        let step = sasl.authenticate(&token, &users(), now, unix_now_ms).await;
        // The token's minute, not the hour of connections.max.reauth.ms.
        assert_eq!(
            step,
            Step::Complete {
                token: Vec::new(),
                session_lifetime_ms: 60_000
            }
        );
        assert_eq!(sasl.principal(), Some(&Principal::user("svc")));
        assert!(sasl
            .admits(ApiKey::Metadata, now + Duration::from_secs(61))
            .is_err());
        // Re-authentication must keep the principal.
        sasl.handshake("OAUTHBEARER", 1).expect("handshake");
        let other = oauth_response("intruder", unix_now_ms + 60_000);
        let step = sasl.authenticate(&other, &users(), now, unix_now_ms).await;
        assert!(matches!(step, Step::Failed(m) if m.contains("Cannot change principals")));

        let mut refused = SaslConnection::new(Arc::clone(&settings));
        refused.handshake("OAUTHBEARER", 1).expect("handshake");
        let expired = oauth_response("svc", unix_now_ms - 1_000);
        let step = refused
            .authenticate(&expired, &users(), now, unix_now_ms)
            .await;
        assert_eq!(
            step,
            Step::Challenge(br#"{"status":"invalid_token"}"#.to_vec())
        );
        assert!(refused.admits(ApiKey::SaslAuthenticate, now).is_ok());
        assert!(refused.admits(ApiKey::Metadata, now).is_err());
        let step = refused
            .authenticate(b"\x01", &users(), now, unix_now_ms)
            .await;
        assert!(matches!(step, Step::Failed(m) if m.contains("expired")));
        assert!(refused.principal().is_none());

        // A token that expires in a million years logs in, capped by
        // connections.max.reauth.ms, and one with no cap never expires.
        let far = oauth_response("svc", i64::MAX);
        let mut capped = SaslConnection::new(Arc::clone(&settings));
        capped.handshake("OAUTHBEARER", 1).expect("handshake");
        let step = capped.authenticate(&far, &users(), now, unix_now_ms).await;
        assert!(matches!(
            step,
            Step::Complete {
                session_lifetime_ms: 3_600_000,
                ..
            }
        ));
        let uncapped = Arc::new(SaslSettings {
            max_reauth: None,
            ..SaslSettings::clone(&settings)
        });
        let mut forever = SaslConnection::new(uncapped);
        forever.handshake("OAUTHBEARER", 1).expect("handshake");
        let step = forever.authenticate(&far, &users(), now, unix_now_ms).await;
        assert!(matches!(step, Step::Complete { .. }), "{step:?}");
        assert!(forever.admits(ApiKey::Metadata, now).is_ok());
    }

    #[tokio::test]
    async fn only_api_versions_and_the_handshake_come_before_authentication() {
        let now = Instant::now();
        let mut sasl = connection(None);
        assert!(sasl.admits(ApiKey::ApiVersions, now).is_ok());
        assert!(sasl.admits(ApiKey::SaslHandshake, now).is_ok());
        assert!(sasl.admits(ApiKey::Metadata, now).is_err());
        assert!(sasl.admits(ApiKey::SaslAuthenticate, now).is_err());
        sasl.handshake("PLAIN", 1).expect("handshake");
        assert!(sasl.admits(ApiKey::SaslAuthenticate, now).is_ok());
        assert!(sasl.admits(ApiKey::Metadata, now).is_err());
        assert!(sasl.principal().is_none());
        let step = sasl
            .authenticate(b"\0alice\0alice-secret", &users(), now, 0)
            .await;
        assert_eq!(
            step,
            Step::Complete {
                token: Vec::new(),
                session_lifetime_ms: 0
            }
        );
        assert_eq!(sasl.principal(), Some(&Principal::user("alice")));
        assert!(sasl.admits(ApiKey::Metadata, now).is_ok());
    }

    #[tokio::test]
    async fn a_wrong_password_and_an_unknown_user_fail_with_the_same_message() {
        let now = Instant::now();
        let mut wrong = connection(None);
        wrong.handshake("PLAIN", 1).expect("handshake");
        let wrong = wrong.authenticate(b"\0alice\0nope", &users(), now, 0).await;
        let mut unknown = connection(None);
        unknown.handshake("PLAIN", 1).expect("handshake");
        let unknown = unknown
            .authenticate(b"\0carol\0nope", &users(), now, 0)
            .await;
        assert_eq!(wrong, unknown);
        assert_eq!(wrong, Step::Failed(failed_message(Mechanism::Plain)));
    }

    #[tokio::test]
    async fn an_unknown_mechanism_is_refused_and_v0_makes_tokens_raw() {
        let mut sasl = connection(None);
        assert_eq!(
            sasl.handshake("GSSAPI", 1),
            Err(HandshakeError::UnsupportedMechanism)
        );
        assert!(sasl.admits(ApiKey::ApiVersions, Instant::now()).is_err());
        let mut sasl = connection(None);
        sasl.handshake("SCRAM-SHA-512", 0).expect("handshake");
        assert!(sasl.expects_raw_token());
        assert_eq!(
            sasl.handshake("PLAIN", 1),
            Err(HandshakeError::IllegalState)
        );
    }

    /// A whole SCRAM exchange as a client runs it.
    async fn scram_login(
        sasl: &mut SaslConnection,
        kind: ScramMechanism,
        user: &str,
        password: &str,
        now: Instant,
    ) -> Step {
        let first_bare = format!("n={user},r=fyko+d2lbbFgONRv9qkxdawL");
        let Step::Challenge(server_first) = sasl
            .authenticate(format!("n,,{first_bare}").as_bytes(), &users(), now, 0)
            .await
        else {
            panic!("no challenge");
        };
        let server_first = String::from_utf8(server_first).expect("text");
        let fields: Vec<&str> = server_first.split(',').collect();
        let nonce = fields[0].strip_prefix("r=").expect("r");
        let salt = BASE64
            .decode(fields[1].strip_prefix("s=").expect("s"))
            .expect("salt");
        let iterations: u32 = fields[2].strip_prefix("i=").expect("i").parse().expect("i");
        let salted = kind.salted_password(password.as_bytes(), &salt, iterations);
        let credential = ScramCredential::from_salted_password(kind, &salted, salt, iterations);
        let without_proof = format!("c=biws,r={nonce}");
        let auth_message = format!("{first_bare},{server_first},{without_proof}");
        let key = aws_lc_rs::hmac::Key::new(
            match kind {
                ScramMechanism::Sha256 => aws_lc_rs::hmac::HMAC_SHA256,
                ScramMechanism::Sha512 => aws_lc_rs::hmac::HMAC_SHA512,
            },
            &credential.stored_key,
        );
        let signature = aws_lc_rs::hmac::sign(&key, auth_message.as_bytes());
        let client_key = {
            let key = aws_lc_rs::hmac::Key::new(
                match kind {
                    ScramMechanism::Sha256 => aws_lc_rs::hmac::HMAC_SHA256,
                    ScramMechanism::Sha512 => aws_lc_rs::hmac::HMAC_SHA512,
                },
                &salted,
            );
            aws_lc_rs::hmac::sign(&key, b"Client Key")
        };
        let proof: Vec<u8> = client_key
            .as_ref()
            .iter()
            .zip(signature.as_ref())
            .map(|(k, s)| k ^ s)
            .collect();
        let client_final = format!("{without_proof},p={}", BASE64.encode(proof));
        sasl.authenticate(client_final.as_bytes(), &users(), now, 0)
            .await
    }

    #[tokio::test]
    async fn scram_completes_and_re_authentication_keeps_the_principal() {
        let start = Instant::now();
        let lifetime = Duration::from_secs(10);
        let mut sasl = connection(Some(lifetime));
        sasl.handshake("SCRAM-SHA-256", 1).expect("handshake");
        let step = scram_login(
            &mut sasl,
            ScramMechanism::Sha256,
            "alice",
            "alice-secret",
            start,
        )
        .await;
        let Step::Complete {
            token,
            session_lifetime_ms,
        } = step
        else {
            panic!("{step:?}");
        };
        assert!(token.starts_with(b"v="));
        assert_eq!(session_lifetime_ms, 10_000);
        assert_eq!(sasl.principal(), Some(&Principal::user("alice")));

        // Expired: only a handshake (re-authentication) is served.
        let later = start + lifetime;
        assert!(sasl.admits(ApiKey::Metadata, later).is_err());
        assert!(sasl.admits(ApiKey::SaslHandshake, later).is_ok());
        sasl.handshake("SCRAM-SHA-256", 1)
            .expect("re-authentication");
        assert!(sasl.principal().is_none(), "not while re-authenticating");
        let step = scram_login(
            &mut sasl,
            ScramMechanism::Sha256,
            "alice",
            "alice-secret",
            later,
        )
        .await;
        assert!(matches!(step, Step::Complete { .. }), "{step:?}");
        assert!(
            sasl.admits(ApiKey::Metadata, later).is_ok(),
            "a new session"
        );

        // Another principal is refused.
        sasl.handshake("SCRAM-SHA-256", 1)
            .expect("re-authentication");
        let step = scram_login(
            &mut sasl,
            ScramMechanism::Sha256,
            "bob",
            "bob-secret",
            later,
        )
        .await;
        let Step::Failed(message) = step else {
            panic!("{step:?}");
        };
        assert!(message.contains("Cannot change principals"), "{message}");
        assert!(sasl.admits(ApiKey::Metadata, later).is_err());
    }

    #[tokio::test]
    async fn re_authentication_with_another_mechanism_fails() {
        let now = Instant::now();
        let mut sasl = connection(None);
        sasl.handshake("PLAIN", 1).expect("handshake");
        let step = sasl
            .authenticate(b"\0alice\0alice-secret", &users(), now, 0)
            .await;
        assert!(matches!(step, Step::Complete { .. }));
        sasl.handshake("SCRAM-SHA-512", 1)
            .expect("answered, then failed");
        let step = sasl.authenticate(b"n,,n=alice,r=x", &users(), now, 0).await;
        let Step::Failed(message) = step else {
            panic!("{step:?}");
        };
        assert!(
            message.contains("not supported for re-authentication"),
            "{message}"
        );
    }

    #[tokio::test]
    async fn a_scram_wrong_password_fails_with_kafkas_message() {
        let now = Instant::now();
        let mut sasl = connection(None);
        sasl.handshake("SCRAM-SHA-512", 1).expect("handshake");
        let step = scram_login(&mut sasl, ScramMechanism::Sha512, "alice", "wrong", now).await;
        assert_eq!(
            step,
            Step::Failed(failed_message(Mechanism::Scram(ScramMechanism::Sha512)))
        );
        let mut sasl = connection(None);
        sasl.handshake("SCRAM-SHA-512", 1).expect("handshake");
        let step = scram_login(&mut sasl, ScramMechanism::Sha512, "nobody", "wrong", now).await;
        assert_eq!(
            step,
            Step::Failed(failed_message(Mechanism::Scram(ScramMechanism::Sha512)))
        );
    }
}

#[cfg(test)]
mod hostile_tests {
    use std::collections::HashMap;

    use rand::{Rng, SeedableRng};

    use super::*;

    struct Alice(HashMap<ScramMechanism, ScramCredential>);

    impl Credentials for Alice {
        fn scram(&self, user: &str, mechanism: ScramMechanism) -> Option<ScramCredential> {
            (user == "alice").then(|| self.0[&mechanism].clone())
        }
    }

    /// Valid-looking tokens, mutated at random (bytes flipped, cut, doubled,
    /// inserted), never authenticate without the password and never panic.
    /// The seed is printed; SLUICE_SASL_SEED replays one.
    #[tokio::test]
    async fn mutated_tokens_never_authenticate_or_panic() {
        let seed: u64 = std::env::var("SLUICE_SASL_SEED")
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or_else(rand::random);
        println!("SLUICE_SASL_SEED={seed}");
        let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
        let alice = Alice(
            ScramMechanism::ALL
                .into_iter()
                .map(|m| (m, ScramCredential::from_password(m, "alice-secret", 4096)))
                .collect(),
        );
        let tokens: [&[u8]; 4] = [
            b"n,,n=alice,r=fyko+d2lbbFgONRv9qkxdawL",
            b"n,a=alice,n=alice,r=x,ext=1",
            b"c=biws,r=fyko+d2lbbFgONRv9qkxdawL3rfcNHYJY1ZVvWVs7j,p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=",
            b"\0alice\0alice-secreT",
        ];
        for round in 0..400 {
            let mechanism = Mechanism::ALL[rng.gen_range(0..3)];
            let mut sasl = SaslConnection::new(Arc::new(SaslSettings {
                mechanisms: Mechanism::ALL.to_vec(),
                scram_legacy_nonce: rng.gen(),
                max_reauth: None,
                oauthbearer: None,
            }));
            sasl.handshake(mechanism.name(), rng.gen_range(0..2))
                .expect("handshake");
            for _ in 0..rng.gen_range(1..4) {
                let mut token = tokens[rng.gen_range(0..tokens.len())].to_vec();
                for _ in 0..rng.gen_range(0..6) {
                    let at = rng.gen_range(0..=token.len());
                    match rng.gen_range(0..4) {
                        0 if at < token.len() => token[at] ^= 1 << rng.gen_range(0..8),
                        1 => token.truncate(at),
                        2 => token.insert(at, rng.gen()),
                        _ => {
                            let copy = token.clone();
                            token.extend_from_slice(&copy);
                        }
                    }
                }
                match sasl.authenticate(&token, &alice, Instant::now(), 0).await {
                    Step::Challenge(_) => {}
                    Step::Complete { .. } => {
                        panic!("round {round}: {token:?} authenticated (seed {seed})")
                    }
                    Step::Failed(_) => break,
                }
            }
            assert!(sasl.principal().is_none(), "seed {seed}");
        }
    }
}
