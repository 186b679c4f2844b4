//! SCRAM-SHA-256 and SCRAM-SHA-512 (RFC 5802, RFC 7677), the server side, as
//! Kafka runs it: no channel binding, the `tokenauth` extension ignored, at
//! least `SCRAM_ITERATIONS_MIN` iterations.
//!
//! A credential is what Kafka's UserScramCredentialRecord keeps: the salt, the
//! iterations, StoredKey and ServerKey; never the password. The exchange
//! checks the client's proof against StoredKey in constant time and answers
//! with ServerKey's signature.
//!
//! An unknown user goes through the exchange with a made-up credential and
//! fails where a wrong password fails, so that the exchange never tells
//! whether the user exists. The client-final nonce must equal the server's,
//! as in Kafka 4 (RFC 5802); `legacy_nonce` also takes the form librdkafka
//! before 2.6.1 sends (its own nonce once more in front), as Kafka 3.8.1 to
//! 3.9 did.

use aws_lc_rs::{constant_time, digest, hmac, pbkdf2, rand};
use base64::engine::general_purpose::STANDARD as BASE64;
use base64::Engine as _;
use std::num::NonZeroU32;

/// RFC 7677's and Kafka's floor: a credential with fewer iterations is
/// refused when stored and when used.
pub const SCRAM_ITERATIONS_MIN: u32 = 4096;

/// Kafka's ceiling on a stored credential's iterations (ScramMechanism's
/// maxIterations).
pub const SCRAM_ITERATIONS_MAX: u32 = 16384;

/// Random bytes in a salt this broker makes (`--add-scram`).
pub const SCRAM_SALT_BYTES: usize = 32;

/// Random bytes in the server's part of the nonce (base64 on the wire).
const SCRAM_SERVER_NONCE_BYTES: usize = 24;

/// The longest SCRAM message taken (a name, a nonce and a proof fit many
/// times over), so that a hostile token is refused before it is parsed.
pub const SCRAM_MESSAGE_BYTES_MAX: usize = 4096;

/// The two SCRAM mechanisms, with Kafka's numbering (ScramMechanism's type,
/// as DescribeUserScramCredentials and the metadata record carry it).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ScramMechanism {
    Sha256,
    Sha512,
}

impl ScramMechanism {
    pub const ALL: [ScramMechanism; 2] = [ScramMechanism::Sha256, ScramMechanism::Sha512];

    /// The SASL mechanism name.
    pub fn name(self) -> &'static str {
        match self {
            ScramMechanism::Sha256 => "SCRAM-SHA-256",
            ScramMechanism::Sha512 => "SCRAM-SHA-512",
        }
    }

    pub fn from_name(name: &str) -> Option<ScramMechanism> {
        ScramMechanism::ALL.into_iter().find(|m| m.name() == name)
    }

    /// Kafka's type number: 1 for SHA-256, 2 for SHA-512.
    pub fn kafka_type(self) -> i8 {
        match self {
            ScramMechanism::Sha256 => 1,
            ScramMechanism::Sha512 => 2,
        }
    }

    pub fn from_kafka_type(kafka_type: i8) -> Option<ScramMechanism> {
        ScramMechanism::ALL
            .into_iter()
            .find(|m| m.kafka_type() == kafka_type)
    }

    fn hmac_algorithm(self) -> hmac::Algorithm {
        match self {
            ScramMechanism::Sha256 => hmac::HMAC_SHA256,
            ScramMechanism::Sha512 => hmac::HMAC_SHA512,
        }
    }

    fn digest_algorithm(self) -> &'static digest::Algorithm {
        match self {
            ScramMechanism::Sha256 => &digest::SHA256,
            ScramMechanism::Sha512 => &digest::SHA512,
        }
    }

    fn pbkdf2_algorithm(self) -> pbkdf2::Algorithm {
        match self {
            ScramMechanism::Sha256 => pbkdf2::PBKDF2_HMAC_SHA256,
            ScramMechanism::Sha512 => pbkdf2::PBKDF2_HMAC_SHA512,
        }
    }

    /// The hash's output length in bytes.
    pub fn key_bytes(self) -> usize {
        self.digest_algorithm().output_len()
    }

    pub(super) fn hmac(self, key: &[u8], message: &[u8]) -> Vec<u8> {
        let key = hmac::Key::new(self.hmac_algorithm(), key);
        hmac::sign(&key, message).as_ref().to_vec()
    }

    pub(super) fn hash(self, message: &[u8]) -> Vec<u8> {
        digest::digest(self.digest_algorithm(), message)
            .as_ref()
            .to_vec()
    }

    /// RFC 5802's Hi(): PBKDF2 with this mechanism's HMAC.
    pub fn salted_password(self, password: &[u8], salt: &[u8], iterations: u32) -> Vec<u8> {
        let mut out = vec![0; self.key_bytes()];
        let iterations = NonZeroU32::new(iterations).unwrap_or(NonZeroU32::MIN);
        pbkdf2::derive(
            self.pbkdf2_algorithm(),
            iterations,
            salt,
            password,
            &mut out,
        );
        out
    }
}

