#!/usr/bin/env bash
# Fuzzes request decoding (protocol-tests/fuzz) with libFuzzer through cargo-fuzz.
# Usage: scripts/fuzz.sh [SECONDS]   (default 300). Installs cargo-fuzz if missing.
# cargo-fuzz needs nightly compiler flags; RUSTC_BOOTSTRAP lets the stable
# toolchain accept them.
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-300}
command -v cargo-fuzz >/dev/null 2>&1 || cargo install --locked cargo-fuzz
corpus=protocol-tests/fuzz/corpus/decode_request
mkdir -p "$corpus"
export RUSTC_BOOTSTRAP=1
cargo fuzz run --fuzz-dir protocol-tests/fuzz decode_request "$corpus" protocol-tests/fuzz/seeds/decode_request -- \
    -max_total_time="$seconds" -rss_limit_mb=2048 -max_len=65536
