//! OAUTHBEARER (RFC 7628, KIP-255, KIP-768), the server side: the client's
//! initial response carries a JWT (`n,,\x01auth=Bearer <token>\x01...\x01\x01`),
//! checked as Kafka's validators check it:
//!
//! - signed (Kafka's `OAuthBearerValidatorCallbackHandler`): RS256 or ES256,
//!   its `kid` found in the JWKS the server hands in (`JwksCache`, read from
//!   `--sasl-oauthbearer-jwks-endpoint-url` and refreshed by the server), the
//!   audience and issuer as configured, `exp` required;
//! - unsecured (`--sasl-oauthbearer-unsecured`, Kafka's
//!   `OAuthBearerUnsecuredValidatorCallbackHandler`, for development):
//!   `alg: none`, no signature, `exp` required.
//!
//! Either way the principal is the subject claim (`sub`, or
//! `--sasl-oauthbearer-sub-claim-name`), times are compared with the clock
//! skew allowed, and the token's expiry is handed back so that it bounds the
//! session (KIP-368). Pure: the server hands in the time and the keys.

use std::sync::{Arc, PoisonError, RwLock};

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine as _;
use jsonwebtoken::jwk::JwkSet;
use jsonwebtoken::{Algorithm, DecodingKey, Validation};
use serde_json::Value;

/// The longest initial response taken, so that a hostile one is refused
/// before it is parsed (tokens with many claims fit several times over).
pub const OAUTHBEARER_RESPONSE_BYTES_MAX: usize = 16_384;

/// The JSON challenge Kafka sends for a token it refuses; the client answers
/// with a lone `\x01` and the exchange fails (RFC 7628 §3.2.2).
pub const INVALID_TOKEN_CHALLENGE: &[u8] = br#"{"status":"invalid_token"}"#;

/// The keys signed tokens are checked against, as last read.
pub struct JwksCache {
    keys: RwLock<Arc<JwkSet>>,
}

impl std::fmt::Debug for JwksCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "JwksCache({} keys)", self.keys().keys.len())
    }
}

impl Default for JwksCache {
    fn default() -> JwksCache {
        JwksCache {
            keys: RwLock::new(Arc::new(JwkSet { keys: Vec::new() })),
        }
    }
}

impl JwksCache {
    pub fn set(&self, keys: JwkSet) {
        *self.keys.write().unwrap_or_else(PoisonError::into_inner) = Arc::new(keys);
    }

    /// The keys known now.
    pub fn keys(&self) -> Arc<JwkSet> {
        Arc::clone(&self.keys.read().unwrap_or_else(PoisonError::into_inner))
    }
}

/// How OAUTHBEARER tokens are checked.
pub struct OAuthBearerSettings {
    /// Take unsigned tokens (`alg: none`) instead of signed ones.
    pub unsecured: bool,
    pub jwks: Arc<JwksCache>,
    /// Any of these must be in `aud` (none: not checked).
    pub expected_audience: Vec<String>,
    pub expected_issuer: Option<String>,
    /// The claim naming the principal.
    pub sub_claim: String,
    pub clock_skew_seconds: u64,
}

impl std::fmt::Debug for OAuthBearerSettings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OAuthBearerSettings")
            .field("unsecured", &self.unsecured)
            .field("expected_audience", &self.expected_audience)
            .field("expected_issuer", &self.expected_issuer)
            .field("sub_claim", &self.sub_claim)
            .field("clock_skew_seconds", &self.clock_skew_seconds)
            .finish_non_exhaustive()
    }
}

impl PartialEq for OAuthBearerSettings {
    fn eq(&self, other: &Self) -> bool {
        self.unsecured == other.unsecured
            && Arc::ptr_eq(&self.jwks, &other.jwks)
            && self.expected_audience == other.expected_audience
            && self.expected_issuer == other.expected_issuer
            && self.sub_claim == other.sub_claim
            && self.clock_skew_seconds == other.clock_skew_seconds
    }
}

impl Eq for OAuthBearerSettings {}