/// What is stored of a user's password for one mechanism (in the metadata
/// image, as Kafka's UserScramCredentialRecord).
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ScramCredential {
    pub salt: Vec<u8>,
    pub stored_key: Vec<u8>,
    pub server_key: Vec<u8>,
    pub iterations: u32,
}

impl ScramCredential {
    /// The credential of a salted password (what AlterUserScramCredentials
    /// carries).
    pub fn from_salted_password(
        mechanism: ScramMechanism,
        salted_password: &[u8],
        salt: Vec<u8>,
        iterations: u32,
    ) -> ScramCredential {
        let client_key = mechanism.hmac(salted_password, b"Client Key");
        ScramCredential {
            salt,
            stored_key: mechanism.hash(&client_key),
            server_key: mechanism.hmac(salted_password, b"Server Key"),
            iterations,
        }
    }

    /// The credential of a password with a fresh random salt.
    pub fn from_password(
        mechanism: ScramMechanism,
        password: &str,
        iterations: u32,
    ) -> ScramCredential {
        let mut salt = vec![0; SCRAM_SALT_BYTES];
        if rand::fill(&mut salt).is_err() {
            // aws-lc's generator does not fail once initialised; a salt is
            // not a secret, so the fallback only has to be unique.
            salt = uuid::Uuid::new_v4().as_bytes().to_vec();
        }
        let salted = mechanism.salted_password(password.as_bytes(), &salt, iterations);
        ScramCredential::from_salted_password(mechanism, &salted, salt, iterations)
    }

    /// Whether `password` is the one this credential was made from (PLAIN's
    /// check against the SCRAM store), in constant time.
    pub fn verifies_password(&self, mechanism: ScramMechanism, password: &str) -> bool {
        let salted = mechanism.salted_password(password.as_bytes(), &self.salt, self.iterations);
        let candidate = ScramCredential::from_salted_password(
            mechanism,
            &salted,
            self.salt.clone(),
            self.iterations,
        );
        constant_time::verify_slices_are_equal(&candidate.stored_key, &self.stored_key).is_ok()
    }
}

/// Why an exchange failed. `BadCredentials` covers an unknown user and a
/// wrong password alike.
#[derive(Debug, PartialEq, Eq)]
pub enum ScramError {
    BadCredentials,
    /// The message is not SCRAM; the text says what is wrong, and never
    /// names a user.
    Malformed(&'static str),
    /// The stored credential has fewer iterations than the mechanism allows.
    TooFewIterations,
}

/// One exchange, server side: `client_first`, then `client_final`.
pub struct ScramServer {
    mechanism: ScramMechanism,
    legacy_nonce: bool,
    state: State,
}

enum State {
    First,
    Final {
        username: String,
        /// None for an unknown user: the exchange fails at the proof.
        credential: Option<ScramCredential>,
        nonce: String,
        client_first_bare: String,
        server_first: String,
    },
    Done,
}

impl ScramServer {
    pub fn new(mechanism: ScramMechanism, legacy_nonce: bool) -> ScramServer {
        ScramServer {
            mechanism,
            legacy_nonce,
            state: State::First,
        }
    }

