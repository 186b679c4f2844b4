//! SASL on the wire, as Kafka's SaslServerAuthenticator runs it: only
//! ApiVersions and SaslHandshake before authentication, SaslHandshake v0 with
//! raw tokens and v1 with SaslAuthenticate, Kafka's errors and messages, the
//! users' admin APIs, and KIP-368 sessions.

use std::sync::Arc;
use std::time::Duration;

use aws_lc_rs::{digest, hmac};
use base64::engine::general_purpose::STANDARD as BASE64;
use base64::Engine as _;
use bytes::Bytes;
use kafka_protocol::messages::alter_user_scram_credentials_request::{
    ScramCredentialDeletion, ScramCredentialUpsertion,
};
use kafka_protocol::messages::describe_user_scram_credentials_request::UserName;
use kafka_protocol::messages::*;
use sluice::config::{SaslConfig, ScramUser, SecurityProtocol};
use sluice::security::sasl::{Mechanism, SaslSettings};
use sluice::security::scram::ScramMechanism;

use crate::harness::{call, encode, request_frame, text, TestBroker, Wire};

const SASL_HANDSHAKE: i16 = 17;
const SASL_AUTHENTICATE: i16 = 36;
const METADATA: i16 = 3;
const DESCRIBE_USER_SCRAM_CREDENTIALS: i16 = 50;
const ALTER_USER_SCRAM_CREDENTIALS: i16 = 51;

/// A broker whose one listener is SASL_PLAINTEXT, with alice (both SCRAM
/// mechanisms) and bob (SCRAM-SHA-256) created at start.
fn sasl_broker(max_reauth: Option<Duration>) -> TestBroker {
    TestBroker::start_with(|config| {
        config.listeners[0].name = "SASL_PLAINTEXT".to_string();
        config.listeners[0].protocol = SecurityProtocol::SaslPlaintext;
        let user = |mechanism, name: &str, password: &str| ScramUser {
            mechanism,
            name: name.to_string(),
            password: password.to_string(),
            iterations: 4096,
        };
        config.sasl = SaslConfig {
            settings: Arc::new(SaslSettings {
                mechanisms: Mechanism::ALL.to_vec(),
                scram_legacy_nonce: false,
                max_reauth,
                oauthbearer: None,
            }),
            add_scram: vec![
                user(ScramMechanism::Sha256, "alice", "alice-secret"),
                user(ScramMechanism::Sha512, "alice", "alice-secret"),
                user(ScramMechanism::Sha256, "bob", "bob-secret"),
            ],
            jwks: None,
        };
    })
}

fn handshake(wire: &mut Wire, version: i16, mechanism: &str) -> SaslHandshakeResponse {
    let request = SaslHandshakeRequest::default().with_mechanism(text(mechanism));
    call(wire, SASL_HANDSHAKE, version, false, &request)
}

fn authenticate(wire: &mut Wire, version: i16, token: &[u8]) -> SaslAuthenticateResponse {
    let request = SaslAuthenticateRequest::default().with_auth_bytes(Bytes::copy_from_slice(token));
    call(wire, SASL_AUTHENTICATE, version, version >= 2, &request)
}

fn metadata_works(wire: &mut Wire) {
    let response: MetadataResponse = call(wire, METADATA, 1, false, &MetadataRequest::default());
    assert_eq!(response.brokers.len(), 1);
}

fn plain_login(wire: &mut Wire, user: &str, password: &str) -> SaslAuthenticateResponse {
    let handshake = handshake(wire, 1, "PLAIN");
    assert_eq!(handshake.error_code, 0);
    authenticate(wire, 1, format!("\0{user}\0{password}").as_bytes())
}

/// A SCRAM client, as a Kafka client runs one.
struct ScramClient {
    mechanism: ScramMechanism,
    first_bare: String,
    salted: Vec<u8>,
    auth_message: String,
}

impl ScramClient {
    fn first(mechanism: ScramMechanism, user: &str) -> (ScramClient, Vec<u8>) {
        let first_bare = format!("n={user},r=c1i2e3n4t5n6o7n8c9e0");
        let client = ScramClient {
            mechanism,
            first_bare: first_bare.clone(),
            salted: Vec::new(),
            auth_message: String::new(),
        };
        (client, format!("n,,{first_bare}").into_bytes())
    }