/// A token that passed: whose it is and when it expires (Unix ms).
#[derive(Debug, PartialEq, Eq)]
pub struct ValidToken {
    pub principal: String,
    pub expires_at_ms: i64,
}

/// The token of a client's initial response; Err says what is wrong.
pub fn token_of(response: &[u8]) -> Result<&str, String> {
    if response.len() > OAUTHBEARER_RESPONSE_BYTES_MAX {
        return Err("the initial response is too long".to_string());
    }
    let text = std::str::from_utf8(response).map_err(|_| "the initial response is not UTF-8")?;
    let (gs2, rest) = text
        .split_once('\x01')
        .ok_or("the initial response has no key-value pairs")?;
    if !(gs2.starts_with("n,") || gs2.starts_with("y,")) {
        return Err("channel binding is not supported".to_string());
    }
    let pairs = rest
        .strip_suffix("\x01\x01")
        .ok_or("the initial response does not end with two separators")?;
    let mut token = None;
    for pair in pairs.split('\x01') {
        let (key, value) = pair.split_once('=').ok_or("a key-value pair without '='")?;
        if key.is_empty() || !key.bytes().all(|b| b.is_ascii_alphabetic()) {
            return Err(format!("invalid extension name '{key}'"));
        }
        if key == "auth" {
            let bearer = value
                .strip_prefix("Bearer ")
                .ok_or("the auth value is not a Bearer token")?;
            token = Some(bearer.trim());
        }
    }
    token.ok_or_else(|| "the initial response has no auth token".to_string())
}

/// Checks `token` at `now_ms` (Unix ms).
pub fn validate(
    settings: &OAuthBearerSettings,
    token: &str,
    now_ms: i64,
) -> Result<ValidToken, String> {
    let claims = if settings.unsecured {
        unsecured_claims(token)?
    } else {
        signed_claims(settings, token)?
    };
    let skew_ms = i64::try_from(settings.clock_skew_seconds.saturating_mul(1000)).unwrap_or(0);
    let exp_ms = seconds_claim(&claims, "exp")?.ok_or("the token has no exp claim")?;
    if exp_ms.saturating_add(skew_ms) <= now_ms {
        return Err("the token expired".to_string());
    }
    if let Some(iat_ms) = seconds_claim(&claims, "iat")? {
        if iat_ms.saturating_sub(skew_ms) > now_ms {
            return Err("the token was issued in the future".to_string());
        }
    }
    if let Some(nbf_ms) = seconds_claim(&claims, "nbf")? {
        if nbf_ms.saturating_sub(skew_ms) > now_ms {
            return Err("the token is not valid yet".to_string());
        }
    }
    let principal = claims
        .get(&settings.sub_claim)
        .and_then(Value::as_str)
        .filter(|s| !s.trim().is_empty())
        .ok_or_else(|| format!("the token has no {} claim", settings.sub_claim))?;
    Ok(ValidToken {
        principal: principal.to_string(),
        expires_at_ms: exp_ms,
    })
}

/// A time claim in seconds (NumericDate), as ms; None when absent.
fn seconds_claim(claims: &Value, name: &str) -> Result<Option<i64>, String> {
    match claims.get(name) {
        None | Some(Value::Null) => Ok(None),
        Some(value) => value
            .as_f64()
            .map(|seconds| Some((seconds * 1000.0) as i64))
            .ok_or_else(|| format!("the {name} claim is not a number")),
    }
}

/// The claims of an unsigned JWT (`alg: none`, empty signature).
fn unsecured_claims(token: &str) -> Result<Value, String> {
    let mut parts = token.split('.');
    let (Some(header), Some(payload), Some(signature), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Err("the token is not a JWS of three parts".to_string());
    };
    let header = json_part(header)?;
    if header.get("alg").and_then(Value::as_str) != Some("none") || !signature.is_empty() {
        return Err("an unsecured token must have alg none and no signature".to_string());
    }
    json_part(payload)
}