    /// Takes the client-first message; returns the user named in it and the
    /// server-first message. `credential` is the user's stored credential.
    pub fn client_first(
        &mut self,
        message: &[u8],
        credential: impl FnOnce(&str) -> Option<ScramCredential>,
    ) -> Result<(String, Vec<u8>), ScramError> {
        if !matches!(self.state, State::First) {
            return Err(ScramError::Malformed("client-first message sent twice"));
        }
        self.state = State::Done;
        let text = message_text(message)?;
        let (authzid, bare) = split_gs2_header(text)?;
        let mut fields = bare.split(',');
        let username = fields
            .next()
            .and_then(|f| f.strip_prefix("n="))
            .ok_or(ScramError::Malformed("client-first message has no n="))?;
        let username = unescape_saslname(username)?;
        let client_nonce = fields
            .next()
            .and_then(|f| f.strip_prefix("r="))
            .filter(|nonce| !nonce.is_empty())
            .ok_or(ScramError::Malformed("client-first message has no r="))?;
        // Extensions (Kafka's tokenauth) may follow; a mandatory one (m=) is
        // one this server does not support.
        if fields.any(|f| f.starts_with("m=")) {
            return Err(ScramError::Malformed("mandatory extension not supported"));
        }
        if let Some(authzid) = authzid {
            if authzid != username {
                return Err(ScramError::Malformed(
                    "authorization id differs from the user name",
                ));
            }
        }
        let stored = credential(&username);
        if let Some(stored) = &stored {
            if stored.iterations < SCRAM_ITERATIONS_MIN {
                return Err(ScramError::TooFewIterations);
            }
        }
        let (salt, iterations) = match &stored {
            Some(stored) => (stored.salt.clone(), stored.iterations),
            None => (self.unknown_user_salt(&username), SCRAM_ITERATIONS_MIN),
        };
        let nonce = format!("{client_nonce}{}", server_nonce());
        let server_first = format!("r={nonce},s={},i={iterations}", BASE64.encode(&salt));
        self.state = State::Final {
            username: username.clone(),
            credential: stored,
            nonce,
            client_first_bare: bare.to_string(),
            server_first: server_first.clone(),
        };
        Ok((username, server_first.into_bytes()))
    }

    /// Whether the next message is the client-first one.
    pub fn awaits_client_first(&self) -> bool {
        matches!(self.state, State::First)
    }

    /// Takes the client-final message; returns the user and the server-final
    /// message when the proof is right.
    pub fn client_final(&mut self, message: &[u8]) -> Result<(String, Vec<u8>), ScramError> {
        let State::Final {
            username,
            credential,
            nonce,
            client_first_bare,
            server_first,
        } = std::mem::replace(&mut self.state, State::Done)
        else {
            return Err(ScramError::Malformed("client-final message out of turn"));
        };
        let text = message_text(message)?;
        let (without_proof, proof) = text
            .rsplit_once(",p=")
            .ok_or(ScramError::Malformed("client-final message has no proof"))?;
        let mut fields = without_proof.split(',');
        fields
            .next()
            .and_then(|f| f.strip_prefix("c="))
            .and_then(|binding| BASE64.decode(binding).ok())
            .filter(|header| header.starts_with(b"n,") || header.starts_with(b"y,"))
            .ok_or(ScramError::Malformed("client-final message has no c="))?;
        let client_nonce = fields
            .next()
            .and_then(|f| f.strip_prefix("r="))
            .ok_or(ScramError::Malformed("client-final message has no r="))?;
        let nonce_ok = client_nonce == nonce
            || (self.legacy_nonce
                && client_nonce.len() > nonce.len()
                && client_nonce.ends_with(&nonce));
        if !nonce_ok {
            return Err(ScramError::Malformed("nonce does not match the server's"));
        }
        let proof = BASE64
            .decode(proof)
            .map_err(|_| ScramError::Malformed("proof is not base64"))?;
        let Some(credential) = credential else {
            return Err(ScramError::BadCredentials);
        };
        let auth_message = format!("{client_first_bare},{server_first},{without_proof}");
        let signature = self
            .mechanism
            .hmac(&credential.stored_key, auth_message.as_bytes());
        if proof.len() != signature.len() {
            return Err(ScramError::BadCredentials);
        }
        let client_key: Vec<u8> = proof.iter().zip(&signature).map(|(p, s)| p ^ s).collect();
        let stored_key = self.mechanism.hash(&client_key);
        if constant_time::verify_slices_are_equal(&stored_key, &credential.stored_key).is_err() {
            return Err(ScramError::BadCredentials);
        }
        let server_signature = self
            .mechanism
            .hmac(&credential.server_key, auth_message.as_bytes());
        Ok((
            username,
            format!("v={}", BASE64.encode(server_signature)).into_bytes(),
        ))
    }

