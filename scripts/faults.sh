#!/usr/bin/env bash
# A Jepsen-style fault run: three to five sluice nodes, each in its own network
# namespace, written and read by librdkafka clients (and written by a
# pure-Python aiokafka producer) while a seeded nemesis kills, pauses and cuts
# them off; then healed, read back whole and checked.
#
#   scripts/faults.sh [--seconds N] [--seed S] [--self-test] [--nodes 3..5]
#
# Exit status 0 only when the run found no anomaly (with --self-test, only when
# it found the loss of a deliberately unsafe setting); its last line says what
# it found, and target/faults/ holds each run's report. Needs root; installs
# iproute2 and iptables, and the Python virtualenv of the aiokafka producer,
# when missing. Builds the debug binaries, as the other tests do.
set -euo pipefail
cd "$(dirname "$0")/.."

# The aiokafka producer runs in target/python-venv, which the same script makes.
command -v ip >/dev/null 2>&1 && command -v iptables >/dev/null 2>&1 \
    && [ -x target/python-venv/bin/python ] || scripts/install-test-deps.sh
cargo build --quiet -p sluice --bin sluice
cargo build --quiet -p sluice-compat --bin sluice-faults
exec target/debug/sluice-faults "$@"