    fn hmac(&self, key: &[u8], message: &[u8]) -> Vec<u8> {
        let algorithm = match self.mechanism {
            ScramMechanism::Sha256 => hmac::HMAC_SHA256,
            ScramMechanism::Sha512 => hmac::HMAC_SHA512,
        };
        hmac::sign(&hmac::Key::new(algorithm, key), message)
            .as_ref()
            .to_vec()
    }

    fn last(&mut self, server_first: &[u8], password: &str) -> Vec<u8> {
        let server_first = std::str::from_utf8(server_first).expect("text");
        let fields: Vec<&str> = server_first.split(',').collect();
        let nonce = fields[0].strip_prefix("r=").expect("r");
        assert!(nonce.starts_with("c1i2e3n4t5n6o7n8c9e0"), "{server_first}");
        let salt = BASE64
            .decode(fields[1].strip_prefix("s=").expect("s"))
            .expect("salt");
        let iterations: u32 = fields[2].strip_prefix("i=").expect("i").parse().expect("i");
        assert!(iterations >= 4096);
        self.salted = self
            .mechanism
            .salted_password(password.as_bytes(), &salt, iterations);
        let client_key = self.hmac(&self.salted, b"Client Key");
        let digest_algorithm = match self.mechanism {
            ScramMechanism::Sha256 => &digest::SHA256,
            ScramMechanism::Sha512 => &digest::SHA512,
        };
        let stored_key = digest::digest(digest_algorithm, &client_key);
        let without_proof = format!("c=biws,r={nonce}");
        self.auth_message = format!("{},{server_first},{without_proof}", self.first_bare);
        let signature = self.hmac(stored_key.as_ref(), self.auth_message.as_bytes());
        let proof: Vec<u8> = client_key
            .iter()
            .zip(&signature)
            .map(|(k, s)| k ^ s)
            .collect();
        format!("{without_proof},p={}", BASE64.encode(proof)).into_bytes()
    }

    /// Checks the server's signature: the server knew the credential.
    fn verify(&self, server_final: &[u8]) {
        let server_key = self.hmac(&self.salted, b"Server Key");
        let expected = self.hmac(&server_key, self.auth_message.as_bytes());
        assert_eq!(
            std::str::from_utf8(server_final).expect("text"),
            format!("v={}", BASE64.encode(expected))
        );
    }
}

fn scram_login(
    wire: &mut Wire,
    version: i16,
    mechanism: ScramMechanism,
    user: &str,
    password: &str,
) -> SaslAuthenticateResponse {
    let handshake = handshake(wire, 1, mechanism.name());
    assert_eq!(handshake.error_code, 0);
    let (mut client, first) = ScramClient::first(mechanism, user);
    let challenge = authenticate(wire, version, &first);
    assert_eq!(challenge.error_code, 0, "{:?}", challenge.error_message);
    let last = client.last(&challenge.auth_bytes, password);
    let done = authenticate(wire, version, &last);
    if done.error_code == 0 {
        client.verify(&done.auth_bytes);
    }
    done
}

/// AlterUserScramCredentials: each user's (name, error code).
fn alter(wire: &mut Wire, request: &AlterUserScramCredentialsRequest) -> Vec<(String, i16)> {
    let response: AlterUserScramCredentialsResponse =
        call(wire, ALTER_USER_SCRAM_CREDENTIALS, 0, true, request);
    response
        .results
        .iter()
        .map(|r| (r.user.to_string(), r.error_code))
        .collect()
}

#[test]
fn only_api_versions_and_the_handshake_are_served_before_authentication() {
    let broker = sasl_broker(None);
    // Metadata first: the connection is closed without an answer.
    let mut wire = broker.wire();
    wire.send_frame(&request_frame(METADATA, 1, 1, false, &[0, 0, 0, 0]));
    assert!(wire.is_closed_by_broker());
    // ApiVersions is answered (and lists the SASL APIs); Metadata still closes.
    let mut wire = broker.wire();
    let versions: ApiVersionsResponse =
        call(&mut wire, 18, 0, false, &ApiVersionsRequest::default());
    for key in [SASL_HANDSHAKE, SASL_AUTHENTICATE] {
        assert!(
            versions.api_keys.iter().any(|api| api.api_key == key),
            "{key}"
        );
    }
    wire.send_frame(&request_frame(METADATA, 1, 2, false, &[0, 0, 0, 0]));
    assert!(wire.is_closed_by_broker());
    // SaslAuthenticate before a handshake closes too.
    let mut wire = broker.wire();
    wire.send_frame(&request_frame(
        SASL_AUTHENTICATE,
        1,
        3,
        false,
        &[0, 0, 0, 0],
    ));
    assert!(wire.is_closed_by_broker());
}