    /// A salt for a user that does not exist: the same for the same name
    /// within this process, so that asking twice does not tell.
    fn unknown_user_salt(&self, username: &str) -> Vec<u8> {
        self.mechanism
            .hmac(unknown_user_key(), username.as_bytes())
            .into_iter()
            .take(SCRAM_SALT_BYTES)
            .collect()
    }
}

/// A random key, drawn once per process, for the salts of unknown users.
fn unknown_user_key() -> &'static [u8] {
    static KEY: std::sync::OnceLock<Vec<u8>> = std::sync::OnceLock::new();
    KEY.get_or_init(|| {
        let mut key = vec![0; 32];
        if rand::fill(&mut key).is_err() {
            key = uuid::Uuid::new_v4().as_bytes().to_vec();
        }
        key
    })
}

fn server_nonce() -> String {
    let mut bytes = [0u8; SCRAM_SERVER_NONCE_BYTES];
    if rand::fill(&mut bytes).is_err() {
        bytes[..16].copy_from_slice(uuid::Uuid::new_v4().as_bytes());
    }
    BASE64.encode(bytes)
}

fn message_text(message: &[u8]) -> Result<&str, ScramError> {
    if message.len() > SCRAM_MESSAGE_BYTES_MAX {
        return Err(ScramError::Malformed("message too long"));
    }
    std::str::from_utf8(message).map_err(|_| ScramError::Malformed("message is not UTF-8"))
}

/// Splits `gs2-cbind-flag,[a=authzid],client-first-bare` into the authzid
/// and the bare message. Channel binding (`p=`) is refused: Kafka offers none.
fn split_gs2_header(text: &str) -> Result<(Option<String>, &str), ScramError> {
    let mut parts = text.splitn(3, ',');
    let flag = parts.next().unwrap_or_default();
    if flag != "n" && flag != "y" {
        return Err(ScramError::Malformed("channel binding is not supported"));
    }
    let authzid = parts.next().ok_or(ScramError::Malformed(
        "client-first message has no GS2 header",
    ))?;
    let bare = parts
        .next()
        .ok_or(ScramError::Malformed("client-first message has no body"))?;
    let authzid = match authzid {
        "" => None,
        other => Some(unescape_saslname(other.strip_prefix("a=").ok_or(
            ScramError::Malformed("GS2 header has a field other than a="),
        )?)?),
    };
    Ok((authzid, bare))
}