fn json_part(part: &str) -> Result<Value, String> {
    let bytes = URL_SAFE_NO_PAD
        .decode(part.trim_end_matches('='))
        .map_err(|_| "a token part is not base64url")?;
    serde_json::from_slice(&bytes).map_err(|_| "a token part is not JSON".to_string())
}

/// The claims of a signed JWT whose signature a key of the JWKS verifies;
/// audience and issuer checked, times left to `validate`.
fn signed_claims(settings: &OAuthBearerSettings, token: &str) -> Result<Value, String> {
    let header = jsonwebtoken::decode_header(token).map_err(|e| format!("the token: {e}"))?;
    if !matches!(header.alg, Algorithm::RS256 | Algorithm::ES256) {
        return Err(format!(
            "the token's algorithm {:?} is not RS256 or ES256",
            header.alg
        ));
    }
    let keys = settings.jwks.keys();
    let jwk = match &header.kid {
        Some(kid) => keys.find(kid),
        None if keys.keys.len() == 1 => keys.keys.first(),
        None => None,
    }
    .ok_or("no key of the JWKS has the token's kid")?;
    let key = DecodingKey::from_jwk(jwk).map_err(|e| format!("the JWKS key: {e}"))?;
    let mut validation = Validation::new(header.alg);
    validation.validate_exp = false;
    validation.validate_nbf = false;
    validation.required_spec_claims.clear();
    if settings.expected_audience.is_empty() {
        validation.validate_aud = false;
    } else {
        validation.set_audience(&settings.expected_audience);
    }
    if let Some(issuer) = &settings.expected_issuer {
        validation.set_issuer(&[issuer]);
    }
    jsonwebtoken::decode::<Value>(token, &key, &validation)
        .map(|data| data.claims)
        .map_err(|e| format!("the token: {e}"))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use aws_lc_rs::rand::SystemRandom;
    use aws_lc_rs::signature::{EcdsaKeyPair, KeyPair, ECDSA_P256_SHA256_FIXED_SIGNING};
    use jsonwebtoken::{EncodingKey, Header};
    use serde_json::json;

    use super::*;

    const NOW_MS: i64 = 1_800_000_000_000;

    fn settings(unsecured: bool) -> OAuthBearerSettings {
        OAuthBearerSettings {
            unsecured,
            jwks: Arc::default(),
            expected_audience: vec!["kafka".to_string()],
            expected_issuer: Some("https://issuer.test".to_string()),
            sub_claim: "sub".to_string(),
            clock_skew_seconds: 30,
        }
    }

    fn unsigned(claims: &Value) -> String {
        format!(
            "{}.{}.",
            URL_SAFE_NO_PAD.encode(br#"{"alg":"none"}"#),
            URL_SAFE_NO_PAD.encode(claims.to_string())
        )
    }

    /// An ES256 key, its JWKS (kid "k1"), and a signer with it.
    fn es256() -> (JwkSet, EncodingKey) {
        let pkcs8 =
            EcdsaKeyPair::generate_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, &SystemRandom::new())
                .unwrap();
        let pair =
            EcdsaKeyPair::from_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, pkcs8.as_ref()).unwrap();
        let point = pair.public_key().as_ref();
        let jwks = json!({"keys": [{
            "kty": "EC", "crv": "P-256", "kid": "k1", "alg": "ES256", "use": "sig",
            "x": URL_SAFE_NO_PAD.encode(&point[1..33]),
            "y": URL_SAFE_NO_PAD.encode(&point[33..65]),
        }]});
        (
            serde_json::from_value(jwks).unwrap(),
            EncodingKey::from_ec_der(pkcs8.as_ref()),
        )
    }

    fn signed(key: &EncodingKey, kid: &str, claims: &Value) -> String {
        let mut header = Header::new(Algorithm::ES256);
        header.kid = Some(kid.to_string());
        jsonwebtoken::encode(&header, claims, key).unwrap()
    }

    #[test]
    fn the_initial_response_carries_the_bearer_token_and_extensions() {
        assert_eq!(
            token_of(b"n,,\x01auth=Bearer abc.def.\x01\x01"),
            Ok("abc.def.")
        );
        assert_eq!(
            token_of(b"n,a=alice,\x01host=x\x01auth=Bearer t\x01traceId=1\x01\x01"),
            Ok("t")
        );
        for bad in [
            &b"n,,auth=Bearer t"[..],
            b"n,,\x01auth=Bearer t\x01",
            b"n,,\x01\x01",
            b"p=x,,\x01auth=Bearer t\x01\x01",
            b"n,,\x01auth=Basic t\x01\x01",
            b"n,,\x01b@d=1\x01auth=Bearer t\x01\x01",
        ] {
            assert!(token_of(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn an_unsecured_token_names_its_subject_until_it_expires() {
        let exp = NOW_MS / 1000 + 60;
        let token = unsigned(&json!({"sub": "alice", "exp": exp, "iat": NOW_MS / 1000}));
        assert_eq!(
            validate(&settings(true), &token, NOW_MS),
            Ok(ValidToken {
                principal: "alice".to_string(),
                expires_at_ms: exp * 1000
            })
        );
        // Within the skew, then past it.
        assert!(validate(&settings(true), &token, exp * 1000 + 29_000).is_ok());
        assert!(validate(&settings(true), &token, exp * 1000 + 30_000).is_err());
        // Times at the ends of the range neither overflow nor pass wrongly.
        let far = unsigned(&json!({"sub": "alice", "exp": 1e300, "iat": -1e300, "nbf": -1e300}));
        assert!(validate(&settings(true), &far, NOW_MS).is_ok());
        let long_gone = unsigned(&json!({"sub": "alice", "exp": -1e300}));
        assert!(validate(&settings(true), &long_gone, NOW_MS).is_err());
        let no_exp = unsigned(&json!({"sub": "alice"}));
        assert!(validate(&settings(true), &no_exp, NOW_MS).is_err());
        let no_sub = unsigned(&json!({"exp": exp}));
        assert!(validate(&settings(true), &no_sub, NOW_MS).is_err());
        // An unsigned token is no good where tokens must be signed.
        assert!(validate(&settings(false), &token, NOW_MS).is_err());
    }

    #[test]
    fn a_signed_token_is_checked_against_the_jwks_audience_and_issuer() {
        let (jwks, key) = es256();
        let checked = settings(false);
        checked.jwks.set(jwks);
        let exp = NOW_MS / 1000 + 600;
        let good = json!({"sub": "svc", "exp": exp, "aud": "kafka", "iss": "https://issuer.test"});
        let token = signed(&key, "k1", &good);
        assert_eq!(validate(&checked, &token, NOW_MS).unwrap().principal, "svc");
        // A token signed by another key, with an unknown kid, for another
        // audience or from another issuer is refused.
        let (_, other) = es256();
        assert!(validate(&checked, &signed(&other, "k1", &good), NOW_MS).is_err());
        assert!(validate(&checked, &signed(&key, "k2", &good), NOW_MS).is_err());
        let mut wrong_aud = good.clone();
        wrong_aud["aud"] = json!("other");
        assert!(validate(&checked, &signed(&key, "k1", &wrong_aud), NOW_MS).is_err());
        let mut wrong_iss = good.clone();
        wrong_iss["iss"] = json!("https://elsewhere.test");
        assert!(validate(&checked, &signed(&key, "k1", &wrong_iss), NOW_MS).is_err());
        // The unsecured switch does not take signed tokens.
        assert!(validate(&settings(true), &token, NOW_MS).is_err());
        // A custom subject claim.
        let custom = OAuthBearerSettings {
            sub_claim: "client_id".to_string(),
            ..checked
        };
        let mut with_client = good;
        with_client["client_id"] = json!("app-7");
        let token = signed(&key, "k1", &with_client);
        assert_eq!(
            validate(&custom, &token, NOW_MS).unwrap().principal,
            "app-7"
        );
    }
}