#[test]
fn the_handshake_lists_the_mechanisms_in_kafkas_bytes_and_an_unknown_one_closes() {
    let broker = sasl_broker(None);
    let mut wire = broker.wire();
    let body = encode(
        &SaslHandshakeRequest::default().with_mechanism(text("GSSAPI")),
        1,
    );
    let frame = wire.request(SASL_HANDSHAKE, 1, 9, false, &body);
    let mut expected = vec![0, 0, 0, 9, 0, 33, 0, 0, 0, 3];
    for name in ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"] {
        expected.extend_from_slice(&(name.len() as i16).to_be_bytes());
        expected.extend_from_slice(name.as_bytes());
    }
    assert_eq!(frame, expected, "UNSUPPORTED_SASL_MECHANISM and the list");
    assert!(wire.is_closed_by_broker());

    let mut wire = broker.wire();
    let frame = wire.request(
        SASL_HANDSHAKE,
        1,
        10,
        false,
        &encode(
            &SaslHandshakeRequest::default().with_mechanism(text("PLAIN")),
            1,
        ),
    );
    expected[3] = 10;
    expected[5] = 0;
    assert_eq!(frame, expected, "NONE and the list");
}

#[test]
fn plain_and_scram_log_in_with_saslauthenticate_v0_to_v2() {
    let broker = sasl_broker(None);
    for version in 0..=2 {
        let mut wire = broker.wire();
        let response = plain_login(&mut wire, "alice", "alice-secret");
        assert_eq!(response.error_code, 0, "v{version}");
        assert!(response.auth_bytes.is_empty());
        metadata_works(&mut wire);
        for mechanism in ScramMechanism::ALL {
            let mut wire = broker.wire();
            let done = scram_login(&mut wire, version, mechanism, "alice", "alice-secret");
            assert_eq!(done.error_code, 0, "v{version} {mechanism:?}");
            assert_eq!(done.session_lifetime_ms, 0, "sessions do not expire");
            metadata_works(&mut wire);
        }
    }
    // PLAIN checks bob's SCRAM-SHA-256 credential, his only one.
    let mut wire = broker.wire();
    assert_eq!(plain_login(&mut wire, "bob", "bob-secret").error_code, 0);
}

#[test]
fn a_failed_login_gets_kafkas_message_whether_or_not_the_user_exists_then_a_close() {
    let broker = sasl_broker(None);
    let mut messages = Vec::new();
    for (user, password) in [("alice", "wrong"), ("nobody", "wrong")] {
        let mut wire = broker.wire();
        let response = scram_login(&mut wire, 1, ScramMechanism::Sha512, user, password);
        assert_eq!(response.error_code, 58, "SASL_AUTHENTICATION_FAILED");
        messages.push(response.error_message.expect("message").to_string());
        assert!(wire.is_closed_by_broker());

        let mut wire = broker.wire();
        let response = plain_login(&mut wire, user, password);
        assert_eq!(response.error_code, 58);
        messages.push(response.error_message.expect("message").to_string());
        assert!(wire.is_closed_by_broker());
    }
    assert_eq!(
        messages[0],
        "Authentication failed during authentication due to invalid credentials with SASL mechanism SCRAM-SHA-512"
    );
    assert_eq!(
        messages[0], messages[2],
        "an unknown user reads as a wrong password"
    );
    assert_eq!(messages[1], messages[3]);
}

/// Reads one raw SASL token frame (its length may be 0).
fn raw_token(wire: &mut Wire) -> Vec<u8> {
    wire.recv_frame_of_any_length()
}

