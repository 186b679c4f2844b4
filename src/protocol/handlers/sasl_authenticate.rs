//! SaslAuthenticate (v0-v2), and the raw tokens a SaslHandshake v0 asks for:
//! one step of the connection's SASL exchange against the users in the
//! metadata image. A completed exchange makes the connection its principal's,
//! for `SessionLifetimeMs` (v1+; KIP-368) when sessions are bounded. A failed
//! one is answered with SASL_AUTHENTICATION_FAILED and Kafka's message (raw
//! tokens: no answer) and ends the connection. Outside an exchange it is
//! ILLEGAL_SASL_STATE, as Kafka answers.

use std::sync::Arc;
use std::time::Instant;

use bytes::{BufMut, Bytes, BytesMut};
use kafka_protocol::messages::{SaslAuthenticateRequest, SaslAuthenticateResponse};
use kafka_protocol::protocol::VersionRange;

use super::common::message;
use crate::controller::MetadataImage;
use crate::error_code;
use crate::protocol::context::Cluster;
use crate::protocol::Connection;
use crate::protocol::{Outcome, Pending};
use crate::security::sasl::{Credentials, Step};
use crate::security::scram::{ScramCredential, ScramMechanism};
use crate::security::Principal;

pub const VERSIONS: VersionRange = VersionRange { min: 0, max: 2 };

/// The users of a metadata image.
struct ImageUsers(Arc<MetadataImage>);

impl Credentials for ImageUsers {
    fn scram(&self, user: &str, mechanism: ScramMechanism) -> Option<ScramCredential> {
        self.0
            .scram_credentials
            .get(user)
            .and_then(|by_mechanism| by_mechanism.get(&mechanism.kafka_type()))
            .cloned()
    }
}

/// The answer, and whether the connection ends after it.
pub async fn handle(
    cluster: &Cluster,
    connection: &mut Connection,
    request: SaslAuthenticateRequest,
) -> (SaslAuthenticateResponse, bool) {
    let Some(sasl) = connection.sasl.as_mut().filter(|sasl| sasl.in_exchange()) else {
        let response = SaslAuthenticateResponse::default()
            .with_error_code(error_code::ILLEGAL_SASL_STATE)
            .with_error_message(message(
                "SaslAuthenticate request received after successful authentication",
            ));
        return (response, false);
    };
    let users = ImageUsers(cluster.image());
    match sasl
        .authenticate(&request.auth_bytes, &users, Instant::now(), unix_now_ms())
        .await
    {
        Step::Challenge(token) => (
            SaslAuthenticateResponse::default().with_auth_bytes(Bytes::from(token)),
            false,
        ),
        Step::Complete {
            token,
            session_lifetime_ms,
        } => {
            authenticated(connection);
            (
                SaslAuthenticateResponse::default()
                    .with_auth_bytes(Bytes::from(token))
                    .with_session_lifetime_ms(session_lifetime_ms),
                false,
            )
        }
        Step::Failed(text) => (
            SaslAuthenticateResponse::default()
                .with_error_code(error_code::SASL_AUTHENTICATION_FAILED)
                .with_error_message(message(text)),
            true,
        ),
    }
}

/// A raw token (after SaslHandshake v0): the answer is a raw frame, and a
/// failure ends the connection without one.
pub async fn raw(cluster: &Cluster, connection: &mut Connection, token: Bytes) -> Outcome {
    let Some(sasl) = connection.sasl.as_mut() else {
        return Outcome::Close("a raw SASL token on a listener without SASL".to_string());
    };
    let users = ImageUsers(cluster.image());
    let answer = match sasl
        .authenticate(&token, &users, Instant::now(), unix_now_ms())
        .await
    {
        Step::Challenge(answer) => answer,
        Step::Complete { token, .. } => {
            authenticated(connection);
            token
        }
        Step::Failed(text) => return Outcome::Close(format!("SASL authentication failed: {text}")),
    };
    let mut frame = BytesMut::with_capacity(4 + answer.len());
    frame.put_u32(answer.len() as u32);
    frame.put_slice(&answer);
    Outcome::Respond(Pending::Ready(frame.freeze()))
}

/// The connection is now its SASL principal's.
fn authenticated(connection: &mut Connection) {
    if let Some(principal) = connection.sasl.as_ref().and_then(|s| s.principal()) {
        tracing::debug!(%principal, peer = %connection.peer_addr, listener = %connection.listener.name, "SASL authentication succeeded");
        if *connection.principal != *principal {
            connection.principal = Arc::new(Principal::clone(principal));
        }
    }
}

/// The wall clock in Unix ms, for an OAUTHBEARER token's expiry.
fn unix_now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}
