//! Debian's kcat (librdkafka 2.0): list, produce 10,000 keyed messages, consume
//! them, and read them all again after `kill -9` and a restart.

use std::io::Write;
use std::process::{Command, Output, Stdio};

use sluice_compat::*;

fn kcat(args: &[&str], input: Option<&str>) -> Output {
    let output = kcat_unchecked(args, input);
    assert!(
        output.status.success(),
        "kcat {args:?} failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    output
}

fn consume_all(bootstrap: &str) -> Vec<String> {
    let output = kcat(
        &[
            "-b",
            bootstrap,
            "-C",
            "-t",
            "kcat-topic",
            "-e",
            "-q",
            "-f",
            "%k:%s\n",
        ],
        None,
    );
    let mut lines: Vec<String> = String::from_utf8_lossy(&output.stdout)
        .lines()
        .map(str::to_string)
        .collect();
    lines.sort();
    lines
}

#[test]
fn kcat_lists_produces_consumes_and_survives_kill_9() {
    let dir = tempfile::tempdir().expect("temp dir");
    let mut broker = BrokerProcess::start(dir.path(), &[]);
    let bootstrap = broker.bootstrap();

    let listing = kcat(&["-b", &bootstrap, "-L"], None);
    let listing = String::from_utf8_lossy(&listing.stdout).into_owned();
    assert!(
        listing.contains(&format!("broker 1 at 127.0.0.1:{}", broker.port)),
        "{listing}"
    );

    let mut expected: Vec<String> = (0..10_000)
        .map(|i| format!("key-{}:value-{i}", i % 113))
        .collect();
    let input = expected.join("\n") + "\n";
    kcat(
        &["-b", &bootstrap, "-P", "-t", "kcat-topic", "-K", ":"],
        Some(&input),
    );
    expected.sort();
    assert_eq!(consume_all(&bootstrap), expected);

    broker.kill9();
    broker.restart();
    assert_eq!(consume_all(&bootstrap), expected);
}

/// kcat's output, whether it succeeded or not.
fn kcat_unchecked(args: &[&str], input: Option<&str>) -> Output {
    let mut child = Command::new("kcat")
        .args(args)
        // The test runner's library path leads to the librdkafka the rdkafka
        // crate built (no SSL, no SCRAM); kcat runs with Debian's own.
        .env_remove("LD_LIBRARY_PATH")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("kcat is installed (scripts/install-test-deps.sh installs it)");
    let mut stdin = child.stdin.take().expect("stdin");
    if let Some(input) = input {
        stdin.write_all(input.as_bytes()).expect("write to kcat");
    }
    drop(stdin);
    child.wait_with_output().expect("kcat output")
}

/// An in-process broker whose one listener is SASL_PLAINTEXT, alice made at
/// start, the SCRAM nonce of librdkafka before 2.6.1 taken or not.
fn sasl_broker(legacy_nonce: bool) -> EmbeddedBroker {
    use sluice::config::{SaslConfig, ScramUser, SecurityProtocol};
    use sluice::security::sasl::{Mechanism, SaslSettings};
    use sluice::security::scram::ScramMechanism;
    EmbeddedBroker::start_with(|config| {
        config.listeners[0].name = "SASL_PLAINTEXT".to_string();
        config.listeners[0].protocol = SecurityProtocol::SaslPlaintext;
        config.sasl = SaslConfig {
            settings: std::sync::Arc::new(SaslSettings {
                mechanisms: Mechanism::ALL.to_vec(),
                scram_legacy_nonce: legacy_nonce,
                max_reauth: None,
                oauthbearer: None,
            }),
            add_scram: ScramMechanism::ALL
                .into_iter()
                .map(|mechanism| ScramUser {
                    mechanism,
                    name: "alice".to_string(),
                    password: "alice-secret".to_string(),
                    iterations: 4096,
                })
                .collect(),
            jwks: None,
        };
    })
}

fn sasl_args<'a>(bootstrap: &'a str, mechanism: &'a str) -> Vec<&'a str> {
    vec![
        "-b",
        bootstrap,
        "-X",
        "security.protocol=SASL_PLAINTEXT",
        "-X",
        if mechanism == "PLAIN" {
            "sasl.mechanisms=PLAIN"
        } else {
            "sasl.mechanisms=SCRAM-SHA-256"
        },
        "-X",
        "sasl.username=alice",
        "-X",
        "sasl.password=alice-secret",
        "-m",
        "10",
    ]
}

/// Debian's kcat (librdkafka 2.0.2) logs in with PLAIN, produces and
/// consumes. Its SCRAM repeats the client nonce in the client-final
/// message (fixed in librdkafka 2.6.1): refused by default, as Kafka 4
/// refuses it, and taken with `--sasl-scram-legacy-nonce`.
#[test]
fn debian_kcat_logs_in_with_plain_and_with_scram_only_in_legacy_nonce_mode() {
    let broker = sasl_broker(false);
    let bootstrap = broker.bootstrap();
    let mut produce = sasl_args(&bootstrap, "PLAIN");
    produce.extend(["-P", "-t", "kcat-sasl", "-K", ":"]);
    kcat(&produce, Some("k1:v1\nk2:v2\n"));
    let mut consume = sasl_args(&bootstrap, "PLAIN");
    consume.extend(["-C", "-t", "kcat-sasl", "-e", "-q", "-f", "%k:%s\n"]);
    let output = kcat(&consume, None);
    assert_eq!(String::from_utf8_lossy(&output.stdout), "k1:v1\nk2:v2\n");

    let mut list = sasl_args(&bootstrap, "SCRAM-SHA-256");
    list.push("-L");
    let refused = kcat_unchecked(&list, None);
    assert!(!refused.status.success(), "strict nonce check");
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(stderr.contains("Authentication failed"), "{stderr}");
    drop(broker);

    let broker = sasl_broker(true);
    let bootstrap = broker.bootstrap();
    let mut list = sasl_args(&bootstrap, "SCRAM-SHA-256");
    list.push("-L");
    let output = kcat(&list, None);
    let listing = String::from_utf8_lossy(&output.stdout);
    assert!(listing.contains("1 brokers"), "{listing}");
}
