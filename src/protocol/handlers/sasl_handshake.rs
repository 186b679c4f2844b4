//! SaslHandshake: the client names its SASL mechanism. v0 makes the tokens
//! that follow raw frames; v1 makes them SaslAuthenticate requests. The
//! answer lists the listener's mechanisms; an unknown one is answered with
//! UNSUPPORTED_SASL_MECHANISM and the connection ends. On an authenticated
//! connection a handshake starts a re-authentication (KIP-368); on a
//! listener without SASL it is ILLEGAL_SASL_STATE, as Kafka answers.

use kafka_protocol::messages::{SaslHandshakeRequest, SaslHandshakeResponse};
use kafka_protocol::protocol::{StrBytes, VersionRange};

use crate::error_code;
use crate::protocol::RequestContext;
use crate::security::sasl::{HandshakeError, SaslConnection};

pub const VERSIONS: VersionRange = VersionRange { min: 0, max: 1 };

/// The answer, and whether the connection ends after it.
pub fn handle(
    sasl: Option<&mut SaslConnection>,
    ctx: &RequestContext,
    request: &SaslHandshakeRequest,
) -> (SaslHandshakeResponse, bool) {
    let Some(sasl) = sasl else {
        let response =
            SaslHandshakeResponse::default().with_error_code(error_code::ILLEGAL_SASL_STATE);
        return (response, false);
    };
    let outcome = sasl.handshake(request.mechanism.as_str(), ctx.api_version);
    let mechanisms = sasl
        .mechanism_names()
        .into_iter()
        .map(StrBytes::from_static_str)
        .collect();
    let response = SaslHandshakeResponse::default().with_mechanisms(mechanisms);
    match outcome {
        Ok(()) => (response, false),
        Err(HandshakeError::UnsupportedMechanism) => (
            response.with_error_code(error_code::UNSUPPORTED_SASL_MECHANISM),
            true,
        ),
        Err(HandshakeError::IllegalState) => (
            response.with_error_code(error_code::ILLEGAL_SASL_STATE),
            true,
        ),
    }
}
