//! sarama (Debian's 1.22, Go) against the real binary, at three of its protocol
//! versions: the program of compat/sarama/ is built offline from Debian's
//! packaged Go sources and runs one scenario per invocation, exiting non-zero
//! with what differed. At V0_10_2_0 sarama produces with Produce v2 and fetches
//! with Fetch v3 (message format v1), which the broker does not serve: there the
//! test checks that such a client fails at once, and covers what it can do
//! without them (admin, offsets, commits). Nothing is randomized.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use sluice_compat::*;

/// Where Debian installs packaged Go sources (golang-github-shopify-sarama-dev
/// and its dependencies).
const DEBIAN_GOPATH: &str = "/usr/share/gocode";

/// The cargo target dir: the test binary runs from `<target>/<profile>/deps`.
fn target_dir() -> PathBuf {
    let exe = std::env::current_exe().expect("current exe");
    let mut dir = exe.parent().expect("deps dir").to_path_buf();
    if dir.ends_with("deps") {
        dir.pop();
    }
    dir.pop();
    dir
}

/// Builds compat/sarama/ in GOPATH mode, with no module proxy and nothing
/// fetched, into a binary of its own for `version` (tests build concurrently;
/// the build cache is shared).
fn build(version: &str) -> PathBuf {
    let work = target_dir().join("sarama");
    let binary = work.join("bin").join(version).join("sarama-compat");
    let source = Path::new(env!("CARGO_MANIFEST_DIR")).join("sarama");
    let gopath = format!("{}:{DEBIAN_GOPATH}", work.join("gopath").display());
    let output = Command::new("go")
        .args(["build", "-o"])
        .arg(&binary)
        .arg(".")
        .current_dir(&source)
        .env("GO111MODULE", "off")
        .env("GOPATH", gopath)
        .env("GOCACHE", work.join("gocache"))
        .env("GOPROXY", "off")
        .env("GOFLAGS", "")
        .env("GOTOOLCHAIN", "local")
        // The packaged zstd binding calls a function libzstd deprecates.
        .env("CGO_CFLAGS", "-O2 -g -Wno-deprecated-declarations")
        .output()
        .expect("go is installed (scripts/install-test-deps.sh installs golang-go)");
    assert!(
        output.status.success(),
        "building compat/sarama failed (scripts/install-test-deps.sh installs \
         golang-github-shopify-sarama-dev):\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    binary
}

/// Runs every scenario against one broker and fails with each failed one's
/// output. The program bounds each scenario's time itself.
fn run(version: &str, scenarios: &[&str]) {
    let binary = build(version);
    let dir = tempfile::tempdir().expect("temp dir");
    // dev: a new group forms as soon as its member joins.
    let broker = BrokerProcess::start(dir.path(), &["--profile", "dev"]);
    let bootstrap = broker.bootstrap();
    let mut failures = Vec::new();
    for scenario in scenarios {
        let started = Instant::now();
        let output = Command::new(&binary)
            .args([bootstrap.as_str(), version, scenario])
            .output()
            .expect("run sarama-compat");
        let stdout = String::from_utf8_lossy(&output.stdout);
        print!("{stdout}");
        if !output.status.success() {
            failures.push(format!(
                "sarama {version} {scenario} ({}, after {:.1}s):\n{stdout}{}",
                output.status,
                started.elapsed().as_secs_f64(),
                String::from_utf8_lossy(&output.stderr)
            ));
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {} sarama scenarios failed:\n{}",
        failures.len(),
        scenarios.len(),
        failures.join("\n")
    );
}

#[test]
fn sarama_v0_10_2_0_admin_offsets_commits_and_refused_produce() {
    run(
        "V0_10_2_0",
        &["admin", "offsets", "commits", "produce-refused"],
    );
}

#[test]
fn sarama_v1_0_0_0_admin_offsets_groups_produce_consume() {
    run(
        "V1_0_0_0",
        &["admin", "offsets", "commits", "group", "produce-consume"],
    );
}

#[test]
fn sarama_v2_1_0_0_admin_offsets_groups_produce_consume() {
    run(
        "V2_1_0_0",
        &["admin", "offsets", "commits", "group", "produce-consume"],
    );
}