#[test]
fn handshake_v0_takes_raw_tokens() {
    let broker = sasl_broker(None);
    // PLAIN: one token, answered with an empty frame.
    let mut wire = broker.wire();
    assert_eq!(handshake(&mut wire, 0, "PLAIN").error_code, 0);
    wire.send_frame(b"\0alice\0alice-secret");
    assert_eq!(raw_token(&mut wire), Vec::<u8>::new());
    metadata_works(&mut wire);
    // SCRAM: client-first, server-first, client-final, server-final.
    let mut wire = broker.wire();
    assert_eq!(handshake(&mut wire, 0, "SCRAM-SHA-256").error_code, 0);
    let (mut client, first) = ScramClient::first(ScramMechanism::Sha256, "bob");
    wire.send_frame(&first);
    let server_first = raw_token(&mut wire);
    wire.send_frame(&client.last(&server_first, "bob-secret"));
    client.verify(&raw_token(&mut wire));
    metadata_works(&mut wire);
    // A wrong password over raw tokens: closed without an answer.
    let mut wire = broker.wire();
    assert_eq!(handshake(&mut wire, 0, "PLAIN").error_code, 0);
    wire.send_frame(b"\0alice\0wrong");
    assert!(wire.is_closed_by_broker());
}

#[test]
fn users_are_created_described_changed_and_deleted_through_the_admin_apis() {
    let broker = sasl_broker(None);
    let mut admin = broker.wire();
    assert_eq!(
        plain_login(&mut admin, "alice", "alice-secret").error_code,
        0
    );

    let describe = |wire: &mut Wire, names: Option<Vec<&str>>| {
        let request =
            DescribeUserScramCredentialsRequest::default().with_users(names.map(|names| {
                names
                    .into_iter()
                    .map(|name| UserName::default().with_name(text(name)))
                    .collect()
            }));
        let response: DescribeUserScramCredentialsResponse =
            call(wire, DESCRIBE_USER_SCRAM_CREDENTIALS, 0, true, &request);
        response
    };
    let all = describe(&mut admin, None);
    let users: Vec<(String, Vec<(i8, i32)>)> = all
        .results
        .iter()
        .map(|r| {
            (
                r.user.to_string(),
                r.credential_infos
                    .iter()
                    .map(|c| (c.mechanism, c.iterations))
                    .collect(),
            )
        })
        .collect();
    assert_eq!(
        users,
        vec![
            ("alice".to_string(), vec![(1, 4096), (2, 4096)]),
            ("bob".to_string(), vec![(1, 4096)]),
        ]
    );

    // carol, made by a client that salts and hashes her password itself.
    let salt = b"carol-salt-0123456789".to_vec();
    let salted = ScramMechanism::Sha512.salted_password(b"carol-secret", &salt, 8192);
    let upsert = |name: &str, mechanism: i8, iterations: i32| {
        ScramCredentialUpsertion::default()
            .with_name(text(name))
            .with_mechanism(mechanism)
            .with_iterations(iterations)
            .with_salt(Bytes::from(salt.clone()))
            .with_salted_password(Bytes::from(salted.clone()))
    };
    let request = AlterUserScramCredentialsRequest::default()
        .with_upsertions(vec![
            upsert("carol", 2, 8192),
            upsert("weak", 2, 4095),
            upsert("strong", 2, 16385),
            upsert("odd", 3, 4096),
            upsert("", 2, 4096),
            upsert("twice", 1, 4096),
            upsert("twice", 1, 4096),
        ])
        .with_deletions(vec![ScramCredentialDeletion::default()
            .with_name(text("ghost"))
            .with_mechanism(1)]);
    assert_eq!(
        alter(&mut admin, &request),
        vec![
            ("ghost".to_string(), 91),
            ("carol".to_string(), 0),
            ("weak".to_string(), 93),
            ("strong".to_string(), 93),
            ("odd".to_string(), 33),
            ("".to_string(), 93),
            ("twice".to_string(), 92),
        ]
    );
    let mut wire = broker.wire();
    let done = scram_login(
        &mut wire,
        2,
        ScramMechanism::Sha512,
        "carol",
        "carol-secret",
    );
    assert_eq!(done.error_code, 0);

    let described = describe(&mut admin, Some(vec!["carol", "ghost", "bob", "bob"]));
    let codes: Vec<(String, i16)> = described
        .results
        .iter()
        .map(|r| (r.user.to_string(), r.error_code))
        .collect();
    assert_eq!(
        codes,
        vec![
            ("carol".to_string(), 0),
            ("ghost".to_string(), 91),
            ("bob".to_string(), 92),
        ]
    );
    assert_eq!(described.results[0].credential_infos[0].iterations, 8192);

    // Deleted, carol can no longer log in.
    let request = AlterUserScramCredentialsRequest::default().with_deletions(vec![
        ScramCredentialDeletion::default()
            .with_name(text("carol"))
            .with_mechanism(2),
    ]);
    assert_eq!(alter(&mut admin, &request), vec![("carol".to_string(), 0)]);
    let mut wire = broker.wire();
    let done = scram_login(
        &mut wire,
        2,
        ScramMechanism::Sha512,
        "carol",
        "carol-secret",
    );
    assert_eq!(done.error_code, 58);
}

