#!/usr/bin/env bash
# The whole test suite, as CI runs it: the import direction, formatting, lints,
# unit and engine tests, wire-level protocol tests, and real-client compatibility
# tests (librdkafka through rdkafka, Debian's kcat and sarama, and the
# pure-Python kafka-python and aiokafka against the debug binary), a short
# fault schedule with its self-test (scripts/faults.sh), then the Docker
# deployment test when a Docker engine is available. Installs what the
# tests need when missing.
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/install-test-deps.sh

echo "==> import direction"
scripts/check-imports.sh

echo "==> cargo fmt --check"
cargo fmt --all -- --check

echo "==> cargo clippy -D warnings"
cargo clippy --workspace --all-targets -- -D warnings

echo "==> tests"
if cargo nextest --version >/dev/null 2>&1; then
    cargo nextest run --workspace --no-fail-fast
    # nextest does not run doctests
    cargo test --workspace --doc
else
    cargo test --workspace --no-fail-fast
fi

echo "==> python clients (kafka-python, also pinned to old versions; aiokafka)"
# Up to date already after the tests above (a no-op then), never stale.
cargo build --quiet --bin sluice
target/python-venv/bin/python compat/python/test_clients.py target/debug/sluice

echo "==> fault schedule (three nodes in network namespaces, fixed seeds) and its self-test"
# SLUICE_FAULTS_LONG_SECONDS=<n> adds a long run with a random seed.
scripts/faults.sh --seconds 45 --seed 1
scripts/faults.sh --seconds 30 --seed 2 --nodes 5
scripts/faults.sh --seconds 30 --seed 1 --self-test
if [ -n "${SLUICE_FAULTS_LONG_SECONDS:-}" ]; then
    scripts/faults.sh --seconds "$SLUICE_FAULTS_LONG_SECONDS"
fi

echo "==> docker deployment test"
scripts/test-docker.sh
echo "==> all tests passed"
