//! Debian's kcat (librdkafka 2.0): list, produce 10,000 keyed messages, consume
//! them, and read them all again after `kill -9` and a restart.

use std::io::Write;
use std::process::{Command, Output, Stdio};

use sluice_compat::*;

fn kcat(args: &[&str], input: Option<&str>) -> Output {
    let mut child = Command::new("kcat")
        .args(args)
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
    let output = child.wait_with_output().expect("kcat output");
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