#[test]
fn users_survive_a_restart_and_a_changed_password_is_not_undone() {
    let mut broker = sasl_broker(None);
    let mut admin = broker.wire();
    assert_eq!(plain_login(&mut admin, "bob", "bob-secret").error_code, 0);
    let salt = b"bob-new-salt".to_vec();
    let salted = ScramMechanism::Sha256.salted_password(b"bob-new", &salt, 4096);
    let request = AlterUserScramCredentialsRequest::default().with_upsertions(vec![
        ScramCredentialUpsertion::default()
            .with_name(text("bob"))
            .with_mechanism(1)
            .with_iterations(4096)
            .with_salt(Bytes::from(salt))
            .with_salted_password(Bytes::from(salted)),
    ]);
    assert_eq!(alter(&mut admin, &request), vec![("bob".to_string(), 0)]);
    drop(admin);
    broker.stop();
    broker.start_again();
    // --add-scram still names bob with his first password: the changed one stands.
    let mut wire = broker.wire();
    assert_eq!(plain_login(&mut wire, "bob", "bob-new").error_code, 0);
    let mut wire = broker.wire();
    assert_eq!(plain_login(&mut wire, "bob", "bob-secret").error_code, 58);
    let mut wire = broker.wire();
    let done = scram_login(
        &mut wire,
        1,
        ScramMechanism::Sha512,
        "alice",
        "alice-secret",
    );
    assert_eq!(done.error_code, 0);
}

#[test]
fn a_session_ends_at_connections_max_reauth_ms_unless_renewed_by_the_same_principal() {
    let lifetime = Duration::from_millis(1_000);
    let broker = sasl_broker(Some(lifetime));
    let mut wire = broker.wire();
    let done = scram_login(
        &mut wire,
        1,
        ScramMechanism::Sha256,
        "alice",
        "alice-secret",
    );
    assert_eq!(done.error_code, 0);
    assert_eq!(
        done.session_lifetime_ms, 1_000,
        "KIP-368: the lifetime is told"
    );
    metadata_works(&mut wire);
    // Past the lifetime, a re-authentication on the same connection renews it.
    std::thread::sleep(lifetime + Duration::from_millis(200));
    let done = scram_login(
        &mut wire,
        1,
        ScramMechanism::Sha256,
        "alice",
        "alice-secret",
    );
    assert_eq!(done.error_code, 0);
    metadata_works(&mut wire);
    // Another principal may not take the connection over.
    let done = scram_login(&mut wire, 1, ScramMechanism::Sha256, "bob", "bob-secret");
    assert_eq!(done.error_code, 58);
    assert!(done
        .error_message
        .expect("message")
        .contains("Cannot change principals during re-authentication"));
    assert!(wire.is_closed_by_broker());
    // A session left to expire is closed at its next request.
    let mut wire = broker.wire();
    assert_eq!(
        plain_login(&mut wire, "alice", "alice-secret").error_code,
        0
    );
    std::thread::sleep(lifetime + Duration::from_millis(200));
    wire.send_frame(&request_frame(METADATA, 1, 5, false, &[0, 0, 0, 0]));
    assert!(wire.is_closed_by_broker());
}

#[test]
fn sasl_requests_on_a_plaintext_listener_are_illegal_sasl_state() {
    let broker = TestBroker::start();
    let mut wire = broker.wire();
    let response = handshake(&mut wire, 1, "PLAIN");
    assert_eq!(response.error_code, 34, "ILLEGAL_SASL_STATE");
    let response = authenticate(&mut wire, 1, b"\0a\0b");
    assert_eq!(response.error_code, 34);
    metadata_works(&mut wire);
}
