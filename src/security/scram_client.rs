//! SCRAM-SHA-256 and SCRAM-SHA-512, the client side: how a broker logs in
//! to another's SASL listener (`--inter-broker-sasl-mechanism`), as Kafka's
//! ScramSaslClient does: no channel binding, the server's nonce must extend
//! ours, at least `SCRAM_ITERATIONS_MIN` iterations, and the server's final
//! signature checked (in constant time) before the login counts.

use aws_lc_rs::{constant_time, rand};
use base64::engine::general_purpose::STANDARD as BASE64;
use base64::Engine as _;

use super::scram::{ScramError, ScramMechanism, SCRAM_ITERATIONS_MAX, SCRAM_ITERATIONS_MIN};

/// Random bytes in the client's nonce (base64 on the wire).
const SCRAM_CLIENT_NONCE_BYTES: usize = 24;

/// One exchange, client side: `client_first`, `client_final` (given the
/// server-first message), then `server_final`.
pub struct ScramClient {
    mechanism: ScramMechanism,
    password: String,
    nonce: String,
    client_first_bare: String,
    /// The signature the server-final message must carry, once known.
    server_signature: Option<Vec<u8>>,
}

impl ScramClient {
    pub fn new(mechanism: ScramMechanism, username: &str, password: &str) -> ScramClient {
        let mut bytes = [0u8; SCRAM_CLIENT_NONCE_BYTES];
        if rand::fill(&mut bytes).is_err() {
            bytes[..16].copy_from_slice(uuid::Uuid::new_v4().as_bytes());
        }
        let nonce = BASE64.encode(bytes);
        ScramClient {
            mechanism,
            password: password.to_string(),
            client_first_bare: format!("n={},r={nonce}", escape_saslname(username)),
            nonce,
            server_signature: None,
        }
    }

    /// The client-first message.
    pub fn client_first(&self) -> Vec<u8> {
        format!("n,,{}", self.client_first_bare).into_bytes()
    }

    /// Takes the server-first message and answers the client-final one.
    pub fn client_final(&mut self, server_first: &[u8]) -> Result<Vec<u8>, ScramError> {
        let server_first = std::str::from_utf8(server_first)
            .map_err(|_| ScramError::Malformed("server-first message is not UTF-8"))?;
        let mut nonce = None;
        let mut salt = None;
        let mut iterations = None;
        for field in server_first.split(',') {
            if let Some(value) = field.strip_prefix("r=") {
                nonce = Some(value);
            } else if let Some(value) = field.strip_prefix("s=") {
                salt = BASE64.decode(value).ok();
            } else if let Some(value) = field.strip_prefix("i=") {
                iterations = value.parse::<u32>().ok();
            }
        }
        let nonce = nonce
            .filter(|n| n.len() > self.nonce.len() && n.starts_with(&self.nonce))
            .ok_or(ScramError::Malformed(
                "the server's nonce does not extend ours",
            ))?;
        let salt = salt.ok_or(ScramError::Malformed("server-first message has no salt"))?;
        let iterations =
            iterations.ok_or(ScramError::Malformed("server-first message has no i="))?;
        if !(SCRAM_ITERATIONS_MIN..=SCRAM_ITERATIONS_MAX).contains(&iterations) {
            return Err(ScramError::TooFewIterations);
        }
        let salted = self
            .mechanism
            .salted_password(self.password.as_bytes(), &salt, iterations);
        let client_key = self.mechanism.hmac(&salted, b"Client Key");
        let stored_key = self.mechanism.hash(&client_key);
        let without_proof = format!("c=biws,r={nonce}");
        let auth_message = format!("{},{server_first},{without_proof}", self.client_first_bare);
        let client_signature = self.mechanism.hmac(&stored_key, auth_message.as_bytes());
        let proof: Vec<u8> = client_key
            .iter()
            .zip(&client_signature)
            .map(|(k, s)| k ^ s)
            .collect();
        let server_key = self.mechanism.hmac(&salted, b"Server Key");
        self.server_signature = Some(self.mechanism.hmac(&server_key, auth_message.as_bytes()));
        Ok(format!("{without_proof},p={}", BASE64.encode(proof)).into_bytes())
    }

    /// Checks the server-final message: the server proved it knows the
    /// credential (or said why it refused).
    pub fn server_final(&self, server_final: &[u8]) -> Result<(), ScramError> {
        let expected = self
            .server_signature
            .as_ref()
            .ok_or(ScramError::Malformed("server-final message out of turn"))?;
        let text = std::str::from_utf8(server_final)
            .map_err(|_| ScramError::Malformed("server-final message is not UTF-8"))?;
        if text.starts_with("e=") {
            return Err(ScramError::BadCredentials);
        }
        let signature = text
            .strip_prefix("v=")
            .and_then(|v| BASE64.decode(v).ok())
            .ok_or(ScramError::Malformed("server-final message has no v="))?;
        constant_time::verify_slices_are_equal(&signature, expected)
            .map_err(|_| ScramError::BadCredentials)
    }
}

/// RFC 5802's saslname: `,` is `=2C` and `=` is `=3D`.
fn escape_saslname(name: &str) -> String {
    name.replace('=', "=3D").replace(',', "=2C")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::security::scram::{ScramCredential, ScramServer};

    /// A whole exchange between this client and the broker's server side.
    fn log_in(
        mechanism: ScramMechanism,
        user: &str,
        password: &str,
        stored: &ScramCredential,
    ) -> Result<String, ScramError> {
        let mut client = ScramClient::new(mechanism, user, password);
        let mut server = ScramServer::new(mechanism, false);
        let (_, server_first) = server.client_first(&client.client_first(), |name| {
            (name == user).then(|| stored.clone())
        })?;
        let client_final = client.client_final(&server_first)?;
        let (name, server_final) = server.client_final(&client_final)?;
        client.server_final(&server_final)?;
        Ok(name)
    }

    #[test]
    fn a_broker_logs_in_with_both_mechanisms_and_a_name_that_needs_escapes() {
        for mechanism in ScramMechanism::ALL {
            let user = "broker,1=a";
            let stored = ScramCredential::from_password(mechanism, "secret", 4096);
            assert_eq!(
                log_in(mechanism, user, "secret", &stored),
                Ok(user.to_string())
            );
            assert_eq!(
                log_in(mechanism, user, "wrong", &stored),
                Err(ScramError::BadCredentials)
            );
        }
    }

    #[test]
    fn a_server_that_does_not_know_the_credential_is_not_believed() {
        let mechanism = ScramMechanism::Sha256;
        let mut client = ScramClient::new(mechanism, "broker", "secret");
        let first = String::from_utf8(client.client_first()).expect("text");
        let nonce = first.rsplit_once("r=").expect("nonce").1;
        let server_first = format!("r={nonce}xyz,s={},i=4096", BASE64.encode(b"salt"));
        client.client_final(server_first.as_bytes()).expect("final");
        let forged = format!("v={}", BASE64.encode([0u8; 32]));
        assert_eq!(
            client.server_final(forged.as_bytes()),
            Err(ScramError::BadCredentials)
        );
        // A nonce that does not extend ours, and too few iterations, are refused.
        let mut client = ScramClient::new(mechanism, "broker", "secret");
        assert!(client.client_final(b"r=other,s=c2FsdA==,i=4096").is_err());
        let first = String::from_utf8(client.client_first()).expect("text");
        let nonce = first.rsplit_once("r=").expect("nonce").1;
        let weak = format!("r={nonce}x,s=c2FsdA==,i=1");
        assert_eq!(
            client.client_final(weak.as_bytes()),
            Err(ScramError::TooFewIterations)
        );
    }
}