/// RFC 5802's saslname: `=2C` is `,` and `=3D` is `=`; any other `=` is wrong.
pub fn unescape_saslname(name: &str) -> Result<String, ScramError> {
    let mut out = String::with_capacity(name.len());
    let mut rest = name;
    while let Some(at) = rest.find('=') {
        out.push_str(&rest[..at]);
        let escape = rest.get(at..at + 3);
        match escape {
            Some("=2C") => out.push(','),
            Some("=3D") => out.push('='),
            _ => return Err(ScramError::Malformed("a name has a bad '=' escape")),
        }
        rest = &rest[at + 3..];
    }
    out.push_str(rest);
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// RFC 7677 §3's SCRAM-SHA-256 example: user "user", password "pencil".
    #[test]
    fn the_rfc_7677_example_completes() {
        let mechanism = ScramMechanism::Sha256;
        let salt = BASE64.decode("W22ZaJ0SNY7soEsUEjb6gQ==").expect("salt");
        let salted = mechanism.salted_password(b"pencil", &salt, 4096);
        let credential = ScramCredential::from_salted_password(mechanism, &salted, salt, 4096);
        // The exchange with the RFC's nonces: drive the final step by hand.
        let client_first_bare = "n=user,r=rOprNGfwEbeRWgbNEkqO";
        let server_first =
            "r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096";
        let mut server = ScramServer {
            mechanism,
            legacy_nonce: false,
            state: State::Final {
                username: "user".to_string(),
                credential: Some(credential),
                nonce: "rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0".to_string(),
                client_first_bare: client_first_bare.to_string(),
                server_first: server_first.to_string(),
            },
        };
        let client_final = "c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=";
        let (user, server_final) = server.client_final(client_final.as_bytes()).expect("proof");
        assert_eq!(user, "user");
        assert_eq!(
            String::from_utf8(server_final).expect("text"),
            "v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4="
        );
    }

    /// A client's side of the exchange, as a test drives it.
    fn client_final_for(
        mechanism: ScramMechanism,
        password: &str,
        client_first_bare: &str,
        server_first: &str,
        nonce: &str,
    ) -> String {
        let fields: Vec<&str> = server_first.split(',').collect();
        let salt = BASE64
            .decode(fields[1].strip_prefix("s=").expect("s"))
            .expect("salt");
        let iterations: u32 = fields[2].strip_prefix("i=").expect("i").parse().expect("i");
        let salted = mechanism.salted_password(password.as_bytes(), &salt, iterations);
        let client_key = mechanism.hmac(&salted, b"Client Key");
        let stored_key = mechanism.hash(&client_key);
        let without_proof = format!("c=biws,r={nonce}");
        let auth_message = format!("{client_first_bare},{server_first},{without_proof}");
        let signature = mechanism.hmac(&stored_key, auth_message.as_bytes());
        let proof: Vec<u8> = client_key
            .iter()
            .zip(&signature)
            .map(|(k, s)| k ^ s)
            .collect();
        format!("{without_proof},p={}", BASE64.encode(proof))
    }

    fn exchange(
        mechanism: ScramMechanism,
        stored: Option<ScramCredential>,
        password: &str,
        legacy_nonce: bool,
        repeat_client_nonce: bool,
    ) -> Result<(String, Vec<u8>), ScramError> {
        let mut server = ScramServer::new(mechanism, legacy_nonce);
        let client_first_bare = "n=al=2Cice,r=clientnonce";
        let (user, server_first) =
            server.client_first(format!("n,,{client_first_bare}").as_bytes(), |name| {
                assert_eq!(name, "al,ice");
                stored
            })?;
        assert_eq!(user, "al,ice");
        let server_first = String::from_utf8(server_first).expect("text");
        let nonce = server_first
            .split(',')
            .next()
            .and_then(|f| f.strip_prefix("r="))
            .expect("nonce")
            .to_string();
        assert!(nonce.starts_with("clientnonce") && nonce.len() > "clientnonce".len());
        let sent_nonce = if repeat_client_nonce {
            format!("clientnonce{nonce}")
        } else {
            nonce.clone()
        };
        let client_final = client_final_for(
            mechanism,
            password,
            client_first_bare,
            &server_first,
            &sent_nonce,
        );
        server.client_final(client_final.as_bytes())
    }

    #[test]
    fn both_mechanisms_check_the_password_and_unknown_users_fail_alike() {
        for mechanism in ScramMechanism::ALL {
            let stored = ScramCredential::from_password(mechanism, "secret", 4096);
            assert!(exchange(mechanism, Some(stored.clone()), "secret", false, false).is_ok());
            assert_eq!(
                exchange(mechanism, Some(stored), "wrong", false, false),
                Err(ScramError::BadCredentials)
            );
            assert_eq!(
                exchange(mechanism, None, "secret", false, false),
                Err(ScramError::BadCredentials),
                "an unknown user fails at the proof, as a wrong password does"
            );
        }
    }

    #[test]
    fn the_repeated_client_nonce_is_taken_only_in_legacy_mode() {
        let mechanism = ScramMechanism::Sha512;
        let stored = ScramCredential::from_password(mechanism, "secret", 4096);
        assert!(matches!(
            exchange(mechanism, Some(stored.clone()), "secret", false, true),
            Err(ScramError::Malformed(_))
        ));
        assert!(exchange(mechanism, Some(stored), "secret", true, true).is_ok());
    }

    #[test]
    fn too_few_iterations_and_malformed_messages_are_refused() {
        let mechanism = ScramMechanism::Sha256;
        let weak = ScramCredential::from_password(mechanism, "secret", 4095);
        assert_eq!(
            exchange(mechanism, Some(weak), "secret", false, false),
            Err(ScramError::TooFewIterations)
        );
        for bad in [
            &b"p=tls-unique,,n=a,r=x"[..],
            b"n,,r=x",
            b"n,,n=a",
            b"n,,n=a=2,r=x",
            b"n,a=bob,n=alice,r=x",
            b"n,,n=a,r=x,m=ext",
            &[0xff, 0xfe],
        ] {
            let mut server = ScramServer::new(mechanism, false);
            assert!(
                matches!(
                    server.client_first(bad, |_| None),
                    Err(ScramError::Malformed(_))
                ),
                "{bad:?}"
            );
        }
        let mut server = ScramServer::new(mechanism, false);
        assert!(
            server.client_final(b"c=biws,r=x,p=AA==").is_err(),
            "out of turn"
        );
    }

    #[test]
    fn plain_checks_a_password_against_the_stored_credential() {
        for mechanism in ScramMechanism::ALL {
            let stored = ScramCredential::from_password(mechanism, "secret", 4096);
            assert!(stored.verifies_password(mechanism, "secret"));
            assert!(!stored.verifies_password(mechanism, "Secret"));
        }
    }
}
